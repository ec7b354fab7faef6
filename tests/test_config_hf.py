"""Tests for fastpe.hf_config: whole Hugging Face configs read into apply_rope arguments.

The frequency formulas are tested in test_scaling.py; here the reader is checked by the
arguments it hands over: each config is compared with the arguments written out by hand from
the published checkpoint, and frequencies with rope_frequencies called on those.
"""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

import fastpe
import fastpe.scaling
from fastpe import _cases, reference
from fastpe.hf_config import head_dim_from_config, rope_kwargs_from_config, rotary_dim_from_config
from fastpe.scaling import rope_frequencies

mpmath = pytest.importorskip("mpmath")
mpmath.mp.prec = 200


def ulps(value: float, exact) -> float:
    """``|value - exact|`` in float64 ulps of ``exact`` (``exact`` an mpmath number)."""
    return float(abs(mpmath.mpf(value) - exact) / np.spacing(float(exact)))


def yarn_mscale(factor, mscale=1):
    """0.1 * mscale * ln(factor) + 1, exactly (transformers' get_mscale)."""
    return mpmath.mpf(mscale) * mpmath.log(mpmath.mpf(factor)) / 10 + 1


def check_splat(kw: dict, head_dim: int, rng) -> None:
    """``kw`` splats into fastpe.apply_rope and the reference, which agree in ulps."""
    assert set(kw) <= set(inspect.signature(fastpe.apply_rope).parameters)
    x = rng.standard_normal((2, 7, 3, head_dim))
    got = fastpe.apply_rope(x, offset=5000, **kw)
    want = reference.apply_rope(x, offset=5000, **kw)
    rot = kw["rotary_dim"]
    np.testing.assert_array_equal(got[..., rot:], x[..., rot:])
    _, factor = rope_frequencies(rot, base=kw["base"], scaling=kw["scaling"],
                                 max_position_embeddings=kw["max_position_embeddings"],
                                 seq_len=kw.get("seq_len", 5007))
    if kw["layout"] == "half":
        half = rot // 2
        norm = np.hypot(x[..., :half], x[..., half:rot]) * factor
        norm = np.concatenate([norm, norm], axis=-1)
    else:  # interleaved pairs (2i, 2i + 1)
        norm = np.repeat(np.hypot(x[..., 0:rot:2], x[..., 1:rot:2]) * factor, 2, axis=-1)
    err = np.abs(got[..., :rot] - want[..., :rot]) / np.spacing(norm)
    assert err.max() <= _cases.ROPE_ULP[np.dtype(np.float64)]


def test_public_names_and_old_import_path():
    assert fastpe.rope_kwargs_from_config is rope_kwargs_from_config
    assert fastpe.head_dim_from_config is head_dim_from_config
    # importable from fastpe.scaling as before the reader had a module of its own
    from fastpe.scaling import rope_kwargs_from_config as old
    from fastpe.scaling import rotary_dim_from_config as old_rotary

    assert old is rope_kwargs_from_config and old_rotary is rotary_dim_from_config
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        fastpe.scaling.nope


# --------------------------------------------------------------------------- rotary dim


@pytest.mark.parametrize(
    ("head_dim", "factor", "expected"),
    [
        (128, 1.0, 128),
        (128, 0.5, 64),
        (128, 0.75, 96),
        (80, 0.4, 32),
        (256, 0.25, 64),
        (64, 1, 64),
        (100, 0.3, 30),
    ],
)
def test_rotary_dim_from_config(head_dim, factor, expected):
    assert rotary_dim_from_config(head_dim, factor) == expected


@pytest.mark.parametrize(
    ("head_dim", "factor", "match"),
    [
        (0, 1.0, r"head_dim must be a positive integer, got 0"),
        (64, 0.0, r"partial_rotary_factor must be > 0, got 0.0"),
        (64, 1.5, r"partial_rotary_factor must be in \(0, 1\], got 1.5"),
        (64, float("nan"), r"partial_rotary_factor must be finite"),
        (
            10,
            0.5,
            r"int\(head_dim \* partial_rotary_factor\) = int\(10 \* 0.5\) = 5 must be a "
            r"positive even number",
        ),
        (64, 0.01, r"= 0 must be a positive even number"),
    ],
)
def test_rotary_dim_from_config_errors(head_dim, factor, match):
    with pytest.raises(ValueError, match=match):
        rotary_dim_from_config(head_dim, factor)


@pytest.mark.parametrize(
    ("head_dim", "factor", "match"),
    [
        (64.0, 1.0, r"head_dim must be an integer, got 64.0 .*; pass int\(head_dim\) = 64"),
        (True, 1.0, r"head_dim must be an integer, got True"),
        (64, "0.5", r"partial_rotary_factor must be a real number, got '0.5' of type str"),
        (64, None, r"partial_rotary_factor must be a real number, got None"),
    ],
)
def test_rotary_dim_from_config_type_errors(head_dim, factor, match):
    with pytest.raises(TypeError, match=match):
        rotary_dim_from_config(head_dim, factor)


# --------------------------------------------------------------------------- configs

LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

QWEN2_YARN = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 3584,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rope_theta": 1000000.0,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
    "sliding_window": 131072,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

PHI_SHORT = [1.0 + 0.01 * j for j in range(48)]
PHI_LONG = [1.0 + 0.5 * j for j in range(48)]
PHI_LONGROPE = {
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 3072,
    "max_position_embeddings": 131072,
    "model_type": "phi3",
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "original_max_position_embeddings": 4096,
    "partial_rotary_factor": 0.75,
    "rope_scaling": {"long_factor": PHI_LONG, "short_factor": PHI_SHORT, "type": "longrope"},
    "rope_theta": 10000.0,
    "sliding_window": 262144,
    "vocab_size": 200064,
}

NEW_STYLE_YARN = {
    "model_type": "deepseek_v3",
    "head_dim": 128,
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "max_position_embeddings": 163840,
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
    },
}


def test_config_llama31(rng):
    kw = rope_kwargs_from_config(LLAMA_31_8B)
    assert kw == {
        "layout": "half",
        "base": 500000.0,
        "rotary_dim": 128,
        "scaling": LLAMA_31_8B["rope_scaling"],
        "max_position_embeddings": 131072,
    }
    assert kw["scaling"] is not LLAMA_31_8B["rope_scaling"]  # a fresh dict
    assert head_dim_from_config(LLAMA_31_8B) == 128
    _, attention = rope_frequencies(
        kw["rotary_dim"],
        base=kw["base"],
        scaling=kw["scaling"],
        max_position_embeddings=kw["max_position_embeddings"],
    )
    assert attention == 1.0
    check_splat(kw, 128, rng)


def test_config_qwen2_yarn(rng):
    kw = rope_kwargs_from_config(QWEN2_YARN, seq_len=100_000)
    assert kw == {
        "layout": "half",
        "base": 1000000.0,
        "rotary_dim": 128,
        "scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
        "max_position_embeddings": 32768,
        "seq_len": 100_000,
    }
    assert head_dim_from_config(QWEN2_YARN) == 3584 // 28
    _, attention = rope_frequencies(
        128, base=kw["base"], scaling=kw["scaling"], max_position_embeddings=32768
    )
    assert ulps(attention, yarn_mscale(4)) <= 1
    assert "seq_len" not in rope_kwargs_from_config(QWEN2_YARN)
    check_splat(kw, 128, rng)


@pytest.mark.parametrize(("seq_len", "long"), [(None, False), (4096, False), (4097, True)])
def test_config_phi_longrope_partial(seq_len, long, rng):
    kw = rope_kwargs_from_config(PHI_LONGROPE, seq_len=seq_len)
    assert kw["base"] == 10000.0
    assert head_dim_from_config(PHI_LONGROPE) == 128
    assert kw["rotary_dim"] == 96
    assert kw["max_position_embeddings"] == 131072
    assert kw["scaling"] == {
        "rope_type": "longrope",
        "long_factor": PHI_LONG,
        "short_factor": PHI_SHORT,
        "original_max_position_embeddings": 4096,
    }
    assert "original_max_position_embeddings" not in PHI_LONGROPE["rope_scaling"]  # untouched
    inv_freq, attention = rope_frequencies(
        kw["rotary_dim"],
        base=kw["base"],
        scaling=kw["scaling"],
        seq_len=seq_len,
        max_position_embeddings=kw["max_position_embeddings"],
    )
    factors = PHI_LONG if long else PHI_SHORT
    plain = rope_frequencies(96, base=10000.0)[0]
    np.testing.assert_array_max_ulp(inv_freq, plain / np.array(factors), 2)
    exact = mpmath.sqrt(1 + mpmath.log(mpmath.mpf(131072) / 4096) / mpmath.log(4096))
    assert ulps(attention, exact) <= 2
    check_splat(kw, 128, rng)


def test_config_new_style_rope_parameters(rng):
    kw = rope_kwargs_from_config(NEW_STYLE_YARN)
    assert kw["base"] == 10000.0
    assert head_dim_from_config(NEW_STYLE_YARN) == 128  # given explicitly, not 7168 // 128
    assert kw["rotary_dim"] == 64
    assert kw["max_position_embeddings"] == 163840
    expected_scaling = {
        k: v
        for k, v in NEW_STYLE_YARN["rope_parameters"].items()
        if k not in ("rope_theta", "partial_rotary_factor")
    }
    assert kw["scaling"] == expected_scaling
    _, attention = rope_frequencies(
        64, base=kw["base"], scaling=kw["scaling"], max_position_embeddings=163840
    )
    assert ulps(attention, yarn_mscale(40, 1) / yarn_mscale(40, "0.707")) <= 2
    check_splat(kw, 128, rng)


def test_config_new_style_default_and_fallbacks():
    config = {
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "rope_scaling": None,
    }
    assert rope_kwargs_from_config(config) == {
        "layout": "half",
        "base": 1e6,
        "rotary_dim": 128,
        "scaling": None,
        "max_position_embeddings": None,
    }
    assert head_dim_from_config(config) == 128  # a null head_dim is derived
    # nothing but the head shape: base 10000, no scaling
    assert rope_kwargs_from_config({"head_dim": 64}) == {
        "layout": "half",
        "base": 10000.0,
        "rotary_dim": 64,
        "scaling": None,
        "max_position_embeddings": None,
    }


def test_config_per_layer_type_rope_parameters():
    config = {
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    }
    full = rope_kwargs_from_config(config, layer_type="full_attention")
    assert full["base"] == 1e6
    assert full["scaling"] == {"rope_type": "linear", "factor": 8.0}
    sliding = rope_kwargs_from_config(config, layer_type="sliding_attention")
    assert sliding["base"] == 10000.0
    assert sliding["scaling"] is None
    with pytest.raises(ValueError, match=r"one rope dict per layer type .*pass layer_type"):
        rope_kwargs_from_config(config)
    with pytest.raises(ValueError, match=r"layer_type 'global' is not in"):
        rope_kwargs_from_config(config, layer_type="global")
    with pytest.raises(ValueError, match=r"is not split by layer type; drop layer_type"):
        rope_kwargs_from_config(QWEN2_YARN, layer_type="full_attention")


def test_config_both_rope_dicts_agreeing_are_merged():
    config = dict(QWEN2_YARN, rope_parameters={"rope_type": "yarn", "rope_theta": 1e6})
    config.pop("rope_theta")
    kw = rope_kwargs_from_config(config)
    assert kw["base"] == 1e6
    assert kw["scaling"] == {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
    }


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            dict(LLAMA_31_8B, rope_parameters={"rope_theta": 10000.0}),
            r"config\['rope_theta'\] \(500000.0\) and the rope dict's 'rope_theta' \(10000.0\) "
            r"disagree",
        ),
        (
            dict(PHI_LONGROPE, rope_parameters={"partial_rotary_factor": 0.5}),
            r"config\['partial_rotary_factor'\] \(0.75\) and the rope dict's",
        ),
        (
            dict(
                PHI_LONGROPE,
                rope_scaling=dict(
                    PHI_LONGROPE["rope_scaling"], original_max_position_embeddings=8192
                ),
            ),
            r"config\['original_max_position_embeddings'\] \(4096\) and the rope dict's",
        ),
        (
            dict(QWEN2_YARN, rope_parameters={"rope_type": "yarn", "factor": 2.0}),
            r"config\['rope_parameters'\]\['factor'\] \(2.0\) and config\['rope_scaling'\]"
            r"\['factor'\] \(4.0\) disagree",
        ),
        (
            {"hidden_size": 4096},
            r"config needs 'head_dim', or 'hidden_size' and "
            r"'num_attention_heads'",
        ),
        ({"head_dim": 0}, r"config\['head_dim'\] must be a positive integer, got 0"),
        (
            {"hidden_size": 4096, "num_attention_heads": -32},
            r"config\['num_attention_heads'\] must be a positive integer, got -32",
        ),
        (
            {"head_dim": 64, "partial_rotary_factor": 0.3},
            r"int\(head_dim \* partial_rotary_factor\) = int\(64 \* 0.3\) = 19",
        ),
        ({"head_dim": 64, "rope_theta": -1.0}, r"config\['rope_theta'\] must be > 0, got -1.0"),
        ({"head_dim": 64, "rope_theta": float("nan")}, r"config\['rope_theta'\] must be finite"),
        (
            {"head_dim": 64, "max_position_embeddings": 0},
            r"config\['max_position_embeddings'\] must be a positive integer, got 0",
        ),
        # "su" is Phi-3 128k's name for longrope: read as longrope, whose keys it then needs
        (
            {"head_dim": 64, "rope_scaling": {"type": "su"}},
            r"rope_type 'longrope' requires scaling\['short_factor'\]",
        ),
        ({"head_dim": 64, "rope_scaling": {"type": "ntk"}}, r"unknown rope_type 'ntk'"),
        # scaling errors surface here, at config time
        (
            dict(PHI_LONGROPE, partial_rotary_factor=0.5),
            r"scaling\['short_factor'\] must have dim // 2 = 32 entries",
        ),
        (
            dict(LLAMA_31_8B, rope_scaling={"rope_type": "llama3", "factor": 8.0}),
            r"rope_type 'llama3' requires scaling\['low_freq_factor'\]",
        ),
        (
            dict(
                QWEN2_YARN,
                max_position_embeddings=None,
                rope_scaling={"type": "dynamic", "factor": 2.0},
            ),
            r"rope_type 'dynamic' requires max_position_embeddings",
        ),
    ],
)
def test_config_errors(config, match):
    with pytest.raises(ValueError, match=match):
        rope_kwargs_from_config(config)


@pytest.mark.parametrize(
    ("config", "kwargs", "match"),
    [
        ([("head_dim", 64)], {}, r"config must be a mapping \(a parsed config.json"),
        (
            {"head_dim": 64, "rope_scaling": "yarn"},
            {},
            r"config\['rope_scaling'\] must be a dict or null, got 'yarn' of type str",
        ),
        ({"head_dim": 64.0}, {}, r"config\['head_dim'\] must be an integer, got 64.0 .*= 64"),
        (
            {"hidden_size": "4096", "num_attention_heads": 32},
            {},
            r"config\['hidden_size'\] must be an integer, got '4096'",
        ),
        (
            dict(LLAMA_31_8B, max_position_embeddings=131072.0),
            {},
            r"config\['max_position_embeddings'\] must be an integer, got 131072.0",
        ),
        ({"head_dim": 64, "rope_theta": "1e6"}, {}, r"config\['rope_theta'\] must be a real"),
        (
            {"head_dim": 64, "partial_rotary_factor": "0.5"},
            {},
            r"config\['partial_rotary_factor'\] must be a real number, got '0.5'",
        ),
        ({"head_dim": 64, "model_type": 7}, {}, r"config\['model_type'\] must be a string"),
        (
            {"head_dim": 64, "rope_scaling": {"rope_type": 3}},
            {},
            r"scaling\['rope_type'\] must be a string such as 'yarn', got 3",
        ),
        (
            dict(QWEN2_YARN, rope_scaling={"type": "yarn", "factor": "4"}),
            {},
            r"scaling\['factor'\] must be a real number, got '4'",
        ),
        (
            dict(QWEN2_YARN, rope_scaling={"type": "yarn", "factor": 4.0,
                                           "original_max_position_embeddings": 32768.0}),
            {},
            r"scaling\['original_max_position_embeddings'\] must be an integer, got 32768.0",
        ),
        (LLAMA_31_8B, {"seq_len": 2.0}, r"seq_len must be an integer, got 2.0 .*= 2"),
        (LLAMA_31_8B, {"layer_type": 0}, r"layer_type must be a string"),
    ],
)
def test_config_type_errors(config, kwargs, match):
    with pytest.raises(TypeError, match=match):
        rope_kwargs_from_config(config, **kwargs)


def test_config_seq_len_validated():
    with pytest.raises(ValueError, match="seq_len must be a positive integer, got -5"):
        rope_kwargs_from_config(LLAMA_31_8B, seq_len=-5)


def test_config_not_modified():
    before = copy.deepcopy(PHI_LONGROPE)
    rope_kwargs_from_config(PHI_LONGROPE, seq_len=5000)
    rope_kwargs_from_config(NEW_STYLE_YARN)
    assert before == PHI_LONGROPE
