"""Speed of the conventions (fastpe.conventions; fairseq and tensor2tensor tables).

One group per case of ``fastpe._cases._conventions`` (the cases ``fastpe compare`` runs):
the NumPy reference, the fast path and the bandwidth yardstick of the same bytes, side by
side, as in ``bench/test_bench.py``. ``pytest --benchmark-only`` runs the default sizes
(the ``default`` cases); ``--bench-large`` adds grids four times as wide on each side.
Ratios, not absolute times, are what these measurements support on a shared machine.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fastpe import _cases

SETTLE_S = 0.2  # as in bench/test_bench.py: let the yardstick's threads go to sleep


def _cases_param(scale, large=False):
    marks = [pytest.mark.large] if large else []
    return [
        pytest.param(c, id=c.name().replace(" ", "_"), marks=marks)
        for c in _cases._conventions(scale)
    ]


CASES = _cases_param(4) + _cases_param(16, large=True)


def _rounds(nbytes, impl):
    if impl == "reference":
        return 3 if nbytes < 2**27 else 1
    return 20 if nbytes < 2**27 else 7


def _yardstick(case):
    from fastpe import _kernels

    if case.is_table:
        return lambda a: _kernels.fill(a.reshape(-1), 0.5)
    return lambda a: _kernels.scale_inplace(a.reshape(-1), 1.0)


@pytest.mark.parametrize("impl", ["reference", "fast", "bandwidth"])
@pytest.mark.parametrize("case", CASES)
def test_convention(benchmark, case, impl):
    benchmark.group = f"{case.name()}|{'x'.join(map(str, case.shape))}|{np.dtype(case.dtype).name}"
    a = case.make_input(np.random.default_rng(0))
    f = _yardstick(case) if impl == "bandwidth" else case.runner(impl)
    f(a)  # warm-up: compiles or loads the kernel, touches the pages
    time.sleep(SETTLE_S)
    benchmark.pedantic(
        f, args=(a,), rounds=_rounds(case.nbytes, impl), iterations=1, warmup_rounds=0
    )
