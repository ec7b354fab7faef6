"""Checks of single arguments: scalars, dtypes, arrays and their views, positions, targets."""

from __future__ import annotations

import numbers
import operator

import numpy as np

from .._freq import check_frequencies

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
        real = value
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind == "f":
            real = value[()]  # a 0-d float array: the float it holds
        if isinstance(real, (float, np.floating)) and float(real).is_integer():
            hint = f"; use {name}={int(real)}"
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
    if length == 0:
        raise ValueError(
            f"{what} has length 0: there are no channels to rotate (RoPE rotates pairs of "
            f"channels along the last axis)"
        )
    if rot <= 0 or rot % 2 or rot > length:
        bound = f"{length}" if what == "x.shape[-1]" else (f"{what} ({length})")
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


def check_layout(layout, blocks: bool = False) -> int:
    """Return 0 for ``"interleaved"``, 1 for ``"half"``.

    With ``blocks`` (RoPE), also ``"half:k"`` for an integer ``k >= 1``: the rotated
    channels cut into ``k`` equal blocks, each paired as ``"half"`` within itself (pair
    ``b * m + j`` of block ``b`` is channels ``b * 2m + j`` and ``b * 2m + m + j``, ``m``
    pairs per block): returns ``k`` (``"half:1"`` is ``"half"``).
    """
    if layout == "interleaved" and type(layout) is str:  # fast path
        return 0
    if blocks and isinstance(layout, str) and layout.startswith("half:"):
        k = layout[5:]
        if not (k.isascii() and k.isdigit() and k[0] != "0"):
            raise ValueError(
                f"layout {layout!r}: 'half:k' needs a block count k, a positive integer "
                f"written in digits (e.g. 'half:2')"
            )
        return int(k)
    if blocks:
        try:
            return check_choice(layout, "layout", LAYOUTS)
        except ValueError:
            raise ValueError(
                f"layout must be one of 'interleaved', 'half' or 'half:k' (k blocks, each "
                f"half-split), got {layout!r}"
            ) from None
    return check_choice(layout, "layout", LAYOUTS)


def pair_channels(code: int, rotary_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The two channels of every rotated pair, int64 ``(rotary_dim // 2,)`` each, for a
    layout code of :func:`check_layout` (``"half:k"``: ``k`` blocks, each half-split)."""
    half = rotary_dim // 2
    if code == 0:
        first = 2 * np.arange(half, dtype=np.int64)
        return first, first + 1
    m = half // code  # pairs per block
    j = np.arange(half, dtype=np.int64)
    first = (j // m) * 2 * m + j % m
    return first, first + m


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
    return f"{name} must be float32 or float64 (or float16, or bfloat16 with ml_dtypes installed)"


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
        raise TypeError(f"{_dtype_hint(name)}, got {dt}; use np.float32 or np.float64")
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
        raise TypeError(f"{_dtype_hint(name)}, got {x.dtype}; use {name}.astype(np.float32)")
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


def check_position_range(lo, hi, name: str = "positions") -> None:
    """Raise unless ``lo`` and ``hi`` (the least and greatest position) are within 2**53."""
    if hi > MAX_POSITION or lo < -MAX_POSITION:
        worst = lo if -lo > hi else hi
        raise ValueError(
            f"{name} must be within 2**53 in magnitude (exact in float64), got {worst}; "
            "positions this large cannot be represented exactly"
        )


def check_positions(positions, name: str = "positions", *, check_range: bool = True) -> np.ndarray:
    """``positions`` as an int64 array: integers (or floats holding integers) within 2**53.

    ``check_range=False`` leaves the range of signed integer positions unchecked: the
    caller then checks it (``check_position_range``) before anything is written.
    """
    _refuse_masked(positions, name)
    arr = np.asarray(positions)
    kind = arr.dtype.kind
    if kind == "O" and arr.size and all(_integer(v) is not None for v in arr.flat):
        # Python ints past int64 (np.asarray([2**70]) is an object array): range-checked
        # exactly here, then int64
        vals = [int(v) for v in arr.flat]
        check_position_range(min(vals), max(vals), name)
        return np.array(vals, dtype=np.int64).reshape(arr.shape)
    if kind not in "iuf":
        raise TypeError(
            f"{name} must be an integer array, got dtype {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.int64)"
        )
    if kind == "f" and arr.dtype.itemsize > 8:
        # long double: rounded to float64 here, 2**53 + 1 or 3 + 2**-60 would pass as
        # another position
        raise TypeError(
            f"{name} must be integers, or floats of float64 or narrower, got dtype "
            f"{arr.dtype}; use np.asarray({name}, dtype=np.int64)"
        )
    if kind == "f":
        a64 = arr.astype(np.float64)  # float16 included: compared without overflow
        bad = ~np.isfinite(a64)
        if bad.any():
            raise ValueError(
                f"{name} must be finite integers, got {a64[bad].flat[0]}; pass integer {name}"
            )
        frac = a64 != np.floor(a64)
        if frac.any():
            raise ValueError(
                f"{name} must hold integers, got {a64[frac].flat[0]}; "
                f"round first, e.g. np.rint({name}).astype(np.int64)"
            )
    else:
        a64 = arr
    if arr.size and (check_range or kind != "i"):
        # Python numbers, not np.abs: -(-2**63) overflows in int64 and 2**63 + 1 in uint64
        cast: type[float] | type[int] = float if kind == "f" else int
        check_position_range(cast(a64.min()), cast(a64.max()), name)
    return arr.astype(np.int64, copy=False) if kind != "f" else a64.astype(np.int64)


def check_offset(offset, n: int, name: str = "offset") -> int:
    """A scalar first position: the positions ``offset .. offset + n - 1`` within 2**53."""
    offset = check_int(offset, name)
    last = offset + max(n - 1, 0)  # positions offset .. last, as a position array holds them
    if abs(offset) > MAX_POSITION or abs(last) > MAX_POSITION:
        raise ValueError(
            f"{name} + length - 1 (the last position) must stay within 2**53 in magnitude, "
            f"got {name}={offset} and length {n}"
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
        "or (batch, seq) positions (several positions per token, as in M-RoPE, need "
        "pair_axes= in apply_rope)"
    )


def all_positions(positions, offsets, seq_len: int) -> np.ndarray:
    """A call's ``(Bp, seq_len)`` int64 positions: ``positions``, or ``offsets`` + arange."""
    if positions is not None:
        return positions
    assert offsets is not None  # resolve_positions returns exactly one of the two
    return offsets[:, None] + np.arange(seq_len, dtype=np.int64)


def resolve_positions(
    positions, offset, *, seq_len: int, batch: int | None, check_range: bool = True
):
    """Return ``(positions2d, offsets)``: exactly one is not None.

    ``positions2d`` is int64 of shape ``(1, seq_len)`` or ``(batch, seq_len)``; ``offsets``
    is int64 of shape ``(1,)`` or ``(batch,)``. ``batch`` is None when the array has no
    batch axis (then per-row offsets and 2-D positions are errors). A 0-d integer array
    offset is one offset, like an int. ``check_range=False``: as in :func:`check_positions`.
    """
    check_positions_or_offset(positions, offset)
    if positions is not None:
        pos = check_positions(positions, check_range=check_range)
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
                f"offset + length - 1 (the last position) must stay within 2**53 in "
                f"magnitude, got offsets from {lo} to {hi} and length {seq_len}"
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


# --------------------------------------------------------------------------- multi-axis RoPE


def check_pair_axes(pair_axes, npairs: int) -> np.ndarray:
    """``pair_axes``: one integer >= 0 per rotated pair (``rotary_dim // 2`` of them), or
    two rows of them, the axes of each pair's first and second channel. Two equal rows are
    returned as one."""
    _refuse_masked(pair_axes, "pair_axes")
    arr = np.asarray(pair_axes)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"pair_axes must be integers (the position axis of each pair), got dtype "
            f"{arr.dtype}; e.g. pair_axes=[0] * 16 + [1] * 24 + [2] * 24"
        )
    if arr.shape not in ((npairs,), (2, npairs)):
        raise ValueError(
            f"pair_axes must have one entry per rotated pair: shape ({npairs},) for "
            f"rotary_dim={2 * npairs} (or (2, {npairs}): the axes of each pair's first and "
            f"second channel), got shape {arr.shape}"
        )
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"pair_axes must be >= 0 (axes of positions), got {int(arr.min())}")
    if arr.ndim == 2 and (arr[0] == arr[1]).all():
        arr = arr[0]
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_inv_freq(inv_freq, npairs: int) -> np.ndarray:
    """``inv_freq``: one finite real frequency per rotated pair, taken as exact float64."""
    _refuse_masked(inv_freq, "inv_freq")
    arr = np.asarray(inv_freq)
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"inv_freq must be real numbers (radians per position, one per pair), got dtype "
            f"{arr.dtype}; pass a float64 array"
        )
    if arr.shape != (npairs,):
        raise ValueError(
            f"inv_freq must have one frequency per rotated pair: shape ({npairs},) for "
            f"rotary_dim={2 * npairs}, got shape {arr.shape}"
        )
    out = arr.astype(np.float64)
    bad = ~np.isfinite(out)
    if bad.any():
        raise ValueError(f"inv_freq must be finite, got {out[bad][0]} at pair {np.argmax(bad)}")
    check_frequencies(out, "inv_freq")
    return np.ascontiguousarray(out)


def resolve_axis_positions(positions, offset, pair_axes, *, seq_len: int, batch: int | None):
    """Positions of several kinds for multi-axis RoPE: int64 ``(n_axes, Bp, seq_len)``.

    ``positions`` is ``(n_axes, seq_len)`` or ``(n_axes, batch, seq_len)``, with an axis for
    every value of ``pair_axes`` (unused axes are allowed); ``offset`` must be left at 0.
    """
    if positions is None:
        raise ValueError(
            "pair_axes needs positions with a leading axis of position kinds, shape "
            "(n_axes, seq) or (n_axes, batch, seq), e.g. the (3, seq) t/h/w positions of M-RoPE"
        )
    if not _is_default_offset(offset):
        raise ValueError(
            "offset cannot be combined with multi-axis positions; add it to positions instead"
        )
    pos = check_positions(positions)
    if pos.ndim not in (2, 3):
        raise ValueError(
            f"with pair_axes, positions must be (n_axes, seq) or (n_axes, batch, seq), got "
            f"shape {pos.shape}"
        )
    n_axes = pos.shape[0]
    need = int(pair_axes.max()) + 1 if pair_axes.size else 0
    if n_axes < need:
        raise ValueError(
            f"pair_axes names axis {need - 1}, but positions has {n_axes} axes (shape "
            f"{pos.shape}); pass positions of shape ({need}, ...)"
        )
    try:
        check_positions_shape(pos.shape[1:], seq_len, batch)
    except ValueError as e:
        raise ValueError(f"positions of every axis (positions[a]): {e}") from None
    return pos.reshape(n_axes, 1, seq_len) if pos.ndim == 2 else pos
