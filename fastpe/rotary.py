"""Rotary position embeddings (RoPE), in place on large arrays."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _engine, _plans
from ._args import check_seq_axis, parse_rope
from ._args.calls import parse_rope_qk

__all__ = ["apply_rope", "apply_rope_qk", "patch_positions"]


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
        Frequency base (``rope_theta``). A base below 1 gives frequencies above 1, whose
        angles are exact only for positions up to ``2**53 / w`` (the largest ``w``);
        beyond, an error.
    layout : {"interleaved", "half", "half:k"}
        ``"interleaved"`` pairs ``(x[2i], x[2i+1])`` (GPT-J, Meta's reference code);
        ``"half"`` pairs ``(x[i], x[i + rotary_dim/2])`` (Hugging Face ``rotate_half``).
        ``"half:k"`` (an integer ``k``): the rotated channels cut into ``k`` equal blocks,
        each paired as ``"half"`` within itself, pairs numbered block by block (pair
        ``b*m + j`` is ``(x[b*2m + j], x[b*2m + m + j])``, ``m = rotary_dim / (2k)``):
        Gemma 4's vision tower, one block per axis, is ``"half:2"``.
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
        :func:`fastpe.scaling.rope_frequencies`. ``None`` or ``{"rope_type": "default"}``:
        the plain frequencies, carried in double-double.
    max_position_embeddings : int, optional
        The config's ``max_position_embeddings`` (needed by some scaling types).
    seq_len : int, optional
        Sequence length for ``dynamic`` and ``longrope`` scaling; default: the largest
        position in this call plus one, as Hugging Face does.
    pair_axes : array of int, optional
        Multi-axis RoPE: the axis of ``positions`` (shape ``(n_axes, ...)``) that rotates
        each pair, ``(rotary_dim // 2,)``. Two rows ``(2, rotary_dim // 2)`` give each
        pair's first and second channel their own axes: ``(x1 cos a - x2 sin a, x2 cos b +
        x1 sin b)``, not a rotation where ``a != b`` (HunYuan-VL; ``inverse`` is then
        refused).
    inv_freq : array of float, optional
        One frequency per pair (radians per position), taken as exact float64 values,
        instead of ``base ** (-2i / rotary_dim)`` (vision towers; any custom scheme).
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
        beyond 2**53, or beyond ``2**53 / w`` for frequencies above 1, a view whose elements
        may overlap, an ``out`` overlapping ``x``).
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

    A call repeated with a new ``offset`` (a decoding loop) reuses the outcome of the first
    call's checks, kept per dtype, shape, strides and keyword arguments (``fastpe._plans``),
    and checks again only what those do not fix; at one position, on a contiguous array, it
    takes a kernel of its own with the bytes of the general one. Same results, same errors.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> q = np.ones((1, 3, 2, 4), dtype=np.float32)      # (batch, seq, heads, head_dim)
    >>> fastpe.apply_rope(q, out=q) is q
    True
    >>> q[0, 1, 0].round(4)
    array([-0.3012,  1.3818,  0.99  ,  1.0099], dtype=float32)
    """
    key = None
    # an int offset (a Python or NumPy integer): the offset of a plan
    # (multi-axis and given frequencies take the full path: not in a plan's key)
    plain = positions is None and pair_axes is None and inv_freq is None
    first = _plans.int_offset(offset) if plain else None
    if first is not None and type(x) is np.ndarray:
        # a repeated call (a decoding step): its checks were made once (fastpe._plans)
        in_place = out is x
        if in_place or out is None:
            key = _plans.rope_key(
                (x,),
                in_place,
                base,
                layout,
                rotary_dim,
                seq_axis,
                inverse,
                scaling,
                max_position_embeddings,
                seq_len,
            )
            plan = _plans._PLANS.get(key)
            if plan is not None and plan[3] <= first <= plan[0]:  # _plans.offset_ok
                flags = x.flags  # (read once: writeable, then aligned)
                if flags.writeable or not in_place:
                    if in_place:
                        target, aligned = x, flags.aligned
                    else:  # a new array (aligned by NumPy's allocator, but asked)
                        target = np.array(x, order="C", copy=True)
                        aligned = target.flags.aligned
                    if plan[1] is not None:  # one position: the decoding-step kernel
                        a = target.ravel()  # contiguous (the plan): a view
                        _engine.run_step(plan[1], a, a, first, aligned)
                    else:
                        _plans.run(plan, (target,), first)
                    return target
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
        defer_range=True,  # per-row positions: checked in the engine's scan of them
    )
    if key is not None and first is not None:
        plan = _plans.make((call,), call.view.shape[1], check_seq_axis(seq_axis, x.shape))
        if plan is not None:
            _plans.store(key, plan)
            _plans.run(plan, (call.target,), first)
            return call.result
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
        check_range=call.range_unchecked,
    )
    return call.result


def apply_rope_qk(
    q: np.ndarray,
    k: np.ndarray,
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
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rotate queries and keys together: :func:`apply_rope` on ``q`` and on ``k`` in one call.

    The two arrays share their positions, frequencies and cos/sin, which are worked out once;
    their head counts may differ (grouped-query attention: ``q`` ``(batch, seq, 32, 128)``,
    ``k`` ``(batch, seq, 8, 128)``). The results are those of two :func:`apply_rope` calls
    with the same arguments, bit for bit.

    Parameters
    ----------
    q, k : ndarray
        As ``x`` of :func:`apply_rope`, of one dtype, with the same batch, sequence and
        channel lengths (seen as ``(batch, seq, heads, head_dim)`` through ``seq_axis``);
        only the heads may differ.
    positions, offset, base, layout, rotary_dim, seq_axis, inverse, scaling, \
max_position_embeddings, seq_len, pair_axes, inv_freq
        As in :func:`apply_rope`, for both arrays.
    out : pair of ndarrays, optional
        ``out=(q, k)`` rotates both in place; ``(q_out, k_out)`` receives the results (each
        as ``out`` of :func:`apply_rope`); ``None`` returns two new arrays and leaves ``q``
        and ``k`` untouched.

    Returns
    -------
    tuple of ndarray
        ``(q_rotated, k_rotated)``: the arrays of ``out`` when it is given, else new arrays.

    Raises
    ------
    TypeError, ValueError
        As :func:`apply_rope`, for either array (the message starts with ``q:`` or ``k:``);
        and for arrays of two dtypes, of other batch, sequence or channel lengths, or an
        array written that overlaps another array of the call. Every argument of both
        arrays is checked before anything is written: a call that raises leaves ``q``,
        ``k`` and ``out`` as they were.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> q = np.ones((1, 1, 4, 8), dtype=np.float32)    # 4 query heads
    >>> k = np.ones((1, 1, 2, 8), dtype=np.float32)    # 2 key/value heads
    >>> rq, rk = fastpe.apply_rope_qk(q, k, offset=5, out=(q, k), layout="half")
    >>> rq is q and rk is k
    True
    >>> bool((q[0, 0, 0] == k[0, 0, 1]).all())
    True
    """
    key = None
    plain = positions is None and pair_axes is None and inv_freq is None  # see apply_rope
    first = _plans.int_offset(offset) if plain else None
    if first is not None and type(q) is np.ndarray and type(k) is np.ndarray:
        # a repeated call (a decoding step): its checks were made once (fastpe._plans)
        in_place = out is not None and type(out) is tuple and len(out) == 2
        in_place = in_place and out[0] is q and out[1] is k  # type: ignore[index]
        if in_place or out is None:
            key = _plans.rope_key(
                (q, k),
                in_place,
                base,
                layout,
                rotary_dim,
                seq_axis,
                inverse,
                scaling,
                max_position_embeddings,
                seq_len,
            )
            plan = _plans._PLANS.get(key)
            if plan is not None and plan[3] <= first <= plan[0]:  # _plans.offset_ok
                if in_place:
                    fq, fk = q.flags, k.flags  # (read once: writeable, then aligned)
                    ok = fq.writeable and fk.writeable
                    tq, tk, aligned = q, k, ok and fq.aligned and fk.aligned
                else:  # new arrays (aligned by NumPy's allocator, but asked)
                    tq, tk = np.array(q, order="C", copy=True), np.array(k, order="C", copy=True)
                    ok, aligned = True, tq.flags.aligned and tk.flags.aligned
                if not ok:
                    pass  # an array not writeable: the full path refuses the call
                elif plan[1] is not None:  # one position: the decoding-step kernel
                    # (contiguous: views; the kernel refuses q and k that share memory)
                    if _engine.run_step(plan[1], tq.ravel(), tk.ravel(), first, aligned):
                        return tq, tk
                elif not in_place or q.size == 0 or k.size == 0 or not np.shares_memory(q, k):
                    _plans.run(plan, (tq, tk), first)
                    return tq, tk
                # q and k share memory: the full path refuses the call
    qc, kc = parse_rope_qk(
        q,
        k,
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
    plan = None
    if key is not None and first is not None:
        plan = _plans.make((qc, kc), qc.view.shape[1], check_seq_axis(seq_axis, q.shape))
    if plan is not None and first is not None:
        _plans.store(key, plan)
        _plans.run(plan, (qc.target, kc.target), first)
    else:
        for call in (qc, kc):
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
    return qc.result, kc.result


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
