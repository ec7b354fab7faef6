"""Benchmark options. Run the suite with ``pytest --benchmark-only`` (from the root)."""

from __future__ import annotations

import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--bench-large",
        action="store_true",
        default=False,
        help="also benchmark ~1 GiB arrays (needs ~10 GiB of memory and several minutes)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--bench-large"):
        return
    skip = pytest.mark.skip(reason="large size: add --bench-large")
    for item in items:
        if "large" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "large: ~1 GiB benchmark, run with --bench-large")


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
