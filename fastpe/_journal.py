"""The journal of an in-place RoPE run: the state machine that makes ``--in-place`` crash-safe.

The journal is a small JSON record kept in an extended attribute, ``user.fastpe.rope``, of
the data file's own inode. It follows the file through symlinks, hard links and renames (a
file is known by its identity, never by the path given) and disappears with the inode, so
the record of a deleted file can never be taken for that of a new file that reuses its inode
number. One run at a time holds an exclusive ``flock`` on the file's own descriptor (it too
follows the inode). Every step below is flushed (``fsync``) before the next one starts.

States (the record, as last flushed) and what they mean::

    none                 no run we know of has touched the file
    running, pending -   nothing rotated yet; the two undo files are reserved
    running, pending k   chunks < k rotated; chunk k in any state (untouched, torn or rotated),
                         its original bytes (length, CRC-32) in undo file k % 2
    done                 every chunk rotated, with these options; a fingerprint of the bytes

Transitions of a run (each one flushed before the next step)::

    none ── reserve undo files ──▶ running, pending -
    running ── copy chunk k to undo file k % 2 ── record pending k ──▶ running, pending k
            ── rotate chunk k, write it ──▶ (k + 1 < n) copy chunk k + 1 ...
                                       └──▶ (k + 1 = n) record done ──▶ done
    done ── remove the undo files (the record stays)

What a run finds, and does::

    none, or done but the bytes were replaced since      rotate from chunk 0
    running, pending k                                   rotate chunk k again from its undo
                                                         copy, then go on
    done, same options                                   nothing left to do
    done with other options; running with other options,
    a file changed since, a damaged undo file; an
    unreadable record                                    refuse; again=True starts over
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import numpy as np

from . import _npyfile

XATTR = "user.fastpe.rope"
UNDO_SUFFIX = ".fastpe-undo"
_FORMAT, _VERSION = "fastpe-rope-journal", 2
ROPE_OPTIONS = ("layout", "base", "offset", "rotary_dim", "seq_axis", "inverse", "scaling",
                "max_position_embeddings", "seq_len")
_SAMPLES, _SAMPLE_BYTES = 16, 4096
_AGAIN = "again=True (--again)"


# --------------------------------------------------------------------------------------------
# The record, the lock and the fingerprint
# --------------------------------------------------------------------------------------------


def _unsupported(path: Path, exc: OSError) -> OSError:
    return OSError(
        exc.errno, "cannot rotate it in place: the in-place journal is kept in an extended "
        f"attribute ({XATTR}) of the file, which its file system does not support; write the "
        "result to a new file with output=PATH (-o) instead", str(path))


def read_record(fd: int, path: Path) -> dict | None:
    """The journal of the file open on ``fd``, or None; an unreadable one is refused."""
    try:
        raw = os.getxattr(fd, XATTR)
    except AttributeError:  # pragma: no cover - no os.getxattr outside Linux
        raise _unsupported(path, OSError(errno.ENOTSUP, "")) from None
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            return None
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise _unsupported(path, exc) from None
        raise
    try:
        record = json.loads(raw)
        if record.get("format") != _FORMAT or record.get("version") != _VERSION:
            raise ValueError("not a fastpe rope journal of this version")
        if record["state"] not in ("running", "done"):
            raise ValueError(f"unknown state {record['state']!r}")
        done, n, pending = int(record["done"]), int(record["n_chunks"]), record["pending"]
        if not 0 <= done <= n or (pending is not None and int(pending["chunk"]) != done):
            raise ValueError(f"inconsistent progress (done={done} of {n}, pending={pending})")
        if int(record["chunk_bytes"]) < 1 or len(record["undo"]) != 2:
            raise ValueError("bad chunk size or undo files")
        if record["state"] == "done":
            int(record["fingerprint"]), str(record["finished"])
        dict(record["params"]), dict(record["file"])
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(
            f"the in-place journal of {path} ({XATTR}) is unreadable ({exc}); the file may be "
            f"partly rotated: restore it from a copy, then rotate it with {_AGAIN}, which "
            "starts over from the file as it is"
        ) from None
    return record


def write_record(fd: int, path: Path, record: dict) -> None:
    """Replace the journal atomically, then make it durable."""
    data = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    try:
        os.setxattr(fd, XATTR, data)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise _unsupported(path, exc) from None
        raise
    os.fsync(fd)


def lock(fd: int, path: Path, *, shared: bool = False) -> None:
    """Hold a lock on the file's inode until ``fd`` is closed; refuse if another run has it.

    An in-place run holds it exclusively, a run writing a new file from it (``output=``)
    shared."""
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    readers_only = False
    if not shared:  # who holds it: readers only, if a shared lock can be had
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            readers_only = True
            try:  # the holder may have ended meanwhile
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                fcntl.flock(fd, fcntl.LOCK_UN)
    if readers_only:
        why = ("another process is writing a new file from this file (output=, -o); nothing "
               "was changed: rotate it in place once that process has ended")
    else:
        why = ("another process is rotating this file in place right now (through this or "
               "another path); it finishes the work: do not start another run, and read the "
               "file once that process has ended")
    raise BlockingIOError(errno.EWOULDBLOCK, why, str(path))


def fingerprint(fd: int, info: _npyfile.NpyInfo) -> int:
    """CRC-32 of the header and of 16 blocks spread over the data: recognises the bytes a
    finished run left, without reading the whole file."""
    crc = zlib.crc32(info.header)
    span = max(0, info.nbytes - _SAMPLE_BYTES)
    for i in range(_SAMPLES):
        pos = info.data_offset + span * i // (_SAMPLES - 1)
        crc = zlib.crc32(os.pread(fd, min(_SAMPLE_BYTES, info.nbytes), pos), crc)
    return crc


def check_not_running(fd: int, path: Path) -> None:
    """For ``output=``: refuse a file an in-place run holds or left unfinished."""
    lock(fd, path, shared=True)
    with contextlib.suppress(OSError):  # no journal support: no in-place run either
        record = read_record(fd, path)
        if record is None:
            _refuse_legacy_journal(path)
        if record is not None and record["state"] == "running":
            raise ValueError(
                f"{path} is partly rotated by an interrupted in-place run ({_where(record)}); "
                "finish it first by rerunning that in-place run with the same parameters"
            )


def _refuse_legacy_journal(path: Path) -> None:
    """Earlier fastpe kept the journal in a file beside the data file: an interrupted run of
    that version must not be taken for a file nobody touched."""
    for p in {path, Path(os.path.realpath(path))}:
        old = p.with_name(p.name + ".fastpe-journal")
        if old.exists():
            raise ValueError(
                f"{path} may be partly rotated by an interrupted in-place run of an earlier "
                f"fastpe, whose journal is {old}: finish it with that version, or restore the "
                f"file from a copy, delete {old} and rotate it again"
            )


def undo_paths(path: Path) -> list[str]:
    """Beside the file's real path (the directory a symlink points into)."""
    real = Path(os.path.realpath(path))
    return [str(real.with_name(f"{real.name}{UNDO_SUFFIX}{slot}")) for slot in (0, 1)]


def _remove(paths) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _where(record: dict) -> str:
    done, n = int(record["done"]), int(record["n_chunks"])
    text = f"chunks 0..{done - 1} of {n} are rotated" if done else f"none of {n} chunks is rotated"
    if record["pending"] is not None:
        text += (f", chunk {done} may be partly rotated (its original bytes are in "
                 f"{record['undo'][int(record['pending']['slot'])]})")
    return text


def _fmt(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def _param_diff(then: dict, now: dict) -> tuple[str, str] | None:
    diff = [name for name in ROPE_OPTIONS if then.get(name) != now[name]]
    if not diff:
        return None
    return (", ".join(f"{name}={_fmt(then.get(name))}" for name in diff),
            ", ".join(f"{name}={_fmt(now[name])}" for name in diff))


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


Rotate = Callable[[_npyfile.Plan, np.ndarray, int, int], None]


class Job(Protocol):
    info: _npyfile.NpyInfo  # the checked header
    plan: _npyfile.Plan
    params: dict  # the options, as recorded


def rotate_in_place(job: Job, fd: int, rotate: Rotate, *, again: bool,
                    progress: bool | None) -> str:
    """Rotate the file open (read-write) on ``fd`` in place, or finish an interrupted run.

    ``job`` carries ``info`` (the checked header), ``plan`` and ``params`` (the options, as
    recorded); ``rotate(plan, buf, k, nbytes)`` rotates chunk ``k`` held in ``buf``.
    Returns ``"rotated"``, ``"finished"`` (an interrupted run) or ``"nothing left to do"``.
    """
    path, info = job.info.path, job.info
    lock(fd, path)
    try:
        record = read_record(fd, path)
    except ValueError:
        if not again:
            raise
        record = None  # unreadable, and again=True starts over from the file as it is
    if record is not None and record["state"] == "done":
        fresh = (record["file"] == info.record()
                 and record["fingerprint"] == fingerprint(fd, info))
        if fresh and not again:
            diff = _param_diff(record["params"], job.params)
            if diff is None:
                _remove(record["undo"])  # left if the last run was killed just before
                return "nothing left to do"
            raise ValueError(
                f"{path} was already rotated in place with {diff[0]} (finished "
                f"{record['finished']}); this call, with {diff[1]}, would rotate the rotated "
                f"bytes. To do that on purpose, pass {_AGAIN}"
            )
        record = None  # the bytes were replaced since (or again=True): a new file
    if record is not None and again:
        _remove(record["undo"])
        record = None
    if record is None:
        if not again:
            _refuse_legacy_journal(path)
        outcome, record = "rotated", _start(job, fd)
    else:
        outcome = "finished"
        job.plan = _check_resume(job, fd, record)
    try:
        _run(job, fd, rotate, record, progress)
    except OSError as exc:
        if _npyfile.is_out_of_space(exc):
            raise _out_of_space(job, record, exc) from exc
        raise
    _npyfile.crash_point("recorded", record["n_chunks"])
    _remove(record["undo"])
    _npyfile.fsync_dir(Path(record["undo"][0]).parent)
    _npyfile.crash_point("cleaned", record["n_chunks"])
    return outcome


def _start(job: Job, fd: int) -> dict:
    """Reserve the undo files (so that a full disk is found before any byte is rotated),
    then record the new run."""
    path, plan = job.info.path, job.plan
    undo = undo_paths(path)
    try:
        for p in undo:
            ufd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                if plan.buffer_bytes:
                    _reserve(ufd, plan.buffer_bytes)
            finally:
                os.close(ufd)
        record = {"format": _FORMAT, "version": _VERSION, "state": "running",
                  "file": job.info.record(), "params": job.params,
                  "chunk_bytes": plan.chunk_bytes, "n_chunks": plan.n_chunks, "done": 0,
                  "pending": None, "undo": undo}
        _npyfile.crash_point("locked", 0)
        write_record(fd, path, record)
    except OSError as exc:
        _remove(undo)
        if _npyfile.is_out_of_space(exc):
            free = _npyfile.free_bytes(Path(undo[0]).parent)
            raise OSError(
                exc.errno, f"not enough free space to rotate it in place: the run needs "
                f"{_npyfile.size(2 * plan.buffer_bytes)} beside it for two undo copies of one chunk"
                f"{'' if free is None else f' ({_npyfile.size(free)} free)'}; nothing was changed: "
                "free some space or choose a smaller chunk (chunk_bytes, --chunk-mib)",
                str(path)) from exc
        raise
    return record


def _reserve(fd: int, nbytes: int) -> None:
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:  # a file system that cannot reserve space: find out when writing
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


def _check_resume(job: Job, fd: int, record: dict) -> _npyfile.Plan:
    """Refuse to resume a journal that does not describe this file and these options."""
    path, info = job.info.path, job.info
    restore = f"restore the file from a copy, then rotate it with {_AGAIN}"
    if record["file"] != info.record():
        raise ValueError(
            f"{path} changed since the interrupted in-place run that left its journal (then: "
            f"{record['file']}, now: {info.record()}); the journal no longer describes it: "
            f"{restore}"
        )
    diff = _param_diff(record["params"], job.params)
    if diff:
        raise ValueError(
            f"{path} is partly rotated by an interrupted in-place run with other parameters "
            f"({diff[0]}; this call has {diff[1]}). To finish it, rerun with the original "
            f"parameters; to give up on it, {restore} ({_where(record)} and the rest is "
            "untouched)"
        )
    plan = replace(job.plan, chunk_bytes=int(record["chunk_bytes"]))
    if plan.n_chunks != int(record["n_chunks"]):
        raise ValueError(f"the in-place journal of {path} does not match it: "
                         f"{record['n_chunks']} chunks, expected {plan.n_chunks}; {restore}")
    done, pending = int(record["done"]), record["pending"]
    if done and pending is not None:
        # The chunk before the pending one holds the bytes this run wrote: else the file was
        # replaced (e.g. restored from a copy) under the journal.
        start, nbytes = plan.byte_range(done - 1)
        if zlib.crc32(os.pread(fd, nbytes, info.data_offset + start)) != pending["prev_crc32"]:
            raise ValueError(
                f"{path} changed since the interrupted in-place run that left its journal: "
                f"chunk {done - 1} no longer holds what that run wrote; {restore}"
            )
    return plan


def _run(job: Job, fd: int, rotate: Rotate, record: dict, progress: bool | None) -> None:
    info, plan, path = job.info, job.plan, job.info.path
    n, k = plan.n_chunks, int(record["done"])
    bar = _npyfile.Progress(f"fastpe rope {path.name} (in place)", plan.total_bytes, progress)
    sleep = _npyfile.sleep_seconds()
    buf = np.empty(plan.buffer_bytes, dtype=np.uint8)
    mv = buf.data
    pending = record["pending"]
    if pending is not None:  # chunk k may be rotated, torn or untouched: redo it
        _read_undo(record, plan, mv, path)
    undo = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) if plan.buffer_bytes else -1
            for p in record["undo"]]
    prev_crc = 0
    try:
        if pending is not None:
            start, nbytes = plan.byte_range(k)
            rotate(plan, buf, k, nbytes)
            prev_crc = _write_chunk(fd, info, mv, k, start, nbytes, bar, sleep)
            k += 1
        while k < n:
            start, nbytes = plan.byte_range(k)
            _npyfile.read_into(fd, mv[:nbytes], info.data_offset + start, path)
            slot = k % 2  # the other slot still holds chunk k - 1 until the record moves on
            _npyfile.write_all(undo[slot], mv[:nbytes], 0)
            _npyfile.sync_data(undo[slot])
            _npyfile.crash_point("undo-written", k)
            record["done"] = k
            record["pending"] = {"chunk": k, "slot": slot, "nbytes": nbytes,
                                 "crc32": zlib.crc32(mv[:nbytes]), "prev_crc32": prev_crc}
            write_record(fd, path, record)
            _npyfile.crash_point("journaled", k)
            rotate(plan, buf, k, nbytes)
            prev_crc = _write_chunk(fd, info, mv, k, start, nbytes, bar, sleep)
            k += 1
        record.update(state="done", done=n, pending=None, fingerprint=fingerprint(fd, info),
                      finished=time.strftime("%Y-%m-%d %H:%M:%S %z"))
        write_record(fd, path, record)
    finally:
        for ufd in undo:
            if ufd >= 0:
                os.close(ufd)
    bar.close(plan.total_bytes)


def _read_undo(record: dict, plan: _npyfile.Plan, mv: memoryview, path: Path) -> None:
    """Read the saved original bytes of the pending chunk into ``mv``, or refuse."""
    k, pending = int(record["done"]), record["pending"]
    upath = record["undo"][int(pending["slot"])]
    nbytes = plan.byte_range(k)[1]
    try:
        ufd = os.open(upath, os.O_RDONLY)
    except FileNotFoundError:
        ok = False
    else:
        try:
            _npyfile.read_into(ufd, mv[:nbytes], 0, Path(upath))
            ok = int(pending["nbytes"]) == nbytes and (
                zlib.crc32(mv[:nbytes]) == int(pending["crc32"]))
        except ValueError:
            ok = False
        finally:
            os.close(ufd)
    if not ok:
        raise ValueError(
            f"cannot resume the in-place run on {path}: the undo file {upath} of chunk {k} is "
            "missing or damaged, so that chunk cannot be restored; restore the file from a "
            f"copy, then rotate it with {_AGAIN}"
        )


def _write_chunk(fd, info, mv, k, start, nbytes, bar, sleep) -> int:
    _npyfile.write_all(fd, mv[:nbytes], info.data_offset + start)
    _npyfile.sync_data(fd)
    _npyfile.crash_point("data-written", k)
    bar.update(start + nbytes)
    if sleep:
        time.sleep(sleep)
    return zlib.crc32(mv[:nbytes])


def _out_of_space(job: Job, record: dict, exc: OSError) -> OSError:
    need = 2 * job.plan.buffer_bytes
    where = Path(record["undo"][0]).parent
    free = _npyfile.free_bytes(where)
    state = ("every chunk is rotated, only the journal's last step is missing"
             if record["state"] == "done" else _where(record))
    return OSError(
        exc.errno, f"no space left on the device while rotating in place: the file is partly "
        f"rotated ({state}). Rerunning the same command finishes it; the run needs "
        f"{_npyfile.size(need)} of free space in {where} for its two undo copies of one chunk"
        f"{'' if free is None else f' ({_npyfile.size(free)} free now)'} and a few KiB for its "
        "journal", str(job.info.path))
