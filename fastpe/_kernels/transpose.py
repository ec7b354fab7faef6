"""A 4 x 4 transpose of float64 values in vector registers, for the lanes kernels (into
float64 or, each value rounded once, float32).

:func:`~.tables.lanes_rows` steps ``GROUP_LANES`` groups of positions side by side, so a
step leaves the values of one pair for consecutive groups next to one another, while a
table row holds the values of one position next to one another. Copying them across one
value at a time took a scalar load and a scalar store per value (a quarter of the time
of a 2- or 4-channel table in one-thread profiles); :func:`transpose4` moves 16 values with
four vector loads, eight shuffles and four vector stores; :func:`transpose2` moves 8 (two
pairs of a half-layout row past a multiple of four). The values are copied, not computed:
the bits are those of the scalar copy.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .stream import _pointer


def _typed(src, dst, ints) -> bool:
    """Whether the transposes' arguments have the types their code assumes: C-contiguous
    1-D arrays (flat offsets), float64 from, float64 or float32 to (each value rounded
    once, as a scalar copy rounds it), and 64-bit integer indices."""
    return (
        isinstance(src, types.Array)
        and isinstance(dst, types.Array)
        and src.dtype == types.float64
        and dst.dtype in (types.float64, types.float32)
        and src.ndim == dst.ndim == 1
        and src.layout == dst.layout == "C"
        and all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in ints)
    )


@intrinsic
def transpose4(typingctx, src, i0, i1, i2, i3, dst, d, stride):
    """``dst[d + k*stride + j] = src[i_j + k]`` for ``j, k`` in ``0 .. 3``: the four runs of
    four values at ``src[i0:]`` .. ``src[i3:]`` become four runs ``dst[d + k*stride:]``,
    each taking value ``k`` of every source run, in order.

    C-contiguous float64 1-D arrays (``dst`` float32 too: each value rounded once to
    nearest) and 64-bit integer indices (other types do not compile); every index must lie
    within its array with its whole run (no bounds check: the caller's loop guarantees
    it), and the destination runs must not overlap the sources.
    """
    if not _typed(src, dst, (i0, i1, i2, i3, d, stride)):
        return None

    def codegen(context, builder, signature, args):
        sty, _, _, _, _, dty, _, _ = signature.args
        src_v, a0, a1, a2, a3, dst_v, dd, step = args
        vec = ir.VectorType(ir.DoubleType(), 4)
        vptr = vec.as_pointer()
        rows = []
        for idx in (a0, a1, a2, a3):
            p = _pointer(context, builder, sty, src_v, idx)
            rows.append(builder.load(builder.bitcast(p, vptr), align=8))

        def mask(*m):
            return ir.Constant(ir.VectorType(ir.IntType(32), 4), list(m))

        # pairs of rows interleaved, then their halves joined: column k of the 4 x 4 block
        t0 = builder.shuffle_vector(rows[0], rows[1], mask(0, 4, 2, 6))
        t1 = builder.shuffle_vector(rows[0], rows[1], mask(1, 5, 3, 7))
        t2 = builder.shuffle_vector(rows[2], rows[3], mask(0, 4, 2, 6))
        t3 = builder.shuffle_vector(rows[2], rows[3], mask(1, 5, 3, 7))
        cols = (
            builder.shuffle_vector(t0, t2, mask(0, 1, 4, 5)),
            builder.shuffle_vector(t1, t3, mask(0, 1, 4, 5)),
            builder.shuffle_vector(t0, t2, mask(2, 3, 6, 7)),
            builder.shuffle_vector(t1, t3, mask(2, 3, 6, 7)),
        )
        at, st = dd, step  # 64-bit integers (the typing above)
        for col in cols:
            p = _pointer(context, builder, dty, dst_v, at)
            if dty.dtype == types.float32:  # each value rounded once, as a scalar copy
                v32 = ir.VectorType(ir.FloatType(), 4)
                ptr = builder.bitcast(p, v32.as_pointer())
                builder.store(builder.fptrunc(col, v32), ptr, align=4)
            else:
                builder.store(col, builder.bitcast(p, vptr), align=8)
            at = builder.add(at, st)
        return context.get_dummy_value()

    return types.void(src, i0, i1, i2, i3, dst, d, stride), codegen


@intrinsic
def transpose2(typingctx, src, i0, i1, dst, d, stride):
    """``dst[d + k*stride + j] = src[i_j + k]`` for ``j`` in ``0 .. 1`` and ``k`` in ``0 ..
    3``: two runs of four values become four runs of two (the pairs of a half-layout row
    past a multiple of four, :func:`~.tables.lanes_rows`). The types and guarantees of
    :func:`transpose4`."""
    if not _typed(src, dst, (i0, i1, d, stride)):
        return None

    def codegen(context, builder, signature, args):
        sty, _, _, dty, _, _ = signature.args
        src_v, a0, a1, dst_v, dd, step = args
        vec4 = ir.VectorType(ir.DoubleType(), 4)
        vec2 = ir.VectorType(ir.DoubleType(), 2)
        rows = []
        for idx in (a0, a1):
            p = _pointer(context, builder, sty, src_v, idx)
            rows.append(builder.load(builder.bitcast(p, vec4.as_pointer()), align=8))
        at = dd
        for k in range(4):
            mask = ir.Constant(ir.VectorType(ir.IntType(32), 2), [k, 4 + k])
            col = builder.shuffle_vector(rows[0], rows[1], mask)
            p = _pointer(context, builder, dty, dst_v, at)
            if dty.dtype == types.float32:
                v32 = ir.VectorType(ir.FloatType(), 2)
                ptr = builder.bitcast(p, v32.as_pointer())
                builder.store(builder.fptrunc(col, v32), ptr, align=4)
            else:
                builder.store(col, builder.bitcast(p, vec2.as_pointer()), align=8)
            at = builder.add(at, step)
        return context.get_dummy_value()

    return types.void(src, i0, i1, dst, d, stride), codegen
