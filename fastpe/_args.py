"""The argument layer: every check and parser that fastpe's public functions go through.

The in-memory functions (:mod:`fastpe.rotary`, :mod:`fastpe.sinusoidal`), the reference
(:mod:`fastpe.reference`), :mod:`fastpe.dask`, :mod:`fastpe.layout`, :func:`fastpe.warmup`
and the file functions all check their arguments here, so one input gets one answer
everywhere. The rules:

- ``TypeError`` for a value of the wrong type (``rotary_dim=4.0``, ``base="x"``, an
  int32 array, a masked array), ``ValueError`` for a value of the right type that is not
  allowed (``rotary_dim=5``, ``base=0.0``, a position beyond 2**53, overlapping elements);
- every message names the argument, the value and the fix;
- nothing is written before every check has passed: the parsers return a description of
  the call and write nothing, except the copy of ``x`` into ``out`` (``copy_in``), made
  last, after every check of ``out`` itself.

Arrays: any :class:`numpy.ndarray` subclass (``np.matrix``, ``np.memmap``, record-array
views) is worked on as its base-class view ``a.view(np.ndarray)``, which shares its
memory, so in-place work lands in the caller's object; a masked array is refused, since
fastpe would ignore its mask. The functions return ``out`` itself when it is given (the
caller's object, of its own class), else a new base-class array.

Three parsers of one shape, each returning a dataclass: :func:`parse_table`,
:func:`parse_add`, :func:`parse_rope`.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ._freq import inv_freq_dd, scaled_dd

LAYOUTS = ("interleaved", "half")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# 16-bit arrays (float16, and ml_dtypes' bfloat16 when installed) are computed in float32
# and rounded once; see fastpe._kernels.half
HALF_DTYPE = np.dtype(np.float16)
MAX_POSITION = 2**53  # positions are converted to float64 exactly up to this magnitude


# --------------------------------------------------------------------------- scalars


def _integer(value):
    """``value`` as a Python int if it is an integer (0-d integer arrays included), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return operator.index(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def check_int(value, name: str, *, minimum: int | None = None) -> int:
    """An integer (Python, NumPy or 0-d integer array; not bool, not float) >= ``minimum``."""
    if type(value) is int and (minimum is None or value >= minimum):  # fast path
        return value
    out = _integer(value)
    if out is None:
        hint = ""
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            hint = f"; use {name}={int(value)}"
        elif isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
            hint = f"; use {name}=int({value!r}) if that is what you mean"
        raise TypeError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}{hint}"
        )
    if minimum is not None and out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    return out


def check_optional_int(value, name: str, *, minimum: int | None = None) -> int | None:
    return None if value is None else check_int(value, name, minimum=minimum)


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}; pass {name}=bool(...)")
    return bool(value)


def check_dim(dim, name: str = "dim") -> int:
    dim = check_int(dim, name)
    if dim <= 0 or dim % 2:
        raise ValueError(f"{name} must be a positive even integer (pairs of channels), got {dim}")
    return dim


def check_rotary_dim(rotary_dim, length: int, what: str = "x.shape[-1]") -> int:
    """``rotary_dim`` (None: ``length``): even, > 0 and <= ``length`` (the length of ``what``)."""
    if rotary_dim is None:
        rot = length
        if rot % 2:
            raise ValueError(
                f"{what} has odd length {length}: channels are rotated in pairs; "
                f"pass an even rotary_dim <= {length} to rotate the leading channels only"
            )
    else:
        rot = check_int(rotary_dim, "rotary_dim")
    if rot <= 0 or rot % 2 or rot > length:
        bound = f"{length}" if what == "x.shape[-1]" else (
            f"{what} ({length})")
        raise ValueError(
            f"rotary_dim must be even, > 0 and <= {bound}, got {rot}; "
            "pass an even number of leading channels to rotate"
        )
    return rot


def check_base(base) -> float:
    if type(base) is float and 0.0 < base < float("inf"):  # fast path
        return base
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise TypeError(
            f"base must be a real number, got {base!r} of type {type(base).__name__}; "
            "pass e.g. base=10000.0"
        )
    out = float(base)
    if not np.isfinite(out) or out <= 0.0:
        raise ValueError(f"base must be finite and > 0, got {base!r}; pass e.g. base=10000.0")
    return out


def check_choice(value, name: str, choices: tuple[str, ...]) -> int:
    """The index of ``value`` in ``choices`` (strings)."""
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a string, one of {', '.join(map(repr, choices))}; got {value!r}"
        )
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return choices.index(value)


def check_layout(layout) -> int:
    """Return 0 for ``"interleaved"``, 1 for ``"half"``."""
    if layout == "interleaved" and type(layout) is str:  # fast path
        return 0
    return check_choice(layout, "layout", LAYOUTS)


def bfloat16_dtype() -> np.dtype | None:
    """``ml_dtypes.bfloat16`` as a dtype, or None when ml_dtypes is not installed.

    Imported here, on the first call that names bfloat16, never by ``import fastpe``.
    """
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dt: np.dtype) -> bool:
    """Whether ``dt`` is ml_dtypes' bfloat16 (false, without importing it, when no array or
    dtype of it can exist yet)."""
    if dt.kind != "V" or dt.itemsize != 2 or dt.names is not None:
        return False
    import sys

    ml = sys.modules.get("ml_dtypes")
    return ml is not None and dt == np.dtype(ml.bfloat16)


def is_float_dtype(dt: np.dtype) -> bool:
    """float32, float64, float16 or (with ml_dtypes) bfloat16: the dtypes fastpe works on."""
    return dt in FLOAT_DTYPES or dt == HALF_DTYPE or is_bfloat16(dt)


def _dtype_hint(name: str) -> str:
    return (f"{name} must be float32 or float64 (or float16, or bfloat16 with ml_dtypes "
            "installed)")


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    if isinstance(dtype, str) and dtype == "bfloat16":
        dt = bfloat16_dtype()
        if dt is None:
            raise TypeError(
                f"{name}=bfloat16 needs the ml_dtypes package, which is not installed; "
                "pip install 'fastpe[bf16]' (or ml_dtypes), or use np.float16 or np.float32"
            )
        return dt
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(
            f"{_dtype_hint(name)}, got {dtype!r}; use np.float32 or np.float64"
        ) from exc
    if not is_float_dtype(dt) or not dt.isnative:
        raise TypeError(
            f"{_dtype_hint(name)}, got {dt}; use np.float32 or np.float64"
        )
    return dt


# --------------------------------------------------------------------------- arrays


def _is_masked(a) -> bool:
    return isinstance(a, np.ma.MaskedArray)


def _refuse_masked(a, name: str) -> None:
    if _is_masked(a):
        raise TypeError(
            f"{name} is a masked array: fastpe would ignore its mask; pass "
            f"{name}.filled(fill_value) (or np.ma.getdata({name}) to work on the data "
            "under the mask too)"
        )


def base_view(a: np.ndarray) -> np.ndarray:
    """``a`` as a base-class ndarray sharing its memory (``a`` itself when it is one)."""
    return a if type(a) is np.ndarray else a.view(np.ndarray)


def check_float_array(x, name: str = "x") -> np.ndarray:
    """A float32/float64/float16/bfloat16 native-order ndarray, as its base-class view."""
    if type(x) is not np.ndarray:
        _refuse_masked(x, name)
        if not isinstance(x, np.ndarray):
            raise TypeError(
                f"{name} must be a numpy.ndarray, got {type(x).__name__}; "
                f"use np.asarray({name}) (for a torch CPU tensor, tensor.numpy() shares its "
                "memory)"
            )
        x = x.view(np.ndarray)
    if x.dtype not in FLOAT_DTYPES and not is_float_dtype(x.dtype):
        raise TypeError(
            f"{_dtype_hint(name)}, got {x.dtype}; use {name}.astype(np.float32)"
        )
    if not x.dtype.isnative:
        raise TypeError(
            f"{name} must be in native byte order, got {x.dtype.str}; "
            f"use {name}.astype({name}.dtype.newbyteorder('='))"
        )
    return x


def check_writeable(a: np.ndarray, name: str) -> None:
    if not a.flags.writeable:
        raise ValueError(
            f"{name} is read-only; pass a writeable array (e.g. {name}.copy()) or out=None"
        )


def may_self_overlap(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """True unless the elements of the view are certainly distinct (a conservative test).

    Sorted by stride, each axis's stride must exceed the extent of all smaller axes: true
    of every slice, step and transpose of a contiguous array, false of broadcast views
    (zero strides) and of ``as_strided`` views whose rows overlap.
    """
    if 0 in shape:
        return False
    extent = itemsize
    for st, n in sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1):
        if st < extent:
            return True
        extent += (n - 1) * st
    return False


def check_writable_view(a: np.ndarray, name: str) -> None:
    """An array fastpe writes into: writeable, whole-element strides, no overlapping elements."""
    check_writeable(a, name)
    if a.size == 0:
        return
    if any(st % a.itemsize for st in a.strides):
        raise ValueError(
            f"{name} has strides {a.strides} that are not multiples of its item size "
            f"{a.itemsize}; pass an array whose strides are whole elements, e.g. "
            f"np.ascontiguousarray({name})"
        )
    check_no_self_overlap(a, name)


def check_no_self_overlap(a: np.ndarray, name: str) -> None:
    """Refuse a view whose elements may share memory (broadcast and ``as_strided`` views)."""
    if may_self_overlap(a.shape, a.strides, a.itemsize):
        raise ValueError(
            f"{name} is a view whose elements may overlap (shape {a.shape}, strides "
            f"{a.strides}, e.g. a broadcast or as_strided view): it cannot be written in "
            f"place; pass {name}.copy()"
        )


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` and ``b`` are the same elements of the same memory."""
    if a is b:
        return True
    return (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def check_out(out, shape: tuple, dtype: np.dtype, *, x: np.ndarray | None = None) -> np.ndarray:
    """A user's ``out``: shape, dtype, writeable, whole strides, no overlap with itself or ``x``.

    Returns its base-class view.
    """
    if type(out) is not np.ndarray:
        _refuse_masked(out, "out")
        if not isinstance(out, np.ndarray):
            raise TypeError(
                f"out must be a numpy.ndarray or None, got {type(out).__name__}; "
                "pass out=None to get a new array"
            )
        out = out.view(np.ndarray)
    if out.shape != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {out.shape}")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}, got {out.dtype}; pass an out of {dtype}")
    if not out.dtype.isnative:
        raise TypeError(f"out must be in native byte order, got {out.dtype.str}")
    check_writable_view(out, "out")
    if x is not None and not same_view(out, x) and np.shares_memory(out, x):
        raise ValueError(
            "out overlaps x without being x; pass out=x to work in place, "
            "or an array that shares no memory with x"
        )
    return out


# --------------------------------------------------------------------------- positions


def check_positions(positions, name: str = "positions") -> np.ndarray:
    """``positions`` as an int64 array: integers (or floats holding integers) within 2**53."""
    _refuse_masked(positions, name)
    arr = np.asarray(positions)
    kind = arr.dtype.kind
    if kind == "O" and arr.size and all(_integer(v) is not None for v in arr.flat):
        # Python ints past int64 (np.asarray([2**70]) is an object array): range-checked
        # exactly here, then int64
        vals = [int(v) for v in arr.flat]
        worst: float = max(vals, key=abs)
        if abs(worst) > MAX_POSITION:
            raise ValueError(
                f"{name} must be within 2**53 in magnitude (exact in float64), got {worst}; "
                "positions this large cannot be represented exactly"
            )
        return np.array(vals, dtype=np.int64).reshape(arr.shape)
    if kind not in "iuf":
        raise TypeError(
            f"{name} must be an integer array, got dtype {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.int64)"
        )
    if kind == "f":
        a64 = arr.astype(np.float64)  # float16 included: compared without overflow
        bad = ~np.isfinite(a64)
        if bad.any():
            raise ValueError(
                f"{name} must be finite integers, got {a64[bad].flat[0]}; "
                f"pass integer {name}"
            )
        frac = a64 != np.floor(a64)
        if frac.any():
            raise ValueError(
                f"{name} must hold integers, got {a64[frac].flat[0]}; "
                f"round first, e.g. np.rint({name}).astype(np.int64)"
            )
    else:
        a64 = arr
    if arr.size:
        # Python numbers, not np.abs: -(-2**63) overflows in int64 and 2**63 + 1 in uint64
        cast: type[float] | type[int] = float if kind == "f" else int
        lo: float = cast(a64.min())
        hi: float = cast(a64.max())
        if hi > MAX_POSITION or lo < -MAX_POSITION:
            worst = lo if -lo > hi else hi
            raise ValueError(
                f"{name} must be within 2**53 in magnitude (exact in float64), got {worst}; "
                "positions this large cannot be represented exactly"
            )
    return arr.astype(np.int64, copy=False) if kind != "f" else a64.astype(np.int64)


def check_offset(offset, n: int, name: str = "offset") -> int:
    """A scalar first position: the positions ``offset .. offset + n - 1`` within 2**53."""
    offset = check_int(offset, name)
    last = offset + max(n - 1, 0)  # positions offset .. last, as a position array holds them
    if abs(offset) > MAX_POSITION or abs(last) > MAX_POSITION:
        raise ValueError(
            f"{name} + length must stay within 2**53 in magnitude, got {name}={offset} "
            f"and length {n}"
        )
    return offset


def _is_default_offset(offset) -> bool:
    return _integer(offset) == 0


def check_positions_or_offset(positions, offset) -> None:
    """Positions and a non-default offset are exclusive."""
    if positions is not None and not _is_default_offset(offset):
        raise ValueError(
            "give either positions or offset, not both; fold the offset into positions"
        )


def check_seq_axis(seq_axis, shape: tuple) -> int:
    """``seq_axis`` as a non-negative axis of ``shape`` other than the last.

    The default (None) is 0 for 2-D arrays and 1 otherwise.
    """
    nd = len(shape)
    if seq_axis is None:
        return 0 if nd == 2 else 1
    axis = check_int(seq_axis, "seq_axis")
    if axis < 0:
        axis += nd
    if not 0 <= axis <= nd - 2:
        raise ValueError(
            f"seq_axis must name an axis other than the last (0..{nd - 2}), "
            f"got {seq_axis} for shape {tuple(shape)}; the channels are the last axis"
        )
    return axis


def check_positions_shape(shape: tuple, seq_len: int, batch: int | None) -> None:
    """Positions are ``(seq_len,)``, or ``(batch, seq_len)`` when the array has a batch axis."""
    if len(shape) == 1:
        if shape[0] != seq_len:
            raise ValueError(
                f"positions must have length {seq_len} (the sequence length), got shape {shape}"
            )
        return
    if len(shape) == 2:
        if batch is None:
            raise ValueError(
                f"positions of shape {shape} need a batch axis; this array has none, "
                f"so pass positions of shape ({seq_len},)"
            )
        if tuple(shape) != (batch, seq_len):
            raise ValueError(
                f"positions must have shape ({seq_len},) or ({batch}, {seq_len}), got {shape}"
            )
        return
    raise ValueError(
        f"positions must be 1-D or 2-D, got {len(shape)}-D shape {shape}; pass ({seq_len},) "
        "or (batch, seq) positions"
    )


def resolve_positions(positions, offset, *, seq_len: int, batch: int | None):
    """Return ``(positions2d, offsets)``: exactly one is not None.

    ``positions2d`` is int64 of shape ``(1, seq_len)`` or ``(batch, seq_len)``; ``offsets``
    is int64 of shape ``(1,)`` or ``(batch,)``. ``batch`` is None when the array has no
    batch axis (then per-row offsets and 2-D positions are errors). A 0-d integer array
    offset is one offset, like an int.
    """
    check_positions_or_offset(positions, offset)
    if positions is not None:
        pos = check_positions(positions)
        check_positions_shape(pos.shape, seq_len, batch)
        return (pos.reshape(1, seq_len) if pos.ndim == 1 else pos), None
    if type(offset) is int:  # fast path
        return None, np.array([check_offset(offset, seq_len)], dtype=np.int64)
    _refuse_masked(offset, "offset")
    if np.ndim(offset) == 0:  # a 0-d array is a scalar: an integer (check_int)
        return None, np.array([check_offset(offset, seq_len)], dtype=np.int64)
    arr = np.asarray(offset)
    if arr.ndim != 1:
        raise ValueError(
            f"offset must be an int or a 1-D array of ints (one per batch row), got shape "
            f"{arr.shape}"
        )
    if batch is None:
        raise ValueError(
            "offset has one value per batch row, but this array has no batch axis; "
            "pass a single int"
        )
    if arr.shape[0] != batch:
        raise ValueError(
            f"offset must have one value per batch row: length {batch}, got {arr.shape[0]}"
        )
    # one value per row: a position array (floats holding integers are accepted, as in
    # positions), where a scalar offset is an integer argument (check_int)
    offs = check_positions(arr, name="offset")
    if offs.size:
        lo, hi = int(offs.min()), int(offs.max())
        if hi + max(seq_len - 1, 0) > MAX_POSITION or lo < -MAX_POSITION:
            raise ValueError(
                f"offset + length must stay within 2**53 in magnitude, got offsets from {lo} "
                f"to {hi} and length {seq_len}"
            )
    return None, offs


# --------------------------------------------------------------------------- targets


def _prepare_target(
    x: np.ndarray, out, *, unit_stride: bool
) -> tuple[np.ndarray | None, np.ndarray | None, bool]:
    """Check ``out`` against ``x``: ``(target, result, in_place)``; nothing written.

    ``target`` is the base-class array the work is written into (None: a new array is to
    be made), ``result`` what the function returns (``out`` as given).
    """
    if out is None:
        return None, None, False
    if type(out) is not np.ndarray:
        _refuse_masked(out, "out")  # even one that views x's own memory
    if same_view(out, x):
        # the array written is out (x itself, or another view of the same elements, which
        # may be writeable where x is not)
        target = base_view(out)
        check_writable_view(target, "x" if target is x else "out")
        return target, out, True
    target = check_out(out, x.shape, x.dtype, x=x)
    if unit_stride and target.size and target.strides[-1] != target.itemsize:
        raise ValueError(
            f"out's last axis must have unit stride (got a stride of {target.strides[-1]} "
            f"bytes for itemsize {target.itemsize}); pass an out whose channels are contiguous"
        )
    return target, out, False


def _fill_target(x: np.ndarray, target, result, copy_in: bool) -> tuple[np.ndarray, np.ndarray]:
    """The last step of a parser: make or fill the target (the only write)."""
    if target is None:
        target = np.array(x, order="C", copy=True) if copy_in else np.empty_like(x, order="C")
        return target, target
    if target is not x and copy_in:
        np.copyto(target, x)
    return target, result


# --------------------------------------------------------------------------- tables


@dataclass
class TableCall:
    """A checked :func:`fastpe.sinusoidal_table` call."""

    target: np.ndarray | None  # (seq_len, dim) base-class array to fill (None: allocate=False)
    result: np.ndarray | None  # what the function returns: out as given, or target
    seq_len: int
    dim: int
    base: float
    layout: int
    dtype: np.dtype
    positions: np.ndarray | None  # (1, seq_len) int64
    offsets: np.ndarray | None  # (1,) int64


def parse_table(seq_len, dim, *, base, offset, positions, layout, dtype, out,
                allocate: bool = True) -> TableCall:
    """Check every argument of ``sinusoidal_table`` (fast and reference alike)."""
    dim = check_dim(dim)
    base = check_base(base)
    lay = check_layout(layout)
    if positions is None:
        if seq_len is None:
            raise TypeError(
                "seq_len is required when positions is not given; pass the number of rows"
            )
        n = check_int(seq_len, "seq_len", minimum=0)
    else:
        _refuse_masked(positions, "positions")
        if np.ndim(positions) != 1:
            raise ValueError(
                f"positions must be 1-D for a table, got shape {np.shape(positions)}"
            )
        n = len(positions)
        if seq_len is not None and check_int(seq_len, "seq_len", minimum=0) != n:
            raise ValueError(
                f"seq_len={seq_len} does not match len(positions)={n}; leave seq_len out"
            )
    pos2d, offs = resolve_positions(positions, offset, seq_len=n, batch=None)
    if dtype is not None:
        dt = check_float_dtype(dtype)
    elif isinstance(out, np.ndarray):
        dt = check_float_dtype(out.dtype, "out's dtype")
    else:
        dt = np.dtype(np.float32)
    if out is None:
        target = np.empty((n, dim), dtype=dt) if allocate else None
        result = target
    else:
        target = check_out(out, (n, dim), dt)
        result = out
    return TableCall(target=target, result=result, seq_len=n, dim=dim, base=base, layout=lay,
                     dtype=dt, positions=pos2d, offsets=offs)


# --------------------------------------------------------------------------- add_sinusoidal


@dataclass
class AddCall:
    """A checked :func:`fastpe.add_sinusoidal` call."""

    target: np.ndarray  # the array added to in place (x, out, or a copy), holding x's data
    result: np.ndarray  # what the function returns: out as given, or target
    view: np.ndarray  # (B, S, 1, D) view of target
    dim: int
    base: float
    layout: int
    positions: np.ndarray | None  # (Bp, S) int64
    offsets: np.ndarray | None  # (Bp,) int64
    in_place: bool


def parse_add(x, *, base, offset, positions, layout, out, copy_in: bool = True) -> AddCall:
    """Check every argument of ``add_sinusoidal`` (fast and reference alike).

    Nothing is written before every check has passed; with ``copy_in`` the data of ``x``
    is then copied into ``out`` (or a new array) when the call is out of place.
    """
    x = check_float_array(x)
    if x.ndim not in (2, 3):
        raise ValueError(
            f"x must be 2-D (seq, dim) or 3-D (batch, seq, dim), got shape {x.shape}; "
            "reshape it, e.g. x.reshape(-1, x.shape[-2], x.shape[-1])"
        )
    dim = check_dim(x.shape[-1], "x.shape[-1] (dim)")
    base = check_base(base)
    lay = check_layout(layout)
    batch = x.shape[0] if x.ndim == 3 else None
    pos2d, offs = resolve_positions(positions, offset, seq_len=x.shape[-2], batch=batch)
    target, result, in_place = _prepare_target(x, out, unit_stride=False)
    target, result = _fill_target(x, target, result, copy_in)
    view = target[None, :, None, :] if target.ndim == 2 else target[:, :, None, :]
    return AddCall(target=target, result=result, view=view, dim=dim, base=base, layout=lay,
                   positions=pos2d, offsets=offs, in_place=in_place)


# --------------------------------------------------------------------------- apply_rope


@dataclass
class RopeCall:
    """A checked :func:`fastpe.apply_rope` call."""

    target: np.ndarray  # the array rotated in place (x, out, or a fresh copy)
    view: np.ndarray  # (B, S, H, D) view of target
    rotary_dim: int
    layout: int
    positions: np.ndarray | None  # (Bp, S) int64
    offsets: np.ndarray | None  # (Bp,) int64
    base: float
    inverse: bool
    wh: np.ndarray  # frequencies as double-double hi + lo
    wl: np.ndarray
    freq_key: tuple  # cache key of the frequencies
    attention_factor: float  # cos and sin are multiplied by this
    result: np.ndarray  # what the function returns: out as given, or target


def rope_view(a: np.ndarray, seq_axis: int, name: str = "x") -> np.ndarray:
    """View ``a`` as ``(B, S, H, D)``; B is axis 0 when ``seq_axis >= 1``, else 1."""
    nd = a.ndim
    if nd == 2:
        return a[None, :, None, :]
    if nd == 3:
        return a[None, :, :, :] if seq_axis == 0 else a[:, :, None, :]
    if seq_axis == 1:
        return a
    if seq_axis == 2:
        return np.moveaxis(a, 2, 1)
    # seq_axis == 0: (S, A, H, D) -> (1, S, A*H, D) without copying
    s, n1, n2, d = a.shape
    st = a.strides
    if n1 != 1 and n2 != 1 and st[1] != n2 * st[2]:
        raise ValueError(
            f"with seq_axis=0 a 4-D array's axes 1 and 2 must be mergeable without a copy "
            f"({name}'s strides are {st}); pass a 3-D (tokens, heads, head_dim) view instead"
        )
    sh = st[2] if n2 != 1 else st[1]
    return np.lib.stride_tricks.as_strided(
        a, shape=(1, s, n1 * n2, d), strides=(0, st[0], sh, st[3])
    )


def default_seq_len(pos, offs, n_seq: int) -> int:
    """The ``seq_len`` that scaling assumes when none is given: largest position + 1.

    ``pos``: positions (any shape) or None; then ``offs`` (an int or offsets) plus the
    sequence length ``n_seq``. At least 1.
    """
    if pos is not None:
        n = int(np.max(pos)) + 1 if np.size(pos) else 0
    else:
        n = int(np.max(offs)) + n_seq if np.size(offs) else n_seq
    return max(n, 1)


def check_scaling_args(scaling, max_position_embeddings, seq_len):
    """Types of the scaling arguments, checked whether or not ``scaling`` is given."""
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be a dict (a rope_scaling / rope_parameters mapping) or None, got "
            f"{type(scaling).__name__}; e.g. scaling={{'rope_type': 'yarn', 'factor': 4.0}}"
        )
    mpe = check_optional_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    sl = check_optional_int(seq_len, "seq_len", minimum=1)
    return mpe, sl


def frequencies(rot: int, base: float, scaling, max_position_embeddings, seq_len, pos, offs,
                n_seq: int):
    """``(wh, wl, key, attention_factor)`` for a call; see :func:`fastpe.apply_rope`."""
    if scaling is not None:
        from .scaling import _resolve_rope_type, rope_frequencies

        if _resolve_rope_type(scaling) == "default":
            # still validate the dict (e.g. a conflicting rope_theta)
            rope_frequencies(rot, base=base, scaling=scaling,
                             max_position_embeddings=max_position_embeddings)
            scaling = None
    if scaling is None:
        wh, wl = inv_freq_dd(base, rot)
        return wh, wl, ("default", base, rot), 1.0
    if seq_len is None:
        seq_len = default_seq_len(pos, offs, n_seq)
    inv_freq, factor = rope_frequencies(rot, base=base, scaling=scaling, seq_len=seq_len,
                                        max_position_embeddings=max_position_embeddings)
    wh, wl = scaled_dd(inv_freq)
    return wh, wl, ("scaled", wh.tobytes()), float(factor)


def parse_rope(x, *, positions, offset, base, layout, rotary_dim, seq_axis, inverse, out,
               scaling=None, max_position_embeddings=None, seq_len=None,
               copy_in: bool = True) -> RopeCall:
    """Validate every argument of ``apply_rope`` and pick the array to rotate in place.

    Nothing is written before every check has passed (those of ``out`` included). With
    ``copy_in`` the data of ``x`` is then copied into ``out`` (or a new array) when the
    call is out of place.
    """
    x = check_float_array(x, "x")
    if x.ndim not in (2, 3, 4):
        raise ValueError(
            f"x must be 2-D (seq, dim), 3-D (batch, seq, dim) or 4-D "
            f"(batch, seq, heads, head_dim), got shape {x.shape}"
        )
    seq_axis = check_seq_axis(seq_axis, x.shape)
    rot = check_rotary_dim(rotary_dim, x.shape[-1], "x.shape[-1]")
    if x.size and x.strides[-1] != x.itemsize:
        raise ValueError(
            f"x's last axis must have unit stride (got a stride of {x.strides[-1]} bytes for "
            f"itemsize {x.itemsize}); rotate a view whose channels are contiguous, "
            "e.g. np.ascontiguousarray(x) and write the result back"
        )
    base = check_base(base)
    lay = check_layout(layout)
    inverse = check_bool(inverse, "inverse")
    max_position_embeddings, seq_len = check_scaling_args(scaling, max_position_embeddings,
                                                          seq_len)
    n_seq = x.shape[seq_axis]
    batch = x.shape[0] if seq_axis >= 1 else None
    pos, offs = resolve_positions(positions, offset, seq_len=n_seq, batch=batch)
    rope_view(x, seq_axis, "x")  # raises for a 4-D layout that cannot be viewed as (B, S, H, D)
    wh, wl, key, factor = frequencies(rot, base, scaling, max_position_embeddings, seq_len,
                                      pos, offs, n_seq)
    target, result, _ = _prepare_target(x, out, unit_stride=True)
    if target is not None and target is not x:
        rope_view(target, seq_axis, "out")  # out's own geometry, before anything is copied
    target, result = _fill_target(x, target, result, copy_in)
    return RopeCall(target=target, view=rope_view(target, seq_axis), rotary_dim=rot,
                    layout=lay, positions=pos, offsets=offs, base=base, inverse=inverse,
                    wh=wh, wl=wl, freq_key=key, attention_factor=factor, result=result)


# --------------------------------------------------------------------------- conventions
#
# fairseq, tensor2tensor, diffusion timesteps, MAE-style grids and the general
# sinusoidal_embedding all reduce to one description (EmbedCall): a grid of rows (1-D for a
# sequence or a batch of timesteps), optional zero rows before it (a class token), and
# blocks of columns, each the sin/cos of one grid axis's positions at one set of
# frequencies, in one order. Columns outside every block are zero (odd dims, padding).

CONVENTIONS = ("transformer", "fairseq", "tensor2tensor")
GRID_CONVENTIONS = ("mae", "tensor2tensor")
ORDERS = ("interleaved", "sin_cos", "cos_sin")
_SIN_COS, _COS_SIN = 1, 2
FAIRSEQ_BASE = 10000.0  # fairseq's get_embedding hard-codes log(10000)


@dataclass
class Block:
    """Columns ``col .. col + 2*npairs`` hold sin/cos of grid axis ``axis``'s positions."""

    axis: int
    col: int
    npairs: int
    order: int  # index into ORDERS
    wh: np.ndarray  # frequencies as double-double hi + lo
    wl: np.ndarray
    key: tuple  # cache key of the frequencies
    positions: np.ndarray | None  # 1-D int64 or float64, length grid[axis]; None: offset..
    offset: int = 0


@dataclass
class EmbedCall:
    """A checked call of a convention function (table, timestep, grid, general)."""

    target: np.ndarray | None  # table (rows, dim), or the array added to (holds x's data)
    result: np.ndarray | None  # what the function returns: out as given, or target
    dtype: np.dtype
    dim: int
    grid: tuple  # the grid's axis lengths; rows = lead + prod(grid)
    lead: int  # zero rows before the grid (a class token)
    blocks: list
    zero_rows: np.ndarray | None = None  # grid rows (1-D grid) left zero: fairseq's padding row
    add: bool = False


def check_real(value, name: str, *, positive: bool = False, example: str = "1.0") -> float:
    """A finite real number (not bool), ``> 0`` with ``positive``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}; "
            f"pass e.g. {name}={example}"
        )
    out = float(value)
    if not np.isfinite(out) or (positive and out <= 0.0):
        what = "finite and > 0" if positive else "finite"
        raise ValueError(f"{name} must be {what}, got {value!r}; pass e.g. {name}={example}")
    return out


def check_real_positions(positions, name: str = "positions") -> np.ndarray:
    """1-D positions: integers (int64, as :func:`check_positions`) or finite floats (float64).

    Float positions (diffusion timesteps) are kept as float64, exactly; like integers they
    must lie within 2**53 in magnitude.
    """
    _refuse_masked(positions, name)
    arr = np.asarray(positions)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one value per row), got shape {arr.shape}; "
            f"pass np.ravel({name}) or np.atleast_1d({name})"
        )
    if arr.dtype.kind not in "iufO":
        raise TypeError(
            f"{name} must be real numbers (integers or floats), got dtype {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.float64)"
        )
    if arr.dtype.kind != "f":
        return check_positions(arr, name)
    if arr.dtype.itemsize > 8:
        raise TypeError(
            f"{name} must be float64 or narrower, got {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.float64)"
        )
    a64 = arr.astype(np.float64)
    bad = ~np.isfinite(a64)
    if bad.any():
        raise ValueError(f"{name} must be finite, got {a64[bad][0]}")
    if a64.size and float(np.abs(a64).max()) > MAX_POSITION:
        raise ValueError(
            f"{name} must be within 2**53 in magnitude, got {float(np.abs(a64).max())}"
        )
    return a64


def check_convention(convention, choices: tuple[str, ...] = CONVENTIONS) -> int:
    return check_choice(convention, "convention", choices)


def plain_convention(convention, *extra) -> bool:
    """True for the transformer convention (None) with no other convention's argument:
    ``sinusoidal_table``/``add_sinusoidal`` then take their original path."""
    return (convention is None or check_convention(convention) == 0) and all(
        e is None for e in extra)


def _refuse_extra(convention: str, **given) -> None:
    """Arguments of another convention, given (not None), are an error."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"{name}={value!r} belongs to another convention than {convention!r}; "
                f"leave {name} out or pass the convention it belongs to"
            )


def _check_default(value, default, name: str, convention: str, why: str) -> None:
    if value != default:
        raise ValueError(
            f"{name}={value!r} cannot be combined with convention={convention!r} ({why}); "
            f"leave {name} out, or use fastpe.sinusoidal_embedding for other {name}s"
        )


def _embed_target(shape: tuple, dt: np.dtype, out, allocate: bool):
    if out is None:
        target = np.empty(shape, dtype=dt) if allocate else None
        return target, target
    return check_out(out, shape, dt), out


def _wide_float(dt: np.dtype, name: str) -> np.dtype:
    """The convention functions compute float32 and float64 only (no 16-bit path yet)."""
    if dt.itemsize == 2:
        raise TypeError(
            f"{name} must be float32 or float64 for the convention functions, got {dt}; "
            "compute in float32 and convert, or use sinusoidal_table/add_sinusoidal, which "
            "take float16 and bfloat16"
        )
    return dt


def _table_dtype(dtype, out) -> np.dtype:
    if dtype is not None:
        return _wide_float(check_float_dtype(dtype), "dtype")
    if isinstance(out, np.ndarray):
        return _wide_float(check_float_dtype(out.dtype, "out's dtype"), "out's dtype")
    return np.dtype(np.float32)


def _add_target(x, out, *, batch_ok: bool = True):
    """Check ``x`` (2-D ``(rows, dim)`` or, with ``batch_ok``, 3-D) and ``out``; nothing written."""
    x = check_float_array(x)
    _wide_float(x.dtype, "x")
    if x.ndim != 2 and not (batch_ok and x.ndim == 3):
        want = "2-D (rows, dim) or 3-D (batch, rows, dim)" if batch_ok else "2-D (rows, dim)"
        raise ValueError(f"x must be {want}, got shape {x.shape}")
    target, result, _ = _prepare_target(x, out, unit_stride=False)
    return x, target, result


def _seq_positions(n: int, offset, positions):
    """``(positions or None, offset)`` of an integer sequence of ``n`` rows."""
    pos2d, offs = resolve_positions(positions, 0 if offset is None else offset,
                                    seq_len=n, batch=None)
    if pos2d is not None:
        return pos2d[0], 0
    return None, int(offs[0])


def convention_blocks(conv: int, *, n: int, dim: int, base, layout, offset, positions,
                      padding_idx, min_timescale, max_timescale, start_index, add: bool):
    """Blocks and zero rows of a 1-D ``sinusoidal_table``/``add_sinusoidal`` convention."""
    name = CONVENTIONS[conv]
    if conv == 1:  # fairseq
        _refuse_extra(name, min_timescale=min_timescale, max_timescale=max_timescale,
                      start_index=start_index)
        _check_default(check_base(base), 10000.0, "base", name,
                       "get_embedding hard-codes log(10000)")
        _check_default(LAYOUTS[check_layout(layout)], "interleaved", "layout", name,
                       "its layout is [sin | cos]")
        if dim < 4:
            raise ValueError(
                f"dim must be >= 4 for convention='fairseq', got {dim}: fairseq divides by "
                "dim // 2 - 1, zero for dims 2 and 3"
            )
        pad = check_optional_int(padding_idx, "padding_idx", minimum=0)
        if offset is None and add and pad is not None and positions is None:
            offset = pad + 1  # the module's forward: positions from padding_idx + 1
        pos, off = _seq_positions(n, offset, positions)
        npairs = dim // 2
        wh, wl, key = _spacing().spaced_dd(npairs, FAIRSEQ_BASE, 1.0, 1.0)
        zero_rows = None
        if pad is not None:
            p = pos if pos is not None else off + np.arange(n, dtype=np.int64)
            zero_rows = np.flatnonzero(p == pad)
        return [Block(0, 0, npairs, _SIN_COS, wh, wl, key, pos, off)], zero_rows
    # tensor2tensor
    _refuse_extra(name, padding_idx=padding_idx)
    _check_default(check_base(base), 10000.0, "base", name, "use max_timescale")
    _check_default(LAYOUTS[check_layout(layout)], "interleaved", "layout", name,
                   "its layout is [sin | cos]")
    if start_index is not None:
        start = check_int(start_index, "start_index")
        if offset is not None and not _is_default_offset(offset):
            raise ValueError("give either start_index or offset, not both; they are the same")
        if positions is not None:
            raise ValueError("give either start_index or positions, not both")
        offset = start
    pos, off = _seq_positions(n, offset, positions)
    blocks = t2t_blocks(dim // 2, 0, 0, min_timescale, max_timescale, pos, off, nd=False)
    return blocks, None


def _t2t_timescales(min_timescale, max_timescale) -> tuple[float, float]:
    lo = 1.0 if min_timescale is None else check_real(min_timescale, "min_timescale",
                                                      positive=True)
    hi = 1.0e4 if max_timescale is None else check_real(max_timescale, "max_timescale",
                                                        positive=True, example="1.0e4")
    return lo, hi


def t2t_blocks(npairs: int, axis: int, col: int, min_timescale, max_timescale, pos, off,
               *, nd: bool) -> list:
    """tensor2tensor's ``min * (max/min)**(-i / max(n - 1, 1))`` frequencies, ``[sin | cos]``.

    ``add_timing_signal_nd`` (``nd``) divides by ``n - 1`` without the ``max``: one
    timescale per dimension gives NaN there, and is refused here.
    """
    lo, hi = _t2t_timescales(min_timescale, max_timescale)
    if npairs == 0:
        return []
    if nd and npairs == 1:
        raise ValueError(
            "tensor2tensor's add_timing_signal_nd needs dim >= 4 * ndim (two timescales per "
            "grid axis): with one it divides by zero (NaN); pass a larger dim"
        )
    base = hi / lo  # the original's float(max) / float(min)
    if not np.isfinite(base) or base == 0.0:
        raise ValueError(
            f"max_timescale / min_timescale must be a finite nonzero float64, got "
            f"{hi!r} / {lo!r}; pass timescales closer together"
        )
    shift = 0.0 if npairs == 1 else 1.0  # denominator max(n - 1, 1)
    wh, wl, key = _spacing().spaced_dd(npairs, base, shift, lo)
    return [Block(axis, col, npairs, _SIN_COS, wh, wl, key, pos, off)]


def _spacing():
    from . import _spacing

    return _spacing


def parse_convention(x, seq_len, dim, *, convention, base, offset, positions, layout,
                     dtype, out, padding_idx, min_timescale, max_timescale, start_index,
                     allocate: bool = True) -> EmbedCall:
    """``sinusoidal_table`` (``x`` None) or ``add_sinusoidal`` with convention fairseq or t2t.

    Dims may be odd here (a zero column at the end, as the originals pad).
    """
    if convention is None:
        given = [n for n, v in (("padding_idx", padding_idx), ("min_timescale", min_timescale),
                                ("max_timescale", max_timescale),
                                ("start_index", start_index)) if v is not None]
        raise ValueError(
            f"{given[0]} belongs to a convention: pass convention='fairseq' (padding_idx) or "
            "convention='tensor2tensor' (min_timescale, max_timescale, start_index)"
        )
    conv = check_convention(convention)
    if conv == 0:
        _refuse_extra("transformer", padding_idx=padding_idx, min_timescale=min_timescale,
                      max_timescale=max_timescale, start_index=start_index)
        raise AssertionError("the transformer convention goes through parse_table/parse_add")
    add = x is not None
    if add:
        x, target, result = _add_target(x, out)
        n = x.shape[-2]
        dim = check_int(x.shape[-1], "x.shape[-1] (dim)", minimum=1)
        dt = x.dtype
        if positions is not None and np.ndim(positions) != 1:
            raise ValueError(
                f"positions must be 1-D (shared by every batch row) for convention "
                f"{CONVENTIONS[conv]!r}, got shape {np.shape(positions)}"
            )
    else:
        dim = check_int(dim, "dim", minimum=1)
        if positions is None:
            if seq_len is None:
                raise TypeError(
                    "seq_len is required when positions is not given; pass the number of rows"
                )
            n = check_int(seq_len, "seq_len", minimum=0)
        else:
            _refuse_masked(positions, "positions")
            if np.ndim(positions) != 1:
                raise ValueError(
                    f"positions must be 1-D for a table, got shape {np.shape(positions)}"
                )
            n = len(positions)
            if seq_len is not None and check_int(seq_len, "seq_len", minimum=0) != n:
                raise ValueError(
                    f"seq_len={seq_len} does not match len(positions)={n}; leave seq_len out"
                )
        dt = _table_dtype(dtype, out)
    blocks, zero_rows = convention_blocks(
        conv, n=n, dim=dim, base=base, layout=layout, offset=offset, positions=positions,
        padding_idx=padding_idx, min_timescale=min_timescale, max_timescale=max_timescale,
        start_index=start_index, add=add)
    if add:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((n, dim), dt, out, allocate)
    return EmbedCall(target=target, result=result, dtype=dt, dim=dim, grid=(n,), lead=0,
                     blocks=blocks, zero_rows=zero_rows, add=add)


def parse_embedding(x, positions, dim, *, base, shift, scale, frequencies, order, dtype,
                    out, allocate: bool = True, name: str = "positions") -> EmbedCall:
    """The general ``sinusoidal_embedding`` (``x`` None) / ``add_sinusoidal_embedding``.

    Row ``r`` holds sin/cos of ``positions[r] * w_i`` with ``w_i = scale *
    base**(-i / (dim // 2 - shift))`` (or the given ``frequencies``), in ``order``; an odd
    ``dim`` ends with a zero column.
    """
    if x is not None:
        x, target, result = _add_target(x, out)
        dim = check_int(x.shape[-1], "x.shape[-1] (dim)", minimum=1)
        dt = x.dtype
    else:
        dim = check_int(dim, "dim", minimum=1)
        dt = _table_dtype(dtype, out)
    if positions is None:
        raise TypeError(f"{name} is required: a 1-D array, one (int or float) per row")
    pos = check_real_positions(positions, name)
    if pos.dtype.kind == "f" and bool((pos == np.floor(pos)).all()):
        pos = pos.astype(np.int64)  # whole timesteps (999.0, ...): the integer kernels
    n = pos.shape[0]
    if x is not None and x.shape[-2] != n:
        raise ValueError(
            f"{name} must have length {x.shape[-2]} (x.shape[-2], the rows), got {n}"
        )
    order_i = check_choice(order, "order", ORDERS)
    npairs = dim // 2
    if frequencies is not None:
        for nm, v, d in (("base", base, 10000.0), ("shift", shift, 0), ("scale", scale, 1)):
            if v != d:
                raise ValueError(
                    f"give either frequencies or {nm}, not both; fold {nm} into frequencies"
                )
        _refuse_masked(frequencies, "frequencies")
        f = np.asarray(frequencies)
        if f.dtype.kind not in "iuf":
            raise TypeError(f"frequencies must be real numbers, got dtype {f.dtype}")
        f = f.astype(np.float64)
        if f.shape != (npairs,):
            raise ValueError(
                f"frequencies must have shape ({npairs},) (dim // 2), got {f.shape}"
            )
        if not np.isfinite(f).all():
            raise ValueError("frequencies must be finite")
        wh = np.ascontiguousarray(f)
        wl = np.zeros_like(wh)
        key = ("explicit", wh.tobytes())
    else:
        b = check_base(base)
        sh = check_real(shift, "shift", example="0")
        sc = check_real(scale, "scale")
        if npairs and npairs - sh == 0:
            raise ValueError(
                f"shift={shift!r} equals dim // 2 = {npairs}: the frequencies would divide by "
                "zero; pass another shift"
            )
        wh, wl, key = _spacing().spaced_dd(npairs, b, sh, sc)
    if x is not None:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((n, dim), dt, out, allocate)
    blocks = [Block(0, 0, npairs, order_i, wh, wl, key, pos, 0)] if npairs else []
    return EmbedCall(target=target, result=result, dtype=dt, dim=dim, grid=(n,), lead=0,
                     blocks=blocks, add=x is not None)


def parse_timestep(x, timesteps, dim, *, flip_sin_to_cos, downscale_freq_shift, scale,
                   max_period, dtype, out, allocate: bool = True) -> EmbedCall:
    """diffusers' ``get_timestep_embedding`` arguments (``x`` None) or its ``add_`` form."""
    flip = check_bool(flip_sin_to_cos, "flip_sin_to_cos")
    shift = check_real(downscale_freq_shift, "downscale_freq_shift", example="1")
    sc = check_real(scale, "scale", example="1")
    period = check_real(max_period, "max_period", positive=True, example="10000")
    if x is not None:
        x = check_float_array(x)
        _wide_float(x.dtype, "x")
        if x.ndim != 2:
            raise ValueError(
                f"x must be 2-D (batch, dim), one row per timestep, got shape {x.shape}"
            )
        dim = x.shape[-1]
    dim = check_int(dim, "dim" if x is None else "x.shape[-1] (dim)", minimum=1)
    if dim // 2 and dim // 2 - shift == 0:
        raise ValueError(
            f"downscale_freq_shift={downscale_freq_shift!r} equals dim // 2 = {dim // 2}: "
            "get_timestep_embedding would divide by zero; pass another shift or dim"
        )
    return parse_embedding(x, timesteps, dim, base=period, shift=shift, scale=sc,
                           frequencies=None, order=ORDERS[_COS_SIN if flip else _SIN_COS],
                           dtype=dtype, out=out, allocate=allocate, name="timesteps")


def check_grid_shape(grid_shape) -> tuple[int, ...]:
    """An int ``n`` (MAE's ``grid_size``: an ``(n, n)`` grid) or a tuple of ints >= 0."""
    if _integer(grid_shape) is not None:
        n = check_int(grid_shape, "grid_shape", minimum=0)
        return (n, n)
    if not isinstance(grid_shape, (tuple, list)):
        raise TypeError(
            f"grid_shape must be an int (a square grid) or a tuple of ints, got "
            f"{type(grid_shape).__name__}; pass e.g. grid_shape=(14, 14)"
        )
    if not 1 <= len(grid_shape) <= 8:
        raise ValueError(f"grid_shape must have 1 to 8 axes, got {tuple(grid_shape)}")
    return tuple(check_int(g, "grid_shape entries", minimum=0) for g in grid_shape)


def parse_grid(x, grid_shape, dim, *, cls_token, convention, base, min_timescale,
               max_timescale, dtype, out, allocate: bool = True) -> EmbedCall:
    """``grid_sinusoidal`` (``x`` None) or ``add_grid_sinusoidal``."""
    grid = check_grid_shape(grid_shape)
    cls = check_bool(cls_token, "cls_token")
    conv = check_convention(convention, GRID_CONVENTIONS)
    if x is not None:
        x, target, result = _add_target(x, out)
        dim = x.shape[-1]
        dt = x.dtype
    else:
        dt = _table_dtype(dtype, out)
    dim = check_int(dim, "dim" if x is None else "x.shape[-1] (dim)", minimum=1)
    nd = len(grid)
    rows = int(cls) + int(np.prod(grid, dtype=np.int64))
    if x is not None and x.shape[-2] != rows:
        raise ValueError(
            f"x.shape[-2] must be the number of tokens, {rows} (prod(grid_shape) "
            f"{'+ 1 class token' if cls else 'with no class token'}), got {x.shape[-2]}"
        )
    blocks = []
    if conv == 0:  # MAE: blocks of dim/nd channels, last axis first (meshgrid puts w first)
        _refuse_extra("mae", min_timescale=min_timescale, max_timescale=max_timescale)
        b = check_base(base)
        if dim % (2 * nd):
            raise ValueError(
                f"dim must be a multiple of {2 * nd} for a {nd}-D grid (an even number of "
                f"channels per axis), got {dim}"
            )
        width = dim // nd
        wh, wl, key = _spacing().spaced_dd(width // 2, b)
        for k in range(nd):
            blocks.append(Block(nd - 1 - k, k * width, width // 2, _SIN_COS, wh, wl, key,
                                None, 0))
    else:  # tensor2tensor add_timing_signal_nd: axis d at channels d*2n, zeros after
        _check_default(check_base(base), 10000.0, "base", "tensor2tensor",
                       "use max_timescale")
        npairs = dim // (2 * nd)
        for d in range(nd):
            blocks += t2t_blocks(npairs, d, 2 * npairs * d, min_timescale, max_timescale,
                                 None, 0, nd=True)
    if x is not None:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((rows, dim), dt, out, allocate)
    return EmbedCall(target=target, result=result, dtype=dt, dim=dim, grid=grid,
                     lead=int(cls), blocks=blocks, add=x is not None)
