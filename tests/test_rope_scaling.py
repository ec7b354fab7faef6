"""apply_rope with Hugging Face scaling dicts: fast vs reference, attention factor, configs."""

from __future__ import annotations

import numpy as np
import pytest
from test_rope import ROPE_ULP, assert_rope_close

import fastpe
from fastpe import reference
from fastpe.hf_config import head_dim_from_config, rope_kwargs_from_config
from fastpe.scaling import rope_frequencies

CONFIGS = {
    "linear": ({"rope_type": "linear", "factor": 4.0}, None),
    "dynamic": ({"type": "dynamic", "factor": 2.0}, 512),
    "yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
             None),
    "yarn_mscale": ({"rope_type": "yarn", "factor": 40.0, "mscale": 1.0,
                     "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096},
                    None),
    "longrope": ({"rope_type": "longrope", "short_factor": [1.0 + i / 16 for i in range(16)],
                  "long_factor": [2.0 + i / 8 for i in range(16)],
                  "original_max_position_embeddings": 512}, 4096),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 512}, None),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0, 1000])
def test_fast_matches_reference(name, dtype, offset, rng):
    scaling, max_pos = CONFIGS[name]
    x = rng.standard_normal((2, 300, 2, 32)).astype(dtype)
    kw = dict(scaling=scaling, max_position_embeddings=max_pos, layout="half", offset=offset)
    got = fastpe.apply_rope(x, **kw)
    want = reference.apply_rope(x, **kw)
    # the attention factor scales the pair: compare in ulps of the scaled norm
    _, factor = rope_frequencies(32, scaling=scaling, max_position_embeddings=max_pos,
                                 seq_len=offset + 300)
    assert_rope_close(got, want, x * factor, "half", 32, config=name)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reference_equals_transcription(name, rng):
    """q * cos + rotate_half(q) * sin with cos/sin from rope_frequencies, times the factor."""
    scaling, max_pos = CONFIGS[name]
    q = rng.standard_normal((1, 2, 64, 32))  # (batch, heads, seq, head_dim)
    pos = np.arange(64) + 700
    inv_freq, factor = rope_frequencies(32, scaling=scaling, max_position_embeddings=max_pos,
                                        seq_len=int(pos.max()) + 1)
    s, c = reference.sincos(pos, inv_freq)
    cos = np.concatenate([c, c], axis=-1) * factor
    sin = np.concatenate([s, s], axis=-1) * factor
    rot_half = np.concatenate([-q[..., 16:], q[..., :16]], axis=-1)
    hf = q * cos + rot_half * sin
    got = reference.apply_rope(q, positions=pos, seq_axis=2, layout="half", scaling=scaling,
                               max_position_embeddings=max_pos)
    u = np.spacing(np.abs(q).max() * max(factor, 1.0))
    assert np.abs(got - hf).max() <= 2 * u


def test_yarn_attention_factor_is_applied(rng):
    x = rng.standard_normal((1, 10, 8))
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    y = fastpe.apply_rope(x, scaling=scaling)
    factor = 0.1 * np.log(4.0) + 1.0
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), factor * np.linalg.norm(x, axis=-1),
                               rtol=4e-16 * 8)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inverse_undoes_scaled(name, dtype, rng):
    scaling, max_pos = CONFIGS[name]
    x = rng.standard_normal((2, 50, 32)).astype(dtype)
    kw = dict(scaling=scaling, max_position_embeddings=max_pos, offset=40)
    y = fastpe.apply_rope(x, **kw)
    z = fastpe.apply_rope(y, inverse=True, seq_len=90, **kw)
    norm = np.hypot(x[..., 0::2], x[..., 1::2]).astype(np.float64)
    err = np.abs(z - x).reshape(2, 50, 16, 2).max(-1) / np.spacing(norm.astype(dtype))
    assert err.max() <= 2 * ROPE_ULP[np.dtype(dtype)] + 1


def test_dynamic_uses_seq_len_and_defaults_to_largest_position(rng):
    scaling = {"rope_type": "dynamic", "factor": 2.0}
    x = rng.standard_normal((1, 100, 8))
    a = fastpe.apply_rope(x, scaling=scaling, max_position_embeddings=64, offset=500)
    b = fastpe.apply_rope(x, scaling=scaling, max_position_embeddings=64, offset=500,
                          seq_len=600)
    np.testing.assert_array_equal(a, b)
    c = fastpe.apply_rope(x, scaling=scaling, max_position_embeddings=64, offset=500,
                          seq_len=64)  # inside the trained context: plain frequencies
    plain64 = {"rope_type": "linear", "factor": 1.0}  # the same float64 frequencies
    np.testing.assert_array_equal(c, fastpe.apply_rope(x, offset=500, scaling=plain64))
    assert not np.array_equal(a, c)


def test_longrope_switches_factors_at_original_context(rng):
    scaling, max_pos = CONFIGS["longrope"]
    x = rng.standard_normal((1, 10, 32))
    short = fastpe.apply_rope(x, scaling=scaling, max_position_embeddings=max_pos, seq_len=512)
    long_ = fastpe.apply_rope(x, scaling=scaling, max_position_embeddings=max_pos, seq_len=513)
    assert not np.array_equal(short, long_)


def test_default_scaling_is_plain_rope(rng):
    x = rng.standard_normal((2, 30, 16))
    np.testing.assert_array_equal(fastpe.apply_rope(x, scaling={"rope_type": "default"}),
                                  fastpe.apply_rope(x))


@pytest.mark.parametrize(
    "scaling, match",
    [
        ({"rope_type": "ntk-by-parts"}, "rope_type"),
        ({"rope_type": "linear"}, "factor"),
        ({"rope_type": "linear", "factor": 0.5}, "factor"),
        ({"rope_type": "longrope", "short_factor": [1.0] * 3, "long_factor": [1.0] * 3,
          "original_max_position_embeddings": 64}, "short_factor"),
    ],
)
def test_bad_scaling_leaves_x_untouched(scaling, match, rng):
    x = rng.standard_normal((2, 30, 16))
    x0 = x.copy()
    with pytest.raises(ValueError, match=match):
        fastpe.apply_rope(x, out=x, scaling=scaling, max_position_embeddings=128)
    np.testing.assert_array_equal(x, x0)


def test_from_config_to_apply_rope(rng):
    config = {
        "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
        "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "partial_rotary_factor": 0.5,
        "rope_scaling": {"type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 32768},
    }
    kw = rope_kwargs_from_config(config)
    head_dim = head_dim_from_config(config)
    assert (head_dim, kw["rotary_dim"], kw["layout"]) == (128, 64, "half")
    q = rng.standard_normal((1, 20, 16, head_dim)).astype(np.float32)
    got = fastpe.apply_rope(q, offset=40000, **kw)
    want = reference.apply_rope(q, offset=40000, **kw)
    _, factor = rope_frequencies(64, base=1e6, scaling=kw["scaling"])
    scaled = q.copy()
    scaled[..., :64] *= factor  # the pass-through channels are not scaled
    assert_rope_close(got, want, scaled, "half", 64)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(seq_len=2.0), r"seq_len must be an integer, got 2.0"),
        (dict(max_position_embeddings=4.0), r"max_position_embeddings must be an integer, got 4.0"),
        (dict(base="x"), r"base must be a real number, got 'x'"),
        (dict(scaling={"rope_type": "linear", "factor": "4"}), r"scaling\['factor'\]"),
    ],
)
def test_wrong_types_are_type_errors_in_apply_rope_and_rope_frequencies(kw, match, rng):
    """The same mistake is the same TypeError in apply_rope and in rope_frequencies."""
    scaling = kw.pop("scaling", {"rope_type": "dynamic", "factor": 2.0})
    call = dict(dict(max_position_embeddings=64, seq_len=128), **kw)
    x = rng.standard_normal((2, 30, 16))
    x0 = x.copy()
    with pytest.raises(TypeError, match=match):
        fastpe.apply_rope(x, out=x, scaling=scaling, **call)
    np.testing.assert_array_equal(x, x0)
    with pytest.raises(TypeError, match=match):
        rope_frequencies(16, scaling=scaling, **call)
