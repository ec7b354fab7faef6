"""apply_rope: fast vs reference, layouts and views, mathematics, oracle, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _util import DTYPES, INVERSE_ULP, assert_rope_close, norm_ulp_error, pairs
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpe
from fastpe import _cases, reference
from fastpe._freq import inv_freq_dd

# Bounds against the reference, in ulps of each rotated pair's norm (float32: one rounding
# of a float64 result; float64: cos/sin from 5 angle additions plus the rotation).
ROPE_ULP = _cases.ROPE_ULP
# Rotation keeps each pair's norm within (ulps of the norm): float32, cos/sin rounded to
# float32 and two roundings per component; float64, (cos, sin) radius ~1 ulp off 1 plus the
# roundings of the rotation.
NORM_ULP = {np.dtype(np.float32): 2.0, np.dtype(np.float64): 4.0}
# apply then inverse=True: float32 within 3 ulp of the norm (each float32 rotation is within
# 2 of the exact one; the worst pair found by a search, pinned in
# test_inverse_worst_float32_pair, comes back 3 off). float64 within 5: two rotations of plain
# float64 arithmetic; the exact-cos/sin reference itself measures 3.
LAYOUTS = ["interleaved", "half"]
# Two scores q(m).k(n) and q(m+s).k(n+s) of float64 head_dim 64 differ by at most this many
# 2**-52 of sum(|q pair| * |k pair|): each rotated value is within ROPE_ULP + 2 (the
# reference against exact) ulps of its pair norm, which moves a pair's product by up to
# 2*sqrt(2) times that; the 64 products and their sum add at most 64 * 2**-53.
DOT_ULP = 2 * (2 * 2**0.5 * (ROPE_ULP[np.dtype(np.float64)] + 2) + 32)


SHAPES = [
    ((1, 2), None),
    ((7, 8), 0),
    ((1, 1, 2), 1),
    ((2, 9, 16), 1),
    ((3, 33, 2, 64), 1),
    ((2, 5, 3, 8), 2),  # (batch, heads, seq, head_dim)
    ((17, 4, 8), 0),  # packed tokens (tokens, heads, head_dim)
    ((11, 2, 3, 6), 0),
    ((1, 1, 32, 128), 1),  # a decoding step
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, seq_axis", SHAPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
def test_matches_reference(shape, seq_axis, dtype, layout, partial, inverse, rng):
    x = rng.standard_normal(shape).astype(dtype)
    d = shape[-1]
    rot = d if not partial else max(2, (d // 2) // 2 * 2)
    kw = dict(layout=layout, rotary_dim=rot, seq_axis=seq_axis, offset=3, inverse=inverse)
    x0 = x.copy()
    got = fastpe.apply_rope(x, **kw)
    np.testing.assert_array_equal(x, x0)  # out of place: input untouched
    want = reference.apply_rope(x, **kw)
    assert got.shape == x.shape and got.dtype == x.dtype
    assert_rope_close(got, want, x, layout, rot, seq_axis=seq_axis)
    # in place gives the same bits as out of place
    fastpe.apply_rope(x, out=x, **kw)
    np.testing.assert_array_equal(x, got)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0, 15, 16, 65535, 65536, 123_456_789, 2**24, 2**24 + 7, 2**33])
def test_large_offsets(offset, dtype, rng):
    x = rng.standard_normal((2, 40, 3, 32)).astype(dtype)
    for layout in LAYOUTS:
        for inverse in (False, True):
            kw = dict(offset=offset, layout=layout, inverse=inverse)
            got = fastpe.apply_rope(x, **kw)
            want = reference.apply_rope(x, **kw)
            assert_rope_close(got, want, x, layout, 32, offset=offset, inverse=inverse)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [2, 4, 8, 16])
def test_short_rows_offsets_as_positions(dtype, dim, rng):
    # short rows (rope_kernel's short loop) fill their cos/sin a group of consecutive
    # positions at a time, position arrays one position at a time, and rows that are not
    # short (the same values in a strided view, rotated in place) by fold_into_cache: the
    # same bits, across groups of 16 positions, chunk edges, per-row offsets, scaling and
    # inverse
    x = rng.standard_normal((3, 700, dim)).astype(dtype)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    for off in (0, 13, 2**40 - 5, -300, np.array([3, -20, 10**9])):
        per_row = np.ndim(off) == 1
        pos = np.asarray(off).reshape(-1, 1) + np.arange(700) if per_row else off + np.arange(700)
        # (the half layout: short half rows too, dim 4 by the rows written out)
        for kw in (
            {},
            {"inverse": True},
            {"scaling": yarn, "seq_len": 700},
            {"layout": "half"},
            {"layout": "half", "inverse": True},
        ):
            got = fastpe.apply_rope(x, offset=off, **kw)
            want = fastpe.apply_rope(x, positions=pos, **kw)
            assert got.tobytes() == want.tobytes(), (off, kw)
            wide = np.zeros((3, 700, dim + 2), dtype)[..., :dim]  # rows not back to back
            wide[...] = x
            fastpe.apply_rope(wide, offset=off, out=wide, **kw)
            assert got.tobytes() == np.ascontiguousarray(wide).tobytes(), (off, kw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_positions_and_per_batch_offsets(dtype, rng):
    x = rng.standard_normal((3, 20, 2, 16)).astype(dtype)
    # (seq,) positions shared by the batch
    pos1 = rng.integers(0, 2**24, 20)
    got = fastpe.apply_rope(x, positions=pos1)
    assert_rope_close(got, reference.apply_rope(x, positions=pos1), x, "interleaved", 16)
    # (batch, seq) positions: packed sequences whose positions restart
    pos2 = np.stack([np.arange(20), np.r_[np.arange(12), np.arange(8)], rng.integers(0, 9, 20)])
    got = fastpe.apply_rope(x, positions=pos2, layout="half")
    want = reference.apply_rope(x, positions=pos2, layout="half")
    assert_rope_close(got, want, x, "half", 16)
    for b in range(3):
        np.testing.assert_array_equal(
            got[b], fastpe.apply_rope(x[b : b + 1], positions=pos2[b], layout="half")[0]
        )
    # one offset per batch row (decoding with a KV cache)
    offs = np.array([0, 1000, 2**20])
    got = fastpe.apply_rope(x, offset=offs)
    for b in range(3):
        one = fastpe.apply_rope(x[b], offset=int(offs[b]), seq_axis=0)
        np.testing.assert_array_equal(got[b], one)


@pytest.mark.parametrize("heads", [None, 1, 2, 3])
def test_batch_rows_walked_in_groups(heads, rng):
    # with fewer than 4 heads the kernel walks batch rows side by side in groups (of 4 for
    # one head); 7 rows leave a partial group: every row equals the row rotated alone
    shape = (7, 300, 32) if heads is None else (7, 300, heads, 32)
    x = rng.standard_normal(shape).astype(np.float32)
    for layout in LAYOUTS:
        got = fastpe.apply_rope(x, offset=12345, layout=layout)
        assert_rope_close(got, reference.apply_rope(x, offset=12345, layout=layout), x, layout, 32)
        for b in range(7):
            np.testing.assert_array_equal(
                got[b], fastpe.apply_rope(x[b : b + 1], offset=12345, layout=layout)[0]
            )


@pytest.mark.parametrize(
    "offsets", [[0, 5, 17, 40, 2, 2, 9], [-30, -7, 0, 3, 1, 1, 12], [0, 10**6, 5, 1, 2, 3, 4]]
)
@pytest.mark.parametrize("heads", [None, 2])
def test_per_row_offsets_with_few_heads(offsets, heads, rng):
    # offsets within a sequence length of each other: the kernel walks positions, not
    # sequence indices, so that rows share each position's cos/sin; spread-out offsets
    # (the last case) take the per-row path. Both must equal each row rotated alone.
    shape = (7, 40, 32) if heads is None else (7, 40, heads, 32)
    x = rng.standard_normal(shape).astype(np.float32)
    offs = np.array(offsets)
    for layout in LAYOUTS:
        got = fastpe.apply_rope(x, offset=offs, layout=layout)
        want = reference.apply_rope(x, offset=offs, layout=layout)
        assert_rope_close(got, want, x, layout, 32)
        for b in range(7):
            np.testing.assert_array_equal(
                got[b], fastpe.apply_rope(x[b : b + 1], offset=int(offs[b]), layout=layout)[0]
            )


def test_per_row_offsets_threaded(rng):
    # above the serial threshold: workers split the positions between them
    x = rng.standard_normal((6, 3000, 64)).astype(np.float32)
    offs = np.array([0, 100, 2999, 5, 1500, 7])
    got = fastpe.apply_rope(x, offset=offs)
    for b in range(6):
        np.testing.assert_array_equal(
            got[b], fastpe.apply_rope(x[b], offset=int(offs[b]), seq_axis=0)
        )


def test_batch_positions_that_are_shared_or_runs(rng):
    # (batch, seq) positions equal in every row run as shared positions; positions made of
    # runs (one range per row, packed sequences) are walked by position, runs side by side;
    # random positions take the per-row path. Each row must equal the row rotated alone.
    # (6, 3000, 64) is threaded; (8, 40000, 4) has positions over 1 MiB, scanned in parts
    # on the threads
    for shape in [(5, 50, 32), (4, 200, 2, 16), (6, 3000, 64), (8, 40000, 4)]:
        x = rng.standard_normal(shape).astype(np.float32)
        nb, ns = shape[0], shape[1]
        cuts = rng.integers(1, ns - 6, nb)
        cases = [
            np.tile(np.arange(100, 100 + ns), (nb, 1)),
            rng.integers(0, ns, nb)[:, None] + np.arange(ns),
            np.stack([np.r_[np.arange(c), np.arange(ns - c)] for c in cuts]),
            np.stack(
                [np.r_[np.arange(9, 9 + c), np.arange(5), np.arange(ns - c - 5)] for c in cuts]
            )
            + 2**40,
            rng.integers(0, 10**6, (nb, ns)),
        ]
        for pos in cases:
            for layout in LAYOUTS:
                got = fastpe.apply_rope(x, positions=pos, layout=layout)
                for b in range(nb):
                    one = fastpe.apply_rope(x[b : b + 1], positions=pos[b], layout=layout)
                    np.testing.assert_array_equal(got[b], one[0])


def test_position_scans_match_numpy(rng):
    # the engine's scans of (batch, seq) positions, cut into any parts of the rows, against
    # NumPy: whether rows are alike, and the runs of consecutive positions
    from fastpe._engine import parts
    from fastpe._kernels.args import RUN_FIRST, RUN_LENGTH, RUN_ROW, RUN_START
    from fastpe._kernels.scan import fill_runs, scan_rows

    nb, ns = 7, 40
    cuts = rng.integers(1, ns - 1, nb)
    cases = {
        "alike": np.tile(np.arange(3, 3 + ns), (nb, 1)),
        "packed": np.stack([np.r_[np.arange(c), np.arange(ns - c)] for c in cuts]),
        "random": rng.integers(-(2**40), 2**40, (nb, ns)),
        "one pair": np.tile(np.arange(ns), (nb, 1)) + (np.arange(nb) == 6)[:, None],
    }
    for name, pos in cases.items():
        brk = np.ones((nb, ns), dtype=bool)
        brk[:, 1:] = pos[:, 1:] != pos[:, :-1] + 1
        rows, starts = np.nonzero(brk)
        ends = np.append(rows[1:] * ns + starts[1:], nb * ns)
        ends = np.minimum(ends, (rows + 1) * ns) - rows * ns
        want = np.stack([rows, starts, ends - starts, pos[rows, starts]], axis=1)
        for part_cuts in ([0, nb], [0, 3, nb], [0, 1, 2, 5, nb], parts(nb, 1 << 30)):
            got = [
                scan_rows(pos, part_cuts[i], part_cuts[i + 1]) for i in range(len(part_cuts) - 1)
            ]
            assert all(g[0] for g in got) == (name == "alike"), name
            counts = [int(g[1]) for g in got]
            assert sum(counts) == len(want), name
            runs = np.full((sum(counts), 4), -1, dtype=np.int64)
            k0 = np.cumsum([0, *counts])
            for i in range(len(counts)):
                end = fill_runs(pos, part_cuts[i], part_cuts[i + 1], runs, k0[i], k0[i + 1])
                assert end == k0[i + 1], name
            cols = [RUN_ROW, RUN_START, RUN_LENGTH, RUN_FIRST]
            np.testing.assert_array_equal(runs[:, cols], want, err_msg=name)
    # a count that no longer matches the positions: fill_runs never writes past its end
    pos = cases["packed"]
    n = int(scan_rows(pos, 0, nb)[1])
    runs = np.full((n + 1, 4), -1, dtype=np.int64)
    assert fill_runs(pos, 0, nb, runs, 0, n - 1) == n
    assert (runs[n - 1 :] == -1).all()


def _read_only(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    "other",
    [
        "read-only x in place",
        "inv_freq length",
        "scaling factor",
        "scaling without factor",
        "overlapping view",
        "out shape",
    ],
)
def test_per_row_range_error_comes_first(other):
    # out-of-range (B, S) positions together with another bad argument: the range error,
    # as when the argument layer checked it first, and as fastpe.reference gives it
    x = np.ones((3, 40, 2, 8), dtype=np.float32)
    pos = np.tile(np.arange(40), (3, 1))
    pos[1, 1] = 2**60
    kw: dict = dict(positions=pos)
    if other == "read-only x in place":
        x = _read_only(x)
        kw["out"] = x
    elif other == "inv_freq length":
        kw["inv_freq"] = np.ones(3)
    elif other == "scaling factor":
        kw.update(scaling={"rope_type": "yarn", "factor": -2.0}, seq_len=40)
    elif other == "scaling without factor":
        kw.update(scaling={"rope_type": "linear"}, seq_len=40)
    elif other == "overlapping view":
        x = np.lib.stride_tricks.as_strided(np.ones(400, np.float32), (3, 40, 2, 8), (4, 4, 4, 4))
        kw["out"] = x
    else:
        kw["out"] = np.empty((3, 41, 2, 8), np.float32)
    msg = "^positions must be within 2\\*\\*53.*got 1152921504606846976;"
    with pytest.raises(ValueError, match=msg):
        fastpe.apply_rope(x, **kw)
    with pytest.raises(ValueError, match=msg):
        reference.apply_rope(x, **kw)


def test_anchors_at_gives_update_anchors_bits():
    # the kernels bring their anchor cache along by anchors_at's operations (written out in
    # most of them), which inline the most frequent step of update_anchors (only the finest
    # level changes); the cached anchors
    # must be the same bits as update_anchors's, on every path to a position
    from fastpe import _engine
    from fastpe._args.calls import frequencies
    from fastpe._kernels.angles import BITS, LAST, LEVELS, NO_KEY, anchors_at, update_anchors

    wh, wl, key, _ = frequencies(64, 10000.0, None, None, None, None, np.zeros(1, int), 1)
    tc, ts = _engine.tables(key, wh, wl)
    rng = np.random.default_rng(5)
    walk = np.concatenate(
        [
            np.arange(-300, 5000),  # consecutive, across groups of 16, 256 and 4096
            np.arange(65500, 65600),  # across the exact anchor's key (p >> 16)
            np.cumsum(rng.integers(1, 40, 2000)) + 2**40,  # gaps
            rng.integers(-(2**53), 2**53, 200),  # jumps
        ]
    )
    caches = [
        (np.zeros((LEVELS, 32)), np.zeros((LEVELS, 32)), np.full(LEVELS, NO_KEY)) for _ in "ab"
    ]
    for p in walk.tolist():
        (s1, c1, k1), (s2, c2, k2) = caches
        if k1[LAST] != (p >> BITS):
            update_anchors(p, wh, wl, tc, ts, s1, c1, k1)
        if k2[LAST] != (p >> BITS):
            anchors_at(p, wh, wl, tc, ts, s2, c2, k2)
        assert (k1 == k2).all() and (s1 == s2).all() and (c1 == c2).all(), p


def test_zero_anchor_gives_sincos_exact_bits():
    # positions below 2**16 take their exact anchor (at 0) without libm: the same bits as
    # sincos_exact at 0, signed zeros and NaNs included, for any frequency
    from fastpe._kernels.angles import LEVELS, NO_KEY, sincos_exact, update_anchors

    wh = np.array([1.0, 1e-300, 5e-324, 1e300, -2.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 0.3])
    wl = np.array([1e-17, -1e-317, 0.0, -1e283, 1e-17, 0.0, -0.0, 0.0, 0.0, 0.0, -1e-17])
    tc = np.ones((LEVELS * 16, wh.size))
    ts = np.zeros((LEVELS * 16, wh.size))
    s, c = np.zeros((LEVELS, wh.size)), np.zeros((LEVELS, wh.size))
    update_anchors(7, wh, wl, tc, ts, s, c, np.full(LEVELS, NO_KEY))
    want = np.array([sincos_exact(0.0, h, lo) for h, lo in zip(wh, wl)])
    assert s[0].tobytes() == want[:, 0].tobytes()
    assert c[0].tobytes() == want[:, 1].tobytes()
    assert np.signbit(s[0]).any() and not np.signbit(s[0]).all()  # both zeros occur


def test_large_positions_beyond_2_53_refused():
    # a single position out of range anywhere in a large (batch, seq) array is found and
    # named before anything is written
    x = np.ones((4, 70000, 2), dtype=np.float32)
    for where, bad in [(0, 2**53 + 1), (-1, -(2**53) - 1), (140001, 2**62)]:
        pos = np.tile(np.arange(70000), (4, 1))
        pos.flat[where] = bad
        with pytest.raises(ValueError, match=f"2\\*\\*53 in magnitude.*got {bad}"):
            fastpe.apply_rope(x, positions=pos, out=x)
        assert np.all(x == 1.0)


@pytest.mark.parametrize(
    "case", ["in place", "new array", "out", "dynamic scaling", "read-only", "alike"]
)
@pytest.mark.parametrize("bad", [2**53 + 1, -(2**53) - 1, -(2**63), 2**63 - 1])
def test_per_row_positions_range_checked_by_the_scan(case, bad):
    # apply_rope checks the range of (B, S) integer positions in the engine's scan of the
    # rows (RopeCall.range_unchecked), or in the argument layer where something needs the
    # positions first: either way the call raises the argument layer's error, and nothing
    # the caller holds is written
    x = np.ones((3, 40, 2, 8), dtype=np.float32)
    pos = np.tile(np.arange(40), (3, 1))
    pos[-1, 17] = bad
    if case == "alike":
        pos[:] = pos[-1]
    if case == "read-only":
        pos.flags.writeable = False
    out = np.full_like(x, 7.0)
    kw: dict = dict(positions=pos)
    if case == "in place":
        kw["out"] = x
    elif case == "out":
        kw["out"] = out
    elif case == "dynamic scaling":
        kw.update(scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=32)
    with pytest.raises(ValueError, match=f"^positions must be within 2\\*\\*53.*got {bad};"):
        fastpe.apply_rope(x, **kw)
    assert np.all(x == 1.0) and np.all(out == 7.0)
    with pytest.raises(ValueError, match=f"got {bad};"):
        reference.apply_rope(x, **kw)


def test_base(rng):
    x = rng.standard_normal((2, 10, 2, 64))
    for base in (10.0, 500000.0, 1e6):
        got = fastpe.apply_rope(x, base=base, offset=5000)
        want = reference.apply_rope(x, base=base, offset=5000)
        assert_rope_close(got, want, x, "interleaved", 64, base=base)


# ---------------------------------------------------------------- views, no copies


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fused_qkv_slice_in_place(dtype, layout, rng):
    b, s, h, d = 2, 13, 3, 16
    qkv = rng.standard_normal((b, s, h, 3 * d)).astype(dtype)
    before = qkv.copy()
    q = qkv[..., :d]
    k = qkv[..., d : 2 * d]
    want_q = reference.apply_rope(q.copy(), layout=layout, offset=9)
    want_k = reference.apply_rope(k.copy(), layout=layout, offset=9)
    assert fastpe.apply_rope(q, out=q, layout=layout, offset=9) is q
    assert fastpe.apply_rope(k, out=k, layout=layout, offset=9) is k
    assert np.shares_memory(q, qkv)
    assert_rope_close(qkv[..., :d], want_q, before[..., :d], layout, d)
    assert_rope_close(qkv[..., d : 2 * d], want_k, before[..., d : 2 * d], layout, d)
    np.testing.assert_array_equal(qkv[..., 2 * d :], before[..., 2 * d :])  # v untouched


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_qkv_rotary_part_with_partial_dim(dtype, rng):
    tokens, h, d = 21, 4, 32
    qkv = rng.standard_normal((tokens, 3 * h, d)).astype(dtype)  # packed, (T, 3H, hd)
    before = qkv.copy()
    q = qkv[:, :h]
    want = reference.apply_rope(q.copy(), seq_axis=0, rotary_dim=8, layout="half", offset=4)
    fastpe.apply_rope(q, out=q, seq_axis=0, rotary_dim=8, layout="half", offset=4)
    assert_rope_close(qkv[:, :h], want, before[:, :h], "half", 8)
    np.testing.assert_array_equal(qkv[:, h:], before[:, h:])


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_bhsd_view_in_place(dtype, rng):
    buf = rng.standard_normal((2, 17, 4, 16)).astype(dtype)  # (b, s, h, d) memory
    x = buf.copy()
    view = buf.transpose(0, 2, 1, 3)  # (b, h, s, d) view of it
    want = reference.apply_rope(x, offset=3)  # the same rotation with seq on axis 1
    assert fastpe.apply_rope(view, out=view, seq_axis=2, offset=3) is view
    assert np.shares_memory(view, buf)
    assert_rope_close(buf, want, x, "interleaved", 16)
    np.testing.assert_array_equal(buf, fastpe.apply_rope(x, offset=3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_equals_copy_and_parent_untouched(dtype, rng):
    big = rng.standard_normal((5, 40, 6, 24)).astype(dtype)
    before = big.copy()
    view = big[1:4, 3:37:2, 1:5, 4:20]  # strided on every axis but the last
    expect = fastpe.apply_rope(view.copy(), offset=50, rotary_dim=12, layout="half")
    fastpe.apply_rope(view, out=view, offset=50, rotary_dim=12, layout="half")
    np.testing.assert_array_equal(view, expect)
    mask = np.ones(big.shape, dtype=bool)
    mask[1:4, 3:37:2, 1:5, 4:20] = False
    np.testing.assert_array_equal(big[mask], before[mask])


def test_negative_stride_sequence_view(rng):
    buf = rng.standard_normal((2, 30, 8))
    view = buf[:, ::-1]
    expect = fastpe.apply_rope(view.copy(), offset=2)
    fastpe.apply_rope(view, out=view, offset=2)
    np.testing.assert_array_equal(view, expect)


def test_out_other_array(rng):
    x = rng.standard_normal((2, 8, 4))
    x0 = x.copy()
    out = np.full_like(x, np.nan)
    assert fastpe.apply_rope(x, out=out, rotary_dim=2) is out
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(out, fastpe.apply_rope(x, rotary_dim=2))


def test_torch_tensor_in_place_through_numpy():
    torch = pytest.importorskip("torch")
    t = torch.randn(2, 16, 4, 32, dtype=torch.float32)
    expect = fastpe.apply_rope(t.numpy().copy(), layout="half", offset=10)
    a = t.numpy()  # shares memory with t
    fastpe.apply_rope(a, out=a, layout="half", offset=10)
    np.testing.assert_array_equal(t.numpy(), expect)
    # a transposed (b, h, s, d) tensor view, through numpy
    t2 = torch.randn(2, 16, 4, 32, dtype=torch.float64)
    v = t2.transpose(1, 2)
    expect2 = fastpe.apply_rope(v.numpy().copy(), seq_axis=2)
    fastpe.apply_rope(v.numpy(), out=v.numpy(), seq_axis=2)
    np.testing.assert_array_equal(v.numpy(), expect2)


# ---------------------------------------------------------------- independent transcriptions


def _cos_sin(pos, rot, base=10000.0):
    hi, lo = inv_freq_dd(base, rot)
    s, c = reference.sincos(pos, hi, lo)
    return c, s


def test_reference_equals_rotate_half_transcription(rng):
    # Hugging Face: q * cos + rotate_half(q) * sin, cos/sin = cat(freqs, freqs)
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return np.concatenate((-x2, x1), axis=-1)

    q = rng.standard_normal((2, 4, 50, 64))  # (batch, heads, seq, head_dim)
    pos = np.arange(50) + 100
    c, s = _cos_sin(pos, 64)
    cos = np.concatenate([c, c], axis=-1)[None, None]
    sin = np.concatenate([s, s], axis=-1)[None, None]
    hf = q * cos + rotate_half(q) * sin
    got = reference.apply_rope(q, layout="half", seq_axis=2, offset=100)
    err = norm_ulp_error(got, hf, np.abs(q).max(), np.float64)
    assert err.max() <= 2.0


def test_reference_equals_rotate_every_two_transcription(rng):
    # GPT-J: x * cos + rotate_every_two(x) * sin, cos/sin repeated twice, interleaved
    def rotate_every_two(x):
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
        return np.stack((-x2, x1), axis=-1).reshape(x.shape)

    x = rng.standard_normal((3, 40, 2, 32))  # (batch, seq, heads, head_dim)
    rot = 16  # partial rotary, as GPT-J's rotary_dim
    c, s = _cos_sin(np.arange(40), rot)
    cos = np.repeat(c, 2, axis=-1)[None, :, None, :]
    sin = np.repeat(s, 2, axis=-1)[None, :, None, :]
    xr = x[..., :rot]
    gptj = np.concatenate([xr * cos + rotate_every_two(xr) * sin, x[..., rot:]], axis=-1)
    got = reference.apply_rope(x, rotary_dim=rot)
    err = norm_ulp_error(got, gptj, np.abs(x).max(), np.float64)
    assert err.max() <= 2.0
    np.testing.assert_array_equal(got[..., rot:], x[..., rot:])


def test_reference_against_mpmath_oracle():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 200
    rng = np.random.default_rng(7)
    rot = 16
    positions = np.r_[rng.integers(0, 2**24, 40), 2**24 - 1, 0, 1]
    x = rng.standard_normal((1, positions.size, rot))
    got = reference.apply_rope(x, positions=positions)
    worst = 0.0
    for r, p in enumerate(positions):
        for i in range(rot // 2):
            ang = int(p) * mpmath.power(10000, mpmath.mpf(-2 * i) / rot)
            c, s = mpmath.cos(ang), mpmath.sin(ang)
            x1, x2 = mpmath.mpf(x[0, r, 2 * i]), mpmath.mpf(x[0, r, 2 * i + 1])
            y1, y2 = x1 * c - x2 * s, x2 * c + x1 * s
            u = np.spacing(float(mpmath.sqrt(x1 * x1 + x2 * x2)))
            e = max(abs(float(y1 - got[0, r, 2 * i])), abs(float(y2 - got[0, r, 2 * i + 1])))
            worst = max(worst, e / u)
    assert worst <= 2.0, worst


# ---------------------------------------------------------------- mathematics


@settings(max_examples=30, deadline=None)
@given(
    offset=st.integers(0, 2**30),
    layout=st.sampled_from(LAYOUTS),
    dtype=st.sampled_from(DTYPES),
)
def test_rotation_keeps_pair_norms(offset, layout, dtype):
    x = np.random.default_rng(offset % 1000).standard_normal((2, 9, 3, 16)).astype(dtype)
    y = fastpe.apply_rope(x, offset=offset, layout=layout)
    x1, x2 = pairs(x.astype(np.float64), layout, 16)
    y1, y2 = pairs(y.astype(np.float64), layout, 16)
    n_in, n_out = np.hypot(x1, x2), np.hypot(y1, y2)
    err = np.abs(n_out - n_in) / np.spacing(n_in.astype(dtype)).astype(np.float64)
    assert err.max() <= NORM_ULP[np.dtype(dtype)], err.max()


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 2**20), n=st.integers(0, 2**20), shift=st.integers(0, 2**20))
def test_dot_product_depends_only_on_relative_position(m, n, shift):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 64))
    k = rng.standard_normal((1, 1, 64))

    def score(a, b):
        qa = fastpe.apply_rope(q, offset=a, layout="half")
        kb = fastpe.apply_rope(k, offset=b, layout="half")
        return float(np.sum(qa * kb))

    s1 = score(m, n)
    s2 = score(m + shift, n + shift)
    q1, q2 = pairs(q, "half", 64)
    k1, k2 = pairs(k, "half", 64)
    scale = float(np.sum(np.hypot(q1, q2) * np.hypot(k1, k2)))  # >= |any score|
    assert abs(s1 - s2) <= DOT_ULP * 2.0**-52 * scale, abs(s1 - s2) / 2.0**-52 / scale


@settings(max_examples=30, deadline=None)
@given(
    offset=st.integers(0, 2**24),
    layout=st.sampled_from(LAYOUTS),
    dtype=st.sampled_from(DTYPES),
)
def test_inverse_undoes(offset, layout, dtype):
    x = np.random.default_rng(1).standard_normal((2, 7, 2, 8)).astype(dtype)
    y = fastpe.apply_rope(x, offset=offset, layout=layout)
    fastpe.apply_rope(y, offset=offset, layout=layout, inverse=True, out=y)
    x1, x2 = pairs(x.astype(np.float64), layout, 8)
    norm = np.hypot(x1, x2)
    y1, y2 = pairs(y, layout, 8)
    err = np.maximum(norm_ulp_error(y1, x1, norm, dtype), norm_ulp_error(y2, x2, norm, dtype))
    assert err.max() <= INVERSE_ULP[np.dtype(dtype)], err.max()


def test_inverse_worst_float32_pair():
    """The worst float32 round trip found by a search: 3 ulp of the pair's norm, not 2."""
    x = np.zeros((1, 64), np.float32)
    x[0, 26] = float.fromhex("-0x1.cd5f16p-4")
    x[0, 27] = float.fromhex("0x1.ed61a4p+0")
    p = np.array([409929])
    y = fastpe.apply_rope(x, positions=p)
    z = fastpe.apply_rope(y, positions=p, inverse=True)
    norm = np.hypot(*x[0, 26:28].astype(np.float64))
    err = np.abs(z[0, 26:28].astype(np.float64) - x[0, 26:28]) / np.spacing(np.float32(norm))
    assert err.max() == INVERSE_ULP[np.dtype(np.float32)] == 3.0, err


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "x, kwargs, exc, match",
    [
        (np.zeros((2, 4, 8), np.int32), {}, TypeError, "float32 or float64"),
        (np.zeros((2, 4, 8), np.complex128), {}, TypeError, "float32 or float64"),
        (np.zeros((2, 4, 8), np.longdouble), {}, TypeError, "float32 or float64"),
        (np.zeros(8), {}, ValueError, "2-D"),
        (np.zeros((1, 2, 3, 4, 8)), {}, ValueError, "2-D"),
        (np.zeros((2, 4, 8)), dict(rotary_dim=3), ValueError, "rotary_dim must be even"),
        (np.zeros((2, 4, 8)), dict(rotary_dim=10), ValueError, "<= 8"),
        (np.zeros((2, 4, 8)), dict(rotary_dim=0), ValueError, "> 0"),
        (np.zeros((2, 4, 7)), {}, ValueError, "odd length 7"),
        (np.zeros((2, 4, 8)), dict(positions=np.arange(5)), ValueError, "length 4"),
        (np.zeros((2, 4, 8)), dict(positions=np.zeros((3, 4), int)), ValueError, "shape"),
        (np.zeros((2, 4, 8)), dict(positions=np.zeros((2, 2, 4), int)), ValueError, "1-D or 2-D"),
        (np.zeros((2, 4, 8)), dict(positions=np.array([0.5, 1, 2, 3])), ValueError, "integers"),
        (np.zeros((2, 4, 8)), dict(positions=[0, 1, np.inf, 3]), ValueError, "finite"),
        (np.zeros((2, 4, 8)), dict(offset=[1, 2, 3]), ValueError, "one value per batch row"),
        (np.zeros((2, 4, 8)), dict(offset=[0.5, 1]), ValueError, "integers"),
        (np.zeros((4, 8)), dict(offset=[1, 2]), ValueError, "no batch axis"),
        (np.zeros((4, 8)), dict(positions=np.zeros((1, 4), int)), ValueError, "batch axis"),
        (np.zeros((2, 4, 8)), dict(offset=1, positions=np.arange(4)), ValueError, "not both"),
        (np.zeros((2, 4, 8)), dict(seq_axis=2), ValueError, "seq_axis"),
        (np.zeros((2, 4, 8)), dict(layout="gptj"), ValueError, "layout"),
        (np.zeros((2, 4, 8)), dict(inverse=1), TypeError, "inverse"),
        (np.zeros((2, 4, 8)), dict(base=-1.0), ValueError, "base"),
        (np.zeros((2, 4, 8)), dict(out=np.zeros((2, 4, 8), np.float32)), TypeError, "dtype"),
        (np.zeros((2, 4, 8)), dict(out=np.zeros((2, 4, 6))), ValueError, "shape"),
        (np.zeros((8, 4, 2)).transpose(2, 1, 0), {}, ValueError, "unit stride"),
        ([[1.0, 2.0]], {}, TypeError, "numpy.ndarray"),
    ],
)
@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_errors(x, kwargs, exc, match, impl):
    f = fastpe.apply_rope if impl == "fast" else reference.apply_rope
    x0 = x.copy() if isinstance(x, np.ndarray) else None
    with pytest.raises(exc, match=match):
        f(x, **kwargs)
    if x0 is not None:
        np.testing.assert_array_equal(x, x0)


def test_in_place_errors_leave_x_unchanged(rng):
    x = rng.standard_normal((2, 4, 8))
    x0 = x.copy()
    for kwargs in (dict(rotary_dim=9), dict(positions=np.arange(3)), dict(offset=[1, 2, 3])):
        with pytest.raises(ValueError):
            fastpe.apply_rope(x, out=x, **kwargs)
        np.testing.assert_array_equal(x, x0)


def test_read_only_x_in_place_refused():
    x = np.ones((2, 4, 8))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.apply_rope(x, out=x)
    assert np.all(x == 1.0)
    # out of place on a read-only input is fine
    assert fastpe.apply_rope(x).flags.writeable


def test_out_overlapping_x_refused():
    buf = np.ones((3, 5, 8))
    with pytest.raises(ValueError, match="overlaps"):
        fastpe.apply_rope(buf[:2], out=buf[1:])
    assert np.all(buf == 1.0)


def test_non_unit_last_axis_view_refused_not_copied():
    buf = np.ones((2, 4, 16))
    view = buf[..., ::2]
    with pytest.raises(ValueError, match="unit stride"):
        fastpe.apply_rope(view, out=view)
    assert np.all(buf == 1.0)


def test_empty_arrays():
    for shape in [(0, 8), (2, 0, 8), (0, 3, 2, 8), (2, 5, 0, 8)]:
        x = np.zeros(shape, np.float32)
        assert fastpe.apply_rope(x).shape == shape
        assert fastpe.apply_rope(x, out=x) is x


def test_out_without_unit_stride_channels_refused_and_untouched(rng):
    x = rng.standard_normal((2, 4, 8))
    x0 = x.copy()
    buf = np.full((2, 4, 16), 7.0)
    out = buf[..., ::2]  # right shape and dtype, channels two apart
    with pytest.raises(ValueError, match="out") as info:
        fastpe.apply_rope(x, out=out)
    assert "stride" in str(info.value)
    assert np.all(buf == 7.0)
    np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize("in_place", [False, True])
def test_4d_seq_axis_0_with_axes_that_do_not_merge_refused(in_place):
    # (seq, a, h, d) seen as (1, seq, a*h, d) needs axes 1 and 2 to merge into one stride
    x = np.arange(3 * 4 * 5 * 8, dtype=np.float64).reshape(3, 4, 5, 8).transpose(0, 2, 1, 3)
    x0 = x.copy()
    with pytest.raises(ValueError, match="seq_axis"):
        fastpe.apply_rope(x, seq_axis=0, out=x if in_place else None)
    np.testing.assert_array_equal(x, x0)
    # the same axes in a mergeable layout are accepted, and agree with the reference
    y = np.ascontiguousarray(x)
    want = reference.apply_rope(y, seq_axis=0)
    assert_rope_close(fastpe.apply_rope(y, seq_axis=0), want, y, "interleaved", 8)


ABOVE_2_53 = [
    np.array([0, 1, 2**53 + 1, 3], dtype=np.uint64),
    np.array([0, 1, 2**64 - 1, 3], dtype=np.uint64),
    np.array([0.0, 1.0, 2.0**53 + 2, 3.0]),
    np.array([0.0, 1.0, 2.0**60, 3.0], dtype=np.float64),
    np.array([0.0, 1.0, -(2.0**53) - 2, 3.0]),
]


@pytest.mark.parametrize("pos", ABOVE_2_53, ids=lambda p: f"{p.dtype}-{p[2]:.0f}")
def test_positions_beyond_2_53_refused(pos):
    # positions are turned into exact float64 angles: above 2**53 they no longer are
    x = np.ones((2, 4, 8))
    with pytest.raises(ValueError, match="positions"):
        fastpe.apply_rope(x, positions=pos)
    with pytest.raises(ValueError, match="positions"):
        fastpe.apply_rope(x, positions=pos, out=x)
    assert np.all(x == 1.0)
    with pytest.raises(ValueError, match="positions"):
        fastpe.add_sinusoidal(x, positions=pos, out=x)
    assert np.all(x == 1.0)
    with pytest.raises(ValueError, match="positions"):
        fastpe.sinusoidal_table(positions=pos, dim=8)
    # exactly 2**53 is still an exact float64 position
    ok = np.array([0, 1, 2**53, 3], dtype=pos.dtype)
    assert_rope_close(
        fastpe.apply_rope(x, positions=ok),
        reference.apply_rope(x, positions=ok),
        x,
        "interleaved",
        8,
    )
