"""Larger-than-memory ``.npy`` files: RoPE and sinusoidal tables chunk by chunk, crash-safe.

:func:`rope_file` applies :func:`fastpe.apply_rope` to an array stored in a ``.npy`` file
and :func:`table_file` writes :func:`fastpe.sinusoidal_table` to one, a chunk at a time
through one reused buffer, so resident memory stays near ``chunk_bytes`` whatever the
file's size. Results are bit for bit those of the in-memory functions: each value depends
only on its position, never on how the work was split.

Crash safety
------------
A new file (``output=...``, :func:`table_file`) is written to a hidden temporary file in
the same directory, ``.NAME.partial-PID``, flushed to disk and renamed over ``NAME`` only
when complete: an interrupted run leaves no ``NAME`` (or the old one), and the next run for
the same output removes the leftover temporary file.

``rope_file(..., in_place=True)`` keeps a journal, ``INPUT.fastpe-journal``, and two undo
files, ``INPUT.fastpe-undo0`` and ``INPUT.fastpe-undo1``, beside the file. Before chunk
``k`` is overwritten its original bytes are saved to undo file ``k % 2`` and flushed, and
the journal is atomically replaced (temporary file, ``fsync``, ``os.replace``, ``fsync`` of
the directory) by one that says "chunks before ``k`` are done, chunk ``k`` is in progress,
its original bytes (length, CRC-32) are in undo file ``k % 2``". Only then is the rotated
chunk written and flushed. A run started on a file with a journal resumes: it rotates the
in-progress chunk again from its saved original bytes (whatever state the interrupted write
left it in), then carries on. The result is bit for bit that of an uninterrupted run. A
journal written with other parameters is refused, naming the parameters that differ.
The journal and undo files are removed when the file is done.

``FASTPE_FILES_TEST_SLEEP`` (seconds, for tests only) makes every chunk sleep that long
after it is written, so that tests can kill a run part way.

Examples
--------
>>> import os, tempfile, numpy as np, fastpe
>>> from fastpe.files import rope_file, table_file
>>> d = tempfile.mkdtemp()
>>> x = np.ones((2, 16, 8), dtype=np.float32)
>>> np.save(os.path.join(d, "q.npy"), x)
>>> out = rope_file(os.path.join(d, "q.npy"), os.path.join(d, "q_rot.npy"), chunk_bytes=256)
>>> np.array_equal(np.load(out), fastpe.apply_rope(x))
True
>>> t = table_file(os.path.join(d, "pe.npy"), seq_len=100, dim=8, chunk_bytes=512)
>>> np.array_equal(np.load(t), fastpe.sinusoidal_table(100, 8))
True
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import math
import numbers
import os
import stat
import sys
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import _validate as v
from ._rope_args import default_seq_len

__all__ = ["DEFAULT_CHUNK_BYTES", "add_commands", "rope_file", "table_file"]

#: Default size of the buffer a chunk is read into (64 MiB).
DEFAULT_CHUNK_BYTES = 64 * 2**20
JOURNAL_SUFFIX = ".fastpe-journal"
UNDO_SUFFIX = ".fastpe-undo"
SLEEP_ENV = "FASTPE_FILES_TEST_SLEEP"
_JOURNAL_FORMAT = "fastpe-rope-journal"
_JOURNAL_VERSION = 1
_ROPE_OPTIONS = ("layout", "base", "offset", "rotary_dim", "seq_axis", "inverse", "scaling",
                 "max_position_embeddings", "seq_len")


# --------------------------------------------------------------------------------------------
# Low-level file helpers
# --------------------------------------------------------------------------------------------


def _crash_point(stage: str, chunk: int) -> None:
    """Called between the steps of a chunk; tests replace it to simulate crashes."""


def _test_sleep() -> float:
    raw = os.environ.get(SLEEP_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else 0.0
    except ValueError:
        return 0.0


def _read_into(fd: int, mv: memoryview, pos: int, what: Path) -> None:
    got = 0
    while got < len(mv):
        if hasattr(os, "preadv"):
            n = os.preadv(fd, [mv[got:]], pos + got)
        else:  # pragma: no cover - platforms without preadv
            os.lseek(fd, pos + got, os.SEEK_SET)
            n = os.readv(fd, [mv[got:]])
        if n == 0:
            raise ValueError(
                f"{what} ended early: could not read byte {pos + got}; the file was truncated "
                "while being processed"
            )
        got += n


def _write_all(fd: int, mv: memoryview | bytes, pos: int) -> None:
    mv = memoryview(mv)
    done = 0
    while done < len(mv):
        done += os.pwrite(fd, mv[done:], pos + done)


def _sync_data(fd: int) -> None:
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)


def _fsync_dir(directory: Path) -> None:
    """Make renames and deletions in ``directory`` durable (a no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    except OSError:  # pragma: no cover
        return False
    return True


def _partial_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.partial-{os.getpid()}")


def _remove_stale_partials(output: Path) -> None:
    """Remove ``.NAME.partial-PID`` files left by runs (for this output) that have died."""
    prefix = f".{output.name}.partial-"
    try:
        entries = list(os.scandir(output.parent))
    except OSError:  # pragma: no cover
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix):]
        if pid.isdigit() and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


@contextlib.contextmanager
def _published(output: Path):
    """Yield a fresh partial path for ``output``; rename it onto ``output`` when the block
    succeeds (then fsync the directory), remove it when the block raises.

    The block writes and fsyncs the partial file; a reader never sees a half-written
    ``output``, and a run killed mid-way leaves only a partial that the next run removes.
    """
    _remove_stale_partials(output)
    partial = _partial_path(output)
    try:
        yield partial
        os.replace(partial, output)
        _fsync_dir(output.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def _check_output_path(output: Path) -> None:
    if not output.parent.is_dir():
        raise FileNotFoundError(
            errno.ENOENT, f"the directory of the output does not exist; create {output.parent} "
            "first", str(output)
        )
    if output.is_dir():
        raise IsADirectoryError(
            errno.EISDIR, "the output is a directory; give a file name such as out.npy",
            str(output)
        )


class _Progress:
    """A one-line progress bar on stderr (a no-op when disabled)."""

    def __init__(self, label: str, total: int, enabled: bool | None):
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
        elif not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"progress must be True, False or None, got {enabled!r}")
        self.label = label
        self.total = total
        self.enabled = bool(enabled)
        self._last: float | None = None

    def update(self, done: int, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self._last is not None and now - self._last < 0.1:
            return
        self._last = now
        frac = done / self.total if self.total else 1.0
        fill = int(frac * 30)
        sys.stderr.write(
            f"\r{self.label} [{'#' * fill}{'.' * (30 - fill)}] {frac:4.0%} "
            f"{done / 2**20:.1f}/{self.total / 2**20:.1f} MiB"
        )
        sys.stderr.flush()

    def close(self, done: int) -> None:
        if self.enabled:
            self.update(done, force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


def _check_chunk_bytes(chunk_bytes) -> int:
    return v.check_int(chunk_bytes, "chunk_bytes", minimum=1)


# --------------------------------------------------------------------------------------------
# .npy headers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NpyInfo:
    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int
    header: bytes
    file_size: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _read_npy_header(path: Path) -> _NpyInfo:
    """Parse the header of a ``.npy`` file without reading (or unpickling) its data."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        try:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(f)
            else:
                raise ValueError(
                    f"format version {version[0]}.{version[1]} is not supported (only 1.0 and "
                    "2.0, which np.save writes for numeric arrays)"
                )
        except ValueError as exc:
            raise ValueError(
                f"{path} is not a readable .npy file: {exc}; write it with numpy.save"
            ) from exc
        data_offset = f.tell()
        f.seek(0)
        header = f.read(data_offset)
    return _NpyInfo(path=path, shape=tuple(shape), dtype=np.dtype(dtype),
                    fortran_order=bool(fortran), data_offset=data_offset, header=header,
                    file_size=os.stat(path).st_size)


def _check_float_file(info: _NpyInfo) -> None:
    """Refuse what the chunked loop cannot handle, naming the fix."""
    path, dt = info.path, info.dtype
    if dt.hasobject:
        raise TypeError(
            f"{path} holds Python objects (dtype {dt}) stored with pickle; fastpe never "
            "unpickles files: save a float32 or float64 array instead"
        )
    if dt.kind != "f" or dt.itemsize not in (4, 8) or dt.fields is not None:
        raise TypeError(
            f"{path} has dtype {dt}; only float32 and float64 files are supported: convert "
            "with np.save(path, a.astype(np.float32))"
        )
    if not dt.isnative:
        raise TypeError(
            f"{path} has non-native byte order ({dt.str}); convert with "
            f"np.save(path, a.astype('={dt.char}'))"
        )
    if info.fortran_order and len(info.shape) > 1:
        raise ValueError(
            f"{path} is stored in Fortran (column-major) order, so a position's channels are "
            "not contiguous on disk; save a C-order copy: np.save(path, np.ascontiguousarray(a))"
        )
    if info.file_size < info.data_offset + info.nbytes:
        raise ValueError(
            f"{path} is truncated: {info.file_size} bytes, but its header (shape "
            f"{info.shape}, dtype {dt}) needs {info.data_offset + info.nbytes}"
        )


def _write_header(f, shape: tuple[int, ...], dtype: np.dtype) -> None:
    d = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
         "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(f, d)
    except ValueError:  # header too long for version 1.0
        f.seek(0)
        f.truncate()
        np.lib.format.write_array_header_2_0(f, d)


# --------------------------------------------------------------------------------------------
# Chunk plan
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """How the C-order array, seen as ``(outer, seq, heads, dim)``, is split into chunks.

    ``outer`` merges the axes before the sequence axis, ``heads`` those between it and the
    channels. Every chunk is one contiguous byte range: whole sequences of ``per_outer``
    consecutive outer rows when one sequence fits in ``chunk_bytes``, else ``per_seq``
    consecutive positions of one sequence.
    """

    outer: int
    seq: int
    heads: int
    dim: int
    itemsize: int
    chunk_bytes: int

    @property
    def row_bytes(self) -> int:
        return self.heads * self.dim * self.itemsize

    @property
    def total_bytes(self) -> int:
        return self.outer * self.seq * self.row_bytes

    @property
    def whole_sequences(self) -> bool:
        return self.seq * self.row_bytes <= self.chunk_bytes

    @property
    def per_outer(self) -> int:
        return max(1, self.chunk_bytes // max(1, self.seq * self.row_bytes))

    @property
    def per_seq(self) -> int:
        return max(1, self.chunk_bytes // max(1, self.row_bytes))

    @property
    def n_chunks(self) -> int:
        if self.total_bytes == 0:
            return 0
        if self.whole_sequences:
            return -(-self.outer // self.per_outer)
        return self.outer * -(-self.seq // self.per_seq)

    @property
    def buffer_bytes(self) -> int:
        if self.total_bytes == 0:
            return 0
        if self.whole_sequences:
            return min(self.outer, self.per_outer) * self.seq * self.row_bytes
        return min(self.seq, self.per_seq) * self.row_bytes

    def chunk(self, k: int) -> tuple[int, int, int, int]:
        """``(o0, o1, s0, s1)``: outer rows ``o0:o1``, positions ``s0:s1`` of chunk ``k``."""
        if self.whole_sequences:
            o0 = k * self.per_outer
            return o0, min(self.outer, o0 + self.per_outer), 0, self.seq
        per = -(-self.seq // self.per_seq)
        o0, j = divmod(k, per)
        s0 = j * self.per_seq
        return o0, o0 + 1, s0, min(self.seq, s0 + self.per_seq)

    def byte_range(self, k: int) -> tuple[int, int]:
        """``(start, length)`` of chunk ``k`` relative to the start of the data."""
        o0, o1, s0, s1 = self.chunk(k)
        start = (o0 * self.seq + s0) * self.row_bytes
        return start, (o1 - o0) * (s1 - s0) * self.row_bytes


# --------------------------------------------------------------------------------------------
# rope_file
# --------------------------------------------------------------------------------------------


@dataclass
class _RopeJob:
    info: _NpyInfo
    plan: _Plan
    kwargs: dict  # passed to apply_rope for every chunk (with offset + s0, out=chunk)
    offset: int
    params: dict  # normalised parameters recorded in the journal


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"scaling holds a value that is not JSON-serialisable: {obj!r}")


def _rope_job(info: _NpyInfo, chunk_bytes: int, options: dict) -> _RopeJob:
    """Validate the RoPE options against the file before anything is written."""
    from .rotary import apply_rope

    path, shape = info.path, info.shape
    offset = options["offset"]
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, numbers.Integral):
        raise TypeError(
            f"offset must be a single int for files, got {offset!r}; per-row offsets and "
            "positions arrays are not supported by rope_file (load the array and call "
            "fastpe.apply_rope)"
        )
    offset = int(offset)
    nd = len(shape)
    if nd not in (2, 3, 4):
        raise ValueError(
            f"{path} holds an array of shape {shape}; RoPE needs 2-D (seq, dim), 3-D "
            "(batch, seq, dim) or 4-D (batch, seq, heads, head_dim)"
        )
    try:
        k = v.check_seq_axis(options["seq_axis"], shape)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    n_seq = shape[k]
    try:
        v.check_offset(offset, n_seq)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    seq_len = options["seq_len"]
    if seq_len is None:
        seq_len = default_seq_len(None, offset, n_seq)  # apply_rope's, for the whole array
    kwargs = {name: options[name] for name in ("layout", "base", "rotary_dim", "inverse",
                                               "scaling", "max_position_embeddings")}
    kwargs["seq_len"] = seq_len
    # Every check of apply_rope, on a one-position array of the file's rank and channels.
    probe_shape = [1] * nd
    probe_shape[-1] = shape[-1]
    probe = np.zeros(probe_shape, dtype=info.dtype)
    try:
        apply_rope(probe, out=probe, offset=offset, seq_axis=k, **kwargs)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{path} (shape {shape}): {exc}") from exc
    scaling = kwargs["scaling"]
    if scaling is not None:
        if isinstance(scaling, Mapping):
            scaling = dict(scaling)
        scaling = json.loads(json.dumps(scaling, sort_keys=True, default=_json_default))
    params = {
        "layout": kwargs["layout"],
        "base": float(kwargs["base"]),
        "offset": offset,
        "rotary_dim": shape[-1] if kwargs["rotary_dim"] is None else int(kwargs["rotary_dim"]),
        "seq_axis": k,
        "inverse": bool(kwargs["inverse"]),
        "scaling": scaling,
        "max_position_embeddings": (None if kwargs["max_position_embeddings"] is None
                                    else int(kwargs["max_position_embeddings"])),
        "seq_len": int(seq_len),
    }
    outer = math.prod(shape[:k])
    heads = math.prod(shape[k + 1:-1])
    plan = _Plan(outer=outer, seq=n_seq, heads=heads, dim=shape[-1],
                 itemsize=info.dtype.itemsize, chunk_bytes=chunk_bytes)
    return _RopeJob(info=info, plan=plan, kwargs=kwargs, offset=offset, params=params)


def _rotate_chunk(job: _RopeJob, buf: np.ndarray, k: int, nbytes: int) -> None:
    from .rotary import apply_rope

    o0, o1, s0, s1 = job.plan.chunk(k)
    a = buf[:nbytes].view(job.info.dtype).reshape(o1 - o0, s1 - s0, job.plan.heads,
                                                   job.plan.dim)
    apply_rope(a, out=a, offset=job.offset + s0, seq_axis=1, **job.kwargs)


def rope_file(
    input: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    in_place: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool | None = None,
    layout: str = "interleaved",
    base: float = 10000.0,
    offset: int = 0,
    rotary_dim: int | None = None,
    seq_axis: int | None = None,
    inverse: bool = False,
    scaling: Mapping[str, Any] | None = None,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
    **unsupported: Any,
) -> Path:
    """Apply :func:`fastpe.apply_rope` to an array in a ``.npy`` file, chunk by chunk.

    The file may be far larger than memory. The result is bit for bit
    ``apply_rope(np.load(input), ...)``, whatever ``chunk_bytes`` is.

    Parameters
    ----------
    input : path
        A ``.npy`` file (format 1.0 or 2.0, C order) of float32 or float64, 2-D, 3-D or
        4-D as :func:`fastpe.apply_rope` accepts. Object arrays are refused, never unpickled.
    output : path, optional
        Where to write the result. It is written to ``.NAME.partial-PID`` in the same
        directory and renamed into place, after an ``fsync``, only when complete; an
        interrupted run leaves no (or the old) ``output``, and a rerun removes the leftover.
        Exclusive with ``in_place``.
    in_place : bool, default False
        Rotate ``input`` itself, resumable after a crash or kill through a journal and undo
        files beside it (see :mod:`fastpe.files`); rerun the same call to finish an
        interrupted run. A journal left with other parameters is refused.
    chunk_bytes : int, default 64 MiB
        Size of the one buffer chunks are read into (at least one position: one
        ``heads * head_dim`` row). Peak resident memory is about ``chunk_bytes`` plus the
        interpreter, NumPy and the compiled kernels (a constant near 150 MiB), independent
        of the file's size: data moves through the buffer with ``pread``/``pwrite`` and
        is never memory-mapped. A resumed in-place run keeps the chunk size of its journal.
    progress : bool, optional
        Show a progress bar on stderr; default: only when stderr is a terminal.
    layout, base, offset, rotary_dim, seq_axis, inverse
        As in :func:`fastpe.apply_rope`. ``offset`` must be one int: ``positions`` arrays and
        per-row offsets are not supported for files.
    scaling, max_position_embeddings, seq_len
        As in :func:`fastpe.apply_rope`. ``seq_len`` defaults to ``offset`` plus the sequence
        length of the whole file, what ``apply_rope`` uses on the whole array.

    Returns
    -------
    pathlib.Path
        The rotated file: ``output``, or ``input`` when ``in_place``.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, a file of the wrong dtype, order or shape, a read-only file with
        ``in_place``, or a journal left with other parameters: before anything is written.
    OSError
        From the file system.

    Notes
    -----
    The array is seen as ``(outer, seq, heads, dim)``: ``outer`` merges the axes before the
    sequence axis and ``heads`` those between it and the channels. Each chunk is one
    contiguous byte range of the C-order data: whole sequences of consecutive outer rows
    when one sequence fits in ``chunk_bytes``, else a run of consecutive positions of one
    sequence, rotated with ``offset`` plus its first position. In place, every chunk is
    written twice (undo file, then data) and flushed three times.

    Examples
    --------
    >>> import os, tempfile, numpy as np, fastpe
    >>> d = tempfile.mkdtemp()
    >>> k = np.ones((1, 64, 2, 8), dtype=np.float32)          # (batch, seq, heads, head_dim)
    >>> np.save(os.path.join(d, "k.npy"), k)
    >>> p = rope_file(os.path.join(d, "k.npy"), in_place=True, offset=5, chunk_bytes=1024)
    >>> np.array_equal(np.load(p), fastpe.apply_rope(k, offset=5))
    True
    """
    if unsupported:
        name = sorted(unsupported)[0]
        if name == "positions":
            raise TypeError(
                "positions are not supported by rope_file: a file is rotated at positions "
                "offset, offset + 1, ...; load the array and call fastpe.apply_rope for "
                "explicit positions"
            )
        if name == "out":
            raise TypeError("rope_file takes output=PATH or in_place=True, not out=")
        raise TypeError(f"rope_file() got an unexpected keyword argument {name!r}")
    if not isinstance(in_place, (bool, np.bool_)):
        raise TypeError(f"in_place must be True or False, got {in_place!r}")
    if in_place and output is not None:
        raise ValueError("give either output or in_place=True, not both")
    if not in_place and output is None:
        raise ValueError("give output=PATH for a new file, or in_place=True to rotate input")
    chunk_bytes = _check_chunk_bytes(chunk_bytes)
    path = Path(input)
    info = _read_npy_header(path)
    _check_float_file(info)
    options = {"layout": layout, "base": base, "offset": offset, "rotary_dim": rotary_dim,
               "seq_axis": seq_axis, "inverse": inverse, "scaling": scaling,
               "max_position_embeddings": max_position_embeddings, "seq_len": seq_len}
    job = _rope_job(info, chunk_bytes, options)
    journal = _journal_path(path)
    if in_place:
        _rope_in_place(job, journal, progress)
        return path
    if journal.exists():
        raise ValueError(
            f"{path} is partly rotated by an interrupted in-place run (journal {journal}); "
            "finish it first by rerunning that in-place run with the same parameters"
        )
    out = Path(output)
    _check_output_path(out)
    if out.exists() and os.path.samefile(path, out):
        raise ValueError(
            f"output {out} is the input file; use in_place=True (--in-place) to rotate it "
            "in place"
        )
    _rope_to_new_file(job, out, progress)
    return out


def _rope_to_new_file(job: _RopeJob, out: Path, progress: bool | None) -> None:
    info, plan = job.info, job.plan
    bar = _Progress(f"fastpe rope {info.path.name}", plan.total_bytes, progress)
    sleep = _test_sleep()
    fd_in = os.open(info.path, os.O_RDONLY)
    try:
        with _published(out) as partial:
            fd_out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                _write_all(fd_out, info.header, 0)
                os.ftruncate(fd_out, info.data_offset + plan.total_bytes)
                buf = np.empty(plan.buffer_bytes, dtype=np.uint8)
                mv = memoryview(buf)
                done = 0
                for k in range(plan.n_chunks):
                    start, nbytes = plan.byte_range(k)
                    _read_into(fd_in, mv[:nbytes], info.data_offset + start, info.path)
                    _rotate_chunk(job, buf, k, nbytes)
                    _write_all(fd_out, mv[:nbytes], info.data_offset + start)
                    done += nbytes
                    bar.update(done)
                    _crash_point("chunk-written", k)
                    if sleep:
                        time.sleep(sleep)
                os.fsync(fd_out)
            finally:
                os.close(fd_out)
    finally:
        os.close(fd_in)
    bar.close(plan.total_bytes)


# --------------------------------------------------------------------------------------------
# In place: journal and undo files
# --------------------------------------------------------------------------------------------


def _journal_path(path: Path) -> Path:
    return path.with_name(path.name + JOURNAL_SUFFIX)


def _undo_path(path: Path, slot: int) -> Path:
    return path.with_name(f"{path.name}{UNDO_SUFFIX}{slot}")


def _write_journal(journal: Path, state: dict) -> None:
    """Replace the journal atomically and durably."""
    tmp = journal.with_name(journal.name + ".tmp")
    data = (json.dumps(state, indent=1, sort_keys=True) + "\n").encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        _write_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, journal)
    _fsync_dir(journal.parent)


def _file_record(info: _NpyInfo) -> dict:
    return {"shape": list(info.shape), "dtype": info.dtype.str, "data_offset": info.data_offset,
            "size": info.file_size}


def _fmt_param(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else repr(value)


def _load_journal(job: _RopeJob, journal: Path) -> dict:
    """Read and check a journal left by an interrupted in-place run of the same file."""
    path = job.info.path
    undo = f"{_undo_path(path, 0).name} and {_undo_path(path, 1).name}"
    try:
        state = json.loads(journal.read_text())
        if state.get("format") != _JOURNAL_FORMAT or state.get("version") != _JOURNAL_VERSION:
            raise ValueError("not a fastpe rope journal of this version")
        done, n, pending = int(state["done"]), int(state["n_chunks"]), state["pending"]
        state["chunk_bytes"] = _check_chunk_bytes(state["chunk_bytes"])
        if not 0 <= done <= n or (pending is not None and int(pending["chunk"]) != done):
            raise ValueError(f"inconsistent progress (done={done} of {n}, pending={pending})")
        params, record = dict(state["params"]), dict(state["file"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"the journal {journal} of an interrupted in-place run on {path} is unreadable "
            f"({exc}); the file may be partly rotated: restore it from a copy, then delete "
            f"the journal and {undo}"
        ) from exc
    where = (f"chunks 0..{done - 1} of {n} are rotated" if done else f"none of {n} chunks is "
             "rotated")
    if pending is not None:
        where += (f", chunk {done} may be partly rotated (its original bytes are in "
                  f"{_undo_path(path, int(pending['slot'])).name})")
    if record != _file_record(job.info):
        raise ValueError(
            f"{path} changed since the interrupted in-place run that left {journal} (then: "
            f"{record}, now: {_file_record(job.info)}); the journal no longer describes it: "
            f"restore the file from a copy and delete the journal and {undo}"
        )
    diff = [name for name in _ROPE_OPTIONS if params.get(name) != job.params[name]]
    if diff:
        then = ", ".join(f"{name}={_fmt_param(params.get(name))}" for name in diff)
        now = ", ".join(f"{name}={_fmt_param(job.params[name])}" for name in diff)
        raise ValueError(
            f"{path} is partly rotated by an interrupted in-place run with other parameters "
            f"({then}; this call has {now}). To finish it, rerun with the original "
            f"parameters; to give up on it, delete {journal} and {undo}, knowing that "
            f"{where} and the rest is untouched"
        )
    plan = replace(job.plan, chunk_bytes=state["chunk_bytes"])
    if plan.n_chunks != n:
        raise ValueError(f"the journal {journal} does not match {path}: {n} chunks, "
                         f"expected {plan.n_chunks}; delete it and restore the file")
    job.plan = plan  # resume with the chunk size the run started with
    return state


def _check_writeable_file(path: Path) -> None:
    mode = os.stat(path).st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise PermissionError(
            errno.EACCES,
            f"the file is read-only (mode {stat.S_IMODE(mode):#o}), so it is not rotated in "
            "place; make it writeable (chmod u+w) or write the result to a new file with "
            "output=PATH (-o)", str(path)
        )


def _lock(fd: int, path: Path) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ValueError(
            f"another process is rotating {path} in place; wait for it to finish"
        ) from None


def _rope_in_place(job: _RopeJob, journal: Path, progress: bool | None) -> None:
    path, info = job.info.path, job.info
    _check_writeable_file(path)
    fd = os.open(path, os.O_RDWR)
    try:
        _lock(fd, path)
        if journal.exists():
            state = _load_journal(job, journal)
        else:
            state = {"format": _JOURNAL_FORMAT, "version": _JOURNAL_VERSION,
                     "file": _file_record(info), "params": job.params,
                     "chunk_bytes": job.plan.chunk_bytes, "n_chunks": job.plan.n_chunks,
                     "done": 0, "pending": None}
            _write_journal(journal, state)
        _rope_in_place_loop(job, fd, journal, state, progress)
    finally:
        os.close(fd)
    for slot in (0, 1):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_undo_path(path, slot))
    os.unlink(journal)
    _fsync_dir(path.parent)


def _rope_in_place_loop(job: _RopeJob, fd: int, journal: Path, state: dict,
                        progress: bool | None) -> None:
    info, plan = job.info, job.plan
    path = info.path
    n = plan.n_chunks
    k = state["done"]
    bar = _Progress(f"fastpe rope {path.name} (in place)", plan.total_bytes, progress)
    sleep = _test_sleep()
    buf = np.empty(plan.buffer_bytes, dtype=np.uint8)
    mv = memoryview(buf)
    undo_fds: dict[int, int] = {}

    def undo_fd(slot: int) -> int:
        if slot not in undo_fds:
            undo_fds[slot] = os.open(_undo_path(path, slot), os.O_RDWR | os.O_CREAT, 0o600)
        return undo_fds[slot]

    def finish_chunk(k: int, nbytes: int, start: int) -> None:
        _rotate_chunk(job, buf, k, nbytes)
        _write_all(fd, mv[:nbytes], info.data_offset + start)
        _sync_data(fd)
        _crash_point("data-written", k)
        bar.update(start + nbytes)
        if sleep:
            time.sleep(sleep)

    try:
        pending = state["pending"]
        if pending is not None:
            # Chunk k may be rotated, half written or untouched: redo it from its original
            # bytes, saved (and flushed) before the journal named it.
            start, nbytes = plan.byte_range(k)
            slot = int(pending["slot"])
            upath = _undo_path(path, slot)
            ok = (int(pending["nbytes"]) == nbytes and upath.exists()
                  and os.stat(upath).st_size == nbytes)
            if ok:
                _read_into(undo_fd(slot), mv[:nbytes], 0, upath)
                ok = zlib.crc32(mv[:nbytes]) == int(pending["crc32"])
            if not ok:
                raise ValueError(
                    f"cannot resume the in-place run on {path}: the undo file {upath} of "
                    f"chunk {k} is missing or damaged, so that chunk cannot be restored; "
                    f"restore the file from a copy and delete {journal}"
                )
            finish_chunk(k, nbytes, start)
            k += 1
        while k < n:
            start, nbytes = plan.byte_range(k)
            _read_into(fd, mv[:nbytes], info.data_offset + start, path)
            slot = k % 2  # the other slot still holds chunk k - 1 until the journal moves on
            ufd = undo_fd(slot)
            _write_all(ufd, mv[:nbytes], 0)
            os.ftruncate(ufd, nbytes)
            _sync_data(ufd)
            _crash_point("undo-written", k)
            state["done"] = k
            state["pending"] = {"chunk": k, "slot": slot, "nbytes": nbytes,
                                "crc32": zlib.crc32(mv[:nbytes])}
            _write_journal(journal, state)
            _crash_point("journaled", k)
            finish_chunk(k, nbytes, start)
            k += 1
        state["done"] = n
        state["pending"] = None
        _write_journal(journal, state)
    finally:
        for ufd in undo_fds.values():
            os.close(ufd)
    bar.close(plan.total_bytes)


# --------------------------------------------------------------------------------------------
# table_file
# --------------------------------------------------------------------------------------------


def table_file(
    output: str | os.PathLike,
    *,
    seq_len: int,
    dim: int,
    dtype: DTypeLike = np.float32,
    layout: str = "interleaved",
    base: float = 10000.0,
    offset: int = 0,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: bool | None = None,
) -> Path:
    """Write :func:`fastpe.sinusoidal_table` to a ``.npy`` file, a chunk of rows at a time.

    The file is bit for bit ``np.save(output, sinusoidal_table(seq_len, dim, ...))``'s data.
    It is written to ``.NAME.partial-PID`` in the same directory and renamed into place,
    after an ``fsync``, only when complete.

    Parameters
    ----------
    output : path
        The ``.npy`` file to write (replaced if it exists).
    seq_len, dim : int
        Rows (positions ``offset, ..., offset + seq_len - 1``) and columns (even).
    dtype : float32 or float64, default float32
        Data type of the table.
    layout, base, offset
        As in :func:`fastpe.sinusoidal_table`.
    chunk_bytes : int, default 64 MiB
        Size of the one buffer rows are computed in (at least one row). Peak resident
        memory is about ``chunk_bytes`` plus a constant (the interpreter, NumPy and the
        compiled kernels), whatever ``seq_len`` is.
    progress : bool, optional
        Show a progress bar on stderr; default: only when stderr is a terminal.

    Returns
    -------
    pathlib.Path
        ``output``.

    Examples
    --------
    >>> import os, tempfile, numpy as np, fastpe
    >>> p = table_file(os.path.join(tempfile.mkdtemp(), "pe.npy"), seq_len=1000, dim=16,
    ...                offset=7, chunk_bytes=4096)
    >>> np.array_equal(np.load(p), fastpe.sinusoidal_table(1000, 16, offset=7))
    True
    """
    from .sinusoidal import sinusoidal_table

    n = v.check_int(seq_len, "seq_len", minimum=0)
    dim = v.check_dim(dim)
    dt = v.check_float_dtype(dtype)
    v.check_layout(layout)
    v.check_base(base)
    offset = v.check_offset(offset, n)
    chunk_bytes = _check_chunk_bytes(chunk_bytes)
    out = Path(output)
    _check_output_path(out)
    row_bytes = dim * dt.itemsize
    rows = max(1, min(n, chunk_bytes // row_bytes))
    total = n * row_bytes
    bar = _Progress(f"fastpe table {out.name}", total, progress)
    sleep = _test_sleep()
    with _published(out) as partial, open(partial, "xb") as f:
        _write_header(f, (n, dim), dt)
        buf = np.empty((rows, dim), dtype=dt)
        for r0 in range(0, n, rows):
            m = min(rows, n - r0)
            sinusoidal_table(m, dim, base=base, offset=offset + r0, layout=layout,
                             out=buf[:m])
            f.write(memoryview(buf[:m]).cast("B"))
            bar.update((r0 + m) * row_bytes)
            _crash_point("chunk-written", r0 // rows)
            if sleep:
                time.sleep(sleep)
        f.flush()
        os.fsync(f.fileno())
    bar.close(total)
    return out


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

# Usage and validation errors exit with 2, other failures of the file system with 1.
_USAGE_ERRORS = (TypeError, ValueError, FileNotFoundError, PermissionError, IsADirectoryError,
                 NotADirectoryError)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _fail(command: str, exc: BaseException) -> int:
    print(f"fastpe {command}: error: {_one_line(exc)}", file=sys.stderr)
    return 2 if isinstance(exc, _USAGE_ERRORS) else 1


def _chunk_mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of MiB, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _chunk_bytes(mib: float) -> int:
    return max(1, int(mib * 2**20))


def _load_scaling(text: str) -> dict:
    """A scaling dict from inline JSON (``{...}``) or from the path of a JSON file."""
    if text.lstrip().startswith("{"):
        source = "--scaling-json"
    else:
        source = text
        try:
            text = Path(text).read_text()
        except OSError as exc:
            raise ValueError(
                f"--scaling-json {source!r} is neither inline JSON (starting with '{{') nor a "
                f"readable file: {exc.strerror or exc}"
            ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f"{source} must hold a JSON object such as {{\"rope_type\": \"linear\", "
            f"\"factor\": 2.0}}, got {type(value).__name__}"
        )
    return value


def cmd_rope(args: argparse.Namespace) -> int:
    """``fastpe rope``: returns the exit code."""
    try:
        scaling = _load_scaling(args.scaling_json) if args.scaling_json else None
        rope_file(args.input, args.output, in_place=args.in_place,
                  chunk_bytes=_chunk_bytes(args.chunk_mib), progress=args.progress,
                  layout=args.layout, base=args.base, offset=args.offset,
                  rotary_dim=args.rotary_dim, seq_axis=args.seq_axis, inverse=args.inverse,
                  scaling=scaling, max_position_embeddings=args.max_position_embeddings,
                  seq_len=args.seq_len)
    except KeyboardInterrupt:
        what = ("the file is partly rotated; rerun the same command to finish"
                if args.in_place else "no output was written")
        print(f"\nfastpe rope: interrupted: {what}", file=sys.stderr)
        return 130
    except (OSError, TypeError, ValueError) as exc:
        return _fail("rope", exc)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    """``fastpe table``: returns the exit code."""
    try:
        table_file(args.output, seq_len=args.seq_len, dim=args.dim, dtype=args.dtype,
                   layout=args.layout, base=args.base, offset=args.offset,
                   chunk_bytes=_chunk_bytes(args.chunk_mib), progress=args.progress)
    except KeyboardInterrupt:
        print("\nfastpe table: interrupted: no output was written", file=sys.stderr)
        return 130
    except (OSError, TypeError, ValueError) as exc:
        return _fail("table", exc)
    return 0


def add_commands(subparsers) -> None:
    """Add the ``rope`` and ``table`` subcommands to the ``fastpe`` command's subparsers.

    Parameters
    ----------
    subparsers
        The object returned by ``ArgumentParser.add_subparsers``. Each subcommand sets
        ``func``, a function of the parsed arguments that returns the exit code.
    """
    p = subparsers.add_parser(
        "rope",
        help="apply RoPE to a .npy file of any size, chunk by chunk (crash-safe)",
        description="Rotate a float32/float64 .npy file with RoPE, bit for bit as "
        "fastpe.apply_rope on the loaded array, through a buffer of --chunk-mib. With -o the "
        "result appears only when complete; with --in-place a journal beside the file lets "
        "an interrupted run be finished by rerunning the same command.",
    )
    p.add_argument("input", metavar="INPUT.npy", help="the .npy file to rotate")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("-o", "--output", metavar="OUTPUT.npy", help="write the result here")
    dest.add_argument("--in-place", action="store_true", help="rotate INPUT.npy itself")
    p.add_argument("--layout", choices=list(v.LAYOUTS), default="interleaved",
                   help="channel pairing: interleaved (x[2i], x[2i+1]) or half (x[i], "
                   "x[i + rotary_dim/2])")
    p.add_argument("--base", type=float, default=10000.0, metavar="F",
                   help="frequency base (rope_theta)")
    p.add_argument("--offset", type=int, default=0, metavar="N",
                   help="position of the first element")
    p.add_argument("--rotary-dim", type=int, metavar="N", help="rotate only the first N channels")
    p.add_argument("--seq-axis", type=int, metavar="AXIS",
                   help="sequence axis (default 0 for 2-D files, else 1)")
    p.add_argument("--inverse", action="store_true", help="undo a forward rotation")
    p.add_argument("--scaling-json", metavar="JSON_OR_PATH",
                   help="a Hugging Face rope_scaling dict, inline or as a JSON file")
    p.add_argument("--max-position-embeddings", type=int, metavar="N",
                   help="the model's max_position_embeddings (some scalings need it)")
    p.add_argument("--seq-len", type=int, metavar="N",
                   help="sequence length for dynamic/longrope scaling (default: offset + the "
                   "file's sequence length)")
    p.add_argument("--chunk-mib", type=_chunk_mib, default=DEFAULT_CHUNK_BYTES / 2**20,
                   metavar="MIB",
                   help="buffer size in MiB (default 64); bounds the memory used")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(func=cmd_rope)

    p = subparsers.add_parser(
        "table",
        help="write a sinusoidal position table of any size to a .npy file",
        description="Write fastpe.sinusoidal_table(seq_len, dim) to a .npy file in chunks of "
        "rows; the file appears only when complete.",
    )
    p.add_argument("--seq-len", type=int, required=True, metavar="N",
                   help="number of rows (positions)")
    p.add_argument("--dim", type=int, required=True, metavar="D", help="number of columns (even)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--layout", choices=list(v.LAYOUTS), default="interleaved",
                   help="interleaved (sin, cos, sin, ...) or half (sines, then cosines)")
    p.add_argument("--base", type=float, default=10000.0, metavar="F", help="frequency base")
    p.add_argument("--offset", type=int, default=0, metavar="N",
                   help="position of the first row")
    p.add_argument("--chunk-mib", type=_chunk_mib, default=DEFAULT_CHUNK_BYTES / 2**20,
                   metavar="MIB",
                   help="buffer size in MiB (default 64)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("-o", "--output", metavar="OUT.npy", required=True,
                   help="the file to write")
    p.set_defaults(func=cmd_table)
