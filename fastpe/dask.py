"""Lazy positional encodings for dask arrays, computed block by block by the fast kernels.

This module is an explicit opt-in: ``import fastpe`` never imports dask, ``import
fastpe.dask`` does (install it with ``pip install fastpe[dask]``).

:func:`apply_rope` and :func:`add_sinusoidal` take a :class:`dask.array.Array` and return a
lazy one with the same shape, dtype and chunks. Each output block is a copy of the input
block rotated (or added to) in place by :func:`fastpe.apply_rope` /
:func:`fastpe.add_sinusoidal`: the input blocks, which dask may share with other
computations, are never written. The result equals the in-memory function on the whole
array bit for bit, whatever the chunking, because every element depends only on its own
position.

Positions of a block
--------------------
The sequence axis may be split into any number of chunks. A block that starts at index
``s0`` along the sequence axis gets

* ``offset + s0`` for an int ``offset``;
* ``offset[b0:b1] + s0`` for per-batch-row offsets, where ``b0:b1`` are the block's rows
  along the batch axis (axis 0);
* ``positions[s0:s1]`` (1-D) or ``positions[b0:b1, s0:s1]`` (2-D) for explicit positions.

``positions`` and per-row ``offset`` arrays become small dask arrays whose chunks are
aligned with the batch and sequence chunks of the data, so each task receives only its
slice (and a distributed scheduler ships each slice once, not the whole array per task).
Block offsets are read from ``block_info``.

Only the channel axis (the last) must be a single chunk; every other axis may be split.
Blocks of an ndarray subclass (``np.matrix``, ``np.memmap``) are worked on as plain
ndarrays (each block is copied into one); masked blocks (and masked ``positions``) are
refused with a ``TypeError``, since their masks would be ignored.

Examples
--------
>>> import numpy as np, dask.array as da, fastpe, fastpe.dask
>>> x = np.ones((2, 8, 4), dtype=np.float32)
>>> dx = da.from_array(x, chunks=(1, 3, -1))
>>> rotated = fastpe.dask.apply_rope(dx, offset=5)
>>> rotated.chunks
((1, 1), (3, 3, 2), (4,))
>>> bool((rotated.compute() == fastpe.apply_rope(x, offset=5)).all())
True
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

try:
    import dask.array as da
    from dask.base import tokenize
except ImportError as exc:  # pragma: no cover - exercised by a test with dask hidden
    raise ImportError(
        "fastpe.dask needs dask with its array extra, which is not installed "
        f"({exc}); install it with: pip install fastpe[dask]"
    ) from exc

from . import _args as v
from ._args import default_seq_len, parse_add, parse_rope
from .rotary import apply_rope as _apply_rope_np
from .sinusoidal import add_sinusoidal as _add_sinusoidal_np

__all__ = ["add_sinusoidal", "apply_rope"]

# How a call's positions reach a block: the keys of the aligned dask arguments.
_POSITIONS = "positions"
_OFFSETS = "offsets"
_SEQ_MAX = "seq_max"


# --------------------------------------------------------------------------- validation


def _check_darr(darr: Any) -> da.Array:
    """The checks on the dask array itself that the in-memory functions cannot make."""
    if not isinstance(darr, da.Array):
        raise TypeError(
            f"darr must be a dask.array.Array, got {type(darr).__name__}; for a NumPy array "
            "use the in-memory fastpe function, or wrap it with dask.array.from_array(x)"
        )
    if isinstance(darr._meta, np.ma.MaskedArray):
        raise TypeError(
            "darr's blocks are masked arrays: fastpe would ignore their masks; fill them "
            "first, e.g. darr.map_blocks(np.ma.filled, fill_value)"
        )
    if not isinstance(darr._meta, np.ndarray):
        raise TypeError(
            f"darr's blocks must be NumPy arrays, got {type(darr._meta).__name__} blocks; "
            "convert them with darr.map_blocks(np.asarray)"
        )
    dt = darr.dtype
    if dt.kind == "f" and not dt.isnative:
        raise TypeError(
            f"darr must be in native byte order, got {dt.str}; use darr.astype(np.float32)"
        )
    if dt not in v.FLOAT_DTYPES and not v.is_float_dtype(dt):
        raise TypeError(
            f"darr must be float32 or float64 (or float16, or bfloat16 with ml_dtypes "
            f"installed), got {dt}; use darr.astype(np.float32)"
        )
    return darr


def _check_chunks(darr: da.Array) -> None:
    if any(math.isnan(n) for n in darr.shape):
        raise ValueError(
            f"darr has unknown chunk sizes (shape {darr.shape}); positions are assigned from "
            "each block's place in the array, so call darr.compute_chunk_sizes() first"
        )
    if len(darr.chunks[-1]) > 1:
        raise ValueError(
            f"the last axis of darr (the channels) must be a single chunk, got chunks "
            f"{darr.chunks[-1]}; rechunk it first: darr.rechunk({{-1: -1}})"
        )


def _check_dask_positions(
    positions: da.Array, offset: Any, *, seq_len: int, batch: int | None
) -> da.Array:
    """Eager checks of a lazy ``positions``; return it 2-D ``(1, seq)`` or ``(batch, seq)``.

    The values (integers, within 2**53) are checked per block by the in-memory function.
    """
    v.check_positions_or_offset(positions, offset)
    if isinstance(positions._meta, np.ma.MaskedArray):
        raise TypeError(
            "positions' blocks are masked arrays: fastpe would ignore their masks; "
            "pass positions.map_blocks(np.ma.getdata) or fill them first"
        )
    if positions.dtype.kind not in "iuf":
        raise TypeError(
            f"positions must be an integer array, got dtype {positions.dtype}; "
            "use positions.astype(np.int64)"
        )
    if any(math.isnan(n) for n in positions.shape):
        raise ValueError(
            f"positions has unknown chunk sizes (shape {positions.shape}); "
            "call positions.compute_chunk_sizes() first"
        )
    v.check_positions_shape(positions.shape, seq_len, batch)
    return positions[None, :] if positions.ndim == 1 else positions


# --------------------------------------------------------------------------- block layout


def _broadcast_shape(darr: da.Array, seq_axis: int, rows: int, seq: int) -> tuple[int, ...]:
    """Shape of a per-(row, position) array broadcast against ``darr``: 1 on other axes."""
    shape = [1] * darr.ndim
    if seq_axis >= 1:
        shape[0] = rows
    shape[seq_axis] = seq
    return tuple(shape)


def _aligned_chunks(darr: da.Array, shape: tuple[int, ...], seq_axis: int) -> tuple:
    """Chunks matching ``darr``'s along the batch and sequence axes, 1 elsewhere."""
    chunks: list[tuple[int, ...]] = [(1,)] * darr.ndim
    if seq_axis >= 1 and shape[0] == darr.shape[0]:
        chunks[0] = darr.chunks[0]
    if shape[seq_axis] == darr.shape[seq_axis]:
        chunks[seq_axis] = darr.chunks[seq_axis]
    return tuple(chunks)


def _aligned_numpy(a2d: np.ndarray, darr: da.Array, seq_axis: int, name: str) -> da.Array:
    """A ``(rows, seq)`` NumPy array as a dask array whose blocks line up with ``darr``'s."""
    shape = _broadcast_shape(darr, seq_axis, a2d.shape[0], a2d.shape[1])
    # Copied: the graph must not change if the caller later writes to their array.
    arr = np.array(a2d, dtype=np.int64, copy=True).reshape(shape)
    return da.from_array(
        arr, chunks=_aligned_chunks(darr, shape, seq_axis), name=f"fastpe-{name}-{tokenize(arr)}"
    )


def _aligned_dask(pos2d: da.Array, darr: da.Array, seq_axis: int) -> da.Array:
    """A lazy ``(rows, seq)`` array rechunked and expanded to line up with ``darr``'s blocks."""
    rows = pos2d.shape[0]
    index: list[Any] = [None] * darr.ndim
    if seq_axis >= 1:
        index[0] = slice(None)
        index[seq_axis] = slice(None)
        pos = pos2d
    else:
        index[seq_axis] = slice(None)
        pos = pos2d[0]
    shape = _broadcast_shape(darr, seq_axis, rows, pos2d.shape[1])
    chunks = _aligned_chunks(darr, shape, seq_axis)
    kept = [c for ax, c in enumerate(chunks) if index[ax] is not None]
    return pos.rechunk(tuple(kept))[tuple(index)]


class _Placement(NamedTuple):
    """Where a call's positions come from, laid out for the blocks."""

    aligned: dict[str, da.Array]  # dask arrays passed along with the data, by kind
    offset: int  # the first position when ``offset`` is one int (else 0)
    offsets: np.ndarray | None  # per-row offsets, int64 (batch,)
    positions: np.ndarray | None  # NumPy positions, int64 (1 or batch, seq); multi-axis:
    # (n_axes, 1 or batch, seq)
    lazy_positions: da.Array | None  # dask positions, (1 or batch, seq)

    def default_seq_len(self, n_seq: int) -> int | None:
        """The in-memory default ``seq_len`` for the whole array: largest position + 1.

        None for lazy positions: their maximum is then reduced along with the result.
        """
        if self.lazy_positions is not None:
            return 1 if self.lazy_positions.size == 0 else None
        offs = self.offset if self.offsets is None else self.offsets
        return default_seq_len(self.positions, offs, n_seq)


def _far(place: _Placement, n_seq: int) -> int | None:
    """The largest position magnitude of a call whose positions are known now (None for
    dask positions, which their blocks check)."""
    from ._args.calls import max_position

    if place.lazy_positions is not None:
        return None
    if place.positions is not None:
        return max_position(place.positions, None, 0)
    offs = place.offsets if place.offsets is not None else np.array([place.offset])
    return max_position(None, offs, n_seq)


def _place(
    darr: da.Array, seq_axis: int, batch: int | None, positions: Any, offset: Any
) -> _Placement:
    """Validate ``positions``/``offset`` eagerly and lay them out for the blocks."""
    n_seq = darr.shape[seq_axis]
    if isinstance(offset, da.Array):
        raise TypeError(
            "offset must be an int or a NumPy array of ints, got a dask array; "
            "compute it first (offset.compute())"
        )
    if isinstance(positions, da.Array):
        lazy = _check_dask_positions(positions, offset, seq_len=n_seq, batch=batch)
        return _Placement({_POSITIONS: _aligned_dask(lazy, darr, seq_axis)}, 0, None, None, lazy)
    pos2d, offs = v.resolve_positions(positions, offset, seq_len=n_seq, batch=batch)
    if pos2d is not None:
        return _Placement(
            {_POSITIONS: _aligned_numpy(pos2d, darr, seq_axis, "positions")}, 0, None, pos2d, None
        )
    if np.ndim(offset) == 0:
        return _Placement({}, int(offs[0]), None, None, None)
    return _Placement(
        {_OFFSETS: _aligned_numpy(offs[:, None], darr, seq_axis, "offsets")}, 0, offs, None, None
    )


def _place_axes(
    darr: da.Array, seq_axis: int, batch: int | None, positions: Any, offset: Any, pair_axes
) -> _Placement:
    """Multi-axis positions (NumPy): checked now, one aligned array per axis."""
    if isinstance(positions, da.Array):
        raise TypeError(
            "with pair_axes, positions must be a NumPy array (n_axes, seq) or (n_axes, batch, "
            "seq), got a dask array; compute it first (positions.compute())"
        )
    axes = np.asarray(pair_axes)
    if axes.dtype.kind not in "iu" or axes.ndim not in (1, 2):  # the full check: rotary_dim
        axes = v.check_pair_axes(pair_axes, int(np.size(pair_axes)))
    elif axes.ndim == 2:  # two rows: the axes of each pair's first and second channel
        axes = v.check_pair_axes(pair_axes, axes.shape[-1])
    pos = v.resolve_axis_positions(
        positions, offset, axes, seq_len=darr.shape[seq_axis], batch=batch
    )
    aligned = {
        f"{_POSITIONS}{a}": _aligned_numpy(pos[a], darr, seq_axis, "positions")
        for a in range(pos.shape[0])
    }
    return _Placement(aligned, 0, None, pos, None)


def _seq_len_from_max(seq_max: np.ndarray) -> int | None:
    """The global default ``seq_len`` from the largest lazy position (None if not finite)."""
    m = np.asarray(seq_max)[()]
    if m.dtype.kind == "f":
        if not np.isfinite(m):
            return None  # the block holding it raises the in-memory positions error
        m = np.floor(m)
    return max(int(m) + 1, 1)


# --------------------------------------------------------------------------- block tasks


def _block_positions(p: np.ndarray, seq_axis: int, batch_axis: int | None) -> np.ndarray:
    """A block's positions from their aligned array: ``(seq,)`` or ``(batch, seq)``."""
    if batch_axis is None:
        return p.reshape(p.shape[seq_axis])
    p2 = p.reshape(p.shape[batch_axis], p.shape[seq_axis])
    return p2[0] if p2.shape[0] == 1 else p2


def _encode_block(
    block: np.ndarray,
    *aligned: np.ndarray,
    func: Callable[..., np.ndarray],
    kinds: tuple[str, ...],
    seq_axis: int,
    batch_axis: int | None,
    offset: int,
    kwargs: dict[str, Any],
    block_info: dict | None = None,
) -> np.ndarray:
    """One output block: a C-ordered copy of ``block``, encoded in place by ``func``."""
    got = dict(zip(kinds, aligned))
    assert block_info is not None  # dask passes it to every block function that asks
    start = block_info[0]["array-location"][seq_axis][0]
    kw = dict(kwargs)
    if _POSITIONS in got:
        kw["positions"] = _block_positions(got[_POSITIONS], seq_axis, batch_axis)
    elif f"{_POSITIONS}0" in got:  # multi-axis: one aligned array per axis, stacked
        n_axes = sum(k.startswith(_POSITIONS) for k in got)
        kw["positions"] = np.stack(
            [_block_positions(got[f"{_POSITIONS}{a}"], seq_axis, batch_axis) for a in range(n_axes)]
        )
    elif _OFFSETS in got:
        kw["offset"] = got[_OFFSETS].reshape(-1) + start
    else:
        kw["offset"] = offset + start
    if _SEQ_MAX in got:
        kw["seq_len"] = _seq_len_from_max(got[_SEQ_MAX])
    # Never write to ``block``: dask may hand the same block to other tasks. The copy is
    # the one ``out=None`` would make, and it also gives every block unit-stride channels.
    work = np.array(block, order="C", copy=True)
    func(work, out=work, **kw)
    return work


def _lazy(
    darr: da.Array,
    func: Callable[..., np.ndarray],
    token: str,
    *,
    seq_axis: int,
    aligned: dict[str, da.Array],
    offset: int,
    kwargs: dict[str, Any],
) -> da.Array:
    kinds = tuple(aligned)
    task = functools.partial(
        _encode_block,
        func=func,
        kinds=kinds,
        seq_axis=seq_axis,
        batch_axis=0 if seq_axis >= 1 else None,
        offset=offset,
        kwargs=kwargs,
    )
    return da.map_blocks(
        task,
        darr,
        *aligned.values(),
        dtype=darr.dtype,
        meta=np.empty((0,) * darr.ndim, dtype=darr.dtype),
        token=token,
    )


# --------------------------------------------------------------------------- public API


def apply_rope(
    darr: da.Array,
    /,
    *,
    positions: ArrayLike | da.Array | None = None,
    offset: int | ArrayLike = 0,
    base: float = 10000.0,
    layout: str = "interleaved",
    rotary_dim: int | None = None,
    seq_axis: int | None = None,
    inverse: bool = False,
    scaling: Mapping[str, Any] | None = None,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
    pair_axes: ArrayLike | None = None,
    inv_freq: ArrayLike | None = None,
) -> da.Array:
    """Rotary position embeddings (RoPE) of a dask array, lazily, block by block.

    The lazy counterpart of :func:`fastpe.apply_rope`, with the same arguments (less
    ``out``): each block is copied and rotated in place by the fast kernel, so the result
    equals ``fastpe.apply_rope(darr.compute(), ...)`` bit for bit, for any chunking.

    Parameters
    ----------
    darr : dask.array.Array, float32, float64, float16 or bfloat16
        ``(seq, dim)``, ``(batch, seq, dim)`` or ``(batch, seq, heads, head_dim)`` (or any
        layout ``seq_axis`` describes), with NumPy blocks. Every axis may be chunked except
        the last (the channels), which must be a single chunk; a chunked channel axis
        raises ``ValueError`` rather than being rechunked silently (that would be a hidden
        copy and shuffle): call ``darr.rechunk({-1: -1})`` first. Chunk sizes must be
        known.
    positions : array of int or dask array, optional
        ``(seq,)``, or ``(batch, seq)`` for per-sequence positions. A NumPy array is checked
        now and copied into the graph; a dask array is checked for shape and dtype now, for
        values when the blocks are computed, and rechunked to line up with ``darr``'s
        batch and sequence chunks. Exclusive with ``offset``.
    offset : int or array of int, default 0
        First position, or one per batch row (NumPy, not dask). A block starting at
        sequence index ``s0`` is rotated with ``offset + s0`` (per-row: the block's rows of
        ``offset``, plus ``s0``).
    base, layout, rotary_dim, seq_axis, inverse, scaling, max_position_embeddings, inv_freq
        As in :func:`fastpe.apply_rope`.
    pair_axes : array of int, optional
        Multi-axis RoPE, as in :func:`fastpe.apply_rope`: ``positions`` is then a NumPy
        array ``(n_axes, seq)`` or ``(n_axes, batch, seq)`` (a dask array is refused:
        compute it first), and each block gets its slice of every axis.
    seq_len : int, optional
        Sequence length for ``dynamic`` and ``longrope`` scaling. The default is the one of
        the in-memory function on the whole array, the largest position plus one (from
        ``offset`` and the sequence length, or the maximum of ``positions``), computed once
        and given to every block; a block's own largest position would change the
        frequencies from block to block. With lazy ``positions`` this maximum is a lazy
        reduction computed with the result.

    Returns
    -------
    dask.array.Array
        Lazy, with ``darr``'s shape, dtype and chunks.

    Raises
    ------
    TypeError, ValueError
        At call time, before any graph is built, for every bad argument that can be seen
        without computing (types, shapes, chunks, ``rotary_dim``, ``layout``, ``base``,
        the scaling dict, NumPy positions and offsets). Bad values inside lazy
        ``positions`` raise from the in-memory function at compute time.

    See Also
    --------
    fastpe.apply_rope : the in-memory function each block is handed to.

    Notes
    -----
    Under dask's threaded scheduler several blocks are rotated at once, and each kernel call
    also splits its work over fastpe's own pool of Python threads (as many as
    ``numba.get_num_threads()``; the kernels are serial and release the GIL). Calls from
    several threads at once are safe whatever numba's threading layer.

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastpe, fastpe.dask
    >>> q = np.ones((1, 6, 2, 4), dtype=np.float32)      # (batch, seq, heads, head_dim)
    >>> dq = da.from_array(q, chunks=(1, 2, 1, 4))       # seq split in 3 blocks
    >>> rq = fastpe.dask.apply_rope(dq, offset=100)
    >>> np.array_equal(rq.compute(), fastpe.apply_rope(q, offset=100))
    True

    ``dynamic`` scaling depends on the sequence length; every block gets the global one:

    >>> dyn = {"rope_type": "dynamic", "factor": 2.0}
    >>> r = fastpe.dask.apply_rope(dq, scaling=dyn, max_position_embeddings=4)
    >>> np.array_equal(r.compute(), fastpe.apply_rope(
    ...     q, scaling=dyn, max_position_embeddings=4))
    True

    A chunked channel axis is refused with the fix:

    >>> fastpe.dask.apply_rope(da.ones((4, 8), chunks=(2, 4)))
    Traceback (most recent call last):
    ...
    ValueError: the last axis of darr (the channels) must be a single chunk, got chunks (4, 4); rechunk it first: darr.rechunk({-1: -1})
    """  # noqa: E501
    darr = _check_darr(darr)
    if darr.ndim not in (2, 3, 4):
        raise ValueError(
            f"darr must be 2-D (seq, dim), 3-D (batch, seq, dim) or 4-D "
            f"(batch, seq, heads, head_dim), got shape {darr.shape}"
        )
    _check_chunks(darr)
    seq_axis = v.check_seq_axis(seq_axis, darr.shape)
    batch = darr.shape[0] if seq_axis >= 1 else None
    if isinstance(scaling, Mapping):
        scaling = copy.deepcopy(dict(scaling))  # the graph must not follow later edits
    if pair_axes is not None:
        place = _place_axes(darr, seq_axis, batch, positions, offset, pair_axes)
    else:
        place = _place(darr, seq_axis, batch, positions, offset)
    aligned = dict(place.aligned)
    lazy_max = False
    if seq_len is None and scaling is not None:
        seq_len = place.default_seq_len(darr.shape[seq_axis])
        lazy_max = seq_len is None
    # Everything else is checked by the in-memory parser on a one-row proxy: the same rules
    # and messages, and no kernel is compiled or run on the client.
    proxy = np.zeros((1,) * (darr.ndim - 1) + (darr.shape[-1],), dtype=darr.dtype)
    call = parse_rope(
        proxy,
        positions=None,
        offset=0,
        base=base,
        layout=layout,
        rotary_dim=rotary_dim,
        seq_axis=seq_axis,
        inverse=inverse,
        out=None,
        scaling=scaling,
        max_position_embeddings=max_position_embeddings,
        seq_len=seq_len,
        inv_freq=inv_freq,
    )
    if pair_axes is not None:  # its positions were checked by _place_axes
        v.check_pair_axes(pair_axes, call.rotary_dim // 2)
    far = _far(place, darr.shape[seq_axis])
    if far is not None and far > call.angle_limit:  # frequencies above 1: checked now too
        from ._args.calls import rope_source
        from ._freq import check_angles

        source = rope_source(call.base, call.rotary_dim, scaling)
        check_angles(far, call.wh, call.wl, source, call.angle_limit)
    if lazy_max:
        assert place.lazy_positions is not None  # lazy_max is only set with lazy positions
        aligned[_SEQ_MAX] = place.lazy_positions.max()
    kwargs = dict(
        base=call.base,
        layout=layout,
        rotary_dim=call.rotary_dim,
        seq_axis=seq_axis,
        inverse=call.inverse,
        scaling=scaling,
        max_position_embeddings=max_position_embeddings,
        seq_len=seq_len,
        pair_axes=pair_axes,
        inv_freq=inv_freq,
    )
    return _lazy(
        darr,
        _apply_rope_np,
        "fastpe-apply_rope",
        seq_axis=seq_axis,
        aligned=aligned,
        offset=place.offset,
        kwargs=kwargs,
    )


def add_sinusoidal(
    darr: da.Array,
    /,
    *,
    base: float = 10000.0,
    offset: int | ArrayLike = 0,
    positions: ArrayLike | da.Array | None = None,
    layout: str = "interleaved",
) -> da.Array:
    """Add the sinusoidal position table to a dask array of embeddings, lazily.

    The lazy counterpart of :func:`fastpe.add_sinusoidal` (less ``out``): each block is
    copied and the table is added in place by the fast kernel, so the result equals
    ``fastpe.add_sinusoidal(darr.compute(), ...)`` bit for bit, for any chunking.

    Parameters
    ----------
    darr : dask.array.Array, float32, float64, float16 or bfloat16
        Shape ``(seq, dim)`` or ``(batch, seq, dim)``.
        Embeddings with NumPy blocks. The sequence and batch axes may be chunked; the last
        axis must be a single chunk (a chunked one raises ``ValueError``; call
        ``darr.rechunk({-1: -1})`` first). Chunk sizes must be known.
    base, layout
        As in :func:`fastpe.sinusoidal_table`.
    offset : int or array of int, default 0
        First position; for a 3-D ``darr``, one first position per batch row is accepted
        (NumPy, not dask). A block starting at sequence index ``s0`` gets ``offset + s0``.
    positions : array of int or dask array, optional
        Shape ``(seq,)``, or ``(batch, seq)`` for a 3-D ``darr``; each block gets its slice.
        A dask array is rechunked to line up with ``darr``'s blocks and its values are
        checked when the blocks are computed.

    Returns
    -------
    dask.array.Array
        Lazy ``darr + PE``, with ``darr``'s shape, dtype and chunks.

    Raises
    ------
    TypeError, ValueError
        At call time, for every bad argument that can be seen without computing.

    See Also
    --------
    fastpe.add_sinusoidal : the in-memory function each block is handed to.

    Examples
    --------
    >>> import numpy as np, dask.array as da, fastpe, fastpe.dask
    >>> x = np.zeros((2, 5, 4), dtype=np.float32)
    >>> dx = da.from_array(x, chunks=(1, 2, -1))
    >>> y = fastpe.dask.add_sinusoidal(dx, offset=np.array([0, 7]))
    >>> np.array_equal(y.compute(), fastpe.add_sinusoidal(x, offset=np.array([0, 7])))
    True
    >>> y.compute()[0, 1].round(4)
    array([0.8415, 0.5403, 0.01  , 1.    ], dtype=float32)
    """
    darr = _check_darr(darr)
    if darr.ndim not in (2, 3):
        raise ValueError(
            f"darr must be 2-D (seq, dim) or 3-D (batch, seq, dim), got shape {darr.shape}"
        )
    _check_chunks(darr)
    # The in-memory parser on a one-row proxy: the same rules and messages.
    proxy = np.zeros((1,) * (darr.ndim - 1) + (darr.shape[-1],), dtype=darr.dtype)
    try:
        call = parse_add(
            proxy, base=base, offset=0, positions=None, layout=layout, out=None, copy_in=False
        )
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("x.shape[-1]", "darr.shape[-1]")) from None
    base = call.base
    seq_axis = darr.ndim - 2
    batch = darr.shape[0] if darr.ndim == 3 else None
    place = _place(darr, seq_axis, batch, positions, offset)
    far = _far(place, darr.shape[seq_axis])
    if far is not None:  # frequencies above 1 (a base below 1): checked now too
        from ._args.calls import _check_base_angles

        _check_base_angles(base, call.dim, np.array([far]), None, 0)
    return _lazy(
        darr,
        _add_sinusoidal_np,
        "fastpe-add_sinusoidal",
        seq_axis=seq_axis,
        aligned=place.aligned,
        offset=place.offset,
        kwargs=dict(base=base, layout=layout),
    )
