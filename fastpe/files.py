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

``rope_file(..., in_place=True)`` keeps a journal in an extended attribute of the file
itself (``user.fastpe.rope``) and two undo files, ``NAME.fastpe-undo0`` and
``NAME.fastpe-undo1``, beside it. Before chunk ``k`` is overwritten its original bytes are
saved to undo file ``k % 2`` and flushed, and the journal says so (flushed) before the
rotated chunk is written. Rerunning the same call after a crash or a ``kill -9`` at any
moment finishes the work, bit for bit as an uninterrupted run, or finds it done: the journal
stays, in the state "done", after the run, so a file is never rotated twice by accident. The
file is known by its identity (device and inode): through a symlink, a hard link or a new
name it is the same file (while a run is interrupted, the undo files stay beside the name
it started from, and a rerun asks for the file to be moved back if that name is gone).
Ordinary copies carry the journal (``cp -a``, ``shutil.copy2``, ``rsync -X``,
``tar --xattrs``): a journal of another inode is a copy's and never touches the original's
undo files; a copy of a rotated file whose bytes match is found done, a copy of a partly
rotated file (or with other bytes) is refused. One run at a time holds a lock on it; a
second is refused. To rotate a rotated file again on purpose, pass ``again=True``
(``--again``). The states and transitions are in :mod:`fastpe._journal`.

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

import errno
import hashlib
import json
import logging
import math
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _args, _journal, _npyfile
from ._npyfile import SLEEP_ENV as SLEEP_ENV
from ._npyfile import NpyInfo, Plan

__all__ = ["DEFAULT_CHUNK_BYTES", "rope_file", "table_file"]

#: Default size of the buffer a chunk is read into (64 MiB).
DEFAULT_CHUNK_BYTES = 64 * 2**20
#: Where :func:`rope_file` says what an in-place run did ("nothing left to do", ...).
log = logging.getLogger("fastpe.files")
_SAID = {
    "rotated": "%s: rotated in place",
    "finished": "%s: finished the interrupted in-place run; the file is rotated",
    "nothing left to do": "%s: nothing left to do: an earlier run already rotated it in place "
    "with these parameters (to rotate it once more on purpose, pass again=True, --again)",
}


def _check_path(value, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        raise TypeError(
            f"{name} must be a path (str or os.PathLike), got {type(value).__name__}"
            + (
                "; fastpe.files works on .npy files: for an array in memory call fastpe.apply_rope"
                if isinstance(value, np.ndarray)
                else ""
            )
        )
    p = Path(value)
    if isinstance(os.fspath(p), bytes):  # pragma: no cover - a PathLike giving bytes
        raise TypeError(f"{name} must be a str path, got bytes")
    return p


def _check_regular_file(path: Path) -> None:
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "give a .npy file, not a directory", str(path))
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"{path} is not a regular file (a pipe, device or socket); give a .npy file"
        )


def _check_writeable_file(path: Path) -> None:
    mode = os.stat(path).st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise PermissionError(
            errno.EACCES,
            f"the file is read-only (mode {stat.S_IMODE(mode):#o}), so it is not rotated in "
            "place; make it writeable (chmod u+w) or write the result to a new file with "
            "output=PATH (-o)",
            str(path),
        )


# --------------------------------------------------------------------------------------------
# rope_file
# --------------------------------------------------------------------------------------------


@dataclass
class _RopeJob:
    info: NpyInfo
    plan: Plan
    kwargs: dict  # passed to apply_rope for every chunk (with offset + s0, out=chunk)
    offset: int
    params: dict  # normalised parameters recorded in the journal
    # int64 (seq,) or (n_axes, seq), or per batch row (batch, seq) / (n_axes, batch, seq):
    # sliced per chunk
    positions: np.ndarray | None = None
    offsets: np.ndarray | None = None  # int64 (batch,): one first position per batch row
    per_batch: int = 0  # outer rows per batch row when positions or offsets are per row


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"scaling holds a value that is not JSON-serialisable: {obj!r}")


def _rope_job(info: NpyInfo, chunk_bytes: int, options: dict) -> _RopeJob:
    """Validate the RoPE options against the file before anything is written."""
    from .rotary import apply_rope

    path, shape = info.path, info.shape
    offset = options["offset"]
    nd = len(shape)
    if nd not in (2, 3, 4):
        raise ValueError(
            f"{path} holds an array of shape {shape}; RoPE needs 2-D (seq, dim), 3-D "
            "(batch, seq, dim) or 4-D (batch, seq, heads, head_dim)"
        )
    try:
        k = _args.check_seq_axis(options["seq_axis"], shape)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    n_seq = shape[k]
    batch = shape[0] if k >= 1 else None  # apply_rope's batch axis (per-row positions)
    _args.check_positions_or_offset(options["positions"], offset)
    # an int, or one first position per batch row: apply_rope's own parsing
    try:
        _, offs = _args.resolve_positions(None, offset, seq_len=n_seq, batch=batch)
    except ValueError as exc:
        raise ValueError(f"{path} (shape {shape}): {exc}") from exc
    assert offs is not None  # no positions given to resolve_positions
    offsets = offs if np.ndim(offset) else None
    offset = 0 if np.ndim(offset) else int(offs[0])
    pos = _file_positions(options, n_seq, batch, info)
    per_row = offsets is not None or (
        pos is not None and pos.ndim == (3 if options["pair_axes"] is not None else 2)
    )
    seq_len = options["seq_len"]
    if seq_len is None:  # apply_rope's, for the whole array
        seq_len = _args.default_seq_len(pos, offset if offsets is None else offsets, n_seq)
    kwargs = {
        name: options[name]
        for name in (
            "layout",
            "base",
            "rotary_dim",
            "inverse",
            "scaling",
            "max_position_embeddings",
            "pair_axes",
            "inv_freq",
        )
    }
    kwargs["seq_len"] = seq_len
    # Every check of apply_rope, on a one-position array of the file's rank and channels
    # (no position where the file has an empty batch or sequence axis).
    probe_shape = [1] * nd
    probe_shape[-1] = shape[-1]
    probe_shape[k] = min(n_seq, 1)
    rows = min(shape[0], 1)
    if k >= 1:
        probe_shape[0] = rows
    probe = np.zeros(probe_shape, dtype=info.dtype)
    where: dict[str, Any]  # the first position (of the first batch row)
    if pos is not None:
        first = pos[..., :rows, :1] if per_row else pos[..., :1]
        where = {"positions": first[..., : probe_shape[k]]}
    else:
        where = {"offset": offset if offsets is None else offsets[:rows]}
    try:
        apply_rope(probe, out=probe, seq_axis=k, **where, **kwargs)
        # and the position farthest from 0, of the whole file: frequencies above 1 (a base
        # below 1) give exact angles over less than 2**53 (fastpe._freq.angle_limit)
        # (the magnitude: the limit is the same on both sides of 0)
        offs = np.array([offset]) if offsets is None else offsets
        far = _args.max_position(pos, offs, n_seq)
        if pos is not None:
            apply_rope(
                probe,
                out=probe,
                seq_axis=k,
                positions=np.full_like(where["positions"], far),
                **kwargs,
            )
        else:
            apply_rope(probe, out=probe, seq_axis=k, offset=far, **kwargs)
    except (TypeError, ValueError) as exc:
        given = "" if pos is None else f"; the positions given have shape {pos.shape}"
        raise type(exc)(f"{path} (shape {shape}): {exc}{given}") from exc
    scaling = kwargs["scaling"]
    if scaling is not None:
        if isinstance(scaling, Mapping):
            scaling = dict(scaling)
        text = json.dumps(scaling, sort_keys=True, default=_json_default)
        # The journal must stay small (it lives in an extended attribute): a long dict (e.g.
        # longrope's factor lists) is recorded by its digest, which compares just as well.
        scaling = (
            json.loads(text)
            if len(text) <= 512
            else {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        )
    # Checked by apply_rope above: these only normalise (0-d arrays, NumPy scalars).
    params = {
        "layout": kwargs["layout"],
        "base": _args.check_base(kwargs["base"]),
        "offset": offset,
        "rotary_dim": _args.check_rotary_dim(kwargs["rotary_dim"], shape[-1]),
        "seq_axis": k,
        "inverse": _args.check_bool(kwargs["inverse"], "inverse"),
        "scaling": scaling,
        "max_position_embeddings": _args.check_optional_int(
            kwargs["max_position_embeddings"], "max_position_embeddings"
        ),
        "seq_len": _args.check_int(seq_len, "seq_len"),
    }
    # multi-axis RoPE and positions arrays: recorded only when given, so that a journal of
    # an earlier run without them reads as before
    if pos is not None:
        params["positions"] = {
            "shape": list(pos.shape),
            "sha256": hashlib.sha256(pos.tobytes()).hexdigest(),
        }
    if offsets is not None:  # per-row offsets: recorded by their digest
        params["offset"] = {
            "shape": list(offsets.shape),
            "sha256": hashlib.sha256(offsets.tobytes()).hexdigest(),
        }
    for name in ("pair_axes", "inv_freq"):
        if kwargs[name] is not None:
            values = np.asarray(kwargs[name]).tolist()
            text = json.dumps(values)
            params[name] = (
                values
                if len(text) <= 512
                else {"sha256": hashlib.sha256(text.encode()).hexdigest()}
            )
    outer = math.prod(shape[:k])
    heads = math.prod(shape[k + 1 : -1])
    plan = Plan(
        outer=outer,
        seq=n_seq,
        heads=heads,
        dim=shape[-1],
        itemsize=info.dtype.itemsize,
        chunk_bytes=chunk_bytes,
    )
    return _RopeJob(
        info=info,
        plan=plan,
        kwargs=kwargs,
        offset=offset,
        params=params,
        positions=pos,
        offsets=offsets,
        per_batch=outer // shape[0] if per_row and shape[0] else 0,
    )


def _file_positions(
    options: dict, n_seq: int, batch: int | None, info: NpyInfo
) -> np.ndarray | None:
    """The ``positions`` of a file's rows, int64: ``(seq,)``, shared by every outer row and
    head, or ``(batch, seq)``, one row per index of the batch axis (axis 0, when the
    sequence axis is not); with ``pair_axes``, ``(n_axes, seq)`` or ``(n_axes, batch,
    seq)``. Checked whole now (every value, and the shape against the file's) so that
    nothing is written before a bad value is found."""
    from .rotary import apply_rope

    positions = options["positions"]
    if positions is None:  # (an offset with positions is refused by the caller)
        return None
    multi = options["pair_axes"] is not None
    arr = np.asarray(positions)
    if arr.ndim == (3 if multi else 2):  # per batch row
        where = f"{info.path} (shape {info.shape})"
        try:
            if multi:  # every value and the shape; pair_axes against the number of axes
                # is checked by the one-position probe of _rope_job, which keeps every axis
                one = np.zeros(1, dtype=np.int64)
                pos = _args.resolve_axis_positions(positions, 0, one, seq_len=n_seq, batch=batch)
            else:
                pos, _ = _args.resolve_positions(positions, 0, seq_len=n_seq, batch=batch)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc
        assert pos is not None  # resolve_positions: positions given
        return np.ascontiguousarray(pos, dtype=np.int64)
    if arr.ndim != (2 if multi else 1) or arr.shape[-1] != n_seq:
        lead = "n_axes, " if multi else ""
        want = f"(n_axes, {n_seq})" if multi else f"({n_seq},)"
        if batch is not None:  # or one row per index of the batch axis
            want += f" or ({lead}{batch}, {n_seq})"
        raise ValueError(
            f"positions for {info.path} (shape {info.shape}) must have shape {want}"
            f"{' with pair_axes' if multi else ''}: one per position of the sequence axis, "
            f"shared by every row{'' if batch is None else ' or per batch row'}; got shape "
            f"{arr.shape}"
        )
    check = np.zeros((n_seq, 2), dtype=info.dtype)
    apply_rope(check, out=check, positions=positions, pair_axes=[0] if multi else None)
    # the values as that check read them (not a cast of the raw array of its own)
    return np.ascontiguousarray(_args.check_positions(arr), dtype=np.int64)


def _rotate_chunk(job: _RopeJob, plan: Plan, buf: np.ndarray, k: int, nbytes: int) -> None:
    from .rotary import apply_rope

    o0, o1, s0, s1 = plan.chunk(k)
    a = buf[:nbytes].view(job.info.dtype).reshape(o1 - o0, s1 - s0, plan.heads, plan.dim)
    if job.per_batch:  # positions or offsets per batch row: the chunk's rows' own
        m = job.per_batch  # outer rows (batch row, then the axes before the sequence's)
        rows = slice(o0, o1) if m == 1 else np.arange(o0, o1) // m
        if job.offsets is not None:
            apply_rope(a, out=a, offset=job.offsets[rows] + s0, seq_axis=1, **job.kwargs)
        else:
            assert job.positions is not None
            pos = job.positions[..., rows, s0:s1]
            apply_rope(a, out=a, positions=pos, seq_axis=1, **job.kwargs)
    elif job.positions is None:
        apply_rope(a, out=a, offset=job.offset + s0, seq_axis=1, **job.kwargs)
    else:
        apply_rope(a, out=a, positions=job.positions[..., s0:s1], seq_axis=1, **job.kwargs)


def rope_file(
    path: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    in_place: bool = False,
    again: bool = False,
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
    positions: ArrayLike | None = None,
    pair_axes: ArrayLike | None = None,
    inv_freq: ArrayLike | None = None,
) -> Path:
    """Apply :func:`fastpe.apply_rope` to an array in a ``.npy`` file, chunk by chunk.

    The file may be far larger than memory. The result is bit for bit
    ``apply_rope(np.load(path), ...)``, whatever ``chunk_bytes`` is.

    Parameters
    ----------
    path : path
        A ``.npy`` file (format 1.0 or 2.0, C order) of float32, float64 or float16, 2-D, 3-D or
        4-D as :func:`fastpe.apply_rope` accepts. Object arrays are refused, never unpickled;
        a damaged header is refused before anything is written.
    output : path, optional
        Where to write the result. It is written to ``.NAME.partial-PID`` in the same
        directory and renamed into place, after an ``fsync``, only when complete; an
        interrupted run leaves no (or the old) ``output``, and a rerun removes the leftover.
        Exclusive with ``in_place``. Refused while an in-place run on ``path`` (through any
        name) is running or unfinished.
    in_place : bool, default False
        Rotate the file itself, crash-safe through a journal kept with the file and two
        undo files beside it (see :mod:`fastpe.files`). Rerunning the same call after an
        interruption at any moment finishes the work, or returns without writing when the
        journal says this rotation is already done: no byte is ever rotated twice. A
        journal left with other parameters is refused. Needs two chunks of free space, and
        a file system with extended attributes (Linux: ext4, xfs, btrfs, tmpfs since 6.6...);
        elsewhere it is refused before anything is written (use ``output``).
    again : bool, default False
        With ``in_place``: ignore the journal of an earlier in-place run on this file,
        finished or not, and rotate the file as it is now. This is how an already rotated
        file is rotated once more on purpose, or a file restored from a copy is rotated
        after an interrupted run.
    chunk_bytes : int, default 64 MiB
        Size of the one buffer chunks are read into (at least one position: one
        ``heads * head_dim`` row). Peak resident memory is about ``chunk_bytes`` plus the
        interpreter, NumPy and the compiled kernels (a constant near 150 MiB), independent
        of the file's size: data moves through the buffer with ``pread``/``pwrite`` and
        is never memory-mapped. A resumed in-place run keeps the chunk size of its journal.
    progress : bool, optional
        Show a progress bar on stderr; default: only when stderr is a terminal.
    layout, base, offset, rotary_dim, seq_axis, inverse
        As in :func:`fastpe.apply_rope`. ``offset`` may be one int or one per batch row (a
        ``(batch,)`` array; the batch axis is axis 0 when the sequence axis is not).
    positions : array of int, optional
        Instead of ``offset``: ``(seq,)``, the position of each index of the sequence axis,
        shared by every row and head, or ``(batch, seq)``, one row of positions per index
        of the batch axis (packed sequences); with ``pair_axes``, ``(n_axes, seq)`` or
        ``(n_axes, batch, seq)``: one position per kind (time, height, width, or a patch's
        row and column). Held in memory; each chunk takes its own rows' slice. Checked
        whole before anything is written; an in-place journal records the digest of
        positions and of per-row offsets.
    pair_axes, inv_freq
        Multi-axis RoPE, as in :func:`fastpe.apply_rope` (what
        :func:`fastpe.hf_config.rope_kwargs_from_config` returns for M-RoPE and vision
        towers).
    scaling, max_position_embeddings, seq_len
        As in :func:`fastpe.apply_rope`. ``seq_len`` defaults to what ``apply_rope`` uses on
        the whole array: the largest position plus 1 (``offset``, or the largest per-row
        offset, plus the sequence length of the file; or the largest of ``positions`` + 1).

    Returns
    -------
    pathlib.Path
        The rotated file: ``output``, or ``path`` when ``in_place``. What an in-place run did
        ("rotated", "finished" an interrupted run, "nothing left to do") is logged at INFO
        level on the ``fastpe.files`` logger (the ``fastpe rope`` command prints it).

    Raises
    ------
    TypeError, ValueError
        Bad arguments; a file of the wrong dtype, order or shape, or with a damaged header;
        a read-only file with ``in_place``; a journal left with other parameters, for
        another file (it came with a copy), unreadable, or whose undo file is damaged; a file
        already rotated in place with other parameters (without ``again``): before anything
        is written.
    OSError
        From the file system; ``BlockingIOError`` while another process rotates the file
        in place; ``errno.ENOSPC`` when the disk fills, saying how much space a rerun needs.

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
    >>> _ = rope_file(p, in_place=True, offset=5)              # a rerun: nothing left to do
    >>> np.array_equal(np.load(p), fastpe.apply_rope(k, offset=5))
    True
    """
    src = _check_path(path, "path")
    in_place = _args.check_bool(in_place, "in_place")
    again = _args.check_bool(again, "again")
    out = None if output is None else _check_path(output, "output")
    if in_place and out is not None:
        raise ValueError("give either output or in_place=True, not both")
    if not in_place and out is None:
        raise ValueError("give output=PATH for a new file, or in_place=True to rotate path")
    if again and not in_place:
        raise ValueError("again=True applies to in_place=True runs only")
    chunk_bytes = _args.check_int(chunk_bytes, "chunk_bytes", minimum=1)
    progress = _npyfile.check_progress(progress)
    options = {
        "layout": layout,
        "base": base,
        "offset": offset,
        "rotary_dim": rotary_dim,
        "seq_axis": seq_axis,
        "inverse": inverse,
        "scaling": scaling,
        "max_position_embeddings": max_position_embeddings,
        "seq_len": seq_len,
        "positions": positions,
        "pair_axes": pair_axes,
        "inv_freq": inv_freq,
    }
    _check_regular_file(src)
    if in_place:
        _check_writeable_file(src)
    fd = os.open(src, os.O_RDWR if in_place else os.O_RDONLY)
    try:
        job = _rope_job(_npyfile.read_npy_header(fd, src), chunk_bytes, options)
        if in_place:
            outcome = _journal.rotate_in_place(
                job,
                fd,
                lambda plan, buf, k, n: _rotate_chunk(job, plan, buf, k, n),
                again=again,
                progress=progress,
            )
            log.info(_SAID[outcome], src)
            return src
        assert out is not None  # checked above: in_place or output
        _npyfile.check_output_path(out)
        if out.exists() and os.path.samestat(os.fstat(fd), os.stat(out)):
            raise ValueError(
                f"output {out} is the input file; use in_place=True (--in-place) to rotate "
                "it in place"
            )
        _journal.check_not_running(fd, src)
        _rope_to_new_file(job, fd, out, progress)
        return out
    finally:
        os.close(fd)


def _rope_to_new_file(job: _RopeJob, fd_in: int, out: Path, progress: bool | None) -> None:
    info, plan = job.info, job.plan
    bar = _npyfile.Progress(f"fastpe rope {info.path.name}", plan.total_bytes, progress)
    sleep = _npyfile.sleep_seconds()
    try:
        with _npyfile.published(out) as partial:
            fd_out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                _npyfile.write_all(fd_out, info.header, 0)
                os.ftruncate(fd_out, info.data_offset + plan.total_bytes)
                buf = np.empty(plan.buffer_bytes, dtype=np.uint8)
                mv = buf.data
                done = 0
                for k in range(plan.n_chunks):
                    start, nbytes = plan.byte_range(k)
                    _npyfile.read_into(fd_in, mv[:nbytes], info.data_offset + start, info.path)
                    _rotate_chunk(job, plan, buf, k, nbytes)
                    _npyfile.write_all(fd_out, mv[:nbytes], info.data_offset + start)
                    done += nbytes
                    bar.update(done)
                    _npyfile.crash_point("chunk-written", k)
                    if sleep:
                        time.sleep(sleep)
                os.fsync(fd_out)
            finally:
                os.close(fd_out)
    except OSError as exc:
        if _npyfile.is_out_of_space(exc):
            raise _no_space_for(out, info.data_offset + plan.total_bytes, exc) from exc
        raise
    bar.close(plan.total_bytes)


def _no_space_for(out: Path, nbytes: int, exc: OSError) -> OSError:
    free = _npyfile.free_bytes(out.parent)
    return OSError(
        exc.errno,
        f"no space left on the device: no output was written; it needs "
        f"{_npyfile.size(nbytes)} free in {out.parent}"
        f"{'' if free is None else f' ({_npyfile.size(free)} free now)'}",
        str(out),
    )


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
    dtype : float32, float64 or float16, default float32
        Data type of the table (bfloat16 is refused: a ``.npy`` header cannot name it).
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

    n = _args.check_int(seq_len, "seq_len", minimum=0)
    dim = _args.check_dim(dim)
    dt = _args.check_float_dtype(dtype)
    if dt.itemsize == 2 and dt.kind != "f":
        raise TypeError(
            "dtype=bfloat16 cannot be written to a .npy file: NumPy stores it as raw 2-byte "
            "voids ('<V2'), which no reader can take for bfloat16; use dtype=np.float16 or "
            "np.float32"
        )
    _args.check_layout(layout)
    _args.check_base(base)
    offset = _args.check_offset(offset, n)
    # the farthest position, before the first chunk (a base below 1 allows less than 2**53)
    far = _args.max_position(None, np.array([offset]), n)
    sinusoidal_table(1, dim, base=base, offset=far, layout=layout, dtype=dt)
    chunk_bytes = _args.check_int(chunk_bytes, "chunk_bytes", minimum=1)
    progress = _npyfile.check_progress(progress)
    out = _check_path(output, "output")
    _npyfile.check_output_path(out)
    row_bytes = dim * dt.itemsize
    rows = max(1, min(n, chunk_bytes // row_bytes))
    total = n * row_bytes
    bar = _npyfile.Progress(f"fastpe table {out.name}", total, progress)
    sleep = _npyfile.sleep_seconds()
    try:
        with _npyfile.published(out) as partial, open(partial, "xb") as f:
            _npyfile.write_header(f, (n, dim), dt)
            buf = np.empty((rows, dim), dtype=dt)
            for r0 in range(0, n, rows):
                m = min(rows, n - r0)
                sinusoidal_table(m, dim, base=base, offset=offset + r0, layout=layout, out=buf[:m])
                f.write(buf[:m].data.cast("B"))
                bar.update((r0 + m) * row_bytes)
                _npyfile.crash_point("chunk-written", r0 // rows)
                if sleep:
                    time.sleep(sleep)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if _npyfile.is_out_of_space(exc):
            raise _no_space_for(out, total + 128, exc) from exc
        raise
    bar.close(total)
    return out
