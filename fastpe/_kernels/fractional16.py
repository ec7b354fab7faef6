"""16-bit (float16, bfloat16) twins of the conventions' kernels in :mod:`.fractional`. Private.

As in :mod:`.half`, the array is seen as its raw ``uint16`` bits. Values are computed in
float64 from the exact angles (:func:`~.fractional.row_values`) and rounded once, to
nearest even, into 16 bits (:func:`~.half.from_f64`); an addition converts the element to
float32 exactly, adds in float64 and rounds the sum once (grids: the same bits, mostly by a
float32 sum, see :func:`grid_add16_kernel`). Grid tables are written by
:func:`~.fractional.grid_kernel` itself (a copy of 16-bit values); only the addition needs
a twin. Imported on the first 16-bit call, so the float32/float64 paths never compile it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .._config import kernel
from .angles import worker_items
from .fractional import cell_coords, grid_spans, max_frequency, order_index, row_values
from .half import from_f32, from_f64, to_f32
from .prefetch import prefetch_lines
from .vectors import wide_vectors


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


# A float32 sum ``s = x + t32`` (``x`` a 16-bit value, exact in float32; ``t32`` the
# float64 table value ``t`` rounded to float32, ``|t| <= 1``) lies within
# ``SUM_BOUND * (0.5 + |s|)`` of the float64 sum ``v = x + t`` rounded once (see
# _grid_add16_work); from each dtype's floor up that bound is below a quarter of the
# 16-bit ulp of ``s``'s binade (float16 from 2**-12, whose ulp is 2**-22; bfloat16 from
# 2**-15, ulp 2**-22), which _near_sum_test needs
SUM_BOUND = 2.0**-24 * (1.0 + 2.0**-10)  # a float32
SUM_FLOOR_F16 = 2.0**-12
SUM_FLOOR_BF16 = 2.0**-15


def _near_sum_test(low_mask, midpoint, floor):
    """An intrinsic for :func:`near_sum16`: 1 (uint8) where the float32 sum ``s`` lies within
    ``SUM_BOUND * (0.5 + |s|)`` (computed in float32, rounded down by at most a relative
    2**-23, which the bound's factor ``1 + 2**-10`` covers) of a midpoint between
    neighbours of the 16-bit type, or ``|s| < floor`` (NaN too); else 0. Bit and float32
    operations only (LLVM vectorises the loops that use it).

    ``m``, ``s`` with its bits below the 16-bit type's last one set to the midpoint pattern,
    is the midpoint of ``s``'s 16-bit interval, in the same binade, so ``s - m`` is exact.
    From ``floor`` up the bound is below a quarter of the 16-bit ulp ``U`` of ``s``'s
    binade, so no other midpoint lies within it: those of the neighbouring intervals are
    ``U / 2`` away or more, the binade above has none within ``U``, and the highest of the
    binade below lies ``U / 4`` under its lower edge.
    """

    @intrinsic
    def test(typingctx, f):
        if f != types.float32:
            return None

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            f32 = ir.FloatType()
            fabs = builder.module.declare_intrinsic("llvm.fabs", [f32])
            u = builder.bitcast(args[0], i32)
            mu = builder.or_(
                builder.and_(u, ir.Constant(i32, ~low_mask & 0xFFFFFFFF)),
                ir.Constant(i32, midpoint),
            )
            d = builder.call(fabs, [builder.fsub(args[0], builder.bitcast(mu, f32))])
            a = builder.call(fabs, [args[0]])
            bound = builder.fadd(
                builder.fmul(a, ir.Constant(f32, SUM_BOUND)), ir.Constant(f32, 0.5 * SUM_BOUND)
            )
            near = builder.fcmp_ordered("<=", d, bound)
            small = builder.fcmp_unordered("<", a, ir.Constant(f32, floor))  # NaN too
            return builder.zext(builder.or_(near, small), ir.IntType(8))

        return types.uint8(types.float32), codegen

    return test


_near_sum_bf16 = _near_sum_test(0xFFFF, 0x8000, SUM_FLOOR_BF16)
_near_sum_f16 = _near_sum_test(0x1FFF, 0x1000, SUM_FLOOR_F16)


@kernel()
def near_sum16(s, bf16):
    """0 (uint8) where the float32 sum ``s`` and every value within ``SUM_BOUND * (0.5 +
    |s|)`` of it round to the same 16-bit value (to nearest even); 1 where that may not
    hold (see :func:`_near_sum_test`)."""
    if bf16:
        return _near_sum_bf16(np.float32(s))
    return _near_sum_f16(np.float32(s))


@kernel(inline=True)
def _redo16(flat, dst, src, width, tab, flags, words, slot, bf16):
    """The flagged values of the block at ``flat[dst:][:width]`` (its flags in ``slot``;
    the first pass left each flagged value as it was), each the float64 sum rounded once.
    The flags are read a word of eight at a time, and only ``j < width`` (the blocks of a
    sum share one width; a narrower one would leave a wider one's flags past its end)."""
    for q in range((width + 7) // 8):
        if words[slot, q] == 0:
            continue
        for j in range(8 * q, min(width, 8 * q + 8)):
            if flags[slot, j] != 0:
                v = np.float64(to_f32(flat[dst + j], bf16)) + tab[src + j]
                flat[dst + j] = from_f64(v, bf16)


@kernel()
def grid_add16_kernel(w0, w1, view, grid, blocks, tab, tab32, n_workers, bf16, tile_bytes, ahead):
    """The addition of :func:`~.fractional.grid_kernel` on 16-bit bits (see
    :func:`_grid_add16_work`); ``bf16`` None (float16) or True (bfloat16): numba prunes the
    branch before it compiles, so each dtype is a specialization of its own, compiled on
    first use, whose loops hold one conversion."""
    if bf16 is not None:
        return _grid_add16_work(
            w0, w1, view, grid, blocks, tab, tab32, n_workers, True, tile_bytes, ahead
        )
    return _grid_add16_work(
        w0, w1, view, grid, blocks, tab, tab32, n_workers, False, tile_bytes, ahead
    )


@kernel(inline=True)
def _grid_add16_work(w0, w1, view, grid, blocks, tab, tab32, n_workers, bf16, tile_bytes, ahead):
    """The body of :func:`grid_add16_kernel` for one dtype: ``tab`` float64, ``tab32`` the
    same values rounded to float32.

    Each element gets the bits of the float64 sum rounded once (:func:`from_f64` of
    ``float64(x) + t``), which contiguous channels reach in float32 but for a few: ``s =
    x + t32``, rounded into 16 bits by :func:`from_f32`. ``x`` is exact in float32 and
    ``|t| <= 1``: ``t32`` is within 2**-25 of ``t``, ``s`` within ``2**-24 |x + t32|`` of
    ``x + t32`` (2**-150 in float32's subnormal range, far below the floor), and the
    float64 sum ``v`` within ``2**-53 |v|`` of ``x + t``, so ``|s - v| < SUM_BOUND * (0.5 +
    |s|)``. Where :func:`near_sum16` does not flag ``s``, ``s`` and ``v`` lie strictly
    between the same two 16-bit midpoints and round to the same bits. A flagged element
    keeps x in the first pass and takes the float64 sum in a second pass over its block,
    made after the next block's first pass, so that the float64 table lines it reads
    (only there: memory or L3) arrive meanwhile: about 1 in 900 values of a float16 sum
    with x ~ N(0, 1) (scratch count, a 1024 x 512 grid of 1024 channels), fewer in
    bfloat16, and every sum below the floor.

    The first pass reads half the table bytes of a float64 one and converts less; it
    prefetches x ahead (:mod:`.prefetch`: without it the loop waits on memory), and runs
    with 512-bit vectors (:mod:`.vectors`: its rounding test is what costs). 1 GiB of
    float16 on a 1024 x 512 grid, 2 threads: 231-315 ms in float64 alone, 109-123 ms with
    the float32 pass, 99-102 ms with 512-bit vectors (bfloat16 124-131, then 98-105 ms;
    ``bench/grids.py``, README "Large grids").
    """
    wide_vectors()  # the first pass's rounding test: half the vectors with 512 bits
    flat, off0, sb, sr, sc, nb, nr = view
    coords = np.zeros(grid.shape[0], dtype=np.int64)
    widest = 0
    for k in range(blocks.shape[0]):
        widest = max(widest, blocks[k, 2])
    nw = (widest + 7) // 8
    # two slots (this block, and the one before, whose flagged values are redone after
    # this block's first pass): one byte per channel in whole words of 8
    flags = np.zeros((2, 8 * nw), dtype=np.uint8)
    words = flags.view(np.uint64)
    for w in range(w0, w1):
        i0, i1 = worker_items(nb * nr, w, n_workers)
        spans = grid_spans(i0, i1, grid, blocks, tab.itemsize, tile_bytes)
        cur = 0
        pend = False  # the other slot holds a block with flagged values
        p_dst = p_src = p_width = 0
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
                    # contiguous channels (unsigned indices: the loop vectorizes); the
                    # lines ``ahead`` elements on prefetched (0: none): the hardware
                    # prefetchers alone leave this loop waiting on memory (see .prefetch)
                    d0 = np.uint64(dst)
                    s0 = np.uint64(src)
                    if ahead > 0:
                        prefetch_lines(flat, dst + ahead, width)
                    for j in range(np.uint64(width)):
                        u = flat[d0 + j]
                        v32 = to_f32(u, bf16) + tab32[s0 + j]
                        f = near_sum16(v32, bf16)
                        flags[cur, j] = f
                        # a flagged value keeps x, which its second pass reads
                        flat[d0 + j] = u if f != 0 else from_f32(v32, bf16)
                    # the float64 table lines of this block's flagged values, fetched
                    # while the next block's first pass runs (that table is read only
                    # here: from memory or L3, not from the caches the first pass uses)
                    nq = (width + 7) // 8
                    seen = np.uint64(0)
                    for q in range(nq):  # a vectorised reduction: most blocks stop here
                        seen |= words[cur, q]
                    has = seen != 0
                    if has:
                        for q in range(nq):
                            if words[cur, q] != 0:
                                prefetch_lines(tab, src + 8 * q, 8)
                    if pend:
                        _redo16(flat, p_dst, p_src, p_width, tab, flags, words, 1 - cur, bf16)
                    pend = has
                    if has:
                        p_dst, p_src, p_width = dst, src, width
                        cur = 1 - cur
        if pend:
            _redo16(flat, p_dst, p_src, p_width, tab, flags, words, 1 - cur, bf16)
    return 0.0
