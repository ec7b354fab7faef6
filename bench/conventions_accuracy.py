"""The accuracy figures of the README's "Conventions" section, from fixed samples.

    .venv/bin/python bench/conventions_accuracy.py          # a table
    .venv/bin/python bench/conventions_accuracy.py --json   # the same, machine-readable

For each convention: the worst error of fastpe against mpmath at 200 bits (the formula's
exact value; float32, float16 and bfloat16 in ulps of each value in that dtype, float64 in
units of 2**-52), and against a
float64 transcription of the original code (``tests/test_conventions.py``): the worst
difference in units of 2**-52, the smallest K with ``|fastpe - original| <= 5 + K*|angle|``
units (the original's own rounding of frequency and angle, in ulps of the angle), and the
share of float32 values that differ from the original's float64 values rounded to float32,
with the worst such difference in ulps. Nothing here is timed; a few seconds of CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_conventions as T  # the transcriptions and the mpmath oracle

import fastpe
from fastpe import _cases

try:  # bfloat16: the optional bf16 extra
    import ml_dtypes

    HALF = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
except ImportError:
    HALF = [np.dtype(np.float16)]

TIMESTEPS = np.r_[np.linspace(0, 999, 1000), np.random.default_rng(1).uniform(0, 1000, 1000)]


def against_original(got64, got32, orig, angle) -> dict:
    d = np.abs(got64 - orig) / 2.0**-52
    a = np.abs(angle)
    k = np.where(a > 0, (d - T.ORIG_UNITS) / np.where(a > 0, a, 1.0), -np.inf)
    o32 = orig.astype(np.float32)
    e32 = np.abs(got32.astype(np.float64) - o32) / np.spacing(np.abs(o32))
    return {
        "orig_worst_units": float(d.max()),
        "orig_K": float(max(k.max(), 0.0)),
        "f32_differ_share": float((e32 > 0).mean()),
        "f32_worst_ulp": float(e32.max()),
    }


def against_exact(f, positions, n, base, shift, scale, order) -> dict:
    s, c = T.exact_halves(positions, n, base, shift, scale)
    exact = np.concatenate([c, s] if order == "cos_sin" else [s, c], axis=1)
    out = {}
    for dt in (np.float32, np.float64):
        got = f(dt)[:, : 2 * n]
        out[f"exact_{np.dtype(dt).name}"] = float(T.exact_error(got, exact).max())
    for dt in HALF:  # ulps of the 16-bit dtype at each exact value
        got = f(dt)[:, : 2 * n].astype(np.float64)
        err = [
            float(abs(T.mpmath.mpf(float(got[idx])) - exact[idx]))
            / float(_cases._spacing(float(exact[idx]), dt))
            for idx in np.ndindex(got.shape)
        ]
        out[f"exact_{np.dtype(dt).name}"] = max(err)
    return out


def rows() -> list[dict]:
    res = []
    n, dim = 4096, 1024
    half = dim // 2
    w = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))
    pos_exact = np.r_[0, 1, 2, 355, 1000, 4095]
    originals = [
        ("fairseq", T.fairseq_get_embedding(n, dim)),
        ("tensor2tensor", T.t2t_get_timing_signal_1d(n, dim)),
    ]
    for name, orig in originals:
        conv = name
        row = {"convention": name, "sample": f"{n}x{dim}"}
        row.update(
            against_original(
                fastpe.sinusoidal_table(n, dim, convention=conv, dtype=np.float64),
                fastpe.sinusoidal_table(n, dim, convention=conv),
                orig,
                T.angles_halves(np.arange(n), w),
            )
        )
        row.update(
            against_exact(
                lambda dt, conv=conv: fastpe.sinusoidal_table(
                    positions=pos_exact, dim=64, convention=conv, dtype=dt
                ),
                pos_exact,
                32,
                10000.0,
                1.0,
                1.0,
                "sin_cos",
            )
        )
        res.append(row)
    for name, kw in [
        ("diffusers", {}),
        ("guided-diffusion", {"flip_sin_to_cos": True, "downscale_freq_shift": 0}),
    ]:
        sh = kw.get("downscale_freq_shift", 1)
        w = np.exp(-math.log(10000) * np.arange(160) / (160 - sh))
        row = {"convention": name, "sample": f"{TIMESTEPS.size} timesteps x 320"}
        orig = T.diffusers_get_timestep_embedding(TIMESTEPS, 320, **kw)
        row.update(
            against_original(
                fastpe.timestep_embedding(TIMESTEPS, 320, dtype=np.float64, **kw),
                fastpe.timestep_embedding(TIMESTEPS, 320, **kw),
                orig,
                T.angles_halves(TIMESTEPS, w),
            )
        )
        t = TIMESTEPS[::100]
        row.update(
            against_exact(
                lambda dt, kw=kw, t=t: fastpe.timestep_embedding(t, 64, dtype=dt, **kw),
                t,
                32,
                10000.0,
                float(sh),
                1.0,
                "cos_sin" if kw.get("flip_sin_to_cos") else "sin_cos",
            )
        )
        res.append(row)
    g, dim = 64, 1024
    d = dim // 2
    om = 1.0 / 10000 ** (np.arange(d // 2) / (d / 2.0))
    i, j = np.divmod(np.arange(g * g), g)
    row = {"convention": "MAE 2-D", "sample": f"{g}x{g} grid x {dim}"}
    row.update(
        against_original(
            fastpe.grid_sinusoidal(g, dim, dtype=np.float64),
            fastpe.grid_sinusoidal(g, dim),
            T.mae_get_2d_sincos_pos_embed(dim, g),
            np.concatenate([T.angles_halves(j, om), T.angles_halves(i, om)], axis=1),
        )
    )
    cells = np.array([0, 1, 65, 4095])
    row.update(
        against_exact(
            lambda dt: fastpe.grid_sinusoidal(g, 64, dtype=dt)[cells][:, :32],
            cells % g,
            16,
            10000.0,
            0.0,
            1.0,
            "sin_cos",
        )
    )
    res.append(row)
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = rows()
    if args.json:
        json.dump(r, sys.stdout, indent=1)
        print()
        return 0
    halves = [np.dtype(dt).name for dt in HALF]
    short = {"float16": "f16", "bfloat16": "bf16"}
    print(
        f"{'convention':<18} {'sample':<26} {'exact f32':>9} {'exact f64':>9} "
        + "".join(f"{'exact ' + short[h]:>11}" for h in halves)
        + f" {'orig worst':>10} {'orig K':>7} {'f32 differ':>10} {'f32 worst':>9}"
    )
    for x in r:
        print(
            f"{x['convention']:<18} {x['sample']:<26} {x['exact_float32']:9.3f} "
            f"{x['exact_float64']:9.3f} "
            + "".join(f"{x['exact_' + h]:11.3f}" for h in halves)
            + f" {x['orig_worst_units']:10.1f} {x['orig_K']:7.2f} "
            f"{x['f32_differ_share']:10.2e} {x['f32_worst_ulp']:9.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
