"""Multi-axis RoPE: each pair rotated by the position of its own axis (M-RoPE, vision).

A token carries ``n_axes`` positions (time, height, width, ...); pair ``i`` is rotated by
the position of axis ``pair_axis[i]``. :func:`rope_axes_kernel` walks the work as
:func:`~.rope.rope_kernel` does (items of consecutive sequence indices, one cos/sin cache
per item, shared by every head and by the batch rows that share positions), and fills each
cache row in its own loop body: one anchor cache per axis (:mod:`.angles`), each brought to
that axis's position, then one angle addition per pair from its own axis's anchor. The
angles are as exact as in the 1-D kernels, and a pair whose axis holds the same position as
a 1-D call gets the same bits.

One kernel for every dtype: ``half16`` is None for float32/float64 arrays (rotated by
:func:`~.rope._rotate_block`) and ``ON`` for 16-bit bits (rotated by
:func:`~.half._rotate16_block`, ``bf16`` None for float16, ``ON`` for bfloat16); numba
compiles each case on its first use.
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .angles import BITS, DIGIT, LAST, LEVELS, NO_KEY, add_angle, anchors_at, worker_items
from .half import _rotate16_block
from .rope import _rotate_block, _rotate_blocks, _rotate_split

LAST_U = np.uint64(LAST)


@kernel()
def rope_axes_kernel(
    w0,
    w1,
    view,
    axes,
    freqs,
    rot,
    split,
    half16,
    bf16,
    like,
    interleaved,
    blocks,
    spans2,
    prefetch,
):
    """Rotate the ``(nb, ns, nh, 2*npairs)`` ``view`` in place by per-axis positions.

    ``axes`` (see :func:`~.args.axes`): int64 positions ``(n_axes, Bp, ns)`` and the spans
    of pairs of one axis. Workers ``w0 .. w1 - 1`` of the split of :func:`~.rope.rope_kernel`.
    ``half16`` None: float32/float64 ``flat``; ``ON``: ``flat`` holds 16-bit bits (``bf16``
    None: float16, ``ON``: bfloat16; a specialization each), rotated in float32 from a
    float32 cache and rounded once.
    ``like``: an empty array of the cos/sin cache's dtype (``flat``'s, or float32).
    ``interleaved``: the layout (see :func:`~.args.loop`; the 16-bit rows' too, passed on
    to :func:`~.half._rotate16_block`).
    ``blocks``: None, or the block count of a ``"half:k"`` layout (``view``'s layout HALF):
    each head is ``blocks`` blocks of half-split pairs, numbered block by block.
    ``spans2``: None, or the spans (as in ``axes``) of the axes of each pair's second
    channel, when they are not the first's (HunYuan-VL): a second cos/sin cache, and
    ``(x1 c - x2 s, x2 c2 + x1 s2)``. ``prefetch`` (None or ``ON``): 16-bit rows, each
    row's lines prefetched first (see :func:`~.half._rotate16_block`); float32 and float64
    rows of the general layouts (no blocks, no second channels), the positions of each
    item walked in two stretches, each head prefetched (``stretches`` of
    :func:`~.rope._rotate_block`; ``fastpe._engine.two_stretches``).
    """
    flat, _, _, _, _, _, nb, ns, _, n, _ = view
    values, spans, per_batch = axes
    chunk, group, n_workers = split
    wh, wl, tc, ts = freqs
    sin_mult, cos_mult, _ = rot
    n_axes = values.shape[0]
    renorm = half16 is None and flat.itemsize == 8
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((n_axes, LEVELS, n))
    anc_c = np.empty((n_axes, LEVELS, n))
    keys = np.empty((n_axes, LEVELS), dtype=np.int64)
    digit = np.empty(n_axes, dtype=np.int64)
    cache_s = np.empty((chunk, n), dtype=like.dtype)
    cache_c = np.empty((chunk, n), dtype=like.dtype)
    tmp = np.empty(n, dtype=like.dtype)
    rows2 = chunk if spans2 is not None else 0
    cache_s2 = np.empty((rows2, n), dtype=like.dtype)
    cache_c2 = np.empty((rows2, n), dtype=like.dtype)
    touched = 0.0
    for w in range(w0, w1):
        keys[:] = NO_KEY
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            for si in range(s0, s1):
                # the cos/sin rows of position si, written here in the loop: as an inlined
                # function of a dozen array arguments it counted their references on every
                # position (104 against 42 ns a position, a one-head row of 40 pairs)
                for a in range(n_axes):  # each axis's anchors brought to its position
                    p = values[a, bo, si]
                    if keys[a, LAST] != (p >> BITS):  # (the views of axis a made only here)
                        anchors_at(p, wh, wl, tc, ts, anc_s[a], anc_c[a], keys[a])
                    digit[a] = p & DIGIT
                k = np.uint64(si - s0)
                # one angle addition per pair from its own axis's anchor, in spans of
                # consecutive pairs of one axis; unsigned indices, so the loops vectorise
                for span in range(spans.shape[0]):
                    au = np.uint64(spans[span, 2])
                    tu = np.uint64(digit[spans[span, 2]])
                    j0, j1 = np.uint64(spans[span, 0]), np.uint64(spans[span, 1])
                    if renorm:
                        for j in range(j0, j1):
                            sv, cv = add_angle(
                                anc_s[au, LAST_U, j], anc_c[au, LAST_U, j], tc[tu, j], ts[tu, j]
                            )
                            f = 1.5 - 0.5 * (sv * sv + cv * cv)
                            cache_s[k, j] = sv * f * sin_mult
                            cache_c[k, j] = cv * f * cos_mult
                    else:
                        for j in range(j0, j1):
                            sv, cv = add_angle(
                                anc_s[au, LAST_U, j], anc_c[au, LAST_U, j], tc[tu, j], ts[tu, j]
                            )
                            cache_s[k, j] = sv * sin_mult
                            cache_c[k, j] = cv * cos_mult
                if spans2 is not None:  # each pair's second channel on its own axis
                    for span in range(spans2.shape[0]):
                        au = np.uint64(spans2[span, 2])
                        tu = np.uint64(digit[spans2[span, 2]])
                        j0, j1 = np.uint64(spans2[span, 0]), np.uint64(spans2[span, 1])
                        if renorm:
                            for j in range(j0, j1):
                                sv, cv = add_angle(
                                    anc_s[au, LAST_U, j], anc_c[au, LAST_U, j], tc[tu, j], ts[tu, j]
                                )
                                f = 1.5 - 0.5 * (sv * sv + cv * cv)
                                cache_s2[k, j] = sv * f * sin_mult
                                cache_c2[k, j] = cv * f * cos_mult
                        else:
                            for j in range(j0, j1):
                                sv, cv = add_angle(
                                    anc_s[au, LAST_U, j], anc_c[au, LAST_U, j], tc[tu, j], ts[tu, j]
                                )
                                cache_s2[k, j] = sv * sin_mult
                                cache_c2[k, j] = cv * cos_mult
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
            if half16 is None:
                if spans2 is not None:
                    _rotate_split(
                        view,
                        b0,
                        b1,
                        group,
                        s0,
                        s1,
                        cache_s,
                        cache_c,
                        cache_s2,
                        cache_c2,
                        interleaved,
                    )
                elif blocks is not None:
                    _rotate_blocks(view, b0, b1, group, s0, s1, cache_s, cache_c, blocks)
                else:
                    touched += _rotate_block(
                        view,
                        None,
                        b0,
                        b1,
                        group,
                        s0,
                        s1,
                        cache_s,
                        cache_c,
                        rot,
                        tmp,
                        interleaved,
                        None,
                        None,
                        prefetch,
                        prefetch,
                        None,
                    )
            elif spans2 is None:
                _rotate16_block(
                    view,
                    b0,
                    b1,
                    s0,
                    s1,
                    cache_s,
                    cache_c,
                    bf16,
                    interleaved,
                    blocks,
                    None,
                    None,
                    prefetch,
                )
            else:
                _rotate16_block(
                    view,
                    b0,
                    b1,
                    s0,
                    s1,
                    cache_s,
                    cache_c,
                    bf16,
                    interleaved,
                    None,
                    cache_s2,
                    cache_c2,
                    prefetch,
                )
    return touched
