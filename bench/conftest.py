"""Benchmark options and collection.

The benchmarks run with ``pytest --benchmark-only`` (from the root, or ``pytest bench/
--benchmark-only``). The plain test run (``python -m pytest``) does not collect them at all,
rather than listing every one as skipped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

BENCH_DIR = Path(__file__).resolve().parent


def pytest_addoption(parser):
    parser.addoption(
        "--bench-large",
        action="store_true",
        default=False,
        help="also benchmark ~1 GiB arrays (needs ~10 GiB of memory and several minutes)",
    )


def _named_on_command_line(config) -> bool:
    """True when the paths given (or the directory pytest runs in) lie in bench/."""
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        return False
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == BENCH_DIR or BENCH_DIR in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    path = Path(collection_path).resolve()
    if BENCH_DIR not in path.parents:
        return None
    if path.suffix == ".py" and not path.name.startswith(("test_", "conftest")):
        return True  # the scripts beside the benchmarks (roofline.py, modes.py, ...) are commands
    if config.getoption("benchmark_only", False) or _named_on_command_line(config):
        return None
    return True  # benchmarks only with --benchmark-only


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
