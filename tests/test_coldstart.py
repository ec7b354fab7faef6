"""Cold start: nothing compiles at import, kernels cache where NUMBA_CACHE_DIR says.

The times themselves are measured in bench/ (bench/test_coldstart.py), not here.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _util import run_python

import fastpe
from fastpe import _engine, cli
from fastpe._args import check_float_dtype

# One kernel (the float32 table, the quickest to compile) is enough to see where the cache
# goes; compiling every kernel from an empty cache is measured in bench/ instead.
RUN = """
import sys, numpy as np
import fastpe
assert 'numba' not in sys.modules, 'import fastpe imported numba'
x = fastpe.sinusoidal_table(4, 8)
print('ok', x.tobytes().hex(), fastpe.__file__)
"""


def _run(env_extra: dict, pythonpath: str) -> subprocess.CompletedProcess:
    """``RUN`` in a child that imports fastpe from ``pythonpath`` alone."""
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = pythonpath
    return run_python(
        [sys.executable, "-c", RUN],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_read_only_package_caches_in_numba_cache_dir(tmp_path):
    pkg_parent = tmp_path / "site"
    shutil.copytree(
        Path(fastpe.__file__).parent,
        pkg_parent / "fastpe",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for p in (pkg_parent / "fastpe").rglob("*"):
        p.chmod(0o444 if p.is_file() else 0o555)
    (pkg_parent / "fastpe").chmod(0o555)
    cache = tmp_path / "numba-cache"
    try:
        first = _run({"NUMBA_CACHE_DIR": str(cache)}, str(pkg_parent))
        assert first.returncode == 0, first.stderr
        assert first.stdout.startswith("ok")
        # the read-only copy is what the child imported
        imported = Path(first.stdout.split()[-1]).resolve()
        assert imported == (pkg_parent / "fastpe" / "__init__.py").resolve()
        cached = list(cache.rglob("*.nbi"))
        assert cached, "no numba cache index written under NUMBA_CACHE_DIR"
        assert not list((pkg_parent / "fastpe").rglob("*.nbi")), "cache written into package"
        second = _run({"NUMBA_CACHE_DIR": str(cache)}, str(pkg_parent))
        assert second.returncode == 0 and second.stdout == first.stdout
    finally:
        for p in [pkg_parent / "fastpe", *(pkg_parent / "fastpe").rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_warmup_times_each_kernel_of_the_dtypes_asked_for():
    start = time.perf_counter()
    times = fastpe.warmup(dtypes=["float32"])
    wall = time.perf_counter() - start
    assert set(times) == {
        f"{op}[float32]" for op in ("apply_rope", "sinusoidal_table", "add_sinusoidal")
    } | {"timestep_embedding[fractional]"}
    # seconds of this call, one disjoint stretch per kernel
    assert all(isinstance(t, float) and t > 0 for t in times.values()), times
    assert sum(times.values()) <= wall, (times, wall)
    both = fastpe.warmup()
    assert set(both) == {
        f"{op}[{dt}]"
        for op in ("apply_rope", "sinusoidal_table", "add_sinusoidal")
        for dt in ("float32", "float64")
    } | {"timestep_embedding[fractional]"}


def test_warmup_command(capsys):
    assert cli.main(["warmup", "--dtype", "float64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == [
        "apply_rope[float64]",
        "sinusoidal_table[float64]",
        "add_sinusoidal[float64]",
        "timestep_embedding[fractional]",
        "total",
    ], lines
    secs = [float(line.split()[1]) for line in lines]
    assert all(t >= 0 for t in secs) and sum(secs[:-1]) <= secs[-1] + 0.002, lines
    r = run_python(
        [sys.executable, "-m", "fastpe", "warmup", "--dtype", "int8"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and "--dtype" in r.stderr, r.stderr


AFTER_WARMUP = """
import numpy as np
import fastpe
from fastpe import _kernels as K
from fastpe._kernels.fractional import classify_positions, frac_kernel, grid_kernel
from fastpe._kernels.fractional import grid_add_kernel
from fastpe._kernels.scan import fill_runs, scan_rows
from fastpe._kernels.tables import add_lanes_kernel, table_lanes_kernel
from fastpe._kernels.direct import add_direct_kernel, table_direct_kernel
fastpe.warmup()
kernels = (K.rope_kernel, K.rope_runs_kernel, K.add_kernel, K.table_kernel, frac_kernel,
           grid_kernel, grid_add_kernel, classify_positions, scan_rows, fill_runs,
           table_lanes_kernel, add_lanes_kernel, table_direct_kernel, add_direct_kernel)
packed = np.stack([np.arange(40), np.r_[np.arange(25), np.arange(15)], np.arange(40) + 3])
big = np.tile(np.arange(2**17), (2, 1)) + np.array([[0], [3]])  # scanned on the threads
fastpe._engine._SERIAL_BYTES = 1 << 20  # (threads from 1 MiB, as tests/conftest.py pins)


def read_only(a):  # as a read-only memmap gives them: numba types these apart
    a = np.array(a)
    a.flags.writeable = False
    return a
before = [len(k.signatures) for k in kernels]
for dt in (np.float32, np.float64):
    x = np.ones((3, 40, 2, 16), dt)
    for layout in ("interleaved", "half"):
        fastpe.apply_rope(x, layout=layout)
        fastpe.apply_rope(x, layout=layout, offset=np.array([0, 5, 9]))
        fastpe.apply_rope(x, layout=layout, positions=np.arange(40) + 7)
        fastpe.apply_rope(x, layout=layout, positions=packed)
        fastpe.apply_rope(x[:, :, :1], layout=layout, positions=packed)  # the runs walk
        fastpe.apply_rope(np.ones((2, 2**17, 1, 2), dt), layout=layout, positions=big)
        fastpe.apply_rope(x, layout=layout, positions=read_only(packed))
        fastpe.apply_rope(x[:, :, :1], layout=layout, positions=read_only(packed))
        fastpe.apply_rope(x, layout=layout, positions=read_only(np.arange(40)))
        fastpe.apply_rope(x, layout=layout, offset=read_only([0, 5, 9]))
        fastpe.apply_rope(x, layout=layout, offset=np.array([0, 999, 7777]))  # per-row items
        wide = np.ones((3, 40, 1, 1024 // np.dtype(dt).itemsize), dt)  # 1 KiB rows: prefetched
        fastpe.apply_rope(wide, layout=layout)
        fastpe.apply_rope(wide, layout=layout, offset=np.array([0, 5, 9]))  # the runs walk
        fastpe.apply_rope(wide, layout=layout, offset=np.array([0, 999, 7777]))  # (fused)
        fastpe.apply_rope(wide[:1], layout=layout)  # one batch row of one head: fused
        heads = np.ones((3, 40, 2, 512 // np.dtype(dt).itemsize), dt)  # interleaved: prefetched
        fastpe.apply_rope(heads, layout=layout)
        fastpe.apply_rope(heads, layout=layout, offset=np.array([0, 5, 9]))  # the runs walk
        fastpe.apply_rope(heads, layout=layout, offset=np.array([0, 999, 7777]))
        long = np.ones((3, 4, 1, 8192 // np.dtype(dt).itemsize), dt)  # 8 KiB rows: halves
        fastpe.apply_rope(long, layout=layout)
        fastpe.apply_rope(long, layout=layout, offset=np.array([0, 5, 9]))  # the runs walk
        fastpe.apply_rope(long, layout=layout, offset=np.array([0, 999, 7777]))
        fastpe.add_sinusoidal(wide[0, :, 0], layout=layout)  # f32 half (Zen 5: both): prefetched
        fastpe.add_sinusoidal(wide[:, :, 0], layout=layout)
        fastpe.add_sinusoidal(x[:, :, 0], layout=layout, positions=read_only(np.arange(40)))
        fastpe.sinusoidal_table(positions=read_only(np.arange(40)), dim=16, dtype=dt)
        fastpe.sinusoidal_table(40, 16, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 2, dtype=dt, layout=layout)  # a few channels: lanes
        fastpe.sinusoidal_table(40, 6, dtype=dt, layout=layout)  # (half: lanes of its own)
        fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 16, dtype=dt, layout=layout,
                                out=np.empty((16, 40), dt).T)
        # float32 rows of 128 pairs and more: stepped (fastpe._engine.table_stepped)
        fastpe.sinusoidal_table(40, 256, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 256, dtype=dt, layout=layout,
                                out=np.empty((256, 40), dt).T)
        fastpe.add_sinusoidal(x[:, :, 0], layout=layout)
        fastpe.add_sinusoidal(x[0, :, 0], layout=layout)
        fastpe.add_sinusoidal(np.ones((3, 40, 4), dt), layout=layout)  # a few: lanes
        fastpe.add_sinusoidal(np.ones((3, 40, 64), dt), layout=layout)
        for v in (np.ones((3, 40, 64), dt)[:, :, ::2], np.ones((40, 64), dt)[:, ::-1],
                  np.ones((40, 64), dt)[:, ::2], np.ones((40, 64), dt)[::-1]):
            fastpe.add_sinusoidal(v, layout=layout, out=v)  # in place: strided, reversed
        fastpe.apply_rope(np.ones((3, 40, 1, 16), dt), layout=layout)  # one head
        fastpe.apply_rope(np.ones((3, 40, 1, 2), dt), layout=layout)  # one pair
    fastpe.sinusoidal_table(40, 16, dtype=dt, convention="fairseq", padding_idx=1)
    for _ in range(2):  # the second calls planned
        fastpe.timestep_embedding(np.array([0.5, 999.25]), 16, dtype=dt)
        fastpe.add_timestep_embedding(np.ones((2, 16), dt), np.array([3, 999]))
        fastpe.add_timestep_embedding(np.ones((2, 16), dt), np.array([3, 999]),
                                      flip_sin_to_cos=True)  # channels in reverse
        fastpe.sinusoidal_embedding(np.array([3, 7]), 16, order="cos_sin", dtype=dt)
        fastpe.add_sinusoidal_embedding(np.ones((2, 16), dt), np.array([3, 7]), order="cos_sin")
        fastpe.sinusoidal_embedding(np.array([3.0, 7.0]), 16, order="cos_sin", dtype=dt)
        fastpe.sinusoidal_embedding(np.array([3.5, 7.0]), 16, dtype=dt)
    fastpe.timestep_embedding(np.array([3, 999]), 16, dtype=dt)
    # float32 rows of fewer than 8 pairs: stepped (fastpe._engine.table_stepped), forward
    # and with the channels in reverse
    fastpe.timestep_embedding(np.array([3, 999]), 8, dtype=dt)
    fastpe.sinusoidal_embedding(np.array([3, 7]), 8, order="cos_sin", dtype=dt)
    fastpe.grid_sinusoidal((4, 5), 16, cls_token=True, dtype=dt)
    fastpe.add_grid_sinusoidal(np.ones((2, 21, 16), dt), (4, 5), cls_token=True)
    fastpe.add_timestep_embedding(np.ones((2, 16), dt), np.array([0.5, 2.25]))
from fastpe import _engine
_engine._PLAIN_DIRECT_MIN_BYTES = 0  # tables a line at a time by plain stores (not on znver3)
_engine._PLAIN_DIRECT_ROW_BYTES = 0
for dt in (np.float32, np.float64):
    for layout in ("interleaved", "half"):
        fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout, positions=np.arange(40) * 3)
        fastpe.sinusoidal_table(40, 256, dtype=dt, layout=layout)  # (float32: stepped)
_engine._STREAM_MIN_BYTES = 0  # large tables: their streaming paths were warmed too
for dt in (np.float32, np.float64):
    for layout in ("interleaved", "half"):
        fastpe.sinusoidal_table(40, 16, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout)  # straight into memory
        fastpe.sinusoidal_table(40, 60, dtype=dt, layout=layout)  # through L1
        fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout, positions=np.arange(40) * 3)
        fastpe.sinusoidal_table(40, 256, dtype=dt, layout=layout)  # float32: stepped rows
        fastpe.sinusoidal_table(40, 260, dtype=dt, layout=layout)
        fastpe.sinusoidal_table(40, 256, dtype=dt, layout=layout, out=np.empty((256, 40), dt).T)
    fastpe.sinusoidal_table(40, 16, dtype=dt, convention="fairseq", padding_idx=1)
    fastpe.grid_sinusoidal((4, 5), 16, cls_token=True, dtype=dt)
# the prefetches some CPUs take in large arrays only (RoPE rows from 128-512 bytes and the
# line passes' longer distance: _engine.prefetch_512; paced grid sums), here from 0 bytes
_engine._prefetch512, _engine._PREFETCH_512_BOUND = True, 0
fastpe.conventions._grid_paced, fastpe.conventions.GRID_PACE_MIN_BYTES = True, 0
for dt in (np.float32, np.float64):
    for layout in ("interleaved", "half"):
        for d, kw in ((128, {}), (64, {}), (128, {"rotary_dim": 32}), (64, {"offset": [0, 9]})):
            fastpe.apply_rope(np.ones((2, 40, d), dt), layout=layout, **kw)
        fastpe.apply_rope(np.ones((2, 40, 2, 128), dt), layout=layout)
        fastpe.apply_rope(np.ones((1, 40, 256), dt), layout=layout)  # fused
        fastpe.add_sinusoidal(np.ones((1, 40, 256), dt), layout=layout)
    fastpe.add_grid_sinusoidal(np.ones((2, 21, 16), dt), (4, 5), cls_token=True)
print([len(k.signatures) for k in kernels] == before)
"""


AFTER_WARMUP16 = """
import numpy as np
import fastpe
from fastpe._kernels import half
from fastpe._args import check_float_dtype
fastpe.warmup(dtypes=[{name!r}])
kernels = (half.rope16_kernel, half.table16_kernel, half.table16_lanes_kernel,
           half.table16_blocks_kernel, half.add16_kernel, half.add16_lanes_kernel)
before = [len(k.signatures) for k in kernels]
dt = check_float_dtype({name!r}, "dtype")
x = np.ones((3, 40, 2, 16), dt)
for layout in ("interleaved", "half"):
    fastpe.apply_rope(x, layout=layout)
    fastpe.apply_rope(x, layout=layout, offset=np.array([0, 5, 9]))
    for d in (2, 4, 8, 32):  # one head of short rows: the short walk
        one = np.ones((3, 40, d), dt)
        fastpe.apply_rope(one, layout=layout)
        fastpe.apply_rope(one, layout=layout, offset=np.array([0, 5, 9]))
        fastpe.apply_rope(one, layout=layout, positions=np.arange(40) + 7)
        fastpe.sinusoidal_table(40, d, dtype=dt, layout=layout)  # lanes or blocks (16 ch.)
        fastpe.sinusoidal_table(600, d, dtype=dt, layout=layout)  # blocks of 256 too
        apart = np.empty((40, 2 * d), dt)[:, :d]  # rows apart: the lanes
        fastpe.sinusoidal_table(40, d, dtype=dt, layout=layout, out=apart)
        fastpe.add_sinusoidal(one, layout=layout)  # lanes up to 16 channels
    fastpe.sinusoidal_table(40, 6, dtype=dt, layout=layout)  # 3 pairs: half layout's lanes
    fastpe.sinusoidal_table(40, 64, dtype=dt, layout=layout)
    fastpe.add_sinusoidal(np.ones((3, 40, 64), dt), layout=layout)
print([len(k.signatures) for k in kernels] == before)
"""


@pytest.mark.parametrize("cpu", ["other", "half", "zen5"])
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_warmup_compiles_every_16_bit_path(name, cpu):
    """After fastpe.warmup(dtypes=[name]), the calls of that 16-bit dtype on each walk (rows
    of heads, one head of short rows in either layout, tables and sums of a few pairs)
    compile nothing more (as test_warmup_compiles_every_path, for the 16-bit kernels, which
    are compiled per 16-bit dtype)."""
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    fastpe.warmup(dtypes=[name])
    # the child takes the paths of Zen 5, of the CPUs whose rows prefetch from half the
    # last-level cache (fastpe._engine.prefetch_bounded: its small arrays do not), or of
    # the others (every size), whatever this CPU is
    pin = f"import fastpe._engine\nfastpe._engine._zen5 = {cpu == 'zen5'}\n"
    pin += f"fastpe._engine._prefetch_bounded = {cpu == 'half'}\n"
    r = run_python(
        [sys.executable, "-c", pin + AFTER_WARMUP16.format(name=name)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "True", r.stdout


@pytest.mark.parametrize("llc_after", [0, 1 << 62])
@pytest.mark.parametrize("zen5", [False, True])
def test_warmup_compiles_every_path(zen5, llc_after):
    # after fastpe.warmup() no call of any op, dtype or layout compiles a kernel again (or
    # loads one: loading adds a signature too). The child uses this process's on-disk
    # cache, filled here first, so that it loads rather than compiles: what warmup prepares
    # is the same either way, and an empty cache costs 13-30 s (measured in bench/). The
    # child takes the paths of Zen 5 CPUs, or those of the others, whatever this CPU is
    # (fastpe._engine.zen5_or_later: some prefetching loops are specializations of their own).
    # Zen 5 prefetches rows only in arrays as large as the last-level cache
    # (fastpe._engine.prefetch_fits): warmup runs with a cache no array reaches, and the
    # calls after it with none (``llc_after`` 0: their small arrays take the prefetching
    # loops) or with one every array fits (the loops that do not prefetch)
    # Other CPUs prefetch at every size, or from a part of the last-level cache
    # (fastpe._engine.prefetch_bounded): the child takes that bound, with which
    # ``llc_after`` 0 takes the loops of a CPU without one (_LLC_BYTES is read by
    # prefetch_fits alone, and a bound of 0 lets every array prefetch)
    fastpe.warmup()
    pin = f"import fastpe._engine\nfastpe._engine._zen5 = {zen5}\n"
    pin += f"fastpe._engine._prefetch_bounded = {not zen5}\n"
    pin += "fastpe._engine._LLC_BYTES = 1 << 62\n"
    after = AFTER_WARMUP.replace(
        "fastpe.warmup()\n", f"fastpe.warmup()\nfastpe._engine._LLC_BYTES = {llc_after}\n", 1
    )
    assert after != AFTER_WARMUP
    r = run_python(
        [sys.executable, "-c", pin + after],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_on_flag_prunes_before_typing():
    """A kernel's specialization flag ``ON`` (``fastpe._flag``) is decided before numba
    types anything: the branch it rules out is gone, so code there that could not be typed
    does not matter, as with None; with True (``boolean``) numba keeps and types both
    branches, and fails on it. Each specialization holds only the code it runs."""
    import numba

    from fastpe._flag import ON
    from fastpe._kernels import flag  # noqa: F401  (numba's type of ON)

    @numba.njit(cache=False)
    def pick(f):
        if f is not None:
            return 1
        return undefined_name  # noqa: F821  (typed only if this branch is kept)

    @numba.njit(cache=False)
    def pick_none(f):
        if f is None:
            return 2
        return undefined_name  # noqa: F821

    assert pick(ON) == 1
    assert pick_none(None) == 2
    with pytest.raises(numba.core.errors.TypingError):
        pick(True)


ON_CACHE = """
import sys, time
sys.path.insert(0, {root!r})
import numpy as np, fastpe, numba
x = np.ones((2, 8, 64), np.float16)
fastpe.apply_rope(x, layout="interleaved")  # interleaved: ON
from fastpe._kernels import half
print(len(half.rope16_kernel.stats.cache_hits), len(half.rope16_kernel.stats.cache_misses))
"""


def test_on_flag_signatures_cache(tmp_path):
    """A kernel called with ``ON`` is written to numba's cache and loaded from it by the
    next process (its type pickles; ``ON`` pickles to itself)."""
    import pickle

    from fastpe._flag import ON

    assert pickle.loads(pickle.dumps(ON)) is ON and repr(ON) == "ON"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = ON_CACHE.format(root=str(Path(fastpe.__file__).parents[1]))
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert runs[0].stdout.split() == ["0", "1"]  # compiled
    assert runs[1].stdout.split() == ["1", "0"]  # loaded


SAME_BITS = """
import sys
sys.path.insert(0, {root!r})
import numpy as np, fastpe
from fastpe import _engine
from fastpe._args import check_float_dtype
_engine._zen5 = False
_engine._prefetch_bounded = False  # (the parent's rule: tests/conftest.py)
print(same_bits_call({name!r}, {op!r}))
"""


def same_bits_call(name: str, op: str) -> str:
    """The bytes (hex) of one call: RoPE in place on a slice of x (``op`` its layout), or
    timestep embeddings of float timesteps (``op`` "timestep"). Its source runs in the
    children of :func:`test_compiled_and_cached_kernels_give_the_same_bits` too (SAME_BITS
    imports what it uses)."""
    dt = check_float_dtype(name, "dtype")
    if op == "timestep":
        t = np.random.default_rng(9).uniform(0, 1000, 301)
        return fastpe.timestep_embedding(t, 64, dtype=dt).view(np.uint8).tobytes().hex()
    x = np.random.default_rng(9).standard_normal((3, 301, 3, 70)).astype(dt)
    fastpe.apply_rope(x[..., :64], out=x[..., :64], layout=op, offset=3)
    return x.view(np.uint8).tobytes().hex()


@pytest.mark.parametrize(
    "name, op",
    [
        ("bfloat16", "half"),
        ("float16", "interleaved"),
        ("float32", "half"),
        ("float64", "half"),
        ("float32", "timestep"),
    ],
)
def test_compiled_and_cached_kernels_give_the_same_bits(tmp_path, monkeypatch, name, op):
    """A call in a process that compiles its kernel (an empty cache) and in one that loads
    it from numba's cache give the same bits, as does this process's. Before the rotation's
    fused multiply-adds were written out (``fastpe._kernels.turn``), LLVM picked which
    product to fuse: this bfloat16 half-layout RoPE call compiled one pick and loaded the
    other (a few values one or more units apart). The float timesteps' sin/cos polynomials
    write theirs out too (``fastpe._kernels.fractional``)."""
    if name == "bfloat16":
        pytest.importorskip("ml_dtypes")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = SAME_BITS.format(root=str(Path(fastpe.__file__).parents[1]), name=name, op=op)
    code = code.replace("print(", inspect.getsource(same_bits_call) + "\nprint(", 1)
    runs = [
        run_python([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert list(tmp_path.rglob("*.nbi")), "the first child cached nothing"
    compiled, loaded = (r.stdout.strip() for r in runs)
    assert compiled == loaded
    monkeypatch.setattr(_engine, "_zen5", False)
    assert same_bits_call(name, op) == compiled


NO_FMA = """
import sys
sys.path.insert(0, {root!r})
import importlib, json, pkgutil
import numpy as np, fastpe
import fastpe._kernels as K
from fastpe._kernels import turn
from numba.core.registry import CPUDispatcher
t = np.random.default_rng(5).uniform(0, 1000, 48)
x = np.random.default_rng(6).standard_normal((2, 64, 4, 128)).astype(np.float32)
out = {{"fma": turn.TARGET_FMA, "x": x.tobytes().hex()}}
out["t32"] = fastpe.timestep_embedding(t, 64, dtype=np.float32).tobytes().hex()
out["t64"] = fastpe.timestep_embedding(t, 64, dtype=np.float64).tobytes().hex()
out["f16"] = fastpe.sinusoidal_table(300, 1024, dtype=np.float16).tobytes().hex()
fastpe.apply_rope(x, out=x, layout="half", offset=7)
out["rope"] = x.tobytes().hex()
ir = {{}}
for m in pkgutil.iter_modules(K.__path__):
    for name, d in vars(importlib.import_module("fastpe._kernels." + m.name)).items():
        if isinstance(d, CPUDispatcher):
            for sig in d.signatures:
                ir.setdefault(name, []).append("llvm.fma" in d.inspect_llvm(sig))
out["ir"] = ir
print(json.dumps(out))
"""


def test_without_fused_multiply_add_no_kernel_calls_fma(tmp_path):
    """On a CPU without fused multiply-add (an x86 one before FMA3, or a VM that hides it),
    ``llvm.fma`` is a call of libm's ``fma`` per value: the float-position polynomials and
    the 16-bit tables' float32 pass called it (float32 timestep embeddings 4.6x slower,
    float16 tables 4.7x; README, "Without fused multiply-add"). A child compiles for this
    CPU with fused multiply-add switched off (``NUMBA_CPU_FEATURES``, which numba compiles
    for and ``turn.TARGET_FMA`` reads), from an empty cache: no kernel it compiled holds
    ``llvm.fma``; the values keep their bounds (float32 timesteps within 1 ulp and float64
    within a few units of the reference, RoPE within its bound), and the float16 table
    has this process's bits (its values are the float64 fold's, rounded once, either
    way)."""
    import json

    from numba.core import config

    from fastpe import _cases, reference

    if config.CPU_FEATURES is not None:
        pytest.skip("NUMBA_CPU_FEATURES is set already")
    from llvmlite import binding

    features = binding.get_host_cpu_features().flatten()
    if "+fma" not in features.split(","):
        pytest.skip("this CPU has no fused multiply-add: every run here takes that path")
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path),
        "NUMBA_CPU_FEATURES": features.replace("+fma", "-fma"),
    }
    code = NO_FMA.format(root=str(Path(fastpe.__file__).parents[1]))
    r = run_python([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["fma"] is False
    # every kernel of those calls compiled, and none with a call of llvm.fma
    assert {"frac_kernel", "table16_kernel", "rope_kernel", "_ksin"} <= set(out["ir"])
    assert not any(any(v) for v in out["ir"].values()), out["ir"]

    def arr(key, dt, shape):
        return np.frombuffer(bytes.fromhex(out[key]), dtype=dt).reshape(shape)

    t = np.random.default_rng(5).uniform(0, 1000, 48)
    for key, dt, bound in (
        ("t32", np.float32, _cases.TABLE_F32_ULP),
        ("t64", np.float64, _cases.TABLE_F64_ULP1),
    ):
        ref = reference.timestep_embedding(t, 64, dtype=dt)
        assert _cases.table_error(arr(key, dt, (48, 64)), ref) <= bound, key
    x = arr("x", np.float32, (2, 64, 4, 128))
    want = reference.apply_rope(x, layout="half", offset=7)
    err = _cases.rope_error(arr("rope", np.float32, x.shape), want, x, "half", 128)
    assert err <= _cases.ROPE_ULP[np.dtype(np.float32)]
    f16 = fastpe.sinusoidal_table(300, 1024, dtype=np.float16)
    np.testing.assert_array_equal(arr("f16", np.uint16, f16.shape), f16.view(np.uint16))
