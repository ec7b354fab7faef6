"""Large grid tables and grid sums (the conventions of vision transformers) against the
machine's limit, as bench/roofline.py measures the 1-D operations.

Usage::

    python bench/grids.py             # ~1 GiB, the table 3 times, median and range per row
    python bench/grids.py --runs 5 --repeat 7
    python bench/grids.py --match bfloat16  # the rows whose op and grid contain this

Each row's fast call runs interleaved with its bandwidth yardstick on the same array
(``fastpe._timing.interleaved``: a pause, then the pairs back to back); the figure is the
median of the per-pair ratios ``t_yardstick / t_fast``: for a table written into ``out=``,
the fastest way the machine writes those bytes (``fill_stream``: streaming stores, as
fastpe writes large grid tables; ``fastpe._timing.yardstick``), ``scale`` (read + write)
for a grid added in place. Every run of
the table is kept; each row is summed up as the median and the range of its fractions.

The sums add to x ~ N(0, 1) (each call adds the table to x again: over a run x moves by
up to a few tens); the float16 and bfloat16 rows (the ``bf16`` extra for bfloat16) are
1 GiB of 16-bit values, twice the elements of a float32 row, as the roofline's 16-bit
rows.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
from roofline import _half_dtypes

import fastpe
from fastpe import _timing


def cases(scale: int):
    g = 512 // scale  # a 512 x 512 grid of 1024 channels: 1 GiB of float32
    out = [
        ("grid_sinusoidal", "MAE 2-D", (g, g), 1024, {}),
        ("grid_sinusoidal", "MAE 2-D + class token", (g, g), 1024, {"cls_token": True}),
        ("grid_sinusoidal", "3-D (t, h, w)", (4, g // 2, g // 2), 1020, {}),
        ("add_grid_sinusoidal", "MAE 2-D", (g, g), 1024, {}),
        ("add_grid_sinusoidal", "tensor2tensor N-D", (g, g), 1024, {"convention": "tensor2tensor"}),
        ("add_grid_sinusoidal", "MAE 2-D, long last axis", (g // 8, 8 * g), 1024, {}),
    ]
    for dt in _half_dtypes():  # 1 GiB of 16-bit values
        out.append(("add_grid_sinusoidal", f"MAE 2-D, {dt.name}", (2 * g, g), 1024, {"dtype": dt}))
    return out


def run(op, grid, dim, kw, repeat):
    rows = int(np.prod(grid)) + (1 if kw.get("cls_token") else 0)
    kw = dict(kw)
    dt = kw.pop("dtype", np.dtype(np.float32))
    x = np.empty((rows, dim), dt)
    if op == "grid_sinusoidal":
        x.fill(0)
    else:
        rng = np.random.default_rng(0)
        flat = x.reshape(-1)
        for i in range(0, flat.size, 1 << 24):
            flat[i : i + (1 << 24)] = rng.standard_normal(min(1 << 24, flat.size - i))
    if op == "grid_sinusoidal":

        def fast():
            fastpe.grid_sinusoidal(grid, dim, out=x, **kw)

        name, yard = _timing.yardstick(x, writes_only=True)
    else:

        def fast():
            fastpe.add_grid_sinusoidal(x, grid, out=x, **kw)

        # 16-bit: the yardstick streams the same bytes as unsigned integers
        name, yard = _timing.yardstick(x.view(np.uint16) if x.itemsize == 2 else x)
    ratio, tf, ty = _timing.interleaved(fast, yard, repeat)
    return ratio, tf * 1e3, ty * 1e3, name, x.nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scale", type=int, default=1, help="grid sides divided by this")
    ap.add_argument("--match", default="", help="only rows whose op and grid contain this")
    args = ap.parse_args()
    table = [c for c in cases(args.scale) if args.match in f"{c[0]} {c[1]}"]
    got: list[list[tuple]] = [[] for _ in table]
    for _ in range(args.runs):
        for i, (op, _, grid, dim, kw) in enumerate(table):
            got[i].append(run(op, grid, dim, kw, args.repeat))
    print(
        "| op | grid | shape | fast ms | yardstick ms | yardstick ms/GiB "
        f"| % of yardstick, median (range) over {args.runs} runs |"
    )
    print("|---|---|---|---|---|---|---|")
    for (op, label, grid, dim, kw), res in zip(table, got):
        rows = int(np.prod(grid)) + (1 if kw.get("cls_token") else 0)
        pct = [100 * r[0] for r in res]
        fast = ", ".join(f"{r[1]:.1f}" for r in res)
        yard = ", ".join(f"{r[3]} {r[2]:.1f}" for r in res)
        per_gib = ", ".join(f"{r[2] / (r[4] / 2**30):.0f}" for r in res)
        print(
            f"| {op} | {label} {'x'.join(map(str, grid))} | {rows}x{dim} | {fast} | {yard} "
            f"| {per_gib} | {statistics.median(pct):.0f}% ({min(pct):.0f}-{max(pct):.0f}%) |"
        )


if __name__ == "__main__":
    main()
