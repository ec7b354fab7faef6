"""Streaming (non-temporal) stores for kernels that write whole rows and never read them.

A plain store to a line that is not in cache first reads the line from memory (a "read
for ownership") and writes it back later: twice the bytes a table needs, and a core that
stalls on those reads while it could compute the next values. A kernel that writes a large
table row by row instead computes each row into a small buffer that stays in L1 and copies
it out with non-temporal stores (:func:`stream_row`), which send whole lines to memory
without reading them and leave the cache to data that is used again. Only whole lines: a
line that a row shares with its neighbour (rows not aligned to 64 bytes) is written by plain
stores, as a line written partly each way was slower than plain stores alone (a scratch
comparison while this was written). Such a line's plain stores read it from memory first,
and the streaming stores queued behind them wait for that read: the rows of an array that
does not start on a line (NumPy's large arrays start 16 bytes past one) each have two, so
:func:`stream_row` prefetches them, for writing, ``STREAM_AHEAD_BYTES`` ahead. Rows that
lie back to back (a C-contiguous table, the cells of a grid) need not each have two:
:func:`stream_carry` writes them as runs (a worker's rows of a table, each span of a grid's
cells), a row's last partial line held back and streamed whole with the next row's first
elements, so that only a run's first and last lines take plain stores (``bench/alignment.py``
on the rocketlake host: off / on 0.93-0.97 where ``stream_row`` left 1.03-1.25; README,
"Rows back to back streamed as one run"). 16-bit tables go row by row on Zen 5; elsewhere
their rows back to back carry the shared line the same way, and each row's lines stream
while the next row is computed (``half.table16_kernel``'s ``trail``).
``bench/alignment.py`` (each table written 16 bytes past a line and on one) measured the
cost of the start off/on at 1.18-1.23 before for the float32 half-layout table, 1.48-1.60
for float16, 1.28-1.30 for a 2-D grid table, and 1.00-1.12 with the prefetch (in the slow
state; in scratch runs in the fast one, the float32 half table took 21.6 ms against 32.9
before, the grid table 14.4 against 29.3; README, "Streamed rows off the line"). Only for
arrays larger than the cache (the engine's
``_STREAM_MIN_BYTES``): a table that fits there is read back faster from it than from
memory. A non-temporal store is weakly ordered, so each worker ends with
:func:`stream_fence` before it returns.

Large float32 and float64 tables whose rows fit :mod:`.direct` (a multiple of a line's
pairs, interleaved rows at an even element of their line: ``_engine.direct_rows``) skip the
buffer: that module computes their rows a line at a time and streams each line as it comes,
with the same carry of a line that two rows share.

The values written are the same: only how they travel to memory changes.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._config import kernel
from .prefetch import _prefetch

LINE = 64  # bytes of a cache line
STREAM_BYTES = 32  # bytes of one streaming store (LLVM splits it where vectors are narrower)
# how far ahead of a row the partial lines of a later row are prefetched (see stream_ahead)
STREAM_AHEAD_BYTES = 16 * 1024


def _pointer(context, builder, aryty, ary_value, idx):
    ary = context.make_array(aryty)(context, builder, ary_value)
    return cgutils.get_item_pointer(
        context, builder, aryty, ary, [idx], wraparound=False, boundscheck=False
    )


@intrinsic
def _address(typingctx, arr, idx):
    """The address of ``arr.flat[idx]`` as an unsigned integer (``idx`` within ``arr``)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ptr = _pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.ptrtoint(ptr, ir.IntType(64))

    return types.uint64(arr, idx), codegen


@intrinsic
def _stream32(typingctx, dst, di, src, si):
    """Copy the ``STREAM_BYTES`` bytes at ``src.flat[si]`` to ``dst.flat[di]`` with a
    non-temporal store (LLVM's ``!nontemporal``). ``dst.flat[di]`` must be aligned to
    ``STREAM_BYTES`` (the store faults otherwise); both spans must lie within the arrays."""
    if not (
        isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and dst.ndim == src.ndim == 1
        and dst.dtype == src.dtype  # a copy of bytes: the same element type on both sides
        and isinstance(di, types.Integer)
        and isinstance(si, types.Integer)
    ):
        return None

    def codegen(context, builder, signature, args):
        dty, _, sty, _ = signature.args
        dp = _pointer(context, builder, dty, args[0], args[1])
        sp = _pointer(context, builder, sty, args[2], args[3])
        vec = ir.VectorType(ir.IntType(64), STREAM_BYTES // 8).as_pointer()
        v = builder.load(builder.bitcast(sp, vec), align=1)
        st = builder.store(v, builder.bitcast(dp, vec), align=STREAM_BYTES)
        one = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        st.set_metadata("nontemporal", one)
        return context.get_dummy_value()

    return types.void(dst, di, src, si), codegen


def _x86() -> bool:
    import platform

    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


@intrinsic
def _sfence(typingctx):
    """Order the streaming stores before every later store (x86 ``sfence``; a full fence
    elsewhere)."""

    def codegen(context, builder, signature, args):
        if _x86():
            fnty = ir.FunctionType(ir.VoidType(), [])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse.sfence")
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@kernel(inline=True)
def stream_row(flat, base, row, count, stride):
    """``flat[base:base + count] = row[:count]``, the whole lines by streaming stores.

    The elements before the first line boundary and after the last one are copied by plain
    stores; an array whose elements are not aligned to their own size (no element then
    starts a line) by plain stores only. ``stride``: elements from this row to the next
    one the caller writes (``count`` for contiguous rows); see :func:`stream_ahead`. Rows
    that lie back to back go out faster as one run (:func:`stream_carry`).
    """
    stream_ahead(flat, base, count, stride)
    size = flat.itemsize
    per = STREAM_BYTES // size
    mask = np.uint64(LINE - 1)  # unsigned throughout: uint64 with int64 is a float
    gap = np.int64((np.uint64(LINE) - (_address(flat, base) & mask)) & mask)
    head = count
    if gap % size == 0:
        head = min(count, gap // size)
    for i in range(head):
        flat[base + i] = row[i]
    i = head
    while i + 2 * per <= count:  # whole lines only
        _stream32(flat, base + i, row, i)
        _stream32(flat, base + i + per, row, i + per)
        i += 2 * per
    for k in range(i, count):
        flat[base + k] = row[k]


@kernel(inline=True)
def stream_ahead(flat, base, count, stride):
    """Of the row of ``count`` elements at ``flat[base]``, the one ``STREAM_AHEAD_BYTES`` on
    (in rows of ``stride``): its first line prefetched for writing where the row starts
    within it, its last where it ends within it (see the module); a line the streaming
    stores write whole is not (it would be read for nothing). Nothing for ``count`` 0."""
    size = flat.itemsize
    mask = np.uint64(LINE - 1)
    if count > 0:
        ahead = base + max(1, STREAM_AHEAD_BYTES // max(1, abs(stride) * size)) * stride
        last = flat.size - 1
        first = min(last, max(0, ahead))
        end = min(last, max(0, ahead + count - 1))
        if (_address(flat, first) & mask) != 0:
            _prefetch(flat, first)
        if ((_address(flat, end) + np.uint64(size)) & mask) != 0:
            _prefetch(flat, end)


@kernel(inline=True)
def stream_carry(flat, base, row, lead, count, carry, last):
    """One of a run of rows written back to back (each row's first element right after the
    previous row's last, as in a C-contiguous table): ``flat[base:base + count] =
    row[lead:lead + count]``, every line the run covers whole by streaming stores, the
    lines two rows of the run share included. Returns the next row's ``carry``.

    ``carry``: -1 for the first row of a run, whose elements before the first line
    boundary are copied by plain stores; else the previous row's elements after its last
    whole line, not yet written, which the previous call left in ``row[lead - carry:lead]``
    (the caller writes each row at ``row[lead:]`` and leaves ``row[:lead]`` alone): they
    go out with this row's first line. The new carry, this row's elements after its last
    whole line, is moved there (fewer than a line: ``lead`` must be at least a line's
    elements); with ``last`` (the run's last row) they are copied by plain stores instead,
    and -1 returned. A run thus shares only its first and last lines with other writers,
    where :func:`stream_row` copies the two partial lines of every row off a line (NumPy's
    large arrays start 16 bytes past one) by plain stores, which read their lines from
    memory first and hold up the streaming stores queued behind them. Elements not
    aligned to their size: plain stores only (and -1); a first row that ends before the
    first line boundary: plain stores, and the next row starts the run again (-1).
    """
    size = flat.itemsize
    per = STREAM_BYTES // size
    mask = np.uint64(LINE - 1)
    # one return, and no branch around the arrays' uses: numba inlines this into row loops,
    # where such a branch kept the arrays' reference counts (atomic, per row)
    again = False  # the next row starts the run again
    if carry < 0:
        gap = np.int64((np.uint64(LINE) - (_address(flat, base) & mask)) & mask)
        again = gap % size != 0 or count < gap // size
        i = count if again else gap // size
        for k in range(i):
            flat[base + k] = row[lead + k]
    else:
        i = -carry  # flat[base - carry] starts a line
    while i + 2 * per <= count:  # whole lines only
        _stream32(flat, base + i, row, lead + i)
        _stream32(flat, base + i + per, row, lead + i + per)
        i += 2 * per
    # the rest, fewer than a line (more than count where i < 0: the carry too): written by
    # plain stores at the end of the run, else carried (loops of zero trips, not branches)
    for k in range(i, count if last else i):
        flat[base + k] = row[lead + k]
    t = -1 if last or again else count - i
    for k in range(max(t, 0)):  # a forward copy: the spans may overlap
        row[lead - t + k] = row[lead + i + k]
    return t


@kernel(inline=True)
def stream_next(flat, base, row, lead, count, stride, run, carry, last):
    """Copy one row, computed at ``row[lead:lead + count]``, to ``flat[base:]`` by streaming
    stores, and return the next row's carry: with ``run`` (the caller's rows lie back to
    back: ``stride == count``) as a row of a run of :func:`stream_carry` (``last``: the
    run's last row), else as a run of its own, its partial lines prefetched ahead as
    :func:`stream_row` does. No branch between the two: one around the arrays' uses kept
    their reference counts, atomic, per row (1 GiB float32 table 1.5x slower on one
    thread, scratch)."""
    stream_ahead(flat, base, 0 if run else count, stride)
    return stream_carry(flat, base, row, lead, count, carry if run else -1, last or not run)


@kernel()
def stream_fence():
    """Make a worker's streaming stores visible before it returns (see the module)."""
    _sfence()
