"""Calls from many Python threads at once, and processes forked after fastpe ran."""

from __future__ import annotations

import multiprocessing as mp
import sys
import threading

import numpy as np
import pytest

import fastpe


def _job(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    x = rng.standard_normal((3, 200, 4, 32)).astype(np.float32)
    fastpe.apply_rope(x, out=x, offset=1000 * i, layout="half" if i % 2 else "interleaved")
    t = fastpe.sinusoidal_table(300, 64, offset=77 * i, dtype=np.float64)
    y = fastpe.add_sinusoidal(rng.standard_normal((2, 100, 16)), offset=i)
    return np.concatenate([x.ravel().astype(np.float64), t.ravel(), y.ravel()])


def _child_job(i: int):
    from fastpe import _engine

    return _job(i), _engine.in_forked_child()


def test_eight_python_threads_at_once():
    expected = [_job(i) for i in range(16)]
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def run(tid: int) -> None:
        try:
            barrier.wait()
            for i in range(tid, 16, 8):
                for _ in range(3):
                    results[i] = _job(i)
        except BaseException as exc:  # collected and re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for i in range(16):
        np.testing.assert_array_equal(results[i], expected[i])


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_fork_after_parallel_use():
    expected = [_job(i) for i in range(4)]  # the parent has run the parallel kernels
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.map_async(_child_job, range(4)).get(timeout=240)
    for (res, forked), want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(res, want)
        assert forked  # ran the serial kernels: the OpenMP pool does not survive fork()


def test_spawned_children_run_parallel():
    expected = [_job(i) for i in range(2)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = pool.map_async(_child_job, range(2)).get(timeout=240)
    for (res, forked), want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(res, want)
        assert not forked
