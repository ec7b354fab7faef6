"""Compile time of the 16-bit tables: the first call of each 16-bit dtype and layout.

Usage::

    python bench/compile16.py              # 3 processes, each with an empty cache
    python bench/compile16.py --runs 5
    python bench/compile16.py --op add     # add_sinusoidal on (2, 64, 32) instead
    python bench/compile16.py --op rope    # apply_rope on (2, 64, 4, 128) instead
    python bench/compile16.py --no-float32 # the 16-bit calls alone (shared code counted)
    python bench/compile16.py --no-float32 --float16-first

Each process starts with an empty ``NUMBA_CACHE_DIR`` and calls, in this order, a float32
table (which compiles the code every table shares, so that it is not counted below), then
a bfloat16 interleaved table (which also compiles the 16-bit code every 16-bit table
shares), a float16 interleaved one and a bfloat16 half-layout one, and prints the process
CPU time each call took (``--op add``, ``--op rope``: the same calls of ``add_sinusoidal``
or ``apply_rope``). A call that
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
    if {op!r} == "add":
        fastpe.add_sinusoidal(np.ones((2, 64, 32), dt), layout=layout)
    elif {op!r} == "rope":
        fastpe.apply_rope(np.ones((2, 64, 4, 128), dt), layout=layout)
    else:
        fastpe.sinusoidal_table(64, 32, dtype=dt, layout=layout)
    print(time.process_time() - c0)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="processes, each with an empty cache")
    ap.add_argument("--op", choices=("table", "add", "rope"), default="table")
    ap.add_argument(
        "--no-float32",
        action="store_true",
        help="no float32 call first: the first 16-bit call compiles the shared code too",
    )
    ap.add_argument("--float16-first", action="store_true", help="float16 before bfloat16")
    args = ap.parse_args(argv)
    calls = CALLS[1:] if args.no_float32 else CALLS
    if args.float16_first:  # the float16 call first among the 16-bit ones
        sixteen = [c for c in calls if c[0] != "float32"]
        sixteen.sort(key=lambda c: c[0] != "float16")
        calls = tuple(c for c in calls if c[0] == "float32") + tuple(sixteen)
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            # the child runs in the empty cache directory: ``python -c`` puts its working
            # directory first on sys.path, which from the repository root would import
            # that tree's fastpe ahead of a PYTHONPATH given to time another one
            r = subprocess.run(
                [sys.executable, "-c", CHILD.format(calls=calls, op=args.op)],
                env=env,
                cwd=cache,
                capture_output=True,
                text=True,
                check=True,
            )
        for k, line in enumerate(r.stdout.split()):
            times[k].append(float(line))
    print(f"| first call (empty cache) | CPU s per process ({args.runs}) | median (range) |")
    print("|---|---|---|")
    for (name, layout), ts in zip(calls, times):
        each = ", ".join(f"{t:.2f}" for t in ts)
        print(
            f"| {name} {args.op}, {layout} | {each} | "
            f"{statistics.median(ts):.2f} ({min(ts):.2f}-{max(ts):.2f}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
