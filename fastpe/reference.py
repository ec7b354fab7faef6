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

from . import _validate as v
from ._freq import inv_freq_dd, sincos_dd
from ._rope_args import parse_rope

__all__ = ["add_sinusoidal", "apply_rope", "sincos", "sinusoidal_table"]


def sincos(positions, hi: np.ndarray, lo: np.ndarray | None = None):
    """Return ``sin, cos`` of ``positions[..., None] * (hi + lo)`` in float64.

    ``positions`` are integers (exact in float64 below 2**53); ``hi + lo`` a double-double
    frequency vector (``lo`` defaults to zero). Output shape ``positions.shape + hi.shape``.
    """
    p = np.asarray(positions, dtype=np.float64)[..., None]
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.zeros_like(hi) if lo is None else np.asarray(lo, dtype=np.float64)
    return sincos_dd(p, hi, lo, np.sin, np.cos)


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


def _table_positions(seq_len, positions, offset):
    if positions is None:
        if seq_len is None:
            raise TypeError("seq_len is required when positions is not given")
        n = v.check_int(seq_len, "seq_len", minimum=0)
    else:
        n = len(np.asarray(positions)) if np.ndim(positions) == 1 else -1
        if n < 0:
            raise ValueError(
                f"positions must be 1-D for a table, got shape {np.shape(positions)}"
            )
        if seq_len is not None and v.check_int(seq_len, "seq_len", minimum=0) != n:
            raise ValueError(f"seq_len={seq_len} does not match len(positions)={n}")
    pos2d, offs = v.resolve_positions(positions, offset, seq_len=n, batch=None)
    return n, pos2d, offs


def _table_dtype(dtype, out):
    if dtype is None:
        return out.dtype if isinstance(out, np.ndarray) else np.dtype(np.float32)
    dt = v.check_float_dtype(dtype)
    return dt


def sinusoidal_table(seq_len=None, dim=None, *, base=10000.0, offset=0, positions=None,
                     layout="interleaved", dtype=None, out=None) -> np.ndarray:
    """Reference for :func:`fastpe.sinusoidal_table` (same arguments, same result)."""
    dim = v.check_dim(dim)
    base = v.check_base(base)
    lay = v.check_layout(layout)
    n, pos2d, offs = _table_positions(seq_len, positions, offset)
    dt = _table_dtype(dtype, out)
    dt = v.check_float_dtype(dt)
    if out is not None:
        v.check_out(out, (n, dim), dt)
    pos = pos2d[0] if pos2d is not None else offs[0] + np.arange(n, dtype=np.int64)
    tab = _table64(pos, dim, base, lay).astype(dt)
    if out is None:
        return tab
    out[...] = tab
    return out


def add_sinusoidal(x, /, *, base=10000.0, offset=0, positions=None, layout="interleaved",
                   out=None) -> np.ndarray:
    """Reference for :func:`fastpe.add_sinusoidal`: ``x + table`` rounded once."""
    x, dim, base, lay, pos2d, offs, _ = v.parse_add(x, base=base, offset=offset,
                                                    positions=positions, layout=layout,
                                                    out=out)
    seq_len = x.shape[-2]
    if pos2d is None:
        pos2d = offs[:, None] + np.arange(seq_len, dtype=np.int64)
    tab = _table64(pos2d, dim, base, lay)  # (Bp, S, dim)
    if x.ndim == 2:
        tab = tab[0]
    res = (x.astype(np.float64) + tab).astype(x.dtype)
    if out is None:
        return res
    out[...] = res
    return out


def apply_rope(x, /, *, positions=None, offset=0, base=10000.0, layout="interleaved",
               rotary_dim=None, seq_axis=None, inverse=False, scaling=None,
               max_position_embeddings=None, seq_len=None, out=None) -> np.ndarray:
    """Reference for :func:`fastpe.apply_rope`.

    Pairs ``(x1, x2)`` (``layout="interleaved"``: channels ``2i, 2i+1``; ``"half"``:
    ``i, i + rotary_dim/2``) become ``(x1 cos - x2 sin, x2 cos + x1 sin)`` with angle
    ``p * base**(-2i/rotary_dim)`` (or the ``scaling`` frequencies of
    :func:`fastpe.scaling.rope_frequencies`, with cos and sin times the attention factor),
    computed in float64 and rounded once.
    """
    call = parse_rope(x, positions=positions, offset=offset, base=base, layout=layout,
                      rotary_dim=rotary_dim, seq_axis=seq_axis, inverse=inverse, out=out,
                      scaling=scaling, max_position_embeddings=max_position_embeddings,
                      seq_len=seq_len)
    view = call.view  # (B, S, H, D), a view of call.target
    rot = call.rotary_dim
    half = rot // 2
    if call.positions is not None:
        pos = call.positions
    else:
        pos = call.offsets[:, None] + np.arange(view.shape[1], dtype=np.int64)
    s, c = sincos(pos, call.wh, call.wl)  # (Bp, S, half)
    factor = call.attention_factor
    if call.inverse:
        s = -s
        factor = 1.0 / factor
    if factor != 1.0:
        s = s * factor
        c = c * factor
    s = s[:, :, None, :]
    c = c[:, :, None, :]
    if call.layout == 0:
        i1, i2 = slice(0, rot, 2), slice(1, rot, 2)
    else:
        i1, i2 = slice(0, half), slice(half, rot)
    x1 = view[..., i1].astype(np.float64)
    x2 = view[..., i2].astype(np.float64)
    view[..., i1] = x1 * c - x2 * s
    view[..., i2] = x2 * c + x1 * s
    return call.target
