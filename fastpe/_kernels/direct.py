"""Table rows computed straight into memory by streaming stores, a line at a time (or
into the cache by plain stores, for tables below the engine's streaming bound:
``_engine.plain_direct``). Private.

A large float32 or float64 table (:func:`~.tables.table_kernel`, streamed) computes each
row into a buffer in L1 and copies it out with streaming stores (:mod:`.stream`): two
passes over the row's bytes. On a core that cannot both compute and stream at full speed
(the rocketlake host: a thread computes a GiB of float32 rows into L1 in 49-57 ms and
streams one in about 48, and needs their sum), the copy's loads and stores are work the
computation waits for. :func:`row_pass` computes a row a line of values at a time and
stores each line with a streaming store as it comes, so that the stores drain while the
next lines are computed. :func:`table_direct_kernel` writes tables that way, with the
values of :func:`~.tables.table_kernel` (the same float64 operations, rounded once to
float32 and fixed up, or kept as float64), bit for bit. ``bench/modes.py --mode direct
--runs 3`` on the rocketlake host (on and off in one process): the float32 interleaved
table 1.38-1.61x faster than the copy, the half layout 1.34-1.35x, float64 1.30x (README,
"Table rows computed straight into memory").

The same pass adds rows to x (``add``, :func:`add_direct_kernel`): float32
``add_sinusoidal`` rows whose table row serves one row of x, each line of x loaded, the
line's values added, stored back (plain stores, at any size), where
:func:`~.tables.add_kernel` left the interleaved rows' strided loads and stores of x to
LLVM's vectoriser (``bench/modes.py --mode direct --runs 3``, two invocations: 1 x 262144
x 1024 float32 1.35-1.42x; rows of the half layout, prefetched before, gain less, 0.98-1.20x
over sizes in a scratch sweep). Since 9468ad3 each line prefetches the line 2 KiB ahead
(4 KiB in large arrays on some CPUs: ``fastpe._engine.line_ahead_bytes``):
1.57-1.58x at 57e64b3; the half layout's one batch row 38-41% -> 70-74% of the yardstick
(scratch A/B, README "float32 sums a line at a time, prefetched").

RoPE rows whose cos/sin serve that row alone (one head; positions per batch row, or one
batch row) are rotated the same way (:func:`rope_pass`, called by
:func:`~.rope.rope_kernel`): each line of x loaded, rotated by the cos/sin just computed,
stored back, and the line 2 KiB ahead prefetched (or 4 KiB, as above), where the cache's
path computed an item's cos/sin into a cache, then rotated its rows, waiting on memory
after computing (README, "RoPE rows rotated as their cos/sin are computed").

The row's values go to whole, aligned lines. The line that a row shares with the row
before (a table that does not start on a line: NumPy's large arrays start 16 bytes past
one) is completed in a 64-byte ``carry`` slot: the row before leaves its last values
there, the row merges its first ones and streams the whole line. Only a run's first and
last rows (and every row of a table whose rows are apart) store their partial lines with
plain (masked) stores, as :func:`~.stream.stream_carry` does for copied rows.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

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
    position,
    rec_continues,
    rec_load,
    rec_step,
    update_anchors,
    worker_items,
)
from .prefetch import hint_line
from .stream import _address, stream_fence
from .tables import FIXUP_THRESHOLD, _fix_small_row
from .vec16 import F32, I32, I64, c_array, masked, splat, vec

F64 = ir.DoubleType()
LINE_F32 = 16  # float32 values of a 64-byte line (the fix-up's rows)


def row_pass(
    interleaved: bool, step: bool, add: bool = False, ahead: bool = True, stream: bool = True
):
    """An intrinsic ``row(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail) -> int64``
    (with ``add``, ``row(..., tail, ahead)``: see below):
    the float32 or float64 table row of ``n`` pairs at ``flat[at:]``
    (unit-stride channels, interleaved or in the half layout), its whole lines stored by
    streaming stores (``stream`` False: by plain stores, for tables that stay in cache,
    each line first prefetched for writing, :func:`~.prefetch.hint_line`, so that the
    line is asked for as the store issues, not when it leaves the store buffer; the same
    lines, the same carry).

    Pair ``i``'s values are, in float64, ``s = a_s[k, i] * tc[t, i] + a_c[k, i] * ts[t, i]``
    and ``c = a_c[k, i] * tc[t, i] - a_s[k, i] * ts[t, i]`` (:func:`~.angles.add_angle`'s
    operations, no fused multiply-add), each rounded once to float32 (or kept); ``step``:
    ``s`` and ``c`` are also written back to ``a_s[k]``, ``a_c[k]`` (the recurrence's
    state). float32: returns 1 where a value's float32 is below ``FIXUP_THRESHOLD`` in
    magnitude (the caller then writes the row again, those values recomputed exactly:
    :func:`_fix_row`), else 0: the least magnitude of the row's lines kept as the integers
    of their bits, two vector operations a line (the float64 test of
    :func:`~.tables._small_pair`, which flags more rows, took three on twice the lanes);
    float64 (no fix-up): 0.

    What the caller guarantees: ``flat[at]`` aligned to its element's size, at an even
    element of its line where ``interleaved``; ``n`` a multiple of the pairs of a group
    (interleaved: half a line's values, 8 or 4; half layout: a line's, 16 or 8), so that
    the half layout's two halves start at the same place in their lines; ``carry`` two
    lines of ``flat``'s dtype (a 64-byte aligned slot lies in them).
    ``head``: the values before the row's first whole line complete a line whose first
    values the row before left in ``carry`` (then the whole line is streamed), else they
    are stored alone (masked plain stores); ``tail``: the values after the row's last whole
    line go to ``carry`` for the next row, else to ``flat`` (masked plain stores). A half-layout
    row's line between its halves is completed within the call.

    ``add`` (float32 only): the values are added to the row of ``flat`` instead, as
    :func:`~.tables._rec_add` adds them (rounded to float32, then ``x + v``): each whole
    line loaded, added and stored by plain stores, the partial lines by masked loads and
    stores of the row's elements alone; ``carry``, ``head`` and ``tail`` are not used, and
    it returns 0 (sums take no fix-up). Each whole line first prefetches the line
    ``ahead`` bytes on (an int64 argument, ``.prefetch.AHEAD_BYTES`` or more: see
    ``fastpe._engine.line_ahead_bytes``; with the factory's ``ahead`` False, no prefetch and
    the argument unused), as :func:`rope_pass` does: the hardware's prefetch alone left
    the sums waiting on memory after each row's arithmetic (1 GiB, 2 threads, % of the
    ``a *= s`` yardstick, scratch A/B, two invocations each: one batch row of 4 KiB rows
    55-59% -> 69-76% interleaved, 38-41% -> 70-74% in the half layout; 64 batch rows of
    512 bytes with spread offsets 60-66% -> 77-82%).
    """

    def typed(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail):
        """Whether the arguments are those the code is written for, and ``double``."""
        double = isinstance(flat, types.Array) and flat.dtype == types.float64
        out = types.float64 if double else types.float32
        ok = (
            c_array(flat, out, 1)
            and c_array(a_s, types.float64, 2)
            and c_array(a_c, types.float64, 2)
            and c_array(tc, types.float64, 2)
            and c_array(ts, types.float64, 2)
            and c_array(carry, out, 1)
            and all(x == types.int64 for x in (at, k, t))
            and head == types.boolean
            and tail == types.boolean
        )
        return ok, double

    if add:

        @intrinsic
        def add_row(typingctx, flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail, dist):
            ok, double = typed(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
            if not ok or dist != types.int64:
                return None
            sig = types.int64(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail, dist)
            return sig, _codegen(interleaved, step, double, add, ahead, stream)

        return add_row

    @intrinsic
    def row(typingctx, flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail):
        ok, double = typed(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
        if not ok:
            return None
        sig = types.int64(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
        return sig, _codegen(interleaved, step, double, add, ahead, stream)

    return row


def _codegen(
    interleaved: bool, step: bool, double: bool, add: bool = False, ahead=True, stream=True
):
    """The code of :func:`row_pass`'s intrinsic for float32 or (``double``) float64 rows."""
    nontemporal = stream  # (``stream`` names the store of a whole line below)
    elem, size = (F64, 8) if double else (F32, 4)
    per_line = 64 // size  # values of a line
    lanes = per_line // 2 if interleaved else per_line  # pairs of a group: a line of values
    vi64 = vec(I64, lanes)
    # a half-layout float32 line's 16 pairs computed as two groups of 8, one after the
    # other: as one group of 16 float64 pairs, with 256-bit vectors (AVX2), they held more
    # registers than the CPU has and LLVM spilled in the row loop; on the `znver3` host
    # the float32 half-layout table of 1 GiB then took the direct pass slower than
    # table_kernel's rows and copy (bench/modes.py --mode direct, off / on: median 0.85,
    # 0.77-0.93, over five runs; with the groups of 8, 1.22, 0.93-1.35, over twelve). The
    # half layout's float32 sums (add) take the same groups, and so do CPUs with AVX-512:
    # unmeasured there
    split = not interleaved and not double
    line = vec(elem, per_line)

    def codegen(context, builder, signature, args):
        sig = signature.args
        fa, sa_arr, ca_arr, tc_arr, ts_arr, cy = (
            context.make_array(sig[i])(context, builder, args[i]) for i in (0, 2, 3, 5, 6, 8)
        )
        at_, k_, t_, head_, tail_ = args[1], args[4], args[7], args[9], args[10]
        dist = args[11] if add else None  # bytes from a line to the line it prefetches
        n = builder.extract_value(tc_arr.shape, 1)
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        x0 = builder.gep(fa.data, [at_])  # the row's first value
        # inputs of pair 0: rows k of the state or anchors, t of the step tables
        s_in = builder.gep(sa_arr.data, [builder.mul(k_, n)])
        c_in = builder.gep(ca_arr.data, [builder.mul(k_, n)])
        tc_in = builder.gep(tc_arr.data, [builder.mul(t_, n)])
        ts_in = builder.gep(ts_arr.data, [builder.mul(t_, n)])
        # the row's place in its line: m values of the line before it lie before the
        # row, h of the row's (q pairs) complete that line
        e = builder.udiv(builder.ptrtoint(x0, I64), c64(size))
        m = builder.and_(e, c64(per_line - 1))
        h = builder.and_(builder.sub(c64(per_line), m), c64(per_line - 1))
        q = builder.lshr(h, c64(1)) if interleaved else h
        first = builder.gep(x0, [h])  # the row's first whole line
        if not interleaved:
            first_c = builder.gep(x0, [builder.add(n, h)])  # the cosines'
        # the carry slot: 64-byte aligned within carry's 32 values
        ca = builder.ptrtoint(cy.data, I64)
        slot = builder.inttoptr(builder.and_(builder.add(ca, c64(63)), c64(~63)), line.as_pointer())
        # float32 rows: the least magnitude of the row's values so far, as the integers of
        # their bits (the same order), a line's lanes
        vline32 = vec(I32, per_line)
        least = cgutils.alloca_once_value(builder, splat(I32, 0x7FFFFFFF, per_line))
        one = builder.module.add_metadata([ir.Constant(I32, 1)])

        def spread(x):
            """The i64 ``x`` in every lane."""
            v = builder.insert_element(ir.Constant(vi64, None), x, ir.Constant(I32, 0))
            return builder.shuffle_vector(v, v, ir.Constant(vec(I32, lanes), [0] * lanes))

        def pairs_mask(start):
            """The lanes of the group from pair ``start`` (an i64, maybe negative) that
            are pairs of the row (unsigned: a negative pair is past any n)."""
            idx = builder.add(spread(start), ir.Constant(vi64, list(range(lanes))))
            return builder.icmp_unsigned("<", idx, spread(n))

        def load(base, start, mask, w):
            vw = vec(F64, w)
            p = builder.bitcast(builder.gep(base, [start]), vw.as_pointer())
            if mask is None:
                return builder.load(p, align=8)
            fn = masked(builder, "load", vw)
            return builder.call(fn, [p, ir.Constant(I32, 8), mask, splat(F64, 0.0, w)])

        def part(start, mask, w):
            """:func:`group`'s values of the ``w`` pairs from ``start``."""
            sa, ca_, tcv, tsv = (load(b, start, mask, w) for b in (s_in, c_in, tc_in, ts_in))
            s = builder.fadd(builder.fmul(sa, tcv), builder.fmul(ca_, tsv))
            c = builder.fsub(builder.fmul(ca_, tcv), builder.fmul(sa, tsv))
            if step:
                vw = vec(F64, w)
                for v, base in ((s, s_in), (c, c_in)):
                    p = builder.bitcast(builder.gep(base, [start]), vw.as_pointer())
                    if mask is None:
                        builder.store(v, p, align=8)
                    else:
                        fn = masked(builder, "store", vw)
                        builder.call(fn, [v, p, ir.Constant(I32, 8), mask])
            if double:
                return s, c
            return builder.fptrunc(s, vec(elem, w)), builder.fptrunc(c, vec(elem, w))

        def group(start, mask):
            """The values (float32, or float64 where ``double``) of the ``lanes`` pairs
            from ``start`` (``mask``: only the row's; None: all of them): (sines,
            cosines), the state written back (``step``); :func:`note` takes their lines'
            least magnitude. A half-layout float32 line's 16 pairs are computed as two
            groups of 8 (``split``)."""
            if not split:
                return part(start, mask, lanes)
            w = lanes // 2
            got = []
            for j in range(2):
                mj = None
                if mask is not None:
                    sel = ir.Constant(vec(I32, w), list(range(j * w, (j + 1) * w)))
                    mj = builder.shuffle_vector(mask, mask, sel)
                got.append(part(builder.add(start, c64(j * w)), mj, w))
            cat = ir.Constant(vec(I32, lanes), list(range(lanes)))
            return tuple(builder.shuffle_vector(got[0][i], got[1][i], cat) for i in (0, 1))

        def note(v, mask):
            """A line of float32 values ``v`` (``mask``: only those lanes) into the row's
            least magnitude (tables only: sums take no fix-up)."""
            if double or add:
                return
            mag = builder.and_(builder.bitcast(v, vline32), splat(I32, 0x7FFFFFFF, per_line))
            if mask is not None:
                mag = builder.select(mask, mag, splat(I32, 0x7FFFFFFF, per_line))
            was = builder.load(least)
            less = builder.icmp_unsigned("<", mag, was)
            builder.store(builder.select(less, mag, was), least)

        def values(s, c, mask):
            """A line of values (and its mask) from a group's (interleaved: the pairs'
            sines and cosines side by side)."""
            order = [j for i in range(lanes) for j in (i, i + lanes)]
            v = builder.shuffle_vector(s, c, ir.Constant(vec(I32, 2 * lanes), order))
            if mask is None:
                return v, None
            twice = ir.Constant(vec(I32, 2 * lanes), [i // 2 for i in range(2 * lanes)])
            return v, builder.shuffle_vector(mask, mask, twice)

        def stream(v, p):
            if add:  # (the line ``dist`` bytes on prefetched first, with ``ahead``)
                if ahead:
                    i8 = ir.IntType(8).as_pointer()
                    hint_line(builder, builder.gep(builder.bitcast(p, i8), [dist]))
                builder.store(builder.fadd(builder.load(p, align=64), v), p, align=64)
                return
            if not nontemporal:  # (the line asked for, for writing, as the store issues)
                hint_line(builder, builder.bitcast(p, ir.IntType(8).as_pointer()))
            st = builder.store(v, p, align=64)
            if nontemporal:
                st.set_metadata("nontemporal", one)

        def partial(v, p, mask):
            if add:
                fl = masked(builder, "load", line)
                x = builder.call(fl, [p, ir.Constant(I32, size), mask, splat(elem, 0.0, per_line)])
                v = builder.fadd(x, v)
            fn = masked(builder, "store", line)
            builder.call(fn, [v, p, ir.Constant(I32, size), mask])

        def at_line(base, g):
            return builder.bitcast(
                builder.gep(base, [builder.mul(g, c64(per_line))]), line.as_pointer()
            )

        def head_line(v, mask, p):
            """The line before the row's first whole one: merged in carry and streamed
            (``head``), else the row's values alone."""
            if add:
                partial(v, p, mask)
                return
            with builder.if_else(head_) as (merged, alone):
                with merged:
                    partial(v, slot, mask)
                    stream(builder.load(slot, align=64), p)
                with alone:
                    partial(v, p, mask)

        def tail_line(v, mask, p):
            """The line after the row's last whole one: to carry (``tail``), else its
            values alone."""
            if add:
                partial(v, p, mask)
                return
            with builder.if_else(tail_) as (kept, alone):
                with kept:
                    partial(v, slot, mask)
                with alone:
                    partial(v, p, mask)

        whole = builder.udiv(builder.sub(n, q), c64(lanes))
        with cgutils.for_range(builder, whole) as loop:
            g = loop.index
            s, c = group(builder.add(q, builder.mul(g, c64(lanes))), None)
            if interleaved:
                v = values(s, c, None)[0]
                note(v, None)
                stream(v, at_line(first, g))
            else:
                note(s, None)
                note(c, None)
                stream(s, at_line(first, g))
                stream(c, at_line(first_c, g))
        # the partial lines: pairs before q and after the whole groups (both or none,
        # n being a multiple of the group)
        with builder.if_then(builder.icmp_unsigned("!=", q, c64(0))):
            before = builder.sub(q, c64(lanes))
            mh = pairs_mask(before)
            s_h, c_h = group(before, mh)
            after = builder.add(q, builder.mul(whole, c64(lanes)))
            mt = pairs_mask(after)
            s_t, c_t = group(after, mt)
            if interleaved:
                v, vm = values(s_h, c_h, mh)
                note(v, vm)
                head_line(v, vm, at_line(first, c64(-1)))
                v, vm = values(s_t, c_t, mt)
                note(v, vm)
                tail_line(v, vm, at_line(first, whole))
            else:
                for v, vm in ((s_h, mh), (c_h, mh), (s_t, mt), (c_t, mt)):
                    note(v, vm)
                head_line(s_h, mh, at_line(first, c64(-1)))
                # the line between the halves: the last sines, then the first cosines
                stream(builder.select(mt, s_t, c_h), at_line(first, whole))
                tail_line(c_t, mt, at_line(first_c, whole))
        if double or add:
            return c64(0)
        red = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(I32, [vline32]),
            f"llvm.vector.reduce.umin.v{per_line}i32",
        )
        floor = ir.Constant(I32, int(np.float32(FIXUP_THRESHOLD).view(np.uint32)))
        low = builder.icmp_unsigned("<", builder.call(red, [builder.load(least)]), floor)
        return builder.zext(low, I64)

    return codegen


def rope_pass(interleaved: bool):
    """An intrinsic ``rot(flat, at, a_s, a_c, k, tc, ts, t, sin_mult, cos_mult, carry,
    head, tail, ahead)``: the float32 or float64 row of ``n`` pairs at ``flat[at:]`` (unit-stride
    channels, interleaved or in the half layout) rotated in place by its cos/sin computed
    as it goes, a line of values at a time, with no cos/sin cache between them.

    Pair ``i``'s cos/sin are :func:`~.angles.fold_into_cache`'s values, in its operations
    (no fused multiply-add): ``s = a_s[k, i] * tc[t, i] + a_c[k, i] * ts[t, i]``,
    ``c = a_c[k, i] * tc[t, i] - a_s[k, i] * ts[t, i]``; float64 rows pull them back onto
    the unit circle (``f = 1.5 - 0.5 (s s + c c)``, then ``s f``, ``c f``); then times
    ``sin_mult``/``cos_mult``, rounded once to x's dtype. The rotation is
    :func:`~.rope._rotate_interleaved`'s and :func:`~.rope._rotate_half`'s (written out by
    :mod:`.turn`): ``x1' = fma(x1, c, -(x2 s))``, ``x2' = fma(x2, c, x1 s)``, so the bits
    are those of the cache's path. Each line is prefetched ``ahead`` bytes ahead (an
    int64, ``.prefetch.AHEAD_BYTES`` or more: ``fastpe._engine.line_ahead_bytes``).

    What the caller guarantees: as :func:`row_pass` (``flat[at]`` aligned to its element's
    size, at an even element of its line where ``interleaved``; ``n`` a multiple of a
    group's pairs: interleaved 8 (float32) or 4 (float64), half layout 16 or 8; ``carry``
    two lines of ``flat``'s dtype). Whole lines are loaded and stored as such. A row that
    does not start on a line shares its first line with the row before and its last with
    the row after; ``head``: the row before (just rotated, back to back) left its values of
    that first line in ``carry``, and the row stores the merged line whole; ``tail``: the row
    leaves its values of its last line in ``carry`` for the row after; else those lines'
    values are loaded and stored alone (masked). The row's first and last partial pairs are
    computed as one group, and the half layout's line between its halves is completed
    within the call. Scratch A/B, 1 GiB, spread offsets: the carry lifted the float64 half
    layout from 65-69% of the scale yardstick to 80-82% and left float32 interleaved rows
    as they were; rows 16 bytes past a line (NumPy's large arrays) still trail rows on a
    line (float32 interleaved: 69-72% against 80-85%).
    """

    @intrinsic
    def rot(
        typingctx, flat, at, a_s, a_c, k, tc, ts, t, sin_mult, cos_mult, carry, head, tail, ahead
    ):
        double = isinstance(flat, types.Array) and flat.dtype == types.float64
        out = types.float64 if double else types.float32
        if not (
            c_array(flat, out, 1)
            and all(c_array(x, types.float64, 2) for x in (a_s, a_c, tc, ts))
            and c_array(carry, out, 1)
            and all(x == types.int64 for x in (at, k, t, ahead))
            and sin_mult == types.float64
            and cos_mult == types.float64
            and head == types.boolean
            and tail == types.boolean
        ):
            return None
        sig = types.none(
            flat, at, a_s, a_c, k, tc, ts, t, sin_mult, cos_mult, carry, head, tail, ahead
        )
        return sig, _rope_codegen(interleaved, double)

    return rot


def _rope_codegen(interleaved: bool, double: bool):
    """The code of :func:`rope_pass`'s intrinsic for float32 or (``double``) float64 rows."""
    elem, size = (F64, 8) if double else (F32, 4)
    per_line = 64 // size  # values of a line
    lanes = per_line // 2 if interleaved else per_line  # pairs of a group
    vf64, vout, vi64 = vec(F64, lanes), vec(elem, lanes), vec(I64, lanes)
    line = vec(elem, per_line)  # (the half layout's groups: vout, the same type)
    idx = lambda v: ir.Constant(vec(I32, len(v)), v)  # noqa: E731

    def codegen(context, builder, signature, args):
        sig = signature.args
        fa, sa_arr, ca_arr, tc_arr, ts_arr, cy = (
            context.make_array(sig[i])(context, builder, args[i]) for i in (0, 2, 3, 5, 6, 10)
        )
        at_, k_, t_, smul, cmul, head_, tail_ = (args[i] for i in (1, 4, 7, 8, 9, 11, 12))
        dist = args[13]  # bytes from a value to the line it prefetches
        n = builder.extract_value(tc_arr.shape, 1)
        c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
        x0 = builder.gep(fa.data, [at_])
        s_in = builder.gep(sa_arr.data, [builder.mul(k_, n)])
        c_in = builder.gep(ca_arr.data, [builder.mul(k_, n)])
        tc_in = builder.gep(tc_arr.data, [builder.mul(t_, n)])
        ts_in = builder.gep(ts_arr.data, [builder.mul(t_, n)])
        # pairs before the row's first whole line (see row_pass)
        e = builder.udiv(builder.ptrtoint(x0, I64), c64(size))
        m = builder.and_(e, c64(per_line - 1))
        h = builder.and_(builder.sub(c64(per_line), m), c64(per_line - 1))
        q = builder.lshr(h, c64(1)) if interleaved else h
        # the carry slot: 64-byte aligned within carry's two lines
        ca = builder.ptrtoint(cy.data, I64)
        slot = builder.inttoptr(builder.and_(builder.add(ca, c64(63)), c64(~63)), line.as_pointer())
        fma = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(line, [line] * 3),
            f"llvm.fma.v{per_line}{'f64' if double else 'f32'}",
        )

        def spread(x, ty=I64):
            v = builder.insert_element(ir.Constant(vec(ty, lanes), None), x, ir.Constant(I32, 0))
            return builder.shuffle_vector(v, v, idx([0] * lanes))

        def pairs_mask(start):
            at = builder.add(spread(start), ir.Constant(vi64, list(range(lanes))))
            return builder.icmp_unsigned("<", at, spread(n))

        def ptr(at, ty):
            return builder.bitcast(builder.gep(x0, [at]), ty.as_pointer())

        def load(p, mask, ty, align=64, rest=None):
            """``ty`` from ``p`` (``mask``: those lanes only, the others from ``rest``, or
            zero)."""
            if mask is None:
                return builder.load(p, align=align)
            fn = masked(builder, "load", ty)
            width = ir.Constant(I32, 8 if ty.element == F64 else 4)
            rest = splat(ty.element, 0.0, ty.count) if rest is None else rest
            return builder.call(fn, [p, width, mask, rest])

        def store(v, p, mask):
            if mask is None:
                builder.store(v, p, align=64)
            else:
                fn = masked(builder, "store", v.type)
                builder.call(fn, [v, p, ir.Constant(I32, size), mask])

        i8 = ir.IntType(8).as_pointer()

        def ahead(start):
            """Hint the lines ``dist`` bytes past the values from pair ``start``."""
            at = builder.mul(start, c64(2)) if interleaved else start
            for off in (c64(0),) if interleaved else (c64(0), n):
                p = builder.bitcast(builder.gep(x0, [builder.add(at, off)]), i8)
                hint_line(builder, builder.gep(p, [dist]))

        def cos_sin(start, mask, start2=None, mask2=None):
            """The x-dtype (sines, cosines) of the ``lanes`` pairs from ``start`` (``mask``:
            only the row's; with ``start2``, the lanes of ``mask2`` are pairs from
            ``start2``: the row's last pairs and its first ones, in one group)."""
            ahead(start)
            if start2 is not None:
                ahead(start2)

            def pairs(b):
                at = lambda i: builder.bitcast(builder.gep(b, [i]), vf64.as_pointer())  # noqa: E731
                if start2 is None:
                    return load(at(start), mask, vf64, 8)
                return load(at(start), mask, vf64, 8, load(at(start2), mask2, vf64, 8))

            sa, ca_, tcv, tsv = (pairs(b) for b in (s_in, c_in, tc_in, ts_in))
            s = builder.fadd(builder.fmul(sa, tcv), builder.fmul(ca_, tsv))
            c = builder.fsub(builder.fmul(ca_, tcv), builder.fmul(sa, tsv))
            if double:
                r = builder.fadd(builder.fmul(s, s), builder.fmul(c, c))
                f = builder.fsub(splat(F64, 1.5, lanes), builder.fmul(splat(F64, 0.5, lanes), r))
                s, c = builder.fmul(s, f), builder.fmul(c, f)
            s = builder.fmul(s, spread(smul, F64))
            c = builder.fmul(c, spread(cmul, F64))
            if double:
                return s, c
            return builder.fptrunc(s, vout), builder.fptrunc(c, vout)

        def turn_line(v, s, c):
            """An interleaved line's pairs rotated: ``fma(v, c, swapped(v) (-s, s))``.
            (``x2 (-s)``, not ``-(x2 s)``: LLVM turns the cache's path ``fma(x1, c,
            -(x2 s))`` into a fused multiply-subtract, which keeps a NaN's sign as this
            does; a negation after the product would flip it.)"""
            w = builder.shuffle_vector(v, v, idx([i ^ 1 for i in range(per_line)]))
            cc = builder.shuffle_vector(c, c, idx([i // 2 for i in range(per_line)]))
            order = [j for i in range(lanes) for j in (i, i + lanes)]
            ss = builder.shuffle_vector(builder.fneg(s), s, idx(order))
            return builder.call(fma, [v, cc, builder.fmul(w, ss)])

        def turn_halves(x1, x2, s, c):
            """Half-split pairs rotated: ``fma(x1, c, -(x2 s))``, ``fma(x2, c, x1 s)``."""
            y1 = builder.call(fma, [x1, c, builder.fneg(builder.fmul(x2, s))])
            return y1, builder.call(fma, [x2, c, builder.fmul(x1, s)])

        def values_mask(mask):
            """A group's pair mask as a mask of its line's values (interleaved)."""
            return builder.shuffle_vector(mask, mask, idx([i // 2 for i in range(per_line)]))

        def first_line(y, p, mask):
            """The row's first line: merged with the row before's values in carry and stored
            whole (``head``), else its own values alone."""
            with builder.if_else(head_) as (merged, alone):
                with merged:
                    store(builder.select(mask, y, builder.load(slot, align=64)), p, None)
                with alone:
                    store(y, p, mask)

        def last_line(y, p, mask):
            """The row's last line: its values left in carry (``tail``), else stored alone."""
            with builder.if_else(tail_) as (kept, alone):
                with kept:
                    store(y, slot, None)
                with alone:
                    store(y, p, mask)

        whole = builder.udiv(builder.sub(n, q), c64(lanes))
        with cgutils.for_range(builder, whole) as loop:
            start = builder.add(q, builder.mul(loop.index, c64(lanes)))
            s, c = cos_sin(start, None)
            if interleaved:
                p = ptr(builder.mul(start, c64(2)), line)
                store(turn_line(load(p, None, line), s, c), p, None)
            else:
                p1, p2 = ptr(start, line), ptr(builder.add(start, n), line)
                y1, y2 = turn_halves(load(p1, None, line), load(p2, None, line), s, c)
                store(y1, p1, None)
                store(y2, p2, None)
        # the partial lines: pairs before q and after the whole groups (both or none, n
        # being a multiple of the group); their masks are each other's complement
        with builder.if_then(builder.icmp_unsigned("!=", q, c64(0))):
            before = builder.sub(q, c64(lanes))
            after = builder.add(q, builder.mul(whole, c64(lanes)))
            # one group of both: lane l holds the row's pair after + l where l is in mt,
            # else before + l (the same lanes as in their own groups)
            mh, mt = pairs_mask(before), pairs_mask(after)
            s, c = cos_sin(after, mt, before, mh)
            if interleaved:
                vh, vt = values_mask(mh), values_mask(mt)
                ph, pt = (
                    ptr(builder.mul(before, c64(2)), line),
                    ptr(builder.mul(after, c64(2)), line),
                )
                y = turn_line(load(pt, vt, line, 64, load(ph, vh, line)), s, c)
                first_line(y, ph, vh)
                last_line(y, pt, vt)
            else:
                # the first sines' line (with the row before's), the line between the
                # halves (the last sines, then the first cosines), the last cosines' line
                # (with the row after's)
                ph, pm = ptr(before, line), ptr(after, line)
                pt = ptr(builder.add(after, n), line)
                xm = load(pm, None, line)
                x1 = load(ph, mh, line, 64, xm)  # (the last sines from xm)
                x2 = load(pt, mt, line, 64, xm)  # (the first cosines from xm)
                y1, y2 = turn_halves(x1, x2, s, c)
                store(builder.select(mt, y1, y2), pm, None)
                first_line(y1, ph, mh)
                last_line(y2, pt, mt)
        return context.get_dummy_value()

    return codegen


_rope_i = rope_pass(True)
_rope_h = rope_pass(False)


_row_i_fold = row_pass(True, False)
_row_i_step = row_pass(True, True)
_row_h_fold = row_pass(False, False)
_row_h_step = row_pass(False, True)
# the same by plain stores (tables below the engine's streaming bound: _engine.plain_direct)
_plain_i_fold = row_pass(True, False, stream=False)
_plain_i_step = row_pass(True, True, stream=False)
_plain_h_fold = row_pass(False, False, stream=False)
_plain_h_step = row_pass(False, True, stream=False)
# float32 rows added to x (add_sinusoidal), stepped by the recurrence
_add_i_step = row_pass(True, True, add=True)
_add_h_step = row_pass(False, True, add=True)
# (no prefetch: Zen 5 below the last-level cache, see fastpe._engine.prefetch_fits)
_add_i_here = row_pass(True, True, add=True, ahead=False)
_add_h_here = row_pass(False, True, add=True, ahead=False)


@kernel(inline=True)
def _row(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail, interleaved, stepped, stream):
    """:func:`row_pass` for the kernel's flags ``interleaved``, ``stepped`` and ``stream``
    (None or ``ON``: numba prunes on them, so a specialization types one variant)."""
    if stream is None:
        if interleaved is not None:
            if stepped is not None:
                return _plain_i_step(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
            return _plain_i_fold(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
        if stepped is not None:
            return _plain_h_step(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
        return _plain_h_fold(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
    if interleaved is not None:
        if stepped is not None:
            return _row_i_step(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
        return _row_i_fold(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
    if stepped is not None:
        return _row_h_step(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)
    return _row_h_fold(flat, at, a_s, a_c, k, tc, ts, t, carry, head, tail)


@kernel()
def _fix_row(flat, base, row, carry, tail, interleaved, p, a_s, a_c, k, tc, ts, t, stepped, wh, wl):
    """A float32 row :func:`row_pass` flagged, written again as
    :func:`~.tables.table_kernel` writes it: its float64 values (the stepped state, or
    folded again) rounded into ``row``, the values under ``FIXUP_THRESHOLD`` recomputed
    exactly (:func:`~.tables._fix_small_row`), then stored over the pass's values (after a
    fence: plain stores after the streaming ones, where streamed), those after the row's
    last whole line into ``carry`` where the next row completes that line (``tail``). A
    call, not inlined: few rows take it."""
    n = tc.shape[1]
    for i in range(n):
        if stepped is not None:
            sv, cv = a_s[k, i], a_c[k, i]
        else:
            sv, cv = add_angle(a_s[k, i], a_c[k, i], tc[t, i], ts[t, i])
        if interleaved is not None:
            row[2 * i] = sv
            row[2 * i + 1] = cv
        else:
            row[i] = sv
            row[n + i] = cv
    _fix_small_row(row, 0, 1, interleaved, p, wh, wl)
    stream_fence()
    e = _address(flat, base) // 4  # the row's first value, in values from address 0
    end = 2 * n
    if tail:  # the values after the last whole line: in carry's slot, where the line's are
        end = (e + 2 * n) // LINE_F32 * LINE_F32 - e
        slot = ((64 - _address(carry, 0) % 64) % 64) // 4
        for j in range(end, 2 * n):
            carry[slot + (e + j) % LINE_F32] = row[j]
    for j in range(end):
        flat[base + j] = row[j]


@kernel()
def _first_pair(flat, at, n, interleaved):
    """The pair that starts the first whole line of the row at ``flat[at]``."""
    per_line = 64 // flat.itemsize
    m = (_address(flat, at) // flat.itemsize) % per_line
    h = (per_line - m) % per_line
    return h // 2 if interleaved is not None else h


@kernel()
def _placed(rows, n, q):
    """An uninitialised float64 ``(rows, n)`` array whose column ``q`` lies on a 64-byte
    line in its first row (in every row where ``n`` is a multiple of 8; float64 interleaved
    rows of a multiple of 4 pairs alternate between a line and its middle, where their
    32-byte loads still do not straddle two lines)."""
    buf = np.empty(rows * n + 8)
    o = ((64 - (_address(buf, 0) + 8 * q) % 64) % 64) // 8
    return buf[o : o + rows * n].reshape((rows, n))


@kernel()
def _placed_copy(a, rows, q):
    """A copy of the first ``rows`` rows of the float64 ``a``, placed as :func:`_placed`
    places it."""
    out = _placed(rows, a.shape[1], q)
    for r in range(rows):  # (loops: a slice assignment took seconds to compile)
        for i in range(a.shape[1]):
            out[r, i] = a[r, i]
    return out


@kernel()
def table_direct_kernel(w0, w1, view, pos, freqs, split, interleaved, stepped, fixup, stream):
    """Write the float32 or float64 table into the ``(1, ns, 1, 2*npairs)`` ``view``
    (unit-stride channels) a line at a time by streaming stores (:func:`row_pass`;
    ``stream`` None: by plain stores, for tables below the engine's streaming bound): the
    bits of :func:`~.tables.table_kernel` with ``stepped`` ``ON`` (rows stepped by the
    recurrence: float32 rows, ``fastpe._engine.table_stepped``) or None (rows folded from
    their anchors),
    ``fixup`` ``ON`` (float32) or None (float64), ``interleaved`` ``ON`` or None. Each
    worker's rows are one run where they lie back to back (``carry``). The engine sends
    only what :func:`row_pass` assumes (``_engine.direct_rows``)."""
    flat, off0, _, ss, _, _, _, ns, _, n, _ = view
    values, given, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    # the float64 inputs placed so that the pair each row's first whole line starts with
    # lies on a line (the rows' place in their lines is the first row's where rows are a
    # whole number of lines apart): row_pass's loads then do not straddle two lines
    q = _first_pair(flat, off0, n, interleaved)
    anc_s = _placed(LEVELS, n, q)
    anc_c = _placed(LEVELS, n, q)
    # (the rows row_pass reads: the first digit's, RADIX of them; the other levels, which
    # the anchors and the recurrence's restart read, stay where they are)
    tcq = _placed_copy(tc, RADIX, q)
    tsq = _placed_copy(ts, RADIX, q)
    # the recurrence's state, as rows of 2-D arrays for row_pass and as 1-D views for
    # the restart (made once here: a view per row would cost reference counts)
    st_s = _placed(1, n, q)
    st_c = _placed(1, n, q)
    cur_s = st_s[0]
    cur_c = st_c[0]
    row = np.empty(2 * n, dtype=np.float32)  # a float32 row written again (_fix_row)
    carry = np.empty(128 // flat.itemsize, dtype=flat.dtype)  # two lines
    run = ss == 2 * n
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        prev = NO_KEY
        i0, i1 = worker_items(n_chunks, w, n_workers)
        s_begin = i0 * chunk
        s_end = min(ns, i1 * chunk)
        for si in range(s_begin, s_end):
            p = position(values, given, offsets, 0, si)
            base = off0 + si * ss
            head = run and si > s_begin
            tail = run and si < s_end - 1
            t = p & DIGIT
            if stepped is not None:
                if rec_continues(p, prev):
                    if p - prev > 1:
                        rec_step(cur_s, cur_c, tc, ts, p - prev - 1)
                    t = STEP1
                else:  # the restart of rec_load's docstring, written out
                    if keys[LAST] != (p >> BITS):
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    rec_load(anc_s, anc_c, cur_s, cur_c)
                    if t != 0:
                        rec_step(cur_s, cur_c, tc, ts, t - 1)
                        t = STEP1
                small = _row(
                    flat, base, st_s, st_c, 0, tcq, tsq, t, carry, head, tail, interleaved,
                    stepped, stream,
                )  # fmt: skip
                if fixup is not None:  # (pruned for float64: no call compiled)
                    if small:
                        _fix_row(
                            flat, base, row, carry, tail, interleaved, float(p), st_s, st_c, 0,
                            tc, ts, t, stepped, wh, wl,
                        )  # fmt: skip
                prev = p
            else:
                if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                    if keys[LAST - 1] == (p >> (2 * BITS)):
                        anchor_step(anc_s, anc_c, tc, ts, p, keys)
                    else:
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                small = _row(
                    flat, base, anc_s, anc_c, LAST, tcq, tsq, t, carry, head, tail, interleaved,
                    stepped, stream,
                )  # fmt: skip
                if fixup is not None:
                    if small:
                        _fix_row(
                            flat, base, row, carry, tail, interleaved, float(p), anc_s, anc_c,
                            LAST, tc, ts, t, stepped, wh, wl,
                        )  # fmt: skip
        if stream is not None:
            stream_fence()
    return 0.0


@kernel()
def add_direct_kernel(w0, w1, view, pos, freqs, split, interleaved, ahead):
    """Add the float32 table to the ``(nb, ns, 1, 2*npairs)`` ``view`` in place (unit-stride
    channels; each table row serving one row of x: positions per batch row, or one batch
    row), a line at a time (:func:`row_pass` with ``add``: each line of x loaded, the
    line's values added in float32, stored back by plain stores): the bits of
    :func:`~.tables.add_kernel`'s ``once`` walk (the recurrence's state rounded to float32,
    then added), in its work split and order of positions. The engine sends only what
    :func:`row_pass` assumes (``_engine.direct_rows``). ``ahead`` (an int64 or None, a
    specialization each): each line prefetches the line ``ahead`` bytes on
    (``_engine.line_ahead_bytes``), or none (Zen 5 in arrays under its last-level cache:
    ``_engine.prefetch_fits``)."""
    flat, off0, sb, ss, _, _, nb, ns, _, n, _ = view
    values, given, offsets, per_batch = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    q = _first_pair(flat, off0, n, interleaved)  # the inputs placed (see table_direct_kernel)
    anc_s = _placed(LEVELS, n, q)
    anc_c = _placed(LEVELS, n, q)
    tcq = _placed_copy(tc, STEP1 + 1, q)  # the rows row_pass reads: 0 and STEP1
    tsq = _placed_copy(ts, STEP1 + 1, q)
    st_s = _placed(1, n, q)
    st_c = _placed(1, n, q)
    cur_s = st_s[0]
    cur_c = st_c[0]
    carry = np.empty(2 * LINE_F32, dtype=np.float32)  # (row_pass's argument: unused here)
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        prev = NO_KEY
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            b0 = bo if per_batch else 0
            for si in range(s0, min(ns, s0 + chunk)):
                p = position(values, given, offsets, bo, si)
                t = p & DIGIT
                if rec_continues(p, prev):
                    if p - prev > 1:
                        rec_step(cur_s, cur_c, tc, ts, p - prev - 1)
                    t = STEP1
                else:  # the restart of rec_load's docstring, written out
                    if keys[LAST] != (p >> BITS):
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    rec_load(anc_s, anc_c, cur_s, cur_c)
                    if t != 0:
                        rec_step(cur_s, cur_c, tc, ts, t - 1)
                        t = STEP1
                prev = p
                base = off0 + b0 * sb + si * ss
                if interleaved is not None and ahead is not None:
                    _add_i_step(flat, base, st_s, st_c, 0, tcq, tsq, t, carry, False, False, ahead)
                elif interleaved is not None:
                    _add_i_here(flat, base, st_s, st_c, 0, tcq, tsq, t, carry, False, False, 0)
                elif ahead is not None:
                    _add_h_step(flat, base, st_s, st_c, 0, tcq, tsq, t, carry, False, False, ahead)
                else:
                    _add_h_here(flat, base, st_s, st_c, 0, tcq, tsq, t, carry, False, False, 0)
    return 0.0
