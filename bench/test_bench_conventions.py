"""Speed of the conventions (fastpe.conventions; fairseq and tensor2tensor tables).

One group per case of ``fastpe._cases._conventions`` (the cases ``fastpe compare`` runs):
the NumPy reference, the fast path and the bandwidth yardstick of the same bytes, side by
side, as in ``bench/test_bench.py`` (``fastpe._timing.yardstick``: ``fill`` for tables,
``scale`` for sums, on fastpe's thread pool). float16 and bfloat16 twins of the diffusers
and MAE cases run too (their yardstick streams the same bytes as 16-bit integers).
``pytest --benchmark-only`` runs the default sizes (the ``default`` cases);
``--bench-large`` adds grids four times as wide on each side. Ratios, not absolute times,
are what these measurements support on a shared machine.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fastpe import _cases, _timing


def _half_dtypes() -> list:
    out: list = [np.float16]
    try:
        import ml_dtypes
    except ImportError:  # the optional bf16 extra
        return out
    return [*out, ml_dtypes.bfloat16]


def _with_16_bit(cases: list) -> list:
    """The cases, and 16-bit twins of the fractional timesteps and the MAE 2-D grid."""
    twins = [
        dataclasses.replace(c, dtype=dt)
        for c in cases
        if c.label == "diffusers" or (c.label.startswith("mae ") and "3-D" not in c.label)
        for dt in _half_dtypes()
    ]
    return [*cases, *twins]


def _cases_param(scale, large=False):
    marks = [pytest.mark.large] if large else []
    return [
        pytest.param(c, id=f"{c.name()}-{np.dtype(c.dtype).name}".replace(" ", "_"), marks=marks)
        for c in _with_16_bit(_cases._conventions(scale))
    ]


CASES = _cases_param(4) + _cases_param(16, large=True)


def _rounds(nbytes, impl):
    if impl == "reference":
        return 3 if nbytes < 2**27 else 1
    return 20 if nbytes < 2**27 else 7


def _yardstick(case, a):
    bits = a.view(np.uint16) if a.itemsize == 2 else a  # numba has no 16-bit floats
    _, run = _timing.yardstick(bits, writes_only=case.is_table)
    return lambda _a: run()


@pytest.mark.parametrize("impl", ["reference", "fast", "bandwidth"])
@pytest.mark.parametrize("case", CASES)
def test_convention(benchmark, case, impl):
    benchmark.group = f"{case.name()}|{'x'.join(map(str, case.shape))}|{np.dtype(case.dtype).name}"
    a = case.make_input(np.random.default_rng(0))
    f = _yardstick(case, a) if impl == "bandwidth" else case.runner(impl)
    f(a)  # warm-up: compiles or loads the kernel, touches the pages
    _timing.settle()
    benchmark.pedantic(
        f, args=(a,), rounds=_rounds(case.nbytes, impl), iterations=1, warmup_rounds=0
    )
