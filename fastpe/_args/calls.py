"""The parsers of the three core functions: ``parse_table``, ``parse_add``, ``parse_rope``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._freq import angle_limit, check_angles, inv_freq_dd, scaled_dd
from .checks import (
    MAX_POSITION,
    _fill_target,
    _prepare_target,
    _refuse_masked,
    all_positions,
    base_view,
    check_base,
    check_bool,
    check_dim,
    check_float_array,
    check_float_dtype,
    check_int,
    check_inv_freq,
    check_layout,
    check_optional_int,
    check_out,
    check_pair_axes,
    check_position_range,
    check_rotary_dim,
    check_seq_axis,
    resolve_axis_positions,
    resolve_positions,
    same_view,
)

# --------------------------------------------------------------------------- angles


def max_position(pos, offs, n: int) -> int:
    """The largest magnitude among a call's positions: ``pos`` (any shape), or each of
    ``offs`` to ``offs + n - 1``."""
    if pos is not None:
        return max(abs(int(pos.min())), abs(int(pos.max()))) if pos.size else 0
    if offs is None or offs.size == 0 or n == 0:
        return 0
    return max(abs(int(offs.min())), abs(int(offs.max()) + n - 1))


def rope_source(base: float, rot: int, scaling) -> str:
    """The arguments RoPE frequencies come from, as messages name them."""
    source = f"base={base!r} with rotary_dim={rot}"
    return source if scaling is None else f"{source} and scaling={dict(scaling)!r}"


def _check_base_angles(base: float, dim: int, pos, offs, n: int) -> None:
    """The transformer convention's angles (:func:`fastpe._freq.angle_limit`): a base below
    1 gives frequencies above 1, and a limit on the positions below 2**53."""
    if base >= 1.0 or dim < 4:  # frequencies at most 1 (dim 2: the exact 1.0 alone)
        return
    wh, wl = inv_freq_dd(base, dim)
    lim = angle_limit(wh, wl)
    if lim < MAX_POSITION:
        check_angles(max_position(pos, offs, n), wh, wl, f"base={base!r} with dim={dim}", lim)


# --------------------------------------------------------------------------- tables


@dataclass
class TableCall:
    """A checked :func:`fastpe.sinusoidal_table` call."""

    target: np.ndarray | None  # (seq_len, dim) base-class array to fill (None: allocate=False)
    result: np.ndarray | None  # what the function returns: out as given, or target
    seq_len: int
    dim: int
    base: float
    layout: int
    dtype: np.dtype
    positions: np.ndarray | None  # (1, seq_len) int64
    offsets: np.ndarray | None  # (1,) int64


def parse_table(
    seq_len, dim, *, base, offset, positions, layout, dtype, out, allocate: bool = True
) -> TableCall:
    """Check every argument of ``sinusoidal_table`` (fast and reference alike)."""
    dim = check_dim(dim)
    base = check_base(base)
    lay = check_layout("interleaved" if layout is None else layout)
    if positions is None:
        if seq_len is None:
            raise TypeError(
                "seq_len is required when positions is not given; pass the number of rows"
            )
        n = check_int(seq_len, "seq_len", minimum=0)
    else:
        _refuse_masked(positions, "positions")
        if np.ndim(positions) != 1:
            raise ValueError(f"positions must be 1-D for a table, got shape {np.shape(positions)}")
        n = len(positions)
        if seq_len is not None and check_int(seq_len, "seq_len", minimum=0) != n:
            raise ValueError(
                f"seq_len={seq_len} does not match len(positions)={n}; leave seq_len out"
            )
    pos2d, offs = resolve_positions(positions, offset, seq_len=n, batch=None)
    _check_base_angles(base, dim, pos2d, offs, n)
    if dtype is not None:
        dt = check_float_dtype(dtype)
    elif isinstance(out, np.ndarray):
        dt = check_float_dtype(out.dtype, "out's dtype")
    else:
        dt = np.dtype(np.float32)
    if out is None:
        target = np.empty((n, dim), dtype=dt) if allocate else None
        result = target
    else:
        target = check_out(out, (n, dim), dt)
        result = out
    return TableCall(
        target=target,
        result=result,
        seq_len=n,
        dim=dim,
        base=base,
        layout=lay,
        dtype=dt,
        positions=pos2d,
        offsets=offs,
    )


# --------------------------------------------------------------------------- add_sinusoidal


@dataclass
class AddCall:
    """A checked :func:`fastpe.add_sinusoidal` call."""

    target: np.ndarray  # the array added to in place (x, out, or a copy), holding x's data
    result: np.ndarray  # what the function returns: out as given, or target
    view: np.ndarray  # (B, S, 1, D) view of target
    dim: int
    base: float
    layout: int
    positions: np.ndarray | None  # (Bp, S) int64
    offsets: np.ndarray | None  # (Bp,) int64
    in_place: bool


def parse_add(x, *, base, offset, positions, layout, out, copy_in: bool = True) -> AddCall:
    """Check every argument of ``add_sinusoidal`` (fast and reference alike).

    Nothing is written before every check has passed; with ``copy_in`` the data of ``x``
    is then copied into ``out`` (or a new array) when the call is out of place.
    """
    x = check_float_array(x)
    if x.ndim not in (2, 3):
        raise ValueError(
            f"x must be 2-D (seq, dim) or 3-D (batch, seq, dim), got shape {x.shape}; "
            "reshape it, e.g. x.reshape(-1, x.shape[-2], x.shape[-1])"
        )
    dim = check_dim(x.shape[-1], "x.shape[-1] (dim)")
    base = check_base(base)
    lay = check_layout("interleaved" if layout is None else layout)
    batch = x.shape[0] if x.ndim == 3 else None
    pos2d, offs = resolve_positions(positions, offset, seq_len=x.shape[-2], batch=batch)
    _check_base_angles(base, dim, pos2d, offs, x.shape[-2])
    target, result, in_place = _prepare_target(x, out, unit_stride=False)
    target, result = _fill_target(x, target, result, copy_in)
    view = target[None, :, None, :] if target.ndim == 2 else target[:, :, None, :]
    return AddCall(
        target=target,
        result=result,
        view=view,
        dim=dim,
        base=base,
        layout=lay,
        positions=pos2d,
        offsets=offs,
        in_place=in_place,
    )


# --------------------------------------------------------------------------- apply_rope


@dataclass
class RopeCall:
    """A checked :func:`fastpe.apply_rope` call."""

    target: np.ndarray  # the array rotated in place (x, out, or a fresh copy)
    view: np.ndarray  # (B, S, H, D) view of target
    rotary_dim: int
    layout: int
    positions: np.ndarray | None  # (Bp, S) int64
    offsets: np.ndarray | None  # (Bp,) int64
    base: float
    inverse: bool
    wh: np.ndarray  # frequencies as double-double hi + lo
    wl: np.ndarray
    freq_key: tuple  # cache key of the frequencies
    attention_factor: float  # cos and sin are multiplied by this
    result: np.ndarray  # what the function returns: out as given, or target
    # multi-axis RoPE (positions and offsets are then None): int64 (n_axes, Bp, S)
    # positions and the axis of each pair
    axis_positions: np.ndarray | None = None
    pair_axes: np.ndarray | None = None
    # the frequencies depend on the positions of the call (dynamic and longrope scaling
    # without seq_len): a cached plan of the call (fastpe._plans) may not reuse them
    seq_dependent: bool = False
    # (B, S) positions whose range is still to check (parse_rope's defer_range): the engine
    # checks it in its scan of the rows, before anything is written
    range_unchecked: bool = False
    # the largest position magnitude the frequencies give exact angles at (2**53 unless
    # some inexact frequency is above 1: fastpe._freq.angle_limit)
    angle_limit: int = MAX_POSITION


def rope_view(a: np.ndarray, seq_axis: int, name: str = "x") -> np.ndarray:
    """View ``a`` as ``(B, S, H, D)``; B is axis 0 when ``seq_axis >= 1``, else 1."""
    nd = a.ndim
    if nd == 2:
        return a[None, :, None, :]
    if nd == 3:
        return a[None, :, :, :] if seq_axis == 0 else a[:, :, None, :]
    if seq_axis == 1:
        return a
    if seq_axis == 2:
        return np.moveaxis(a, 2, 1)
    # seq_axis == 0: (S, A, H, D) -> (1, S, A*H, D) without copying
    s, n1, n2, d = a.shape
    st = a.strides
    if n1 != 1 and n2 != 1 and st[1] != n2 * st[2]:
        raise ValueError(
            f"with seq_axis=0 a 4-D array's axes 1 and 2 must be mergeable without a copy "
            f"({name}'s strides are {st}); pass a 3-D (tokens, heads, head_dim) view instead"
        )
    sh = st[2] if n2 != 1 else st[1]
    return np.lib.stride_tricks.as_strided(
        a, shape=(1, s, n1 * n2, d), strides=(0, st[0], sh, st[3])
    )


def default_seq_len(pos, offs, n_seq: int) -> int:
    """The ``seq_len`` that scaling assumes when none is given: largest position + 1.

    ``pos``: positions (any shape) or None; then ``offs`` (an int or offsets) plus the
    sequence length ``n_seq``. At least 1.
    """
    if pos is not None:
        n = int(np.max(pos)) + 1 if np.size(pos) else 0
    else:
        n = int(np.max(offs)) + n_seq if np.size(offs) else n_seq
    return max(n, 1)


def check_scaling_args(scaling, max_position_embeddings, seq_len):
    """Types of the scaling arguments, checked whether or not ``scaling`` is given."""
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be a dict (a rope_scaling / rope_parameters mapping) or None, got "
            f"{type(scaling).__name__}; e.g. scaling={{'rope_type': 'yarn', 'factor': 4.0}}"
        )
    mpe = check_optional_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    sl = check_optional_int(seq_len, "seq_len", minimum=1)
    return mpe, sl


def frequencies(
    rot: int, base: float, scaling, max_position_embeddings, seq_len, pos, offs, n_seq: int
):
    """``(wh, wl, key, attention_factor)`` for a call; see :func:`fastpe.apply_rope`."""
    if scaling is not None:
        from ..scaling import _ntk_alpha_base, _resolve_rope_type, rope_frequencies

        kind = _resolve_rope_type(scaling)
        if kind in ("default", "ntk_alpha"):
            # still validate the dict (e.g. a conflicting rope_theta)
            rope_frequencies(
                rot, base=base, scaling=scaling, max_position_embeddings=max_position_embeddings
            )
            if kind == "ntk_alpha":  # the default frequencies of another base, exact
                base = _ntk_alpha_base(rot, base, scaling)
            scaling = None
    if scaling is None:
        wh, wl = inv_freq_dd(base, rot)
        return wh, wl, ("default", base, rot), 1.0
    if seq_len is None:
        seq_len = default_seq_len(pos, offs, n_seq)
    inv_freq, factor = rope_frequencies(
        rot,
        base=base,
        scaling=scaling,
        seq_len=seq_len,
        max_position_embeddings=max_position_embeddings,
    )
    wh, wl = scaled_dd(inv_freq, f"base={base!r} with scaling={dict(scaling)!r}")
    return wh, wl, ("scaled", wh.tobytes()), float(factor)


def given_frequencies(inv_freq, rot: int, base: float, scaling):
    """``(wh, wl, key, 1.0)`` for frequencies given as ``inv_freq`` (exact float64 values)."""
    wh = check_inv_freq(inv_freq, rot // 2)
    if scaling is not None:
        raise ValueError(
            "inv_freq gives the frequencies, so scaling cannot also be applied; pass the "
            "scaled frequencies as inv_freq (fastpe.scaling.rope_frequencies) or leave "
            "inv_freq out"
        )
    if base != 10000.0:
        raise ValueError(
            f"inv_freq gives the frequencies, so base={base} would be ignored; leave base out"
        )
    return wh, np.zeros_like(wh), ("given", wh.tobytes()), 1.0


# --------------------------------------------------------------------------- frequency cache

# Rope types whose frequencies depend on seq_len (by default the largest position + 1).
SEQ_DEPENDENT_TYPES = ("dynamic", "longrope")
_FREQ_CACHE: dict = {}
_FREQ_CACHE_SIZE = 64
_FREQ_LOCK = threading.Lock()
_SCALAR_TYPES = (int, float, str, bool, type(None), np.integer, np.floating, np.bool_)


class _Unfrozen(Exception):
    """A value that :func:`freeze` cannot make into a key (the call is then not cached)."""


def _freeze(value):
    """``value`` as a hashable key that tells apart values of different types."""
    t = type(value)
    if isinstance(value, _SCALAR_TYPES):
        return (t, value)
    if isinstance(value, (list, tuple)):
        return (t, tuple(_freeze(v) for v in value))
    if isinstance(value, Mapping):
        return (t, tuple((_freeze(k), _freeze(v)) for k, v in value.items()))
    raise _Unfrozen


def freeze(value):
    """A hashable key of ``value`` (a ``scaling`` dict), or None when it has none.

    The key holds the type of every element as well as its value, so that values that
    compare equal but are checked differently (``1``, ``1.0`` and ``True``; a list and a
    tuple) never share a cache entry: the entry of a call that passed every check serves
    only calls whose arguments would pass the same checks. Keys are rebuilt from the
    contents on every call, so a dict changed in place gets a new key.
    """
    if value is None:
        return (None,)
    try:
        return _freeze(value)
    except (_Unfrozen, TypeError):  # TypeError: an unhashable element
        return None


def cached_frequencies(
    rot: int,
    base: float,
    scaling,
    max_position_embeddings,
    seq_len,
    pos,
    offs,
    n_seq: int,
    *extra,
):
    """:func:`frequencies`, cached: ``(wh, wl, key, attention_factor, seq_dependent,
    angle_limit)`` (the last: :func:`fastpe._freq.angle_limit`, computed once per set).

    Arguments as :func:`frequencies`, already checked (``rot``, ``base`` and the two ints
    by :func:`parse_rope`); ``extra`` are hashable arguments that a later form of the
    frequencies may add to the key. The key is ``rot``, ``base``, the frozen ``scaling``
    (:func:`freeze`), ``max_position_embeddings`` and ``seq_len``; for the rope types whose
    frequencies depend on the sequence length (:data:`SEQ_DEPENDENT_TYPES`) without a
    ``seq_len``, the default one of this call. A ``scaling`` dict that fails its checks is
    never cached, so it raises on every call. The arrays returned are read-only. At most
    ``_FREQ_CACHE_SIZE`` entries, the oldest dropped first; safe from many threads.
    """
    rope_type = "default"
    if scaling is not None:
        from ..scaling import _resolve_rope_type

        rope_type = _resolve_rope_type(scaling)  # the first check frequencies() makes
    frozen = freeze(scaling)
    seq_dependent = rope_type in SEQ_DEPENDENT_TYPES and seq_len is None
    if seq_dependent:
        seq_len = default_seq_len(pos, offs, n_seq)
    key = (rot, base, frozen, max_position_embeddings, seq_len, *extra)
    hit = _FREQ_CACHE.get(key) if frozen is not None else None
    if hit is not None:
        return hit
    wh, wl, fkey, factor = frequencies(
        rot, base, scaling, max_position_embeddings, seq_len, pos, offs, n_seq
    )
    if wh.flags.writeable:
        wh, wl = wh.copy(), wl.copy()
        wh.flags.writeable = False
        wl.flags.writeable = False
    entry = (wh, wl, fkey, factor, seq_dependent, angle_limit(wh, wl))
    if frozen is not None:
        with _FREQ_LOCK:
            _FREQ_CACHE[key] = entry
            while len(_FREQ_CACHE) > _FREQ_CACHE_SIZE:
                del _FREQ_CACHE[next(iter(_FREQ_CACHE))]
    return entry


def parse_rope(
    x,
    *,
    positions,
    offset,
    base,
    layout,
    rotary_dim,
    seq_axis,
    inverse,
    out,
    scaling=None,
    max_position_embeddings=None,
    seq_len=None,
    pair_axes=None,
    inv_freq=None,
    copy_in: bool = True,
    defer_range: bool = False,
) -> RopeCall:
    """Validate every argument of ``apply_rope`` and pick the array to rotate in place.

    Nothing is written before every check has passed (those of ``out`` included). With
    ``copy_in`` the data of ``x`` is then copied into ``out`` (or a new array) when the
    call is out of place.

    ``defer_range``: the range of integer ``(B, S)`` positions (``B > 1``) may be left to
    the engine's scan of the rows (``range_unchecked`` in the result), which reads them
    anyway, when nothing else needs it first: no frequencies that depend on the positions,
    and no ``out`` of the caller's to copy ``x`` into. Every other case checks it here.
    """
    x = check_float_array(x, "x")
    if x.ndim not in (2, 3, 4):
        raise ValueError(
            f"x must be 2-D (seq, dim), 3-D (batch, seq, dim) or 4-D "
            f"(batch, seq, heads, head_dim), got shape {x.shape}"
        )
    seq_axis = check_seq_axis(seq_axis, x.shape)
    rot = check_rotary_dim(rotary_dim, x.shape[-1], "x.shape[-1]")
    if x.size and x.strides[-1] != x.itemsize:
        raise ValueError(
            f"x's last axis must have unit stride (got a stride of {x.strides[-1]} bytes for "
            f"itemsize {x.itemsize}); rotate a view whose channels are contiguous, "
            "e.g. np.ascontiguousarray(x) and write the result back"
        )
    base = check_base(base)
    lay = check_layout(layout, blocks=True)
    if lay >= 2 and rot % (2 * lay):
        raise ValueError(
            f"layout {layout!r} cuts the rotated channels into {lay} blocks of whole pairs: "
            f"rotary_dim must be a multiple of {2 * lay}, got {rot}"
        )
    inverse = check_bool(inverse, "inverse")
    max_position_embeddings, seq_len = check_scaling_args(scaling, max_position_embeddings, seq_len)
    n_seq = x.shape[seq_axis]
    batch = x.shape[0] if seq_axis >= 1 else None
    axis_pos = axes = None
    if pair_axes is not None:
        axes = check_pair_axes(pair_axes, rot // 2)
        if axes.ndim == 2:  # a pair's two channels on different axes: not a rotation
            if inverse:
                raise ValueError(
                    "inverse=True needs a rotation, and pair_axes gives some pair's two "
                    "channels different axes (pair_axes[0] != pair_axes[1]): the map is not "
                    "undone by negative angles"
                )
            if lay >= 2:
                raise ValueError(
                    f"layout {layout!r} cannot be combined with two rows of pair_axes "
                    f"(a pair's channels on different axes)"
                )
        axis_pos = resolve_axis_positions(positions, offset, axes, seq_len=n_seq, batch=batch)
        pos, offs = None, None
    else:
        pos, offs = resolve_positions(
            positions, offset, seq_len=n_seq, batch=batch, check_range=not defer_range
        )
    unchecked = defer_range and pos is not None
    if (
        pos is not None
        and unchecked
        and (
            pos.shape[0] < 2  # shared (or no) positions: not scanned by the engine
            or lay >= 2  # blocked pairs: the multi-axis kernel, no scan
            or (scaling is not None and seq_len is None)  # the frequencies may read them
            or (out is not None and not same_view(out, x))  # x may be copied into out
        )
    ):
        if pos.size:
            check_position_range(int(pos.min()), int(pos.max()))
        unchecked = False
    try:
        rope_view(x, seq_axis, "x")  # raises for a 4-D layout that cannot be viewed as (B, S, H, D)
        limit = MAX_POSITION  # given frequencies are exact: exact angles at any position
        if inv_freq is not None:
            wh, wl, key, factor = given_frequencies(inv_freq, rot, base, scaling)
            seq_dependent = False
        else:
            wh, wl, key, factor, seq_dependent, limit = cached_frequencies(
                rot,
                base,
                scaling,
                max_position_embeddings,
                seq_len,
                axis_pos if axis_pos is not None else pos,
                offs,
                n_seq,
            )
        if limit < MAX_POSITION:  # a base below 1
            far = (
                max_position(axis_pos, None, 0)
                if axis_pos is not None
                else max_position(pos, offs, n_seq)
            )
            check_angles(far, wh, wl, rope_source(base, rot, scaling), limit)
        if lay >= 2 and axes is None:
            # blocked pairs are rotated by the multi-axis kernel: one axis, every pair on it
            axes = np.zeros(rot // 2, dtype=np.int64)
            axis_pos = all_positions(pos, offs, n_seq)[None]
            pos, offs = None, None
        target, result, _ = _prepare_target(x, out, unit_stride=True)
        if target is not None and target is not x:
            rope_view(target, seq_axis, "out")  # out's own geometry, before anything is copied
    except (TypeError, ValueError):
        if unchecked and pos is not None and pos.size:
            # the range error comes first, as where the argument layer checks it
            _raise_range_first(pos)
        raise
    target, result = _fill_target(x, target, result, copy_in)
    return RopeCall(
        target=target,
        view=rope_view(target, seq_axis),
        rotary_dim=rot,
        layout=lay,
        positions=pos,
        offsets=offs,
        base=base,
        inverse=inverse,
        wh=wh,
        wl=wl,
        freq_key=key,
        attention_factor=factor,
        result=result,
        axis_positions=axis_pos,
        pair_axes=axes,
        seq_dependent=seq_dependent,
        range_unchecked=unchecked,
        angle_limit=limit,
    )


def _raise_range_first(pos: np.ndarray) -> None:
    """Raise the range error of ``pos`` if it has one (chained to nothing)."""
    try:
        check_position_range(int(pos.min()), int(pos.max()))
    except ValueError as exc:
        raise exc from None


# --------------------------------------------------------------------------- apply_rope_qk


def qk_out(out) -> tuple:
    """``out`` of ``apply_rope_qk``: None, or a pair ``(q_out, k_out)`` (each an array)."""
    if out is None:
        return None, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        length = f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""
        raise TypeError(
            f"out must be None or a pair (q_out, k_out) of arrays, got "
            f"{type(out).__name__}{length}; pass out=(q, k) to rotate both in place"
        )
    for name, o in zip(("out[0]", "out[1]"), out):
        if o is None:
            raise TypeError(
                f"{name} is None: give both arrays, out=(q_out, k_out), or out=None for new ones"
            )
    return out[0], out[1]


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size > 0 and b.size > 0 and bool(np.shares_memory(a, b))


def parse_rope_qk(
    q,
    k,
    *,
    out,
    positions=None,
    offset=0,
    base=10000.0,
    layout="interleaved",
    rotary_dim=None,
    seq_axis=None,
    inverse=False,
    scaling=None,
    max_position_embeddings=None,
    seq_len=None,
    pair_axes=None,
    inv_freq=None,
    copy_in: bool = True,
) -> tuple[RopeCall, RopeCall]:
    """Check every argument of ``apply_rope_qk``: one :class:`RopeCall` for q, one for k.

    Each array is checked as :func:`parse_rope` checks ``x`` (its messages say ``x``; they
    are raised prefixed with ``q:`` or ``k:``), then the two against each other: one dtype,
    the same batch, sequence and channel lengths (the positions and cos/sin are shared), and
    no array written overlapping another array of the call. Nothing is written before every
    check has passed; with ``copy_in`` q and k are then copied into their targets when the
    call is out of place.
    """
    q_out, k_out = qk_out(out)
    calls = []
    for name, x, o in (("q", q, q_out), ("k", k, k_out)):
        try:
            call = parse_rope(
                x,
                positions=positions,
                offset=offset,
                base=base,
                layout=layout,
                rotary_dim=rotary_dim,
                seq_axis=seq_axis,
                inverse=inverse,
                out=o,
                scaling=scaling,
                max_position_embeddings=max_position_embeddings,
                seq_len=seq_len,
                pair_axes=pair_axes,
                inv_freq=inv_freq,
                copy_in=False,
            )
        except (TypeError, ValueError) as exc:
            msg = f"{name}: {exc} (apply_rope_qk checks {name} as apply_rope checks x"
            msg += ")" if o is None else f", out[{'01'[name == 'k']}] as out)"
            raise type(exc)(msg) from None
        calls.append(call)
    qc, kc = calls
    qa, ka = base_view(q), base_view(k)
    if qa.dtype != ka.dtype:
        raise TypeError(
            f"q and k must have the same dtype (they share cos and sin), got {qa.dtype} and "
            f"{ka.dtype}; use k.astype(q.dtype)"
        )
    (qb, qs, _, qd), (kb, ks, _, kd) = qc.view.shape, kc.view.shape
    if (qb, qs, qd) != (kb, ks, kd):
        raise ValueError(
            f"q and k must have the same batch, sequence and channel lengths (they share "
            f"positions and cos/sin; only the heads may differ), got (batch, seq, heads, "
            f"channels) {qc.view.shape} for q and {kc.view.shape} for k; rotate them with "
            "two apply_rope calls"
        )
    qt, kt = qc.target, kc.target
    q_in, k_in = same_view(qt, qa), same_view(kt, ka)  # rotated in place
    if q_out is not None:  # (out=None: both targets are new arrays)
        nq, nk = ("q" if q_in else "out[0]"), ("k" if k_in else "out[1]")
        pairs = [(qt, kt, nq, nk)]
        if not q_in:
            pairs.append((qt, ka, nq, "k"))
        if not k_in:
            pairs.append((kt, qa, nk, "q"))
        for a, b, na, nb in pairs:
            if _overlap(a, b):
                raise ValueError(
                    f"{na} and {nb} overlap in memory: apply_rope_qk would write one while "
                    "it reads or writes the other; pass arrays that share no memory (q and k "
                    "as disjoint slices of one fused qkv buffer are fine)"
                )
    if copy_in:
        for c, x, in_place in ((qc, qa, q_in), (kc, ka, k_in)):
            if not in_place:
                np.copyto(c.target, x)
    return qc, kc
