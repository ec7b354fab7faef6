"""Sinusoidal position tables (the original transformer encoding), fast and exact."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _engine
from . import _validate as v
from ._freq import inv_freq_dd
from .reference import _table_dtype, _table_positions

__all__ = ["add_sinusoidal", "sinusoidal_table"]


def sinusoidal_table(
    seq_len: int | None = None,
    dim: int | None = None,
    *,
    base: float = 10000.0,
    offset: int = 0,
    positions: ArrayLike | None = None,
    layout: str = "interleaved",
    dtype: DTypeLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Sinusoidal position table ``PE[p, 2i] = sin(p w_i)``, ``PE[p, 2i+1] = cos(p w_i)``.

    ``w_i = base**(-2i/dim)``. Rows are positions ``offset, ..., offset + seq_len - 1``, or
    the given ``positions``.

    Parameters
    ----------
    seq_len : int
        Number of rows. May be omitted when ``positions`` is given.
    dim : int
        Number of columns, positive and even.
    base : float, default 10000.0
        Frequency base.
    offset : int, default 0
        First position (ignored with ``positions``; giving both is an error).
    positions : array_like of int, optional
        Explicit positions, 1-D; float arrays must hold finite integers.
    layout : {"interleaved", "half"}
        ``"interleaved"``: sin and cos alternate (``[sin0, cos0, sin1, cos1, ...]``).
        ``"half"``: all sines then all cosines (``[sin | cos]``).
    dtype : float32 or float64, optional
        Output dtype; float32 unless ``out`` is given, in which case ``out.dtype``.
    out : ndarray, optional
        Array of shape ``(seq_len, dim)`` to write into (any strides); returned.

    Returns
    -------
    ndarray of shape ``(seq_len, dim)``.

    Notes
    -----
    Angles are exact (double-double frequency times integer position). float32 values are
    within 1 ulp of the exact ones at every position below 2**53; float64 values within a
    few units of 2**-53 (see the README for the measured bounds). Rows are produced in
    parallel by angle addition from anchors; libm ``sin``/``cos`` are called only for
    anchors and for rare values too small for angle addition to stay within 1 float32 ulp.
    A value depends only on its position, never on how the call was cut into rows, chunks
    or threads. float32 interleaved rows are stepped from row to row in float64 (at most
    19 angle additions from an exact anchor, for speed), as are the values that float32
    ``add_sinusoidal`` adds in either layout; the half-layout table folds each row from its
    anchor, so the two agree bit for bit except where a value falls within about 2**-50 of
    a float32 rounding tie (7 of 805 million values: ``python bench/layout_ties.py``).

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.sinusoidal_table(3, 4, dtype=np.float64).round(4)
    array([[ 0.    ,  1.    ,  0.    ,  1.    ],
           [ 0.8415,  0.5403,  0.01  ,  1.    ],
           [ 0.9093, -0.4161,  0.02  ,  0.9998]])
    """
    dim = v.check_dim(dim)
    base = v.check_base(base)
    lay = v.check_layout(layout)
    n, pos2d, offs = _table_positions(seq_len, positions, offset)
    dt = v.check_float_dtype(_table_dtype(dtype, out))
    if out is None:
        out = np.empty((n, dim), dtype=dt)
    else:
        v.check_out(out, (n, dim), dt)
        v.check_no_self_overlap(out, "out")
    hi, lo = inv_freq_dd(base, dim)
    _engine.run(out[None, :, None, :], op=_engine.OP_WRITE, npairs=dim // 2, layout=lay,
                positions=pos2d, offsets=offs, freq_key=("default", base, dim), wh=hi, wl=lo,
                fixup=dt == np.float32)
    return out


def add_sinusoidal(
    x: np.ndarray,
    /,
    *,
    base: float = 10000.0,
    offset: int | ArrayLike = 0,
    positions: ArrayLike | None = None,
    layout: str = "interleaved",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Add the sinusoidal table to embeddings ``x`` without building the table.

    Parameters
    ----------
    x : ndarray, float32 or float64, shape ``(seq, dim)`` or ``(batch, seq, dim)``
        Embeddings; any strides (slices, transposes).
    base, layout
        As in :func:`sinusoidal_table`.
    offset : int or array of int, default 0
        First position; for a 3-D ``x``, one first position per batch row is accepted.
    positions : array of int, optional
        Shape ``(seq,)``, or ``(batch, seq)`` for a 3-D ``x``.
    out : ndarray, optional
        ``out=x`` adds in place (no copy, views included). Another array of ``x``'s shape
        and dtype receives the result. ``None`` (default) returns a new array and leaves
        ``x`` untouched.

    Returns
    -------
    ndarray
        ``x + PE``: the table value rounded to x's dtype, then added in x's dtype
        (within 1.5 ulp of the exact sum in float32, 4 in float64; see the README).

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> x = np.zeros((2, 3, 4), dtype=np.float32)
    >>> fastpe.add_sinusoidal(x, out=x) is x
    True
    >>> x[0, 1].round(4)
    array([0.8415, 0.5403, 0.01  , 1.    ], dtype=float32)
    """
    x, dim, base, lay, pos2d, offs, in_place = v.parse_add(
        x, base=base, offset=offset, positions=positions, layout=layout, out=out
    )
    if out is None:
        target = np.array(x, order="C", copy=True)
    elif in_place:
        target = x
    else:
        np.copyto(out, x)
        target = out
    view = target[None, :, None, :] if target.ndim == 2 else target[:, :, None, :]
    hi, lo = inv_freq_dd(base, dim)
    _engine.run(view, op=_engine.OP_ADD, npairs=dim // 2, layout=lay, positions=pos2d, offsets=offs,
                freq_key=("default", base, dim), wh=hi, wl=lo)
    return target
