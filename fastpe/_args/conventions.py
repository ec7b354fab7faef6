"""The parsers of the sinusoidal conventions (fairseq, tensor2tensor, timesteps, grids)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._freq import angle_limit_of, check_angles, check_frequencies
from .checks import (
    MAX_POSITION,
    _fill_target,
    _integer,
    _is_default_offset,
    _prepare_target,
    _refuse_masked,
    check_base,
    check_bool,
    check_choice,
    check_float_array,
    check_float_dtype,
    check_int,
    check_layout,
    check_optional_int,
    check_out,
    check_positions,
    is_bfloat16,
    resolve_positions,
)

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


_INT_FAST = 2**1000  # ints below this convert to a finite float64


def check_real(value, name: str, *, positive: bool = False, example: str = "1.0") -> float:
    """A finite real number (not bool), ``> 0`` with ``positive``."""
    t = type(value)  # the common cases first, without the ABCs
    if t is float and math.isfinite(value) and (not positive or value > 0):
        return value
    if t is int and -_INT_FAST < value < _INT_FAST and (not positive or value > 0):
        return float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}; "
            f"pass e.g. {name}={example}"
        )
    try:
        out = float(value)
    except OverflowError:  # an int beyond float64's range
        out = math.inf
    if not math.isfinite(out) or (positive and out <= 0.0):
        what = "finite and > 0" if positive else "finite"
        raise ValueError(f"{name} must be {what}, got {value!r}; pass e.g. {name}={example}")
    return out


def check_real_positions(positions, name: str = "positions") -> np.ndarray:
    """1-D positions: integers (int64, as :func:`check_positions`) or finite floats (float64).

    Float positions (diffusion timesteps; float16, bfloat16, float32 or float64) are kept as
    float64, exactly; like integers they must lie within 2**53 in magnitude.
    """
    _refuse_masked(positions, name)
    arr = np.asarray(positions)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one value per row), got shape {arr.shape}; "
            f"pass np.ravel({name}) or np.atleast_1d({name})"
        )
    bf16 = is_bfloat16(arr.dtype)  # exact in float64, like float16 and float32
    if arr.dtype.kind not in "iufO" and not bf16:
        raise TypeError(
            f"{name} must be real numbers (integers or floats), got dtype {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.float64)"
        )
    if arr.dtype.kind != "f" and not bf16:
        return check_positions(arr, name)
    if arr.dtype.itemsize > 8:
        raise TypeError(
            f"{name} must be float64 or narrower, got {arr.dtype}; "
            f"use np.asarray({name}, dtype=np.float64)"
        )
    a64 = np.ascontiguousarray(arr, dtype=np.float64)  # a copy only where needed
    if not a64.flags.writeable:  # the kernels are compiled for writable arrays (one type)
        a64 = a64.copy()
    if a64.size and not float(np.abs(a64).max()) <= MAX_POSITION:  # NaN fails too
        bad = ~np.isfinite(a64)
        if bad.any():
            raise ValueError(f"{name} must be finite, got {a64[bad][0]}")
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
        e is None for e in extra
    )


def _refuse_extra(convention: str, **given) -> None:
    """Arguments of another convention, given (not None), are an error."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(
                f"{name}={value!r} belongs to another convention than {convention!r}; "
                f"leave {name} out or pass the convention it belongs to"
            )


def check_block_frequencies(blocks, source: str, grid: tuple) -> None:
    """Refuse the blocks' frequencies where they are not finite or too large for exact
    angles (:func:`fastpe._freq.check_frequencies`), and their positions (on the axes of
    ``grid``) where frequencies above 1 make angles beyond what they give exactly
    (:func:`fastpe._freq.angle_limit`), naming ``source``, before anything is written."""
    for b in blocks:
        check_frequencies(b.wh, source)
    for b in blocks:
        if b.axis < 0 or b.npairs == 0:
            continue
        lim = angle_limit_of(b.key, b.wh, b.wl)
        if lim >= MAX_POSITION:
            continue
        if b.positions is not None:
            p = b.positions
            if p.size == 0:
                continue
            if p.dtype.kind == "f":
                far: float | int = float(np.abs(p).max())
            else:
                far = max(abs(int(p.min())), abs(int(p.max())))
        else:
            n = grid[b.axis]
            far = max(abs(b.offset), abs(b.offset + n - 1)) if n else 0
        check_angles(far, b.wh, b.wl, source, lim)


def _check_default(value, default, name: str, convention: str, why: str) -> None:
    if value != default:
        raise ValueError(
            f"{name}={value!r} cannot be combined with convention={convention!r} ({why}); "
            f"leave {name} out, or use fastpe.sinusoidal_embedding for other {name}s"
        )


def _check_no_layout(layout, convention: str) -> None:
    """fairseq and tensor2tensor have their own layout, ``[sin | cos]``: any ``layout`` given
    is refused (the tables' default is None, so an explicit ``"interleaved"`` is seen)."""
    if layout is None:
        return
    check_layout(layout)  # a wrong type is a TypeError first
    raise ValueError(
        f"layout={layout!r} cannot be combined with convention={convention!r} (its layout is "
        "[sin | cos]); leave layout out, or use fastpe.sinusoidal_embedding for other layouts"
    )


def _embed_target(shape: tuple, dt: np.dtype, out, allocate: bool):
    if out is None:
        target = np.empty(shape, dtype=dt) if allocate else None
        return target, target
    return check_out(out, shape, dt), out


def _table_dtype(dtype, out) -> np.dtype:
    if dtype is not None:
        return check_float_dtype(dtype)
    if isinstance(out, np.ndarray):
        return check_float_dtype(out.dtype, "out's dtype")
    return np.dtype(np.float32)


def _add_target(x, out, *, batch_ok: bool = True):
    """Check ``x`` (2-D ``(rows, dim)`` or, with ``batch_ok``, 3-D) and ``out``; nothing written."""
    x = check_float_array(x)
    if x.ndim != 2 and not (batch_ok and x.ndim == 3):
        want = "2-D (rows, dim) or 3-D (batch, rows, dim)" if batch_ok else "2-D (rows, dim)"
        raise ValueError(f"x must be {want}, got shape {x.shape}")
    target, result, _ = _prepare_target(x, out, unit_stride=False)
    return x, target, result


def _seq_positions(n: int, offset, positions, convention: str):
    """``(positions or None, offset)`` of an integer sequence of ``n`` rows."""
    if offset is not None and type(offset) is not int and np.ndim(offset) > 0:
        raise ValueError(
            f"offset must be a single int with convention={convention!r}, got an array of "
            f"shape {np.shape(offset)}: one first position per batch row is accepted with "
            "the transformer convention only; pass positions=(seq,) or add each batch row "
            "in its own call"
        )
    pos2d, offs = resolve_positions(
        positions, 0 if offset is None else offset, seq_len=n, batch=None
    )
    if pos2d is not None:
        return pos2d[0], 0
    return None, int(offs[0])


def convention_blocks(
    conv: int,
    *,
    n: int,
    dim: int,
    base,
    layout,
    offset,
    positions,
    padding_idx,
    min_timescale,
    max_timescale,
    start_index,
    add: bool,
):
    """Blocks and zero rows of a 1-D ``sinusoidal_table``/``add_sinusoidal`` convention."""
    name = CONVENTIONS[conv]
    if conv == 1:  # fairseq
        _refuse_extra(
            name, min_timescale=min_timescale, max_timescale=max_timescale, start_index=start_index
        )
        _check_default(
            check_base(base), 10000.0, "base", name, "get_embedding hard-codes log(10000)"
        )
        _check_no_layout(layout, name)
        if dim in (2, 3):
            raise ValueError(
                f"dim must be 1 or >= 4 for convention='fairseq', got {dim}: fairseq divides "
                "by dim // 2 - 1, zero for dims 2 and 3 (ZeroDivisionError there)"
            )
        pad = check_optional_int(padding_idx, "padding_idx", minimum=0)
        from_pad = offset is None and add and positions is None
        if from_pad:
            # the module's forward: positions from padding_idx + 1, its padding_idx 0 when
            # None is given
            offset = (0 if pad is None else pad) + 1
        try:
            pos, off = _seq_positions(n, offset, positions, name)
        except ValueError as exc:
            if not from_pad:
                raise
            raise ValueError(
                f"padding_idx={pad!r}: the module's positions run from padding_idx + 1 to "
                f"padding_idx + {n} (x's {n} rows), beyond 2**53 in magnitude; pass a smaller "
                "padding_idx"
            ) from exc
        npairs = dim // 2  # dim 1: no pairs, fairseq's zero column alone
        zero_rows = None
        if pad is not None:
            p = pos if pos is not None else off + np.arange(n, dtype=np.int64)
            zero_rows = np.flatnonzero(p == pad)
        if npairs == 0:
            return [], zero_rows
        wh, wl, key = _spacing().spaced_dd(npairs, FAIRSEQ_BASE, 1.0, 1.0)
        return [Block(0, 0, npairs, _SIN_COS, wh, wl, key, pos, off)], zero_rows
    # tensor2tensor
    _refuse_extra(name, padding_idx=padding_idx)
    _check_default(check_base(base), 10000.0, "base", name, "use max_timescale")
    _check_no_layout(layout, name)
    if start_index is not None:
        start = check_int(start_index, "start_index")
        if offset is not None and not _is_default_offset(offset):
            raise ValueError("give either start_index or offset, not both; they are the same")
        if positions is not None:
            raise ValueError("give either start_index or positions, not both")
        offset = start
    pos, off = _seq_positions(n, offset, positions, name)
    blocks = t2t_blocks(dim // 2, 0, 0, min_timescale, max_timescale, pos, off, nd=False)
    return blocks, None


def _t2t_timescales(min_timescale, max_timescale) -> tuple[float, float]:
    lo = 1.0 if min_timescale is None else check_real(min_timescale, "min_timescale", positive=True)
    hi = (
        1.0e4
        if max_timescale is None
        else check_real(max_timescale, "max_timescale", positive=True, example="1.0e4")
    )
    return lo, hi


def t2t_blocks(
    npairs: int, axis: int, col: int, min_timescale, max_timescale, pos, off, *, nd: bool
) -> list:
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


_SPACING: list = []


def _spacing():
    """:mod:`fastpe._spacing`, imported on first use (once: an import statement per call
    costs a microsecond)."""
    if not _SPACING:
        from .. import _spacing

        _SPACING.append(_spacing)
    return _SPACING[0]


def parse_convention(
    x,
    seq_len,
    dim,
    *,
    convention,
    base,
    offset,
    positions,
    layout,
    dtype,
    out,
    padding_idx,
    min_timescale,
    max_timescale,
    start_index,
    allocate: bool = True,
) -> EmbedCall:
    """``sinusoidal_table`` (``x`` None) or ``add_sinusoidal`` with convention fairseq or t2t.

    Dims may be odd here (a zero column at the end, as the originals pad).
    """
    if convention is None:
        given = [
            n
            for n, v in (
                ("padding_idx", padding_idx),
                ("min_timescale", min_timescale),
                ("max_timescale", max_timescale),
                ("start_index", start_index),
            )
            if v is not None
        ]
        raise ValueError(
            f"{given[0]} belongs to a convention: pass convention='fairseq' (padding_idx) or "
            "convention='tensor2tensor' (min_timescale, max_timescale, start_index)"
        )
    conv = check_convention(convention)
    if conv == 0:
        _refuse_extra(
            "transformer",
            padding_idx=padding_idx,
            min_timescale=min_timescale,
            max_timescale=max_timescale,
            start_index=start_index,
        )
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
        conv,
        n=n,
        dim=dim,
        base=base,
        layout=layout,
        offset=offset,
        positions=positions,
        padding_idx=padding_idx,
        min_timescale=min_timescale,
        max_timescale=max_timescale,
        start_index=start_index,
        add=add,
    )
    check_block_frequencies(
        blocks, f"min_timescale={min_timescale!r}, max_timescale={max_timescale!r}", (n,)
    )
    if add:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((n, dim), dt, out, allocate)
    return EmbedCall(
        target=target,
        result=result,
        dtype=dt,
        dim=dim,
        grid=(n,),
        lead=0,
        blocks=blocks,
        zero_rows=zero_rows,
        add=add,
    )


def parse_embedding(
    x,
    positions,
    dim,
    *,
    base,
    shift,
    scale,
    frequencies,
    order,
    dtype,
    out,
    allocate: bool = True,
    name: str = "positions",
) -> EmbedCall:
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
        raise ValueError(f"{name} must have length {x.shape[-2]} (x.shape[-2], the rows), got {n}")
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
            raise ValueError(f"frequencies must have shape ({npairs},) (dim // 2), got {f.shape}")
        if not np.isfinite(f).all():
            raise ValueError("frequencies must be finite")
        wh = np.ascontiguousarray(f)
        wl = np.zeros_like(wh)
        wh.flags.writeable = wl.flags.writeable = False  # as the cached sets: one compile
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
    blocks = [Block(0, 0, npairs, order_i, wh, wl, key, pos, 0)] if npairs else []
    if frequencies is not None:
        source = "frequencies"
    elif name == "timesteps":  # parse_timestep's arguments
        source = f"max_period={base!r}, downscale_freq_shift={shift!r}, scale={scale!r}"
    else:
        source = f"base={base!r}, shift={shift!r}, scale={scale!r}"
    check_block_frequencies(blocks, source, (n,))
    if x is not None:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((n, dim), dt, out, allocate)
    if target is not None and np.may_share_memory(pos, target):
        pos = pos.copy()  # the kernels would overwrite positions not yet read
        for blk in blocks:
            blk.positions = pos
    return EmbedCall(
        target=target,
        result=result,
        dtype=dt,
        dim=dim,
        grid=(n,),
        lead=0,
        blocks=blocks,
        add=x is not None,
    )


def parse_timestep(
    x,
    timesteps,
    dim,
    *,
    flip_sin_to_cos,
    downscale_freq_shift,
    scale,
    max_period,
    dtype,
    out,
    allocate: bool = True,
) -> EmbedCall:
    """diffusers' ``get_timestep_embedding`` arguments (``x`` None) or its ``add_`` form."""
    flip = check_bool(flip_sin_to_cos, "flip_sin_to_cos")
    shift = check_real(downscale_freq_shift, "downscale_freq_shift", example="1")
    sc = check_real(scale, "scale", example="1")
    period = check_real(max_period, "max_period", positive=True, example="10000")
    if x is not None:
        x = check_float_array(x)
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
    return parse_embedding(
        x,
        timesteps,
        dim,
        base=period,
        shift=shift,
        scale=sc,
        frequencies=None,
        order=ORDERS[_COS_SIN if flip else _SIN_COS],
        dtype=dtype,
        out=out,
        allocate=allocate,
        name="timesteps",
    )


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


def parse_grid(
    x,
    grid_shape,
    dim,
    *,
    cls_token,
    convention,
    base,
    min_timescale,
    max_timescale,
    dtype,
    out,
    allocate: bool = True,
) -> EmbedCall:
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
            blocks.append(Block(nd - 1 - k, k * width, width // 2, _SIN_COS, wh, wl, key, None, 0))
    else:  # tensor2tensor add_timing_signal_nd: axis d at channels d*2n, zeros after
        _check_default(check_base(base), 10000.0, "base", "tensor2tensor", "use max_timescale")
        npairs = dim // (2 * nd)
        for d in range(nd):
            blocks += t2t_blocks(
                npairs, d, 2 * npairs * d, min_timescale, max_timescale, None, 0, nd=True
            )
    check_block_frequencies(
        blocks,
        f"base={base!r}, min_timescale={min_timescale!r}, max_timescale={max_timescale!r}",
        grid,
    )
    if x is not None:
        target, result = _fill_target(x, target, result, True)
    else:
        target, result = _embed_target((rows, dim), dt, out, allocate)
    return EmbedCall(
        target=target,
        result=result,
        dtype=dt,
        dim=dim,
        grid=grid,
        lead=int(cls),
        blocks=blocks,
        add=x is not None,
    )
