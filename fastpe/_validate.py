"""Argument checks shared by the public functions and the reference.

Every check runs before anything is written, so a call that raises leaves its arrays as
they were. Messages name the bad value and, where there is one, the fix.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

LAYOUTS = ("interleaved", "half")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MAX_POSITION = 2**53  # positions are converted to float64 exactly below this


def check_int(value, name: str, *, minimum: int | None = None) -> int:
    if type(value) is int and (minimum is None or value >= minimum):  # fast path
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    value = operator.index(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_dim(dim, name: str = "dim") -> int:
    dim = check_int(dim, name)
    if dim <= 0 or dim % 2:
        raise ValueError(f"{name} must be a positive even integer (pairs of channels), got {dim}")
    return dim


def check_base(base) -> float:
    if type(base) is float and 0.0 < base < float("inf"):  # fast path
        return base
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real):
        raise TypeError(f"base must be a real number, got {base!r}")
    base = float(base)
    if not np.isfinite(base) or base <= 0.0:
        raise ValueError(f"base must be finite and > 0, got {base}")
    return base


def check_layout(layout) -> int:
    """Return 0 for ``"interleaved"``, 1 for ``"half"``."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be 'interleaved' or 'half', got {layout!r}")
    return LAYOUTS.index(layout)


def check_float_dtype(dtype, name: str = "dtype") -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if dt not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be float32 or float64, got {dt}; use np.float32 or np.float64"
        )
    return dt


def check_float_array(x, name: str = "x") -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(
            f"{name} must be a numpy.ndarray, got {type(x).__name__}; "
            f"use np.asarray({name}) (for a torch CPU tensor, tensor.numpy() shares its memory)"
        )
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be float32 or float64, got {x.dtype}; use {name}.astype(np.float32)"
        )
    if not x.dtype.isnative:
        raise TypeError(f"{name} must be in native byte order, got {x.dtype.str}")
    return x


def check_writeable(a: np.ndarray, name: str) -> None:
    if not a.flags.writeable:
        raise ValueError(
            f"{name} is read-only; pass a writeable array (e.g. {name}.copy()) or out=None"
        )


def check_positions(positions, name: str = "positions") -> np.ndarray:
    """Return ``positions`` as an int64 array; floats must hold finite integers."""
    arr = np.asarray(positions)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and arr.max() > MAX_POSITION:
            raise ValueError(f"{name} must be <= 2**53 in magnitude, got {arr.max()}")
        out = arr.astype(np.int64, copy=False)
    elif arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"{name} must be finite integers, got {arr[bad].flat[0]}")
        frac = arr != np.floor(arr)
        if frac.any():
            raise ValueError(
                f"{name} must hold integers, got {arr[frac].flat[0]}; "
                f"round first, e.g. np.rint({name}).astype(np.int64)"
            )
        if arr.size and np.abs(arr).max() > MAX_POSITION:
            raise ValueError(f"{name} must be <= 2**53 in magnitude, got {np.abs(arr).max()}")
        out = arr.astype(np.int64)
    else:
        raise TypeError(
            f"{name} must be an integer array, got dtype {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.int64)"
        )
    if out.size and np.abs(out).max() > MAX_POSITION:
        raise ValueError(f"{name} must be <= 2**53 in magnitude, got {np.abs(out).max()}")
    return out


def check_offset(offset, n: int, name: str = "offset") -> int:
    offset = check_int(offset, name)
    if abs(offset) > MAX_POSITION or abs(offset + n) > MAX_POSITION:
        raise ValueError(f"{name} + length must stay within 2**53 in magnitude, got {offset}")
    return offset


def same_view(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` and ``b`` are the same elements of the same memory."""
    if a is b:
        return True
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def check_out(out, shape: tuple, dtype: np.dtype, *, x: np.ndarray | None = None) -> np.ndarray:
    """Check a user's ``out`` array: shape, dtype, writeable, no partial overlap with ``x``."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {out.shape}")
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype}, got {out.dtype}")
    if not out.dtype.isnative:
        raise TypeError(f"out must be in native byte order, got {out.dtype.str}")
    check_writeable(out, "out")
    if x is not None and not same_view(out, x) and np.shares_memory(out, x):
        raise ValueError(
            "out overlaps x without being x; pass out=x to work in place, "
            "or an array that shares no memory with x"
        )
    return out


def check_no_self_overlap(a: np.ndarray, name: str) -> None:
    """Refuse arrays whose elements alias each other (e.g. from ``np.broadcast_to``)."""
    if a.size == 0:
        return
    for n, st in zip(a.shape, a.strides):
        if n > 1 and st == 0:
            raise ValueError(
                f"{name} has a zero stride (a broadcast view): its elements share memory and "
                f"cannot be written in place; pass {name}.copy()"
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
            f"got {seq_axis} for shape {tuple(shape)}"
        )
    return axis


def check_positions_or_offset(positions, offset) -> None:
    """Positions and a non-default offset are exclusive."""
    if positions is not None and not (
        isinstance(offset, numbers.Integral) and not isinstance(offset, bool) and offset == 0
    ):
        raise ValueError("give either positions or offset, not both")


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
    raise ValueError(f"positions must be 1-D or 2-D, got {len(shape)}-D shape {shape}")


def resolve_positions(positions, offset, *, seq_len: int, batch: int | None):
    """Return ``(positions2d, offsets)``: exactly one is not None.

    ``positions2d`` is int64 of shape ``(1, seq_len)`` or ``(batch, seq_len)``; ``offsets``
    is int64 of shape ``(1,)`` or ``(batch,)``. ``batch`` is None when the array has no
    batch axis (then per-row offsets and 2-D positions are errors).
    """
    check_positions_or_offset(positions, offset)
    if positions is not None:
        pos = check_positions(positions)
        check_positions_shape(pos.shape, seq_len, batch)
        return (pos.reshape(1, seq_len) if pos.ndim == 1 else pos), None
    if type(offset) is int or isinstance(offset, (numbers.Integral, np.integer)) or (
        np.ndim(offset) == 0
    ):
        off = check_offset(offset, seq_len)
        return None, np.array([off], dtype=np.int64)
    arr = np.asarray(offset)
    if arr.ndim != 1:
        raise ValueError(f"offset must be an int or a 1-D array of ints, got shape {arr.shape}")
    if batch is None:
        raise ValueError(
            "offset has one value per batch row, but this array has no batch axis; "
            "pass a single int"
        )
    if arr.shape[0] != batch:
        raise ValueError(
            f"offset must have one value per batch row: length {batch}, got {arr.shape[0]}"
        )
    offs = check_positions(arr, name="offset")
    if offs.size and (np.abs(offs).max() + seq_len > MAX_POSITION):
        raise ValueError("offset + length must stay within 2**53 in magnitude")
    return None, offs


def parse_add(x, *, base, offset, positions, layout, out):
    """Check every argument of ``add_sinusoidal`` (fast and reference alike).

    Returns ``(x, dim, base, layout_code, positions2d, offsets, in_place)``; nothing is
    written. ``in_place`` is True for ``out=x``; another ``out`` has been checked.
    """
    x = check_float_array(x)
    if x.ndim not in (2, 3):
        raise ValueError(f"x must be 2-D (seq, dim) or 3-D (batch, seq, dim), got shape {x.shape}")
    dim = check_dim(x.shape[-1], "x.shape[-1] (dim)")
    base = check_base(base)
    lay = check_layout(layout)
    batch = x.shape[0] if x.ndim == 3 else None
    pos2d, offs = resolve_positions(positions, offset, seq_len=x.shape[-2], batch=batch)
    in_place = out is not None and same_view(out, x)
    if in_place:
        check_writeable(x, "x")
        check_no_self_overlap(x, "x")
    elif out is not None:
        check_out(out, x.shape, x.dtype, x=x)
        check_no_self_overlap(out, "out")
    return x, dim, base, lay, pos2d, offs, in_place
