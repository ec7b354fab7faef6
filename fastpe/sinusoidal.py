"""Sinusoidal position tables (the original transformer encoding), fast and exact."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _engine
from ._args import parse_add, parse_convention, parse_table, plain_convention
from ._freq import inv_freq_dd

__all__ = ["add_sinusoidal", "sinusoidal_table"]


def sinusoidal_table(
    seq_len: int | None = None,
    dim: int | None = None,
    *,
    base: float = 10000.0,
    offset: int = 0,
    positions: ArrayLike | None = None,
    layout: str | None = None,
    dtype: DTypeLike | None = None,
    out: np.ndarray | None = None,
    convention: str | None = None,
    padding_idx: int | None = None,
    min_timescale: float | None = None,
    max_timescale: float | None = None,
    start_index: int | None = None,
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
        Frequency base. A base below 1 gives frequencies above 1, whose angles are exact
        only for positions up to ``2**53 / w`` (the largest ``w``); beyond, an error.
    offset : int, default 0
        First position. Not with ``positions`` (giving both is an error).
    positions : array_like of int, optional
        Explicit positions, 1-D; float arrays must hold finite integers.
    layout : {"interleaved", "half"}, optional
        ``"interleaved"`` (the default): sin and cos alternate (``[sin0, cos0, sin1, cos1,
        ...]``). ``"half"``: all sines then all cosines (``[sin | cos]``). With
        ``convention="fairseq"`` or ``"tensor2tensor"`` the layout is theirs,
        ``[sin | cos]``, and giving one is an error.
    dtype : float32, float64, float16 or bfloat16, optional
        Output dtype; float32 unless ``out`` is given, in which case ``out.dtype``.
    out : ndarray, optional
        Array of shape ``(seq_len, dim)`` to write into (any strides whose elements do not
        overlap); returned. An ndarray subclass (``np.matrix``, ``np.memmap``) is written
        through its base-class view; a masked array is refused.
    convention : {None, "transformer", "fairseq", "tensor2tensor"}
        None and ``"transformer"``: the table above. The others reproduce a codebase's
        table (their ``dim`` may be odd: a zero column ends each row; ``base`` and
        ``layout`` are theirs and must be left out):

        - ``"fairseq"``: ``SinusoidalPositionalEmbedding.get_embedding(seq_len, dim,
          padding_idx)``: ``[sin | cos]`` at ``10000**(-i / (dim//2 - 1))`` (dim 1, its
          zero column alone, or dim >= 4: fairseq divides by zero at dims 2 and 3), rows
          are positions ``0 .. seq_len - 1`` (or ``offset``/``positions``) and the row of
          position ``padding_idx`` is zero. fairseq's module looks up rows ``padding_idx +
          1`` onward: ``offset=padding_idx + 1``.
        - ``"tensor2tensor"``: ``get_timing_signal_1d(seq_len, dim, min_timescale,
          max_timescale, start_index)[0]``: ``[sin | cos]`` at ``min_timescale *
          (max_timescale / min_timescale)**(-i / max(dim//2 - 1, 1))``, positions from
          ``start_index`` (the same as ``offset``).
    padding_idx : int, optional
        fairseq only.
    min_timescale, max_timescale : float, optional
        tensor2tensor only; defaults 1.0 and 1.0e4.
    start_index : int, optional
        tensor2tensor only; default 0.

    Returns
    -------
    ndarray of shape ``(seq_len, dim)``: ``out`` itself when given, else a new array.

    Raises
    ------
    TypeError, ValueError
        TypeError for an argument of the wrong type, ValueError for a value that is not
        allowed; before anything is written into ``out``.

    Notes
    -----
    Angles are exact (double-double frequency times integer position). float32 values are
    within 1 ulp of the exact ones at every position below 2**53; float64 values within a
    few units of 2**-53 (see the README for the measured bounds). Rows are produced in
    parallel by angle addition from anchors; libm ``sin``/``cos`` are called only for
    anchors and for rare values too small for angle addition to stay within 1 float32 ulp.
    A value depends only on its position, never on how the call was cut into rows, chunks
    or threads. float32 rows of fewer than 8 or at least 128 pairs (dims up to 14, and from
    256) are stepped from row to row in float64 (at most 19 angle additions from an exact
    anchor), the others folded each from its anchor, whichever was faster there; the rule
    is the same in either layout, so the two layouts hold the same bits, permuted. The two
    ways agree except where a value falls within about 2**-50 of a float32 rounding tie (7
    of 805 million values at dim 1024: ``python bench/layout_ties.py``). float32
    ``add_sinusoidal`` steps the values it adds at every dim.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.sinusoidal_table(3, 4, dtype=np.float64).round(4)
    array([[ 0.    ,  1.    ,  0.    ,  1.    ],
           [ 0.8415,  0.5403,  0.01  ,  1.    ],
           [ 0.9093, -0.4161,  0.02  ,  0.9998]])
    >>> fastpe.sinusoidal_table(3, 5, convention="fairseq", padding_idx=1,
    ...                         dtype=np.float64).round(3)
    array([[ 0.   ,  0.   ,  1.   ,  1.   ,  0.   ],
           [ 0.   ,  0.   ,  0.   ,  0.   ,  0.   ],
           [ 0.909,  0.   , -0.416,  1.   ,  0.   ]])
    """
    if not plain_convention(convention, padding_idx, min_timescale, max_timescale, start_index):
        from .conventions import run_call

        return run_call(
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
    )
    target, result = call.target, call.result
    assert target is not None and result is not None  # parse_table allocates by default
    hi, lo = inv_freq_dd(call.base, call.dim)
    _engine.run(
        target[None, :, None, :],
        op=_engine.OP_WRITE,
        npairs=call.dim // 2,
        layout=call.layout,
        positions=call.positions,
        offsets=call.offsets,
        freq_key=("default", call.base, call.dim),
        wh=hi,
        wl=lo,
        fixup=call.dtype == np.float32,
    )
    return result


def add_sinusoidal(
    x: np.ndarray,
    /,
    *,
    base: float = 10000.0,
    offset: int | ArrayLike | None = None,
    positions: ArrayLike | None = None,
    layout: str | None = None,
    out: np.ndarray | None = None,
    convention: str | None = None,
    padding_idx: int | None = None,
    min_timescale: float | None = None,
    max_timescale: float | None = None,
    start_index: int | None = None,
) -> np.ndarray:
    """Add the sinusoidal table to embeddings ``x`` without building the table.

    Parameters
    ----------
    x : ndarray, float32, float64, float16 or bfloat16
        Shape ``(seq, dim)`` or ``(batch, seq, dim)``.
        Embeddings; any strides (slices, transposes).
    base, layout
        As in :func:`sinusoidal_table`.
    offset : int or array of int, optional
        First position, 0 by default (``padding_idx + 1`` with ``convention="fairseq"``, as
        its module's forward, which takes padding_idx 0 when it is None: positions from
        1); for a 3-D ``x``, one first position per batch row is accepted (transformer
        convention only).
    positions : array of int, optional
        Shape ``(seq,)``, or ``(batch, seq)`` for a 3-D ``x``.
    out : ndarray, optional
        ``out=x`` adds in place (no copy, views included). Another array of ``x``'s shape
        and dtype receives the result. ``None`` (default) returns a new array and leaves
        ``x`` untouched.
    convention, padding_idx, min_timescale, max_timescale, start_index
        As in :func:`sinusoidal_table`; with fairseq, rows at position ``padding_idx`` get
        nothing added (fairseq's padding embedding is zero), and an odd last column is
        left as it is. tensor2tensor's ``add_timing_signal_1d(x, min_timescale,
        max_timescale, start_index)`` is ``add_sinusoidal(x, convention="tensor2tensor",
        ...)``.

    Returns
    -------
    ndarray
        ``x + PE``: the table value rounded to x's dtype, then added in x's dtype
        (within 1.5 ulp of the exact sum in float32, 4 in float64; see the README);
        float16 and bfloat16: the table value rounded to float32, added to x's value in
        float32, the sum rounded once into x's dtype.
        ``out`` itself when it is given, else a new ``numpy.ndarray``; ndarray subclasses
        are worked on as their base-class view (a masked array is refused).

    Raises
    ------
    TypeError, ValueError
        TypeError for an argument of the wrong type, ValueError for a value that is not
        allowed; before anything is written.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> x = np.zeros((2, 3, 4), dtype=np.float32)
    >>> fastpe.add_sinusoidal(x, out=x) is x
    True
    >>> x[0, 1].round(4)
    array([0.8415, 0.5403, 0.01  , 1.    ], dtype=float32)
    """
    if not plain_convention(convention, padding_idx, min_timescale, max_timescale, start_index):
        from .conventions import run_call

        return run_call(
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
    hi, lo = inv_freq_dd(call.base, call.dim)
    _engine.run(
        call.view,
        op=_engine.OP_ADD,
        npairs=call.dim // 2,
        layout=call.layout,
        positions=call.positions,
        offsets=call.offsets,
        freq_key=("default", call.base, call.dim),
        wh=hi,
        wl=lo,
    )
    return call.result
