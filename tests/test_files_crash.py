"""``rope_file(in_place=True)`` / ``fastpe rope --in-place``: crashes, reruns, identity, locks.

The promise: the same in-place command, rerun after a crash or ``kill -9`` at any moment,
never rotates any byte twice; it finishes the work or says there is nothing left to do. A
file is known by its identity (device, inode), whatever path names it, and two runs on
one file never both rotate. Every refusal leaves the file and its journal as they were.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
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

KIB = 2**10
ROWS, DIM = 4096, 64  # float32: 256-byte rows, 64 chunks of 16 KiB
CHUNK = 16 * KIB
N = ROWS * DIM * 4 // CHUNK
HEADER = 128  # np.save's header of a small 2-D array
KW = {"offset": 5, "layout": "half"}


def make(path: Path, shape=(ROWS, DIM), dtype=np.float32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    np.save(path, x)
    return x


def journal(path: Path) -> dict | None:
    try:
        return json.loads(os.getxattr(path, _journal.XATTR))
    except OSError:
        return None


def undo_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if _journal.UNDO_SUFFIX in p.name)


def snapshot(path: Path) -> tuple:
    """The file's bytes and journal: what a refusal must leave as it was."""
    try:
        record = os.getxattr(path, _journal.XATTR)
    except OSError:
        record = None
    return path.read_bytes(), record


def scribble(path: Path, chunk: int) -> None:
    """Overwrite half of chunk ``chunk`` with garbage: a torn write."""
    with open(path, "r+b") as f:
        f.seek(HEADER + chunk * CHUNK + CHUNK // 4)
        f.write(np.random.default_rng(9).bytes(CHUNK // 2))


class Crash(BaseException):
    """Stands for a kill: nothing catches it (a BaseException, unlike OSError or Exception)."""


def crash_at(monkeypatch, stage: str, chunk: int, before=None) -> None:
    def hook(s: str, k: int) -> None:
        if (s, k) == (stage, chunk):
            if before is not None:
                before()
            raise Crash(f"{s} {k}")

    monkeypatch.setattr(_npyfile, "crash_point", hook)


def no_crash(monkeypatch) -> None:
    monkeypatch.setattr(_npyfile, "crash_point", lambda s, k: None)


def say(caplog) -> str:
    return " ".join(r.getMessage() for r in caplog.records if r.name == "fastpe.files")


# Every step of a run: before the first write, each step of the first, a middle and the last
# chunk (with a torn write of the chunk in flight), after the journal says done, after the
# undo files are gone.
POINTS = [
    ("locked", 0, False),
    ("undo-written", 0, False),
    ("journaled", 0, True),
    ("data-written", 0, False),
    ("undo-written", 3, False),
    ("journaled", 3, True),
    ("data-written", 3, False),
    ("journaled", N - 1, True),
    ("data-written", N - 1, False),
    ("recorded", N, False),
    ("cleaned", N, False),
]


@pytest.mark.parametrize(
    ("stage", "chunk", "torn"), POINTS, ids=[f"{s}-{k}{'-torn' if t else ''}" for s, k, t in POINTS]
)
def test_rerun_after_a_crash_at_any_step_rotates_each_byte_once(
    tmp_path, monkeypatch, caplog, stage, chunk, torn
):
    caplog.set_level("INFO", logger="fastpe.files")
    src = tmp_path / "x.npy"
    x = make(src)
    want = fastpe.apply_rope(x, **KW)
    crash_at(monkeypatch, stage, chunk, (lambda: scribble(src, chunk)) if torn else None)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    no_crash(monkeypatch)
    caplog.clear()
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == want.tobytes()
    said = (
        "nothing left to do"
        if stage in ("recorded", "cleaned")
        else "rotated in place"
        if stage == "locked"  # nothing was recorded yet
        else "finished the interrupted"
    )
    assert said in say(caplog)
    assert journal(src)["state"] == "done" and undo_files(tmp_path) == []
    caplog.clear()
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)  # and again: still nothing
    assert "nothing left to do" in say(caplog)
    assert src.read_bytes()[HEADER:] == want.tobytes()


def env(**extra: str) -> dict:
    e = child_env()
    e.pop(_npyfile.SLEEP_ENV, None)
    e.update(extra)
    return e


# A real kill -9 of the command at one step: the process kills itself from the crash point.
KILLER = """
import os, signal, sys
from fastpe import _npyfile, cli
stage, chunk = sys.argv[1], int(sys.argv[2])
def hook(s, k):
    if (s, k) == (stage, chunk):
        os.kill(os.getpid(), signal.SIGKILL)
_npyfile.crash_point = hook
sys.exit(cli.main(sys.argv[3:]))
"""


def fastpe_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "fastpe", *map(str, args)]


def run_cmd(cmd: list) -> subprocess.CompletedProcess:
    """A command run to its end in a child (its output captured, its exit status not
    checked), with this file's environment."""
    return run_python(cmd, env=env(), capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("stage", "chunk"), [("locked", 0), ("data-written", 15), ("recorded", 16), ("cleaned", 16)]
)
def test_kill_9_then_the_same_command(tmp_path, stage, chunk):
    src = tmp_path / "x.npy"
    x = make(src, (1024, 64))  # 16 chunks of 16 KiB
    args = ["rope", src, "--in-place", "--chunk-mib", str(CHUNK / 2**20), "--offset", "7"]
    r = run_cmd([sys.executable, "-c", KILLER, stage, str(chunk), *map(str, args)])
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = run_cmd(fastpe_cmd(*args))
    assert r.returncode == 0, r.stderr
    assert (
        "nothing left to do"
        if stage in ("recorded", "cleaned")
        else "finished the interrupted"
        if stage != "locked"
        else "rotated in place"
    ) in r.stderr
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, offset=7).tobytes()
    assert undo_files(tmp_path) == []


def test_identity_not_path_symlink_and_hard_link(tmp_path, monkeypatch, caplog):
    caplog.set_level("INFO", logger="fastpe.files")
    real = tmp_path / "data" / "x.npy"
    real.parent.mkdir()
    x = make(real)
    want = fastpe.apply_rope(x, **KW).tobytes()
    link = tmp_path / "link.npy"
    link.symlink_to(real)
    other = tmp_path / "other"
    other.mkdir()
    hard = other / "h.npy"
    os.link(real, hard)

    crash_at(monkeypatch, "data-written", 3)  # crash through the symlink
    with pytest.raises(Crash):
        files.rope_file(link, in_place=True, chunk_bytes=CHUNK, **KW)
    no_crash(monkeypatch)
    assert undo_files(real.parent) == ["x.npy.fastpe-undo0", "x.npy.fastpe-undo1"]
    # -o through either other name is refused while the run is unfinished; nothing written
    for name in (real, hard):
        before = snapshot(real)
        with pytest.raises(ValueError, match="partly rotated by an interrupted in-place run"):
            files.rope_file(name, tmp_path / "o.npy", **KW)
        assert snapshot(real) == before and not (tmp_path / "o.npy").exists()
    crash_at(monkeypatch, "data-written", 9)  # the rerun, through the hard link, crashes too
    with pytest.raises(Crash):
        files.rope_file(hard, in_place=True, chunk_bytes=CHUNK, **KW)
    no_crash(monkeypatch)
    files.rope_file(real, in_place=True, chunk_bytes=CHUNK, **KW)  # finished: real path
    assert real.read_bytes()[HEADER:] == want
    assert "finished the interrupted" in say(caplog)
    for name in (real, link, hard):  # done, whatever the name
        caplog.clear()
        files.rope_file(name, in_place=True, chunk_bytes=CHUNK, **KW)
        assert "nothing left to do" in say(caplog)
    # a new name (rename) is the same file too
    moved = tmp_path / "moved.npy"
    os.rename(hard, moved)
    caplog.clear()
    files.rope_file(moved, in_place=True, **KW)
    assert "nothing left to do" in say(caplog) and real.read_bytes()[HEADER:] == want
    assert undo_files(real.parent) == [] and undo_files(other) == []


def test_again_is_the_way_to_rotate_twice(tmp_path, caplog):
    caplog.set_level("INFO", logger="fastpe.files")
    src = tmp_path / "x.npy"
    x = make(src)
    once = fastpe.apply_rope(x, **KW)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    before = snapshot(src)
    with pytest.raises(
        ValueError,
        match=r"already rotated in place with inverse=False.*"
        r"inverse=True, would rotate the rotated bytes.*again=True",
    ):
        files.rope_file(src, in_place=True, inverse=True, **KW)
    assert snapshot(src) == before
    with pytest.raises(ValueError, match="again=True applies to in_place=True runs only"):
        files.rope_file(src, tmp_path / "o.npy", again=True)
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(once, **KW).tobytes()
    assert (
        cli.main(
            [
                "rope",
                str(src),
                "--in-place",
                "--again",
                "--inverse",
                "--offset",
                "5",
                "--layout",
                "half",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        src.read_bytes()[HEADER:]
        == fastpe.apply_rope(fastpe.apply_rope(once, **KW), inverse=True, **KW).tobytes()
    )


def test_new_bytes_in_the_same_inode_are_a_new_file(tmp_path, caplog):
    caplog.set_level("INFO", logger="fastpe.files")
    src = tmp_path / "x.npy"
    make(src)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    ino = src.stat().st_ino
    os.utime(src, (1, 1))  # touched: the same bytes, still done
    caplog.clear()
    files.rope_file(src, in_place=True, **KW)
    assert "nothing left to do" in say(caplog)
    y = make(src, seed=1)  # np.save truncates and rewrites the same inode
    assert src.stat().st_ino == ino and journal(src)["state"] == "done"
    caplog.clear()
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert "rotated in place" in say(caplog)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(y, **KW).tobytes()
    src.unlink()  # a deleted file's journal goes with its inode, whatever number comes next
    z = make(src, seed=2)
    files.rope_file(src, in_place=True, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(z, **KW).tobytes()


# ------------------------------------------------------------------------------------------
# Two runs on one file
# ------------------------------------------------------------------------------------------


def test_a_second_run_is_refused_while_the_first_holds_the_file(tmp_path):
    src = tmp_path / "x.npy"
    make(src)
    hard = tmp_path / "h.npy"
    os.link(src, hard)
    before = snapshot(src)
    fd = os.open(src, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for name in (src, hard):
            with pytest.raises(
                BlockingIOError, match="another process is rotating this file"
            ) as err:
                files.rope_file(name, in_place=True, **KW)
            assert "rerun" not in str(err.value)
            with pytest.raises(BlockingIOError):
                files.rope_file(name, tmp_path / "o.npy", **KW)
    finally:
        os.close(fd)
    assert snapshot(src) == before and sorted(os.listdir(tmp_path)) == ["h.npy", "x.npy"]
    fd = os.open(hard, os.O_RDONLY)  # a run writing a new file from it holds a shared lock
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        with pytest.raises(
            BlockingIOError,
            match=r"another process is writing a new file "
            r"from this file.*nothing was changed",
        ):
            files.rope_file(src, in_place=True, **KW)
        files.rope_file(src, tmp_path / "o.npy", **KW)  # readers share it
    finally:
        os.close(fd)
    assert snapshot(src) == before


@pytest.mark.parametrize("gap", [0.0, 0.3])
def test_two_launches_a_fraction_of_a_second_apart(tmp_path, gap):
    src = tmp_path / "x.npy"
    x = make(src, (2048, 64))  # 32 chunks, 0.03 s each: a run of about a second
    hard = tmp_path / "h.npy"
    os.link(src, hard)
    common = ["--in-place", "--chunk-mib", str(CHUNK / 2**20), "--offset", "3"]
    slow = env(**{_npyfile.SLEEP_ENV: "0.03"})
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": slow}
    with popen_python(fastpe_cmd("rope", src, *common), **kw) as a:
        time.sleep(gap)
        with popen_python(fastpe_cmd("rope", hard, *common), **kw) as b:
            out_b = b.communicate(timeout=120)[1]
        out_a = a.communicate(timeout=120)[1]
    codes = sorted([a.returncode, b.returncode])
    errs = out_a + out_b
    # One rotates; the other is refused (the lock) or finds the work done: never both.
    assert codes in ([0, 0], [0, 1]), errs
    assert errs.count("rotated in place") == 1, errs
    if codes == [0, 1]:
        assert "another process is rotating this file" in errs and "rerun" not in errs, errs
    else:
        assert "nothing left to do" in errs, errs
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, offset=3).tobytes()
    r = run_cmd(fastpe_cmd("rope", hard, *common))
    assert r.returncode == 0 and "nothing left to do" in r.stderr, r.stderr
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, offset=3).tobytes()


# ------------------------------------------------------------------------------------------
# Refusals of a journal that cannot be trusted
# ------------------------------------------------------------------------------------------


def interrupted(tmp_path, monkeypatch, chunk: int = 3) -> tuple[Path, np.ndarray]:
    src = tmp_path / "x.npy"
    x = make(src)
    crash_at(monkeypatch, "data-written", chunk)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    no_crash(monkeypatch)
    return src, x


def refuse_in_place(src: Path, match: str, exc=ValueError) -> None:
    before = snapshot(src)
    names = sorted(os.listdir(src.parent))
    with pytest.raises(exc, match=match) as err:
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert snapshot(src) == before and sorted(os.listdir(src.parent)) == names
    assert "rerun the same" not in str(err.value)


def test_refuses_a_corrupt_journal(tmp_path, monkeypatch):
    src, x = interrupted(tmp_path, monkeypatch)
    for garbage in (
        b"{not json",
        b'{"format": "fastpe-rope-journal", "version": 2}',
        json.dumps({**journal(src), "done": 99}).encode(),
    ):
        os.setxattr(src, _journal.XATTR, garbage)
        refuse_in_place(
            src,
            r"in-place journal of .* is unreadable .*restore it from a copy, "
            r"then rotate it with again=True",
        )
        with pytest.raises(ValueError, match="unreadable"):
            files.rope_file(src, tmp_path / "o.npy", **KW)
    np.save(src, x)  # restored from a copy (into the same inode: the journal stays)
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()
    assert undo_files(tmp_path) == []


def test_refuses_a_file_changed_under_its_journal(tmp_path, monkeypatch):
    src, x = interrupted(tmp_path, monkeypatch)
    saved = src.read_bytes()
    with open(src, "r+b") as f:  # restored from a copy, same size and shape
        f.seek(HEADER)
        f.write(x.tobytes())
    refuse_in_place(
        src,
        r"changed since the interrupted in-place run.*chunk 2 no longer "
        r"holds what that run wrote.*again=True",
    )
    src.write_bytes(saved[:-CHUNK])  # shorter: the header no longer matches the size
    refuse_in_place(src, "truncated")
    np.save(src, x[: ROWS // 2])  # another shape in the same inode
    refuse_in_place(src, r"changed since the interrupted in-place run .*then: .*now: ")
    np.save(src, x)
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


def test_refuses_a_damaged_or_missing_undo_file(tmp_path, monkeypatch):
    src, x = interrupted(tmp_path, monkeypatch)
    undo = Path(_journal.undo_paths(journal(src)["origin"])[journal(src)["pending"]["slot"]])
    good = undo.read_bytes()
    undo.write_bytes(b"\0" * 7 + good[7:])
    refuse_in_place(src, rf"undo file {undo} of chunk 3 is missing or damaged.*again=True")
    undo.unlink()
    refuse_in_place(src, rf"undo file {undo} of chunk 3 is missing or damaged")
    undo.write_bytes(good)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


# ------------------------------------------------------------------------------------------
# A full disk
# ------------------------------------------------------------------------------------------


def test_full_disk_mid_run_says_partly_rotated_and_how_much_space(tmp_path, monkeypatch, capsys):
    src = tmp_path / "x.npy"
    x = make(src)

    def full(s: str, k: int) -> None:
        if (s, k) == ("undo-written", 5):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_npyfile, "crash_point", full)
    args = [
        "rope",
        str(src),
        "--in-place",
        "--chunk-mib",
        str(CHUNK / 2**20),
        "--offset",
        "5",
        "--layout",
        "half",
    ]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for text in (
        "no space left",
        "partly rotated",
        "chunks 0..3 of 64 are rotated",
        "Rerunning the same command finishes it",
        "needs 32.0 KiB of free space",
    ):
        assert text in err, err
    assert "[Errno" not in err
    no_crash(monkeypatch)
    assert cli.main(args) == 0
    assert "finished the interrupted" in capsys.readouterr().err
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


def test_full_disk_before_the_first_write_changes_nothing(tmp_path, monkeypatch):
    src = tmp_path / "x.npy"
    make(src)
    before = snapshot(src)

    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    with pytest.raises(OSError, match="not enough free space to rotate it in place") as err:
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert err.value.errno == errno.ENOSPC
    assert "needs 32.0 KiB beside it" in str(err.value)
    assert "nothing was changed" in str(err.value)
    assert snapshot(src) == before and os.listdir(tmp_path) == ["x.npy"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and CAP_SYS_ADMIN: skipped where mounting is not allowed)."""
    d = tmp_path / "tiny"
    d.mkdir()
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("mount is not available")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        probe = d / "probe"
        probe.write_bytes(b"")
        try:
            os.setxattr(probe, _journal.XATTR, b"1")
        except OSError:
            pytest.skip("this tmpfs has no user extended attributes")
        probe.unlink()
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True, timeout=30, check=False)


def test_a_real_full_disk(tiny_disk, capsys):
    src = tiny_disk / "x.npy"
    x = make(src, (2560, 64))  # 640 KiB of a 1 MiB disk
    want = fastpe.apply_rope(x, offset=1).tobytes()
    args = ["rope", str(src), "--in-place", "--offset", "1", "--chunk-mib"]
    before = snapshot(src)
    assert cli.main([*args, "0.25"]) == 1  # two 256 KiB undo copies do not fit
    err = capsys.readouterr().err
    assert "not enough free space" in err and "needs 512.0 KiB beside it" in err, err
    assert "nothing was changed" in err and "[Errno" not in err, err
    assert snapshot(src) == before and os.listdir(tiny_disk) == ["x.npy"]
    assert cli.main(["rope", str(src), "-o", str(tiny_disk / "o.npy")]) == 1
    err = capsys.readouterr().err
    assert "no output was written; it needs 640.1 KiB free" in err, err
    assert (
        cli.main(["table", "--seq-len", "4096", "--dim", "64", "-o", str(tiny_disk / "t.npy")]) == 1
    )
    err = capsys.readouterr().err
    assert "no output was written; it needs 1.0 MiB free" in err, err
    assert os.listdir(tiny_disk) == ["x.npy"]

    # A run interrupted, then resumed on a disk that filled meanwhile (its free undo slot
    # gone): the disk fills for real mid-run, and the message says what to do.
    chunk = str(16 * KIB / 2**20)
    r = run_cmd([sys.executable, "-c", KILLER, "data-written", "3", *args, chunk])
    assert r.returncode == -signal.SIGKILL, r.stderr
    record = journal(src)
    os.unlink(_journal.undo_paths(record["origin"])[1 - record["pending"]["slot"]])
    filler = tiny_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert cli.main([*args, chunk]) == 1
    err = capsys.readouterr().err
    for text in (
        "no space left",
        "the file is partly rotated",
        "chunks 0..2 of 40 are rotated",
        "Rerunning the same command finishes it",
        "needs 32.0 KiB",
    ):
        assert text in err, err
    filler.unlink()
    assert cli.main([*args, chunk]) == 0
    assert "finished the interrupted" in capsys.readouterr().err
    assert src.read_bytes()[HEADER:] == want and sorted(os.listdir(tiny_disk)) == ["x.npy"]


def test_a_long_scaling_dict_is_journaled_by_its_digest(tmp_path, monkeypatch):
    """longrope's factor lists would not fit an extended attribute: the journal keeps a
    digest, which still tells the same dict from another."""
    src = tmp_path / "x.npy"
    x = make(src, (ROWS, 128))
    factors = [1.0 + i / 7 for i in range(64)]
    scaling = {
        "rope_type": "longrope",
        "short_factor": factors,
        "long_factor": factors[::-1],
        "original_max_position_embeddings": 1024,
    }
    kw = {"scaling": scaling, "max_position_embeddings": 8192}
    crash_at(monkeypatch, "data-written", 2)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **kw)
    no_crash(monkeypatch)
    assert set(journal(src)["params"]["scaling"]) == {"sha256"}
    other = {**scaling, "short_factor": [*factors[:-1], 9.0]}
    refuse_in_place_kw(src, {**kw, "scaling": other}, r"other parameters \(scaling=\{\"sha256")
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **kw)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **kw).tobytes()


def refuse_in_place_kw(src: Path, kw: dict, match: str) -> None:
    before = snapshot(src)
    with pytest.raises(ValueError, match=match):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **kw)
    assert snapshot(src) == before


def test_a_journal_file_of_an_earlier_version_is_not_ignored(tmp_path):
    """Earlier fastpe kept its journal in X.npy.fastpe-journal: a run it left unfinished must
    not be rotated over."""
    src = tmp_path / "x.npy"
    x = make(src)
    link = tmp_path / "l.npy"
    link.symlink_to(src)
    old = tmp_path / "x.npy.fastpe-journal"
    old.write_text("{}")
    for name in (src, link):
        refuse_in_place(
            name,
            rf"interrupted in-place run of an earlier fastpe, whose "
            rf"journal is {old}",
        )
        with pytest.raises(ValueError, match="earlier fastpe"):
            files.rope_file(name, tmp_path / "o.npy")
    old.unlink()
    files.rope_file(link, in_place=True, **KW)
    old.write_text("{}")  # the new journal says done: that is what counts now
    files.rope_file(src, in_place=True, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


def test_a_file_system_without_extended_attributes(tmp_path, monkeypatch):
    src = tmp_path / "x.npy"
    x = make(src)

    def unsupported(*args):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "getxattr", unsupported)
    monkeypatch.setattr(os, "setxattr", unsupported)
    refuse_in_place(src, "does not support; write the result to a new file", OSError)
    files.rope_file(src, tmp_path / "o.npy", **KW)  # -o needs no journal
    assert (tmp_path / "o.npy").read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


# ------------------------------------------------------------------------------------------
# A record that came with a copy, names other files, or is damaged
# ------------------------------------------------------------------------------------------


def test_a_copy_of_a_partly_rotated_file_never_touches_the_original(tmp_path, monkeypatch):
    """Ordinary copies carry the journal (an extended attribute): a copy is not the file."""
    src, x = interrupted(tmp_path, monkeypatch)
    want = fastpe.apply_rope(x, **KW).tobytes()
    copy = tmp_path / "backup.npy"
    shutil.copy2(src, copy)  # copies the extended attribute, as cp -a, rsync -X, tar --xattrs
    assert journal(copy) == journal(src)
    undo = undo_files(tmp_path)
    original = snapshot(src)
    refuse_in_place(
        copy,
        rf"{copy} carries the in-place journal of another file .*copy made "
        r"with its extended attributes .*chunks 0..2 of 64 are rotated.*cannot be "
        rf"finished here.*the same in-place command, given {src}.*again=True",
    )
    with pytest.raises(ValueError, match="carries the in-place journal of another file"):
        files.rope_file(copy, tmp_path / "o.npy", **KW)
    assert snapshot(src) == original and undo_files(tmp_path) == undo
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)  # as if no copy existed
    assert src.read_bytes()[HEADER:] == want and undo_files(tmp_path) == []
    np.save(copy, x)  # unrotated data restored into the copy (its inode keeps the journal)
    refuse_in_place(copy, "carries the in-place journal of another file")
    files.rope_file(copy, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert copy.read_bytes()[HEADER:] == want
    assert journal(copy)["inode"]["ino"] == copy.stat().st_ino  # its own journal now
    assert src.read_bytes()[HEADER:] == want and undo_files(tmp_path) == []


def test_a_copy_of_a_rotated_file_is_rotated_and_touches_nothing(tmp_path, caplog):
    caplog.set_level("INFO", logger="fastpe.files")
    src = tmp_path / "x.npy"
    make(src)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    copy = tmp_path / "copy.npy"
    shutil.copy2(src, copy)
    decoys = [Path(p) for p in _journal.undo_paths(src)]  # as if the original's run were on
    for p in decoys:
        p.write_bytes(b"not the copy's")
    caplog.clear()
    files.rope_file(copy, in_place=True, chunk_bytes=CHUNK, **KW)
    assert "nothing left to do" in say(caplog) and copy.read_bytes() == src.read_bytes()
    assert all(p.exists() for p in decoys)
    # Other bytes under a copied "done" journal: new data, or a copy taken mid-run (partly
    # rotated); fastpe cannot tell, so it refuses, and again=True is the way on.
    y = make(copy, seed=1)
    refuse_in_place(
        copy,
        r"carries the in-place journal of another file .*after an in-place "
        r"run rotated it, but its bytes are no longer those .*again=True",
    )
    files.rope_file(copy, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert copy.read_bytes()[HEADER:] == fastpe.apply_rope(y, **KW).tobytes()
    assert all(p.exists() for p in decoys)


@pytest.mark.parametrize("state", ["done", "running"])
def test_a_record_naming_other_files_never_deletes_them(tmp_path, monkeypatch, state):
    if state == "running":
        src, x = interrupted(tmp_path, monkeypatch)
    else:
        src = tmp_path / "x.npy"
        x = make(src)
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    victim = tmp_path / "precious.txt"
    victims = [victim, *map(Path, _journal.undo_paths(victim))]
    for p in victims:
        p.write_text("keep me")
    record = journal(src)
    # A list of paths to delete is no key of a record: unreadable, refused.
    os.setxattr(src, _journal.XATTR, json.dumps({**record, "undo": [str(victim)] * 2}).encode())
    refuse_in_place(src, r"unreadable \(the record has unknown keys undo\)")
    # An origin that names another file: its undo files are not this file's.
    os.setxattr(src, _journal.XATTR, json.dumps({**record, "origin": str(victim)}).encode())
    if state == "running":
        refuse_in_place(
            src,
            rf"started from {victim}, which no longer names this file.*move "
            rf"the file back to {victim}",
        )
    else:
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)  # nothing left to do
    assert all(p.read_text() == "keep me" for p in victims)
    np.save(src, x)
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()
    assert all(p.read_text() == "keep me" for p in victims)
    assert journal(src)["origin"] == os.path.realpath(src)


@pytest.mark.parametrize("stage", ["journaled", "data-written"])
def test_new_bytes_after_a_crash_in_chunk_0_are_not_taken_for_the_run(tmp_path, monkeypatch, stage):
    """Chunk 0 has no chunk before it to check: the last chunk, untouched until the run
    reaches it, tells the file from new bytes saved into the same inode."""
    src = tmp_path / "x.npy"
    make(src)
    crash_at(monkeypatch, stage, 0)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    no_crash(monkeypatch)
    ino = src.stat().st_ino
    y = make(src, seed=1)  # the same shape, into the same inode
    assert src.stat().st_ino == ino and journal(src)["state"] == "running"
    refuse_in_place(
        src,
        rf"changed since the interrupted in-place run.*last chunk \({N - 1}\)"
        r".*no longer holds.*new, unrotated data, rotate it with again=True",
    )
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(y, **KW).tobytes()
    assert undo_files(tmp_path) == []


DAMAGE = {
    "no-prev-crc": lambda r: r["pending"].pop("prev_crc32"),
    "slot-5": lambda r: r["pending"].update(slot=5),
    "wrong-slot": lambda r: r["pending"].update(slot=0),
    "crc-negative": lambda r: r["pending"].update(crc32=-1),
    "nbytes-float": lambda r: r["pending"].update(nbytes=16384.0),
    "undo-list": lambda r: r.update(undo=[1, 2]),
    "origin-int": lambda r: r.update(origin=1),
    "origin-relative": lambda r: r.update(origin="x.npy"),
    "no-inode": lambda r: r.pop("inode"),
    "inode-str": lambda r: r.update(inode="1:2"),
    "done-str": lambda r: r.update(done="3"),
    "chunk-bytes-bool": lambda r: r.update(chunk_bytes=True),
    "pending-list": lambda r: r.update(pending=[3]),
    "params-list": lambda r: r.update(params=[]),
    "file-shape-str": lambda r: r["file"].update(shape="(4096, 64)"),
    "no-last-crc": lambda r: r.update(last_crc32=None),
    "state-done-half": lambda r: r.update(state="done"),
    "version-2": lambda r: r.update(version=2),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_record_is_refused_and_again_starts_over(tmp_path, monkeypatch, damage):
    src, x = interrupted(tmp_path, monkeypatch)
    record = journal(src)
    DAMAGE[damage](record)
    os.setxattr(src, _journal.XATTR, json.dumps(record).encode())
    refuse_in_place(
        src,
        r"in-place journal of .* is unreadable .*restore it from a copy, "
        r"then rotate it with again=True",
    )
    with pytest.raises(ValueError, match="unreadable"):
        files.rope_file(src, tmp_path / "o.npy", **KW)
    np.save(src, x)  # restored from a copy, into the same inode: the damaged record stays
    files.rope_file(src, in_place=True, again=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()
    assert journal(src)["state"] == "done" and undo_files(tmp_path) == []


def test_the_undo_files_are_durable_before_the_record_names_them(tmp_path, monkeypatch):
    src = tmp_path / "x.npy"
    make(src)
    events: list[tuple] = []
    fsync_dir, write_record = _npyfile.fsync_dir, _journal.write_record

    def logged_fsync_dir(directory):
        events.append(("fsync_dir", Path(directory)))
        fsync_dir(directory)

    def logged_write_record(fd, path, record):
        events.append(("record", record["state"]))
        write_record(fd, path, record)

    monkeypatch.setattr(_npyfile, "fsync_dir", logged_fsync_dir)
    monkeypatch.setattr(_journal, "write_record", logged_write_record)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    first = events.index(("record", "running"))
    assert ("fsync_dir", Path(os.path.realpath(tmp_path))) in events[:first], events[: first + 1]


def test_a_file_renamed_while_its_run_is_interrupted_is_moved_back(tmp_path, monkeypatch):
    """The undo files stay beside the name the run started from: with that name gone, they
    cannot be told from another file's, so the rerun asks for the file back there."""
    src, x = interrupted(tmp_path, monkeypatch)
    moved = tmp_path / "moved.npy"
    os.rename(src, moved)
    refuse_in_place(
        moved,
        rf"started from {src}, which no longer names this file.*move the "
        rf"file back to {src}, then give that path to the same command",
    )
    assert undo_files(tmp_path) == ["x.npy.fastpe-undo0", "x.npy.fastpe-undo1"]
    os.rename(moved, src)
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()
    assert undo_files(tmp_path) == []


def test_a_chunk_bytes_below_one_position_resumes(tmp_path, monkeypatch):
    """A chunk is at least one position, so the pending chunk may be longer than chunk_bytes:
    the journal of such a run is readable, and resumes."""
    src = tmp_path / "x.npy"
    x = make(src, (64, DIM))  # 256-byte positions, chunks of one
    crash_at(monkeypatch, "data-written", 3)
    with pytest.raises(Crash):
        files.rope_file(src, in_place=True, chunk_bytes=10, **KW)
    no_crash(monkeypatch)
    assert journal(src)["pending"]["nbytes"] == DIM * 4 > 10
    files.rope_file(src, in_place=True, chunk_bytes=10, **KW)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()


def test_a_new_device_number_after_a_reboot_is_the_same_file(tmp_path, monkeypatch, caplog):
    """NVMe and device-mapper minors and btrfs subvolume numbers may change across the
    reboot that follows a crash: the same inode number, named by the origin, is the file."""
    caplog.set_level("INFO", logger="fastpe.files")
    src, x = interrupted(tmp_path, monkeypatch)
    record = journal(src)
    record["inode"]["dev"] += 1
    os.setxattr(src, _journal.XATTR, json.dumps(record).encode())
    files.rope_file(src, in_place=True, chunk_bytes=CHUNK, **KW)
    assert "finished the interrupted" in say(caplog)
    assert src.read_bytes()[HEADER:] == fastpe.apply_rope(x, **KW).tobytes()
    assert journal(src)["inode"]["dev"] == src.stat().st_dev and undo_files(tmp_path) == []
