"""Small head sizes: time per byte at dim 2 .. 128, against dim 128 and the yardstick.

Usage::

    python bench/dims.py              # 32 MiB float32 arrays, 3 runs, median and range
    python bench/dims.py --mib 64 --runs 5
    python bench/dims.py --layout half --dtype float64 --offsets spread
    python bench/dims.py --layout half --dtype bfloat16 --dims 4,6,8 --ops apply_rope

For each operation (in-place RoPE on ``(4, seq, dim)``, the ``(seq, dim)`` table, and
``add_sinusoidal`` on ``(4, seq, dim)``) and each ``dim``, the array holds the same bytes;
the kernel and its bandwidth yardstick (``fastpe._timing.yardstick``: ``a *= s`` for
in-place work, ``a[:] = v`` for tables) run interleaved on it. ``--layout`` and
``--dtype`` (float32, float64, float16, bfloat16 with ml_dtypes; the yardstick streams
16-bit values as unsigned integers) pick the layout and dtype of every call; ``--offsets
spread`` gives RoPE and ``add_sinusoidal`` one offset per batch row, far apart (nothing
shared between rows); ``--dims`` and ``--ops`` time other head sizes (dim 128, the
reference of the ratio, is always timed) or fewer operations.
Printed per row: the
median time over the runs, the ratio of that time to dim 128's (same bytes: 1.0 means as
fast per byte; the issue's target is within 2x), and the fraction of the yardstick. Every
run is kept; the range is the smallest and largest over the runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import fastpe
from fastpe import _timing

DIMS = (2, 4, 8, 16, 32, 64, 128)
OPS = ("apply_rope", "sinusoidal_table", "add_sinusoidal")


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def case(op: str, dim: int, nbytes: int, layout="interleaved", dtype=np.float32, spread=False):
    dt = _dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    n = nbytes // dt.itemsize
    if op == "sinusoidal_table":
        out = np.zeros((n // dim, dim), dt)
        return (
            out,
            (lambda: fastpe.sinusoidal_table(out.shape[0], dim, out=out, layout=layout)),
            True,
        )
    x = np.ones((4, n // (4 * dim), dim), dt)
    f = fastpe.apply_rope if op == "apply_rope" else fastpe.add_sinusoidal
    # offsets 3 sequences apart: farther than the runs walk shares (fastpe._engine.position_runs)
    kw = {"offset": 3 * x.shape[1] * np.arange(4) + np.array([0, 17, 5, 3])} if spread else {}
    return x, (lambda: f(x, out=x, layout=layout, **kw)), False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=32, help="array size in MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7, help="interleaved pairs per row and run")
    ap.add_argument("--layout", choices=("interleaved", "half"), default="interleaved")
    ap.add_argument(
        "--dtype", choices=("float32", "float64", "float16", "bfloat16"), default="float32"
    )
    ap.add_argument("--offsets", choices=("shared", "spread"), default="shared")
    ap.add_argument(
        "--dims", default=",".join(map(str, DIMS)), help="even head sizes, comma-separated"
    )
    ap.add_argument("--ops", default=",".join(OPS), help="operations, comma-separated")
    args = ap.parse_args(argv)
    try:
        dims = sorted({int(d) for d in args.dims.split(",")} | {128})
    except ValueError:
        dims = [0]
    if any(d < 2 or d % 2 for d in dims):
        ap.error(f"--dims takes even head sizes of at least 2, got {args.dims!r}")
    ops = args.ops.split(",")
    if not set(ops) <= set(OPS):
        ap.error(f"--ops takes some of {', '.join(OPS)}, got {args.ops!r}")
    nbytes = args.mib << 20
    print(
        f"| op | dim | ms (median of {args.runs}) | vs dim 128, median (range) | "
        "% of yardstick, median (range) |"
    )
    print("|---|---|---|---|---|")
    for op in ops:
        times = {}
        fracs = {}
        for dim in dims:
            a, fast, writes = case(
                op, dim, nbytes, args.layout, args.dtype, args.offsets == "spread"
            )
            bits = a.view(np.uint16) if a.itemsize == 2 else a  # (numba has no float16)
            _, yard = _timing.yardstick(bits, writes_only=writes)
            ts, fs = [], []
            for _ in range(args.runs):
                ratio, tf, _ = _timing.interleaved(fast, yard, args.repeat)
                ts.append(tf)
                fs.append(ratio)
            times[dim], fracs[dim] = ts, fs
        for dim in dims:
            rel = [t / b for t, b in zip(times[dim], times[128])]
            print(
                f"| {op} | {dim} | {1e3 * np.median(times[dim]):.2f} | "
                f"{np.median(rel):.2f} ({min(rel):.2f}-{max(rel):.2f}) | "
                f"{100 * np.median(fracs[dim]):.0f}% ({100 * min(fracs[dim]):.0f}-"
                f"{100 * max(fracs[dim]):.0f}%) |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
