"""Tests for fastpe.scaling: RoPE scaling variants against transcriptions of their formulas.

Every expected value is computed here, independently of the module, from the formulas of
transformers' modeling_rope_utils.py: with Python floats and the math module, one pair at a
time (the ``py_*`` transcriptions), and, for the closed forms (the default frequencies and
the attention factors), exactly with mpmath (the ``mp_*`` ones). NumPy's vectorised ``**``
may differ from C's ``pow`` in the last bit, so arrays are compared within a few ulps (never
with a loose absolute tolerance); where both sides do the same correctly rounded operations
on the same inputs they must be equal.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fastpe
import fastpe.reference
from fastpe.scaling import KNOWN_ROPE_TYPES, rope_frequencies

MAXULP = 4

mpmath = pytest.importorskip("mpmath")
mpmath.mp.prec = 200


def ulps(value: float, exact) -> float:
    """``|value - exact|`` in float64 ulps of ``exact`` (an mpmath number)."""
    return float(abs(mpmath.mpf(value) - exact) / np.spacing(float(exact)))


def mp_default(dim, base):
    """``1 / base ** (i / dim)`` for even ``i``, exact but for the exponent, which the
    formula (``torch.arange(0, dim, 2) / dim``) rounds to a float before the power."""
    return [1 / mpmath.power(mpmath.mpf(base), mpmath.mpf(i / dim)) for i in range(0, dim, 2)]


def mp_mscale(scale, mscale=1.0):
    """transformers' ``get_mscale``: ``0.1 * mscale * ln(scale) + 1`` (1 for scale <= 1)."""
    if scale <= 1:
        return mpmath.mpf(1)
    return mpmath.mpf(mscale) * mpmath.log(mpmath.mpf(scale)) / 10 + 1


def assert_ulp(actual, expected, maxulp=MAXULP):
    actual = np.asarray(actual)
    assert actual.dtype == np.float64
    np.testing.assert_array_max_ulp(actual, np.asarray(expected, dtype=np.float64), maxulp)


# --------------------------------------------------------------------------- transcriptions


def py_default(dim, base):
    return [1.0 / base ** (i / dim) for i in range(0, dim, 2)]


def py_linear(dim, base, factor):
    return [f / factor for f in py_default(dim, base)]


def py_dynamic(dim, base, factor, max_pos, seq_len):
    if seq_len is None or seq_len < max_pos:
        seq_len = max_pos
    new_base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return py_default(dim, new_base)


def py_mscale(scale, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def py_yarn_range(dim, base, orig, beta_fast=32.0, beta_slow=1.0, truncate=True):
    def correction_dim(rotations):
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def py_yarn(dim, base, factor, orig, beta_fast=32.0, beta_slow=1.0, truncate=True):
    low, high = py_yarn_range(dim, base, orig, beta_fast, beta_slow, truncate)
    if low == high:
        high += 0.001
    out = []
    for j in range(dim // 2):
        power = base ** (2 * j / dim)
        ramp = min(max((j - low) / (high - low), 0.0), 1.0)
        keep = 1 - ramp  # weight of the unscaled (extrapolated) frequency
        out.append((1.0 / (factor * power)) * (1 - keep) + (1.0 / power) * keep)
    return out


def py_yarn_attention(factor, mscale=None, mscale_all_dim=None):
    if mscale and mscale_all_dim:
        return py_mscale(factor, mscale) / py_mscale(factor, mscale_all_dim)
    return py_mscale(factor)


def py_longrope(dim, base, short, long, orig, seq_len):
    ext = long if seq_len is not None and seq_len > orig else short
    return [1.0 / (ext[j] * base ** (2 * j / dim)) for j in range(dim // 2)]


def py_longrope_attention(factor, orig):
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(orig))


def py_llama3(inv_freq, factor, low_freq_factor, high_freq_factor, orig):
    low_freq_wavelen = orig / low_freq_factor
    high_freq_wavelen = orig / high_freq_factor
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        if wavelen < high_freq_wavelen:
            out.append(f)
        elif wavelen > low_freq_wavelen:
            out.append(f / factor)
        else:  # both edges inclusive
            smooth = (orig / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out


# --------------------------------------------------------------------------- default / linear


@pytest.mark.parametrize("dim", [2, 4, 8, 64, 96, 128, 256])
@pytest.mark.parametrize("base", [10.0, 10000.0, 500000.0, 1e6, 12345.678])
def test_default_matches_formula(dim, base):
    inv_freq, attention = rope_frequencies(dim, base=base)
    assert inv_freq.shape == (dim // 2,)
    assert attention == 1.0
    assert isinstance(attention, float)
    assert_ulp(inv_freq, py_default(dim, base))
    # Against the exact formula: a power and a division, each rounded once (<= 1 ulp each).
    assert max(ulps(f, e) for f, e in zip(inv_freq.tolist(), mp_default(dim, base))) <= 2


@pytest.mark.parametrize(
    "scaling",
    [None, {}, {"rope_type": "default"}, {"type": "default"}, {"rope_type": None, "foo": 1}],
)
def test_default_spellings(scaling):
    inv_freq, attention = rope_frequencies(16, base=10000.0, scaling=scaling)
    np.testing.assert_array_equal(inv_freq, rope_frequencies(16)[0])
    assert attention == 1.0


@pytest.mark.parametrize("factor", [1.0, 2.0, 4, 8.0, 32.5])
@pytest.mark.parametrize("dim", [8, 128])
def test_linear(factor, dim):
    scaling = {"rope_type": "linear", "factor": factor, "unrelated_key": [1, 2]}
    inv_freq, attention = rope_frequencies(dim, base=10000.0, scaling=scaling)
    assert attention == 1.0
    assert_ulp(inv_freq, py_linear(dim, 10000.0, factor))


def test_linear_known_values():
    inv_freq, _ = rope_frequencies(8, scaling={"type": "linear", "factor": 2.0})
    assert_ulp(inv_freq, [0.5, 0.05, 0.005, 0.0005])


# --------------------------------------------------------------------------- dynamic


@pytest.mark.parametrize("seq_len", [None, 1, 2047, 2048, 2049, 4096, 10000, 100_000])
@pytest.mark.parametrize(("dim", "base", "factor"), [(128, 10000.0, 2.0), (64, 1e6, 4.0)])
def test_dynamic(seq_len, dim, base, factor):
    max_pos = 2048
    scaling = {"rope_type": "dynamic", "factor": factor}
    inv_freq, attention = rope_frequencies(
        dim, base=base, scaling=scaling, seq_len=seq_len, max_position_embeddings=max_pos
    )
    assert attention == 1.0
    assert_ulp(inv_freq, py_dynamic(dim, base, factor, max_pos, seq_len))
    plain = rope_frequencies(dim, base=base)[0]
    if seq_len is None or seq_len <= max_pos:
        np.testing.assert_array_equal(inv_freq, plain)  # short sequences: unscaled
    else:
        assert np.all(inv_freq[1:] < plain[1:])  # longer: every pair but the first slows


def test_dynamic_ignores_original_max_position_embeddings():
    # transformers' dynamic scaling uses max_position_embeddings only.
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    got = rope_frequencies(32, scaling=scaling, seq_len=5000, max_position_embeddings=4096)[0]
    assert_ulp(got, py_dynamic(32, 10000.0, 2.0, 4096, 5000))


# --------------------------------------------------------------------------- yarn

YARN_CASES = [
    # dim, base, factor, orig, beta_fast, beta_slow
    (128, 1e6, 4.0, 32768, 32.0, 1.0),  # Qwen2.5 suggested config
    (64, 10000.0, 40.0, 4096, 32.0, 1.0),  # DeepSeek-V2/V3 rope part
    (128, 500000.0, 8.0, 8192, 16.0, 2.0),
    (8, 10000.0, 4.0, 2048, 32.0, 1.0),
    (96, 10000.0, 16.0, 4096, 64.0, 0.5),
    (16, 10.0, 2.0, 100, 32.0, 1.0),
]


@pytest.mark.parametrize(("dim", "base", "factor", "orig", "beta_fast", "beta_slow"), YARN_CASES)
@pytest.mark.parametrize("truncate", [True, False])
def test_yarn(dim, base, factor, orig, beta_fast, beta_slow, truncate):
    scaling = {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": orig,
        "beta_fast": beta_fast,
        "beta_slow": beta_slow,
        "truncate": truncate,
    }
    inv_freq, attention = rope_frequencies(dim, base=base, scaling=scaling)
    assert_ulp(inv_freq, py_yarn(dim, base, factor, orig, beta_fast, beta_slow, truncate))
    assert attention == py_mscale(factor)
    assert ulps(attention, mp_mscale(factor)) <= 1


def test_yarn_known_ratio():
    # dim 8, orig 2048: correction range floor(1.008)=1 .. ceil(2.51)=3 -> ramp 0, 0, .5, 1
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    inv_freq, _ = rope_frequencies(8, scaling=scaling)
    ratio = inv_freq / np.array(py_default(8, 10000.0))
    np.testing.assert_array_max_ulp(ratio, np.array([1.0, 1.0, 0.625, 0.25]), MAXULP)


def test_yarn_defaults_are_32_1_truncate():
    base, dim = 10000.0, 64
    bare = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}
    explicit = dict(bare, beta_fast=32, beta_slow=1, truncate=True)
    # (a null truncate is False, as transformers reads it: test_yarn_truncate_null_is_false)
    nulls = dict(bare, beta_fast=None, beta_slow=None, attention_factor=None)
    a = rope_frequencies(dim, base=base, scaling=bare)
    b = rope_frequencies(dim, base=base, scaling=explicit)
    c = rope_frequencies(dim, base=base, scaling=nulls)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[0], c[0])
    assert a[1] == b[1] == c[1]
    assert_ulp(a[0], py_yarn(dim, base, 8.0, 4096))


def test_yarn_truncate_false_differs():
    scaling = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}
    a = rope_frequencies(64, scaling=scaling)[0]
    b = rope_frequencies(64, scaling=dict(scaling, truncate=False))[0]
    assert not np.array_equal(a, b)
    low, high = py_yarn_range(64, 10000.0, 4096, truncate=False)
    assert not float(low).is_integer() and not float(high).is_integer()


@pytest.mark.parametrize(
    ("dim", "base", "orig", "edge"),
    [
        # both correction dims negative: low clamps to 0 and high = ceil(-0.02) = 0
        (8, 10000.0, 6, 0),
        # floor(low) = dim - 1 and high clamped to dim - 1
        (4, 10.0, 10053, 3),
    ],
)
def test_yarn_low_equals_high_after_truncation(dim, base, orig, edge):
    assert py_yarn_range(dim, base, orig) == (edge, edge)  # the guarded singular case
    factor = 4.0
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": orig}
    inv_freq, _ = rope_frequencies(dim, base=base, scaling=scaling)
    assert np.all(np.isfinite(inv_freq))
    expected = py_yarn(dim, base, factor, orig)
    assert_ulp(inv_freq, expected)
    plain = py_default(dim, base)
    if edge == 0:  # pair 0 kept (ramp 0), every other one interpolated
        assert_ulp(inv_freq, [plain[0]] + [f / factor for f in plain[1:]])
    else:  # all pairs below the edge: kept
        assert_ulp(inv_freq, plain)


@pytest.mark.parametrize(
    ("mscale", "mscale_all_dim"),
    [
        (1.0, 1.0),
        (0.707, 0.707),
        (1.0, 0.5),
        (0.5, 1.0),
        (1.0, None),
        (None, 1.0),
        (0, 1.0),
        (1.0, 0),
    ],
)
def test_yarn_mscale(mscale, mscale_all_dim):
    factor = 40.0
    scaling = {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": 4096,
        "mscale": mscale,
        "mscale_all_dim": mscale_all_dim,
    }
    inv_freq, attention = rope_frequencies(64, base=10000.0, scaling=scaling)
    assert attention == py_yarn_attention(factor, mscale, mscale_all_dim)
    if mscale and mscale_all_dim:
        assert ulps(attention, mp_mscale(40, mscale) / mp_mscale(40, mscale_all_dim)) <= 2
    else:  # a lone (or zero) mscale is ignored, as in transformers
        assert ulps(attention, mp_mscale(40)) <= 1
    # mscale never changes the frequencies
    assert_ulp(inv_freq, py_yarn(64, 10000.0, factor, 4096))


def test_yarn_mscale_equal_gives_one():
    scaling = {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
    }
    assert rope_frequencies(64, scaling=scaling)[1] == 1.0


@pytest.mark.parametrize("attention_factor", [1.0, 0.5, 1.25, 2])
def test_yarn_explicit_attention_factor_wins(attention_factor):
    scaling = {
        "rope_type": "yarn",
        "factor": 16.0,
        "original_max_position_embeddings": 4096,
        "attention_factor": attention_factor,
        "mscale": 1.0,
        "mscale_all_dim": 0.5,
    }
    inv_freq, attention = rope_frequencies(32, scaling=scaling)
    assert attention == float(attention_factor)
    assert_ulp(inv_freq, py_yarn(32, 10000.0, 16.0, 4096))


def test_yarn_factor_one_is_plain():
    scaling = {"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 4096}
    inv_freq, attention = rope_frequencies(64, scaling=scaling)
    assert attention == 1.0
    assert_ulp(inv_freq, py_default(64, 10000.0))


def test_yarn_original_falls_back_to_max_position_embeddings():
    scaling = {"rope_type": "yarn", "factor": 4.0}
    got = rope_frequencies(128, base=1e6, scaling=scaling, max_position_embeddings=32768)
    assert_ulp(got[0], py_yarn(128, 1e6, 4.0, 32768))
    assert got[1] == py_mscale(4.0)


def test_yarn_explicit_factor_beats_context_ratio():
    # Qwen2.5-style: max_position_embeddings == original, factor 4 still applies; and an
    # explicit factor wins over a disagreeing max_position_embeddings / original ratio.
    for max_pos in (32768, 131072, 65536):
        scaling = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
        inv_freq, attention = rope_frequencies(
            128, base=1e6, scaling=scaling, max_position_embeddings=max_pos
        )
        assert_ulp(inv_freq, py_yarn(128, 1e6, 4.0, 32768))
        assert attention == py_mscale(4.0)


def test_yarn_original_in_scaling_beats_max_position_embeddings():
    scaling = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096}
    got = rope_frequencies(64, scaling=scaling, max_position_embeddings=163840)[0]
    assert_ulp(got, py_yarn(64, 10000.0, 40.0, 4096))
    assert not np.array_equal(
        got,
        rope_frequencies(
            64, scaling={"rope_type": "yarn", "factor": 40.0}, max_position_embeddings=163840
        )[0],
    )


def test_yarn_missing_factor_is_derived_from_context_ratio():
    scaling = {"rope_type": "yarn", "original_max_position_embeddings": 4096, "factor": None}
    inv_freq, attention = rope_frequencies(64, scaling=scaling, max_position_embeddings=163840)
    assert_ulp(inv_freq, py_yarn(64, 10000.0, 40.0, 4096))
    assert attention == py_mscale(163840 / 4096)


# --------------------------------------------------------------------------- longrope


def _factors(n, start, stop):
    return [start + (stop - start) * j / max(n - 1, 1) for j in range(n)]


LONGROPE_CASES = [
    # dim, base, orig, max_pos (Phi-3-mini-128k, Phi-4-mini rotary part, a small one)
    (96, 10000.0, 4096, 131072),
    (96, 10000.0, 4096, 4096),
    (16, 500000.0, 8192, 65536),
]


@pytest.mark.parametrize(("dim", "base", "orig", "max_pos"), LONGROPE_CASES)
@pytest.mark.parametrize("seq_len", [None, 1, "orig-1", "orig", "orig+1", "max"])
def test_longrope(dim, base, orig, max_pos, seq_len):
    seq = {"orig-1": orig - 1, "orig": orig, "orig+1": orig + 1, "max": max_pos}.get(
        seq_len, seq_len
    )
    short = _factors(dim // 2, 1.0, 1.5)
    long = _factors(dim // 2, 1.0, 40.0)
    scaling = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": orig,
    }
    inv_freq, attention = rope_frequencies(
        dim, base=base, scaling=scaling, seq_len=seq, max_position_embeddings=max_pos
    )
    assert_ulp(inv_freq, py_longrope(dim, base, short, long, orig, seq))
    assert attention == py_longrope_attention(max_pos / orig, orig)
    uses_long = seq is not None and seq > orig
    chosen = long if uses_long else short
    assert_ulp(inv_freq, [f / e for f, e in zip(py_default(dim, base), chosen, strict=True)])


def test_longrope_phi3_attention_value():
    short = [1.0] * 48
    scaling = {
        "type": "longrope",
        "short_factor": short,
        "long_factor": short,
        "original_max_position_embeddings": 4096,
    }
    _, attention = rope_frequencies(96, scaling=scaling, max_position_embeddings=131072)
    exact = mpmath.sqrt(1 + mpmath.log(32) / mpmath.log(4096))  # sqrt(1 + 5/12)
    assert ulps(attention, exact) <= 1


@pytest.mark.parametrize("factor", [1.0, 0.5, 2.0, 32.0, 16])
def test_longrope_explicit_factor_wins(factor):
    short = [1.0] * 8
    scaling = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": short,
        "original_max_position_embeddings": 4096,
        "factor": factor,
    }
    _, attention = rope_frequencies(16, scaling=scaling, max_position_embeddings=131072)
    assert attention == py_longrope_attention(float(factor), 4096)
    if factor <= 1:
        assert attention == 1.0


def test_longrope_explicit_attention_factor_and_fallbacks():
    short, long = _factors(8, 1.0, 2.0), _factors(8, 2.0, 9.0)
    scaling = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "attention_factor": 1.5,
    }
    # original falls back to max_position_embeddings; attention_factor used as is.
    inv_freq, attention = rope_frequencies(
        16, scaling=scaling, seq_len=5000, max_position_embeddings=4096
    )
    assert attention == 1.5
    assert_ulp(inv_freq, py_longrope(16, 10000.0, short, long, 4096, 5000))
    # without max_position_embeddings: factor unknown, but attention_factor is given
    scaling["original_max_position_embeddings"] = 2048
    inv_freq, attention = rope_frequencies(16, scaling=scaling, seq_len=2048)
    assert attention == 1.5
    assert_ulp(inv_freq, py_longrope(16, 10000.0, short, long, 2048, 2048))
    # original == max_position_embeddings: derived factor 1 -> attention 1
    del scaling["attention_factor"], scaling["original_max_position_embeddings"]
    assert rope_frequencies(16, scaling=scaling, max_position_embeddings=4096)[1] == 1.0


def test_longrope_accepts_numpy_factors():
    short = np.linspace(1.0, 2.0, 8)
    scaling = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": short * 3,
        "original_max_position_embeddings": 4096,
        "factor": 8.0,
    }
    inv_freq, _ = rope_frequencies(16, scaling=scaling)
    assert_ulp(inv_freq, py_longrope(16, 10000.0, short.tolist(), None, 4096, None))


# --------------------------------------------------------------------------- llama3

LLAMA3_CASES = [
    # dim, base, factor, low, high, orig
    (128, 500000.0, 8.0, 1.0, 4.0, 8192),  # Llama 3.1 / 3.2 / 3.3
    (64, 500000.0, 32.0, 1.0, 4.0, 8192),  # Llama 3.2 1B/3B
    (128, 10000.0, 4.0, 2.0, 8.0, 4096),
    (32, 10000.0, 2.0, 1.0, 1.5, 2000),
]


@pytest.mark.parametrize(("dim", "base", "factor", "low", "high", "orig"), LLAMA3_CASES)
def test_llama3(dim, base, factor, low, high, orig):
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": orig,
    }
    inv_freq, attention = rope_frequencies(dim, base=base, scaling=scaling)
    assert attention == 1.0
    assert_ulp(inv_freq, py_llama3(py_default(dim, base), factor, low, high, orig))
    # Fed the same default frequencies, the arithmetic is identical: exact equality.
    plain = rope_frequencies(dim, base=base)[0]
    np.testing.assert_array_equal(inv_freq, py_llama3(plain.tolist(), factor, low, high, orig))
    # all three bands are exercised by the real configs
    wavelen = 2 * math.pi / plain
    if (dim, base) == (128, 500000.0):
        assert np.any(wavelen < orig / high) and np.any(wavelen > orig / low)
        assert np.any((wavelen >= orig / high) & (wavelen <= orig / low))


def _factor_at_edge(orig, wavelen):
    """A band factor c with orig / c == wavelen exactly and orig / wavelen != c.

    The second condition makes the interpolation weight at the edge differ from exactly 0
    or 1, so the band an edge pair is put in changes its value: the test then tells a strict
    inequality from a non-strict one.
    """
    c = orig / wavelen
    for _ in range(4):
        c = math.nextafter(c, 0.0)
    for _ in range(9):
        if orig / c == wavelen and orig / wavelen != c:
            return c
        c = math.nextafter(c, math.inf)
    return None


def _edge_configs(dim, base):
    plain = rope_frequencies(dim, base=base)[0]
    for orig in range(8192, 20000):
        for k in range(1, dim // 2 - 1):
            wavelen = 2 * math.pi / float(plain[k])
            c = _factor_at_edge(orig, wavelen)
            if c is not None:
                return plain, orig, k, c
    raise AssertionError("no edge configuration found")  # pragma: no cover


@pytest.mark.parametrize("edge", ["low", "high"])
@pytest.mark.parametrize(("dim", "base"), [(16, 10000.0), (128, 500000.0)])
def test_llama3_wavelength_exactly_at_band_edge(edge, dim, base):
    plain, orig, k, c = _edge_configs(dim, base)
    wavelen = 2 * math.pi / plain
    # A very narrow middle band makes the interpolation weight at the edge visibly != 0 / 1.
    if edge == "low":
        low, high = c, c * (1 + 2.0**-20)
        assert wavelen[k] == orig / low
    else:
        low, high = c * (1 - 2.0**-20), c
        assert wavelen[k] == orig / high
    factor = 8.0
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": orig,
    }
    inv_freq, _ = rope_frequencies(dim, base=base, scaling=scaling)
    expected = py_llama3(plain.tolist(), factor, low, high, orig)
    np.testing.assert_array_equal(inv_freq, expected)
    # The edge pair is interpolated (medium band), which is distinguishable from both the
    # "keep" and the "divide by factor" branches.
    # (its value is py_llama3's, asserted above: with a band this narrow the weight at the
    # edge is not quite 0 or 1, in transformers too, so the value may sit just outside [f /
    # factor, f])
    f = float(plain[k])
    for other_branch in (f, f / factor):
        assert abs(inv_freq[k] - other_branch) > 1000 * np.spacing(other_branch)
    # every other pair is far from an edge and in its expected band
    others = np.delete(np.arange(dim // 2), k)
    assert np.all(
        inv_freq[others][wavelen[others] < orig / high]
        == plain[others][wavelen[others] < orig / high]
    )
    assert np.all(
        inv_freq[others][wavelen[others] > orig / low]
        == plain[others][wavelen[others] > orig / low] / factor
    )


# --------------------------------------------------------------------------- general


def test_rope_theta_in_scaling_must_match_base():
    scaling = {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}
    got = rope_frequencies(16, base=500000.0, scaling=scaling)[0]
    assert_ulp(got, py_linear(16, 500000.0, 2.0))
    with pytest.raises(ValueError, match=r"scaling\['rope_theta'\] is 500000.0 but base is"):
        rope_frequencies(16, scaling=scaling)


def test_input_not_modified_and_fresh_output():
    short = [1.0] * 8
    scaling = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": short,
        "original_max_position_embeddings": 64,
        "factor": 2.0,
    }
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in scaling.items()}
    a = rope_frequencies(16, scaling=scaling)[0]
    assert scaling == before
    a[:] = 0
    assert np.all(rope_frequencies(16, scaling=scaling)[0] > 0)
    assert a.flags.c_contiguous and a.flags.writeable


def test_known_rope_types():
    assert set(KNOWN_ROPE_TYPES) == {
        "default",
        "linear",
        "dynamic",
        "yarn",
        "longrope",
        "llama3",
        "proportional",
        "ntk_alpha",
    }


def test_numpy_scalars_accepted():
    scaling = {
        "rope_type": "yarn",
        "factor": np.float32(4.0),
        "original_max_position_embeddings": np.int64(2048),
    }
    got = rope_frequencies(
        np.int64(8),
        base=np.float64(10000.0),
        scaling=scaling,
        seq_len=np.int32(10),
        max_position_embeddings=np.int64(8192),
    )
    assert_ulp(got[0], py_yarn(8, 10000.0, 4.0, 2048))


# --------------------------------------------------------------------------- errors

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LONG = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [2.0] * 4,
    "original_max_position_embeddings": 4096,
    "factor": 4.0,
}


def _without(d, key):
    return {k: v for k, v in d.items() if k != key}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        # dim
        ({"dim": 7}, r"dim \(the rotary dimension\) must be a positive even int, got 7"),
        ({"dim": 0}, "positive even int, got 0"),
        ({"dim": -4}, "positive even int, got -4"),
        # base, seq_len, max_position_embeddings
        ({"base": 0.0}, r"base must be finite and > 0, got 0.0"),
        ({"base": -10.0}, r"base must be finite and > 0"),
        ({"base": float("inf")}, r"base must be finite and > 0, got inf"),
        ({"base": float("nan")}, r"base must be finite and > 0, got nan"),
        ({"seq_len": 0}, r"seq_len must be a positive integer, got 0"),
        ({"max_position_embeddings": -1}, r"max_position_embeddings must be a positive integer"),
        # rope type
        (
            {"scaling": {"rope_type": "ntk"}},
            r"unknown rope_type 'ntk'; known rope types are 'default', 'linear', 'dynamic', "
            r"'yarn', 'longrope', 'llama3'",
        ),
        # rope_type wins over a legacy type naming another (as in transformers): this is yarn
        (
            {"scaling": {"rope_type": "yarn", "type": "linear", "factor": 2.0}},
            r"rope_type 'yarn' requires scaling\['original_max_position_embeddings'\]",
        ),
        # linear / dynamic
        (
            {"scaling": {"rope_type": "linear"}},
            r"rope_type 'linear' requires scaling\['factor'\], which is missing",
        ),
        ({"scaling": {"rope_type": "linear", "factor": None}}, r"requires scaling\['factor'\]"),
        (
            {"scaling": {"rope_type": "linear", "factor": 0.5}},
            r"scaling\['factor'\] must be >= 1 for rope_type 'linear', got 0.5",
        ),
        (
            {"scaling": {"rope_type": "linear", "factor": float("nan")}},
            r"scaling\['factor'\] must be finite, got nan",
        ),
        (
            {"scaling": {"rope_type": "dynamic", "factor": 2.0}},
            r"rope_type 'dynamic' requires max_position_embeddings",
        ),
        (
            {"scaling": {"rope_type": "dynamic", "factor": 0.9}, "max_position_embeddings": 8},
            r"scaling\['factor'\] must be >= 1 for rope_type 'dynamic', got 0.9",
        ),
        (
            {
                "dim": 2,
                "scaling": {"rope_type": "dynamic", "factor": 2.0},
                "max_position_embeddings": 8,
            },
            r"rope_type 'dynamic' requires dim >= 4",
        ),
        # yarn
        (
            {"scaling": {"rope_type": "yarn", "factor": 0.5}, "max_position_embeddings": 8},
            r"scaling\['factor'\] must be >= 1 for rope_type 'yarn', got 0.5",
        ),
        ({"scaling": _without(YARN, "factor")}, r"rope_type 'yarn' requires scaling\['factor'\]"),
        (
            {"scaling": {"rope_type": "yarn", "factor": None}, "max_position_embeddings": 4096},
            r"rope_type 'yarn' requires scaling\['factor'\]",
        ),
        (
            {
                "scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096},
                "max_position_embeddings": 2048,
            },
            r"the derived factor max_position_embeddings / "
            r"scaling\['original_max_position_embeddings'\] must be >= 1",
        ),
        (
            {"scaling": {"rope_type": "yarn", "factor": 4.0}},
            r"rope_type 'yarn' requires scaling\['original_max_position_embeddings'\] or "
            r"max_position_embeddings",
        ),
        (
            {"scaling": dict(YARN, original_max_position_embeddings=0)},
            r"scaling\['original_max_position_embeddings'\] must be a positive integer, got 0",
        ),
        (
            {"scaling": dict(YARN, attention_factor=0.0)},
            r"scaling\['attention_factor'\] must be > 0, got 0.0",
        ),
        (
            {"scaling": dict(YARN, attention_factor=float("inf"))},
            r"scaling\['attention_factor'\] must be finite",
        ),
        ({"scaling": dict(YARN, beta_fast=-1.0)}, r"scaling\['beta_fast'\] must be > 0"),
        ({"scaling": dict(YARN, beta_slow=0)}, r"scaling\['beta_slow'\] must be > 0"),
        (
            {"scaling": dict(YARN, beta_fast=1.0, beta_slow=32.0)},
            r"scaling\['beta_fast'\] must be >= scaling\['beta_slow'\]",
        ),
        (
            {"scaling": dict(YARN, mscale=-1.0)},
            r"scaling\['mscale'\] must be >= 0 for rope_type 'yarn'",
        ),
        (
            {"scaling": dict(YARN, mscale_all_dim=float("nan"))},
            r"scaling\['mscale_all_dim'\] must be finite",
        ),
        ({"scaling": YARN, "base": 1.0}, r"base must not be 1 for rope_type 'yarn'"),
        # longrope
        (
            {"scaling": _without(LONG, "short_factor")},
            r"rope_type 'longrope' requires scaling\['short_factor'\], which is missing",
        ),
        (
            {"scaling": _without(LONG, "long_factor")},
            r"rope_type 'longrope' requires scaling\['long_factor'\], which is missing",
        ),
        (
            {"scaling": dict(LONG, long_factor=[1.0] * 5)},
            r"scaling\['long_factor'\] must have dim // 2 = 4 entries \(one per rotated pair\), "
            r"got 5",
        ),
        (
            {"scaling": dict(LONG, short_factor=[1.0] * 3)},
            r"scaling\['short_factor'\] must have dim // 2 = 4 entries",
        ),
        (
            {"scaling": dict(LONG, short_factor=[1.0, 1.0, 0.0, 1.0])},
            r"scaling\['short_factor'\]\[2\] must be > 0, got 0.0",
        ),
        (
            {"scaling": dict(LONG, long_factor=[1.0, float("nan"), 1.0, 1.0])},
            r"scaling\['long_factor'\]\[1\] must be finite",
        ),
        (
            {"scaling": _without(LONG, "original_max_position_embeddings")},
            r"rope_type 'longrope' requires scaling\['original_max_position_embeddings'\] or "
            r"max_position_embeddings",
        ),
        (
            {"scaling": _without(LONG, "factor")},
            r"rope_type 'longrope' requires scaling\['factor'\], scaling\['attention_factor'\] or "
            r"max_position_embeddings",
        ),
        ({"scaling": dict(LONG, factor=-2.0)}, r"scaling\['factor'\] must be > 0, got -2.0"),
        (
            {"scaling": dict(LONG, attention_factor=-1)},
            r"scaling\['attention_factor'\] must be > 0, got -1",
        ),
        (
            {"scaling": dict(LONG, original_max_position_embeddings=1)},
            r"original_max_position_embeddings must be > 1 for rope_type 'longrope'",
        ),
        # llama3
        (
            {"scaling": _without(LLAMA3, "factor")},
            r"rope_type 'llama3' requires scaling\['factor'\], which is missing",
        ),
        (
            {"scaling": _without(LLAMA3, "low_freq_factor")},
            r"rope_type 'llama3' requires scaling\['low_freq_factor'\], which is missing",
        ),
        (
            {"scaling": _without(LLAMA3, "high_freq_factor")},
            r"rope_type 'llama3' requires scaling\['high_freq_factor'\], which is missing",
        ),
        (
            {"scaling": _without(LLAMA3, "original_max_position_embeddings")},
            r"rope_type 'llama3' requires scaling\['original_max_position_embeddings'\]",
        ),
        (
            {"scaling": dict(LLAMA3, factor=0.25)},
            r"scaling\['factor'\] must be >= 1 for rope_type 'llama3', got 0.25",
        ),
        (
            {"scaling": dict(LLAMA3, low_freq_factor=0.0)},
            r"scaling\['low_freq_factor'\] must be > 0, got 0.0",
        ),
        (
            {"scaling": dict(LLAMA3, high_freq_factor=1.0)},
            r"scaling\['high_freq_factor'\] must be > scaling\['low_freq_factor'\] for rope_type "
            r"'llama3', got high_freq_factor=1.0 and low_freq_factor=1.0",
        ),
        (
            {"scaling": dict(LLAMA3, original_max_position_embeddings=-8192)},
            r"scaling\['original_max_position_embeddings'\] must be a positive integer",
        ),
    ],
)
def test_errors(kwargs, match):
    kwargs = dict(kwargs)
    dim = kwargs.pop("dim", 8)
    with pytest.raises(ValueError, match=match):
        rope_frequencies(dim, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dim": 8.0}, r"dim must be an integer, got 8.0 of type float; use dim=8$"),
        ({"dim": True}, r"dim must be an integer, got True"),
        ({"base": "10000"}, r"base must be a real number, got '10000'"),
        ({"base": "x"}, r"base must be a real number, got 'x'"),
        ({"base": None}, r"base must be a real number, got None"),
        (
            {"seq_len": 10.5},
            r"seq_len must be an integer, got 10.5 of type float; use seq_len=int\(10.5\)",
        ),
        ({"seq_len": 2.0}, r"seq_len must be an integer, got 2.0 .*; use seq_len=2"),
        (
            {"max_position_embeddings": 4.0, "scaling": {"rope_type": "dynamic", "factor": 2.0}},
            r"max_position_embeddings must be an integer, got 4.0 of type float; "
            r"use max_position_embeddings=4$",
        ),
        ({"max_position_embeddings": "4096"}, r"max_position_embeddings must be an integer"),
        (
            {"scaling": {"rope_type": "linear", "factor": "2"}},
            r"scaling\['factor'\] must be a real number, got '2' of type str; write it as a "
            r"number",
        ),
        ({"scaling": {"rope_type": "linear", "factor": True}}, r"scaling\['factor'\] must be a"),
        ({"scaling": {"rope_type": 1}}, r"scaling\['rope_type'\] must be a string"),
        ({"scaling": {"type": ["yarn"]}}, r"scaling\['type'\] must be a string"),
        (
            {"scaling": dict(YARN, original_max_position_embeddings=4096.5)},
            r"scaling\['original_max_position_embeddings'\] must be an integer, got 4096.5",
        ),
        (
            {"scaling": dict(YARN, original_max_position_embeddings=4096.0)},
            r"must be an integer, got 4096.0 .*=4096",
        ),
        ({"scaling": dict(YARN, mscale="1")}, r"scaling\['mscale'\] must be a real number"),
        (
            {"scaling": dict(YARN, truncate="yes")},
            r"scaling\['truncate'\] must be True or False, got 'yes' of type str",
        ),
        ({"scaling": dict(YARN, truncate=1)}, r"scaling\['truncate'\] must be True or False"),
        (
            {"scaling": dict(YARN, rope_theta="1e4")},
            r"scaling\['rope_theta'\] must be a real number",
        ),
        (
            {"scaling": dict(LONG, long_factor=4.0)},
            r"scaling\['long_factor'\] must be a list of numbers, one per pair, got 4.0",
        ),
        (
            {"scaling": dict(LONG, long_factor="1111")},
            r"scaling\['long_factor'\] must be a list of numbers",
        ),
        (
            {"scaling": dict(LONG, short_factor=[1.0, "1", 1.0, 1.0])},
            r"scaling\['short_factor'\]\[1\] must be a real number, got '1'",
        ),
        (
            {"scaling": dict(LLAMA3, original_max_position_embeddings=True)},
            r"must be an integer, got True",
        ),
    ],
)
def test_type_errors(kwargs, match):
    """A value of the wrong type is a TypeError naming it (ValueError: right type, bad value)."""
    kwargs = dict(kwargs)
    dim = kwargs.pop("dim", 8)
    with pytest.raises(TypeError, match=match):
        rope_frequencies(dim, **kwargs)


def test_scaling_must_be_a_mapping():
    with pytest.raises(TypeError, match="scaling must be a mapping"):
        rope_frequencies(8, scaling=[("rope_type", "linear")])


# --------------------------------------------------------------------------- ntk_alpha


def test_ntk_alpha_is_the_default_rope_of_a_raised_base(rng):
    """HunYuan's NTK-alpha: the plain frequencies of base * alpha ** (d / (d - 2)), exact
    (fastpe's double-double frequencies of that base, the same bits as passing the base)."""
    sc = {"rope_type": "ntk_alpha", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32}
    base = 10000.0 * 1000.0 ** (128 / 126)
    inv, factor = rope_frequencies(128, base=10000.0, scaling=sc)
    want, _ = rope_frequencies(128, base=base)
    np.testing.assert_array_equal(inv, want)
    assert factor == 1.0
    x = rng.standard_normal((2, 9, 3, 128)).astype(np.float32)
    for f in (fastpe.apply_rope, fastpe.reference.apply_rope):
        np.testing.assert_array_equal(
            f(x, offset=70_000, scaling=sc, layout="half"),
            f(x, offset=70_000, base=base, layout="half"),
        )


@pytest.mark.parametrize(
    "dim, scaling, match",
    [
        (128, {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0}, r"'ntk_alpha'"),
        (128, {"rope_type": "ntk_alpha"}, r"alpha"),
        (128, {"rope_type": "ntk_alpha", "alpha": -2.0}, r"alpha"),
        (2, {"rope_type": "ntk_alpha", "alpha": 2.0}, r"dim >= 4"),
    ],
)
def test_ntk_alpha_refusals(dim, scaling, match):
    with pytest.raises(ValueError, match=match):
        rope_frequencies(dim, scaling=scaling, max_position_embeddings=4096)


def test_yarn_truncate_null_is_false():
    """transformers reads ``rope_parameters.get("truncate", True)`` then ``if truncate``:
    absent is True, an explicit null False (no rounding of the correction range)."""
    base = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    absent, _ = rope_frequencies(64, scaling=base)
    null, _ = rope_frequencies(64, scaling={**base, "truncate": None})
    false, _ = rope_frequencies(64, scaling={**base, "truncate": False})
    true, _ = rope_frequencies(64, scaling={**base, "truncate": True})
    assert np.array_equal(absent, true) and np.array_equal(null, false)
    assert not np.array_equal(true, false)
