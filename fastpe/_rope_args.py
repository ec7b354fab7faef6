"""Argument handling shared by :func:`fastpe.apply_rope` and the reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _validate as v
from ._freq import inv_freq_dd, scaled_dd


@dataclass
class RopeCall:
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


def rope_view(a: np.ndarray, seq_axis: int) -> np.ndarray:
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
            f"(strides {st}); pass a 3-D (tokens, heads, head_dim) view instead"
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
        n = int(np.max(offs)) + n_seq
    return max(n, 1)


def frequencies(rot: int, base: float, scaling, max_position_embeddings, seq_len, pos, offs,
                n_seq: int):
    """``(wh, wl, key, attention_factor)`` for a call; see :func:`fastpe.apply_rope`."""
    # checked even where unused (no scaling, or one that ignores them): never ignored silently
    if seq_len is not None:
        seq_len = v.check_int(seq_len, "seq_len", minimum=1)
    if max_position_embeddings is not None:
        v.check_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    if scaling is not None:
        from .scaling import _resolve_rope_type, rope_frequencies

        if _resolve_rope_type(scaling) == "default":
            # still validate the dict (e.g. a conflicting rope_theta)
            rope_frequencies(rot, base=base, scaling=scaling,
                             max_position_embeddings=max_position_embeddings)
            scaling = None
    if scaling is None:
        wh, wl = inv_freq_dd(base, rot)
        return wh, wl, ("default", base, rot), 1.0
    if seq_len is None:
        seq_len = default_seq_len(pos, offs, n_seq)
    inv_freq, factor = rope_frequencies(rot, base=base, scaling=scaling, seq_len=seq_len,
                                        max_position_embeddings=max_position_embeddings)
    wh, wl = scaled_dd(inv_freq)
    return wh, wl, ("scaled", wh.tobytes()), float(factor)


def parse_rope(x, *, positions, offset, base, layout, rotary_dim, seq_axis, inverse, out,
               scaling=None, max_position_embeddings=None, seq_len=None,
               copy_in: bool = True) -> RopeCall:
    """Validate every argument of ``apply_rope`` and pick the array to rotate in place.

    Nothing is written before every check has passed. With ``copy_in`` the data of ``x`` is
    copied into ``out`` (or a new array) when the call is out of place.
    """
    x = v.check_float_array(x, "x")
    if x.ndim not in (2, 3, 4):
        raise ValueError(
            f"x must be 2-D (seq, dim), 3-D (batch, seq, dim) or 4-D "
            f"(batch, seq, heads, head_dim), got shape {x.shape}"
        )
    seq_axis = v.check_seq_axis(seq_axis, x.shape)
    dim = x.shape[-1]
    if rotary_dim is None:
        rot = dim
    else:
        rot = v.check_int(rotary_dim, "rotary_dim")
    if rotary_dim is None and dim % 2:
        raise ValueError(
            f"x's last axis has odd length {dim}: channels are rotated in pairs; "
            f"pass an even rotary_dim <= {dim} to rotate the leading channels only"
        )
    if rot <= 0 or rot % 2 or rot > dim:
        raise ValueError(f"rotary_dim must be even, > 0 and <= {dim}, got {rot}")
    if x.size and x.strides[-1] != x.itemsize:
        raise ValueError(
            f"x's last axis must have unit stride (got a stride of {x.strides[-1]} bytes for "
            f"itemsize {x.itemsize}); rotate a view whose channels are contiguous, "
            "e.g. np.ascontiguousarray(x) and write the result back"
        )
    base = v.check_base(base)
    lay = v.check_layout(layout)
    if not isinstance(inverse, (bool, np.bool_)):
        raise TypeError(f"inverse must be True or False, got {inverse!r}")
    n_seq = x.shape[seq_axis]
    batch = x.shape[0] if seq_axis >= 1 else None
    pos, offs = v.resolve_positions(positions, offset, seq_len=n_seq, batch=batch)
    rope_view(x, seq_axis)  # raises for a 4-D layout that cannot be viewed as (B, S, H, D)
    wh, wl, key, factor = frequencies(rot, base, scaling, max_position_embeddings, seq_len,
                                      pos, offs, n_seq)

    if out is None:
        target = None
    elif v.same_view(out, x) if isinstance(out, np.ndarray) else False:
        v.check_writeable(x, "x")
        v.check_no_self_overlap(x, "x")
        target = x
    else:
        out = v.check_out(out, x.shape, x.dtype, x=x)
        if out.size and out.strides[-1] != out.itemsize:
            raise ValueError("out's last axis must have unit stride")
        v.check_no_self_overlap(out, "out")
        target = out
    if target is None:
        target = np.array(x, order="C", copy=True) if copy_in else np.empty_like(x, order="C")
    elif target is not x and copy_in:
        np.copyto(target, x)
    return RopeCall(target=target, view=rope_view(target, seq_axis), rotary_dim=rot,
                    layout=lay, positions=pos, offsets=offs, base=base,
                    inverse=bool(inverse), wh=wh, wl=wl, freq_key=key,
                    attention_factor=factor)
