"""One position for every row: the decoding step of ``apply_rope`` and ``apply_rope_qk``.

A decoding step rotates a few kilobytes (``(1, 1, 32, 128)``: one position, 32 heads), so
what costs is not the rotation but what surrounds it: the scratch of ``rope_kernel``, the
anchors of the position (libm's sin and cos of every pair, then three angle additions) and
the arguments of a general walk. Here the caller (``fastpe._engine.run_step``) keeps the
cos/sin rows of a group of ``RADIX`` consecutive positions, made once by
:func:`step_angles`, and :func:`rope_step_kernel` rotates every row of one or two contiguous
arrays (q and k) with one of those rows. The operations of ``rope_kernel`` for each value
(interleaved lines by an intrinsic of their own, :func:`_turn_groups`): the same bits.
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import kernel
from .angles import LEVELS, NO_KEY, RADIX, fold_into_cache, update_anchors
from .args import INTERLEAVED
from .turn import multiply_add, turn_first, turn_second
from .vec16 import F32, I32, I64, c_array, vec

# Interleaved rows a line at a time (_turn_groups), from spread cos/sin rows: on x86, where
# its bits are those of the full path's loop (NaNs' signs included: see _turn_groups);
# elsewhere (aarch64: unmeasured, and its negated multiply-add flips a NaN's sign) the rows
# keep LLVM's loop and the cos/sin rows are not spread
SPREAD = platform.machine().lower() in ("x86_64", "amd64")


def row_width(npairs: int, layout: int) -> int:
    """The length of a cos/sin row of the step's cache (:func:`step_angles`): ``2 npairs``
    for interleaved pairs where :data:`SPREAD`, else ``npairs``."""
    return 2 * npairs if SPREAD and layout == INTERLEAVED else npairs


@kernel()
def step_angles(p0, freqs, sin_mult, cos_mult, cache_s, cache_c):
    """Rows ``d < RADIX`` of ``cache_s``/``cache_c``: cos/sin of position ``p0 + d``.

    ``p0`` a multiple of ``RADIX``; ``freqs`` as :func:`~.args.freqs`; the values as
    ``rope_kernel``'s cos/sin cache holds them (times ``sin_mult`` and ``cos_mult``, in the
    cache's dtype): the anchors of ``p0`` (:func:`~.angles.update_anchors`, which serve
    every position of the group), then one angle addition per row. Rows of ``n`` values
    (the pairs: the half layout) hold them as they are; rows of ``2 n`` (interleaved) hold
    them as the interleaved lines take them, ``(-s, s)`` and ``(c, c)`` per pair
    (:func:`_turn_groups`; :func:`row_width` says which).
    """
    wh, wl, tc, ts = freqs
    n = wh.shape[0]
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    update_anchors(p0, wh, wl, tc, ts, anc_s, anc_c, np.full(LEVELS, NO_KEY))
    renorm = cache_s.itemsize == 8
    for d in range(RADIX):
        fold_into_cache(anc_s, anc_c, tc, ts, d, cache_s, cache_c, d, sin_mult, cos_mult, renorm)
    if cache_s.shape[1] == 2 * n:  # spread in place, from the last pair (2 i >= i)
        for d in range(RADIX):
            for i in range(n - 1, -1, -1):
                sv = cache_s[d, i]
                cv = cache_c[d, i]
                cache_s[d, 2 * i] = -sv
                cache_s[d, 2 * i + 1] = sv
                cache_c[d, 2 * i] = cv
                cache_c[d, 2 * i + 1] = cv


@intrinsic
def _turn_groups(typingctx, flat, at, s, c, k, n):
    """``turn_groups(flat, at, s, c, k, n) -> int64``: the interleaved pairs of
    ``flat[at:]`` rotated by row ``k`` of ``s`` and ``c`` (as :func:`step_angles` spreads
    them: ``(-s, s)`` and ``(c, c)`` per pair), a line of values (8 float32 pairs, 4
    float64) at a time, as many whole lines as ``n`` pairs hold; returns the pairs done
    (the caller rotates the rest). On x86 alone (:data:`SPREAD`, :func:`row_width`).

    LLVM vectorises the interleaved loop of :func:`_rotate_rows` by splitting each line
    into its first and second values and interleaving the results back: eight shuffles a
    line of 8 float32 pairs on AVX2 (``inspect_asm``, znver3 host), where the half
    layout's loop has none. Here each line is ``v' = fma(v, (c, c), swapped(v) (-s, s))``
    (:func:`.direct.rope_pass`'s form; :func:`~.turn.multiply_add`, a product rounded then
    a sum where the CPU has no fused multiply-add): ``x1' = fma(x1, c, x2 (-s))``, ``x2' =
    fma(x2, c, x1 s)``. The loop's :func:`~.turn.turn_first` is ``fma(x1, c, -(x2 s))``,
    which LLVM makes x86's fused multiply-subtract: it keeps a NaN's sign as ``x2 (-s)``
    does, and the values are the same bits (a negation after the product, ``fneg``, would
    flip it: LLVM folds a vector of alternating signs, written so, into that negation and
    one multiply-add; aarch64's negated multiply-add flips it too, hence :data:`SPREAD`).
    The tests compare NaNs of both signs, infinities and signed zeros, byte for byte.
    With the rows spread once per group of positions, a vector of the line takes a load,
    one shuffle within its 128-bit lanes (the swap), a product, a multiply-add and a store.
    32 rows of 128 float32 channels, the row loop alone in a loop of calls (scratch, znver3
    host, medians of 11 rounds): 0.69 us by LLVM's loop, 0.39 us spread beforehand; with
    the rows spread in this loop instead (eight shuffles a line again), about 0.1 us less
    than LLVM's loop. Where the CPU has no fused multiply-add both forms are a rounded
    product and a sum, ``x1 c + x2 (-s)`` against ``x1 c - x2 s`` (LLVM's ``fsub``, which
    keeps a NaN's sign on x86 too): the same bits, though no CPU here has run them.
    """
    if not isinstance(flat, types.Array) or flat.dtype not in (types.float32, types.float64):
        return None
    dt = flat.dtype
    if not (
        c_array(flat, dt, 1)
        and c_array(s, dt, 2)
        and c_array(c, dt, 2)
        and all(v == types.int64 for v in (at, k, n))
    ):
        return None
    double = dt == types.float64
    size = 8 if double else 4
    per_line = 64 // size  # values of a line
    lanes = per_line // 2  # its pairs
    elem = ir.DoubleType() if double else F32
    line = vec(elem, per_line)
    align = size if flat.aligned else 1

    def idx(v):
        return ir.Constant(vec(I32, len(v)), v)

    def codegen(context, builder, signature, args):
        fa, sa, ca = (
            context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 2, 3)
        )
        at_, k_, n_ = args[1], args[4], args[5]
        x0 = builder.gep(fa.data, [at_], inbounds=True)
        row = builder.mul(k_, builder.extract_value(sa.shape, 1))  # (C order: s and c alike)
        s0 = builder.gep(sa.data, [row], inbounds=True)
        c0 = builder.gep(ca.data, [row], inbounds=True)
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        groups = builder.udiv(n_, c64(lanes))
        swap = idx([i ^ 1 for i in range(per_line)])
        with cgutils.for_range(builder, groups) as loop:
            g = builder.mul(loop.index, c64(per_line))
            p = builder.bitcast(builder.gep(x0, [g]), line.as_pointer())
            ps = builder.bitcast(builder.gep(s0, [g]), line.as_pointer())
            pc = builder.bitcast(builder.gep(c0, [g]), line.as_pointer())
            v = builder.load(p, align=align)
            ss = builder.load(ps, align=size)
            cc = builder.load(pc, align=size)
            w = builder.shuffle_vector(v, v, swap)
            builder.store(multiply_add(builder, v, cc, builder.fmul(w, ss)), p, align=align)
        return builder.mul(groups, c64(lanes))

    return types.int64(flat, at, s, c, k, n), codegen


@kernel()
def _rotate_rows(flat, rows, row_len, n, layout, s, c, k):
    """``rope``'s ``_rotate_interleaved`` or ``_rotate_half`` on rows ``0 .. rows - 1``
    of ``flat``, in one call.

    The same values (the rotation's roundings written out, :mod:`.turn`: the same bits;
    the tests compare every dtype and layout with ``rope_kernel`` byte for byte), with the rows
    inside: a call per row, with its reference counts, costs a third of a small step.
    Interleaved rows take :func:`_turn_groups` for their whole lines, then this loop for
    their last pairs, where their ``s`` and ``c`` are spread (:func:`row_width`).
    """
    if layout == INTERLEAVED and s.shape[1] == 2 * n:  # spread rows (row_width)
        for r in range(rows):
            at = r * row_len
            done = _turn_groups(flat, at, s, c, k, n)
            base = np.uint64(at)
            for i in range(done, n):
                j = base + np.uint64(2 * i)
                x1 = flat[j]
                x2 = flat[j + np.uint64(1)]
                cv = c[k, 2 * i]
                sv = s[k, 2 * i + 1]
                flat[j] = turn_first(x1, x2, cv, sv)
                flat[j + np.uint64(1)] = turn_second(x2, x1, cv, sv)
    elif layout == INTERLEAVED:  # rows not spread (not SPREAD): LLVM's loop
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
    (cos), as :func:`step_angles` writes them; False, with nothing written, when ``b`` is
    rotated and shares memory with ``a``.

    ``a`` and ``b``: flat, contiguous arrays of the cache's dtype made of rows of
    ``row_len`` channels; ``step``: int64 ``(npairs, layout, row_len, a_rows, b_rows, ...)``
    (the rest for the caller: ``fastpe._engine.step_setup``), the rows rotated being
    ``0 .. a_rows - 1`` of ``a`` and ``0 .. b_rows - 1`` of ``b`` (``b_rows`` 0: ``a``
    alone). Integers travel in an array, the cos/sin rows in one:
    arrays are unboxed faster than a tuple of ints. Two contiguous arrays share memory
    exactly when their byte ranges meet, checked here rather than by ``np.shares_memory``
    in the caller (a tenth of a step).
    """
    n, layout, row_len, a_rows, b_rows = step[0], step[1], step[2], step[3], step[4]
    if cs.shape[2] != n and not (layout == INTERLEAVED and cs.shape[2] == 2 * n):
        raise ValueError("cos/sin rows of another width than the layout's (row_width)")
    if b_rows > 0:
        pa = a.ctypes.data
        pb = b.ctypes.data
        if pa < pb + b.size * b.itemsize and pb < pa + a.size * a.itemsize:
            return False
    _rotate_rows(a, a_rows, row_len, n, layout, cs[0], cs[1], k)
    _rotate_rows(b, b_rows, row_len, n, layout, cs[0], cs[1], k)
    return True
