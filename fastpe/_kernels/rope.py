"""Rotation: :func:`rope_kernel` and :func:`rope_runs_kernel` rotate channel pairs in place
(``apply_rope``), with the RoPE inner loops (:func:`_rotate_interleaved`, its two-halves
form :func:`_rotate_interleaved_halves` for long rows, :func:`_rotate_half`) beside them.

Both fill a small cache with the cos/sin of a block of positions (from :mod:`.angles`, in
x's dtype so that the rotation runs at x's SIMD width) and rotate every row and head that
holds those positions while the cache is in L1/L2. They differ in how they walk the work:
``rope_kernel`` by sequence index, ``rope_runs_kernel`` by position. Where a position's
cos/sin serve one row alone (one head, positions per batch row or one batch row),
``rope_kernel`` skips the cache and rotates each row as its cos/sin are computed
(:func:`~.direct.rope_pass`).
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .angles import (
    BITS,
    DIGIT,
    LAST,
    LEVELS,
    NO_KEY,
    anchor_step,
    fill_short,
    fold_into_cache,
    position,
    update_anchors,
    worker_items,
)
from .args import RUN_FIRST, RUN_LENGTH, RUN_ROW, RUN_START
from .direct import _rope_h, _rope_i
from .prefetch import prefetch_ahead, prefetch_lines
from .turn import turn_first, turn_second

CACHE_LINE = 64  # bytes


@kernel(inline=True)
def _rotate_interleaved(flat, base, n, s, c, k):
    """The RoPE inner loop, interleaved pairs: rotate ``n`` pairs ``(2i, 2i+1)`` at
    ``flat[base:]`` by row ``k`` of ``s``/``c``.

    Unsigned indices: numba adds no negative-index wraparound, so LLVM vectorises the loop
    without a per-row slice object.
    """
    for i in range(n):
        j = base + np.uint64(2 * i)
        x1 = flat[j]
        x2 = flat[j + np.uint64(1)]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + np.uint64(1)] = turn_second(x2, x1, c[k, i], s[k, i])


@kernel(inline=True)
def _rotate_interleaved_halves(flat, base, n, s, c, k):
    """:func:`_rotate_interleaved` with the row's two halves side by side: pairs ``i`` and
    ``i + n // 2`` in one pass (then the last pair of an odd ``n``), the same operations on
    each pair. Two streams of memory a row instead of one: a core streaming one long
    interleaved row waited on memory where the half layout's two halves did not
    (``fastpe._engine._HALVES_MIN_BYTES``)."""
    h = n // 2
    for i in range(h):
        j = base + np.uint64(2 * i)
        x1 = flat[j]
        x2 = flat[j + np.uint64(1)]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + np.uint64(1)] = turn_second(x2, x1, c[k, i], s[k, i])
        i2 = i + h
        j2 = base + np.uint64(2 * i2)
        y1 = flat[j2]
        y2 = flat[j2 + np.uint64(1)]
        flat[j2] = turn_first(y1, y2, c[k, i2], s[k, i2])
        flat[j2 + np.uint64(1)] = turn_second(y2, y1, c[k, i2], s[k, i2])
    for i in range(2 * h, n):  # an odd n's last pair
        j = base + np.uint64(2 * i)
        x1 = flat[j]
        x2 = flat[j + np.uint64(1)]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + np.uint64(1)] = turn_second(x2, x1, c[k, i], s[k, i])


@kernel(inline=True)
def _rotate_half(flat, base, n, s, c, k):
    """The RoPE inner loop, half-split pairs ``(i, i + n)``; as :func:`_rotate_interleaved`."""
    m = np.uint64(n)
    for i in range(n):
        j = base + np.uint64(i)
        x1 = flat[j]
        x2 = flat[j + m]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + m] = turn_second(x2, x1, c[k, i], s[k, i])


@kernel(inline=True)
def _rotate_half2(flat, base, rows, s, c):
    """``rows`` rows of two half-split pairs back to back from ``flat[base]`` (4 values a
    row), row ``q`` by row ``q`` of the cos/sin cache: each row written out, so that the
    loop runs over rows with a constant stride, which LLVM vectorises (the loop over a
    row's two pairs does not)."""
    for q in range(np.uint64(rows)):
        j = base + np.uint64(4) * q
        a0 = flat[j]
        a1 = flat[j + np.uint64(1)]
        b0 = flat[j + np.uint64(2)]
        b1 = flat[j + np.uint64(3)]
        flat[j] = turn_first(a0, b0, c[q, 0], s[q, 0])
        flat[j + np.uint64(1)] = turn_first(a1, b1, c[q, 1], s[q, 1])
        flat[j + np.uint64(2)] = turn_second(b0, a0, c[q, 0], s[q, 0])
        flat[j + np.uint64(3)] = turn_second(b1, a1, c[q, 1], s[q, 1])


@kernel(inline=True)
def _rotate_interleaved_split(flat, base, n, s, c, s2, c2, k):
    """:func:`_rotate_interleaved` where each pair's second channel takes its own angle
    (``s2``/``c2``): ``(x1 c - x2 s, x2 c2 + x1 s2)`` (HunYuan-VL's multi-axis RoPE)."""
    for i in range(n):
        j = base + np.uint64(2 * i)
        x1 = flat[j]
        x2 = flat[j + np.uint64(1)]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + np.uint64(1)] = turn_second(x2, x1, c2[k, i], s2[k, i])


@kernel(inline=True)
def _rotate_half_split(flat, base, n, s, c, s2, c2, k):
    """:func:`_rotate_half` with the second channel's own angle (see
    :func:`_rotate_interleaved_split`)."""
    m = np.uint64(n)
    for i in range(n):
        j = base + np.uint64(i)
        x1 = flat[j]
        x2 = flat[j + m]
        flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
        flat[j + m] = turn_second(x2, x1, c2[k, i], s2[k, i])


@kernel(inline=True)
def _rotate_half_two_pass(flat, base, n, s, c, k, tmp):
    """Half-layout rotation of a short row in three sequential passes (same values).

    Copy the first half to ``tmp``, then write each half in its own pass: the one-pass loop
    alternates between the two halves of each row, which keeps the prefetcher from
    streaming short float64 rows.
    """
    m = np.uint64(n)
    for i in range(n):
        tmp[i] = flat[base + np.uint64(i)]
    for i in range(n):
        j = base + np.uint64(i)
        flat[j] = turn_first(tmp[i], flat[j + m], c[k, i], s[k, i])
    for i in range(n):
        j = base + m + np.uint64(i)
        flat[j] = turn_second(flat[j], tmp[i], c[k, i], s[k, i])


@kernel()
def _rotate_block(
    view,
    runs,
    r0,
    r1,
    group,
    q0,
    q1,
    cache_s,
    cache_c,
    rot,
    tmp,
    interleaved,
    short,
    two_pass,
    stretches,
    prefetch,
    halves,
):
    """Rotate every head of the rows that runs ``r0 .. r1 - 1`` hold at ``q0 .. q1 - 1``.

    ``runs`` None: run ``r`` is batch row ``r`` and ``q`` its sequence index. Else run
    ``r`` (see :func:`~.args.runs`) holds ``q`` at batch row ``runs[r, RUN_ROW]``,
    sequence index ``runs[r, RUN_START] + q - runs[r, RUN_FIRST]``, when that lies within
    its length; ``q`` is rotated by row ``q - q0`` of the cos/sin cache. Runs are walked
    ``group`` at a time, side by side, position by position, so that each cache row, once
    in L1, serves every head of ``group`` rows while ``group`` contiguous stretches of
    memory stream. Returns what ``touch_end`` read (see :func:`~.args.rotation`), so that
    the reads are not optimised away.

    The loop is chosen by ``interleaved``, ``short``, ``two_pass``, ``prefetch``,
    ``halves`` and ``stretches`` (see :func:`~.args.loop`), each None or ``ON``. numba
    prunes a branch on whether an argument is None before it compiles the function, so
    each specialization holds only the loop it runs (compiling every loop into every call
    cost seconds on the first call), and that loop is branch-free, which lets the
    reference counts of its arrays be pruned (a branch per row kept them, some 10 ns a
    row).

    ``stretches`` (``runs`` None, no partial-rotary reads, one-pass loops): the positions
    ``q0 .. q1 - 1`` are walked in two stretches side by side, ``q`` and ``q + span``
    (``span`` half of them, rounded down), a head of each in turn, each head's lines
    prefetched ``AHEAD_BYTES`` ahead first, so that each row streams two stretches of
    memory instead of one; an odd count's last position then takes the loop below alone.
    The two rotations are written out: a loop over the two stretches, or over heads and
    stretches as one, ran as slowly as one stretch (scratch; see
    ``fastpe._engine.two_stretches``).
    The blocked and two-row rotations of multi-axis calls have walks of their own
    (:func:`_rotate_blocks`, :func:`_rotate_split`), so that this one compiles as before.
    """
    flat, off0, sb, ss, sh, _, _, _, nh, n, _ = view
    touch_end = rot[2]
    line = CACHE_LINE // flat.itemsize
    touched = 0.0
    if short is not None:
        if interleaved is not None:
            # short rows back to back (one head, interleaved pairs or one pair): the pairs
            # of positions q0 .. q1 - 1 of a row follow each other in memory as the cache's
            # rows do, so each row's block is rotated as one run of (q1 - q0) * n pairs
            s_run = cache_s.reshape(1, cache_s.size)
            c_run = cache_c.reshape(1, cache_c.size)
            for r in range(r0, r1):
                _rotate_interleaved(
                    flat, np.uint64(off0 + r * sb + q0 * ss), (q1 - q0) * n, s_run, c_run, 0
                )
        elif n == 2:  # rows of two half-split pairs: four values at a time
            for r in range(r0, r1):
                _rotate_half2(flat, np.uint64(off0 + r * sb + q0 * ss), q1 - q0, cache_s, cache_c)
        else:  # half-split pairs: each row's block row by row, batch row after batch row
            for r in range(r0, r1):
                for q in range(q1 - q0):
                    _rotate_half(
                        flat, np.uint64(off0 + r * sb + (q0 + q) * ss), n, cache_s, cache_c, q
                    )
        return touched
    k0 = q0  # position q is row q - k0 of the cos/sin cache
    if stretches is not None:
        span = (q1 - q0) // 2
        jump = np.uint64(span * ss)
        for rg in range(r0, r1, group):
            rg1 = min(r1, rg + group)
            for q in range(q0, q0 + span):
                for r in range(rg, rg1):
                    row = off0 + r * sb + q * ss
                    for h in range(nh):
                        base = np.uint64(row + h * sh)
                        prefetch_ahead(flat, base, 2 * n)
                        prefetch_ahead(flat, base + jump, 2 * n)
                        if interleaved is not None:
                            _rotate_interleaved(flat, base, n, cache_s, cache_c, q - k0)
                            _rotate_interleaved(
                                flat, base + jump, n, cache_s, cache_c, q - k0 + span
                            )
                        else:
                            _rotate_half(flat, base, n, cache_s, cache_c, q - k0)
                            _rotate_half(flat, base + jump, n, cache_s, cache_c, q - k0 + span)
        q0 += 2 * span
    for rg in range(r0, r1, group):
        rg1 = min(r1, rg + group)
        for q in range(q0, q1):
            for r in range(rg, rg1):
                if runs is None:  # batch row r, sequence index q
                    row = off0 + r * sb + q * ss
                else:
                    d = q - runs[r, RUN_FIRST]
                    if d < 0 or d >= runs[r, RUN_LENGTH]:
                        continue
                    row = off0 + runs[r, RUN_ROW] * sb + (runs[r, RUN_START] + d) * ss
                for h in range(nh):
                    base = np.uint64(row + h * sh)
                    if interleaved is not None and halves is not None:
                        _rotate_interleaved_halves(flat, base, n, cache_s, cache_c, q - k0)
                    elif interleaved is not None and prefetch is not None:
                        prefetch_ahead(flat, base, 2 * n)
                        _rotate_interleaved(flat, base, n, cache_s, cache_c, q - k0)
                    elif interleaved is not None:
                        _rotate_interleaved(flat, base, n, cache_s, cache_c, q - k0)
                    elif two_pass is not None:
                        _rotate_half_two_pass(flat, base, n, cache_s, cache_c, q - k0, tmp)
                    elif prefetch is not None:
                        prefetch_ahead(flat, base, 2 * n)
                        _rotate_half(flat, base, n, cache_s, cache_c, q - k0)
                    else:
                        _rotate_half(flat, base, n, cache_s, cache_c, q - k0)
                    # partial rotary: read the channels left as they are, one element per
                    # cache line, so that the prefetcher keeps streaming half-rotated rows
                    for j in range(2 * n, touch_end, line):
                        touched += flat[base + np.uint64(j)]
    return touched


@kernel()
def _rotate_blocks(view, r0, r1, group, q0, q1, cache_s, cache_c, blocks):
    """The ``"half:k"`` layout (multi-axis calls): each head of batch rows ``r0 .. r1 - 1``
    at ``q0 .. q1 - 1`` is ``blocks`` blocks of half-split pairs (the walk of
    :func:`_rotate_block`, ``runs`` None)."""
    flat, off0, sb, ss, sh, _, _, _, nh, n, _ = view
    # block b's cos/sin (columns b*m .. b*m + m - 1 of cache row q) is row q * blocks + b
    # of the cache seen as (rows * blocks, m)
    m = n // blocks
    s_blk = cache_s.reshape(cache_s.shape[0] * blocks, m)
    c_blk = cache_c.reshape(cache_c.shape[0] * blocks, m)
    width = np.uint64(2 * m)
    for rg in range(r0, r1, group):
        rg1 = min(r1, rg + group)
        for q in range(q0, q1):
            for r in range(rg, rg1):
                row = off0 + r * sb + q * ss
                for h in range(nh):
                    base = np.uint64(row + h * sh)
                    for b in range(blocks):
                        _rotate_half(
                            flat,
                            base + np.uint64(b) * width,
                            m,
                            s_blk,
                            c_blk,
                            (q - q0) * blocks + b,
                        )


@kernel()
def _rotate_split(view, r0, r1, group, q0, q1, cache_s, cache_c, cache_s2, cache_c2, interleaved):
    """Two rows of ``pair_axes`` (multi-axis calls): each pair's second channel at its own
    angle (``cache_s2``/``cache_c2``), HunYuan-VL (the walk of :func:`_rotate_block`)."""
    flat, off0, sb, ss, sh, _, _, _, nh, n, _ = view
    for rg in range(r0, r1, group):
        rg1 = min(r1, rg + group)
        for q in range(q0, q1):
            for r in range(rg, rg1):
                row = off0 + r * sb + q * ss
                for h in range(nh):
                    base = np.uint64(row + h * sh)
                    if interleaved is not None:
                        _rotate_interleaved_split(
                            flat, base, n, cache_s, cache_c, cache_s2, cache_c2, q - q0
                        )
                    else:
                        _rotate_half_split(
                            flat, base, n, cache_s, cache_c, cache_s2, cache_c2, q - q0
                        )


@kernel()
def _scratch(flat, n, chunk):
    """One worker's scratch: the anchors, the cos/sin cache of ``chunk`` positions, a row."""
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    cache_s = np.empty((chunk, n), dtype=flat.dtype)
    cache_c = np.empty((chunk, n), dtype=flat.dtype)
    return anc_s, anc_c, cache_s, cache_c, np.empty(n, dtype=flat.dtype)


@kernel()
def rope_kernel(
    w0,
    w1,
    view,
    pos,
    freqs,
    rot,
    split,
    fill_ahead,
    fused,
    interleaved,
    short,
    two_pass,
    stretches,
    prefetch,
    halves,
):
    """Rotate the ``(nb, ns, nh, 2*npairs)`` ``view`` in place: workers ``w0 .. w1 - 1``.

    Positions as in :func:`~.args.positions`; cos times ``rot.cos_mult``, sin times
    ``rot.sin_mult`` (attention factor; sign for the inverse).

    Work items are blocks of ``split.chunk`` consecutive sequence indices (times one batch
    row when positions are per batch row); the work is cut into ``split.n_workers``
    contiguous ranges of items and this call does workers ``w0 .. w1 - 1`` (the caller runs
    disjoint worker ranges on several threads at once: the kernel releases the GIL). Each
    output element is written by exactly one worker, and each worker's anchor cache follows
    consecutive positions. Per item, the cos/sin of its positions are computed once into a
    small cache and reused for every batch row and head, ``split.group`` rows at a time
    (:func:`_rotate_block`). Short rows (``short``: a few pairs) at consecutive positions
    fill that cache a group of ``RADIX`` positions at a time: per position, the fill's loop
    over a pair or two cost more than its work. One pair: the group's positions in one loop
    LLVM vectorises (unsigned row indices; numba's negative-index wraparound on signed ones
    kept it scalar); two to seven pairs: each pair's positions in one loop; eight and more:
    each position's pairs in one vectorised loop (scratch comparisons, 4 and 32 MiB
    float32: 1.3-1.7x at dim 2, 1.07-1.14x at dim 16; unsigned loops 0.86-0.96x at dims 4-8
    in either order). Each value takes the operations of
    :func:`~.angles.fold_into_cache`, so the bits are the same; the short specialization
    compiles these fill loops alone (position arrays take them one position at a time). It
    lengthens that specialization's first compile (README, "Small head sizes"); no other
    specialization of this kernel compiles them (the 16-bit kernel's short one does: the
    loops are :func:`~.angles.fill_short`, shared). Short half-layout rows (one head, up to
    64 bytes, 128 in cache: ``fastpe._engine.short_run``) take the same fill and rotate
    each batch row's block row by row.

    ``fill_ahead`` (None or ``ON``, a constant of each specialization as the loop's): for
    positions per batch row (an item is one batch row's positions, its cos/sin its own),
    each position's rotated lines are prefetched while its cos/sin is computed, so that
    the memory the rotation waits on arrives during that work instead of after it (the
    caller chooses, see ``fastpe._engine.fill_ahead``).

    ``fused`` (None, or an int64: a specialization each): for rows whose cos/sin serve
    that row alone (one head; positions per batch row, or one batch row), each row is
    rotated as its cos/sin are computed, a line at a time (:func:`~.direct.rope_pass`: the
    values of the cache's path, the same bits), each line prefetching the line ``fused``
    bytes on, with no cache between them and no :func:`_rotate_block` (the caller chooses,
    see ``fastpe._engine.fused_rows``).
    """
    flat, off0, sb, ss, sh, _, nb, ns, nh, n, _ = view
    values, given, offsets, per_batch = pos
    wh, wl, tc, ts = freqs
    sin_mult, cos_mult, _ = rot
    chunk, group, n_workers = split
    renorm = flat.itemsize == 8
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s, anc_c, cache_s, cache_c, tmp = _scratch(flat, n, chunk)
    carry = np.empty(128 // flat.itemsize, dtype=flat.dtype)  # (fused: two lines)
    run = ss == 2 * n
    touched = 0.0
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            if short is not None:
                fill_short(
                    pos,
                    freqs,
                    bo,
                    s0,
                    s1,
                    keys,
                    anc_s,
                    anc_c,
                    cache_s,
                    cache_c,
                    sin_mult,
                    cos_mult,
                    renorm,
                )
            else:
                for si in range(s0, s1):
                    p = position(values, given, offsets, bo, si)
                    if fill_ahead is not None:  # (an item is batch row bo's positions)
                        row = off0 + bo * sb + si * ss
                        for h in range(nh):
                            prefetch_lines(flat, row + h * sh, 2 * n)
                    if keys[LAST] != (p >> BITS):  # else every level matches p
                        # anchors_at's operations written out, as in fill_short: its
                        # inlined body counted the references of its array arguments on
                        # each pass (every RADIX positions), 8-13% of a one-head call of
                        # 64 pairs (scratch profile)
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    if fused is not None:  # the row rotated as its cos/sin come
                        row = off0 + bo * sb + si * ss
                        # rows back to back complete the line they share in carry
                        head = run and si > s0
                        tail = run and si < s1 - 1
                        if interleaved is not None:
                            _rope_i(
                                flat, row, anc_s, anc_c, LAST, tc, ts, p & DIGIT, sin_mult,
                                cos_mult, carry, head, tail, fused,
                            )  # fmt: skip
                        else:
                            _rope_h(
                                flat, row, anc_s, anc_c, LAST, tc, ts, p & DIGIT, sin_mult,
                                cos_mult, carry, head, tail, fused,
                            )  # fmt: skip
                    else:
                        fold_into_cache(
                            anc_s,
                            anc_c,
                            tc,
                            ts,
                            p & DIGIT,
                            cache_s,
                            cache_c,
                            si - s0,
                            sin_mult,
                            cos_mult,
                            renorm,
                        )
            if fused is not None:
                continue
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
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
                short,
                two_pass,
                stretches,
                prefetch,
                halves,
            )
    return touched


@kernel()
def rope_runs_kernel(
    w0, w1, view, runs, freqs, rot, split, interleaved, two_pass, prefetch, halves
):
    """Rotate the ``view`` in place, walking positions instead of sequence indices.

    For per-row positions made of long runs (one offset per batch row; packed sequences)
    and few heads: each row would otherwise need its own cos/sin, computed for it alone.
    Work items are blocks of ``split.chunk`` positions ``runs.first + q`` for
    ``q < runs.count``; the runs (:func:`~.args.runs`) are walked ``split.group`` at a time,
    side by side, position by position, so each position's cos/sin is computed once and
    serves every run of the group that holds it. Everything else as in :func:`rope_kernel`.
    """
    flat, _, _, _, _, _, _, _, _, n, _ = view
    rr, first, count = runs
    wh, wl, tc, ts = freqs
    sin_mult, cos_mult, _ = rot
    chunk, group, n_workers = split
    renorm = flat.itemsize == 8
    total = (count + chunk - 1) // chunk
    anc_s, anc_c, cache_s, cache_c, tmp = _scratch(flat, n, chunk)
    touched = 0.0
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            p0 = first + item * chunk
            p1 = min(first + count, p0 + chunk)
            for p in range(p0, p1):
                if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                    if keys[LAST - 1] == (p >> (2 * BITS)):
                        anchor_step(anc_s, anc_c, tc, ts, p, keys)
                    else:
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                fold_into_cache(
                    anc_s,
                    anc_c,
                    tc,
                    ts,
                    p & DIGIT,
                    cache_s,
                    cache_c,
                    p - p0,
                    sin_mult,
                    cos_mult,
                    renorm,
                )
            touched += _rotate_block(
                view,
                rr,
                0,
                rr.shape[0],
                group,
                p0,
                p1,
                cache_s,
                cache_c,
                rot,
                tmp,
                interleaved,
                None,
                two_pass,
                None,
                prefetch,
                halves,
            )
    return touched
