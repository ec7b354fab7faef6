"""The accuracy figures the README quotes as measured, from the same samples every run.

    .venv/bin/python bench/accuracy.py          # a table
    .venv/bin/python bench/accuracy.py --json   # the same figures, machine-readable

Tables (dim 64, base 10000) against an exact oracle: mpmath at 200 bits with the frequency
``base**(-2i/dim)`` itself exact, at 1,014 positions below 2**24 (1,000 random, the
numerators of pi's convergents, whose sines are tiny, and a few edges; tests/test_oracle.py
checks the bounds on 120 of them). Apply then ``inverse=True``: the worst difference from
the input, in ulps of each pair's norm, over 64 random offsets below 2**24, head_dim 64 and
both layouts. A few seconds of CPU; nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import sys

import mpmath
import numpy as np

import fastpe
from fastpe import reference

NEAR_PI = [355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351]


def table_sample(n_random: int) -> np.ndarray:
    rng = np.random.default_rng(2024)
    return np.r_[rng.integers(0, 2**24, n_random), NEAR_PI, 0, 1, 2**24 - 1, 65535, 65536]


def exact_table(positions, dim: int, base: float) -> np.ndarray:
    """sin/cos of ``p * base**(-2i/dim)`` at 200 bits (mpmath numbers, interleaved)."""
    mpmath.mp.prec = 200
    w = [mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / dim) for i in range(dim // 2)]
    out = np.empty((len(positions), dim), dtype=object)
    for r, p in enumerate(positions):
        for i, wi in enumerate(w):
            a = int(p) * wi
            out[r, 2 * i] = mpmath.sin(a)
            out[r, 2 * i + 1] = mpmath.cos(a)
    return out


def float32_ulps(got: np.ndarray, exact: np.ndarray) -> float:
    """Worst ``|got - exact|`` in float32 ulps of the exact value."""
    worst = 0.0
    for idx in np.ndindex(got.shape):
        e = exact[idx]
        u = float(np.spacing(np.float32(abs(float(e)))))
        worst = max(worst, float(abs(mpmath.mpf(float(got[idx])) - e)) / u)
    return worst


def units_of_2_52(got: np.ndarray, exact: np.ndarray) -> float:
    """Worst ``|got - exact|`` in units of 2**-52 (the ulp of the pair norm 1.0)."""
    worst = 0.0
    for idx in np.ndindex(got.shape):
        worst = max(worst, float(abs(mpmath.mpf(float(got[idx])) - exact[idx])))
    return worst / 2.0**-52


def round_trip_ulps(apply, dtype, offsets) -> float:
    """Worst ``|apply(apply(x), inverse=True) - x|`` in ulps of each pair's norm."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for offset in offsets:
        x = rng.standard_normal((2, 7, 2, 64)).astype(dtype)
        for layout in ("interleaved", "half"):
            y = apply(x, offset=int(offset), layout=layout)
            z = apply(y, offset=int(offset), layout=layout, inverse=True)
            if layout == "interleaved":
                pairs = [(a[..., 0::2], a[..., 1::2]) for a in (x, z)]
            else:
                pairs = [(a[..., :32], a[..., 32:]) for a in (x, z)]
            (x1, x2), (z1, z2) = [(p.astype(np.float64), q.astype(np.float64)) for p, q in pairs]
            u = np.spacing(np.hypot(x1, x2).astype(dtype)).astype(np.float64)
            err = np.maximum(np.abs(z1 - x1), np.abs(z2 - x2)) / u
            worst = max(worst, float(err.max()))
    return worst


def measure(n_random: int = 1000) -> dict[str, float]:
    positions = table_sample(n_random)
    dim, base = 64, 10000.0
    exact = exact_table(positions, dim, base)
    figures = {}
    for name, f in (("fast", fastpe.sinusoidal_table), ("reference", reference.sinusoidal_table)):
        t32 = f(positions=positions, dim=dim, base=base, dtype=np.float32)
        t64 = f(positions=positions, dim=dim, base=base, dtype=np.float64)
        figures[f"table float32 {name} vs exact (ulp of each value)"] = float32_ulps(t32, exact)
        figures[f"table float64 {name} vs exact (x 2**-52)"] = units_of_2_52(t64, exact)
    offsets = np.random.default_rng(3).integers(0, 2**24, 64)
    for name, f in (("fast", fastpe.apply_rope), ("reference", reference.apply_rope)):
        for dt in (np.float32, np.float64):
            key = f"apply then inverse {np.dtype(dt).name} {name} (ulp of the norm)"
            figures[key] = round_trip_ulps(f, dt, offsets)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--positions",
        type=int,
        default=1000,
        help="random table positions besides the fixed ones (default 1000, the README's figures)",
    )
    args = parser.parse_args(argv)
    figures = measure(args.positions)
    if args.json:
        json.dump(figures, sys.stdout, indent=1)
        print()
    else:
        for key, value in figures.items():
            print(f"{key:<58} {value:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
