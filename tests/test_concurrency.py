"""Calls from many Python threads at once, and processes forked after fastpe ran.

fastpe's kernels run on a pool of Python threads (the kernels release the GIL), not on
numba's OpenMP layer, whose pool does not survive fork(): a forked child used to be
terminated with "fork() called from a process already using GNU OpenMP".
"""

from __future__ import annotations

import ast
import multiprocessing as mp
import sys
import threading

import numpy as np
import pytest
from _util import child_env, run_python

import fastpe


def _job(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    x = rng.standard_normal((3, 200, 4, 32)).astype(np.float32)
    fastpe.apply_rope(x, out=x, offset=1000 * i, layout="half" if i % 2 else "interleaved")
    t = fastpe.sinusoidal_table(300, 64, offset=77 * i, dtype=np.float64)
    y = fastpe.add_sinusoidal(rng.standard_normal((2, 100, 16)), offset=i)
    big = rng.standard_normal((4, 512, 8, 64)).astype(np.float32)  # 4 MiB: uses the threads
    fastpe.apply_rope(big, out=big, offset=i)
    return np.concatenate(
        [x.ravel().astype(np.float64), t.ravel(), y.ravel(), big.ravel().astype(np.float64)]
    )


def _child_job(i: int):
    from fastpe import _engine

    # (a spawned child does not run tests/conftest.py: threads from 1 MiB, as it pins)
    _engine._SERIAL_BYTES = _engine._SERIAL_MIN_BYTES
    return _job(i)


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
    for res, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(res, want)


def test_spawned_children():
    expected = [_job(i) for i in range(2)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = pool.map_async(_child_job, range(2)).get(timeout=240)
    for res, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(res, want)


THREADS_USED = """
import os
import threading

import numba
import numpy as np

import fastpe

# every thread started from here on reports running fastpe's code (whatever starts it)
PKG = os.path.dirname(fastpe.__file__)
ran_on = set()


def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(PKG):
        ran_on.add(threading.get_ident())


threading.setprofile(profile)
x = np.random.default_rng(0).standard_normal((8, 1024, 256)).astype(np.float32)  # 8 MiB
want = fastpe.apply_rope(x)  # compiles (or loads) the kernel, on every thread available
used = {}
for n in (1, 2, 3):
    numba.set_num_threads(n)
    used[n] = 0
    for layout in ("interleaved", "half", "interleaved"):
        ran_on.clear()
        got = fastpe.apply_rope(x, layout=layout)
        used[n] = max(used[n], len(ran_on) + 1)  # other threads and the calling one
        if layout == "interleaved":
            assert np.array_equal(got, want)
print(used)
"""


def test_thread_count_follows_numba():
    # numba.set_num_threads(n) in the calling thread bounds the threads a call runs on;
    # 3 threads are made available whatever the machine has
    r = run_python(
        [sys.executable, "-c", THREADS_USED],
        capture_output=True,
        text=True,
        env=child_env(NUMBA_NUM_THREADS="3"),
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    used = ast.literal_eval(r.stdout.strip())
    assert used[1] == 1, used  # one thread: no pool work at all
    assert 1 < used[2] <= 2 and 1 < used[3] <= 3, used
