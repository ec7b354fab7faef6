"""Fixtures for the tests; helpers live in tests/_util.py (on the path via pyproject)."""

from __future__ import annotations

import os

import numpy as np
import pytest

# helper modules (tests/_util.py, _hf.py, _published.py) are imported by tests, not collected:
# _hf.py imports torch, which only the hf extra installs
collect_ignore_glob = ["_*.py"]


def pytest_addoption(parser):
    parser.addoption(
        "--hypothesis-examples",
        type=int,
        default=None,
        metavar="N",
        help="examples per property test in tests/test_properties.py (default 100; "
        "also the environment variable FASTPE_HYPOTHESIS_EXAMPLES)",
    )


def pytest_configure(config):
    n = config.getoption("--hypothesis-examples", default=None)
    if n is not None:  # read by tests/test_properties.py when it is imported
        os.environ["FASTPE_HYPOTHESIS_EXAMPLES"] = str(n)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _threads_from_one_mib(monkeypatch):
    """Calls over more than 1 MiB run on the thread pool, whatever this host's rule
    (``fastpe._engine.serial_bytes``: up to 4 MiB on one thread on Zen 5), so that the
    tests' arrays of 1-4 MiB still take the threaded splits;
    tests/test_modes.py::test_serial_bytes_by_host checks the rule."""
    from fastpe import _engine

    monkeypatch.setattr(_engine, "_SERIAL_BYTES", _engine._SERIAL_MIN_BYTES)


@pytest.fixture(autouse=True)
def _prefetch_without_half_bound(monkeypatch):
    """Calls take the prefetch rule of CPUs without a size bound (or Zen 5's, where a test
    sets ``_zen5``), whatever this host's (``fastpe._engine.prefetch_bounded``: from
    half the last-level cache on the CPUs of ``_PREFETCH_BOUND_CPUS``), so that the
    tests' small arrays take the prefetching loops;
    tests/test_modes.py::test_prefetch_only_out_of_the_cache checks the rules."""
    from fastpe import _engine

    monkeypatch.setattr(_engine, "_prefetch_bounded", False)
