"""Sinusoidal tables and additions: :func:`table_kernel` (``sinusoidal_table``) and
:func:`add_kernel` (``add_sinusoidal``); for float32 rows of a few pairs at consecutive
positions, :func:`table_lanes_kernel` and :func:`add_lanes_kernel` (the same values,
stepped for many positions at once by :func:`lanes_rows`).

Both take their cos/sin from :mod:`.angles`, folded from the anchor cache or (float32
paths) stepped by the recurrence, and write or add them in the array's layout. Indices into
``flat`` are unsigned where channels have unit stride: numba then adds no negative-index
wraparound and LLVM vectorises the loops without a per-row slice object (slicing a shared
array bumps its reference count atomically, and threads doing that per row contend for one
cache line).
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
    RADIX,
    STEP1,
    add_angle,
    anchor_step,
    fold,
    fold_into_cache,
    position,
    rec_continues,
    rec_load,
    rec_step,
    sincos_exact,
    update_anchors,
    worker_items,
)
from .prefetch import prefetch_lines
from .stream import LINE, stream_fence, stream_next
from .transpose import transpose2, transpose4
from .vectors import wide_vectors

# A float32 value below this is recomputed exactly so that it stays within 1 ulp.
FIXUP_THRESHOLD = 2.0**-20

# add_kernel's laid-out walk (table rows that several batch rows share) adds its rows in
# blocks of this many bytes, each block to every batch row before the next, and (with
# ``prefetch``) prefetches each batch row's block after next as it adds one
# (:func:`_prefetch_block`). Adding a work item's whole rows (192 KiB) to one batch row
# after another ran at 67-70% of the ``a *= s`` yardstick on the rocketlake host
# (bench/roofline.py, 8 batch rows of float32); a block at a time, prefetched, at 85%;
# blocks of 128 bytes were slower, of 512 bytes slower at 64 batch rows (README, "Shared
# table rows added a block at a time").
SUM_BLOCK_BYTES = 256


@kernel(inline=True)
def _prefetch_block(flat, e0, k0, blk, run, runs, r, ss):
    """The laid-out walk's prefetch (see ``SUM_BLOCK_BYTES``): a batch row's block after
    next, from ``flat[e0]``, block ``k0`` of run ``r`` of ``runs`` (rows apart when there
    are several, ``ss`` elements from one to the next) of ``run`` elements each. One run
    (rows back to back): two blocks on, past its end too (the batch row's next positions,
    the worker's next item). Rows apart: within the row, else as far into the next row; no
    channels the walk does not add to."""
    ahead = k0 + 2 * blk
    if ahead < run or runs == 1:
        prefetch_lines(flat, e0 + 2 * blk, blk)
    elif r + 1 < runs and ahead - run < run:
        prefetch_lines(flat, e0 - k0 + ss + (ahead - run), blk)


@kernel()  # scalars: LLVM inlines it (as add_angle)
def _small(sv, cv):
    """1 if either value is below ``FIXUP_THRESHOLD`` in magnitude, else 0."""
    return (abs(sv) < FIXUP_THRESHOLD) | (abs(cv) < FIXUP_THRESHOLD)


@kernel()  # scalars: LLVM inlines it (as add_angle)
def _small_pair(sv, cv):
    """Whether the float32 roundings of ``sv`` and ``cv`` (a sine and a cosine, magnitudes
    at most 1 and a few float64 ulps) may hold one below ``FIXUP_THRESHOLD``: ``|sv cv|``
    below twice the threshold. A value that rounds below it is under the threshold, and its
    partner at most 1 and a little, so the product is under it too; the test also takes
    pairs up to twice the threshold, which :func:`_fix_small_row` then leaves as they are
    (it recomputes the values whose float32 is below it). One product and one compare for
    a pair where :func:`_small` took two of each (the row loops' vector instructions for 16
    pairs: 8 against 14). ``bench/roofline.py --match "sinusoidal_table 262144x1024
    float32"`` on the rocketlake host, alternating with the code before, twice each: the
    interleaved table (rows stepped) 47.5 and 48.9 ms against 51.4 and 51.5 (medians of 3
    runs); the half layout (rows folded) 48.2 and 49.6 against 47.7 and 49.4, no change."""
    return abs(sv * cv) < 2.0 * FIXUP_THRESHOLD


@kernel(inline=True)
def _fold_write(flat, base, interleaved, anc_s, anc_c, tc, ts, t):
    """Table row at ``flat[base:]`` straight from the anchor and step-table row ``t``.

    Returns whether a pair may hold a value below ``FIXUP_THRESHOLD`` in magnitude
    (:func:`_small_pair`).
    """
    n = anc_s.shape[1]
    small = False
    if interleaved is not None:
        for i in range(n):
            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
            j = base + np.uint64(2 * i)
            flat[j] = sv
            flat[j + np.uint64(1)] = cv
            small |= _small_pair(sv, cv)
    else:
        m = np.uint64(n)
        for i in range(n):
            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
            j = base + np.uint64(i)
            flat[j] = sv
            flat[j + m] = cv
            small |= _small_pair(sv, cv)
    return small


@kernel(inline=True)
def _rec_write(flat, base, interleaved, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` of the step table and write it (one rounding).

    Returns whether a pair may hold a value below ``FIXUP_THRESHOLD`` in magnitude
    (:func:`_small_pair`).
    """
    n = cur_s.shape[0]
    small = False
    if interleaved is not None:
        for i in range(n):
            sv, cv = add_angle(cur_s[i], cur_c[i], tc[r, i], ts[r, i])
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(2 * i)
            flat[j] = sv
            flat[j + np.uint64(1)] = cv
            small |= _small_pair(sv, cv)
    else:
        m = np.uint64(n)
        for i in range(n):
            sv, cv = add_angle(cur_s[i], cur_c[i], tc[r, i], ts[r, i])
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(i)
            flat[j] = sv
            flat[j + m] = cv
            small |= _small_pair(sv, cv)
    return small


@kernel(inline=True)
def _rec_cache(cache_s, cache_c, k, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` and store it, rounded to the cache's dtype, in row ``k``."""
    for i in range(cur_s.shape[0]):
        sv, cv = add_angle(cur_s[i], cur_c[i], tc[r, i], ts[r, i])
        cur_s[i] = sv
        cur_c[i] = cv
        cache_s[k, i] = sv
        cache_c[k, i] = cv


@kernel(inline=True)
def _rec_add(flat, base, interleaved, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` and add it to float32 ``flat`` (rounded to float32 first,
    as the cached path does)."""
    n = cur_s.shape[0]
    if interleaved is not None:
        for i in range(n):
            sv, cv = add_angle(cur_s[i], cur_c[i], tc[r, i], ts[r, i])
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(2 * i)
            flat[j] = flat[j] + np.float32(sv)
            flat[j + np.uint64(1)] = flat[j + np.uint64(1)] + np.float32(cv)
    else:
        m = np.uint64(n)
        for i in range(n):
            sv, cv = add_angle(cur_s[i], cur_c[i], tc[r, i], ts[r, i])
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(i)
            flat[j] = flat[j] + np.float32(sv)
            flat[j + m] = flat[j + m] + np.float32(cv)


@kernel()
def _fix_small_row(flat, base, sd, interleaved, p, wh, wl):
    """Recompute exactly the table values too small for angle addition's absolute error.

    Channel ``j`` of the row is ``flat[base + j*sd]``.
    """
    n = wh.shape[0]
    for i in range(n):
        j1 = base + (2 * i if interleaved is not None else i) * sd
        j2 = base + (2 * i + 1 if interleaved is not None else n + i) * sd
        if abs(flat[j1]) < FIXUP_THRESHOLD or abs(flat[j2]) < FIXUP_THRESHOLD:
            si, ci = sincos_exact(p, wh[i], wl[i])
            flat[j1] = si
            flat[j2] = ci


@kernel()
def _count_small(s, c):
    k = 0
    for i in range(s.shape[0]):
        k += _small(s[i], c[i])
    return k


@kernel()
def _fix_small(p, wh, wl, s, c):
    """Recompute exactly the values too small for angle addition's absolute error."""
    for i in range(s.shape[0]):
        if abs(s[i]) < FIXUP_THRESHOLD or abs(c[i]) < FIXUP_THRESHOLD:
            si, ci = sincos_exact(p, wh[i], wl[i])
            s[i] = si
            c[i] = ci


@kernel()
def _add(flat, base, sd, n, interleaved, s, c):
    """Strided channels: ``flat[base + j*sd] += table value j`` (``sd`` may be negative)."""
    if interleaved is not None:
        for i in range(n):
            flat[base + 2 * i * sd] += s[i]
            flat[base + (2 * i + 1) * sd] += c[i]
    else:
        for i in range(n):
            flat[base + i * sd] += s[i]
            flat[base + (n + i) * sd] += c[i]


@kernel()
def _write(flat, base, sd, n, interleaved, s, c):
    """Strided channels: ``flat[base + j*sd] = table value j`` (``sd`` may be negative)."""
    if interleaved is not None:
        for i in range(n):
            flat[base + 2 * i * sd] = s[i]
            flat[base + (2 * i + 1) * sd] = c[i]
    else:
        for i in range(n):
            flat[base + i * sd] = s[i]
            flat[base + (n + i) * sd] = c[i]


@kernel()
def table_kernel(w0, w1, view, pos, freqs, split, fixup, fold_rows, interleaved, strided, stream):
    """Write the ``(ns, 2*npairs)`` table into the ``(1, ns, 1, 2*npairs)`` ``view``.

    Workers ``w0 .. w1 - 1`` of ``split.n_workers`` (see :func:`fastpe._kernels.rope_kernel`
    for the work split). With ``fold_rows`` None (float32 rows the engine steps:
    ``fastpe._engine.table_stepped``) rows are stepped from row to row (see
    :func:`~.angles.rec_load`); with a float, rows are folded from their anchor, contiguous
    ones in the same pass as the write. ``fold_rows is None`` is tested
    right at the branch; numba prunes it for None only (a float is no flag: the folded
    specialization keeps the stepped path too, and a flag would cost the small planned
    calls that pass it about 0.2 us each, :mod:`.flag`). With
    ``fixup`` (float32) values below ``FIXUP_THRESHOLD`` are recomputed exactly. With
    ``stream`` ``ON`` (None: off; a constant of each specialization too), rows with
    unit-stride channels, folded or stepped, are computed into a buffer and copied out by
    streaming stores (:mod:`.stream`; each worker's rows as one run where they lie back to
    back, :func:`~.stream.stream_next`): streamed tables whose rows fit
    :func:`~.direct.row_pass` (``_engine.direct_rows``) go to
    :func:`~.direct.table_direct_kernel` instead, which computes this kernel's bits a line
    at a time straight into memory; this path keeps the others. Every specialization is compiled
    for 512-bit vectors (:mod:`.vectors`): where the stores do not hold the core back (streamed,
    or into the cache), computing the rows is what costs (1 GiB float32 interleaved, 2 threads:
    59-65 ms against 82-91 with plain stores and 256-bit vectors; streaming alone 79-81 ms,
    512-bit vectors alone 85-94 ms; 8-32 MiB in cache, 54-64% of the plain fill against 42-53%
    in alternating invocations; README, "Streamed tables with 512-bit vectors").
    ``strided`` ``ON`` (None: unit stride) for channels of another stride (``sd`` may be
    negative), which are stepped or folded first and then written: a constant of each
    specialization too, so that a first call compiles the one kind of row it writes.
    """
    # the layout as a constant of each specialization: ``interleaved`` is None or ON
    # (see :func:`~.args.loop`), and the row helpers test it as an argument, so numba
    # prunes the other layout's branches before it compiles (also once the helpers are
    # inlined); the row loop is then branch-free, which lets the reference counts of its
    # arrays be pruned (a branch per row kept them: ~80 ns a row, the whole cost of a
    # 2-channel row)
    wide_vectors()  # see the docstring
    flat, off0, _, ss, _, sd, _, ns, _, n, _ = view
    values, given, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    s = np.empty(n)
    c = np.empty(n)
    # where unit-stride rows are written: the table, or (streaming) a row in L1 after a
    # line's elements that stream_carry may fill with the previous row's last ones
    lead = LINE // flat.itemsize
    if stream is not None:
        dst = np.empty(lead + 2 * n, dtype=flat.dtype)
    else:
        dst = flat
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        prev = NO_KEY
        i0, i1 = worker_items(n_chunks, w, n_workers)
        s_end = min(ns, i1 * chunk)  # the worker's rows: i0 * chunk .. s_end - 1
        carry = -1  # see stream_carry
        for item in range(i0, i1):
            s0 = item * chunk
            for si in range(s0, min(ns, s0 + chunk)):
                p = position(values, given, offsets, 0, si)
                base = off0 + si * ss
                if fold_rows is None:
                    if rec_continues(p, prev):
                        if p - prev > 1:
                            rec_step(s, c, tc, ts, p - prev - 1)
                        r = STEP1
                    else:
                        # the restart of rec_load's docstring, written out (a call per group of
                        # RADIX positions cost reference counts)
                        if keys[LAST] != (p >> BITS):
                            if keys[LAST - 1] == (p >> (2 * BITS)):
                                anchor_step(anc_s, anc_c, tc, ts, p, keys)
                            else:
                                update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                        rec_load(anc_s, anc_c, s, c)
                        r = 0
                        if p & DIGIT != 0:
                            rec_step(s, c, tc, ts, (p & DIGIT) - 1)
                            r = STEP1
                    if strided is None:
                        at = lead if stream is not None else base  # the row's start in dst
                        small = _rec_write(dst, np.uint64(at), interleaved, s, c, tc, ts, r)
                        if small:
                            _fix_small_row(dst, at, sd, interleaved, float(p), wh, wl)
                        if stream is not None:
                            carry = stream_next(
                                flat,
                                base,
                                dst,
                                lead,
                                2 * n,
                                ss,
                                ss == 2 * n,
                                carry,
                                si == s_end - 1,
                            )
                    else:  # strided channels: step, then write (same values)
                        if r == STEP1:  # (r, not a constant: one compiled rec_step)
                            rec_step(s, c, tc, ts, r)
                        _write(flat, base, sd, n, interleaved, s, c)
                        if _count_small(s, c) > 0:
                            _fix_small_row(flat, base, sd, interleaved, float(p), wh, wl)
                    prev = p
                else:
                    if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    if strided is None:
                        at = lead if stream is not None else base  # the row's start in dst
                        small = _fold_write(
                            dst, np.uint64(at), interleaved, anc_s, anc_c, tc, ts, p & DIGIT
                        )
                        if fixup and small:
                            _fix_small_row(dst, at, sd, interleaved, float(p), wh, wl)
                        if stream is not None:
                            carry = stream_next(
                                flat,
                                base,
                                dst,
                                lead,
                                2 * n,
                                ss,
                                ss == 2 * n,
                                carry,
                                si == s_end - 1,
                            )
                    else:
                        fold(anc_s[LAST], anc_c[LAST], tc, ts, p & DIGIT, s, c)
                        if fixup and _count_small(s, c) > 0:
                            _fix_small(float(p), wh, wl, s, c)
                        _write(flat, base, sd, n, interleaved, s, c)
        if stream is not None:
            stream_fence()
    return 0.0


@kernel()
def add_kernel(w0, w1, view, pos, freqs, split, fold_rows, interleaved, once, strided, prefetch):
    """Add the table to the ``(nb, ns, 1, 2*npairs)`` ``view`` in place.

    Work split and positions as in :func:`fastpe._kernels.rope_kernel`. The table values are
    rounded to x's dtype once and added there, at x's SIMD width. ``fold_rows`` is None for
    float32 (values by the recurrence of :func:`~.angles.rec_load`, as in float32 tables)
    and a float for float64 (each value folded from its anchor). ``interleaved``: see
    :func:`table_kernel`.

    The walk is chosen by ``once``, ``strided`` and ``prefetch``, each None or ``ON`` (as
    :func:`~.args.loop`'s): numba prunes the branches on them (and on ``fold_rows`` where it
    is None) before it compiles, so each specialization holds the one walk it runs and a first call
    compiles that walk alone (all three in one body made the first ``add_sinusoidal`` call
    compile about a second longer). The caller (``fastpe._engine``) chooses:

    - ``once`` (float32, unit-stride channels only: the walk ignores ``sd``; each table
      row serving one row of x: positions per batch row, or a single batch row): each
      value is taken straight from
      the recurrence's state and added in the same loop; with ``prefetch`` each row first
      prefetches the next row's lines (rows of 1-4 KiB in the half layout, whose two
      halves stream side by side as in the prefetched RoPE loop; in either layout on Zen
      5: ``fastpe._engine.zen5_or_later``); rows that fit :func:`~.direct.row_pass` go to
      :func:`~.direct.add_direct_kernel` instead (the same bits, a line at a time);
    - ``strided`` (channels of another stride, ``sd`` may be negative): a work item's rows
      go to a cos/sin cache, added to ``split.group`` batch rows side by side, position by
      position;
    - neither (unit-stride channels): a work item's table rows are written once into
      ``lay`` as x's rows hold them (one run where rows are back to back), with no shuffle
      per batch row (``split.group`` does not apply): one batch row adds them in one pass
      (rows apart: row by row); several add them a block of ``SUM_BLOCK_BYTES`` at a time,
      each block to every batch row before the next, and with ``prefetch`` each batch
      row's block after next is prefetched as one is added (:func:`_prefetch_block`).
    """
    # the layout as a constant of each specialization (see table_kernel)
    flat, off0, sb, ss, _, sd, nb, ns, _, n, _ = view
    values, given, offsets, per_batch = pos
    wh, wl, tc, ts = freqs
    chunk, group, n_workers = split
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    cur_s = np.empty(n)
    cur_c = np.empty(n)
    # where a work item's table rows go: added at once (``once``, float32: folded float64
    # rows take ``lay``), into ``lay`` in x's layout (unit stride), or into a cos/sin cache
    # (``strided``)
    laid = strided is None and (once is None or fold_rows is not None)
    lay = np.empty(chunk * 2 * n if laid else 0, dtype=flat.dtype)
    cache_s = np.empty((chunk if strided is not None else 0, n), dtype=flat.dtype)
    cache_c = np.empty((chunk if strided is not None else 0, n), dtype=flat.dtype)
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        prev = NO_KEY
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
            for si in range(s0, s1):
                p = position(values, given, offsets, bo, si)
                if fold_rows is None:
                    if rec_continues(p, prev):
                        if p - prev > 1:
                            rec_step(cur_s, cur_c, tc, ts, p - prev - 1)
                        r = STEP1
                    else:
                        # the restart of rec_load's docstring, written out (a call per group of
                        # RADIX positions cost reference counts)
                        if keys[LAST] != (p >> BITS):
                            if keys[LAST - 1] == (p >> (2 * BITS)):
                                anchor_step(anc_s, anc_c, tc, ts, p, keys)
                            else:
                                update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                        rec_load(anc_s, anc_c, cur_s, cur_c)
                        r = 0
                        if p & DIGIT != 0:
                            rec_step(cur_s, cur_c, tc, ts, (p & DIGIT) - 1)
                            r = STEP1
                    prev = p
                    if once is not None:
                        # rows that use their table row once add float32 values straight
                        # from the recurrence's state (the same values: both round the state
                        # to float32 before adding); scratch comparison, 1 x 262144 x 1024
                        # float32, in one process: 0.73 of the ``a *= s`` yardstick
                        # (interleaved) and 0.69 (half, prefetched) against 0.62 and 0.56
                        # through ``lay``
                        base = off0 + b0 * sb + si * ss
                        if prefetch is not None:  # (rows in reverse: the row below clipped)
                            prefetch_lines(flat, max(0, base + ss), 2 * n)
                        _rec_add(flat, np.uint64(base), interleaved, cur_s, cur_c, tc, ts, r)
                    elif strided is None:
                        at = np.uint64((si - s0) * 2 * n)
                        _rec_write(lay, at, interleaved, cur_s, cur_c, tc, ts, r)
                    else:
                        _rec_cache(cache_s, cache_c, si - s0, cur_s, cur_c, tc, ts, r)
                else:
                    if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    if strided is None:
                        at = np.uint64((si - s0) * 2 * n)
                        _fold_write(lay, at, interleaved, anc_s, anc_c, tc, ts, p & DIGIT)
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
                            1.0,
                            1.0,
                            False,
                        )
            if fold_rows is None and once is not None:
                continue
            if strided is None and b1 - b0 == 1 and ss == 2 * n:
                # one batch row, rows back to back: one run
                d0 = np.uint64(off0 + b0 * sb + s0 * ss)
                for j in range(np.uint64((s1 - s0) * 2 * n)):
                    flat[d0 + j] = flat[d0 + j] + lay[j]
                continue
            if strided is None:
                # the laid-out rows (one run where rows are back to back), where several
                # batch rows add them in blocks of SUM_BLOCK_BYTES, each block added to
                # every batch row before the next, each batch row's block after next
                # prefetched (see SUM_BLOCK_BYTES)
                runs, run = (1, (s1 - s0) * 2 * n) if ss == 2 * n else (s1 - s0, 2 * n)
                blk = SUM_BLOCK_BYTES // flat.itemsize if b1 - b0 > 1 else run
                for r in range(runs):
                    at = r * 2 * n
                    for k0 in range(0, run, blk):
                        m = np.uint64(min(run, k0 + blk) - k0)
                        lk = np.uint64(at + k0)
                        for b in range(b0, b1):
                            e0 = off0 + b * sb + (s0 + r) * ss + k0
                            if prefetch is not None:
                                _prefetch_block(flat, e0, k0, blk, run, runs, r, ss)
                            d0 = np.uint64(e0)
                            for j in range(m):
                                flat[d0 + j] = flat[d0 + j] + lay[lk + j]
            else:  # group batch rows side by side, position by position
                for bg in range(b0, b1, group):
                    bg1 = min(b1, bg + group)
                    for si in range(s0, s1):
                        for b in range(bg, bg1):
                            base = off0 + b * sb + si * ss
                            _add(flat, base, sd, n, interleaved, cache_s[si - s0], cache_c[si - s0])
    return 0.0


GROUP_LANES = 16  # groups of RADIX positions stepped side by side by the lanes kernels
# lanes_rows's state in one flat float64 array: per pair, RADIX + 1 slots (the lanes'
# starting values, then one per step), each the GROUP_LANES sines then the GROUP_LANES
# cosines. One array at offsets known to differ by whole slots: LLVM sees that a step's
# reads and writes do not overlap, and vectorises it (with separate arrays for the state
# and the output it could not rule out aliasing, and stepped lane by lane).
SLOT = 2 * GROUP_LANES
PAIR_SLOTS = (RADIX + 1) * SLOT


@kernel()
def lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, half):
    """The recurrence's float64 values at the positions of groups ``g0 .. g1 - 1`` (group
    ``g``: positions ``g * RADIX .. g * RADIX + RADIX - 1``), stepped ``GROUP_LANES`` groups
    side by side, into ``out`` (float64, or float32: each value rounded once) as the rows
    of an interleaved table: ``out[q * 2n + 2i]`` and
    ``out[q * 2n + 2i + 1]``, the sine and cosine of pair ``i`` at position ``g0 * RADIX +
    q``; with ``half`` True (None: interleaved; a specialization of its own), as the rows
    of a half-layout table: ``out[q * 2n + i]`` and ``out[q * 2n + n + i]`` (rows of one
    pair are the same either way). ``lanes`` (``n * PAIR_SLOTS`` float64, zeros before the
    first call) holds the state.

    The recurrence steps each row from the previous one (:func:`~.angles.rec_load`): at
    a few pairs a row, that chain of dependent angle additions and the work around each row
    took longer than the row's own bytes. Groups of ``RADIX`` positions start from their own
    anchor, so ``GROUP_LANES`` of them are independent lanes of one vectorised step, the
    ``t``-th row of every group computed at once (the same operations, in the same order,
    for each value: the group's anchor, the identity row, then ``t`` steps of ``w``; the
    identity step is exact, so the recurrence's restart in mid-group, which skips it, gives
    the same bits). The steps keep each pair's values of one step next to one another, lane
    by lane; once a block's ``RADIX`` steps are done, its rows are written out, four lanes
    at a time by 4 x 4 transposes in vector registers (:func:`~.transpose.transpose4`:
    four vector loads and stores instead of sixteen scalar ones), so that the callers copy
    whole runs of rows. The loops over a block's positions take a trip count LLVM cannot
    fold: unrolled, they made this function's first compile 3x longer (about 9 s more
    for a first small-dim table).

    One call per work item, whatever its length: a call's array arguments cost an atomic
    reference count update each, on counts that every thread shares (a call per block of
    ``GROUP_LANES`` groups spent about 10% of a 2-channel table in them on one thread, more
    on two). The anchors of each group come as :func:`~.angles.update_anchors` brings them,
    its most frequent step (a new anchor of 256 positions, level ``LAST - 1``, under the
    same coarser one) written out here for the same reason.
    """
    n = wh.shape[0]
    row_len = np.uint64(RADIX * 2 * n)  # out's stride from one lane to the next
    for gb in range(g0, g1, GROUP_LANES):
        nl = min(GROUP_LANES, g1 - gb)
        g = np.uint64(GROUP_LANES)
        for lane in range(nl):  # each group's anchor, as anchors_at brings it
            p = (gb + lane) << BITS
            if keys[LAST - 1] != (p >> (2 * BITS)):  # every RADIX groups
                if keys[LAST - 2] == (p >> (3 * BITS)):  # update_anchors's operations
                    row = 2 * RADIX + ((p >> (2 * BITS)) & DIGIT)
                    for i in range(n):
                        anc_s[LAST - 1, i], anc_c[LAST - 1, i] = add_angle(
                            anc_s[LAST - 2, i], anc_c[LAST - 2, i], tc[row, i], ts[row, i]
                        )
                    keys[LAST - 1] = p >> (2 * BITS)
                else:
                    update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
            # the finest level, written out here; keys[LAST] unused
            r = RADIX + ((p >> BITS) & DIGIT)
            for i in range(n):
                k = i * PAIR_SLOTS + lane
                lanes[k], lanes[k + GROUP_LANES] = add_angle(
                    anc_s[LAST - 1, i], anc_c[LAST - 1, i], tc[r, i], ts[r, i]
                )
        ob = np.uint64((gb - g0) * RADIX * 2 * n)  # the block's first row in out
        for t in range(RADIX):
            row = 0 if t == 0 else STEP1  # the identity, then one step of w
            for i in range(n):
                ct = tc[row, i]
                st = ts[row, i]
                r0 = np.uint64(i * PAIR_SLOTS + t * SLOT)
                r1 = r0 + np.uint64(SLOT)
                for lane in range(np.uint64(nl)):  # a trip count unknown to LLVM: vectorised
                    sv = lanes[r0 + lane]
                    cv = lanes[r0 + np.uint64(GROUP_LANES) + lane]
                    nsv, ncv = add_angle(sv, cv, ct, st)
                    lanes[r1 + lane] = nsv
                    lanes[r1 + np.uint64(GROUP_LANES) + lane] = ncv
        # the block's rows: four lanes at a time by transposes (16 values in vector
        # registers), the rest value by value; slot t + 1 holds step t
        full = nl - nl % 4
        nt = min(RADIX, nl * RADIX)  # RADIX, unknown to LLVM: not unrolled (see above)
        for lb in range(0, full, 4):
            o = ob + np.uint64(lb) * row_len
            if half is not None and n > 1:
                _half_rows4(lanes, out, o, row_len, lb, nt, n)
            elif n == 1:  # positions t and t + 1 of four lanes: [s, c, s, c] each
                for t in range(0, nt, 2):
                    a = np.uint64((t + 1) * SLOT + lb)
                    transpose4(
                        lanes,
                        a,
                        a + g,
                        a + np.uint64(SLOT),
                        a + np.uint64(SLOT) + g,
                        out,
                        o + np.uint64(2 * t),
                        row_len,
                    )
            else:  # pairs i and i + 1 at position t of four lanes: [s, c, s, c] each
                for t in range(nt):
                    for i in range(0, n - 1, 2):
                        a = np.uint64(i * PAIR_SLOTS + (t + 1) * SLOT + lb)
                        b = a + np.uint64(PAIR_SLOTS)
                        transpose4(
                            lanes, a, a + g, b, b + g, out, o + np.uint64(2 * (t * n + i)), row_len
                        )
                    if n % 2 == 1:  # the last pair of an odd count
                        i = n - 1
                        a = np.uint64(i * PAIR_SLOTS + (t + 1) * SLOT + lb)
                        for k in range(np.uint64(4)):
                            q = o + k * row_len + np.uint64(2 * (t * n + i))
                            out[q] = lanes[a + k]
                            out[q + np.uint64(1)] = lanes[a + np.uint64(GROUP_LANES) + k]
        for lane in range(full, nl):
            o = ob + np.uint64(lane) * row_len
            for t in range(nt):
                for i in range(n):
                    a = np.uint64(i * PAIR_SLOTS + (t + 1) * SLOT + lane)
                    if half is not None:
                        q = o + np.uint64(2 * t * n + i)
                        out[q] = lanes[a]
                        out[q + np.uint64(n)] = lanes[a + np.uint64(GROUP_LANES)]
                    else:
                        q = o + np.uint64(2 * (t * n + i))
                        out[q] = lanes[a]
                        out[q + np.uint64(1)] = lanes[a + np.uint64(GROUP_LANES)]


@kernel(inline=True)
def _half_rows4(lanes, out, o, row_len, lb, nt, n):
    """:func:`lanes_rows`'s half-layout rows of lanes ``lb .. lb + 3`` (``n >= 2`` pairs),
    positions ``0 .. nt - 1`` of the block (row ``t`` of lane ``lb + k`` at ``o + k *
    row_len + 2 * t * n``): by transposes, the sines of four pairs then their cosines (two
    pairs: ``[s0, s1, c0, c1]``, a whole row), then of two more
    (:func:`~.transpose.transpose2`), the last pair of an odd count value by value."""
    g = np.uint64(GROUP_LANES)
    ps = np.uint64(PAIR_SLOTS)
    for t in range(nt):
        r = o + np.uint64(2 * t * n)
        a = np.uint64((t + 1) * SLOT + lb)  # pair 0's sines at step t, lanes lb ..
        if n == 2:
            transpose4(lanes, a, a + ps, a + g, a + ps + g, out, r, row_len)
            continue
        i = 0
        while i + 4 <= n:
            b = a + np.uint64(i) * ps
            p2 = b + np.uint64(2) * ps
            p3 = b + np.uint64(3) * ps
            transpose4(lanes, b, b + ps, p2, p3, out, r + np.uint64(i), row_len)
            transpose4(lanes, b + g, b + ps + g, p2 + g, p3 + g, out, r + np.uint64(n + i), row_len)
            i += 4
        if i + 2 <= n:  # two more pairs: their sines, then their cosines, two at a time
            b = a + np.uint64(i) * ps
            transpose2(lanes, b, b + ps, out, r + np.uint64(i), row_len)
            transpose2(lanes, b + g, b + ps + g, out, r + np.uint64(n + i), row_len)
            i += 2
        if i < n:  # the last pair of an odd count
            b = a + np.uint64(i) * ps
            for k in range(np.uint64(4)):
                q = r + k * row_len + np.uint64(i)
                out[q] = lanes[b + k]
                out[q + np.uint64(n)] = lanes[b + g + k]


# lanes_rows's values lie within about 2**-46.7 of the folded ones (absolute: at most 15
# steps of angle addition on values of magnitude at most 1, each adding its own roundings
# and carrying the step table's, about (1 + 2 * sqrt(2)) float64 units of 2**-53 a step,
# plus the fold's own; the largest seen, over dims 2-16, bases 10-1e7 and positions up to
# 2**50 in scratch: 2**-48.9); a float32 midpoint further than this tolerance (64x that
# bound) from a value lies further than the bound from both
_ROUND32_TOL = 2.0**-40


@kernel()
def round32_risky(v):
    """1 (uint8) where a float32 midpoint (or zero) lies within ``_ROUND32_TOL`` of the
    float64 ``v``: a value that close may round into float32 otherwise than another one
    that close to it; else 0. Rounding is monotonic, so where ``v - tol`` and ``v + tol``
    round alike, every value between them rounds alike too. Near zero float32's steps are
    finer than the bound: every value of magnitude below 2**-16 is flagged (below 2**-15
    all but exact float32 values, a half unit from any midpoint), and a fraction 2**(-16 -
    e) of those in [2**e, 2**(e + 1)): one in 2**15 near magnitude 1, about one value in
    6,000 of a table over all phases."""
    return np.uint8(np.float32(v - _ROUND32_TOL) != np.float32(v + _ROUND32_TOL))


@kernel()
def flagged_rows(flags, m, width, rows):
    """The rows of ``width`` values that hold a set byte among ``flags[:m]``, in order,
    into ``rows``; returns how many. The lanes kernels' rows to write or fold again: a
    call per work item, the bytes read eight at a time (most words are zero; ``flags``
    holds whole words)."""
    words = flags.view(np.uint64)
    count = 0
    last = -1
    for k in range((m + 7) // 8):
        if words[k] == 0:
            continue
        for j in range(8 * k, min(m, 8 * k + 8)):
            if flags[j] == 0 or j // width == last:
                continue
            last = j // width
            rows[count] = last
            count += 1
    return count


@kernel(inline=True)  # once per worker
def lanes_scratch(n, chunk, single=False):
    """A lanes kernel worker's scratch for work items of up to ``chunk`` rows of ``n``
    pairs: the anchors, the lanes' state (``lanes_rows``'s, zeros before its first call)
    and the rows of an item's whole groups of ``RADIX`` positions: float64, or float32
    with ``single`` (the float32 tables and sums, whose values are those rows' roundings;
    the 16-bit ones test the float64 values, ``round32_risky``)."""
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    lanes = np.zeros(n * PAIR_SLOTS)
    if single:
        out = np.empty((chunk + 2 * RADIX) * 2 * n, dtype=np.float32)
    else:
        out = np.empty((chunk + 2 * RADIX) * 2 * n)
    return anc_s, anc_c, lanes, out


@kernel(inline=True)
def lanes_groups(first, s0, s1, n):
    """``(g0, g1, o0)`` for the rows of sequence indices ``s0 .. s1 - 1`` (positions
    ``first + s``, ``n`` pairs a row): the groups of positions that hold them (``lanes_rows``
    steps ``g0 .. g1 - 1``) and the index of row ``s0`` in its ``out``."""
    g0 = (first + s0) >> BITS
    g1 = ((first + s1 - 1) >> BITS) + 1
    return g0, g1, np.uint64((first + s0 - (g0 << BITS)) * 2 * n)


@kernel()
def table_lanes_kernel(w0, w1, view, pos, freqs, split, interleaved):
    """float32 tables of a few pairs per row at consecutive positions (``offset + s``,
    unit-stride channels), as :func:`table_kernel` writes them with the recurrence, bit for
    bit, but with ``GROUP_LANES`` groups of ``RADIX`` positions stepped side by side
    (:func:`lanes_rows`, one call per work item, its rows placed in the table's layout:
    ``interleaved`` ``ON`` or None, see :func:`table_kernel`, and rounded to float32 as
    they are written); the rows are then copied out, and the values too small for the
    recurrence recomputed exactly, as there.
    """
    flat, off0, _, ss, _, _, _, ns, _, n, _ = view
    _, _, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s, anc_c, lanes, out = lanes_scratch(n, chunk, True)
    width = np.uint64(2 * n)
    first = offsets[0]
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(n_chunks, w, n_workers)
        for item in range(i0, i1):
            s0 = item * chunk
            s1 = min(ns, s0 + chunk)
            g0, g1, o0 = lanes_groups(first, s0, s1, n)
            if interleaved is not None:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, None)
            else:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, True)
            m = np.uint64((s1 - s0) * 2 * n)
            small = 0  # values below FIXUP_THRESHOLD, counted in the copy's pass
            if ss == 2 * n:  # rows back to back: one run
                d0 = np.uint64(off0 + s0 * ss)
                for j in range(m):
                    v = out[o0 + j]
                    flat[d0 + j] = v
                    small += abs(v) < FIXUP_THRESHOLD
            else:
                for si in range(s0, s1):
                    d0 = np.uint64(off0 + si * ss)
                    oq = o0 + np.uint64((si - s0) * 2 * n)
                    for j in range(width):
                        v = out[oq + j]
                        flat[d0 + j] = v
                        small += abs(v) < FIXUP_THRESHOLD
            if small > 0:  # rare: rows with values too small for the recurrence
                for si in range(s0, s1):
                    oq = o0 + np.uint64((si - s0) * 2 * n)
                    hit = 0
                    for j in range(width):
                        hit += abs(out[oq + j]) < FIXUP_THRESHOLD
                    if hit > 0:
                        p = float(si + first)
                        _fix_small_row(flat, off0 + si * ss, 1, interleaved, p, wh, wl)
    return 0.0


@kernel()
def add_lanes_kernel(w0, w1, view, pos, freqs, split, interleaved):
    """float32 ``add_sinusoidal`` of a few pairs per row at positions shared by every batch
    row and consecutive (``offset + s``), rows contiguous (``ss == 2 * npairs``, unit-stride
    channels): the values of :func:`add_kernel`'s recurrence, bit for bit (each rounded to
    float32 and added in float32), stepped by :func:`lanes_rows`.

    A work item's table rows are placed by :func:`lanes_rows` as x's rows hold them,
    rounded once to float32 as they are written (its ``out`` float32); each batch row then
    adds them in one contiguous, vectorised pass (row by row, a few channels at a time, the
    loop did little per iteration). Rows rounded as :func:`lanes_rows` writes them, not
    copied to float32 afterwards: 1.06-1.17x faster at dims 2-16, 32 MiB (scratch, README
    "The lanes' rows written as float32").
    ``interleaved``: see :func:`table_kernel`.
    """
    flat, off0, sb, ss, _, _, nb, ns, _, n, _ = view
    _, _, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s, anc_c, lanes, out = lanes_scratch(n, chunk, True)
    first = offsets[0]
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(n_chunks, w, n_workers)
        for item in range(i0, i1):
            s0 = item * chunk
            s1 = min(ns, s0 + chunk)
            g0, g1, o0 = lanes_groups(first, s0, s1, n)
            # out's rows placed as x's rows (either layout): one run
            if interleaved is not None:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, None)
            else:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, True)
            length = np.uint64((s1 - s0) * ss)
            for b in range(nb):
                d0 = np.uint64(off0 + b * sb + s0 * ss)
                for j in range(length):
                    flat[d0 + j] = flat[d0 + j] + out[o0 + j]
    return 0.0
