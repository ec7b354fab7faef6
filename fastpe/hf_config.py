"""Hugging Face model configs (``config.json`` as a dict) read into fastpe's RoPE arguments.

:func:`rope_kwargs_from_config` returns the keyword arguments of :func:`fastpe.apply_rope`
(layout, base, rotary dim, scaling, context length), ready to splat::

    fastpe.apply_rope(q, out=q, offset=past_len, **rope_kwargs_from_config(config))

:func:`head_dim_from_config` gives the channels per head that RoPE rotates within, to
reshape ``(..., heads * head_dim)`` projections into heads first, and
:func:`rotary_dim_from_config` the number of rotated channels per head.
:func:`output_layout_from_config` says in which channel order the family's own code returns
the rotated tensor (DeepSeek-V3 with ``rope_interleave`` returns the half order). The
frequency formulas themselves live in :mod:`fastpe.scaling`.

How a config is read is one row of a table per model family (``_FAMILIES``, keyed by the
config's ``model_type``): which keys hold the head size, the head count, the rope theta and
the partial rotary factor, in which channel layout and with which sign the family's
modelling code rotates, which extra keys it reads, and which families are refused (and
why). The layout is not in most configs, it is in the model's code: GPT-J rotates
interleaved pairs, Llama the half split. A config without ``model_type``, or with one not in
the table, is read the generic way (``transformers``' common keys, ``rotate_half``) provided
it holds no RoPE-related key that the generic reading does not understand; such a key
(``rotary_pct``, ``qk_rope_head_dim``, ``mrope_section``, ...) is refused by name.

Errors follow one rule: ``TypeError`` for a value of the wrong type, ``ValueError`` for a
value of the right type that is not allowed; messages name the key, the value and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .scaling import (
    _check_count,
    _check_int,
    _check_real,
    _resolve_rope_type,
    rope_frequencies,
)

__all__ = [
    "head_dim_from_config",
    "output_layout_from_config",
    "rope_kwargs_from_config",
    "rotary_dim_from_config",
]

# Keys that live in a new-style ``rope_parameters`` dict but describe the model, not the
# scaling; :func:`rope_kwargs_from_config` moves them out of the ``scaling`` dict it returns
# (except ``partial_rotary_factor`` for ``proportional``, whose formula reads it).
_CONFIG_LEVEL_KEYS = ("rope_theta", "partial_rotary_factor")

# Rope types whose frequencies depend on the pre-training context length.
_NEEDS_ORIGINAL_CONTEXT = ("yarn", "longrope", "llama3")

# --------------------------------------------------------------------------- families

_MULTI_AXIS = (
    "multi-axis RoPE (M-RoPE: each pair rotated by the time, height or width position of a "
    "token, mrope_section) is not supported yet"
)
_VISION = (
    "2-D/3-D axial RoPE of a vision encoder (each pair rotated by a patch's row or column) "
    "is not supported yet"
)
_ENC_DEC = (
    "encoder and decoder heads of this family are sized by their own keys; read the "
    "sub-config of the stack you rotate (fastpe does not guess which)"
)
_NOT_POSITION_IDS = "its RoPE is not driven by token position ids"


@dataclass(frozen=True)
class _Family:
    """How the configs of one model family name what RoPE needs, and how its code rotates.

    Each ``*_keys`` tuple lists the config keys that may hold the value, first match wins.
    """

    layout: str = "half"  # the pairing the family's modelling code rotates
    interleave_key: str | None = None  # a bool key that switches ``layout`` to interleaved
    interleave_default: bool = True  # its value when absent (transformers' config default)
    output_layout: str | None = None  # the layout HF returns, when not the input's
    sign: int = 1  # -1: the family rotates by -theta (nanochat's rotate_half)
    head_dim_keys: tuple[str, ...] = ("head_dim",)
    hidden_size_keys: tuple[str, ...] = ("hidden_size",)
    num_heads_keys: tuple[str, ...] = ("num_attention_heads",)
    theta_keys: tuple[str, ...] = ("rope_theta",)
    default_theta: float = 10000.0
    partial_keys: tuple[str, ...] = ("partial_rotary_factor",)
    rotary_dim_keys: tuple[str, ...] = ()  # keys holding the rotated channels directly
    max_pos_keys: tuple[str, ...] = ("max_position_embeddings",)
    theta_holder: str | None = None  # a sub-dict that may hold another rope_theta
    local_theta_key: str | None = None  # theta of sliding-window layers (Gemma 3 published)
    reads: frozenset[str] = frozenset()  # further RoPE keys this family's row understands
    refuse: str | None = None  # why configs of this family are refused
    # rope types this family's config class renames (Phi-3 reads "yarn" as "longrope")
    type_aliases: tuple[tuple[str, str], ...] = ()


#: The generic reading: ``transformers``' common keys and ``rotate_half``.
_GENERIC = _Family()

_MLA = ("qk_rope_head_dim", "head_dim")  # DeepSeek-style latent attention: the rope part


def _refused(reason: str) -> _Family:
    return _Family(refuse=reason)


def _interleaved(**kw: Any) -> _Family:
    return _Family(layout="interleaved", **kw)


#: One row per ``model_type`` whose reading differs from :data:`_GENERIC` (every family of
#: transformers 5.24 whose rotary class the generic reading does not reproduce; checked by
#: tests/test_hf_oracle.py). Rows are added here, not as branches in the functions below.
_FAMILIES: dict[str, _Family] = {
    # rotate_every_two: interleaved pairs; sizes under GPT-2 names, rotary_dim (null: all)
    **{
        name: _interleaved(
            head_dim_keys=(),
            hidden_size_keys=("n_embd", "hidden_size"),
            num_heads_keys=("n_head", "num_attention_heads"),
            rotary_dim_keys=("rotary_dim",),
            max_pos_keys=("max_position_embeddings", "n_positions"),
            reads=frozenset({"rotary_dim", "n_embd", "n_head"}),
        )
        for name in ("gptj", "codegen")
    },
    # interleaved rotate_half / repeat_interleave of cos and sin
    **{
        name: _interleaved()
        for name in (
            "cohere",
            "cohere2",
            "cohere2_moe",
            "glm",
            "glm4",
            "helium",
            "ernie4_5",
            "ernie4_5_moe",
            "blt",
            "moonshine_streaming",
            "pe_audio_encoder",
            "pe_audio_video_encoder",
            "pe_video_encoder",
            "openai_privacy_filter",
        )
    },
    # complex multiplication of (x[2i], x[2i+1]): interleaved pairs in and out
    "deepseek_v2": _interleaved(head_dim_keys=_MLA, reads=frozenset({"qk_rope_head_dim"})),
    "llama4_text": _interleaved(reads=frozenset({"no_rope_layers"})),
    # interleaved when rope_interleave is true; HF's apply_rotary_pos_emb_interleave returns
    # the half order
    **{
        name: _Family(
            interleave_key="rope_interleave",
            output_layout="half",
            head_dim_keys=_MLA,
            reads=frozenset({"qk_rope_head_dim", "rope_interleave"}),
        )
        for name in ("deepseek_v3", "youtu", "glm4_moe_lite", "axk1")
    },
    # as above, but the rotated head is head_dim * partial_rotary_factor (not
    # qk_rope_head_dim first)
    "mistral4": _Family(
        interleave_key="rope_interleave",
        output_layout="half",
        reads=frozenset({"qk_rope_head_dim", "rope_interleave"}),
    ),
    # always apply_rotary_pos_emb_interleave
    **{
        name: _interleaved(
            output_layout="half",
            head_dim_keys=_MLA,
            reads=frozenset({"qk_rope_head_dim", "no_rope_layers", "per_layer_config"}),
        )
        for name in (
            "deepseek_v32",
            "mistral_large4_text",
            "longcat_flash",
            "glm_moe_dsa",
            "bailing_hybrid",
            "axk2",
        )
    },
    **{
        name: _interleaved(
            output_layout="half", reads=frozenset({"qk_rope_head_dim", "per_layer_config"})
        )
        for name in ("dots3_note_text", "dots3_note_audio_encoder")
    },
    # latent attention in the half layout
    **{
        name: _Family(head_dim_keys=_MLA, reads=frozenset({"qk_rope_head_dim"}))
        for name in ("minicpm3", "hy_v4", "kimi_linear")
    },
    # rotate_half with the sign flipped: rotates by -theta
    "nanochat": _Family(sign=-1),
    # Phi3Config renames "su" and "yarn" to "longrope" (so a "yarn" dict needs LongRoPE's keys)
    **{name: _Family(type_aliases=(("yarn", "longrope"),)) for name in ("phi3", "phi4_multimodal")},
    # head sizes under other names (transformers maps them with attribute_map)
    "jetmoe": _Family(head_dim_keys=("kv_channels",), reads=frozenset({"kv_channels"})),
    "zamba2": _Family(
        head_dim_keys=("attention_head_dim",),
        reads=frozenset({"attention_head_dim", "kv_channels", "use_mem_rope"}),
    ),
    # DBRX keeps its theta in attn_config, which transformers 5.24 does not read
    "dbrx": _Family(
        hidden_size_keys=("d_model",),
        num_heads_keys=("n_heads",),
        max_pos_keys=("max_position_embeddings", "max_seq_len"),
        theta_holder="attn_config",
        reads=frozenset({"d_model", "n_heads"}),
    ),
    "falcon": _Family(
        num_heads_keys=("num_attention_heads", "n_head"), reads=frozenset({"n_head", "alibi"})
    ),
    # GPT-NeoX names: rotary_pct, rotary_emb_base
    **{
        name: _Family(
            theta_keys=("rope_theta", "rotary_emb_base"),
            partial_keys=("partial_rotary_factor", "rotary_pct"),
            reads=frozenset({"rotary_pct", "rotary_emb_base"}),
        )
        for name in ("gpt_neox", "gpt_neox_japanese")
    },
    # Gemma 3 as published: sliding layers rotate with rope_local_base_freq, unscaled
    **{
        name: _Family(
            local_theta_key="rope_local_base_freq", reads=frozenset({"rope_local_base_freq"})
        )
        for name in ("gemma3_text", "gemma3n_text")
    },
    # per-layer keys
    "smollm3": _Family(reads=frozenset({"no_rope_layers"})),
    "granite_swa": _Family(reads=frozenset({"layer_rope_theta"})),
    "granitemoe_swa": _Family(reads=frozenset({"layer_rope_theta"})),
    **{
        name: _Family(reads=frozenset({"layer_rope_theta"}))
        for name in ("muse_glimmer_text", "muse_glimmer_assistant", "muse_spark_text")
    },
    "molmo2_text": _Family(reads=frozenset({"rope_scaling_layers"})),
    **{
        name: _Family(reads=frozenset({"per_layer_config"}))
        for name in (
            "embedding_gemma2_text",
            "gemma4_text",
            "gemma4_unified_text",
            "diffusion_gemma_text",
        )
    },
    # refused
    "deepseek_v4": _refused(
        "DeepSeek-V4's per-layer RoPE (rope_parameters 'main' and 'compress', "
        "compress_rope_theta, chosen by compress ratio per layer) is not supported yet"
    ),
    "moonshine": _refused(_ENC_DEC),
    "dia": _refused(_ENC_DEC),
    "t5gemma": _refused(_ENC_DEC),
    "esm": _Family(reads=frozenset({"position_embedding_type"})),
    **{
        name: _refused(_MULTI_AXIS)
        for name in (
            "qwen2_vl",
            "qwen2_vl_text",
            "qwen2_5_vl",
            "qwen2_5_vl_text",
            "qwen2_5_omni",
            "qwen2_5_omni_text",
            "qwen2_5_omni_thinker",
            "qwen2_5_omni_talker",
            "qwen3_vl",
            "qwen3_vl_text",
            "qwen3_vl_moe",
            "qwen3_vl_moe_text",
            "qwen3_5",
            "qwen3_5_text",
            "qwen3_5_moe",
            "qwen3_5_moe_text",
            "qwen3_omni_moe",
            "qwen3_omni_moe_text",
            "qwen3_omni_moe_thinker",
            "qwen3_omni_moe_talker",
            "qwen4_exp",
            "qwen4_exp_text",
            "paddleocr_vl",
            "glm4v",
            "glm4v_text",
            "glm4v_moe",
            "glm4v_moe_text",
            "glm_image",
            "glm_image_text",
            "glm_ocr",
            "glm_ocr_text",
            "hunyuan_vl",
            "hunyuan_vl_text",
            "hy_v4_vl",
            "hy_v4_vl_text",
            "ernie4_5_vl_moe",
            "ernie4_5_vl_moe_text",
            "cohere_compass",
            "cohere_compass_text",
            "cosmos3_edge",
            "cosmos3_edge_text",
            "neomme",
            "minimax_m3_vl",
            "qwen2_5_omni_dit",
            "paddleocr_vl_text",
            "minimax_m3_vl_text",
        )
    },
    **{
        name: _refused(_VISION)
        for name in (
            "qwen2_vl_vision",
            "qwen2_5_vl_vision",
            "qwen2_5_omni_vision_encoder",
            "qwen3_vl_vision",
            "qwen3_vl_moe_vision",
            "qwen3_5_vision",
            "qwen3_5_moe_vision",
            "qwen3_omni_moe_vision_encoder",
            "qwen4_exp_vision",
            "glm4v_vision",
            "glm4v_moe_vision",
            "glm5_next_vision",
            "glm_ocr_vision",
            "ernie4_5_vl_moe_vision",
            "paddleocr_vl_vision",
            "gemma4_vision",
            "pixtral",
            "kimi_k25_vision",
            "lfm3_vl_vision",
            "minimax_m3_vl_vision",
            "mlcd_vision_model",
            "muse_glimmer_vision",
            "muse_spark_vision",
            "sam2_video",
            "sam3_vit_model",
            "sam3_tracker_video",
            "edgetam_video",
            "step3p5_vision",
            "video_llama_3_vision",
            "exaone4_5_vision",
            "cohere_compass_vision",
            "dots3_note_vision_encoder",
            "inkling2_vision",
            "deepseek_ocr2_vision",
            "llama4_vision_model",
            "eomt_dinov3",
            "efficientloftr",
        )
    },
    **{name: _refused(_NOT_POSITION_IDS) for name in ("musicflamingo",)},
}

#: Defaults of transformers' config classes (5.24) that a config.json may leave out (configs
#: saved by transformers 4 omit every value equal to its class default) and that differ
#: from the generic reading: a set ``head_dim``, a theta other than 10000, a partial rotary
#: factor other than 1, a rope dict of another type than ``default`` (filled in where the
#: config has none), or one rope dict per layer type (``"nested"``: a config with no rope
#: keys at all is refused). tests/test_hf_oracle.py checks this table against the installed
#: transformers (``tests/_hf.py: class_defaults``).
# fmt: off
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {'afmoe': {'head_dim': 128},
 'apertus': {'rope_parameters': {'factor': 8.0,
                                 'high_freq_factor': 4.0,
                                 'low_freq_factor': 1.0,
                                 'original_max_position_embeddings': 8192,
                                 'rope_type': 'llama3'},
             'rope_theta': 12000000.0},
 'apertus1p5_text': {'rope_parameters': {'factor': 8.0,
                                         'high_freq_factor': 4.0,
                                         'low_freq_factor': 1.0,
                                         'original_max_position_embeddings': 8192,
                                         'rope_type': 'llama3'},
                     'rope_theta': 12000000.0},
 'axk2': {'head_dim': 64},
 'bailing_hybrid': {'head_dim': 128, 'rope_theta': 6000000.0},
 'bamba': {'partial_rotary_factor': 0.5},
 'beam': {'head_dim': 128, 'nested': True},
 'bitnet': {'rope_theta': 500000.0},
 'blt': {'rope_theta': 500000.0},
 'cohere': {'rope_theta': 500000.0},
 'cohere2_moe': {'head_dim': 128},
 'csm': {'rope_theta': 500000.0},
 'cwm': {'head_dim': 128,
         'rope_parameters': {'factor': 16.0,
                             'high_freq_factor': 4.0,
                             'low_freq_factor': 1.0,
                             'original_max_position_embeddings': 8192,
                             'rope_type': 'llama3'},
         'rope_theta': 1000000.0},
 'deepseek_v32': {'head_dim': 64},
 'diffusion_gemma_text': {'head_dim': 256, 'nested': True},
 'dory': {'head_dim': 256, 'nested': True},
 'dots3_note_audio_encoder': {'partial_rotary_factor': 0.5},
 'dots3_note_text': {'head_dim': 256, 'nested': True},
 'embedding_gemma2_text': {'head_dim': 256, 'nested': True},
 'ernie4_5': {'head_dim': 128, 'rope_theta': 500000.0},
 'ernie4_5_moe': {'rope_theta': 500000.0},
 'evolla': {'rope_theta': 500000.0},
 'flex_olmo': {'rope_theta': 500000.0},
 'flint': {'head_dim': 128},
 'gemma': {'head_dim': 256},
 'gemma2': {'head_dim': 256},
 'gemma3_text': {'head_dim': 256, 'nested': True},
 'gemma3n_text': {'head_dim': 256, 'nested': True},
 'gemma4_text': {'head_dim': 256, 'nested': True},
 'gemma4_unified_text': {'head_dim': 256, 'nested': True},
 'glm': {'head_dim': 128, 'partial_rotary_factor': 0.5},
 'glm4': {'head_dim': 128, 'partial_rotary_factor': 0.5},
 'glm4_moe': {'partial_rotary_factor': 0.5},
 'glm_moe_dsa': {'head_dim': 64},
 'gpt_neox': {'partial_rotary_factor': 0.25},
 'gpt_oss': {'head_dim': 64,
             'rope_parameters': {'beta_fast': 32.0,
                                 'beta_slow': 1.0,
                                 'factor': 32.0,
                                 'original_max_position_embeddings': 4096,
                                 'rope_type': 'yarn',
                                 'truncate': False},
             'rope_theta': 150000.0},
 'gte': {'rope_theta': 160000.0},
 'helium': {'head_dim': 128, 'rope_theta': 100000.0},
 'higgs_audio_v2': {'head_dim': 128,
                    'rope_parameters': {'factor': 32.0,
                                        'high_freq_factor': 0.5,
                                        'low_freq_factor': 0.125,
                                        'original_max_position_embeddings': 1024,
                                        'rope_type': 'llama3'},
                    'rope_theta': 500000.0},
 'hrm_text': {'head_dim': 128},
 'hy_v3': {'head_dim': 128, 'rope_theta': 11158840.0},
 'hy_v4': {'head_dim': 256},
 'jina_embeddings_v3': {'rope_theta': 20000.0},
 'kolibri1': {'head_dim': 128},
 'laguna': {'head_dim': 128, 'nested': True},
 'lara_mini': {'head_dim': 128},
 'lfm2': {'rope_theta': 1000000.0},
 'lfm2_moe': {'rope_theta': 1000000.0},
 'lfm3': {'head_dim': 128, 'nested': True},
 'llama4_text': {'head_dim': 128, 'rope_theta': 500000.0},
 'longcat_flash': {'head_dim': 64, 'rope_theta': 10000000.0},
 'mellum': {'head_dim': 128, 'nested': True},
 'mimo_v2_flash': {'head_dim': 192, 'nested': True},
 'minimax': {'rope_theta': 1000000.0},
 'minimax_m2': {'head_dim': 128, 'rope_theta': 5000000.0},
 'ministral3': {'head_dim': 128,
                'rope_parameters': {'beta_fast': 32.0,
                                    'beta_slow': 1.0,
                                    'factor': 16.0,
                                    'llama_4_scaling_beta': 0.1,
                                    'max_position_embeddings': 262144,
                                    'mscale': 1.0,
                                    'mscale_all_dim': 1.0,
                                    'original_max_position_embeddings': 16384,
                                    'rope_type': 'yarn',
                                    'type': 'yarn'},
                'rope_theta': 1000000.0},
 'mistral4': {'partial_rotary_factor': 0.5,
              'rope_parameters': {'beta_fast': 32.0,
                                  'beta_slow': 1.0,
                                  'factor': 128.0,
                                  'llama_4_scaling_beta': 0.1,
                                  'max_position_embeddings': 1048576,
                                  'mscale': 1.0,
                                  'mscale_all_dim': 1.0,
                                  'original_max_position_embeddings': 8192,
                                  'rope_type': 'yarn',
                                  'type': 'yarn'}},
 'mistral_large4_text': {'head_dim': 64,
                         'rope_parameters': {'attention_factor': 1.0,
                                             'beta_fast': 32.0,
                                             'beta_slow': 1.0,
                                             'factor': 2048.0,
                                             'original_max_position_embeddings': 512,
                                             'rope_type': 'yarn'}},
 'mixtral': {'rope_theta': 1000000.0},
 'mllama_text_model': {'rope_theta': 500000.0},
 'modernbert': {'nested': True},
 'modernbert-decoder': {'nested': True},
 'molmo2_text': {'head_dim': 128},
 'moonshine_streaming': {'partial_rotary_factor': 0.8},
 'muse_glimmer_assistant': {'head_dim': 128, 'rope_theta': 500000.0},
 'nemotron': {'partial_rotary_factor': 0.5},
 'nemotron3_5_transcribe_asr_audio': {'partial_rotary_factor': 0.5},
 'neucodec': {'head_dim': 64},
 'nomic_bert': {'rope_theta': 1000.0},
 'olmo3': {'nested': True},
 'openai_privacy_filter': {'head_dim': 64,
                           'rope_parameters': {'beta_fast': 32.0,
                                               'beta_slow': 1.0,
                                               'factor': 32.0,
                                               'original_max_position_embeddings': 4096,
                                               'rope_type': 'yarn',
                                               'truncate': False},
                           'rope_theta': 150000.0},
 'pe_audio_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'pe_audio_video_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'pe_video_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'persimmon': {'partial_rotary_factor': 0.5},
 'phi': {'partial_rotary_factor': 0.5},
 'phimoe': {'rope_theta': 1000000.0},
 'qwen3': {'head_dim': 128},
 'qwen3_next': {'head_dim': 256, 'partial_rotary_factor': 0.25},
 'recurrent_gemma': {'partial_rotary_factor': 0.5},
 'seed_oss': {'head_dim': 128},
 'smollm3': {'rope_theta': 2000000.0},
 'solar_open': {'head_dim': 128, 'rope_theta': 1000000.0},
 'stablelm': {'partial_rotary_factor': 0.25},
 't5gemma2_text': {'head_dim': 256, 'nested': True},
 'timesfm2_5': {'head_dim': 80},
 'ultrabert': {'nested': True},
 'vaultgemma': {'head_dim': 256},
 'xcodec2': {'head_dim': 64},
 'zaya': {'head_dim': 128, 'nested': True}}
# fmt: on

# RoPE-related keys (by name) that a reading must understand or refuse.
_ROPE_KEY = re.compile(
    r"rope|rotary|theta|head_dim|n_head|heads|kv_channels|n_embd|d_model|base_freq|partial"
    r"|interleave|position_embedding_type|per_layer_config"
)
#: Keys every reading understands.
_GENERIC_READS = frozenset(
    {
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "partial_rotary_factor",
        "head_dim",
        "num_attention_heads",
        "hidden_size",
        "max_position_embeddings",
        "original_max_position_embeddings",
        "model_type",
        "layer_types",
    }
)
#: Keys that match :data:`_ROPE_KEY` but do not change the RoPE of the attention layers.
_HARMLESS = frozenset(
    {
        "num_key_value_heads",
        "num_kv_heads",
        "v_head_dim",
        "qk_nope_head_dim",
        "qk_head_dim",
        "index_head_dim",
        "index_n_heads",
        "linear_head_dim",
        "linear_num_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "mamba_n_heads",
        "n_mamba_heads",
        "interleave_moe_layer_step",
        "no_rope_layer_interval",
        "num_attention_heads_per_layer",
        "resampler_heads",
        "heads_per_ngram",
        "prediction_head_size",
        "num_local_experts",
    }
)


def _check_config(config: object) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping (a parsed config.json, or config.to_dict()), got "
            f"{type(config).__name__}"
        )
    return config


def _text_part(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The dict to read: ``config["text_config"]`` for a multimodal wrapper, else ``config``.

    A wrapper (Gemma 3, Llava, ...) keeps the language model's keys in ``text_config``; it
    is read when the top level has no head size of its own. A wrapper whose family is
    refused (Qwen2-VL, ...) is refused before its text part is looked at.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping) and not any(
        config.get(key) is not None
        for key in ("head_dim", "hidden_size", "num_attention_heads", "n_embd", "d_model")
    ):
        family, model_type = _family(config)
        if family.refuse is not None:
            raise ValueError(f"model_type {model_type!r} is not supported: {family.refuse}")
        return text
    return config


def _family(config: Mapping[str, Any]) -> tuple[_Family, str | None]:
    model_type = config.get("model_type")
    if model_type is None:
        return _GENERIC, None
    if not isinstance(model_type, str):
        raise TypeError(
            f"config['model_type'] must be a string such as 'llama', got {model_type!r} of "
            f"type {type(model_type).__name__}"
        )
    return _FAMILIES.get(model_type, _GENERIC), model_type


def _checked_family(config: Mapping[str, Any]) -> _Family:
    """The family row of ``config``; raises if the family or one of its keys is refused."""
    family, model_type = _family(config)
    what = "a config without model_type" if model_type is None else f"model_type {model_type!r}"
    if family.refuse is not None:
        raise ValueError(f"{what} is not supported: {family.refuse}")
    _refuse_unknown_keys(config, family, what)
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if isinstance(rope, Mapping):
            inner = [rope, *(v for v in rope.values() if isinstance(v, Mapping))]
            for part in inner:
                for key in ("mrope_section", "mrope_interleaved"):
                    if part.get(key) is not None:
                        raise ValueError(f"config[{holder!r}] holds {key!r}: {_MULTI_AXIS}")
                kind = part.get("rope_type", part.get("type"))
                if kind in ("mrope", "3d", "axial"):
                    raise ValueError(
                        f"config[{holder!r}] has rope type {kind!r}: "
                        f"{_VISION if kind == 'axial' else _MULTI_AXIS}"
                    )
    return family


def _refuse_unknown_keys(config: Mapping[str, Any], family: _Family, what: str) -> None:
    unknown = sorted(
        key
        for key, value in config.items()
        if isinstance(key, str)
        and _ROPE_KEY.search(key)
        and value is not None
        and value is not False
        and key not in _GENERIC_READS
        and key not in _HARMLESS
        and key not in family.reads
    )
    if unknown:
        raise ValueError(
            f"{what}: config key(s) {', '.join(map(repr, unknown))} change how this family "
            f"rotates and are not understood by fastpe's reading of it; fastpe refuses rather "
            f"than guess (drop the key(s) only if the model's code ignores them)"
        )


def _with_class_defaults(config: Mapping[str, Any], family: _Family) -> Mapping[str, Any]:
    """``config`` with the family's class defaults (:data:`_CLASS_DEFAULTS`) filled in where
    it leaves the key out (a null value is kept: transformers derives it)."""
    defaults = _CLASS_DEFAULTS.get(config.get("model_type"))  # type: ignore[arg-type]
    if not defaults:
        return config
    dicts = [
        d
        for d in (config.get("rope_parameters"), config.get("rope_scaling"))
        if isinstance(d, Mapping) and d
    ]
    theta_given = any(config.get(k) is not None for k in family.theta_keys) or any(
        d.get("rope_theta") is not None or _is_nested(d) for d in dicts
    )
    partial_given = any(config.get(k) is not None for k in family.partial_keys) or any(
        d.get("partial_rotary_factor") is not None for d in dicts
    )
    if defaults.get("nested") and not dicts and not theta_given:
        raise ValueError(
            f"model_type {config.get('model_type')!r}: the config gives no rope_theta or "
            f"rope_parameters, and transformers' default gives each layer type its own; write "
            f"them out (config.to_dict() of the loaded config has them)"
        )
    filled = dict(config)
    if "head_dim" in defaults and "head_dim" not in config:
        filled["head_dim"] = defaults["head_dim"]
    if "rope_theta" in defaults and not theta_given:
        filled["rope_theta"] = defaults["rope_theta"]
    if "partial_rotary_factor" in defaults and not partial_given:
        filled["partial_rotary_factor"] = defaults["partial_rotary_factor"]
    if "rope_parameters" in defaults and not dicts:
        filled["rope_parameters"] = dict(defaults["rope_parameters"])
    return filled


def _first(config: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """``(key, value)`` of the first of ``keys`` set (not null) in ``config``."""
    for key in keys:
        value = config.get(key)
        if value is not None:
            return key, value
    return (keys[0] if keys else ""), None


def rotary_dim_from_config(head_dim: int, partial_rotary_factor: float = 1.0) -> int:
    """Number of rotated channels per head: ``int(head_dim * partial_rotary_factor)``.

    Parameters
    ----------
    head_dim : int
        Channels per attention head, > 0.
    partial_rotary_factor : float, default 1.0
        Fraction of each head that is rotated, in ``(0, 1]`` (``partial_rotary_factor`` in
        configs such as Phi, StableLM, GLM).

    Returns
    -------
    int
        The rotary dimension, truncated as ``transformers`` does.

    Raises
    ------
    TypeError
        If ``head_dim`` is not an integer or ``partial_rotary_factor`` not a real number.
    ValueError
        If an argument is out of range or the result is not a positive even number.

    Examples
    --------
    >>> rotary_dim_from_config(128, 0.75)
    96
    """
    head_dim = _check_count(head_dim, "head_dim")
    factor = _check_real(partial_rotary_factor, "partial_rotary_factor")
    if factor > 1.0:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial_rotary_factor!r}")
    rotary_dim = int(head_dim * factor)
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(
            f"int(head_dim * partial_rotary_factor) = int({head_dim} * {factor!r}) = "
            f"{rotary_dim} must be a positive even number of rotated channels; check "
            f"head_dim and partial_rotary_factor"
        )
    return rotary_dim


def _layer_entry(value: Any, layer: int, key: str) -> Any:
    """``value[layer]`` of a per-layer list (or dict keyed by int or str, e.g. ``"05"``)."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            if name == layer or (isinstance(name, str) and name.isdigit() and int(name) == layer):
                return item
        return None
    if isinstance(value, (list, tuple)):
        if layer >= len(value):
            raise ValueError(
                f"layer={layer} is past the end of config[{key!r}] ({len(value)} entries)"
            )
        return value[layer]
    raise TypeError(f"config[{key!r}] must be a list, one entry per layer, got {value!r}")


def _head_dim(config: Mapping[str, Any], family: _Family, layer: int | None) -> int:
    per_layer = config.get("per_layer_config") if "per_layer_config" in family.reads else None
    if per_layer:
        if layer is None:
            raise ValueError(
                "config['per_layer_config'] gives some layers their own head size; pass "
                "layer=i (the layer's index) to read the head size of layer i"
            )
        entry = _layer_entry(per_layer, layer, "per_layer_config")
        if isinstance(entry, Mapping) and entry.get("head_dim") is not None:
            return _check_count(
                entry["head_dim"], f"config['per_layer_config'][{layer}]['head_dim']"
            )
    key, head_dim = _first(config, family.head_dim_keys)
    if head_dim is not None:
        return _check_count(head_dim, f"config[{key!r}]")
    size_key, hidden_size = _first(config, family.hidden_size_keys)
    heads_key, num_heads = _first(config, family.num_heads_keys)
    if hidden_size is None or num_heads is None:
        head = f"{key!r}, or " if key else ""
        raise ValueError(
            f"config needs {head}{size_key!r} and {heads_key!r} to derive the head size; "
            f"add the model's head size as config[{(key or 'head_dim')!r}]"
        )
    return _check_count(hidden_size, f"config[{size_key!r}]") // _check_count(
        num_heads, f"config[{heads_key!r}]"
    )


def head_dim_from_config(config: Mapping[str, Any], *, layer: int | None = None) -> int:
    """Channels per attention head of a Hugging Face config dict (the part RoPE rotates in).

    ``head_dim`` when the config sets it (not null), else ``hidden_size //
    num_attention_heads``, as ``transformers`` derives it; families that name these
    differently are read under their own keys (GPT-J's ``n_embd`` / ``n_head``, DBRX's
    ``d_model`` / ``n_heads``, JetMoE's ``kv_channels``, Zamba2's ``attention_head_dim``).
    For latent-attention families (DeepSeek-V2/V3, MiniCPM3, GLM-4-MoE-lite, ...) it is
    ``qk_rope_head_dim``: RoPE rotates the separate ``q_pe`` / ``k_pe`` part of that size.
    A multimodal config is read in its ``text_config``. Use it to reshape ``(..., heads *
    head_dim)`` projections into heads before :func:`fastpe.apply_rope`.

    Parameters
    ----------
    config : mapping
        A model's ``config.json`` as a dict.
    layer : int or None
        The layer's index, for configs whose layers differ in head size
        (``per_layer_config``).

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``config`` is not a mapping or a size is not an integer (``128.0`` is not).
    ValueError
        If the head size cannot be derived, a size is not > 0, or the family is refused
        (see :func:`rope_kwargs_from_config`).

    Examples
    --------
    >>> head_dim_from_config({"hidden_size": 4096, "num_attention_heads": 32})
    128
    >>> head_dim_from_config({"hidden_size": 7168, "num_attention_heads": 128, "head_dim": 192})
    192
    >>> head_dim_from_config({"model_type": "gptj", "n_embd": 4096, "n_head": 16})
    256
    """
    config = _text_part(_check_config(config))
    family = _checked_family(config)
    config = _with_class_defaults(config, family)
    if layer is not None:
        layer = _check_layer(layer)
    return _head_dim(config, family, layer)


def _check_layer(layer: object) -> int:
    layer = _check_int(layer, "layer")
    if layer < 0:
        raise ValueError(f"layer must be >= 0 (a layer's index), got {layer}")
    return layer


def _is_nested(value: Mapping[str, Any]) -> bool:
    """New-style per-layer-type rope parameters: ``{"full_attention": {...}, ...}``."""
    items = list(value.values())
    return (
        bool(items)
        and all(item is None or isinstance(item, Mapping) for item in items)
        and any(isinstance(item, Mapping) for item in items)
    )


def _merge_rope_dicts(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any] | None:
    """The config's rope dict: ``rope_parameters`` and/or ``rope_scaling`` (must agree).

    None when the dict of ``layer_type`` is null: a layer type without RoPE.
    """
    merged: dict[str, Any] = {}
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise TypeError(
                f"config[{name!r}] must be a dict or null, got {value!r} of type "
                f"{type(value).__name__}"
            )
        if _is_nested(value):
            if layer_type is None:
                raise ValueError(
                    f"config[{name!r}] holds one rope dict per layer type "
                    f"({', '.join(map(repr, value))}); pass layer_type=... (or layer=i) to "
                    f"pick one"
                )
            if layer_type not in value:
                raise ValueError(
                    f"layer_type {layer_type!r} is not in config[{name!r}]; known layer types "
                    f"are {', '.join(map(repr, value))}"
                )
            value = value[layer_type]
            if value is None:
                return None
        elif layer_type is not None:
            raise ValueError(
                f"layer_type={layer_type!r} was given but config[{name!r}] is not split by "
                f"layer type; drop layer_type"
            )
        for key, item in value.items():
            if key in merged and merged[key] != item:
                raise ValueError(
                    f"config['rope_parameters'][{key!r}] ({merged[key]!r}) and "
                    f"config['rope_scaling'][{key!r}] ({item!r}) disagree; keep only one"
                )
            merged[key] = item
    return merged


def _config_value(
    config: Mapping[str, Any], rope: Mapping[str, Any], keys: tuple[str, ...], default: Any
) -> tuple[str, Any]:
    """``(key, value)`` from the top level of ``config`` or from its rope dict (must agree)."""
    key, top = _first(config, keys)
    inner = rope.get(key)
    if top is not None and inner is not None and top != inner:
        raise ValueError(
            f"config[{key!r}] ({top!r}) and the rope dict's {key!r} ({inner!r}) disagree; "
            f"keep only one"
        )
    if inner is not None:
        return key, inner
    return key, (default if top is None else top)


def _layer_type_of(config: Mapping[str, Any], layer: int, layer_type: str | None) -> str | None:
    types = config.get("layer_types")
    if not isinstance(types, (list, tuple)) or not types:
        return layer_type
    derived = _layer_entry(types, layer, "layer_types")
    if layer_type is not None and derived != layer_type:
        raise ValueError(
            f"layer_type={layer_type!r} but config['layer_types'][{layer}] is {derived!r}; "
            f"pass one of them"
        )
    return derived


def _uses_layer_type(config: Mapping[str, Any], family: _Family) -> bool:
    """Whether the config's RoPE differs by layer type."""
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if isinstance(value, Mapping) and _is_nested(value):
            return True
    return family.local_theta_key is not None and config.get(family.local_theta_key) is not None


def _all_layers(key: str, values: Any, layer: int | None) -> Any:
    """The entry of per-layer list ``values`` for ``layer``; without a layer, the one value
    all layers share (else a ValueError asking for ``layer``)."""
    if layer is not None:
        return _layer_entry(values, layer, key)
    items = list(values.values()) if isinstance(values, Mapping) else list(values)
    if items and all(item == items[0] for item in items):
        return items[0]
    raise ValueError(
        f"config[{key!r}] differs from layer to layer ({items[:8]!r}"
        f"{', ...' if len(items) > 8 else ''}); pass layer=i (the layer's index) to read "
        f"layer i"
    )


_NO_ROPE = object()  # "this layer has no RoPE", from a per-layer key


def _local_theta(
    config: Mapping[str, Any], family: _Family, layer_type: str | None
) -> tuple[Mapping[str, Any], str | None]:
    """``(config, layer type for the rope dicts)`` with Gemma 3's published local theta.

    As published, Gemma 3 gives sliding-window layers ``rope_local_base_freq`` and no
    scaling, full-attention layers ``rope_theta`` and ``rope_scaling``; the rope dicts are
    then not split by layer type. Other configs come back unchanged.
    """
    local = family.local_theta_key
    local_theta = None if local is None else config.get(local)
    without = {k: v for k, v in config.items() if k != local}
    if local is None or local_theta is None or _uses_layer_type(without, family):
        return config, layer_type
    if layer_type is None:
        raise ValueError(
            f"config[{local!r}] gives sliding-window layers their own theta; pass "
            f"layer_type='sliding_attention' or 'full_attention' (or layer=i)"
        )
    if layer_type not in ("sliding_attention", "full_attention"):
        raise ValueError(
            f"layer_type must be 'sliding_attention' or 'full_attention' for a config "
            f"with {local!r}, got {layer_type!r}"
        )
    if layer_type == "sliding_attention":
        dropped = ("rope_scaling", "rope_parameters")
        config = {k: v for k, v in config.items() if k not in dropped} | {"rope_theta": local_theta}
    return config, None


def _per_layer_theta(config: Mapping[str, Any], family: _Family, layer: int | None) -> Any:
    """Theta of the layer from ``layer_rope_theta`` (None: not set; ``_NO_ROPE``: a NoPE
    layer, also from ``no_rope_layers``)."""
    theta = None
    if "layer_rope_theta" in family.reads and config.get("layer_rope_theta") is not None:
        theta = _all_layers("layer_rope_theta", config["layer_rope_theta"], layer)
        if not theta:
            return _NO_ROPE  # theta 0: a NoPE layer
    if "no_rope_layers" in family.reads and config.get("no_rope_layers"):
        values = config["no_rope_layers"]
        if layer is not None and not _layer_entry(values, layer, "no_rope_layers"):
            return _NO_ROPE  # no_rope_layers[i] == 0: layer i has no RoPE
        if layer is None and not all(values):
            raise ValueError(
                "config['no_rope_layers'] marks some layers as having no RoPE (entries 0); "
                "pass layer=i (the layer's index) to read layer i"
            )
    return theta


def rope_kwargs_from_config(
    config: Mapping[str, Any],
    *,
    seq_len: int | None = None,
    layer_type: str | None = None,
    layer: int | None = None,
) -> dict[str, Any] | None:
    """Keyword arguments of :func:`fastpe.apply_rope` read from a Hugging Face config dict.

    The result splats straight into ``apply_rope``: ``apply_rope(q, **kw)``. The head size,
    which ``apply_rope`` takes from the array's shape, is :func:`head_dim_from_config`.

    Parameters
    ----------
    config : mapping
        A model's ``config.json`` as a dict (or ``config.to_dict()``). Read keys:
        ``model_type`` (the family: it decides the layout, the sign and the names of the
        other keys, see Notes), ``rope_theta`` (default 10000.0), ``head_dim`` (else
        ``hidden_size // num_attention_heads``), ``partial_rotary_factor`` (default 1.0),
        ``rope_scaling`` and/or ``rope_parameters``, ``max_position_embeddings`` and, for
        ``yarn``, ``longrope`` and ``llama3``, a top-level ``original_max_position_embeddings``
        (as Phi-3 configs have). Keys of the new-style ``rope_parameters`` dict
        (``rope_theta``, ``partial_rotary_factor``) may sit at either level; a value given at
        both levels must agree. A multimodal wrapper is read in its ``text_config``.
    seq_len : int or None
        Sequence length the model will run at. It is used to validate the config now (see
        below) and returned under ``"seq_len"``; omitted from the result when None.
    layer_type : str or None
        For configs whose layers differ by type (``rope_parameters`` with one dict per layer
        type, e.g. ``{"full_attention": {...}, "sliding_attention": {...}}``, or Gemma 3's
        ``rope_local_base_freq``), the layer type to read.
    layer : int or None
        The layer's index, for configs with per-layer keys (``layer_types``,
        ``no_rope_layers``, ``layer_rope_theta``, ``rope_scaling_layers``,
        ``per_layer_config``); it also picks the layer type from ``layer_types``. Without
        it, such a key must be the same for every layer, else a ValueError asks for it.

    Returns
    -------
    dict or None
        ``{"layout": "half" | "interleaved", "base": float, "rotary_dim": int, "scaling":
        dict | None, "max_position_embeddings": int | None}`` (plus ``"seq_len"`` when
        given, and ``"inverse": True`` for a family that rotates by ``-theta``), every key
        an ``apply_rope`` argument. ``scaling`` is a fresh dict holding the scaling
        parameters only: ``rope_type`` set (from the legacy ``type`` if need be, which is
        dropped), ``rope_theta`` and ``partial_rotary_factor`` removed (they are in ``base``
        and ``rotary_dim``; ``proportional`` keeps ``partial_rotary_factor``), and a
        top-level ``original_max_position_embeddings`` copied in; it is ``None`` when the
        rope type is ``default``.

        ``None`` when the layer asked for has no RoPE: a null entry in ``rope_parameters``
        for its layer type, a 0 in ``no_rope_layers`` or ``layer_rope_theta``, or Zamba2
        with ``use_mem_rope`` false. ``apply_rope(q, **None)`` raises, never rotates.

    Raises
    ------
    TypeError
        If ``config`` is not a mapping, or a value has the wrong type (a string where a
        number belongs, ``4096.0`` where a count belongs, a rope dict that is not a dict).
    ValueError
        If a needed key is missing or invalid, values given twice disagree, the scaling
        parameters are invalid (the config is checked by computing its frequencies with
        :func:`fastpe.scaling.rope_frequencies`, so errors surface here rather than
        mid-model), or the config is one fastpe cannot reproduce: a refused family
        (multi-axis M-RoPE, vision RoPE, DeepSeek-V4, encoder-decoder heads), or a
        RoPE-related key the family's reading does not understand (named in the message).

    Notes
    -----
    The layout is the family's, from ``model_type``: ``"half"`` for the ``rotate_half``
    families (Llama, Mistral, Qwen2, Phi-3, Gemma, ...), ``"interleaved"`` for GPT-J and
    CodeGen (``rotate_every_two``), Cohere, GLM, GLM-4, Helium, ERNIE 4.5, DeepSeek-V2 and
    Llama 4 (complex multiplication), and DeepSeek-V3 and its kin when ``rope_interleave``
    is true (or absent: transformers' default is true). Those last ones return the rotated
    tensor in the *half* order
    (:func:`output_layout_from_config`): ``fastpe.layout.interleaved_to_half(out,
    rotary_dim=kw["rotary_dim"])`` gives HF's tensor; attention scores are the same either
    way. The table of families is in the README.

    ``dynamic`` scaling depends on the sequence length. fastpe (``seq_len`` not given: the
    largest position of the call plus one) computes what a *fresh* HF module computes for
    that call. HF's module is stateful: it keeps the frequencies of the longest sequence it
    has seen (until a sequence shorter than ``max_position_embeddings`` resets it); pass
    ``seq_len=`` that longest length to get the stateful result.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> config = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
    ...           "max_position_embeddings": 131072,
    ...           "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    ...                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...                            "original_max_position_embeddings": 8192}}
    >>> kw = rope_kwargs_from_config(config)
    >>> kw["base"], kw["rotary_dim"], kw["scaling"]["factor"]
    (500000.0, 128, 8.0)
    >>> head_dim = head_dim_from_config(config)
    >>> q = np.ones((1, 5, 32 * head_dim), np.float32).reshape(1, 5, 32, head_dim)
    >>> fastpe.apply_rope(q, out=q, offset=100, **kw) is q
    True
    >>> rope_kwargs_from_config({"model_type": "gptj", "n_embd": 4096, "n_head": 16,
    ...                          "rotary_dim": 64})["layout"]
    'interleaved'
    """
    config = _text_part(_check_config(config))
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(
            f"layer_type must be a string such as 'full_attention', or None, got "
            f"{layer_type!r} of type {type(layer_type).__name__}"
        )
    if layer is not None:
        layer = _check_layer(layer)
    family = _checked_family(config)
    config = _with_class_defaults(config, family)
    if family.reads & {"position_embedding_type"}:
        kind = config.get("position_embedding_type")
        if kind is not None and kind != "rotary":
            raise ValueError(
                f"config['position_embedding_type'] is {kind!r}: this model has no RoPE"
            )
    if "alibi" in family.reads and config.get("alibi"):
        raise ValueError("config['alibi'] is true: this model uses ALiBi, not RoPE")
    if "use_mem_rope" in family.reads and not config.get("use_mem_rope"):
        return None  # Zamba2 rotates only with use_mem_rope
    if layer is not None and _uses_layer_type(config, family):
        layer_type = _layer_type_of(config, layer, layer_type)

    config, merge_type = _local_theta(config, family, layer_type)
    rope = _merge_rope_dicts(config, merge_type)
    if rope is None:
        return None
    for old, new in family.type_aliases:
        if _resolve_rope_type(rope) == old:
            rope = {k: v for k, v in rope.items() if k != "type"} | {"rope_type": new}

    theta_key, theta = _config_value(config, rope, family.theta_keys, family.default_theta)
    per_layer = _per_layer_theta(config, family, layer)
    if per_layer is _NO_ROPE:
        return None
    if per_layer is not None:
        theta_key, theta = "layer_rope_theta", per_layer
    base = _check_real(theta, f"config[{theta_key!r}]")
    holder = config.get(family.theta_holder) if family.theta_holder else None
    if isinstance(holder, Mapping) and holder.get("rope_theta") not in (None, base):
        raise ValueError(
            f"config[{family.theta_holder!r}]['rope_theta'] is {holder['rope_theta']!r} but "
            f"the rope theta read is {base!r} (config[{theta_key!r}], or the default): the "
            f"checkpoint's code uses the first, transformers 5.24 the second; set "
            f"config['rope_theta'] to the value the model was trained with"
        )
    partial_key, partial = _config_value(config, rope, family.partial_keys, 1.0)
    partial = _check_real(partial, f"config[{partial_key!r}]")
    head_dim = _head_dim(config, family, layer)
    rotary_key, rotary = _first(config, family.rotary_dim_keys)
    rope_type = _resolve_rope_type(rope)
    if rotary is not None:
        rotary_dim = _check_count(rotary, f"config[{rotary_key!r}]")
        if rotary_dim % 2 or rotary_dim > head_dim:
            raise ValueError(
                f"config[{rotary_key!r}] must be even and <= the head size {head_dim}, got "
                f"{rotary_dim}"
            )
    elif rope_type == "proportional":
        rotary_dim = head_dim  # the formula turns the first part, over the whole head
    else:
        rotary_dim = rotary_dim_from_config(head_dim, partial)

    max_pos_key, max_pos = _first(config, family.max_pos_keys)
    if max_pos is not None:
        max_pos = _check_count(max_pos, f"config[{max_pos_key!r}]")

    if "rope_scaling_layers" in family.reads and config.get("rope_scaling_layers") is not None:
        scaled_layers = config["rope_scaling_layers"]
        if layer is None:
            n_layers = config.get("num_hidden_layers")
            if not (isinstance(n_layers, int) and set(range(n_layers)) <= set(scaled_layers)):
                raise ValueError(
                    "config['rope_scaling_layers'] scales only some layers' RoPE; pass "
                    "layer=i (the layer's index) to read layer i"
                )
        elif layer not in scaled_layers:
            rope_type = "default"  # this layer keeps the theta, without the scaling
    scaling: dict[str, Any] | None = None
    if rope_type != "default":
        scaling = {
            key: value
            for key, value in rope.items()
            if key not in _CONFIG_LEVEL_KEYS and key != "type"
        }
        scaling["rope_type"] = rope_type
        if rope_type == "proportional" and partial != 1.0:
            scaling["partial_rotary_factor"] = partial
        if rope_type in _NEEDS_ORIGINAL_CONTEXT:
            _, original = _config_value(config, rope, ("original_max_position_embeddings",), None)
            if original is not None:
                scaling["original_max_position_embeddings"] = original

    # Validate now: raises for missing keys, wrong lengths, bad values.
    _, attention_factor = rope_frequencies(
        rotary_dim, base=base, scaling=scaling, seq_len=seq_len, max_position_embeddings=max_pos
    )
    layout = _layout(config, family)
    kwargs: dict[str, Any] = {
        "layout": layout,
        "base": base,
        "rotary_dim": rotary_dim,
        "scaling": scaling,
        "max_position_embeddings": max_pos,
    }
    if seq_len is not None:
        kwargs["seq_len"] = int(seq_len)
    if family.sign < 0:
        if attention_factor != 1.0:
            raise ValueError(
                f"this family rotates by -theta, which apply_rope does as inverse=True; that "
                f"also divides by the attention factor {attention_factor!r} of rope type "
                f"{rope_type!r} instead of multiplying: not supported"
            )
        kwargs["inverse"] = True
    return kwargs


def _layout(config: Mapping[str, Any], family: _Family) -> str:
    key = family.interleave_key
    if key is None:
        return family.layout
    # absent: the config class's default (True); present, as transformers tests it
    return "interleaved" if config.get(key, family.interleave_default) else "half"


def output_layout_from_config(config: Mapping[str, Any]) -> str:
    """The channel order in which the family's own code returns the rotated q and k.

    Usually the layout it rotates in (``rope_kwargs_from_config(config)["layout"]``).
    DeepSeek-V3 with ``rope_interleave`` (and Mistral 4, Youtu, GLM-4-MoE-lite,
    DeepSeek-V3.2, LongCat-Flash, ...) rotates interleaved pairs but returns them in the
    half order (``apply_rotary_pos_emb_interleave``); to get the same tensor, convert
    fastpe's result with ``fastpe.layout.interleaved_to_half(out, rotary_dim=rotary_dim)``.
    Attention scores ``q . k`` are the same either way.

    Examples
    --------
    >>> output_layout_from_config({"model_type": "deepseek_v3", "head_dim": 64,
    ...                            "rope_interleave": True})
    'half'
    >>> output_layout_from_config({"model_type": "gptj", "n_embd": 4096, "n_head": 16})
    'interleaved'
    """
    config = _text_part(_check_config(config))
    family = _checked_family(config)
    layout = _layout(config, family)
    if layout == "interleaved" and family.output_layout is not None:
        return family.output_layout
    return layout
