"""Scans of ``(batch, seq)`` position arrays, for the engine's choice of walk.

Per-row positions decide how ``apply_rope`` walks its work: rows that are all alike run
as shared positions, rows made of long runs of consecutive positions (packed sequences)
walk positions (:func:`~.rope.rope_runs_kernel`). NumPy found that out in several passes
over the whole array with temporaries as large as it, on one thread while the kernel
waited; these two scans (count, then fill) read it without temporaries, in parts on
fastpe's threads (``fastpe._engine.in_parts``). ``scan_rows`` also bounds the range of the
positions, which ``apply_rope`` checks there rather than in another pass (the argument
layer's check, which the reference shares, stays in NumPy).
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .args import RUN_FIRST, RUN_LENGTH, RUN_ROW, RUN_START


@kernel(inline=True)
def _breaks(pos, b, s):
    """Whether a run ends before ``pos[b, s]`` (``s >= 1``): the one test both scans use."""
    return pos[b, s] != pos[b, s - 1] + 1


# positions within 2**53 in magnitude are those with 0 <= p + _SHIFT <= 2**54
_SHIFT = np.int64(2**53)


@kernel()
def scan_rows(pos, b0, b1):
    """``(alike, n_runs, bits)`` of rows ``b0 .. b1 - 1`` of the ``(nb, ns)`` int64 ``pos``:
    whether each equals row 0, how many runs of consecutive positions
    (``pos[b, s + 1] == pos[b, s] + 1``) they hold (a run never crosses a row), and the
    bitwise or of every ``p + 2**53`` (wrapping), for a range check in one add and one or:
    every position is within 2**53 in magnitude when ``0 <= bits < 2**54``. Otherwise some
    may not be (``2**53`` itself is, and sets bit 54): the caller checks them exactly."""
    ns = pos.shape[1]
    diff = np.int64(0)
    breaks = np.int64(0)
    bits = np.int64(0)
    for b in range(b0, b1):
        diff |= pos[b, 0] ^ pos[0, 0]
        bits |= pos[b, 0] + _SHIFT
        for s in range(1, ns):
            breaks += np.int64(_breaks(pos, b, s))
            diff |= pos[b, s] ^ pos[0, s]
            bits |= pos[b, s] + _SHIFT
    return diff == 0, breaks + (b1 - b0), bits


@kernel()
def fill_runs(pos, b0, b1, out, k0, k1):
    """Write the runs of rows ``b0 .. b1 - 1`` of ``pos`` (as counted by :func:`scan_rows`)
    to ``out[k0:k1]``: int64 rows ``(b, s0, length, p0)`` in the columns of :mod:`.args`
    (``RUN_*``), in row-major order. Returns the end of what it wrote: ``k1`` unless the
    positions changed since they were counted (then fewer rows, and never past ``k1``)."""
    ns = pos.shape[1]
    k = k0
    for b in range(b0, b1):
        start = 0
        for s in range(1, ns + 1):
            if s == ns or _breaks(pos, b, s):
                if k == k1:
                    return k + 1  # more runs than counted: the caller refuses the runs
                out[k, RUN_ROW] = b
                out[k, RUN_START] = start
                out[k, RUN_LENGTH] = s - start
                out[k, RUN_FIRST] = pos[b, start]
                k += 1
                start = s
    return k
