"""Larger-than-memory .npy files: rope_file, table_file and the rope/table commands.

Results must be bit for bit those of the in-memory functions; runs killed part way must
leave nothing half written behind (``-o``) or be finished exactly by a rerun (in place).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _util import child_env, popen_python, run_python

import fastpe
from fastpe import _journal, _npyfile, cli, files

KIB, MIB = 2**10, 2**20


def bits_equal(got: np.ndarray, want: np.ndarray) -> bool:
    """Same shape, dtype and bytes (NaNs and signed zeros included)."""
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def make(path: Path, shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    np.save(path, x)
    return x


def env(**extra: str) -> dict:
    e = child_env()
    e.pop(files.SLEEP_ENV, None)
    e.update(extra)
    return e


def fastpe_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "fastpe", *map(str, args)]


def run_cmd(cmd: list) -> subprocess.CompletedProcess:
    """A command run to its end in a child (its output captured, its exit status not
    checked), with this file's environment."""
    return run_python(cmd, env=env(), capture_output=True, text=True, timeout=120, check=False)


def run_cli(*args) -> int:
    return cli.main([str(a) for a in args])


def side_files(d: Path) -> list[str]:
    """Undo and partial files left in ``d``."""
    return sorted(
        p.name for p in d.iterdir() if _journal.UNDO_SUFFIX in p.name or ".partial-" in p.name
    )


def journal(path: Path) -> dict | None:
    """The in-place journal kept with the file (an extended attribute), or None."""
    try:
        return json.loads(os.getxattr(path, _journal.XATTR))
    except OSError:
        return None


def n_chunks(path: Path, chunk: int, kw: dict) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        info = _npyfile.read_npy_header(fd, path)
    finally:
        os.close(fd)
    defaults = files.rope_file.__kwdefaults__
    return files._rope_job(
        info, chunk, {name: kw.get(name, defaults[name]) for name in _journal.ROPE_OPTIONS}
    ).plan.n_chunks


# ------------------------------------------------------------------------------------------
# Bit-identical results
# ------------------------------------------------------------------------------------------

ROPE_CASES = [
    # shape, dtype, apply_rope keyword arguments, chunk bytes
    ((4, 2048, 64), np.float32, {}, 100 * KIB),  # positions of one sequence per chunk
    (
        (64, 128, 64),
        np.float64,
        {"layout": "half", "rotary_dim": 32, "offset": 1000},
        200 * KIB,
    ),  # whole sequences, several per chunk, last chunk short
    ((2, 1024, 4, 64), np.float32, {"layout": "half", "offset": 7}, 100 * KIB),
    ((2, 4, 1024, 64), np.float32, {"seq_axis": 2, "rotary_dim": 48}, 100 * KIB),
    ((1024, 2, 4, 32), np.float64, {"seq_axis": 0, "inverse": True}, 100 * KIB),
    ((2048, 4, 64), np.float32, {"seq_axis": -3, "layout": "half"}, 100 * KIB),
    ((16384, 32), np.float32, {"offset": 2**20 - 5000}, 100 * KIB),  # crosses p >> 16
    (
        (2, 4096, 32),
        np.float32,
        {"scaling": {"rope_type": "dynamic", "factor": 2.0}, "max_position_embeddings": 1024},
        100 * KIB,
    ),
    (
        (2, 2048, 64),
        np.float64,
        {
            "layout": "half",
            "scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 1024,
            },
        },
        100 * KIB,
    ),
    ((2, 2048, 4, 32), np.float16, {"layout": "half", "offset": 70000}, 100 * KIB),
    ((2, 2048, 64), np.float16, {"rotary_dim": 32, "inverse": True}, 50 * KIB),
]


@pytest.mark.parametrize(
    ("shape", "dtype", "kw", "chunk"),
    ROPE_CASES,
    ids=[f"{len(c[0])}d-{np.dtype(c[1]).name}-{i}" for i, c in enumerate(ROPE_CASES)],
)
def test_rope_file_matches_apply_rope(tmp_path, shape, dtype, kw, chunk):
    src = tmp_path / "x.npy"
    x = make(src, shape, dtype)
    want = fastpe.apply_rope(x, **kw)
    assert n_chunks(src, chunk, kw) >= 10

    out = files.rope_file(src, tmp_path / "y.npy", chunk_bytes=chunk, **kw)
    assert out == tmp_path / "y.npy"
    assert bits_equal(np.load(out), want)
    assert bits_equal(np.load(src), x)  # the input is left alone

    assert files.rope_file(src, in_place=True, chunk_bytes=chunk, **kw) == src
    assert bits_equal(np.load(src), want)
    assert side_files(tmp_path) == []


def test_rope_file_empty_and_2d_default(tmp_path):
    src = tmp_path / "e.npy"
    np.save(src, np.zeros((0, 8, 16), dtype=np.float32))
    assert np.load(files.rope_file(src, tmp_path / "o.npy")).shape == (0, 8, 16)
    files.rope_file(src, in_place=True)
    x = make(tmp_path / "a.npy", (300, 16), np.float64)
    files.rope_file(tmp_path / "a.npy", in_place=True, chunk_bytes=1000, base=500000.0)
    assert bits_equal(np.load(tmp_path / "a.npy"), fastpe.apply_rope(x, base=500000.0))
    assert side_files(tmp_path) == []


def test_cli_rope_options(tmp_path):
    src = tmp_path / "x.npy"
    x = make(src, (3, 700, 2, 32), np.float64)
    scaling = {"rope_type": "linear", "factor": 2.0}
    (tmp_path / "s.json").write_text(json.dumps(scaling))
    kw = {
        "layout": "half",
        "base": 50000.0,
        "offset": 11,
        "rotary_dim": 16,
        "inverse": True,
        "scaling": scaling,
    }
    want = fastpe.apply_rope(x, **kw)
    common = [
        "--layout",
        "half",
        "--base",
        "50000",
        "--offset",
        "11",
        "--rotary-dim",
        "16",
        "--inverse",
        "--chunk-mib",
        "0.03",
    ]
    assert (
        run_cli(
            "rope", src, "-o", tmp_path / "y.npy", *common, "--scaling-json", json.dumps(scaling)
        )
        == 0
    )
    assert bits_equal(np.load(tmp_path / "y.npy"), want)
    assert (
        run_cli(
            "rope",
            src,
            "--in-place",
            *common,
            "--scaling-json",
            tmp_path / "s.json",
            "--no-progress",
        )
        == 0
    )
    assert bits_equal(np.load(src), want)


def test_progress_bar(tmp_path, capsys):
    src = tmp_path / "x.npy"
    make(src, (4, 256, 32))
    files.rope_file(src, tmp_path / "y.npy", chunk_bytes=8 * KIB)
    assert capsys.readouterr().err == ""  # stderr is not a terminal: quiet
    files.rope_file(src, in_place=True, chunk_bytes=8 * KIB, progress=True)
    err = capsys.readouterr().err
    assert "100%" in err and "x.npy" in err and err.endswith("\n")


# ------------------------------------------------------------------------------------------
# Crash safety
# ------------------------------------------------------------------------------------------


class Crash(Exception):
    pass


def crash_at(monkeypatch, stage: str, chunk: int, action=None) -> None:
    def hook(s: str, k: int) -> None:
        if (s, k) == (stage, chunk):
            if action is not None:
                action()
            raise Crash(f"{s} {k}")

    monkeypatch.setattr(_npyfile, "crash_point", hook)


ROWS, DIM = 4096, 64  # float32: 256-byte rows, 64 rows per 16 KiB chunk
CHUNK = 16 * KIB


def scribble(path: Path, chunk: int) -> None:
    """Overwrite half of chunk ``chunk`` with garbage: a torn write."""
    start = 128 + chunk * CHUNK  # np.save's header of a small 2-D float32 array
    with open(path, "r+b") as f:
        f.seek(start + CHUNK // 4)
        f.write(np.random.default_rng(9).bytes(CHUNK // 2))


@pytest.mark.parametrize("stage", ["undo-written", "journaled", "data-written"])
def test_in_place_resumes_bit_identical_after_crash(tmp_path, monkeypatch, stage):
    src = tmp_path / "x.npy"
    x = make(src, (ROWS, DIM))
    kw = {"offset": 5, "layout": "half"}
    want = fastpe.apply_rope(x, **kw)
    torn = (lambda: scribble(src, 3)) if stage == "journaled" else None
    crash_at(monkeypatch, stage, 3, torn)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **kw)
    record = journal(src)
    # Chunk k's undo bytes are saved while the journal still names chunk k - 1.
    done = 2 if stage == "undo-written" else 3
    assert record["state"] == "running"
    assert record["done"] == done and record["n_chunks"] == ROWS * DIM * 4 // CHUNK
    assert record["pending"]["chunk"] == done
    got = np.load(src)
    assert not bits_equal(got, want) and not bits_equal(got, x)  # partly rotated

    # The resumed run crashes too, after a torn write of chunk 3, then a later one.
    monkeypatch.setattr(
        _npyfile,
        "crash_point",
        _chain(
            lambda s, k: (s, k) == ("data-written", 3) and scribble(src, 3) is None,
            lambda s, k: (s, k) == ("journaled", 6),
        ),
    )
    for _ in range(2):
        with pytest.raises(Crash):
            files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **kw)
    monkeypatch.setattr(_npyfile, "crash_point", lambda s, k: None)
    # A different chunk size on resume is ignored: the journal's chunking is kept.
    assert files.rope_file(src, in_place=True, chunk_bytes=MIB, **kw) == src
    assert bits_equal(np.load(src), want)
    assert side_files(tmp_path) == []
    assert journal(src)["state"] == "done"


def _chain(*crash_when):
    """A crash hook that raises at the first matching point, then at the next, and so on."""
    todo = list(crash_when)

    def hook(stage: str, k: int) -> None:
        if todo and todo[0](stage, k):
            todo.pop(0)
            raise Crash(f"{stage} {k}")

    return hook


def test_in_place_resume_refuses_other_parameters(tmp_path, monkeypatch):
    src = tmp_path / "x.npy"
    x = make(src, (ROWS, DIM))
    crash_at(monkeypatch, "data-written", 2)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, rotary_dim=32)
    monkeypatch.setattr(_npyfile, "crash_point", lambda s, k: None)
    before = src.read_bytes()
    with pytest.raises(
        ValueError,
        match=r"rotary_dim=32; this call has rotary_dim=64.*"
        r"rerun with the original parameters.*restore the file from a "
        r"copy, then rotate it with again=True",
    ) as err:
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK)
    assert "chunks 0..1 of 64 are rotated" in str(err.value)
    assert src.read_bytes() == before
    with pytest.raises(ValueError, match="partly rotated by an interrupted in-place run"):
        files.rope_file(src, tmp_path / "y.npy", rotary_dim=32)
    assert not (tmp_path / "y.npy").exists()
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, rotary_dim=32)
    assert bits_equal(np.load(src), fastpe.apply_rope(x, rotary_dim=32))


def test_new_file_is_not_left_half_written(tmp_path, monkeypatch):
    src = tmp_path / "x.npy"
    x = make(src, (ROWS, DIM))
    old = np.arange(4.0)
    np.save(tmp_path / "y.npy", old)
    crash_at(monkeypatch, "chunk-written", 5)
    with pytest.raises(Crash):
        files.rope_file(src, tmp_path / "y.npy", chunk_bytes=CHUNK)
    with pytest.raises(Crash):
        files.table_file(tmp_path / "t.npy", seq_len=ROWS, dim=DIM, chunk_bytes=CHUNK)
    assert bits_equal(np.load(tmp_path / "y.npy"), old)  # the old file, untouched
    assert not (tmp_path / "t.npy").exists()
    assert side_files(tmp_path) == []
    assert bits_equal(np.load(src), x)


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended (rc {proc.returncode}) before {what}: "
                f"{proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def journal_done(path: Path) -> int:
    try:
        return journal(path)["done"]
    except (TypeError, ValueError):
        return -1


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_in_place_then_rerun(tmp_path):
    src = tmp_path / "big.npy"
    x = make(src, (8, 512, 2, 64))  # 2 MiB, 32 chunks of 64 KiB
    want = fastpe.apply_rope(x, layout="half", offset=3)
    args = ["rope", src, "--in-place", "--chunk-mib", "0.0625", "--layout", "half", "--offset", "3"]
    with popen_python(
        fastpe_cmd(*args),
        env=env(**{files.SLEEP_ENV: "0.05"}),
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        wait_for(lambda: journal_done(src) >= 4, proc, "4 chunks were done")
        kill(proc)
    assert 4 <= journal_done(src) < 32

    before = src.read_bytes()
    r = run_cmd(fastpe_cmd(*args, "--base", "500000"))
    assert r.returncode == 2
    assert "base=10000.0" in r.stderr and "base=500000.0" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert src.read_bytes() == before and journal(src)["state"] == "running"

    r = run_cmd(fastpe_cmd(*args))
    assert r.returncode == 0, r.stderr
    assert "finished the interrupted in-place run" in r.stderr
    assert bits_equal(np.load(src), want)
    assert side_files(tmp_path) == []


def test_sigkill_new_file_then_rerun(tmp_path):
    src = tmp_path / "big.npy"
    x = make(src, (4, 1024, 128), np.float64)  # 4 MiB, 64 chunks of 64 KiB
    out = tmp_path / "out.npy"
    args = ["rope", src, "-o", out, "--chunk-mib", "0.0625", "--rotary-dim", "64"]
    with popen_python(
        fastpe_cmd(*args),
        env=env(**{files.SLEEP_ENV: "0.05"}),
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        wait_for(lambda: bool(side_files(tmp_path)), proc, "the partial file appeared")
        time.sleep(0.3)
        kill(proc)
    assert not out.exists()
    assert side_files(tmp_path) == [f".out.npy.partial-{proc.pid}"]

    r = run_cmd(fastpe_cmd(*args))
    assert r.returncode == 0, r.stderr
    assert bits_equal(np.load(out), fastpe.apply_rope(x, rotary_dim=64))
    assert side_files(tmp_path) == []  # the stale partial file was removed


# ------------------------------------------------------------------------------------------
# Peak memory
# ------------------------------------------------------------------------------------------


def max_rss(cmd: list[str]) -> int:
    """Peak resident memory of ``cmd`` in bytes, measured by GNU time."""
    r = run_python(
        ["/usr/bin/time", "-f", "%M", *cmd],
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stderr.strip().splitlines()[-1]) * KIB


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="needs GNU /usr/bin/time")
def test_peak_memory_stays_near_chunk_size(tmp_path):
    bare = max_rss([sys.executable, "-c", "import fastpe, numba"])
    tiny = tmp_path / "tiny.npy"
    make(tiny, (1, 64, 64))
    # Interpreter, NumPy, numba and the loaded kernels: what any run costs.
    baseline = max_rss(fastpe_cmd("rope", tiny, "-o", tmp_path / "tiny_out.npy"))

    # 400 MiB, mostly a sparse run of zeros (cheap to make); three rows of data to check.
    big, out = tmp_path / "big.npy", tmp_path / "out.npy"
    mm = np.lib.format.open_memmap(big, mode="w+", dtype=np.float32, shape=(200, 8192, 64))
    rows = [0, 117, 199]
    data = np.random.default_rng(0).standard_normal((3, 8192, 64)).astype(np.float32)
    mm[rows] = data
    mm.flush()
    del mm
    size, chunk = big.stat().st_size, 8 * MIB
    try:
        rss_new = max_rss(fastpe_cmd("rope", big, "-o", out, "--chunk-mib", "8"))
        assert bits_equal(np.load(out, mmap_mode="r")[rows], fastpe.apply_rope(data))
        out.unlink()
        rss_in = max_rss(fastpe_cmd("rope", big, "--in-place", "--chunk-mib", "8"))
        assert bits_equal(np.load(big, mmap_mode="r")[rows], fastpe.apply_rope(data))
    finally:
        for p in (big, out):
            p.unlink(missing_ok=True)
    report = (
        f"file {size / MIB:.0f} MiB, chunk {chunk / MIB:.0f} MiB: max RSS -o "
        f"{rss_new / MIB:.0f} MiB, in place {rss_in / MIB:.0f} MiB; baseline "
        f"{baseline / MIB:.0f} MiB (tiny file), {bare / MIB:.0f} MiB (import only)"
    )
    print(report)
    assert size >= 400 * MIB
    for rss in (rss_new, rss_in):
        # What the run adds over the tiny-file run: at most a few chunks of the 400 MiB.
        # (The baseline itself, interpreter and compiled kernels, is near 200 MiB on some
        # machines, so the total is no measure of streaming.)
        assert rss < baseline + 3 * chunk, report


# ------------------------------------------------------------------------------------------
# Refusals
# ------------------------------------------------------------------------------------------


def refused(capsys, tmp_path: Path, src: Path, *args, match: str) -> None:
    before = src.read_bytes()
    names = sorted(os.listdir(tmp_path))
    code = run_cli(*args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("fastpe ") and len(err.strip().splitlines()) == 1, err
    assert match in err, err
    assert src.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == names


def test_refuses_bad_files(tmp_path, capsys):
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([[{"a": 1}, None]], dtype=object), allow_pickle=True)
    refused(capsys, tmp_path, obj, "rope", obj, "--in-place", match="never unpickles")
    refused(capsys, tmp_path, obj, "rope", obj, "-o", tmp_path / "o.npy", match="Python objects")
    ints = tmp_path / "int.npy"
    np.save(ints, np.ones((2, 8, 4), dtype=np.int32))
    refused(capsys, tmp_path, ints, "rope", ints, "--in-place", match="dtype int32")
    fortran = tmp_path / "f.npy"
    np.save(fortran, np.asfortranarray(np.ones((2, 8, 4))))
    refused(capsys, tmp_path, fortran, "rope", fortran, "--in-place", match="Fortran")
    short = tmp_path / "short.npy"
    np.save(short, np.ones((2, 8, 4), dtype=np.float32))
    with open(short, "r+b") as f:
        f.truncate(short.stat().st_size - 4)
    refused(capsys, tmp_path, short, "rope", short, "--in-place", match="truncated")
    text = tmp_path / "text.npy"
    text.write_text("not an array")
    refused(capsys, tmp_path, text, "rope", text, "--in-place", match="not a readable .npy")
    one_d = tmp_path / "v.npy"
    np.save(one_d, np.ones(8))
    refused(capsys, tmp_path, one_d, "rope", one_d, "--in-place", match="shape (8,)")


def test_refuses_bad_parameters(tmp_path, capsys):
    src = tmp_path / "x.npy"
    make(src, (2, 16, 64))
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "--in-place",
        "--rotary-dim",
        "128",
        match="rotary_dim must be even, > 0 and <= 64, got 128",
    )
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "-o",
        tmp_path / "o.npy",
        "--seq-axis",
        "2",
        match="seq_axis must name an axis other than the last (0..1)",
    )
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "--in-place",
        "--base",
        "-1",
        match="base must be finite and > 0",
    )
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "--in-place",
        "--layout",
        "halves",
        match=(
            "layout must be one of 'interleaved', 'half' or 'half:k' (k blocks, each "
            "half-split), got 'halves'"
        ),
    )
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "--in-place",
        "--scaling-json",
        "{bad",
        match="not valid JSON",
    )
    refused(
        capsys,
        tmp_path,
        src,
        "rope",
        src,
        "--in-place",
        "--scaling-json",
        '{"rope_type": "yarn", "factor": 4.0}',
        match="original_max_position_embeddings",
    )
    refused(capsys, tmp_path, src, "rope", src, "-o", src, match="use in_place=True")
    refused(
        capsys, tmp_path, src, "rope", src, "-o", tmp_path / "no" / "o.npy", match="does not exist"
    )
    refused(
        capsys, tmp_path, src, "rope", tmp_path / "missing.npy", "--in-place", match="No such file"
    )
    with pytest.raises(SystemExit) as exc:  # argparse: -o and --in-place are exclusive
        run_cli("rope", src, "-o", tmp_path / "o.npy", "--in-place")
    assert exc.value.code == 2
    capsys.readouterr()
    with pytest.raises(ValueError, match=r"positions for .* must have shape"):
        files.rope_file(src, tmp_path / "o.npy", positions=np.zeros((2, 16, 1), int))
    with pytest.raises(ValueError, match="offset must have one value per batch row"):
        files.rope_file(src, tmp_path / "o.npy", offset=np.arange(3))
    with pytest.raises(ValueError, match="not both"):
        files.rope_file(src, tmp_path / "o.npy", in_place=True)
    with pytest.raises(ValueError, match="give output=PATH"):
        files.rope_file(src)
    with pytest.raises(ValueError, match="chunk_bytes must be >= 1"):
        files.rope_file(src, in_place=True, chunk_bytes=0)
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_refuses_read_only_file_in_place(tmp_path, capsys):
    src = tmp_path / "x.npy"
    x = make(src, (2, 16, 64))
    src.chmod(0o444)  # root may still write it: the mode bits are what is checked
    try:
        refused(capsys, tmp_path, src, "rope", src, "--in-place", match="read-only (mode 0o444)")
        assert run_cli("rope", src, "-o", tmp_path / "y.npy") == 0  # reading is fine
    finally:
        src.chmod(0o644)
    assert bits_equal(np.load(tmp_path / "y.npy"), fastpe.apply_rope(x))


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seq_len", "dim", "dtype", "layout", "offset", "chunk"),
    [
        (5000, 64, np.float32, "interleaved", 0, 10_000),
        (3000, 96, np.float64, "half", 65_000, 40 * KIB),
        (777, 6, np.float32, "half", 2**40, 100),
        (0, 8, np.float64, "interleaved", 0, 100),
        (3000, 64, np.float16, "interleaved", 2**30, 20 * KIB),
    ],
)
def test_table_file_matches_sinusoidal_table(tmp_path, seq_len, dim, dtype, layout, offset, chunk):
    out = files.table_file(
        tmp_path / "pe.npy",
        seq_len=seq_len,
        dim=dim,
        dtype=dtype,
        layout=layout,
        offset=offset,
        chunk_bytes=chunk,
    )
    want = fastpe.sinusoidal_table(seq_len, dim, dtype=dtype, layout=layout, offset=offset)
    assert bits_equal(np.load(out), want)
    assert side_files(tmp_path) == []


def test_cli_table(tmp_path, capsys):
    out = tmp_path / "pe.npy"
    assert (
        run_cli(
            "table",
            "--seq-len",
            "1000",
            "--dim",
            "16",
            "--dtype",
            "float64",
            "--layout",
            "half",
            "--offset",
            "5",
            "--base",
            "500",
            "--chunk-mib",
            "0.01",
            "-o",
            out,
        )
        == 0
    )
    want = fastpe.sinusoidal_table(1000, 16, dtype=np.float64, layout="half", offset=5, base=500.0)
    assert bits_equal(np.load(out), want)
    assert run_cli("table", "--seq-len", "10", "--dim", "7", "-o", tmp_path / "bad.npy") == 2
    err = capsys.readouterr().err
    assert "dim must be a positive even integer" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "bad.npy").exists()


def test_python_dash_m_table(tmp_path):
    out = tmp_path / "pe.npy"
    r = run_cmd(fastpe_cmd("table", "--seq-len", "300", "--dim", "8", "-o", out))
    assert r.returncode == 0, r.stderr
    assert bits_equal(np.load(out), fastpe.sinusoidal_table(300, 8))


def test_the_library_holds_no_command_line_code():
    """The rope/table argument parsing lives in fastpe.cli; fastpe.files is the library."""
    import inspect

    for module in (files, _journal, _npyfile):
        assert "argparse" not in inspect.getsource(module)
    assert not hasattr(files, "add_commands")
    assert "input" not in inspect.signature(files.rope_file).parameters
    assert all(
        p.kind is not p.VAR_KEYWORD for p in inspect.signature(files.rope_file).parameters.values()
    )


def test_scalar_arguments_take_what_apply_rope_takes(tmp_path):
    """The files' shared arguments go through the same checks as apply_rope: a 0-d integer
    array or a NumPy integer is an offset there, so it is one here, recorded as a plain int."""
    x = make(tmp_path / "a.npy", (2, 16, 8), np.float32)
    for offset in (np.array(5), np.int64(5), np.uint8(5)):
        assert fastpe.apply_rope(x, offset=offset) is not None  # what apply_rope accepts
        out = files.rope_file(
            tmp_path / "a.npy",
            tmp_path / "o.npy",
            offset=offset,
            rotary_dim=np.array(4),
            seq_len=np.int32(40),
            inverse=np.bool_(False),
        )
        assert bits_equal(np.load(out), fastpe.apply_rope(x, offset=5, rotary_dim=4, seq_len=40))
    files.rope_file(
        tmp_path / "a.npy", in_place=np.bool_(True), offset=np.array(5), chunk_bytes=256
    )
    assert bits_equal(np.load(tmp_path / "a.npy"), fastpe.apply_rope(x, offset=5))
    record = json.loads(os.getxattr(tmp_path / "a.npy", _journal.XATTR))
    assert type(record["params"]["offset"]) is int and record["params"]["offset"] == 5
    with pytest.raises(TypeError, match=r"in_place must be True or False.*bool\("):
        files.rope_file(tmp_path / "a.npy", in_place=np.array(1))


# ---------------------------------------------------------------- positions, multi-axis

SEQ = 300
POS_3 = np.stack([np.arange(SEQ) // 20, np.arange(SEQ) % 20, (np.arange(SEQ) * 7) % 11])
PAIRS_3 = [0, 0, 1, 1, 2, 2, 0, 1]  # 8 pairs of a 16-channel head


def assert_file_matches_apply_rope(tmp_path, shape, kw, chunk):
    """rope_file to a new file, then in place, then in place again (nothing left to do):
    each bit for bit apply_rope on the array."""
    x = make(tmp_path / "x.npy", shape)
    want = fastpe.apply_rope(x, **kw)
    got = files.rope_file(tmp_path / "x.npy", tmp_path / "y.npy", chunk_bytes=chunk, **kw)
    assert bits_equal(np.load(got), want)
    files.rope_file(tmp_path / "x.npy", in_place=True, chunk_bytes=chunk, **kw)
    assert bits_equal(np.load(tmp_path / "x.npy"), want)
    files.rope_file(tmp_path / "x.npy", in_place=True, chunk_bytes=chunk, **kw)  # done already
    assert bits_equal(np.load(tmp_path / "x.npy"), want)


@pytest.mark.parametrize("chunk", [1 * KIB, 5 * KIB, 64 * MIB])
@pytest.mark.parametrize(
    "kw",
    [
        {"positions": np.arange(SEQ) * 3 + 5},
        {"positions": POS_3, "pair_axes": PAIRS_3, "layout": "half"},
        {"positions": POS_3[:2], "pair_axes": [0, 1] * 4, "inv_freq": 0.5 ** np.arange(8)},
        {"positions": POS_3[:2], "pair_axes": [0] * 4 + [1] * 4, "layout": "half:2"},
        {"positions": np.arange(SEQ) * 3 + 5, "layout": "half:2"},
        {"positions": POS_3, "pair_axes": [[0] * 4 + [1] * 4, [2] * 4 + [1] * 4]},
    ],
    ids=["positions", "m-rope", "axial", "blocked-axes", "blocked", "split-axes"],
)
def test_rope_file_positions_and_axes_match_apply_rope(tmp_path, kw, chunk):
    assert_file_matches_apply_rope(tmp_path, (2, SEQ, 3, 16), kw, chunk)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"positions": np.arange(SEQ), "offset": 3}, r"positions or offset, not both"),
        ({"positions": np.arange(SEQ - 1)}, r"must have shape \(300,\) or \(2, 300\)"),
        (
            {"positions": np.zeros((3, SEQ), int)},
            r"positions must have shape \(300,\) or \(2, 300\)",
        ),
        ({"offset": np.array([0, 1, 2])}, r"offset must have one value per batch row"),
        ({"offset": np.array([0, 2**53])}, r"2\*\*53"),
        ({"positions": np.zeros((2, 2, SEQ), int), "pair_axes": [0, 2] * 4}, r"pair_axes"),
        ({"positions": np.r_[np.arange(SEQ - 1), 2**60]}, r"2\*\*53"),
        ({"positions": POS_3, "pair_axes": [0, 1, 2]}, r"pair_axes"),
        (
            {"positions": POS_3[0], "pair_axes": PAIRS_3},
            r"\(n_axes, 300\) or \(n_axes, 2, 300\) with pair_axes",
        ),
    ],
)
def test_rope_file_positions_refused_before_writing(tmp_path, kw, match):
    x = make(tmp_path / "x.npy", (2, SEQ, 3, 16))
    with pytest.raises(ValueError, match=match):
        files.rope_file(tmp_path / "x.npy", in_place=True, chunk_bytes=KIB, **kw)
    assert bits_equal(np.load(tmp_path / "x.npy"), x)


OFFSETS = np.array([7, 0])
POS_ROWS = np.stack([np.arange(SEQ) * 3 + 5, (np.arange(SEQ) * 11) % 97])  # one row per batch


@pytest.mark.parametrize("chunk", [1 * KIB, 5 * KIB, 64 * MIB])
@pytest.mark.parametrize(
    "shape, kw",
    [
        ((2, SEQ, 3, 16), {"positions": POS_ROWS}),
        ((2, SEQ, 3, 16), {"offset": OFFSETS, "layout": "half"}),
        ((2, SEQ, 3, 16), {"positions": np.stack([POS_3, POS_3 % 7], 1), "pair_axes": PAIRS_3}),
        ((2, 3, SEQ, 16), {"positions": POS_ROWS, "seq_axis": 2}),
        ((2, 3, SEQ, 16), {"offset": OFFSETS, "seq_axis": 2}),
        ((2, SEQ, 16), {"positions": POS_ROWS, "rotary_dim": 8}),
    ],
    ids=["positions", "offsets", "m-rope", "heads-first", "heads-first-offsets", "3-d"],
)
def test_rope_file_per_row_matches_apply_rope(tmp_path, shape, kw, chunk):
    """Positions or offsets per batch row: each chunk takes its own rows' (a chunk of whole
    sequences spans several outer rows; with the heads before the sequence, several outer
    rows share a batch row)."""
    assert_file_matches_apply_rope(tmp_path, shape, kw, chunk)


@pytest.mark.parametrize(
    "kw",
    [
        {"positions": POS_ROWS},
        {"positions": np.arange(SEQ)},
        {"positions": np.stack([POS_3, POS_3], 1), "pair_axes": PAIRS_3},
    ],
    ids=["per-row", "shared", "m-rope"],
)
def test_rope_file_per_row_offsets_with_positions_refused(tmp_path, kw):
    """As apply_rope refuses them, before anything is written (no journal, no undo files)."""
    x = make(tmp_path / "x.npy", (2, SEQ, 3, 16))
    with pytest.raises(ValueError, match="give either positions or offset, not both"):
        files.rope_file(tmp_path / "x.npy", in_place=True, offset=OFFSETS, **kw)
    assert bits_equal(np.load(tmp_path / "x.npy"), x)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]
    assert journal(tmp_path / "x.npy") is None


@pytest.mark.parametrize(
    "shape, kw",
    [
        ((0, 5, 8), {"offset": np.zeros(0, int)}),
        ((0, 5, 8), {"positions": np.zeros((0, 5), int)}),
        ((2, 0, 8), {"positions": np.zeros((2, 0), int)}),
        ((2, 3, 0, 8), {"positions": np.zeros((2, 0), int), "seq_axis": 2}),
        ((0, 5, 8), {"positions": np.zeros((2, 0, 5), int), "pair_axes": [0, 1, 0, 1]}),
    ],
)
def test_rope_file_per_row_empty_axes(tmp_path, shape, kw):
    """Empty batch or sequence axes: nothing to rotate, accepted as apply_rope accepts them."""
    x = make(tmp_path / "x.npy", shape)
    want = fastpe.apply_rope(x, **kw)
    assert bits_equal(np.load(files.rope_file(tmp_path / "x.npy", tmp_path / "y.npy", **kw)), want)


def test_rope_file_per_row_needs_a_batch_axis(tmp_path):
    x = make(tmp_path / "x.npy", (SEQ, 16))
    with pytest.raises(ValueError, match="need a batch axis"):
        files.rope_file(tmp_path / "x.npy", tmp_path / "y.npy", positions=POS_ROWS[:1])
    with pytest.raises(ValueError, match="no batch axis"):
        files.rope_file(tmp_path / "x.npy", tmp_path / "y.npy", offset=OFFSETS[:1])
    assert not (tmp_path / "y.npy").exists()
    assert bits_equal(np.load(tmp_path / "x.npy"), x)


def test_rope_file_journal_tells_offsets_apart(tmp_path):
    make(tmp_path / "x.npy", (2, SEQ, 3, 16))
    files.rope_file(tmp_path / "x.npy", in_place=True, offset=OFFSETS, chunk_bytes=KIB)
    record = json.loads(os.getxattr(tmp_path / "x.npy", _journal.XATTR))
    assert record["params"]["offset"]["shape"] == [2]
    files.rope_file(tmp_path / "x.npy", in_place=True, offset=OFFSETS, chunk_bytes=KIB)  # done
    with pytest.raises(ValueError, match=r"already rotated in place with offset"):
        files.rope_file(tmp_path / "x.npy", in_place=True, offset=OFFSETS + np.array([0, 1]))


def test_rope_file_journal_tells_positions_apart(tmp_path):
    make(tmp_path / "x.npy", (2, SEQ, 3, 16))
    kw = {"pair_axes": PAIRS_3, "layout": "half", "chunk_bytes": KIB}
    files.rope_file(tmp_path / "x.npy", in_place=True, positions=POS_3, **kw)
    other = POS_3.copy()
    other[2, 5] += 1  # same largest position (seq_len), another value
    with pytest.raises(ValueError, match=r"already rotated in place with positions"):
        files.rope_file(tmp_path / "x.npy", in_place=True, positions=other, **kw)


def test_cli_rope_positions_and_axes(tmp_path):
    src = tmp_path / "x.npy"
    x = make(src, (2, SEQ, 3, 16))
    np.save(tmp_path / "p.npy", POS_3[:2])
    np.save(tmp_path / "f.npy", 0.5 ** np.arange(8))
    want = fastpe.apply_rope(
        x, positions=POS_3[:2], pair_axes=[0, 1] * 4, inv_freq=0.5 ** np.arange(8)
    )
    args = ["--positions", tmp_path / "p.npy", "--pair-axes", "0,1,0,1,0,1,0,1"]
    args += ["--inv-freq", tmp_path / "f.npy", "--chunk-mib", "0.01"]
    assert run_cli("rope", src, "-o", tmp_path / "y.npy", *args) == 0
    assert bits_equal(np.load(tmp_path / "y.npy"), want)
    assert run_cli("rope", src, "-o", tmp_path / "z.npy", "--pair-axes", "0,x") == 2
    np.save(tmp_path / "rows.npy", POS_ROWS)  # one row of positions per batch row
    args = ["--positions", tmp_path / "rows.npy", "--chunk-mib", "0.01"]
    assert run_cli("rope", src, "-o", tmp_path / "r.npy", *args) == 0
    assert bits_equal(np.load(tmp_path / "r.npy"), fastpe.apply_rope(x, positions=POS_ROWS))


@pytest.mark.skipif(
    np.dtype(np.longdouble).itemsize <= 8, reason="long double is float64 on this platform"
)
def test_rope_file_long_double_positions_refused_before_writing(tmp_path):
    """A long-double position that float64 rounds (2**53 + 1) is refused before the first
    chunk is written, not when the chunk holding it comes."""
    x = make(tmp_path / "x.npy", (2, SEQ, 3, 16))
    pos = np.arange(SEQ, dtype=np.longdouble)
    pos[-1] = np.longdouble(2**53) + 1
    with pytest.raises(TypeError, match="float64 or narrower"):
        files.rope_file(tmp_path / "x.npy", in_place=True, chunk_bytes=KIB, positions=pos)
    assert bits_equal(np.load(tmp_path / "x.npy"), x)


def _angle_limit(base: float, dim: int) -> int:
    from fastpe._freq import angle_limit, inv_freq_dd

    return angle_limit(*inv_freq_dd(base, dim))


@pytest.mark.parametrize(
    "shape, kw",
    [
        ((2, SEQ, 3, 16), {"offset": "far"}),
        ((3, 1, 16), {"offsets": True}),  # per-row offsets, a sequence of 1
        ((SEQ, 16), {"positions": "shared"}),
        ((2, 4, 16), {"positions": "rows"}),
        ((SEQ, 16), {"positions": "axes", "pair_axes": [0, 1] * 4}),
    ],
    ids=["offset", "per-row-offsets", "positions", "per-row-positions", "m-rope"],
)
def test_rope_file_beyond_the_angle_limit_refused_before_writing(tmp_path, shape, kw):
    """Frequencies above 1 (a base below 1) allow positions up to 2**53 / w only: a call
    with any position beyond (the last one here) is refused before the first chunk is
    written, in small chunks, as the whole call would be."""
    lim = _angle_limit(0.5, 16)
    kw = dict(kw)
    if kw.pop("offset", None):
        kw["offset"] = lim - shape[1] + 2
    if kw.pop("offsets", None):
        kw["offset"] = np.array([1, 2, lim + 1])
    given = kw.pop("positions", None)
    if given == "shared" or given == "axes":
        pos = np.arange(shape[0])
        pos[-1] = lim + 1
        kw["positions"] = pos if given == "shared" else np.stack([np.arange(shape[0]), pos])
    elif given == "rows":
        kw["positions"] = np.array([[0, 1, 2, 3], [4, 5, 6, lim + 1]])
    x = make(tmp_path / "x.npy", shape)
    with pytest.raises(ValueError, match=r"make angles beyond 2\*\*53"):
        files.rope_file(tmp_path / "x.npy", in_place=True, chunk_bytes=64, base=0.5, **kw)
    assert bits_equal(np.load(tmp_path / "x.npy"), x)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_table_file_beyond_the_angle_limit_refused_before_writing(tmp_path):
    lim = _angle_limit(0.5, 16)
    with pytest.raises(ValueError, match=r"make angles beyond 2\*\*53"):
        files.table_file(
            tmp_path / "t.npy", seq_len=100, dim=16, base=0.5, offset=lim - 98, chunk_bytes=64
        )
    assert list(tmp_path.iterdir()) == []
    files.table_file(tmp_path / "t.npy", seq_len=100, dim=16, base=0.5, offset=lim - 99)
    np.testing.assert_array_equal(
        np.load(tmp_path / "t.npy"), fastpe.sinusoidal_table(100, 16, base=0.5, offset=lim - 99)
    )
