"""Mid-sized calls (1-8 MiB) on the caller's thread against the thread pool.

Usage::

    python bench/handoff.py            # 3 runs, median and range per row
    python bench/handoff.py --runs 5

fastpe runs a call over at most ``fastpe._engine.serial_bytes()`` bytes on the caller's
thread: 4 MiB on Zen 5, 1 MiB elsewhere. This measures both ways of running the same calls
in one process: RoPE (``(4, s, 32, 128)`` float32, half layout, in place), the interleaved
table (``(rows, 1024)`` float32 into ``out=``) and ``add_sinusoidal`` (``(8, s, 1024)``
float32, in place), the host's bound (``rule``) against every call over 1 MiB on the pool
(``pool``, the bound before), alternated, 15 calls each, median per call; each run gives
``t_pool / t_rule`` (above 1: the rule is faster) and each row the median and range of its
runs. The rule and the pool run the same code where the bound is below the row's size.
The first line gives the handoff (``fastpe._engine.handoff_seconds``: the median time of
15 handoffs to the pool that do nothing), for reference: the engine does not time it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fastpe
from fastpe import _engine

SIZES_MIB = (2, 4, 6, 8)


def build(op: str, mib: int):
    n = (mib << 20) // 4
    rng = np.random.default_rng(0)
    if op == "apply_rope":
        x = rng.standard_normal((4, n // (4 * 32 * 128), 32, 128)).astype(np.float32)
        return lambda: fastpe.apply_rope(x, out=x, layout="half")
    if op == "sinusoidal_table":
        t = np.zeros((n // 1024, 1024), np.float32)
        return lambda: fastpe.sinusoidal_table(t.shape[0], 1024, out=t)
    x = rng.standard_normal((8, n // (8 * 1024), 1024)).astype(np.float32)
    return lambda: fastpe.add_sinusoidal(x, out=x)


def per_call(fn, bound: int, calls: int) -> float:
    _engine._SERIAL_BYTES = bound
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calls", type=int, default=15)
    args = ap.parse_args(argv)
    rule = _engine.serial_bytes()
    handoff = _engine.handoff_seconds()
    zen5 = _engine.host_zen5()
    table = [
        (op, mib)
        for op in ("apply_rope", "sinusoidal_table", "add_sinusoidal")
        for mib in SIZES_MIB
    ]
    got: list[list[tuple[float, float]]] = [[] for _ in table]
    for _ in range(args.runs):
        for i, (op, mib) in enumerate(table):
            fn = build(op, mib)
            pool = per_call(fn, _engine._SERIAL_MIN_BYTES, args.calls)
            ruled = per_call(fn, rule, args.calls)
            got[i].append((pool, ruled))
    _engine._SERIAL_BYTES = rule
    print(
        f"handoff {handoff * 1e6:.0f} us; bound {rule / 2**20:.2f} MiB (Zen 5: {zen5}); "
        f"{args.runs} runs of {args.calls} calls each way"
    )
    print("| op | MiB | on one thread | pool us | rule us | pool / rule per run | median (range) |")
    print("|---|---|---|---|---|---|---|")
    for (op, mib), res in zip(table, got):
        ratios = [p / r for p, r in res]
        runs = ", ".join(f"{q:.2f}" for q in ratios)
        pool = statistics.median(p for p, _ in res) * 1e6
        ruled = statistics.median(r for _, r in res) * 1e6
        serial = "yes" if (mib << 20) <= rule else "no"
        print(
            f"| {op} | {mib} | {serial} | {pool:.0f} | {ruled:.0f} | {runs} "
            f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
