"""fastpe/_config.py: a read-only install with no writable numba cache runs uncached.

numba raises "cannot cache function ...: no locator available" when neither
NUMBA_CACHE_DIR, the package's __pycache__ nor the user cache directory can be written.
Being root, the test cannot rely on file modes: every one of those paths is made to lie
under a regular file (or to be one), which no one can create a directory in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import fastpe

SCRIPT = """
import sys, warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fastpe, fastpe._kernels
    table = fastpe.sinusoidal_table(6, 8)  # compiles one kernel: a few seconds
np.save(sys.argv[1], table)
for w in caught:
    print("WARNING", w.category.__name__, str(w.message).replace(chr(10), " "))
print("file", fastpe.__file__)
"""


def test_no_writable_cache_runs_uncached_with_one_warning(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(
        Path(fastpe.__file__).parent, site / "fastpe", ignore=shutil.ignore_patterns("__pycache__")
    )
    (site / "fastpe" / "__pycache__").write_text("")  # the in-tree cache cannot be a directory
    blocker = tmp_path / "blocker"
    blocker.write_text("")  # nothing can be created below a regular file
    env = dict(
        os.environ,
        PYTHONPATH=str(site),
        NUMBA_CACHE_DIR=str(blocker / "numba"),
        XDG_CACHE_HOME=str(blocker / "xdg"),
        HOME=str(blocker / "home"),
    )
    env.pop("NUMBA_DISABLE_JIT", None)
    out = tmp_path / "out.npy"
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT, str(out)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"file {site / 'fastpe' / '__init__.py'}" in proc.stdout  # the read-only copy ran
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, proc.stdout
    assert warnings[0].startswith("WARNING RuntimeWarning fastpe: numba found no writable cache")
    assert "set the environment variable NUMBA_CACHE_DIR to a writable directory" in warnings[0]
    # one warning for all the kernels of fastpe._kernels; the result is that of the cached
    # kernel in this process, bit for bit
    np.testing.assert_array_equal(np.load(out), fastpe.sinusoidal_table(6, 8))
    assert not list(tmp_path.rglob("*.nbi")), "a cache index was written somewhere"
