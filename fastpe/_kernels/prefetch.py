"""Software prefetch for the kernels' streaming row loops.

Loops that spend enough time per cache line (the 16-bit conversions, or adding a table to
each row) leave each core waiting on memory when only the hardware prefetchers fetch ahead:
one prefetch per line, 2 KiB ahead of the row being worked on, took a streaming float16
interleaved rotation from 0.67 to 0.23 ns per element on one core (the speed per byte of
float32), and changes no value (a prefetch is a hint: it reads nothing and cannot fault).
The float32/float64 half-layout rotation of rows of 1-4 KiB (from 512 bytes on Zen 5:
``fastpe._engine.zen5_or_later``) prefetches too (the ``prefetch`` mode of
``fastpe._engine.MODES``): its loop reads and writes each row's two halves side by side,
and waited on memory without it; on CPUs other than Zen 5 so do interleaved rows of 512
bytes to 4 KiB with several heads a position, and of 2-4 KiB with one
(``fastpe._engine.prefetch_interleaved``). On the CPUs of ``fastpe._engine.prefetch_512``
rows of either layout prefetch from 512 bytes in arrays of at least the cache counted on
(one head a position from 256 bytes, from 128 where partial rotary leaves channels between:
``fastpe._engine._PREFETCH_SHORT_BYTES``).
So does float32 ``add_sinusoidal`` where each table row
serves one row of x, for rows of 1-4 KiB in the half layout (either layout on Zen 5): it
prefetches the next row; where several batch rows share each table row, the block after
next of each batch row as it adds one (``SUM_BLOCK_BYTES`` in :mod:`.tables`). On Zen 5
these prefetch only in arrays at least as large as the last-level cache, on the CPUs of
``fastpe._engine._PREFETCH_BOUND_CPUS`` from half of it, one-row sums at every size
(``fastpe._engine.prefetch_fits``: in cache they cost more than they gave). Grid sums
prefetch each cell's lines a distance of their own ahead
(``fastpe.conventions.GRID_AHEAD_BYTES``: 8 KiB for float32/float64, on Zen 5; on the
CPUs of ``fastpe.conventions._PACED_GRID_CPUS`` paced instead, 256 bytes at a time 6 KiB
ahead, in arrays of at least the cache counted on; ``GRID_AHEAD16_BYTES``, 2 KiB per
block of channels, for 16-bit ones, paced on those CPUs in such arrays, each group of 16
values 4 KiB ahead: ``fastpe.conventions.grid16_prefetch``). 16-bit
``add_sinusoidal`` prefetches each row of x 2 KiB ahead, 8 KiB on Zen 5
(``fastpe._engine.add16_ahead_bytes``), but where several batch rows share each table row
in arrays of 64 MiB and more off Zen 5: there the block after next of each batch row, as
float32 (``fastpe._engine.add16_block``). On Zen 5, RoPE with positions per batch row that
share no cos/sin prefetches each position's rows while it computes their cos/sin
(``fastpe._engine.fill_ahead``), in arrays as large as the last-level cache. Elsewhere
such rows, and one batch row of one head, are rotated as their cos/sin are computed
(:func:`~.direct.rope_pass`), which prefetches each line ``AHEAD_BYTES`` ahead as it goes
(4 KiB in large arrays on the CPUs of ``fastpe._engine.prefetch_512``:
``fastpe._engine.line_ahead_bytes``) (past the array's end too: a prefetch of an address
nothing holds is dropped).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import kernel

AHEAD_BYTES = 2048  # how far ahead of a row's start its lines are prefetched
LINE_BYTES = 64


def hint_line(builder: ir.IRBuilder, ptr) -> None:
    """Emit a hint to the CPU to fetch the line at ``ptr`` (an ``i8*``) for writing (LLVM's
    ``llvm.prefetch``): a hint, whatever the address (the code of the intrinsics)."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    # (address, write, high locality, data cache)
    builder.call(fn, [ptr, ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to fetch the cache line of ``arr.flat[idx]`` for writing (LLVM's
    ``llvm.prefetch``). ``idx`` must lie within ``arr``."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(
            context, builder, aryty, ary, [args[1]], wraparound=False, boundscheck=False
        )
        hint_line(builder, builder.bitcast(ptr, ir.IntType(8).as_pointer()))
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@kernel(inline=True)
def prefetch_lines(flat, base, count):
    """Prefetch the lines of ``flat[base:][:count]`` (``base >= 0``), clipped to ``flat``'s
    last element."""
    last = flat.size - 1
    for q in range(0, count, LINE_BYTES // flat.itemsize):
        _prefetch(flat, min(last, base + q))


@kernel(inline=True)
def prefetch_ahead(flat, base, count):
    """Prefetch the lines of ``flat[base + AHEAD_BYTES / itemsize:][:count]``, clipped to
    ``flat``'s last element."""
    prefetch_lines(flat, base + AHEAD_BYTES // flat.itemsize, count)
