"""Where streaming stores start to pay for tables: plain stores against streaming ones by size.

Usage::

    python bench/stream_sizes.py                 # 8 MiB to 512 MiB, 3 runs
    python bench/stream_sizes.py --runs 5 --repeat 21
    python bench/stream_sizes.py --dtypes float32 --sizes 16 64 256

A table as large as the memory a core can keep in cache is written faster by streaming
stores (each line written to memory whole, without first reading it), while a smaller one
written by plain stores stays in cache, where whoever reads it next finds it. The engine
streams tables from ``fastpe._engine.streamed``'s bound up (twice
``fastpe._timing.cache_share_bytes``). For each size and dtype, a ``(rows, 1024)``
interleaved table is written into ``out=`` both ways (``_engine._STREAM_MIN_BYTES`` set to
0 or past the array: past it, the way the engine writes tables below the bound, which for
float32 and float64 tables from 4 MiB is the direct pass by plain stores,
``_engine.plain_direct``, except on ``znver3``: ``table_kernel``'s rows), in rounds:
``--block`` calls one way back to back, then as many the
other way, the median of each block taken; the figure is the median over ``--repeat``
rounds of the ratios ``t_plain / t_streamed`` (above 1: streaming is faster). Blocks, not
alternate calls (``fastpe._timing.interleaved``): each way leaves the array where the next
call finds it (plain stores: in cache as far as it fits; streaming stores: in memory), so
an alternate call would time each way from the other's cache state; in a block, all but the
first call start from their own. The column "then read" times the same table followed by
an ``a *= s`` over it on the same thread pool (a reader of the table, which finds a plainly
written table in cache as far as it stayed there). Each row gives every run's figure,
their median and range (none set aside), and which way the engine writes that size.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import fastpe
from fastpe import _engine, _timing

SIZES_MIB = (8, 16, 32, 64, 128, 256, 512)


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def calls(out: np.ndarray, bound: int, read: bool):
    """The table into ``out`` with the stream bound ``bound`` (and then ``a *= s`` over
    it where ``read``)."""

    def call():
        saved = _engine._STREAM_MIN_BYTES
        _engine._STREAM_MIN_BYTES = bound
        try:
            fastpe.sinusoidal_table(out.shape[0], out.shape[1], dtype=out.dtype, out=out)
        finally:
            _engine._STREAM_MIN_BYTES = saved
        if read:
            _engine.stream("scale", out.view(np.uint16) if out.itemsize == 2 else out)

    return call


def rounds(a, b, repeat: int, block: int) -> float:
    """The median over ``repeat`` rounds of ``t_a / t_b``, each the ratio of the medians of
    ``block`` calls of ``a`` back to back and then of ``b`` (after one untimed call each
    and fastpe's pause)."""
    a()
    b()
    _timing.settle()
    ratios = []
    for _ in range(repeat):
        ta = statistics.median(_timing.timed(a) for _ in range(block))
        tb = statistics.median(_timing.timed(b) for _ in range(block))
        ratios.append(ta / tb)
    return statistics.median(ratios)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7, help="rounds per figure")
    ap.add_argument("--block", type=int, default=5, help="calls one way per round")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES_MIB), help="MiB")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64", "float16"])
    args = ap.parse_args(argv)
    rows = [(_dtype(d), mib) for d in args.dtypes for mib in args.sizes]
    got = {(i, read): [] for i in range(len(rows)) for read in (False, True)}
    engine = []
    for run in range(args.runs):
        for i, (dt, mib) in enumerate(rows):
            out = np.zeros(((mib << 20) // (1024 * dt.itemsize), 1024), dt)
            for read in (False, True):
                never = calls(out, 1 << 62, read)
                always = calls(out, 0, read)
                got[i, read].append(rounds(never, always, args.repeat, args.block))
            if run == 0:
                flat = out.reshape(-1)
                engine.append("streamed" if _engine.streamed(out, flat, 1) else "plain")
            del out
    llc = _timing.last_level_cache_bytes() >> 20
    share = _timing.cache_share_bytes() >> 20
    print(
        f"last-level cache reported: {llc} MiB, counted on: {share} MiB; "
        f"{args.runs} runs of {args.repeat} rounds of {args.block} calls each way; "
        "t_plain / t_streamed"
    )
    print("| dtype | MiB | table alone, per run | median (range) | then read, per run "
          "| median (range) | the engine |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for i, (dt, mib) in enumerate(rows):
        cells = []
        for read in (False, True):
            r = got[i, read]
            cells.append(", ".join(f"{x:.2f}" for x in r))
            cells.append(f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})")
        print(f"| {dt.name} | {mib} | " + " | ".join(cells) + f" | {engine[i]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
