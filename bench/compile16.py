"""Compile time of the 16-bit tables: the first call of each 16-bit dtype and layout.

Usage::

    python bench/compile16.py              # 3 processes, each with an empty cache
    python bench/compile16.py --runs 5
    python bench/compile16.py --op add     # add_sinusoidal on (2, 64, 32) instead

Each process starts with an empty ``NUMBA_CACHE_DIR`` and calls, in this order, a float32
table (which compiles the code every table shares, so that it is not counted below), then
a bfloat16 interleaved table (which also compiles the 16-bit code every 16-bit table
shares), a float16 interleaved one and a bfloat16 half-layout one, and prints the process
CPU time each call took (``--op add``: the same calls of ``add_sinusoidal``). A call that
finds its kernel already compiled takes about 0 s. Printed per call: each process's
seconds, then the median and range. bfloat16 needs ml_dtypes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CALLS = (
    ("float32", "interleaved"),
    ("bfloat16", "interleaved"),
    ("float16", "interleaved"),
    ("bfloat16", "half"),
)

CHILD = """
import time
import numpy as np, ml_dtypes, fastpe
for name, layout in {calls!r}:
    dt = ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)
    c0 = time.process_time()
    if {add!r}:
        fastpe.add_sinusoidal(np.ones((2, 64, 32), dt), layout=layout)
    else:
        fastpe.sinusoidal_table(64, 32, dtype=dt, layout=layout)
    print(time.process_time() - c0)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="processes, each with an empty cache")
    ap.add_argument("--op", choices=("table", "add"), default="table")
    args = ap.parse_args(argv)
    add = args.op == "add"
    times: list[list[float]] = [[] for _ in CALLS]
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            r = subprocess.run(
                [sys.executable, "-c", CHILD.format(calls=CALLS, add=add)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
        for k, line in enumerate(r.stdout.split()):
            times[k].append(float(line))
    print(f"| first call (empty cache) | CPU s per process ({args.runs}) | median (range) |")
    print("|---|---|---|")
    for (name, layout), ts in zip(CALLS, times):
        each = ", ".join(f"{t:.2f}" for t in ts)
        print(
            f"| {name} {args.op}, {layout} | {each} | "
            f"{statistics.median(ts):.2f} ({min(ts):.2f}-{max(ts):.2f}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
