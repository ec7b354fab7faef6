"""16-bit (float16, bfloat16) twins of the conventions' kernels in :mod:`.fractional`. Private.

As in :mod:`.half`, the array is seen as its raw ``uint16`` bits. Values are computed in
float64 from the exact angles (:func:`~.fractional.row_values`) and rounded once, to
nearest even, into 16 bits (:func:`~.half.from_f64`); an addition converts the element to
float32 exactly, adds in float64 and rounds the sum once (grids: the same bits, mostly by
float32 sums in groups of 16, see :func:`grid_add16_kernel`). Grid tables are written by
:func:`~.fractional.grid_kernel` itself (a copy of 16-bit values); only the addition needs
a twin. Imported on the first 16-bit call, so the float32/float64 paths never compile it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import kernel
from .angles import worker_items
from .fractional import cell_coords, grid_spans, max_frequency, order_index, row_values
from .half import HW_HALF, from_f64, to_f32
from .prefetch import hint_line, prefetch_lines
from .vec16 import (
    F32,
    HW_BF16,
    I16,
    I32,
    I64,
    LANES,
    append,
    c_array,
    each_group,
    masked,
    round16,
    splat,
    vec,
)


@kernel()
def frac16_kernel(w0, w1, view, pos, wh, wl, order, add, n_workers, bf16):
    """:func:`~.fractional.frac_kernel` on 16-bit bits (``bf16``: bfloat16, else float16)."""
    flat, off0, sb, sr, sc, nb, nr = view
    n = wh.shape[0]
    m, os, oc = order_index(order, n)
    wmax = max_frequency(wh, wl)
    s = np.empty(n)
    c = np.empty(n)
    for w in range(w0, w1):
        r0, r1 = worker_items(nr, w, n_workers)
        for r in range(r0, r1):
            row_values(pos[r], wh, wl, wmax, s, c)
            for b in range(nb):
                base = off0 + b * sb + r * sr
                js = base + os * sc
                jc = base + oc * sc
                for i in range(n):
                    a = js + m * i * sc
                    d = jc + m * i * sc
                    if add:
                        flat[a] = from_f64(np.float64(to_f32(flat[a], bf16)) + s[i], bf16)
                        flat[d] = from_f64(np.float64(to_f32(flat[d], bf16)) + c[i], bf16)
                    else:
                        flat[a] = from_f64(s[i], bf16)
                        flat[d] = from_f64(c[i], bf16)
    return 0.0


# Below these magnitudes (float32 bits) a group is left for the float64 pass (see
# _first_pass): float16 where the rounded sum is below 2**-13 (its exponent field 0 or 1;
# float16's subnormals, whose midpoints lie elsewhere, and the binade above them),
# bfloat16 below 2**-20, far above the 2**-22 that the bound needs
F16_SMALL_EXPONENTS = 0x7800  # float16 bits: an exponent field of 0 or 1 clears these
BF16_FLOOR_BITS = 0x35800000  # float32 bits of 2**-20


def _first_pass(bf16, hw_bf16=False, paced=False):
    """An intrinsic ``first(flat, dst, pair, src, width, pend) -> int64`` (``paced``:
    ``first(flat, dst, pair, src, width, pend, pace)``, each group first prefetching the
    line ``pace`` bytes past its values, an int64 argument): the float32 pass
    of a 16-bit grid sum (``hw_bf16``: bfloat16 rounded by the CPU's instruction, see
    :func:`~.vec16._hardware_bf16`) over ``flat[dst:][:width]`` (raw 16-bit bits, in
    place), the table values at ``src`` of ``pair`` (2, n) float32: row 0 each float64
    value ``t`` rounded to float32 (``th``), row 1 the rest ``t - th`` rounded to float32
    (``tl``).

    Each group of ``LANES`` values is one vector: ``s = (x + th) + tl`` in float32 (``x``
    exact), rounded into 16 bits unless a value of the group may round otherwise than the
    float64 sum ``v = x + t`` rounded once (:func:`~.half.from_f64`); such a group is left
    as it was and its number written to ``pend`` (the return value counts them), for
    :func:`_exact16`. The last group of a width that is not a multiple of ``LANES`` loads
    and stores only its values.

    Why ``s`` rounds as ``v`` unless flagged, for ``|t| <= 1`` (sin and cos): ``th`` is
    within ``2**-24 |t|`` of ``t``, so ``t - th`` is exact in float64 and ``tl`` within
    ``2**-48`` of it; the two float32 additions err by at most ``2**-24`` of their results
    each, and ``v`` by ``2**-53 |v|``; together ``|s - v| < 2**-23 |s| (1 + 2**-23) +
    2**-47``, less than 3 float32 ulps of ``s`` once ``|s| >= 2**-22``. The 16-bit
    midpoint of ``s``'s interval has ``s``'s bits above the 16-bit type's last one, then
    ``100...0``; where ``s``'s bits below differ from that pattern by 3 float32 ulps or
    more, ``v`` lies strictly on ``s``'s side of that midpoint, and every other midpoint is
    thousands of ulps away (also across a binade's edges), so both round alike. The test,
    ``((bits + 3 - pattern) & low & ~7) == 0``, flags -3 to +4 ulps (one more above than
    needed). Small sums are flagged
    (float16: results below 2**-13; bfloat16: sums below 2**-20). Infinite and NaN sums
    are not: both passes give the same bits (a NaN keeps its payload's high bits, quiet).

    The vectors are explicit, not left to LLVM's loop vectorizer: one branch per group on
    the whole group's flags, no flag stored per value (a byte per value had cost as much
    as the test itself). A float16 group is about ten vector instructions.
    """

    def typed(flat, dst, pair, src, width, pend):
        # what the code below assumes: contiguous 16-bit bits, a (2, n) float32 pair
        # table, int64 offsets and group numbers; anything else is a typing error
        return (
            c_array(flat, types.uint16, 1)
            and c_array(pair, types.float32, 2)
            and c_array(pend, types.int64, 1)
            and all(a == types.int64 for a in (dst, src, width))
        )

    def codegen(context, builder, signature, args):
        vi16, vi32, vf32 = vec(I16), vec(I32), vec(F32)
        fa = context.make_array(signature.args[0])(context, builder, args[0])
        ta = context.make_array(signature.args[2])(context, builder, args[2])
        pa = context.make_array(signature.args[5])(context, builder, args[5])
        n = builder.extract_value(ta.shape, 1)
        x0 = builder.gep(fa.data, [args[1]], inbounds=True)
        h0 = builder.gep(ta.data, [args[3]], inbounds=True)
        l0 = builder.gep(ta.data, [builder.add(args[3], n)], inbounds=True)
        count = cgutils.alloca_once_value(builder, ir.Constant(I64, 0))
        low, pattern = (0xFFFF, 0x8000) if bf16 else (0x1FFF, 0x1000)

        def group(g, lanes):
            """One group at number ``g``; ``lanes`` (i1 vector) None: all of them."""
            off = builder.mul(g, ir.Constant(I64, LANES))
            px = builder.bitcast(builder.gep(x0, [off], inbounds=True), vi16.as_pointer())
            ph = builder.bitcast(builder.gep(h0, [off], inbounds=True), vf32.as_pointer())
            pl = builder.bitcast(builder.gep(l0, [off], inbounds=True), vf32.as_pointer())
            if lanes is None:
                u = builder.load(px, align=2)
                th = builder.load(ph, align=4)
                tl = builder.load(pl, align=4)
            else:
                a2, a4 = ir.Constant(I32, 2), ir.Constant(I32, 4)
                u = builder.call(masked(builder, "load", vi16), [px, a2, lanes, splat(I16, 0)])
                load32 = masked(builder, "load", vf32)
                th = builder.call(load32, [ph, a4, lanes, splat(F32, 0.0)])
                tl = builder.call(load32, [pl, a4, lanes, splat(F32, 0.0)])
            if paced:  # (the line ``pace`` bytes on: a hint; a block's last group too)
                p8 = builder.bitcast(px, ir.IntType(8).as_pointer())
                hint_line(builder, builder.gep(p8, [args[6]]))
            if bf16:
                x = builder.bitcast(builder.shl(builder.zext(u, vi32), splat(I32, 16)), vf32)
            else:
                x = builder.fpext(builder.bitcast(u, vec(ir.HalfType())), vf32)
            s = builder.fadd(builder.fadd(x, th), tl)
            us = builder.bitcast(s, vi32)
            w = builder.add(us, splat(I32, (3 - pattern) & 0xFFFFFFFF))
            flag = builder.icmp_unsigned("==", builder.and_(w, splat(I32, low & ~7)), splat(I32, 0))
            # the integer code keeps a NaN quiet (one select); the instruction does
            r = round16(builder, s, bf16, hw_bf16, keep_nan=True)
            if bf16:
                mag = builder.and_(us, splat(I32, 0x7FFFFFFF))
                small = builder.icmp_unsigned("<", mag, splat(I32, BF16_FLOOR_BITS))
            else:
                exp = builder.and_(r, splat(I16, F16_SMALL_EXPONENTS))
                small = builder.icmp_unsigned("==", exp, splat(I16, 0))
            flag = builder.or_(flag, small)
            if lanes is not None:
                flag = builder.and_(flag, lanes)
            hit = builder.icmp_unsigned("!=", builder.bitcast(flag, I16), ir.Constant(I16, 0))
            with builder.if_else(hit, likely=False) as (then, otherwise):
                with then:
                    append(builder, g, pa.data, count)
                with otherwise:
                    if lanes is None:
                        builder.store(r, px, align=2)
                    else:
                        store = masked(builder, "store", vi16)
                        builder.call(store, [r, px, ir.Constant(I32, 2), lanes])

        width = args[4]
        each_group(builder, width, group)
        return builder.load(count)

    if paced:

        @intrinsic
        def first_paced(typingctx, flat, dst, pair, src, width, pend, pace):
            if not typed(flat, dst, pair, src, width, pend) or pace != types.int64:
                return None
            return types.int64(flat, dst, pair, src, width, pend, pace), codegen

        return first_paced

    @intrinsic
    def first(typingctx, flat, dst, pair, src, width, pend):
        if not typed(flat, dst, pair, src, width, pend):
            return None
        return types.int64(flat, dst, pair, src, width, pend), codegen

    return first


_first_f16 = _first_pass(False)
_first_bf16 = _first_pass(True, HW_BF16)
# paced (fastpe.conventions.grid16_prefetch)
_first_f16_paced = _first_pass(False, paced=True)
_first_bf16_paced = _first_pass(True, HW_BF16, paced=True)


@kernel()
def first_pass16(flat, dst, pair, src, width, pend, bf16):
    """:func:`_first_pass` for one dtype (``bf16`` ``ON``: bfloat16; None: float16, which
    only CPUs with hardware float16 conversions run, ``HW_HALF``): the groups of
    ``flat[dst:][:width]`` it leaves for :func:`_exact16` in ``pend``, their count
    returned. For tests; the kernel calls the intrinsics itself."""
    if bf16 is not None:
        return _first_bf16(flat, dst, pair, src, width, pend)
    return _first_f16(flat, dst, pair, src, width, pend)


@kernel(inline=True)
def _exact16(flat, dst, tab, src, n, bf16):
    """``flat[dst:][:n] += tab[src:][:n]``: each sum in float64, rounded once."""
    d0 = np.uint64(dst)
    s0 = np.uint64(src)
    for j in range(np.uint64(n)):
        v = np.float64(to_f32(flat[d0 + j], bf16)) + tab[s0 + j]
        flat[d0 + j] = from_f64(v, bf16)


@kernel(inline=True)
def _exact_groups(flat, dst, tab, src, width, groups, count, bf16):
    """The groups ``groups[:count]`` of a block (:func:`_first_pass`) in float64."""
    for q in range(count):
        at = LANES * groups[q]
        _exact16(flat, dst + at, tab, src + at, min(LANES, width - at), bf16)


@kernel()
def grid_add16_kernel(
    w0, w1, view, grid, blocks, tab, pair, n_workers, bf16, tile_bytes, ahead, pace
):
    """The addition of :func:`~.fractional.grid_kernel` on 16-bit bits (see
    :func:`_grid_add16_work`); ``bf16`` None (float16) or ``ON`` (bfloat16): numba prunes the
    branch before it compiles, so each dtype is a specialization of its own, compiled on
    first use."""
    if bf16 is not None:
        return _grid_add16_work(
            w0, w1, view, grid, blocks, tab, pair, n_workers, True, tile_bytes, ahead, pace
        )
    return _grid_add16_work(
        w0, w1, view, grid, blocks, tab, pair, n_workers, False, tile_bytes, ahead, pace
    )


@kernel(inline=True)
def _grid_add16_work(
    w0, w1, view, grid, blocks, tab, pair, n_workers, bf16, tile_bytes, ahead, pace
):
    """The body of :func:`grid_add16_kernel` for one dtype: ``tab`` the blocks' float64
    tables, ``pair`` the same values as two float32 rows (:func:`_first_pass`).

    Each element gets the bits of the float64 sum rounded once (:func:`from_f64` of
    ``float64(x) + t``). Contiguous channels take :func:`_first_pass`, a float32 pass in
    groups of 16 that leaves a group where a value may round otherwise; those groups are
    summed in float64 after the next block's first pass, so that the float64 table lines
    they read (only there: memory or L3) arrive meanwhile: one group in 51 of a float16
    sum with x ~ N(0, 1) on a 1024 x 512 grid of 1024 channels, one in 196 of bfloat16
    (one float16 value in about 700 is near a midpoint). Strided channels, and float16 on
    CPUs without hardware conversions, take the float64 sum for every value. The first
    pass prefetches x ``ahead`` elements on (0: none), a block's lines before it, or paced
    (``pace`` > 0), each group of 16 values the line ``pace`` bytes past it as it
    goes (the intrinsics of ``_first_pass(..., paced=True)``; the same bits): without
    either the loop waits on memory (:mod:`.prefetch`;
    ``fastpe.conventions.grid16_prefetch`` chooses).
    """
    flat, off0, sb, sr, sc, nb, nr = view
    coords = np.zeros(grid.shape[0], dtype=np.int64)
    widest = 0
    for k in range(blocks.shape[0]):
        widest = max(widest, blocks[k, 2])
    # two slots: the groups this block left, and those of the block before, done after
    # this block's first pass; per slot its block's (dst, src, width) and count
    groups = np.zeros((2, (widest + LANES - 1) // LANES), dtype=np.int64)
    left = np.zeros((2, 4), dtype=np.int64)
    vector = bf16 or HW_HALF
    for w in range(w0, w1):
        i0, i1 = worker_items(nb * nr, w, n_workers)
        spans = grid_spans(i0, i1, grid, blocks, tab.itemsize, tile_bytes)
        cur = 0
        for span in range(spans.shape[0]):
            for item in range(spans[span, 0], spans[span, 1]):
                b = item // nr
                cell = item - b * nr
                cell_coords(cell, grid, coords)
                base = off0 + b * sb + cell * sr
                for k in range(blocks.shape[0]):
                    axis, col, width = blocks[k, 0], blocks[k, 1], blocks[k, 2]
                    if axis < 0:
                        continue
                    dst = base + col * sc
                    src = blocks[k, 3] + coords[axis] * width
                    if sc != 1:
                        for j in range(width):
                            v = np.float64(to_f32(flat[dst + j * sc], bf16)) + tab[src + j]
                            flat[dst + j * sc] = from_f64(v, bf16)
                        continue
                    if not vector:
                        _exact16(flat, dst, tab, src, width, bf16)
                        continue
                    if ahead > 0:
                        prefetch_lines(flat, dst + ahead, width)
                    if pace > 0 and bf16:
                        got = _first_bf16_paced(flat, dst, pair, src, width, groups[cur], pace)
                    elif pace > 0:
                        got = _first_f16_paced(flat, dst, pair, src, width, groups[cur], pace)
                    elif bf16:
                        got = _first_bf16(flat, dst, pair, src, width, groups[cur])
                    else:
                        got = _first_f16(flat, dst, pair, src, width, groups[cur])
                    for q in range(got):
                        prefetch_lines(tab, src + LANES * groups[cur, q], LANES)
                    left[cur, 0], left[cur, 1], left[cur, 2], left[cur, 3] = dst, src, width, got
                    o = 1 - cur
                    _exact_groups(
                        flat, left[o, 0], tab, left[o, 1], left[o, 2], groups[o], left[o, 3], bf16
                    )
                    left[o, 3] = 0
                    cur = o
        for o in range(2):
            _exact_groups(
                flat, left[o, 0], tab, left[o, 1], left[o, 2], groups[o], left[o, 3], bf16
            )
            left[o, 3] = 0
    return 0.0
