"""Numba kernels. Private: every argument was validated and normalised by the public layer.

Three drivers share the expensive part, the cos/sin of every (position, frequency) pair:

* :func:`table_kernel` writes the sinusoidal table (``sinusoidal_table``),
* :func:`add_kernel` adds it to embeddings (``add_sinusoidal``),
* :func:`rope_kernel` rotates channel pairs in place (``apply_rope``).

Each compiles on its own first use, so the first call of one operation does not pay for
the others.

The array is seen as ``(B, S, H, D)`` through a flat, contiguous 1-D view of the memory
it spans plus element strides, so slices, transposes and the q/k part of a fused buffer are
worked on in place with no copy.

Angles
------
The angle ``p * w_i`` is never formed in plain float64. Each frequency is a double-double
``wh + wl``; a position is split into hexadecimal digits ``p = q*16**4 + d3*16**3 + d2*16**2
+ d1*16 + d0``. ``sin/cos(q * 16**4 * w)`` (the anchor) is computed exactly from an
error-free product and libm; each lower digit is then folded in by angle addition with a
small table ``T[level, d] = cos/sin(d * 16**level * w)`` (64 rows per frequency, itself
computed exactly, by ``fastpe._engine.step_tables``). Each level is cached per thread, so
consecutive positions cost one angle addition per pair and libm is called only when
``p >> 16`` changes. The result carries at
most 5 roundings of angle addition: an absolute error of a few float64 ulps at any position
below 2**53, where a plain float64 angle is already off by ``p * 2**-53``.

float32 interleaved tables (any channel stride) and float32 ``add_sinusoidal`` (both
layouts) use a recurrence instead: the exact anchor of each group of 16 positions stepped
forward one position at a time (see :func:`_rec_restart`), at most 19 roundings, far
inside float32's half ulp.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange  # bandwidth yardsticks only

from ._config import kernel

LEVELS = 4  # hexadecimal digits folded in by angle addition
RADIX = 16
_SPLIT = 134217729.0  # 2**27 + 1, the constant that splits a float64 into two halves
_NO_KEY = np.int64(-(2**62))  # never equal to p >> k for |p| <= 2**53
# A float32 value below this is recomputed exactly so that it stays within 1 ulp.
FIXUP_THRESHOLD = 2.0**-20


@kernel()
def _two_prod_err(a, b, p):
    """Rounding error of the float64 product ``p = fl(a * b)``, by splitting (no FMA needed)."""
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@kernel()
def sincos_exact(p, wh, wl):
    """``sin`` and ``cos`` of ``p * (wh + wl)`` with the angle carried in double-double."""
    th = p * wh
    tl = _two_prod_err(p, wh, th) + p * wl
    s0 = math.sin(th)
    c0 = math.cos(th)
    sl = math.sin(tl)
    cl = math.cos(tl)
    return s0 * cl + c0 * sl, c0 * cl - s0 * sl


@kernel()
def _fold(src_s, src_c, tc, ts, row, dst_s, dst_c):
    for i in range(src_s.shape[0]):
        a_s = src_s[i]
        a_c = src_c[i]
        t_c = tc[row, i]
        t_s = ts[row, i]
        dst_s[i] = a_s * t_c + a_c * t_s
        dst_c[i] = a_c * t_c - a_s * t_s


@kernel()
def update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys):
    """Bring the per-thread anchor cache to position ``p``.

    ``anc_s``/``anc_c`` (4, P) and ``keys`` (4,) hold cos/sin at ``(p >> 16) << 16`` (exact,
    from libm) and, folded in one hexadecimal digit at a time, at ``(p >> 12) << 12``,
    ``(p >> 8) << 8`` and ``(p >> 4) << 4``. Only the levels whose key changed are redone.
    """
    n = wh.shape[0]
    start = 4
    for lev in range(4):
        if keys[lev] != (p >> (16 - 4 * lev)):
            start = lev
            break
    if start == 0:
        a = float((p >> 16) << 16)
        for i in range(n):
            si, ci = sincos_exact(a, wh[i], wl[i])
            anc_s[0, i] = si
            anc_c[0, i] = ci
        keys[0] = p >> 16
        start = 1
    for lev in range(start, 4):
        shift = 16 - 4 * lev  # 12, 8, 4
        digit = (p >> shift) & 15
        _fold(anc_s[lev - 1], anc_c[lev - 1], tc, ts, (shift // 4) * RADIX + digit,
              anc_s[lev], anc_c[lev])
        keys[lev] = p >> shift


@kernel()
def _fold_rope(anc_s, anc_c, tc, ts, t, cache_s, cache_c, k, sin_mult, cos_mult, renorm):
    """cos/sin for one position straight into row ``k`` of the rotation cache.

    From the last level of the anchor cache (row 3 of ``anc_s``/``anc_c``), indexed here:
    passing the row as a slice would update its reference count atomically on every call.

    Fuses the last angle addition with the scaling (sign for inverse, attention factor) and
    the conversion to the array's dtype. With ``renorm`` (float64 arrays) each (cos, sin)
    is first pulled back onto the unit circle: angle addition leaves the radius a few
    float64 ulps off 1, which would scale the rotated pair; in float32 that error vanishes
    in the rounding.
    """
    if renorm:
        for i in range(anc_s.shape[1]):
            x = anc_s[3, i]
            y = anc_c[3, i]
            u = tc[t, i]
            w = ts[t, i]
            sv = x * u + y * w
            cv = y * u - x * w
            f = 1.5 - 0.5 * (sv * sv + cv * cv)
            cache_s[k, i] = sv * f * sin_mult
            cache_c[k, i] = cv * f * cos_mult
    else:
        for i in range(anc_s.shape[1]):
            x = anc_s[3, i]
            y = anc_c[3, i]
            u = tc[t, i]
            w = ts[t, i]
            cache_s[k, i] = (x * u + y * w) * sin_mult
            cache_c[k, i] = (y * u - x * w) * cos_mult


@kernel(inline=True)
def _fold_write(flat, base, layout, anc_s, anc_c, tc, ts, t):
    """Table row at ``flat[base:]`` straight from the anchor and the step table (fused).

    Returns how many pairs hold a value below ``FIXUP_THRESHOLD`` in magnitude. Indices
    are unsigned and no sub-array is made: slicing a shared array bumps its reference count
    atomically, and two threads doing that for every row contend for one cache line.
    """
    n = anc_s.shape[1]
    k = 0
    if layout == 0:
        for i in range(n):
            x = anc_s[3, i]
            y = anc_c[3, i]
            u = tc[t, i]
            w = ts[t, i]
            sv = x * u + y * w
            cv = y * u - x * w
            j = base + np.uint64(2 * i)
            flat[j] = sv
            flat[j + np.uint64(1)] = cv
            k += (abs(sv) < FIXUP_THRESHOLD) | (abs(cv) < FIXUP_THRESHOLD)
    else:
        m = np.uint64(n)
        for i in range(n):
            x = anc_s[3, i]
            y = anc_c[3, i]
            u = tc[t, i]
            w = ts[t, i]
            sv = x * u + y * w
            cv = y * u - x * w
            j = base + np.uint64(i)
            flat[j] = sv
            flat[j + m] = cv
            k += (abs(sv) < FIXUP_THRESHOLD) | (abs(cv) < FIXUP_THRESHOLD)
    return k


@kernel()
def _rec_step(cur_s, cur_c, tc, ts, steps):
    """Advance the float64 state ``cur`` by ``steps`` positions (angle addition of ``w``)."""
    for _ in range(steps):
        for i in range(cur_s.shape[0]):
            x = cur_s[i]
            y = cur_c[i]
            u = tc[1, i]
            w = ts[1, i]
            cur_s[i] = x * u + y * w
            cur_c[i] = y * u - x * w


@kernel()
def _rec_restart(p, wh, wl, tc, ts, anc_s, anc_c, keys, cur_s, cur_c):
    """Bring the recurrence state to one step before position ``p``; return that step (0/1).

    float32 interleaved tables and every float32 ``add_sinusoidal`` take their values from
    a float64 state stepped from row to row instead of folding every row from its anchor:
    one angle addition of ``w`` per row, with the state and the step in L1, where the fold
    reads 16 bytes per pair of the step table from L2 (one core at 1 GiB, interleaved
    float32 table: 91 -> 67 ms). ``add_sinusoidal`` rows that share no positions add
    straight from the state; shared positions go through the row cache (``_rec_cache``).
    float32 half-layout tables keep the fold (the stepped version ran slower there): they
    agree with the stepped values except within ~2**-50 of a float32 rounding tie.

    By definition, the value at ``p`` is the exact anchor at ``g = (p >> 4) << 4`` advanced
    ``p - g`` times by angle addition of ``w`` (row 1 of the step table): at most 19
    roundings of angle addition, a few 2**-50 absolute, far inside float32's half ulp. Every
    path to ``p`` performs the same operations, so chunked, resumed and gapped calls give
    the same bits. This rebuilds the state from the anchor; the returned row ``r`` of
    ``tc``/``ts`` is the last step, applied by the caller while writing (0: the identity,
    for ``p == g``). When ``p`` follows ``prev`` in the same group, callers step instead
    (:func:`_rec_continues`).
    """
    if keys[3] != (p >> 4):
        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
    for i in range(cur_s.shape[0]):
        cur_s[i] = anc_s[3, i]
        cur_c[i] = anc_c[3, i]
    t = p & 15
    if t == 0:
        return 0
    _rec_step(cur_s, cur_c, tc, ts, t - 1)
    return 1


@kernel(inline=True)
def _rec_continues(p, prev):
    """Whether the state at ``prev`` can be stepped to ``p`` (same group, ``p`` after it).

    Callers then step ``p - prev - 1`` times and write with row 1. That path is written out
    in each kernel and calls only leaf functions: inlining a helper that takes arrays
    into the row loop cost 25% here (one core, 1 GiB table: 67 -> 88 ms).
    """
    return prev != _NO_KEY and (prev >> 4) == (p >> 4) and p > prev


@kernel()
def _rec_write(flat, base, layout, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` of the step table and write it (one rounding).

    Returns how many pairs hold a value below ``FIXUP_THRESHOLD`` in magnitude.
    """
    n = cur_s.shape[0]
    k = 0
    if layout == 0:
        for i in range(n):
            x = cur_s[i]
            y = cur_c[i]
            u = tc[r, i]
            w = ts[r, i]
            sv = x * u + y * w
            cv = y * u - x * w
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(2 * i)
            flat[j] = sv
            flat[j + np.uint64(1)] = cv
            k += (abs(sv) < FIXUP_THRESHOLD) | (abs(cv) < FIXUP_THRESHOLD)
    else:
        m = np.uint64(n)
        for i in range(n):
            x = cur_s[i]
            y = cur_c[i]
            u = tc[r, i]
            w = ts[r, i]
            sv = x * u + y * w
            cv = y * u - x * w
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(i)
            flat[j] = sv
            flat[j + m] = cv
            k += (abs(sv) < FIXUP_THRESHOLD) | (abs(cv) < FIXUP_THRESHOLD)
    return k


@kernel()
def _rec_cache(cache_s, cache_c, k, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` and store it, rounded to the cache's dtype, in row ``k``."""
    for i in range(cur_s.shape[0]):
        x = cur_s[i]
        y = cur_c[i]
        u = tc[r, i]
        w = ts[r, i]
        sv = x * u + y * w
        cv = y * u - x * w
        cur_s[i] = sv
        cur_c[i] = cv
        cache_s[k, i] = sv
        cache_c[k, i] = cv


@kernel()
def _rec_add(flat, base, layout, cur_s, cur_c, tc, ts, r):
    """Step the state by row ``r`` and add it to float32 ``flat`` (rounded to float32 first,
    as the cached path does)."""
    n = cur_s.shape[0]
    if layout == 0:
        for i in range(n):
            x = cur_s[i]
            y = cur_c[i]
            u = tc[r, i]
            w = ts[r, i]
            sv = x * u + y * w
            cv = y * u - x * w
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(2 * i)
            flat[j] = flat[j] + np.float32(sv)
            flat[j + np.uint64(1)] = flat[j + np.uint64(1)] + np.float32(cv)
    else:
        m = np.uint64(n)
        for i in range(n):
            x = cur_s[i]
            y = cur_c[i]
            u = tc[r, i]
            w = ts[r, i]
            sv = x * u + y * w
            cv = y * u - x * w
            cur_s[i] = sv
            cur_c[i] = cv
            j = base + np.uint64(i)
            flat[j] = flat[j] + np.float32(sv)
            flat[j + m] = flat[j + m] + np.float32(cv)


@kernel()
def _fix_small_row(flat, base, sd, layout, p, wh, wl):
    """Recompute exactly the table values too small for angle addition's absolute error.

    Channel ``j`` of the row is ``flat[base + j*sd]``.
    """
    n = wh.shape[0]
    for i in range(n):
        j1 = base + (2 * i if layout == 0 else i) * sd
        j2 = base + (2 * i + 1 if layout == 0 else n + i) * sd
        if abs(flat[j1]) < FIXUP_THRESHOLD or abs(flat[j2]) < FIXUP_THRESHOLD:
            si, ci = sincos_exact(p, wh[i], wl[i])
            flat[j1] = si
            flat[j2] = ci


@kernel()
def _count_small(s, c):
    k = 0
    for i in range(s.shape[0]):
        k += (abs(s[i]) < FIXUP_THRESHOLD) | (abs(c[i]) < FIXUP_THRESHOLD)
    return k


@kernel()
def _fix_small(p, wh, wl, s, c):
    """Recompute exactly the values too small for angle addition's absolute error."""
    for i in range(s.shape[0]):
        if abs(s[i]) < FIXUP_THRESHOLD or abs(c[i]) < FIXUP_THRESHOLD:
            si, ci = sincos_exact(p, wh[i], wl[i])
            s[i] = si
            c[i] = ci


@kernel(inline=True)
def _position(positions, has_positions, offsets, bo, si):
    if has_positions:
        return positions[bo, si]
    return offsets[bo] + si


@kernel()
def rope_kernel(w0, w1, flat, off0, sb, ss, sh, nb, ns, nh, npairs, layout,
                positions, has_positions, offsets, per_batch, wh, wl, tc, ts,
                sin_mult, cos_mult, chunk, group, shifted, shift_base, n_q, pieces, touch_end,
                n_workers):
    """Rotate the ``(nb, ns, nh, 2*npairs)`` view of ``flat`` in place: workers ``w0..w1-1``.

    Element ``[b, s, h, j]`` lives at ``flat[off0 + b*sb + s*ss + h*sh + j]``. Position of
    ``[b, s]``: ``positions[bp, s]`` if ``has_positions`` else ``offsets[bp] + s``, with
    ``bp = b`` when ``per_batch`` else 0. cos is multiplied by ``cos_mult`` and sin by
    ``sin_mult`` (attention factor; sign for the inverse).

    Work items are blocks of ``chunk`` consecutive sequence indices (times one batch row
    when positions are per batch row); the work is cut into ``n_workers`` contiguous ranges
    of items and this call does workers ``w0 .. w1 - 1`` (the caller runs disjoint worker
    ranges on several threads at once: the kernel releases the GIL). Each output element
    is written by exactly one worker, and each worker's anchor cache follows consecutive
    positions. Per item, the cos/sin of its positions are computed once into a small cache
    (sized by the caller to stay in L1/L2) and reused for every batch row and head.

    Loop order: batch rows in groups of ``group``; within a group, position by position,
    every row and head of that position. Each group walks ``group`` long contiguous runs of
    memory side by side, and each position's cos/sin, once loaded into L1, serves
    ``group * nh`` rows. With one head per position and ``group`` 1, every row of x would
    need a fresh cos/sin row from L2 as long as itself; measured here on one core at 1 GiB,
    (64, 32768, 128) float32 took 97 ms that way and 40 ms with groups of 4 (4 heads per
    position: 44 ms; the in-place scaling kernel: 36 ms).

    ``shifted`` (few heads; positions made of runs, see ``pieces``): the work is laid out
    along positions instead of sequence indices. Work items cover positions
    ``shift_base + q`` for ``q < n_q``; ``pieces`` (k, 4) lists runs of consecutive
    positions ``(b, s0, length, p0)``: row ``b`` holds position ``p0 + d`` at ``s0 + d`` for
    ``d < length``. Pieces are walked in groups side by side, position by position, so each
    position's cos/sin is computed once and serves every piece of a group that holds it, as
    with shared positions (each row otherwise needs its own cos/sin, computed for it
    alone). The caller builds one piece per row for per-row offsets, and one per run for
    ``(batch, seq)`` positions such as packed sequences, when the runs are long enough.

    ``touch_end`` (partial rotary only): read one element per cache line of the channels
    ``2*npairs .. touch_end`` that are left as they are. When about half of every short row
    (one head of 128 channels) is rotated, the hardware prefetcher stalls on the
    half-touched rows (measured here: 0.6 of the in-place scaling kernel's bandwidth);
    reading the rest keeps it streaming (1.2).
    """
    n = npairs
    line = 64 // flat.itemsize
    renorm = flat.itemsize == 8
    n_outer = nb if per_batch else 1
    if not shifted:
        n_q = ns
    n_chunks = (n_q + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((4, n))
    anc_c = np.empty((4, n))
    # cos/sin in x's dtype: the rotation's arithmetic then runs at x's SIMD width
    cache_s = np.empty((chunk, n), dtype=flat.dtype)
    cache_c = np.empty((chunk, n), dtype=flat.dtype)
    # half layout, float64 rows of at most 1 KiB: see _rotate_half_two_pass
    two_pass = layout == 1 and flat.itemsize == 8 and n <= 64
    tmp = np.empty(n, dtype=flat.dtype)
    touched = 0.0
    for w in range(w0, w1):
        keys = np.full(4, _NO_KEY)
        for item in range((total * w) // n_workers, (total * (w + 1)) // n_workers):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(n_q, s0 + chunk)
            for si in range(s0, s1):
                if shifted:
                    p = shift_base + si
                else:
                    p = _position(positions, has_positions, offsets, bo, si)
                if keys[3] != (p >> 4):  # else every cached level already matches p
                    update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                _fold_rope(anc_s, anc_c, tc, ts, p & 15, cache_s, cache_c, si - s0,
                           sin_mult, cos_mult, renorm)
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
            if shifted:  # groups of pieces instead of batch rows
                b0, b1 = 0, pieces.shape[0]
            for bg in range(b0, b1, group):
                bg1 = min(b1, bg + group)
                for si in range(s0, s1):
                    for b in range(bg, bg1):
                        br = b
                        sr = si
                        if shifted:
                            d = shift_base + si - pieces[b, 3]
                            if d < 0 or d >= pieces[b, 2]:
                                continue
                            br = pieces[b, 0]
                            sr = pieces[b, 1] + d
                        for h in range(nh):
                            base = off0 + br * sb + sr * ss + h * sh
                            if two_pass:
                                _rotate_half_two_pass(flat, np.uint64(base), n, cache_s,
                                                      cache_c, si - s0, tmp)
                            else:
                                _rotate_u(flat, np.uint64(base), n, layout, cache_s, cache_c,
                                          si - s0)
                            for j in range(2 * n, touch_end, line):
                                touched += flat[base + j]
    return touched


@kernel()
def add_kernel(w0, w1, flat, off0, sb, ss, sd, nb, ns, npairs, layout,
               positions, has_positions, offsets, per_batch, wh, wl, tc, ts,
               chunk, group, fold, n_workers):
    """Add the table to the ``(nb, ns, 2*npairs)`` view of ``flat`` in place.

    Element ``[b, s, j]`` lives at ``flat[off0 + b*sb + s*ss + j*sd]``; work split and
    positions, and batch rows in groups of ``group``, as in :func:`rope_kernel`. The table
    values are rounded to x's dtype once and added there, at x's SIMD width.

    ``fold`` is None for float32 (table values by the recurrence of :func:`_rec_restart`,
    as in float32 tables) and a float for float64 (each value folded from its anchor).
    Tested as ``fold is None`` right at each branch, so that numba drops the other path
    when it compiles each specialization: the first float32 call compiles less.
    """
    n = npairs
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((4, n))
    anc_c = np.empty((4, n))
    cache_s = np.empty((chunk, n), dtype=flat.dtype)
    cache_c = np.empty((chunk, n), dtype=flat.dtype)
    # rows that each use their table row once take float32 values straight from the
    # recurrence's state, with no cache
    direct = sd == 1 and (per_batch or nb == 1)
    cur_s = np.empty(n)
    cur_c = np.empty(n)
    for w in range(w0, w1):
        keys = np.full(4, _NO_KEY)
        prev = _NO_KEY
        for item in range((total * w) // n_workers, (total * (w + 1)) // n_workers):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            if fold is None and direct:
                for si in range(s0, s1):
                    p = _position(positions, has_positions, offsets, bo, si)
                    if _rec_continues(p, prev):
                        if p - prev > 1:
                            _rec_step(cur_s, cur_c, tc, ts, p - prev - 1)
                        r = 1
                    else:
                        r = _rec_restart(p, wh, wl, tc, ts, anc_s, anc_c, keys, cur_s, cur_c)
                    _rec_add(flat, np.uint64(off0 + bo * sb + si * ss), layout, cur_s, cur_c,
                             tc, ts, r)
                    prev = p
                continue
            for si in range(s0, s1):
                p = _position(positions, has_positions, offsets, bo, si)
                if fold is None:
                    if _rec_continues(p, prev):
                        if p - prev > 1:
                            _rec_step(cur_s, cur_c, tc, ts, p - prev - 1)
                        r = 1
                    else:
                        r = _rec_restart(p, wh, wl, tc, ts, anc_s, anc_c, keys, cur_s, cur_c)
                    _rec_cache(cache_s, cache_c, si - s0, cur_s, cur_c, tc, ts, r)
                    prev = p
                else:
                    if keys[3] != (p >> 4):
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    _fold_rope(anc_s, anc_c, tc, ts, p & 15, cache_s, cache_c, si - s0,
                               1.0, 1.0, False)
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
            for bg in range(b0, b1, group):
                bg1 = min(b1, bg + group)
                for si in range(s0, s1):
                    for b in range(bg, bg1):
                        base = off0 + b * sb + si * ss
                        if sd == 1:
                            _add_u(flat, np.uint64(base), n, layout, cache_s, cache_c, si - s0)
                        else:
                            _add(flat, base, sd, n, layout, cache_s[si - s0],
                                 cache_c[si - s0])
    return 0.0


@kernel()
def table_kernel(w0, w1, flat, off0, ss, sd, ns, npairs, layout,
                 positions, has_positions, offsets, wh, wl, tc, ts, fixup, fold, chunk,
                 n_workers):
    """Write the ``(ns, 2*npairs)`` table into ``flat`` (row ``s`` at ``off0 + s*ss``).

    With ``fold`` None (float32, interleaved) rows are stepped from row to row (see
    :func:`_rec_restart`); with a float, rows are folded from their anchor, contiguous ones
    in the same pass as the write. ``fold is None`` is tested right at the branch, so that
    each compiled specialization holds one path only. With ``fixup`` (float32) values below
    ``FIXUP_THRESHOLD`` are recomputed exactly. Work split as in :func:`rope_kernel`.
    """
    n = npairs
    n_chunks = (ns + chunk - 1) // chunk
    anc_s = np.empty((4, n))
    anc_c = np.empty((4, n))
    s = np.empty(n)
    c = np.empty(n)
    for w in range(w0, w1):
        keys = np.full(4, _NO_KEY)
        prev = _NO_KEY
        for item in range((n_chunks * w) // n_workers, (n_chunks * (w + 1)) // n_workers):
            s0 = item * chunk
            for si in range(s0, min(ns, s0 + chunk)):
                p = _position(positions, has_positions, offsets, 0, si)
                if fold is None:
                    if _rec_continues(p, prev):
                        if p - prev > 1:
                            _rec_step(s, c, tc, ts, p - prev - 1)
                        r = 1
                    else:
                        r = _rec_restart(p, wh, wl, tc, ts, anc_s, anc_c, keys, s, c)
                    base = off0 + si * ss
                    if sd == 1:
                        n_small = _rec_write(flat, np.uint64(base), layout, s, c, tc, ts, r)
                    else:  # strided channels: step, then write (same values)
                        if r == 1:  # (r, not a literal: one compiled _rec_step)
                            _rec_step(s, c, tc, ts, r)
                        _write(flat, base, sd, n, layout, s, c)
                        n_small = _count_small(s, c)
                    if n_small > 0:
                        _fix_small_row(flat, base, sd, layout, float(p), wh, wl)
                    prev = p
                else:
                    if keys[3] != (p >> 4):
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    base = off0 + si * ss
                    if sd == 1:
                        n_small = _fold_write(flat, np.uint64(base), layout, anc_s, anc_c,
                                              tc, ts, p & 15)
                        if fixup and n_small > 0:
                            _fix_small_row(flat, base, sd, layout, float(p), wh, wl)
                    else:
                        _fold(anc_s[3], anc_c[3], tc, ts, p & 15, s, c)
                        if fixup and _count_small(s, c) > 0:
                            _fix_small(float(p), wh, wl, s, c)
                        _write(flat, base, sd, n, layout, s, c)
    return 0.0


@kernel(contract=True)  # not inlined: inlining drops the contract flag
def _rotate_u(flat, base, n, layout, s, c, k):
    """Rotate ``n`` pairs at ``flat[base:]`` by row ``k`` of ``s``/``c``.

    Unsigned indices: numba adds no negative-index wraparound, so LLVM vectorises the loop
    without a per-row slice object.
    """
    if layout == 0:
        for i in range(n):
            j = base + np.uint64(2 * i)
            x1 = flat[j]
            x2 = flat[j + np.uint64(1)]
            flat[j] = x1 * c[k, i] - x2 * s[k, i]
            flat[j + np.uint64(1)] = x2 * c[k, i] + x1 * s[k, i]
    else:
        m = np.uint64(n)
        for i in range(n):
            j = base + np.uint64(i)
            x1 = flat[j]
            x2 = flat[j + m]
            flat[j] = x1 * c[k, i] - x2 * s[k, i]
            flat[j + m] = x2 * c[k, i] + x1 * s[k, i]


@kernel(contract=True)
def _rotate_half_two_pass(flat, base, n, s, c, k, tmp):
    """Half-layout rotation of a short row in three sequential passes.

    Copy the first half to ``tmp``, then write each half in its own pass. Measured here on
    one core, streaming 1 KiB float64 rows: 47 -> 21 ms per 512 MiB; the one-pass loop,
    alternating between the two halves of each row, defeats the prefetcher. (float32 rows
    gained nothing in the full kernel.)
    """
    m = np.uint64(n)
    for i in range(n):
        tmp[i] = flat[base + np.uint64(i)]
    for i in range(n):
        j = base + np.uint64(i)
        flat[j] = tmp[i] * c[k, i] - flat[j + m] * s[k, i]
    for i in range(n):
        j = base + m + np.uint64(i)
        flat[j] = flat[j] * c[k, i] + tmp[i] * s[k, i]


@kernel()
def _add_u(flat, base, n, layout, s, c, k):
    """``flat[base + j] += table value j`` in the array's dtype; unsigned indices."""
    if layout == 0:
        for i in range(n):
            j = base + np.uint64(2 * i)
            flat[j] = flat[j] + s[k, i]
            flat[j + np.uint64(1)] = flat[j + np.uint64(1)] + c[k, i]
    else:
        m = np.uint64(n)
        for i in range(n):
            j = base + np.uint64(i)
            flat[j] = flat[j] + s[k, i]
            flat[j + m] = flat[j + m] + c[k, i]


@kernel()
def _add(flat, base, sd, n, layout, s, c):
    """Strided channels: ``flat[base + j*sd] += table value j`` (``sd`` may be negative)."""
    if layout == 0:
        for i in range(n):
            flat[base + 2 * i * sd] += s[i]
            flat[base + (2 * i + 1) * sd] += c[i]
    else:
        for i in range(n):
            flat[base + i * sd] += s[i]
            flat[base + (n + i) * sd] += c[i]


@kernel()
def _write(flat, base, sd, n, layout, s, c):
    """Strided channels: ``flat[base + j*sd] = table value j`` (``sd`` may be negative)."""
    if layout == 0:
        for i in range(n):
            flat[base + 2 * i * sd] = s[i]
            flat[base + (2 * i + 1) * sd] = c[i]
    else:
        for i in range(n):
            flat[base + i * sd] = s[i]
            flat[base + (n + i) * sd] = c[i]


@kernel(parallel=True)
def scale_inplace(a, factor):
    """``a *= factor`` over a contiguous 1-D array: the read+write bandwidth yardstick."""
    for i in prange(a.shape[0]):
        a[i] *= factor


@kernel(parallel=True)
def fill(a, value):
    """``a[:] = value`` over a contiguous 1-D array: the write bandwidth yardstick."""
    for i in prange(a.shape[0]):
        a[i] = value
