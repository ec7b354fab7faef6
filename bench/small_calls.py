"""Per-call cost of small convention calls: what a sampling loop pays at each step, and a
vision model at each batch (a grid embedding added in place).

Usage::

    python bench/small_calls.py            # 3 runs, median and range per case
    python bench/small_calls.py --runs 5

Each case runs in its own process pinned to one core (``taskset -c 1`` where it exists),
``timeit`` with 2000 calls per repeat and the best of 9 repeats; the whole set runs
``--runs`` times, alternating cases, and each case is summed up as the median and the range
of its best-of-9 figures. The first call of each case (full argument checks, compiling or
loading kernels) is made before timing, so repeated calls take their plan
(``fastpe.conventions``: the checks of a repeated call kept). The budget of a small call is
that of a decoding step, 5 us.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# The children time the fastpe of a PYTHONPATH given (a worktree to compare), else the
# checkout that holds this script (ahead of any installed copy).
ROOT = str(Path(__file__).resolve().parents[1])

CASES = [
    (
        "timestep_embedding, 1 timestep, dim 8, out=",
        "t = np.array([999.5]); out = np.empty((1, 8), np.float32)",
        "fastpe.timestep_embedding(t, 8, out=out)",
    ),
    (
        "timestep_embedding, 1 timestep, dim 8",
        "t = np.array([999.5])",
        "fastpe.timestep_embedding(t, 8)",
    ),
    (
        "timestep_embedding, 1 whole timestep, dim 8, out=",
        "t = np.array([999.0]); out = np.empty((1, 8), np.float32)",
        "fastpe.timestep_embedding(t, 8, out=out)",
    ),
    (
        "timestep_embedding, 1 int timestep, dim 8, out=",
        "t = np.array([999]); out = np.empty((1, 8), np.float32)",
        "fastpe.timestep_embedding(t, 8, out=out)",
    ),
    (
        "add_timestep_embedding, 1 timestep, dim 8, in place",
        "t = np.array([999.5]); x = np.zeros((1, 8), np.float32)",
        "fastpe.add_timestep_embedding(x, t, out=x)",
    ),
    (
        "sinusoidal_embedding, 1 position, dim 8",
        "t = np.array([999.5])",
        "fastpe.sinusoidal_embedding(t, 8)",
    ),
    (
        "timestep_embedding, 256 fractional timesteps, dim 320, out=",
        "t = np.arange(256) * 3.9 + 0.5; out = np.empty((256, 320), np.float32)",
        "fastpe.timestep_embedding(t, 320, out=out)",
    ),
    (
        "timestep_embedding, 256 whole timesteps, dim 320, out=",
        "t = np.arange(256) * 4.0; out = np.empty((256, 320), np.float32)",
        "fastpe.timestep_embedding(t, 320, out=out)",
    ),
    (
        "add_grid_sinusoidal, 4x4 grid + class token, dim 16, in place",
        "x = np.zeros((17, 16), np.float32)",
        "fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True, out=x)",
    ),
    (
        "grid_sinusoidal, 4x4 grid, dim 16, out=",
        "out = np.empty((16, 16), np.float32)",
        "fastpe.grid_sinusoidal((4, 4), 16, out=out)",
    ),
    (
        "add_grid_sinusoidal, 14x14 grid + class token, dim 768, in place (ViT-B/16)",
        "x = np.zeros((197, 768), np.float32)",
        "fastpe.add_grid_sinusoidal(x, 14, cls_token=True, out=x)",
    ),
]


def one(setup: str, stmt: str) -> float:
    """Best of 9 repeats of 2000 calls, in microseconds, in a fresh pinned process."""
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") else []
    code = (
        "import timeit, numpy as np, fastpe\n"
        f"{setup}\n"
        f"{stmt}\n"
        f"print(min(timeit.repeat({stmt!r}, number=2000, repeat=9, globals=globals())))"
    )
    # (in the temporary directory: ``python -c`` puts its working directory first on
    # sys.path, ahead of a PYTHONPATH that points at another tree to time)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), ROOT]))
    r = subprocess.run(
        [*pin, sys.executable, "-c", code],
        cwd=tempfile.gettempdir(),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(r.stdout.strip()) / 2000 * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    for _ in range(args.runs):
        for name, setup, stmt in CASES:
            times[name].append(one(setup, stmt))
    print(f"| call | us per call, median (range) over {args.runs} runs of best of 9 |")
    print("|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.2f} ({min(ts):.2f}-{max(ts):.2f}) |")


if __name__ == "__main__":
    main()
