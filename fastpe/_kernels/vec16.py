"""LLVM vectors of 16-bit values, for the intrinsics that write them a group at a time
(:mod:`.fractional16`'s grid sums, :mod:`.rows16`'s table rows). Private.

Those intrinsics build LLVM IR themselves: vectors of ``LANES`` float32 values rounded into
16 bits, with one test on the whole group's flags (a branch, or a count with none), which
LLVM's loop vectorizer does not produce from a numba loop. This module holds what they
share: the vector types, the rounding of a float32 vector into 16-bit bits, masked loads
and stores, the loop over a row's groups.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types

# values of one group: one 512-bit vector of float32
LANES = 16

I1, I16, I32, I64 = (ir.IntType(b) for b in (1, 16, 32, 64))
F32 = ir.FloatType()


def vec(ty: ir.Type, lanes: int = LANES) -> ir.VectorType:
    """The LLVM vector of ``lanes`` values of ``ty``."""
    return ir.VectorType(ty, lanes)


def splat(ty: ir.Type, v, lanes: int = LANES) -> ir.Constant:
    """A constant vector of ``lanes`` copies of ``v``."""
    return ir.Constant(vec(ty, lanes), [v] * lanes)


def c_array(a, dtype, ndim: int) -> bool:
    """Whether the numba type ``a`` is a C-contiguous array of ``dtype`` and ``ndim``: what
    an intrinsic's code assumes of its arrays (anything else is a typing error)."""
    return isinstance(a, types.Array) and a.dtype == dtype and a.ndim == ndim and a.layout == "C"


def _hardware_bf16() -> bool:
    """Whether the CPU rounds float32 to bfloat16 itself (x86 AVX512-BF16,
    ``vcvtneps2bf16``). Then LLVM turns ``fptrunc`` to bfloat into that one instruction:
    to nearest even, a NaN kept quiet with its high payload bits (the integer code's
    results), float32 subnormals read as zero: each caller leaves the values below a floor
    far above them to its float64 pass, which writes their bits. Elsewhere LLVM calls a
    library function for it, which the integer code avoids."""
    from llvmlite import binding

    try:
        return "+avx512bf16" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:  # no feature list: the integer code
        return False


HW_BF16 = _hardware_bf16()


class _BFloat(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no such type): only converted to, never a
    constant."""

    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"


_BFloat._create_instance()


def round16(builder: ir.IRBuilder, s, bf16: bool, hw_bf16: bool, keep_nan: bool):
    """The float32 vector ``s`` rounded to nearest even into 16-bit bits (an ``i16``
    vector): float16 by ``fptrunc`` (one instruction where the CPU converts float16, which
    callers check), bfloat16 by ``fptrunc`` where ``hw_bf16`` (see :func:`_hardware_bf16`:
    subnormal inputs read as zero) or else in 32-bit integer operations; ``keep_nan``:
    there a NaN stays a quiet NaN with its high payload bits (one select more)."""
    lanes = s.type.count
    vi16, vi32 = vec(I16, lanes), vec(I32, lanes)
    if not bf16:
        return builder.bitcast(builder.fptrunc(s, vec(ir.HalfType(), lanes)), vi16)
    if hw_bf16:
        return builder.bitcast(builder.fptrunc(s, vec(_BFloat(), lanes)), vi16)
    us = builder.bitcast(s, vi32)
    high = builder.lshr(us, splat(I32, 16, lanes))
    odd = builder.and_(high, splat(I32, 1, lanes))
    r = builder.lshr(
        builder.add(builder.add(us, splat(I32, 0x7FFF, lanes)), odd), splat(I32, 16, lanes)
    )
    if keep_nan:
        nan = builder.fcmp_unordered("uno", s, s)
        r = builder.select(nan, builder.or_(high, splat(I32, 0x40, lanes)), r)
    return builder.trunc(r, vi16)


def masked(builder: ir.IRBuilder, name: str, ty: ir.VectorType) -> ir.Function:
    """LLVM's ``llvm.masked.load`` (``name`` "load") or ``llvm.masked.store`` of vector
    type ``ty`` (``i16``, ``float`` or ``double`` elements; :mod:`.direct` takes the
    last). The names are those of typed pointers, which LLVM upgrades."""
    ptr = ty.as_pointer()
    if name == "load":
        fnty = ir.FunctionType(ty, [ptr, I32, vec(I1, ty.count), ty])
    else:
        fnty = ir.FunctionType(ir.VoidType(), [ty, ptr, I32, vec(I1, ty.count)])
    elem = "i16" if ty.element == I16 else "f32" if ty.element == F32 else "f64"
    suffix = f"v{ty.count}{elem}.p0v{ty.count}{elem}"
    return cgutils.get_or_insert_function(builder.module, fnty, f"llvm.masked.{name}.{suffix}")


def append(builder: ir.IRBuilder, value, out_data, count, by=None) -> None:
    """``out_data[count] = value``, ``count += by`` (``count`` an ``i64`` slot; ``by`` an
    ``i64``, None: 1, or 0 to write an entry without keeping it): the list of groups a pass
    leaves for its float64 pass."""
    c = builder.load(count)
    builder.store(value, builder.gep(out_data, [c], inbounds=True))
    builder.store(builder.add(c, ir.Constant(I64, 1) if by is None else by), count)


def first_lanes(builder: ir.IRBuilder, rest, lanes: int):
    """The ``i1`` vector of ``lanes`` lanes, true in the first ``rest`` (an ``i64``): the
    mask of a last, partial group."""
    vi32 = vec(I32, lanes)
    one = builder.insert_element(
        ir.Constant(vi32, None), builder.trunc(rest, I32), ir.Constant(I32, 0)
    )
    bound = builder.shuffle_vector(one, one, ir.Constant(vi32, [0] * lanes))
    return builder.icmp_unsigned("<", ir.Constant(vi32, list(range(lanes))), bound)


def each_group(builder: ir.IRBuilder, width, group, before=None) -> None:
    """``group(g, lanes)`` for the groups of ``LANES`` of ``width`` (an ``i64``) values:
    ``lanes`` None for each whole group, then the mask of a last, partial one;
    ``before(g)`` (if given) first in each whole group's iteration."""
    whole = builder.udiv(width, ir.Constant(I64, LANES))
    with cgutils.for_range(builder, whole) as loop:
        if before is not None:
            before(loop.index)
        group(loop.index, None)
    rest = builder.urem(width, ir.Constant(I64, LANES))
    with builder.if_then(builder.icmp_unsigned("!=", rest, ir.Constant(I64, 0))):
        group(whole, first_lanes(builder, rest, LANES))
