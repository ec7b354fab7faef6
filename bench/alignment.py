"""Streamed writes into an array that starts on a cache line against one that does not.

Usage::

    python bench/alignment.py            # ~1 GiB arrays, 7 rounds
    python bench/alignment.py --rounds 9

NumPy's large arrays start 16 bytes past a 64-byte line (the allocator's header before an
mmap'd block), so every row of a large table written into them starts and ends within a
line. Those partial lines are written by plain stores, which read the line from memory
first; ``fastpe._kernels.stream.stream_row`` prefetches them for writing a few rows ahead,
and the float32 and float64 tables, grid tables and the yardstick, whose rows lie back to
back, stream them as runs (``stream_carry``: a worker's rows, each span of a grid's cells),
with plain stores only at each run's two ends.
This script writes the streamed tables (float32 half layout, float64, float16 and, with
the ``bf16`` extra, bfloat16; these two stream on Zen 5 only, and elsewhere take plain
stores, which the prefetch does not touch), a 2-D grid table and the ``fill_stream``
yardstick into two views of one buffer: one that starts on a line ("on") and one 16 bytes
past it ("off").
Each round times every case once, one after another (nothing else running; the rounds
interleave the cases, so a change of the machine's memory state reaches all of them); each
row gives the median and range over the rounds, and the median of the per-round ratios
off / on (1.0: the start does not matter).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from roofline import _half_dtypes

import fastpe
from fastpe import _engine, _timing


def views(dtype, shape):
    """Two views of one buffer: starting on a 64-byte line, and 16 bytes past it."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    raw = np.zeros(n + 128 // dt.itemsize, dt)
    on = ((-raw.ctypes.data) % 64) // dt.itemsize
    off = on + 16 // dt.itemsize
    return raw[on : on + n].reshape(shape), raw[off : off + n].reshape(shape)


def cases():
    out = []
    for dt, rows, layout in [
        (np.float32, 262144, "half"),
        (np.float64, 131072, "interleaved"),
        *[(d, 524288, "interleaved") for d in _half_dtypes()],
    ]:
        label = f"sinusoidal_table {rows}x1024 {np.dtype(dt).name} {layout}"
        pair = views(dt, (rows, 1024))
        out.append(
            (
                label,
                [
                    (
                        lambda t=t, r=rows, lay=layout: fastpe.sinusoidal_table(
                            r, 1024, out=t, layout=lay
                        )
                    )
                    for t in pair
                ],
            )
        )
    pair = views(np.float32, (512 * 512, 1024))
    out.append(
        (
            "grid_sinusoidal 512x512, 1024 channels, float32",
            [(lambda t=t: fastpe.grid_sinusoidal((512, 512), 1024, out=t)) for t in pair],
        )
    )
    pair = views(np.float32, (262144, 1024))
    out.append(
        (
            "fill_stream (the tables' yardstick) 1 GiB float32",
            [(lambda t=t: _engine.stream("fill_stream", t)) for t in pair],
        )
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    table = cases()
    for _, fs in table:  # compiled (or loaded) and the pages touched before any timing
        for f in fs:
            f()
    times: list[list[list[float]]] = [[[], []] for _ in table]
    for _ in range(args.rounds):
        for i, (_, fs) in enumerate(table):
            for k, f in enumerate(fs):
                _timing.settle()
                times[i][k].append(1e3 * _timing.timed(f))
    print(
        f"| case | on a line: ms, median (range) | 16 bytes past: ms, median (range) "
        f"| off / on, median over {args.rounds} rounds |"
    )
    print("|---|---|---|---|")
    for (label, _), (on, off) in zip(table, times):
        ratio = statistics.median(b / a for a, b in zip(on, off))
        print(
            f"| {label} | {statistics.median(on):.1f} ({min(on):.1f}-{max(on):.1f}) "
            f"| {statistics.median(off):.1f} ({min(off):.1f}-{max(off):.1f}) | {ratio:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
