"""The in-memory promises of the README's "Guarantees" section, one error table per rule.

Every table runs the PUBLIC functions (fastpe's and fastpe.reference's, each on its own
inputs) and checks the exception type and that x and out are byte-identical afterwards:
TypeError for a value of the wrong type, ValueError for a right-typed value that is not
allowed, and nothing written before the call is refused.
"""

from __future__ import annotations

import sys
import textwrap
import warnings

import numpy as np
import pytest
from _util import run_python
from numpy.lib.stride_tricks import as_strided

import fastpe
from fastpe import _cases, reference
from fastpe.layout import half_to_interleaved, interleaved_to_half, layout_permutation

IMPLS = {
    "fast": (fastpe.apply_rope, fastpe.add_sinusoidal, fastpe.sinusoidal_table),
    "reference": (reference.apply_rope, reference.add_sinusoidal, reference.sinusoidal_table),
}
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}
# np.matrix warns on creation; it is one of the subclasses whose handling is promised
pytestmark = pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")


def _raw(a):
    """The bytes behind ``a`` (its whole base buffer), to compare before and after."""
    base = a
    while (
        isinstance(base, np.ndarray) and base.base is not None and isinstance(base.base, np.ndarray)
    ):
        base = base.base
    return np.asarray(base).tobytes()


def _refused(f, args, kwargs, exc, match=None, arrays=()):
    before = [_raw(a) for a in arrays]
    with pytest.raises(exc, match=match):
        f(*args, **kwargs)
    for a, b in zip(arrays, before):
        assert _raw(a) == b, "an array was written before the call was refused"


# --------------------------------------------------------------- ndarray subclasses


def _matrix():
    return np.matrix(np.random.default_rng(0).standard_normal((64, 16)))


def _memmap(tmp_path, name):
    m = np.memmap(tmp_path / f"{name}.dat", dtype=np.float64, mode="w+", shape=(64, 16))
    m[:] = np.random.default_rng(0).standard_normal((64, 16))
    return m


def _recarray():
    return np.random.default_rng(0).standard_normal((64, 16)).view(np.recarray)


SUBCLASSES = {
    "matrix": lambda tmp, name: _matrix(),
    "memmap": _memmap,
    "recarray": lambda tmp, name: _recarray(),
}


def test_matrix_add_in_place_does_not_crash():
    # add_sinusoidal(m, out=m) on an np.matrix died with signal 11: a flat view of a matrix
    # is still 2-D and the kernel wrote past it. Run in a child so a crash fails one test.
    code = textwrap.dedent("""
        import numpy as np, fastpe
        m = np.matrix(np.zeros((4096, 64)))
        r = fastpe.add_sinusoidal(m, out=m)
        assert r is m
        want = fastpe.add_sinusoidal(np.zeros((4096, 64)))
        assert np.array_equal(np.asarray(m), want)
        o = np.matrix(np.zeros((4096, 64)))
        fastpe.add_sinusoidal(np.zeros((4096, 64)), out=o)
        assert np.array_equal(np.asarray(o), want)
        print("ok")
    """)
    proc = run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("kind", sorted(SUBCLASSES))
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_subclass_handled_as_its_base_array(kind, impl, tmp_path):
    """In place, into another out and out of place: the same values as on a plain array,
    written into the caller's own object; ``out`` is returned as given."""
    rope, add, table = IMPLS[impl]
    for f in (rope, add):
        x = SUBCLASSES[kind](tmp_path, f"x{f.__name__}")
        plain = np.array(x, copy=True).view(np.ndarray)
        want = f(plain.copy())
        got = f(x)  # out of place: a new base-class array, x untouched
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(x), plain)
        assert f(x, out=x) is x  # in place: the caller's object, written
        np.testing.assert_array_equal(np.asarray(x), want)
        o = SUBCLASSES[kind](tmp_path, f"o{f.__name__}")
        assert f(plain, out=o) is o
        np.testing.assert_array_equal(np.asarray(o), want)
    o = SUBCLASSES[kind](tmp_path, "table")
    assert table(64, 16, out=o) is o
    np.testing.assert_array_equal(np.asarray(o), table(64, 16, dtype=np.float64))


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_masked_arrays_are_refused(impl):
    """fastpe would ignore a mask: a masked x, out or positions is a TypeError, unwritten."""
    rope, add, table = IMPLS[impl]
    ma = np.ma.array(np.ones((8, 4)), mask=np.eye(8, 4, dtype=bool))
    plain = np.ones((8, 4))
    for f in (rope, add):
        for args, kw in (
            ((ma,), {}),
            ((ma,), {"out": ma}),
            ((plain,), {"out": ma}),
            ((plain,), {"positions": np.ma.array(np.arange(8))}),
        ):
            _refused(f, args, kw, TypeError, "mask", arrays=[ma, plain])
    _refused(table, (8, 4), {"out": ma}, TypeError, "mask", arrays=[ma])
    # a masked view of x's own memory is not taken for out=x
    mview = np.ma.array(plain, copy=False, mask=np.eye(8, 4, dtype=bool))
    for f in (rope, add):
        _refused(f, (plain,), {"out": mview}, TypeError, "mask", arrays=[plain])


# --------------------------------------------------------------- nothing written first


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_out_is_not_written_before_its_own_checks(impl):
    rope = IMPLS[impl][0]
    x = np.ones((3, 2, 2, 4), np.float32)
    big = np.zeros((3, 2, 3, 4), np.float32)
    out = big[:, :, :2, :]
    with pytest.raises(ValueError, match=r"out.*\(96, 48, 16, 4\)") as err:
        rope(x, out=out, seq_axis=0)
    assert "x's" not in str(err.value)
    assert not big.any(), "out was written before the call was refused"


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_out_with_odd_strides_refused_unwritten(impl):
    rope, add, table = IMPLS[impl]
    raw = np.zeros(4 * 8 * 8 + 8, np.uint8)
    # float64 elements 12 bytes apart: strides that are not whole elements
    out = as_strided(raw.view(np.float64), shape=(4, 8), strides=(96, 12))
    x = np.ones((4, 8))
    for f, args in ((rope, (x,)), (add, (x,)), (table, (4, 8))):
        _refused(f, args, {"out": out}, ValueError, "stride", arrays=[raw])


# --------------------------------------------------------------- overlapping views


def _overlapping(dtype=np.float32):
    buf = np.random.default_rng(0).standard_normal(200).astype(dtype)
    return buf, as_strided(buf, (8, 16), (2 * buf.itemsize, buf.itemsize))


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_self_overlapping_views_refused(impl):
    rope, add, table = IMPLS[impl]
    buf, xs = _overlapping()
    for f in (rope, add):
        _refused(f, (xs,), {"out": xs}, ValueError, "overlap", arrays=[buf])
        _refused(f, (xs.copy(),), {"out": xs}, ValueError, "overlap", arrays=[buf])
    _refused(table, (8, 16), {"out": xs}, ValueError, "overlap", arrays=[buf])
    # read only, an overlapping x is fine: it equals the same call on a copy
    np.testing.assert_array_equal(rope(xs), rope(xs.copy()))


def test_non_overlapping_views_accepted():
    """The conservative test accepts what slicing, steps and transposes make."""
    rng = np.random.default_rng(1)
    big = rng.standard_normal((5, 12, 3, 16)).astype(np.float32)
    views = [
        big[1:4, ::3, :, 2:10],
        big[::-1, 2:9, ::2, :8],
        big.transpose(2, 0, 1, 3)[..., :8],
        np.moveaxis(big, 1, 2)[:, :, ::-2, 8:],
    ]
    for v in views:
        want = fastpe.apply_rope(v.copy(), seq_axis=1)
        assert fastpe.apply_rope(v, out=v, seq_axis=1) is v
        np.testing.assert_array_equal(v, want)


# --------------------------------------------------------------- integer edge cases

POSITION_EDGES = [
    ("int64 min", dict(positions=np.full(8, -(2**63)))),
    ("int64 max", dict(positions=np.full(8, 2**63 - 1))),
    ("uint64 above 2**63", dict(positions=np.full(8, 2**63 + 5, np.uint64))),
    ("just past 2**53", dict(positions=np.full(8, 2**53 + 1))),
    ("float above 2**53", dict(positions=np.full(8, 2.0**60))),
    ("float below -2**53", dict(positions=np.full(8, -(2.0**54)))),
    ("float past int64", dict(positions=np.full(8, 1e30))),
    ("python ints past int64", dict(positions=[2**70] * 8)),
    ("python ints past -int64", dict(positions=[0] * 7 + [-(2**64)])),
    ("offset near 2**53", dict(offset=2**53 - 3)),
    ("offset int64 min", dict(offset=np.int64(-(2**63)))),
    ("offset python huge", dict(offset=2**80)),
    ("row offsets int64 min", dict(offset=np.array([0, -(2**63)]))),
    ("row offsets uint64", dict(offset=np.array([0, 2**63 + 1], np.uint64))),
    ("row offsets + length", dict(offset=np.array([0, 2**53 - 2]))),
]


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("kw", [k for _, k in POSITION_EDGES], ids=[i for i, _ in POSITION_EDGES])
def test_positions_beyond_2_53_refused(kw, impl):
    rope, add, _ = IMPLS[impl]
    for f in (rope, add):
        x = np.ones((2, 8, 4))
        _refused(f, (x,), dict(kw, out=x), ValueError, "2\\*\\*53", arrays=[x])


def test_positions_at_the_edge_accepted():
    x = np.random.default_rng(2).standard_normal((2, 4, 4))
    for kw in (
        dict(positions=np.full(4, 2**53 - 1)),
        dict(positions=np.full(4, -(2**53))),
        dict(offset=2**53 - 4),
        dict(offset=np.array([-(2**53), 2**53 - 4])),
        dict(offset=2**53 - 3),
        dict(offset=np.array([0, 2**53 - 3])),  # last is 2**53
        dict(positions=np.full(4, 2**53 - 1, np.uint64)),
        dict(positions=np.full(4, 2.0**53)),
        dict(positions=np.array([2**53, 0, 1, 2], dtype=object)),
    ):
        err = _cases.rope_error(
            fastpe.apply_rope(x, **kw), reference.apply_rope(x, **kw), x, "interleaved", 4
        )
        assert err <= _cases.ROPE_ULP[x.dtype], (kw, err)


# --------------------------------------------------------------- small ones


def test_float16_positions_do_not_warn():
    x = np.ones((4, 8), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = fastpe.apply_rope(x, positions=np.arange(4, dtype=np.float16))
    np.testing.assert_array_equal(got, fastpe.apply_rope(x))


@pytest.mark.skipif(
    np.dtype(np.longdouble).itemsize <= 8, reason="long double is float64 on this platform"
)
@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_long_double_positions_refused(impl):
    """Rounded to float64 first, 2**53 + 1 and 3 + 2**-60 would pass as other positions."""
    rope, add, table = IMPLS[impl]
    ld = np.longdouble
    x = np.ones((2, 4, 8))
    match = "float64 or narrower"
    for bad in (ld(2**53) + 1, ld(3) + ld(2) ** -60):
        pos = np.arange(4, dtype=ld)
        pos[-1] = bad
        for f in (rope, add):
            _refused(f, (x,), {"positions": pos, "out": x}, TypeError, match, [x])
            offs = np.array([bad, 0], dtype=ld)
            _refused(f, (x,), {"offset": offs, "out": x}, TypeError, match, [x])
        _refused(table, (4, 8), {"positions": pos}, TypeError, match)
        axes = np.stack([pos, pos])
        _refused(
            rope,
            (x,),
            {"positions": axes, "pair_axes": [0, 1] * 2, "out": x},
            TypeError,
            match,
            [x],
        )


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_zero_d_array_offset_accepted(impl):
    rope, add, table = IMPLS[impl]
    x = np.ones((2, 4, 8))
    for f in (rope, add):
        np.testing.assert_array_equal(f(x, offset=np.array(5)), f(x, offset=5))
        np.testing.assert_array_equal(f(x, offset=np.int32(5)), f(x, offset=5))
        # a 0-d array is a scalar: a float one is refused like offset=5.0
        _refused(f, (x,), {"offset": np.array(5.0), "out": x}, TypeError, "offset", [x])
    np.testing.assert_array_equal(table(4, 8, offset=np.array(5)), table(4, 8, offset=5))


# One exception rule everywhere: (function, args, kwargs, exception, message fragment).
X = np.ones((2, 4, 8))
RULE_TABLE = [
    ("apply_rope", (X,), dict(base="x"), TypeError, "base"),
    ("apply_rope", (X,), dict(base=0.0), ValueError, "base"),
    ("apply_rope", (X,), dict(rotary_dim=4.0), TypeError, "rotary_dim"),
    ("apply_rope", (X,), dict(rotary_dim=5), ValueError, "rotary_dim"),
    ("apply_rope", (X,), dict(seq_axis=1.0), TypeError, "seq_axis"),
    ("apply_rope", (X,), dict(layout=0), TypeError, "layout"),
    ("apply_rope", (X,), dict(layout="neox"), ValueError, "layout"),
    ("apply_rope", (X,), dict(offset=1.5), TypeError, "offset"),
    ("apply_rope", (X,), dict(offset=True), TypeError, "offset"),
    ("apply_rope", (X,), dict(positions=np.ones(4, bool)), TypeError, "positions"),
    ("apply_rope", (X,), dict(positions=["a"] * 4), TypeError, "positions"),
    (
        "apply_rope",
        (X,),
        dict(scaling=DYNAMIC, max_position_embeddings=4, seq_len=2.0),
        TypeError,
        "seq_len",
    ),
    (
        "apply_rope",
        (X,),
        dict(scaling=DYNAMIC, max_position_embeddings=4.0),
        TypeError,
        "max_position_embeddings",
    ),
    (
        "apply_rope",
        (X,),
        dict(scaling=DYNAMIC, max_position_embeddings=4, seq_len=0),
        ValueError,
        "seq_len",
    ),
    (
        "apply_rope",
        (X,),
        dict(scaling=DYNAMIC, max_position_embeddings=0),
        ValueError,
        "max_position_embeddings",
    ),
    ("apply_rope", (X,), dict(seq_len="8"), TypeError, "seq_len"),
    ("apply_rope", (X,), dict(max_position_embeddings=-1), ValueError, "max_position_embeddings"),
    ("apply_rope", (X,), dict(scaling="yarn"), TypeError, "scaling"),
    ("add_sinusoidal", (X,), dict(base="x"), TypeError, "base"),
    ("add_sinusoidal", (X,), dict(layout=0), TypeError, "layout"),  # (None: the default)
    ("sinusoidal_table", (4, 8), dict(dtype="complex64"), TypeError, "dtype"),
    ("sinusoidal_table", (4, 8.0), {}, TypeError, "dim"),
    ("sinusoidal_table", (4.0, 8), {}, TypeError, "seq_len"),
    ("sinusoidal_table", (-1, 8), {}, ValueError, "seq_len"),
    ("sinusoidal_table", (4, 8), dict(out=np.zeros((4, 8), np.int32)), TypeError, "out"),
]


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize(
    "name, args, kwargs, exc, match",
    RULE_TABLE,
    ids=[f"{r[0]}-{i}" for i, r in enumerate(RULE_TABLE)],
)
def test_one_exception_rule(name, args, kwargs, exc, match, impl):
    rope, add, table = IMPLS[impl]
    f = {"apply_rope": rope, "add_sinusoidal": add, "sinusoidal_table": table}[name]
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    arrays = [a for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)]
    _refused(f, args, kwargs, exc, match, arrays=arrays)
    if args and isinstance(args[0], np.ndarray):  # in place too
        _refused(f, args, dict(kwargs, out=args[0]), exc, match, arrays=arrays)


@pytest.mark.parametrize("f", [interleaved_to_half, half_to_interleaved])
def test_layout_converters_follow_the_rule(f):
    with pytest.raises(TypeError, match="rotary_dim"):
        f(np.ones(8), rotary_dim=4.0)
    with pytest.raises(TypeError, match="axis"):
        f(np.ones(8), axis=1.0)
    with pytest.raises(ValueError, match="rotary_dim"):
        f(np.ones(8), rotary_dim=3)
    with pytest.raises(TypeError, match="to"):
        layout_permutation(4, to=1)


def test_warmup_dtypes_follow_the_rule():
    with pytest.raises(TypeError, match="dtypes"):
        fastpe.warmup(dtypes=["int8"])
    with pytest.raises(TypeError, match="dtypes"):
        fastpe.warmup(dtypes="float32")


def test_messages_name_the_argument_the_value_and_the_fix():
    with pytest.raises(TypeError) as e:
        fastpe.apply_rope(X, rotary_dim=4.0)
    assert "rotary_dim" in str(e.value) and "4.0" in str(e.value)
    assert "use rotary_dim=4" in str(e.value)
    _, xs = _overlapping()
    with pytest.raises(ValueError) as e:
        fastpe.apply_rope(xs, out=xs)
    assert "x" in str(e.value) and "(8, 4)" in str(e.value) and ".copy()" in str(e.value)
    with pytest.raises(ValueError) as e:
        fastpe.apply_rope(X, positions=np.full(4, -(2**63)))
    assert str(-(2**63)) in str(e.value)


def test_out_may_be_a_writeable_view_of_a_read_only_x():
    # out names the same elements as x: the work is in place, written through out
    a = np.random.default_rng(4).standard_normal((2, 4, 8)).astype(np.float32)
    want = fastpe.apply_rope(a)  # the same call out of place
    ro = a.view()
    ro.flags.writeable = False
    assert fastpe.apply_rope(ro, out=a) is a
    np.testing.assert_array_equal(a, want)


def test_scaling_with_empty_batch_of_offsets():
    x = np.ones((0, 4, 8))
    kw = dict(
        offset=np.zeros(0, int),
        scaling={"rope_type": "dynamic", "factor": 2.0},
        max_position_embeddings=16,
    )
    assert fastpe.apply_rope(x, **kw).shape == reference.apply_rope(x, **kw).shape == (0, 4, 8)


# --------------------------------------------------------------- angles of frequencies above 1


def _limit(base: float, dim: int) -> int:
    from fastpe._freq import angle_limit, inv_freq_dd

    return angle_limit(*inv_freq_dd(base, dim))


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_angles_beyond_the_frequencies_precision_refused(impl):
    """A frequency above 1 carried in double-double (a base below 1) gives the angle to
    float64's precision only while ``|p * w| <= 2**53``: beyond, the call is refused,
    before anything is written; at the limit it is accepted."""
    rope, add, table = IMPLS[impl]
    lim = _limit(0.5, 8)
    assert 2**52 < lim < 2**53
    match = r"make angles beyond 2\*\*53"
    x = np.ones((2, 4, 8))
    for f in (rope, add):
        _refused(f, (x,), {"base": 0.5, "offset": lim - 2, "out": x}, ValueError, match, [x])
        _refused(f, (x,), {"base": 0.5, "offset": -lim - 1, "out": x}, ValueError, match, [x])
        pos = np.array([[0, 1, 2, lim + 1]] * 2)
        _refused(f, (x,), {"base": 0.5, "positions": pos, "out": x}, ValueError, match, [x])
        f(x.copy(), base=0.5, offset=lim - 3)  # the last position at the limit
        f(x.copy(), base=1.0, offset=2**53 - 3)  # frequencies of at most 1: up to 2**53
    _refused(table, (), {"dim": 8, "positions": [1], "base": 1e-300}, ValueError, match)
    table(dim=8, positions=[0], base=1e-300)  # the angle at 0 is exact
    xa = np.ones((2, 4, 8))
    axes = np.stack([np.arange(4), np.arange(4) + lim])
    _refused(
        rope,
        (xa,),
        {"base": 0.5, "positions": axes, "pair_axes": [0, 1] * 2, "out": xa},
        ValueError,
        match,
        [xa],
    )


def test_angles_beyond_the_frequencies_precision_refused_by_the_conventions():
    match = r"make angles beyond 2\*\*53"
    for mod in (fastpe, reference):
        with pytest.raises(ValueError, match=match):  # w up to about 743 (scale=1000)
            mod.timestep_embedding([2.0**52], 64, scale=1000)
        mod.timestep_embedding([999.5, 2.0**40], 64, scale=1000)
        with pytest.raises(ValueError, match=match):  # tensor2tensor's w = min_timescale * ...
            mod.sinusoidal_table(
                4, 8, convention="tensor2tensor", min_timescale=1e6, max_timescale=1e7, offset=2**40
            )
        with pytest.raises(ValueError, match=match):
            mod.grid_sinusoidal((4, 4), 16, base=1e-300)
    # exact frequencies (given as float64) give exact angles at any position
    fastpe.apply_rope(np.ones((4, 8)), inv_freq=[1e3, 1e6, 1.0, 0.5], offset=2**53 - 3)


def test_angles_near_the_limit_within_the_float64_bound():
    """At the largest position allowed (base 0.5, dim 8: w up to 1.68), the table and the
    rotation stay within the float64 bounds of "Accuracy", against mpmath."""
    mpmath = pytest.importorskip("mpmath")
    lim = _limit(0.5, 8)
    pos = np.array([lim, lim - 1, -lim, 2**52 + 12345])
    got = fastpe.sinusoidal_table(dim=8, positions=pos, base=0.5, dtype=np.float64)
    with mpmath.workdps(80):
        for r, p in enumerate(pos):
            for i in range(4):
                w = mpmath.mpf(0.5) ** (mpmath.mpf(-2 * i) / 8)
                for j, v in enumerate((mpmath.sin(int(p) * w), mpmath.cos(int(p) * w))):
                    err = abs(mpmath.mpf(float(got[r, 2 * i + j])) - v) * 2**52
                    assert err <= 4, (p, i, j, float(err))


def test_plan_refuses_an_offset_beyond_the_angle_limit():
    """A decoding loop's plan allows the offsets that the full path allows, and no more."""
    lim = _limit(0.5, 8)
    x = np.zeros((1, 1, 2, 8), np.float32)
    for off in (5, 6, lim):  # the first makes the plan
        fastpe.apply_rope(x, out=x, base=0.5, offset=off)
    for off in (lim + 1, -lim - 1):
        before = x.copy()
        with pytest.raises(ValueError, match=r"make angles beyond 2\*\*53"):
            fastpe.apply_rope(x, out=x, base=0.5, offset=off)
        assert np.array_equal(x, before)


def test_angle_limit_is_the_exact_floor():
    """``angle_limit`` is ``floor(2**53 / w)`` exactly (a float quotient could round up)."""
    from fractions import Fraction

    from fastpe._freq import angle_limit, inv_freq_dd

    for base in (0.5, 0.3, 1e-3, 0.77, 1e-6):
        wh, wl = inv_freq_dd(base, 16)
        lim = angle_limit(wh, wl)
        w = Fraction(float(np.abs(wh[wl != 0]).max()))
        assert lim * w <= 2**53 < (lim + 1) * w, base


@pytest.mark.parametrize(
    ("base", "dim"),
    [(10000.0, 128), (10000.0, 65536), (500000.0, 4096), (0.5, 8), (1e-200, 64), (3.7, 1000)],
)
def test_double_double_frequencies_against_mpmath(base, dim):
    """The frequencies ``base**(-2i/dim)`` as double-double pairs (hi + lo) are within
    2**-104 of the exact value, relative, for every pair: the bound the angle limit
    (``fastpe._freq.angle_limit``) and the accuracy guarantees rest on. A large dim checks
    the product chain that builds them (``w_i = r**i``)."""
    mpmath = pytest.importorskip("mpmath")
    from fastpe._freq import inv_freq_dd

    hi, lo = inv_freq_dd(base, dim)
    n = dim // 2
    picks = sorted({0, 1, 2, n // 3, n // 2, n - 2, n - 1} | set(range(0, n, max(1, n // 64))))
    with mpmath.workdps(60):
        b = mpmath.mpf(base)
        for i in picks:
            exact = b ** (mpmath.mpf(-2 * i) / dim)
            got = mpmath.mpf(float(hi[i])) + mpmath.mpf(float(lo[i]))
            assert abs(got - exact) <= exact * mpmath.mpf(2) ** -104, (i, float(exact))
            assert abs(lo[i]) <= np.spacing(hi[i]) / 2  # a normalised pair


@pytest.mark.parametrize(
    ("n", "base", "shift", "scale"),
    [
        (160, 10000.0, 1.0, 1.0),
        (128, 10000.0, 0.0, 1000.0),
        (4096, 1e4, 0.5, 1.0),
        (3, 7.5, 1.0, 2.5),
    ],
)
def test_spaced_frequencies_against_mpmath(n, base, shift, scale):
    """The conventions' frequencies ``scale * base**(-i / (n - shift))`` as double-double
    pairs: within 2**-104 of the exact value, relative, for every one."""
    mpmath = pytest.importorskip("mpmath")
    from fastpe._spacing import spaced_dd

    hi, lo, _ = spaced_dd(n, base, shift, scale)
    with mpmath.workdps(60):
        for i in sorted({0, 1, n // 2, n - 1} | set(range(0, n, max(1, n // 64)))):
            exact = mpmath.mpf(scale) * mpmath.mpf(base) ** (
                -mpmath.mpf(i) / (n - mpmath.mpf(shift))
            )
            got = mpmath.mpf(float(hi[i])) + mpmath.mpf(float(lo[i]))
            assert abs(got - exact) <= exact * mpmath.mpf(2) ** -104, (i, float(exact))
