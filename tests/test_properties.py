"""Property tests: the fast functions against fastpe.reference over random calls.

Hypothesis draws shapes, memory layouts (steps, transposes, negative strides, windows into
larger buffers), layouts, rotary dims, offsets, per-row offsets, position arrays,
``seq_axis``, dtypes, ``inverse`` and scaling, and checks the README's ulp bounds (the
error functions and bounds of ``fastpe._cases``), that nothing outside the view changed,
and, for calls that must be refused, that both implementations raise TypeError or
ValueError and leave every buffer byte-identical.

The example count is small in the default run; raise it with
``pytest tests/test_properties.py --hypothesis-examples 2000`` (or the environment
variable ``FASTPE_HYPOTHESIS_EXAMPLES``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import fastpe
from fastpe import _cases, reference

EXAMPLES = int(os.environ.get("FASTPE_HYPOTHESIS_EXAMPLES", "100"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DTYPES = [np.dtype(np.float32), np.dtype(np.float64)]
LAYOUTS = ["interleaved", "half"]
SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "longrope", "original_max_position_embeddings": 64, "factor": 4.0},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
]


# --------------------------------------------------------------------------- strategies


def positions_values(n: int):
    """Integers whose runs of ``n`` stay within 2**53: small, up to 2**24, and huge."""
    return st.one_of(
        st.integers(-50, 200),
        st.integers(-(2**24), 2**24),
        st.integers(-(2**53), 2**53 - n),
    )


@st.composite
def strided(draw, shape, dtype, *, unit_last: bool = True):
    """``(view, parent)``: an array of ``shape`` laid out in a larger buffer.

    The leading axes are permuted in memory (a transpose), stepped and possibly reversed,
    and the view starts at an offset into the buffer. The last axis has unit stride when
    ``unit_last`` (else it may be stepped, or anywhere in the permutation).
    """
    nd = len(shape)
    if draw(st.integers(0, 3)) == 0:  # the plain C-contiguous array, a quarter of the time
        a = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).standard_normal(shape)
        a = a.astype(dtype)
        return a, a
    lead = nd - 1 if unit_last else nd
    perm = draw(st.permutations(range(lead))) if lead else []
    steps = [draw(st.sampled_from([1, 1, 2, 3])) for _ in range(lead)]
    flips = [draw(st.booleans()) for _ in range(lead)]
    pads = [draw(st.integers(0, 2)) for _ in range(nd)]
    # parent axes in memory order: perm (then the channels last)
    order = list(perm) + ([nd - 1] if unit_last else [])
    pshape = []
    for ax in order:
        step = steps[ax] if ax < lead else 1
        pshape.append(shape[ax] * step + pads[ax])
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    parent = rng.standard_normal(pshape).astype(dtype)
    idx = []
    for ax in order:
        step = steps[ax] if ax < lead else 1
        start = draw(st.integers(0, pads[ax]))
        sl = slice(start, start + shape[ax] * step, step)
        if ax < lead and flips[ax] and shape[ax] > 0:
            sl = slice(start + (shape[ax] - 1) * step, (start - 1) if start else None, -step)
        idx.append(sl)
    view = parent[tuple(idx)]
    view = view.transpose(np.argsort(order))  # back to the logical axis order
    assert view.shape == tuple(shape), (view.shape, shape)
    return view, parent


def _any_dtype(draw, values: list[int]) -> np.ndarray:
    """``values`` in a dtype drawn among those that hold them exactly."""
    arr = np.array(values, dtype=np.int64)
    ok = [np.int64, np.float64]
    if arr.size == 0 or (arr.min() >= -(2**31) and arr.max() < 2**31):
        ok.append(np.int32)
    if arr.size == 0 or arr.min() >= 0:
        ok.append(np.uint64)
    if arr.size == 0 or np.abs(arr).max() <= 2048:
        ok.append(np.float16)
    dt = draw(st.sampled_from(ok))
    return arr.astype(dt)


@st.composite
def position_kwargs(draw, n_seq: int, batch: int | None):
    """One way of giving positions: none, an offset, per-row offsets, 1-D or 2-D arrays."""
    mode = draw(st.sampled_from(["default", "offset", "offset0d", "rows", "pos1", "pos2"]))
    if mode == "offset":
        return {"offset": draw(positions_values(n_seq))}
    if mode == "offset0d":
        return {"offset": np.array(draw(positions_values(n_seq)))}
    if mode == "rows" and batch is not None:
        vals = draw(st.lists(positions_values(n_seq), min_size=batch, max_size=batch))
        return {"offset": _any_dtype(draw, vals)}
    if mode == "pos1":
        vals = draw(st.lists(positions_values(1), min_size=n_seq, max_size=n_seq))
        return {"positions": _any_dtype(draw, vals)}
    if mode == "pos2" and batch is not None:
        vals = draw(st.lists(positions_values(1), min_size=batch * n_seq, max_size=batch * n_seq))
        return {"positions": _any_dtype(draw, vals).reshape(batch, n_seq)}
    return {}


@st.composite
def rope_calls(draw):
    dtype = draw(st.sampled_from(DTYPES))
    nd = draw(st.sampled_from([2, 3, 4]))
    dim = draw(st.sampled_from([2, 4, 6, 8, 12, 16, 7, 9]))
    if nd == 2:
        shape = (draw(st.integers(1, 9)), dim)
        seq_axis = draw(st.sampled_from([None, 0, -2]))
    elif nd == 3:
        shape = (draw(st.integers(1, 3)), draw(st.integers(1, 9)), dim)
        seq_axis = draw(st.sampled_from([None, 0, 1]))
    else:
        shape = (draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 3)), dim)
        seq_axis = draw(st.sampled_from([None, 0, 1, 2, -2]))  # 0: tokens (may be refused)
    ax = (0 if nd == 2 else 1) if seq_axis is None else seq_axis % nd
    n_seq = shape[ax]
    batch = shape[0] if ax >= 1 else None
    evens = [r for r in range(2, dim + 1, 2)]
    rotary_dim = draw(st.sampled_from(evens)) if dim % 2 or draw(st.booleans()) else None
    kw = dict(
        layout=draw(st.sampled_from(LAYOUTS)),
        rotary_dim=rotary_dim,
        seq_axis=seq_axis,
        inverse=draw(st.booleans()),
    )
    kw.update(draw(position_kwargs(n_seq, batch)))
    scaling = draw(st.sampled_from(SCALINGS))
    if scaling is not None and (rotary_dim or dim) >= 4:
        kw["scaling"] = scaling
        if scaling["rope_type"] == "longrope":
            h = (rotary_dim or dim) // 2
            kw["scaling"] = dict(
                scaling,
                short_factor=[1.0 + i / 8 for i in range(h)],
                long_factor=[2.0 + i for i in range(h)],
            )
        if scaling["rope_type"] == "dynamic":
            kw["max_position_embeddings"] = 64
            if draw(st.booleans()):
                kw["seq_len"] = draw(st.integers(1, 4096))
    x, parent = draw(strided(shape, dtype))
    return x, parent, kw


@st.composite
def add_calls(draw):
    dtype = draw(st.sampled_from(DTYPES))
    dim = draw(st.sampled_from([2, 4, 6, 10, 16]))
    if draw(st.booleans()):
        shape, batch = (draw(st.integers(1, 9)), dim), None
    else:
        shape = (draw(st.integers(1, 3)), draw(st.integers(1, 9)), dim)
        batch = shape[0]
    n_seq = shape[-2]
    kw = dict(layout=draw(st.sampled_from(LAYOUTS)))
    kw.update(draw(position_kwargs(n_seq, batch)))
    x, parent = draw(strided(shape, dtype, unit_last=draw(st.booleans())))
    return x, parent, kw


def _rope_err(got, want, x, kw):
    """ulps of each input pair's norm (the README's measure; scaled calls included)."""
    rot = kw.get("rotary_dim") or x.shape[-1]
    return _cases.rope_error(got, want, x, kw["layout"], rot)


# --------------------------------------------------------------------------- agreement


@SETTINGS
@given(rope_calls(), st.booleans())
def test_apply_rope_matches_reference(call, in_place):
    x, parent, kw = call
    x0, parent0 = x.copy(), parent.copy()
    try:
        want = reference.apply_rope(x, **kw)
    except ValueError as exc:  # a 4-D seq_axis=0 view whose heads cannot be merged
        assert "mergeable" in str(exc)
        with pytest.raises(ValueError, match="mergeable"):
            fastpe.apply_rope(x, out=x if in_place else None, **kw)
        np.testing.assert_array_equal(parent, parent0)
        return
    np.testing.assert_array_equal(x, x0)  # out of place: x untouched
    if in_place:
        assert fastpe.apply_rope(x, out=x, **kw) is x
        got = x.copy()
        np.copyto(x, x0)  # put the view back: then the whole buffer must be as it was
        np.testing.assert_array_equal(parent, parent0)
    else:
        got = fastpe.apply_rope(x, **kw)
        np.testing.assert_array_equal(parent, parent0)
    err = _rope_err(got, want, x0, kw)
    assert err <= _cases.ROPE_ULP[x.dtype], (x.shape, x.dtype, kw, err)


@SETTINGS
@given(add_calls(), st.booleans())
def test_add_sinusoidal_matches_reference(call, in_place):
    x, parent, kw = call
    x0, parent0 = x.copy(), parent.copy()
    want = reference.add_sinusoidal(x, **kw)
    np.testing.assert_array_equal(parent, parent0)
    if in_place:
        assert fastpe.add_sinusoidal(x, out=x, **kw) is x
        got = x.copy()
        np.copyto(x, x0)
        np.testing.assert_array_equal(parent, parent0)  # nothing outside the view changed
    else:
        got = fastpe.add_sinusoidal(x, **kw)
        np.testing.assert_array_equal(parent, parent0)
    assert _cases.add_error(got, want) <= _cases.ADD_ULP[x.dtype], (x.shape, kw)


@SETTINGS
@given(
    st.sampled_from(DTYPES),
    st.integers(0, 12),
    st.sampled_from([2, 4, 6, 10, 32]),
    st.sampled_from(LAYOUTS),
    st.data(),
)
def test_sinusoidal_table_matches_reference(dtype, n, dim, layout, data):
    kw = dict(layout=layout, dtype=dtype)
    if data.draw(st.booleans()):
        kw["positions"] = np.array(
            data.draw(st.lists(positions_values(1), min_size=n, max_size=n)), dtype=np.int64
        )
        args = (None, dim)
    else:
        kw["offset"] = data.draw(positions_values(n))
        args = (n, dim)
    want = reference.sinusoidal_table(*args, **kw)
    out, parent = data.draw(strided((n, dim), dtype, unit_last=False))
    out0, parent0 = out.copy(), parent.copy()
    assert fastpe.sinusoidal_table(*args, out=out, **kw) is out
    got = out.copy()
    np.copyto(out, out0)  # put the view back: then the whole buffer must be as it was
    np.testing.assert_array_equal(parent, parent0)
    bound = _cases.TABLE_F32_ULP if dtype == np.float32 else _cases.TABLE_F64_ULP1
    assert _cases.table_error(got, want) <= bound, (n, dim, kw)
    np.testing.assert_array_equal(fastpe.sinusoidal_table(*args, **kw), got)


# --------------------------------------------------------------------------- refusals


def _overlaps(a: np.ndarray) -> bool:
    """Whether two elements of ``a`` share memory, by listing every element's address."""
    addr = sum(np.indices(a.shape).reshape(a.ndim, -1)[i] * st for i, st in enumerate(a.strides))
    return np.unique(addr).size < a.size


def _bad_rope(draw, x, kw):
    """One bad argument: ``(kwargs, arrays that must stay unchanged)``."""
    nd, dim = x.ndim, x.shape[-1]
    choice = draw(
        st.sampled_from(
            [
                "rotary_dim_odd",
                "rotary_dim_big",
                "rotary_dim_float",
                "layout",
                "base",
                "base_type",
                "seq_axis",
                "inverse",
                "positions_len",
                "positions_huge",
                "positions_frac",
                "offset_huge",
                "offset_float",
                "out_shape",
                "out_dtype",
                "out_read_only",
                "out_overlap",
                "out_self_overlap",
                "seq_len_type",
                "mpe_type",
                "x_self_overlap",
            ]
        )
    )
    bad = dict(kw)
    arrays = []
    if choice == "rotary_dim_odd":
        bad["rotary_dim"] = 3 if dim >= 3 else 1
    elif choice == "rotary_dim_big":
        bad["rotary_dim"] = dim + 2 - dim % 2
    elif choice == "rotary_dim_float":
        bad["rotary_dim"] = 2.0
    elif choice == "layout":
        bad["layout"] = draw(st.sampled_from(["gptj", 0, None]))
    elif choice == "base":
        bad["base"] = draw(st.sampled_from([0.0, -1.0, float("inf"), float("nan")]))
    elif choice == "base_type":
        bad["base"] = draw(st.sampled_from(["x", None, True]))
    elif choice == "seq_axis":
        bad["seq_axis"] = draw(st.sampled_from([nd - 1, nd, -nd - 1, 1.0]))
    elif choice == "inverse":
        bad["inverse"] = draw(st.sampled_from([1, "yes", None]))
    elif choice in ("positions_len", "positions_huge", "positions_frac"):
        bad.pop("offset", None)
        ax = (0 if nd == 2 else 1) if kw.get("seq_axis") is None else kw["seq_axis"] % nd
        n = x.shape[ax]
        if choice == "positions_len":
            bad["positions"] = np.arange(n + 1)
        elif choice == "positions_huge":
            bad["positions"] = np.full(n, draw(st.sampled_from([-(2**63), 2**53 + 1, 2**62])))
        else:
            bad["positions"] = np.arange(n) + 0.5
    elif choice == "offset_huge":
        bad.pop("positions", None)
        bad["offset"] = draw(st.sampled_from([2**53 + 1, -(2**63), 2**70]))
    elif choice == "offset_float":
        bad.pop("positions", None)
        bad["offset"] = 1.5
    elif choice == "seq_len_type":
        bad["seq_len"] = 2.0
    elif choice == "mpe_type":
        bad["max_position_embeddings"] = 4.0
    elif choice.startswith("out") or choice == "x_self_overlap":
        if choice == "out_shape":
            out = np.zeros((*x.shape[:-1], dim + 2), x.dtype)
        elif choice == "out_dtype":
            out = np.zeros(x.shape, np.float32 if x.dtype == np.float64 else np.float64)
        elif choice == "out_read_only":
            out = np.zeros(x.shape, x.dtype)
            out.flags.writeable = False
        elif choice == "out_overlap":
            buf = np.zeros((x.size + 1) * 2, x.dtype)
            x = buf[: x.size].reshape(x.shape)  # x and out share buf, shifted by one
            x[...] = 1.0
            out = buf[1 : x.size + 1].reshape(x.shape)
            arrays.append(buf)
        else:
            n = max(x.size, 1)
            buf = np.arange(n + dim, dtype=x.dtype)
            strides = [x.itemsize] * x.ndim  # every axis one element apart: overlapping
            out = as_strided(buf, shape=x.shape, strides=strides)
            arrays.append(buf)
            if choice == "x_self_overlap":
                x = out
            if not _overlaps(out):  # e.g. one row: fall back to another bad call
                out = np.zeros((*x.shape[:-1], dim + 2), x.dtype)
        bad["out"] = out
        arrays.append(out)
    return x, bad, arrays


@SETTINGS
@given(rope_calls(), st.data())
def test_apply_rope_refusals_leave_everything_unchanged(call, data):
    x, parent, kw = call
    x, bad, arrays = _bad_rope(data.draw, x, kw)
    arrays = [x, parent, *arrays]
    for f in (fastpe.apply_rope, reference.apply_rope):
        before = [a.tobytes() for a in arrays]
        try:
            f(x, **bad)
        except (TypeError, ValueError):
            pass
        else:
            pytest.fail(
                f"{f.__module__}.apply_rope accepted {bad} for x {x.shape} strides {x.strides}"
            )
        assert [a.tobytes() for a in arrays] == before, bad


@SETTINGS
@given(add_calls(), st.data())
def test_add_sinusoidal_refusals_leave_everything_unchanged(call, data):
    x, parent, kw = call
    choice = data.draw(
        st.sampled_from(
            [
                "offset_huge",
                "positions_huge",
                "layout",
                "base",
                "out_shape",
                "out_overlap",
                "x_self_overlap",
                "positions_float_frac",
            ]
        )
    )
    bad = dict(kw)
    arrays = [x, parent]
    n = x.shape[-2]
    if choice == "offset_huge":
        bad.pop("positions", None)
        bad["offset"] = data.draw(st.sampled_from([2**53 + 1, -(2**63), 2**64]))
    elif choice == "positions_huge":
        bad.pop("offset", None)
        bad["positions"] = np.full(n, -(2**63))
    elif choice == "positions_float_frac":
        bad.pop("offset", None)
        bad["positions"] = np.arange(n) + 0.25
    elif choice == "layout":
        bad["layout"] = "gptj"
    elif choice == "base":
        bad["base"] = "x"
    elif choice == "out_shape":
        bad["out"] = np.zeros((*x.shape[:-1], x.shape[-1] + 2), x.dtype)
        arrays.append(bad["out"])
    else:
        buf = np.arange(x.size + x.shape[-1] + 2, dtype=x.dtype)
        if choice == "out_overlap":
            if x.size < 2:
                return
            xs = buf[: x.size].reshape(x.shape)
            bad["out"] = buf[1 : x.size + 1].reshape(x.shape)  # shifted by one element
        else:
            # every axis one element apart: rows share all but one value
            xs = as_strided(buf, shape=x.shape, strides=(x.itemsize,) * x.ndim)
            if not _overlaps(xs):
                return
            bad["out"] = xs
        x = xs
        arrays += [buf, x]
    for f in (fastpe.add_sinusoidal, reference.add_sinusoidal):
        before = [a.tobytes() for a in arrays]
        with pytest.raises((TypeError, ValueError)):
            f(x, **bad)
        assert [a.tobytes() for a in arrays] == before, (choice, bad)
