"""Angles: cos/sin of ``p * w`` for every pair, exact, shared by every kernel.

The angle ``p * w_i`` is never formed in plain float64. Each frequency is a double-double
``wh + wl``; a position is split into ``LEVELS`` hexadecimal digits above a remainder,
``p = q*16**4 + d3*16**3 + d2*16**2 + d1*16 + d0``. ``sin/cos(q * 16**4 * w)`` (the anchor)
is computed exactly from an error-free product and libm (:func:`sincos_exact`); each lower
digit is then folded in by angle addition (:func:`add_angle`) with a small table
``T[level, d] = cos/sin(d * 16**level * w)`` (``LEVELS * RADIX`` rows per frequency, itself
computed exactly, by ``fastpe._engine.step_tables``). Each level is cached per worker
(:func:`update_anchors`), so consecutive positions cost one angle addition per pair and libm
is called only when ``p >> TOP_SHIFT`` changes. The result carries at most 5 roundings of
angle addition: an absolute error of a few float64 ulps at any position below 2**53, where a
plain float64 angle is already off by ``p * 2**-53``.

float32 tables of fewer than 8 or at least 128 pairs a row (either layout, any channel
stride: ``fastpe._engine.table_stepped``) and float32 ``add_sinusoidal`` (both layouts)
use a recurrence instead (:func:`rec_load`): the exact anchor of each group of ``RADIX``
positions stepped forward one position at a time, at most 19 roundings, far inside
float32's half ulp. The lanes kernels (:func:`~.tables.lanes_rows`) step it for tables and
sums of a few pairs, and for 16-bit tables and sums fold again the rows whose values could
round otherwise than the folded ones.
"""

from __future__ import annotations

import math

import numpy as np

from .._config import kernel
from .._freq import two_prod_err

BITS = 4  # bits of one digit of a position
RADIX = 1 << BITS  # 16: values of one digit
DIGIT = RADIX - 1  # mask of the lowest digit
LEVELS = 4  # digits folded in by angle addition
LAST = LEVELS - 1  # the anchor cache's finest level
TOP_SHIFT = BITS * LEVELS  # 16: p >> TOP_SHIFT is the exact (libm) anchor's key
STEP1 = 1  # row of the step tables that advances by one position
NO_KEY = np.int64(-(2**62))  # never equal to p >> k for |p| <= 2**53

_two_prod_err = kernel()(two_prod_err)  # the reference's error-free product, compiled


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
def add_angle(s, c, ct, st):
    """sin and cos of ``a + t`` from those of ``a`` (``s``, ``c``) and of ``t`` (``st``, ``ct``).

    The angle-addition step every path uses. Scalars only: LLVM inlines the call, which
    then costs nothing (numba's own ``inline="always"`` made the loops that use it slower).
    """
    return s * ct + c * st, c * ct - s * st


@kernel(inline=True)
def position(values, given, offsets, bo, si):
    """Position of sequence index ``si`` of batch row (or shared row) ``bo`` (see
    :func:`~fastpe._kernels.args.positions`; its fields are passed one by one, unpacked
    once per call of the kernel)."""
    if given:
        return values[bo, si]
    return offsets[bo] + si


@kernel(inline=True)
def worker_items(total, w, n_workers):
    """The work items of worker ``w``: a contiguous share of ``total``."""
    return (total * w) // n_workers, (total * (w + 1)) // n_workers


@kernel(inline=True)
def fold(src_s, src_c, tc, ts, row, dst_s, dst_c):
    """``dst = src + angle of step-table row`` for every pair."""
    for i in range(src_s.shape[0]):
        dst_s[i], dst_c[i] = add_angle(src_s[i], src_c[i], tc[row, i], ts[row, i])


@kernel()
def update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys):
    """Bring the per-worker anchor cache to position ``p``.

    ``anc_s``/``anc_c`` (LEVELS, P) and ``keys`` (LEVELS,) hold cos/sin at
    ``(p >> 16) << 16`` (exact, from libm) and, folded in one digit at a time, at
    ``(p >> 12) << 12``, ``(p >> 8) << 8`` and ``(p >> 4) << 4``. Only the levels whose key
    changed are redone.
    """
    n = wh.shape[0]
    start = LEVELS
    for lev in range(LEVELS):
        if keys[lev] != (p >> (BITS * (LEVELS - lev))):
            start = lev
            break
    if start == 0:
        a = float((p >> TOP_SHIFT) << TOP_SHIFT)
        if a == 0.0:
            # positions below 2**16 (most calls): sincos_exact's operations with its four
            # libm calls at an angle of +-0 written out (sin(+-0) = +-0, cos(+-0) = 1
            # exactly), the same bits without the calls, which cost a few microseconds per
            # work item (README, "In cache on the znver5 host")
            for i in range(n):
                th = a * wh[i]
                tl = _two_prod_err(a, wh[i], th) + a * wl[i]
                anc_s[0, i] = th * 1.0 + 1.0 * tl
                anc_c[0, i] = 1.0 * 1.0 - th * tl
        else:
            for i in range(n):
                si, ci = sincos_exact(a, wh[i], wl[i])
                anc_s[0, i] = si
                anc_c[0, i] = ci
        keys[0] = p >> TOP_SHIFT
        start = 1
    for lev in range(start, LEVELS):
        shift = BITS * (LEVELS - lev)  # 12, 8, 4
        digit = (p >> shift) & DIGIT
        fold(
            anc_s[lev - 1],
            anc_c[lev - 1],
            tc,
            ts,
            (shift // BITS) * RADIX + digit,
            anc_s[lev],
            anc_c[lev],
        )
        keys[lev] = p >> shift


@kernel(inline=True)
def anchor_step(anc_s, anc_c, tc, ts, p, keys):
    """The most frequent step of :func:`update_anchors`, in its operations: the finest level
    of the anchor cache brought to ``p``'s group of ``RADIX`` positions from the next level,
    when only the finest level changes (``keys[LAST - 1] == p >> 2 * BITS``, which the
    caller tests). Branch-free: inlined, its array arguments' reference counts are pruned."""
    row = RADIX + ((p >> BITS) & DIGIT)  # update_anchors's row for the level of shift BITS
    for i in range(anc_s.shape[1]):
        anc_s[LAST, i], anc_c[LAST, i] = add_angle(
            anc_s[LAST - 1, i], anc_c[LAST - 1, i], tc[row, i], ts[row, i]
        )
    keys[LAST] = p >> BITS


@kernel(inline=True)
def anchors_at(p, wh, wl, tc, ts, anc_s, anc_c, keys):
    """Bring the anchor cache to position ``p`` when its finest level is not at ``p``
    (``keys[LAST] != p >> BITS``, which the caller tests: an inlined function's array
    arguments cost reference counts on every pass): :func:`update_anchors`, with its most
    frequent case (:func:`anchor_step`) inlined, in the same operations.

    Inlined at numba's IR level, into kernels compiled without contraction (none is, see
    ``fastpe._config``): the angle addition must stay unfused to give
    :func:`update_anchors`'s bits. A call of
    :func:`update_anchors` every ``RADIX`` positions costs an atomic reference count update
    per array argument, a visible share of the work at small dims (README, "Small head
    sizes"). Each pass of this inlined body costs those updates too (its branch around a
    call keeps them): every position loop of the rotation, table and 16-bit kernels writes
    it out, with :func:`anchor_step` and the call (8-13% of a one-head RoPE call with
    positions per batch row in a profile; README, "Reference counts around each group of
    16 positions, the remaining row loops"); only the multi-axis kernel still inlines it,
    and the lanes kernels of folded values (16-bit tables and sums) for their rare rows
    written or folded again.
    """
    if keys[LAST - 1] == (p >> (2 * BITS)):
        anchor_step(anc_s, anc_c, tc, ts, p, keys)
    else:
        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)


@kernel(inline=True)  # once per position: a call would cost the reference counts of 6 arrays
def fold_into_cache(anc_s, anc_c, tc, ts, t, cache_s, cache_c, k, sin_mult, cos_mult, renorm):
    """cos/sin for one position straight into row ``k`` of a cos/sin cache.

    From the finest level of the anchor cache (row ``LAST`` of ``anc_s``/``anc_c``), indexed
    here: passing the row as a slice would update its reference count atomically on every
    call. Fuses the last angle addition (step-table row ``t``) with the scaling (sign for
    inverse, attention factor) and the conversion to the cache's dtype. With ``renorm``
    (float64 arrays) each (cos, sin) is first pulled back onto the unit circle: angle
    addition leaves the radius a few float64 ulps off 1, which would scale the rotated pair;
    in float32 that error vanishes in the rounding.
    """
    if renorm:
        for i in range(anc_s.shape[1]):
            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
            f = 1.5 - 0.5 * (sv * sv + cv * cv)
            cache_s[k, i] = sv * f * sin_mult
            cache_c[k, i] = cv * f * cos_mult
    else:
        for i in range(anc_s.shape[1]):
            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
            cache_s[k, i] = sv * sin_mult
            cache_c[k, i] = cv * cos_mult


@kernel(inline=True)  # once per work item
def fill_short(
    pos, freqs, bo, s0, s1, keys, anc_s, anc_c, cache_s, cache_c, sin_mult, cos_mult, renorm
):
    """The cos/sin of sequence indices ``s0 .. s1 - 1`` (batch row ``bo``'s positions of
    ``pos``, :func:`~.args.positions`; ``freqs`` as the kernels take it) into
    rows ``0 .. s1 - s0 - 1`` of the cache, for short rows (a few pairs): the values of
    :func:`fold_into_cache`, the same operations, a group of consecutive positions at a
    time (positions given as an array: one at a time; see
    ``fastpe._kernels.rope.rope_kernel``, whose short specialization compiles these loops
    alone, as the 16-bit RoPE kernel's does for its float32 cache).
    """
    values, given, offsets, _ = pos
    wh, wl, tc, ts = freqs
    n = anc_s.shape[1]
    si = s0
    while si < s1:
        p = position(values, given, offsets, bo, si)
        if keys[LAST] != (p >> BITS):
            # anchors_at written out (its operations, the same bits): inlined,
            # each pass of its body updated the reference counts of its 8
            # array arguments, 22% of a 2-channel call in a sampling profile
            # (3% written out); in the loop below, at a few pairs per
            # position, nothing else takes long enough to hide them
            if keys[LAST - 1] == (p >> (2 * BITS)):
                anchor_step(anc_s, anc_c, tc, ts, p, keys)
            else:
                update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
        t0 = p & DIGIT
        cnt = 1 if given else min(RADIX - t0, s1 - si)
        k0 = si - s0
        if n == 1:  # one pair: the group's positions in one vectorised loop
            # (unsigned row indices: no negative-index wraparound)
            tu = np.uint64(t0)
            ku = np.uint64(k0)
            a_s = anc_s[LAST, 0]
            a_c = anc_c[LAST, 0]
            for d in range(np.uint64(cnt)):
                sv, cv = add_angle(a_s, a_c, tc[tu + d, 0], ts[tu + d, 0])
                if renorm:
                    f = 1.5 - 0.5 * (sv * sv + cv * cv)
                    sv = sv * f
                    cv = cv * f
                cache_s[ku + d, 0] = sv * sin_mult
                cache_c[ku + d, 0] = cv * cos_mult
        elif n >= 8:  # a row of pairs at a time, vectorised over the pairs
            for d in range(cnt):
                r = np.uint64(t0 + d)
                k = np.uint64(k0 + d)
                for i in range(np.uint64(n)):
                    sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[r, i], ts[r, i])
                    if renorm:
                        f = 1.5 - 0.5 * (sv * sv + cv * cv)
                        sv = sv * f
                        cv = cv * f
                    cache_s[k, i] = sv * sin_mult
                    cache_c[k, i] = cv * cos_mult
        else:  # two to seven pairs: each pair's positions in one loop
            for i in range(n):
                a_s = anc_s[LAST, i]
                a_c = anc_c[LAST, i]
                for d in range(cnt):
                    sv, cv = add_angle(a_s, a_c, tc[t0 + d, i], ts[t0 + d, i])
                    if renorm:
                        f = 1.5 - 0.5 * (sv * sv + cv * cv)
                        sv = sv * f
                        cv = cv * f
                    cache_s[k0 + d, i] = sv * sin_mult
                    cache_c[k0 + d, i] = cv * cos_mult
        si += cnt


@kernel()
def rec_step(cur_s, cur_c, tc, ts, steps):
    """Advance the float64 state ``cur`` by ``steps`` positions (angle addition of ``w``)."""
    for _ in range(steps):
        for i in range(cur_s.shape[0]):
            cur_s[i], cur_c[i] = add_angle(cur_s[i], cur_c[i], tc[STEP1, i], ts[STEP1, i])


@kernel(inline=True)
def rec_load(anc_s, anc_c, cur_s, cur_c):
    """The recurrence's state restarted from the anchor of a group of ``RADIX`` positions:
    the finest level of the anchor cache, which the caller has brought to the group.

    The recurrence takes each row's values from a float64 state stepped from row to row (one
    angle addition of ``w``, with the state and the step in L1) instead of folding each row
    from its anchor (16 bytes per pair of the step table from L2), for the paths where that
    is faster: float32 tables of fewer than 8 or at least 128 pairs a row
    (``fastpe._engine.table_stepped``) and every float32 ``add_sinusoidal``.

    By definition, the value at ``p`` is the exact anchor at ``g = (p >> 4) << 4`` advanced
    ``p - g`` times by angle addition of ``w`` (row ``STEP1`` of the step table): at most 19
    roundings of angle addition, a few 2**-50 absolute, far inside float32's half ulp. Every
    path to ``p`` performs the same operations, so chunked, resumed and gapped calls give
    the same bits. A restart, written out in each kernel (a call, or a branch around one in
    an inlined helper, costs a reference count update per array argument: 1.1-1.3x on
    tables of 32-128 channels), is::

        if keys[LAST] != (p >> BITS):  # the anchors (anchors_at's operations)
            if keys[LAST - 1] == (p >> (2 * BITS)):
                anchor_step(anc_s, anc_c, tc, ts, p, keys)
            else:
                update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
        rec_load(anc_s, anc_c, cur_s, cur_c)  # the state at g
        r = 0  # the row of tc/ts that brings it to p, applied while writing
        if p & DIGIT != 0:
            rec_step(cur_s, cur_c, tc, ts, (p & DIGIT) - 1)
            r = STEP1

    (0: the identity, for ``p == g``). When ``p`` follows ``prev`` in the same group,
    callers step instead (:func:`rec_continues`).
    """
    for i in range(cur_s.shape[0]):
        cur_s[i] = anc_s[LAST, i]
        cur_c[i] = anc_c[LAST, i]


@kernel(inline=True)
def rec_continues(p, prev):
    """Whether the state at ``prev`` can be stepped to ``p`` (same group, ``p`` after it).

    Callers then step ``p - prev - 1`` times and write with row ``STEP1``. That path is
    written out in each kernel and calls only leaf functions: inlining a helper that takes
    arrays into the row loop costs a reference count update per array per row.
    """
    return prev != NO_KEY and (prev >> BITS) == (p >> BITS) and p > prev
