"""Rotary position embeddings (RoPE), in place on large arrays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _engine
from ._args import parse_rope

__all__ = ["apply_rope", "patch_positions"]


def apply_rope(
    x: np.ndarray,
    /,
    *,
    positions: ArrayLike | None = None,
    offset: int | ArrayLike = 0,
    base: float = 10000.0,
    layout: str = "interleaved",
    rotary_dim: int | None = None,
    seq_axis: int | None = None,
    inverse: bool = False,
    scaling: Mapping[str, Any] | None = None,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
    pair_axes: ArrayLike | None = None,
    inv_freq: ArrayLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Rotate channel pairs of ``x`` by position-dependent angles (RoPE).

    Pair ``i`` at position ``p`` is rotated by ``p * base**(-2i/rotary_dim)``:
    ``(x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)``.

    Parameters
    ----------
    x : ndarray, float32, float64, float16 or bfloat16
        ``(seq, dim)``, ``(batch, seq, dim)`` or ``(batch, seq, heads, head_dim)``; the last
        axis (unit stride) holds the channels. Views (the q part of a fused qkv buffer, a
        transposed ``(batch, heads, seq, head_dim)`` view) are rotated in place.
    positions : array of int, optional
        ``(seq,)``, or ``(batch, seq)`` for per-sequence positions (packed sequences). With
        ``pair_axes``: ``(n_axes, seq)`` or ``(n_axes, batch, seq)``, several positions per
        token (M-RoPE's time, height and width; a vision patch's row and column).
    offset : int or array of int, default 0
        First position, or one per batch row (decoding with a KV cache). Exclusive with
        ``positions``.
    base : float, default 10000.0
        Frequency base (``rope_theta``).
    layout : {"interleaved", "half"}
        ``"interleaved"`` pairs ``(x[2i], x[2i+1])`` (GPT-J, Meta's reference code);
        ``"half"`` pairs ``(x[i], x[i + rotary_dim/2])`` (Hugging Face ``rotate_half``).
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` channels (even, <= ``x.shape[-1]``); the rest are
        left bit for bit as they are. Default: all.
    seq_axis : int, optional
        Axis of the sequence; default 0 for 2-D ``x``, else 1. Use ``seq_axis=2`` for
        ``(batch, heads, seq, head_dim)`` and ``seq_axis=0`` for ``(tokens, heads, head_dim)``.
        The batch axis (for per-row offsets/positions) is axis 0 when ``seq_axis >= 1``.
    inverse : bool, default False
        Undo a forward call: rotate by the negative angles (and divide by the attention
        factor, when ``scaling`` has one).
    scaling : dict, optional
        A Hugging Face ``rope_scaling`` / ``rope_parameters`` dict (``{"rope_type": "yarn",
        "factor": 4.0, ...}``): frequencies and attention factor from
        :func:`fastpe.scaling.rope_frequencies`. ``None`` or ``"default"``: the plain
        frequencies, carried in double-double.
    max_position_embeddings : int, optional
        The config's ``max_position_embeddings`` (needed by some scaling types).
    seq_len : int, optional
        Sequence length for ``dynamic`` and ``longrope`` scaling; default: the largest
        position in this call plus one, as Hugging Face does.
    out : ndarray, optional
        ``out=x`` rotates in place: no temporary of ``x``'s size. Another array of ``x``'s
        shape and dtype (sharing no memory with ``x``) receives the result. ``None`` returns
        a new array and leaves ``x`` untouched.

    Returns
    -------
    ndarray
        The rotated array: ``out`` itself when it is given (``x`` when ``out=x``), else a
        new ``numpy.ndarray``. An ndarray subclass (``np.matrix``, ``np.memmap``, a record
        array view) is worked on as its base-class view, so ``out=x`` rotates the caller's
        object; a masked array is refused (its mask would be ignored).

    Raises
    ------
    TypeError
        For an argument of the wrong type (``rotary_dim=4.0``, ``base="x"``, an int
        array, a masked array).
    ValueError
        For a value of the right type that is not allowed (an odd ``rotary_dim``, positions
        beyond 2**53, a view whose elements may overlap, an ``out`` overlapping ``x``).
        Raised before anything is written: ``x`` and ``out`` are left as they were.

    Notes
    -----
    float16 and ``ml_dtypes.bfloat16`` arrays (bfloat16 with the ``bf16`` extra installed)
    are rotated in float32, from the cos/sin of the exact angles, and each result is rounded
    once, to nearest even, into the 16-bit dtype: within 1 ulp (of the 16-bit dtype, at the
    pair's norm) of the reference, which rounds the float64 rotation once. A torch
    bfloat16 CPU tensor ``t`` is rotated in place, with no copy, through
    ``a = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)`` and
    ``apply_rope(a, out=a)``.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> q = np.ones((1, 3, 2, 4), dtype=np.float32)      # (batch, seq, heads, head_dim)
    >>> fastpe.apply_rope(q, out=q) is q
    True
    >>> q[0, 1, 0].round(4)
    array([-0.3012,  1.3818,  0.99  ,  1.0099], dtype=float32)
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
    _engine.run(
        call.view,
        op=_engine.OP_ROPE,
        npairs=call.rotary_dim // 2,
        layout=call.layout,
        positions=call.positions,
        offsets=call.offsets,
        freq_key=call.freq_key,
        wh=call.wh,
        wl=call.wl,
        sin_sign=-1.0 if call.inverse else 1.0,
        scale=(1.0 / call.attention_factor if call.inverse else call.attention_factor),
        axis_positions=call.axis_positions,
        pair_axes=call.pair_axes,
    )
    return call.result


def patch_positions(grid_thw, *, merge: int = 1, temporal: bool = False) -> np.ndarray:
    """Row and column (and frame) of every patch of images or videos: multi-axis positions.

    For the axial RoPE of a vision tower (``apply_rope(x, positions=..., **kw)`` with
    ``kw = rope_kwargs_from_config(config, tower="vision")``), patches in the order the
    Qwen2-VL family lays them out: for each ``(t, h, w)`` grid in turn, ``merge x merge``
    blocks of patches (the spatial merge) in row-major order, row-major within each block,
    the whole grid repeated for each of its ``t`` frames.

    Parameters
    ----------
    grid_thw : array of int, shape ``(n, 3)`` or ``(3,)``
        Frames, rows and columns of each image or video, in patches (the model's
        ``image_grid_thw``).
    merge : int, default 1
        The spatial merge size (``spatial_merge_size``); ``h`` and ``w`` must be multiples.
    temporal : bool, default False
        Also return the frame of each patch, first: ``(3, patches)``.

    Returns
    -------
    ndarray of int64, shape ``(2, patches)`` (row, column) or ``(3, patches)``

    Examples
    --------
    >>> import fastpe
    >>> fastpe.patch_positions([1, 2, 4], merge=2)
    array([[0, 0, 1, 1, 0, 0, 1, 1],
           [0, 1, 0, 1, 2, 3, 2, 3]])
    """
    from ._args import check_int

    m = check_int(merge, "merge", minimum=1)
    grids = np.asarray(grid_thw)
    if grids.dtype.kind not in "iu":
        raise TypeError(f"grid_thw must be integers (frames, rows, columns), got {grids.dtype}")
    grids = grids.reshape(-1, 3) if grids.ndim == 1 and grids.size == 3 else grids
    if grids.ndim != 2 or grids.shape[1] != 3:
        raise ValueError(f"grid_thw must have shape (n, 3) or (3,), got {np.shape(grid_thw)}")
    if grids.size and grids.min() < 0:
        raise ValueError(f"grid_thw must be >= 0, got {grids.tolist()}")
    parts = []
    for t, h, w in grids.tolist():
        if h % m or w % m:
            raise ValueError(f"a grid of {h} x {w} patches is not a multiple of merge={m}")
        hh, ww = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        block = (h // m, m, w // m, m)
        rows = np.tile(hh.reshape(block).transpose(0, 2, 1, 3).ravel(), t)
        cols = np.tile(ww.reshape(block).transpose(0, 2, 1, 3).ravel(), t)
        axes = [rows, cols]
        if temporal:
            axes.insert(0, np.repeat(np.arange(t), h * w))
        parts.append(np.stack(axes))
    if not parts:
        return np.zeros((3 if temporal else 2, 0), dtype=np.int64)
    return np.concatenate(parts, axis=1).astype(np.int64)
