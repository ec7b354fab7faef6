"""Shared test helpers: ulp measures, RoPE pair checks, array layouts.

Test modules import these (``from _util import ...``; pyproject's ``pythonpath`` puts tests/
on the path) and never import from one another.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

import fastpe
from fastpe import _cases
from fastpe._args import check_layout, pair_channels

DTYPES = [np.float32, np.float64]

# A test's child Python process (``python -c``, ``python -m fastpe``) imports the fastpe this
# process imported: FASTPE_ROOT first on its PYTHONPATH (child_env), and it runs in
# CHILD_CWD, which holds no fastpe package (``-c`` and ``-m`` put the working directory
# first on the path, where a checkout would otherwise win, as when the tests run under the
# ``pytest`` script with PYTHONPATH at another tree).
FASTPE_ROOT = str(Path(fastpe.__file__).resolve().parents[1])
CHILD_CWD = str(Path(__file__).resolve().parent)


def child_env(**extra: str) -> dict:
    """This process's environment, FASTPE_ROOT first on PYTHONPATH, then ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [FASTPE_ROOT, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _pinned(kw: dict) -> dict:
    kw.setdefault("cwd", CHILD_CWD)
    if "env" not in kw:
        kw["env"] = child_env()
    return kw


def run_python(args: list, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` of a child Python process (``args`` from ``sys.executable``), in
    CHILD_CWD with child_env() unless ``cwd`` or ``env`` are given."""
    return subprocess.run(args, **_pinned(kw))


def popen_python(args: list, **kw) -> subprocess.Popen:
    """:func:`run_python` as ``subprocess.Popen``."""
    return subprocess.Popen(args, **_pinned(kw))


def launches(monkeypatch, kern=None, pick=lambda k, args: k):
    """A list that gets ``pick(kernel, args)`` for each kernel launch of fastpe's engine
    (of ``kern`` only, if given), in order; the launches run as they would."""
    from fastpe import _engine

    seen = []
    launch = _engine._launch

    def spy(k, args, n_workers, threads):
        if kern is None or k is kern:
            seen.append(pick(k, args))
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", spy)
    return seen


# apply then inverse=True without an attention factor, in ulps of each pair's norm (see
# tests/test_rope.py and the README's accuracy table)
INVERSE_ULP = {np.dtype(np.float32): 3.0, np.dtype(np.float64): 5.0}

# The ulp of each value in a dtype (spacing at |value|, never 0): the measure the shared
# registry's error functions use, under the name the tests use.
ulp = _cases._spacing

# float64 fast tables against the exact oracle, in units of 2**-52 (the ulp of the pair
# norm 1.0); see README, "Accuracy".
TABLE_F64_EXACT_ULP1 = 3.0


def unaligned(x: np.ndarray) -> np.ndarray:
    """A copy of C-contiguous ``x`` one byte off its dtype's alignment: the same dtype,
    shape and strides (a planned call's key), typed apart by numba's dispatcher."""
    buf = np.zeros(x.nbytes + 1, np.uint8)
    u = buf[1:].view(x.dtype).reshape(x.shape)
    u[...] = x
    assert not u.flags.aligned and u.strides == x.strides
    return u


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


def pairs(a, layout: str, rot: int):
    """The (x1, x2) channel pairs of ``a`` (last axis), as two arrays."""
    if layout == "interleaved":
        return a[..., 0:rot:2], a[..., 1:rot:2]
    if layout.startswith("half:"):  # blocks, each half-split
        first, second = pair_channels(check_layout(layout, blocks=True), rot)
        return a[..., first], a[..., second]
    return a[..., : rot // 2], a[..., rot // 2 : rot]


def assert_rope_close(got, want, x, layout: str, rot: int, **ctx) -> None:
    """Rotated channels within ROPE_ULP of the pair norm of ``x``; the rest bit-identical."""
    dt = np.dtype(got.dtype)
    g1, g2 = pairs(got, layout, rot)
    w1, w2 = pairs(want, layout, rot)
    x1, x2 = pairs(np.asarray(x, dtype=np.float64), layout, rot)
    norm = np.hypot(x1, x2)
    err = np.maximum(norm_ulp_error(g1, w1, norm, dt), norm_ulp_error(g2, w2, norm, dt))
    worst = float(err.max(initial=0.0))
    where = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    assert worst <= _cases.ROPE_ULP[dt], (
        f"{ctx} dtype={dt} shape={got.shape} layout={layout} rotary_dim={rot}: "
        f"worst {worst:.3f} ulp(norm) at pair {where}"
    )
    np.testing.assert_array_equal(got[..., rot:], np.asarray(x)[..., rot:])


def make_layout(shape, dtype, layout: str, rng):
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
