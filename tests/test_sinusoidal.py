"""Sinusoidal tables and add_sinusoidal: fast vs reference, mathematics, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _util import DTYPES, TABLE_F64_EXACT_ULP1, assert_ulp, make_layout
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpe
from fastpe import _cases, reference

# Bound of the fast float64 table against the reference, in units of 2**-52 (the ulp of the
# pair norm, 1.0): 5 angle additions from an exact anchor. Measured worst: see README.
F64_TABLE_ULP = _cases.TABLE_F64_ULP1

SHAPES = [(1, 2), (1, 64), (7, 2), (33, 10), (257, 64), (1000, 6), (4099, 32)]
LAYOUTS = ["interleaved", "half"]


def check_table(got, want, dtype, **ctx):
    if np.dtype(dtype) == np.float32:
        assert_ulp(got, want, 1.0, dtype="float32", **ctx)
    else:
        err = np.abs(got - want) / np.spacing(1.0)
        assert err.max(initial=0) <= F64_TABLE_ULP, f"{ctx}: worst {err.max():.2f} ulp(1)"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_table_matches_reference(shape, dtype, layout):
    n, d = shape
    got = fastpe.sinusoidal_table(n, d, layout=layout, dtype=dtype)
    want = reference.sinusoidal_table(n, d, layout=layout, dtype=dtype)
    assert got.shape == (n, d) and got.dtype == dtype and got.flags.c_contiguous
    check_table(got, want, dtype, shape=shape, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "offset", [0, 1, 15, 16, 4095, 65535, 65536, 1_000_003, 2**24 - 100, 2**31, 2**40]
)
def test_table_offsets_cross_anchor_boundaries(offset, dtype):
    got = fastpe.sinusoidal_table(300, 16, offset=offset, dtype=dtype)
    want = reference.sinusoidal_table(300, 16, offset=offset, dtype=dtype)
    check_table(got, want, dtype, offset=offset)


@pytest.mark.parametrize("dtype", DTYPES)
def test_table_positions_array(dtype, rng):
    pos = np.concatenate([rng.integers(0, 2**24, 500), [0, 2**24 - 1], np.arange(100) * 7])
    for layout in LAYOUTS:
        got = fastpe.sinusoidal_table(positions=pos, dim=64, layout=layout, dtype=dtype)
        want = reference.sinusoidal_table(positions=pos, dim=64, layout=layout, dtype=dtype)
        check_table(got, want, dtype, layout=layout)
        # row r of a positions table is the table row at offset pos[r]
        r = 3
        one = fastpe.sinusoidal_table(1, 64, offset=int(pos[r]), layout=layout, dtype=dtype)
        np.testing.assert_array_equal(got[r], one[0])


def test_table_positions_equals_offset():
    a = fastpe.sinusoidal_table(100, 8, offset=12345)
    b = fastpe.sinusoidal_table(positions=np.arange(12345, 12445), dim=8)
    np.testing.assert_array_equal(a, b)


def test_table_float_positions_with_integer_values():
    a = fastpe.sinusoidal_table(positions=np.array([0.0, 5.0, 1e6]), dim=8)
    b = fastpe.sinusoidal_table(positions=np.array([0, 5, 1_000_000]), dim=8)
    np.testing.assert_array_equal(a, b)


def test_table_base_and_negative_positions():
    for base in (10.0, 500000.0, 1e6):
        got = fastpe.sinusoidal_table(50, 12, base=base, offset=-25, dtype=np.float64)
        want = reference.sinusoidal_table(50, 12, base=base, offset=-25, dtype=np.float64)
        check_table(got, want, np.float64, base=base)


def test_table_layouts_are_permutations(monkeypatch):
    # float32 rows are stepped by the recurrence or folded by the same rule in either
    # layout (fastpe._engine.table_stepped): the same bits, also at positions 1129279 (pair
    # 360 of dim 1024, pair 45 of dim 128: the same frequency) and 100078009 (pair 108 of
    # dim 1024), where the stepped and the folded value round apart (2 of
    # bench/layout_ties.py's 7); by the row loops, the lanes (a few pairs, rows recomputed
    # exactly around 4272943), strided channels and, streamed, the direct pass
    from fastpe import _engine

    cases = ((10, 8, 0), (40, 1024, 1129279 - 20), (40, 1024, 100078009 - 7))
    cases += ((40, 128, 1129279 - 20), (6000, 12, 4272943 - 3000), (6000, 16, 4272943 - 3000))
    for stream_min in (None, 0):
        monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", stream_min)
        for n, dim, offset in cases:
            a = fastpe.sinusoidal_table(n, dim, offset=offset, layout="interleaved")
            b = fastpe.sinusoidal_table(n, dim, offset=offset, layout="half")
            np.testing.assert_array_equal(a[:, 0::2], b[:, : dim // 2])
            np.testing.assert_array_equal(a[:, 1::2], b[:, dim // 2 :])
            wide = np.zeros((n, 2 * dim), np.float32)
            fastpe.sinusoidal_table(n, dim, offset=offset, layout="half", out=wide[:, ::2])
            np.testing.assert_array_equal(wide[:, ::2], b)
    # the general formula's small calls (planned from the second call on: a path of their
    # own) step or fold the rows by the same rule
    p = np.array([1129279, 100078009])
    for dim in (1024, 128):
        for order, layout in (("interleaved", "interleaved"), ("sin_cos", "half")):
            want = fastpe.sinusoidal_table(positions=p, dim=dim, layout=layout)
            for _ in range(2):
                got = fastpe.sinusoidal_embedding(p, dim, order=order)
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_rows_stepped_or_folded_by_their_pairs(layout, monkeypatch):
    """Rows of fewer than 8 or at least 128 pairs are stepped, the others folded
    (``_engine.table_stepped``): at position 1129279 the stepped and the folded value of
    the frequency 10000**(-90/128) (pair 45 of dim 128, pair 360 of dim 1024) round apart.
    The folded ones are the values with the ``recurrence`` mode off."""
    from fastpe import _engine

    p = 1129279
    assert [_engine.table_stepped(n) for n in (1, 7, 8, 127, 128, 512)] == [
        True, True, False, False, True, True
    ]  # fmt: skip
    for dim, pair, stepped in ((128, 45, False), (1024, 360, True)):
        got = fastpe.sinusoidal_table(30, dim, offset=p - 9, layout=layout)
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "recurrence", False)
            folded = fastpe.sinusoidal_table(30, dim, offset=p - 9, layout=layout)
        col = 2 * pair if layout == "interleaved" else pair
        assert np.count_nonzero(got != folded) == stepped
        want = np.float32(-0.9908806) if stepped else np.float32(-0.99088067)
        assert got[9, col] == want and folded[9, col] == np.float32(-0.99088067)


def test_table_known_values():
    t = fastpe.sinusoidal_table(2, 4, dtype=np.float64)
    want = [[0, 1, 0, 1], [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)]]
    np.testing.assert_allclose(t, want, rtol=0, atol=2 * np.spacing(1.0))


def test_table_empty():
    assert fastpe.sinusoidal_table(0, 8).shape == (0, 8)
    assert fastpe.sinusoidal_table(positions=np.array([], dtype=np.int64), dim=8).shape == (0, 8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "reversed", "transposed"])
def test_table_out_views(layout, dtype, rng):
    n, d = 123, 16
    out, parent = make_layout((n, d), dtype, layout, rng)
    before = parent.copy()
    res = fastpe.sinusoidal_table(n, d, offset=7, out=out)
    assert res is out
    assert np.shares_memory(out, parent)
    want = reference.sinusoidal_table(n, d, offset=7, dtype=dtype)
    check_table(out, want, dtype, layout=layout)
    # the same call into a fresh contiguous array gives identical values
    np.testing.assert_array_equal(out, fastpe.sinusoidal_table(n, d, offset=7, dtype=dtype))
    # nothing outside the view changed
    mask = np.ones(parent.shape, dtype=bool)
    if layout == "sliced":
        mask[1 : 1 + n, 2 : 2 + d] = False
        np.testing.assert_array_equal(parent[mask], before[mask])


# ---------------------------------------------------------------- add_sinusoidal


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2), (5, 8), (3, 1, 6), (2, 33, 64), (4, 300, 10)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_add_matches_reference(shape, dtype, layout, rng):
    x = rng.standard_normal(shape).astype(dtype)
    x0 = x.copy()
    got = fastpe.add_sinusoidal(x, offset=11, layout=layout)
    np.testing.assert_array_equal(x, x0)  # out-of-place leaves x untouched
    want = reference.add_sinusoidal(x, offset=11, layout=layout)
    err = _cases.add_error(got, want)
    assert err <= _cases.ADD_ULP[np.dtype(dtype)], f"{shape} {dtype} {layout}: {err}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "sliced", "reversed", "transposed"])
def test_add_in_place_views(layout, dtype, rng):
    x, parent = make_layout((3, 41, 12), dtype, layout, rng)
    want = reference.add_sinusoidal(x.copy(), offset=5)
    same_on_copy = fastpe.add_sinusoidal(x.copy(), offset=5)
    before = parent.copy()
    res = fastpe.add_sinusoidal(x, offset=5, out=x)
    assert res is x
    assert np.shares_memory(x, parent)
    np.testing.assert_array_equal(x, same_on_copy)
    assert _cases.add_error(x, want) <= _cases.ADD_ULP[np.dtype(dtype)]
    if layout == "sliced":
        mask = np.ones(parent.shape, dtype=bool)
        mask[1:4, 1:42, 2:14] = False
        np.testing.assert_array_equal(parent[mask], before[mask])


def test_add_in_place_equals_out_of_place(rng):
    x = rng.standard_normal((2, 50, 16)).astype(np.float32)
    y = fastpe.add_sinusoidal(x)
    fastpe.add_sinusoidal(x, out=x)
    np.testing.assert_array_equal(x, y)


def test_add_out_other_array(rng):
    x = rng.standard_normal((2, 50, 16))
    out = np.empty_like(x)
    x0 = x.copy()
    assert fastpe.add_sinusoidal(x, out=out) is out
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(out, fastpe.add_sinusoidal(x))


def test_add_per_batch_offsets_and_positions(rng):
    x = rng.standard_normal((3, 20, 8))
    got = fastpe.add_sinusoidal(x, offset=np.array([0, 100, 7]))
    for b, off in enumerate([0, 100, 7]):
        np.testing.assert_array_equal(got[b], fastpe.add_sinusoidal(x[b], offset=off))
    pos = rng.integers(0, 10**6, (3, 20))
    got = fastpe.add_sinusoidal(x, positions=pos)
    for b in range(3):
        np.testing.assert_array_equal(got[b], fastpe.add_sinusoidal(x[b], positions=pos[b]))


# float32 table values come from a recurrence with one definition per position (the
# exact anchor of its group of 16 stepped forward, see fastpe._kernels.angles.rec_load;
# dim 256) or are folded each from its anchor (dim 64: fastpe._engine.table_stepped):
# chunked, resumed, gapped and reordered calls must all give the same bits.
PATH_OFFSET = 2**20 - 37  # crosses groups of 16 and a change of the libm anchor


@pytest.mark.parametrize("dim", [64, 256])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_table_values_do_not_depend_on_the_path(layout, dim):
    full = fastpe.sinusoidal_table(300, dim, offset=PATH_OFFSET, layout=layout)
    for start, stop in [(0, 1), (5, 9), (15, 17), (16, 300), (123, 299)]:
        part = fastpe.sinusoidal_table(stop - start, dim, offset=PATH_OFFSET + start, layout=layout)
        np.testing.assert_array_equal(part, full[start:stop], err_msg=f"{start}:{stop}")
    for idx in (np.arange(0, 300, 3), np.arange(299, -1, -7), np.array([5, 5, 4, 20, 21, 0])):
        got = fastpe.sinusoidal_table(positions=PATH_OFFSET + idx, dim=dim, layout=layout)
        np.testing.assert_array_equal(got, full[idx], err_msg=str(idx))


def test_float32_strided_out_steps_like_contiguous():
    # positions where sin(p) is about 2**-19 (p near a multiple of pi): a rounding tie is
    # within reach there, so a strided out= that folded instead of stepping differed
    pos = 31495801651625 + 21053343141 * np.arange(-40, 40)
    want = fastpe.sinusoidal_table(positions=pos, dim=2)
    outs = (np.empty((2, pos.size), np.float32).T, np.empty((pos.size, 4), np.float32)[:, ::-2])
    for out in outs:
        got = fastpe.sinusoidal_table(positions=pos, dim=2, out=out)
        np.testing.assert_array_equal(got, want)


def test_float32_threaded_table_and_add_equal_chunked_calls(rng):
    # above the serial threshold, workers split the rows; every path gives the same bits
    full = fastpe.sinusoidal_table(3000, 256, offset=PATH_OFFSET)
    parts = [fastpe.sinusoidal_table(300, 256, offset=PATH_OFFSET + o) for o in range(0, 3000, 300)]
    np.testing.assert_array_equal(full, np.concatenate(parts))
    # add: rows that share no positions add straight from the stepped state
    x = rng.standard_normal((3, 3000, 128)).astype(np.float32)
    offs = np.array([0, 3000, 6000])
    got = fastpe.add_sinusoidal(x, offset=PATH_OFFSET + offs)
    for b in range(3):
        np.testing.assert_array_equal(
            got[b], fastpe.add_sinusoidal(x[b], offset=PATH_OFFSET + int(offs[b]))
        )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_add_agrees_with_the_table_on_every_path(layout, rng):
    # dim 256: table rows stepped as add_sinusoidal steps its values (at 8-127 pairs the
    # table folds, and the two may differ within about 2**-50 of a float32 tie)
    x = rng.standard_normal((3, 300, 256)).astype(np.float32)
    tab = fastpe.sinusoidal_table(600, 256, offset=PATH_OFFSET)  # interleaved
    if layout == "half":
        tab = np.concatenate([tab[:, 0::2], tab[:, 1::2]], axis=1)
    want = x + tab[:300]
    # shared positions: the batch path (cached rows) and one row at a time (no cache)
    np.testing.assert_array_equal(fastpe.add_sinusoidal(x, offset=PATH_OFFSET, layout=layout), want)
    for b in range(3):
        np.testing.assert_array_equal(
            fastpe.add_sinusoidal(x[b], offset=PATH_OFFSET, layout=layout), want[b]
        )
    # per-row offsets and gapped positions
    offs = np.array([0, 7, 300])
    got = fastpe.add_sinusoidal(x, offset=PATH_OFFSET + offs, layout=layout)
    for b, o in enumerate(offs):
        np.testing.assert_array_equal(got[b], x[b] + tab[o : o + 300])
    idx = np.arange(0, 600, 2)
    got = fastpe.add_sinusoidal(x, positions=PATH_OFFSET + idx, layout=layout)
    np.testing.assert_array_equal(got, x + tab[idx])


@pytest.mark.parametrize("zen5", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_threaded_single_row_add_equals_the_table(layout, zen5, rng, monkeypatch):
    # one batch row above the serial threshold: workers add from the stepped state (1 KiB
    # rows prefetching the next row: the half layout's, either on Zen 5, whatever this CPU
    # is), forward and with the rows in reverse (the prefetch of the last row in memory
    # clipped at the array's start); no size bound on Zen 5's prefetch (prefetch_fits)
    monkeypatch.setattr(fastpe._engine, "_zen5", zen5)
    monkeypatch.setattr(fastpe._engine, "_LLC_BYTES", 0)
    tab = fastpe.sinusoidal_table(3000, 256, offset=PATH_OFFSET, layout=layout)
    x = rng.standard_normal((3000, 256)).astype(np.float32)
    np.testing.assert_array_equal(
        fastpe.add_sinusoidal(x, offset=PATH_OFFSET, layout=layout), x + tab
    )
    z = x.copy()[::-1]  # in place on a reversed view
    want = z + tab
    fastpe.add_sinusoidal(z, offset=PATH_OFFSET, layout=layout, out=z)
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_is_table_plus_x(dtype, rng):
    x = rng.standard_normal((64, 256)).astype(dtype)  # (float32: table rows stepped)
    tab = fastpe.sinusoidal_table(64, 256, dtype=dtype)
    # the table value in x's dtype, then one rounded sum
    np.testing.assert_array_equal(fastpe.add_sinusoidal(x), x + tab)


# ---------------------------------------------------------------- mathematics


@settings(max_examples=40, deadline=None)
@given(
    half_dim=st.integers(1, 64),
    offset=st.integers(0, 2**30),
    layout=st.sampled_from(LAYOUTS),
)
def test_row_norm_is_sqrt_half_dim(half_dim, offset, layout):
    t = fastpe.sinusoidal_table(9, 2 * half_dim, offset=offset, layout=layout, dtype=np.float64)
    np.testing.assert_allclose(np.linalg.norm(t, axis=1), np.sqrt(half_dim), rtol=4e-15)


def test_similarity_decays_for_small_k():
    t = fastpe.sinusoidal_table(20, 128, dtype=np.float64)
    dots = t[1:] @ t[0]
    assert np.all(np.diff(dots[:10]) < 0), dots


# PE(p + k) is PE(p) turned by the angles k * w. The turn is done here in mpmath from the exact
# frequencies and rounded once, so it adds half a 2**-52; PE(p)'s error (within
# TABLE_F64_EXACT_ULP1 of exact in each value) goes through the rotation, at most sqrt(2)
# times its size, and PE(p + k) carries its own.
SHIFT_ULP1 = (1 + 2**0.5) * TABLE_F64_EXACT_ULP1 + 0.5


@settings(max_examples=30, deadline=None)
@given(p=st.integers(0, 2**24), k=st.integers(0, 4096))
def test_shift_is_block_rotation(p, k):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 120
    d = 16
    pe_p = fastpe.sinusoidal_table(1, d, offset=p, dtype=np.float64)[0]
    pe_pk = fastpe.sinusoidal_table(1, d, offset=p + k, dtype=np.float64)[0]
    rot = np.empty(d)
    for i in range(d // 2):
        b = k * mpmath.power(10000, mpmath.mpf(-2 * i) / d)
        ck, sk = mpmath.cos(b), mpmath.sin(b)
        s, c = mpmath.mpf(float(pe_p[2 * i])), mpmath.mpf(float(pe_p[2 * i + 1]))
        # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        rot[2 * i] = float(ck * s + sk * c)
        rot[2 * i + 1] = float(ck * c - sk * s)
    err = np.abs(rot - pe_pk) / 2.0**-52
    assert err.max() <= SHIFT_ULP1, f"p={p} k={k}: {err.max():.2f} x 2**-52"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(seq_len=4, dim=7), ValueError, "dim must be a positive even"),
        (dict(seq_len=4, dim=0), ValueError, "dim must be a positive even"),
        (dict(seq_len=4, dim=-2), ValueError, "dim must be a positive even"),
        (dict(seq_len=4, dim=2.0), TypeError, "dim must be an integer"),
        (dict(seq_len=-1, dim=4), ValueError, "seq_len must be >= 0"),
        (dict(seq_len=4.5, dim=4), TypeError, "seq_len must be an integer"),
        (dict(seq_len=None, dim=4), TypeError, "seq_len is required"),
        (dict(dim=4, positions=[0.5, 1]), ValueError, "positions must hold integers"),
        (dict(dim=4, positions=[np.nan]), ValueError, "must be finite"),
        (dict(dim=4, positions=["a"]), TypeError, "integer array"),
        (dict(dim=4, positions=[[1, 2]]), ValueError, "1-D"),
        (dict(dim=4, positions=[2**60]), ValueError, "2\\*\\*53"),
        (dict(seq_len=3, dim=4, positions=[1, 2]), ValueError, "does not match"),
        (dict(seq_len=2, dim=4, positions=[1, 2], offset=3), ValueError, "not both"),
        (dict(seq_len=2, dim=4, dtype=np.int32), TypeError, "float32 or float64"),
        (dict(seq_len=2, dim=4, dtype=np.longdouble), TypeError, "float32 or float64"),
        (dict(seq_len=2, dim=4, layout="pairs"), ValueError, "layout must be"),
        (dict(seq_len=2, dim=4, base=0.0), ValueError, "base must be finite and > 0"),
        (dict(seq_len=2, dim=4, base=np.inf), ValueError, "base must be finite"),
        (dict(seq_len=2, dim=4, offset=1.5), TypeError, "offset must be an integer"),
        (dict(seq_len=2, dim=4, out=np.empty((2, 6), np.float32)), ValueError, "shape"),
        (dict(seq_len=2, dim=4, out=np.empty((2, 4), np.int32)), TypeError, "dtype"),
        (dict(seq_len=2, dim=4, out=[[0.0] * 4] * 2), TypeError, "numpy.ndarray"),
        (
            dict(seq_len=2, dim=4, dtype=np.float64, out=np.empty((2, 4), np.float32)),
            TypeError,
            "dtype",
        ),
    ],
)
@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_table_errors(kwargs, exc, match, impl):
    f = fastpe.sinusoidal_table if impl == "fast" else reference.sinusoidal_table
    with pytest.raises(exc, match=match):
        f(**kwargs)


def test_table_read_only_out_unchanged():
    out = np.full((2, 4), 7.0, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.sinusoidal_table(2, 4, out=out)
    assert np.all(out == 7.0)


def test_table_broadcast_out_refused():
    out = np.broadcast_to(np.zeros(4, np.float32), (3, 4))  # read-only: refused as such
    with pytest.raises(ValueError, match="read-only"):
        fastpe.sinusoidal_table(3, 4, out=out)


def _zero_stride(shape, dtype=np.float64):
    """A writeable view whose rows all alias one row of 7.0 (strides (0, itemsize))."""
    row = np.full(shape[-1], 7.0, dtype)
    view = np.lib.stride_tricks.as_strided(row, shape=shape, strides=(0, row.itemsize))
    assert view.flags.writeable  # past the read-only check: the zero stride must be seen
    return view, row


@pytest.mark.parametrize("call", ["table", "add_out", "add_in_place", "rope_out", "rope_in_place"])
def test_writeable_zero_stride_views_refused_and_untouched(call):
    # every row of such a view is the same memory: written in place, rows would overwrite
    # each other
    view, row = _zero_stride((3, 4))
    x = np.ones((3, 4))
    name = "x" if call.endswith("in_place") else "out"
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        if call == "table":
            fastpe.sinusoidal_table(3, 4, out=view, dtype=np.float64)
        elif call == "add_out":
            fastpe.add_sinusoidal(x, out=view)
        elif call == "add_in_place":
            fastpe.add_sinusoidal(view, out=view)
        elif call == "rope_out":
            fastpe.apply_rope(x, out=view)
        else:
            fastpe.apply_rope(view, out=view)
    assert np.all(row == 7.0) and np.all(x == 1.0)


@pytest.mark.parametrize(
    "x, kwargs, exc, match",
    [
        (np.zeros((4, 6), np.int64), {}, TypeError, "float32 or float64"),
        (np.zeros((4, 6), np.complex64), {}, TypeError, "float32 or float64"),
        (np.zeros((4, 5)), {}, ValueError, "positive even"),
        (np.zeros(6), {}, ValueError, "2-D"),
        (np.zeros((1, 2, 3, 4)), {}, ValueError, "2-D"),
        ([[0.0, 0.0]], {}, TypeError, "numpy.ndarray"),
        (np.zeros((4, 6)), dict(positions=[1, 2]), ValueError, "length 4"),
        (np.zeros((4, 6)), dict(offset=[1, 2]), ValueError, "no batch axis"),
        (np.zeros((2, 4, 6)), dict(offset=[1, 2, 3]), ValueError, "one value per batch"),
        (np.zeros((2, 4, 6)), dict(positions=np.zeros((3, 4), int)), ValueError, "shape"),
        (np.zeros((4, 6)), dict(out=np.zeros((4, 6), np.float32)), TypeError, "dtype"),
        (np.zeros((4, 6)), dict(out=np.zeros((4, 8))), ValueError, "shape"),
    ],
)
def test_add_errors_leave_x_unchanged(x, kwargs, exc, match):
    x0 = x.copy() if isinstance(x, np.ndarray) else None
    with pytest.raises(exc, match=match):
        fastpe.add_sinusoidal(x, **kwargs)
    if x0 is not None:
        np.testing.assert_array_equal(x, x0)


def test_add_in_place_read_only_unchanged():
    x = np.ones((4, 6))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.add_sinusoidal(x, out=x)
    assert np.all(x == 1.0)


def test_add_out_overlapping_x_refused():
    buf = np.zeros((5, 6))
    x = buf[:4]
    out = buf[1:]
    with pytest.raises(ValueError, match="overlaps"):
        fastpe.add_sinusoidal(x, out=out)
    assert np.all(buf == 0.0)


def test_layout_left_out_is_interleaved():
    """``layout=None`` (the default, so that the conventions can tell a layout given) is
    the transformer convention's interleaved layout, fast and reference."""
    for table, add in (
        (fastpe.sinusoidal_table, fastpe.add_sinusoidal),
        (reference.sinusoidal_table, reference.add_sinusoidal),
    ):
        assert np.array_equal(table(5, 8), table(5, 8, layout="interleaved"))
        assert np.array_equal(table(5, 8, layout=None), table(5, 8, layout="interleaved"))
        x = np.ones((2, 5, 8))
        assert np.array_equal(add(x), add(x, layout="interleaved"))
