"""The journal of an in-place RoPE run: the state machine that makes ``--in-place`` crash-safe.

The journal is a small JSON record kept in an extended attribute, ``user.fastpe.rope``, of
the data file's own inode. It follows the file through symlinks, hard links and renames (a
file is known by its identity, never by the path given) and disappears with the inode, so
the record of a deleted file can never be taken for that of a new file that reuses its inode
number. One run at a time holds an exclusive ``flock`` on the file's own descriptor (it too
follows the inode). Every step below is flushed (``fsync``) before the next one starts.

The record names the inode it was written for (``st_dev``, ``st_ino``) and the real path
the run started from (``origin``). Ordinary copies carry extended attributes (``cp -a``,
``shutil.copy2``, ``rsync -X``, ``tar --xattrs``), so a record whose inode is not the file's
came with a copy: its undo files belong to the original, and nothing it names is ever
touched. (A device number alone can change across a reboot: the same inode number, with
an origin that still names the file, is the same file.) No undo path is stored: the undo
files are always ``ORIGIN.fastpe-undo0`` and ``ORIGIN.fastpe-undo1``, derived here, and
used (read or deleted) only while ``origin`` still names the file.

States (the record, as last flushed) and what they mean::

    none                 no run we know of has touched the file
    running, pending -   nothing rotated yet; the two undo files are reserved
    running, pending k   chunks < k rotated; chunk k in any state (untouched, torn or rotated),
                         its original bytes (length, CRC-32) in undo file k % 2; the CRC-32
                         of the last chunk as the run found it (it stays untouched until
                         the run reaches it)
    done                 every chunk rotated, with these options; a fingerprint of the bytes

Transitions of a run (each one flushed before the next step)::

    none ── reserve undo files, flush the directory ──▶ running, pending -
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
    a file changed since (its shape, size, the chunk
    before the pending one, or the last chunk while the
    run has not reached it), a damaged undo file; an
    unreadable record; a running record of a file that
    is no longer named by its origin                     refuse; again=True starts over

A record that came with a copy (another inode)::

    done, and the copy's bytes match its fingerprint     nothing left to do (the copy holds
                                                         the rotated bytes)
    done, bytes differ; running                          refuse: a copy taken during a run may
                                                         mix bytes of several moments, and its
                                                         undo files are the original's. Finish
                                                         the original and copy it again, or
                                                         again=True if the copy holds
                                                         unrotated data

What the checks cannot see: a file of one chunk, interrupted after its chunk was recorded
and then overwritten in the same inode with bytes of the same shape, looks like a torn
write of that chunk (there is no untouched chunk to compare).
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
_FORMAT, _VERSION = "fastpe-rope-journal", 3
ROPE_OPTIONS = (
    "layout",
    "base",
    "offset",
    "rotary_dim",
    "seq_axis",
    "inverse",
    "scaling",
    "max_position_embeddings",
    "seq_len",
    # recorded only when given (a journal without them reads as None: the same call)
    "positions",
    "pair_axes",
    "inv_freq",
)
_SAMPLES, _SAMPLE_BYTES = 16, 4096
_AGAIN = "again=True (--again)"
_CRC_MAX = 2**32 - 1


# --------------------------------------------------------------------------------------------
# The record, the lock and the fingerprint
# --------------------------------------------------------------------------------------------


def _unsupported(path: Path, exc: OSError) -> OSError:
    return OSError(
        exc.errno,
        "cannot rotate it in place: the in-place journal is kept in an extended "
        f"attribute ({XATTR}) of the file, which its file system does not support; write the "
        "result to a new file with output=PATH (-o) instead",
        str(path),
    )


def _int(record: dict, key: str, lo: int = 0, hi: int | None = None) -> int:
    value = record[key]
    if type(value) is not int or value < lo or (hi is not None and value > hi):
        raise ValueError(f"{key}={value!r} is not an integer in range")
    return value


def _keys(record, name: str, required: set, optional: frozenset = frozenset()) -> None:
    if type(record) is not dict:
        raise ValueError(f"{name} is not a JSON object")
    missing, extra = required - record.keys(), record.keys() - required - optional
    if missing:
        raise ValueError(f"{name} lacks {', '.join(sorted(missing))}")
    if extra:
        raise ValueError(f"{name} has unknown keys {', '.join(sorted(extra))}")


_TOP = {
    "format",
    "version",
    "state",
    "file",
    "inode",
    "origin",
    "params",
    "chunk_bytes",
    "n_chunks",
    "done",
    "pending",
    "last_crc32",
}
_PENDING = {"chunk", "slot", "nbytes", "crc32", "prev_crc32"}
_FILE = {"shape", "dtype", "data_offset", "size"}


def _check_record(record) -> None:
    """Every key and type of a record, or ValueError (why)."""
    if type(record) is not dict or record.get("format") != _FORMAT:
        raise ValueError("not a fastpe rope journal")
    version = record.get("version")
    if version != _VERSION:
        raise ValueError(
            f"journal version {version!r}, this fastpe reads {_VERSION}"
            + (
                " (written by an earlier fastpe)"
                if type(version) is int and version < _VERSION
                else ""
            )
        )
    state = record.get("state")
    if state not in ("running", "done"):
        raise ValueError(f"unknown state {state!r}")
    _keys(record, "the record", _TOP | ({"fingerprint", "finished"} if state == "done" else set()))
    _keys(record["file"], "file", _FILE)
    shape = record["file"]["shape"]
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"file shape {shape!r}")
    if type(record["file"]["dtype"]) is not str:
        raise ValueError("file dtype is not a string")
    _int(record["file"], "data_offset"), _int(record["file"], "size")
    _keys(record["inode"], "inode", {"dev", "ino"})
    _int(record["inode"], "dev"), _int(record["inode"], "ino")
    origin = record["origin"]
    if type(origin) is not str or not os.path.isabs(origin) or "\0" in origin:
        raise ValueError(f"origin {origin!r} is not an absolute path")
    if type(record["params"]) is not dict:
        raise ValueError("params is not a JSON object")
    _int(record, "chunk_bytes", 1)
    n = _int(record, "n_chunks")
    done = _int(record, "done", 0, n)
    pending = record["pending"]
    last = record["last_crc32"]
    if last is not None:
        _int(record, "last_crc32", 0, _CRC_MAX)
    if state == "done":
        if done != n or pending is not None:
            raise ValueError(f"done with progress {done} of {n}, pending={pending}")
        _int(record, "fingerprint", 0, _CRC_MAX)
        if type(record["finished"]) is not str:
            raise ValueError("finished is not a string")
        return
    if pending is None:
        if done:
            raise ValueError(f"{done} of {n} chunks done and none pending")
        return
    _keys(pending, "pending", _PENDING)
    if _int(pending, "chunk") != done or done >= n or _int(pending, "slot", 0, 1) != done % 2:
        raise ValueError(f"inconsistent progress (done={done} of {n}, pending={pending})")
    _int(pending, "nbytes", 1)  # one position even when chunk_bytes is smaller
    _int(pending, "crc32", 0, _CRC_MAX), _int(pending, "prev_crc32", 0, _CRC_MAX)
    if n >= 2 and last is None:
        raise ValueError("no CRC-32 of the last chunk")


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
        _check_record(record)
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
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


def identity(fd: int) -> dict:
    st = os.fstat(fd)
    return {"dev": st.st_dev, "ino": st.st_ino}


def _names(origin: str, fd: int) -> bool:
    """Whether the path ``origin`` names the file open on ``fd``."""
    try:
        return os.path.samestat(os.stat(origin), os.fstat(fd))
    except OSError:
        return False


def is_copy(record: dict, fd: int) -> bool:
    """Whether the record was written for another inode: it came with a copy of the file.

    A device number alone may change across a reboot (NVMe and device-mapper minors, btrfs
    subvolumes): with the same inode number, the file is the record's if its origin still
    names it."""
    st = os.fstat(fd)
    if record["inode"]["ino"] != st.st_ino:
        return True
    return record["inode"]["dev"] != st.st_dev and not _names(record["origin"], fd)


def undo_paths(origin: str | Path) -> list[str]:
    """The undo files of a run started from the real path ``origin``: beside it."""
    return [f"{origin}{UNDO_SUFFIX}{slot}" for slot in (0, 1)]


def own_undo_paths(record: dict, fd: int) -> list[str] | None:
    """The undo files of the record's run, if the record is this file's and its origin still
    names this file; else None (they are not ours to read or delete)."""
    if is_copy(record, fd) or not _names(record["origin"], fd):
        return None
    return undo_paths(record["origin"])


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
        why = (
            "another process is writing a new file from this file (output=, -o); nothing "
            "was changed: rotate it in place once that process has ended"
        )
    else:
        why = (
            "another process is rotating this file in place right now (through this or "
            "another path); it finishes the work: do not start another run, and read the "
            "file once that process has ended"
        )
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


def _copied(path: Path, record: dict, why: str) -> ValueError:
    return ValueError(
        f"{path} carries the in-place journal of another file (device {record['inode']['dev']}"
        f", inode {record['inode']['ino']}, first rotated as {record['origin']}): it is a copy "
        f"made with its extended attributes (cp -a, shutil.copy2, rsync -X, tar --xattrs) "
        f"{why}. Nothing was changed, and that file's undo files are not touched. Finish the "
        f"run on the original (the same in-place command, given {record['origin']}) and "
        f"copy it again; or, if this copy holds unrotated data (saved or restored into it "
        f"since), rotate it with {_AGAIN}, which rotates the bytes as they are"
    )


def _copied_running(path: Path, record: dict) -> ValueError:
    return _copied(
        path,
        record,
        "while an in-place run had rotated part of it "
        f"({_where(record)}); a copy taken during a run may hold bytes of several "
        "moments of it, so it cannot be finished here",
    )


def check_not_running(fd: int, path: Path) -> None:
    """For ``output=``: refuse a file an in-place run holds or left unfinished."""
    lock(fd, path, shared=True)
    with contextlib.suppress(OSError):  # no journal support: no in-place run either
        record = read_record(fd, path)
        if record is None:
            _refuse_legacy_journal(path)
        if record is not None and record["state"] == "running":
            if is_copy(record, fd):
                raise _copied_running(path, record)
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


def _remove(paths) -> None:
    for p in paths or ():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _where(record: dict) -> str:
    done, n = record["done"], record["n_chunks"]
    text = f"chunks 0..{done - 1} of {n} are rotated" if done else f"none of {n} chunks is rotated"
    if record["pending"] is not None:
        undo = undo_paths(record["origin"])[record["pending"]["slot"]]
        text += f", chunk {done} may be partly rotated (its original bytes are in {undo})"
    return text


def _fmt(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def _param_diff(then: dict, now: dict) -> tuple[str, str] | None:
    diff = [name for name in ROPE_OPTIONS if then.get(name) != now.get(name)]
    if not diff:
        return None
    return (
        ", ".join(f"{name}={_fmt(then.get(name))}" for name in diff),
        ", ".join(f"{name}={_fmt(now.get(name))}" for name in diff),
    )


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


Rotate = Callable[[_npyfile.Plan, np.ndarray, int, int], None]


class Job(Protocol):
    info: _npyfile.NpyInfo  # the checked header
    plan: _npyfile.Plan
    params: dict  # the options, as recorded


def rotate_in_place(
    job: Job, fd: int, rotate: Rotate, *, again: bool, progress: bool | None
) -> str:
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
    copied = record is not None and is_copy(record, fd)
    if record is not None and record["state"] == "done":
        fresh = record["file"] == info.record() and record["fingerprint"] == fingerprint(fd, info)
        if fresh and not again:
            diff = _param_diff(record["params"], job.params)
            if diff is None:
                if not copied:  # left if the last run was killed just before
                    _remove(own_undo_paths(record, fd))
                return "nothing left to do"
            raise ValueError(
                f"{path} was already rotated in place with {diff[0]} (finished "
                f"{record['finished']}); this call, with {diff[1]}, would rotate the rotated "
                f"bytes. To do that on purpose, pass {_AGAIN}"
            )
        if copied and not again:
            raise _copied(
                path,
                record,
                "after an in-place run rotated it, but its bytes are "
                "no longer those that run left: it may have been copied while the "
                "run was in progress (partly rotated), or new data was saved into it",
            )
        if not copied and not again:
            _remove(own_undo_paths(record, fd))
        record = None  # the bytes were replaced since (or again=True): a new file
    if record is not None and copied:
        if not again:
            raise _copied_running(path, record)
        record = None  # again=True: start over; the original's undo files stay as they are
    if record is not None and again:
        _remove(own_undo_paths(record, fd))
        record = None
    if record is None:
        if not again:
            _refuse_legacy_journal(path)
        outcome, record = "rotated", _start(job, fd)
    else:
        outcome = "finished"
        job.plan = _check_resume(job, fd, record)
        record["inode"] = identity(fd)  # the device number may have changed (a reboot)
    undo = undo_paths(record["origin"])
    try:
        _run(job, fd, rotate, record, undo, progress)
    except OSError as exc:
        if _npyfile.is_out_of_space(exc):
            raise _out_of_space(job, record, exc) from exc
        raise
    _npyfile.crash_point("recorded", record["n_chunks"])
    _remove(undo)
    _npyfile.fsync_dir(Path(undo[0]).parent)
    _npyfile.crash_point("cleaned", record["n_chunks"])
    return outcome


def _start(job: Job, fd: int) -> dict:
    """Reserve the undo files (so that a full disk is found before any byte is rotated),
    make their names durable, then record the new run."""
    path, plan = job.info.path, job.plan
    origin = os.path.realpath(path)  # a symlink's target: the undo files go beside the data
    undo = undo_paths(origin)
    try:
        for p in undo:
            ufd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                if plan.buffer_bytes:
                    _reserve(ufd, plan.buffer_bytes)
            finally:
                os.close(ufd)
        _npyfile.fsync_dir(Path(origin).parent)  # the undo files exist before the record
        record = {
            "format": _FORMAT,
            "version": _VERSION,
            "state": "running",
            "file": job.info.record(),
            "inode": identity(fd),
            "origin": origin,
            "params": job.params,
            "chunk_bytes": plan.chunk_bytes,
            "n_chunks": plan.n_chunks,
            "done": 0,
            "pending": None,
            "last_crc32": None,
        }
        _npyfile.crash_point("locked", 0)
        write_record(fd, path, record)
    except OSError as exc:
        _remove(undo)
        if _npyfile.is_out_of_space(exc):
            free = _npyfile.free_bytes(Path(undo[0]).parent)
            raise OSError(
                exc.errno,
                f"not enough free space to rotate it in place: the run needs "
                f"{_npyfile.size(2 * plan.buffer_bytes)} beside it for two undo copies of one chunk"
                f"{'' if free is None else f' ({_npyfile.size(free)} free)'}; nothing was changed: "
                "free some space or choose a smaller chunk (chunk_bytes, --chunk-mib)",
                str(path),
            ) from exc
        raise
    return record


def _reserve(fd: int, nbytes: int) -> None:
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:  # a file system that cannot reserve space: find out when writing
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


def _chunk_crc(
    fd: int, info: _npyfile.NpyInfo, plan: _npyfile.Plan, k: int, buf: memoryview | None = None
) -> int:
    start, nbytes = plan.byte_range(k)
    mv = memoryview(bytearray(nbytes)) if buf is None else buf[:nbytes]
    _npyfile.read_into(fd, mv, info.data_offset + start, info.path)
    return zlib.crc32(mv)


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
    plan = replace(job.plan, chunk_bytes=record["chunk_bytes"])
    if plan.n_chunks != record["n_chunks"]:
        raise ValueError(
            f"the in-place journal of {path} does not match it: "
            f"{record['n_chunks']} chunks, expected {plan.n_chunks}; {restore}"
        )
    if own_undo_paths(record, fd) is None:
        raise ValueError(
            f"{path} is partly rotated by an interrupted in-place run ({_where(record)}) that "
            f"started from {record['origin']}, which no longer names this file, so its undo "
            f"files cannot be trusted to be this file's; nothing was changed: move the file "
            f"back to {record['origin']}, then give that path to the same command; to give up "
            f"on it, "
            f"{restore}"
        )
    done, pending, n = record["done"], record["pending"], record["n_chunks"]
    if pending is not None and done:
        # The chunk before the pending one holds the bytes this run wrote: else the file was
        # replaced (e.g. restored from a copy) under the journal.
        if _chunk_crc(fd, info, plan, done - 1) != pending["prev_crc32"]:
            raise ValueError(
                f"{path} changed since the interrupted in-place run that left its journal: "
                f"chunk {done - 1} no longer holds what that run wrote; {restore}"
            )
    if pending is not None and done < n - 1:
        # The last chunk stays as the run found it until the run reaches it.
        if _chunk_crc(fd, info, plan, n - 1) != record["last_crc32"]:
            raise ValueError(
                f"{path} changed since the interrupted in-place run that left its journal: "
                f"its last chunk ({n - 1}), which that run had not reached, no longer holds "
                "the bytes it had, so the journal no longer describes the file. If it now "
                f"holds new, unrotated data, rotate it with {_AGAIN}; else {restore}"
            )
    return plan


def _run(
    job: Job, fd: int, rotate: Rotate, record: dict, undo_names: list[str], progress: bool | None
) -> None:
    info, plan, path = job.info, job.plan, job.info.path
    n, k = plan.n_chunks, record["done"]
    bar = _npyfile.Progress(f"fastpe rope {path.name} (in place)", plan.total_bytes, progress)
    sleep = _npyfile.sleep_seconds()
    buf = np.empty(plan.buffer_bytes, dtype=np.uint8)
    mv = buf.data
    pending = record["pending"]
    if pending is not None:  # chunk k may be rotated, torn or untouched: redo it
        _read_undo(record, plan, mv, undo_names, path)
    elif n >= 2:  # a new run: the last chunk as found, to recognise the file on a resume
        record["last_crc32"] = _chunk_crc(fd, info, plan, n - 1, mv)
    undo = [
        os.open(p, os.O_RDWR | os.O_CREAT, 0o600) if plan.buffer_bytes else -1 for p in undo_names
    ]
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
            record["pending"] = {
                "chunk": k,
                "slot": slot,
                "nbytes": nbytes,
                "crc32": zlib.crc32(mv[:nbytes]),
                "prev_crc32": prev_crc,
            }
            write_record(fd, path, record)
            _npyfile.crash_point("journaled", k)
            rotate(plan, buf, k, nbytes)
            prev_crc = _write_chunk(fd, info, mv, k, start, nbytes, bar, sleep)
            k += 1
        record.update(
            state="done",
            done=n,
            pending=None,
            fingerprint=fingerprint(fd, info),
            finished=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        )
        write_record(fd, path, record)
    finally:
        for ufd in undo:
            if ufd >= 0:
                os.close(ufd)
    bar.close(plan.total_bytes)


def _read_undo(
    record: dict, plan: _npyfile.Plan, mv: memoryview, undo_names: list[str], path: Path
) -> None:
    """Read the saved original bytes of the pending chunk into ``mv``, or refuse."""
    k, pending = record["done"], record["pending"]
    upath = undo_names[pending["slot"]]
    nbytes = plan.byte_range(k)[1]
    try:
        ufd = os.open(upath, os.O_RDONLY)
    except FileNotFoundError:
        ok = False
    else:
        try:
            _npyfile.read_into(ufd, mv[:nbytes], 0, Path(upath))
            ok = pending["nbytes"] == nbytes and zlib.crc32(mv[:nbytes]) == pending["crc32"]
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
    where = Path(record["origin"]).parent
    free = _npyfile.free_bytes(where)
    state = (
        "every chunk is rotated, only the journal's last step is missing"
        if record["state"] == "done"
        else _where(record)
    )
    return OSError(
        exc.errno,
        f"no space left on the device while rotating in place: the file is partly "
        f"rotated ({state}). Rerunning the same command finishes it; the run needs "
        f"{_npyfile.size(need)} of free space in {where} for its two undo copies of one chunk"
        f"{'' if free is None else f' ({_npyfile.size(free)} free now)'} and a few KiB for its "
        "journal",
        str(job.info.path),
    )
