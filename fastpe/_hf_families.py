"""The table of model families read by :mod:`fastpe.hf_config`, one row per ``model_type``.

Each row (:class:`_Family`) says which keys hold the head size, the head count, the rope
theta and the partial rotary factor, in which channel layout and with which sign the
family's modelling code rotates, which extra keys it reads, which class defaults fill the
keys a saved config leaves out, and which families are refused (and why). A second table
(:class:`_LayerTypes`) says how a family's config class derives ``layer_types`` where the
config gives none, a third (:class:`_RopeGate`) which layers a family's code rotates where
it skips RoPE on some (:class:`_NoRopeLayers`: the NoPE layers a class derives).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ._hf_model_types import _WRAPPER_TEXT_TYPES
from .scaling import _check_int

# --------------------------------------------------------------------------- families

_MULTI_AXIS = (
    "this family's multi-axis RoPE (its own arrangement of the time, height and width "
    "positions over the pairs) is not read yet; fastpe.apply_rope takes it as pair_axes= "
    "with (n_axes, seq) positions if you build pair_axes from the model's code"
)
_VISION = (
    "2-D/3-D axial RoPE of a vision encoder (each pair rotated by a patch's row or column) "
    "is not supported yet"
)
_ENC_DEC = (
    "encoder and decoder heads of this family are sized by their own keys in sub-configs; "
    "read the sub-config of the stack you rotate (Dia: config['encoder_config'] or "
    "config['decoder_config']; T5Gemma: config['encoder'] or config['decoder']; fastpe "
    "does not guess which)"
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
    # the config class derives the head size as the sum of these keys, each its class
    # default where left out (Mistral 4: qk_nope_head_dim + qk_rope_head_dim), where no key
    # of ``head_dim_keys`` is given
    head_dim_sum: tuple[str, ...] = ()
    # keys that size the rotation beside the head size read (DeepSeek-V3's rotary class
    # builds head_dim frequencies, its attention rotates qk_rope_head_dim channels): where
    # given or set by a class default, each must equal the head size read, else the model's
    # shapes do not match, and the config is refused naming both
    same_size_keys: tuple[str, ...] = ()
    # size keys whose null value the config class refuses (a strict integer field, or an
    # alias of one: transformers 5.24 raises), where the generic reading derives a null
    # head_dim: refused naming the key
    null_refused: tuple[str, ...] = ()
    # the config class derives the partial rotary factor, where none is given, as the
    # first of ``checked_rotary_keys`` over the head size of ``head_dim_sum`` (Mistral 4)
    derived_partial: bool = False
    # the config class overwrites head_dim with hidden_size // num_attention_heads whatever
    # the config gives (Unlimited-OCR's and DeepSeek-OCR 2's text models): derived so, and a
    # given head_dim that disagrees is refused naming both values
    class_head_dim: bool = False
    # the head size derived where no key gives it: head_dim_factor * hidden_size // heads
    head_dim_factor: int = 1
    hidden_size_keys: tuple[str, ...] = ("hidden_size",)
    num_heads_keys: tuple[str, ...] = ("num_attention_heads",)
    # head counts of another stack that the family's code rotates with the head size from
    # ``num_heads_keys`` (Moonshine's encoder): they must agree, else the config is refused
    same_heads_keys: tuple[str, ...] = ()
    theta_keys: tuple[str, ...] = ("rope_theta",)
    default_theta: float = 10000.0
    partial_keys: tuple[str, ...] = ("partial_rotary_factor",)
    rotary_dim_keys: tuple[str, ...] = ()  # keys holding the rotated channels directly
    # keys that state the rotated channels but that the family's code does not read (it
    # rotates head size times the partial factor): read where they agree, else refused
    checked_rotary_keys: tuple[str, ...] = ()
    max_pos_keys: tuple[str, ...] = ("max_position_embeddings",)
    theta_holder: str | None = None  # a sub-dict that may hold another rope_theta
    # the config class builds one rope dict per layer type from flat keys (Gemma 3, OLMo 3,
    # ModernBERT): ``(types, full, sliding)``, with ``types`` the layer types a flat
    # rope_scaling is merged into (dict.update into a default dict) and ``full``/``sliding``
    # each ``(top-level key, default)``, the theta a layer type's dict gets when it holds
    # none (key None: the default alone); read by fastpe.hf_config._split_by_type
    split_by_type: (
        tuple[tuple[str, ...], tuple[str | None, float], tuple[str | None, float]] | None
    ) = None
    reads: frozenset[str] = frozenset()  # further RoPE keys this family's row understands
    refuse: str | None = None  # why configs of this family are refused
    # rope types this family's config class renames (Phi-3 reads "yarn" as "longrope")
    type_aliases: tuple[tuple[str, str], ...] = ()
    # the one key whose dict the class renames them in (None: both); a dict under the
    # other key that names an old type alone is refused (transformers fails on it there)
    aliases_in: str | None = None
    # "dynamic" with a non-zero "alpha" is NTK-alpha in this family's code (HunYuan)
    ntk_alpha: bool = False
    # the rope dict's short_mscale / long_mscale are the attention factor of a scaled rope
    # (PhiMoE's rotary class multiplies cos and sin by them instead)
    mscale_factor: bool = False
    # multi-axis RoPE (see fastpe._hf_axes): how the mrope_section is arranged over the
    # pairs ("split", "interleaved", "ernie"), and the section the code uses when the
    # config has none
    mrope: str | None = None
    mrope_default: tuple[int, ...] = ()
    # rope dicts keyed by labels, not layer types (DeepSeek-V4): (layer type, label) pairs,
    # and the class defaults of the thetas the family's config class builds them from
    # per_layer_config sets only head counts for this family's RoPE: its rotary module is
    # built from the top-level config, so an entry that changes what RoPE reads (the head
    # size, theta, rope dicts) is refused, and the others do not change the reading
    per_layer_heads_only: bool = False
    # the model reads its sizes and rope keys from the top-level config only (one rotary
    # class, each attention built from the whole config): transformers 5.24 fails
    # (AmbiguousGlobalPerLayerAttributeError) where per_layer_config sets one of them, so
    # fastpe refuses an entry that sets a RoPE key (head sizes, head counts, rope keys)
    per_layer_global: bool = False
    # the family's rotary code hard-codes base 10000, no scaling and the rotated channels of
    # its own keys (GPT-J, CodeGen): transformers ignores rope_theta, the rope dicts and
    # partial_rotary_factor there, so fastpe refuses any that would change the rotation
    hardcoded: bool = False
    # the family's rotary code reads the top-level rope_theta alone (ESM): transformers
    # ignores the rope dicts there, so fastpe refuses one that would change the rotation
    dicts_ignored: bool = False
    # top-level keys the family's config class does not read (it builds its rope dict from
    # its own keys), each with that key and its default: refused where the value differs
    # (late transformers 4 saved both, equal)
    flat_ignored: tuple[tuple[str, tuple[str, Any]], ...] = ()
    # top-level keys the family's config class drops (transformers never reads them there):
    # refused where set
    dropped: tuple[str, ...] = ()
    rope_labels: tuple[tuple[str, str], ...] = ()
    label_thetas: tuple[tuple[str, str, float], ...] = ()  # (label, top-level key, default)


#: The generic reading: ``transformers``' common keys and ``rotate_half``.
_GENERIC = _Family()

# DeepSeek-style latent attention: the rope part of a head, qk_rope_head_dim (its class
# default where left out: _CLASS_DEFAULTS). The config classes set head_dim to it; where a
# given head_dim is set after that (DeepSeek-V3's and the others with _MLA_SAME), the rotary
# class is sized by it and the attention by qk_rope_head_dim: the two must agree
_MLA = ("qk_rope_head_dim",)
_MLA_SAME = ("head_dim",)
# the attention rotates qk_rope_head_dim channels with the rotary class's head size times
# the partial rotary factor: the model fails where they differ (a partial factor applied
# to the rope part alone), so the two are checked
_MLA_CHECKED = ("qk_rope_head_dim",)
# the config classes' strict integer fields: a null one fails there (TypeError); head_dim
# too where the class types it so (a class that keeps a null head_dim sizes its rotary
# class by hidden_size // num_attention_heads: same_size_keys)
_MLA_NULL = ("qk_rope_head_dim", "qk_nope_head_dim")
_MLA_NULL_HEAD = (*_MLA_NULL, "head_dim")
_MROPE_READS = frozenset({"mrope_section", "mrope_interleaved"})


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
            hardcoded=True,
        )
        for name in ("gptj", "codegen")
    },
    # interleaved rotate_half / repeat_interleave of cos and sin
    **{
        name: _interleaved()
        for name in (
            "cohere",
            "cohere2",
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
    # the half layout; their config classes overwrite the head_dim field with hidden_size
    # // num_attention_heads (Cohere 2 and RecurrentGemma set it so too, but before the
    # given keys, which win: a given head_dim is read there)
    **{name: _Family(class_head_dim=True) for name in ("unlimited_ocr_text", "deepseek_ocr2_text")},
    # BLT's four modules, each with RoPE built from its own sub-config; their attention
    # sizes heads by hidden_size // num_attention_heads whatever head_dim says
    **{
        name: _interleaved(class_head_dim=True)
        for name in (
            "blt_local_encoder",
            "blt_local_decoder",
            "blt_global_transformer",
            "blt_patcher",
        )
    },
    # complex multiplication of (x[2i], x[2i+1]): interleaved pairs in and out
    # builds its rope dict from rope_theta alone: a rope_scaling is dropped
    "cohere2_moe": _interleaved(dropped=("rope_scaling",)),
    # (its config class overwrites a given head_dim with qk_rope_head_dim)
    "deepseek_v2": _interleaved(
        head_dim_keys=_MLA,
        checked_rotary_keys=_MLA_CHECKED,
        null_refused=_MLA_NULL,
        reads=frozenset({"qk_rope_head_dim"}),
    ),
    # (no_rope_layers derived where absent: _NO_ROPE_LAYERS)
    "llama4_text": _interleaved(reads=frozenset({"no_rope_layers", "no_rope_layer_interval"})),
    # interleaved when rope_interleave is true; HF's apply_rotary_pos_emb_interleave returns
    # the half order. Their config classes keep a given head_dim (set after qk_rope_head_dim
    # is copied there), on which the model fails unless it agrees
    **{
        name: _Family(
            interleave_key="rope_interleave",
            output_layout="half",
            head_dim_keys=_MLA,
            same_size_keys=_MLA_SAME,
            checked_rotary_keys=_MLA_CHECKED,
            null_refused=_MLA_NULL,
            reads=frozenset({"qk_rope_head_dim", "rope_interleave"}),
        )
        for name in ("deepseek_v3", "youtu", "axk1")
    },
    # as above, but head_dim is an alias of qk_rope_head_dim (attribute_map): a given
    # head_dim wins over a given qk_rope_head_dim
    "glm4_moe_lite": _Family(
        interleave_key="rope_interleave",
        output_layout="half",
        head_dim_keys=("head_dim", "qk_rope_head_dim"),
        checked_rotary_keys=("head_dim", "qk_rope_head_dim"),
        null_refused=_MLA_NULL_HEAD,  # (a null head_dim is a null qk_rope_head_dim)
        reads=frozenset({"qk_rope_head_dim", "rope_interleave"}),
    ),
    # Sarvam's latent attention: transformers 5.24 builds DeepSeek-V3's model (and rotary
    # class) from its config, as the rows above. Its config class sets head_dim to
    # qk_rope_head_dim whatever the config gives (its original configs hold kv_lora_rank +
    # qk_rope_head_dim there) and drops q_head_dim; it renames a rope_scaling of the type
    # "deepseek_yarn" to "yarn" (a rope_parameters of that type is kept, and fails)
    "sarvam_mla": _Family(
        interleave_key="rope_interleave",
        output_layout="half",
        head_dim_keys=("qk_rope_head_dim",),
        checked_rotary_keys=_MLA_CHECKED,
        null_refused=_MLA_NULL,
        reads=frozenset({"qk_rope_head_dim", "rope_interleave", "q_head_dim"}),
        type_aliases=(("deepseek_yarn", "yarn"),),
        aliases_in="rope_scaling",
    ),
    # as above, but the rotated head is head_dim * partial_rotary_factor (not
    # qk_rope_head_dim first); its config class sets head_dim to qk_nope_head_dim +
    # qk_rope_head_dim (a given head_dim is set after it) and the default partial factor to
    # qk_rope_head_dim / that sum. Its attention rotates qk_rope_head_dim channels with the
    # rotary class's head_dim * partial_rotary_factor: the model fails unless they agree, so
    # fastpe reads the head size from the two keys and checks both
    "mistral4": _Family(
        interleave_key="rope_interleave",
        output_layout="half",
        head_dim_keys=(),
        head_dim_sum=("qk_nope_head_dim", "qk_rope_head_dim"),
        same_size_keys=("head_dim",),
        checked_rotary_keys=("qk_rope_head_dim",),
        null_refused=_MLA_NULL_HEAD,
        derived_partial=True,
        reads=frozenset({"qk_rope_head_dim", "qk_nope_head_dim", "rope_interleave"}),
    ),
    # always apply_rotary_pos_emb_interleave (their config classes overwrite a given head_dim
    # with qk_rope_head_dim)
    **{
        name: _interleaved(
            output_layout="half",
            head_dim_keys=_MLA,
            checked_rotary_keys=_MLA_CHECKED,
            null_refused=_MLA_NULL_HEAD,
            per_layer_global=True,
            reads=frozenset({"qk_rope_head_dim", "per_layer_config"}),
        )
        for name in ("deepseek_v32", "glm_moe_dsa", "bailing_hybrid", "axk2")
    },
    # as above, but its config class keeps head_dim (a field of its own, default 64), which
    # sizes the rotary class: the model fails unless it agrees with qk_rope_head_dim
    "longcat_flash": _interleaved(
        output_layout="half",
        head_dim_keys=_MLA,
        same_size_keys=_MLA_SAME,
        checked_rotary_keys=_MLA_CHECKED,
        null_refused=_MLA_NULL_HEAD,
        per_layer_global=True,
        reads=frozenset({"qk_rope_head_dim", "per_layer_config"}),
    ),
    # as above, with per-layer NoPE (the others' code reads no no_rope_layers: such a key
    # is refused there, not read as NoPE layers their model rotates)
    "mistral_large4_text": _interleaved(
        output_layout="half",
        head_dim_keys=_MLA,
        checked_rotary_keys=_MLA_CHECKED,
        null_refused=_MLA_NULL_HEAD,
        per_layer_global=True,
        reads=frozenset(
            {"qk_rope_head_dim", "per_layer_config", "no_rope_layers", "no_rope_layer_interval"}
        ),
    ),
    # dots3's text model: its config class writes each layer type's partial factor from
    # that type's qk_rope_head_dim / head_dim (per_layer_config), over the rope dicts'
    "dots3_note_text": _interleaved(
        output_layout="half",
        rotary_dim_keys=("qk_rope_head_dim",),
        reads=frozenset({"qk_rope_head_dim", "per_layer_config"}),
    ),
    "dots3_note_audio_encoder": _interleaved(
        output_layout="half",
        reads=frozenset({"qk_rope_head_dim", "per_layer_config"}),
        class_head_dim=True,  # (its class overwrites head_dim with hidden_size // heads)
    ),
    # latent attention in the half layout (a given head_dim overwritten with
    # qk_rope_head_dim)
    **{
        name: _Family(
            head_dim_keys=_MLA,
            checked_rotary_keys=_MLA_CHECKED,
            null_refused=_MLA_NULL if name == "minicpm3" else _MLA_NULL_HEAD,
            reads=frozenset({"qk_rope_head_dim"}),
        )
        for name in ("minicpm3", "hy_v4")
    },
    # rotate_half with the sign flipped: rotates by -theta
    "nanochat": _Family(sign=-1),
    # Phi3Config renames "su" and "yarn" to "longrope" (so a "yarn" dict needs LongRoPE's keys)
    **{name: _Family(type_aliases=(("yarn", "longrope"),)) for name in ("phi3", "phi4_multimodal")},
    # head sizes under other names (transformers maps them with attribute_map)
    # (head_dim, an alias of kv_channels: _ALIAS_KEYS; kv_channels' class default 128
    # where neither is given, whatever hidden_size // num_attention_heads is)
    "jetmoe": _Family(
        head_dim_keys=("kv_channels", "head_dim"),
        null_refused=("kv_channels", "head_dim"),
        reads=frozenset({"kv_channels"}),
    ),
    # its attention acts on 2 * hidden_size: the class derives attention_head_dim as 2 *
    # hidden_size // num_attention_heads; head_dim is an alias (both given: _ALIAS_KEYS)
    "zamba2": _Family(
        head_dim_keys=("attention_head_dim", "head_dim"),
        null_refused=("attention_head_dim", "head_dim"),
        head_dim_factor=2,
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
            # GPTNeoXConfig takes rotary_emb_base and rotary_pct: a top-level rope_theta or
            # partial_rotary_factor is ignored by transformers 5.24
            flat_ignored=(
                ("rope_theta", ("rotary_emb_base", 10000)),
                ("partial_rotary_factor", ("rotary_pct", 0.25)),
            ),
        )
        for name in ("gpt_neox", "gpt_neox_japanese")
    },
    # one rope dict per layer type, built by the config class from flat keys: Gemma 3 as
    # published (sliding layers rotate with rope_local_base_freq, unscaled; rope_scaling
    # and rope_theta go to full-attention layers), OLMo 3 (the same, its sliding layers at
    # the class's theta), ModernBERT (global_rope_theta, local_rope_theta; rope_scaling to
    # both layer types)
    **{
        name: _Family(
            split_by_type=(
                ("full_attention",),
                ("rope_theta", 1_000_000.0),
                ("rope_local_base_freq", 10_000.0),
            ),
            reads=frozenset({"rope_local_base_freq"}),
        )
        for name in ("gemma3_text", "gemma3n_text", "t5gemma2_text", "t5gemma2_decoder")
    },
    "olmo3": _Family(
        split_by_type=(("full_attention",), ("rope_theta", 500_000.0), (None, 500_000.0))
    ),
    **{
        name: _Family(
            split_by_type=(
                ("full_attention", "sliding_attention"),
                ("global_rope_theta", 160_000.0),
                ("local_rope_theta", 10_000.0),
            ),
            reads=frozenset({"global_rope_theta", "local_rope_theta"}),
        )
        for name in ("modernbert", "modernbert-decoder")
    },
    # per-layer keys
    "smollm3": _Family(reads=frozenset({"no_rope_layers", "no_rope_layer_interval"})),
    # its config class reads the per-layer-type rope_parameters alone (a top-level
    # rope_theta reaches no dict: _GIVEN_DEFAULTS refuses it where a dict lacks one)
    "mellum": _Family(dropped=("partial_rotary_factor", "rope_scaling")),
    "granite_swa": _Family(reads=frozenset({"layer_rope_theta"})),
    "granitemoe_swa": _Family(reads=frozenset({"layer_rope_theta"})),
    **{
        name: _Family(reads=frozenset({"layer_rope_theta"}))
        for name in ("muse_glimmer_text", "muse_glimmer_assistant", "muse_spark_text")
    },
    "molmo2_text": _Family(reads=frozenset({"rope_scaling_layers"})),
    # per_layer_config, or where absent global_head_dim (the head size the config class
    # gives full-attention layers then: _LAYER_TYPES)
    **{
        name: _Family(reads=frozenset({"per_layer_config", "global_head_dim"}))
        for name in (
            "embedding_gemma2_text",
            "gemma4_text",
            "gemma4_unified_text",
            "diffusion_gemma_text",
        )
    },
    # refused
    # Step3.7's text model: sliding-window layers may have their own head count
    # (num_sliding_attention_heads, applied as per_layer_config entries); the head size and
    # the rope dicts per layer type are the top level's
    "step3p5": _Family(
        reads=frozenset({"num_sliding_attention_heads", "per_layer_config"}),
        per_layer_heads_only=True,
    ),
    # one rope dict per label: "main" for sliding-window layers, "compress" for the
    # compressed ones (their own theta, and the YaRN of a published config); interleaved
    # pairs on the trailing [nope | rope] slice of each head, read by
    # fastpe.hf_config._labelled as a head of that slice's size
    "deepseek_v4": _interleaved(
        rope_labels=(
            ("sliding_attention", "main"),
            ("compressed_sparse_attention", "compress"),
            ("heavily_compressed_attention", "compress"),
        ),
        label_thetas=(
            ("main", "rope_theta", 10000.0),
            ("compress", "compress_rope_theta", 160000.0),
        ),
        reads=frozenset({"qk_rope_head_dim", "compress_rope_theta", "compress_rates"}),
    ),
    # the rope slice of a DeepSeek-V4 head, as fastpe.hf_config._labelled passes it on
    "_deepseek_v4_rope": _interleaved(),
    # one RoPE module per stack, both sized by num_attention_heads, which Moonshine's
    # attribute_map points at decoder_num_attention_heads; building the encoder, HF's code
    # writes the encoder's count there (config.update), so a built model sizes both stacks
    # by one count: read only where the two counts agree
    "moonshine": _interleaved(
        num_heads_keys=("decoder_num_attention_heads", "num_attention_heads"),
        same_heads_keys=("encoder_num_attention_heads",),
        reads=frozenset(
            {
                "encoder_num_attention_heads",
                "decoder_num_attention_heads",
                "encoder_num_key_value_heads",
                "decoder_num_key_value_heads",
                "pad_head_dim_to_multiple_of",  # pads q, k and v after the rotation
            }
        ),
    ),
    "dia": _refused(_ENC_DEC),
    # the decoder's cross-attention (its own heads) has no RoPE
    "dia_decoder": _Family(
        reads=frozenset(
            {"cross_head_dim", "cross_num_attention_heads", "cross_num_key_value_heads"}
        )
    ),
    "t5gemma": _refused(_ENC_DEC),
    # (its rotary module reads the top-level rope_theta and no rope dict)
    "esm": _Family(reads=frozenset({"position_embedding_type"}), dicts_ignored=True),
    # multi-axis RoPE (M-RoPE): pair_axes from mrope_section (fastpe._hf_axes)
    **{
        name: _Family(mrope="split", mrope_default=(16, 24, 24), reads=_MROPE_READS)
        for name in (
            "qwen2_vl",
            "qwen2_vl_text",
            "qwen2_5_vl",
            "qwen2_5_vl_text",
            "qwen2_5_omni",
            "qwen2_5_omni_text",
            "qwen2_5_omni_thinker",
            "qwen2_5_omni_talker",
            "paddleocr_vl",
            "paddleocr_vl_text",
        )
    },
    # GLM: repeat_interleave of cos/sin and rotate_half_llm: interleaved pairs
    **{
        name: _interleaved(mrope="split", mrope_default=(8, 12, 12), reads=_MROPE_READS)
        for name in (
            "glm4v",
            "glm4v_text",
            "glm4v_moe",
            "glm4v_moe_text",
            "glm_ocr",
            "glm_ocr_text",
        )
    },
    # GLM-Image's text model: the split sections of GLM-4V, but cos/sin concatenated twice
    # and rotate_half (the half layout)
    **{
        name: _Family(mrope="split", mrope_default=(8, 12, 12), reads=_MROPE_READS)
        for name in ("glm_image", "glm_image_text")
    },
    **{
        name: _Family(mrope="interleaved", mrope_default=(24, 20, 20), reads=_MROPE_READS)
        for name in (
            "qwen3_vl",
            "qwen3_vl_text",
            "qwen3_vl_moe",
            "qwen3_vl_moe_text",
            "qwen3_omni_moe",
            "qwen3_omni_moe_text",
            "qwen3_omni_moe_thinker",
            "qwen3_omni_moe_talker",
            "cosmos3_edge",
            "cosmos3_edge_text",
        )
    },
    # the rope slice of a latent-attention head (head_dim is qk_rope_head_dim), interleaved
    # pairs (repeat_interleave of the first half of cos/sin)
    **{
        name: _interleaved(
            mrope="interleaved",
            mrope_default=(12, 10, 10),  # its config class's (the modelling code's is unused)
            head_dim_keys=_MLA,
            checked_rotary_keys=_MLA_CHECKED,
            null_refused=_MLA_NULL_HEAD,
            reads=_MROPE_READS | {"qk_rope_head_dim"},
        )
        for name in ("hy_v4_vl", "hy_v4_vl_text")
    },
    **{
        name: _Family(mrope="interleaved", mrope_default=(11, 11, 10), reads=_MROPE_READS)
        for name in (
            "qwen3_5",
            "qwen3_5_text",
            "qwen3_5_moe",
            "qwen3_5_moe_text",
            "qwen4_exp",
            "qwen4_exp_text",
        )
    },
    **{
        name: _interleaved(mrope="ernie", mrope_default=(22, 22, 20), reads=_MROPE_READS)
        for name in ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text")
    },
    # MiniMax-M3-VL's text model: the config's rotary_dim is documented as the rotated
    # channels, but transformers 5.24's rotary class rotates head_dim * partial_rotary_factor
    # (all 128 channels by default): read where the two agree
    "minimax_m3_vl_text": _Family(
        checked_rotary_keys=("rotary_dim",), reads=frozenset({"rotary_dim"})
    ),
    # PhiMoE: a scaled rope's cos and sin are multiplied by short_mscale / long_mscale
    "phimoe": _Family(mscale_factor=True),
    # HunYuan's rotary classes read "dynamic" with an alpha as a fixed NTK-alpha base
    **{name: _Family(ntk_alpha=True) for name in ("hunyuan_v1_dense", "hunyuan_v1_moe")},
    # rows and columns of an image alternate over the pairs (two axes)
    "neomme": _Family(mrope="rowcol", reads=_MROPE_READS | {"per_layer_config"}),
    # HunYuan-VL: sections cut the doubled cos/sin by channel, so a pair's two channels may
    # take different axes (two rows of pair_axes); "xdrope" and "dynamic" with an alpha are
    # its config class's names of a fixed NTK-alpha base
    **{
        name: _Family(
            mrope="hunyuan",
            reads=_MROPE_READS | {"xdrope_section"},
            type_aliases=(("xdrope", "dynamic"),),
            ntk_alpha=True,
        )
        for name in ("hunyuan_vl", "hunyuan_vl_text")
    },
    # not yet expressible, or not checked against the model's code
    **{name: _refused(_MULTI_AXIS) for name in ("cohere_compass", "cohere_compass_text")},
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
        )
    },
    **{name: _refused(_NOT_POSITION_IDS) for name in ("musicflamingo",)},
    # no rotary class to check a reading against: its own sinusoidal table, turned over
    # interleaved pairs, and the values too where rotary_value is set
    "roformer": _refused(
        "its RoPE (a sinusoidal table over interleaved pairs, rotating the values too with "
        "rotary_value) is not checked against the model's code"
    ),
    # vision RoPE that the module computes from the image itself, with no position ids
    "llama4_vision_model": _refused(
        f"{_NOT_POSITION_IDS}: its vision RoPE is a fixed grid of complex frequencies the "
        "module builds from image_size and patch_size"
    ),
    "eomt_dinov3": _refused(
        f"{_NOT_POSITION_IDS}: its RoPE rotates by patch coordinates normalised to [-1, 1], "
        "computed from the pixel values' shape"
    ),
    "efficientloftr": _refused(
        f"{_NOT_POSITION_IDS}: its RoPE rotates by the (row, column) of the aggregated "
        "feature map, computed from the feature map's shape"
    ),
}

#: Model types of transformers 5.24 with no row above and not read the generic way
#: (``fastpe._hf_model_types._GENERIC_TYPES``): why, where known in particular (the others
#: get :data:`_UNREAD_NO_ROTARY` where their model has no RoPE at all, else
#: :data:`_UNREAD_DEFAULT`).
_UNREAD: dict[str, str] = {
    "clvp_decoder": "CLVP's decoder (a GPT-2-style stack) has no RoPE",
    "clvp_encoder": (
        "its RoPE (ClvpRotaryPositionalEmbedding) rotates max(projection_dim // (2 * "
        "num_attention_heads), 32) channels at base 10000, read by no key fastpe knows; "
        "fastpe does not read it"
    ),
    "clvp": "CLVP's wrapper: read its encoder's or decoder's config (neither is read yet)",
    "dinov3_vit": f"{_VISION} (DINOv3 rotates patches by their normalised coordinates)",
    # its attention layers rotate nothing (the class defines apply_rotary_pos_emb but no
    # rotary module, and the attention never calls it); positions reach the model through
    # its Mamba layers
    "jamba": (
        "Jamba has no RoPE: its attention layers do not rotate q and k (transformers 5.24 "
        "builds no rotary module for it), and its Mamba layers carry the positions"
    ),
    # (its multimodal wrappers, Nemotron-H-Omni and NeMo SpeechLM, hold it as text_config)
    "nemotron_h": (
        "Nemotron-H has no RoPE: its attention blocks do not rotate q and k (transformers "
        "5.24 builds no rotary module for it), and its Mamba-2 blocks carry the positions"
    ),
    # GLM-5.3-Flash: latent attention without a rope part (the config class refuses a
    # qk_rope_head_dim above 0, and the model hands its layers position_embeddings=None),
    # the other layers linear attention (KDA)
    "glm5_next_text": (
        "GLM-5.3-Flash's text model has no RoPE: its latent-attention layers are NoPE (the "
        "config class refuses a qk_rope_head_dim above 0, and the model hands its layers no "
        "rotation), and its other layers are linear attention"
    ),
    # its latent-attention layers split off a rope part (qk_rope_head_dim) but rotate
    # nothing: the config class has no rope keys, the model no rotary module
    "kimi_linear": (
        "Kimi Linear has no RoPE: its latent-attention layers do not rotate q and k "
        "(transformers 5.24 builds no rotary module for it; its config class reads no rope "
        "keys), and its linear-attention (KDA) layers carry the positions"
    ),
    # the wrapper's own type reaches here only in a flat config (the text model's keys at
    # the top level, which its class moves to text_config)
    "glm5_next": (
        "GLM-5.3-Flash's text model (text_config, or the top-level keys of a flat config) "
        "has no RoPE; its vision tower's axial RoPE is read with tower='vision'"
    ),
}
#: Why a model type of :data:`fastpe._hf_model_types._NO_ROTARY_TYPES` is not read.
_UNREAD_NO_ROTARY = (
    "its model has no RoPE (the modelling code of transformers 5.24 for it, and for the "
    "sub-models its config builds, holds no rotary embedding and no rope parameters)"
)
_UNREAD_DEFAULT = (
    "transformers 5.24 has no rotary class for this model type that fastpe's generic "
    "reading is checked against: its model has no RoPE, or rotates in another way than "
    "the generic reading (its own keys, several axes, another pairing), or keeps the "
    "rotating part in a sub-config (read that one: a wrapper's text_config)"
)

#: Defaults of transformers' config classes (5.24) that a config.json may leave out (configs
#: saved by transformers 4 omit every value equal to its class default) and that differ
#: from the generic reading: a set ``head_dim`` (or a vision tower's ``embed_dim``, its
#: width where its ``hidden_size`` is the language model's; or ``qk_rope_head_dim`` where
#: the family reads the head size from it alone), a theta other than 10000, a
#: partial rotary factor other than 1, a rope dict of another type than ``default`` (filled
#: in where the config has none), or one rope dict per layer type (``"nested"``: a config
#: with no rope keys at all is refused). tests/test_hf_oracle.py checks this table against
#: the installed transformers (``tests/_hf.py: class_defaults``).
# fmt: off
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {'afmoe': {'head_dim': 128},
 'apertus': {'rope_parameters': {'factor': 8.0,
                                 'high_freq_factor': 4.0,
                                 'low_freq_factor': 1.0,
                                 'original_max_position_embeddings': 8192,
                                 'rope_type': 'llama3'},
             'rope_theta': 12000000.0,
             'top_ignored': ('rope_theta',)},
 'apertus1p5_text': {'rope_parameters': {'factor': 8.0,
                                         'high_freq_factor': 4.0,
                                         'low_freq_factor': 1.0,
                                         'original_max_position_embeddings': 8192,
                                         'rope_type': 'llama3'},
                     'rope_theta': 12000000.0,
                     'top_ignored': ('rope_theta',)},
 'axk1': {'qk_rope_head_dim': 64},
 'axk2': {'qk_rope_head_dim': 32},
 'bailing_hybrid': {'qk_rope_head_dim': 64, 'rope_theta': 6000000.0},
 'bamba': {'partial_rotary_factor': 0.5},
 'beam': {'head_dim': 128, 'nested': True},
 'bitnet': {'rope_theta': 500000.0},
 'blt': {'rope_theta': 500000.0},
 'blt_global_transformer': {'rope_theta': 500000.0},
 'blt_local_decoder': {'rope_theta': 500000.0},
 'blt_local_encoder': {'rope_theta': 500000.0},
 'codegen': {'rotary_dim': 64},
 'cohere': {'rope_theta': 500000.0},
 'cohere2_moe': {'head_dim': 128},
 'cosmos3_edge_text': {'head_dim': 128,
                       'rope_theta': 100000000.0,
                       'top_ignored': ('rope_theta',)},
 'csm': {'rope_theta': 500000.0},
 'csm_depth_decoder_model': {'rope_theta': 500000.0},
 'cwm': {'head_dim': 128,
         'rope_parameters': {'factor': 16.0,
                             'high_freq_factor': 4.0,
                             'low_freq_factor': 1.0,
                             'original_max_position_embeddings': 8192,
                             'rope_type': 'llama3'},
         'rope_theta': 1000000.0,
         'top_ignored': ('rope_theta',)},
 'deepseek_v2': {'qk_rope_head_dim': 64},
 'deepseek_v3': {'qk_rope_head_dim': 64},
 'deepseek_v32': {'qk_rope_head_dim': 64},
 'deepseek_v4': {'head_dim': 512, 'nested': True},
 'dia_decoder': {'head_dim': 128},
 'dia_encoder': {'head_dim': 128},
 'diffusion_gemma_text': {'head_dim': 256, 'nested': True},
 'dory': {'head_dim': 256, 'nested': True},
 'dots3_note_audio_encoder': {'partial_rotary_factor': 0.5},
 'dots3_note_text': {'head_dim': 256, 'nested': True, 'qk_rope_head_dim': 64},
 'embedding_gemma2_text': {'head_dim': 256, 'nested': True},
 'emu3_text_model': {'rope_theta': 1000000.0},
 'ernie4_5': {'head_dim': 128, 'rope_theta': 500000.0},
 'ernie4_5_moe': {'rope_theta': 500000.0},
 'ernie4_5_vl_moe_text': {'rope_theta': 500000.0},
 'evolla': {'rope_theta': 500000.0},
 'exaone': {'rope_theta': 500000.0},
 'flex_olmo': {'rope_theta': 500000.0},
 'flint': {'head_dim': 128},
 'gemma': {'head_dim': 256},
 'gemma2': {'head_dim': 256},
 'gemma3_text': {'head_dim': 256, 'nested': True},
 'gemma3n_text': {'head_dim': 256, 'nested': True},
 'gemma4_text': {'head_dim': 256, 'nested': True},
 'gemma4_unified_text': {'head_dim': 256, 'nested': True},
 'gemma4_vision': {'head_dim': 64, 'rope_theta': 100.0},
 'glm': {'head_dim': 128, 'partial_rotary_factor': 0.5},
 'glm4': {'head_dim': 128, 'partial_rotary_factor': 0.5},
 'glm4_moe': {'partial_rotary_factor': 0.5},
 'glm4_moe_lite': {'qk_rope_head_dim': 64},
 'glm4v_moe_text': {'partial_rotary_factor': 0.5},
 'glm_moe_dsa': {'qk_rope_head_dim': 64},
 'glmasr_encoder': {'partial_rotary_factor': 0.5},
 'gpt_neox': {'partial_rotary_factor': 0.25},
 'gpt_oss': {'head_dim': 64,
             'rope_parameters': {'beta_fast': 32.0,
                                 'beta_slow': 1.0,
                                 'factor': 32.0,
                                 'original_max_position_embeddings': 4096,
                                 'rope_type': 'yarn',
                                 'truncate': False},
             'rope_theta': 150000.0},
 'gptj': {'rotary_dim': 64},
 'gte': {'rope_theta': 160000.0},
 'helium': {'head_dim': 128, 'rope_theta': 100000.0},
 'higgs_audio_v2': {'head_dim': 128,
                    'rope_parameters': {'factor': 32.0,
                                        'high_freq_factor': 0.5,
                                        'low_freq_factor': 0.125,
                                        'original_max_position_embeddings': 1024,
                                        'rope_type': 'llama3'},
                    'rope_theta': 500000.0,
                    'top_ignored': ('rope_theta',)},
 'hrm_text': {'head_dim': 128},
 'hy_v3': {'head_dim': 128, 'rope_theta': 11158840.0},
 'hy_v4': {'qk_rope_head_dim': 64},
 'hy_v4_vl_text': {'qk_rope_head_dim': 64},
 'internlm3': {'head_dim': 128},
 'iquestcoder': {'head_dim': 128},
 'jina_embeddings_v3': {'rope_theta': 20000.0},
 'jetmoe': {'kv_channels': 128},
 'kolibri1': {'head_dim': 128},
 'laguna': {'head_dim': 128, 'nested': True},
 'lara_mini': {'head_dim': 128},
 'lfm2': {'rope_theta': 1000000.0},
 'lfm2_moe': {'rope_theta': 1000000.0},
 'lfm3': {'head_dim': 128, 'nested': True},
 'lfm3_vl_vision': {'rope_theta': 1000000.0},
 'llama4_text': {'head_dim': 128, 'rope_theta': 500000.0},
 'longcat_flash': {'head_dim': 64,
                   'qk_rope_head_dim': 64,
                   'rope_theta': 10000000.0},
 'mellum': {'head_dim': 128, 'nested': True},
 'mimo_v2_flash': {'head_dim': 192, 'nested': True},
 'minicpm3': {'qk_rope_head_dim': 32},
 'minimax': {'rope_theta': 1000000.0},
 'minimax_m2': {'head_dim': 128, 'rope_theta': 5000000.0},
 'minimax_m3_vl_text': {'head_dim': 128, 'rope_theta': 5000000.0},
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
                'rope_theta': 1000000.0,
                'top_ignored': ('rope_theta',)},
 'mistral4': {'partial_rotary_factor': 0.5,
              'qk_nope_head_dim': 64,
              'qk_rope_head_dim': 64,
              'rope_parameters': {'beta_fast': 32.0,
                                  'beta_slow': 1.0,
                                  'factor': 128.0,
                                  'llama_4_scaling_beta': 0.1,
                                  'max_position_embeddings': 1048576,
                                  'mscale': 1.0,
                                  'mscale_all_dim': 1.0,
                                  'original_max_position_embeddings': 8192,
                                  'rope_type': 'yarn',
                                  'type': 'yarn'},
              'top_ignored': ('rope_theta',)},
 'mistral_large4_text': {'qk_rope_head_dim': 64,
                         'rope_parameters': {'attention_factor': 1.0,
                                             'beta_fast': 32.0,
                                             'beta_slow': 1.0,
                                             'factor': 2048.0,
                                             'original_max_position_embeddings': 512,
                                             'rope_type': 'yarn'},
                         'top_ignored': ('rope_theta',)},
 'mixtral': {'rope_theta': 1000000.0},
 'mllama_text_model': {'rope_theta': 500000.0},
 'modernbert': {'nested': True},
 'modernbert-decoder': {'nested': True},
 'molmo2_text': {'head_dim': 128},
 'moonshine': {'partial_rotary_factor': 0.9},
 'moonshine_streaming': {'partial_rotary_factor': 0.8,
                         'top_ignored': ('rope_theta', 'partial_rotary_factor')},
 'muse_glimmer_assistant': {'head_dim': 128, 'rope_theta': 500000.0},
 'muse_glimmer_text': {'head_dim': 128},
 'muse_spark_text': {'head_dim': 64,
                     'rope_theta': 500000.0,
                     'top_ignored': ('rope_theta',)},
 'nemotron': {'partial_rotary_factor': 0.5},
 'nemotron3_5_transcribe_asr_audio': {'partial_rotary_factor': 0.5,
                                      'top_ignored': ('rope_theta',)},
 'neomme': {'head_dim': 64, 'nested': True},
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
 'paddleocr_vl_text': {'head_dim': 128, 'rope_theta': 500000.0},
 'pe_audio_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'pe_audio_video_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'pe_video_encoder': {'head_dim': 128, 'rope_theta': 20000.0},
 'persimmon': {'partial_rotary_factor': 0.5},
 'phi': {'partial_rotary_factor': 0.5},
 'phimoe': {'rope_theta': 1000000.0},
 'qwen2_5_omni_dit': {'head_dim': 64},
 'qwen2_5_omni_talker': {'head_dim': 128, 'rope_theta': 1000000.0},
 'qwen2_5_omni_text': {'rope_theta': 1000000.0},
 'qwen2_5_vl_text': {'rope_theta': 1000000.0,
                     'top_ignored': ('partial_rotary_factor',)},
 'qwen2_vl_text': {'rope_theta': 1000000.0, 'top_ignored': ('partial_rotary_factor',)},
 'qwen2_vl_vision': {'embed_dim': 1280},
 'qwen3': {'head_dim': 128},
 'qwen3_5_moe_text': {'head_dim': 256, 'partial_rotary_factor': 0.25},
 'qwen3_5_text': {'head_dim': 256, 'partial_rotary_factor': 0.25},
 'qwen3_next': {'head_dim': 256, 'partial_rotary_factor': 0.25},
 'qwen3_omni_moe_talker_code_predictor': {'head_dim': 128},
 'qwen3_omni_moe_text': {'rope_theta': 1000000.0},
 'qwen3_vl_moe_text': {'rope_theta': 500000.0},
 'qwen3_vl_text': {'head_dim': 128, 'rope_theta': 500000.0},
 'qwen4_exp_text': {'head_dim': 256},
 'recurrent_gemma': {'partial_rotary_factor': 0.5},
 'sarvam_mla': {'qk_rope_head_dim': 64},
 'sarvam_moe': {'head_dim': 64, 'rope_theta': 8000000.0},
 'seed_oss': {'head_dim': 128},
 'smollm3': {'rope_theta': 2000000.0},
 'solar_open': {'head_dim': 128, 'rope_theta': 1000000.0},
 'stablelm': {'partial_rotary_factor': 0.25},
 'step3p5': {'head_dim': 128, 'nested': True},
 't5_gemma_module': {'head_dim': 256},
 't5gemma2_text': {'head_dim': 256, 'nested': True},
 'timesfm2_5': {'head_dim': 80},
 'ultrabert': {'nested': True},
 'vaultgemma': {'head_dim': 256},
 'voxtral_realtime_encoder': {'head_dim': 64},
 'voxtral_realtime_text': {'rope_theta': 1000000.0},
 'xcodec2': {'head_dim': 64},
 'youtu': {'qk_rope_head_dim': 64},
 'zaya': {'head_dim': 128, 'nested': True}}
# fmt: on

# RoPE-related keys (by name) that a reading must understand or refuse.
_ROPE_KEY = re.compile(
    r"rope|rotary|theta|head_dim|n_head|heads|kv_channels|n_embd|d_model|base_freq|partial"
    r"|interleave|position_embedding_type|per_layer_config"
)
#: Families whose rotary code, for the default rope type, rotates the whole head whatever
#: ``partial_rotary_factor`` says (transformers 5.24: each class built with a rope dict of
#: the default type and the factor 0.5 kept as many frequencies as with the factor 1; the
#: scaled types read the factor). fastpe refuses the factor there rather than rotate a
#: part; tests/test_hf_oracle.py checks the table against the installed transformers.
_IGNORES_PARTIAL = frozenset(
    {
        "afmoe",
        "apertus",
        "apertus1p5_text",
        "arcee",
        "aria_text",
        "axk1",
        "axk2",
        "bailing_hybrid",
        "bitnet",
        "chameleon",
        "cohere",
        "cohere2",
        "cohere2_moe",
        "cosmos3_edge_text",
        "csm",
        "cwm",
        "dbrx",
        "deepseek_ocr2_text",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "diffllama",
        "doge",
        "dots1",
        "emu3",
        "ernie4_5",
        "ernie4_5_moe",
        "ernie4_5_vl_moe_text",
        "esm",
        "esmc",
        "eurobert",
        "evolla",
        "exaone",
        "exaone4",
        "exaone_moe",
        "falcon",
        "falcon_h1",
        "flex_olmo",
        "flint",
        "gemma",
        "gemma2",
        "glm_moe_dsa",
        "glmasr",
        "gpt_oss",
        "gradium_phonon_tts",
        "granite",
        "granite4_vision_text",
        "granite_docling_text",
        "granite_swa",
        "granitemoe",
        "granitemoe_swa",
        "granitemoehybrid",
        "granitemoeshared",
        "gte",
        "helium",
        "higgs_audio_v2",
        "hrm_text",
        "hunyuan_v1_dense",
        "hunyuan_v1_moe",
        "hunyuan_vl_text",
        "hy_v3",
        "hy_v4",
        "hy_v4_vl_text",
        "hyperclovax",
        "idefics",
        "internlm3",
        "iquestcoder",
        "jais2",
        "jetmoe",
        "jina_embeddings_v3",
        "kolibri1",
        "kyutai_speech_to_text",
        "lara_mini",
        "lasr_encoder",
        "lfm2",
        "lfm2_moe",
        "llama",
        "llama4_text",
        "longcat_flash",
        "mimi",
        "minicpm3",
        "minimax",
        "minimax_m3_vl",
        "ministral",
        "ministral3",
        "mistral",
        "mistral4",
        "mistral_large4_text",
        "mixtral",
        "mllama_text_model",
        "molmo2_text",
        "moshi",
        "muse_glimmer",
        "muse_glimmer_assistant",
        "muse_spark",
        "nanochat",
        "neucodec",
        "nomic_bert",
        "olmo",
        "olmo2",
        "olmo_hybrid",
        "olmoe",
        "openai_privacy_filter",
        "paddleocr_vl",
        "pe_audio_encoder",
        "pe_audio_video_encoder",
        "pe_video_encoder",
        "phimoe",
        "pocket_tts",
        "pocket_tts_audio_tokenizer",
        "qwen2",
        "qwen2_5_omni_dit",
        "qwen2_5_vl",
        "qwen2_moe",
        "qwen2_vl",
        "qwen3",
        "qwen3_moe",
        "qwen3_omni_moe_text",
        "qwen3_vl_moe_text",
        "qwen3_vl_text",
        "sarvam_mla",
        "seed_oss",
        "smollm3",
        "starcoder2",
        "timesfm2_5",
        "unlimited_ocr_text",
        "vaultgemma",
        "voxtral_realtime",
        "xcodec2",
        "youtu",
        "zamba2",
    }
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
        "num_global_key_value_heads",
        "num_attention_heads_per_layer",
        "resampler_heads",
        "heads_per_ngram",
        "prediction_head_size",
        "num_local_experts",
    }
)

#: Layer types, per family whose default config holds one rope dict per layer type, whose
#: default rotary code rotates the whole head whatever ``partial_rotary_factor`` says (as
#: :data:`_IGNORES_PARTIAL`, measured per layer type with the factor in each layer type's
#: dict). tests/test_hf_oracle.py checks the table against the installed transformers.
_IGNORES_PARTIAL_BY_TYPE: dict[str, tuple[str, ...]] = {
    "beam": ("sliding_attention",),
    "dory": ("full_attention", "sliding_attention"),
    "embedding_gemma2_text": ("full_attention", "sliding_attention"),
    "gemma3_text": ("full_attention", "sliding_attention"),
    "gemma3n_text": ("full_attention", "sliding_attention"),
    "gemma4_text": ("sliding_attention",),
    "gemma4_unified_text": ("sliding_attention",),
    "lfm3": ("sliding_attention",),
    "modernbert": ("full_attention", "sliding_attention"),
    "modernbert-decoder": ("full_attention", "sliding_attention"),
    "olmo3": ("full_attention", "sliding_attention"),
    "t5gemma2_text": ("full_attention", "sliding_attention"),
    "ultrabert": ("full_attention", "sliding_attention"),
}

#: What applies to a rope dict a config gives without ``rope_theta`` or
#: ``partial_rotary_factor`` (the class's default dict, :data:`_CLASS_DEFAULTS`, applies only
#: where the config gives none): per family and per key (``rope_parameters``,
#: ``rope_scaling``; transformers reads ``rope_scaling`` where both are given), flat or per
#: layer type, the values that differ from the generic reading (theta 10000, whole head),
#: and ``rope_theta_beside_top``: the theta a layer type's dict takes where the config gives
#: a top-level ``rope_theta`` that transformers does not put there. A value of None:
#: transformers states none, and its rotary code then fails (theta) or turns a part of its
#: own (the factor), so fastpe refuses and asks for the key. Families not listed read such
#: a dict generically. Measured on each config class and rotary module;
#: tests/test_hf_oracle.py checks the table against the installed transformers.
_GIVEN_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "apertus": {
        "rope_parameters": {"rope_theta": 12000000.0},
        "rope_scaling": {"rope_theta": 12000000.0},
    },
    "apertus1p5_text": {
        "rope_parameters": {"rope_theta": 12000000.0},
        "rope_scaling": {"rope_theta": 12000000.0},
    },
    "bailing_hybrid": {
        "rope_parameters": {"rope_theta": 6000000.0},
        "rope_scaling": {"rope_theta": 6000000.0},
    },
    "bamba": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "beam": {
        "rope_parameters": {
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None}
        },
        "rope_scaling": {"sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None}},
    },
    "bitnet": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "blt": {"rope_parameters": {"rope_theta": 500000.0}, "rope_scaling": {"rope_theta": 500000.0}},
    "cohere": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "cohere2_moe": {
        "rope_parameters": {"rope_theta": None, "rope_theta_beside_top": None},
        "rope_scaling": {},
    },
    "cosmos3_edge_text": {
        "rope_parameters": {"rope_theta": 100000000.0},
        "rope_scaling": {"rope_theta": 100000000.0},
    },
    "csm": {"rope_parameters": {"rope_theta": 500000.0}, "rope_scaling": {"rope_theta": 500000.0}},
    "cwm": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "dots3_note_audio_encoder": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "dots3_note_text": {
        "rope_parameters": {
            "indexed_attention": {"partial_rotary_factor": 0.25, "rope_theta": 80000000.0},
            "sliding_attention": {"partial_rotary_factor": 0.25, "rope_theta": 80000000.0},
        },
        "rope_scaling": {
            "indexed_attention": {"partial_rotary_factor": 0.25, "rope_theta": 80000000.0},
            "sliding_attention": {"partial_rotary_factor": 0.25, "rope_theta": 80000000.0},
        },
    },
    "embedding_gemma2_text": {
        "rope_parameters": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
    },
    "ernie4_5": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "ernie4_5_moe": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "ernie4_5_vl_moe_text": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "evolla": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "exaone": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "flex_olmo": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "gemma3_text": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
    },
    "gemma3n_text": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
    },
    "glm": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "glm4": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "glm4_moe": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "glm4v_moe_text": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "gpt_neox": {
        "rope_parameters": {"partial_rotary_factor": 0.25, "rope_theta_beside_top": 10000.0},
        "rope_scaling": {"partial_rotary_factor": 0.25, "rope_theta_beside_top": 10000.0},
    },
    "gpt_neox_japanese": {
        "rope_parameters": {"rope_theta_beside_top": 10000.0},
        "rope_scaling": {"rope_theta_beside_top": 10000.0},
    },
    "gpt_oss": {
        "rope_parameters": {"rope_theta": 150000.0},
        "rope_scaling": {"rope_theta": 150000.0},
    },
    "gte": {"rope_parameters": {"rope_theta": 160000.0}, "rope_scaling": {"rope_theta": 160000.0}},
    "helium": {
        "rope_parameters": {"rope_theta": 100000.0},
        "rope_scaling": {"rope_theta": 100000.0},
    },
    "hy_v3": {
        "rope_parameters": {"rope_theta": 11158840.0},
        "rope_scaling": {"rope_theta": 11158840.0},
    },
    "jina_embeddings_v3": {
        "rope_parameters": {"rope_theta": 20000.0},
        "rope_scaling": {"rope_theta": 20000.0},
    },
    "laguna": {
        "rope_parameters": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
    },
    "lfm2": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "lfm2_moe": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "lfm3": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta": 1000000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta": 1000000.0},
        },
    },
    "llama4_text": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "longcat_flash": {
        "rope_parameters": {"rope_theta": 10000000.0},
        "rope_scaling": {"rope_theta": 10000000.0},
    },
    "mellum": {
        "rope_parameters": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
    },
    "mimo_v2_flash": {
        "rope_parameters": {
            "full_attention": {
                "partial_rotary_factor": None,
                "rope_theta": None,
                "rope_theta_beside_top": None,
            },
            "sliding_attention": {
                "partial_rotary_factor": None,
                "rope_theta": None,
                "rope_theta_beside_top": None,
            },
        },
        "rope_scaling": {
            "full_attention": {
                "partial_rotary_factor": None,
                "rope_theta": None,
                "rope_theta_beside_top": None,
            },
            "sliding_attention": {
                "partial_rotary_factor": None,
                "rope_theta": None,
                "rope_theta_beside_top": None,
            },
        },
    },
    "minimax": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "minimax_m2": {
        "rope_parameters": {"rope_theta": 5000000.0},
        "rope_scaling": {"rope_theta": 5000000.0},
    },
    "mistral4": {"rope_parameters": {"partial_rotary_factor": 0.5}, "rope_scaling": {}},
    "mixtral": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "mllama_text_model": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "modernbert": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 160000.0, "rope_theta_beside_top": 160000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 160000.0, "rope_theta_beside_top": 160000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
    },
    "modernbert-decoder": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 160000.0, "rope_theta_beside_top": 160000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 160000.0, "rope_theta_beside_top": 160000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
    },
    "moonshine": {
        "rope_parameters": {"partial_rotary_factor": 0.9},
        "rope_scaling": {"partial_rotary_factor": 0.9},
    },
    "muse_glimmer_assistant": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "nemotron": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "neomme": {
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0}
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": None, "rope_theta_beside_top": None},
            "sliding_attention": {"rope_theta": None, "rope_theta_beside_top": None},
        },
    },
    "nomic_bert": {
        "rope_parameters": {"rope_theta": 1000.0},
        "rope_scaling": {"rope_theta": 1000.0},
    },
    "olmo3": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 500000.0},
            "sliding_attention": {"rope_theta": 500000.0, "rope_theta_beside_top": 500000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 500000.0},
            "sliding_attention": {"rope_theta": 500000.0, "rope_theta_beside_top": 500000.0},
        },
    },
    "openai_privacy_filter": {
        "rope_parameters": {"rope_theta": 150000.0},
        "rope_scaling": {"rope_theta": 150000.0},
    },
    "pe_audio_encoder": {
        "rope_parameters": {"rope_theta": 20000.0},
        "rope_scaling": {"rope_theta": 20000.0},
    },
    "pe_audio_video_encoder": {
        "rope_parameters": {"rope_theta": 20000.0},
        "rope_scaling": {"rope_theta": 20000.0},
    },
    "pe_video_encoder": {
        "rope_parameters": {"rope_theta": 20000.0},
        "rope_scaling": {"rope_theta": 20000.0},
    },
    "persimmon": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "phi": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "phimoe": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "qwen3_5_moe_text": {
        "rope_parameters": {"partial_rotary_factor": 0.25},
        "rope_scaling": {"partial_rotary_factor": 0.25},
    },
    "qwen3_5_text": {
        "rope_parameters": {"partial_rotary_factor": 0.25},
        "rope_scaling": {"partial_rotary_factor": 0.25},
    },
    "qwen3_next": {
        "rope_parameters": {"partial_rotary_factor": 0.25},
        "rope_scaling": {"partial_rotary_factor": 0.25},
    },
    "qwen3_omni_moe_text": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "qwen3_vl_moe_text": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "qwen3_vl_text": {
        "rope_parameters": {"rope_theta": 500000.0},
        "rope_scaling": {"rope_theta": 500000.0},
    },
    "recurrent_gemma": {
        "rope_parameters": {"partial_rotary_factor": 0.5},
        "rope_scaling": {"partial_rotary_factor": 0.5},
    },
    "sarvam_moe": {
        "rope_parameters": {"rope_theta": 8000000.0},
        "rope_scaling": {"rope_theta": 8000000.0},
    },
    "smollm3": {
        "rope_parameters": {"rope_theta": 2000000.0},
        "rope_scaling": {"rope_theta": 2000000.0},
    },
    "solar_open": {
        "rope_parameters": {"rope_theta": 1000000.0},
        "rope_scaling": {"rope_theta": 1000000.0},
    },
    "stablelm": {
        "rope_parameters": {"partial_rotary_factor": 0.25},
        "rope_scaling": {"partial_rotary_factor": 0.25},
    },
    "t5gemma2_text": {
        "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
        "rope_scaling": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        },
    },
    "ultrabert": {
        "rope_parameters": {
            "full_attention": {"rope_theta_beside_top": 10000.0},
            "sliding_attention": {"rope_theta_beside_top": 10000.0},
        }
    },
    "zaya": {
        "rope_parameters": {
            "hybrid": {"rope_theta": None, "rope_theta_beside_top": None},
            "hybrid_sliding": {"rope_theta": None, "rope_theta_beside_top": None},
        },
        "rope_scaling": {
            "hybrid": {"rope_theta": None, "rope_theta_beside_top": None},
            "hybrid_sliding": {"rope_theta": None, "rope_theta_beside_top": None},
        },
    },
}


# --------------------------------------------------------------------------- layer types


@dataclass(frozen=True)
class _LayerTypes:
    """How a family's config class (transformers 5.24) derives ``layer_types`` where the
    config gives none (the key absent or null), read by ``fastpe.hf_config._layer_types``.

    The list has ``num_hidden_layers`` entries (``layers``, the class's default, where the
    config leaves the key out). Layer ``i`` is ``full`` where ``(i + offset) % period ==
    0``, else ``other``; the period is ``config[period_key]`` where the config holds that
    key (``period`` where it leaves it out), else ``period`` itself; ``period`` 0: every
    layer is ``full``. ``rule`` replaces all of this with a derivation of its own, from the
    config and the number of layers.
    """

    layers: int  # the class's default num_hidden_layers
    period: int = 0
    period_key: str | None = None  # a key holding the period (its default: ``period``)
    positive: bool = False  # the class refuses a period < 1 (else any non-zero one: x % p)
    offset: int = 1
    full: str = "full_attention"
    other: str = "sliding_attention"
    first: bool = False  # layer 0 is ``full`` as well
    last: bool = False  # the last layer is ``full`` as well
    # the class writes ``full`` over the last entry of a given list too (Gemma 4)
    forced: bool = False
    # a given list that holds this entry lists two blocks per layer (Dory's released
    # configs: attention, then "mlp"): the class keeps every other entry
    halve_on: str | None = None
    # where the config leaves out per_layer_config, the class builds it from the layer
    # types (Gemma 4 and its kin): each ``full`` layer gets the head size config[key] (the
    # default where the key is left out; the class consumes the key), the one per-layer
    # value its RoPE reads (its other entry, a key-value head count, does not change RoPE)
    full_head_dim: tuple[str, int] | None = None
    rule: Callable[[Mapping[str, Any], int], list[Any]] | None = None
    # the class's validation of the layer types it holds (given or derived): why it
    # refuses them, else None (OLMo-hybrid: one linear-attention layer and one other)
    check: Callable[[list[Any]], str | None] | None = None

    def types(self, config: Mapping[str, Any], n: int) -> list[Any]:
        """The derived ``layer_types`` of ``config``, whose ``num_hidden_layers`` is ``n``."""
        if self.rule is not None:
            return self.rule(config, n)
        period = self._period(config)
        out = []
        for i in range(n):
            full = period == 0 or (i + self.offset) % period == 0
            full = full or (self.first and i == 0) or ((self.last or self.forced) and i == n - 1)
            out.append(self.full if full else self.other)
        return out

    def _period(self, config: Mapping[str, Any]) -> int:
        if self.period_key is None or self.period_key not in config:
            return self.period
        where = f"config[{self.period_key!r}]"
        value = config[self.period_key]
        if value is None:
            raise ValueError(
                f"{where} is null: this family's config class derives layer_types from it "
                f"(its default {self.period} applies only where the key is left out) and "
                "fails on null; set it, or give layer_types"
            )
        period = _check_int(value, where)
        if period == 0 or (self.positive and period < 1):
            raise ValueError(
                f"{where} must be {'>= 1' if self.positive else 'non-zero'} to derive "
                f"layer_types (this family's config class fails on it), got {period}"
            )
        return period


def _lfm3_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """LFM3: of every four layers, the third attends fully and the first slides (layer 0
    excepted), the others are convolutions (no attention, no RoPE)."""
    return [
        "full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i else "conv"
        for i in range(n)
    ]


# DeepSeek-V4's legacy per-layer compress ratios, as its config class names them
_V4_RATIOS = {
    0: "sliding_attention",
    4: "compressed_sparse_attention",
    128: "heavily_compressed_attention",
}


def _deepseek_v4_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """DeepSeek-V4: from the legacy ``compress_ratios`` (one ratio per layer, 0, 4 or 128;
    the list cut to ``num_hidden_layers``), else two heavily compressed layers, then
    compressed-sparse (odd layers) and heavily compressed (even layers) in turn."""
    ratios = config.get("compress_ratios")
    if ratios is None:
        return [
            "compressed_sparse_attention" if i % 2 and i > 1 else "heavily_compressed_attention"
            for i in range(n)
        ]
    if not isinstance(ratios, (list, tuple)):
        raise TypeError(
            f"config['compress_ratios'] must be a list, one ratio per layer, got {ratios!r}"
        )
    out = []
    for i, ratio in enumerate(ratios[:n]):
        where = f"config['compress_ratios'][{i}]"
        if _check_int(ratio, where) not in _V4_RATIOS:
            raise ValueError(
                f"{where} is {ratio!r}; this family's config class knows the ratios "
                f"{sorted(_V4_RATIOS)} alone (and fails on another)"
            )
        out.append(_V4_RATIOS[ratio])
    return out


def _ultrabert_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """UltraBERT: from the legacy ``attention_windows`` where the config holds the key (a
    layer with a window slides, one without attends fully), else every third layer full."""
    if "attention_windows" not in config:
        return _LayerTypes(layers=n, period=3).types(config, n)
    windows = config["attention_windows"]
    if not isinstance(windows, (list, tuple)):
        raise TypeError(
            f"config['attention_windows'] must be a list, one window per layer (0 or null: "
            f"full attention), got {windows!r}"
        )
    out = []
    for i, window in enumerate(windows):
        if window is not None:
            _check_int(window, f"config['attention_windows'][{i}]")
        out.append("sliding_attention" if window else "full_attention")
    return out


def _exaone4_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """EXAONE 4 and EXAONE-MoE: every sliding_window_pattern-th layer full (4 where the
    key is left out); where sliding_window is null the class sets the pattern to 0 first,
    and fails on it."""
    if n and "sliding_window" in config and config["sliding_window"] is None:
        raise ValueError(
            "config['sliding_window'] is null: this family's config class then sets "
            "sliding_window_pattern to 0 and fails deriving layer_types from it; give "
            "layer_types"
        )
    return _LayerTypes(layers=n, period=4, period_key="sliding_window_pattern").types(config, n)


def _flint_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """Flint: the first two layers, every fourth from layer 1 (1, 5, 9, ...) and the last
    attend fully, the others slide."""
    return [
        "full_attention" if i < 2 or i % 4 == 1 or i == n - 1 else "sliding_attention"
        for i in range(n)
    ]


def _count(config: Mapping[str, Any], key: str, default: int) -> int:
    """``config[key]`` as an integer (``default`` where the key is left out)."""
    if key not in config:
        return default
    if config[key] is None:
        raise ValueError(
            f"config[{key!r}] is null: this family's config class reads it (its default "
            f"{default} applies only where the key is left out) and fails on null; set it"
        )
    return _check_int(config[key], f"config[{key!r}]")


def _cohere2_moe_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """Cohere-2-MoE: the first first_k_dense_replace layers (0 where left out; the class
    consumes the key) full every prefix_dense_sliding_window_pattern-th (1), the others
    full every sliding_window_pattern-th (4), counted again from the first of them."""
    k = _count(config, "first_k_dense_replace", 0)
    out: list[Any] = []
    for count, key, default in (
        (k, "prefix_dense_sliding_window_pattern", 1),
        (n - k, "sliding_window_pattern", 4),
    ):
        if count > 0:  # (the class reads a pattern only to make a layer of it)
            out += _LayerTypes(layers=count, period=default, period_key=key).types(config, count)
    return out


def _cohere2_moe_mlp_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """Cohere-2-MoE's mlp_layer_types: given, else "dense" for the first
    first_k_dense_replace layers (0 where left out) and "sparse" for the others."""
    given = config.get("mlp_layer_types")
    if given is not None:
        if not isinstance(given, (list, tuple)):
            raise TypeError(
                f"config['mlp_layer_types'] must be a list, one entry per layer, got {given!r}"
            )
        return list(given)
    k = _count(config, "first_k_dense_replace", 0)
    return ["dense" if i < k else "sparse" for i in range(n)]


_LARA_MINI = (
    "linear_attention",
    "sliding_attention",
    "linear_attention",
    "full_attention",
    "sliding_attention",
)


def _lara_mini_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """Lara-mini: its released pattern of five layers, repeated."""
    return [_LARA_MINI[i % len(_LARA_MINI)] for i in range(n)]


def _olmo_hybrid_types(config: Mapping[str, Any], n: int) -> list[Any]:
    """OLMo-hybrid: every fourth layer full attention, the others linear attention; where
    that leaves none full (fewer than four layers), the last one."""
    out = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
    if out and "full_attention" not in out:
        out[-1] = "full_attention"
    return out


def _olmo_hybrid_check(types: list[Any]) -> str | None:
    """OLMo-hybrid's class refuses layer types without a linear-attention layer, or with
    nothing else (its validate_architecture)."""
    if "linear_attention" not in types:
        return "it needs at least one 'linear_attention' layer"
    if all(t == "linear_attention" for t in types):
        return "it needs at least one attention layer beside the 'linear_attention' ones"
    return None


# where the config leaves out per_layer_config, Gemma 4 and its kin give each
# full-attention layer the head size global_head_dim (512 where left out)
_GLOBAL_HEAD_DIM = ("global_head_dim", 512)
_GEMMA4_LIKE = _LayerTypes(layers=30, period=6, forced=True, full_head_dim=_GLOBAL_HEAD_DIM)

#: ``model_type`` -> how its config class derives ``layer_types`` where the config gives
#: none (transformers 5.24), for the families whose RoPE differs by layer type, or whose
#: code rotates some layer types only (``_ROPE_GATES``): each rule
#: transcribed from the class's ``__post_init__`` and checked against it by
#: tests/test_hf_oracle.py (``test_layer_types_derived_as_the_config_class_derives_them``).
_LAYER_TYPES: dict[str, _LayerTypes] = {
    # full every sliding_window_pattern-th layer (6 where the key is left out)
    **{
        name: _LayerTypes(layers=26, period=6, period_key="sliding_window_pattern")
        for name in ("gemma3_text", "t5gemma2_text", "t5gemma2_decoder")
    },
    "gemma3n_text": _LayerTypes(layers=35, period=5),
    "olmo3": _LayerTypes(layers=32, period=4),
    # full at layers 0, n, 2n, ... (n = global_attn_every_n_layers, 3 where left out)
    **{
        name: _LayerTypes(layers=22, period=3, period_key="global_attn_every_n_layers", offset=0)
        for name in ("modernbert", "modernbert-decoder")
    },
    "beam": _LayerTypes(layers=52, period=6, last=True),
    "dory": _LayerTypes(layers=36, period=4, halve_on="mlp"),
    "mimo_v2_flash": _LayerTypes(layers=48, period=6, first=True),
    "neomme": _LayerTypes(layers=17, period=6, last=True),
    # Gemma 4 and its kin: every sixth layer full (a sliding_window_pattern key is not
    # read), and the last one, also in a given list
    **{
        name: _GEMMA4_LIKE
        for name in ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")
    },
    "embedding_gemma2_text": _LayerTypes(
        layers=24,
        period=6,
        period_key="sliding_window_pattern",
        positive=True,
        forced=True,
        full_head_dim=_GLOBAL_HEAD_DIM,
    ),
    # one layer type throughout
    "laguna": _LayerTypes(layers=40),
    "mellum": _LayerTypes(layers=28),
    "step3p5": _LayerTypes(layers=45),
    "zaya": _LayerTypes(layers=40, full="hybrid"),
    "lfm3": _LayerTypes(layers=24, rule=_lfm3_types),
    "ultrabert": _LayerTypes(layers=32, rule=_ultrabert_types),
    "deepseek_v4": _LayerTypes(layers=43, rule=_deepseek_v4_types),
    # the families whose attention rotates some layer types only (_ROPE_GATES): one rope
    # dict for all layers, the layer type decides whether it applies
    "cohere2": _LayerTypes(layers=40, period=4, period_key="sliding_window_pattern"),
    "cohere2_moe": _LayerTypes(layers=40, rule=_cohere2_moe_types),
    **{
        name: _LayerTypes(layers=32, rule=_exaone4_types)
        for name in ("exaone4", "exaone4_5_text", "exaone_moe")
    },
    "kolibri1": _LayerTypes(layers=50, period=5),
    "flint": _LayerTypes(layers=49, rule=_flint_types),
    "afmoe": _LayerTypes(layers=32, period=4, period_key="global_attn_every_n_layers"),
    "lara_mini": _LayerTypes(layers=34, rule=_lara_mini_types),
    "olmo_hybrid": _LayerTypes(layers=32, rule=_olmo_hybrid_types, check=_olmo_hybrid_check),
}

#: Families whose RoPE differs by layer type and whose derivation of ``layer_types``
#: fastpe does not transcribe: why (a config of these needs ``layer_types``).
_LAYER_TYPES_REFUSED: dict[str, str] = {
    "dots3_note_text": (
        "its config class derives them from use_dsa, use_sliding_window and whether "
        "per_layer_config is given, and from them each layer type's rotated part and the "
        "sliding layers' per_layer_config (swa_* keys), which fastpe does not derive"
    ),
}


#: How a config class (transformers 5.24) holds a given ``layer_types`` whose length is
#: not ``num_hidden_layers``, for the families that do not refuse it as transformers'
#: ``validate_layer_type`` does (the others): ``"trims"``, it keeps the first
#: ``num_hidden_layers`` entries of a longer list (DeepSeek-V4); ``"mtp"``, it cuts
#: ``num_nextn_predict_layers`` trailing multi-token-prediction entries off a list that
#: holds exactly that many more (Step3p5/Step3p7's legacy configs); ``"pairs"``, a list
#: that holds an ``"mlp"`` entry lists two blocks per layer, and the class pairs them and
#: halves ``num_hidden_layers`` (Dory); ``"doubled"``, ``num_hidden_layers`` is twice
#: ``num_layers`` (LongCat-Flash: a given ``num_hidden_layers`` rounded down to even);
#: ``"any"``, ``num_hidden_layers`` follows the list (Nemotron-H). Checked against the
#: classes by tests/test_hf_oracle.py (``test_layer_types_length_as_the_config_classes``).
_LAYER_COUNT_RULES: dict[str, str] = {
    "deepseek_v4": "trims",
    "step3p5": "mtp",
    "dory": "pairs",
    "longcat_flash": "doubled",
    "nemotron_h": "any",
}

#: The model types fastpe reads whose layers no single key of
#: ``fastpe._hf_model_types._DEFAULT_LAYERS`` counts, with the keys that count the layers
#: that rotate, each with its class default (transformers 5.24): the first key of each tuple
#: that the config gives counts (Moonshine's class sets ``num_hidden_layers`` last, through
#: its ``attribute_map``, over ``decoder_num_hidden_layers``). Where two stacks are listed
#: (Moonshine's encoder and decoder, one rotary module each, the same rotation), layer=i
#: may be a layer of either, so it is refused past the last layer of both. SAM 2's video
#: models rotate in their memory attention; dots3_note_vision_encoder's class default
#: (42) is held only with the per-layer entries it lists. HRM's count is a rule of its own
#: (``fastpe.hf_config._hrm_layers``). Checked against the classes by
#: tests/test_hf_oracle.py (``test_layer_past_the_last_refused_in_stacks``).
_STACK_LAYER_KEYS: dict[str, tuple[tuple[tuple[str, ...], int], ...]] = {
    "moonshine": (
        (("encoder_num_hidden_layers",), 6),
        (("num_hidden_layers", "decoder_num_hidden_layers"), 6),
    ),
    "sam2_video": ((("memory_attention_num_layers",), 4),),
    "sam3_tracker_video": ((("memory_attention_num_layers",), 4),),
    "edgetam_video": ((("memory_attention_num_layers",), 2),),
    "dots3_note_vision_encoder": ((("num_hidden_layers",), 42),),
}
#: HRM's class defaults for the keys its layer count is made of: ``num_hidden_layers``
#: (each stack's layers, unless ``num_layers_per_stack`` is given), ``H_cycles``,
#: ``L_cycles``.
_HRM_LAYER_DEFAULTS: dict[str, int] = {"num_hidden_layers": 16, "H_cycles": 2, "L_cycles": 3}

#: The layer type names transformers 5.24 takes in a given ``layer_types`` and
#: ``mlp_layer_types`` (``configuration_utils``: ``ALLOWED_ATTN_LAYER_TYPES``,
#: ``ALLOWED_MLP_LAYER_TYPES``; its ``validate_layer_type`` refuses any other), after it
#: renames the legacy ones (``_LEGACY_LAYER_TYPE_REMAP``), for every config class; the
#: families in :data:`_OWN_LAYER_TYPE_NAMES` check the names their own way. Checked against
#: transformers by tests/test_hf_oracle.py (``test_layer_type_names_as_the_config_classes``).
_ALLOWED_LAYER_TYPES: tuple[str, ...] = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "reference_sliding_attention",
    "linear_attention",
)
_ALLOWED_MLP_LAYER_TYPES: tuple[str, ...] = ("sparse", "dense")
_LEGACY_LAYER_TYPES: dict[str, str] = {
    "mamba": "linear_attention",
    "attention": "full_attention",
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}
#: ``model_type`` -> why its model fails on a partial rotary factor other than 1, for the
#: families whose rotary module honours the factor but whose apply function does not
#: (transformers 5.24): fastpe refuses such a factor, at the top level or in a rope dict.
_PARTIAL_FAILS: dict[str, str] = {
    name: (
        "its apply function splits the whole head into two halves and fails on fewer "
        "rotated channels (transformers 5.24's model raises)"
    )
    for name in ("gpt_oss", "openai_privacy_filter")
}
#: Families whose config class checks the names of ``layer_types`` and
#: ``mlp_layer_types`` its own way (Dory's lists of attention and ``"mlp"`` blocks,
#: Nemotron-H's block names, NeoMME's own list, DeepSeek-V4's ``"hash_moe"`` mlp entries:
#: fastpe checks those where it reads them).
_OWN_LAYER_TYPE_NAMES: frozenset[str] = frozenset({"dory", "nemotron_h", "neomme", "deepseek_v4"})
#: Legacy names a family's config class refuses: Cohere-2-MoE checks the names before
#: they are renamed; Qwen4-Exp turns "full_attention" into "indexed_attention" before the
#: legacy "attention" is renamed "full_attention", which it then refuses.
_LEGACY_NAMES_REFUSED: dict[str, tuple[str, ...]] = {
    "cohere2_moe": tuple(_LEGACY_LAYER_TYPES),
    "qwen4_exp_text": ("attention",),
}
#: Keys that a config class fails on (a property without a setter, for Falcon-H1 and
#: RecurrentGemma under either name, whatever the value, null too), or that it counts in a
#: way fastpe does not transcribe (HRM, where not null), whether null is refused too, and
#: why; refused by both readers (Bamba's: ``_BLOCKS``).
_REFUSED_LAYER_KEYS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "falcon_h1": (
        ("layer_types", "layers_block_type"),
        True,
        "its layer types are a property without a setter (every layer is a hybrid block); "
        "drop the key",
    ),
    "recurrent_gemma": (
        ("layer_types", "layers_block_type"),
        True,
        "its layer types are a property without a setter, derived from block_types; drop the key",
    ),
    "hrm_text": (
        ("layer_types",),
        False,
        "its class holds num_hidden_layers times H_cycles times (L_cycles + 1) layers and "
        "checks the list against that count, which fastpe does not derive; drop the key",
    ),
}


# --------------------------------------------------------------------------- layers without RoPE


@dataclass(frozen=True)
class _RopeGate:
    """Which layers a family's modelling code rotates (transformers 5.24), for the families
    whose attention rotates q and k on some layers only, or on none, though one rope dict
    serves them all; read by ``fastpe.hf_config._rope_gate``. A layer that does not rotate
    reads as ``None``, as a 0 in ``no_rope_layers`` does.

    Layer ``i``, of type ``t`` (``layer_types``, given or derived as ``_LAYER_TYPES``
    says), rotates where all of these hold: not ``never``; ``config[key] == value`` for
    ``requires`` (``default`` where the key is left out); the rope theta is not null
    (``null_theta``); and ``t`` is one of ``rotating`` (None: any type) with the sliding
    window ``window`` set, not null (its class default where the key is left out). Two
    exceptions: with ``unset_all``, a null window makes every layer rotate, whatever its
    type; with ``dense``, a layer whose ``mlp_layer_types`` entry is ``"dense"`` rotates
    whatever its type and window where ``config[key] == 1``.
    """

    what: str  # the rule in words, for the messages
    types: tuple[str, ...] = ()  # the family's layer types (another is refused); (): unread
    rotating: tuple[str, ...] | None = None
    window: tuple[str, int | None] | None = None  # (key, class default)
    window_null: bool = True  # the class takes a null window (else it refuses, as fastpe)
    # the class refuses a null or non-positive window where a layer slides (as fastpe)
    window_positive: bool = False
    unset_all: bool = False
    requires: tuple[str, Any, Any] | None = None  # (key, class default, the rotating value)
    null_theta: bool = False
    never: bool = False
    dense: tuple[str, int] | None = None  # (key, class default)
    # the family's mlp_layer_types, given or as its class derives them (for ``dense``)
    mlp_types: Callable[[Mapping[str, Any], int], list[Any]] | None = None
    # the layer types its model builds without attention (no q and k, no head size)
    no_attention: tuple[str, ...] = ()
    # the model fails where a layer's type is not one of ``types``, whatever layer is
    # asked (OLMo-hybrid's forward has no attention mask for another type)
    all_types: bool = False

    def keys(self) -> tuple[str, ...]:
        """The config keys the rule reads."""
        keys = ["layer_types"] if self.types else []
        keys += [self.window[0]] if self.window else []
        keys += [self.requires[0]] if self.requires else []
        keys += ["rope_theta"] if self.null_theta else []
        keys += [self.dense[0], "mlp_layer_types"] if self.dense else []
        return tuple(keys)


_SLIDING = ("full_attention", "sliding_attention")
# EXAONE 4 and its kin: the attention rotates where the config has no sliding window, and
# else on sliding layers alone (their full-attention layers have no RoPE)
_EXAONE4 = _RopeGate(
    "its attention rotates q and k on sliding_attention layers only, or on every layer "
    "where sliding_window is null",
    types=_SLIDING,
    rotating=("sliding_attention",),
    window=("sliding_window", 4096),
    unset_all=True,
)

#: ``model_type`` -> which layers its modelling code rotates, for the families of
#: transformers 5.24 whose attention (or model) skips RoPE on some layers, or on all, by
#: layer type, sliding window or flag. Each rule is transcribed from the attention's
#: ``forward`` (or the model's) and checked by tests/test_hf_oracle.py
#: (``test_rope_gates_against_the_modelling_code``), which runs small models and sees
#: which layers' outputs change with the rotation. (Per-layer lists of their own are read
#: elsewhere: ``no_rope_layers``, ``layer_rope_theta``, a null rope dict per layer type.)
_ROPE_GATES: dict[str, _RopeGate] = {
    # the attention tests its sliding window, which the layer has only if it slides and the
    # config sets one: full-attention layers, and all where sliding_window is null, have
    # no RoPE
    "cohere2": _RopeGate(
        "its attention rotates q and k on sliding_attention layers only, and only where "
        "sliding_window is set",
        types=_SLIDING,
        rotating=("sliding_attention",),
        window=("sliding_window", 4096),
    ),
    # as Cohere 2, and a dense layer (mlp_layer_types) rotates whatever its type where
    # prefix_dense_sliding_window_pattern is 1
    "cohere2_moe": _RopeGate(
        "its attention rotates q and k on sliding_attention layers where sliding_window "
        "is set, and on the dense layers (mlp_layer_types) where "
        "prefix_dense_sliding_window_pattern is 1",
        types=_SLIDING,
        rotating=("sliding_attention",),
        window=("sliding_window", 4096),
        dense=("prefix_dense_sliding_window_pattern", 1),
        mlp_types=_cohere2_moe_mlp_types,
    ),
    # as Cohere 2; the class refuses a null window
    "flint": _RopeGate(
        "its attention rotates q and k on sliding_attention layers only",
        types=_SLIDING,
        rotating=("sliding_attention",),
        window=("sliding_window", 513),
        window_null=False,
    ),
    "exaone4": _EXAONE4,
    # EXAONE 4.5's text model: its config class makes it an EXAONE 4 config
    "exaone4_5_text": _EXAONE4,
    "exaone_moe": replace(_EXAONE4, window_null=False),
    # as EXAONE 4; the class refuses a null or non-positive window where a layer slides
    "kolibri1": replace(_EXAONE4, window=("sliding_window", 513), window_positive=True),
    # the attention rotates its local (sliding) layers alone
    "afmoe": _RopeGate(
        "its attention rotates q and k on sliding_attention layers only",
        types=_SLIDING,
        rotating=("sliding_attention",),
    ),
    # the model hands the rotation to sliding layers alone (linear-attention layers have
    # no attention to rotate)
    "lara_mini": _RopeGate(
        "the model rotates q and k on sliding_attention layers only",
        types=("full_attention", "linear_attention", "sliding_attention"),
        rotating=("sliding_attention",),
        no_attention=("linear_attention",),
    ),
    # the model hands the rotation to full-attention layers alone, and builds no rotary
    # module where the rope theta is null (the released checkpoints: no RoPE at all)
    "olmo_hybrid": _RopeGate(
        "the model rotates q and k on full_attention layers only, and on none where the "
        "rope theta is null",
        types=("full_attention", "linear_attention"),
        rotating=("full_attention",),
        null_theta=True,
        no_attention=("linear_attention",),
        all_types=True,
    ),
    # a rotary module only where position_embedding_type is "rope" (null where left out)
    "granitemoehybrid": _RopeGate(
        "the model rotates q and k only where position_embedding_type is 'rope'",
        requires=("position_embedding_type", None, "rope"),
    ),
    # the depth decoder's layers are built without RoPE
    "moshi_depth": _RopeGate("Moshi's depth decoder has no RoPE", never=True),
}


@dataclass(frozen=True)
class _NoRopeLayers:
    """How a family's config class (transformers 5.24) derives ``no_rope_layers`` (entry
    ``i``: 1 where layer ``i`` rotates, 0 where it does not; the attention reads it) where
    the config gives none: layer ``i`` does not rotate where ``(i + 1) %
    no_rope_layer_interval == 0`` (``interval`` where the key is left out), over
    ``num_hidden_layers`` layers (``layers`` where left out)."""

    layers: int  # the class's default num_hidden_layers
    interval: int = 4
    empty: bool = False  # an empty list is derived too (the class tests the list's truth)
    # where the config gives no layer_types, the class derives them from the list, one per
    # entry, and refuses a list whose length is not num_hidden_layers (Llama 4)
    types_per_entry: bool = False


#: (A given list shorter than num_hidden_layers is refused for all of them: the attention
#: of layer ``i`` reads entry ``i``, and transformers fails building the model, or its
#: config class deriving layer_types.)
_NO_ROPE_LAYERS: dict[str, _NoRopeLayers] = {
    "llama4_text": _NoRopeLayers(layers=48, empty=True, types_per_entry=True),
    "smollm3": _NoRopeLayers(layers=36),
    # (no_rope_layer_interval is not a field there: the class consumes the key)
    "mistral_large4_text": _NoRopeLayers(layers=72),
}

#: A multimodal wrapper: the text ``model_type`` its config class gives a ``text_config``
#: that names none (None: the class fails on it), for every wrapper of transformers 5.24
#: (generated: fastpe._hf_model_types).
_TEXT_MODEL_TYPES: dict[str, str | None] = dict(_WRAPPER_TEXT_TYPES)


# --------------------------------------------------------------------- layers without attention


@dataclass(frozen=True)
class _Blocks:
    """Which layers of a hybrid family have attention (transformers 5.24): the others
    (linear attention, Mamba, short convolutions) have no q and k to rotate, and read as
    ``None``, as a layer without RoPE does. The layer's block type is ``config[key]`` (the
    first of ``keys`` given), else the class's derivation ``rule(config, n)`` over
    ``num_hidden_layers`` layers (``layers`` where left out; no rule: refused)."""

    what: str
    types: tuple[str, ...]  # the block types the family's code knows (another is refused)
    no_attention: tuple[str, ...]
    keys: tuple[str, ...] = ("layer_types",)
    rule: Callable[[Mapping[str, Any], int], list[Any]] | None = None
    layers: int = 32
    # keys the config class fails on, whatever their value, and why (Bamba: its layer
    # types are a property without a setter, under either name)
    refused_keys: tuple[str, ...] = ()
    refused_why: str = ""
    # keys whose explicit null the class holds as the layer types, on which transformers
    # fails building the model (GraniteMoeHybrid's layers_block_type, an alias set last)
    null_keys: tuple[str, ...] = ()
    # every entry of a given list must be one of ``types``, whatever layer is asked (Zamba2
    # builds any other as a Mamba layer: no attention where the config names one)
    all_types: bool = False


def _every_kth(key: str, default: int, attends: str = "full_attention"):
    """The rule of the families whose every k-th layer attends (``attends``), the others
    linear attention: k is ``config[key]`` (``default`` where left out). A negative k marks
    the same layers as ``-k`` (Python's remainder, as the classes take it); 0 fails in the
    classes, and is refused."""

    def rule(config: Mapping[str, Any], n: int) -> list[Any]:
        k = _count(config, key, default)
        if k == 0:
            raise ValueError(f"config[{key!r}] is 0: the config class divides by it; set it")
        return ["linear_attention" if (i + 1) % k else attends for i in range(n)]

    return rule


def _recurrent_gemma_blocks(config: Mapping[str, Any], n: int) -> list[Any]:
    """RecurrentGemma: block_types repeated over the layers (its class cuts the list
    repeated 100 times to num_hidden_layers), "recurrent" a linear-attention block, any
    other entry a sliding-attention one."""
    kinds = config.get("block_types", ("recurrent", "recurrent", "attention"))
    if not isinstance(kinds, (list, tuple)):
        raise TypeError(f"config['block_types'] must be a list of block names, got {kinds!r}")
    if len(kinds) * 100 < n:
        raise ValueError(
            f"config['block_types'] has {len(kinds)} entries: model_type 'recurrent_gemma''s "
            f"class repeats them 100 times, fewer than num_hidden_layers = {n} layer types, "
            "and refuses that; give more block types"
        )
    return [
        "linear_attention" if k == "recurrent" else "sliding_attention"
        for k in (list(kinds) * 100)[:n]
    ]


# Zamba2's layer types where none are given: its class's fixed list of 54 (whatever
# num_hidden_layers says)
_ZAMBA2_TYPES: tuple[str, ...] = (
    ("linear_attention",)
    + (("linear_attention",) * 5 + ("hybrid",)) * 7
    + ("linear_attention",) * 4
    + ("hybrid",)
    + ("linear_attention",) * 3
    + ("hybrid",)
    + ("linear_attention",) * 2
)


def _zamba2_blocks(config: Mapping[str, Any], n: int) -> list[Any]:
    """Zamba2: the class's fixed list (:data:`_ZAMBA2_TYPES`), "hybrid" a Mamba block
    with the shared attention block before it; the class refuses it beside another
    num_hidden_layers."""
    if n != len(_ZAMBA2_TYPES):
        raise ValueError(
            f"model_type 'zamba2' with num_hidden_layers={n} and no layers_block_type: its "
            f"config class derives {len(_ZAMBA2_TYPES)} layer types whatever the layer count, "
            "and refuses them beside another; give layers_block_type, one entry per layer"
        )
    return list(_ZAMBA2_TYPES)


def _minimax_blocks(config: Mapping[str, Any], n: int) -> list[Any]:
    """MiniMax: full attention at even layers, lightning (linear) attention at odd ones."""
    return ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]


def _lfm2_blocks(config: Mapping[str, Any], n: int) -> list[Any]:
    """LFM2: full attention at full_attn_idxs (all layers where null), the others conv."""
    idxs = config.get("full_attn_idxs")
    if idxs is None:
        return ["full_attention"] * n
    if not isinstance(idxs, (list, tuple)):
        raise TypeError(f"config['full_attn_idxs'] must be a list of layer indices, got {idxs!r}")
    return ["full_attention" if i in idxs else "conv" for i in range(n)]


def _bamba_blocks(config: Mapping[str, Any], n: int) -> list[Any]:
    """Bamba: full attention at attn_layer_indices (none where null), the others Mamba."""
    idxs = config.get("attn_layer_indices")
    if idxs is not None and not isinstance(idxs, (list, tuple)):
        raise TypeError(
            f"config['attn_layer_indices'] must be a list of layer indices, got {idxs!r}"
        )
    return ["full_attention" if idxs and i in idxs else "linear_attention" for i in range(n)]


def _all_mamba(config: Mapping[str, Any], n: int) -> list[Any]:
    """GraniteMoeHybrid: every layer Mamba where layer_types is left out."""
    return ["linear_attention"] * n


#: ``model_type`` -> which of its layers have attention, for the hybrid families that
#: fastpe reads (each transcribed from the config class's ``__post_init__`` and the decoder
#: layer's ``__init__``; checked by tests/test_hf_oracle.py, test_blocks_as_the_classes).
_BLOCKS: dict[str, _Blocks] = {
    # Qwen3-Next and Qwen3.5's text models: one derivation (full_attention_interval, 4),
    # their default layer counts
    **{
        name: _Blocks(
            "its linear_attention layers (Gated DeltaNet) have no attention to rotate",
            types=("full_attention", "linear_attention"),
            no_attention=("linear_attention",),
            rule=_every_kth("full_attention_interval", 4),
            layers=layers,
        )
        for name, layers in (("qwen3_next", 48), ("qwen3_5_text", 32), ("qwen3_5_moe_text", 40))
    },
    # the class derives "indexed_attention" layers, and renames a given "full_attention"
    # so (its checkpoints' name for them)
    "qwen4_exp_text": _Blocks(
        "its linear_attention layers (Gated DeltaNet) have no attention to rotate",
        types=("indexed_attention", "full_attention", "linear_attention"),
        no_attention=("linear_attention",),
        rule=_every_kth("full_attention_interval", 4, "indexed_attention"),
        layers=40,
    ),
    # (its attention is built for "full_attention" alone: any other type a Delta block)
    "bailing_hybrid": _Blocks(
        "its linear_attention layers (Delta attention) have no attention to rotate",
        types=("full_attention", "linear_attention"),
        no_attention=("linear_attention",),
        rule=_every_kth("layer_group_size", 6),
        layers=42,
    ),
    # (its layer types are a property without a setter: _REFUSED_LAYER_KEYS)
    "recurrent_gemma": _Blocks(
        "its linear_attention layers (recurrent blocks) have no attention to rotate",
        types=("linear_attention", "sliding_attention"),
        no_attention=("linear_attention",),
        keys=(),
        rule=_recurrent_gemma_blocks,
        layers=26,
    ),
    # (layer_types, an alias: _ALIAS_KEYS; its explicit null fails building the model)
    "zamba2": _Blocks(
        "its linear_attention layers (Mamba blocks without the shared attention block) "
        "have no attention to rotate",
        types=("hybrid", "linear_attention"),
        no_attention=("linear_attention",),
        keys=("layers_block_type", "layer_types"),
        rule=_zamba2_blocks,
        layers=54,
        null_keys=("layer_types",),
        all_types=True,
    ),
    "minimax": _Blocks(
        "its linear_attention layers (lightning attention) have no attention to rotate",
        types=("full_attention", "linear_attention"),
        no_attention=("linear_attention",),
        rule=_minimax_blocks,
        layers=32,
    ),
    "lfm2": _Blocks(
        "its conv layers (short convolutions) have no attention to rotate",
        types=("full_attention", "conv"),
        no_attention=("conv",),
        rule=_lfm2_blocks,
    ),
    "lfm3": _Blocks(
        "its conv layers (short convolutions) have no attention to rotate",
        types=("full_attention", "sliding_attention", "conv"),
        no_attention=("conv",),
        rule=_lfm3_types,
        layers=24,
    ),
    "lfm2_moe": _Blocks(
        "its conv layers (short convolutions) have no attention to rotate",
        types=("full_attention", "conv"),
        no_attention=("conv",),
    ),
    "granitemoehybrid": _Blocks(
        "its linear_attention layers (Mamba) have no attention to rotate",
        types=("full_attention", "sliding_attention", "linear_attention"),
        no_attention=("linear_attention",),
        # (layers_block_type, an alias the class sets after the layer_types field, wins)
        keys=("layers_block_type", "layer_types"),
        rule=_all_mamba,
        null_keys=("layers_block_type",),
    ),
    # the class's layer types are attn_layer_indices' (a property it cannot set)
    "bamba": _Blocks(
        "its linear_attention layers (Mamba) have no attention to rotate",
        types=("full_attention", "linear_attention"),
        no_attention=("linear_attention",),
        keys=(),
        rule=_bamba_blocks,
        refused_keys=("layer_types", "layers_block_type"),
        refused_why=(
            "it derives the layer types from attn_layer_indices and cannot set them; drop "
            "the key, and give the attention layers as attn_layer_indices"
        ),
    ),
}

#: ``model_type`` -> ``(alias, field)`` pairs: keys its config class takes as another name of
#: one of its fields (transformers' ``attribute_map``), so that where both are given the
#: class keeps one of them (Zamba2: the later in the dict; JetMoE: head_dim). Both given
#: and different, fastpe refuses (read by ``fastpe.hf_config._refuse_block_keys``). Zamba2
#: computes its hybrid layers from ``layers_block_type`` (or its default list) before it
#: takes ``layer_types``: a ``layer_types`` that differs from those is refused too.
_ALIAS_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "zamba2": (("head_dim", "attention_head_dim"), ("layer_types", "layers_block_type")),
    "jetmoe": (("head_dim", "kv_channels"),),
}
