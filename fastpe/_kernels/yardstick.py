"""Bandwidth yardsticks: the simplest kernels that stream the same bytes as fastpe's.

Serial kernels with the same work split as fastpe's (workers ``w0 .. w1 - 1`` of
``n_workers`` contiguous ranges), run on the same thread pool by
:func:`fastpe._engine.stream`, so that a kernel and its yardstick are measured the same way.
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .angles import worker_items
from .stream import LINE, stream_carry, stream_fence

# Each worker's loop runs over a slice from index 0: the index is then known to be
# non-negative, so numba emits no wraparound check and LLVM vectorizes the loop (over
# a[i0:i1] directly it stayed scalar, and the yardstick measured the core, not memory).


@kernel()
def _scale(b, factor):
    for i in range(b.shape[0]):
        b[i] *= factor


@kernel()
def _fill(b, value):
    for i in range(b.shape[0]):
        b[i] = value


@kernel()
def scale_inplace(w0, w1, a, factor, n_workers):
    """``a *= factor`` over a contiguous 1-D array: the read+write yardstick."""
    for w in range(w0, w1):
        i0, i1 = worker_items(a.shape[0], w, n_workers)
        _scale(a[i0:i1], factor)
    return 0.0


@kernel()
def scale_columns(w0, w1, a, row, width, factor, n_workers):
    """``a[r*row : r*row + width] *= factor`` for every row ``r`` of a contiguous 1-D array.

    The read+write yardstick of partial rotary: the same bytes as the rotated channels.
    """
    for w in range(w0, w1):
        r0, r1 = worker_items(a.shape[0] // row, w, n_workers)
        for r in range(r0, r1):
            _scale(a[r * row : r * row + width], factor)
    return 0.0


@kernel()
def fill(w0, w1, a, value, n_workers):
    """``a[:] = value`` over a contiguous 1-D array: the write-only yardstick."""
    for w in range(w0, w1):
        i0, i1 = worker_items(a.shape[0], w, n_workers)
        _fill(a[i0:i1], value)
    return 0.0


STREAM_ROW = 64 * LINE  # bytes per streamed row of fill_stream (4 KiB)


@kernel()
def fill_stream(w0, w1, a, value, n_workers):
    """``a[:] = value`` by streaming stores: the write-only yardstick of kernels that stream
    (:mod:`.stream`), which write lines without reading them first. Each worker's span in
    rows of ``STREAM_ROW`` bytes, one run of :func:`~.stream.stream_carry` (every line
    the span covers whole by streaming stores, as the tables write rows that lie back to
    back), the fastest way this code writes those bytes: row by row through
    :func:`~.stream.stream_row` (two partial lines a row by plain stores where ``a`` starts
    off a line, as NumPy's large arrays do), the yardstick took 1.12x as long (1 GiB
    float32, 2 threads, scratch: 22.8-23.4 ms against 20.3-21.1)."""
    per = STREAM_ROW // a.itemsize
    lead = LINE // a.itemsize
    row = np.full(lead + per, value, dtype=a.dtype)
    for w in range(w0, w1):
        i0, i1 = worker_items(a.shape[0], w, n_workers)
        carry = -1
        for i in range(i0, i1, per):
            count = min(per, i1 - i)
            carry = stream_carry(a, i, row, lead, count, carry, i + count == i1)
        stream_fence()
    return 0.0
