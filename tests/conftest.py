"""Fixtures for the tests; helpers live in tests/_util.py (on the path via pyproject)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
