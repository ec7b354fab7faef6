"""Sinusoidal tables against an exact oracle: mpmath at 200 bits.

The oracle computes sin/cos of ``p * base**(-2i/dim)`` with the frequency itself exact
(not a rounded float64), so these tests measure the whole pipeline: frequency, angle,
angle addition, fix-up of small values and the final rounding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from _util import TABLE_F64_EXACT_ULP1, run_python

import fastpe
from fastpe import reference

mpmath = pytest.importorskip("mpmath")

# Positions whose angle at frequency 1 sits close to a multiple of pi (numerators of the
# continued-fraction convergents of pi): their sines are tiny, the hard case for float32.
NEAR_PI = [355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351]
# float64 fast tables: absolute error bound in units of 2**-52 (ulp of the pair norm 1.0).
F64_FAST_ULP1 = TABLE_F64_EXACT_ULP1
F64_REFERENCE_ULP1 = 1.0


def exact_table(positions, dim, base):
    mpmath.mp.prec = 200
    w = [mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / dim) for i in range(dim // 2)]
    out = np.empty((len(positions), dim), dtype=object)
    for r, p in enumerate(positions):
        for i, wi in enumerate(w):
            a = int(p) * wi
            out[r, 2 * i] = mpmath.sin(a)
            out[r, 2 * i + 1] = mpmath.cos(a)
    return out


def f32_ulps(got, exact):
    err = np.empty(got.shape)
    for idx in np.ndindex(got.shape):
        e = exact[idx]
        u = float(np.spacing(np.float32(abs(float(e)))))
        err[idx] = float(abs(mpmath.mpf(float(got[idx])) - e)) / u
    return err


def abs_err(got, exact):
    err = np.empty(got.shape)
    for idx in np.ndindex(got.shape):
        err[idx] = float(abs(mpmath.mpf(float(got[idx])) - exact[idx]))
    return err


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(2024)
    positions = np.r_[rng.integers(0, 2**24, 120), NEAR_PI, 0, 1, 2**24 - 1, 65535, 65536]
    dim, base = 64, 10000.0
    return positions, dim, base, exact_table(positions, dim, base)


@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_float32_within_one_ulp_below_2_24(sample, impl):
    positions, dim, base, exact = sample
    f = fastpe.sinusoidal_table if impl == "fast" else reference.sinusoidal_table
    got = f(positions=positions, dim=dim, base=base, dtype=np.float32)
    err = f32_ulps(got, exact)
    r, c = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err.max() <= 1.0, (
        f"{impl}: worst {err.max():.3f} ulp at position {positions[r]}, column {c}: "
        f"got {got[r, c]!r}, exact {mpmath.nstr(exact[r, c], 20)}"
    )


@pytest.mark.parametrize(
    "impl, bound", [("fast", F64_FAST_ULP1), ("reference", F64_REFERENCE_ULP1)]
)
def test_float64_bound(sample, impl, bound):
    positions, dim, base, exact = sample
    f = fastpe.sinusoidal_table if impl == "fast" else reference.sinusoidal_table
    got = f(positions=positions, dim=dim, base=base, dtype=np.float64)
    err = abs_err(got, exact) / 2.0**-52
    assert err.max() <= bound, f"{impl}: worst {err.max():.3f} units of 2**-52"


def test_float32_small_values_relative_accuracy(sample):
    """The tiny sines near multiples of pi keep full relative accuracy (fix-up path)."""
    positions, dim, _base, exact = sample
    got = fastpe.sinusoidal_table(positions=np.array(NEAR_PI), dim=dim, dtype=np.float32)
    rows = [list(positions).index(p) for p in NEAR_PI]
    err = f32_ulps(got[:, :1], exact[rows, :1])  # column 0: sin(p), |sin| down to 1e-7
    assert err.max() <= 0.5 + 1e-9


def test_common_float32_recipe_is_off_at_long_positions():
    """The usual float32-angle recipe loses the angle at long positions; fastpe does not.

    The recipe's float32 steps are taken each correctly rounded (frequencies rounded from
    float64, the float32 product, then sin/cos of that angle in float64), so that what is
    measured is the float32 angle alone, not one NumPy version's float32 ``pow`` or ``sin``
    (which add their own error). At dim 512 the table is then off by 0.026 at position
    2**20 and by 0.71 at 2**24 - 1 (values are in [-1, 1]); fastpe's float32 table stays
    within 1 ulp at both.
    """
    dim = 512
    p = np.array([2**20, 2**24 - 1])
    inv = (1.0 / 10000.0 ** (np.arange(0, dim, 2) / dim)).astype(np.float32)
    ang = (p.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
    naive = np.empty((2, dim))
    naive[:, 0::2], naive[:, 1::2] = np.sin(ang), np.cos(ang)
    exact = exact_table(p, dim, 10000.0)
    worst = [abs_err(naive[i : i + 1], exact[i : i + 1]).max() for i in range(2)]
    assert worst[0] > 0.02 and worst[1] > 0.5, worst
    assert f32_ulps(fastpe.sinusoidal_table(positions=p, dim=dim), exact).max() <= 1.0


@pytest.mark.parametrize("base, dim", [(10000.0, 64), (500000.0, 256), (1e6, 6)])
def test_step_tables_bit_for_bit_as_the_kernels_sincos(base, dim):
    # the step tables are built in NumPy with math's libm calls; each entry must equal the
    # compiled sincos_exact of the same angle, which the kernels' anchors use
    from fastpe import _engine, _kernels
    from fastpe._freq import inv_freq_dd

    wh, wl = inv_freq_dd(base, dim)
    tc, ts = _engine.step_tables(wh, wl, _kernels.LEVELS, _kernels.RADIX)
    for row in range(_kernels.LEVELS * _kernels.RADIX):
        p = float((row % _kernels.RADIX) * _kernels.RADIX ** (row // _kernels.RADIX))
        for i in range(wh.shape[0]):
            s, c = _kernels.sincos_exact(p, wh[i], wl[i])
            assert (ts[row, i], tc[row, i]) == (s, c), (row, i)


def test_accuracy_command_prints_figures_within_the_bounds():
    # bench/accuracy.py prints the figures the README quotes as measured; here on a smaller
    # sample (the README's run uses 1000 random positions), every figure within its bound
    script = Path(__file__).resolve().parents[1] / "bench" / "accuracy.py"
    r = run_python(
        [sys.executable, str(script), "--json", "--positions", "20"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    fig = json.loads(r.stdout)
    bounds = {
        "table float32 fast vs exact (ulp of each value)": 1.0,
        "table float32 reference vs exact (ulp of each value)": 1.0,
        "table float64 fast vs exact (x 2**-52)": F64_FAST_ULP1,
        "table float64 reference vs exact (x 2**-52)": F64_REFERENCE_ULP1,
        "apply then inverse float32 fast (ulp of the norm)": 2.0,
        "apply then inverse float64 fast (ulp of the norm)": 5.0,
        "apply then inverse float32 reference (ulp of the norm)": 2.0,
        "apply then inverse float64 reference (ulp of the norm)": 5.0,
    }
    assert set(fig) == set(bounds)
    for key, bound in bounds.items():
        assert 0 < fig[key] <= bound, (key, fig[key])
