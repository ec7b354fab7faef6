"""Shared test helpers: the fast-vs-reference registry, ulp measures, array layouts."""

from __future__ import annotations

import numpy as np

from fastpe import _cases

# One registry of (fast, reference) pairs, shared with `fastpe compare` and bench/.
COMPARISONS = _cases.FUNCTIONS

DTYPES = [np.float32, np.float64]


def ulp(values, dtype) -> np.ndarray:
    """Spacing of ``dtype`` at ``|values|`` (the ulp of each value, never 0)."""
    dt = np.dtype(dtype)
    v = np.abs(np.asarray(values, dtype=dt))
    return np.spacing(np.maximum(v, np.finfo(dt).tiny)).astype(np.float64)


def ulp_error(got, want) -> np.ndarray:
    """``|got - want|`` in ulps of ``want`` in ``got``'s dtype, elementwise."""
    got = np.asarray(got)
    diff = np.abs(got.astype(np.float64) - np.asarray(want, dtype=np.float64))
    return diff / ulp(want, got.dtype)


def norm_ulp_error(got, want, norm, dtype) -> np.ndarray:
    """``|got - want|`` in ulps of ``norm`` (the pair norm) in ``dtype``."""
    diff = np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, dtype=np.float64))
    return diff / ulp(norm, dtype)


def describe_worst(err: np.ndarray, got, want, **context) -> str:
    idx = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    ctx = ", ".join(f"{k}={v}" for k, v in context.items())
    return (
        f"{ctx}: worst error {err.max() if err.size else 0:.3f} ulp at {idx}: "
        f"got {np.asarray(got)[idx]!r}, want {np.asarray(want)[idx]!r}"
    )


def assert_ulp(got, want, max_ulp: float, **context) -> None:
    err = ulp_error(got, want)
    assert err.max(initial=0.0) <= max_ulp, describe_worst(err, got, want, **context)


def make_layout(shape, dtype, layout: str, rng, *, last_axis_strided_ok: bool = True):
    """Return ``(array, parent)``: an array of ``shape`` laid out as ``layout``.

    ``parent`` is the buffer the array is a view of (the array itself when contiguous), so
    tests can check that nothing outside the view changed.
    """
    shape = tuple(shape)
    if layout == "contiguous":
        a = rng.standard_normal(shape).astype(dtype)
        return a, a
    if layout == "sliced":  # a window of a larger buffer: every axis strided, last unit
        big = rng.standard_normal(tuple(n + 3 for n in shape)).astype(dtype)
        idx = (*tuple(slice(1, 1 + n) for n in shape[:-1]), slice(2, 2 + shape[-1]))
        return big[idx], big
    if layout == "reversed":  # negative stride on the leading axis
        big = rng.standard_normal(shape).astype(dtype)
        return big[::-1], big
    if layout == "transposed":  # the last axis is not unit-stride
        big = rng.standard_normal(shape[::-1]).astype(dtype)
        return big.T, big
    raise ValueError(layout)
