"""The same kernel compiled in the timing process against loaded from numba's on-disk cache.

Usage::

    python bench/fresh_compile.py            # 3 pairs of processes per case
    python bench/fresh_compile.py --pairs 5

Numba compiles a kernel on its first call and writes the machine code to its cache; later
processes load that code instead of compiling. The two do not run the same code: a helper
called by a kernel (``_rotate_block``) is compiled as a library of its own and also linked
into the kernel as a weak copy; the process that compiled both calls the separate library,
a process that loads the kernel from the cache calls the kernel's own copy (the same
instructions, at other addresses; README, "A kernel compiled in the timing process"). For
each case, each pair of processes first runs it with an empty ``NUMBA_CACHE_DIR`` (it
compiles), then again with the cache that run wrote (it loads); each process times 7 calls
after one warm-up call and reports the median. The cases are rows of ``bench/roofline.py``
(about 1 GiB each, float32). Only kernel times are compared, not the compile time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

# rows of roofline.cases(1), as (op, shape, options): 3-D and 4-D RoPE, add_sinusoidal
CASES = (
    ("apply_rope", (64, 32768, 128), {"layout": "interleaved"}),
    ("apply_rope", (4, 16384, 32, 128), {"layout": "interleaved"}),
    ("apply_rope", (4, 16384, 32, 128), {"layout": "half"}),
    ("add_sinusoidal", (8, 32768, 1024), {"layout": "interleaved"}),
)

CHILD = """
import sys, time
import numpy as np
sys.path.insert(0, {bench!r})
import roofline
op, shape, dtype, kw = next(
    c for c in roofline.cases(1) if (c[0], c[1], c[3]) == {case!r} and c[2] == np.float32
)
x, fast, _ = roofline.build_case(op, shape, dtype, kw)
fast()
ts = []
for _ in range(7):
    t0 = time.perf_counter()
    fast()
    ts.append(time.perf_counter() - t0)
print(op, "x".join(map(str, shape)), ",".join(f"{{k}}={{roofline._label(k, v, shape)}}"
      for k, v in kw.items()), np.median(ts) * 1e3)
"""


def run_child(case: tuple, cache: str) -> tuple[str, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    code = CHILD.format(bench=os.path.dirname(os.path.abspath(__file__)), case=case)
    # (run in the cache directory: ``python -c`` puts its working directory first on
    # sys.path, ahead of a PYTHONPATH that points at another tree to time)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=cache,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return " ".join(out[:-1]), float(out[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="compile/load process pairs per case")
    args = ap.parse_args(argv)
    print(
        "| op | shape | options | compiled in process: ms | loaded from cache: ms "
        "| ratio, median (range) |"
    )
    print("|---|---|---|---|---|---|")
    for case in CASES:
        fresh, cached = [], []
        for _ in range(args.pairs):
            with tempfile.TemporaryDirectory() as cache:
                label, t = run_child(case, cache)
                fresh.append(t)
                cached.append(run_child(case, cache)[1])
        ratios = [f / c for f, c in zip(fresh, cached)]
        op, shape, opts = [*label.split(" ", 2), ""][:3]
        print(
            f"| {op} | {shape} | {opts} | {', '.join(f'{t:.1f}' for t in fresh)} "
            f"| {', '.join(f'{t:.1f}' for t in cached)} | {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
