"""The parsers of the three core functions: ``parse_table``, ``parse_add``, ``parse_rope``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .._freq import inv_freq_dd, scaled_dd
from .checks import (
    _fill_target,
    _prepare_target,
    _refuse_masked,
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
    check_rotary_dim,
    check_seq_axis,
    resolve_axis_positions,
    resolve_positions,
)

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
    lay = check_layout(layout)
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
    lay = check_layout(layout)
    batch = x.shape[0] if x.ndim == 3 else None
    pos2d, offs = resolve_positions(positions, offset, seq_len=x.shape[-2], batch=batch)
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
        from ..scaling import _resolve_rope_type, rope_frequencies

        if _resolve_rope_type(scaling) == "default":
            # still validate the dict (e.g. a conflicting rope_theta)
            rope_frequencies(
                rot, base=base, scaling=scaling, max_position_embeddings=max_position_embeddings
            )
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
    wh, wl = scaled_dd(inv_freq)
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
) -> RopeCall:
    """Validate every argument of ``apply_rope`` and pick the array to rotate in place.

    Nothing is written before every check has passed (those of ``out`` included). With
    ``copy_in`` the data of ``x`` is then copied into ``out`` (or a new array) when the
    call is out of place.
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
    lay = check_layout(layout)
    inverse = check_bool(inverse, "inverse")
    max_position_embeddings, seq_len = check_scaling_args(scaling, max_position_embeddings, seq_len)
    n_seq = x.shape[seq_axis]
    batch = x.shape[0] if seq_axis >= 1 else None
    axis_pos = axes = None
    if pair_axes is not None:
        axes = check_pair_axes(pair_axes, rot // 2)
        axis_pos = resolve_axis_positions(positions, offset, axes, seq_len=n_seq, batch=batch)
        pos, offs = None, None
    else:
        pos, offs = resolve_positions(positions, offset, seq_len=n_seq, batch=batch)
    rope_view(x, seq_axis, "x")  # raises for a 4-D layout that cannot be viewed as (B, S, H, D)
    if inv_freq is not None:
        wh, wl, key, factor = given_frequencies(inv_freq, rot, base, scaling)
    else:
        wh, wl, key, factor = frequencies(
            rot,
            base,
            scaling,
            max_position_embeddings,
            seq_len,
            axis_pos if axis_pos is not None else pos,
            offs,
            n_seq,
        )
    target, result, _ = _prepare_target(x, out, unit_stride=True)
    if target is not None and target is not x:
        rope_view(target, seq_axis, "out")  # out's own geometry, before anything is copied
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
    )
