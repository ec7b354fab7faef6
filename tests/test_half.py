"""float16 and bfloat16: conversions, accuracy against the reference and mpmath, layouts,
errors.

16-bit arrays are computed in float32 (tables: float64) from the exact angles and rounded
once, to nearest even, into the 16-bit dtype. The bounds, in ulps of the 16-bit dtype, are
``fastpe._cases.HALF_*_ULP`` against the reference; tables are also held to half an ulp
(plus float64's own error) of mpmath's exact values. The searches for the worst case run
over millions of values built to sit near rounding ties, not one lucky seed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _util import launches, pairs, run_python

import fastpe
from fastpe import _cases, reference
from fastpe._flag import ON

ml_dtypes = pytest.importorskip("ml_dtypes")
numba = pytest.importorskip("numba")

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
HALF = [F16, BF16]
IDS = ["float16", "bfloat16"]
LAYOUTS = ["interleaved", "half"]
HALF_INVERSE_ULP = 1.0 + 2.0**-9  # two roundings of half an ulp, plus float32's error
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}


def bits(a):
    return np.asarray(a).view(np.uint16)


def rope_norm_error(got, want, x, layout, rot, dtype, scale=1.0):
    """``|got - want|`` per pair, in ulps (of ``dtype``) of the pair norm of ``x`` times
    ``scale`` (the attention factor)."""
    g1, g2 = pairs(np.asarray(got, np.float64), layout, rot)
    w1, w2 = pairs(np.asarray(want, np.float64), layout, rot)
    x1, x2 = pairs(np.asarray(x, np.float64), layout, rot)
    u = _cases._spacing(np.hypot(x1, x2) * scale, dtype)
    return np.maximum(np.abs(g1 - w1), np.abs(g2 - w2)) / u


# --------------------------------------------------------------------------- conversions


@pytest.fixture(scope="module")
def conv():
    from fastpe._kernels import half

    @numba.njit
    def to_f32(h, out, bf16):
        for i in range(h.size):
            out[i] = half.to_f32(h[i], bf16)

    @numba.njit
    def from_f32(f, out, bf16):
        for i in range(f.size):
            out[i] = half.from_f32(f[i], bf16)

    @numba.njit
    def from_f64(v, out, bf16):
        for i in range(v.size):
            out[i] = half.from_f64(v[i], bf16)

    return to_f32, from_f32, from_f64


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_every_16_bit_value_converts_exactly_to_float32(conv, dt):
    h = np.arange(2**16, dtype=np.uint16)
    got = np.empty(h.size, np.float32)
    conv[0](h, got, dt == BF16)
    want = h.view(dt).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def _float32_near_ties(low_bits: int) -> np.ndarray:
    """float32 values of every sign, exponent and upper significand, with the bits below
    the 16-bit type's last one set to each pattern around a tie (and random ones)."""
    rng = np.random.default_rng(7)
    tie = 1 << (low_bits - 1)
    patterns = np.array(
        [0, 1, tie - 1, tie, tie + 1, (1 << low_bits) - 1, *rng.integers(0, 1 << low_bits, 3)],
        dtype=np.uint32,
    )
    upper = np.arange(2 ** (32 - low_bits), dtype=np.uint32) << np.uint32(low_bits)
    return (upper[:, None] | patterns[None, :]).reshape(-1).view(np.float32)


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_float32_rounds_to_nearest_even_nan_kept(conv, dt):
    """Every exponent and upper significand, at, around and between ties: as NumPy
    (float16) and ml_dtypes (bfloat16) round, which is to nearest even."""
    f = _float32_near_ties(16 if dt == BF16 else 13)
    got = np.empty(f.size, np.uint16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(dt)
    conv[1](f, got, dt == BF16)
    nan = np.isnan(f)
    assert np.isnan(got.view(dt)[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(got[~nan], bits(want)[~nan])


def test_rotation_rounding_of_bfloat16_same_bits_as_the_general_one(conv):
    """The rounding of a rotation's results (``half.finite_from_f32``, and the interleaved
    rows' pairs packed into one 32-bit word, ``half._bf16_pair_rotated``) drops the NaN
    select of ``from_f32``: the bits are the same for every finite float32 (at, around and
    between bfloat16 ties) and every quiet NaN whose bits below the high 16 are zero, the
    only NaNs a rotation of bfloat16 values by finite cos/sin computes (arithmetic's
    results: a widened input's NaN, quieted, or the CPU's default NaN), kept with their
    sign and high payload."""
    from fastpe._kernels import half

    @numba.njit
    def both(f, one, packed):
        for i in range(f.size):
            one[i] = half.finite_from_f32(f[i], True)
        for i in range(0, f.size - 1, 2):
            packed[i // 2] = half._bf16_pair_rotated(f[i], f[i + 1])

    f = _float32_near_ties(16)
    u = f.view(np.uint32)
    nan = np.isnan(f)
    f = f[~nan | ((u & np.uint32(0x40FFFF)) == 0x400000)]  # NaNs: quiet, low half zero
    f = f[: f.size // 2 * 2]
    want = np.empty(f.size, np.uint16)
    conv[1](f, want, True)
    one = np.empty(f.size, np.uint16)
    packed = np.empty(f.size // 2, np.uint32)
    both(f, one, packed)
    np.testing.assert_array_equal(one, want)
    np.testing.assert_array_equal(packed & 0xFFFF, want[0::2])  # the first in the low half
    np.testing.assert_array_equal(packed >> 16, want[1::2])
    kept = f.view(np.uint32)[np.isnan(f)] >> np.uint32(16)
    np.testing.assert_array_equal(one[np.isnan(f)], kept.astype(np.uint16))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bfloat16_rope_of_infinities_and_nans(layout):
    """NaN inputs (quiet and signalling, every sign and a spread of payloads), infinities,
    zeros, subnormals and the largest values: each result is NaN exactly where the
    reference's is (an infinity times a zero sine, say), and then a quiet NaN; the same
    infinity where the reference's is infinite; pairs of finite results within the bound of
    the reference (``_cases.HALF_ROPE_ULP`` of the pair norm)."""
    nans = [0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0xFFFF, 0x7FA5, 0xFFDA]
    others = [0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80]
    specials = np.array(nans + others, np.uint16)
    rng = np.random.default_rng(11)
    x = rng.choice(specials, size=(3, 64, 2, 32)).view(BF16)
    got = fastpe.apply_rope(x, layout=layout)
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs, infinities
        want = reference.apply_rope(x, layout=layout)
        g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    # each NaN the default one or an input of its pair's, quieted, its payload kept (its
    # sign may flip: the rotation negates a product)
    x1, x2 = (bits(v) & 0x7FFF | 0x40 for v in pairs(x, layout, 32))
    for out in pairs(bits(got), layout, 32):
        nan = np.isnan(out.view(BF16).astype(np.float32))
        mag = out & 0x7FFF
        assert ((mag == 0x7FC0) | (mag == x1) | (mag == x2))[nan].all()
        assert nan.any()
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf])
    assert np.isnan(g).any() and inf.any()
    finite = np.isfinite(pairs(w, layout, 32)[0]) & np.isfinite(pairs(w, layout, 32)[1])
    with np.errstate(invalid="ignore", over="ignore"):
        err = rope_norm_error(got, want, x, layout, 32, BF16)
    assert (err[finite] <= _cases.HALF_ROPE_ULP).all()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(3, 64, 32), (64, 32)], ids=["batch rows", "one row"])
def test_bfloat16_add_of_infinities_and_nans(layout, shape):
    """``add_sinusoidal`` on the inputs of the test above (its sums round as the rotation's
    results do, without the NaN select): NaN exactly where the input is, then a quiet NaN
    with the input's sign; infinities kept; the rest within ``_cases.HALF_ADD_ULP`` of the
    reference; channels of another stride (the general loop) the same bits."""
    nans = [0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0xFFFF, 0x7FA5, 0xFFDA]
    others = [0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80]
    specials = np.array(nans + others, np.uint16)
    x = np.random.default_rng(12).choice(specials, size=shape).view(BF16)
    got = fastpe.add_sinusoidal(x, layout=layout)
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs, infinities
        want = reference.add_sinusoidal(x, layout=layout)
        g, w, x64 = got.astype(np.float64), want.astype(np.float64), x.astype(np.float64)
    nan = np.isnan(x64)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(np.isnan(w), nan)
    np.testing.assert_array_equal(bits(got)[nan], bits(x)[nan] | 0x40)  # quiet, sign kept
    inf = np.isinf(x64)
    np.testing.assert_array_equal(g[inf], x64[inf])
    ok = ~nan & ~inf
    assert _cases.add_error(got[ok], want[ok]) <= _cases.HALF_ADD_ULP
    t = x.T.copy().T  # strided channels
    fastpe.add_sinusoidal(t, layout=layout, out=t)
    np.testing.assert_array_equal(bits(t), bits(got))


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_float64_rounds_once(conv, dt):
    """float64 values just around 16-bit ties (where rounding through float32 first would
    go wrong) round as exact arithmetic says: the kernels' and the reference's rounding."""
    rng = np.random.default_rng(3)
    grid = rng.standard_normal(20000).astype(dt).astype(np.float64)
    nxt = np.nextafter(grid.astype(dt), np.asarray(np.inf, dt)).astype(np.float64)
    nxt = np.where(np.isfinite(nxt), nxt, grid)
    mid = (grid + nxt) / 2  # exact in float64: the tie
    eps = np.abs(mid) * 2.0**-40
    v = np.concatenate(
        [
            mid,
            mid + eps,
            mid - eps,
            rng.standard_normal(20000),
            rng.standard_normal(2000) * 1e-6,
            [0.0, -0.0, np.inf, -np.inf],
        ]
    )
    got = np.empty(v.size, np.uint16)
    conv[2](v, got, dt == BF16)
    ref = reference.round_to(v, dt)
    np.testing.assert_array_equal(got, bits(ref))
    # the reference itself at the constructed points: the nearer neighbour, the even one
    # at a tie
    up, down = bits(nxt.astype(dt)), bits(grid.astype(dt))
    n, ok = grid.size, nxt != grid
    np.testing.assert_array_equal(bits(ref[n : 2 * n])[ok], up[ok])
    np.testing.assert_array_equal(bits(ref[2 * n : 3 * n])[ok], down[ok])
    even = np.where(up % 2 == 0, up, down)
    np.testing.assert_array_equal(bits(ref[:n])[ok], even[ok])


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_table_rounding_equals_the_general_one(dt):
    """The tables' fast rounding (to nearest into float32, then into 16 bits) gives
    :func:`from_f64`'s bits wherever ``round16_risky`` does not flag the float32: at ties of
    the 16-bit type, next to them, and at the edges of the range; it flags every float32
    on a 16-bit midpoint (where rounding twice can differ), every magnitude at or below
    the floor (float16's smallest normal; bfloat16's fix-up threshold), and nothing else."""
    from fastpe._kernels import half

    @numba.njit
    def both(v, bf16):
        out = np.empty((v.size, 3), np.int64)
        for i in range(v.size):
            f = np.float32(v[i])
            out[i, 0] = half.finite_from_f32(f, bf16)
            out[i, 1] = half.from_f64(v[i], bf16)
            out[i, 2] = half.round16_risky(f, bf16)
        return out

    bf16 = dt == BF16
    drop = 45 if bf16 else 42  # float64 significand bits below the 16-bit type's last one
    rng = np.random.default_rng(5)
    # points of the 16-bit grid over the range of table values, both signs
    sign = rng.choice([-1.0, 1.0], 10**5)
    v16 = np.exp2(rng.uniform(-21, 1, 10**5)) * sign
    on_grid = v16.view(np.uint64) & ~np.uint64((1 << drop) - 1)
    tie = np.uint64(1 << (drop - 1))
    tiny = np.uint64(1 << 20)  # within float32's half ulp of a tie: float32 lands on it
    v = np.concatenate(
        [
            *(
                (on_grid + d).view(np.float64)
                for d in (tie - np.uint64(1), tie, tie + np.uint64(1), tie - tiny, tie + tiny)
            ),
            rng.uniform(-1, 1, 10**5),
            np.exp2(rng.uniform(-30, 1, 10**5)) * rng.choice([-1.0, 1.0], 10**5),
            np.nextafter(np.exp2(np.arange(-30.0, 1.0)), 0.0),
            -np.nextafter(np.exp2(np.arange(-30.0, 1.0)), 0.0),
            np.array([0.0, -0.0, 1.0, -1.0, 2.0**-14, 2.0**-20, 2.0**-126, 5e-324]),
        ]
    )
    got = both(v, bf16)
    f = v.astype(np.float32)
    u = f.view(np.uint32)
    mask, mid = (0xFFFF, 0x8000) if bf16 else (0x1FFF, 0x1000)
    floor = 2.0**-20 if bf16 else 2.0**-14
    want_flag = ((u & mask) == mid) | (np.abs(f.astype(np.float64)) <= floor)
    np.testing.assert_array_equal(got[:, 2] != 0, want_flag)
    ok = got[:, 2] == 0
    np.testing.assert_array_equal(got[ok, 0], got[ok, 1])
    # the flags are needed: next to ties, rounding twice differs from rounding once
    assert (got[~ok, 0] != got[~ok, 1]).any()


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_table_values_on_midpoints_written_again(dt, layout):
    """A table large enough to hold float32 values on 16-bit midpoints (about one in 8,192
    float16 values, one in 65,536 bfloat16 ones): contiguous rows (float32 rounding, the
    flagged pairs written again) equal strided channels (the general path), bit for bit."""
    kw = dict(positions=np.arange(4096) * 7919 + 2**33, layout=layout)
    fast = fastpe.sinusoidal_table(dim=512, dtype=dt, **kw)
    parent = np.zeros((512, 4096 + 2), dt)
    out = parent[:, 1:4097].T  # strided channels: the general path only
    fastpe.sinusoidal_table(dim=512, out=out, **kw)
    np.testing.assert_array_equal(bits(fast), bits(out))
    f = reference.sinusoidal_table(dim=512, dtype=np.float64, **kw).astype(np.float32)
    mask, mid = (0xFFFF, 0x8000) if dt == BF16 else (0x1FFF, 0x1000)
    assert np.count_nonzero((f.view(np.uint32) & mask) == mid) >= 4  # the values in question


# --------------------------------------------------------------------------- apply_rope


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "shape, kw",
    [
        ((7, 8), {}),
        ((2, 9, 16), dict(offset=np.array([3, 2**40]))),
        ((2, 5, 3, 64), dict(offset=12345)),
        ((2, 5, 3, 64), dict(positions=np.arange(10).reshape(2, 5) * 7919)),
        ((1, 33, 2, 32), dict(rotary_dim=16, inverse=True, offset=2**33)),
        ((1, 6, 2, 2), {}),
        ((2, 8, 1, 64), dict(offset=np.array([5, 70000]))),
    ],
)
def test_rope_within_bound_of_reference(dt, layout, shape, kw, rng):
    x = (rng.standard_normal(shape) * 3).astype(dt)
    before = bits(x).copy()
    got = fastpe.apply_rope(x, layout=layout, **kw)
    want = reference.apply_rope(x, layout=layout, **kw)
    np.testing.assert_array_equal(bits(x), before)  # out=None leaves x alone
    assert got.dtype == dt and want.dtype == dt
    rot = kw.get("rotary_dim", shape[-1])
    err = rope_norm_error(got, want, x, layout, rot, dt)
    assert err.max() <= _cases.HALF_ROPE_ULP, (dt, layout, shape, err.max())
    np.testing.assert_array_equal(bits(got)[..., rot:], bits(x)[..., rot:])
    inplace = x.copy()
    assert fastpe.apply_rope(inplace, layout=layout, out=inplace, **kw) is inplace
    np.testing.assert_array_equal(bits(inplace), bits(got))


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("dim", [2, 4, 6, 8, 16, 32, 34, 64, 66])
def test_short_rows_match_row_by_row(dt, dim, monkeypatch, rng):
    """One head of short rows back to back (``fastpe._engine.short_run``, up to 128 bytes a
    row in arrays under the cache counted on, 64 in larger ones) has its cos/sin filled a
    group of positions at a time (the same float32 cache) and each batch row's block
    rotated as one run of pairs (interleaved, or one pair) or row by row (half layout): the
    row-by-row walk's bits (the rotation's fused multiply-adds are
    written out, ``fastpe._kernels.turn``; when LLVM picked which product to fuse, 1 value
    of the 7224 of a bfloat16 dim-8 call differed by one unit, depending on which compiled
    specializations were there first), for shared, per-row and far offsets,
    position arrays (whose positions are taken one at a time) and the inverse, batch rows
    reversed or apart, on the threads; dim 66 (132 bytes) takes the row loop, and so do
    dims 34 and 64 in a larger array or with positions per batch row."""
    from fastpe import _engine
    from fastpe._kernels import half

    seen = launches(monkeypatch, half.rope16_kernel, lambda k, args: args[-2])  # short
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)  # on the threads, several workers
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    x = (rng.standard_normal((3, 301, dim)) * 3).astype(dt)
    layouts = ["interleaved", "half"]
    asks = [
        {},
        {"offset": 2**40 + 7},
        {"offset": np.array([0, 5, 2**33])},
        {"positions": rng.integers(0, 2**31, (3, 301))},
        {"positions": np.arange(301)[::-1] * 3},
        {"inverse": True, "offset": 1000},
    ]
    wider = np.zeros((6, 301, dim), dt)[::2]  # batch rows 2 apart
    wider[...] = x
    views = [x, x[::-1], wider]  # (and batch rows in reverse)
    for layout in layouts:
        for kw in asks:
            for v in views:
                seen.clear()
                got = fastpe.apply_rope(v, layout=layout, **kw)
                # over 64 bytes only where batch rows share positions
                per_row = np.ndim(kw.get("offset", 0)) == 1 or np.ndim(kw.get("positions")) == 2
                short = dim <= 32 or (dim != 66 and not per_row)
                assert seen == [ON if short else None], (layout, kw)
                if dim in (34, 64):  # a larger array: the row loop
                    with monkeypatch.context() as m:
                        m.setattr(_engine, "_CACHE_SHARE", 1)
                        larger = fastpe.apply_rope(v, layout=layout, **kw)
                    assert seen[-1] is None
                    np.testing.assert_array_equal(bits(larger), bits(got))
                with monkeypatch.context() as m:
                    m.setattr(_engine, "short_run", lambda *a: False)
                    want = fastpe.apply_rope(v, layout=layout, **kw)
                assert seen[-1] is None
                np.testing.assert_array_equal(bits(got), bits(want))
                inplace = v.copy()
                fastpe.apply_rope(inplace, layout=layout, out=inplace, **kw)
                np.testing.assert_array_equal(bits(inplace), bits(got))


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rope_worst_case_search(dt, layout):
    """A million pairs at many positions and frequencies, magnitudes across the 16-bit
    range: fastpe within HALF_ROPE_ULP of the reference and within half an ulp (plus
    float32's error) of the unrounded float64 rotation."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 128, 128)) * np.exp(rng.uniform(-8, 8, (64, 1, 1)))
    x = x.astype(dt)
    kw = dict(layout=layout, offset=np.arange(64) * 999331)
    got = fastpe.apply_rope(x, **kw)
    want = reference.apply_rope(x, **kw)
    err = rope_norm_error(got, want, x, layout, 128, dt)
    assert err.max() <= _cases.HALF_ROPE_ULP, err.max()
    assert err.max() == _cases.HALF_ROPE_ULP  # the search reaches the bound: it is tight
    # apply then inverse: two roundings, within an ulp of the norm of the original pair
    back = fastpe.apply_rope(got, inverse=True, **kw)
    assert rope_norm_error(back, x, x, layout, 128, dt).max() <= HALF_INVERSE_ULP
    # the unrounded rotation, in float64 from the reference's cos/sin
    exact = reference.apply_rope(x.astype(np.float64), **kw)
    err_exact = rope_norm_error(got, exact, x, layout, 128, dt)
    slack = 2.0**-10 if dt == F16 else 2.0**-13  # float32's error in 16-bit ulps
    assert err_exact.max() <= 0.5 + slack, err_exact.max()


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_rope_scaling_in_ulps_of_the_scaled_norm(dt, rng):
    x = rng.standard_normal((2, 64, 4, 64)).astype(dt)
    kw = dict(layout="half", scaling=YARN, offset=9000)
    got = fastpe.apply_rope(x, **kw)
    want = reference.apply_rope(x, **kw)
    factor = 0.1 * np.log(4.0) + 1.0
    err = rope_norm_error(got, want, x, "half", 64, dt, scale=factor)
    assert err.max() <= _cases.HALF_ROPE_ULP, err.max()
    back = fastpe.apply_rope(got, inverse=True, **kw)
    # two roundings into 16 bits apart: within 2 ulps of the norm of the original pair
    assert rope_norm_error(back, x, x, "half", 64, dt).max() <= 2.0


VIEWS = {  # (parent shape, the view of it that is rotated, keywords)
    "sliced": ((4, 13, 3, 20), lambda p: p[1:4, 2:12, :2, 2:18], dict(offset=5)),
    "reversed": ((3, 10, 2, 16), lambda p: p[::-1, ::-1], dict(offset=np.array([1, 2, 3]))),
    "qkv": ((2, 10, 3, 2, 16), lambda p: p[:, :, 0], dict(offset=np.array([1, 400]))),
    "bhsd": ((2, 3, 10, 16), lambda p: p, dict(seq_axis=2, offset=77)),
    "tokens": ((10, 3, 16), lambda p: p, dict(seq_axis=0, positions=np.arange(10) * 3)),
    "partial": ((2, 10, 24), lambda p: p[..., :20], dict(rotary_dim=8, layout="half")),
}


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("where", sorted(VIEWS))
def test_rope_views_in_place(dt, where, rng):
    """A view is rotated in place, as its copy would be, and nothing outside it changes."""
    shape, view, kw = VIEWS[where]
    parent = rng.standard_normal(shape).astype(dt)
    expected = parent.copy()
    view(expected)[...] = fastpe.apply_rope(view(parent).copy(), **kw)
    x = view(parent)
    assert fastpe.apply_rope(x, out=x, **kw) is x
    np.testing.assert_array_equal(bits(parent), bits(expected))


# --------------------------------------------------------------------------- tables


@pytest.fixture(scope="module")
def exact_sample():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 200
    rng = np.random.default_rng(2024)
    near_pi = [355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351]
    positions = np.r_[rng.integers(0, 2**40, 40), rng.integers(0, 2**16, 40), near_pi, 0, 1]
    dim, base = 32, 10000.0
    w = [mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / dim) for i in range(dim // 2)]
    exact = np.empty((len(positions), dim), dtype=object)
    for r, p in enumerate(positions):
        for i, wi in enumerate(w):
            exact[r, 2 * i] = mpmath.sin(int(p) * wi)
            exact[r, 2 * i + 1] = mpmath.cos(int(p) * wi)
    return mpmath, positions, dim, base, exact


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("where", ["odd element", "odd byte"])
def test_bfloat16_rows_off_their_words(layout, where, rng):
    """bfloat16 interleaved rows rotate each pair as one 32-bit word: rows that start at an
    odd element of their buffer (words 2 bytes past a multiple of 4) or at an odd byte
    (elements off their own alignment) give the bits of a contiguous copy, as the half
    layout does."""
    shape = (2, 7, 3, 64)
    x = (rng.standard_normal(shape) * 3).astype(BF16)
    want = fastpe.apply_rope(x, layout=layout, offset=5)
    if where == "odd element":
        v = np.zeros(x.size + 1, BF16)[1:].reshape(shape)
    else:
        raw = np.zeros(x.nbytes + 1, np.uint8)
        v = np.frombuffer(raw.data, dtype=BF16, count=x.size, offset=1).reshape(shape)
        assert not v.flags.aligned
    v[...] = x
    assert fastpe.apply_rope(v, out=v, layout=layout, offset=5) is v
    np.testing.assert_array_equal(bits(v), bits(want))


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_table_against_mpmath(exact_sample, dt, impl):
    """Correctly rounded but for float64's own error: within half an ulp plus 2**-20."""
    mpmath, positions, dim, base, exact = exact_sample
    f = fastpe.sinusoidal_table if impl == "fast" else reference.sinusoidal_table
    got = f(positions=positions, dim=dim, base=base, dtype=dt)
    assert got.dtype == dt
    g = got.astype(np.float64)
    err = np.empty(got.shape)
    for idx in np.ndindex(got.shape):
        e = exact[idx]
        u = float(_cases._spacing(float(e), dt))
        err[idx] = float(abs(mpmath.mpf(float(g[idx])) - e)) / u
    r, c = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err.max() <= 0.5 + 2.0**-20, (impl, dt, err.max(), positions[r], c)


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_table_worst_case_search(dt, layout):
    """Two million values over small and huge positions: fastpe within HALF_TABLE_ULP of
    the reference (they differ only where a value lies within float64's error of a tie)."""
    for offset in (0, 2**24, 2**45 + 12345):
        got = fastpe.sinusoidal_table(8192, 128, dtype=dt, layout=layout, offset=offset)
        want = reference.sinusoidal_table(8192, 128, dtype=dt, layout=layout, offset=offset)
        err = _cases.table_error(got, want)
        assert err <= _cases.HALF_TABLE_ULP, (offset, err)
        assert np.count_nonzero(bits(got) != bits(want)) <= got.size * 1e-4


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_table_out_strided_and_dtype_spellings(dt, layout):
    want = fastpe.sinusoidal_table(50, 16, dtype=dt, layout=layout, offset=99)
    parent = np.zeros((16, 60), dt)
    out = parent[:, 5:55].T  # strided channels
    assert fastpe.sinusoidal_table(50, 16, layout=layout, offset=99, out=out) is out
    np.testing.assert_array_equal(bits(out), bits(want))
    assert not bits(parent[:, :5]).any() and not bits(parent[:, 55:]).any()
    for spelling in (dt.name,) if dt == F16 else ("bfloat16", ml_dtypes.bfloat16):
        np.testing.assert_array_equal(
            bits(fastpe.sinusoidal_table(50, 16, dtype=spelling, layout=layout, offset=99)),
            bits(want),
        )


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_table_rows_rewritten_by_the_general_path(dt, layout):
    """Rows the fast rounding hands back (zero at position 0; at base 1e7 bfloat16 values
    below 2**-20 and float16 subnormals) get the general path's bits: the contiguous table,
    which takes the fast pass first, against strided channels, which take only the general
    path."""
    pos = np.concatenate([[0, 1, 355, 103993, 833719, 4272943, 2**45 + 12345], np.arange(2, 300)])
    kw = dict(positions=pos, layout=layout, base=1e7)
    fast = fastpe.sinusoidal_table(dim=128, dtype=dt, **kw)
    parent = np.zeros((128, pos.size + 3), dt)
    out = parent[:, 1 : pos.size + 1].T  # strided channels: the general path only
    fastpe.sinusoidal_table(dim=128, out=out, **kw)
    np.testing.assert_array_equal(bits(fast), bits(out))
    small = np.abs(fast.astype(np.float64))
    low = 2.0**-20 if dt == BF16 else 2.0**-14
    assert ((small < low) & (small > 0)).any()  # the rows this test is about are there


def _row_pass_case(dt, rng, rows, n):
    """Float64 anchors ``(S, C)`` and step values ``(T, U)`` of ``rows`` rows of ``n`` pairs
    whose folds ``S T + C U`` (the sines) lie at or near 16-bit midpoints: a midpoint of a
    random value of 2**-14 to 1, moved off it by 0 or 2**-60 to 2**-21 relative; a fifth of
    the pairs random, a tenth below 2**-12 (float16 subnormals, bfloat16's fix-up)."""
    low = 16 if dt == BF16 else 13  # float32 significand bits below the 16-bit last one
    shape = (rows, n)
    v = np.exp2(rng.uniform(-14, 0, shape)) * rng.choice([-1, 1], shape)
    u = v.astype(np.float32).view(np.uint32)
    mid = ((u & ~np.uint32((1 << low) - 1)) | np.uint32(1 << (low - 1))).view(np.float32)
    m = mid.astype(np.float64)
    off = np.exp2(rng.uniform(-60, -21, shape)) * rng.choice([-1, 0, 0, 1], shape)
    target = np.clip(m * (1 + off), -1, 1)
    k = rng.random(shape)
    target[k < 0.2] = rng.uniform(-1, 1, shape)[k < 0.2]
    small = k > 0.9
    target[small] = (np.exp2(rng.uniform(-40, -12, shape)) * rng.choice([-1, 1], shape))[small]
    theta = rng.uniform(0, 2 * np.pi, shape)  # the step's angle
    a = np.arcsin(target) - theta
    return np.sin(a), np.cos(a), np.cos(theta), np.sin(theta), k < 0.2


def _run_row_pass(row, S, C, T, U, interleaved):
    """Each row through the float32 pass ``row`` (an intrinsic of ``rows16.row_pass``): the
    bits it wrote and, per value, whether it flagged its pair. Rows lie 16 words apart,
    their gaps filled with a pattern that must stay, and no pair past a row's end may be
    flagged (a masked last group)."""
    import numba

    rows, n = S.shape
    anc = np.stack([S, C], axis=1).astype(np.float32)  # (rows, 2, n)
    dig = np.stack([T, U], axis=1).astype(np.float32)[:, None]  # (rows, 1, 2, n)
    stride = 2 * n + 16

    @numba.njit
    def run(flat, anc, dig, pend, flags):
        for r in range(anc.shape[0]):
            got = row(flat, r * stride, anc[r], dig[r], 0, pend)
            for q in range(got):
                g, f = pend[q] >> 32, pend[q] & 0xFFFF
                for j in range(16):
                    flags[r, 16 * g + j] = (f >> j) & 1  # the pair

    flat = np.full(rows * stride, 0xABCD, np.uint16)
    flags = np.zeros((rows, n + 16), bool)
    run(flat, anc, dig, np.zeros(n // 16 + 1, np.int64), flags)
    rowwise = flat.reshape(rows, stride)
    assert (rowwise[:, 2 * n :] == 0xABCD).all() and not flags[:, n:].any()
    rowwise = rowwise[:, : 2 * n]
    if interleaved:
        out = rowwise.reshape(rows, n, 2)
    else:
        out = rowwise.reshape(rows, 2, n).transpose(0, 2, 1)
    return out, np.repeat(flags[:, :n, None], 2, axis=-1)  # (rows, n, [sine, cosine])


@pytest.mark.parametrize(
    "dt, hw", [(F16, False), (BF16, False), (BF16, True)], ids=["float16", "bfloat16", "bf16-cpu"]
)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [512, 509])
def test_table_row_pass_flags_every_value_it_could_round_wrong(dt, hw, layout, n):
    """The 16-bit tables' float32 pass (``rows16.row_pass``, groups of 16 pairs, a last one
    of 13 masked) over sines at and near 16-bit midpoints, random values, and small
    values: every value it does not flag has the bits of the float64 fold rounded once
    (``reference.round_to``), and every value below 2**-10 (float16) or 2**-13 (bfloat16),
    which the window covers whole (float16 subnormals, bfloat16's fix-up among them), is
    flagged; nothing is written past a row's end. bfloat16 rounded by integer operations
    and (where the CPU has it) by its instruction. The flags are needed: some flagged
    values were written otherwise; a window of 2**-24 instead of 2**-22 is too narrow,
    it leaves values that round otherwise unflagged."""
    from fastpe._kernels import half, rows16

    bf16 = dt == BF16
    if not bf16 and not half.HW_HALF:
        pytest.skip("float16 tables take the float64 fold on this CPU")
    if hw and not rows16.HW_BF16:
        pytest.skip("no bfloat16 rounding instruction on this CPU")
    rng = np.random.default_rng(17)
    S, C, T, U, random = _row_pass_case(dt, rng, 64, n)
    v = np.stack([S * T + C * U, C * T - S * U], axis=-1)  # the float64 fold, as add_angle
    want = bits(reference.round_to(v, dt))
    inter = layout == "interleaved"
    out, flagged = _run_row_pass(rows16.row_pass(bf16, hw, inter), S, C, T, U, inter)
    np.testing.assert_array_equal(out[~flagged], want[~flagged])
    floor = 2.0**-13 if bf16 else 2.0**-10
    assert flagged[np.abs(v) < floor * (1 - 2.0**-20)].all()
    assert (out[flagged] != want[flagged]).sum() >= 20  # flagged values that were wrong
    # random pairs: about one in 125 (float16) or in 1,000 (bfloat16) flagged
    assert flagged[random].mean() < (0.02 if dt == F16 else 0.003)
    narrow = rows16.row_pass(bf16, hw, inter, eps_bits=0x33800000)
    out, flagged = _run_row_pass(narrow, S, C, T, U, inter)
    assert (out[~flagged] != want[~flagged]).any()


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [34, 40, 64, 100, 1030])
def test_table_row_pass_same_bits_as_strided_channels(dt, layout, dim):
    """Contiguous 16-bit table rows (the float32 pass over groups of 16 pairs, the last one
    masked, the flagged pairs folded in float64) against strided channels (the general
    path), bit for bit: dims with and without a partial last group, positions far apart
    and near, base 1e7 (small values: float16 subnormals, bfloat16's fix-up)."""
    pos = np.concatenate([np.arange(300), 2**33 + np.arange(40) * 7919, [2**45 + 12345]])
    for base in (10000.0, 1e7):
        kw = dict(positions=pos, layout=layout, base=base)
        fast = fastpe.sinusoidal_table(dim=dim, dtype=dt, **kw)
        parent = np.zeros((dim, pos.size + 3), dt)
        out = parent[:, 1 : pos.size + 1].T  # strided channels: the general path only
        fastpe.sinusoidal_table(dim=dim, out=out, **kw)
        np.testing.assert_array_equal(bits(fast), bits(out))


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("dim", [2, 4, 6, 8, 10, 12, 14, 16, 18])
def test_table_of_a_few_pairs_same_bits_as_folded_rows(dt, dim, monkeypatch):
    """16-bit tables of up to 8 pairs a row at consecutive positions, either layout, step
    groups of positions side by side (``table16_lanes_kernel``) or, rows back to back
    (interleaved; half layout of 2, 4 or 8 pairs) where the float32 pass runs, take blocks
    of 16 and 256 positions as rows of it
    (``table16_blocks_kernel``): the bits of the folded rows of ``table16_kernel`` (the
    ``lanes`` mode off), rows back to back, strided or reversed, on the threads (blocks
    cut by the work items' ends; ``tests/test_modes.py`` has them in one item), from
    offsets 0 (zero at position 0: a row written again), mid-group, negative and far, at
    base 10000 and 1e7 (small values: bfloat16's fix-up, float16 subnormals); dim 18
    takes ``table16_kernel``."""
    from fastpe import _engine
    from fastpe._kernels import half

    seen = launches(monkeypatch)
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)  # on the threads, several workers
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    layouts = ["interleaved", "half"]
    rows = 5000
    rewritten = 0
    for layout in layouts:
        for offset in (0, 13, -35, -4099, 2**40 + 5):
            for base in (10000.0, 1e7):
                kw = dict(dim=dim, dtype=dt, layout=layout, offset=offset, base=base)
                seen.clear()
                got = fastpe.sinusoidal_table(rows, **kw)
                parent = np.zeros((rows, dim + 3), dt)
                fastpe.sinusoidal_table(rows, out=parent[:, 1 : dim + 1], **kw)
                back = np.zeros((rows, dim), dt)[::-1]  # rows in reverse
                fastpe.sinusoidal_table(rows, out=back, **kw)
                lanes = half.table16_lanes_kernel
                # (one pair a row: either layout is the interleaved one; the half layout's
                # rows of 2, 4 or 8 pairs)
                inter = layout == "interleaved" or dim == 2
                blocks = (inter or dim in (4, 8, 16)) and (dt == BF16 or half.HW_HALF)
                first = half.table16_blocks_kernel if blocks else lanes
                want_seen = [first, lanes, lanes] if dim <= 16 else [half.table16_kernel] * 3
                assert seen == want_seen, kw
                with monkeypatch.context() as m:
                    m.setitem(_engine.MODES, "lanes", False)
                    want = fastpe.sinusoidal_table(rows, **kw)
                assert seen[-1] is half.table16_kernel
                np.testing.assert_array_equal(bits(got), bits(want))
                np.testing.assert_array_equal(bits(parent[:, 1 : dim + 1]), bits(want))
                assert not bits(parent[:, 0]).any() and not bits(parent[:, dim + 1 :]).any()
                np.testing.assert_array_equal(bits(back), bits(want))
                # values whose float32 rounding sits on a 16-bit midpoint: their rows are
                # the ones written again
                v = reference.sinusoidal_table(
                    rows, dim=dim, layout=layout, offset=offset, base=base
                )
                f = v.astype(np.float32).view(np.uint32)
                mid, low = (0x8000, 0xFFFF) if dt == BF16 else (0x1000, 0x1FFF)
                rewritten += np.count_nonzero((f & low) == mid)
    # (bfloat16: about one value in 65,536 sits on a midpoint; its zero at position 0 and
    # its small values at base 1e7 are the rows written again)
    assert rewritten > 0 or dt == BF16


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("dim", [2, 4, 6, 8, 10, 12, 14, 16, 18])
def test_add_of_a_few_pairs_same_bits_as_folded_rows(dt, dim, monkeypatch):
    """16-bit add_sinusoidal of up to 8 pairs a row, rows back to back at shared consecutive
    positions, steps groups of positions side by side (``add16_lanes_kernel``): the bits of
    ``add16_kernel``'s folded rows (the ``lanes`` mode off), either layout, on the threads,
    from offsets 0, mid-group, far, and across a value near zero, at base 10000 and 1e7
    (small values). Per-row offsets, and dim 18, take ``add16_kernel``."""
    from fastpe import _engine
    from fastpe._kernels import half

    seen = launches(monkeypatch)
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)  # on the threads, several workers
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    x = np.random.default_rng(dim).standard_normal((3, 3000, dim)).astype(dt)
    lanes = half.add16_lanes_kernel if dim <= 16 else half.add16_kernel
    for layout in ("interleaved", "half"):
        for offset in (0, 13, 4272943 - 1500, 2**40 + 5, np.array([0, 7, 2**20])):
            for base in (10000.0, 1e7):
                kw = dict(layout=layout, offset=offset, base=base)
                seen.clear()
                got = fastpe.add_sinusoidal(x, **kw)
                per_row = isinstance(offset, np.ndarray)
                assert seen == [half.add16_kernel if per_row else lanes], kw
                with monkeypatch.context() as m:
                    m.setitem(_engine.MODES, "lanes", False)
                    want = fastpe.add_sinusoidal(x, **kw)
                assert seen[-1] is half.add16_kernel
                np.testing.assert_array_equal(bits(got), bits(want))


# positions at which a float32 rounding of the recurrence's value of some pair (of dim 16,
# base 10000; pair 0, frequency 1, for dims 2 and 4 too) differs from that of the folded
# value: found by a scan of positions 0 .. 2**27 in scratch
FLOAT32_SPLITS = [
    6565759,
    10577122,
    11679400,
    12683453,
    13131518,
    13922324,
    23652217,
    24801454,
    33089310,
    34357995,
    43102901,
    46062531,
    46481343,
    62164062,
    62191565,
    66439135,
    67516351,
    74146599,
    85563208,
    88591214,
    89836151,
    98369908,
]


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_add_of_a_few_pairs_where_float32_roundings_split(dt, layout, monkeypatch):
    """Where the recurrence's value of a table entry and the folded one round to different
    float32 values, the lanes kernel folds that row again (``tables.round32_risky``). Each x
    holds the negated 16-bit sum of a zero array, so the result is the residual of the
    table value, where one float32 unit can show in 16 bits: in float16 at 4 of these
    windows, in bfloat16 at one, through a value near zero that the flag's floor covers
    too. With the refold left out, 10 values differed over both dtypes and layouts (tried);
    ``test_round32_flag_covers_the_recurrence`` checks the flag at every window."""
    from fastpe import _engine
    from fastpe._kernels import half

    seen = launches(monkeypatch)

    for p in FLOAT32_SPLITS:
        kw = dict(layout=layout, offset=p - 100)
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "lanes", False)
            x = -fastpe.add_sinusoidal(np.zeros((1, 200, 16), dt), **kw)
            want = fastpe.add_sinusoidal(x, **kw)
        seen.clear()
        got = fastpe.add_sinusoidal(x, **kw)
        assert seen == [half.add16_lanes_kernel]
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=str(p))


def test_round32_flag_covers_the_recurrence():
    """At the positions of ``FLOAT32_SPLITS`` the recurrence's float64 value of a pair and
    the folded one round to different float32 values, and ``round32_risky`` flags the
    recurrence's; over some 190,000 positions (near those, from 0, and past 2**40; dim 16,
    base 10000) the two lie within ``_ROUND32_TOL / 64``, the bound the flag assumes."""
    from fastpe import _engine
    from fastpe._freq import inv_freq_dd
    from fastpe._kernels import angles as A
    from fastpe._kernels import tables as T

    @numba.njit
    def compare(wh, wl, tc, ts, ps):
        n = wh.shape[0]
        anc_s, anc_c, lanes, out = T.lanes_scratch(n, 16)
        keys = np.full(A.LEVELS, A.NO_KEY)
        gs = np.empty((A.LEVELS, n))
        gc = np.empty((A.LEVELS, n))
        gk = np.full(A.LEVELS, A.NO_KEY)
        worst = 0.0
        split = np.zeros(ps.size, np.int64)
        flagged = np.zeros(ps.size, np.int64)
        for k in range(ps.size):
            p = ps[k]
            g = p >> A.BITS
            T.lanes_rows(g, g + 1, wh, wl, tc, ts, anc_s, anc_c, keys, lanes, out, None)
            A.anchors_at(p, wh, wl, tc, ts, gs, gc, gk)
            t = p & A.DIGIT
            for i in range(n):
                sv, cv = A.add_angle(gs[A.LAST, i], gc[A.LAST, i], tc[t, i], ts[t, i])
                q = t * 2 * n + 2 * i
                for v, f in ((out[q], sv), (out[q + 1], cv)):
                    worst = max(worst, abs(v - f))
                    if np.float32(v) != np.float32(f):
                        split[k] += 1
                        flagged[k] += T.round32_risky(v)
        return worst, split, flagged

    wh, wl = inv_freq_dd(10000.0, 16)
    tc, ts = _engine.tables(("round32 test", 10000.0, 16), wh, wl)
    ps = np.array(FLOAT32_SPLITS, dtype=np.int64)
    worst, split, flagged = compare(wh, wl, tc, ts, ps)
    assert (split > 0).all() and (flagged == split).all()
    near = (ps[:, None] + np.arange(-3000, 3000)).ravel()
    worst, _, _ = compare(wh, wl, tc, ts, np.r_[near, np.arange(50000), 2**40 + np.arange(5000)])
    assert worst < T._ROUND32_TOL / 64


# --------------------------------------------------------------------------- grid sums


def _pair(t):
    """The float32 pair of float64 table values (``fastpe.conventions._grid_prepare``)."""
    pair = np.empty((2, t.size), np.float32)
    pair[0] = t
    pair[1] = t - pair[0]
    return pair


def _first_pass_groups(x, t, bf16):
    """Run the 16-bit grid sum's first pass (``fractional16.first_pass16``) over the 16-bit
    bits ``x`` (a copy) with float64 table values ``t``: the bits it leaves and the numbers
    of the groups it left for the float64 pass."""
    from fastpe._kernels import fractional16 as f16k

    out = x.copy()
    groups = np.zeros(x.size // f16k.LANES + 1, np.int64)
    got = f16k.first_pass16(out, 0, _pair(t), 0, x.size, groups, ON if bf16 else None)
    return out, groups[:got]


def _exact_sums(x, t, bf16):
    """``half.from_f64(float64(x) + t)`` per value: the float64 sum rounded once."""
    import numba

    from fastpe._kernels import half

    @numba.njit
    def run(x, t, bf16):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = half.from_f64(np.float64(half.to_f32(x[i], bf16)) + t[i], bf16)
        return out

    return run(x, t, bf16)


def _midpoint_sums(dt, rng, n):
    """``n`` pairs (x, t), |t| <= 1, whose float64 sums lie at or near 16-bit midpoints:
    x plus a table value that reaches a midpoint near x, then moved off it by 0 or 2**-60
    to 2**-20 relative, and a third by up to 6 float32 ulps."""
    bits_below = 16 if dt == BF16 else 13  # float32 significand bits below the 16-bit last
    x = (np.exp2(rng.uniform(-12, 7, n)) * rng.choice([-1, 1], n)).astype(dt)
    xf = x.astype(np.float64)
    u = x.astype(np.float32).view(np.uint32).astype(np.int64)
    u += rng.integers(-3, 4, n) << bits_below
    mid = ((u & ~((1 << bits_below) - 1)) | (1 << (bits_below - 1))).astype(np.uint32)
    m = mid.view(np.float32).astype(np.float64)
    t = m - xf + np.exp2(rng.uniform(-60, -20, n)) * rng.choice([-1, 0, 1], n) * np.abs(m)
    k = rng.random(n) < 0.3
    t[k] += rng.integers(-6, 7, n)[k] * np.spacing(np.abs(m).astype(np.float32))[k]
    return x, t, mid


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_grid_sum_first_pass_leaves_every_value_it_could_round_wrong(dt):
    """The 16-bit grid sum's float32 pass (``fractional16._first_pass``, groups of 16):
    every group it writes holds the float64 sums rounded once, bit for bit (NaN's bits
    too); a group it leaves is untouched (the float64 pass does it). Each kind of sum fills
    groups of its own: sums at and near 16-bit midpoints (left), sums 5 to 12 float32 ulps
    off them (just outside the window it flags), sums near zero whose table values need
    all 53 bits (bfloat16 sums of 2**-20 to 2**-15, where the float32 rest ``tl``
    decides), tiny sums and float16's subnormal midpoints (below the floor: left),
    infinities and NaN, and random sums; a width of 16k + 5, whose last group is masked."""
    from fastpe._kernels import half

    bf16 = dt == BF16
    if not bf16 and not half.HW_HALF:
        pytest.skip("float16 grid sums take the float64 path on this CPU")
    rng = np.random.default_rng(11)
    g = 1600  # values of each kind, a multiple of 16
    kinds = {}
    x, t, mid = _midpoint_sums(dt, rng, g)
    kinds["midpoints"] = (x, t)
    # 5 to 12 float32 ulps off a midpoint, then moved by up to 2**-40 relative
    x, _, mid = _midpoint_sums(dt, rng, g)
    off = rng.integers(5, 13, g) * rng.choice([-1, 1], g)
    edge = (mid.astype(np.int64) + off).astype(np.uint32).view(np.float32).astype(np.float64)
    kinds["outside"] = (x, (edge - x.astype(np.float64)) * (1 + rng.uniform(-1, 1, g) * 2**-40))
    # sums that cancel: t of 53 bits, x its 16-bit neighbour, sums 2**-20 to 2**-15 (and
    # float16 sums of 2**-12 to 2**-6, above its floor)
    low, high = (15, 20) if bf16 else (6, 12)
    x = rng.uniform(-1, 1, g).astype(dt)
    s = np.exp2(-rng.uniform(low, high, g)) * rng.choice([-1, 1], g) * (1 + rng.random(g))
    kinds["cancel"] = (x, -x.astype(np.float64) + s)
    # tiny sums (2**-40 to 2**-21), below either floor
    x = rng.uniform(-1, 1, g).astype(dt)
    s = np.exp2(-rng.uniform(21, 40, g)) * rng.choice([-1, 1], g) * (1 + rng.random(g))
    kinds["tiny"] = (x, -x.astype(np.float64) + s)
    # float16's subnormal midpoints (odd multiples of 2**-25), and off them by 2**-60
    x = np.full(g, 0.5, dt)
    k = 2 * rng.integers(0, 2**10, g) + 1
    kinds["subnormal"] = (x, -(0.5 - k * 2.0**-25) + rng.choice([-1, 0, 1], g) * 2.0**-60)
    # infinities, NaN and large values, with t of any size
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 100.0, -60000.0, 250.0, 1.0] * (g // 8), dt)
    kinds["special"] = (x, rng.uniform(-1, 1, g))
    kinds["random"] = ((rng.standard_normal(g) * 4).astype(dt), rng.uniform(-1, 1, g))
    names = list(kinds)
    x = np.concatenate([kinds[k][0] for k in names] + [np.zeros(5, dt)])
    t = np.concatenate([np.clip(kinds[k][1], -1, 1) for k in names] + [rng.uniform(-1, 1, 5)])
    n = x.size
    xb = bits(x)
    out, left = _first_pass_groups(xb, t, bf16)
    want = _exact_sums(xb, t, bf16)
    done = np.ones(n, bool)
    for q in left:
        done[16 * q : 16 * q + 16] = False
    np.testing.assert_array_equal(out[done], want[done])  # NaN's bits too
    np.testing.assert_array_equal(out[~done], xb[~done])  # left as they were
    # the groups it leaves are needed: the float32 sum would round some values wrong
    pair = _pair(t)
    naive = bits(((x.astype(np.float32) + pair[0]) + pair[1]).astype(dt))
    nan = np.isnan(want.view(dt).astype(np.float32))
    wrong = (naive != want) & ~nan
    assert wrong.sum() >= 50 and not (wrong & done).any()
    part = {k: done[i * g : (i + 1) * g] for i, k in enumerate(names)}
    assert part["midpoints"].mean() < 0.05
    for k in ("outside", "special", "random") + (("cancel",) if bf16 else ()):
        assert part[k].mean() > 0.7, k  # these groups mostly written
    assert not part["tiny"].any()  # below the floor: all left
    if not bf16:
        assert not part["subnormal"].any()
    else:  # written sums near zero that x + th alone would have rounded wrong: tl decided
        c = slice(g * names.index("cancel"), g * (names.index("cancel") + 1))
        head = bits((x.astype(np.float32) + pair[0]).astype(dt))
        assert ((head != want)[c] & done[c]).sum() >= 20


def test_grid_sum_first_pass_refuses_other_types():
    """The first pass's intrinsic types only what its code assumes (contiguous uint16 bits,
    a C-ordered (2, n) float32 pair table, int64 offsets and group numbers): anything else
    is a typing error, not a read out of place."""
    import numba

    from fastpe._kernels import fractional16 as f16k

    ok = (np.zeros(32, np.uint16), 0, np.zeros((2, 32), np.float32), 0, 32, np.zeros(3, np.int64))
    bad = [
        (0, np.zeros(32, np.int16)),
        (0, np.zeros(64, np.uint16)[::2]),
        (2, np.zeros((2, 32), np.float64)),
        (2, np.zeros(64, np.float32)),
        (5, np.zeros(3, np.int32)),
    ]
    assert f16k.first_pass16(*ok, ON) == 2  # (zeros: sums below the floor, both groups left)
    for i, value in bad:
        args = list(ok)
        args[i] = value
        with pytest.raises(numba.core.errors.TypingError):
            f16k.first_pass16(*args, ON)


def test_grid_sum_bfloat16_rounding_by_instruction_same_bits():
    """Where the CPU has AVX512-BF16 the bfloat16 first pass rounds with
    ``vcvtneps2bf16`` (``fractional16.HW_BF16``); it writes the same bits and leaves the
    same groups as the integer rounding, on the sums of the test above (NaN, infinities,
    tiny and cancelling sums, midpoints), and both hold the float64 sums' bits."""
    import numba

    from fastpe._kernels import fractional16 as f16k

    if not f16k.HW_BF16:
        pytest.skip("no AVX512-BF16 on this CPU: the integer rounding only")
    by_int = f16k._first_pass(True, False)
    by_cpu = f16k._first_pass(True, True)

    @numba.njit
    def run(x, pair, pend, cpu):
        if cpu:
            return by_cpu(x, 0, pair, 0, x.size, pend)
        return by_int(x, 0, pair, 0, x.size, pend)

    rng = np.random.default_rng(3)
    xm, tm, _ = _midpoint_sums(BF16, rng, 2048)
    xs = np.array([np.nan, -np.nan, np.inf, -np.inf] * 4, BF16)
    xc = rng.uniform(-1, 1, 4096 + 1024).astype(BF16)  # sums that cancel, then tiny ones
    mag = np.r_[rng.uniform(6, 19, 4096), rng.uniform(21, 40, 1024)]
    sc = np.exp2(-mag) * rng.choice([-1, 1], mag.size)
    xr = rng.standard_normal(2048 + 5).astype(BF16)
    x = np.concatenate([xm, xs, xc, xr])
    tc = -xc.astype(np.float64) + sc
    ts, tr = rng.uniform(-1, 1, 16), rng.uniform(-1, 1, xr.size)
    t = np.concatenate([np.clip(tm, -1, 1), ts, tc, tr])
    outs = []
    for cpu in (False, True):
        out = bits(x).copy()
        pend = np.zeros(out.size // 16 + 1, np.int64)
        k = run(out, _pair(t), pend, cpu)
        outs.append((out, pend[:k]))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    done = np.ones(x.size, bool)
    for q in outs[0][1]:
        done[16 * q : 16 * q + 16] = False
    assert done.mean() > 0.3
    want = _exact_sums(bits(x), t, True)
    np.testing.assert_array_equal(outs[0][0][done], want[done])


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("tile", [None, 2048])
def test_grid_sum_equals_the_float64_sum_rounded_once(dt, tile, rng, monkeypatch):
    """16-bit grid sums on contiguous channels (a float32 pass in groups of 16, the groups
    it leaves in float64, one block later) equal strided channels (the float64 sum rounded
    once, every value), bit for bit: x ~ N(0, 1), x near minus the table (sums near zero)
    and x at whole numbers (sums near 16-bit midpoints), in tiles and threaded, over 8
    workers."""
    if tile is not None:
        monkeypatch.setattr(fastpe.conventions, "GRID_TILE_BYTES", tile)
    monkeypatch.setattr(fastpe.conventions, "_workers", lambda n, threads: min(n, 8))
    grid, dim = (24, 40), 128
    table = fastpe.grid_sinusoidal(grid, dim, cls_token=True, dtype=np.float64)
    rows = table.shape[0]
    x = np.concatenate(
        [
            rng.standard_normal((4, rows, dim)),
            -table[None] + rng.standard_normal((2, rows, dim)) * 2.0**-14,
            rng.integers(-300, 300, (2, rows, dim)).astype(np.float64),
        ]
    ).astype(dt)
    fast = fastpe.add_grid_sinusoidal(x, grid, cls_token=True)
    strided = x.transpose(0, 2, 1).copy().transpose(0, 2, 1)  # channels of stride rows
    general = fastpe.add_grid_sinusoidal(strided, grid, cls_token=True, out=strided)
    np.testing.assert_array_equal(bits(fast), bits(general))
    # the float64 pass had work: groups the first pass left (every row of x here)
    t = np.broadcast_to(table[1:], x[:, 1:].shape).ravel()
    _, left = _first_pass_groups(bits(x)[:, 1:].ravel(), t, dt == BF16)
    assert left.size >= 20


# --------------------------------------------------------------------------- add_sinusoidal


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "shape, kw",
    [
        ((300, 64), dict(offset=2**30)),
        ((4, 100, 32), dict(offset=np.array([0, 7, 2**40, 5]))),
        ((2, 100, 32), dict(positions=np.arange(100) * 31)),
        ((200, 2), {}),
    ],
)
def test_add_within_bound_of_reference(dt, layout, shape, kw):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, shape))).astype(dt)
    before = bits(x).copy()
    got = fastpe.add_sinusoidal(x, layout=layout, **kw)
    want = reference.add_sinusoidal(x, layout=layout, **kw)
    np.testing.assert_array_equal(bits(x), before)
    assert got.dtype == dt
    err = _cases.add_error(got, want)
    assert err <= _cases.HALF_ADD_ULP, err
    t = x.T.copy().T  # strided channels
    assert fastpe.add_sinusoidal(t, layout=layout, out=t, **kw) is t
    np.testing.assert_array_equal(bits(t), bits(got))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize(
    "call",
    [
        lambda x: fastpe.apply_rope(x, out=x, rotary_dim=3),
        lambda x: fastpe.apply_rope(x, out=x, positions=np.arange(4) + 0.5),
        lambda x: fastpe.apply_rope(x, out=np.zeros(x.shape, np.float32)),
        lambda x: fastpe.add_sinusoidal(x, out=x, offset=2**60),
        lambda x: reference.apply_rope(x, out=x, layout="odd"),
        lambda x: reference.add_sinusoidal(x, out=x, base=-1.0),
    ],
)
def test_unchanged_after_error(dt, call):
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(dt)
    before = bits(x).copy()
    with pytest.raises((TypeError, ValueError)):
        call(x)
    np.testing.assert_array_equal(bits(x), before)


def test_other_dtypes_still_refused():
    for dt in (np.int16, np.complex64, np.longdouble, np.dtype(">f2")):
        with pytest.raises(TypeError, match="float32 or float64"):
            fastpe.apply_rope(np.zeros((2, 4), dt))
    with pytest.raises(TypeError, match="dtype"):
        fastpe.sinusoidal_table(2, 4, dtype="V2")


def _run(code: str) -> subprocess.CompletedProcess:
    return run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_import_fastpe_does_not_import_ml_dtypes():
    r = _run(
        "import sys, numpy as np, fastpe\n"
        "fastpe.sinusoidal_table(4, 8, dtype=np.float16)\n"
        "assert 'ml_dtypes' not in sys.modules, 'imported'\n"
    )
    assert r.returncode == 0, r.stderr


def test_bfloat16_without_ml_dtypes_says_how_to_get_it():
    r = _run(
        "import sys; sys.modules['ml_dtypes'] = None\n"
        "import fastpe\n"
        "try:\n"
        "    fastpe.sinusoidal_table(4, 8, dtype='bfloat16')\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "ml_dtypes" in r.stdout and "fastpe[bf16]" in r.stdout, r.stdout


def test_warmup_prepares_16_bit_kernels():
    times = fastpe.warmup(dtypes=["float16", "bfloat16"])
    ops = ("apply_rope", "sinusoidal_table", "add_sinusoidal")
    want = [f"{op}[{d}]" for op in ops for d in ("float16", "bfloat16")]
    assert sorted(times) == sorted([*want, "timestep_embedding[fractional]"])


def test_torch_bfloat16_tensor_rotated_in_place_without_copy():
    """The README's one line: a bfloat16 CPU tensor seen as 16-bit integers, then as
    ml_dtypes' bfloat16, shares the tensor's memory."""
    torch = pytest.importorskip("torch")
    t = torch.randn(2, 4, 8, 64, dtype=torch.bfloat16).transpose(1, 2)  # (B, S, H, D) view
    before = t.clone()
    a = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    assert a.__array_interface__["data"][0] == t.data_ptr()
    fastpe.apply_rope(a, out=a, layout="half", offset=10)
    # the same call on a NumPy copy (the fast path against the reference is bounded in
    # ulps, tested above; here the point is that the tensor itself was rotated)
    want = fastpe.apply_rope(
        before.view(torch.int16).numpy().view(ml_dtypes.bfloat16), layout="half", offset=10
    )
    np.testing.assert_array_equal(t.view(torch.int16).numpy(), bits(want).view(np.int16))


# --------------------------------------------------------------------------- dask, files


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_dask_blocks_equal_in_memory(dt):
    da = pytest.importorskip("dask.array")
    import fastpe.dask

    x = np.random.default_rng(2).standard_normal((3, 40, 2, 32)).astype(dt)
    dx = da.from_array(x, chunks=(2, 7, 1, -1))
    kw = dict(offset=np.array([0, 9, 2**35]), layout="half")
    got = fastpe.dask.apply_rope(dx, **kw)
    assert got.dtype == dt
    np.testing.assert_array_equal(bits(got.compute()), bits(fastpe.apply_rope(x, **kw)))
    e = x[:, :, 0]
    de = da.from_array(e, chunks=(1, 9, -1))
    np.testing.assert_array_equal(
        bits(fastpe.dask.add_sinusoidal(de, offset=3).compute()),
        bits(fastpe.add_sinusoidal(e, offset=3)),
    )


def test_bfloat16_files_refused_with_the_reason(tmp_path):
    from fastpe import files

    src = tmp_path / "bf.npy"
    np.save(src, np.ones((2, 8, 4), BF16))  # the header says '<V2'
    with pytest.raises(TypeError, match="bfloat16"):
        files.rope_file(src, in_place=True)
    assert bits(np.load(src).view(BF16)).tolist() == bits(np.ones((2, 8, 4), BF16)).tolist()
    with pytest.raises(TypeError, match="bfloat16"):
        files.table_file(tmp_path / "t.npy", seq_len=4, dim=8, dtype="bfloat16")
    assert not (tmp_path / "t.npy").exists()


# --------------------------------------------------------------------------- more layouts


@pytest.mark.parametrize("dt", HALF, ids=IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_and_table_negative_strides_inside_a_buffer(dt, layout):
    """Reversed rows and channels, in the middle of a larger buffer: as the same call on a
    copy, and nothing else in the buffer changes."""
    rng = np.random.default_rng(9)
    parent = rng.standard_normal((3, 30, 40)).astype(dt)
    expected = parent.copy()
    view = lambda p: p[::-1, 20:4:-1, 35:3:-2]  # noqa: E731
    view(expected)[...] = fastpe.add_sinusoidal(view(parent).copy(), layout=layout, offset=9)
    x = view(parent)
    assert fastpe.add_sinusoidal(x, out=x, layout=layout, offset=9) is x
    np.testing.assert_array_equal(bits(parent), bits(expected))

    buf = np.zeros((20, 50), dt)
    out = buf[18:2:-1, 45:13:-1]
    fastpe.sinusoidal_table(16, 32, layout=layout, offset=2**30, out=out)
    np.testing.assert_array_equal(
        bits(out), bits(fastpe.sinusoidal_table(16, 32, layout=layout, offset=2**30, dtype=dt))
    )
    outside = np.ones(buf.shape, bool)
    outside[3:19, 14:46] = False
    assert not bits(buf)[outside].any()


@pytest.mark.parametrize("dt", HALF, ids=IDS)
def test_table_out_unchanged_after_error(dt):
    out = np.random.default_rng(4).standard_normal((4, 8)).astype(dt)
    before = bits(out).copy()
    for kw in (dict(positions=[0, 1, 2, 2**60]), dict(layout="pairs"), dict(dtype=np.float32)):
        for f in (fastpe.sinusoidal_table, reference.sinusoidal_table):
            with pytest.raises((TypeError, ValueError)):
                f(4 if "positions" not in kw else None, 8, out=out, **kw)
            np.testing.assert_array_equal(bits(out), before)


hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(
    max_examples=int(os.environ.get("FASTPE_HYPOTHESIS_EXAMPLES", "100")), deadline=None
)
@hypothesis.given(
    dt=st.sampled_from(HALF),
    layout=st.sampled_from(LAYOUTS),
    shape=st.tuples(
        st.integers(1, 3),
        st.integers(1, 9),
        st.integers(1, 3),
        st.integers(1, 12).map(lambda n: 2 * n),
    ),
    offset=st.integers(-(2**40), 2**40),
    inverse=st.booleans(),
    data=st.data(),
)
def test_rope_property_against_reference(dt, layout, shape, offset, inverse, data):
    """Any shape, rotary_dim, position and direction: within the bound of the reference,
    the channels past rotary_dim untouched."""
    rot = 2 * data.draw(st.integers(1, shape[-1] // 2))
    scale = data.draw(st.sampled_from([1e-6, 1.0, 300.0]))
    x = (np.random.default_rng(offset % 2**32).standard_normal(shape) * scale).astype(dt)
    kw = dict(layout=layout, offset=offset, rotary_dim=rot, inverse=inverse)
    got = fastpe.apply_rope(x, **kw)
    want = reference.apply_rope(x, **kw)
    assert rope_norm_error(got, want, x, layout, rot, dt).max() <= _cases.HALF_ROPE_ULP
    np.testing.assert_array_equal(bits(got)[..., rot:], bits(x)[..., rot:])


def test_cli_float16_table_then_rope_in_place(tmp_path):
    from fastpe import cli

    out = tmp_path / "pe.npy"
    assert (
        cli.main(
            [
                "table",
                "--seq-len",
                "300",
                "--dim",
                "16",
                "--dtype",
                "float16",
                "--offset",
                "7",
                "--chunk-mib",
                "0.001",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    want = fastpe.sinusoidal_table(300, 16, dtype=np.float16, offset=7)
    np.testing.assert_array_equal(bits(np.load(out)), bits(want))
    assert cli.main(["rope", str(out), "--in-place", "--layout", "half"]) == 0
    np.testing.assert_array_equal(bits(np.load(out)), bits(fastpe.apply_rope(want, layout="half")))


def test_hardware_and_integer_float16_conversions_agree():
    """Where the CPU converts float16 itself (F16C, aarch64), the integer code that other
    CPUs run gives the same bits: every float16 widened, and float32 values of every
    exponent (ties, subnormals, overflow, infinities and NaNs) rounded."""
    import numba

    from fastpe._kernels import half

    @numba.njit
    def widen(h, out_int, out_hw):
        for i in range(h.size):
            out_int[i] = half.f16_to_f32_int(h[i])
            out_hw[i] = half.to_f32(h[i], False)

    @numba.njit
    def narrow(f, out_int, out_hw):
        for i in range(f.size):
            out_int[i] = half.f32_to_f16_int(f[i])
            out_hw[i] = half.from_f32(f[i], False)

    h = np.arange(2**16, dtype=np.uint16)
    a, b = np.empty(h.size, np.float32), np.empty(h.size, np.float32)
    widen(h, a, b)
    num = ~np.isnan(a)  # NaNs stay NaNs (the hardware sets the quiet bit)
    assert np.isnan(b[~num]).all()
    np.testing.assert_array_equal(a.view(np.uint32)[num], b.view(np.uint32)[num])
    exact = h.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(a.view(np.uint32)[num], exact.view(np.uint32)[num])
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**32, 2**20, dtype=np.uint64).astype(np.uint32)
    # every float16 value and the float32 values half-way between neighbours (ties)
    wide = h.view(np.float16).astype(np.float32).view(np.uint32)
    f = np.concatenate([bits, wide, wide + np.uint32(0x1000), wide + np.uint32(0xFFF)]).view(
        np.float32
    )
    c, d = np.empty(f.size, np.uint16), np.empty(f.size, np.uint16)
    narrow(f, c, d)
    nan = np.isnan(f)
    np.testing.assert_array_equal(c[~nan], d[~nan])
    assert np.isnan(c[nan].view(np.float16)).all() and np.isnan(d[nan].view(np.float16)).all()
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(c[~nan], f[~nan].astype(np.float16).view(np.uint16))


def test_compute_bound_loops_ask_for_512_bit_vectors():
    """The 16-bit rotation (its block function) and addition, and the table kernel of
    float32 and float64, call ``wide_vectors``, which gives the function compiled LLVM's
    ``prefer-vector-width=512`` (fastpe._kernels.vectors): on CPUs whose LLVM tuning
    prefers 256 bits they would otherwise run half-width vectors. A preference only: the
    values are tested above. (Cached kernels cannot be inspected: the attribute is checked
    on a fresh function. The 16-bit grid sum's first pass writes its vectors of 16 itself.)"""
    import inspect

    import numba

    from fastpe._kernels import half
    from fastpe._kernels.vectors import wide_vectors

    @numba.njit(cache=False)
    def f(a):
        wide_vectors()
        for i in range(a.size):
            a[i] += 1.0

    f(np.zeros(3))
    assert '"prefer-vector-width"="512"' in f.inspect_llvm(f.signatures[0])
    from fastpe._kernels import tables

    # and the float32/float64 tables (every specialization: README, "Streamed tables with
    # 512-bit vectors")
    for k in (
        half._rotate16_block,
        half.add16_kernel,
        tables.table_kernel,
    ):
        assert "wide_vectors()" in inspect.getsource(k.py_func), k


def test_float32_grid_sums_ask_for_512_bit_vectors_and_nothing_else_does():
    """Grid sums take ``grid_add_kernel``, which calls ``wide_vectors_float32`` (README,
    "float32 grid sums with 512-bit vectors": float32 sums gain, float64 sums and grid
    writes do not); the intrinsic gives the attribute for float32 arrays only, so only the
    float32 sums' specializations carry it, and ``grid_kernel`` (the writes) does not call
    it. Checked on a fresh function (a cached kernel cannot be inspected), and that the
    kernels have that form."""
    import inspect

    import numba

    from fastpe._kernels import fractional
    from fastpe._kernels.vectors import wide_vectors_float32

    @numba.njit(cache=False)
    def f(a):
        wide_vectors_float32(a)
        for i in range(a.size):
            a[i] += 1.0

    for dt in (np.float32, np.float64):
        f(np.zeros(3, dt))
    attr = '"prefer-vector-width"="512"'
    wide = {str(sig[0].dtype) for sig in f.signatures if attr in f.inspect_llvm(sig)}
    assert len(f.signatures) == 2
    assert wide == {"float32"}, wide
    add = inspect.getsource(fractional.grid_add_kernel.py_func)
    assert "    wide_vectors_float32(view[0])\n" in add
    assert "wide_vectors" not in inspect.getsource(fractional.grid_kernel.py_func)
    assert "wide_vectors" not in inspect.getsource(fractional._grid_work.py_func)
    # and the float-position loop (timestep embeddings), every dtype
    assert "    wide_vectors()\n" in inspect.getsource(fractional._values_reduced.py_func)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_grid_sums_take_the_sums_kernel_and_writes_the_writes_kernel(monkeypatch, dt):
    """float32 and float64 grid sums (first calls and planned ones) run ``grid_add_kernel``,
    the kernel with the 512-bit request, and grid tables ``grid_kernel``; the sums within
    their bound of the reference's."""
    from fastpe._kernels import fractional

    ran = []
    for name in ("grid_kernel", "grid_add_kernel"):
        real = getattr(fractional, name)

        def spy(*args, _real=real, _name=name):
            ran.append(_name)
            return _real(*args)

        monkeypatch.setattr(fractional, name, spy)
    x = np.random.default_rng(4).standard_normal((2, 17, 24)).astype(dt)
    want = reference.add_grid_sinusoidal(x, (4, 4), cls_token=True)
    for _ in range(2):  # the first call, then the plan
        ran.clear()
        got = fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True)
        assert set(ran) == {"grid_add_kernel"}, ran
        assert _cases.add_error(got, want) <= _cases.ADD_ULP[np.dtype(dt)]
    ran.clear()
    fastpe.grid_sinusoidal((4, 4), 24, dtype=dt)
    assert set(ran) == {"grid_kernel"}, ran
