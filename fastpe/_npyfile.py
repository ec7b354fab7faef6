"""The plumbing under :mod:`fastpe.files`: ``.npy`` headers, the chunk plan, durable I/O.

Nothing here knows about RoPE or the journal; :mod:`fastpe.files` (the public functions)
and :mod:`fastpe._journal` (the in-place state machine) are built on it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Environment variable (seconds, for tests only): every chunk sleeps that long after it is
#: written, so that tests can kill a run part way.
SLEEP_ENV = "FASTPE_FILES_TEST_SLEEP"
#: The longest .npy header fastpe reads (numpy's own reader stops at 10 000 bytes by default).
_MAX_HEADER = 1 << 20


def crash_point(stage: str, chunk: int) -> None:
    """Called between the steps of a run; tests replace it to simulate crashes."""


def sleep_seconds() -> float:
    raw = os.environ.get(SLEEP_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else 0.0
    except ValueError:
        return 0.0


# --------------------------------------------------------------------------------------------
# Durable reads and writes
# --------------------------------------------------------------------------------------------


def read_into(fd: int, mv: memoryview, pos: int, what: Path) -> None:
    got = 0
    while got < len(mv):
        n = os.preadv(fd, [mv[got:]], pos + got)
        if n == 0:
            raise ValueError(
                f"{what} ended early: could not read byte {pos + got}; the file was truncated "
                "while being processed"
            )
        got += n


def write_all(fd: int, mv: memoryview | bytes, pos: int) -> None:
    mv = memoryview(mv)
    done = 0
    while done < len(mv):
        done += os.pwrite(fd, mv[done:], pos + done)


def sync_data(fd: int) -> None:
    (os.fdatasync if hasattr(os, "fdatasync") else os.fsync)(fd)


def fsync_dir(directory: Path) -> None:
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


def is_out_of_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # pragma: no cover
        return None
    return st.f_bavail * st.f_frsize


def size(nbytes: int) -> str:
    """``nbytes`` for people: ``512.0 KiB``, ``1.5 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


# --------------------------------------------------------------------------------------------
# New files: written aside, renamed into place
# --------------------------------------------------------------------------------------------


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
        pid = entry.name[len(prefix) :]
        if pid.isdigit() and (int(pid) == os.getpid() or not _pid_alive(int(pid))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


@contextlib.contextmanager
def published(output: Path):
    """Yield a fresh partial path for ``output``; rename it onto ``output`` when the block
    succeeds (then fsync the directory), remove it when the block raises.

    The block writes and fsyncs the partial file; a reader never sees a half-written
    ``output``, and a run killed mid-way leaves only a partial that the next run removes.
    """
    _remove_stale_partials(output)
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        yield partial
        os.replace(partial, output)
        fsync_dir(output.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def check_output_path(output: Path) -> None:
    if not output.parent.is_dir():
        raise FileNotFoundError(
            errno.ENOENT,
            f"the directory of the output does not exist; create {output.parent} first",
            str(output),
        )
    if output.is_dir():
        raise IsADirectoryError(
            errno.EISDIR, "the output is a directory; give a file name such as out.npy", str(output)
        )


def check_progress(progress) -> bool | None:
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True, False or None, got {progress!r}")
    return None if progress is None else bool(progress)


class Progress:
    """A one-line progress bar on stderr (a no-op when disabled)."""

    def __init__(self, label: str, total: int, enabled: bool | None):
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
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


# --------------------------------------------------------------------------------------------
# .npy headers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NpyInfo:
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

    def record(self) -> dict:
        """What a journal remembers of the file, to recognise it again."""
        return {
            "shape": list(self.shape),
            "dtype": self.dtype.str,
            "data_offset": self.data_offset,
            "size": self.file_size,
        }


def _not_npy(path: Path, why: str) -> ValueError:
    return ValueError(f"{path} is not a readable .npy file: {why}; write it with numpy.save")


def read_npy_header(fd: int, path: Path) -> NpyInfo:
    """Parse and check the header of the ``.npy`` file open on ``fd``, reading no data.

    Everything a damaged or hostile header can hold is refused here with a ValueError or
    TypeError that names the file: before any lock, journal or output exists.
    """
    size = os.fstat(fd).st_size
    head = os.pread(fd, min(size, _MAX_HEADER), 0)
    f = io.BytesIO(head)
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
    except ValueError as exc:
        raise _not_npy(path, " ".join(str(exc).split())) from None
    if version not in ((1, 0), (2, 0)):
        raise _not_npy(
            path,
            f"its format version {version[0]}.{version[1]} is not supported "
            "(only 1.0 and 2.0, which np.save writes for numeric arrays)",
        )
    # The header's length, as the file states it (2 bytes in 1.0, 4 in 2.0): refused here in
    # fastpe's terms, so that numpy's advice (max_header_size, allow_pickle) never shows.
    width = 2 if version == (1, 0) else 4
    field = head[8 : 8 + width]
    if len(field) == width:
        length = int.from_bytes(field, "little")
        if 8 + width + length > _MAX_HEADER:
            raise _not_npy(
                path,
                f"its header says it is {length} bytes long, more than the "
                f"{_MAX_HEADER - 8 - width} fastpe reads (np.save writes a few "
                "hundred bytes); the file is damaged or not a plain array",
            )
    try:
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(f, max_header_size=_MAX_HEADER)
    # A header whose bytes were overwritten reaches numpy's tokenizer and ast.literal_eval,
    # which raise more than ValueError (tokenize.TokenError, SyntaxError, RecursionError...).
    except Exception as exc:
        why = (
            " ".join(str(exc).split()).split(" <ast.")[0].rstrip(":")
            if isinstance(exc, ValueError)
            else "its dictionary is not a literal numpy can read"
        )
        raise _not_npy(path, f"its header is damaged ({why})") from None
    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in shape
    ):
        raise _not_npy(path, f"its header gives the shape {shape!r}")
    if any(n < 0 for n in shape):
        raise _not_npy(path, f"its header gives a negative dimension in the shape {shape}")
    info = NpyInfo(
        path=path,
        shape=shape,
        dtype=np.dtype(dtype),
        fortran_order=bool(fortran),
        data_offset=f.tell(),
        header=head[: f.tell()],
        file_size=size,
    )
    _check_float_file(info)
    return info


def _check_float_file(info: NpyInfo) -> None:
    """Refuse what the chunked loop cannot handle, naming the fix."""
    path, dt = info.path, info.dtype
    if dt.hasobject:
        raise TypeError(
            f"{path} holds Python objects (dtype {dt}) stored with pickle; fastpe never "
            "unpickles files: save a float32 or float64 array instead"
        )
    if dt.kind != "f" or dt.itemsize not in (2, 4, 8) or dt.fields is not None or dt.subdtype:
        bf16 = (
            "; a bfloat16 array saves as raw 2-byte voids ('<V2'), a header NumPy "
            "cannot read back as bfloat16, so store such data as float32 or float16"
            if dt.kind == "V" and dt.itemsize == 2
            else ""
        )
        raise TypeError(
            f"{path} has dtype {dt}; only float32, float64 and float16 files are supported: "
            f"convert with np.save(path, a.astype(np.float32)){bf16}"
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


def write_header(f, shape: tuple[int, ...], dtype: np.dtype) -> None:
    d = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": tuple(shape),
    }
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
class Plan:
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
