"""Fixtures for the tests; helpers live in tests/_util.py."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # make tests/_util.py importable


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
