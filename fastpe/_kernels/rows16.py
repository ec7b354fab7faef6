"""The float32 pass of 16-bit table rows: the pairs of a row in groups of ``LANES``, folded
in float32 and rounded into 16 bits where that gives the float64 fold's bits. Private.

16-bit tables take their bits from the float64 fold of each value (anchor and step-table
row by angle addition, :func:`~.angles.add_angle`) rounded once (:func:`~.half.from_f64`).
A 16-bit value keeps 11 (float16) or 8 (bfloat16) significant bits, so a float32 fold,
twice the lanes a vector, rounds to the same bits everywhere but near the 16-bit type's
midpoints; :func:`row_pass` folds in float32 and flags the pairs with a value near one,
which the kernels fold again in float64 (:func:`~.half.table16_kernel`, and
:func:`~.half.table16_blocks_kernel` for rows of a few pairs, blocks of positions as one
row of the pass).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import kernel
from .turn import multiply_add
from .vec16 import (
    F32,
    HW_BF16,
    I1,
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

# float32 bits of the window around 16-bit midpoints (see row_pass)
EPS_BITS = 0x34800000  # 2**-22
# 16-bit values of one cache line: one streaming store of row_pass's trail
TRAIL_VALUES = 32


def row_pass(
    bf16: bool,
    hw_bf16: bool,
    interleaved: bool,
    eps_bits: int = EPS_BITS,
    chunk: int = 1,
    trail: bool = False,
):
    """An intrinsic ``row(flat, at, anc, dig, t, pend) -> int64``: the float32 pass over the
    groups of ``LANES`` pairs of one 16-bit table row at ``flat[at:]`` (raw bits),
    in the layout ``interleaved`` (else the half layout), ``bf16`` (else float16; then only
    CPUs with hardware float16 conversions: ``HW_HALF``), ``hw_bf16``: bfloat16 rounded by
    the CPU's instruction (:func:`~.vec16._hardware_bf16`).

    ``dig`` (R, 2, n) float32: the step table (``cos``, ``sin``; the float64 values
    rounded to float32), of which row ``t`` is used, ``n`` the row's pairs; ``anc`` (2, L)
    float32: the row's anchor (``sin``, ``cos`` of its group's angles, rounded likewise),
    pair ``k``'s at ``k % L``: ``L`` is ``n``, or a multiple of ``LANES`` that divides
    ``n`` (anchors that repeat along the row). Each group computes in float32
    ``s = fma(sa, tc, ca * ts)`` and ``c = fma(ca, tc, -(sa * ts))`` (without fused
    multiply-add ``sa tc + ca ts`` and ``ca tc - sa ts``), rounds both into
    16 bits and stores them; a group with a value that may round otherwise than the
    float64 fold ``v`` is listed in ``pend`` (the return value counts them), its flagged
    pairs to be written again from the float64 fold. A last group of fewer pairs loads
    and stores only those (masked).

    Why an unflagged ``s`` rounds as ``v`` (the float64 fold ``S T + C U``; the same for
    ``c``): the four inputs are within ``2**-24`` of their float64 values relative to each
    (rounded to nearest), so ``sa tc`` is within ``2**-23 (1 + 2**-24) |S T|`` of ``S T``,
    and ``ca ts`` of ``C U`` likewise; the product ``ca * ts`` and the fused add round once
    each, within ``2**-24`` of their results. With ``|S T| + |C U| <= 1`` (Cauchy-Schwarz:
    both pairs are a sine and a cosine) and so ``|C U| <= (1 + |s|) / 2``, ``|s - v| <=
    2**-23 + 2**-25 + 1.5 * 2**-24 |s|`` and a little (the float64 fold's own few float64 ulps):
    at most ``2**-22`` and a little, below ``0.82 * 2**-22`` where ``|s| < 1/2``. On a CPU
    without fused multiply-add (:func:`~.turn.multiply_add`) both products are rounded, then
    the sum: ``2**-23 + 2**-24 (|S T| + |C U|) + 2**-24 |s|``, at most ``3 * 2**-24 +
    2**-24 |s|``, the same ``2**-22`` and a little at most, below ``0.875 * 2**-22`` where
    ``|s| < 1/2``; the argument below holds for either.

    The test: ``mid``, ``s``'s bits with those below the 16-bit type's last one set to
    ``100...0``, is the midpoint of ``s``'s 16-bit interval (rounding goes one way below
    it, the other above); ``s - mid`` is exact (one binade). A value with ``|s - mid| <=
    2**-22`` is flagged. Otherwise ``s`` is more than ``2**-22`` from ``mid`` (by a float32
    ulp of ``s``, at least ``2**-24`` where the bound exceeds ``2**-22``) and ``v`` lies on
    its side. The other midpoints around ``s`` are half a 16-bit ulp away or more, but for
    the one below its binade's lower edge ``2**e`` (the binade below has half the
    spacing): ``2**(e - 12)`` (float16) or ``2**(e - 9)`` (bfloat16) below it, so at least
    ``2**-22`` from ``s`` where ``e >= -10`` (float16) or ``e >= -13`` (bfloat16), and there
    the bound is below ``0.82 * 2**-22`` (0.875 unfused). In the binades below, the same
    compare flags every value: ``|s - mid|`` is at most half a 16-bit ulp of the binade,
    ``2**(e - 11)`` or ``2**(e - 8)``, at most ``2**-22`` there. So every value below
    ``2**-10`` (float16) or ``2**-13`` (bfloat16) is flagged, with no test of its own:
    float16's subnormals (whose midpoints have other bits), bfloat16's fix-up below
    ``2**-20``, zero (and
    bfloat16 rounding by the CPU's instruction, which reads float32 subnormals as zero,
    never writes one). About 0.4% of float16 values and 0.05% of bfloat16 ones are
    flagged (the window is an absolute ``2**-22``, so each binade below 1 holds about as
    many): a group in eight or in sixty. A floor tested apart (a magnitude compare per
    value) made the pass 1.35x slower (one thread, rows in L1, scratch).

    ``chunk`` (with ``interleaved``; a power of 2 up to ``LANES``): the group's values
    stored as ``chunk`` sines then their ``chunk`` cosines, and so on (1: interleaved):
    the half layout's rows of ``chunk`` pairs, back to back.

    The group's number goes to ``pend[count]`` in the high 32 bits, its flagged pairs in
    the low 16 (bit ``i``: the sine or the cosine of its pair ``i``), written for every
    group and counted only where a flag is set: no branch, which one float16 group in
    eight would mispredict (float16 tables 1.4x slower with one). ``eps_bits``: the
    window's float32 bits (tests: a narrower one leaves values that round otherwise).

    ``trail``: the intrinsic is ``row(flat, at, anc, dig, t, pend, out, src, dst, lines)``
    and also streams ``lines`` whole lines (``TRAIL_VALUES`` elements each) from
    ``flat[src:]`` to ``out[dst:]``, one before each whole group and the rest after the
    row's last group:
    the table rows computed before this one, written out to memory by streaming stores
    while this row is computed (see :func:`~.half.table16_kernel`'s ``trail``), so that
    the stores drain while the core computes instead of stalling it a row at a time.
    ``out[dst]`` must start a line (the store faults otherwise); ``flat[src:]`` is read
    unaligned and must not overlap the row written.
    """

    def codegen(context, builder, signature, args):
        vi32, vf32 = vec(I32), vec(F32)
        fa = context.make_array(signature.args[0])(context, builder, args[0])
        aa = context.make_array(signature.args[2])(context, builder, args[2])
        da = context.make_array(signature.args[3])(context, builder, args[3])
        pa = context.make_array(signature.args[5])(context, builder, args[5])
        n = builder.extract_value(da.shape, 2)  # the row's pairs
        period = builder.extract_value(aa.shape, 1)  # the anchors' (n, or repeated)
        x0 = builder.gep(fa.data, [args[1]], inbounds=True)
        d0 = builder.gep(da.data, [builder.mul(args[4], builder.add(n, n))], inbounds=True)
        count = cgutils.alloca_once_value(builder, ir.Constant(I64, 0))
        a_at = cgutils.alloca_once_value(builder, ir.Constant(I64, 0))  # the group's anchors
        low, pattern = (0xFFFF, 0x8000) if bf16 else (0x1FFF, 0x1000)

        def load(base, k, width, off, lanes):
            """``base[k * width + off:][:LANES]`` (``lanes``: only those, else 0)."""
            at = builder.add(builder.mul(ir.Constant(I64, k), width), off)
            p = builder.bitcast(builder.gep(base, [at], inbounds=True), vf32.as_pointer())
            if lanes is None:
                return builder.load(p, align=4)
            fn = masked(builder, "load", vf32)
            return builder.call(fn, [p, ir.Constant(I32, 4), lanes, splat(F32, 0.0)])

        def store(v, off, lanes):
            """``v`` (i16 elements) to ``flat[at + off:]`` (``lanes``: only those)."""
            p = builder.bitcast(builder.gep(x0, [off], inbounds=True), v.type.as_pointer())
            if lanes is None:
                builder.store(v, p, align=2)
            else:
                builder.call(masked(builder, "store", v.type), [v, p, ir.Constant(I32, 2), lanes])

        def risky(v):
            """The i1 vector of the values of ``v`` that may round otherwise."""
            u = builder.bitcast(v, vi32)
            # the midpoint of v's 16-bit interval: v's bits, those below the 16-bit
            # type's last one set to the pattern; their difference is exact (one binade)
            mid = builder.or_(builder.and_(u, splat(I32, ~low & 0xFFFFFFFF)), splat(I32, pattern))
            d = builder.fsub(v, builder.bitcast(mid, vf32))
            # magnitudes compared as the integers of their bits (same order)
            dist = builder.and_(builder.bitcast(d, vi32), splat(I32, 0x7FFFFFFF))
            return builder.icmp_unsigned("<=", dist, splat(I32, eps_bits))

        def group(g, lanes):
            """Group ``g``; ``lanes`` (an i1 vector) None: all of its pairs."""
            off = builder.mul(g, ir.Constant(I64, LANES))
            # the anchors from a0, the group's offset modulo their period: a count that
            # starts again at the period, not a division
            a0 = builder.load(a_at)
            sa, ca = load(aa.data, 0, period, a0, lanes), load(aa.data, 1, period, a0, lanes)
            tc, ts = load(d0, 0, n, off, lanes), load(d0, 1, n, off, lanes)
            a1 = builder.add(a0, ir.Constant(I64, LANES))
            wrap = builder.icmp_unsigned("==", a1, period)
            builder.store(builder.select(wrap, ir.Constant(I64, 0), a1), a_at)
            s = multiply_add(builder, sa, tc, builder.fmul(ca, ts))
            c = multiply_add(builder, ca, tc, builder.fneg(builder.fmul(sa, ts)))
            fs, fc = risky(s), risky(c)
            if lanes is not None:  # (the others are zeros: flagged, not counted)
                fs, fc = builder.and_(fs, lanes), builder.and_(fc, lanes)
            rs = round16(builder, s, bf16, hw_bf16, keep_nan=False)
            rc = round16(builder, c, bf16, hw_bf16, keep_nan=False)
            if interleaved:  # (s0, c0, s1, c1, ...), or chunks: one vector of 2 * LANES
                order = [
                    b * chunk + k + half * LANES
                    for b in range(LANES // chunk)
                    for half in (0, 1)
                    for k in range(chunk)
                ]
                mix = builder.shuffle_vector(rs, rc, ir.Constant(vec(I32, 2 * LANES), order))
                if lanes is not None:  # each pair's mask for both its values
                    twice = ir.Constant(vec(I32, 2 * LANES), [k % LANES for k in order])
                    lanes = builder.shuffle_vector(lanes, lanes, twice)
                store(mix, builder.add(off, off), lanes)
            else:
                store(rs, off, lanes)
                store(rc, builder.add(off, n), lanes)
            # the group's number and its flagged pairs (a sine or a cosine)
            flags = builder.zext(builder.bitcast(builder.or_(fs, fc), I16), I64)
            # written whether or not flagged, counted only if so: no branch, which
            # one group in eight of a float16 row would mispredict
            hit = builder.icmp_unsigned("!=", flags, ir.Constant(I64, 0))
            entry = builder.or_(builder.shl(g, ir.Constant(I64, 32)), flags)
            append(builder, entry, pa.data, count, builder.zext(hit, I64))

        if not trail:
            each_group(builder, n, group)
            return builder.load(count)
        oa = context.make_array(signature.args[6])(context, builder, args[6])
        src, dst, lines = args[7], args[8], args[9]
        line = vec(I64, TRAIL_VALUES // 4)  # a line's bytes
        nontemporal = builder.module.add_metadata([ir.Constant(I32, 1)])

        def stream(k):
            """Line ``k`` of the trail, streamed."""
            at = builder.mul(k, ir.Constant(I64, TRAIL_VALUES))
            p = builder.gep(fa.data, [builder.add(src, at)], inbounds=True)
            v = builder.load(builder.bitcast(p, line.as_pointer()), align=2)
            q = builder.gep(oa.data, [builder.add(dst, at)], inbounds=True)
            st = builder.store(v, builder.bitcast(q, line.as_pointer()), align=TRAIL_VALUES * 2)
            st.set_metadata("nontemporal", nontemporal)

        def before(g):
            with builder.if_then(builder.icmp_signed("<", g, lines), likely=True):
                stream(g)

        each_group(builder, n, group, before)
        # the trail's lines beyond the row's whole groups
        whole = builder.udiv(n, ir.Constant(I64, LANES))
        rest = builder.sub(lines, whole)
        with builder.if_then(builder.icmp_signed(">", rest, ir.Constant(I64, 0))):
            with cgutils.for_range(builder, rest) as loop:
                stream(builder.add(whole, loop.index))
        return builder.load(count)

    def typed(flat, at, anc, dig, t, pend, more):
        # what the code above assumes: contiguous 16-bit bits, C-ordered float32 tables of
        # 2 and 3 dimensions, int64 offsets and group numbers (and with ``trail`` 16-bit
        # bits to stream into, int64 counts); anything else is a typing error
        return (
            c_array(flat, types.uint16, 1)
            and c_array(anc, types.float32, 2)
            and c_array(dig, types.float32, 3)
            and c_array(pend, types.int64, 1)
            and at == types.int64
            and t == types.int64
            and (
                not trail
                or (c_array(more[0], types.uint16, 1) and all(m == types.int64 for m in more[1:]))
            )
        )

    if trail:

        @intrinsic
        def row_trail(typingctx, flat, at, anc, dig, t, pend, out, src, dst, lines):
            if not typed(flat, at, anc, dig, t, pend, (out, src, dst, lines)):
                return None
            return types.int64(flat, at, anc, dig, t, pend, out, src, dst, lines), codegen

        return row_trail

    @intrinsic
    def row(typingctx, flat, at, anc, dig, t, pend):
        if not typed(flat, at, anc, dig, t, pend, ()):
            return None
        return types.int64(flat, at, anc, dig, t, pend), codegen

    return row


_row_f16_i = row_pass(False, False, True)
_row_f16_h = row_pass(False, False, False)
_row_bf16_i = row_pass(True, HW_BF16, True)
_row_bf16_h = row_pass(True, HW_BF16, False)
# the same, streaming the rows before (table16_kernel's trail)
_trail_f16_i = row_pass(False, False, True, trail=True)
_trail_f16_h = row_pass(False, False, False, trail=True)
_trail_bf16_i = row_pass(True, HW_BF16, True, trail=True)
_trail_bf16_h = row_pass(True, HW_BF16, False, trail=True)
# half-layout rows of 2, 4 and 8 pairs back to back, as one row (table16_blocks_kernel)
_row_f16_c2 = row_pass(False, False, True, chunk=2)
_row_f16_c4 = row_pass(False, False, True, chunk=4)
_row_f16_c8 = row_pass(False, False, True, chunk=8)
_row_bf16_c2 = row_pass(True, HW_BF16, True, chunk=2)
_row_bf16_c4 = row_pass(True, HW_BF16, True, chunk=4)
_row_bf16_c8 = row_pass(True, HW_BF16, True, chunk=8)


@kernel(inline=True)
def row16(flat, at, anc, dig, t, pend, bf16, interleaved):
    """:func:`row_pass` for one dtype and layout, the kernel's flags ``bf16`` and
    ``interleaved`` (None or ``ON``: numba prunes on them, so a specialization types one
    variant, not four): the groups of the row at ``flat[at:]`` it leaves in ``pend``, their
    count returned."""
    if bf16 is not None:
        if interleaved is not None:
            return _row_bf16_i(flat, at, anc, dig, t, pend)
        return _row_bf16_h(flat, at, anc, dig, t, pend)
    if interleaved is not None:
        return _row_f16_i(flat, at, anc, dig, t, pend)
    return _row_f16_h(flat, at, anc, dig, t, pend)


@kernel(inline=True)
def row16_trail(flat, at, anc, dig, t, pend, out, src, dst, lines, bf16, interleaved):
    """:func:`row16` with :func:`row_pass`'s ``trail``: ``lines`` whole lines of
    ``flat[src:]`` streamed to ``out[dst:]`` while the row is computed."""
    if bf16 is not None:
        if interleaved is not None:
            return _trail_bf16_i(flat, at, anc, dig, t, pend, out, src, dst, lines)
        return _trail_bf16_h(flat, at, anc, dig, t, pend, out, src, dst, lines)
    if interleaved is not None:
        return _trail_f16_i(flat, at, anc, dig, t, pend, out, src, dst, lines)
    return _trail_f16_h(flat, at, anc, dig, t, pend, out, src, dst, lines)


@intrinsic
def trailing_zeros(typingctx, x):
    """The number of zero bits below the lowest set bit of the int64 ``x`` (64 for 0):
    LLVM's ``cttz``, one instruction."""
    if x != types.int64:
        return None

    def codegen(context, builder, signature, args):
        # (declared by hand: llvmlite's declare_intrinsic leaves out the second argument)
        fnty = ir.FunctionType(I64, [I64, I1])
        cttz = cgutils.get_or_insert_function(builder.module, fnty, "llvm.cttz.i64")
        return builder.call(cttz, [args[0], ir.Constant(I1, 0)])

    return types.int64(types.int64), codegen


@kernel(inline=True)
def rows16(flat, at, anc, dig, t, pend, bf16, chunk):
    """:func:`row_pass` over half-layout rows of ``chunk`` pairs (2, 4 or 8) back to back
    (``bf16``: the kernel's flag, None or ``ON``; ``chunk`` chosen at run time). Any
    ``chunk`` but 2 or 4 takes the variant of 8: the engine sends no other here."""
    if bf16 is not None:
        if chunk == 2:
            return _row_bf16_c2(flat, at, anc, dig, t, pend)
        if chunk == 4:
            return _row_bf16_c4(flat, at, anc, dig, t, pend)
        return _row_bf16_c8(flat, at, anc, dig, t, pend)
    if chunk == 2:
        return _row_f16_c2(flat, at, anc, dig, t, pend)
    if chunk == 4:
        return _row_f16_c4(flat, at, anc, dig, t, pend)
    return _row_f16_c8(flat, at, anc, dig, t, pend)
