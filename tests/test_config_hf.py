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
from _util import assert_rope_close

import fastpe
import fastpe.scaling
from fastpe import _cases, reference
from fastpe.hf_config import (
    head_dim_from_config,
    output_layout_from_config,
    rope_kwargs_from_config,
    rotary_dim_from_config,
)
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
    _, factor = rope_frequencies(
        rot,
        base=kw["base"],
        scaling=kw["scaling"],
        max_position_embeddings=kw["max_position_embeddings"],
        seq_len=kw.get("seq_len", 5007),
    )
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
        (64.0, 1.0, r"head_dim must be an integer, got 64.0 .*; use head_dim=64"),
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
    "model_type": "glm4_moe",
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
    config = dict(QWEN2_YARN, rope_parameters={"rope_type": "yarn", "factor": 4.0})
    kw = rope_kwargs_from_config(config)
    assert kw["base"] == 1e6
    assert kw["scaling"] == {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
    }


def test_config_rope_parameters_keys_beside_rope_scaling_refused():
    """transformers keeps ``rope_scaling or rope_parameters``: with both dicts, a key that
    only rope_parameters holds is ignored there (this config's theta is 10000 in
    transformers 5.24, not the 1e6 of rope_parameters), so fastpe refuses it."""
    config = dict(QWEN2_YARN, rope_parameters={"rope_type": "yarn", "rope_theta": 1e6})
    config.pop("rope_theta")
    with pytest.raises(ValueError, match=r"holds 'rope_theta', which config\['rope_scaling'\]"):
        rope_kwargs_from_config(config)


def test_config_phi3_original_context_is_the_top_level_one():
    """Phi-3's config class keeps original_max_position_embeddings at the top level (4096
    by default) and transformers writes it over the rope dict's."""
    sf, lf = [1.0] * 48, [2.0] * 48
    scaling = {"rope_type": "longrope", "short_factor": sf, "long_factor": lf}
    config = dict(
        model_type="phi3",
        hidden_size=3072,
        num_attention_heads=32,
        max_position_embeddings=131072,
        rope_scaling=scaling,
    )
    kw = rope_kwargs_from_config(config)
    assert kw["scaling"]["original_max_position_embeddings"] == 4096
    config["rope_scaling"] = dict(scaling, original_max_position_embeddings=8192)
    with pytest.raises(ValueError, match=r"keeps it at the top level .* 4096"):
        rope_kwargs_from_config(config)
    config["original_max_position_embeddings"] = 8192
    kw = rope_kwargs_from_config(config)
    assert kw["scaling"]["original_max_position_embeddings"] == 8192


@pytest.mark.parametrize(
    "extra",
    [
        {"rope_theta": 5e5},
        {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        {"partial_rotary_factor": 0.5},
    ],
)
@pytest.mark.parametrize("model_type", ["gptj", "codegen"])
def test_config_hardcoded_rope_keys_refused(model_type, extra):
    """GPT-J's and CodeGen's rotary code hard-codes base 10000 and no scaling:
    transformers ignores these keys there, so fastpe refuses them."""
    config = dict(model_type=model_type, n_embd=512, n_head=4, rotary_dim=64, **extra)
    with pytest.raises(ValueError, match="hard-codes base 10000"):
        rope_kwargs_from_config(config)
    config = dict(model_type=model_type, n_embd=512, n_head=4, rotary_dim=64, rope_theta=10000)
    assert rope_kwargs_from_config(config)["base"] == 10000.0


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (  # beside rope_scaling, transformers ignores rope_parameters
            dict(LLAMA_31_8B, rope_parameters={"rope_theta": 10000.0}),
            r"holds 'rope_theta', which config\['rope_scaling'\] does not",
        ),
        (
            dict(PHI_LONGROPE, rope_parameters={"partial_rotary_factor": 0.5}),
            r"holds 'partial_rotary_factor', which config\['rope_scaling'\] does not",
        ),
        (  # the top level against the one rope dict
            dict(
                {k: v for k, v in LLAMA_31_8B.items() if k != "rope_scaling"},
                rope_parameters={"rope_theta": 10000.0},
            ),
            r"config\['rope_theta'\] \(500000.0\) and the rope dict's 'rope_theta' \(10000.0\) "
            r"disagree",
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
        ({"head_dim": 64.0}, {}, r"config\['head_dim'\] must be an integer, got 64.0 .*=64"),
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
            dict(
                QWEN2_YARN,
                rope_scaling={
                    "type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 32768.0,
                },
            ),
            {},
            r"scaling\['original_max_position_embeddings'\] must be an integer, got 32768.0",
        ),
        (LLAMA_31_8B, {"seq_len": 2.0}, r"seq_len must be an integer, got 2.0 .*=2"),
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


# --------------------------------------------------------------------------- families
# Each row of fastpe.hf_config._FAMILIES, by a config written the way the family publishes
# it. tests/test_hf_oracle.py checks every rotary class of transformers against HF itself.


def test_gptj_codegen_interleaved_with_rotary_dim():
    gptj = {
        "model_type": "gptj",
        "n_embd": 4096,
        "n_head": 16,
        "n_positions": 2048,
        "rotary_dim": 64,
    }
    assert rope_kwargs_from_config(gptj) == {
        "layout": "interleaved",
        "base": 10000.0,
        "rotary_dim": 64,
        "scaling": None,
        "max_position_embeddings": 2048,
    }
    assert head_dim_from_config(gptj) == 256
    # rotary_dim null: the whole head, as GPT-J's code does
    codegen = {"model_type": "codegen", "n_embd": 1024, "n_head": 16, "rotary_dim": None}
    assert rope_kwargs_from_config(codegen)["rotary_dim"] == 64
    assert rope_kwargs_from_config(codegen)["layout"] == "interleaved"
    with pytest.raises(ValueError, match=r"config\['rotary_dim'\] must be even and <= the head"):
        rope_kwargs_from_config(dict(gptj, rotary_dim=512))


@pytest.mark.parametrize(
    "model_type",
    ["cohere", "cohere2", "glm", "glm4", "helium", "ernie4_5", "deepseek_v2", "llama4_text"],
)
def test_interleaved_families(model_type):
    # (layer 0: Cohere 2 and Llama 4 leave RoPE out of some layers, which asks for one)
    kw = rope_kwargs_from_config({"model_type": model_type, "head_dim": 64}, layer=0)
    assert kw["layout"] == "interleaved"


def test_gpt_neox_keys():
    pythia = {
        "model_type": "gpt_neox",
        "hidden_size": 2048,
        "num_attention_heads": 8,
        "rotary_pct": 0.25,
        "rotary_emb_base": 20000,
    }
    kw = rope_kwargs_from_config(pythia)
    assert (kw["rotary_dim"], kw["base"], kw["layout"]) == (64, 20000.0, "half")
    # the same keys in a family that does not use them: refused by name
    for model_type in ("llama", None):
        config = dict(pythia, model_type=model_type)
        with pytest.raises(ValueError, match=r"'rotary_emb_base', 'rotary_pct' change how"):
            rope_kwargs_from_config(config)


def test_latent_attention_rotates_qk_rope_head_dim():
    v2 = {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    }
    assert head_dim_from_config(v2) == 64
    assert rope_kwargs_from_config(v2)["rotary_dim"] == 64
    minicpm3 = {
        "model_type": "minicpm3",
        "hidden_size": 2560,
        "num_attention_heads": 40,
        "qk_rope_head_dim": 32,
    }
    assert rope_kwargs_from_config(minicpm3)["rotary_dim"] == 32
    assert rope_kwargs_from_config(minicpm3)["layout"] == "half"
    with pytest.raises(ValueError, match=r"'qk_rope_head_dim' change how"):
        rope_kwargs_from_config(dict(v2, model_type="some_new_model"))


def test_latent_attention_without_qk_rope_head_dim_reads_the_class_default():
    """A latent-attention config that leaves out qk_rope_head_dim rotates the config
    class's default (DeepSeek-V3's 64, MiniCPM3's 32, AXK2's 32), not hidden_size //
    num_attention_heads nor a class default head_dim the class overwrites (HY-V4's 256);
    a given head_dim that the class keeps beside it must agree (tests/test_hf_oracle.py
    compares each such family with its rotary class)."""
    bare = {"hidden_size": 1024, "num_attention_heads": 8}
    for model_type, rope in [
        ("deepseek_v2", 64),
        ("deepseek_v3", 64),
        ("deepseek_v32", 64),
        ("minicpm3", 32),
        ("axk2", 32),
        ("hy_v4", 64),
        ("bailing_hybrid", 64),
        ("glm4_moe_lite", 64),
        ("longcat_flash", 64),
    ]:
        config = dict(bare, model_type=model_type)
        assert head_dim_from_config(config) == rope, model_type
        assert rope_kwargs_from_config(config)["rotary_dim"] == rope, model_type
    # DeepSeek-V3's class keeps a given head_dim, which sizes its rotary class (the model
    # fails where it differs from qk_rope_head_dim); DeepSeek-V2's overwrites it
    v3 = dict(bare, model_type="deepseek_v3", head_dim=96)
    for read in (rope_kwargs_from_config, head_dim_from_config):
        with pytest.raises(ValueError, match=r"config\['head_dim'\] = 96 .* make them agree"):
            read(v3)
    assert head_dim_from_config(dict(v3, qk_rope_head_dim=96)) == 96
    assert head_dim_from_config(dict(v3, model_type="deepseek_v2")) == 64
    # GLM-4-MoE-lite: head_dim is an alias of qk_rope_head_dim, and wins over it
    assert head_dim_from_config(dict(bare, model_type="glm4_moe_lite", head_dim=96)) == 96
    # Mistral 4: the head is qk_nope_head_dim + qk_rope_head_dim (64 + 64 by default)
    assert head_dim_from_config(dict(bare, model_type="mistral4")) == 128
    assert rope_kwargs_from_config(dict(bare, model_type="mistral4"))["rotary_dim"] == 64


def test_latent_attention_sizes_the_model_fails_on_are_refused():
    """Latent-attention configs on which transformers 5.24's config class or model fails
    are refused naming the key, not read with hidden_size // num_attention_heads or a
    rotation the attention does not apply (tests/test_hf_oracle.py compares each family
    with its config class, rotary class and model)."""
    bare = {"hidden_size": 1024, "num_attention_heads": 8, "qk_rope_head_dim": 32}
    for model_type in ("deepseek_v3", "deepseek_v32", "minicpm3", "glm4_moe_lite"):
        null = dict(bare, model_type=model_type, qk_rope_head_dim=None)
        for read in (rope_kwargs_from_config, head_dim_from_config):
            with pytest.raises(ValueError, match=r"config\['qk_rope_head_dim'\] is null"):
                read(null)
    # a partial factor the rotary class applies to the rope part: the attention rotates
    # qk_rope_head_dim channels, the rotary class half of them
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    for model_type in ("deepseek_v3", "glm4_moe_lite", "mistral_large4_text"):
        config = dict(bare, model_type=model_type, rope_parameters=yarn, partial_rotary_factor=0.5)
        with pytest.raises(ValueError, match=r"make them agree"):
            rope_kwargs_from_config(config, layer=0)
    # DeepSeek-V3.2's model reads its sizes from the top-level config only
    v32 = dict(bare, model_type="deepseek_v32", per_layer_config={0: {"head_dim": 16}})
    with pytest.raises(ValueError, match=r"per_layer_config'\]\[0\] sets \['head_dim'\]"):
        head_dim_from_config(v32, layer=0)
    # Mistral 4 derives its partial factor from the two sizes where none is given
    m4 = dict(bare, model_type="mistral4", qk_nope_head_dim=96, rope_parameters=yarn)
    assert head_dim_from_config(m4) == 128
    assert rope_kwargs_from_config(m4)["rotary_dim"] == 32


def test_rope_interleave_and_output_layout():
    v3 = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "qk_rope_head_dim": 64,
    }
    # absent: transformers' default (true); HF returns the half order
    assert rope_kwargs_from_config(v3)["layout"] == "interleaved"
    assert output_layout_from_config(v3) == "half"
    for off in (False, None):
        assert rope_kwargs_from_config(dict(v3, rope_interleave=off))["layout"] == "half"
        assert output_layout_from_config(dict(v3, rope_interleave=off)) == "half"
    assert output_layout_from_config({"model_type": "deepseek_v32", "head_dim": 64}) == "half"
    assert output_layout_from_config({"model_type": "gptj", "n_embd": 64, "n_head": 1}) == (
        "interleaved"
    )
    assert output_layout_from_config({"head_dim": 64}) == "half"


def test_output_layout_converts_to_hf_order():
    # HF's apply_rotary_pos_emb_interleave: de-interleave, then rotate_half
    config = {"model_type": "deepseek_v3", "qk_rope_head_dim": 8, "rope_interleave": True}
    kw = rope_kwargs_from_config(config)
    x = np.arange(2 * 8, dtype=np.float64).reshape(2, 8) + 1.0
    got = fastpe.layout.interleaved_to_half(
        fastpe.apply_rope(x, positions=[3, 9], **kw), rotary_dim=8
    )
    want = fastpe.apply_rope(
        fastpe.layout.interleaved_to_half(x, rotary_dim=8),
        positions=[3, 9],
        **dict(kw, layout="half"),
    )
    np.testing.assert_array_equal(got, want)


def test_nanochat_rotates_by_minus_theta():
    config = {"model_type": "nanochat", "hidden_size": 1280, "num_attention_heads": 10}
    kw = rope_kwargs_from_config(config)
    assert kw["inverse"] is True and kw["layout"] == "half"
    # nanochat's rotate_half is (x2, -x1): pair (x1, x2) -> (x1 cos + x2 sin, x2 cos - x1 sin)
    x = np.zeros((4, 128))
    x[:, 0] = 1.0  # e_0, the first channel of pair 0 (partner: channel 64)
    plus = fastpe.apply_rope(x, **dict(kw, inverse=False))
    minus = fastpe.apply_rope(x, **kw)
    np.testing.assert_array_equal(minus[:, 0], plus[:, 0])  # cos
    np.testing.assert_array_equal(minus[:, 64], -plus[:, 64])  # -sin
    assert np.all(plus[1:, 64] > 0)
    with pytest.raises(ValueError, match=r"rotates by -theta.*attention factor"):
        rope_kwargs_from_config(
            dict(
                config,
                rope_scaling={
                    "rope_type": "yarn",
                    "factor": 4.0,
                    "original_max_position_embeddings": 2048,
                },
            )
        )


def test_moonshine_reads_one_head_count_interleaved():
    # Moonshine tiny as published: 288 / 8 = 36 channels per head, partial 0.9 (the class
    # default) -> 32 rotated, interleaved pairs (repeat_interleave of cos and sin)
    config = {
        "model_type": "moonshine",
        "hidden_size": 288,
        "encoder_num_attention_heads": 8,
        "decoder_num_attention_heads": 8,
        "max_position_embeddings": 512,
    }
    kw = rope_kwargs_from_config(config)
    assert (kw["layout"], kw["rotary_dim"], kw["base"]) == ("interleaved", 32, 10000.0)
    assert fastpe.head_dim_from_config(config) == 36
    # a given head_dim wins, as in HF's getattr(config, "head_dim", ...)
    assert rope_kwargs_from_config(dict(config, head_dim=80))["rotary_dim"] == 72
    # the other stack's count is checked as a count, not compared loosely (8.0 == 8)
    with pytest.raises(TypeError, match=r"encoder_num_attention_heads"):
        rope_kwargs_from_config(dict(config, encoder_num_attention_heads=8.0))


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"model_type": "moonshine", "hidden_size": 288, "decoder_num_attention_heads": 8},
            r"config needs 'encoder_num_attention_heads' beside 'decoder_num_attention_heads'",
        ),
        (
            {"model_type": "cohere_compass", "hidden_size": 3584, "num_attention_heads": 28},
            r"model_type 'cohere_compass' is not supported: this family's multi-axis RoPE",
        ),
        (
            {"model_type": "hunyuan_vl", "hidden_size": 3584, "num_attention_heads": 28},
            r"has no mrope_section \(or xdrope_section\)",
        ),
        (
            {
                "model_type": "hunyuan_vl_text",
                "head_dim": 128,
                "rope_parameters": {
                    "rope_type": "default",
                    "mrope_section": [16, 16, 16, 16],
                    "xdrope_section": [16, 16, 32],
                },
            },
            r"holds mrope_section .* and xdrope_section .*, which differ",
        ),
        (
            {
                "model_type": "hunyuan_vl_text",
                "head_dim": 128,
                "rope_parameters": {"rope_type": "default", "mrope_section": [32, 32]},
            },
            r"at least 3 entries adding up to rotary_dim // 2 = 64",
        ),
        (
            {
                "model_type": "new_vl",
                "head_dim": 128,
                "rope_scaling": {"rope_type": "default", "mrope_section": [16, 24, 24]},
            },
            r"holds 'mrope_section': this family's multi-axis RoPE",
        ),
        (
            {"head_dim": 128, "rope_parameters": {"rope_type": "mrope"}},
            r"rope type 'mrope': this family's multi-axis RoPE",
        ),
        ({"model_type": "deepseek_ocr2_vision", "head_dim": 64}, r"axial RoPE of a vision encoder"),
        (
            {"head_dim": 64, "rope_parameters": {"rope_type": "axial", "rope_theta": 1e4}},
            r"rope type 'axial': 2-D/3-D axial RoPE",
        ),
        (
            {
                "model_type": "cohere_compass",
                "text_config": {"model_type": "cohere_compass_text", "head_dim": 128},
            },
            r"model_type 'cohere_compass' is not supported: this family's multi-axis",
        ),
        (
            {"model_type": "deepseek_v4", "head_dim": 512, "qk_rope_head_dim": 64},
            r"config gives 'compress' and 'main' layers their own RoPE; pass layer_type=",
        ),
        (
            {
                "model_type": "moonshine",
                "hidden_size": 288,
                "encoder_num_attention_heads": 8,
                "decoder_num_attention_heads": 6,
            },
            r"config\['encoder_num_attention_heads'\] = 8 differs from "
            r"config\['decoder_num_attention_heads'\] = 6",
        ),
        (
            {"model_type": "dia", "encoder_config": {}, "decoder_config": {}},
            r"encoder and decoder heads .* config\['encoder_config'\]",
        ),
        (
            {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "alibi": True},
            r"config\['alibi'\] is true: this model uses ALiBi, not RoPE",
        ),
        (
            {
                "model_type": "esm",
                "hidden_size": 320,
                "num_attention_heads": 20,
                "position_embedding_type": "absolute",
            },
            r"'absolute': this model has no RoPE",
        ),
        (
            {"model_type": "my_model", "head_dim": 64, "rope_local_base_freq": 1e4},
            r"model_type 'my_model': config key\(s\) 'rope_local_base_freq' change how",
        ),
        (
            {"head_dim": 64, "no_rope_layers": [1, 0]},
            r"a config without model_type: config key\(s\) 'no_rope_layers'",
        ),
    ],
)
def test_refused(config, match):
    with pytest.raises(ValueError, match=match):
        rope_kwargs_from_config(config)


def test_unknown_model_type_reads_generic_keys():
    config = {
        "model_type": "my_llama",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "rope_theta": 1e6,
        "rope_interleave": False,
    }
    assert rope_kwargs_from_config(config) == {
        "layout": "half",
        "base": 1e6,
        "rotary_dim": 128,
        "scaling": None,
        "max_position_embeddings": None,
    }


def test_null_layer_type_has_no_rope():
    config = {
        "head_dim": 64,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": None,
        },
    }
    assert rope_kwargs_from_config(config, layer_type="full_attention") is None
    assert rope_kwargs_from_config(config, layer=1) is None
    assert rope_kwargs_from_config(config, layer=0)["base"] == 1e4
    with pytest.raises(
        ValueError,
        match=r"layer_type='full_attention' but "
        r"config\['layer_types'\]\[0\] is 'sliding",
    ):
        rope_kwargs_from_config(config, layer=0, layer_type="full_attention")
    with pytest.raises(ValueError, match=r"layer=2 is past the end of config\['layer_types'\]"):
        rope_kwargs_from_config(config, layer=2)


def test_per_layer_keys():
    smol = {
        "model_type": "smollm3",
        "head_dim": 128,
        "num_hidden_layers": 4,
        "no_rope_layers": [1, 1, 1, 0],
    }
    assert rope_kwargs_from_config(smol, layer=0)["rotary_dim"] == 128
    assert rope_kwargs_from_config(smol, layer=3) is None
    with pytest.raises(ValueError, match=r"no_rope_layers'\] marks some layers .* pass layer"):
        rope_kwargs_from_config(smol)
    two = dict(smol, no_rope_layers=[1, 1], num_hidden_layers=2)
    assert rope_kwargs_from_config(two)["rotary_dim"] == 128

    granite = {
        "model_type": "granite_swa",
        "head_dim": 128,
        "rope_theta": 1e4,
        "layer_rope_theta": [1e4, 5e5, 0],
    }
    assert rope_kwargs_from_config(granite, layer=1)["base"] == 5e5
    assert rope_kwargs_from_config(granite, layer=2) is None  # 0: a NoPE layer
    with pytest.raises(ValueError, match=r"layer_rope_theta'\] differs from layer to layer"):
        rope_kwargs_from_config(granite)
    assert rope_kwargs_from_config(dict(granite, layer_rope_theta=[2e4, 2e4]))["base"] == 2e4

    molmo = {
        "model_type": "molmo2_text",
        "head_dim": 128,
        "num_hidden_layers": 3,
        "rope_scaling": {"rope_type": "linear", "factor": 2.0},
        "rope_scaling_layers": [0, 2],
    }
    assert rope_kwargs_from_config(molmo, layer=0)["scaling"]["factor"] == 2.0
    assert rope_kwargs_from_config(molmo, layer=1)["scaling"] is None
    with pytest.raises(ValueError, match=r"rope_scaling_layers'\] scales only some"):
        rope_kwargs_from_config(molmo)
    assert rope_kwargs_from_config(dict(molmo, rope_scaling_layers=[0, 1, 2]))["scaling"]

    emb = {
        "model_type": "embedding_gemma2_text",
        "head_dim": 256,
        "num_hidden_layers": 6,
        "layer_types": ["sliding_attention"] * 6,
        "rope_parameters": {
            t: {"rope_type": "default", "rope_theta": 10000.0}
            for t in ("sliding_attention", "full_attention")
        },
        "per_layer_config": {"05": {"head_dim": 512}},
    }
    assert head_dim_from_config(emb, layer=5) == 512
    assert head_dim_from_config(emb, layer=4) == 256
    assert rope_kwargs_from_config(emb, layer=5)["rotary_dim"] == 512
    with pytest.raises(ValueError, match=r"per_layer_config'\] gives some layers"):
        rope_kwargs_from_config(emb, layer_type="sliding_attention")
    # a top-level theta without rope dicts does not reach every layer type's dict
    flat = {k: v for k, v in emb.items() if k != "rope_parameters"} | {"rope_theta": 1e4}
    with pytest.raises(ValueError, match=r"a top-level theta does not reach all of them"):
        rope_kwargs_from_config(flat, layer=5)
    with pytest.raises(ValueError, match=r"layer must be >= 0"):
        rope_kwargs_from_config(emb, layer=-1)
    with pytest.raises(TypeError, match=r"layer must be an integer"):
        rope_kwargs_from_config(emb, layer=1.0)


def test_head_dim_keys_of_other_names():
    assert (
        head_dim_from_config(
            {
                "model_type": "jetmoe",
                "hidden_size": 2048,
                "num_attention_heads": 32,
                "kv_channels": 128,
            }
        )
        == 128
    )
    zamba = {
        "model_type": "zamba2",
        "hidden_size": 2560,
        "num_attention_heads": 32,
        "attention_head_dim": 160,
        "kv_channels": 80,
    }
    assert head_dim_from_config(zamba) == 160
    assert rope_kwargs_from_config(zamba) is None  # use_mem_rope false: no RoPE
    assert rope_kwargs_from_config(dict(zamba, use_mem_rope=True))["rotary_dim"] == 160
    assert head_dim_from_config({"model_type": "dbrx", "d_model": 6144, "n_heads": 48}) == 128


def test_gemma3_local_base_freq():
    config = {
        "model_type": "gemma3_text",
        "head_dim": 256,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    assert rope_kwargs_from_config(config, layer=0)["base"] == 1e4
    assert rope_kwargs_from_config(config, layer=0)["scaling"] is None
    assert rope_kwargs_from_config(config, layer=1)["base"] == 1e6
    with pytest.raises(ValueError, match=r"one rope dict per layer type .*pass layer_type"):
        rope_kwargs_from_config(config)
    with pytest.raises(ValueError, match=r"known layer types are 'full_attention', 'sliding"):
        rope_kwargs_from_config(config, layer_type="chunked_attention")
    # left out (a transformers 4 config saved without its class defaults): the class's
    # thetas, 1e6 for full-attention layers and 1e4 for sliding ones
    bare = {k: v for k, v in config.items() if k not in ("rope_theta", "rope_local_base_freq")}
    assert rope_kwargs_from_config(bare, layer=0)["base"] == 1e4
    assert rope_kwargs_from_config(bare, layer=0)["scaling"] is None
    kw = rope_kwargs_from_config(bare, layer=1)
    assert kw["base"] == 1e6 and kw["scaling"]["factor"] == 8.0


def test_proportional():
    # Gemma 4 global layers: the first int(p * d // 2) pairs turn with base ** (-2i / d)
    inv, factor = rope_frequencies(
        16,
        base=1e6,
        scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": 2.0},
    )
    assert factor == 1.0
    plain = rope_frequencies(16, base=1e6)[0]
    np.testing.assert_array_equal(inv[:2], plain[:2] / 2.0)
    np.testing.assert_array_equal(inv[2:], 0.0)
    config = {
        "model_type": "gemma4_text",
        "head_dim": 512,
        "num_hidden_layers": 1,
        "layer_types": ["full_attention"],
        "rope_parameters": {
            "full_attention": {
                "rope_type": "proportional",
                "rope_theta": 1e6,
                "partial_rotary_factor": 0.25,
            }
        },
    }
    kw = rope_kwargs_from_config(config, layer=0)
    assert kw["rotary_dim"] == 512
    assert kw["scaling"] == {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    x = np.ones((3, 512))
    y = fastpe.apply_rope(x, positions=[0, 5, 9], **kw)
    np.testing.assert_array_equal(y[:, 64:256], 1.0)  # pairs with frequency 0 are untouched
    np.testing.assert_array_equal(y[:, 320:], 1.0)


def test_su_is_longrope_and_rope_type_wins():
    long = {
        "rope_type": "longrope",
        "short_factor": [1.0, 2.0],
        "long_factor": [3.0, 4.0],
        "original_max_position_embeddings": 64,
    }
    su = dict(long, rope_type=None, type="su")
    for seq_len in (10, 100):
        a = rope_frequencies(4, scaling=long, seq_len=seq_len, max_position_embeddings=256)
        b = rope_frequencies(4, scaling=su, seq_len=seq_len, max_position_embeddings=256)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1]
    both = {"rope_type": "linear", "type": "yarn", "factor": 2.0}
    np.testing.assert_array_equal(
        rope_frequencies(8, scaling=both)[0], rope_frequencies(8)[0] / 2.0
    )


def test_phi3_reads_yarn_as_longrope():
    # transformers' Phi3Config renames "yarn" (and "su") to "longrope"
    config = {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "yarn", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48},
    }
    assert rope_kwargs_from_config(config)["scaling"]["rope_type"] == "longrope"
    with pytest.raises(ValueError, match=r"rope_type 'longrope' requires scaling\['short_"):
        rope_kwargs_from_config(dict(config, rope_scaling={"type": "yarn", "factor": 4.0}))
    # other families keep yarn
    llama = dict(config, model_type="llama", rope_scaling={"type": "yarn", "factor": 4.0})
    assert rope_kwargs_from_config(llama)["scaling"]["rope_type"] == "yarn"


def test_dbrx_theta_in_attn_config():
    dbrx = {
        "model_type": "dbrx",
        "d_model": 6144,
        "n_heads": 48,
        "max_seq_len": 32768,
        "attn_config": {"kv_n_heads": 8, "rope_theta": 500000},
    }
    with pytest.raises(
        ValueError,
        match=r"attn_config'\]\['rope_theta'\] is 500000 but the "
        r"rope theta read is 10000.0",
    ):
        rope_kwargs_from_config(dbrx)
    kw = rope_kwargs_from_config(dict(dbrx, rope_theta=500000.0))
    assert (kw["base"], kw["max_position_embeddings"], kw["rotary_dim"]) == (500000.0, 32768, 128)


def test_class_defaults_fill_left_out_keys():
    # configs saved by transformers 4 leave out values equal to the class default
    glm4 = {"model_type": "glm4", "hidden_size": 4096, "num_attention_heads": 32}
    kw = rope_kwargs_from_config(glm4)  # GlmConfig: head_dim 128, partial_rotary_factor 0.5
    assert (kw["rotary_dim"], kw["layout"]) == (64, "interleaved")
    assert head_dim_from_config(glm4) == 128
    assert rope_kwargs_from_config(dict(glm4, head_dim=None))["rotary_dim"] == 64  # 4096 // 32
    cohere = {"model_type": "cohere", "hidden_size": 8192, "num_attention_heads": 64}
    assert rope_kwargs_from_config(cohere)["base"] == 500000.0
    assert rope_kwargs_from_config(dict(cohere, rope_theta=8e6))["base"] == 8e6
    oss = {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "max_position_embeddings": 131072,
    }
    kw = rope_kwargs_from_config(oss)
    assert (kw["base"], kw["rotary_dim"], kw["scaling"]["rope_type"]) == (150000.0, 64, "yarn")
    with pytest.raises(ValueError, match=r"gives each layer type its own .*write them out"):
        rope_kwargs_from_config({"model_type": "lfm3", "hidden_size": 1024})
    # Gemma 3's config class builds its per-layer-type dicts from flat keys and its thetas
    gemma = {"model_type": "gemma3_text", "head_dim": 256}
    assert rope_kwargs_from_config(gemma, layer_type="full_attention")["base"] == 1e6
    assert rope_kwargs_from_config(gemma, layer_type="sliding_attention")["base"] == 1e4


# --------------------------------------------------------------------------- M-RoPE


_QWEN3_VL = {
    "model_type": "qwen3_vl_text",
    "head_dim": 128,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5000000.0,
        "mrope_section": [24, 20, 20],
        "mrope_interleaved": True,
    },
}


def test_mrope_interleaved_pairs_cycle_t_h_w():
    kw = fastpe.rope_kwargs_from_config(_QWEN3_VL)
    axes = np.array(kw["pair_axes"])
    assert axes.shape == (64,)
    np.testing.assert_array_equal(axes[:6], [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(axes[60:], [0, 0, 0, 0])
    assert (axes == 1).sum() == 20 and (axes == 2).sum() == 20
    x = np.ones((2, 5, 2, 128), dtype=np.float32)
    pos = np.arange(15).reshape(3, 5)
    fastpe.apply_rope(x, positions=pos, out=x, **kw)  # splats into apply_rope


@pytest.mark.parametrize(
    ("change", "exc", "match"),
    [
        ({"mrope_interleaved": False}, ValueError, r"\['mrope_interleaved'\] is False"),
        ({"mrope_section": [24, 24, 24]}, ValueError, r"does not fit 64 pairs"),
        ({"mrope_section": "24,20,20"}, TypeError, r"list of pair counts"),
        ({"mrope_section": [24, 20.0, 20]}, TypeError, r"list of pair counts"),
    ],
)
def test_mrope_keys_checked(change, exc, match):
    config = dict(_QWEN3_VL, rope_parameters=dict(_QWEN3_VL["rope_parameters"], **change))
    with pytest.raises(exc, match=match):
        fastpe.rope_kwargs_from_config(config)


def test_mrope_split_sections_must_cover_the_pairs():
    config = {
        "model_type": "qwen2_vl",
        "head_dim": 128,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]},
    }
    with pytest.raises(ValueError, match=r"covers 56 pairs, but the rotary dim has 64"):
        fastpe.rope_kwargs_from_config(config)


# --------------------------------------------------------------------------- vision towers

_QWEN2_VL_FULL = {
    "model_type": "qwen2_vl",
    "text_config": {"model_type": "qwen2_vl_text", "hidden_size": 3584, "num_attention_heads": 28},
    "vision_config": {
        "model_type": "qwen2_vl_vision",
        "embed_dim": 1280,
        "num_heads": 16,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0},
    },
}


def test_vision_tower_axial_kwargs():
    kw = fastpe.rope_kwargs_from_config(_QWEN2_VL_FULL, tower="vision")
    assert kw["layout"] == "half" and kw["rotary_dim"] == 80
    assert kw["pair_axes"] == (0,) * 20 + (1,) * 20
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(200):
        exact = [mpmath.power(10000, mpmath.mpf(-2 * j) / 40) for j in range(20)] * 2
        err = [float(abs(mpmath.mpf(v) - e) / np.spacing(v)) for v, e in zip(kw["inv_freq"], exact)]
    assert max(err) <= 0.5  # each frequency correctly rounded to float64
    # the vision config alone reads the same; the text tower is M-RoPE
    assert fastpe.rope_kwargs_from_config(_QWEN2_VL_FULL["vision_config"]) == kw
    assert "pair_axes" in fastpe.rope_kwargs_from_config(_QWEN2_VL_FULL)
    x = np.ones((24, 16, 80), dtype=np.float32)  # (patches, heads, head_dim)
    pos = fastpe.patch_positions([1, 4, 6], merge=2)
    got = fastpe.apply_rope(x, positions=pos, seq_axis=0, **kw)
    want = fastpe.reference.apply_rope(x, positions=pos, seq_axis=0, **kw)
    assert_rope_close(got, want, x, "half", 80)


def test_gemma4_vision_tower_one_block_per_axis():
    """Gemma 4's vision tower (values of the published configs: head_dim 64, theta 100)
    rotates the row's block, then the column's, each half-split within itself."""
    config = {
        "model_type": "gemma4",
        "text_config": {"model_type": "gemma4_text", "head_dim": 256},
        "vision_config": {
            "model_type": "gemma4_vision",
            "hidden_size": 768,
            "num_attention_heads": 12,
            "head_dim": 64,
            "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0},
        },
    }
    kw = fastpe.rope_kwargs_from_config(config, tower="vision")
    assert kw["layout"] == "half:2" and kw["rotary_dim"] == 64
    assert kw["pair_axes"] == (0,) * 16 + (1,) * 16
    f = [100.0 ** (-2 * j / 32) for j in range(16)]
    np.testing.assert_allclose(kw["inv_freq"], f * 2, rtol=2**-52)
    x = np.random.default_rng(3).standard_normal((12, 12, 64)).astype(np.float32)
    pos = fastpe.patch_positions([1, 3, 4])
    got = fastpe.apply_rope(x, positions=pos, seq_axis=0, **kw)
    # the same as rotate_half on each half of a head, by the row, then by the column
    want = x.copy()
    for a in range(2):
        part = want[..., 32 * a : 32 * (a + 1)]
        fastpe.apply_rope(part, positions=pos[a], seq_axis=0, layout="half", inv_freq=f, out=part)
    np.testing.assert_array_equal(got, want)


_WIDTH_768 = {"hidden_size": 768, "num_attention_heads": 12}


@pytest.mark.parametrize(
    ("model_type", "sizes", "theta", "head_dim"),
    [
        ("gemma4_vision", _WIDTH_768, 100.0, 64),
        ("lfm3_vl_vision", _WIDTH_768, 1e6, 64),
        # Qwen2-VL's tower is embed_dim wide (1280 by default); its hidden_size is the
        # language model's, never its own width
        ("qwen2_vl_vision", {"hidden_size": 3584, "num_heads": 16}, 1e4, 80),
    ],
)
def test_vision_tower_keys_left_out_take_the_class_defaults(model_type, sizes, theta, head_dim):
    """A tower config without rope keys (or head_dim, or embed_dim) is read with its config
    class's defaults, as transformers builds it, not with fastpe's generic 10000."""
    kw = fastpe.rope_kwargs_from_config({"model_type": model_type, **sizes})
    assert kw["rotary_dim"] == head_dim
    assert kw["inv_freq"][1] == pytest.approx(theta ** (-2 / (head_dim // 2)), rel=1e-15)


@pytest.mark.parametrize(
    ("config", "tower", "exc", "match"),
    [
        (_QWEN2_VL_FULL, "audio", ValueError, r"tower must be 'text' or 'vision'"),
        ({"model_type": "llama", "head_dim": 64}, "vision", ValueError, r"vision_config"),
        (
            dict(
                _QWEN2_VL_FULL,
                vision_config={"model_type": "deepseek_ocr2_vision", "head_dim": 64},
            ),
            "vision",
            ValueError,
            r"model_type 'deepseek_ocr2_vision' is not read",
        ),
        (
            dict(
                _QWEN2_VL_FULL,
                vision_config=dict(
                    _QWEN2_VL_FULL["vision_config"],
                    rope_parameters={"rope_type": "axial", "factor": 2.0},
                ),
            ),
            "vision",
            ValueError,
            r"'factor' of a vision tower are not understood",
        ),
        (
            dict(
                _QWEN2_VL_FULL,
                vision_config=dict(_QWEN2_VL_FULL["vision_config"], num_heads=12),
            ),
            "vision",
            ValueError,
            r"divisible by 4",
        ),
    ],
)
def test_vision_tower_refusals(config, tower, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.rope_kwargs_from_config(config, tower=tower)


def test_patch_positions_order():
    np.testing.assert_array_equal(
        fastpe.patch_positions([1, 2, 4], merge=2),
        [[0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 2, 3, 2, 3]],
    )
    two = fastpe.patch_positions([[2, 1, 2], [1, 1, 1]], temporal=True)
    np.testing.assert_array_equal(two, [[0, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 0, 1, 0]])
    with pytest.raises(ValueError, match="multiple of merge=2"):
        fastpe.patch_positions([1, 3, 4], merge=2)
    with pytest.raises(TypeError, match="integers"):
        fastpe.patch_positions([1.0, 2.0, 2.0])


def test_patch_positions_match_transformers():
    torch = pytest.importorskip("torch", reason="the hf extra is not installed")
    vu = pytest.importorskip("transformers.vision_utils", reason="the hf extra is not installed")
    grid = torch.tensor([[1, 4, 6], [2, 2, 4]])
    for temporal in (False, True):
        want = vu.get_vision_position_ids(grid, 2, include_temporal=temporal).T.numpy()
        got = fastpe.patch_positions(grid.numpy(), merge=2, temporal=temporal)
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ DeepSeek-V4

V4_FLAT = {  # the flat keys a published config carries (the config class nests them)
    "model_type": "deepseek_v4",
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "max_position_embeddings": 1048576,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536},
    "num_hidden_layers": 3,
    "layer_types": [
        "heavily_compressed_attention",
        "sliding_attention",
        "compressed_sparse_attention",
    ],
}


def test_deepseek_v4_labels_and_layers():
    main = rope_kwargs_from_config(V4_FLAT, layer_type="main")
    assert main == rope_kwargs_from_config(V4_FLAT, layer=1)
    assert main == rope_kwargs_from_config(V4_FLAT, layer_type="sliding_attention")
    assert main["layout"] == "interleaved" and main["rotary_dim"] == 64
    assert main["base"] == 10000.0 and main["scaling"] is None
    comp = rope_kwargs_from_config(V4_FLAT, layer=0)
    assert comp == rope_kwargs_from_config(V4_FLAT, layer=2)
    assert comp == rope_kwargs_from_config(V4_FLAT, layer_type="compress")
    assert comp["base"] == 160000.0
    # YaRN on the compressed layers only, with attention factor 1 (the config class's)
    assert comp["scaling"]["rope_type"] == "yarn" and comp["scaling"]["attention_factor"] == 1.0
    assert head_dim_from_config(V4_FLAT) == 64  # the trailing rope slice of each head
    nested = {
        **{k: v for k, v in V4_FLAT.items() if k not in ("rope_scaling", "compress_rope_theta")},
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
            "compress": {
                "rope_type": "yarn",
                "factor": 16,
                "original_max_position_embeddings": 65536,
                "attention_factor": 1.0,
                "rope_theta": 160000.0,
                "partial_rotary_factor": 0.125,
            },
        },
    }
    assert rope_kwargs_from_config(nested, layer=1) == main
    assert rope_kwargs_from_config(nested, layer=0) == comp


@pytest.mark.parametrize(
    "config, kwargs, match",
    [
        (V4_FLAT, {"layer_type": "main", "layer": 0}, r"rope 'main'.*is 'heavily_compressed"),
        (V4_FLAT, {"layer_type": "full_attention"}, r"neither a rope label"),
        (V4_FLAT, {}, r"their own RoPE; pass layer_type="),
        ({**V4_FLAT, "qk_rope_head_dim": None}, {"layer": 0}, r"partial_rotary_factor"),
        ({**V4_FLAT, "qk_rope_head_dim": 63}, {"layer": 0}, r"positive even number"),
        (
            {
                **V4_FLAT,
                "rope_scaling": None,
                "rope_parameters": {"main": {"rope_theta": 1.0}, "other": {}},
            },
            {"layer": 0},
            r"one dict per label",
        ),
        (
            {
                **V4_FLAT,
                "rope_scaling": None,
                "rope_parameters": {
                    "main": {"rope_type": "default", "rope_theta": 5.0},
                    "compress": {"rope_type": "default", "rope_theta": 160000.0},
                },
            },
            {"layer": 1},
            r"config\['rope_theta'\] \(10000.0\) and config\['rope_parameters'\]\['main'\]",
        ),
    ],
)
def test_deepseek_v4_refusals(config, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rope_kwargs_from_config(config, **kwargs)


def test_minimax_m3_vl_text_rotary_dim_must_agree_with_the_code():
    """The config's rotary_dim is read only where head_dim * partial_rotary_factor (what the
    rotary class rotates) gives the same count; else both are named."""
    base = {
        "model_type": "minimax_m3_vl_text",
        "head_dim": 128,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e6},
    }
    with pytest.raises(ValueError, match=r"config\['rotary_dim'\] says 64 .* = 128"):
        fastpe.rope_kwargs_from_config({**base, "rotary_dim": 64})
    agree = {
        **base,
        "rotary_dim": 64,
        "rope_parameters": {**base["rope_parameters"], "partial_rotary_factor": 0.5},
    }
    assert fastpe.rope_kwargs_from_config(agree)["rotary_dim"] == 64
    assert fastpe.rope_kwargs_from_config({**base, "rotary_dim": 128})["rotary_dim"] == 128
    assert fastpe.rope_kwargs_from_config(base)["rotary_dim"] == 128


@pytest.mark.parametrize(
    ("model_type", "layout", "base"),
    [
        ("blt_local_encoder", "interleaved", 5e5),  # BLT rotates interleaved pairs
        ("blt_global_transformer", "interleaved", 5e5),
        ("qwen2_vl_text", "half", 1e6),
        ("voxtral_realtime_text", "half", 1e6),
    ],
)
def test_sub_configs_read_with_their_family_and_class_defaults(model_type, layout, base):
    """A sub-config read on its own (a module of BLT, the text model of a VL config) takes
    its family's layout and its config class's defaults for the keys it leaves out."""
    kw = fastpe.rope_kwargs_from_config(
        {"model_type": model_type, "hidden_size": 2048, "num_attention_heads": 16}
    )
    assert kw["layout"] == layout and kw["base"] == base


def test_config_gpt_neox_reads_as_its_config_class():
    """GPTNeoXConfig takes rotary_emb_base and rotary_pct (a top-level rope_theta or
    partial_rotary_factor is ignored by transformers 5.24: refused), and a rope dict's
    rope_theta / partial_rotary_factor, which transformers prefers (read; refused where the
    family's own top-level keys say otherwise)."""
    base = dict(model_type="gpt_neox", hidden_size=256, num_attention_heads=4)
    for extra in ({"rope_theta": 5e5}, {"partial_rotary_factor": 0.5}):
        with pytest.raises(ValueError, match="does not read a top-level"):
            rope_kwargs_from_config(dict(base, rotary_pct=0.25, **extra))
    # late transformers 4 saved both, equal: read
    late = dict(base, rotary_emb_base=10000, rotary_pct=0.25, rope_theta=10000)
    kw = rope_kwargs_from_config(dict(late, partial_rotary_factor=0.25))
    assert (kw["base"], kw["rotary_dim"]) == (10000.0, 16)
    # transformers reads no rotary_emb_base inside a rope dict
    kw = rope_kwargs_from_config(dict(base, rope_parameters={"rotary_emb_base": 5e5}))
    assert kw["base"] == 10000.0
    rope = {"rope_type": "default", "rope_theta": 5e5, "partial_rotary_factor": 0.5}
    kw = rope_kwargs_from_config(dict(base, rope_parameters=rope))
    assert (kw["base"], kw["rotary_dim"]) == (5e5, 32)
    with pytest.raises(ValueError, match=r"'rotary_emb_base'\] \(10000\) and the rope dict's"):
        rope_kwargs_from_config(dict(base, rotary_emb_base=10000, rope_parameters=rope))


def test_config_per_layer_yarn_truncate_refused():
    """transformers 5.24 reads a YaRN dict's truncate from the outer rope_parameters, so a
    per-layer-type dict's own truncate is not applied (it truncates): refused."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    config = {
        "model_type": "gemma3_text",
        "hidden_size": 256,
        "num_attention_heads": 4,
        "head_dim": 64,
        "num_hidden_layers": 2,
        "layer_types": ["full_attention", "sliding_attention"],
        "rope_parameters": {
            "full_attention": dict(yarn, rope_theta=1e6, truncate=False),
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    with pytest.raises(ValueError, match="does not apply to a rope dict per layer type"):
        rope_kwargs_from_config(config, layer_type="full_attention")
    config["rope_parameters"]["full_attention"] = dict(yarn, rope_theta=1e6, truncate=True)
    kw = rope_kwargs_from_config(config, layer_type="full_attention")
    assert kw["scaling"]["truncate"] is True


# --- configs read as their config class completes them (the variants of
# tests/test_hf_oracle.py::test_rotary_class_config_variants, checked here without
# transformers) ---


def test_config_glm_image_rotates_half_pairs():
    """GLM-Image's text model concatenates cos/sin twice and uses rotate_half: the half
    layout (it was read as GLM-4V's interleaved pairs)."""
    config = dict(
        model_type="glm_image_text",
        hidden_size=512,
        num_attention_heads=4,
        partial_rotary_factor=0.5,
        rope_parameters={"rope_type": "default", "mrope_section": [8, 12, 12]},
    )
    kw = rope_kwargs_from_config(config)
    assert kw["layout"] == "half" and kw["rotary_dim"] == 64


def test_config_gptj_rotary_dim_absent_is_the_class_default():
    config = dict(model_type="gptj", n_embd=4096, n_head=16)
    assert rope_kwargs_from_config(config)["rotary_dim"] == 64
    assert rope_kwargs_from_config(dict(config, rotary_dim=None))["rotary_dim"] == 256
    with pytest.raises(ValueError, match="hard-codes base 10000"):
        rope_kwargs_from_config(dict(config, rope_parameters={"partial_rotary_factor": 0.5}))


def test_config_legacy_type_against_rope_type_refused():
    config = dict(
        LLAMA_31_8B,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0},
        rope_scaling={"type": "linear", "factor": 2.0},
    )
    with pytest.raises(ValueError, match="rope type 'dynamic' and config\\['rope_scaling'\\]"):
        rope_kwargs_from_config(config)


@pytest.mark.parametrize(
    ("model_type", "key", "value"),
    [
        ("mellum", "partial_rotary_factor", 0.5),
        ("mellum", "rope_scaling", {"type": "linear", "factor": 2.0}),
        ("cohere2_moe", "rope_scaling", {"type": "linear", "factor": 2.0}),
    ],
)
def test_config_keys_the_config_class_drops_refused(model_type, key, value):
    config = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4, key: value}
    with pytest.raises(ValueError, match=f"drops the top-level '{key}'"):
        rope_kwargs_from_config(config)


def test_config_mellum_top_level_theta_reaches_no_dict():
    """Mellum's config class reads its rope dicts alone: a top-level rope_theta fills none
    of them (refused where a dict lacks its theta, or where there is no dict)."""
    mellum = {"model_type": "mellum", "hidden_size": 512, "num_attention_heads": 4}
    with pytest.raises(ValueError, match="gives each layer type its own"):
        rope_kwargs_from_config(dict(mellum, rope_theta=12345.0))
    dicts = {t: {"rope_type": "default"} for t in ("full_attention", "sliding_attention")}
    with pytest.raises(ValueError, match="leaves out 'rope_theta'"):
        rope_kwargs_from_config(
            dict(mellum, rope_theta=12345.0, rope_parameters=dicts), layer_type="full_attention"
        )


def test_config_given_dict_is_completed_as_its_class_completes_it():
    """A class's default rope dict applies only where the config gives none."""
    # Higgs-Audio-v2's default is a llama3 dict with theta 500000; a given dict gets 10000
    higgs = {"model_type": "higgs_audio_v2", "hidden_size": 512, "num_attention_heads": 4}
    assert rope_kwargs_from_config(higgs)["base"] == 500000.0
    kw = rope_kwargs_from_config(dict(higgs, rope_scaling={"type": "linear", "factor": 2.0}))
    assert kw["base"] == 10000.0 and kw["scaling"]["rope_type"] == "linear"
    # Gemma 3: full-attention layers default to 1e6; beside a top-level rope_theta the
    # sliding layers keep 10000 and the full ones take it
    gemma = {
        "model_type": "gemma3_text",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "head_dim": 128,
        "rope_parameters": {
            "full_attention": {"rope_type": "default"},
            "sliding_attention": {"rope_type": "default"},
        },
    }
    assert rope_kwargs_from_config(gemma, layer_type="full_attention")["base"] == 1e6
    assert rope_kwargs_from_config(gemma, layer_type="sliding_attention")["base"] == 10000.0
    top = dict(gemma, rope_theta=12345.0)
    assert rope_kwargs_from_config(top, layer_type="full_attention")["base"] == 12345.0
    assert rope_kwargs_from_config(top, layer_type="sliding_attention")["base"] == 10000.0
    # MiMo-V2-Flash's config class states no theta for a given dict (its code then fails)
    mimo = {
        "model_type": "mimo_v2_flash",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_parameters": {
            "full_attention": {"rope_type": "default"},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        },
    }
    with pytest.raises(ValueError, match="leaves out 'partial_rotary_factor', 'rope_theta'"):
        rope_kwargs_from_config(mimo, layer_type="full_attention")


def test_config_partial_factor_per_layer_type_refused_where_ignored():
    """Gemma 3's default rotary code (both layer types) turns the whole head whatever the
    factor; Gemma 4's sliding layers too, its full ones (proportional) read it."""
    gemma = {
        "model_type": "gemma3_text",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "partial_rotary_factor": 0.5,
            },
        },
    }
    with pytest.raises(ValueError, match="'sliding_attention' layers rotates the whole head"):
        rope_kwargs_from_config(gemma, layer_type="sliding_attention")
    # the other layer type's dict states no factor: read (the whole head, as transformers)
    assert rope_kwargs_from_config(gemma, layer_type="full_attention")["rotary_dim"] == 256
    # a factor at the top level reaches every layer type's dict
    top = dict(gemma, partial_rotary_factor=0.5)
    top["rope_parameters"]["sliding_attention"].pop("partial_rotary_factor")
    with pytest.raises(ValueError, match="'full_attention' layers rotates the whole head"):
        rope_kwargs_from_config(top, layer_type="full_attention")


def test_config_deepseek_v4_labelled_dicts_as_transformers_completes_them():
    config = {
        "model_type": "deepseek_v4",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "head_dim": 128,
        "partial_rotary_factor": 0.5,
        "rope_theta": 12345.0,
        "rope_parameters": {
            "main": {"rope_type": "default"},
            "compress": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 1024,
                "truncate": None,
            },
        },
    }
    assert rope_kwargs_from_config(config, layer_type="main")["base"] == 12345.0
    kw = rope_kwargs_from_config(config, layer_type="compress")
    assert kw["base"] == 12345.0 and kw["scaling"]["truncate"] is True
    config["rope_parameters"]["compress"]["truncate"] = False
    with pytest.raises(ValueError, match="truncate=False"):
        rope_kwargs_from_config(config, layer_type="compress")


def test_config_rope_parameters_theta_equal_to_the_top_level_read():
    """Beside rope_scaling, a rope_parameters theta equal to the top-level rope_theta is
    what transformers reads (late configs save it both ways): read, not refused; a
    different one is refused."""
    config = dict(
        LLAMA_31_8B,
        rope_parameters={**LLAMA_31_8B["rope_scaling"], "rope_theta": LLAMA_31_8B["rope_theta"]},
    )
    assert rope_kwargs_from_config(config) == rope_kwargs_from_config(LLAMA_31_8B)
    config["rope_parameters"]["rope_theta"] = 10000.0
    with pytest.raises(ValueError, match="holds 'rope_theta', which config\\['rope_scaling'\\]"):
        rope_kwargs_from_config(config)


def test_config_split_by_type_families_as_their_config_classes_build_them():
    """OLMo 3 as published: a flat YaRN rope_scaling goes to full-attention layers alone;
    what those config classes ignore is refused."""
    olmo = {
        "model_type": "olmo3",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
        },
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    assert rope_kwargs_from_config(olmo, layer=0)["scaling"] is None
    assert rope_kwargs_from_config(olmo, layer=1)["scaling"]["rope_type"] == "yarn"
    with pytest.raises(ValueError, match="one rope dict per layer type"):
        rope_kwargs_from_config(olmo)
    legacy = dict(olmo, rope_scaling={"type": "linear", "factor": 8.0})
    with pytest.raises(ValueError, match="legacy 'type'"):
        rope_kwargs_from_config(legacy, layer=1)
    flat = {k: v for k, v in olmo.items() if k != "rope_scaling"}
    flat["rope_parameters"] = {"rope_type": "linear", "factor": 8.0, "rope_theta": 5e5}
    with pytest.raises(ValueError, match="one flat dict, which this family's config class"):
        rope_kwargs_from_config(flat, layer=1)


def test_config_top_level_keys_the_class_default_dict_wins_over_refused():
    """Without a rope dict, Apertus's config class keeps its default dict (llama3, theta
    1.2e7) and ignores a top-level rope_theta: refused where it differs."""
    apertus = {"model_type": "apertus", "hidden_size": 4096, "num_attention_heads": 32}
    assert rope_kwargs_from_config(apertus)["base"] == 12_000_000.0
    assert rope_kwargs_from_config(dict(apertus, rope_theta=12_000_000.0))["base"] == 1.2e7
    with pytest.raises(ValueError, match=r"ignores config\['rope_theta'\] = 500000\.0"):
        rope_kwargs_from_config(dict(apertus, rope_theta=500000.0))


def test_config_scaled_dicts_per_layer_type_take_the_top_level_theta():
    """A scaled type's frequency function completes its dict from the config's rope_theta,
    where the default type's leaves it out (and then fails: refused)."""
    zaya = {
        "model_type": "zaya",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_theta": 33333.0,
        "rope_parameters": {
            t: {"rope_type": "linear", "factor": 4.0} for t in ("hybrid", "hybrid_sliding")
        },
    }
    kw = rope_kwargs_from_config(zaya, layer_type="hybrid")
    assert kw["base"] == 33333.0 and kw["scaling"]["factor"] == 4.0
    for part in zaya["rope_parameters"].values():
        part.update(rope_type="default")
        del part["factor"]
    with pytest.raises(ValueError, match="leaves out 'rope_theta'"):
        rope_kwargs_from_config(zaya, layer_type="hybrid")


GEMMA3_PUBLISHED = {  # google/gemma-3-4b-it's text_config: no layer_types
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "rope_theta": 1e6,
    "rope_local_base_freq": 1e4,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
}


def test_config_layer_types_derived_as_gemma3_derives_them():
    """Gemma 3 as published holds no layer_types: its config class derives them, every
    sliding_window_pattern-th layer full (6 where left out), over num_hidden_layers layers
    (26 where left out); fastpe derives layer i's type the same way."""
    gemma = GEMMA3_PUBLISHED
    local = rope_kwargs_from_config(gemma, layer=0)
    assert local["base"] == 1e4 and local["scaling"] is None
    glob = rope_kwargs_from_config(gemma, layer=5)
    assert glob["base"] == 1e6 and glob["scaling"] == {"rope_type": "linear", "factor": 8.0}
    assert glob == rope_kwargs_from_config(gemma, layer_type="full_attention")
    assert local == rope_kwargs_from_config(gemma, layer_type="sliding_attention")
    full = [i for i in range(26) if rope_kwargs_from_config(gemma, layer=i)["base"] == 1e6]
    assert full == [5, 11, 17, 23]
    assert rope_kwargs_from_config({"model_type": "gemma3", "text_config": gemma}, layer=5) == glob
    assert rope_kwargs_from_config(gemma, layer=5, layer_type="full_attention") == glob
    with pytest.raises(ValueError, match=r"layer 0's type, as its config class derives"):
        rope_kwargs_from_config(gemma, layer=0, layer_type="full_attention")
    # the class's defaults where the keys are left out
    bare = {k: v for k, v in gemma.items() if k != "sliding_window_pattern"}
    assert rope_kwargs_from_config(bare, layer=11) == glob
    three = dict(gemma, sliding_window_pattern=3, num_hidden_layers=34)
    assert rope_kwargs_from_config(three, layer=2) == glob
    assert rope_kwargs_from_config(three, layer=3) == local
    assert rope_kwargs_from_config(three, layer=32) == glob
    # a key other classes read is ignored, as the class ignores it
    assert rope_kwargs_from_config(dict(bare, _sliding_window_pattern=2), layer=1) == local
    # and the given layer_types win over the pattern
    given = dict(gemma, num_hidden_layers=2, layer_types=["full_attention", "sliding_attention"])
    assert rope_kwargs_from_config(given, layer=0) == glob


def test_config_layer_out_of_range_of_num_hidden_layers():
    gemma = GEMMA3_PUBLISHED
    with pytest.raises(ValueError, match=r"layer=26 is out of range: the config leaves out "):
        rope_kwargs_from_config(gemma, layer=26)
    rope_kwargs_from_config(dict(gemma, num_hidden_layers=34), layer=33)
    with pytest.raises(
        ValueError, match=r"layer=34 is out of range: config\['num_hidden_layers'\] is 34"
    ):
        rope_kwargs_from_config(dict(gemma, num_hidden_layers=34), layer=34)
    with pytest.raises(ValueError, match=r"layer=0 is out of range: .* is 0"):
        rope_kwargs_from_config(dict(gemma, num_hidden_layers=0), layer=0)
    with pytest.raises(ValueError, match=r"config\['num_hidden_layers'\] is null"):
        rope_kwargs_from_config(dict(gemma, num_hidden_layers=None), layer=0)
    with pytest.raises(TypeError, match=r"config\['num_hidden_layers'\] must be an integer"):
        rope_kwargs_from_config(dict(gemma, num_hidden_layers=34.0), layer=0)


@pytest.mark.parametrize(
    "value, exc, match",
    [
        (None, ValueError, r"config\['sliding_window_pattern'\] is null"),
        (0, ValueError, r"config\['sliding_window_pattern'\] must be non-zero"),
        (6.0, TypeError, r"config\['sliding_window_pattern'\] must be an integer"),
    ],
)
def test_config_layer_types_pattern_refused(value, exc, match):
    """A null or zero pattern, on which Gemma 3's config class fails; a float, by its type
    (fastpe's rule for counts, though the class would take 6.0 as 6)."""
    with pytest.raises(exc, match=match):
        rope_kwargs_from_config(dict(GEMMA3_PUBLISHED, sliding_window_pattern=value), layer=0)


def _per_type(**thetas):
    """One rope dict per layer type, with the theta given for each."""
    return {
        t: {"rope_type": "default", "rope_theta": v, "partial_rotary_factor": 1.0}
        for t, v in thetas.items()
    }


def test_config_layer_types_derived_per_family():
    """Each family's rule (fastpe._hf_families._LAYER_TYPES), on a few layers."""
    two = _per_type(full_attention=1e6, sliding_attention=1e4)

    def base(config, layer):
        kw = rope_kwargs_from_config(
            {"head_dim": 64, "rope_parameters": two, **config}, layer=layer
        )
        return None if kw is None else {1e6: "full", 1e4: "sliding"}[kw["base"]]

    # ModernBERT: full at 0, n, 2n, ... (n = global_attn_every_n_layers, 3 where left out)
    bert = {"model_type": "modernbert"}
    assert [base(bert, i) for i in range(4)] == ["full", "sliding", "sliding", "full"]
    bert2 = dict(bert, global_attn_every_n_layers=2)
    assert [base(bert2, i) for i in range(3)] == ["full", "sliding", "full"]
    with pytest.raises(ValueError, match=r"layer=22 is out of range.*class default is 22"):
        base(bert, 22)
    # OLMo 3: every fourth layer full
    assert [base({"model_type": "olmo3"}, i) for i in (2, 3, 7)] == ["sliding", "full", "full"]
    # MiMo-V2-Flash: the first layer and every sixth full
    mimo = {"model_type": "mimo_v2_flash"}
    assert [base(mimo, i) for i in (0, 1, 5, 6)] == ["full", "sliding", "full", "sliding"]
    # NeoMME: every sixth layer and the last full
    neo = {"model_type": "neomme", "num_hidden_layers": 8}
    assert [base(neo, i) for i in (5, 6, 7)] == ["full", "sliding", "full"]
    # Gemma 4: every sixth and the last, also over a given list (per_layer_config given)
    gemma4 = {"model_type": "gemma4_text", "num_hidden_layers": 8, "per_layer_config": {}}
    assert [base(gemma4, i) for i in (5, 6, 7)] == ["full", "sliding", "full"]
    given = dict(gemma4, num_hidden_layers=3, layer_types=["sliding_attention"] * 3)
    assert [base(given, i) for i in range(3)] == ["sliding", "sliding", "full"]
    # an error names the type the class holds, not the given entry it rewrote
    with pytest.raises(ValueError, match=r"layer 2's type, as its config class rewrites"):
        rope_kwargs_from_config(
            {"head_dim": 64, "rope_parameters": two, **given},
            layer=2,
            layer_type="sliding_attention",
        )
    # Dory's released configs list an mlp block after each attention block
    dory = {
        "model_type": "dory",
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention", "mlp", "full_attention", "mlp"],
    }
    assert [base(dory, i) for i in range(2)] == ["sliding", "full"]
    # a layer past the last: the message counts the class's layers, not the given entries
    with pytest.raises(
        ValueError,
        match=r"layer=2 is out of range: the config class of model_type 'dory' holds 2 "
        r"layers \(layers 0 to 1\): it pairs the 4 entries of config\['layer_types'\] .* "
        r"into one layer each, and halves config\['num_hidden_layers'\] \(4\) likewise$",
    ):
        base(dict(dory, num_hidden_layers=4), 2)
    # one type throughout
    zaya = {"model_type": "zaya", "rope_parameters": _per_type(hybrid=1e6, hybrid_sliding=1e4)}
    assert rope_kwargs_from_config({"head_dim": 64, **zaya}, layer=39)["base"] == 1e6
    # UltraBERT: from attention_windows, where given (one window per layer)
    ultra = {"model_type": "ultrabert", "attention_windows": [128, 0], "num_hidden_layers": 2}
    assert [base(ultra, i) for i in range(2)] == ["sliding", "full"]
    with pytest.raises(ValueError, match=r"derived from the config's keys are 2, but .* is 3"):
        base(dict(ultra, num_hidden_layers=3), 0)
    # LFM3: convolution layers have no attention (no RoPE, no head size)
    lfm3 = {"model_type": "lfm3"}
    assert [base(lfm3, i) for i in (0, 1, 2, 3, 4)] == [None, None, "full", None, "sliding"]
    with pytest.raises(ValueError, match=r"layer=0 has no attention, .* is 'conv'"):
        head_dim_from_config({"head_dim": 64, "rope_parameters": two, **lfm3}, layer=0)


def test_config_deepseek_v4_layer_types_derived():
    """DeepSeek-V4 without layer_types: from the legacy compress_ratios (0, 4, 128), else
    two heavily compressed layers and then compressed-sparse ones at odd layers."""
    v4 = {k: v for k, v in V4_FLAT.items() if k not in ("layer_types", "num_hidden_layers")}
    main = rope_kwargs_from_config(V4_FLAT, layer_type="main")
    comp = rope_kwargs_from_config(V4_FLAT, layer_type="compress")
    ratios = dict(v4, compress_ratios=[128, 0, 4, 0], num_hidden_layers=3)
    assert [rope_kwargs_from_config(ratios, layer=i) for i in range(3)] == [comp, main, comp]
    with pytest.raises(ValueError, match=r"layer=3 is out of range"):
        rope_kwargs_from_config(ratios, layer=3)
    with pytest.raises(ValueError, match=r"compress_ratios'\]\[1\] is 8"):
        rope_kwargs_from_config(dict(ratios, compress_ratios=[128, 8, 4]), layer=0)
    assert rope_kwargs_from_config(v4, layer=42) == comp  # every layer compressed by default
    assert head_dim_from_config(v4, layer=0) == 64


def test_layer_past_the_last_refused():
    """layer=i past the model's last layer is refused by both readers, the count given
    (under the class's own key: GPT-J's n_layer) or its class default; a config without
    model_type has no class to count its layers, and is read."""
    llama = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
    assert rope_kwargs_from_config(dict(llama, num_hidden_layers=2), layer=1)["base"] == 10000.0
    for read in (rope_kwargs_from_config, head_dim_from_config):
        why = r"layer=2 is out of range: config\['num_hidden_layers'\] is 2 \(layers 0 to 1\)"
        with pytest.raises(ValueError, match=why):
            read(dict(llama, num_hidden_layers=2), layer=2)
        with pytest.raises(
            ValueError, match=r"leaves out num_hidden_layers, whose class default is 32"
        ):
            read(llama, layer=32)
        gptj = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_layer": 3}
        with pytest.raises(ValueError, match=r"layer=3 is out of range: config\['n_layer'\] is 3"):
            read(gptj, layer=3)
        assert read({"hidden_size": 4096, "num_attention_heads": 32}, layer=99) is not None
        # a layer_types list is held to that count too, given or the class default
        why = r"has 3 entries, but the config leaves out num_hidden_layers, whose class default"
        with pytest.raises(ValueError, match=why):
            read(dict(llama, layer_types=["full_attention"] * 3))
        with pytest.raises(ValueError, match=r"has 4 entries, but config\['n_layer'\] is 3"):
            read(dict(gptj, layer_types=["full_attention"] * 4))
    # the count under both names: num_hidden_layers wins, as the class sets it last
    tower = {"model_type": "qwen2_5_vl_vision", "hidden_size": 1280, "num_heads": 16}
    assert rope_kwargs_from_config(dict(tower, depth=4, num_hidden_layers=8), layer=5) is not None
    with pytest.raises(ValueError, match=r"layer=5 is out of range: config\['num_hidden_layers"):
        rope_kwargs_from_config(dict(tower, depth=8, num_hidden_layers=4), layer=5)
    with pytest.raises(ValueError, match=r"config\['num_hidden_layers'\] is null: fastpe needs"):
        rope_kwargs_from_config(dict(tower, depth=4, num_hidden_layers=None), layer=3)


def test_layer_past_the_last_refused_in_stacks():
    """Where no single key counts the layers (fastpe._hf_families._STACK_LAYER_KEYS, and
    HRM), layer=i past the last is refused too: Moonshine's past both its stacks, HRM's
    past the attention calls its class counts, SAM 2 video's past its memory attention."""
    moon = {"model_type": "moonshine", "hidden_size": 288, "num_attention_heads": 8}
    moon["encoder_num_attention_heads"] = 8
    assert rope_kwargs_from_config(moon, layer=5) is not None
    why = (
        r"layer=6 is out of range: the config leaves out encoder_num_hidden_layers, whose "
        r"class default is 6; the config leaves out decoder_num_hidden_layers, whose class "
        r"default is 6: a layer of either stack \(layers 0 to 5\)"
    )
    for read in (rope_kwargs_from_config, head_dim_from_config):
        with pytest.raises(ValueError, match=why):
            read(moon, layer=6)
    both = dict(moon, encoder_num_hidden_layers=2, decoder_num_hidden_layers=9)
    assert rope_kwargs_from_config(both, layer=8) is not None  # (a decoder layer)
    with pytest.raises(ValueError, match=r"layer=9 is out of range: .* is 2; .* is 9: a layer"):
        rope_kwargs_from_config(both, layer=9)
    with pytest.raises(ValueError, match=r"encoder_num_hidden_layers'\] is null"):
        rope_kwargs_from_config(dict(moon, encoder_num_hidden_layers=None))
    hrm = {"model_type": "hrm_text", "hidden_size": 512, "num_attention_heads": 4}
    assert rope_kwargs_from_config(dict(hrm, num_hidden_layers=2), layer=15) is not None
    why = r"layer=16 is out of range: .* = 2 \* 2 \* \(3 \+ 1\) = 16 \(layers 0 to 15\)"
    with pytest.raises(ValueError, match=why):
        rope_kwargs_from_config(dict(hrm, num_hidden_layers=2), layer=16)
    stack = dict(hrm, num_hidden_layers=2, num_layers_per_stack=1)
    with pytest.raises(ValueError, match=r"layer=2 is out of range: config\['num_hidden_layers"):
        head_dim_from_config(stack, layer=2)
    sam = {"model_type": "sam2_video", "memory_attention_num_layers": 3}
    with pytest.raises(ValueError, match=r"layer=3 is out of range: config\['memory_attention"):
        rope_kwargs_from_config(sam, layer=3)


def test_layer_type_asked_names_a_layer_of_the_config():
    """layer_type= must name a layer type transformers knows (its legacy names read
    renamed) and, where the config lists its layer types, one it holds (with layer=i, entry
    i's); before, a family with one rope dict for all layers read any string."""
    llama = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32}
    kw = rope_kwargs_from_config(llama)
    assert rope_kwargs_from_config(llama, layer_type="full_attention") == kw
    assert rope_kwargs_from_config(llama, layer_type="attention") == kw  # (legacy name)
    with pytest.raises(ValueError, match=r"layer_type='sliding' is not a layer type transformers"):
        rope_kwargs_from_config(llama, layer_type="sliding")
    qwen2 = dict(
        llama,
        model_type="qwen2",
        num_hidden_layers=2,
        layer_types=["full_attention", "sliding_attention"],
    )
    assert rope_kwargs_from_config(qwen2, layer=1, layer_type="sliding_attention") == kw
    assert rope_kwargs_from_config(qwen2, layer_type="sliding_attention") == kw
    with pytest.raises(ValueError, match=r"but config\['layer_types'\]\[0\] is 'full_attention'"):
        rope_kwargs_from_config(qwen2, layer=0, layer_type="sliding_attention")
    with pytest.raises(ValueError, match=r"config\['layer_types'\] holds no such layer"):
        rope_kwargs_from_config(qwen2, layer_type="chunked_attention")
    # a legacy name is read renamed, as the classes rename it (Gemma 3's rope dict per type)
    gemma = {"model_type": "gemma3_text", "head_dim": 256, "num_hidden_layers": 6}
    full = rope_kwargs_from_config(gemma, layer_type="full_attention")
    assert rope_kwargs_from_config(gemma, layer_type="attention") == full
    # without model_type, the per-layer-type rope dicts name the layer types
    custom = {"head_dim": 64, "rope_parameters": {"global": {"rope_theta": 1e6}}}
    assert rope_kwargs_from_config(custom, layer_type="global")["base"] == 1e6


@pytest.mark.parametrize(
    "model_type",
    ["llama", "falcon_h1", "qwen2", "olmo2"],
)
@pytest.mark.parametrize("layer_type", ["conv", "linear_attention", "mamba"])
def test_layer_type_without_attention_refused_where_not_read(model_type, layer_type):
    """A layer without attention (by layer_type=, or a given list's entry with layer=i), for
    a family whose layers without attention fastpe does not read, is refused: before, the
    one rope dict was read for a layer with nothing to rotate (Falcon-H1, whose every layer
    has attention). The families that hold such layers read them as None (no RoPE), given
    or as their classes derive them: Qwen3-Next, MiniMax (lightning attention), Qwen4-Exp
    and Bailing-hybrid (every k-th layer attends), RecurrentGemma (from block_types) and
    Zamba2 (Mamba layers without the shared attention block)."""
    cfg = {
        "model_type": model_type,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_hidden_layers": 2,
    }
    with pytest.raises(ValueError, match=rf"layer_type={layer_type!r} names layers without "):
        rope_kwargs_from_config(cfg, layer_type=layer_type)
    whole = rope_kwargs_from_config(cfg)
    assert rope_kwargs_from_config(cfg, layer_type="full_attention") == whole
    listed = dict(cfg, layer_types=[layer_type, "full_attention"])
    if model_type not in ("llama", "falcon_h1"):  # (classes that hold a list)
        with pytest.raises(ValueError, match=r"\]\[0\] is .*, a layer without attention"):
            rope_kwargs_from_config(listed, layer=0)
        with pytest.raises(ValueError, match=rf"layer_type={layer_type!r} names layers"):
            rope_kwargs_from_config(listed, layer_type=layer_type)
        assert rope_kwargs_from_config(listed, layer=1) == whole
    hybrid = {
        "model_type": "qwen3_next",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": 256,
        "num_hidden_layers": 4,
    }
    if layer_type != "conv":
        assert rope_kwargs_from_config(hybrid, layer_type=layer_type) is None
        assert rope_kwargs_from_config(hybrid, layer=0) is None
        minimax = dict(hybrid, model_type="minimax")  # full attention at even layers
        assert rope_kwargs_from_config(minimax, layer_type=layer_type) is None
        assert rope_kwargs_from_config(minimax, layer=1) is None
        assert rope_kwargs_from_config(minimax, layer=0) == rope_kwargs_from_config(minimax)
        # every k-th layer attends (Qwen4-Exp: 4, Bailing-hybrid: 6), the others linear
        for other, k in (("qwen4_exp_text", 4), ("bailing_hybrid", 6)):
            every = dict(hybrid, model_type=other, num_hidden_layers=8)
            assert rope_kwargs_from_config(every, layer_type=layer_type) is None
            for i in range(8):
                got = rope_kwargs_from_config(every, layer=i)
                assert (got is not None) == ((i + 1) % k == 0), (other, i)


def test_config_layer_without_layer_types_refused():
    """Where fastpe does not derive layer_types (no config class, or a family whose rule
    it does not transcribe, whose class derives more from them), layer=i is refused,
    naming the key to add."""
    nested = {
        "head_dim": 64,
        "rope_parameters": _per_type(full_attention=1e6, sliding_attention=1e4),
    }
    with pytest.raises(ValueError, match=r"no layer_types .* a config without model_type"):
        rope_kwargs_from_config(nested, layer=0)
    assert rope_kwargs_from_config(nested, layer_type="full_attention")["base"] == 1e6
    with pytest.raises(ValueError, match=r"no layer_types .* not for 'qwen2'"):
        rope_kwargs_from_config(dict(nested, model_type="qwen2"), layer=0)
    dots = {
        "model_type": "dots3_note_text",
        "head_dim": 256,
        "qk_rope_head_dim": 64,
        "rope_parameters": _per_type(indexed_attention=8e7, sliding_attention=5e4),
    }
    with pytest.raises(ValueError, match=r"no layer_types .* use_dsa, use_sliding_window"):
        rope_kwargs_from_config(dots, layer=0)
    with pytest.raises(
        ValueError, match=r"layer=0 is out of range: config\['num_hidden_layers'\] is 0"
    ):
        rope_kwargs_from_config(
            dict(GEMMA3_PUBLISHED, num_hidden_layers=0, layer_types=[]), layer=0
        )
    with pytest.raises(ValueError, match=r"config\['layer_types'\] has 0 entries, but the config"):
        rope_kwargs_from_config(dict(GEMMA3_PUBLISHED, layer_types=[]), layer=0)
    with pytest.raises(TypeError, match=r"config\['layer_types'\] must be a list"):
        rope_kwargs_from_config(dict(GEMMA3_PUBLISHED, layer_types="sliding"), layer=0)


def test_config_equal_dicts_per_layer_type_read_without_a_layer():
    """OLMo 3 unscaled: both layer types' dicts are the same, so any layer reads them."""
    olmo = {
        "model_type": "olmo3",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "rope_theta": 500000.0,
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    assert rope_kwargs_from_config(olmo)["base"] == 500000.0


def test_config_partial_factor_with_the_class_default_scaled_dict_read():
    """Apertus's default rope dict (no dict given) is llama3, whose frequencies read the
    partial factor: not refused as the default rope type's would be."""
    apertus = {"model_type": "apertus", "hidden_size": 4096, "num_attention_heads": 32}
    kw = rope_kwargs_from_config(dict(apertus, partial_rotary_factor=0.5))
    assert kw["rotary_dim"] == 64 and kw["scaling"]["rope_type"] == "llama3"


# --------------------------------------------------------------------------- layers without RoPE


def _rotates(config, **kw):
    """Whether fastpe rotates the layer asked for (its kwargs not None)."""
    return rope_kwargs_from_config(config, **kw) is not None


def test_cohere2_rotates_sliding_layers_where_a_window_is_set():
    """Cohere 2's attention rotates q and k only on sliding layers, and only where
    sliding_window is set (its class default 4096 where left out): a full-attention layer
    reads as no RoPE, and without a layer the config is refused, naming the keys."""
    c2 = {"model_type": "cohere2", "hidden_size": 512, "num_attention_heads": 8}
    # layer types derived from sliding_window_pattern (4 where left out): every 4th full
    assert [_rotates(c2, layer=i) for i in range(8)] == [True, True, True, False] * 2
    three = dict(c2, sliding_window_pattern=3)
    assert [_rotates(three, layer=i) for i in range(6)] == [True, True, False] * 2
    given = dict(c2, num_hidden_layers=2, layer_types=["full_attention", "sliding_attention"])
    assert [_rotates(given, layer=i) for i in range(2)] == [False, True]
    kw = rope_kwargs_from_config(c2, layer=0)
    assert (kw["layout"], kw["rotary_dim"]) == ("interleaved", 64)
    assert rope_kwargs_from_config(c2, layer_type="sliding_attention") == kw
    assert rope_kwargs_from_config(c2, layer_type="full_attention") is None
    assert rope_kwargs_from_config(c2, layer=1, layer_type="sliding_attention") == kw
    with pytest.raises(
        ValueError,
        match=r"'cohere2': its attention rotates q and k on sliding_attention layers only, "
        r"and only where sliding_window is set \(config\['layer_types'\], "
        r"config\['sliding_window'\]\), so its layers differ .*layers 3, 7, .* do not\); "
        r"pass layer=i \(the layer's index\) or layer_type=",
    ):
        rope_kwargs_from_config(c2)
    with pytest.raises(ValueError, match=r"layer_type='full_attention' but layer 1's type"):
        rope_kwargs_from_config(c2, layer=1, layer_type="full_attention")
    with pytest.raises(ValueError, match=r"='chunked_attention' is given, not a layer type of"):
        rope_kwargs_from_config(c2, layer_type="chunked_attention")
    with pytest.raises(ValueError, match=r"layer_type='chunked' is not a layer type transformers"):
        rope_kwargs_from_config(c2, layer_type="chunked")
    chunked = dict(c2, num_hidden_layers=1, layer_types=["chunked_attention"])
    with pytest.raises(ValueError, match=r"\['layer_types'\]\[0\] is 'chunked_attention', not a"):
        rope_kwargs_from_config(chunked, layer=0)
    with pytest.raises(ValueError, match=r"\[0\] is 'chunked', which the config class of model"):
        rope_kwargs_from_config(dict(chunked, layer_types=["chunked"]), layer=0)
    with pytest.raises(ValueError, match=r"layer=40 is out of range: .*class default is 40"):
        rope_kwargs_from_config(c2, layer=40)
    # sliding_window null: no layer rotates
    unset = dict(c2, sliding_window=None)
    assert not any(_rotates(unset, layer=i) for i in range(4))
    assert rope_kwargs_from_config(unset) is None
    assert rope_kwargs_from_config(unset, layer_type="sliding_attention") is None
    # every layer sliding, with a window: every layer rotates, read without a layer
    assert rope_kwargs_from_config(dict(c2, sliding_window_pattern=41)) == kw
    # an Aya Vision wrapper whose text part names no model_type: Cohere 2, as its class says
    aya = {"model_type": "aya_vision", "text_config": {k: v for k, v in c2.items()}}
    del aya["text_config"]["model_type"]
    assert rope_kwargs_from_config(aya, layer=3) is None
    with pytest.raises(ValueError, match=r"its layers differ in whether they rotate"):
        rope_kwargs_from_config(aya)


def test_cohere2_moe_dense_layers_rotate_where_the_prefix_pattern_is_1():
    """Cohere-2-MoE: as Cohere 2, and a dense layer (mlp_layer_types, else the first
    first_k_dense_replace) rotates whatever its type where
    prefix_dense_sliding_window_pattern is 1 (its default)."""
    moe = {"model_type": "cohere2_moe", "head_dim": 128, "num_hidden_layers": 8}
    assert [_rotates(moe, layer=i) for i in range(8)] == [True, True, True, False] * 2
    dense = dict(moe, first_k_dense_replace=2)  # two dense layers, both full attention
    assert [_rotates(dense, layer=i) for i in range(8)] == [True] * 5 + [False, True, True]
    with pytest.raises(ValueError, match=r"its full_attention layers differ .*layer 5 does"):
        rope_kwargs_from_config(dense, layer_type="full_attention")
    assert _rotates(dense, layer_type="sliding_attention")
    # prefix pattern 2: the dense layers alternate, and none is forced
    two = dict(dense, prefix_dense_sliding_window_pattern=2)
    assert [_rotates(two, layer=i) for i in range(4)] == [True, False, True, True]
    assert not _rotates(two, layer_type="full_attention")
    # a given mlp_layer_types is read (the dense layer 3 rotates though full)
    mlp = dict(moe, mlp_layer_types=["sparse"] * 3 + ["dense"] + ["sparse"] * 4)
    assert [_rotates(mlp, layer=i) for i in range(8)] == [True] * 7 + [False]
    # no window: only the dense layers rotate
    unset = dict(dense, sliding_window=None)
    assert [_rotates(unset, layer=i) for i in range(4)] == [True, True, False, False]
    # an mlp_layer_types of another length, or with another name: refused as the class does
    for entries in (["dense"] * 2, ["dense"] * 9):
        why = rf"\['mlp_layer_types'\] has {len(entries)} entries, but config\['num_hidden_layers"
        for ask in ({"layer": 6}, {"layer": 0}, {}):
            with pytest.raises(ValueError, match=why):
                rope_kwargs_from_config(dict(moe, mlp_layer_types=entries), **ask)
    with pytest.raises(ValueError, match=r"\['mlp_layer_types'\]\[7\] is 'moe', which the"):
        rope_kwargs_from_config(dict(moe, mlp_layer_types=["sparse"] * 7 + ["moe"]), layer=0)
    with pytest.raises(ValueError, match=r"prefix_dense_sliding_window_pattern'\] is null"):
        rope_kwargs_from_config(dict(dense, prefix_dense_sliding_window_pattern=None), layer=3)


@pytest.mark.parametrize("model_type", ["exaone4", "exaone4_5_text", "exaone_moe", "kolibri1"])
def test_exaone4_rotates_sliding_layers_or_all_without_a_window(model_type):
    """EXAONE 4 (and EXAONE 4.5's text model, EXAONE-MoE, Kolibri1): with a sliding
    window, only sliding layers rotate (full-attention layers have no RoPE); with none,
    every layer does."""
    config = {"model_type": model_type, "head_dim": 64, "num_hidden_layers": 10}
    period = 5 if model_type == "kolibri1" else 4  # (Kolibri1's is fixed)
    want = [(i + 1) % period != 0 for i in range(10)]
    assert [_rotates(config, layer=i) for i in range(10)] == want
    with pytest.raises(ValueError, match=r"or on every layer where sliding_window is null"):
        rope_kwargs_from_config(config)
    assert not _rotates(config, layer_type="full_attention")
    full = dict(config, layer_types=["full_attention"] * 10)
    assert not any(_rotates(full, layer=i) for i in range(10))
    unset = dict(full, sliding_window=None)
    if model_type == "exaone_moe":  # its class takes no null window
        with pytest.raises(ValueError, match=r"config\['sliding_window'\] is null, which"):
            rope_kwargs_from_config(unset, layer=0)
        return
    assert all(_rotates(unset, layer=i) for i in range(10))
    assert rope_kwargs_from_config(unset)["rotary_dim"] == 64
    if model_type != "kolibri1":
        # a null window and no layer_types: the class fails deriving them (pattern 0)
        # (without a layer too: the class fails whatever is asked of it)
        for kw in ({"layer": 0}, {}, {"layer_type": "full_attention"}):
            with pytest.raises(ValueError, match=r"sets sliding_window_pattern to 0"):
                rope_kwargs_from_config(dict(config, sliding_window=None), **kw)
        with pytest.raises(TypeError, match=r"sliding_window_pattern'\] must be an integer"):
            rope_kwargs_from_config(dict(config, sliding_window_pattern="LLLG"), layer=0)


def test_exaone4_5_wrapper_text_part():
    """EXAONE 4.5's text part is an EXAONE 4 config (saved as exaone4 or exaone4_5_text);
    one without model_type is refused, as its config class fails on it."""
    text = {"head_dim": 64, "num_hidden_layers": 4}
    for model_type in ("exaone4", "exaone4_5_text"):
        wrapper = {"model_type": "exaone4_5", "text_config": {**text, "model_type": model_type}}
        assert [_rotates(wrapper, layer=i) for i in range(4)] == [True, True, True, False]
    with pytest.raises(ValueError, match=r"text_config'\] has no model_type, on which"):
        rope_kwargs_from_config({"model_type": "exaone4_5", "text_config": text}, layer=0)


def test_flint_afmoe_lara_mini_olmo_hybrid_rotate_some_layer_types():
    """Flint and AFMoE rotate sliding layers alone, Lara-mini too (its model hands the
    rotation to them), OLMo-hybrid full-attention layers alone; each with the layer types
    its config class derives where the config gives none."""
    flint = {"model_type": "flint", "head_dim": 128, "num_hidden_layers": 10}
    # full: layers 0 and 1, every 4th from 1, the last
    assert [_rotates(flint, layer=i) for i in range(10)] == [
        False, False, True, True, True, False, True, True, True, False,
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"sliding_window'\] is null, which .* refuses"):
        rope_kwargs_from_config(dict(flint, sliding_window=None), layer=3)
    afmoe = {"model_type": "afmoe", "head_dim": 128, "global_attn_every_n_layers": 3}
    assert [_rotates(afmoe, layer=i) for i in range(6)] == [True, True, False] * 2
    # (AFMoE's window does not gate its RoPE)
    assert _rotates(dict(afmoe, sliding_window=None), layer=0)
    lara = {"model_type": "lara_mini", "head_dim": 128}
    assert [_rotates(lara, layer=i) for i in range(10)] == [False, True, False, False, True] * 2
    assert not _rotates(lara, layer_type="linear_attention")
    olmo = {"model_type": "olmo_hybrid", "hidden_size": 512, "num_attention_heads": 8}
    assert [_rotates(olmo, layer=i) for i in range(8)] == [False, False, False, True] * 2
    assert [_rotates(dict(olmo, num_hidden_layers=2), layer=i) for i in range(2)] == [
        False,
        True,  # fewer than four layers: the last is the full one
    ]
    assert _rotates(olmo, layer_type="full_attention")
    with pytest.raises(ValueError, match=r"'olmo_hybrid': the model rotates q and k on"):
        rope_kwargs_from_config(olmo)


@pytest.mark.parametrize(
    "keys, why",
    [
        ({"num_hidden_layers": 0}, r"derives \(config\['num_hidden_layers'\] is 0\) are \[\]"),
        ({"num_hidden_layers": 1}, r"derives .* are \['full_attention'\]"),
        ({"num_hidden_layers": 0, "layer_types": []}, r"config\['layer_types'\] is \[\]"),
        ({"num_hidden_layers": 0, "layer_types": []}, r"config\['layer_types'\] is \[\]"),
        (
            {"num_hidden_layers": 2, "layer_types": ["full_attention"] * 2},
            r"is \['full_attention', 'full_attention'\]",
        ),
        (
            {"num_hidden_layers": 2, "layer_types": ["linear_attention"] * 2},
            r"at least one attention layer beside",
        ),
        # (whether it rotates or not: a null theta builds no rotary module)
        (
            {"rope_theta": None, "num_hidden_layers": 1, "layer_types": ["full_attention"]},
            r"'linear_attention' layer$",
        ),
    ],
)
def test_olmo_hybrid_layer_types_its_class_refuses(keys, why):
    """OLMo-hybrid's config class refuses layer types (given, or derived from
    num_hidden_layers) without a linear-attention layer or with nothing else (no layers
    at all included): refused for any layer, layer type, or none asked."""
    olmo = {"model_type": "olmo_hybrid", "head_dim": 64, **keys}
    for ask in ({}, {"layer": 0}, {"layer_type": "full_attention"}):
        with pytest.raises(ValueError, match=r"'olmo_hybrid': .* which its config class refuses"):
            rope_kwargs_from_config(olmo, **ask)
    with pytest.raises(ValueError, match=why):
        rope_kwargs_from_config(olmo)


@pytest.mark.parametrize(
    "keys",
    [
        {"rope_theta": None},
        {"rope_parameters": {"rope_type": "default", "rope_theta": None}, "rope_theta": 7.0},
        {"rope_parameters": {"rope_type": "default"}, "rope_theta": None},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": None}},
    ],
)
def test_olmo_hybrid_without_rope_theta_has_no_rope(keys):
    """OLMo-hybrid builds no rotary module where the rope theta it keeps is null (its
    released checkpoints): every layer reads as no RoPE."""
    olmo = {"model_type": "olmo_hybrid", "head_dim": 64, "num_hidden_layers": 4, **keys}
    assert rope_kwargs_from_config(olmo) is None
    assert not any(_rotates(olmo, layer=i) for i in range(4))


def test_models_without_rope_everywhere():
    """GraniteMoeHybrid rotates only where position_embedding_type is "rope" (null where
    left out); Moshi's depth decoder never does."""
    granite = {"model_type": "granitemoehybrid", "head_dim": 64}
    assert rope_kwargs_from_config(granite) is None
    assert rope_kwargs_from_config(granite, layer=3) is None
    for value in (None, "nope"):
        assert rope_kwargs_from_config(dict(granite, position_embedding_type=value)) is None
    # (its class's default layers are all Mamba: none attends, so nothing rotates)
    assert rope_kwargs_from_config(dict(granite, position_embedding_type="rope")) is None
    mixed = dict(
        granite,
        position_embedding_type="rope",
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
    )
    assert rope_kwargs_from_config(mixed)["rotary_dim"] == 64
    assert rope_kwargs_from_config({"model_type": "moshi_depth", "head_dim": 64}) is None


@pytest.mark.parametrize(
    "model_type, layers", [("llama4_text", 48), ("smollm3", 36), ("mistral_large4_text", 72)]
)
def test_no_rope_layers_derived_where_the_config_gives_none(model_type, layers):
    """Where no_rope_layers is left out, the config class makes every
    no_rope_layer_interval-th layer (4) NoPE, over num_hidden_layers layers."""
    config = {"model_type": model_type, "head_dim": 64}
    assert [_rotates(config, layer=i) for i in range(8)] == [True, True, True, False] * 2
    with pytest.raises(ValueError, match=r"no_rope_layers \(as model_type .* every "):
        rope_kwargs_from_config(config)
    with pytest.raises(ValueError, match=rf"layer={layers} is out of range: .* default is"):
        rope_kwargs_from_config(config, layer=layers)
    three = dict(config, no_rope_layer_interval=3, num_hidden_layers=6)
    assert [_rotates(three, layer=i) for i in range(6)] == [True, True, False] * 2
    assert _rotates(dict(config, num_hidden_layers=3))  # no fourth layer: all rotate
    assert _rotates(dict(config, no_rope_layers=[1, 1], num_hidden_layers=2))  # read as given
    with pytest.raises(ValueError, match=r"no_rope_layer_interval'\] is 0, on which"):
        rope_kwargs_from_config(dict(config, no_rope_layer_interval=0), layer=0)
    with pytest.raises(ValueError, match=r"no_rope_layer_interval'\] is null"):
        rope_kwargs_from_config(dict(config, no_rope_layer_interval=None), layer=0)
    # an empty list: Llama 4's class derives one (it tests the list's truth), the others
    # keep it (their model then fails building layer 0, or their class deriving layer_types)
    empty = dict(config, no_rope_layers=[])
    if model_type == "llama4_text":
        assert not _rotates(empty, layer=3)
    else:
        for ask in ({}, {"layer": 3}):
            with pytest.raises(
                ValueError,
                match=rf"no_rope_layers'\] has 0 entries, but .* default is {layers}: .* "
                r"fails building layer 0",
            ):
                rope_kwargs_from_config(empty, **ask)
        assert _rotates(dict(empty, num_hidden_layers=0))  # no layer reads an entry


@pytest.mark.parametrize(
    "model_type", ["deepseek_v32", "longcat_flash", "glm_moe_dsa", "bailing_hybrid", "axk2"]
)
def test_no_rope_layers_refused_where_the_code_ignores_them(model_type):
    """These families' code reads no no_rope_layers (it rotates every layer): the key is
    refused, not read as NoPE layers."""
    config = {"model_type": model_type, "head_dim": 64, "no_rope_layers": [1, 0]}
    with pytest.raises(ValueError, match=r"'no_rope_layers' change how this family rotates"):
        rope_kwargs_from_config(config, layer=1)


@pytest.mark.parametrize(
    "model_type",
    ["gemma4_text", "gemma4_unified_text", "diffusion_gemma_text", "embedding_gemma2_text"],
)
def test_gemma4_full_layers_head_size_without_per_layer_config(model_type):
    """Gemma 4 and its kin: where the config leaves out per_layer_config, the class gives
    full-attention layers the head size global_head_dim (512 where left out), which the
    proportional RoPE of those layers turns over."""
    config = {
        "model_type": model_type,
        "head_dim": 256,
        "num_hidden_layers": 7,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1e6,
            },
        },
    }
    # layers 5 and 6 full (every sixth, and the last)
    assert [head_dim_from_config(config, layer=i) for i in range(7)] == [256] * 5 + [512] * 2
    kw = rope_kwargs_from_config(config, layer=6)
    assert (kw["rotary_dim"], kw["base"]) == (512, 1e6)
    assert kw["scaling"]["partial_rotary_factor"] == 0.25
    assert rope_kwargs_from_config(config, layer=0)["rotary_dim"] == 256
    given = dict(config, layer_types=["sliding_attention"] * 3 + ["full_attention"] * 4)
    assert [head_dim_from_config(given, layer=i) for i in range(7)] == [256] * 3 + [512] * 4
    small = dict(config, global_head_dim=128)
    assert rope_kwargs_from_config(small, layer=5)["rotary_dim"] == 128
    with pytest.raises(
        ValueError, match=r"leaves out per_layer_config, .* head size 512 \(the class default"
    ):
        rope_kwargs_from_config(config, layer_type="full_attention")
    # a global head size equal to head_dim: every layer the same, read without a layer
    same = dict(config, global_head_dim=256)
    assert head_dim_from_config(same) == 256
    # a given per_layer_config (empty, or null) is read as given: no entry, no override
    for value in ({}, None):
        assert head_dim_from_config(dict(config, per_layer_config=value), layer=6) == 256
    with pytest.raises(ValueError, match=r"config\['global_head_dim'\] is null: where"):
        head_dim_from_config(dict(config, global_head_dim=None), layer=6)
    with pytest.raises(TypeError, match=r"config\['global_head_dim'\] must be an integer"):
        head_dim_from_config(dict(config, global_head_dim=512.0), layer=6)


def test_roformer_refused():
    """RoFormer rotates interleaved pairs by its own sinusoidal table (the values too with
    rotary_value), with no rotary class to check a reading against: refused, not read
    the generic way."""
    with pytest.raises(ValueError, match=r"'roformer' is not supported: its RoPE"):
        rope_kwargs_from_config(
            {"model_type": "roformer", "hidden_size": 768, "num_attention_heads": 12}
        )


@pytest.mark.parametrize(
    "model_type",
    ["unlimited_ocr_text", "deepseek_ocr2_text", "dots3_note_audio_encoder", "blt_patcher"],
)
def test_head_size_overwritten_by_the_config_class(model_type):
    """The families whose config class sets its head_dim field to hidden_size //
    num_attention_heads whatever the config gives: derived so, and a head_dim that
    disagrees is refused naming both values."""
    config = {"model_type": model_type, "hidden_size": 1024, "num_attention_heads": 8}
    assert head_dim_from_config(config) == 128
    with pytest.raises(ValueError, match=r"derives the head size from them"):
        head_dim_from_config({"model_type": model_type, "head_dim": 128})
    assert head_dim_from_config(dict(config, head_dim=128)) == 128
    for f in (head_dim_from_config, lambda c: rope_kwargs_from_config(c, layer=0)):
        with pytest.raises(ValueError, match=r"'head_dim'\] = 64, but .* = 128"):
            f(dict(config, head_dim=64))


@pytest.mark.parametrize("model_type", ["cohere2", "recurrent_gemma"])
def test_head_size_given_beside_a_class_derivation_is_read(model_type):
    """Cohere 2, RecurrentGemma and BLT's modules set head_dim = hidden_size //
    num_attention_heads in __post_init__, before transformers 5.24 sets the keys the
    config gives: a given head_dim wins there (and their attention reads it), so it is
    read; without one the head size is derived."""
    config = {"model_type": model_type, "hidden_size": 1024, "num_attention_heads": 8}
    assert head_dim_from_config(config) == 128
    assert head_dim_from_config(dict(config, head_dim=64)) == 64


def test_sarvam_mla_reads_as_its_config_class():
    """Sarvam MLA (DeepSeek-V3's model in transformers 5.24): the rope part is
    qk_rope_head_dim (64 where left out; a given head_dim, in its original configs
    kv_lora_rank + qk_rope_head_dim, is dropped by the class), interleaved pairs returned in
    the half order unless rope_interleave is false, and a rope_scaling of type
    "deepseek_yarn" is YaRN (tests/test_hf_oracle.py compares these with transformers)."""
    config = {
        "model_type": "sarvam_mla",
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "kv_lora_rank": 512,
        "head_dim": 576,
        "q_head_dim": 192,
        "rope_theta": 10000.0,
    }
    assert head_dim_from_config(config) == 64
    assert head_dim_from_config(dict(config, qk_rope_head_dim=32)) == 32
    kw = rope_kwargs_from_config(config)
    assert (kw["layout"], kw["rotary_dim"], kw["scaling"]) == ("interleaved", 64, None)
    assert output_layout_from_config(config) == "half"
    assert rope_kwargs_from_config(dict(config, rope_interleave=False))["layout"] == "half"
    yarn = {"factor": 40.0, "original_max_position_embeddings": 4096}
    kw = rope_kwargs_from_config(dict(config, rope_scaling={"type": "deepseek_yarn", **yarn}))
    assert kw["scaling"]["rope_type"] == "yarn"
    with pytest.raises(ValueError, match=r"only in config\['rope_scaling'\]"):
        rope_kwargs_from_config(
            dict(config, rope_parameters={"rope_type": "deepseek_yarn", **yarn})
        )


def test_no_rotary_types_are_types_fastpe_does_not_read():
    """The model types whose modelling code has no rotary embedding
    (``_NO_ROTARY_TYPES``, generated from transformers 5.24 and checked against it by
    tests/test_hf_oracle.py) are types of transformers that fastpe reads in no way and
    gives no reason of their own: refused as having no RoPE, never a family it reads."""
    from fastpe._hf_families import _FAMILIES, _UNREAD
    from fastpe._hf_model_types import _GENERIC_TYPES, _NO_ROTARY_TYPES, _TRANSFORMERS_TYPES
    from fastpe.hf_config import _ROPE_GATES

    assert len(_NO_ROTARY_TYPES) > 200 and _NO_ROTARY_TYPES <= _TRANSFORMERS_TYPES
    read = set(_FAMILIES) | set(_GENERIC_TYPES) | set(_ROPE_GATES) | set(_UNREAD)
    assert not _NO_ROTARY_TYPES & read


def test_model_types_of_transformers_without_a_checked_reading_are_refused():
    """A model_type of transformers 5.24 with no row and no rotary class the generic
    reading is checked against is refused by name; a newer one is read the generic way."""
    base = {"hidden_size": 1024, "num_attention_heads": 8}
    with pytest.raises(ValueError, match=r"'clvp_decoder' is not read: CLVP's decoder .* no RoPE"):
        rope_kwargs_from_config({**base, "model_type": "clvp_decoder"})
    with pytest.raises(ValueError, match=r"'dinov3_vit' is not read: 2-D/3-D axial RoPE"):
        head_dim_from_config({**base, "model_type": "dinov3_vit"})
    for name in ("bert", "gpt2", "clvp_encoder"):
        with pytest.raises(ValueError, match=rf"model_type '{name}' is not read"):
            rope_kwargs_from_config({**base, "model_type": name})
    # models with no rotary code at all say so; the others name what may be the case
    for name in ("bert", "gpt2", "t5", "vit", "whisper", "bloom"):
        with pytest.raises(ValueError, match=rf"'{name}' is not read: its model has no RoPE"):
            rope_kwargs_from_config({**base, "model_type": name})
    # the general reason where the package rotates somewhere, or where the model is built
    # from sub-configs that may rotate (a wrapper of Qwen2-VL, Fuyu's Persimmon, an
    # encoder-decoder of any two models)
    for name in ("lightglue", "colqwen2", "fuyu", "chmv2", "encoder-decoder"):
        with pytest.raises(ValueError, match=rf"'{name}' is not read: transformers 5.24 has no"):
            rope_kwargs_from_config({**base, "model_type": name})
    with pytest.raises(ValueError, match=r"'jamba' is not read: Jamba has no RoPE"):
        rope_kwargs_from_config({**base, "model_type": "jamba"})
    with pytest.raises(ValueError, match=r"'nemotron_h' is not read: Nemotron-H has no RoPE"):
        rope_kwargs_from_config({**base, "model_type": "nemotron_h"})
    # a wrapper holding it as text_config (which names no model_type) gets its reason
    omni = {"model_type": "nemotron_h_omni", "text_config": base}
    with pytest.raises(ValueError, match=r"'nemotron_h' is not read: Nemotron-H has no RoPE"):
        rope_kwargs_from_config(omni)
    # GLM-5.3-Flash: its text model, in text_config or flat at the top level
    glm = r"is not read: GLM-5.3-Flash's text model .*has no RoPE"
    with pytest.raises(ValueError, match=rf"'glm5_next_text' {glm}"):
        rope_kwargs_from_config({"model_type": "glm5_next", "text_config": base})
    with pytest.raises(ValueError, match=rf"'glm5_next' {glm}"):
        rope_kwargs_from_config({**base, "model_type": "glm5_next"})
    # Kimi Linear: latent attention with a rope part its model never rotates
    with pytest.raises(ValueError, match=r"'kimi_linear' is not read: Kimi Linear has no RoPE"):
        rope_kwargs_from_config({**base, "model_type": "kimi_linear", "qk_rope_head_dim": 64})
    for name in ("llama", "qwen3", "mistral", "some_model_newer_than_transformers_5_24"):
        assert rope_kwargs_from_config({**base, "model_type": name})["layout"] == "half"
    assert rope_kwargs_from_config(base)["rotary_dim"] == 128


@pytest.mark.parametrize("window", [None, 0, -1])
def test_kolibri1_refuses_a_window_that_is_not_positive_where_a_layer_slides(window):
    config = {"model_type": "kolibri1", "head_dim": 64, "num_hidden_layers": 10}
    for layer in (0, 4):
        with pytest.raises(ValueError, match=r"refuses where a layer is sliding_attention"):
            rope_kwargs_from_config(dict(config, sliding_window=window), layer=layer)
    full = dict(config, sliding_window=window, layer_types=["full_attention"] * 10)
    kw = rope_kwargs_from_config(full, layer=0)
    assert (kw is not None) == (window is None)  # a set window: full layers do not rotate


def test_layers_without_attention_in_hybrid_models():
    """Qwen3-Next's linear attention, LFM2's conv, Bamba's and GraniteMoeHybrid's Mamba
    layers have no q and k: layer=i of one reads as no RoPE (None), given or derived as
    the class derives the layer types."""
    qwen = {"model_type": "qwen3_next", "head_dim": 64, "num_hidden_layers": 8}
    got = [rope_kwargs_from_config(qwen, layer=i) is not None for i in range(8)]
    assert got == [(i + 1) % 4 == 0 for i in range(8)]
    got = [
        rope_kwargs_from_config(dict(qwen, full_attention_interval=2), layer=i) is not None
        for i in range(8)
    ]
    assert got == [i % 2 == 1 for i in range(8)]
    assert rope_kwargs_from_config(qwen, layer_type="linear_attention") is None
    assert rope_kwargs_from_config(qwen, layer_type="full_attention")["rotary_dim"] == 16
    with pytest.raises(ValueError, match=r"layer_type='full_attention' but"):
        rope_kwargs_from_config(qwen, layer=0, layer_type="full_attention")
    with pytest.raises(ValueError, match=r"out of range"):
        rope_kwargs_from_config(qwen, layer=8)
    given = dict(qwen, layer_types=["full_attention", "linear_attention"] * 4)
    assert [rope_kwargs_from_config(given, layer=i) is not None for i in range(8)] == [
        i % 2 == 0 for i in range(8)
    ]
    with pytest.raises(ValueError, match=r"'conv', not a layer type of this family"):
        rope_kwargs_from_config(dict(qwen, layer_types=["conv"] * 8), layer=0)
    # transformers renames the legacy "mamba" and "attention" wherever they are given
    legacy = dict(qwen, layer_types=["mamba", "attention"] * 4)
    assert rope_kwargs_from_config(legacy, layer=0) is None
    assert rope_kwargs_from_config(legacy, layer=1) is not None
    lfm2 = {"model_type": "lfm2", "head_dim": 64, "num_hidden_layers": 6}
    assert all(rope_kwargs_from_config(lfm2, layer=i) for i in range(6))
    lfm2["full_attn_idxs"] = [2, 5]
    assert [rope_kwargs_from_config(lfm2, layer=i) is not None for i in range(6)] == [
        i in (2, 5) for i in range(6)
    ]
    with pytest.raises(ValueError, match=r"has no layer_types to tell"):
        rope_kwargs_from_config({"model_type": "lfm2_moe", "head_dim": 64}, layer=0)
    bamba = {"model_type": "bamba", "head_dim": 64, "num_hidden_layers": 4}
    assert all(rope_kwargs_from_config(bamba, layer=i) is None for i in range(4))
    bamba["attn_layer_indices"] = [1]
    assert [rope_kwargs_from_config(bamba, layer=i) is not None for i in range(4)] == [
        False,
        True,
        False,
        False,
    ]
    granite = {"model_type": "granitemoehybrid", "head_dim": 64, "num_hidden_layers": 3}
    granite["position_embedding_type"] = "rope"
    assert rope_kwargs_from_config(granite, layer=0) is None  # every layer Mamba by default
    granite["layers_block_type"] = ["linear_attention", "full_attention", "linear_attention"]
    assert [rope_kwargs_from_config(granite, layer=i) is not None for i in range(3)] == [
        False,
        True,
        False,
    ]


@pytest.mark.parametrize(
    "config, layers, where",
    [
        (
            {"model_type": "qwen3_next", "num_hidden_layers": 8},
            [3, 7],
            r"layer 0's type, as its config class derives it, is 'linear_attention' "
            r"\(model_type 'qwen3_next': its linear_attention layers \(Gated DeltaNet\)",
        ),
        (
            {"model_type": "lfm2", "num_hidden_layers": 4, "full_attn_idxs": [1]},
            [1],
            r"layer 0's type, as its config class derives it, is 'conv'",
        ),
        (
            {"model_type": "bamba", "num_hidden_layers": 4, "attn_layer_indices": [2]},
            [2],
            r"derives it, is 'linear_attention' \(model_type 'bamba': .* \(Mamba\)",
        ),
        (
            {
                "model_type": "granitemoehybrid",
                "num_hidden_layers": 2,
                "layer_types": ["mamba", "attention"],
            },
            [1],
            r"layer 0's type, as its config class renames config\['layer_types'\]\[0\] "
            r"\('mamba'\), is 'linear_attention'",
        ),
        (
            {"model_type": "olmo_hybrid", "num_hidden_layers": 4},
            [3],
            r"layer 0's type, as its config class derives layer_types, is 'linear_attention' "
            r"\(model_type 'olmo_hybrid' builds its linear_attention layers without attention",
        ),
        (
            {
                "model_type": "lara_mini",
                "num_hidden_layers": 2,
                "layer_types": ["linear_attention", "full_attention"],
            },
            [1],
            r"config\['layer_types'\]\[0\] is 'linear_attention'",
        ),
    ],
)
def test_head_dim_refused_for_a_layer_without_attention(config, layers, where):
    """A hybrid model's layer without attention has no head size: head_dim_from_config
    refuses it, naming the layer and its type as the class holds it, where
    rope_kwargs_from_config reads it as None; a layer with attention has the head size."""
    config = {"head_dim": 64, **config}
    n = config.get("num_hidden_layers") or len(config["layer_types"])
    for i in range(n):
        if i in layers:
            assert head_dim_from_config(config, layer=i) == 64
            continue
        assert rope_kwargs_from_config(config, layer=i) is None
        with pytest.raises(ValueError, match=rf"layer={i} has no attention, so no head size: "):
            head_dim_from_config(config, layer=i)
    with pytest.raises(ValueError, match=where):
        head_dim_from_config(config, layer=0)
    assert head_dim_from_config(config) == 64  # (the attention layers')


def test_wrapper_text_part_without_model_type_takes_the_wrappers_sub_config():
    """A text_config without model_type reads as the text model its wrapper's config class
    builds (Llama 4's llama4_text: interleaved; Llava's Llama: half)."""
    text = {"hidden_size": 1024, "num_attention_heads": 8, "num_hidden_layers": 4}
    kw = rope_kwargs_from_config({"model_type": "llama4", "text_config": text}, layer=0)
    assert kw["layout"] == "interleaved"
    kw = rope_kwargs_from_config({"model_type": "llava", "text_config": text})
    assert kw["layout"] == "half"
    with pytest.raises(ValueError, match=r"'bert' is not read"):
        rope_kwargs_from_config({"model_type": "grounding-dino", "text_config": text})
    # a wrapper transformers 5.24 does not know: the text part is read the generic way
    kw = rope_kwargs_from_config({"model_type": "newer_wrapper", "text_config": text})
    assert kw["layout"] == "half"
