"""Cold start, measured in fresh processes: import + first calls, warm and empty cache.

``pytest --benchmark-only -k coldstart`` runs these. Targets: with a warm on-disk cache,
import + first ``apply_rope`` + first ``sinusoidal_table`` under 0.6 s; with an empty
cache, the first call of each op (alone in its process, so that it pays for everything it
compiles) under 3 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import fastpe

# Each child imports the fastpe this process imported (its tree first on PYTHONPATH) and runs
# in a directory that holds no fastpe package (``-c`` and ``-m`` put their working directory
# first on sys.path), as the tests' children do (tests/_util.py).
FASTPE_ROOT = str(Path(fastpe.__file__).resolve().parents[1])


def _child_env(cache) -> dict:
    """This process's environment, FASTPE_ROOT first on PYTHONPATH, numba's cache at ``cache``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [FASTPE_ROOT, env.get("PYTHONPATH")]))
    return env


FIRST_CALLS = """
import time
t0 = time.perf_counter()
import numpy as np, fastpe
x = np.ones((2, 16, 4, 64), np.float32)
fastpe.apply_rope(x, out=x)
fastpe.sinusoidal_table(64, 32)
print(time.perf_counter() - t0)
"""


def _fresh_process(env):
    r = subprocess.run(
        [sys.executable, "-c", FIRST_CALLS],
        env=env,
        cwd=tempfile.gettempdir(),  # (python -c: its directory first on sys.path)
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(r.stdout.strip())


@pytest.mark.parametrize("cache", ["warm", "empty"])
def test_coldstart(benchmark, cache, tmp_path):
    benchmark.group = f"coldstart|import+apply_rope+sinusoidal_table|{cache} cache"
    env = _child_env(tmp_path / "cache")
    inside: list[float] = []  # what each process printed: import + first calls
    if cache == "warm":
        _fresh_process(env)  # fills the cache

        def fresh():
            inside.append(_fresh_process(env))

        benchmark.pedantic(fresh, rounds=3, iterations=1)
    else:
        counter = iter(range(100))

        def fresh():
            env["NUMBA_CACHE_DIR"] = str(tmp_path / f"empty{next(counter)}")
            inside.append(_fresh_process(env))

        benchmark.pedantic(fresh, rounds=1, iterations=1)
    # the benchmark times whole processes (Python's own start-up included); the target is
    # on import + first calls, printed here (pytest -s) and kept in the JSON
    benchmark.extra_info["import_and_first_calls_s"] = inside
    print(f"\n{benchmark.group}: import + first calls {', '.join(f'{v:.3f}' for v in inside)} s")


FIRST_CALL_OF = {
    "apply_rope": "fastpe.apply_rope(np.ones((2, 16, 4, 64), np.float32))",
    "sinusoidal_table": "fastpe.sinusoidal_table(64, 32)",
    "add_sinusoidal": "fastpe.add_sinusoidal(np.ones((2, 16, 64), np.float32))",
}

ONE_OP = """
import time
import numpy as np, fastpe
t0 = time.perf_counter()
{call}
print(time.perf_counter() - t0)
"""


@pytest.mark.parametrize("op", list(FIRST_CALL_OF))
def test_coldstart_first_call_empty_cache(benchmark, op, tmp_path):
    benchmark.group = "coldstart|first call of one op, after import|empty cache"
    counter = iter(range(100))

    def fresh():
        env = _child_env(tmp_path / f"empty{next(counter)}")
        r = subprocess.run(
            [sys.executable, "-c", ONE_OP.format(call=FIRST_CALL_OF[op])],
            env=env,
            cwd=str(tmp_path),  # (python -c: its directory first on sys.path)
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        # the benchmark times the whole process; the call alone is kept beside it
        benchmark.extra_info["first_call_s"] = float(r.stdout.strip())
        print(f"\n{benchmark.group}: first {op} call alone {float(r.stdout.strip()):.3f} s")

    benchmark.pedantic(fresh, rounds=1, iterations=1)


def test_coldstart_warmup_empty_cache(benchmark, tmp_path):
    # what `fastpe warmup` costs a fresh install: every kernel compiled into an empty cache
    # (tests/test_coldstart.py checks, from a warm cache, that nothing compiles after it)
    benchmark.group = "coldstart|fastpe warmup, whole process|empty cache"
    counter = iter(range(100))

    def fresh():
        cache = tmp_path / f"empty{next(counter)}"
        env = _child_env(cache)
        r = subprocess.run(
            [sys.executable, "-m", "fastpe", "warmup"],
            env=env,
            cwd=str(tmp_path),  # (python -m: its directory first on sys.path)
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        names = [line.split()[0] for line in r.stdout.splitlines()]
        # one line per kernel family warmed up, then the total
        assert len(names) >= 2 and names[-1] == "total", r.stdout
        assert len(set(names)) == len(names), r.stdout
        assert list(cache.rglob("*.nbi")), "warmup wrote no cache"
        benchmark.extra_info["warmup_total_s"] = float(r.stdout.splitlines()[-1].split()[1])

    benchmark.pedantic(fresh, rounds=1, iterations=1)
