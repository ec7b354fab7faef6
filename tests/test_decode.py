"""Decoding steps: the cached plans of repeated calls, the one-position kernel, apply_rope_qk.

A plan (``fastpe._plans``) lets a repeated call skip the argument layer's checks, and a call
at one position takes its own kernel (``fastpe._kernels.step``). Both must be invisible:
the bytes of the full path (plans off: parse every argument, ``rope_kernel``), every refusal
of the full path with its message, and nothing written when a call raises.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
import pytest
from _util import DTYPES, assert_rope_close, unaligned

import fastpe
from fastpe import _engine, _plans, reference, rotary
from fastpe._args import calls
from fastpe._kernels import step

LAYOUTS = ["interleaved", "half"]
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
# positions around the groups of 16 whose cos/sin rows the step kernel keeps, and the
# exact (libm) anchors at multiples of 2**16
OFFSETS = [0, 1, 15, 16, 17, 4097, 65535, 65536, 2**40 + 3, -1, -17, 2**53 - 1]


@contextmanager
def plans_off():
    _plans.ENABLED = False
    try:
        yield
    finally:
        _plans.ENABLED = True


def full_path(f, *args, **kwargs):
    """``f`` through the full argument layer and the general kernels."""
    with plans_off():
        return f(*args, **kwargs)


def planned(f, *args, **kwargs):
    """``f`` called twice on copies: the first call leaves the plan, the second uses it."""
    f(*[a.copy() for a in args], **kwargs)
    return f(*args, **kwargs)


# --------------------------------------------------------------------------- same bytes

STEP_SHAPES = [
    ((1, 1, 32, 128), None),  # the decoding step
    ((3, 1, 4, 16), None),
    ((1, 8), None),  # (seq, dim)
    ((2, 1, 6), None),  # (batch, seq, dim)
    ((2, 4, 1, 8), 2),  # (batch, heads, seq, head_dim)
    ((1, 4, 16), 0),  # (tokens, heads, head_dim)
    ((1, 1, 1, 2), None),  # dim 2
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape, seq_axis", STEP_SHAPES)
@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
def test_step_kernel_bytes_of_full_path(shape, seq_axis, dtype, layout, partial, inverse, rng):
    d = shape[-1]
    rot = max(2, d // 4 * 2) if partial else None
    kw = dict(layout=layout, rotary_dim=rot, seq_axis=seq_axis, inverse=inverse)
    x = rng.standard_normal(shape).astype(dtype)
    for off in OFFSETS:
        want = full_path(fastpe.apply_rope, x, offset=off, **kw)
        got = planned(fastpe.apply_rope, x, offset=off, **kw)  # out=None
        assert got.tobytes() == want.tobytes(), (shape, dtype, layout, off)
        y = x.copy()
        assert planned(lambda a, **k: fastpe.apply_rope(a, out=a, **k), y, offset=off, **kw) is y
        assert y.tobytes() == want.tobytes(), (shape, dtype, layout, off, "in place")
        ref = reference.apply_rope(x, offset=off, **kw)
        assert_rope_close(got, ref, x, layout, rot or d, offset=off)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scaling", [LLAMA3, YARN], ids=["llama3", "yarn"])
@pytest.mark.parametrize("inverse", [False, True])
def test_step_kernel_with_scaling_bytes_of_full_path(dtype, scaling, inverse, rng):
    x = rng.standard_normal((1, 1, 8, 32)).astype(dtype)
    kw = dict(layout="half", scaling=scaling, inverse=inverse, base=500000.0)
    for off in (3, 100, 70000):
        want = full_path(fastpe.apply_rope, x, offset=off, **kw)
        got = planned(fastpe.apply_rope, x, offset=off, **kw)
        assert got.tobytes() == want.tobytes(), (off, scaling["rope_type"])


def with_specials(x, rng):
    """``x`` with half its values replaced by NaNs of both signs and two payloads,
    infinities, signed zeros, subnormals and huge values."""
    dtype = x.dtype.type
    info = np.finfo(dtype)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    nan2 = np.array([np.nan], dtype).view(bits) | bits(1)  # another payload
    specials = np.array(
        [
            np.nan,
            -np.nan,
            np.inf,
            -np.inf,
            0.0,
            -0.0,
            info.smallest_subnormal,
            -info.tiny,
            info.max,
            -info.max / 3,
            1.0,
            -2.5,
        ],
        dtype=dtype,
    )
    specials = np.concatenate([specials, nan2.view(dtype), -nan2.view(dtype)])
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, flat.size // 2)] = rng.choice(specials, flat.size // 2)
    return x


NATIVE_SPREAD = step.SPREAD  # this CPU's (x86: True)


@pytest.fixture
def spread(request, monkeypatch):
    """``step.SPREAD`` set to the test's (indirect) parameter: the step's interleaved rows
    as on x86 (cos/sin rows spread, whole lines by ``fastpe._kernels.step._turn_groups``)
    or as elsewhere (LLVM's loop), plans made anew. The spread lines only where this CPU
    takes them: elsewhere (aarch64) their NaN signs would differ from the full path's,
    which is why it does not."""
    if request.param and not NATIVE_SPREAD:
        pytest.skip("the spread lines are x86's (step.SPREAD)")
    monkeypatch.setattr(step, "SPREAD", request.param)
    _plans.clear()
    yield request.param
    _plans.clear()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "layout, spread",
    [("interleaved", True), ("interleaved", False), ("half", NATIVE_SPREAD)],
    ids=["interleaved-spread", "interleaved-not-spread", "half"],
    indirect=["spread"],
)
@pytest.mark.parametrize(
    "shape, rot", [((1, 1, 4, 32), None), ((1, 1, 3, 22), None), ((2, 1, 2, 40), 30)]
)
@pytest.mark.parametrize("inverse", [False, True])
def test_step_kernel_bytes_of_full_path_at_special_values(
    dtype, layout, shape, rot, inverse, spread, rng
):
    # special values in every lane of the step kernel's vector lines and of its last pairs
    # (interleaved rows: whole lines, then the scalar loop), byte for byte: one array in
    # place and into a new array, q and k in place (k with fewer heads)
    x = with_specials(rng.standard_normal(shape).astype(dtype), rng)
    k = with_specials(rng.standard_normal((*shape[:2], 1, *shape[3:])).astype(dtype), rng)
    kw = dict(layout=layout, rotary_dim=rot, inverse=inverse)
    n = shape[-1] // 2 if rot is None else rot // 2
    width = 2 * n if spread and layout == "interleaved" else n
    for off in (0, 5, 17, 2**40 + 3):
        want = full_path(fastpe.apply_rope, x, offset=off, **kw)
        assert planned(fastpe.apply_rope, x, offset=off, **kw).tobytes() == want.tobytes()
        y = x.copy()
        assert planned(lambda a, **k: fastpe.apply_rope(a, out=a, **k), y, offset=off, **kw) is y
        assert y.tobytes() == want.tobytes(), (off, layout, dtype)
        want_k = full_path(fastpe.apply_rope, k, offset=off, **kw)
        q2, k2 = x.copy(), k.copy()
        planned(
            lambda a, b, **kk: fastpe.apply_rope_qk(a, b, out=(a, b), **kk),
            q2,
            k2,
            offset=off,
            **kw,
        )
        assert (q2.tobytes(), k2.tobytes()) == (want.tobytes(), want_k.tobytes()), off
    setup = next(p[1] for p in _plans._PLANS.values() if p[1] is not None)
    assert setup[1][5] == width  # the rows the step took: spread or not, as asked


def test_step_kernel_refuses_rows_of_another_width():
    # the kernel checks that its cos/sin rows are of a width its layout reads: npairs, or
    # twice that for spread interleaved rows (another width, made by mistake, would be read
    # past its end or short of it)
    kernel = _engine._step_kernels()[0]
    a = np.zeros(16, np.float32)

    def step_of(layout):
        return np.array([8, layout, 16, 1, 0, 8], dtype=np.int64)

    for layout, width in ((0, 4), (1, 16), (1, 3)):
        with pytest.raises(ValueError, match="width"):
            kernel(a, a, np.zeros((2, 16, width), np.float32), step_of(layout), 0)
    for layout, width in ((0, 16), (0, 8), (1, 8)):
        assert kernel(a, a, np.zeros((2, 16, width), np.float32), step_of(layout), 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda r: r.standard_normal((2, 5, 3, 8)),  # several positions: general kernel
        lambda r: r.standard_normal((2, 1, 6, 8))[:, :, :3],  # a fused buffer's q, batch 2
        lambda r: r.standard_normal((1, 1, 4, 8)).astype(np.float16),  # 16-bit kernels
        lambda r: r.standard_normal((1, 1, 600, 128)),  # over STEP_BYTES
        lambda r: np.zeros((0, 1, 2, 8)),
    ],
    ids=["seq5", "fused-view", "float16", "large", "empty"],
)
def test_planned_calls_off_the_step_kernel_bytes_of_full_path(make, rng):
    x = make(rng)
    for off in (0, 31, 65536):
        want = full_path(fastpe.apply_rope, x, offset=off, layout="half")
        assert planned(fastpe.apply_rope, x, offset=off, layout="half").tobytes() == want.tobytes()
        y = x.copy() if x.flags.c_contiguous else x
        before = y.copy()
        planned(lambda a, **k: fastpe.apply_rope(a, out=a, **k), y, offset=off, layout="half")
        assert y.tobytes() == want.tobytes()
        y[...] = before


def test_a_decoding_loop_equals_the_full_path(rng):
    q = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    got, want = q.copy(), q.copy()
    for p in range(90):  # crosses groups of 16; the plan made on the first step
        fastpe.apply_rope(got, offset=p, out=got, layout="half")
        with plans_off():
            fastpe.apply_rope(want, offset=p, out=want, layout="half")
        assert got.tobytes() == want.tobytes(), p
    key = _plans.rope_key((got,), True, 10000.0, "half", None, None, False, None, None, None)
    assert _plans._PLANS[key][1] is not None  # the loop took the decoding-step kernel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("qk", [False, True], ids=["q", "qk"])
@pytest.mark.parametrize("layout, d", [("half", 16), ("interleaved", 22)])
def test_step_entry_point_for_aligned_arrays_alone(dtype, qk, layout, d, rng, monkeypatch):
    # run_step calls the step kernel's compiled entry point, found once per setup, for the
    # aligned arrays it was found for; an unaligned array has the same plan key and goes
    # through numba's dispatcher, which types it apart (fastpe._engine._entry_point)
    # (interleaved rows of 11 pairs: whole lines and last pairs, aligned and not)
    q = rng.standard_normal((1, 1, 4, d)).astype(dtype)
    k = rng.standard_normal((1, 1, 2, d)).astype(dtype)
    if qk:

        def f(arrays, off):
            return fastpe.apply_rope_qk(*arrays, out=arrays, offset=off, layout=layout)

        arrays = (q, k)
    else:

        def f(arrays, off):
            return (fastpe.apply_rope(arrays[0], out=arrays[0], offset=off, layout=layout),)

        arrays = (q,)
    _plans.clear()
    f(tuple(a.copy() for a in arrays), 0)  # the plan; the dispatcher, which finds the entry
    key = _plans.rope_key(arrays, True, 10000.0, layout, None, None, False, None, None, None)
    entry = _plans._PLANS[key][1][6]
    assert len(entry) == 1
    calls_made, steps = [], []
    found = entry[0]
    entry[0] = lambda *args: calls_made.append(1) or found(*args)
    run_step = _engine.run_step
    monkeypatch.setattr(_engine, "run_step", lambda *a: steps.append(1) or run_step(*a))
    try:
        for off in (5, 17):
            want = full_path(f, tuple(a.copy() for a in arrays), off)
            got = f(tuple(a.copy() for a in arrays), off)
            assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
            n, m = len(calls_made), len(steps)
            for i in range(len(arrays)):  # each array unaligned in turn: the dispatcher
                moved = tuple(unaligned(a) if j == i else a.copy() for j, a in enumerate(arrays))
                got = f(moved, off)
                assert [g.tobytes() for g in got] == [w.tobytes() for w in want], (off, i)
            assert len(calls_made) == n
            assert len(steps) == m + len(arrays)  # the planned step, not the full path
        assert len(calls_made) == 2
    finally:
        entry[0] = found


def test_entry_point_or_the_dispatcher():
    # _entry_point gives the compiled function of arguments the dispatcher has compiled for,
    # else the dispatcher itself: for types it has no code of, and for a dispatcher without
    # numba's overloads (another numba)
    kernel = _engine._step_kernels()[0]
    a = np.zeros(8, np.float32)
    cs, step_ints = np.zeros((2, 16, 8), np.float32), np.array([4, 0, 8, 1, 0, 8], dtype=np.int64)
    args = (a, a, cs, step_ints, 0)
    assert kernel(*args)
    found = _engine._entry_point(kernel, args)
    assert found is not kernel and callable(found)
    odd = (a, a, cs, step_ints, 0.5)
    assert _engine._entry_point(kernel, odd) is kernel  # (a float k: never compiled)

    class Other:
        def __call__(self, *args):
            return True

    other = Other()
    assert _engine._entry_point(other, args) is other


def test_step_without_an_entry_point_takes_the_dispatcher(monkeypatch, rng):
    # a numba that keeps its compiled functions elsewhere: the dispatcher, the same bits
    monkeypatch.setattr(_engine, "_entry_point", lambda dispatcher, args: dispatcher)
    _plans.clear()
    x = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    for off in (5, 6, 40):
        want = full_path(fastpe.apply_rope, x, offset=off, layout="half")
        assert planned(fastpe.apply_rope, x, offset=off, layout="half").tobytes() == want.tobytes()
    key = _plans.rope_key((x,), False, 10000.0, "half", None, None, False, None, None, None)
    # the dispatcher kept in the entry's place: not looked for on every call
    assert _plans._PLANS[key][1][6] == [_engine._step_kernels()[0]]


@pytest.mark.parametrize("f", [fastpe.apply_rope, fastpe.apply_rope_qk])
def test_planned_results_keep_the_dtype_of_the_full_path(f, rng):
    """A plan is keyed by dtypes that compare equal whatever their metadata: a planned call
    returns arrays of the dtype the full path returns, metadata kept or absent as there,
    whichever call made the plan."""
    tagged = np.dtype(np.float32, metadata={"unit": "m"})
    for first, then in ((np.float32, tagged), (tagged, np.float32), (tagged, tagged)):
        shapes = [(1, 1, 4, 16)] if f is fastpe.apply_rope else [(1, 1, 4, 16), (1, 1, 2, 16)]
        make = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        f(*[a.astype(first) for a in make], offset=7)  # the plan
        args = [a.astype(then) for a in make]
        got = f(*args, offset=7)
        want = full_path(f, *args, offset=7)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            assert g.dtype.metadata == w.dtype.metadata == np.dtype(then).metadata
            assert g.tobytes() == w.tobytes()


@pytest.mark.parametrize("offset", [np.int64(70000), np.uint32(31), np.int8(-5)])
def test_numpy_integer_offsets_take_the_plan(offset, rng):
    x = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    want = full_path(fastpe.apply_rope, x, offset=int(offset), layout="half")
    got = planned(fastpe.apply_rope, x, offset=offset, layout="half")
    assert got.tobytes() == want.tobytes()
    key = _plans.rope_key((x,), False, 10000.0, "half", None, None, False, None, None, None)
    assert _plans._PLANS[key][1] is not None


def test_dynamic_scaling_follows_the_positions(rng):
    # dynamic NTK frequencies depend on the largest position: never reused across offsets
    dyn = {"rope_type": "dynamic", "factor": 2.0}
    x = rng.standard_normal((1, 1, 2, 16))
    for off in (3, 40, 200, 40):
        kw = dict(scaling=dyn, max_position_embeddings=32, offset=off)
        want = full_path(fastpe.apply_rope, x, **kw)
        assert planned(fastpe.apply_rope, x, **kw).tobytes() == want.tobytes(), off


def test_scaling_changed_in_place_is_seen(rng):
    scaling = dict(LLAMA3)
    x = rng.standard_normal((1, 1, 2, 32))
    fastpe.apply_rope(x, offset=5000, scaling=scaling)
    scaling["factor"] = 2.0
    want = full_path(fastpe.apply_rope, x, offset=5000, scaling=dict(scaling))
    assert fastpe.apply_rope(x, offset=5000, scaling=scaling).tobytes() == want.tobytes()
    scaling["factor"] = "2"  # now refused, although a plan exists for the dict
    with pytest.raises(TypeError, match="factor"):
        fastpe.apply_rope(x, offset=5000, scaling=scaling)


# --------------------------------------------------------------------------- refusals


def _bad_calls():
    """``(x, kwargs)`` that the full path refuses, each beside a cached good call."""
    good = np.ones((1, 1, 4, 16), np.float32)
    ro = good.copy()
    ro.flags.writeable = False
    masked = np.ma.masked_array(good.copy())
    swapped = good.astype(good.dtype.newbyteorder())
    return [
        ("int dtype", good.astype(np.int32), {}),
        ("byte order", swapped, {}),
        ("masked", masked, {}),
        ("list", good.tolist(), {}),
        ("offset past 2**53", good, dict(offset=2**53 + 1)),
        ("offset past -2**53", good, dict(offset=-(2**53) - 1)),
        ("offset bool", good, dict(offset=True)),
        ("offset numpy bool", good, dict(offset=np.True_)),
        ("offset float", good, dict(offset=3.0)),
        ("offset per row, no batch", good, dict(offset=np.array([1, 2]))),
        ("read-only in place", ro, dict(out=ro)),
        ("rotary_dim True", good, dict(rotary_dim=True)),
        ("rotary_dim float", good, dict(rotary_dim=16.0)),
        ("rotary_dim odd", good, dict(rotary_dim=5)),
        ("base bool", good, dict(base=True)),
        ("base nan", good, dict(base=float("nan"))),
        ("base str", good, dict(base="10000")),
        ("layout", good, dict(layout="HALF")),
        ("inverse int", good, dict(inverse=1)),
        ("seq_axis bool", good, dict(seq_axis=True)),
        ("seq_axis last", good, dict(seq_axis=3)),
        ("scaling factor str", good, dict(scaling={**LLAMA3, "factor": "8"})),
        ("scaling factor bool", good, dict(scaling={**LLAMA3, "factor": True})),
        ("scaling type", good, dict(scaling={"rope_type": "nope"})),
        ("mpe bool", good, dict(max_position_embeddings=True)),
        ("seq_len 0", good, dict(seq_len=0)),
        ("out other dtype", good, dict(out=np.ones((1, 1, 4, 16)))),
    ]


def _raised(f, *args, **kwargs):
    with pytest.raises((TypeError, ValueError)) as info:
        f(*args, **kwargs)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("what, x, kwargs", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_refusals_made_with_a_plan_cached(what, x, kwargs):
    base_kw = dict(layout="half", scaling=LLAMA3 if "scaling" in what else None)
    with plans_off():
        want = _raised(fastpe.apply_rope, x, **{**base_kw, **kwargs})
    # the same call without the fault leaves a plan; then the faulty call must still raise
    good = np.ones((1, 1, 4, 16), np.float32)
    for out in (None, "x"):
        fastpe.apply_rope(good, out=good if out else None, offset=7, **base_kw)
        fastpe.apply_rope(good, out=good if out else None, offset=7, **base_kw)
    x0 = np.array(x, copy=True) if isinstance(x, np.ndarray) else None
    assert _raised(fastpe.apply_rope, x, **{**base_kw, **kwargs}) == want, what
    if x0 is not None:
        np.testing.assert_array_equal(x, x0)


def test_read_only_view_of_a_planned_geometry_refused():
    x = np.zeros((1, 1, 2, 8))
    fastpe.apply_rope(x, out=x, offset=3)
    fastpe.apply_rope(x, out=x, offset=3)
    ro = np.zeros((1, 1, 2, 8))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.apply_rope(ro, out=ro, offset=4)


# --------------------------------------------------------------------------- caches


def test_caches_are_bounded():
    x = np.ones((1, 1, 1, 4))
    for i in range(_plans._PLANS_SIZE + 10):
        fastpe.apply_rope(x, out=x, offset=i * 16, base=1000.0 + i)
    assert len(_plans._PLANS) <= _plans._PLANS_SIZE
    assert len(calls._FREQ_CACHE) <= calls._FREQ_CACHE_SIZE
    assert len(_engine._TABLE_CACHE) <= _engine._TABLE_CACHE_SIZE
    setup = next(p[1] for p in _plans._PLANS.values() if p[1] is not None)
    y = np.ones((1, 1, 1, 4))
    key = next(k for k, p in _plans._PLANS.items() if p[1] is setup)
    for p in range(0, 16 * (_engine._STEP_GROUPS + 5), 16):
        # (the key of one array: dtype, shape, strides, in place, base, ...: rope_key)
        fastpe.apply_rope(y, out=y, offset=p, base=key[4])
    assert 0 < len(setup[0]) <= _engine._STEP_GROUPS


def test_cached_frequencies_are_read_only():
    wh, wl, *_ = calls.cached_frequencies(8, 10000.0, YARN, None, None, None, np.zeros(1), 1)
    assert not wh.flags.writeable and not wl.flags.writeable


def test_freeze_tells_types_apart():
    f = calls.freeze
    assert f({"factor": 1}) != f({"factor": 1.0}) != f({"factor": True})
    assert f({"f": [1.0, 2.0]}) != f({"f": (1.0, 2.0)})
    assert f({"f": np.array([1.0])}) is None  # no key: such calls are not cached
    assert f(None) == (None,)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decoding_steps_from_many_threads(layout, rng):
    x = rng.standard_normal((1, 1, 8, 64)).astype(np.float32)
    positions = list(range(0, 400, 3))
    want = {p: full_path(fastpe.apply_rope, x, offset=p, layout=layout) for p in positions}
    _plans.clear()
    bad = []

    def work(shift):
        for p in positions[shift:] + positions[:shift]:
            y = x.copy()
            fastpe.apply_rope(y, out=y, offset=p, layout=layout)
            if y.tobytes() != want[p].tobytes():
                bad.append(p)

    threads = [threading.Thread(target=work, args=(7 * i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


# --------------------------------------------------------------------------- apply_rope_qk

QK_SHAPES = [
    ((1, 1, 32, 128), (1, 1, 8, 128), None),  # grouped-query attention, one step
    ((2, 1, 4, 16), (2, 1, 1, 16), None),
    ((2, 5, 4, 16), (2, 5, 2, 16), None),  # a prompt: the general kernel
    ((2, 4, 3, 8), (2, 2, 3, 8), 2),  # (batch, heads, seq, head_dim)
    ((3, 4, 8), (3, 2, 8), 0),  # packed tokens
    ((1, 8), (1, 8), None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("qs, ks, seq_axis", QK_SHAPES)
@pytest.mark.parametrize("inverse", [False, True])
def test_qk_equals_two_apply_rope_calls(qs, ks, seq_axis, dtype, layout, inverse, rng):
    q = rng.standard_normal(qs).astype(dtype)
    k = rng.standard_normal(ks).astype(dtype)
    kw = dict(layout=layout, seq_axis=seq_axis, inverse=inverse, base=500000.0)
    for off in (0, 17, 65536, 2**40 + 9):
        wq = full_path(fastpe.apply_rope, q, offset=off, **kw)
        wk = full_path(fastpe.apply_rope, k, offset=off, **kw)
        q0, k0 = q.copy(), k.copy()
        for _ in range(2):  # the second call uses the plan of the first
            gq, gk = fastpe.apply_rope_qk(q, k, offset=off, **kw)
            assert gq.tobytes() == wq.tobytes() and gk.tobytes() == wk.tobytes(), off
            np.testing.assert_array_equal(q, q0)  # out of place: inputs untouched
            np.testing.assert_array_equal(k, k0)
        for _ in range(2):
            a, b = q0.copy(), k0.copy()
            ra, rb = fastpe.apply_rope_qk(a, b, offset=off, out=(a, b), **kw)
            assert ra is a and rb is b
            assert a.tobytes() == wq.tobytes() and b.tobytes() == wk.tobytes(), off
        oq, ok = np.empty_like(q), np.empty_like(k)
        assert fastpe.apply_rope_qk(q, k, offset=off, out=[oq, ok], **kw) == (oq, ok)
        assert oq.tobytes() == wq.tobytes() and ok.tobytes() == wk.tobytes()
        rq, rk = reference.apply_rope_qk(q, k, offset=off, **kw)
        assert_rope_close(gq, rq, q, layout, qs[-1], offset=off)
        assert_rope_close(gk, rk, k, layout, ks[-1], offset=off)


def test_qk_positions_per_row_and_scaling(rng):
    q = rng.standard_normal((2, 3, 4, 16))
    k = rng.standard_normal((2, 3, 2, 16))
    pos = np.array([[5, 6, 7], [100, 101, 102]])
    for kw in (
        dict(positions=pos),
        dict(offset=np.array([3, 70000])),
        dict(offset=9, scaling=YARN, rotary_dim=8),
        dict(
            positions=pos[0],
            scaling={"rope_type": "dynamic", "factor": 2.0},
            seq_len=400,
            max_position_embeddings=64,
        ),
    ):
        gq, gk = fastpe.apply_rope_qk(q, k, layout="half", **kw)
        assert gq.tobytes() == fastpe.apply_rope(q, layout="half", **kw).tobytes()
        assert gk.tobytes() == fastpe.apply_rope(k, layout="half", **kw).tobytes()


def test_qk_in_place_inside_a_fused_qkv_buffer(rng):
    qkv = rng.standard_normal((2, 1, 4 + 2 + 2, 16)).astype(np.float32)
    before = qkv.copy()
    q, k = qkv[:, :, :4], qkv[:, :, 4:6]
    for _ in range(2):
        qkv[...] = before
        fastpe.apply_rope_qk(q, k, offset=41, out=(q, k), layout="half")
        want_q = fastpe.apply_rope(before[:, :, :4], offset=41, layout="half")
        want_k = fastpe.apply_rope(before[:, :, 4:6], offset=41, layout="half")
        np.testing.assert_array_equal(q, want_q)
        np.testing.assert_array_equal(k, want_k)
        np.testing.assert_array_equal(qkv[:, :, 6:], before[:, :, 6:])  # v untouched


def _qk_bad_calls():
    q = np.ones((1, 1, 4, 16), np.float32)
    k = np.ones((1, 1, 2, 16), np.float32)
    buf = np.ones((1, 1, 6, 16), np.float32)
    ro = k.copy()
    ro.flags.writeable = False
    return [
        ("k int", q, k.astype(np.int32), {}, TypeError, "^k: x must be"),
        ("q list", q.tolist(), k, {}, TypeError, "^q: x must be a numpy"),
        ("dtypes differ", q, k.astype(np.float64), {}, TypeError, "same dtype"),
        ("batch differs", q, np.ones((2, 1, 2, 16), np.float32), {}, ValueError, "same batch"),
        ("seq differs", q, np.ones((1, 2, 2, 16), np.float32), {}, ValueError, "same batch"),
        ("dim differs", q, np.ones((1, 1, 2, 8), np.float32), {}, ValueError, "same batch"),
        (
            "k rotary_dim",
            q,
            np.ones((1, 1, 2, 4), np.float32),
            dict(rotary_dim=8),
            ValueError,
            "^k: rotary_dim",
        ),
        ("offset", q, k, dict(offset=2**53 + 1), ValueError, "^q: offset"),
        ("offset bool", q, k, dict(offset=True), TypeError, "^q: offset"),
        ("k read-only", q, ro, dict(out=(q, ro)), ValueError, "^k: x is read-only"),
        ("same array", q, q, dict(out=(q, q)), ValueError, "q and k overlap"),
        (
            "overlapping views",
            buf[:, :, :4],
            buf[:, :, 2:4],
            dict(out=(buf[:, :, :4], buf[:, :, 2:4])),
            ValueError,
            "q and k overlap",
        ),
        (
            "out[0] over k",
            q,
            buf[:, :, 4:6],
            dict(out=(buf[:, :, 2:6], np.ones_like(k))),
            ValueError,
            "out.0. and k overlap",
        ),
        (
            "out[1] over q",
            buf[:, :, :2],
            buf[:, :, 2:4],
            dict(out=(buf[:, :, :2], buf[:, :, :2])),
            ValueError,
            "overlap",
        ),
        ("out not a pair", q, k, dict(out=q), TypeError, "pair"),
        ("out of three", q, k, dict(out=(q, k, q)), TypeError, "length 3"),
        ("out None inside", q, k, dict(out=(q, None)), TypeError, r"out\[1\] is None"),
        ("out[1] dtype", q, k, dict(out=(q, k.astype(np.float64))), TypeError, "^k: out must"),
        ("layout", q, k, dict(layout="HALF"), ValueError, "^q: layout"),
    ]


@pytest.mark.parametrize(
    "what, q, k, kwargs, exc, match", _qk_bad_calls(), ids=[c[0] for c in _qk_bad_calls()]
)
@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_qk_refusals_write_nothing(what, q, k, kwargs, exc, match, impl):
    f = fastpe.apply_rope_qk if impl == "fast" else reference.apply_rope_qk
    # plans of the good calls first, in place and not
    gq, gk = np.ones((1, 1, 4, 16), np.float32), np.ones((1, 1, 2, 16), np.float32)
    for _ in range(2):
        fastpe.apply_rope_qk(gq, gk, offset=7, out=(gq, gk))
        fastpe.apply_rope_qk(gq, gk, offset=7)
    arrays = [a for a in (q, k, *kwargs.get("out", ())) if isinstance(a, np.ndarray)]
    before = [a.copy() for a in arrays]
    with pytest.raises(exc, match=match):
        f(q, k, **{"offset": 7, **kwargs})
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)


def test_qk_overlap_refused_for_a_planned_geometry():
    buf = np.zeros((1, 1, 2, 8))
    q, k = buf[:, :, :1], buf[:, :, 1:]
    fastpe.apply_rope_qk(q, k, out=(q, k), offset=2)
    fastpe.apply_rope_qk(q, k, out=(q, k), offset=2)
    same = buf[:, :, :1]  # q and k the same memory, the geometry of the planned call
    assert same.strides == k.strides
    with pytest.raises(ValueError, match="overlap"):
        fastpe.apply_rope_qk(q, same, out=(q, same), offset=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_qk_step_tells_overlap_from_adjacent(dtype, monkeypatch):
    # The decoding-step kernel compares the byte ranges of q and k (fastpe._kernels.step):
    # arrays that meet at one end are rotated, arrays that share one element are refused.
    buf = np.arange(1, 49).astype(dtype)
    q, k = buf[:16].reshape(1, 1, 2, 8), buf[16:32].reshape(1, 1, 2, 8)  # adjacent
    want = full_path(fastpe.apply_rope_qk, q.copy(), k.copy(), offset=5)
    _plans.clear()
    qq, kk = q.copy(), k.copy()
    fastpe.apply_rope_qk(qq, kk, out=(qq, kk), offset=5)  # leaves the in-place plan
    key = _plans.rope_key((q, k), True, 10000.0, "interleaved", None, None, False, None, None, None)
    assert _plans._PLANS[key][1] is not None  # the step kernel's
    start = buf.copy()
    with monkeypatch.context() as m:  # the planned path, twice (the full path would raise)
        m.setattr(rotary, "parse_rope_qk", lambda *a, **kw: pytest.fail("full path"))
        for _ in range(2):
            buf[:] = start
            fastpe.apply_rope_qk(q, k, out=(q, k), offset=5)
            assert q.tobytes() == want[0].tobytes() and k.tobytes() == want[1].tobytes()
    for qs, ks in [((0, 16), (15, 31)), ((15, 31), (0, 16)), ((8, 24), (8, 24))]:
        q, k = buf[slice(*qs)].reshape(1, 1, 2, 8), buf[slice(*ks)].reshape(1, 1, 2, 8)
        before = buf.copy()
        with pytest.raises(ValueError, match="overlap"):
            fastpe.apply_rope_qk(q, k, out=(q, k), offset=5)
        np.testing.assert_array_equal(buf, before)


def test_qk_exported():
    assert "apply_rope_qk" in fastpe.__all__
    assert "apply_rope_qk" in reference.__all__


@pytest.mark.parametrize("f", [fastpe.apply_rope, fastpe.apply_rope_qk])
def test_every_argument_is_in_the_plan_key(f):
    # A plan serves every later call with the same key: an argument left out of the key
    # would be ignored by those calls. A new argument of apply_rope or apply_rope_qk must
    # enter fastpe._plans.rope_key (its ``extra``) or keep its calls off the plan path (as
    # positions does); then add it here.
    import inspect

    keyed = {
        "base",
        "layout",
        "rotary_dim",
        "seq_axis",
        "inverse",
        "scaling",
        "max_position_embeddings",
        "seq_len",
    }
    off_plan_or_per_call = {
        "x",
        "q",
        "k",
        "positions",
        "offset",
        "out",
        "pair_axes",  # with either of these, a call takes the full path
        "inv_freq",
    }
    params = set(inspect.signature(f).parameters)
    assert params <= keyed | off_plan_or_per_call, params - keyed - off_plan_or_per_call


@pytest.mark.parametrize("f", [fastpe.apply_rope, fastpe.apply_rope_qk])
def test_multi_axis_arguments_never_reuse_a_plan(f, rng):
    """A 1-D call leaves a plan; the same call with inv_freq or pair_axes must not use it."""
    x = rng.standard_normal((1, 1, 4, 16)).astype(np.float32)
    args = (x,) if f is fastpe.apply_rope else (x, x[:, :, :2].copy())
    plain = f(*args, offset=7)
    f(*args, offset=7)  # planned by now
    freq = np.full(8, 0.5)
    got = f(*args, offset=7, inv_freq=freq)
    want = f(*args, positions=np.array([7]), inv_freq=freq)
    for g, w, p in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want, plain))):
        np.testing.assert_array_equal(g, w)
        assert not np.array_equal(g, p)
    with pytest.raises(ValueError, match="pair_axes needs positions"):
        f(*args, offset=7, pair_axes=[0] * 8)
