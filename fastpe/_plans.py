"""Plans of repeated ``apply_rope`` and ``apply_rope_qk`` calls: checked once, reused.

A decoding loop makes the same call on every step with a new position: same dtype, shape,
strides and keyword arguments. Checking all of them costs more than rotating a
``(1, 1, 32, 128)`` step, so the first such call goes through the full argument layer
(:func:`fastpe._args.parse_rope`, every check) and, when it succeeds, leaves a plan here
under a key made of everything those checks looked at: the dtype, shape and strides of each
array, whether the call is in place, and every keyword argument with its type (the
``scaling`` dict frozen by :func:`fastpe._args.calls.freeze`). A later call with the same
key has passed the same checks; only what the key does not hold is checked again on every
call: the position (an ``int`` offset, within 2**53 with the sequence length), whether the
arrays written are writeable, and, for q and k rotated in place, that they share no memory.
When one of those fails, or anything else differs (positions arrays, a per-row offset, an
``out`` other than ``x`` or None, an ndarray subclass), the call takes the full path, which
raises the error that the call deserves.

Plans are kept for at most ``_PLANS_SIZE`` keys, the oldest dropped first; read without a
lock (a dict lookup is atomic), stored under one. Frequencies that depend on the positions
(``dynamic`` and ``longrope`` scaling without ``seq_len``) are never planned.

A new keyword argument of ``apply_rope`` must either enter the key (the ``extra`` of
:func:`rope_key`) or keep its calls off this path.
"""

from __future__ import annotations

import threading

import numpy as np

from . import _engine
from ._args import MAX_POSITION, rope_view
from ._args.calls import freeze

ENABLED = True  # the tests turn plans off to compare against the full path
_PLANS: dict = {}
_PLANS_SIZE = 128
_PLAN_LOCK = threading.Lock()


def _int_or_none(v) -> bool:
    return v is None or type(v) is int


def rope_key(
    arrays: tuple,
    in_place: bool,
    base,
    layout,
    rotary_dim,
    seq_axis,
    inverse,
    scaling,
    mpe,
    seq_len,
    *extra,
):
    """The key of a call on ``arrays`` (``(x,)`` or ``(q, k)``) with these keyword
    arguments, or None.

    None (no plan: the full path) when plans are off, when an argument is not of the plain
    type that most calls pass (``base`` a float or int, ``layout`` a str, ``inverse`` a
    bool, the integer arguments ints or None: then values that compare equal are checked
    alike, where ``1``, ``1.0`` and ``True`` are not), or when ``scaling`` has no key.
    ``extra``: arguments added later (each enters the key with its type).
    """
    if not (
        ENABLED
        and (type(base) is float or type(base) is int)
        and type(layout) is str
        and type(inverse) is bool
        and (rotary_dim is None or type(rotary_dim) is int)
        and (seq_axis is None or type(seq_axis) is int)
        and (mpe is None or type(mpe) is int)
        and (seq_len is None or type(seq_len) is int)
    ):
        return None
    if scaling is None:
        frozen = None
    else:
        frozen = freeze(scaling)
        if frozen is None:
            return None
    # one flat tuple, built in one expression: a loop over the arrays, the arguments in a
    # tuple of their own, or the arrays' part and the arguments' part joined, cost 0.1-0.3 us
    # more of a 3-4 us step
    x = arrays[0]
    # fmt: off
    if len(arrays) == 1:
        key: tuple = (x.dtype, x.shape, x.strides,
                      in_place, base, layout, rotary_dim, seq_axis, inverse, mpe, seq_len, frozen)
    else:
        _, y = arrays  # q and k
        key = (x.dtype, x.shape, x.strides, y.dtype, y.shape, y.strides,
               in_place, base, layout, rotary_dim, seq_axis, inverse, mpe, seq_len, frozen)
    # fmt: on
    if extra:
        key += tuple((v, type(v)) for v in extra)
    return key


def lookup(key):
    return None if key is None else _PLANS.get(key)


def store(key, plan) -> None:
    if key is None or plan is None:
        return
    with _PLAN_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > _PLANS_SIZE:
            del _PLANS[next(iter(_PLANS))]


def clear() -> None:
    """Forget every plan (tests)."""
    with _PLAN_LOCK:
        _PLANS.clear()


# --------------------------------------------------------------------------- plans


def _part(call, n_seq: int, seq_axis: int):
    """How to rotate one array of a checked call: ``(rows, general)``.

    ``rows``: the call rotates every row of its (contiguous) target to one position, and
    takes the decoding-step kernel; 0 when it does not. ``general``: the arguments of
    :func:`fastpe._engine.run` besides the view and the offsets.
    """
    t = call.target
    general = (
        seq_axis,
        dict(
            op=_engine.OP_ROPE,
            npairs=call.rotary_dim // 2,
            layout=call.layout,
            positions=None,
            freq_key=call.freq_key,
            wh=call.wh,
            wl=call.wl,
            sin_sign=-1.0 if call.inverse else 1.0,
            scale=(1.0 / call.attention_factor if call.inverse else call.attention_factor),
        ),
    )
    one = (
        n_seq == 1
        and t.size > 0
        and t.flags.c_contiguous
        and t.itemsize in (4, 8)
        and t.nbytes <= _engine.STEP_BYTES
    )
    return (t.size // t.shape[-1] if one else 0), general


def make(calls: tuple, n_seq: int, seq_axis: int):
    """The plan of a call whose arrays ``calls`` (checked, one per array) just passed every
    check, or None when such calls are not planned.

    ``(last, setup, parts, first)``: ``first`` and ``last`` the least and the largest
    offset allowed (positions ``offset .. offset + n_seq - 1`` within 2**53, or within the
    calls' smaller ``angle_limit``: :func:`fastpe._freq.angle_limit`), ``setup`` the
    decoding-step setup (:func:`fastpe._engine.step_setup`, which holds the rows of each
    array) when every array takes the step kernel (None otherwise); ``parts`` one ``(rows,
    general)`` per array.
    """
    if any(
        c.seq_dependent
        or c.axis_positions is not None  # blocked layouts: the multi-axis kernel
        or c.positions is not None
        or c.offsets.shape[0] != 1
        for c in calls
    ):
        return None
    parts = tuple(_part(c, n_seq, seq_axis) for c in calls)
    setup = None
    if all(rows for rows, _ in parts):
        c = calls[0]
        setup = _engine.step_setup(
            c.freq_key,
            c.wh,
            c.wl,
            c.rotary_dim // 2,
            c.layout,
            c.target.shape[-1],
            parts[0][1][1]["sin_sign"] * parts[0][1][1]["scale"],
            parts[0][1][1]["scale"],
            c.target.dtype,
            parts[0][0],
            parts[1][0] if len(parts) > 1 else 0,
        )
    lim = min([MAX_POSITION] + [c.angle_limit for c in calls])
    return (lim - max(n_seq - 1, 0), setup, parts, -lim)


def int_offset(offset) -> int | None:
    """``offset`` as an int when it is a Python or NumPy integer (not a bool), else None."""
    if type(offset) is int:
        return offset
    if isinstance(offset, np.integer):
        return int(offset)
    return None


def offset_ok(offset: int, plan) -> bool:
    """The positions ``offset .. offset + n_seq - 1`` within 2**53 (as ``check_offset``),
    or within the frequencies' smaller ``angle_limit``."""
    return plan[3] <= offset <= plan[0]


def run(plan, targets: tuple, offset: int) -> None:
    """Rotate ``targets`` (the arrays written, checked) to positions from ``offset``."""
    _, setup, parts, _ = plan
    if setup is not None:
        a = targets[0].ravel()  # contiguous: views
        b = targets[1].ravel() if len(targets) > 1 else a
        aligned = a.flags.aligned and (b is a or b.flags.aligned)
        if not _engine.run_step(setup, a, b, offset, aligned):
            raise AssertionError("a checked call's arrays share memory")
        return
    offs = np.array([offset], dtype=np.int64)
    for t, (_, (seq_axis, kw)) in zip(targets, parts):
        _engine.run(rope_view(t, seq_axis), offsets=offs, **kw)
