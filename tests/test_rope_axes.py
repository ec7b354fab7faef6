"""Multi-axis RoPE (``pair_axes=``, ``inv_freq=``): fast vs 1-D calls, vs the reference, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _util import DTYPES, assert_rope_close

import fastpe
from fastpe import reference

LAYOUTS = ["interleaved", "half"]
QWEN2_VL = [0] * 16 + [1] * 24 + [2] * 24  # mrope_section [16, 24, 24], head_dim 128


def _interleaved_mrope(section, npairs):
    """Qwen3-VL's interleaved M-RoPE: pairs cycle t, h, w over 3 * section[1|2] pairs."""
    ax = np.zeros(npairs, dtype=np.int64)
    ax[1 : 3 * section[1] : 3] = 1
    ax[2 : 3 * section[2] : 3] = 2
    return ax


def _pair_columns(axes, layout, rot, k):
    """The channels of the pairs whose axis is ``k``."""
    idx = np.flatnonzero(np.asarray(axes) == k)
    n = rot // 2
    if layout == "half":
        return np.concatenate([idx, idx + n])
    return np.concatenate([2 * idx, 2 * idx + 1])


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.itemsize}"))


AXES = {
    "qwen2-vl": np.array(QWEN2_VL),
    "qwen3-vl": _interleaved_mrope([24, 20, 20], 64),
    "random": np.random.default_rng(5).integers(0, 3, 64),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scheme", sorted(AXES))
@pytest.mark.parametrize("per_row", [False, True])
def test_each_axis_gets_the_bits_of_a_1d_call(dtype, layout, scheme, per_row, rng):
    """A pair of axis k is rotated exactly as a 1-D call with positions[k] rotates it."""
    axes = AXES[scheme]
    x = rng.standard_normal((2, 41, 3, 128)).astype(dtype)
    shape = (3, 2, 41) if per_row else (3, 41)
    pos = rng.integers(-5, 70_000, size=shape)
    got = fastpe.apply_rope(x, positions=pos, pair_axes=axes, layout=layout)
    for k in range(3):
        one = fastpe.apply_rope(x, positions=pos[k], layout=layout)
        cols = _pair_columns(axes, layout, 128, k)
        np.testing.assert_array_equal(_bits(got[..., cols]), _bits(one[..., cols]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "shape, seq_axis, rot",
    [
        ((37, 64), None, 64),
        ((2, 37, 64), 1, 48),
        ((2, 37, 4, 32), 1, 32),
        ((2, 4, 37, 32), 2, 16),  # (batch, heads, seq, head_dim)
        ((37, 4, 32), 0, 32),  # (tokens, heads, head_dim)
    ],
)
@pytest.mark.parametrize("inverse", [False, True])
def test_matches_reference(dtype, layout, shape, seq_axis, rot, inverse, rng):
    x = rng.standard_normal(shape).astype(dtype)
    ns = shape[seq_axis if seq_axis is not None else 0]
    axes = rng.integers(0, 3, rot // 2)
    batch = shape[0] if (seq_axis or 0) >= 1 and len(shape) > 2 else None
    pos = rng.integers(0, 3_000_000, size=(3, ns) if batch is None else (3, batch, ns))
    kw = dict(
        positions=pos,
        pair_axes=axes,
        layout=layout,
        rotary_dim=rot,
        seq_axis=seq_axis,
        inverse=inverse,
    )
    x0 = x.copy()
    got = fastpe.apply_rope(x, **kw)
    np.testing.assert_array_equal(x, x0)
    want = reference.apply_rope(x, **kw)
    xm = np.moveaxis(x, seq_axis, 1) if seq_axis == 2 else x
    gm = np.moveaxis(got, seq_axis, 1) if seq_axis == 2 else got
    wm = np.moveaxis(want, seq_axis, 1) if seq_axis == 2 else want
    assert_rope_close(gm, wm, xm, layout, rot)
    y = x.copy()
    assert fastpe.apply_rope(y, out=y, **kw) is y  # in place: the same values
    np.testing.assert_array_equal(y, got)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_threaded_large_call_matches_reference(dtype, layout, rng):
    """Over 1 MiB: the work is split over threads and work items."""
    x = rng.standard_normal((3, 700, 4, 64)).astype(dtype)
    pos = rng.integers(0, 100_000, size=(3, 3, 700))
    axes = AXES["qwen3-vl"][:32]
    kw = dict(positions=pos, pair_axes=axes, layout=layout)
    got = fastpe.apply_rope(x, **kw)
    assert_rope_close(got, reference.apply_rope(x, **kw), x, layout, 64)


def test_equal_axes_are_1d_rope(rng):
    x = rng.standard_normal((2, 50, 2, 64)).astype(np.float32)
    p = rng.integers(0, 10_000, size=(2, 50))
    got = fastpe.apply_rope(x, positions=np.stack([p, p, p]), pair_axes=AXES["random"][:32])
    np.testing.assert_array_equal(got, fastpe.apply_rope(x, positions=p))


def test_rows_alike_and_per_row_agree(rng):
    """(n_axes, batch, seq) positions with equal rows give what (n_axes, seq) gives."""
    x = rng.standard_normal((3, 20, 2, 32)).astype(np.float64)
    p = rng.integers(0, 500, size=(2, 20))
    axes = [0, 1] * 8
    shared = fastpe.apply_rope(x, positions=p, pair_axes=axes)
    rows = fastpe.apply_rope(x, positions=np.repeat(p[:, None], 3, axis=1), pair_axes=axes)
    np.testing.assert_array_equal(shared, rows)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_inv_freq_matches_reference(dtype, layout, rng):
    """Axial vision RoPE: each axis with its own frequencies, given as float64."""
    x = rng.standard_normal((1, 64, 2, 40)).astype(dtype)
    hw = np.stack(np.meshgrid(np.arange(8), np.arange(8), indexing="ij")).reshape(2, 64)
    f = 100.0 ** (-np.arange(10) / 10)
    inv_freq = np.concatenate([f, f])
    axes = [0] * 10 + [1] * 10
    kw = dict(positions=hw, pair_axes=axes, inv_freq=inv_freq, layout=layout)
    got = fastpe.apply_rope(x, **kw)
    assert_rope_close(got, reference.apply_rope(x, **kw), x, layout, 40)


def test_inv_freq_equal_to_the_default_frequencies(rng):
    """Given frequencies equal to base**(-2i/d) rounded to float64: within the 1-D bound."""
    x = rng.standard_normal((1, 30, 2, 32)).astype(np.float32)
    f = 10000.0 ** (-np.arange(0, 32, 2) / 32)
    got = fastpe.apply_rope(x, offset=0, inv_freq=f)
    assert_rope_close(got, reference.apply_rope(x), x, "interleaved", 32)


def test_reference_picks_each_pairs_axis():
    """The reference itself, on one pair per axis: angle = position of that axis * w."""
    x = np.zeros((1, 1, 4))
    x[..., 0::2] = 1.0
    pos = np.array([[3], [5]])
    got = reference.apply_rope(x, positions=pos, pair_axes=[1, 0], inv_freq=[0.25, 0.5])
    np.testing.assert_allclose(  # two cos/sin, no accumulated error: float64's half ulp
        got[0, 0], [np.cos(1.25), np.sin(1.25), np.cos(1.5), np.sin(1.5)], rtol=2**-52
    )


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(pair_axes=[0] * 8), ValueError, "pair_axes needs positions"),
        (dict(pair_axes=[0] * 8, positions=np.zeros((1, 5), int), offset=2), ValueError, "offset"),
        (dict(pair_axes=[0] * 7, positions=np.zeros((1, 5), int)), ValueError, r"shape \(8,\)"),
        (dict(pair_axes=[0, -1] * 4, positions=np.zeros((2, 5), int)), ValueError, ">= 0"),
        (dict(pair_axes=[0, 2] * 4, positions=np.zeros((2, 5), int)), ValueError, "axis 2"),
        (dict(pair_axes=[0.0] * 8, positions=np.zeros((1, 5), int)), TypeError, "integers"),
        (dict(pair_axes=[0] * 8, positions=np.zeros(5, int)), ValueError, r"\(n_axes, seq\)"),
        (dict(pair_axes=[0] * 8, positions=np.zeros((1, 6), int)), ValueError, r"positions\[a\]"),
        (dict(positions=np.zeros((3, 2, 5), int)), ValueError, "pair_axes"),
        (dict(inv_freq=[0.1] * 7), ValueError, "one frequency per rotated pair"),
        (dict(inv_freq=[np.nan] * 8), ValueError, "finite"),
        (dict(inv_freq=["a"] * 8), TypeError, "real numbers"),
        (
            dict(inv_freq=[0.1] * 8, scaling={"rope_type": "linear", "factor": 2.0}),
            ValueError,
            "scaling",
        ),
        (dict(inv_freq=[0.1] * 8, base=500.0), ValueError, "base"),
    ],
)
@pytest.mark.parametrize("impl", [fastpe.apply_rope, reference.apply_rope])
def test_refusals_write_nothing(kw, exc, match, impl, rng):
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    x0 = x.copy()
    with pytest.raises(exc, match=match):
        impl(x, out=x, **kw)
    np.testing.assert_array_equal(x, x0)


# ---------------------------------------------------------------- blocked layout "half:k"


def _half_dtypes():
    bf16 = fastpe._args.bfloat16_dtype()
    return [np.float16] + ([bf16] if bf16 is not None else [])


BLOCKED = ["half:2", "half:3"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", BLOCKED)
@pytest.mark.parametrize(
    "shape, seq_axis, rot",
    [
        ((37, 48), None, 48),
        ((2, 37, 48), 1, 36),
        ((2, 37, 4, 24), 1, 24),
        ((2, 4, 37, 24), 2, 12),  # (batch, heads, seq, head_dim)
        ((37, 4, 24), 0, 24),  # (tokens, heads, head_dim)
    ],
)
@pytest.mark.parametrize("where", ["offset", "positions", "axes"])
@pytest.mark.parametrize("inverse", [False, True])
def test_blocked_layout_matches_reference(dtype, layout, shape, seq_axis, rot, where, inverse, rng):
    x = rng.standard_normal(shape).astype(dtype)
    ns = shape[seq_axis if seq_axis is not None else 0]
    batch = shape[0] if (seq_axis or 0) >= 1 and len(shape) > 2 else None
    kw: dict = dict(layout=layout, rotary_dim=rot, seq_axis=seq_axis, inverse=inverse)
    if where == "offset":
        kw["offset"] = 3 if batch is None else np.arange(batch) * 1000 + 3
    elif where == "positions":
        kw["positions"] = rng.integers(0, 3_000_000, size=ns if batch is None else (batch, ns))
    else:
        kw["pair_axes"] = rng.integers(0, 3, rot // 2)
        kw["positions"] = rng.integers(
            0, 3_000_000, size=(3, ns) if batch is None else (3, batch, ns)
        )
    x0 = x.copy()
    got = fastpe.apply_rope(x, **kw)
    np.testing.assert_array_equal(x, x0)
    want = reference.apply_rope(x, **kw)
    xm, gm, wm = (np.moveaxis(a, seq_axis, 1) if seq_axis == 2 else a for a in (x, got, want))
    assert_rope_close(gm, wm, xm, layout, rot)
    y = x.copy()
    assert fastpe.apply_rope(y, out=y, **kw) is y  # in place: the same values
    np.testing.assert_array_equal(y, got)


@pytest.mark.parametrize("dtype", DTYPES + _half_dtypes())
@pytest.mark.parametrize("blocks", [2, 3])
@pytest.mark.parametrize("per_row", [False, True])
def test_blocked_layout_is_one_half_call_per_block(dtype, blocks, per_row, rng):
    """``"half:k"`` gives the bits of ``"half"`` calls on each block of channels, each with
    its pairs' frequencies and positions (Gemma 4's vision tower: one block per axis)."""
    d, m = 12 * blocks, 6  # 6 pairs per block
    x = rng.standard_normal((2, 41, 3, d + 4)).astype(dtype)  # 4 channels not rotated
    pos = rng.integers(0, 70_000, size=(blocks, 2, 41) if per_row else (blocks, 41))
    f = 100.0 ** (-np.arange(m) / m)
    inv = np.tile(f, blocks)
    axes = np.repeat(np.arange(blocks), m)
    got = fastpe.apply_rope(
        x, positions=pos, pair_axes=axes, inv_freq=inv, layout=f"half:{blocks}", rotary_dim=d
    )
    want = x.copy()
    for b in range(blocks):
        part = want[..., b * 2 * m : (b + 1) * 2 * m]
        fastpe.apply_rope(part, positions=pos[b], inv_freq=f, layout="half", out=part)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_half_with_one_block_is_half(rng):
    x = rng.standard_normal((2, 9, 3, 16)).astype(np.float32)
    for impl in (fastpe.apply_rope, reference.apply_rope):
        np.testing.assert_array_equal(
            impl(x, layout="half:1", offset=7), impl(x, layout="half", offset=7)
        )


@pytest.mark.parametrize("dtype", DTYPES + _half_dtypes())
def test_blocked_layout_threaded_large_call(dtype, rng):
    """Over 1 MiB, split over threads; decoding-style repeated calls (plans) agree too."""
    x = rng.standard_normal((3, 700, 4, 64)).astype(dtype)
    kw = dict(layout="half:2", offset=11)
    got = fastpe.apply_rope(x, **kw)
    if dtype in DTYPES:
        assert_rope_close(got, reference.apply_rope(x, **kw), x, "half:2", 64)
    one = x[:, :1].copy()
    for _ in range(2):  # the second call would take a plan: blocked calls are not planned
        step = fastpe.apply_rope(one, out=one.copy(), layout="half:2", offset=11)
        np.testing.assert_array_equal(_bits(step), _bits(got[:, :1]))
    q, k = x[:, :5, :4].copy(), x[:, :5, :2].copy()
    rq, rk = fastpe.apply_rope_qk(q, k, out=(q, k), **kw)
    np.testing.assert_array_equal(_bits(rq), _bits(got[:, :5, :4]))
    np.testing.assert_array_equal(_bits(rk), _bits(got[:, :5, :2]))


@pytest.mark.parametrize(
    "layout, rot, match",
    [
        ("half:0", 16, r"'half:k' needs a block count"),
        ("half:x", 16, r"'half:k' needs a block count"),
        ("half:-2", 16, r"'half:k' needs a block count"),
        ("half: 2", 16, r"'half:k' needs a block count"),
        ("half:3", 16, r"rotary_dim must be a multiple of 6, got 16"),
        ("half:2", 6, r"rotary_dim must be a multiple of 4, got 6"),
        ("halves", 16, r"'interleaved', 'half' or 'half:k'"),
    ],
)
@pytest.mark.parametrize("impl", [fastpe.apply_rope, reference.apply_rope])
def test_blocked_layout_refusals_write_nothing(layout, rot, match, impl, rng):
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    x0 = x.copy()
    with pytest.raises(ValueError, match=match):
        impl(x, out=x, layout=layout, rotary_dim=rot)
    np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: fastpe.sinusoidal_table(8, 16, layout="half:2"),
        lambda: fastpe.add_sinusoidal(np.zeros((8, 16)), layout="half:2"),
        lambda: reference.sinusoidal_table(8, 16, layout="half:2"),
    ],
)
def test_tables_refuse_the_blocked_layout(call):
    with pytest.raises(ValueError, match=r"layout must be one of 'interleaved', 'half'"):
        call()


# ------------------------------------------------ two rows of pair_axes (HunYuan-VL)

SPLIT = np.array([[0] * 8 + [1] * 8, [2] * 8 + [3] * 8])  # 16 pairs: first and second axes


def _channels(layout, rot):
    """Slices of the first and the second channels of the pairs."""
    if layout == "half":
        return slice(0, rot // 2), slice(rot // 2, rot)
    return slice(0, rot, 2), slice(1, rot, 2)


@pytest.mark.parametrize("dtype", DTYPES + _half_dtypes())
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("per_row", [False, True])
def test_split_axes_take_each_channel_from_its_axis(dtype, layout, per_row, rng):
    """With two rows, each pair's first channel is what a call with pair_axes[0] gives it
    and its second what a call with pair_axes[1] gives it, bit for bit."""
    x = rng.standard_normal((2, 41, 3, 36)).astype(dtype)  # 4 channels not rotated
    pos = rng.integers(0, 70_000, size=(4, 2, 41) if per_row else (4, 41))
    kw = dict(positions=pos, layout=layout, rotary_dim=32)
    got = fastpe.apply_rope(x, pair_axes=SPLIT, **kw)
    _, second = _channels(layout, 32)
    want = fastpe.apply_rope(x, pair_axes=SPLIT[0], **kw)
    want[..., second] = fastpe.apply_rope(x, pair_axes=SPLIT[1], **kw)[..., second]
    np.testing.assert_array_equal(_bits(got), _bits(want))
    y = x.copy()
    fastpe.apply_rope(y, out=y, pair_axes=SPLIT, **kw)
    np.testing.assert_array_equal(_bits(y), _bits(got))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_split_axes_match_reference(dtype, layout, rng):
    x = rng.standard_normal((3, 700, 4, 32)).astype(dtype)  # > 1 MiB: threaded
    pos = rng.integers(0, 3_000_000, size=(4, 3, 700))
    kw = dict(positions=pos, pair_axes=SPLIT, layout=layout)
    got = fastpe.apply_rope(x, **kw)
    assert_rope_close(got, reference.apply_rope(x, **kw), x, layout, 32)


def test_split_axes_with_equal_rows_are_one_row(rng):
    x = rng.standard_normal((2, 9, 32)).astype(np.float32)
    pos = rng.integers(0, 500, size=(4, 2, 9))
    for f in (fastpe.apply_rope, reference.apply_rope):
        np.testing.assert_array_equal(
            f(x, positions=pos, pair_axes=np.stack([SPLIT[0], SPLIT[0]]), inverse=True),
            f(x, positions=pos, pair_axes=SPLIT[0], inverse=True),
        )


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(inverse=True), r"inverse=True needs a rotation"),
        (dict(layout="half:2"), r"cannot be combined with two rows"),
    ],
)
@pytest.mark.parametrize("impl", [fastpe.apply_rope, reference.apply_rope])
def test_split_axes_refusals_write_nothing(kw, match, impl, rng):
    x = rng.standard_normal((2, 5, 32)).astype(np.float32)
    x0 = x.copy()
    with pytest.raises(ValueError, match=match):
        impl(x, out=x, positions=np.zeros((4, 5), int), pair_axes=SPLIT, **kw)
    np.testing.assert_array_equal(x, x0)
    with pytest.raises(ValueError, match=r"\(2, 16\)"):
        impl(x, out=x, positions=np.zeros((4, 5), int), pair_axes=np.zeros((3, 16), int))
