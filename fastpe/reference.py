"""Pure-NumPy reference implementations: the oracle every fast path is checked against.

The functions here take the same arguments, validate them the same way and return the same
results as the fast ones in :mod:`fastpe`, written as plainly as NumPy allows: whole-array
float64 temporaries, no Numba. Tests, benchmarks and ``fastpe compare`` all compare against
this module; users can too.

Angles are exact: each frequency ``base**(-2i/dim)`` is carried as a double-double
``hi + lo`` (see ``fastpe._freq``) and the angle ``p * (hi + lo)`` is formed with an
error-free product, so ``sin`` and ``cos`` are right to about 1 float64 ulp at any position
below 2**53, instead of being off by ``p * 2**-53`` as with a plain float64 angle.

Examples
--------
>>> import numpy as np
>>> from fastpe import reference
>>> reference.sinusoidal_table(2, 4, dtype=np.float64).round(4)
array([[0.    , 1.    , 0.    , 1.    ],
       [0.8415, 0.5403, 0.01  , 1.    ]])
"""

from __future__ import annotations

import numpy as np

from ._args import (
    EmbedCall,
    all_positions,
    pair_channels,
    parse_add,
    parse_convention,
    parse_embedding,
    parse_grid,
    parse_rope,
    parse_table,
    parse_timestep,
    plain_convention,
)
from ._args.calls import parse_rope_qk
from ._freq import inv_freq_dd, sincos_dd

__all__ = [
    "add_grid_sinusoidal",
    "add_sinusoidal",
    "add_sinusoidal_embedding",
    "add_timestep_embedding",
    "apply_rope",
    "apply_rope_qk",
    "grid_sinusoidal",
    "sincos",
    "sinusoidal_embedding",
    "sinusoidal_table",
    "timestep_embedding",
]


def sincos(positions, hi: np.ndarray, lo: np.ndarray | None = None):
    """Return ``sin, cos`` of ``positions[..., None] * (hi + lo)`` in float64.

    ``positions`` are integers (exact in float64 below 2**53); ``hi + lo`` a double-double
    frequency vector (``lo`` defaults to zero). Output shape ``positions.shape + hi.shape``.
    """
    p = np.asarray(positions, dtype=np.float64)[..., None]
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.zeros_like(hi) if lo is None else np.asarray(lo, dtype=np.float64)
    return sincos_dd(p, hi, lo, np.sin, np.cos)


def round_to(a, dtype) -> np.ndarray:
    """float64 ``a`` rounded once, to nearest even, into ``dtype``.

    NumPy's own cast does this for float16/32/64; ml_dtypes casts float64 to bfloat16
    through float32 (two roundings), so bfloat16 goes through float32 rounded to odd, which
    the second rounding turns into the correctly rounded value.
    """
    a = np.asarray(a, dtype=np.float64)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return a.astype(dt)
    f = a.astype(np.float32)
    back = f.astype(np.float64)
    bits = f.view(np.uint32)
    fix = (back != a) & ((bits & 1) == 0) & ~np.isnan(a)
    step = np.where(np.abs(a) > np.abs(back), 1, -1)
    bits = np.where(fix, (bits.astype(np.int64) + step).astype(np.uint32), bits)
    return bits.view(np.float32).astype(dt)


def _table64(pos: np.ndarray, dim: int, base: float, layout: int) -> np.ndarray:
    """float64 table, shape ``pos.shape + (dim,)``."""
    hi, lo = inv_freq_dd(base, dim)
    s, c = sincos(pos, hi, lo)
    tab = np.empty((*pos.shape, dim), dtype=np.float64)
    if layout == 0:
        tab[..., 0::2] = s
        tab[..., 1::2] = c
    else:
        tab[..., : dim // 2] = s
        tab[..., dim // 2 :] = c
    return tab


def sinusoidal_table(
    seq_len=None,
    dim=None,
    *,
    base=10000.0,
    offset=0,
    positions=None,
    layout=None,
    dtype=None,
    out=None,
    convention=None,
    padding_idx=None,
    min_timescale=None,
    max_timescale=None,
    start_index=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.sinusoidal_table` (same arguments, same result)."""
    if not plain_convention(convention, padding_idx, min_timescale, max_timescale, start_index):
        return _embed(
            parse_convention(
                None,
                seq_len,
                dim,
                convention=convention,
                base=base,
                offset=offset,
                positions=positions,
                layout=layout,
                dtype=dtype,
                out=out,
                padding_idx=padding_idx,
                min_timescale=min_timescale,
                max_timescale=max_timescale,
                start_index=start_index,
                allocate=False,
            )
        )
    call = parse_table(
        seq_len,
        dim,
        base=base,
        offset=offset,
        positions=positions,
        layout=layout,
        dtype=dtype,
        out=out,
        allocate=False,
    )
    pos = all_positions(call.positions, call.offsets, call.seq_len)[0]
    tab = round_to(_table64(pos, call.dim, call.base, call.layout), call.dtype)
    target, result = call.target, call.result
    if target is None or result is None:  # no out: the table itself
        return tab
    target[...] = tab
    return result


def add_sinusoidal(
    x,
    /,
    *,
    base=10000.0,
    offset=None,
    positions=None,
    layout=None,
    out=None,
    convention=None,
    padding_idx=None,
    min_timescale=None,
    max_timescale=None,
    start_index=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.add_sinusoidal`: ``x + table`` rounded once."""
    if not plain_convention(convention, padding_idx, min_timescale, max_timescale, start_index):
        return _embed(
            parse_convention(
                x,
                None,
                None,
                convention=convention,
                base=base,
                offset=offset,
                positions=positions,
                layout=layout,
                dtype=None,
                out=out,
                padding_idx=padding_idx,
                min_timescale=min_timescale,
                max_timescale=max_timescale,
                start_index=start_index,
            )
        )
    offset = 0 if offset is None else offset
    call = parse_add(x, base=base, offset=offset, positions=positions, layout=layout, out=out)
    target = call.target  # holds x's data
    pos2d = all_positions(call.positions, call.offsets, target.shape[-2])
    tab = _table64(pos2d, call.dim, call.base, call.layout)  # (Bp, S, dim)
    if target.ndim == 2:
        tab = tab[0]
    target[...] = round_to(target.astype(np.float64) + tab, target.dtype)
    return call.result


def apply_rope(
    x,
    /,
    *,
    positions=None,
    offset=0,
    base=10000.0,
    layout="interleaved",
    rotary_dim=None,
    seq_axis=None,
    inverse=False,
    scaling=None,
    max_position_embeddings=None,
    seq_len=None,
    pair_axes=None,
    inv_freq=None,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.apply_rope`.

    Pairs ``(x1, x2)`` (``layout="interleaved"``: channels ``2i, 2i+1``; ``"half"``:
    ``i, i + rotary_dim/2``; ``"half:k"``: ``b*2m + j, b*2m + m + j`` for pair ``b*m + j``,
    ``m = rotary_dim / (2k)``) become ``(x1 cos - x2 sin, x2 cos + x1 sin)`` with angle
    ``p * base**(-2i/rotary_dim)`` (or the ``scaling`` frequencies of
    :func:`fastpe.scaling.rope_frequencies`, with cos and sin times the attention factor),
    computed in float64 and rounded once (to nearest even, into x's dtype). Multi-axis
    (``pair_axes``): pair ``i`` takes its position from ``positions[pair_axes[i]]``; with
    two rows, ``x1`` takes the angle of axis ``pair_axes[0, i]`` and ``x2`` that of
    ``pair_axes[1, i]``: ``(x1 c - x2 s, x2 c2 + x1 s2)``. ``inv_freq``: the frequencies as
    given.
    """
    call = parse_rope(
        x,
        positions=positions,
        offset=offset,
        base=base,
        layout=layout,
        rotary_dim=rotary_dim,
        seq_axis=seq_axis,
        inverse=inverse,
        out=out,
        scaling=scaling,
        max_position_embeddings=max_position_embeddings,
        seq_len=seq_len,
        pair_axes=pair_axes,
        inv_freq=inv_freq,
    )
    view = call.view  # (B, S, H, D), a view of call.target
    rot = call.rotary_dim
    half = rot // 2
    if call.pair_axes is None:
        pos = all_positions(call.positions, call.offsets, view.shape[1])
        s, c = sincos(pos, call.wh, call.wl)  # (Bp, S, half)
        s2, c2 = s, c
    else:  # every pair at the position of its own axis: (n_axes, Bp, S, half), picked
        s_all, c_all = sincos(call.axis_positions, call.wh, call.wl)
        pick = np.arange(half)
        rows = call.pair_axes if call.pair_axes.ndim == 2 else call.pair_axes[None]
        s = s_all[rows[0], :, :, pick].transpose(1, 2, 0)
        c = c_all[rows[0], :, :, pick].transpose(1, 2, 0)
        # the second channel's own axis (two rows of pair_axes), else the first's
        s2 = s_all[rows[-1], :, :, pick].transpose(1, 2, 0)
        c2 = c_all[rows[-1], :, :, pick].transpose(1, 2, 0)
    factor = call.attention_factor
    if call.inverse:
        s, s2 = -s, -s2
        factor = 1.0 / factor
    if factor != 1.0:
        s, c, s2, c2 = s * factor, c * factor, s2 * factor, c2 * factor
    s, c, s2, c2 = (a[:, :, None, :] for a in (s, c, s2, c2))
    i1: slice | np.ndarray
    i2: slice | np.ndarray
    if call.layout == 0:
        i1, i2 = slice(0, rot, 2), slice(1, rot, 2)
    elif call.layout == 1:
        i1, i2 = slice(0, half), slice(half, rot)
    else:  # "half:k": k blocks, each half-split
        i1, i2 = pair_channels(call.layout, rot)
    x1 = view[..., i1].astype(np.float64)
    x2 = view[..., i2].astype(np.float64)
    view[..., i1] = round_to(x1 * c - x2 * s, view.dtype)
    view[..., i2] = round_to(x2 * c2 + x1 * s2, view.dtype)
    return call.result


def apply_rope_qk(q, k, /, *, out=None, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """Reference for :func:`fastpe.apply_rope_qk`: :func:`apply_rope` on ``q``, then on ``k``.

    Both arrays (and ``out``) are checked together first, as the fast function checks them,
    so that a call that raises writes nothing; ``kwargs`` are those of :func:`apply_rope`.
    """
    parse_rope_qk(q, k, out=out, copy_in=False, **kwargs)
    q_out, k_out = (None, None) if out is None else out
    return apply_rope(q, out=q_out, **kwargs), apply_rope(k, out=k_out, **kwargs)


# --------------------------------------------------------------------------- conventions


def block_values(block, length: int) -> np.ndarray:
    """float64 ``(length, 2*npairs)`` values of one block of a convention, in its order.

    Positions are the block's own (integers or floats, exact in float64) or ``offset ..
    offset + length - 1``; angles are exact (see :func:`sincos`).
    """
    pos = block.positions
    if pos is None:
        pos = block.offset + np.arange(length, dtype=np.int64)
    s, c = sincos(pos, block.wh, block.wl)
    n = block.npairs
    tab = np.empty((length, 2 * n), dtype=np.float64)
    if block.order == 0:
        tab[:, 0::2] = s
        tab[:, 1::2] = c
    elif block.order == 1:
        tab[:, :n] = s
        tab[:, n:] = c
    else:
        tab[:, :n] = c
        tab[:, n:] = s
    return tab


def grid_view(a: np.ndarray, grid: tuple, lead: int) -> np.ndarray:
    """``a[..., lead:, :]`` with its row axis split into the grid's axes (a view)."""
    rows = a[..., lead:, :]
    v = rows.reshape(*rows.shape[:-2], *grid, rows.shape[-1])
    if v.size and not np.shares_memory(v, a):  # splitting one axis never copies
        raise AssertionError("grid view copied")
    return v


def axis_shape(nd: int, axis: int, length: int, width: int) -> tuple:
    """Shape that broadcasts one axis's table over an ``nd``-D grid."""
    shape = [1] * nd + [width]
    shape[axis] = length
    return tuple(shape)


def embed64(call: EmbedCall) -> np.ndarray:
    """The float64 ``(rows, dim)`` values of a checked convention call."""
    nd = len(call.grid)
    rows = call.lead + int(np.prod(call.grid, dtype=np.int64))
    full = np.zeros((rows, call.dim), dtype=np.float64)
    g = grid_view(full, call.grid, call.lead)
    for b in call.blocks:
        w = 2 * b.npairs
        tab = block_values(b, call.grid[b.axis])
        g[..., b.col : b.col + w] = tab.reshape(axis_shape(nd, b.axis, tab.shape[0], w))
    if call.zero_rows is not None and call.zero_rows.size:
        full[call.lead + call.zero_rows] = 0.0
    return full


def _embed(call: EmbedCall) -> np.ndarray:
    """Finish a convention call: write (or add) the values, rounded once."""
    full = embed64(call)
    t, result = call.target, call.result
    if t is None:  # a table, no out: allocate=False
        return round_to(full, call.dtype)
    assert result is not None
    if call.add:
        t[...] = round_to(t.astype(np.float64) + full, t.dtype)
    else:
        t[...] = round_to(full, t.dtype)
    return result


def sinusoidal_embedding(
    positions,
    dim,
    *,
    base=10000.0,
    shift=0.0,
    scale=1.0,
    frequencies=None,
    order="interleaved",
    dtype=None,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.sinusoidal_embedding`."""
    return _embed(
        parse_embedding(
            None,
            positions,
            dim,
            base=base,
            shift=shift,
            scale=scale,
            frequencies=frequencies,
            order=order,
            dtype=dtype,
            out=out,
            allocate=False,
        )
    )


def add_sinusoidal_embedding(
    x,
    /,
    positions,
    *,
    base=10000.0,
    shift=0.0,
    scale=1.0,
    frequencies=None,
    order="interleaved",
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.add_sinusoidal_embedding`."""
    return _embed(
        parse_embedding(
            x,
            positions,
            None,
            base=base,
            shift=shift,
            scale=scale,
            frequencies=frequencies,
            order=order,
            dtype=None,
            out=out,
        )
    )


def timestep_embedding(
    timesteps,
    dim,
    *,
    flip_sin_to_cos=False,
    downscale_freq_shift=1,
    scale=1,
    max_period=10000,
    dtype=None,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.timestep_embedding`."""
    return _embed(
        parse_timestep(
            None,
            timesteps,
            dim,
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
            dtype=dtype,
            out=out,
            allocate=False,
        )
    )


def add_timestep_embedding(
    x,
    /,
    timesteps,
    *,
    flip_sin_to_cos=False,
    downscale_freq_shift=1,
    scale=1,
    max_period=10000,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.add_timestep_embedding`."""
    return _embed(
        parse_timestep(
            x,
            timesteps,
            None,
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
            dtype=None,
            out=out,
        )
    )


def grid_sinusoidal(
    grid_shape,
    dim,
    *,
    cls_token=False,
    convention="mae",
    base=10000.0,
    min_timescale=None,
    max_timescale=None,
    dtype=None,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.grid_sinusoidal`."""
    return _embed(
        parse_grid(
            None,
            grid_shape,
            dim,
            cls_token=cls_token,
            convention=convention,
            base=base,
            min_timescale=min_timescale,
            max_timescale=max_timescale,
            dtype=dtype,
            out=out,
            allocate=False,
        )
    )


def add_grid_sinusoidal(
    x,
    /,
    grid_shape,
    *,
    cls_token=False,
    convention="mae",
    base=10000.0,
    min_timescale=None,
    max_timescale=None,
    out=None,
) -> np.ndarray:
    """Reference for :func:`fastpe.add_grid_sinusoidal`."""
    return _embed(
        parse_grid(
            x,
            grid_shape,
            None,
            cls_token=cls_token,
            convention=convention,
            base=base,
            min_timescale=min_timescale,
            max_timescale=max_timescale,
            dtype=None,
            out=out,
        )
    )
