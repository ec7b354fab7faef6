"""One position for every row: the decoding step of ``apply_rope`` and ``apply_rope_qk``.

A decoding step rotates a few kilobytes (``(1, 1, 32, 128)``: one position, 32 heads), so
what costs is not the rotation but what surrounds it: the scratch of ``rope_kernel``, the
anchors of the position (libm's sin and cos of every pair, then three angle additions) and
the arguments of a general walk. Here the caller (``fastpe._engine.run_step``) keeps the
cos/sin rows of a group of ``RADIX`` consecutive positions, made once by
:func:`step_angles`, and :func:`rope_step_kernel` rotates every row of one or two contiguous
arrays (q and k) with one of those rows. Same operations as ``rope_kernel``: the same bits.
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .angles import LEVELS, NO_KEY, RADIX, fold_into_cache, update_anchors
from .args import INTERLEAVED
from .turn import turn_first, turn_second


@kernel()
def step_angles(p0, freqs, sin_mult, cos_mult, cache_s, cache_c):
    """Rows ``d < RADIX`` of ``cache_s``/``cache_c``: cos/sin of position ``p0 + d``.

    ``p0`` a multiple of ``RADIX``; ``freqs`` as :func:`~.args.freqs`; the rows as
    ``rope_kernel``'s cos/sin cache holds them (times ``sin_mult`` and ``cos_mult``, in the
    cache's dtype): the anchors of ``p0`` (:func:`~.angles.update_anchors`, which serve
    every position of the group), then one angle addition per row.
    """
    wh, wl, tc, ts = freqs
    n = wh.shape[0]
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    update_anchors(p0, wh, wl, tc, ts, anc_s, anc_c, np.full(LEVELS, NO_KEY))
    renorm = cache_s.itemsize == 8
    for d in range(RADIX):
        fold_into_cache(anc_s, anc_c, tc, ts, d, cache_s, cache_c, d, sin_mult, cos_mult, renorm)


@kernel()
def _rotate_rows(flat, rows, row_len, n, layout, s, c, k):
    """``rope``'s ``_rotate_interleaved`` or ``_rotate_half`` on rows ``0 .. rows - 1``
    of ``flat``, in one call.

    The same loop body (the rotation's roundings written out, :mod:`.turn`: the same bits;
    the tests compare every dtype and layout with ``rope_kernel`` byte for byte), with the rows
    inside: a call per row, with its reference counts, costs a third of a small step.
    """
    if layout == INTERLEAVED:
        for r in range(rows):
            base = np.uint64(r * row_len)
            for i in range(n):
                j = base + np.uint64(2 * i)
                x1 = flat[j]
                x2 = flat[j + np.uint64(1)]
                flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
                flat[j + np.uint64(1)] = turn_second(x2, x1, c[k, i], s[k, i])
    else:
        m = np.uint64(n)
        for r in range(rows):
            base = np.uint64(r * row_len)
            for i in range(n):
                j = base + np.uint64(i)
                x1 = flat[j]
                x2 = flat[j + m]
                flat[j] = turn_first(x1, x2, c[k, i], s[k, i])
                flat[j + m] = turn_second(x2, x1, c[k, i], s[k, i])


@kernel()
def rope_step_kernel(a, b, cs, step, k):
    """Rotate the rows of ``a`` and of ``b`` by row ``k`` of ``cs[0]`` (sin) and ``cs[1]``
    (cos); False, with nothing written, when ``b`` is rotated and shares memory with ``a``.

    ``a`` and ``b``: flat, contiguous arrays of the cache's dtype made of rows of
    ``row_len`` channels; ``step``: int64 ``(npairs, layout, row_len, a_rows, b_rows)``,
    the rows rotated being ``0 .. a_rows - 1`` of ``a`` and ``0 .. b_rows - 1`` of ``b``
    (``b_rows`` 0: ``a`` alone). Integers travel in an array, the cos/sin rows in one:
    arrays are unboxed faster than a tuple of ints. Two contiguous arrays share memory
    exactly when their byte ranges meet, checked here rather than by ``np.shares_memory``
    in the caller (a tenth of a step).
    """
    n, layout, row_len, a_rows, b_rows = step[0], step[1], step[2], step[3], step[4]
    if b_rows > 0:
        pa = a.ctypes.data
        pb = b.ctypes.data
        if pa < pb + b.size * b.itemsize and pb < pa + a.size * a.itemsize:
            return False
    _rotate_rows(a, a_rows, row_len, n, layout, cs[0], cs[1], k)
    _rotate_rows(b, b_rows, row_len, n, layout, cs[0], cs[1], k)
    return True
