"""16-bit arrays (float16 and bfloat16): rotation, tables and additions.

numba has no bfloat16 type and no float16 arithmetic in nopython mode, so these kernels
see the array as its raw ``uint16`` bits and convert each element by hand: to float32
exactly on load (:func:`to_f32`), and back with one rounding to nearest even on store
(:func:`from_f32`; NaN stays NaN, overflow becomes infinity; :func:`finite_from_f32` for
table values, a rotation's results and sums; bfloat16 interleaved pairs rotated a 32-bit
word at a time). Values are computed in float32 from the exact float64 cos/sin of
:mod:`.angles`; table values are rounded straight from float64 (:func:`from_f64`: round
to odd into float32, then to nearest even into 16 bits, which is one correct rounding of the
float64 value; the table kernel gets the same bits from a float32 fold (:mod:`.rows16`)
except for the values that pass flags, which it writes again by :func:`from_f64`, and the
lanes kernels by rounding to nearest into float32 and then into 16 bits, except for the
values :func:`round16_risky` flags).

The kernels take ``bf16`` None (float16) or ``ON`` (bfloat16), and their layout as None or
``ON`` (:func:`rope16_kernel`, :func:`table16_kernel` and :func:`add16_kernel`:
``interleaved``; :func:`table16_lanes_kernel` and :func:`table16_blocks_kernel`: ``half``;
:func:`add16_lanes_kernel`: ``interleaved``): one specialization each, compiled on first
use (:mod:`.flag`); the inlined helpers take ``bf16`` as the constant True or False;
:func:`rope16_kernel`'s ``short`` and ``prefetch`` None or ``ON``) and otherwise the
records of :mod:`.args`, as the float32/float64 kernels do. They live in a module of their
own, imported on the first 16-bit call, so float32/float64 code and its cold start are
unchanged.
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .._config import kernel
from .angles import (
    BITS,
    DIGIT,
    LAST,
    LEVELS,
    NO_KEY,
    RADIX,
    add_angle,
    anchor_step,
    anchors_at,
    fill_short,
    fold_into_cache,
    position,
    sincos_exact,
    update_anchors,
    worker_items,
)
from .args import HALF, INTERLEAVED
from .prefetch import prefetch_ahead, prefetch_lines
from .rows16 import (
    TRAIL_VALUES,
    _row_bf16_i,
    _row_f16_i,
    row16,
    row16_trail,
    rows16,
    trailing_zeros,
)
from .stream import LINE, STREAM_BYTES, _address, _pointer, _stream32, stream_fence, stream_row
from .tables import (
    FIXUP_THRESHOLD,
    _prefetch_block,
    _small,
    flagged_rows,
    lanes_groups,
    lanes_rows,
    lanes_scratch,
    round32_risky,
)
from .turn import turn_first, turn_second
from .vec16 import LANES
from .vectors import wide_vectors

F16_SUBNORMAL = 2.0**-24  # float16's smallest subnormal: the unit of its subnormals
F16_NORMAL = 2.0**-14  # float16's smallest normal value


def _hardware_half() -> bool:
    """Whether the CPU converts float16 <-> float32 itself (x86 F16C, every aarch64).

    Then LLVM turns the conversions of :func:`to_f32` and :func:`from_f32` into single
    vector instructions (exact widening; rounding to nearest even, NaN kept, overflow to
    infinity: the results of the integer code below, which other CPUs run).
    """
    import platform

    from llvmlite import binding

    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    try:
        return "+f16c" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:  # no feature list: the integer code
        return False


HW_HALF = _hardware_half()


@intrinsic
def _bf2f(typingctx, u):
    """bfloat16 bits as a float32: the bits shifted into the high half (32-bit operations;
    numba's own uint32 arithmetic widens to 64 bits, which halves the vector lanes)."""
    if u != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        wide = builder.shl(builder.zext(args[0], i32), ir.Constant(i32, 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(types.uint16), codegen


def _bf16_high(builder, f):
    """IR: the float32 ``f`` rounded to nearest even into bfloat16 bits, as the high half of
    an i32 (``u + 0x7FFF + odd``, ``odd`` the last bit kept; the low half is left over)."""
    i32 = ir.IntType(32)
    u = builder.bitcast(f, i32)
    odd = builder.and_(builder.lshr(u, ir.Constant(i32, 16)), ir.Constant(i32, 1))
    return builder.add(builder.add(u, ir.Constant(i32, 0x7FFF)), odd)


def _bf16_rounding(keep_nan):
    """An intrinsic: a float32 rounded to nearest even into bfloat16 bits, in 32-bit
    operations. ``keep_nan``: a NaN stays a NaN (quiet), by one select; else for finite
    values only (a NaN's payload could carry into its sign)."""

    @intrinsic
    def round_bf16(typingctx, f):
        if f != types.float32:
            return None

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)

            def c(v):
                return ir.Constant(i32, v)

            nearest = builder.lshr(_bf16_high(builder, args[0]), c(16))
            if keep_nan:
                high = builder.lshr(builder.bitcast(args[0], i32), c(16))
                quiet = builder.or_(high, c(0x40))
                nan = builder.fcmp_unordered("uno", args[0], args[0])  # one compare
                nearest = builder.select(nan, quiet, nearest)
            return builder.trunc(nearest, ir.IntType(16))

        return types.uint16(types.float32), codegen

    return round_bf16


_f2bf = _bf16_rounding(True)  # float32 -> bfloat16 bits, NaN kept
_f2bf_finite = _bf16_rounding(False)  # the same for finite values, no select


# bfloat16 pairs as one 32-bit word (:func:`_rotate16`): the first value in its low half,
# which is where a little-endian CPU, every target numba compiles for, loads it from
PAIR_WORDS = sys.byteorder == "little"


@intrinsic
def _pair_load(typingctx, flat, j):
    """The 16-bit values ``flat[j]`` and ``flat[j + 1]`` of a 1-D uint16 array as one
    uint32, ``flat[j]`` in its low half (on little-endian CPUs: ``PAIR_WORDS``); one 32-bit
    load, said to be aligned to 2 bytes (to 1 where numba types the array as unaligned: an
    array of elements off their own alignment)."""
    if not (
        isinstance(flat, types.Array)
        and flat.dtype == types.uint16
        and flat.ndim == 1
        and isinstance(j, types.Integer)
    ):
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        word = builder.bitcast(ptr, ir.IntType(32).as_pointer())
        return builder.load(word, align=2 if signature.args[0].aligned else 1)

    return types.uint32(flat, j), codegen


@intrinsic
def _pair_store(typingctx, flat, j, u):
    """``flat[j]``, ``flat[j + 1] = `` the low and high halves of the uint32 ``u`` (one
    32-bit store, aligned as :func:`_pair_load`'s load; its order)."""
    if not (
        isinstance(flat, types.Array)
        and flat.dtype == types.uint16
        and flat.ndim == 1
        and isinstance(j, types.Integer)
        and u == types.uint32
    ):
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        word = builder.bitcast(ptr, ir.IntType(32).as_pointer())
        builder.store(args[2], word, align=2 if signature.args[0].aligned else 1)
        return context.get_dummy_value()

    return types.none(flat, j, u), codegen


@intrinsic
def _bf_pair_f32(typingctx, u, high):
    """The bfloat16 in the low (``high`` False) or high half of the uint32 ``u`` as a
    float32 (exact: its bits moved into, or kept in, the high half; 32-bit operations)."""
    if u != types.uint32 or not isinstance(high, types.BooleanLiteral):
        return None
    keep_high = high.literal_value

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        if keep_high:
            wide = builder.and_(args[0], ir.Constant(i32, 0xFFFF0000))
        else:
            wide = builder.shl(args[0], ir.Constant(i32, 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(u, high), codegen


@intrinsic
def _bf16_pair_rotated(typingctx, f1, f2):
    """The float32 results ``f1`` and ``f2`` of one rotation, each rounded to nearest even
    into bfloat16, as one uint32 (``f1`` in the low half, :func:`_pair_load`'s order):
    ``u + 0x7FFF + odd`` for both, then ``f1``'s high half shifted down and ``f2``'s kept
    in place (a shift and one bitwise select: no shuffle of 16-bit lanes). No NaN select:
    see :func:`finite_from_f32`."""
    if f1 != types.float32 or f2 != types.float32:
        return None

    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        low = builder.lshr(_bf16_high(builder, args[0]), ir.Constant(i32, 16))
        high = builder.and_(_bf16_high(builder, args[1]), ir.Constant(i32, 0xFFFF0000))
        return builder.or_(low, high)

    return types.uint32(f1, f2), codegen


@intrinsic
def _h2f(typingctx, u):
    """float16 bits as a float32 (LLVM's ``fpext half to float``)."""
    if u != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _f2h(typingctx, f):
    """float32 rounded to nearest even into float16 bits (LLVM's ``fptrunc``)."""
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _f32_bits(typingctx, x):
    """The bits of a float32 as a uint32 (a bit cast)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, u):
    """The float32 whose bits are the low 32 bits of the unsigned integer ``u`` (a bit cast).

    Any unsigned width: numba widens arithmetic on uint32 to uint64.
    """
    if not isinstance(u, types.Integer) or u.signed or u.bitwidth < 32:
        return None

    def codegen(context, builder, signature, args):
        v = args[0]
        if u.bitwidth > 32:
            v = builder.trunc(v, ir.IntType(32))
        return builder.bitcast(v, ir.FloatType())

    return types.float32(u), codegen


def _midpoint_test(low_mask, midpoint, floor_bits):
    """An intrinsic for :func:`round16_risky`: 1 (uint8) where the float32 ``f``'s bits below
    the 16-bit type's last one are exactly a midpoint (``bits & low_mask == midpoint``), or
    its magnitude is at most the float32 with bits ``floor_bits``; else 0. 32-bit
    operations only."""

    @intrinsic
    def test(typingctx, f):
        if f != types.float32:
            return None

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            u = builder.bitcast(args[0], i32)
            tie = builder.icmp_unsigned(
                "==", builder.and_(u, ir.Constant(i32, low_mask)), ir.Constant(i32, midpoint)
            )
            mag = builder.and_(u, ir.Constant(i32, 0x7FFFFFFF))  # >= 0 as a signed int
            low = builder.icmp_signed("<", mag, ir.Constant(i32, floor_bits + 1))
            return builder.zext(builder.or_(tie, low), ir.IntType(8))

        return types.uint8(types.float32), codegen

    return test


# float32 bits of the magnitudes at or below which round16_risky flags every value
_BF16_FLOOR_BITS = int(np.float32(FIXUP_THRESHOLD).view(np.uint32))  # 2**-20
_F16_FLOOR_BITS = int(np.float32(F16_NORMAL).view(np.uint32))  # 2**-14
_risky_bf16 = _midpoint_test(0xFFFF, 0x8000, _BF16_FLOOR_BITS)
_risky_f16 = _midpoint_test(0x1FFF, 0x1000, _F16_FLOOR_BITS)


@kernel()
def round16_risky(f, bf16):
    """0 (uint8) where rounding the float32 ``f = float32(v)`` to nearest even into 16 bits
    gives :func:`from_f64`'s bits for the float64 ``v`` it was rounded from (and, for
    bfloat16, ``v`` needs no fix-up); 1 where it may not.

    Every midpoint between neighbours of the 16-bit type is a float32, and rounding to
    float32 is monotonic, so ``f`` and ``v`` lie between the same two midpoints unless
    ``f`` is one: rounding twice differs from rounding once only where ``f`` sits exactly on
    a midpoint (its bits below the 16-bit type's last one are ``100...0``; float16: in its
    normal range). Flagged besides: magnitudes at or below float16's smallest normal (below
    it the midpoints have another pattern) and, for bfloat16, at or below
    ``FIXUP_THRESHOLD`` (``|v| < FIXUP_THRESHOLD`` gives ``|f| <=`` it), the values
    recomputed exactly; zero too. Of a table's values about one in 8,192 (float16) or
    65,536 (bfloat16) sits on a midpoint.
    """
    if bf16:
        return _risky_bf16(np.float32(f))
    return _risky_f16(np.float32(f))


@kernel()
def to_f32(h, bf16):
    """The 16-bit value with bits ``h`` as a float32 (exact)."""
    if bf16:
        return _bf2f(np.uint16(h))
    if HW_HALF:
        return _h2f(np.uint16(h))
    return f16_to_f32_int(h)


@kernel()
def f16_to_f32_int(h):
    """float16 bits ``h`` as a float32, in integer arithmetic (CPUs without F16C)."""
    u = np.uint32(h)
    sign = (u & np.uint32(0x8000)) << np.uint32(16)
    e = (u >> np.uint32(10)) & np.uint32(0x1F)
    m = u & np.uint32(0x3FF)
    if e == 0:  # zero or subnormal: m units of 2**-24
        v = np.float32(m) * np.float32(F16_SUBNORMAL)
        return -v if sign else v
    if e == 31:  # infinity or NaN (payload kept)
        return _bits_f32(sign | np.uint32(0x7F800000) | (m << np.uint32(13)))
    return _bits_f32(sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13)))


@kernel()
def from_f32(f, bf16):
    """float32 ``f`` rounded to nearest even into 16 bits (NaN kept, overflow to infinity)."""
    if bf16:  # one select, no branch: the loops that call this vectorise
        return _f2bf(np.float32(f))
    if HW_HALF:
        return _f2h(np.float32(f))
    return f32_to_f16_int(f)


@kernel()
def finite_from_f32(f, bf16):
    """:func:`from_f32`'s bits for a finite ``f``, or for a NaN that arithmetic on 16-bit
    values computed: bfloat16 without the NaN select. Only for those: a float32 NaN with
    bits set below its high 16 would round into another value (``0x7FFFFFFF`` into
    ``-0.0``, a signalling ``0x7F800001`` into infinity). The results of a rotation of 16-bit
    values, or of the sum of one and a (finite) table value, take it too: every NaN such
    arithmetic computes comes out of a bfloat16 input's NaN (widened: its low 16 bits zero)
    or is the CPU's default NaN (``0x7FC00000`` or its negative): quiet, nothing set below
    its high 16 bits, so the rounding's ``+ 0x7FFF + odd`` carries nothing into it and
    leaves the bits the select would have written (tests/test_half.py)."""
    if bf16:
        return _f2bf_finite(np.float32(f))
    return from_f32(f, False)


@kernel()
def f32_to_f16_int(f):
    """float32 ``f`` rounded to nearest even into float16 bits, in integer arithmetic."""
    u = _f32_bits(np.float32(f))
    a = u & np.uint32(0x7FFFFFFF)
    sign = (u >> np.uint32(16)) & np.uint32(0x8000)
    if a >= np.uint32(0x7F800000):  # infinity or NaN (quiet, high payload bits kept)
        nan = np.uint32(0x200) | ((a >> np.uint32(13)) & np.uint32(0x3FF))
        return np.uint16(
            sign | np.uint32(0x7C00) | (nan if a > np.uint32(0x7F800000) else np.uint32(0))
        )
    if a >= np.uint32(0x477FF000):  # |f| >= 65520: rounds to infinity
        return np.uint16(sign | np.uint32(0x7C00))
    if a >= np.uint32(0x38800000):  # |f| >= 2**-14: a normal float16
        r = a - np.uint32(0x38000000)  # exponent bias 127 -> 15
        r = (r + np.uint32(0xFFF) + ((r >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
        return np.uint16(sign | r)
    # subnormal (or 2**-14 after rounding): units of 2**-24, rounded half to even (exact
    # scaling, np.rint rounds ties to even)
    q = np.rint(np.float64(_bits_f32(a)) * (1.0 / F16_SUBNORMAL))
    return np.uint16(sign | np.uint32(q))


@kernel()
def round_to_odd_f32(v):
    """float64 ``v`` rounded to float32 with ties and inexact results sent to odd.

    Rounding that float32 once more, to nearest even into 16 bits, gives the correctly
    rounded 16-bit value of ``v`` (float32 has more than 2 bits beyond either 16-bit type).
    """
    f = np.float32(v)
    back = np.float64(f)
    u = _f32_bits(f)
    # inexact (and not NaN) with an even last bit: one step to the odd neighbour, away
    # from float32's rounding; selects, no branch (the loops that call this vectorise)
    step = (back != v) & (v == v) & ((u & np.uint32(1)) == np.uint32(0))
    away = np.uint32(1) if abs(v) > abs(back) else np.uint32(0xFFFFFFFF)
    return _bits_f32(u + (away if step else np.uint32(0)))


@kernel()
def from_f64(v, bf16):
    """float64 ``v`` correctly rounded (to nearest even) into 16 bits."""
    return from_f32(round_to_odd_f32(v), bf16)


@kernel(inline=True)
def _rotate16(flat, base, sd, n, layout, s, c, k, bf16):
    """Rotate ``n`` pairs at ``flat[base + j*sd]`` by row ``k`` of float32 ``s``/``c``.

    Unit-stride channels (every RoPE row) take loops of unsigned indices, one per layout,
    which LLVM vectorises with the conversions inlined.
    """
    if sd == 1:
        b = np.uint64(base)
        if layout == INTERLEAVED and bf16 and PAIR_WORDS:
            # a pair as one 32-bit word: its two roundings packed by a shift and a select,
            # where 16-bit stores cost LLVM two shuffles and two narrowings a vector
            for i in range(n):
                j = b + np.uint64(2 * i)
                u = _pair_load(flat, j)
                x1 = _bf_pair_f32(u, False)
                x2 = _bf_pair_f32(u, True)
                r1 = turn_first(x1, x2, c[k, i], s[k, i])
                r2 = turn_second(x2, x1, c[k, i], s[k, i])
                _pair_store(flat, j, _bf16_pair_rotated(r1, r2))
        elif layout == INTERLEAVED:
            for i in range(n):
                j = b + np.uint64(2 * i)
                x1 = to_f32(flat[j], bf16)
                x2 = to_f32(flat[j + np.uint64(1)], bf16)
                flat[j] = finite_from_f32(turn_first(x1, x2, c[k, i], s[k, i]), bf16)
                flat[j + np.uint64(1)] = finite_from_f32(
                    turn_second(x2, x1, c[k, i], s[k, i]), bf16
                )
        else:
            m = np.uint64(n)
            for i in range(n):
                j = b + np.uint64(i)
                x1 = to_f32(flat[j], bf16)
                x2 = to_f32(flat[j + m], bf16)
                flat[j] = finite_from_f32(turn_first(x1, x2, c[k, i], s[k, i]), bf16)
                flat[j + m] = finite_from_f32(turn_second(x2, x1, c[k, i], s[k, i]), bf16)
        return
    for i in range(n):
        if layout == INTERLEAVED:
            j1 = base + 2 * i * sd
            j2 = j1 + sd
        else:
            j1 = base + i * sd
            j2 = base + (i + n) * sd
        x1 = to_f32(flat[j1], bf16)
        x2 = to_f32(flat[j2], bf16)
        flat[j1] = finite_from_f32(turn_first(x1, x2, c[k, i], s[k, i]), bf16)
        flat[j2] = finite_from_f32(turn_second(x2, x1, c[k, i], s[k, i]), bf16)


@kernel()
def rope16_kernel(w0, w1, view, pos, freqs, rot, split, bf16, interleaved, short, prefetch):
    """Rotate the 16-bit ``view`` (bits in ``flat``) in place: workers ``w0 .. w1 - 1``.

    The walk of :func:`~.rope.rope_kernel` (items of ``split.chunk`` sequence indices, one
    cos/sin cache per item, shared by every batch row and head); the cache is float32 (the
    exact angle's cos/sin rounded once, times the rotation's factors), the rotation runs in
    float32 and each result is rounded once into 16 bits. ``prefetch`` (None or ``ON``):
    each row's lines prefetched first (see :func:`_rotate16_block`). ``short`` (None or
    ``ON``, a specialization of its own as ``rope_kernel``'s): one head of short rows back to
    back, the cache filled a group of positions at a time (:func:`~.angles.fill_short`, the
    same values) and each batch row's block rotated as one run of pairs (interleaved pairs,
    or one pair) or row by row (half-split pairs; rows of two and three pairs written out) by
    :func:`_rotate16_runs`: per position, the fill and the row loop cost more than a row of
    a few pairs.
    """
    _, _, _, _, _, _, nb, ns, _, n, _ = view
    values, given, offsets, per_batch = pos
    wh, wl, tc, ts = freqs
    sin_mult, cos_mult, _ = rot
    chunk, _, n_workers = split
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    cache_s = np.empty((chunk, n), dtype=np.float32)
    cache_c = np.empty((chunk, n), dtype=np.float32)
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
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
                    False,
                )
                _rotate16_runs(view, b0, b1, s0, s1, cache_s, cache_c, bf16, interleaved)
                continue
            for si in range(s0, s1):
                p = position(values, given, offsets, bo, si)
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
                    si - s0,
                    sin_mult,
                    cos_mult,
                    False,
                )
            _rotate16_block(
                view,
                b0,
                b1,
                s0,
                s1,
                cache_s,
                cache_c,
                bf16,
                interleaved,
                None,
                None,
                None,
                prefetch,
            )
    return 0.0


@kernel(inline=True)
def _rotate16_half2(flat, base, rows, s, c, bf16):
    """``rows`` rows of two half-split pairs back to back at ``flat[base:]`` (4 values a
    row), row ``q`` by cos/sin ``s[0, 2q:2q + 2]``/``c[0, 2q:2q + 2]`` (the cache seen as
    one run): each row written out, so that the loop runs over rows with a constant
    stride, which LLVM vectorises (the loop over a row's two pairs ran scalar, each pair
    waiting on the one before: README, "Short half-layout rows")."""
    b = np.uint64(base)
    for q in range(np.uint64(rows)):
        j = b + np.uint64(4) * q
        k = np.uint64(2) * q
        a0 = to_f32(flat[j], bf16)
        a1 = to_f32(flat[j + np.uint64(1)], bf16)
        b0 = to_f32(flat[j + np.uint64(2)], bf16)
        b1 = to_f32(flat[j + np.uint64(3)], bf16)
        c0 = c[0, k]
        c1 = c[0, k + np.uint64(1)]
        s0 = s[0, k]
        s1 = s[0, k + np.uint64(1)]
        flat[j] = finite_from_f32(turn_first(a0, b0, c0, s0), bf16)
        flat[j + np.uint64(1)] = finite_from_f32(turn_first(a1, b1, c1, s1), bf16)
        flat[j + np.uint64(2)] = finite_from_f32(turn_second(b0, a0, c0, s0), bf16)
        flat[j + np.uint64(3)] = finite_from_f32(turn_second(b1, a1, c1, s1), bf16)


@kernel(inline=True)
def _rotate16_half3(flat, base, rows, s, c, bf16):
    """:func:`_rotate16_half2` for rows of three half-split pairs (6 values a row): the
    loop over a row's three pairs ran scalar as well (float16 16 MiB: 11 ms against 2-3 ms
    at two and four pairs)."""
    b = np.uint64(base)
    for q in range(np.uint64(rows)):
        j = b + np.uint64(6) * q
        k = np.uint64(3) * q
        a0 = to_f32(flat[j], bf16)
        a1 = to_f32(flat[j + np.uint64(1)], bf16)
        a2 = to_f32(flat[j + np.uint64(2)], bf16)
        b0 = to_f32(flat[j + np.uint64(3)], bf16)
        b1 = to_f32(flat[j + np.uint64(4)], bf16)
        b2 = to_f32(flat[j + np.uint64(5)], bf16)
        c0 = c[0, k]
        c1 = c[0, k + np.uint64(1)]
        c2 = c[0, k + np.uint64(2)]
        s0 = s[0, k]
        s1 = s[0, k + np.uint64(1)]
        s2 = s[0, k + np.uint64(2)]
        flat[j] = finite_from_f32(turn_first(a0, b0, c0, s0), bf16)
        flat[j + np.uint64(1)] = finite_from_f32(turn_first(a1, b1, c1, s1), bf16)
        flat[j + np.uint64(2)] = finite_from_f32(turn_first(a2, b2, c2, s2), bf16)
        flat[j + np.uint64(3)] = finite_from_f32(turn_second(b0, a0, c0, s0), bf16)
        flat[j + np.uint64(4)] = finite_from_f32(turn_second(b1, a1, c1, s1), bf16)
        flat[j + np.uint64(5)] = finite_from_f32(turn_second(b2, a2, c2, s2), bf16)


@kernel()
def _rotate16_runs(view, b0, b1, s0, s1, cache_s, cache_c, bf16, interleaved):
    """Short rows back to back (one head, unit-stride channels) of batch rows ``b0 .. b1 -
    1`` at ``s0 .. s1 - 1``. Interleaved pairs (or one pair): the pairs of a batch row's
    block follow each other in memory as the cache's rows do, so each block is rotated as
    one run of ``(s1 - s0) * npairs`` pairs; half-split pairs: row by row, rows of two and
    three pairs by :func:`_rotate16_half2` and :func:`_rotate16_half3` (the short loop of
    :func:`~.rope._rotate_block`); in 512-bit vectors (:mod:`.vectors`). One call per work
    item; ``bf16`` and ``interleaved`` None or ``ON`` (a specialization per dtype and
    layout, as :func:`_rotate16_block`)."""
    wide_vectors()
    if bf16 is not None:
        if interleaved is not None:
            _rotate16_runs_of(view, b0, b1, s0, s1, cache_s, cache_c, True, INTERLEAVED)
        else:
            _rotate16_runs_of(view, b0, b1, s0, s1, cache_s, cache_c, True, HALF)
    elif interleaved is not None:
        _rotate16_runs_of(view, b0, b1, s0, s1, cache_s, cache_c, False, INTERLEAVED)
    else:
        _rotate16_runs_of(view, b0, b1, s0, s1, cache_s, cache_c, False, HALF)


@kernel(inline=True)
def _rotate16_runs_of(view, b0, b1, s0, s1, cache_s, cache_c, bf16, layout):
    """The body of :func:`_rotate16_runs` for one dtype and layout (constants)."""
    flat, off0, sb, ss, _, _, _, _, _, n, _ = view
    s_run = cache_s.reshape(1, cache_s.size)
    c_run = cache_c.reshape(1, cache_c.size)
    m = (s1 - s0) * n
    for b in range(b0, b1):
        base = off0 + b * sb + s0 * ss
        if layout == INTERLEAVED:
            _rotate16(flat, base, 1, m, INTERLEAVED, s_run, c_run, 0, bf16)
        elif n == 2:  # rows of two half-split pairs: four values at a time
            _rotate16_half2(flat, base, s1 - s0, s_run, c_run, bf16)
        elif n == 3:  # three half-split pairs: six values at a time
            _rotate16_half3(flat, base, s1 - s0, s_run, c_run, bf16)
        else:  # half-split pairs: the block row by row
            for q in range(s1 - s0):
                _rotate16(flat, base + q * ss, 1, n, HALF, cache_s, cache_c, q, bf16)


@kernel()
def _rotate16_block(
    view, b0, b1, s0, s1, cache_s, cache_c, bf16, interleaved, blocks, cache_s2, cache_c2, prefetch
):
    """Rotate every head of batch rows ``b0 .. b1 - 1`` at ``s0 .. s1 - 1`` (row ``q - s0``
    of the float32 cos/sin cache for sequence index ``q``): one call per work item.

    The layout and the dtype are constants of each inlined row loop, so that the loop has
    no branch per row or element (which would cost reference counts per row and keep
    LLVM from vectorising); ``bf16`` and ``interleaved`` None or ``ON``, so that each dtype
    and layout is a specialization of its own, compiled on first use (the four row loops
    in one function: a first float16 RoPE call compiled 3.0 s against 2.2 s, README,
    "Cold start").
    ``blocks`` (None, or an int): the ``"half:k"`` layout, each
    head cut into ``blocks`` blocks of half-split pairs (see :func:`~.rope._rotate_block`).
    ``cache_s2``/``cache_c2`` (None, or float32 caches): the second channel's own cos/sin.
    512-bit vectors (:mod:`.vectors`): 4-12% faster for 1 GiB on the development machine.
    ``prefetch`` (None, or ``ON``: a specialization of its own, as the row loops compiled
    before it had it): the lines of each row prefetched before it is rotated, and the
    general layouts' positions walked in two stretches (:func:`_rotate16_rows`); None on
    Zen 5, and in arrays below the last-level cache on the CPUs of
    ``fastpe._engine._PREFETCH_BOUND_CPUS`` (``fastpe._engine.prefetch16``).
    """
    wide_vectors()
    if cache_s2 is not None:
        if bf16 is not None:
            _rotate16_split_rows(
                view, b0, b1, s0, s1, cache_s, cache_c, cache_s2, cache_c2, True, prefetch
            )
        else:
            _rotate16_split_rows(
                view, b0, b1, s0, s1, cache_s, cache_c, cache_s2, cache_c2, False, prefetch
            )
    elif blocks is not None:
        if bf16 is not None:
            _rotate16_blocks(view, b0, b1, s0, s1, cache_s, cache_c, True, blocks, prefetch)
        else:
            _rotate16_blocks(view, b0, b1, s0, s1, cache_s, cache_c, False, blocks, prefetch)
    elif interleaved is not None:
        if bf16 is not None:
            _rotate16_rows(view, b0, b1, s0, s1, cache_s, cache_c, True, INTERLEAVED, prefetch)
        else:
            _rotate16_rows(view, b0, b1, s0, s1, cache_s, cache_c, False, INTERLEAVED, prefetch)
    elif bf16 is not None:
        _rotate16_rows(view, b0, b1, s0, s1, cache_s, cache_c, True, HALF, prefetch)
    else:
        _rotate16_rows(view, b0, b1, s0, s1, cache_s, cache_c, False, HALF, prefetch)


@kernel(inline=True)
def _rotate16_rows(view, b0, b1, s0, s1, cache_s, cache_c, bf16, layout, prefetch):
    """Every head of batch rows ``b0 .. b1 - 1`` at ``s0 .. s1 - 1``, batch row after batch
    row. With ``prefetch`` (not on Zen 5) each batch row's positions are walked in two
    stretches side by side, ``q`` and ``q + span`` (``span`` half of them, rounded down),
    a head of each in turn, each head's lines prefetched first (an odd count's last
    position after them): one core streams two stretches faster than one on the
    `rocketlake` host, as float32 rows do (``fastpe._engine.two_stretches``); README,
    "Two stretches a work item". The same bits either way (tests/test_modes.py)."""
    flat, off0, sb, ss, sh, sd, _, _, nh, n, _ = view
    if prefetch is not None:
        span = (s1 - s0) // 2
        for b in range(b0, b1):
            for si in range(s0, s0 + span):
                for h in range(nh):
                    row = off0 + b * sb + si * ss + h * sh
                    prefetch_ahead(flat, row, 2 * n * sd)
                    prefetch_ahead(flat, row + span * ss, 2 * n * sd)
                    _rotate16(flat, row, sd, n, layout, cache_s, cache_c, si - s0, bf16)
                    _rotate16(
                        flat, row + span * ss, sd, n, layout, cache_s, cache_c,
                        si - s0 + span, bf16,
                    )  # fmt: skip
        s2 = s0 + 2 * span
    else:
        s2 = s0
    for b in range(b0, b1):
        for si in range(s2, s1):
            for h in range(nh):
                if prefetch is not None:
                    prefetch_ahead(flat, off0 + b * sb + si * ss + h * sh, 2 * n * sd)
                _rotate16(
                    flat,
                    off0 + b * sb + si * ss + h * sh,
                    sd,
                    n,
                    layout,
                    cache_s,
                    cache_c,
                    si - s0,
                    bf16,
                )


@kernel(inline=True)
def _rotate16_split_rows(
    view, b0, b1, s0, s1, cache_s, cache_c, cache_s2, cache_c2, bf16, prefetch
):
    """Rows of pairs whose second channel takes its own angle (see ``_rotate16_block``)."""
    flat, off0, sb, ss, sh, sd, _, _, nh, n, layout = view
    for b in range(b0, b1):
        for si in range(s0, s1):
            k = si - s0
            for h in range(nh):
                base = off0 + b * sb + si * ss + h * sh
                if prefetch is not None:
                    prefetch_ahead(flat, base, 2 * n * sd)
                for i in range(n):
                    if layout == INTERLEAVED:
                        j1 = base + 2 * i * sd
                        j2 = j1 + sd
                    else:
                        j1 = base + i * sd
                        j2 = base + (i + n) * sd
                    x1 = to_f32(flat[j1], bf16)
                    x2 = to_f32(flat[j2], bf16)
                    flat[j1] = finite_from_f32(
                        turn_first(x1, x2, cache_c[k, i], cache_s[k, i]), bf16
                    )
                    flat[j2] = finite_from_f32(
                        turn_second(x2, x1, cache_c2[k, i], cache_s2[k, i]), bf16
                    )


@kernel(inline=True)
def _rotate16_blocks(view, b0, b1, s0, s1, cache_s, cache_c, bf16, blocks, prefetch):
    flat, off0, sb, ss, sh, sd, _, _, nh, n, _ = view
    m = n // blocks
    s_blk = cache_s.reshape(cache_s.shape[0] * blocks, m)  # row q * blocks + b: block b
    c_blk = cache_c.reshape(cache_c.shape[0] * blocks, m)
    for b in range(b0, b1):
        for si in range(s0, s1):
            for h in range(nh):
                row = off0 + b * sb + si * ss + h * sh
                if prefetch is not None:
                    prefetch_ahead(flat, row, 2 * n * sd)
                for k in range(blocks):
                    _rotate16(
                        flat,
                        row + k * 2 * m * sd,
                        sd,
                        m,
                        HALF,
                        s_blk,
                        c_blk,
                        (si - s0) * blocks + k,
                        bf16,
                    )


@kernel(inline=True)
def _write16(flat, base, sd, n, layout, s, c, bf16):
    """``flat[base + j*sd] = table value j`` rounded from float64 into 16 bits."""
    if sd == 1:  # unit-stride channels: unsigned indices, loops LLVM vectorises
        b = np.uint64(base)
        if layout == INTERLEAVED:
            for i in range(n):
                j = b + np.uint64(2 * i)
                flat[j] = from_f64(s[i], bf16)
                flat[j + np.uint64(1)] = from_f64(c[i], bf16)
        else:
            m = np.uint64(n)
            for i in range(n):
                j = b + np.uint64(i)
                flat[j] = from_f64(s[i], bf16)
                flat[j + m] = from_f64(c[i], bf16)
        return
    for i in range(n):
        if layout == INTERLEAVED:
            j1 = base + 2 * i * sd
            j2 = j1 + sd
        else:
            j1 = base + i * sd
            j2 = base + (i + n) * sd
        flat[j1] = from_f64(s[i], bf16)
        flat[j2] = from_f64(c[i], bf16)


@kernel(inline=True)
def _fix_small16(p, wh, wl, s, c):
    """Recompute exactly the values too small for angle addition's absolute error."""
    k = 0
    for i in range(s.shape[0]):  # a count first: a loop without branches, vectorised
        k += _small(s[i], c[i])
    if k == 0:
        return
    for i in range(s.shape[0]):
        if abs(s[i]) < FIXUP_THRESHOLD or abs(c[i]) < FIXUP_THRESHOLD:
            s[i], c[i] = sincos_exact(p, wh[i], wl[i])


@kernel()
def table16_kernel(w0, w1, view, pos, freqs, split, bf16, interleaved, stream, trail):
    """Write the 16-bit table into the ``(1, ns, 1, 2*npairs)`` ``view`` (bits in ``flat``).

    Each value has the bits of its float64 fold from the row's anchor (as float64 tables
    are) rounded once into 16 bits, after the bfloat16 fix-up: bfloat16 reaches float32's
    exponent range, so (as in float32 tables) values below ``FIXUP_THRESHOLD`` are
    recomputed exactly first; float16's smallest step (its subnormals' 2**-24) is far
    above angle addition's error, so it needs no fix-up. Rows with strided channels take
    that general path (:func:`_write_row16`).

    Rows with unit-stride channels are folded in float32 a group of 16 pairs at a time
    (:func:`~.rows16.row_pass`, where the CPU converts float16 itself or the table is
    bfloat16: twice the lanes a vector of the float64 fold), rounded into 16 bits where
    that gives the float64 fold's bits (a last group of fewer pairs masked); the pairs it
    flags (about one value in 250 of a float16 table, one in 2,000 of a bfloat16 one) are
    written again by the general path's operations (:func:`_fold_pairs16`). float16 on
    x86 CPUs without F16C takes the general path for every row; CPUs with F16C but no FMA
    get the same bits from a fused multiply-add in software (slower). Against the
    previous pass (the float64 fold into float32, then rounded and tested per value),
    ``bench/roofline.py --match 524288`` in the fast state, two invocations each: float16
    51-55% of the yardstick against 41-43%, bfloat16 54-59% against 47-49% (README,
    "16-bit tables folded in float32").

    ``stream`` ``ON`` (None: off; a constant of each specialization too): unit-stride rows are
    rounded into a buffer that stays in L1 and copied out by streaming stores (:mod:`.stream`,
    as :func:`~.tables.table_kernel` does), the same bits.

    ``trail`` ``ON`` (None: off; with ``stream`` None): unit-stride rows back to back
    (``ss == 2 * npairs``) that take the float32 pass (bfloat16, or float16 where the CPU
    converts it; else plain stores, as without) are rounded into one of two rows of a
    buffer that stays in L1,
    and each row's lines go out to memory by streaming stores while the next row is
    computed (:func:`~.rows16.row_pass`'s ``trail``; :func:`_trail_rows`), the same bits.
    """
    # ``bf16`` and ``interleaved`` are None or ON (as :func:`~.args.loop`'s): numba prunes
    # the branches on them before it compiles, so each dtype and layout is a
    # specialization of its own, compiled on first use, holding one inlined body (all four
    # fused bodies in one function made the first 16-bit table compile seconds longer:
    # bench/compile16.py measures it)
    if interleaved is not None:
        if bf16 is not None:
            return _table16_work(
                w0, w1, view, pos, freqs, split, True, INTERLEAVED, stream, trail, bf16,
                interleaved,
            )  # fmt: skip
        return _table16_work(
            w0, w1, view, pos, freqs, split, False, INTERLEAVED, stream, trail, bf16, interleaved
        )
    if bf16 is not None:
        return _table16_work(
            w0, w1, view, pos, freqs, split, True, HALF, stream, trail, bf16, interleaved
        )
    return _table16_work(
        w0, w1, view, pos, freqs, split, False, HALF, stream, trail, bf16, interleaved
    )


@kernel()
def _write_row16(flat, base, sd, n, layout, s, c, bf16, p, wh, wl):
    """A table row by the general path: the fix-up (bfloat16), then :func:`_write16`. A
    call, compiled once for the tables' four specializations, not inlined into each: the
    rows that take it are few (strided channels aside)."""
    if bf16:
        _fix_small16(p, wh, wl, s, c)
    _write16(flat, base, sd, n, layout, s, c, bf16)


@kernel(inline=True)
def _fold_pairs16(flat, base, n, layout, pend, got, anc_s, anc_c, tc, ts, t, bf16, p, wh, wl):
    """The values of a unit-stride table row at ``flat[base:]`` that the float32 pass
    (:mod:`.rows16`) flags: the flagged pairs of its groups ``pend[:got]``, as the general
    path writes them (:func:`_write_row16`): each folded in float64, the bfloat16 fix-up,
    then :func:`from_f64`. Inlined: a call per row would cost its array arguments'
    reference counts, shared by the threads."""
    b = np.uint64(base)
    for q in range(got):
        entry = pend[q]
        g0 = LANES * (entry >> 32)
        pairs = entry & ((1 << LANES) - 1)  # a sine or a cosine flagged
        while pairs != 0:  # one pair at a time: about one value in a group is flagged
            i = np.uint64(g0 + trailing_zeros(pairs))
            pairs &= pairs - 1
            j1, j2 = _pair_at(b, i, n, layout)
            _refold16(
                flat,
                j1,
                j2,
                anc_s[LAST, i],
                anc_c[LAST, i],
                tc[t, i],
                ts[t, i],
                bf16,
                p,
                wh[i],
                wl[i],
            )


@kernel(inline=True)
def _refold16(flat, j1, j2, sa, ca, ct, st, bf16, p, wh_i, wl_i):
    """``flat[j1]``, ``flat[j2]``: the sine and cosine of a pair at position ``p`` (a float)
    as the general path writes them (:func:`_write_row16`): folded from its anchor ``sa``,
    ``ca`` and step ``ct``, ``st`` in float64, the bfloat16 fix-up, then :func:`from_f64`."""
    sv, cv = add_angle(sa, ca, ct, st)
    if bf16 and (abs(sv) < FIXUP_THRESHOLD or abs(cv) < FIXUP_THRESHOLD):
        sv, cv = sincos_exact(float(p), wh_i, wl_i)
    flat[j1] = from_f64(sv, bf16)
    flat[j2] = from_f64(cv, bf16)


@kernel(inline=True)
def _pair_at(b, i, n, layout):
    """Where pair ``i`` of a unit-stride row at ``b`` lies (unsigned indices)."""
    if layout == INTERLEAVED:
        j1 = b + np.uint64(2) * i
        return j1, j1 + np.uint64(1)
    return b + i, b + i + np.uint64(n)


@kernel(inline=True)
def _table16_work(
    w0, w1, view, pos, freqs, split, bf16, layout, stream, trail, bf16_flag, inter_flag
):
    """The body of :func:`table16_kernel` for one dtype and layout (constants; the kernel's
    flags too, on which the choice of the float32 pass's variant is pruned)."""
    flat, off0, _, ss, _, sd, _, ns, _, n, _ = view
    values, given, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    s = np.empty(n)
    c = np.empty(n)
    # the float32 pass (rows16): the finest anchor and the last digit's step table in
    # float32, and the groups of a row it leaves
    vector = bf16 or HW_HALF
    anc32 = np.empty((2, n), dtype=np.float32)
    dig32 = np.empty((RADIX, 2, n), dtype=np.float32)
    for r in range(RADIX):
        for i in range(n):
            dig32[r, 0, i] = np.float32(tc[r, i])
            dig32[r, 1, i] = np.float32(ts[r, i])
    pend = np.empty(n // LANES + 1, dtype=np.int64)
    # where unit-stride rows are written: the table, or (streaming) a row in L1
    if stream is not None:
        dst = np.empty(2 * n, dtype=flat.dtype)
    else:
        dst = flat
    # (trail) two rows, each after room for the line carried from the row before
    buf = np.empty(2 * (TRAIL_VALUES + 2 * n) if trail is not None else 0, dtype=flat.dtype)
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        key32 = NO_KEY  # the anchor anc32 holds
        i0, i1 = worker_items(n_chunks, w, n_workers)
        if trail is not None:
            if sd == 1 and vector and ss == 2 * n:  # the worker's rows, as one run
                _trail_rows(
                    flat, buf, off0, i0 * chunk, min(ns, i1 * chunk), n, pos, freqs, anc_s,
                    anc_c, keys, anc32, dig32, pend, bf16, layout, bf16_flag, inter_flag,
                )  # fmt: skip
                stream_fence()
                continue
        for item in range(i0, i1):
            s0 = item * chunk
            for si in range(s0, min(ns, s0 + chunk)):
                p = position(values, given, offsets, 0, si)
                if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                    if keys[LAST - 1] == (p >> (2 * BITS)):
                        anchor_step(anc_s, anc_c, tc, ts, p, keys)
                    else:
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                t = p & DIGIT
                base = off0 + si * ss
                if sd == 1 and vector:
                    at = 0 if stream is not None else base  # the row's start in dst
                    if key32 != keys[LAST]:
                        for i in range(n):
                            anc32[0, i] = np.float32(anc_s[LAST, i])
                            anc32[1, i] = np.float32(anc_c[LAST, i])
                        key32 = keys[LAST]
                    got = row16(dst, at, anc32, dig32, t, pend, bf16_flag, inter_flag)
                    if got > 0:
                        _fold_pairs16(
                            dst, at, n, layout, pend, got, anc_s, anc_c, tc, ts, t, bf16,
                            float(p), wh, wl,
                        )  # fmt: skip
                    if stream is not None:
                        stream_row(flat, base, dst, 2 * n, ss)
                else:  # strided channels, or float16 on CPUs without its conversions
                    for i in range(n):
                        s[i], c[i] = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
                    _write_row16(flat, base, sd, n, layout, s, c, bf16, float(p), wh, wl)
        if stream is not None:
            stream_fence()
    return 0.0


@kernel(inline=True)
def _trail_rows(
    flat, buf, off0, s0, s1, n, pos, freqs, anc_s, anc_c, keys, anc32, dig32, pend, bf16,
    layout, bf16_flag, inter_flag,
):  # fmt: skip
    """Rows ``s0:s1`` of a 16-bit table whose rows lie back to back (``2 * n`` unit-stride
    values each, from ``flat[off0]``), as :func:`table16_kernel` writes them with
    ``trail``: a worker's rows, as one run.

    Each row is computed into one of ``buf``'s two rows (alternately; its float32 pass,
    then its flagged pairs folded again, as the other rows), while the table's lines that
    the rows before filled are streamed out by the pass (``lines`` of them, from where the
    last one streamed ended: ``nxt`` in the table, ``src`` in ``buf``). The values past a
    row's last whole line are copied in front of the next row in ``buf`` (the room before
    each of its rows), so that the line they share streams whole. Only the lines the run
    shares with the rows before and after it take plain stores: its first values up to a
    line boundary, and after its last row what remains past the last whole line.
    """
    values, given, offsets, _ = pos
    wh, wl, tc, ts = freqs
    key32 = NO_KEY  # the anchor anc32 holds
    width = 2 * n
    mask = np.uint64(LINE - 1)
    half_line = STREAM_BYTES // 2  # values of one streaming store
    nxt = off0 + s0 * width  # the first value of the table not yet written
    src = 0  # where it lies in buf (once nxt starts a line)
    k = 0  # buf's row for this row
    for si in range(s0, s1):
        p = position(values, given, offsets, 0, si)
        if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
            if keys[LAST - 1] == (p >> (2 * BITS)):
                anchor_step(anc_s, anc_c, tc, ts, p, keys)
            else:
                update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
        t = p & DIGIT
        if key32 != keys[LAST]:
            for i in range(n):
                anc32[0, i] = np.float32(anc_s[LAST, i])
                anc32[1, i] = np.float32(anc_c[LAST, i])
            key32 = keys[LAST]
        base = off0 + si * width
        at = k * (TRAIL_VALUES + width) + TRAIL_VALUES
        lines = 0
        rest = 0
        on_line = (_address(flat, nxt) & mask) == 0
        if on_line:  # (else nxt is base: the rows before are written)
            lines = (base - nxt) // TRAIL_VALUES
            rest = base - nxt - lines * TRAIL_VALUES
            for i in range(rest):  # carried in front of this row
                buf[at - rest + i] = buf[src + lines * TRAIL_VALUES + i]
        got = row16_trail(
            buf, at, anc32, dig32, t, pend, flat, src, nxt, lines, bf16_flag, inter_flag
        )
        if got > 0:
            _fold_pairs16(
                buf, at, n, layout, pend, got, anc_s, anc_c, tc, ts, t, bf16, float(p), wh, wl
            )
        if on_line:
            nxt += lines * TRAIL_VALUES
            src = at - rest
        else:  # plain stores up to the first line boundary (or the row's end)
            gap = np.int64(((np.uint64(LINE) - (_address(flat, nxt) & mask)) & mask) // 2)
            head = min(gap, width)
            for i in range(head):
                flat[base + i] = buf[at + i]
            nxt = base + head
            src = at + head
        k = 1 - k
    # the last rows' whole lines, streamed; what remains past them, by plain stores
    end = off0 + s1 * width
    if (_address(flat, nxt) & mask) == 0:
        while nxt + TRAIL_VALUES <= end:
            _stream32(flat, nxt, buf, src)
            _stream32(flat, nxt + half_line, buf, src + half_line)
            nxt += TRAIL_VALUES
            src += TRAIL_VALUES
    for i in range(end - nxt):
        flat[nxt + i] = buf[src + i]


@kernel()
def table16_lanes_kernel(w0, w1, view, pos, freqs, split, bf16, half):
    """16-bit tables of a few pairs a row at consecutive positions (``offset + s``,
    unit-stride channels) that :func:`table16_blocks_kernel` does not take (rows apart,
    half-layout rows of 3, 5, 6 or 7 pairs, float16 on CPUs without its conversions): the
    bits of :func:`table16_kernel`, with each work item's rows
    stepped by :func:`~.tables.lanes_rows` (``GROUP_LANES`` groups of ``RADIX`` positions
    side by side, as float32 tables of a few pairs take them, placed as rows of either
    layout), then rounded to nearest into float32 and into 16 bits, one byte of
    :func:`round16_risky` flag per value. ``bf16`` None (float16) or ``ON``
    (bfloat16), ``half`` None (interleaved) or ``ON`` (half layout): a specialization of its
    own each, compiled on first use.

    The recurrence's float64 values lie within a few float64 ulps of the folded ones
    (relative, or absolute near zero), far less than half a float32 ulp down to the
    floors that :func:`round16_risky` flags below. So wherever a 16-bit midpoint lies
    between the two values, the float32 rounding of the recurrence's value is that midpoint
    (every midpoint is a float32), and it is flagged; elsewhere both round to the same 16
    bits. A row with a flagged value (a midpoint, bfloat16's fix-up, a float16 subnormal,
    zero: about 1 value in 8,192 of a float16 table) is written again by the general path,
    folded from its own anchors (:func:`_write_row16`), so every row has the bits of
    :func:`table16_kernel`.
    """
    if bf16 is not None:
        return _table16_lanes_work(w0, w1, view, pos, freqs, split, True, half)
    return _table16_lanes_work(w0, w1, view, pos, freqs, split, False, half)


@kernel(inline=True)
def _table16_lanes_work(w0, w1, view, pos, freqs, split, bf16, half):
    """The body of :func:`table16_lanes_kernel` for one dtype and layout (constants)."""
    flat, off0, _, ss, _, _, _, ns, _, n, _ = view
    _, _, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s, anc_c, lanes, out = lanes_scratch(n, chunk)
    width = 2 * n
    # one byte per value of an item, whole words of 8 (only the item's values are read)
    flags = np.zeros(8 * ((chunk * width + 7) // 8), dtype=np.uint8)
    again = np.empty(chunk, dtype=np.int64)  # an item's rows written again
    # the general path's anchors and row, for the rows written again
    gen_s = np.empty((LEVELS, n))
    gen_c = np.empty((LEVELS, n))
    s = np.empty(n)
    c = np.empty(n)
    layout = HALF if half is not None else INTERLEAVED
    first = offsets[0]
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        gen_keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(n_chunks, w, n_workers)
        for item in range(i0, i1):
            s0 = item * chunk
            s1 = min(ns, s0 + chunk)
            g0, g1, o0 = lanes_groups(first, s0, s1, n)
            # a literal True, not ``half`` (ON): one specialization for the 16-bit lanes'
            # float64 rows, not one more of its own (the float32 lanes write float32 rows:
            # theirs is another)
            if half is not None:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, True)
            else:
                lanes_rows(g0, g1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, None)
            m = (s1 - s0) * width
            if ss == width:  # rows back to back: one run
                d0 = np.uint64(off0 + s0 * ss)
                for j in range(np.uint64(m)):
                    f = np.float32(out[o0 + j])
                    flags[j] = round16_risky(f, bf16)
                    flat[d0 + j] = finite_from_f32(f, bf16)
            else:
                for si in range(s0, s1):
                    d0 = np.uint64(off0 + si * ss)
                    q = np.uint64((si - s0) * width)
                    for j in range(np.uint64(width)):
                        f = np.float32(out[o0 + q + j])
                        flags[q + j] = round16_risky(f, bf16)
                        flat[d0 + j] = finite_from_f32(f, bf16)
            for r in range(flagged_rows(flags, m, width, again)):
                p = first + s0 + again[r]
                if gen_keys[LAST] != (p >> BITS):  # (else every level matches p)
                    anchors_at(p, wh, wl, tc, ts, gen_s, gen_c, gen_keys)
                t = p & DIGIT
                for i in range(n):
                    s[i], c[i] = add_angle(gen_s[LAST, i], gen_c[LAST, i], tc[t, i], ts[t, i])
                base = off0 + (s0 + again[r]) * ss
                _write_row16(flat, base, 1, n, layout, s, c, bf16, float(p), wh, wl)
    return 0.0


@kernel()
def table16_blocks_kernel(w0, w1, view, pos, freqs, split, bf16, half):
    """16-bit tables of a few pairs a row at consecutive positions (``offset + s``), rows
    back to back, interleaved or (``half`` ``ON``) in the half layout with 2, 4 or 8 pairs
    a row, in blocks of positions that each start a group of them: a
    block is one row for the float32 pass of the folded rows (:func:`~.rows16.row_pass`),
    pair ``r * npairs + i`` of it pair ``i`` of its position ``r``. A block of ``RADIX *
    RADIX`` positions takes the anchor of that group (one per pair, repeated along the row)
    and a step table of two digits (``r`` from 0 to 255, folded in float64 from the step
    tables once per call); a block of ``RADIX`` positions the finest anchor and the step
    table's rows. Either way the pass's float64 reference is the value
    :func:`table16_kernel` folds (within a few float64 ulps of what the pass's inputs
    round from), so it writes the blocks' rows with :func:`table16_kernel`'s bits, and the
    pairs it flags are folded again by that kernel's operations. Rows of a block cut by a
    work item's ends take the general path. Only where the CPU converts float16 itself,
    or for bfloat16 (the engine's choice; elsewhere :func:`table16_lanes_kernel`). ``bf16``
    None (float16) or ``ON`` (bfloat16), ``half`` None or ``ON``: a specialization each,
    compiled on first use.
    """
    # the flags themselves go down to the pass's choice (_block_pass), where numba prunes
    # on them: with constants, each specialization typed and lowered every variant of the
    # pass (a first float16 half-layout table 3.2 s of CPU)
    if half is not None:
        if bf16 is not None:
            return _table16_blocks_work(w0, w1, view, pos, freqs, split, True, HALF, bf16, half)
        return _table16_blocks_work(w0, w1, view, pos, freqs, split, False, HALF, bf16, half)
    if bf16 is not None:
        return _table16_blocks_work(w0, w1, view, pos, freqs, split, True, INTERLEAVED, bf16, half)
    return _table16_blocks_work(w0, w1, view, pos, freqs, split, False, INTERLEAVED, bf16, half)


@kernel(inline=True)
def _block_pass(flat, base, anc32, dig32, pend, n, bf16, half):
    """The float32 pass over a block's row, for the flags ``bf16`` and ``half`` (None or
    ``ON``): one variant of :func:`~.rows16.row_pass` typed, or the half layout's three
    (rows of 2, 4 or 8 pairs)."""
    if half is not None:
        return rows16(flat, base, anc32, dig32, 0, pend, bf16, n)
    if bf16 is not None:
        return _row_bf16_i(flat, base, anc32, dig32, 0, pend)
    return _row_f16_i(flat, base, anc32, dig32, 0, pend)


@kernel(inline=True)
def _table16_blocks_work(w0, w1, view, pos, freqs, split, bf16, layout, bf16_flag, half):
    """The body of :func:`table16_blocks_kernel` for one dtype and layout (constants)."""
    flat, off0, _, ss, _, _, _, ns, _, n, _ = view
    _, _, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    big = RADIX * RADIX  # the positions of a large block
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    s = np.empty(n)
    c = np.empty(n)
    # the step tables of the blocks' rows: one digit (RADIX positions) and two
    dig1 = np.empty((1, 2, RADIX * n), dtype=np.float32)
    dig2 = np.empty((1, 2, big * n), dtype=np.float32)
    for j in range(RADIX):
        for q in range(RADIX):
            for i in range(n):
                sv, cv = add_angle(ts[RADIX + j, i], tc[RADIX + j, i], tc[q, i], ts[q, i])
                dig2[0, 0, (j * RADIX + q) * n + i] = np.float32(cv)
                dig2[0, 1, (j * RADIX + q) * n + i] = np.float32(sv)
    for q in range(RADIX):
        for i in range(n):
            dig1[0, 0, q * n + i] = np.float32(tc[q, i])
            dig1[0, 1, q * n + i] = np.float32(ts[q, i])
    # a block's anchors along its row: pair k's is pair k % n's, over a period that is a
    # multiple of both n and LANES
    period = LANES
    while period % n != 0:
        period += LANES
    anc32 = np.empty((2, period), dtype=np.float32)
    pend = np.empty(big * n // LANES + 1, dtype=np.int64)
    first = offsets[0]
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(n_chunks, w, n_workers)
        for item in range(i0, i1):
            si = item * chunk
            s1 = min(ns, si + chunk)
            while si < s1:
                p = first + si
                base = off0 + si * ss
                left = s1 - si
                if (p & (big - 1)) == 0 and left >= big:
                    lev = LAST - 1  # a large block: the anchor of its group of 256
                    if keys[LAST - 2] == (p >> (3 * BITS)):
                        # only that level changes (update_anchors's operations, inlined: a
                        # call every 256 positions cost as much as their pass at dim 2)
                        row = 2 * RADIX + ((p >> (2 * BITS)) & DIGIT)
                        for i in range(n):
                            anc_s[lev, i], anc_c[lev, i] = add_angle(
                                anc_s[lev - 1, i], anc_c[lev - 1, i], tc[row, i], ts[row, i]
                            )
                        keys[lev] = p >> (2 * BITS)
                    elif keys[lev] != (p >> (2 * BITS)):
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    dig32, size = dig2, big
                else:
                    lev = LAST
                    if keys[LAST] != (p >> BITS):
                        if keys[LAST - 1] == (p >> (2 * BITS)):
                            anchor_step(anc_s, anc_c, tc, ts, p, keys)
                        else:
                            update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                    if (p & DIGIT) != 0 or left < RADIX:
                        # a row of a block cut by the item's ends: the general path
                        t = p & DIGIT
                        for i in range(n):
                            s[i], c[i] = add_angle(
                                anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i]
                            )
                        _write_row16(flat, base, 1, n, layout, s, c, bf16, float(p), wh, wl)
                        si += 1
                        continue
                    dig32, size = dig1, RADIX
                for i in range(n):
                    anc32[0, i] = np.float32(anc_s[lev, i])
                    anc32[1, i] = np.float32(anc_c[lev, i])
                for k in range(n, period):  # then copies, n back
                    anc32[0, k] = anc32[0, k - n]
                    anc32[1, k] = anc32[1, k - n]
                got = _block_pass(flat, base, anc32, dig32, pend, n, bf16_flag, half)
                b = np.uint64(base)
                for e in range(got):  # the flagged pairs, folded as table16_kernel folds
                    entry = pend[e]
                    k0 = LANES * (entry >> 32)
                    pairs = entry & ((1 << LANES) - 1)
                    while pairs != 0:
                        k = k0 + trailing_zeros(pairs)
                        pairs &= pairs - 1
                        r = k // n
                        i = k - r * n
                        q = r & DIGIT
                        sa, ca = anc_s[lev, i], anc_c[lev, i]
                        if lev != LAST:  # the finest anchor of position r's block first
                            j = RADIX + (r >> BITS)
                            sa, ca = add_angle(sa, ca, tc[j, i], ts[j, i])
                        j1, j2 = _pair_at(b + np.uint64(2 * r * n), np.uint64(i), n, layout)
                        _refold16(
                            flat, j1, j2, sa, ca, tc[q, i], ts[q, i], bf16, p + r, wh[i], wl[i]
                        )
                si += size
    return 0.0


@kernel(inline=True)
def _add16(flat, base, sd, n, layout, s, c, k, bf16):
    """``flat[base + j*sd] += table value j`` in float32, rounded once into 16 bits (channels
    of any stride; :func:`_add16_work` adds unit-stride rows from their laid-out copy)."""
    for i in range(n):
        if layout == INTERLEAVED:
            j1 = base + 2 * i * sd
            j2 = j1 + sd
        else:
            j1 = base + i * sd
            j2 = base + (i + n) * sd
        flat[j1] = finite_from_f32(to_f32(flat[j1], bf16) + s[k, i], bf16)
        flat[j2] = finite_from_f32(to_f32(flat[j2], bf16) + c[k, i], bf16)


@kernel()
def add16_kernel(w0, w1, view, pos, freqs, split, bf16, interleaved, block, ahead):
    """Add the table to the 16-bit ``(nb, ns, 1, 2*npairs)`` ``view`` in place.

    The walk of :func:`~.tables.add_kernel`; table values folded from their anchor and
    rounded once to float32, added to the float32 value of each element, and the sum
    rounded once into 16 bits. 512-bit vectors (:mod:`.vectors`): 8-12% faster. Each row of
    x first prefetches the lines ``ahead`` elements past its start (a run-time argument:
    ``fastpe._engine.add16_ahead_bytes``). Where several batch rows share the rows and
    ``block`` is not 0 (a run-time argument: ``fastpe._engine.add16_block``), they are
    added ``block`` elements at a time instead, each block to every batch row before the
    next and each batch row's block after next prefetched, as
    :func:`~.tables.add_kernel`'s laid-out walk (``SUM_BLOCK_BYTES``). ``bf16`` and
    ``interleaved`` None or ``ON``: a
    specialization of its own per dtype and layout, each holding one inlined body (the four
    bodies in one function took 4.9 s of CPU to compile on the first 16-bit call, as
    :func:`table16_kernel`'s did).
    """
    wide_vectors()
    # the layout and the dtype as constants of each inlined body (see _rotate16_block)
    if interleaved is not None:
        if bf16 is not None:
            return _add16_work(w0, w1, view, pos, freqs, split, True, INTERLEAVED, block, ahead)
        return _add16_work(w0, w1, view, pos, freqs, split, False, INTERLEAVED, block, ahead)
    if bf16 is not None:
        return _add16_work(w0, w1, view, pos, freqs, split, True, HALF, block, ahead)
    return _add16_work(w0, w1, view, pos, freqs, split, False, HALF, block, ahead)


@kernel(inline=True)
def _add16_work(w0, w1, view, pos, freqs, split, bf16, layout, block, ahead):
    """The body of :func:`add16_kernel` for one dtype and layout (constants).

    With unit-stride channels each table row is folded once into float32, laid out as x's
    rows hold it (``lay``: the values the cos/sin cache held), and every batch row then adds
    it with no shuffle (as :func:`~.tables.add_kernel` does): the interleaved layout used
    to interleave the sines and cosines again for every batch row. Several batch rows add
    it ``block`` elements at a time (where ``block`` is not 0), one batch row a row at a
    time. Channels of another stride add from the cos/sin cache.
    """
    flat, off0, sb, ss, _, sd, nb, ns, _, n, _ = view
    values, given, offsets, per_batch = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_outer = nb if per_batch else 1
    n_chunks = (ns + chunk - 1) // chunk
    total = n_outer * n_chunks
    anc_s = np.empty((LEVELS, n))
    anc_c = np.empty((LEVELS, n))
    # unit-stride rows: the table rows as x holds them; other strides: a cos/sin cache
    cache_s = np.empty((chunk if sd != 1 else 0, n), dtype=np.float32)
    cache_c = np.empty((chunk if sd != 1 else 0, n), dtype=np.float32)
    width = np.uint64(2 * n)
    lay = np.empty(chunk * 2 * n if sd == 1 else 0, dtype=np.float32)
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        i0, i1 = worker_items(total, w, n_workers)
        for item in range(i0, i1):
            bo = item // n_chunks
            s0 = (item - bo * n_chunks) * chunk
            s1 = min(ns, s0 + chunk)
            for si in range(s0, s1):
                p = position(values, given, offsets, bo, si)
                if keys[LAST] != (p >> BITS):  # anchors_at written out (see rope_kernel)
                    if keys[LAST - 1] == (p >> (2 * BITS)):
                        anchor_step(anc_s, anc_c, tc, ts, p, keys)
                    else:
                        update_anchors(p, wh, wl, tc, ts, anc_s, anc_c, keys)
                k = si - s0
                t = p & DIGIT
                if sd == 1:  # folded straight into the row as x holds it (the cache's values)
                    at = np.uint64(k) * width
                    if layout == INTERLEAVED:
                        for i in range(n):
                            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
                            lay[at + np.uint64(2 * i)] = np.float32(sv)
                            lay[at + np.uint64(2 * i + 1)] = np.float32(cv)
                    else:
                        for i in range(n):
                            sv, cv = add_angle(anc_s[LAST, i], anc_c[LAST, i], tc[t, i], ts[t, i])
                            lay[at + np.uint64(i)] = np.float32(sv)
                            lay[at + np.uint64(n + i)] = np.float32(cv)
                else:
                    fold_into_cache(anc_s, anc_c, tc, ts, t, cache_s, cache_c, k, 1.0, 1.0, False)
            b0 = bo if per_batch else 0
            b1 = bo + 1 if per_batch else nb
            if sd == 1 and b1 - b0 > 1 and block > 0:  # blocks of every batch row
                runs, run = (1, (s1 - s0) * 2 * n) if ss == 2 * n else (s1 - s0, 2 * n)
                blk = block
                for r in range(runs):
                    at0 = r * 2 * n
                    for k0 in range(0, run, blk):
                        m = np.uint64(min(run, k0 + blk) - k0)
                        lk = np.uint64(at0 + k0)
                        for b in range(b0, b1):
                            e0 = off0 + b * sb + (s0 + r) * ss + k0
                            _prefetch_block(flat, e0, k0, blk, run, runs, r, ss)
                            d0 = np.uint64(e0)
                            for j in range(m):
                                v = to_f32(flat[d0 + j], bf16) + lay[lk + j]
                                flat[d0 + j] = finite_from_f32(v, bf16)
                continue
            for b in range(b0, b1):
                for si in range(s0, s1):
                    base = off0 + b * sb + si * ss
                    prefetch_lines(flat, base + ahead, 2 * n * sd)
                    if sd == 1:
                        d0 = np.uint64(base)
                        at = np.uint64(si - s0) * width
                        for j in range(width):
                            v = to_f32(flat[d0 + j], bf16) + lay[at + j]
                            flat[d0 + j] = finite_from_f32(v, bf16)
                    else:
                        _add16(flat, base, sd, n, layout, cache_s, cache_c, si - s0, bf16)
    return 0.0


@kernel()
def add16_lanes_kernel(w0, w1, view, pos, freqs, split, bf16, interleaved):
    """16-bit ``add_sinusoidal`` of a few pairs a row at positions shared by every batch row
    and consecutive (``offset + s``), rows back to back (``ss == 2 * npairs``, unit-stride
    channels): the bits of :func:`add16_kernel` (each table value folded from its anchor,
    rounded once to float32, added in float32 to each element, the sum rounded once into 16
    bits), with each work item's table rows stepped by :func:`~.tables.lanes_rows`
    (``GROUP_LANES`` groups of ``RADIX`` positions side by side, as the float32 lanes
    kernels take them) and laid out once in float32 as x's rows hold them; each batch row
    then adds them in one contiguous pass. ``bf16`` and ``interleaved`` None or ``ON``: a
    specialization of their own each, compiled on first use.

    The recurrence's values differ from the folded ones by less than ``_ROUND32_TOL``, so
    they round into the same float32 unless a float32 midpoint lies that close
    (:func:`round32_risky`: one value in 2**15 near magnitude 1, every value below 2**-16);
    such rows are folded again from their own anchors, as :func:`add16_kernel` folds every
    row.
    """
    wide_vectors()
    if bf16 is not None:
        return _add16_lanes_work(w0, w1, view, pos, freqs, split, True, interleaved)
    return _add16_lanes_work(w0, w1, view, pos, freqs, split, False, interleaved)


@kernel(inline=True)
def _add16_lanes_work(w0, w1, view, pos, freqs, split, bf16, interleaved):
    """The body of :func:`add16_lanes_kernel` for one dtype (a constant)."""
    flat, off0, sb, ss, _, _, nb, ns, _, n, _ = view
    _, _, offsets, _ = pos
    wh, wl, tc, ts = freqs
    chunk, _, n_workers = split
    n_chunks = (ns + chunk - 1) // chunk
    anc_s, anc_c, lanes, out = lanes_scratch(n, chunk)
    width = 2 * n
    lay = np.empty(chunk * width, dtype=np.float32)  # an item's table rows as x holds them
    # one byte per value of lay (round32_risky), whole words of 8: only the item's are read
    flags = np.zeros(8 * ((chunk * width + 7) // 8), dtype=np.uint8)
    again = np.empty(chunk, dtype=np.int64)  # an item's rows folded again
    # the folded rows' anchors, for the rows folded again
    gen_s = np.empty((LEVELS, n))
    gen_c = np.empty((LEVELS, n))
    first = offsets[0]
    for w in range(w0, w1):
        keys = np.full(LEVELS, NO_KEY)
        gen_keys = np.full(LEVELS, NO_KEY)
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
            m = (s1 - s0) * width
            risky = 0  # values that may round otherwise than the folded ones
            for j in range(np.uint64(m)):
                v = out[o0 + j]
                lay[j] = np.float32(v)
                f = round32_risky(v)
                flags[j] = f
                risky += f
            if risky > 0:  # rare: those rows folded again, as add16_kernel folds them
                for r in range(flagged_rows(flags, m, width, again)):
                    p = first + s0 + again[r]
                    if gen_keys[LAST] != (p >> BITS):  # (else every level matches p)
                        anchors_at(p, wh, wl, tc, ts, gen_s, gen_c, gen_keys)
                    t = p & DIGIT
                    k = again[r] * width
                    for i in range(n):
                        sv, cv = add_angle(gen_s[LAST, i], gen_c[LAST, i], tc[t, i], ts[t, i])
                        if interleaved is not None:
                            lay[k + 2 * i] = np.float32(sv)
                            lay[k + 2 * i + 1] = np.float32(cv)
                        else:
                            lay[k + i] = np.float32(sv)
                            lay[k + n + i] = np.float32(cv)
            length = np.uint64((s1 - s0) * ss)
            for b in range(nb):
                d0 = np.uint64(off0 + b * sb + s0 * ss)
                for j in range(length):
                    flat[d0 + j] = finite_from_f32(to_f32(flat[d0 + j], bf16) + lay[j], bf16)
    return 0.0
