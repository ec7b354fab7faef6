"""Tests for fastpe.layout: interleaved <-> half channel layouts, for activations and weights."""

from __future__ import annotations

import numpy as np
import pytest
from _util import norm_ulp_error, ulp

import fastpe
from fastpe import _cases, reference
from fastpe.layout import (
    half_to_interleaved,
    half_to_interleaved_weights,
    interleaved_to_half,
    interleaved_to_half_weights,
    layout_permutation,
)

RNG = np.random.default_rng(20240601)


# --------------------------------------------------------------------------- local RoPE


def rope_local(x, positions, *, base=10000.0, layout="interleaved", rotary_dim=None):
    """Plain NumPy RoPE on the last axis of ``x`` (shape (seq, ..., dim)), float64."""
    x = np.asarray(x, dtype=np.float64)
    dim = x.shape[-1]
    rot = dim if rotary_dim is None else rotary_dim
    half = rot // 2
    inv_freq = base ** (-np.arange(0, rot, 2, dtype=np.float64) / rot)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq  # (seq, half)
    angle = angle.reshape(angle.shape[:1] + (1,) * (x.ndim - 2) + angle.shape[1:])
    c, s = np.cos(angle), np.sin(angle)
    if layout == "interleaved":
        i1, i2 = np.arange(0, rot, 2), np.arange(1, rot, 2)
    else:
        i1, i2 = np.arange(half), np.arange(half, rot)
    y = x.copy()
    y[..., i1] = x[..., i1] * c - x[..., i2] * s
    y[..., i2] = x[..., i2] * c + x[..., i1] * s
    return y


# --------------------------------------------------------------------------- permutation


def test_known_example_dim8():
    x = np.array([10, 11, 20, 21, 30, 31, 40, 41])  # interleaved pairs (10,11), (20,21)...
    half = interleaved_to_half(x)
    np.testing.assert_array_equal(half, [10, 20, 30, 40, 11, 21, 31, 41])
    np.testing.assert_array_equal(half_to_interleaved(half), x)
    assert layout_permutation(8).tolist() == [0, 2, 4, 6, 1, 3, 5, 7]
    assert layout_permutation(8, to="interleaved").tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_known_example_partial():
    x = np.arange(10)
    np.testing.assert_array_equal(
        interleaved_to_half(x, rotary_dim=6), [0, 2, 4, 1, 3, 5, 6, 7, 8, 9]
    )
    np.testing.assert_array_equal(
        half_to_interleaved(x, rotary_dim=6), [0, 3, 1, 4, 2, 5, 6, 7, 8, 9]
    )
    assert layout_permutation(4, 6).tolist() == [0, 2, 1, 3, 4, 5]
    assert layout_permutation(4, 6, to="interleaved").tolist() == [0, 2, 1, 3, 4, 5]


@pytest.mark.parametrize("rotary_dim", [2, 4, 6, 8, 64, 96, 128])
@pytest.mark.parametrize("extra", [0, 2, 32])
def test_permutations_are_inverse(rotary_dim, extra):
    head_dim = rotary_dim + extra
    to_half = layout_permutation(rotary_dim, head_dim)
    to_inter = layout_permutation(rotary_dim, head_dim, to="interleaved")
    assert to_half.dtype == np.int64 and to_half.shape == (head_dim,)
    assert sorted(to_half.tolist()) == list(range(head_dim))
    np.testing.assert_array_equal(to_half[to_inter], np.arange(head_dim))
    np.testing.assert_array_equal(to_inter[to_half], np.arange(head_dim))
    np.testing.assert_array_equal(to_half[rotary_dim:], np.arange(rotary_dim, head_dim))
    # the definition, channel by channel
    h = rotary_dim // 2
    for i in range(h):
        assert to_half[i] == 2 * i and to_half[i + h] == 2 * i + 1
        assert to_inter[2 * i] == i and to_inter[2 * i + 1] == i + h


def test_rotary_dim_2_is_identity():
    x = RNG.standard_normal((3, 2))
    np.testing.assert_array_equal(interleaved_to_half(x), x)
    np.testing.assert_array_equal(half_to_interleaved(x), x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int32, np.complex128])
@pytest.mark.parametrize(
    ("shape", "axis", "rotary_dim"),
    [
        ((16,), -1, None),
        ((5, 16), -1, None),
        ((5, 16), 1, 8),
        ((2, 3, 4, 12), -1, 8),
        ((12, 5), 0, None),
        ((12, 5), -2, 4),
        ((3, 10, 4), 1, 10),
        ((3, 10, 4), -2, 6),
    ],
)
def test_round_trip_and_not_modified(dtype, shape, axis, rotary_dim):
    x = (RNG.standard_normal(shape) * 100).astype(dtype)
    before = x.copy()
    y = interleaved_to_half(x, rotary_dim=rotary_dim, axis=axis)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert not np.shares_memory(y, x)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(half_to_interleaved(y, rotary_dim=rotary_dim, axis=axis), x)
    z = half_to_interleaved(x, rotary_dim=rotary_dim, axis=axis)
    assert not np.shares_memory(z, x)
    np.testing.assert_array_equal(interleaved_to_half(z, rotary_dim=rotary_dim, axis=axis), x)
    np.testing.assert_array_equal(x, before)
    # same as moving the axis last and permuting there
    rot = x.shape[axis] if rotary_dim is None else rotary_dim
    perm = layout_permutation(rot, x.shape[axis])
    expected = np.moveaxis(np.moveaxis(x, axis, -1)[..., perm], -1, axis)
    np.testing.assert_array_equal(y, expected)


def test_tail_channels_untouched():
    x = RNG.standard_normal((4, 20))
    y = interleaved_to_half(x, rotary_dim=12)
    np.testing.assert_array_equal(y[:, 12:], x[:, 12:])
    np.testing.assert_array_equal(y[:, :6], x[:, 0:12:2])
    np.testing.assert_array_equal(y[:, 6:12], x[:, 1:12:2])


def test_non_contiguous_and_list_input():
    x = RNG.standard_normal((8, 16))[:, ::2]  # strided view, last axis 8
    y = interleaved_to_half(x)
    np.testing.assert_array_equal(y, x[:, [0, 2, 4, 6, 1, 3, 5, 7]])
    assert interleaved_to_half([1, 2, 3, 4]).tolist() == [1, 3, 2, 4]


# --------------------------------------------------------------------------- rotation commutes


@pytest.mark.parametrize(
    ("dim", "rotary_dim", "base"),
    [(8, None, 10000.0), (64, None, 10000.0), (96, 64, 500000.0), (10, 4, 10.0)],
)
def test_rotation_commutes_with_conversion_local(dim, rotary_dim, base):
    seq = 37
    x = RNG.standard_normal((seq, 3, dim))
    positions = np.arange(seq) * 13 + 5
    kw = {"rotary_dim": rotary_dim}
    rot_inter = rope_local(x, positions, base=base, layout="interleaved", **kw)
    rot_half = rope_local(interleaved_to_half(x, **kw), positions, base=base, layout="half", **kw)
    # rotate-then-convert == convert-then-rotate: same operations on the same numbers
    np.testing.assert_array_equal(interleaved_to_half(rot_inter, **kw), rot_half)
    np.testing.assert_array_equal(half_to_interleaved(rot_half, **kw), rot_inter)
    # and the other direction
    rot_half2 = rope_local(x, positions, base=base, layout="half", **kw)
    rot_inter2 = rope_local(
        half_to_interleaved(x, **kw), positions, base=base, layout="interleaved", **kw
    )
    np.testing.assert_array_equal(half_to_interleaved(rot_half2, **kw), rot_inter2)


@pytest.mark.parametrize(("dim", "rotary_dim"), [(8, None), (64, None), (96, 64), (10, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("impl", ["fast", "reference"])
def test_rotation_commutes_with_conversion_fastpe_reference(dim, rotary_dim, dtype, impl):
    apply_rope = fastpe.apply_rope if impl == "fast" else reference.apply_rope
    seq = 29
    x = RNG.standard_normal((seq, dim)).astype(dtype)
    positions = np.arange(seq, dtype=np.int64) * 7 + 3
    kw = {"rotary_dim": rotary_dim}
    common = {"positions": positions, "base": 10000.0, "rotary_dim": rotary_dim, "seq_axis": 0}
    before = x.copy()
    rot_inter = apply_rope(x, layout="interleaved", **common)
    rot_half = apply_rope(interleaved_to_half(x, **kw), layout="half", **common)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(interleaved_to_half(rot_inter, **kw), rot_half)
    np.testing.assert_array_equal(half_to_interleaved(rot_half, **kw), rot_inter)
    # and agrees with the local transcription, in ulps of each pair's norm: fastpe's RoPE
    # bound, plus the transcription's own error (its angle p*w carries two float64
    # roundings, of the frequency and of the product: up to |p*w| * 2**-52 with w <= 1,
    # and its rotation rounds a few times more)
    local = rope_local(x, positions, layout="interleaved", **kw)
    rot = dim if rotary_dim is None else rotary_dim
    pairs = x[:, :rot].astype(np.float64).reshape(seq, rot // 2, 2)
    norm = np.repeat(np.hypot(pairs[..., 0], pairs[..., 1]), 2, axis=1)
    angle_err = float(positions.max()) * 2.0**-52 + 4 * 2.0**-53
    bound = _cases.ROPE_ULP[np.dtype(dtype)] + angle_err / ulp(1.0, dtype)
    err = norm_ulp_error(rot_inter[:, :rot], local[:, :rot], norm, dtype)
    assert err.max() <= bound, f"{impl} {dtype.__name__}: {err.max():.2f} > {bound:.2f} ulp"
    np.testing.assert_array_equal(rot_inter[:, rot:], x[:, rot:])


# --------------------------------------------------------------------------- weights


@pytest.mark.parametrize(
    ("num_heads", "head_dim", "rotary_dim", "hidden"),
    [(1, 8, None, 5), (4, 16, None, 7), (3, 12, 8, 6), (2, 128, 64, 3), (8, 6, 2, 4)],
)
def test_weights_permute_rows_per_head(num_heads, head_dim, rotary_dim, hidden):
    w = RNG.standard_normal((num_heads * head_dim, hidden))
    before = w.copy()
    w_half = interleaved_to_half_weights(w, num_heads=num_heads, rotary_dim=rotary_dim)
    np.testing.assert_array_equal(w, before)
    assert w_half.shape == w.shape and not np.shares_memory(w_half, w)
    heads = w.reshape(num_heads, head_dim, hidden)
    expected = interleaved_to_half(heads, rotary_dim=rotary_dim, axis=1).reshape(w.shape)
    np.testing.assert_array_equal(w_half, expected)
    # explicit head_dim gives the same; the inverse undoes it
    again = interleaved_to_half_weights(
        w, num_heads=num_heads, head_dim=head_dim, rotary_dim=rotary_dim
    )
    np.testing.assert_array_equal(again, w_half)
    back = half_to_interleaved_weights(w_half, num_heads=num_heads, rotary_dim=rotary_dim)
    np.testing.assert_array_equal(back, w)
    w_inter = half_to_interleaved_weights(w, num_heads=num_heads, rotary_dim=rotary_dim)
    np.testing.assert_array_equal(
        interleaved_to_half_weights(w_inter, num_heads=num_heads, rotary_dim=rotary_dim), w
    )


def test_weights_known_example_two_heads():
    w = np.arange(8)[:, None] * np.array([[1, 100]])  # row r holds (r, 100 r)
    got = interleaved_to_half_weights(w, num_heads=2)
    np.testing.assert_array_equal(got[:, 0], [0, 2, 1, 3, 4, 6, 5, 7])
    np.testing.assert_array_equal(got[:, 1], 100 * got[:, 0])


def test_weights_match_llama_conversion_permute():
    # The checkpoint conversion's reshape/transpose: (heads, dim/2, 2, hidden) -> (heads, 2, ...)
    num_heads, head_dim, hidden = 4, 16, 10
    w = RNG.standard_normal((num_heads * head_dim, hidden))
    permuted = w.reshape(num_heads, head_dim // 2, 2, hidden).transpose(0, 2, 1, 3).reshape(w.shape)
    np.testing.assert_array_equal(interleaved_to_half_weights(w, num_heads=num_heads), permuted)


def test_weights_bias_vector():
    b = np.arange(12.0)
    got = interleaved_to_half_weights(b, num_heads=2, rotary_dim=4)
    np.testing.assert_array_equal(got, [0, 2, 1, 3, 4, 5, 6, 8, 7, 9, 10, 11])
    np.testing.assert_array_equal(half_to_interleaved_weights(got, num_heads=2, rotary_dim=4), b)


def test_converted_weights_rotate_consistently():
    # q = x @ W.T in one layout equals the converted q of the other layout, after RoPE too,
    # so attention scores are unchanged by converting both q and k weights.
    num_heads, head_dim, hidden, seq = 3, 8, 12, 11
    wq = RNG.standard_normal((num_heads * head_dim, hidden))
    wk = RNG.standard_normal((num_heads * head_dim, hidden))
    x = RNG.standard_normal((seq, hidden))
    pos = np.arange(seq)

    def scores(wq_, wk_, layout):
        q = rope_local((x @ wq_.T).reshape(seq, num_heads, head_dim), pos, layout=layout)
        k = rope_local((x @ wk_.T).reshape(seq, num_heads, head_dim), pos, layout=layout)
        return np.einsum("qhd,khd->hqk", q, k)

    s_inter = scores(wq, wk, "interleaved")
    s_half = scores(
        interleaved_to_half_weights(wq, num_heads=num_heads),
        interleaved_to_half_weights(wk, num_heads=num_heads),
        "half",
    )
    np.testing.assert_allclose(s_half, s_inter, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("func", [interleaved_to_half, half_to_interleaved])
@pytest.mark.parametrize(
    ("shape", "kwargs", "match"),
    [
        (
            (4, 8),
            {"rotary_dim": 7},
            r"rotary_dim must be even, > 0 and <= the length of axis "
            r"-1 \(8\), got 7",
        ),
        ((4, 8), {"rotary_dim": 10}, r"<= the length of axis -1 \(8\), got 10"),
        ((4, 8), {"rotary_dim": 0}, r"rotary_dim must be even, > 0"),
        ((4, 8), {"rotary_dim": -2}, r"got -2"),
        ((4, 7), {}, r"<= the length of axis -1 \(7\), got 7"),
        (
            (4, 8),
            {"axis": 2},
            r"axis 2 is out of range for an array of shape \(4, 8\) "
            r"\(valid: -2..1\)",
        ),
        ((4, 8), {"axis": -3}, r"axis -3 is out of range"),
        ((4, 8), {"axis": 0, "rotary_dim": 6}, r"<= the length of axis 0 \(4\), got 6"),
        ((), {}, r"x must have at least one dimension"),
    ],
)
def test_errors(func, shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        func(np.zeros(shape), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rotary_dim": 5}, r"rotary_dim must be even, > 0 and <= head_dim \(5\), got 5"),
        ({"rotary_dim": 6, "head_dim": 4}, r"<= head_dim \(4\), got 6"),
        ({"rotary_dim": 4, "head_dim": 0}, r"head_dim must be > 0, got 0"),
        ({"rotary_dim": 4, "to": "neox"}, r"to must be one of 'half', 'interleaved', got 'neox'"),
    ],
)
def test_layout_permutation_errors(kwargs, match):
    kwargs = dict(kwargs)
    rotary_dim = kwargs.pop("rotary_dim")
    with pytest.raises(ValueError, match=match):
        layout_permutation(rotary_dim, **kwargs)


@pytest.mark.parametrize("func", [interleaved_to_half_weights, half_to_interleaved_weights])
@pytest.mark.parametrize(
    ("shape", "kwargs", "match"),
    [
        (
            (30, 4),
            {"num_heads": 4},
            r"w has 30 rows, not a multiple of num_heads=4; pass the "
            r"right num_heads \(num_key_value_heads for k_proj",
        ),
        (
            (32, 4),
            {"num_heads": 4, "head_dim": 16},
            r"w has 32 rows but num_heads \* head_dim = 4 \* 16 = 64",
        ),
        ((32, 4), {"num_heads": 0}, r"num_heads must be > 0, got 0"),
        ((32, 4), {"num_heads": 4, "head_dim": -8}, r"head_dim must be > 0, got -8"),
        ((32, 4), {"num_heads": 4, "rotary_dim": 10}, r"<= head_dim \(8\), got 10"),
        ((32, 4), {"num_heads": 4, "rotary_dim": 3}, r"rotary_dim must be even"),
        ((36, 4), {"num_heads": 4}, r"<= head_dim \(9\), got 9"),
        ((), {"num_heads": 1}, r"w must be a \(num_heads \* head_dim, hidden\) weight"),
    ],
)
def test_weight_errors(func, shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        func(np.zeros(shape), **kwargs)


# A value of the wrong type is a TypeError (the rule of fastpe's argument layer), naming
# the argument, the value and the fix.
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: interleaved_to_half(np.zeros((4, 8)), rotary_dim=4.0),
            r"rotary_dim must be an integer, got 4.0 .*use rotary_dim=4",
        ),
        (
            lambda: half_to_interleaved(np.zeros((4, 8)), rotary_dim=4.0),
            r"rotary_dim must be an integer, got 4.0",
        ),
        (
            lambda: interleaved_to_half(np.zeros((4, 8)), axis=1.0),
            r"axis must be an integer, got 1.0 .*use axis=1",
        ),
        (lambda: half_to_interleaved(np.zeros((4, 8)), axis=1.0), r"axis must be an integer"),
        (lambda: layout_permutation(None), r"rotary_dim must be an integer, got None"),
        (lambda: layout_permutation(4, to=1), r"to must be a string"),
        (
            lambda: interleaved_to_half_weights(np.zeros((32, 4)), num_heads=2.0),
            r"num_heads must be an integer, got 2.0",
        ),
        (
            lambda: half_to_interleaved_weights(np.zeros((32, 4)), num_heads=2.0),
            r"num_heads must be an integer, got 2.0",
        ),
    ],
)
def test_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_keyword_only():
    with pytest.raises(TypeError):
        interleaved_to_half(np.zeros(8), 4)  # type: ignore[misc]
    with pytest.raises(TypeError):
        interleaved_to_half_weights(np.zeros((8, 2)), 1)  # type: ignore[misc]
    with pytest.raises(TypeError):
        layout_permutation(4, 4, "half")  # type: ignore[misc]


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("func", [interleaved_to_half, half_to_interleaved])
def test_subclasses_are_permuted_as_they_are(func):
    """A masked array's mask moves with its data; matrix and record views keep their class."""
    x = np.arange(24.0).reshape(3, 8)
    want = func(x, rotary_dim=6)
    m = np.ma.array(x, mask=(x % 5 == 0))
    got = func(m, rotary_dim=6)
    assert isinstance(got, np.ma.MaskedArray)
    np.testing.assert_array_equal(got.data, want)
    np.testing.assert_array_equal(got.mask, func(m.mask, rotary_dim=6))
    for sub in (np.matrix(x), x.view(np.recarray)):
        got = func(sub, rotary_dim=6)
        assert type(got) is type(sub)
        np.testing.assert_array_equal(np.asarray(got), want)
    w = np.ma.array(np.arange(16.0)[:, None] * np.ones((1, 2)), mask=False)
    w.mask[3, 1] = True
    got = interleaved_to_half_weights(w, num_heads=2)
    np.testing.assert_array_equal(got.mask, interleaved_to_half_weights(w.mask, num_heads=2))
