"""Every ``*RotaryEmbedding`` class of the installed transformers against fastpe's config reader.

For each class (one named test result per class): build it from its default config the way
the model does (``Cls(config)``), run it in float64, and compare with fastpe from
``config.to_dict()``: the frequencies (float64 ulps), the attention factor, and the rotation
of the basis vectors of one head by the model's own apply function, so that rotary dim,
channel layout and sign are checked, not assumed. A class either matches, or fastpe refuses
its config with the error listed in ``REFUSED`` / ``NO_ROPE`` below (each with the reason);
an unlisted refusal, a listed class that is now read, or any mismatch fails.

A class that fastpe reads is also driven with 3-D (time, height, width) position ids: if
its output then depends on more than one axis (multi-axis RoPE that a 1-D test cannot tell
apart), fastpe must have refused it.

Needs the ``hf`` extra (torch, transformers); skipped with the reason when absent.
"""

from __future__ import annotations

import copy
import inspect
import re
import warnings

import numpy as np
import pytest

pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
pytest.importorskip("transformers", reason="the hf extra (torch, transformers) is not installed")

import _hf
from transformers import PretrainedConfig

import fastpe
from fastpe._hf_families import _ROPE_GATES
from fastpe.hf_config import (
    _is_nested,
    head_dim_from_config,
    output_layout_from_config,
    rope_kwargs_from_config,
)
from fastpe.layout import interleaved_to_half
from fastpe.scaling import rope_frequencies

POSITIONS = np.array([0, 1, 2, 5, 97, 1000, 4095])

_MULTI = r"this family's multi-axis RoPE"
_VISION = r"axial RoPE of a vision encoder"
_ENC_DEC = r"encoder and decoder heads of this family"
_NO_HEAD = r"config needs .* to derive the head size"

#: Classes whose default config fastpe refuses: (pattern of the error, why).
REFUSED: dict[str, tuple[str, str]] = {
    "HunYuanVLRotaryEmbedding": (
        r"has no mrope_section \(or xdrope_section\)",
        "the default config has no mrope_section, on which HF itself fails; configs with one "
        "are read (two rows of pair_axes) and compared with HF in "
        "test_hunyuan_vl_sections_against_hf",
    ),
    "CohereCompassRotaryEmbedding": (
        _MULTI,
        "the default config has no rope dict per layer type, on which HF itself fails "
        "(KeyError 'full_attention')",
    ),
    "Llama4VisionRotaryEmbedding": (
        r"not driven by token position ids: its vision RoPE is a fixed grid",
        "complex frequencies of a fixed patch grid built in the module (its forward takes no "
        "position ids)",
    ),
    "EfficientLoFTRRotaryEmbedding": (
        r"not driven by token position ids: .* aggregated feature map",
        "positions from the feature map's shape inside the module (its forward takes no "
        "position ids)",
    ),
    "EomtDinov3RotaryEmbedding": (
        r"not driven by token position ids: .* normalised to \[-1, 1\]",
        "patch coordinates normalised to [-1, 1] (float positions) from the pixel values (its "
        "forward takes no position ids)",
    ),
    "DeepseekOcr2VisionRotaryEmbedding": (
        _VISION,
        "the default config lacks max_position_embeddings, on which HF itself fails",
    ),
    **{
        name: (
            _ENC_DEC,
            "the top-level config holds one sub-config per stack (encoder, decoder), each "
            "with its own head size: the top level is refused and each sub-config is read "
            "and compared with HF built from it (test results tagged with the sub-config)",
        )
        for name in ("DiaRotaryEmbedding", "T5GemmaRotaryEmbedding")
    },
    **{
        name: (
            _NO_HEAD,
            "config.to_dict() of the default config holds no head size (it lives "
            "in sub-configs the model reads)",
        )
        for name in (
            "BltRotaryEmbedding",
            "Nemotron3DiarizationRotaryEmbedding",
        )
    },
    **{
        name: (
            r"mrope_section \[8, 12, 12\] covers 32 pairs, but the rotary dim has 64",
            "the default config's sections cover half the rotated pairs: HF itself fails "
            "(split_with_sizes) on it",
        )
        for name in (
            "Glm4vTextRotaryEmbedding",
            "GlmImageTextRotaryEmbedding",
        )
    },
    **{
        name: (
            _NO_HEAD,
            "the default top-level config nests the text model (thinker_config); HF itself "
            "fails on it (no max_position_embeddings)",
        )
        for name in ("Qwen2_5OmniRotaryEmbedding", "Qwen3OmniMoeRotaryEmbedding")
    },
    **{
        name: (
            r"int\(73 \* 1.0\) = 73 must be a positive even number",
            "the default config gives an odd head size (73)",
        )
        for name in (
            "Qwen3OmniMoeTalkerRotaryEmbedding",
            "Qwen3OmniMoeThinkerTextRotaryEmbedding",
        )
    },
    "MiniMaxM3VLRotaryEmbedding": (
        r"config\['rotary_dim'\] says 64 channels are rotated, but .* = 128",
        "the default config says rotary_dim 64, transformers 5.24's code ignores it and "
        "rotates all 128 channels: fastpe does not guess which the checkpoint uses (where "
        "partial_rotary_factor makes them agree, the config is read and checked against HF: "
        "test_minimax_m3_vl_text_read_where_rotary_dim_agrees_with_the_code)",
    ),
    "Glm4vMoeTextRotaryEmbedding": (
        r"int\(42 \* 0.5\) = 21 must be a positive even number",
        "the default config gives an odd rotary dim (and HF fails on its sections)",
    ),
    "EsmRotaryEmbedding": (
        r"position_embedding_type'\] is 'absolute': this model has no RoPE",
        "the default ESM config uses absolute position embeddings",
    ),
    "EsmFold2RotaryEmbedding": (
        r"'num_spatial_rope_pairs_per_axis'.*not understood",
        "3-D atom-coordinate RoPE, not driven by token position ids",
    ),
    "EvollaSaProtRotaryEmbedding": (
        r"'position_embedding_type' .*not understood",
        "config without model_type with a key the generic reading does not understand",
    ),
    "Glm4MoeRotaryEmbedding": (
        r"int\(42 \* 0.5\) = 21 must be a positive even number",
        "the default config gives an odd rotary dim (published GLM-4.5 configs set head_dim=128)",
    ),
    "Lfm2MoeRotaryEmbedding": (
        r"has no layer_types to tell whether the layer has attention",
        "the default config has no layer_types (its class derives none), on which the model "
        "fails building its layers; with them it is read and compared in "
        "test_hybrid_attention_layers_against_hf",
    ),
    "MusicFlamingoRotaryEmbedding": (
        r"not driven by token position ids",
        "rotates by audio timestamps, not position ids",
    ),
}

#: Classes (or layer types) for which fastpe says "no RoPE here" (returns None), and why.
#: Classes refused at the top level whose model builds them from sub-configs: the
#: sub-configs it builds them from (read the way the model does, and compared with HF).
SUB_CONFIGS: dict[str, tuple[str, ...]] = {
    # the local encoder, local decoder, global transformer and patcher: one module each
    "BltRotaryEmbedding": ("encoder_config", "decoder_config", "global_config", "patcher_config"),
    "VoxtralRealtimeRotaryEmbedding": ("audio_config", "text_config"),  # encoder, text model
    "Nemotron3DiarizationRotaryEmbedding": ("audio_config",),  # the audio model
    "Qwen2_5OmniRotaryEmbedding": ("thinker_config",),
}

NO_ROPE: dict[str, str] = {
    "BeamRotaryEmbedding[full_attention]": "rope_parameters['full_attention'] is null: "
    "full-attention layers have no RoPE",
    "Zamba2RotaryEmbedding": "use_mem_rope is false in the default config: no RoPE applied",
    "BambaRotaryEmbedding": "attn_layer_indices is null in the default config: every layer "
    "is Mamba, none has attention (with attention layers it is read and compared in "
    "test_hybrid_attention_layers_against_hf)",
    "GraniteMoeHybridRotaryEmbedding": "position_embedding_type is null in the default config: "
    "the model builds no rotary module (with 'rope' it is read and compared in "
    "test_granitemoehybrid_with_rope_against_hf)",
}

_CLASSES = _hf.rotary_classes()
_BY_NAME = {rc.name: rc for rc in _CLASSES}

# float64 bounds: frequencies to a few ulps of HF's float64 evaluation of the same formula;
# the rotation of unit vectors to a few ulps of the angle's own rounding (HF rounds
# position * inv_freq once in float64; fastpe carries the angle in double-double).
FREQ_ULP = 4
ANGLE_ULP = 4


def test_all_classes_walked():
    assert len(_CLASSES) >= 200, f"only {len(_CLASSES)} rotary classes found"
    stale = sorted((set(REFUSED) | {n.split("[")[0] for n in NO_ROPE}) - set(_BY_NAME))
    assert not stale, f"listed but not in this transformers: {stale}"


def _layer_index(config_dict: dict, layer_type: str | None, config=None) -> int | None:
    """A layer of that type; without a type, the first layer fastpe rotates (0 where none
    does, or it refuses: a family whose attention skips RoPE on some layers, Flint's
    first, is compared on a layer it rotates; test_rope_gates_against_the_modelling_code
    checks which those are); None for a rope label that is not a layer type (DeepSeek-V4's
    "main" and "compress": read by the label alone). The layer types are those ``config``
    (the config built from the dict) holds where given: a saved list may differ (Dory
    saves an mlp block after each layer's)."""
    if layer_type is None:
        for i in range(64):
            try:
                if rope_kwargs_from_config(config_dict, layer=i) is not None:
                    return i
            except (ValueError, TypeError) as exc:
                if "a layer without attention" in str(exc):
                    continue  # (a linear-attention layer of a family fastpe does not gate)
                break
        return 0
    types = config_dict.get("layer_types") or []
    if types and getattr(config, "layer_types", None):
        types = list(config.layer_types)
    if layer_type is not None and layer_type not in types:
        return None
    return types.index(layer_type) if layer_type in types else 0


@pytest.mark.parametrize("name", sorted(_BY_NAME))
def test_rotary_class(name):
    rc = _BY_NAME[name]
    assert rc.config_cls is not None, f"{name}: no config annotation on __init__"
    config = _hf.default_config(rc)
    d = config.to_dict()
    layer_types = _hf.layer_types_of(rc, config)
    null_types = _hf.null_layer_types(rc, config)
    for lt in null_types:  # HF builds nothing for these: fastpe must say "no RoPE"
        tag = f"{name}[{lt}]"
        assert tag in NO_ROPE, f"{tag}: HF has no RoPE here; list it in NO_ROPE"
        layer = _layer_index(d, lt, config)
        assert rope_kwargs_from_config(d, layer_type=lt, layer=layer) is None
    for lt in layer_types:
        tag = name if lt is None else f"{name}[{lt}]"
        layer = _layer_index(d, lt, config)
        try:
            kw = rope_kwargs_from_config(d, layer_type=lt, layer=layer)
        except ValueError as exc:
            assert name in REFUSED, f"{tag}: refused but not listed in REFUSED: {exc}"
            pattern, _why = REFUSED[name]
            assert re.search(pattern, str(exc)), f"{tag}: refused with another error: {exc}"
            if pattern == _ENC_DEC:
                _compare_stacks(rc, config, tag)
            elif name in SUB_CONFIGS:
                _compare_stacks(rc, config, tag, SUB_CONFIGS[name])
            continue
        assert name not in REFUSED, f"{tag}: listed in REFUSED but read: {kw}"
        if kw is None:
            assert tag in NO_ROPE, f"{tag}: fastpe says no RoPE, not listed in NO_ROPE"
            continue
        assert tag not in NO_ROPE
        if "inv_freq" in kw:  # a vision tower's axial RoPE
            _compare_axial(rc, config, kw, tag)
        else:
            _compare(rc, config, d, kw, lt, layer, tag)


def _compare_stacks(rc, config, tag, keys=None):
    """Each stack's sub-config (those named by ``keys``, else all) read by fastpe and
    compared with HF built from it."""
    stacks = {
        k: v
        for k, v in vars(config).items()
        if isinstance(v, PretrainedConfig) and (keys is None or k in keys)
    }
    if keys is not None:
        assert sorted(stacks) == sorted(keys), f"{tag}: sub-configs {sorted(stacks)}"
    assert stacks, f"{tag}: refused as encoder-decoder, but the config has no sub-configs"
    for key, sub in sorted(stacks.items()):
        sd = sub.to_dict()
        kw = rope_kwargs_from_config(sd)
        assert kw is not None, f"{tag}[{key}]: fastpe says no RoPE"
        _compare(rc, sub, sd, kw, None, 0, f"{tag}[{key}]")


def _compare_axial(rc, config, kw, tag):
    # (row, column) positions of a 5 x 7 grid, the rows spaced apart from the columns (and
    # 2 frames of it for a 3-D tower)
    if max(kw["pair_axes"]) == 2:
        pos = _hf.grid_positions(5, 7, 2) * np.array([[5], [3], [1]]) + np.array([[3], [1], [2]])
    else:
        pos = _hf.grid_positions(5, 7) * np.array([[3], [1]]) + np.array([[1], [2]])
    want = _hf.hf_rotate_axial(rc, config, pos)  # (patches, e_h, channels)
    d = want.shape[-1]  # the channels HF rotates (the rest of a head passes through)
    assert kw["rotary_dim"] == d, f"{tag}: HF rotates {d} channels, fastpe {kw['rotary_dim']}"
    x = np.broadcast_to(np.eye(d)[None], (pos.shape[1], d, d)).copy()
    got = fastpe.apply_rope(x, positions=pos, seq_axis=0, **kw)
    angle = np.max(pos) * float(np.max(kw["inv_freq"]))
    err = np.abs(got - want).max() / (np.spacing(1.0) * (1.0 + angle))
    assert err <= ANGLE_ULP, f"{tag}: rotated basis differs from HF by {err:.3g} angle ulps"


def _compare(rc, config, d, kw, lt, layer, tag, *, freq_ulp=FREQ_ULP, angle_ulp=ANGLE_ULP):
    head_dim = head_dim_from_config(d, layer=layer)
    # positions inside the context (GPT-J indexes a table of max_position_embeddings rows)
    positions = np.unique(np.minimum(POSITIONS, (kw["max_position_embeddings"] or 4096) - 1))
    multi = "pair_axes" in kw  # M-RoPE: (t, h, w) positions that differ
    n_axes = int(np.max(kw["pair_axes"])) + 1 if multi else 1
    pos_in = _hf.axis_positions(positions, n_axes) if multi else positions
    hf = _hf.hf_rotate(rc, config, pos_in, head_dim, lt)
    rot = kw["rotary_dim"]
    seq_len = int(positions.max()) + 1
    inv_freq, factor = rope_frequencies(
        rot,
        base=kw["base"],
        scaling=kw["scaling"],
        seq_len=seq_len,
        max_position_embeddings=kw["max_position_embeddings"],
    )
    # frequencies and attention factor
    if hf.inv_freq is not None:  # GPT-J/CodeGen keep a sin/cos table: checked by rotation
        assert hf.inv_freq.shape == inv_freq.shape, (
            f"{tag}: HF has {hf.inv_freq.size} frequencies, fastpe {inv_freq.size}"
        )
        hf_freq = hf.inv_freq
        if multi and kw["layout"] == "interleaved":  # ERNIE-4.5-VL keeps them permuted
            inv_freq, hf_freq = np.sort(inv_freq), np.sort(hf_freq)
        ulp = np.abs(inv_freq - hf_freq) / np.spacing(np.maximum(hf_freq, 1e-300))
        worst = int(np.argmax(ulp))
        assert ulp[worst] <= freq_ulp, (
            f"{tag}: inv_freq[{worst}] {inv_freq[worst]!r} vs HF {hf_freq[worst]!r}: "
            f"{ulp[worst]:.1f} ulp"
        )
    assert abs(factor - hf.attention_factor) <= 2 * np.spacing(hf.attention_factor), (
        f"{tag}: attention factor {factor!r} vs HF {hf.attention_factor!r}"
    )
    # rotation of the basis of one head by HF's own apply function
    x = np.broadcast_to(np.eye(head_dim)[None], (len(positions), head_dim, head_dim)).copy()
    got = fastpe.apply_rope(x, positions=pos_in, seq_axis=0, **kw)  # (seq, e_h, channels)
    if output_layout_from_config(d) != kw["layout"]:
        got = interleaved_to_half(got, rotary_dim=rot)
    want = hf.rotated.transpose(1, 0, 2)
    angle = np.max(pos_in) * float(np.max(inv_freq))
    err = np.abs(got - want).max() / (factor * np.spacing(1.0) * (1.0 + angle))
    assert err <= angle_ulp, (
        f"{tag}: rotated basis differs from HF ({hf.apply_name}) by {err:.3g} angle ulps; "
        f"kwargs {kw}"
    )
    # a class whose output depends on more than one position axis must be read as such
    assert _hf.depends_on_axes(rc, config, positions, head_dim, lt) == multi, (
        f"{tag}: HF rotates by several position axes (multi-axis RoPE) but fastpe read it as 1-D"
        if not multi
        else f"{tag}: fastpe returned pair_axes but HF rotates by one position axis"
    )


def _rope_dicts(d: dict) -> list[dict]:
    """The rope dict(s) of ``d["rope_parameters"]``: one, or one per layer type."""
    rope = d.get("rope_parameters")
    if not isinstance(rope, dict) or not rope:
        return []
    nested = [v for v in rope.values() if isinstance(v, dict)]
    return nested if _is_nested(rope) else [rope]


def _set_in_dicts(**values):
    def mutate(d):
        parts = _rope_dicts(d)
        if not parts:
            return None
        for part in parts:
            part.update(values)
        d.pop("layer_rope_theta", None)  # (Granite-SWA's per-layer copy of the theta)
        return d

    return mutate


def _drop_from_dicts(*keys, top=None, set_type=None):
    def mutate(d):
        parts = _rope_dicts(d)
        if not parts:
            return None
        if not any(k in p for p in parts for k in keys) and not any(k in d for k in keys):
            return None
        for part in parts:
            for k in keys:
                part.pop(k, None)
            if set_type is not None:
                part.pop("type", None)
                part.update(set_type)
        for k in keys:
            d.pop(k, None)
        d.pop("layer_rope_theta", None)
        if top is not None:
            d.update(top)
        return d

    return mutate


def _flat_pair(params: dict, scaling: dict):
    def mutate(d):
        parts = _rope_dicts(d)
        if len(parts) != 1 or _is_nested(d["rope_parameters"]):
            return None
        base = {k: v for k, v in parts[0].items() if k not in ("rope_type", "type")}
        d["rope_parameters"] = {**base, **params}
        d["rope_scaling"] = dict(scaling)
        return d

    return mutate


def _yarn(truncate):
    extra = {} if truncate == "absent" else {"truncate": truncate}
    values = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}

    def mutate(d):
        parts = _rope_dicts(d)
        if not parts:
            return None
        for part in parts:
            part.pop("type", None)
            part.update(values, **extra)
        return d

    return mutate


def _legacy_scaling(**extra):
    def mutate(d):
        d.pop("rope_parameters", None)
        d["rope_scaling"] = {"type": "linear", "factor": 2.0, **extra}
        return d

    return mutate


def _flat_scaling(values, key="rope_scaling"):
    def mutate(d):
        if not _rope_dicts(d):
            return None
        for k in ("rope_parameters", "rope_scaling", "rope_theta", "layer_rope_theta"):
            d.pop(k, None)
        d[key] = dict(values)
        return d

    return mutate


def _only_top(**values):
    def mutate(d):
        if not _rope_dicts(d):
            return None
        for k in ("rope_parameters", "rope_scaling", "layer_rope_theta"):
            d.pop(k, None)
        d.update(values)
        return d

    return mutate


def _legacy_type_in_dicts(d):
    parts = _rope_dicts(d)
    if not parts:
        return None
    for part in parts:
        part.pop("rope_type", None)
        part.update(type="linear", factor=2.0)
    return d


def _moved_to_scaling(d):
    if not _rope_dicts(d):
        return None
    d["rope_scaling"] = d.pop("rope_parameters")
    return d


def _copied_to_scaling(d):
    if not _rope_dicts(d):
        return None
    d["rope_scaling"] = copy.deepcopy(d["rope_parameters"])
    return d


def _top(**values):
    def mutate(d):
        d.update(values)
        return d

    return mutate


def _without(key):
    def mutate(d):
        return None if key not in d else {k: v for k, v in d.items() if k != key}

    return mutate


#: Variants of each class's default config (``config.to_dict()``), the ways a config.json
#: writes the same keys: each either is refused by fastpe or rotates as HF's module built
#: from it (``Cls(**variant)``).
VARIANTS = {
    "partial_rotary_factor 0.5 at the top level": _top(partial_rotary_factor=0.5),
    "partial_rotary_factor 0.5 in the rope dict(s)": _set_in_dicts(partial_rotary_factor=0.5),
    "no partial_rotary_factor anywhere": _drop_from_dicts("partial_rotary_factor"),
    "rope_theta 54321 in the rope dict(s)": _set_in_dicts(rope_theta=54321.0),
    "rope_theta 12345 at the top level": _top(rope_theta=12345.0),
    "no rope_theta anywhere": _drop_from_dicts("rope_theta"),
    "rope_theta at the top level alone": _drop_from_dicts(
        "rope_theta", top={"rope_theta": 12345.0}
    ),
    "dynamic rope_parameters, legacy linear rope_scaling": _flat_pair(
        {"rope_type": "dynamic", "factor": 2.0}, {"type": "linear", "factor": 2.0}
    ),
    "legacy linear rope_parameters, dynamic rope_scaling": _flat_pair(
        {"type": "linear", "factor": 2.0}, {"rope_type": "dynamic", "factor": 2.0}
    ),
    "the same linear dict in both": _flat_pair(
        {"rope_type": "linear", "factor": 2.0}, {"rope_type": "linear", "factor": 2.0}
    ),
    "YaRN, truncate false": _yarn(False),
    "YaRN, truncate null": _yarn(None),
    "YaRN, truncate absent": _yarn("absent"),
    "legacy rope_scaling alone": _legacy_scaling(),
    "legacy rope_scaling alone, with a partial factor": _legacy_scaling(partial_rotary_factor=0.5),
    "rope_parameters moved to rope_scaling": _moved_to_scaling,
    "rope_parameters copied to rope_scaling": _copied_to_scaling,
    "no rotary_dim": _without("rotary_dim"),
    # as published configs write them: flat keys, which a family split by layer type builds
    # its dicts from
    "a flat linear rope_scaling, no rope_parameters": _flat_scaling(
        {"rope_type": "linear", "factor": 8.0}
    ),
    "a flat linear rope_scaling with the legacy type": _flat_scaling(
        {"type": "linear", "factor": 8.0}
    ),
    "a flat rope_parameters with its theta": _flat_scaling(
        {"rope_type": "linear", "factor": 8.0, "rope_theta": 50000.0}, key="rope_parameters"
    ),
    "rope_theta at the top level, no rope dict": _only_top(rope_theta=12345.0),
    "partial_rotary_factor at the top level, no rope dict": _only_top(partial_rotary_factor=0.5),
    "a legacy linear type in each rope dict": _legacy_type_in_dicts,
    "a scaled type in each rope dict, the theta at the top level": _drop_from_dicts(
        "rope_theta", top={"rope_theta": 33333.0}, set_type={"rope_type": "linear", "factor": 4.0}
    ),
}

#: How far fastpe may be from HF on a variant: the values read are what is checked here (a
#: misreading moves a frequency by far more, 2**-10 and up in every one seen); their ulp
#: accuracy is test_rotary_class's, on each default config (HF's own float64 evaluation of
#: a scaled formula can be several ulps off, e.g. llama3 smoothing).
READING_ULP = 2**22  # 2**-30 relative


@pytest.mark.parametrize("name", sorted(_BY_NAME))
def test_rotary_class_config_variants(name):
    """Each variant of the class's default config (:data:`VARIANTS`) is refused by fastpe
    or read as HF's module built from it rotates (the frequencies, attention factor and
    rotation of a head's basis), for each layer type asked for by type and layer, by layer
    alone and not at all; a variant HF cannot build is not compared."""
    rc = _BY_NAME[name]
    if rc.config_cls is None:
        pytest.skip("no config annotation (see test_rotary_class)")
    wrong = _variants_read_otherwise(rc, rc.config_cls)
    assert not wrong, "read otherwise than HF:\n" + "\n".join(wrong)


def test_t5gemma2_decoder_config_variants():
    """T5Gemma 2's decoder config, which the walk of rotary classes does not build (its
    class is reached through the encoder-decoder parent), through the same variants."""
    from transformers.models.t5gemma2.configuration_t5gemma2 import T5Gemma2DecoderConfig

    wrong = _variants_read_otherwise(_BY_NAME["T5Gemma2RotaryEmbedding"], T5Gemma2DecoderConfig)
    assert not wrong, "read otherwise than HF:\n" + "\n".join(wrong)


def _variants_read_otherwise(rc, config_cls) -> list[str]:
    """The variants (and call styles) of ``config_cls``'s default config that fastpe reads
    otherwise than HF's module ``rc.cls`` built from them rotates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = config_cls().to_dict()
    name = rc.name
    wrong = []
    for variant, mutate in VARIANTS.items():
        d = mutate(copy.deepcopy(base))
        if d is None:
            continue  # the variant does not apply to this config
        try:
            config = config_cls(**{k: v for k, v in copy.deepcopy(d).items() if k != "model_type"})
            layer_types = _hf.layer_types_of(rc, config)
        except Exception:
            continue  # HF cannot build it
        # each layer type asked for as layer_type and layer, as layer alone, and not at all
        # (the reading must then hold for every layer type, or be refused)
        calls = []
        for lt in layer_types:
            layer = _layer_index(d, lt, config)
            calls.append(((lt, layer), lt, layer))
            if layer is not None and lt is not None:
                calls.append(((None, layer), lt, layer))
            calls.append(((None, None), lt, layer))
        for (ask_type, ask_layer), lt, layer in calls:
            try:
                kw = rope_kwargs_from_config(copy.deepcopy(d), layer_type=ask_type, layer=ask_layer)
            except (ValueError, TypeError):
                continue  # refused
            if kw is None or "inv_freq" in kw:
                continue  # no RoPE here (test_rotary_class), or a vision tower
            tag = f"{name}[{lt}] {variant} (asked: layer_type={ask_type}, layer={ask_layer})"
            try:
                _hf.hf_rotate(rc, config, [0, 1], head_dim_from_config(d, layer=layer), lt)
            except Exception:
                continue  # HF builds the config but cannot run it
            try:
                _compare(
                    rc, config, d, kw, lt, layer, tag, freq_ulp=READING_ULP, angle_ulp=READING_ULP
                )
            except AssertionError as exc:
                wrong.append(str(exc)[:300])
    return wrong


def test_class_defaults_table_is_current():
    from fastpe.hf_config import _CLASS_DEFAULTS

    assert _hf.class_defaults() == _CLASS_DEFAULTS


def test_given_defaults_table_is_current():
    """What a rope dict given without theta or partial factor gets, per family (and the
    theta beside a top-level one): the table ``_GIVEN_DEFAULTS`` against the installed
    transformers."""
    from fastpe._hf_families import _GIVEN_DEFAULTS

    assert _hf.given_defaults() == _GIVEN_DEFAULTS


def test_ignores_partial_table_is_current():
    """The families whose default rotary code rotates the whole head whatever
    partial_rotary_factor says: fastpe refuses the factor there (as read, HF's rotation
    differs from the factor's by up to 2 on a unit vector)."""
    from fastpe._hf_families import _IGNORES_PARTIAL

    assert _hf.ignores_partial() == set(_IGNORES_PARTIAL)
    from fastpe._hf_families import _IGNORES_PARTIAL_BY_TYPE

    assert _hf.ignores_partial_by_layer_type() == _IGNORES_PARTIAL_BY_TYPE
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
    with pytest.raises(ValueError, match="rotates the whole head"):
        rope_kwargs_from_config(dict(config, partial_rotary_factor=0.5))
    with pytest.raises(ValueError, match="rotates the whole head"):
        rope_kwargs_from_config(dict(config, rope_parameters={"partial_rotary_factor": 0.5}))
    # phi3's code reads it
    kw = rope_kwargs_from_config(dict(config, model_type="phi3", partial_rotary_factor=0.5))
    assert kw["rotary_dim"] == 32


def test_vision_towers_table_is_current():
    """The tower a multimodal config names when its vision_config has no model_type."""
    from fastpe._hf_axes import VISION_TOWERS

    assert _hf.vision_towers() == VISION_TOWERS


@pytest.mark.parametrize("name", ["QWEN2_VL_7B", "QWEN25_VL_7B", "QWEN2_VL_7B-no-embed_dim"])
def test_published_vision_config_read_as_transformers_builds_it(name):
    """A published config.json (its vision_config without model_type) read as it is gives
    what fastpe reads from the config transformers builds from it (tower type and every
    default filled in; without embed_dim, Qwen2-VL's tower is its class default wide, not
    the language model's hidden_size)."""
    import _published
    from transformers import AutoConfig

    base = name.split("-")[0]
    vision = dict(getattr(_published, base + "_VISION"))
    if name.endswith("no-embed_dim"):
        del vision["embed_dim"]
    raw = dict(getattr(_published, base), vision_config=vision)
    built = AutoConfig.for_model(**raw).to_dict()
    assert built["vision_config"]["model_type"].endswith("_vision")
    got = fastpe.rope_kwargs_from_config(raw, tower="vision")
    assert got == fastpe.rope_kwargs_from_config(built, tower="vision")


#: Head sizes that a config saved by transformers 4 leaves out where they equal the class
#: default (its to_diff_dict compares with the default config, as built: a size the class
#: derives is left out too)
_SIZE_KEYS = ("head_dim", "qk_rope_head_dim", "qk_nope_head_dim", "rotary_dim")


def _defaulted() -> list[str]:
    """The classes whose default config holds a value a config may leave out: a head size
    (whether fastpe's table of class defaults has it or not) or a rope dict."""
    from fastpe.hf_config import _CLASS_DEFAULTS  # checked against transformers above

    out = []
    for name, rc in _BY_NAME.items():
        if name in REFUSED or rc.config_cls is None:
            continue
        try:
            full = _hf.default_config(rc).to_dict()
        except Exception:
            continue
        if full.get("model_type") in _CLASS_DEFAULTS or any(
            full.get(k) is not None for k in _SIZE_KEYS
        ):
            out.append(name)
    return sorted(out)


_DEFAULTED = _defaulted()


@pytest.mark.parametrize("name", _DEFAULTED)
def test_config_leaving_out_class_defaults(name):
    """A default config without its rope keys and head sizes (as transformers 4 saves it:
    values equal to the class default are left out) reads as the full one, and as the
    rotary class built from it rotates (the config class fills in the same values)."""
    from fastpe.hf_config import _CLASS_DEFAULTS, _FAMILIES

    rc = _BY_NAME[name]
    config = _hf.default_config(rc)
    full = config.to_dict()
    defaults = _CLASS_DEFAULTS.get(full["model_type"], {})
    left_out = ("rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor")
    family = _FAMILIES.get(full["model_type"])
    sizes = _SIZE_KEYS
    if family and family.rope_labels:  # (DeepSeek-V4 sizes its rope slice by qk_rope_head_dim
        sizes = tuple(k for k in sizes if k != "qk_rope_head_dim")  # where no factor is given)
    sparse = {k: v for k, v in full.items() if k not in left_out + sizes}
    if defaults.get("nested") and not (family and (family.rope_labels or family.split_by_type)):
        with pytest.raises(ValueError, match=r"gives each layer type its own"):
            rope_kwargs_from_config(sparse)
        return
    for lt in _hf.layer_types_of(rc, config):
        layer = _layer_index(full, lt, config)
        want = rope_kwargs_from_config(full, layer_type=lt, layer=layer)
        got = rope_kwargs_from_config(sparse, layer_type=lt, layer=layer)
        assert got == want
        if got is None or "inv_freq" in got:
            continue
        assert head_dim_from_config(sparse, layer=layer) == head_dim_from_config(full, layer=layer)
        _compare(rc, config, sparse, got, lt, layer, f"{name}[{lt}] sizes left out")


def _latent_types() -> list[str]:
    """The model types fastpe reads whose head size is (or holds) qk_rope_head_dim."""
    from fastpe._hf_families import _FAMILIES

    classes = _hf.config_classes()
    return sorted(
        t
        for t, f in _FAMILIES.items()
        if f.refuse is None
        and "qk_rope_head_dim" in f.head_dim_keys + f.head_dim_sum
        and t in classes
        and "text_config" not in (getattr(classes[t], "sub_configs", None) or {})
    )


_YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "original_max_position_embeddings": 1024,
}
_LATENT_SIZES = {
    "none": {},
    "head_dim": {"head_dim": 48},
    "qk_rope_head_dim": {"qk_rope_head_dim": 32},
    "both, agreeing": {"qk_rope_head_dim": 32, "head_dim": 32},
    "both, differing": {"qk_rope_head_dim": 32, "head_dim": 48},
    "qk_rope_head_dim and qk_nope_head_dim": {"qk_rope_head_dim": 32, "qk_nope_head_dim": 32},
    # (Mistral 4 derives its partial factor from these two: 32 / 128)
    "qk_nope_head_dim 96, yarn": {
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 96,
        "rope_parameters": _YARN,
    },
    # the config classes fail on a null size (or, keeping a null head_dim, size their
    # rotary class by hidden_size // num_attention_heads)
    "null qk_rope_head_dim": {"qk_rope_head_dim": None},
    "null head_dim": {"head_dim": None},
    "null qk_nope_head_dim": {"qk_nope_head_dim": None},
    # a partial factor: ignored by most default rotary codes, applied by the others and by
    # the scaled types to the rope part, whose rotated channels then differ from the
    # attention's (the model fails) unless the class sizes the head otherwise (Mistral 4)
    "partial factor": {"qk_rope_head_dim": 32, "partial_rotary_factor": 0.5},
    "partial factor, yarn": {
        "qk_rope_head_dim": 32,
        "rope_parameters": {**_YARN, "partial_rotary_factor": 0.5},
    },
}


@pytest.mark.parametrize("sizes", sorted(_LATENT_SIZES))
@pytest.mark.parametrize("model_type", _latent_types())
def test_latent_attention_head_sizes_against_hf(model_type, sizes):
    """A latent-attention config that gives its head sizes (null included) or a partial
    factor, or leaves them out (the class default: 64 for DeepSeek-V3, not hidden_size //
    num_attention_heads), read as the config class builds it: where the class refuses it,
    fastpe refuses; the rotary class's rotated channels must be those the attention
    rotates (qk_rope_head_dim), else transformers' model fails and fastpe must refuse;
    where they agree, fastpe's head size is the head the rope part belongs to
    (qk_rope_head_dim; Mistral 4's qk_nope_head_dim + qk_rope_head_dim) and its reading
    rotates as the rotary class and apply function built from the config."""
    from fastpe._hf_families import _FAMILIES

    raw = {
        "model_type": model_type,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_hidden_layers": 2,
        **_LATENT_SIZES[sizes],
    }
    if model_type == "bailing_hybrid":  # (its layer 1 attends; by default its 6th alone)
        raw["layer_group_size"] = 2
    if model_type == "hy_v4_vl_text" and raw.get("qk_rope_head_dim") == 32:
        # (its class refuses mrope sections that do not cover the rope part's pairs)
        rope = raw.get("rope_parameters") or {"rope_type": "default"}
        raw["rope_parameters"] = {**rope, "mrope_section": [6, 5, 5]}
    classes = _hf.config_classes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = classes[model_type](**{k: v for k, v in raw.items() if k != "model_type"})
    except Exception as exc:  # the config class refuses it (strict fields: TypeError)
        null = next((k for k, v in raw.items() if v is None), None)
        match = rf"config\['{null}'\] is null" if null else None
        with pytest.raises(ValueError, match=match):
            rope_kwargs_from_config(raw, layer=0)
        with pytest.raises(ValueError, match=match):
            head_dim_from_config(raw, layer=0)
        assert null, exc
        return
    rc = _hf.rotary_class_for(config)
    try:
        with _hf.float64_torch():
            rotated = 2 * _hf.build(rc, config).inv_freq.numel()
    except TypeError:  # (Mistral 4 keeps a null head_dim, on which its rotary class fails)
        rotated = None
    layer = _layer_index(raw, None, config)
    if rotated != config.qk_rope_head_dim:  # transformers' model fails on this config
        refusal = r"make them agree|ignores partial_rotary_factor|is null"
        with pytest.raises(ValueError, match=refusal):
            rope_kwargs_from_config(raw, layer=layer)
        return
    head = config.qk_rope_head_dim
    if model_type == "mistral4":
        head += config.qk_nope_head_dim
    family = _FAMILIES[model_type]
    try:
        kw = rope_kwargs_from_config(raw, layer=layer)
    except ValueError as exc:
        # refusals of a working config, stated: a partial factor the default rotary code
        # ignores (fastpe does not rotate otherwise than the factor says), and a head_dim
        # the class keeps beside a differing qk_rope_head_dim (read only where they agree)
        kept = getattr(config, "head_dim", None)
        assert "partial" in sizes or "null" in sizes, exc
        assert "ignores partial_rotary_factor" in str(exc) or (
            family.same_size_keys and kept != config.qk_rope_head_dim
        ), exc
        return
    assert head_dim_from_config(raw, layer=layer) == head
    assert kw["rotary_dim"] == config.qk_rope_head_dim
    _compare(rc, config, raw, kw, None, layer, f"{model_type} {sizes}")


def _per_layer_global_types() -> list[str]:
    from fastpe._hf_families import _FAMILIES

    return sorted(t for t, f in _FAMILIES.items() if f.per_layer_global)


@pytest.mark.parametrize(
    "entry",
    [
        {"qk_rope_head_dim": 16},
        {"head_dim": 16},
        {"num_attention_heads": 4},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5.0}},
    ],
    ids=lambda e: next(iter(e)),
)
@pytest.mark.parametrize("model_type", _per_layer_global_types())
def test_latent_per_layer_sizes_against_hf(model_type, entry):
    """DeepSeek-V3.2 and its kin read their sizes and rope keys from the top-level config
    (one rotary class, each attention built from the whole config): transformers' model
    fails where per_layer_config sets one, and fastpe refuses it for every layer (it read
    a per-layer head_dim as that layer's head size)."""
    import torch
    import transformers

    small = dict(
        hidden_size=64,
        num_attention_heads=2,
        num_hidden_layers=4,
        intermediate_size=64,
        moe_intermediate_size=32,
        vocab_size=100,
        q_lora_rank=16,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
        head_dim=8,
        n_routed_experts=2,
        num_experts_per_tok=1,
        index_head_dim=16,
        index_n_heads=2,
        pad_token_id=0,
        layer_group_size=2,  # (Bailing-hybrid: its layers 1 and 3 attend)
    )
    cls = _hf.config_classes()[model_type]
    raw = {k: v for k, v in small.items() if k in cls.__dataclass_fields__}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # an attention layer (Bailing-hybrid's others are linear attention, which reads
        # none of these)
        types = list(getattr(cls(**raw), "layer_types", None) or [])
        at = types.index("full_attention") if "full_attention" in types else 1
        raw["per_layer_config"] = {at: entry}
        auto = transformers.AutoModel._model_mapping[cls]
        # (Bailing-hybrid's model runs with a per-layer qk_rope_head_dim or head count,
        # which fastpe still refuses: not traced yet)
        if model_type != "bailing_hybrid" or next(iter(entry)) in ("head_dim", "rope_parameters"):
            with pytest.raises(Exception, match=r"per-layer attribute"):
                model = auto(cls(**raw)).eval()
                with torch.no_grad():
                    model(torch.arange(5)[None], use_cache=False)
    for layer in (0, 1):
        with pytest.raises(ValueError, match=rf"per_layer_config'\]\[{at}\] sets"):
            rope_kwargs_from_config({**raw, "model_type": model_type}, layer=layer)
        with pytest.raises(ValueError, match=rf"per_layer_config'\]\[{at}\] sets"):
            head_dim_from_config({**raw, "model_type": model_type}, layer=layer)
    # a per-layer key that RoPE does not read: RoPE is the top level's
    plain = {**raw, "model_type": model_type, "per_layer_config": {at: {"intermediate_size": 32}}}
    top = {k: v for k, v in plain.items() if k != "per_layer_config"}
    assert rope_kwargs_from_config(plain, layer=at) == rope_kwargs_from_config(top, layer=at)
    assert head_dim_from_config(plain, layer=at) == head_dim_from_config(top, layer=at)


def test_deepseek_v4_published_form_against_hf():
    """DeepSeek-V4 from the flat keys of a published config (YaRN on the compressed
    layers, attention factor 1), read by fastpe as it stands and compared with HF's module
    built from it (its config class nests the dicts)."""
    from test_config_hf import V4_FLAT

    rc = _BY_NAME["DeepseekV4RotaryEmbedding"]
    kwargs = {k: v for k, v in V4_FLAT.items() if k != "model_type"}
    config = rc.config_cls(**kwargs)
    assert config.rope_parameters["compress"]["rope_type"] == "yarn"
    for label in ("main", "compress"):
        kw = rope_kwargs_from_config(V4_FLAT, layer_type=label)
        _compare(rc, config, V4_FLAT, kw, label, None, f"DeepseekV4[published, {label}]")


def test_borrowed_rotary_classes_are_the_models():
    """A config class that borrows another family's rotary class (``_hf.BORROWED``):
    AutoModel builds that family's model from it, whose only rotary module is that class."""
    import torch
    from transformers import AutoModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    for model_type, name in sorted(_hf.BORROWED.items()):
        rc = _BY_NAME[f"{name}@{model_type}"]
        model_cls = MODEL_MAPPING_NAMES[model_type]
        assert model_cls in vars(rc.module), f"{model_type}: {model_cls} not in {rc.module}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            config = rc.config_cls(**_TINY, num_hidden_layers=2, **_MOE)
            model = AutoModel.from_config(config)
        kinds = {type(m) for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")}
        assert kinds == {rc.cls}, f"{model_type}: {kinds}"


def _sarvam_original(**extra) -> dict:
    """A Sarvam MLA config in its original form (the remote code's): head_dim holds
    kv_lora_rank + qk_rope_head_dim, q_head_dim the query head, and a rope_scaling of the
    type "deepseek_yarn"; sizes whose hidden_size // num_attention_heads (128) is not the
    rope part."""
    config = {
        "model_type": "sarvam_mla",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 128,
        "q_head_dim": 160,
        "head_dim": 544,
        "v_head_dim": 128,
        "max_position_embeddings": 4096,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "type": "deepseek_yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,
        },
    }
    config.update(extra)
    return {k: v for k, v in config.items() if v is not None}


@pytest.mark.parametrize("interleave", [True, False, None])
@pytest.mark.parametrize("form", ["original", "no qk_rope_head_dim", "no rope_scaling"])
def test_sarvam_mla_original_form_against_hf(form, interleave):
    """Sarvam MLA as its original configs write it, read by fastpe and compared with
    DeepSeek-V3's rotary class and apply function built from the config class (which drops
    head_dim and q_head_dim, renames "deepseek_yarn" to "yarn", and takes qk_rope_head_dim
    64 where left out), each way rope_interleave is given; saved by transformers
    (config.to_dict()) it reads the same."""
    rc = _BY_NAME["DeepseekV3RotaryEmbedding@sarvam_mla"]
    extra: dict = {"rope_interleave": interleave}
    if form == "no qk_rope_head_dim":
        extra.update(qk_rope_head_dim=None, q_head_dim=192, head_dim=576)
    elif form == "no rope_scaling":
        extra.update(rope_scaling=None)
    raw = _sarvam_original(**extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = rc.config_cls(**{k: v for k, v in raw.items() if k != "model_type"})
    assert head_dim_from_config(raw) == config.head_dim == config.qk_rope_head_dim
    kw = rope_kwargs_from_config(raw)
    assert kw == rope_kwargs_from_config(config.to_dict())
    assert kw["layout"] == ("half" if interleave is False else "interleaved")
    assert output_layout_from_config(raw) == "half"
    _compare(rc, config, raw, kw, None, 0, f"sarvam_mla {form} rope_interleave={interleave}")


def test_sarvam_mla_deepseek_yarn_outside_rope_scaling_refused():
    """The config class renames "deepseek_yarn" in rope_scaling only: in rope_parameters
    transformers keeps the type and its rotary class fails on it; fastpe refuses."""
    rc = _BY_NAME["DeepseekV3RotaryEmbedding@sarvam_mla"]
    raw = _sarvam_original()
    raw["rope_parameters"] = dict(raw.pop("rope_scaling"), rope_theta=50000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = rc.config_cls(**{k: v for k, v in raw.items() if k != "model_type"})
        with pytest.raises(KeyError, match="deepseek_yarn"):
            rc.cls(config)
    with pytest.raises(ValueError, match=r"renamed 'yarn' .* only in config\['rope_scaling'\]"):
        rope_kwargs_from_config(raw)
    # given in both dicts, the class takes rope_scaling's, renamed
    both = dict(raw, rope_scaling=copy.deepcopy(raw["rope_parameters"]))
    kw = rope_kwargs_from_config(both)
    assert kw == rope_kwargs_from_config(_sarvam_original())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = rc.config_cls(**{k: v for k, v in both.items() if k != "model_type"})
    _compare(rc, config, both, kw, None, 0, "sarvam_mla deepseek_yarn in both dicts")


def test_step3p7_sliding_layers_with_their_own_heads_against_hf():
    """Step3.7's text model with sliding-window layers of another head count
    (num_sliding_attention_heads, saved as per_layer_config entries) and their own theta and
    partial factor per layer type: each layer read by fastpe and compared with HF."""
    from transformers.models.step3p7.configuration_step3p7 import Step3p7TextConfig

    rc = _BY_NAME["Step3p7RotaryEmbedding"]
    config = Step3p7TextConfig(
        num_hidden_layers=3,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        num_sliding_attention_heads=32,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "default",
                "rope_theta": 5e6,
                "partial_rotary_factor": 0.5,
            },
        },
    )
    d = config.to_dict()
    assert d["per_layer_config"], "the head counts are saved per layer"
    for layer, lt in enumerate(d["layer_types"]):
        kw = rope_kwargs_from_config(d, layer=layer)
        assert kw == rope_kwargs_from_config(d, layer_type=lt)
        _compare(rc, config, d, kw, lt, layer, f"Step3p7[layer {layer}, {lt}]")
    bad = {**d, "per_layer_config": {"0": {"num_attention_heads": 32, "head_dim": 64}}}
    with pytest.raises(ValueError, match=r"ignores per-layer values other than head counts"):
        rope_kwargs_from_config(bad, layer=0)


@pytest.mark.parametrize("partial", [0.5, 1.0])
def test_minimax_m3_vl_text_read_where_rotary_dim_agrees_with_the_code(partial):
    """MiniMax-M3-VL's text config states rotary_dim; its rotary class rotates head_dim *
    partial_rotary_factor. Where the two agree, fastpe reads it, and rotates as HF does."""
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import (
        MiniMaxM3VLTextConfig,
    )

    rc = _BY_NAME["MiniMaxM3VLRotaryEmbedding"]
    rotary = int(128 * partial)
    config = MiniMaxM3VLTextConfig(
        num_hidden_layers=1,
        rotary_dim=rotary,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5e6,
            "partial_rotary_factor": partial,
        },
    )
    d = config.to_dict()
    kw = rope_kwargs_from_config(d)
    assert kw["rotary_dim"] == rotary
    _compare(rc, config, d, kw, None, 0, f"MiniMaxM3VL[rotary_dim {rotary}]")


@pytest.mark.parametrize("name", ["HunYuanDenseV1RotaryEmbedding", "HunYuanMoEV1RotaryEmbedding"])
def test_hunyuan_ntk_alpha_published_form_against_hf(name):
    """HunYuan's published configs write a fixed NTK-alpha base as "dynamic" with an
    alpha (values of Hunyuan-7B-Instruct's config); its rotary class reads it as
    base * alpha ** (d / (d - 2)). Read by fastpe and compared with HF built from it."""
    rc = _BY_NAME[name]
    scaling = {
        "alpha": 1000.0,
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "type": "dynamic",
    }
    config = rc.config_cls(
        num_hidden_layers=1,
        hidden_size=4096,
        num_attention_heads=32,
        head_dim=128,
        max_position_embeddings=262144,
        rope_theta=10000.0,
        rope_scaling=scaling,
    )
    d = config.to_dict()
    kw = rope_kwargs_from_config(d)
    assert kw["scaling"]["rope_type"] == "ntk_alpha"
    _compare(rc, config, d, kw, None, 0, f"{name}[alpha 1000]")


def test_phimoe_longrope_mscale_against_hf():
    """PhiMoE multiplies cos and sin of its LongRoPE by short_mscale / long_mscale (both
    1.2431... in Phi-3.5-MoE's published config), not by LongRoPE's own attention factor
    (1.19 for 131072 / 4096): read as attention_factor, compared with HF built from it."""
    rc = _BY_NAME["PhimoeRotaryEmbedding"]
    scaling = {
        "type": "longrope",
        "short_factor": list(np.linspace(1.0, 1.1, 64)),
        "long_factor": list(np.linspace(1.0, 30.0, 64)),
        "short_mscale": 1.243163121016122,
        "long_mscale": 1.243163121016122,
        "original_max_position_embeddings": 4096,
    }
    config = rc.config_cls(
        num_hidden_layers=1,
        hidden_size=4096,
        num_attention_heads=32,
        max_position_embeddings=131072,
        rope_theta=10000.0,
        rope_scaling=scaling,
    )
    d = config.to_dict()
    kw = rope_kwargs_from_config(d)
    assert kw["scaling"]["attention_factor"] == 1.243163121016122
    _compare(rc, config, d, kw, None, 0, "Phimoe[longrope, mscale]")
    differ = {**d, "rope_parameters": {**d["rope_parameters"], "long_mscale": 1.3}}
    with pytest.raises(ValueError, match=r"short_mscale.*long_mscale.*differ"):
        rope_kwargs_from_config(differ)


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "mrope_section": [16, 16, 16, 16]},
        {"rope_type": "default", "mrope_section": [24, 20, 20]},  # 3 axes (w, h, image)
        # the legacy form of HunyuanOCR-style configs: NTK-alpha written as xdrope
        {
            "type": "xdrope",
            "alpha": 1000.0,
            "factor": 1.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "xdrope_section": [16, 16, 16, 16],
        },
    ],
    ids=["4-axes", "3-axes", "xdrope-alpha"],
)
def test_hunyuan_vl_sections_against_hf(rope):
    """HunYuan-VL cuts the doubled cos/sin by channel into sections, so a pair's two
    channels may take different axes: fastpe returns two rows of pair_axes, and the rotated
    basis (driven by differing positions on every axis) must be HF's."""
    from transformers.models.hunyuan_vl.configuration_hunyuan_vl import HunYuanVLTextConfig

    rc = _BY_NAME["HunYuanVLRotaryEmbedding"]
    config = HunYuanVLTextConfig(
        num_hidden_layers=1,
        hidden_size=2048,
        num_attention_heads=16,
        head_dim=128,
        max_position_embeddings=32768,
        rope_theta=10000.0,
        rope_scaling=dict(rope),
    )
    d = config.to_dict()
    kw = rope_kwargs_from_config(d)
    axes = np.asarray(kw["pair_axes"])
    assert axes.shape == (2, 64) and (axes[0] != axes[1]).any()
    _compare(rc, config, d, kw, None, 0, f"HunYuanVL[{rope}]")


# --------------------------------------------------------------------------- layer types


def _config_class(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    # EXAONE 4.5's config class makes its text part (saved as exaone4_5_text) EXAONE 4's
    return CONFIG_MAPPING["exaone4" if model_type == "exaone4_5_text" else model_type]


def _layer_type_variants(model_type: str) -> list[dict]:
    """Dicts without layer_types for ``model_type``'s config class: with and without the
    keys its derivation reads, at several values (edges included)."""
    from fastpe._hf_families import _LAYER_TYPES

    rule = _LAYER_TYPES[model_type]
    counts = [0, 1, 2, 3, 5, 6, 7, 11, 12, 13, 34]
    variants: list[dict] = [{}, {"layer_types": None}, {"num_hidden_layers": None}]
    variants += [{"num_hidden_layers": n} for n in counts]
    # keys that other families (or older transformers) read, which this class must ignore
    variants += [
        {"num_hidden_layers": 13, "sliding_window_pattern": 4},
        {"num_hidden_layers": 13, "_sliding_window_pattern": 4},
        {"num_hidden_layers": 13, "global_attn_every_n_layers": 4},
        {"num_hidden_layers": 13, "sliding_window": None},
    ]
    if rule.period_key is not None:
        for period in (1, 2, 3, 4, 6, 13, 40, -2, 0, None):
            variants.append({rule.period_key: period})
            variants += [{rule.period_key: period, "num_hidden_layers": n} for n in (1, 7, 13)]
    if model_type == "ultrabert":
        for windows in ([0, 128, 128], [None, 64, 0, 64], [128] * 32, [0] * 5, None):
            variants.append({"attention_windows": windows})
            if windows is not None:
                variants.append({"attention_windows": windows, "num_hidden_layers": len(windows)})
    if model_type == "cohere2_moe":
        for k in (0, 1, 2, 5, 13, 40, -1, None):
            for prefix in (1, 2, 3, 0, -2, None, "absent"):
                extra = (
                    {} if prefix == "absent" else {"prefix_dense_sliding_window_pattern": prefix}
                )
                variants.append({"first_k_dense_replace": k, **extra})
                variants.append({"first_k_dense_replace": k, "num_hidden_layers": 7, **extra})
    if model_type in ("exaone4", "exaone4_5_text", "exaone_moe"):
        for window in (None, 0, 128):
            variants.append({"sliding_window": window})
            variants.append({"sliding_window": window, "num_hidden_layers": 7})
            variants.append({"sliding_window": window, "sliding_window_pattern": 3})
        variants.append({"sliding_window_pattern": "LLLG"})
    if model_type == "deepseek_v4":
        for ratios in ([0, 4, 128, 4], [128, 128, 4, 128, 4, 0], [4] * 44, [0, 8], None):
            variants.append({"compress_ratios": ratios})
            variants += [{"compress_ratios": ratios, "num_hidden_layers": n} for n in (4, 5, 6)]
    return variants


def _hf_layer_types(cls, d: dict) -> list | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return list(cls(**d).layer_types)
        except Exception:
            return None  # transformers refuses the dict


@pytest.mark.parametrize("model_type", sorted(__import__("fastpe")._hf_families._LAYER_TYPES))
def test_layer_types_derived_as_the_config_class_derives_them(model_type):
    """For every family with a derivation of layer_types (``_LAYER_TYPES``): dicts without
    layer_types, with and without the keys the derivation reads, give each layer the type
    ``config_class(**d).layer_types[i]`` gives it; a layer past the last is refused, and so
    is a dict transformers refuses."""
    from fastpe.hf_config import _layer_types

    cls = _config_class(model_type)
    wrong = []
    for d in _layer_type_variants(model_type):
        want = _hf_layer_types(cls, d)
        config = {"model_type": model_type, **d}
        if want is None:
            try:
                got = _layer_types(config, 0)
            except (ValueError, TypeError):
                continue
            if _hf_layer_types(cls, {**d, "layer_types": got}) is not None:
                # (a dict transformers refuses with the layer types given too is refused
                # for another reason than their derivation)
                wrong.append(f"{d}: transformers refuses it, fastpe derives {got[:8]}")
            continue
        for layer in range(len(want)):
            got = _layer_types(config, layer)[layer]
            if got != want[layer]:
                wrong.append(f"{d}: layer {layer} is {want[layer]!r}, fastpe says {got!r}")
        with pytest.raises(ValueError, match=rf"layer={len(want)} is out of range: .*{len(want)}"):
            _layer_types(config, len(want))
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("model_type", sorted(__import__("fastpe")._hf_families._LAYER_TYPES))
def test_layer_types_derived_read_as_the_given_ones(model_type):
    """The class's default config (and one with 7 layers) saved without layer_types reads
    each layer as the same config with the layer_types transformers derives from it: the
    same kwargs, or the same refusal."""
    from fastpe._hf_families import _LAYER_TYPES

    cls = _config_class(model_type)
    for n in (_LAYER_TYPES[model_type].layers, 7):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            saved = cls(num_hidden_layers=n).to_dict()
        sparse = {k: v for k, v in saved.items() if k != "layer_types"}
        types = _hf_layer_types(cls, {k: v for k, v in sparse.items() if k != "model_type"})
        assert types is not None
        given = {**sparse, "layer_types": types}
        for layer in range(len(types)):
            outcomes = []
            for config in (given, sparse):
                try:
                    outcomes.append(rope_kwargs_from_config(config, layer=layer))
                except (ValueError, TypeError) as exc:
                    outcomes.append(f"{type(exc).__name__}: {exc}")
            assert outcomes[0] == outcomes[1], f"n={n}, layer {layer}: {outcomes}"


def test_given_layer_types_as_the_config_class_holds_them():
    """A given list the class writes over (Gemma 4 and its kin: the last layer full; Dory's
    released configs: attention and mlp blocks listed one by one) is read as the class
    holds it."""
    from fastpe._hf_families import _LAYER_TYPES
    from fastpe.hf_config import _layer_types

    given = {
        **{
            name: (["sliding_attention"] * 6, {"per_layer_config": {}})
            for name, rule in _LAYER_TYPES.items()
            if rule.forced
        },
        "dory": (
            ["sliding_attention", "mlp", "full_attention", "mlp", "sliding_attention", "mlp"],
            {},
        ),
    }
    for model_type, (types, extra) in given.items():
        d = {"layer_types": types, "num_hidden_layers": len(types), **extra}
        want = _hf_layer_types(_config_class(model_type), copy.deepcopy(d))  # (it writes)
        assert want is not None and want != types, model_type
        got = _layer_types({"model_type": model_type, **d}, 0)
        assert got == want, model_type


def test_layer_types_table_covers_the_families_split_by_type():
    """Every config class whose rotary class takes a layer type (its RoPE differs by layer
    type) and that fastpe reads has a derivation of layer_types, or the reason it has none."""
    from fastpe._hf_families import _FAMILIES, _LAYER_TYPES, _LAYER_TYPES_REFUSED

    missing = []
    for rc in _CLASSES:
        if rc.config_cls is None or "layer_type" not in inspect_params(rc.cls.forward):
            continue
        config = _hf.default_config(rc)
        if not getattr(config, "layer_types", None):
            config = getattr(config, "text_config", None)
        if config is None or not getattr(config, "layer_types", None):
            continue  # no layer types to derive
        model_type = config.model_type
        family = _FAMILIES.get(model_type)
        if family is not None and family.refuse is not None:
            continue
        if model_type not in _LAYER_TYPES and model_type not in _LAYER_TYPES_REFUSED:
            missing.append(f"{rc.name}: {model_type}")
    assert not missing, missing
    split = {name for name, family in _FAMILIES.items() if family.split_by_type is not None}
    assert split <= set(_LAYER_TYPES)


def inspect_params(fn) -> set[str]:
    import inspect

    return set(inspect.signature(fn).parameters)


# --------------------------------------------------------------------------- layers without RoPE

_S, _F = "sliding_attention", "full_attention"
_TINY = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 64,
    "vocab_size": 64,
    "max_position_embeddings": 256,
    "pad_token_id": 0,
    "bos_token_id": None,
    "eos_token_id": None,
}
_MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}

#: Per family whose modelling code rotates some layers only (``_ROPE_GATES``) or derives
#: its NoPE layers (``_NO_ROPE_LAYERS``): the sizes of a small model, and the configs (the
#: keys beside those) whose layers are compared, with the keys the rule reads set and unset.
GATED: dict[str, tuple[dict, list[dict]]] = {
    "cohere2": (
        {},
        [
            {"num_hidden_layers": 6},
            {"num_hidden_layers": 6, "sliding_window_pattern": 3},
            {"num_hidden_layers": 5, "sliding_window": None},
            {"layer_types": [_F, _S, _S, _F]},
            {"layer_types": [_S, _S], "sliding_window": None},
        ],
    ),
    "cohere2_moe": (
        {"num_experts": 4, "num_experts_per_tok": 2},
        [
            {"num_hidden_layers": 6},
            {"num_hidden_layers": 6, "first_k_dense_replace": 2},
            {"num_hidden_layers": 6, "first_k_dense_replace": 3, "sliding_window": None},
            {
                "num_hidden_layers": 6,
                "first_k_dense_replace": 3,
                "prefix_dense_sliding_window_pattern": 2,
            },
            {"layer_types": [_F, _S, _F, _S], "mlp_layer_types": ["sparse", "dense"] * 2},
        ],
    ),
    "flint": (
        {**_MOE, "shared_expert_intermediate_size": 32},
        [
            {"num_hidden_layers": 7},
            {"layer_types": [_S, _F, _S, _S]},
            {"num_hidden_layers": 4, "sliding_window": 0},
        ],
    ),
    "exaone4": (
        {},
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 6, "sliding_window_pattern": 2},
            {"layer_types": [_S, _F, _S, _F], "sliding_window": None},
        ],
    ),
    "exaone_moe": (
        _MOE,
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 4, "first_k_dense_replace": 2, "sliding_window_pattern": 3},
        ],
    ),
    "kolibri1": (
        {**_MOE, "shared_expert_intermediate_size": 32},
        [
            {"num_hidden_layers": 6},
            {"layer_types": [_F, _F, _F], "sliding_window": None},
            {"layer_types": [_F, _S, _S]},
        ],
    ),
    "afmoe": (
        _MOE,
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 5, "global_attn_every_n_layers": 2},
            {"num_hidden_layers": 5, "sliding_window": None},
        ],
    ),
    "lara_mini": (
        {
            **_MOE,
            "shared_expert_intermediate_size": 32,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
        },
        [
            {"num_hidden_layers": 6},
            {"layer_types": ["linear_attention", _F, _S, _S]},
        ],
    ),
    "olmo_hybrid": (
        {},
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 2},
            {
                "num_hidden_layers": 5,
                "rope_parameters": {"rope_type": "default", "rope_theta": None},
            },
            {"num_hidden_layers": 4, "rope_theta": None},
            {"layer_types": [_F, "linear_attention", _F]},
        ],
    ),
    "granitemoehybrid": (
        {
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "mamba_n_heads": 4,
            "mamba_d_head": 32,
            "mamba_d_state": 8,
            "mamba_n_groups": 1,
            "mamba_chunk_size": 8,
        },
        [
            {"layer_types": ["mamba", "attention"]},
            {"layer_types": ["attention", "mamba", "attention"], "position_embedding_type": "rope"},
            {"layer_types": ["attention"] * 2, "position_embedding_type": "nope"},
        ],
    ),
    "llama4_text": (
        {"num_local_experts": 2, "intermediate_size_mlp": 64},
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 5, "no_rope_layer_interval": 2},
            {"num_hidden_layers": 3, "no_rope_layers": [0, 1, 1]},
        ],
    ),
    "smollm3": (
        {},
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 6, "no_rope_layer_interval": 3},
            {"num_hidden_layers": 3, "no_rope_layers": [1, 0, 1]},
        ],
    ),
    "mistral_large4_text": (
        {
            "num_key_value_heads": 4,
            "head_dim": 8,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 16,
            "kv_lora_rank": 16,
            "n_routed_experts": 4,
            "moe_intermediate_size": 32,
            "index_head_dim": 16,
            "index_n_heads": 2,
            "index_topk": 4,
        },
        [
            {"num_hidden_layers": 5},
            {"num_hidden_layers": 5, "no_rope_layer_interval": 2},
        ],
    ),
}


def _text_model(model_type: str, config):
    """The text model the family builds from ``config``: AutoModel's, or, for EXAONE 4.5,
    the language model of its multimodal model (built from its text config)."""
    from transformers import AutoModel

    if model_type == "exaone4_5":
        from transformers.models.exaone4_5.modeling_exaone4_5 import Exaone4_5_Model

        return Exaone4_5_Model(config).language_model
    return AutoModel.from_config(config)


def _rotated_layers(model_type: str, config) -> list[bool | None]:
    """Which layers of the small model built from ``config`` rotate q and k: the model is
    run once with each layer's attention inputs caught, and each attention is run again
    with the rotation it was handed made the identity (cos 1, sin 0; Llama 4's complex
    rotation 1): a layer rotates where its output changes, and not where it was handed no
    rotation. None for a layer without attention (linear attention, Mamba): no q and k."""
    import torch

    text = getattr(config, "text_config", None) or config
    text._attn_implementation = "eager"
    torch.manual_seed(0)
    model = _text_model(model_type, config).eval()
    caught: dict[int, tuple] = {}
    hooks = []
    for name, module in model.named_modules():
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "layers" and parts[2] == "self_attn":

            def catch(mod, args, kwargs, i=int(parts[1])):
                caught[i] = (mod, args, dict(kwargs))

            hooks.append(module.register_forward_pre_hook(catch, with_kwargs=True))
    ids = (torch.arange(1, 7)[None] * 7) % text.vocab_size
    types = sorted(set(getattr(text, "layer_types", None) or []))
    with torch.no_grad():
        try:  # (masks given per layer type: no mask is made, which some configs cannot)
            model(input_ids=ids, use_cache=False, attention_mask=dict.fromkeys(types))
        except TypeError:
            model(input_ids=ids, use_cache=False)
    for hook in hooks:
        hook.remove()
    rotated = []
    for i in range(text.num_hidden_layers):
        if i not in caught:
            rotated.append(None)  # no attention
            continue
        module, args, kwargs = caught[i]
        pe = kwargs.get("position_embeddings")
        if pe is None:
            rotated.append(False)
            continue
        same = (
            (torch.ones_like(pe[0]), torch.zeros_like(pe[1]))
            if isinstance(pe, tuple)
            else torch.ones_like(pe)
        )
        with torch.no_grad():
            a = module(*args, **kwargs)[0]
            b = module(*args, **{**kwargs, "position_embeddings": same})[0]
        rotated.append(not torch.equal(a, b))
    return rotated


def _fastpe_rotates(d: dict, **ask) -> bool | str:
    try:
        return rope_kwargs_from_config(copy.deepcopy(d), **ask) is not None
    except ValueError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("model_type", [*sorted(GATED), "exaone4_5"])
def test_rope_gates_against_the_modelling_code(model_type):
    """For each family whose code rotates some layers only (or none), small models built
    from several configs (the keys the rule reads set, unset and at other values): for
    every layer, fastpe's answer (RoPE or None) is whether the model rotates that layer,
    read from the config as given (fastpe derives what the class derives) and as
    ``config.to_dict()`` saves it; by layer type, and without a layer, fastpe answers where
    all those layers agree and refuses where they do not."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type == "exaone4_5":  # its text model, built from an EXAONE 4 text config
        sizes, variants = GATED["exaone4"]
        cls = CONFIG_MAPPING["exaone4_5"]
    else:
        sizes, variants = GATED[model_type]
        cls = CONFIG_MAPPING[model_type]
    wrong, compared = [], 0
    for variant in variants:
        kwargs = {**_TINY, **sizes, **variant}
        if "layer_types" in variant:
            kwargs.setdefault("num_hidden_layers", len(variant["layer_types"]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if model_type == "exaone4_5":
                text = {**kwargs, "model_type": "exaone4_5_text"}
                config = cls(
                    text_config=copy.deepcopy(text),
                    vision_config={"depth": 1, "hidden_size": 32, "num_heads": 2},
                )
                given = {"model_type": "exaone4_5", "text_config": text}
                saved = config.to_dict()
            else:
                config = cls(**copy.deepcopy(kwargs))
                given = {"model_type": model_type, **kwargs}
                saved = config.to_dict()
            rotated = _rotated_layers(model_type, config)
        text = getattr(config, "text_config", None) or config
        layer_types = list(getattr(text, "layer_types", None) or [None] * len(rotated))
        for form, d in (("as given", given), ("as saved", saved)):
            tag = f"{variant} ({form})"
            for layer, want in enumerate(rotated):
                got = _fastpe_rotates(d, layer=layer)
                if want is None:
                    continue  # no attention: nothing to rotate, whatever fastpe says
                compared += 1
                if got != want:
                    wrong.append(f"{tag}: layer {layer}: model rotates {want}, fastpe {got}")
            # by layer type (the families whose rule reads it), and without a layer
            typed = model_type == "exaone4_5" or bool(
                getattr(_ROPE_GATES.get(model_type), "types", ())
            )
            asks = [{}] + [{"layer_type": t} for t in sorted(set(layer_types) - {None}) if typed]
            for ask in asks:
                picked = [r for r, t in zip(rotated, layer_types) if t == ask.get("layer_type", t)]
                attending = {r for r in picked if r is not None}
                got = _fastpe_rotates(d, **ask)
                differ = isinstance(got, str) and bool(
                    re.search(r"differ in whether they rotate|marks some layers", got)
                )
                if len(attending) == 1 and got != attending.pop():
                    # (fastpe may refuse where layers without attention read otherwise)
                    if not (differ and None in picked):
                        wrong.append(f"{tag}: asked {ask}: all {picked}, fastpe {got}")
                if len(attending) > 1 and not differ:
                    wrong.append(f"{tag}: asked {ask}: layers differ, fastpe {got}")
    assert compared
    assert not wrong, "\n".join(wrong[:20])


def test_moshi_depth_decoder_has_no_rope():
    """Moshi's depth decoder builds its attention layers without a rotary module (its
    attention rotates only with one): fastpe reads every layer as no RoPE."""
    from transformers.models.moshi.configuration_moshi import MoshiDepthConfig
    from transformers.models.moshi.modeling_moshi import MoshiDepthDecoder

    config = MoshiDepthConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        audio_vocab_size=16,
        vocab_size=16,
        num_codebooks=2,
        input_size=32,
    )
    model = MoshiDepthDecoder(config)
    assert all(layer.self_attn.rotary_emb is None for layer in model.layers)
    d = config.to_dict()
    assert rope_kwargs_from_config(d) is None
    assert all(rope_kwargs_from_config(d, layer=i) is None for i in range(2))


#: Model types of transformers 5.24 that fastpe refuses because their models have no RoPE
#: (``fastpe._hf_families._UNREAD``), each with the sizes of a small model built from its
#: config class (its attention layers included).
NO_ROPE_MODELS: dict[str, dict] = {
    "jamba": {
        "num_hidden_layers": 2,
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "num_experts": 2,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "mamba_d_state": 4,
        "mamba_d_conv": 2,
    },
    "nemotron_h": {
        "layers_block_type": ["linear_attention", "full_attention", "mlp"],
        "mamba_num_heads": 4,
        "mamba_head_dim": 16,
        "ssm_state_size": 8,
        "n_groups": 1,
    },
    "kimi_linear": {
        "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "num_key_value_heads": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8,
        "v_head_dim": 8,
        "linear_head_dim": 8,
        "linear_num_heads": 4,
    },
    "glm5_next_text": {
        "num_hidden_layers": 4,  # three linear-attention layers, then latent attention
        "num_key_value_heads": 4,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "kv_lora_rank": 16,
        "q_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "v_head_dim": 8,
        "index_head_dim": 8,
        "index_n_heads": 2,
        "index_topk": 16,
        "index_kpool": 4,
        "linear_head_dim": 8,
        "linear_num_heads": 4,
        "hc_mult": 2,
    },
}


def _position_dependence(model, vocab_size: int) -> float:
    """How far the small model's last hidden state moves when the same six tokens are
    given other position ids, spaced otherwise (a shift alone leaves RoPE's relative
    angles, and so the output, in place)."""
    import torch

    ids = (torch.arange(1, 7)[None] * 7) % vocab_size
    out = []
    with torch.no_grad():
        for pos in ([0, 1, 2, 3, 4, 5], [0, 7, 20, 21, 50, 99]):
            out.append(model(input_ids=ids, position_ids=torch.tensor([pos])).last_hidden_state)
    return float((out[0] - out[1]).abs().max())


@pytest.mark.parametrize("model_type", sorted(NO_ROPE_MODELS))
def test_models_without_rope_are_refused_as_such(model_type):
    """A model type refused for having no RoPE: fastpe names why, and the small model that
    transformers builds from its config class has attention layers, no rotary module, and
    an output that the position ids do not change (a Llama of the same sizes, the control,
    changes with them)."""
    import torch
    from transformers import AutoModel

    from fastpe._hf_families import _UNREAD

    assert "has no RoPE" in _UNREAD[model_type]
    with pytest.raises(ValueError, match=rf"'{model_type}' is not read: .*has no RoPE"):
        rope_kwargs_from_config({**_TINY, "model_type": model_type})
    classes = _hf.config_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        config = classes[model_type](**{**_TINY, **NO_ROPE_MODELS[model_type]})
        model = AutoModel.from_config(config).eval()
        control = AutoModel.from_config(classes["llama"](**_TINY, num_hidden_layers=2)).eval()
    # (class names without the model's prefix: Kimi Linear's softmax attention is
    # KimiLinearAttention)
    prefix = type(model).__name__.removesuffix("Model")
    kinds = {type(m).__name__.removeprefix(prefix) for m in model.modules()}
    assert any(k.endswith("Attention") and "Linear" not in k for k in kinds), sorted(kinds)
    assert not any("Rotary" in k for k in kinds), sorted(kinds)
    assert _position_dependence(model, config.vocab_size) == 0.0
    assert _position_dependence(control, config.vocab_size) > 1e-3


def test_glm5_next_text_config_class_refuses_a_rope_part():
    """GLM-5.3-Flash's text config class holds no rope part (qk_rope_head_dim 0) and
    refuses one: no config of it has RoPE for fastpe to read."""
    cls = _hf.config_classes()["glm5_next_text"]
    assert cls().qk_rope_head_dim == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match=r"Expecting NoPE"):
            cls(qk_rope_head_dim=64)


def test_rope_gate_defaults_are_the_classes():
    """The class defaults the rules read (the sliding window, position_embedding_type, the
    prefix pattern, the NoPE interval and layer count) are the config classes' fields."""
    import dataclasses

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from fastpe._hf_families import _NO_ROPE_LAYERS, _ROPE_GATES

    wrong = []
    for model_type, gate in _ROPE_GATES.items():
        cls = _config_class(model_type)
        fields = {f.name: f.default for f in dataclasses.fields(cls)}
        for pair in (gate.window, gate.requires, gate.dense):
            if pair is not None and fields.get(pair[0], pair[1]) != pair[1]:
                wrong.append(f"{model_type}: {pair[0]} {fields[pair[0]]!r}, table {pair[1]!r}")
    for model_type, rule in _NO_ROPE_LAYERS.items():
        fields = {f.name: f.default for f in dataclasses.fields(CONFIG_MAPPING[model_type])}
        if fields["num_hidden_layers"] != rule.layers:
            wrong.append(f"{model_type}: num_hidden_layers {fields['num_hidden_layers']}")
        if fields.get("no_rope_layer_interval", rule.interval) != rule.interval:
            wrong.append(f"{model_type}: interval {fields['no_rope_layer_interval']}")
    assert not wrong, wrong


#: Every condition under which an attention forward of transformers 5.24 rotates q and k
#: (an ``if`` around its call of ``apply_rotary_*``), per model directory: what fastpe does
#: with it. A condition not listed fails test_conditional_rotations_are_known.
CONDITIONS: dict[str, dict[str, str]] = {
    **{
        name: {"self.config.rope_interleave": "the layout (rope_interleave)", "else": "idem"}
        for name in ("axk1", "deepseek_v3", "glm4_moe_lite", "mistral4", "youtu")
    },
    **{
        name: {"self.rotary_dim is not None": "rotary_dim", "else": "idem"}
        for name in ("codegen", "gptj")
    },
    **{
        name: {"position_embeddings is not None": "a null rope dict per layer type"}
        for name in ("beam", "cohere_compass")
    },
    **{
        name: {"position_embeddings is not None": "layer_rope_theta 0: NoPE"}
        for name in ("granite_swa", "granitemoe_swa", "muse_glimmer", "muse_spark")
    },
    **{
        name: {"position_embeddings is not None": "_ROPE_GATES (set by the model)"}
        for name in ("granitemoehybrid", "lara_mini", "olmo_hybrid")
    },
    "afmoe": {"self.is_local_attention": "_ROPE_GATES"},
    "cohere2": {"self.sliding_window is not None": "_ROPE_GATES"},
    "cohere2_moe": {"self.sliding_window is not None or self.force_rope": "_ROPE_GATES"},
    "flint": {"self.sliding_window is not None": "_ROPE_GATES"},
    **{
        name: {"self.sliding_window is None or self.is_sliding": "_ROPE_GATES"}
        for name in ("exaone4", "exaone4_5", "exaone_moe", "kolibri1")
    },
    **{name: {"self.use_rope": "no_rope_layers"} for name in ("llama4", "smollm3")},
    "mistral_large4": {
        "self.use_rope": "no_rope_layers",
        "self.is_kv_shared_layer": "q rotated; the keys are the source layer's, rotated",
        "else": "idem",
    },
    **{
        name: {"else": "kv-shared layers rotate q; their keys are the source layer's"}
        for name in ("gemma3n", "gemma4", "gemma4_unified")
    },
    "moshi": {"self.rotary_emb is not None": "_ROPE_GATES: the depth decoder (moshi_depth)"},
    "kyutai_speech_to_text": {"self.rotary_emb is not None": "every layer built with RoPE"},
    "zamba2": {"self.config.use_mem_rope": "use_mem_rope false: no RoPE"},
    "falcon": {"alibi is None": "alibi true: refused"},
    "esm": {'self.position_embedding_type == "rotary"': "another type: refused"},
    "evolla": {'self.position_embedding_type == "rotary"': "refused (no model_type)"},
    **{
        name: {'self.position_embeddings_type == "rotary"': "refused (rotary_embedding_base)"}
        for name in ("seamless_m4t", "wav2vec2_bert", "wav2vec2_conformer")
    },
    "roformer": {"self.rotary_value": "refused", "else": "idem"},
    **{
        name: {"not is_cross_attention": "cross-attention has no RoPE; self-attention is read"}
        for name in ("idefics", "moonshine", "moonshine_streaming")
    },
    "deepseek_v4": {"chunk_kv.shape[1] > 0": "compressed entries, read by label"},
    "qwen4_exp": {"num_complete_blocks > 0": "the indexer's pooled blocks, not a layer"},
    "efficientloftr": {"position_embeddings is not None": "refused (not position ids)"},
    "lightglue": {"position_embeddings is not None": "keypoint positions, no config RoPE"},
}


def test_conditional_rotations_are_known():
    """Every ``if`` under which an attention forward of the installed transformers rotates
    q and k is listed in CONDITIONS with what fastpe does with it: a new one (a family
    that skips RoPE on some layers) fails here until it is read or refused."""
    import pathlib

    import transformers

    call = re.compile(r"\b(apply_rotary\w*|apply_rope\w*|_apply_rotary\w*)\(")
    test = re.compile(r"^\s*(?:if|elif)\s+(.*?):\s*(?:#.*)?$")
    found: dict[str, set[str]] = {}
    root = pathlib.Path(transformers.__file__).parent / "models"
    for path in sorted(root.glob("*/modeling_*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not call.search(line) or line.lstrip().startswith(("def ", "#")):
                continue
            indent = len(line) - len(line.lstrip())
            for above in reversed(lines[max(i - 15, 0) : i]):
                if not above.strip() or len(above) - len(above.lstrip()) >= indent:
                    continue
                match = test.match(above)
                if match:
                    found.setdefault(path.parent.name, set()).add(match.group(1).strip())
                elif above.strip().startswith("else"):
                    found.setdefault(path.parent.name, set()).add("else")
                break
    unknown = sorted(
        f"{name}: {cond}"
        for name, conds in found.items()
        for cond in conds
        if cond not in CONDITIONS.get(name, {})
    )
    assert not unknown, unknown
    stale = sorted(
        f"{name}: {cond}"
        for name, conds in CONDITIONS.items()
        for cond in conds
        if cond not in found.get(name, set())
    )
    assert not stale, stale


@pytest.mark.parametrize(
    "model_type",
    ["gemma4_text", "gemma4_unified_text", "diffusion_gemma_text", "embedding_gemma2_text"],
)
def test_gemma4_per_layer_config_derived_as_the_config_class_builds_it(model_type):
    """Gemma 4 and its kin without per_layer_config: for several configs (layer types
    given or derived, global_head_dim left out, smaller, equal to head_dim), every layer's
    head size is ``config_class(**d).per_layer_config[i].head_dim``, and the RoPE fastpe
    reads for a full-attention and a sliding layer rotates as HF's module built from it."""
    cls = _config_class(model_type)
    rc = next(rc for rc in _CLASSES if rc.config_cls is cls and rc.name.endswith("RotaryEmbedding"))
    variants = [
        {"num_hidden_layers": 7},
        {"num_hidden_layers": 7, "global_head_dim": 128},
        {"num_hidden_layers": 7, "global_head_dim": 256},
        {"num_hidden_layers": 4, "head_dim": 64, "global_head_dim": 96},
        {"layer_types": [_S, _F, _S, _S], "num_hidden_layers": 4},
        {"num_hidden_layers": 3, "global_head_dim": 512, "num_global_key_value_heads": 2},
    ]
    if model_type == "embedding_gemma2_text":
        variants.append({"num_hidden_layers": 5, "sliding_window_pattern": 2})
    wrong = []
    for variant in variants:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(**copy.deepcopy(variant))
            rope = config.to_dict()["rope_parameters"]
        d = {"model_type": model_type, "rope_parameters": rope, **variant}
        for layer in range(config.num_hidden_layers):
            want = config.per_layer_config[layer].head_dim
            got = head_dim_from_config(d, layer=layer)
            if got != want:
                wrong.append(f"{variant}: layer {layer}: head size {want}, fastpe {got}")
        types = list(config.layer_types)
        for lt in sorted(set(types)):
            layer = types.index(lt)
            kw = rope_kwargs_from_config(d, layer=layer)
            try:
                _compare(rc, config, d, kw, lt, layer, f"{model_type}{variant}[{lt}]")
            except AssertionError as exc:
                wrong.append(str(exc)[:300])
    assert not wrong, "\n".join(wrong)


def test_granitemoehybrid_with_rope_against_hf():
    """GraniteMoeHybrid with position_embedding_type "rope" (the one value with which its
    model builds a rotary module): read by fastpe and compared with HF's module."""
    rc = _BY_NAME["GraniteMoeHybridRotaryEmbedding"]
    config = rc.config_cls(num_hidden_layers=2, position_embedding_type="rope")
    # (the class's default layers are all Mamba: none attends, so nothing rotates)
    assert rope_kwargs_from_config(config.to_dict()) is None
    config = rc.config_cls(
        num_hidden_layers=2,
        position_embedding_type="rope",
        layer_types=["linear_attention", "full_attention"],
    )
    d = config.to_dict()
    kw = rope_kwargs_from_config(d)
    assert kw == rope_kwargs_from_config(d, layer=1)
    _compare(rc, config, d, kw, None, 1, "GraniteMoeHybrid[rope]")


def test_text_model_types_of_wrappers_are_the_classes():
    """A wrapper whose text_config names no model_type: its config class makes it the
    text model fastpe assumes (``_TEXT_MODEL_TYPES``), or fails where fastpe refuses."""
    from fastpe._hf_families import _TEXT_MODEL_TYPES

    classes = _hf.config_classes()
    for wrapper, text in _TEXT_MODEL_TYPES.items():
        cls = classes[wrapper]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if text is None:
                with pytest.raises(KeyError, match="model_type"):
                    cls(text_config={"num_hidden_layers": 2})
                continue
            config = cls(text_config={"num_hidden_layers": 2})
        assert config.text_config.model_type == text, wrapper


def test_model_type_tables_are_current():
    """The model types of transformers 5.24 (fastpe._hf_model_types): all of them, those
    read the generic way (a walked rotary class and no row), those whose modelling code
    holds no rotary embedding, the text model type of each
    wrapper, and the wrappers that build their text config from flat keys, against the
    installed transformers."""
    from fastpe._hf_families import _FAMILIES, _TEXT_MODEL_TYPES
    from fastpe._hf_model_types import (
        _FLAT_TEXT_WRAPPERS,
        _GENERIC_TYPES,
        _NO_ROTARY_TYPES,
        _TRANSFORMERS_TYPES,
    )

    assert set(_hf.config_classes()) == _TRANSFORMERS_TYPES
    assert _hf.no_rotary_types() == _NO_ROTARY_TYPES
    stacked: dict = {n: None for n, (p, _) in REFUSED.items() if p == _ENC_DEC}
    stacked.update(SUB_CONFIGS)
    assert _hf.generic_model_types(_FAMILIES, _ROPE_GATES, stacked) == _GENERIC_TYPES
    assert _hf.wrapper_text_types() == _TEXT_MODEL_TYPES
    assert _hf.flat_text_wrappers() == _FLAT_TEXT_WRAPPERS
    from fastpe._hf_families import _BLOCKS
    from fastpe._hf_model_types import _DEFAULT_LAYERS, _LAYER_COUNT_ALIASES

    read = set(_FAMILIES) | _GENERIC_TYPES | set(_ROPE_GATES) | set(_BLOCKS)
    assert _hf.layer_count_keys(read) == (_DEFAULT_LAYERS, _LAYER_COUNT_ALIASES)


def test_class_head_dim_families_are_the_classes_that_overwrite_it():
    """Every family fastpe reads whose config class overwrites a given head_dim with
    hidden_size // num_attention_heads has class_head_dim (and no other): the class built
    with a head_dim that disagrees holds the derived one, which fastpe reads, and fastpe
    refuses the disagreeing dict. (Cohere 2 and the others that derive it before the given
    keys are set keep a given head_dim: read as given, checked here too.)"""
    from fastpe._hf_families import _FAMILIES
    from fastpe._hf_model_types import _GENERIC_TYPES

    classes = _hf.config_classes()
    overwriting, unbuilt = set(), set()
    for model_type in sorted(set(_FAMILIES) | _GENERIC_TYPES):
        family = _FAMILIES.get(model_type)
        if model_type not in classes or (family is not None and family.refuse is not None):
            continue
        if family is not None and family.head_dim_keys != ("head_dim",):
            continue  # (latent attention and other keys: the head size is not head_dim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                config = classes[model_type](hidden_size=1024, num_attention_heads=8, head_dim=64)
            except Exception:
                unbuilt.add(model_type)
                continue
        try:
            held = getattr(config, "head_dim", 64)
        except Exception:  # (a per-layer head size: not one head_dim to overwrite)
            continue
        d = config.to_dict()
        if held == 128:
            overwriting.add(model_type)
            assert head_dim_from_config(d) == 128, model_type
            with pytest.raises(ValueError, match=r"overwrites it"):
                head_dim_from_config(dict(d, head_dim=64))
        elif held == 64 and d.get("head_dim") == 64:
            raw = {"model_type": model_type, "hidden_size": 1024, "num_attention_heads": 8}
            try:
                got = head_dim_from_config(dict(raw, head_dim=64))
            except ValueError:
                continue  # (a family that needs more keys, or a layer: read elsewhere)
            assert got == 64, model_type
    marked = {t for t, f in _FAMILIES.items() if f.class_head_dim}
    # (BLT's modules: the class keeps a given head_dim, but their attention sizes heads by
    # hidden_size // num_attention_heads, so a disagreeing one is refused too)
    blt = {"blt_local_encoder", "blt_local_decoder", "blt_global_transformer", "blt_patcher"}
    assert overwriting == marked - unbuilt - blt, (sorted(overwriting), sorted(marked))


def test_hybrid_attention_layers_against_hf():
    """The hybrid families' layers without attention (fastpe._hf_families._BLOCKS): which
    layers the model builds attention for, against fastpe's None, for the class's derived
    and given layer types; a layer with attention compared with HF's rotary module."""
    from fastpe._hf_families import _BLOCKS

    classes = _hf.config_classes()
    variants = {
        "qwen3_next": [{}, {"full_attention_interval": 3}],
        "lfm2": [{}, {"full_attn_idxs": [1, 4]}],
        "lfm2_moe": [{"layer_types": ["conv", "full_attention"] * 3}],
        "lfm3": [{}, {"layer_types": ["conv", "sliding_attention", "full_attention"] * 2}],
        "granitemoehybrid": [
            {"position_embedding_type": "rope"},
            {
                "position_embedding_type": "rope",
                "layer_types": ["linear_attention", "full_attention"] * 3,
            },
        ],
        "bamba": [{"attn_layer_indices": [2, 5]}],
        "minimax": [{}, {"layer_types": ["linear_attention", "full_attention"] * 3}],
        "qwen3_5_text": [{}, {"full_attention_interval": 3}],
        "qwen3_5_moe_text": [{}, {"full_attention_interval": 2}],
        "qwen4_exp_text": [
            {},
            {"full_attention_interval": 3},
            {"full_attention_interval": -2},  # (Python's remainder: as 2)
            {"layer_types": ["linear_attention", "full_attention"] * 3},
        ],
        "bailing_hybrid": [
            {"layer_group_size": 2},
            {"layer_group_size": -3},
            {"layer_types": ["linear_attention", "linear_attention", "full_attention"] * 2},
        ],
        "recurrent_gemma": [{}, {"block_types": ["attention", "recurrent"]}],
        # (its derived list, 54 layers: test_zamba2_head_size_as_the_class_derives_it)
        "zamba2": [
            {"use_mem_rope": True, "layers_block_type": ["linear_attention", "hybrid"] * 3},
        ],
    }
    assert sorted(variants) == sorted(_BLOCKS)
    for model_type, blocks in sorted(_BLOCKS.items()):
        for extra in variants[model_type]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = classes[model_type](num_hidden_layers=6, **extra)
            kinds = list(getattr(config, "layers_block_type", None) or config.layer_types)
            raw = {"model_type": model_type, "num_hidden_layers": 6, **extra}
            raw["head_dim"] = config.head_dim if getattr(config, "head_dim", None) else 64
            if model_type == "lfm3":  # (its default rope dict per layer type, written out)
                raw["rope_parameters"] = copy.deepcopy(config.rope_parameters)
            d = config.to_dict()
            for i, kind in enumerate(kinds):
                want = kind not in blocks.no_attention
                for source in (raw, d):
                    got = rope_kwargs_from_config(source, layer=i)
                    assert (got is not None) == want, f"{model_type} {extra} layer {i}"
                    if want:
                        assert head_dim_from_config(source, layer=i) == head_dim_from_config(source)
                    else:  # (no attention: no head size)
                        with pytest.raises(ValueError, match=r"has no attention, so no head"):
                            head_dim_from_config(source, layer=i)
            rc = _hf.rotary_class_for(config)
            layer = next((i for i, k in enumerate(kinds) if k not in blocks.no_attention), None)
            if layer is None:
                continue  # (no attention layer to compare)
            kw = rope_kwargs_from_config(d, layer=layer)
            lt = kinds[layer] if model_type == "lfm3" else None  # (its rotary is per type)
            _compare(rc, config, d, kw, lt, layer, f"{model_type}{extra}[{layer}]")


_SIZE_KEYS = (
    "head_dim",
    "attention_head_dim",
    "kv_channels",
    "d_kv",
    "head_size",
    "rotary_dim",
    "rotary_emb_dim",
    "partial_rotary_factor",
)


def test_head_size_left_out_as_the_classes_derive_it():
    """Every text rotary class's default config with its head-size keys left out (a config
    written by hand: head_dim, attention_head_dim, kv_channels, ...), as it is and with
    another hidden_size: where fastpe reads it, it rotates the channels the class's rotary
    module holds frequencies for (before: JetMoE read hidden_size // num_attention_heads,
    where its class keeps kv_channels' default 128; Zamba2 likewise, where its class
    derives 2 * hidden_size // num_attention_heads)."""
    from transformers import PretrainedConfig

    from fastpe._hf_axes import AXIAL_HW

    wrong, compared = [], 0
    for name in sorted(_BY_NAME):
        rc = _BY_NAME[name]
        if rc.config_cls is None:
            continue
        try:
            base = _hf.default_config(rc)
        except Exception:
            continue
        if any(isinstance(v, PretrainedConfig) for v in vars(base).values()):
            continue  # (wrappers and stacks: their text configs are classes of their own)
        d0 = base.to_dict()
        hs, nh = d0.get("hidden_size"), d0.get("num_attention_heads")
        if d0.get("model_type") in AXIAL_HW or not isinstance(hs, int) or not isinstance(nh, int):
            continue
        for hidden in (hs, 48 * nh):
            given = {k: v for k, v in d0.items() if k not in _SIZE_KEYS}
            given["hidden_size"] = hidden
            kwargs = {k: v for k, v in given.items() if k not in ("model_type", "architectures")}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    config = rc.config_cls(**copy.deepcopy(kwargs))
                    held = 2 * _hf.build(rc, config).inv_freq.numel()
            except Exception:
                continue  # (the class or its rotary module fails on it)
            try:
                kw = rope_kwargs_from_config(copy.deepcopy(given))
            except (ValueError, TypeError):
                continue  # (refused)
            if kw is None:
                continue
            if kw["rotary_dim"] != held:
                wrong.append(f"{name} hidden_size={hidden}: fastpe {kw['rotary_dim']}, HF {held}")
            compared += 1
    assert not wrong, "\n".join(wrong)
    assert compared > 200, compared


_HAND_WRITTEN = {
    "rope_theta": {"rope_theta": 123456.0},
    "linear": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "legacy type": {"rope_scaling": {"type": "linear", "factor": 2.0}},
    "yarn": {
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 4096,
        },
        "max_position_embeddings": 16384,
    },
    "dict theta": {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
    "partial": {"partial_rotary_factor": 0.5},
}


@pytest.mark.parametrize("variant", sorted(_HAND_WRITTEN))
def test_hand_written_rope_keys_as_the_classes_read_them(variant):
    """Every text rotary class's sizes with rope keys written by hand (a top-level theta, a
    linear rope_scaling under either name of its type, YaRN, a theta in rope_parameters, a
    partial factor: most families refuse it at the top level), the rest left to the class: where
    fastpe reads it, it rotates as the class's rotary module and apply function built from
    the same keys (before: ESM's module reads the top-level theta alone and ignores the
    rope dicts, which fastpe read)."""
    from transformers import PretrainedConfig

    from fastpe._hf_axes import AXIAL_HW
    from fastpe._hf_families import _FAMILIES

    keep = ("hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads")
    wrong, compared = [], 0
    for name in sorted(_BY_NAME):
        rc = _BY_NAME[name]
        if rc.config_cls is None or "layer_type" in inspect.signature(rc.cls.forward).parameters:
            continue  # (the rotary modules per layer type: compared in test_rotary_class)
        try:
            base = _hf.default_config(rc)
        except Exception:
            continue
        if any(isinstance(v, PretrainedConfig) for v in vars(base).values()):
            continue
        d0 = base.to_dict()
        family = _FAMILIES.get(d0.get("model_type"))
        if (
            not d0.get("model_type")
            or d0["model_type"] in AXIAL_HW
            or (family and family.rope_labels)
        ):
            continue  # (vision towers and labelled rope dicts: compared on their own)
        given = {k: v for k, v in d0.items() if k in (*keep, "model_type", "head_dim")}
        given.update(copy.deepcopy(_HAND_WRITTEN[variant]))
        kwargs = {k: v for k, v in given.items() if k != "model_type"}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = rc.config_cls(**copy.deepcopy(kwargs))
                _hf.build(rc, config)
        except Exception:
            continue  # (the class or its rotary module fails on it)
        try:
            layer = _layer_index(copy.deepcopy(given), None, config)
            kw = rope_kwargs_from_config(copy.deepcopy(given), layer=layer)
        except (ValueError, TypeError):
            continue  # (refused)
        if kw is None:
            continue
        try:
            _compare(rc, config, config.to_dict(), kw, None, layer or 0, name)
        except AssertionError as exc:
            wrong.append(f"{name}: {str(exc)[:200]}")
        compared += 1
    assert not wrong, "\n".join(wrong)
    assert compared > (20 if variant == "partial" else 100), compared


def test_esm_rope_dicts_refused_as_its_module_ignores_them():
    """ESM's rotary module reads the top-level rope_theta alone: a rope dict that would
    change the rotation (a rope type, another theta) is refused, one that agrees is read."""
    cls = _hf.config_classes()["esm"]
    rc = _BY_NAME["EsmRotaryEmbedding"]
    sizes = {"position_embedding_type": "rotary", "hidden_size": 64, "num_attention_heads": 2}
    for extra in (
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0}},
    ):
        with pytest.raises(ValueError, match=r"reads the top-level rope_theta alone"):
            rope_kwargs_from_config({"model_type": "esm", **sizes, **extra})
    for extra in (
        {"rope_theta": 5e5},
        {"rope_theta": 5e5, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}},
        {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(**sizes, **extra)
        kw = rope_kwargs_from_config({"model_type": "esm", **sizes, **extra})
        _compare(rc, config, config.to_dict(), kw, None, 0, f"esm {extra}")


@pytest.mark.parametrize("model_type", ["gpt_oss", "openai_privacy_filter"])
def test_partial_factor_refused_where_the_model_fails_on_it(model_type):
    """GPT-OSS and the privacy filter: their rotary module honours partial_rotary_factor
    but their apply function does not, and the model fails; fastpe refuses the factor (at
    the top level or in the rope dict) and reads the whole head without it."""
    import torch

    from fastpe._hf_families import _PARTIAL_FAILS

    assert model_type in _PARTIAL_FAILS
    cls = _hf.config_classes()[model_type]
    rc = next(r for r in _BY_NAME.values() if r.config_cls is cls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = cls(partial_rotary_factor=0.5)
    d = config.to_dict()
    module = _hf.build(rc, config)
    assert 2 * module.inv_freq.numel() < config.head_dim  # (the module honours it)
    x = torch.zeros((1, 2, 3, config.head_dim))
    cos, sin = module(x, torch.arange(3)[None])
    with pytest.raises(RuntimeError):  # (the apply function does not)
        rc.module.apply_rotary_pos_emb(x, x, cos, sin)
    for dd in (d, {**d, "partial_rotary_factor": 0.5, "rope_parameters": None}):
        with pytest.raises(ValueError, match=r"partial_rotary_factor=0.5"):
            rope_kwargs_from_config(dd)
    whole = {k: v for k, v in d.items() if k != "partial_rotary_factor"}
    if isinstance(whole.get("rope_parameters"), dict):
        whole["rope_parameters"] = {
            k: v for k, v in whole["rope_parameters"].items() if k != "partial_rotary_factor"
        }
    assert rope_kwargs_from_config(whole)["rotary_dim"] == config.head_dim


def test_jetmoe_head_size_as_the_class_holds_it():
    """JetMoE sizes its heads by kv_channels (class default 128, whatever hidden_size //
    num_attention_heads is), and takes head_dim as another name for it: fastpe reads the
    class's size; both given and different, refused (the class keeps head_dim)."""
    cls = _hf.config_classes()["jetmoe"]
    rc = _BY_NAME["JetMoeRotaryEmbedding"]
    for extra in (
        {},
        {"hidden_size": 1024},
        {"head_dim": 32},
        {"kv_channels": 48},
        {"kv_channels": 48, "head_dim": 48},
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(**extra)
        d = {"model_type": "jetmoe", **extra}
        assert head_dim_from_config(d) == config.kv_channels, extra
        kw = rope_kwargs_from_config(d)
        assert kw["rotary_dim"] == 2 * _hf.build(rc, config).inv_freq.numel(), extra
    for extra in ({"kv_channels": 48, "head_dim": 32}, {"head_dim": 32, "kv_channels": 48}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert cls(**extra).kv_channels == 32
        with pytest.raises(ValueError, match=r"both given and differ"):
            rope_kwargs_from_config({"model_type": "jetmoe", **extra})
        with pytest.raises(ValueError, match=r"both given and differ"):
            head_dim_from_config({"model_type": "jetmoe", **extra})


def test_hybrid_derivations_refused_as_the_classes_refuse_them():
    """RecurrentGemma with block_types that, repeated 100 times, do not reach the layer
    count (an empty list too), and an interval of 0: the classes refuse them, and so does
    fastpe, for every layer and without one (before, an empty block_types read as a model
    without attention)."""
    classes = _hf.config_classes()
    for model_type, extra in (
        ("recurrent_gemma", {"block_types": [], "num_hidden_layers": 4}),
        ("recurrent_gemma", {"block_types": ["recurrent", "attention"], "num_hidden_layers": 250}),
        ("qwen4_exp_text", {"full_attention_interval": 0, "num_hidden_layers": 4}),
        ("bailing_hybrid", {"layer_group_size": 0, "num_hidden_layers": 4}),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(Exception):  # noqa: B017 (the class's own error)
                classes[model_type](**extra)
        d = {"model_type": model_type, "head_dim": 64, **extra}
        for layer in (None, 0, 1):
            with pytest.raises(ValueError, match=r"block_types'\] has|is 0"):
                rope_kwargs_from_config(d, layer=layer)


def test_zamba2_head_size_as_the_class_derives_it():
    """Zamba2's attention acts on 2 * hidden_size: its class derives attention_head_dim as
    2 * hidden_size // num_attention_heads, and takes head_dim as another name for it.
    fastpe's head size and rotated channels are those of the class and its rotary module;
    a null one, on which the model fails, is refused (before, hidden_size //
    num_attention_heads was read, half the rotated channels). Both names given and
    different, the class keeps the one that comes last in the dict: refused, as are a
    layer_types that differs from layers_block_type (the class builds its attention layers
    from the latter), an explicit null layer_types (the model fails) and an entry other
    than "hybrid" or "linear_attention" (built as a Mamba layer whatever its name)."""
    from transformers import AutoModel

    cls = _hf.config_classes()["zamba2"]
    small = {
        "use_mem_rope": True,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "layers_block_type": ["hybrid", "linear_attention"],
        "vocab_size": 100,
        "intermediate_size": 64,
        "mamba_d_state": 8,
        "n_mamba_heads": 2,
    }
    d0 = {"model_type": "zamba2", **small}
    compared = 0
    for extra in (
        {},
        {"hidden_size": 96},
        {"head_dim": 8},
        {"attention_head_dim": 24},
        {"attention_head_dim": 24, "head_dim": 24},
        {"attention_head_dim": None},
        {"head_dim": None},
    ):
        kwargs = {**small, **extra}
        d = {"model_type": "zamba2", **kwargs}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = cls(**copy.deepcopy(kwargs))
                AutoModel.from_config(config)
        except Exception:  # (a null head size: the model fails)
            with pytest.raises(ValueError, match=r"is null"):
                head_dim_from_config(d)
            with pytest.raises(ValueError, match=r"is null"):
                rope_kwargs_from_config(d, layer=0)
            continue
        rc = _hf.rotary_class_for(config)
        assert head_dim_from_config(d) == config.attention_head_dim, extra
        kw = rope_kwargs_from_config(d, layer=0)
        assert rope_kwargs_from_config(d, layer=1) is None  # (a Mamba layer)
        assert kw["rotary_dim"] == config.attention_head_dim, extra
        _compare(rc, config, config.to_dict(), kw, None, 0, f"zamba2 {extra}")
        compared += 1
    assert compared == 5
    # without layers_block_type, the class derives 54 layers (refused beside another
    # count): layer 6 is the first with attention
    derived = {
        k: v for k, v in small.items() if k not in ("layers_block_type", "num_hidden_layers")
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = cls(**derived)
        with pytest.raises(Exception, match=r"must be equal to the number of `layer_types`"):
            cls(**derived, num_hidden_layers=6)
    kinds = config.layers_block_type
    d = {"model_type": "zamba2", **derived}
    for i, kind in enumerate(kinds):
        assert (rope_kwargs_from_config(d, layer=i) is not None) == (kind == "hybrid"), i
    assert kinds.index("hybrid") == 6
    for layer in (None, 0, 5):
        with pytest.raises(ValueError, match=r"derives 54 layer types whatever"):
            rope_kwargs_from_config(dict(d, num_hidden_layers=6), layer=layer)
    # the alias and its field both given: the class keeps the later one in the dict
    held = []
    for pair in (
        {"head_dim": 8, "attention_head_dim": 24},
        {"attention_head_dim": 24, "head_dim": 8},
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            held.append(cls(**small, **pair).attention_head_dim)
        for layer in (None, 0):
            with pytest.raises(ValueError, match=r"both given and differ"):
                rope_kwargs_from_config({**d0, **pair}, layer=layer)
    assert held == [24, 8]
    # layer_types beside layers_block_type: the class's attention layers are the latter's
    lt = {"layers_block_type": ["hybrid", "hybrid"], "layer_types": ["linear_attention", "hybrid"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = cls(**{**small, **lt})
    assert config.layers_block_type == lt["layer_types"] and config.hybrid_layer_ids == [0, 1]
    for layer in (None, 0, 1):
        with pytest.raises(ValueError, match=r"both given and differ"):
            rope_kwargs_from_config({**d0, **lt}, layer=layer)
    alone = {"layer_types": ["hybrid"] + ["linear_attention"] * 53}  # (54 layers, derived)
    with pytest.raises(ValueError, match=r"differs from the layer types"):
        rope_kwargs_from_config({**d, **alone}, layer=0)
    assert rope_kwargs_from_config({**d, "layer_types": list(kinds)}, layer=6) is not None
    for bad, why in (
        ({"layer_types": None}, r"is null"),
        ({"layers_block_type": ["linear_attention", "full_attention"]}, r"builds a layer of"),
    ):
        for layer in (None, 0, 1):
            with pytest.raises(ValueError, match=why):
                rope_kwargs_from_config({**d0, **bad}, layer=layer)


def test_kolibri1_window_refused_as_the_class_refuses_it():
    cls = _hf.config_classes()["kolibri1"]
    for window in (None, 0):
        for types in (None, ["full_attention", "sliding_attention"]):
            extra = {"sliding_window": window, "num_hidden_layers": 2}
            if types:
                extra["layer_types"] = types
            with pytest.raises(Exception, match=r"positive `sliding_window`"):
                cls(**extra)
            with pytest.raises(ValueError, match=r"refuses where a layer is sliding"):
                rope_kwargs_from_config(
                    {"model_type": "kolibri1", "head_dim": 64, **extra}, layer=0
                )
    full = {"sliding_window": None, "num_hidden_layers": 2, "layer_types": ["full_attention"] * 2}
    cls(**full)
    assert rope_kwargs_from_config({"model_type": "kolibri1", "head_dim": 64, **full}, layer=0)


@pytest.mark.parametrize("model_type", sorted(__import__("fastpe")._hf_families._NO_ROPE_LAYERS))
def test_no_rope_layers_of_any_length_as_transformers(model_type):
    """A given no_rope_layers of fewer, as many or more entries than the layers (empty
    included), with and without layer_types: where the config class or the model built
    from it fails, fastpe refuses, for every layer and without one; where both build,
    fastpe reads each layer as the model's attention does (entry i: RoPE or None)."""
    from transformers import AutoModel

    sizes, _ = GATED[model_type]
    cls = _hf.config_classes()[model_type]
    compared = 0
    for n in (0, 3):
        for entries in ([], [1, 0], [1, 0, 1], [1, 0, 1, 1]):
            for types in (None, [_F] * n):
                kwargs = {**_TINY, **sizes, "num_hidden_layers": n, "no_rope_layers": entries}
                if types is not None:
                    kwargs["layer_types"] = types
                tag = f"{model_type} {n} layers, no_rope_layers={entries}, types={types}"
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        config = cls(**copy.deepcopy(kwargs))
                        AutoModel.from_config(config)
                    held = list(config.no_rope_layers)
                except Exception:
                    held = None  # transformers fails
                d = {"model_type": model_type, **kwargs}
                for layer in range(max(n, 1)):
                    got = _fastpe_rotates(d, layer=layer)
                    if held is None or layer >= n:
                        assert isinstance(got, str), f"{tag} layer {layer}: fastpe {got}"
                    else:
                        assert got == bool(held[layer]), f"{tag} layer {layer}: fastpe {got}"
                        compared += 1
                got = _fastpe_rotates(d)
                if held is None:
                    assert isinstance(got, str), f"{tag}: fastpe {got}"
                elif len(set(map(bool, held[:n]))) > 1:
                    assert "marks some layers" in str(got), f"{tag}: fastpe {got}"
                else:
                    assert got is True, f"{tag}: fastpe {got}"
    assert compared


def test_olmo_hybrid_layer_types_refused_as_the_class_refuses_them():
    """OLMo-hybrid's class refuses layer types without a linear-attention layer, or with
    nothing else, given or derived (no layers included): fastpe refuses exactly those, for
    every layer, a layer type and none asked."""
    cls = _hf.config_classes()["olmo_hybrid"]
    lin = "linear_attention"
    variants = [{"num_hidden_layers": n} for n in range(5)] + [
        {"layer_types": types}
        for types in ([], [_F], [lin], [_F, _F], [lin, lin], [lin, _F], [_F, lin, lin])
    ]
    for extra in variants:
        kwargs = dict(extra)
        if "layer_types" in extra:
            kwargs["num_hidden_layers"] = len(extra["layer_types"])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cls(**kwargs)
            builds = True
        except Exception:
            builds = False
        d = {"model_type": "olmo_hybrid", "head_dim": 64, **kwargs}
        n = kwargs["num_hidden_layers"]
        for ask in [{}, {"layer_type": _F}] + [{"layer": i} for i in range(n)]:
            got = _fastpe_rotates(d, **ask)
            refused = isinstance(got, str) and "which its config class refuses" in got
            assert refused == (not builds), f"{extra} {ask}: builds {builds}, fastpe {got}"


def test_hybrid_layer_type_keys_as_the_classes_hold_them():
    """Bamba's class fails on a layer_types or layers_block_type key (a property without
    a setter), null included: refused. GraniteMoeHybrid's holds layers_block_type (an
    alias it sets after the layer_types field) where both are given: read so."""
    classes = _hf.config_classes()
    lin = "linear_attention"
    for key in ("layer_types", "layers_block_type"):
        for value in (None, [_F, lin]):
            extra = {"num_hidden_layers": 2, "attn_layer_indices": [1], key: value}
            with pytest.raises(AttributeError), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                classes["bamba"](**extra)
            d = {"model_type": "bamba", "head_dim": 64, **extra}
            for ask in ({}, {"layer": 0}):
                with pytest.raises(ValueError, match=rf"fails on config\['{key}'\]"):
                    rope_kwargs_from_config(d, **ask)
            with pytest.raises(ValueError, match=rf"fails on config\['{key}'\]"):
                head_dim_from_config(d)
    extra = {
        "num_hidden_layers": 2,
        "position_embedding_type": "rope",
        "layer_types": [_F, lin],
        "layers_block_type": [lin, _F],
    }
    config = classes["granitemoehybrid"](**extra)
    d = {"model_type": "granitemoehybrid", "head_dim": 64, **extra}
    got = [rope_kwargs_from_config(d, layer=i) is not None for i in range(2)]
    assert got == [t != lin for t in config.layer_types] == [False, True]


def _length_variants(model_type: str, cls) -> list[dict]:
    """Config dicts whose layer_types are one entry short, one long and exact, with
    num_hidden_layers given (4) and left out (the class default), and the legacy forms
    some classes take (fastpe._hf_families._LAYER_COUNT_RULES)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            four = list(cls(num_hidden_layers=4).layer_types)
            default = list(cls().layer_types)
        except Exception:  # (LongCat-Flash holds none; Zamba2 refuses its own default)
            four, default = [_F] * 4, [_F] * cls().num_hidden_layers
    out = []
    for n, types in ((4, four), (None, default)):
        given = {} if n is None else {"num_hidden_layers": n}
        for entries in (types[:-1], types + types[-1:], types):
            out.append({**given, "layer_types": entries})
    if model_type == "step3p5":
        for k in (1, 2):
            for extra in range(4):
                out.append(
                    {
                        "num_hidden_layers": 4,
                        "num_nextn_predict_layers": k,
                        "layer_types": [_F] * (4 + extra),
                    }
                )
    if model_type == "dory":
        for n in (4, 5, 8):
            for pairs in (2, 3, 4):
                out.append({"num_hidden_layers": n, "layer_types": [_F, "mlp"] * pairs})
        out.append({"layer_types": [_F, "mlp"] * 18})
    if model_type == "longcat_flash":
        out += [
            {"num_hidden_layers": 5, "layer_types": [_F] * 4},
            {"num_hidden_layers": 5, "layer_types": [_F] * 5},
            {"num_layers": 2, "layer_types": [_F] * 4},
            {"num_layers": 2, "layer_types": [_F] * 3},
        ]
    if model_type == "deepseek_v4":
        out.append({"num_hidden_layers": 2, "layer_types": four + four})
    return out


def test_layer_types_length_as_the_config_classes():
    """A given layer_types whose length is not num_hidden_layers (given, or the class
    default: fastpe._hf_model_types._LAYER_COUNTS, checked here too), for every config
    class that holds layer_types, and the legacy forms some take (_LAYER_COUNT_RULES:
    DeepSeek-V4 cuts a longer list, Step3p5 its multi-token-prediction entries, Dory pairs
    attention and mlp entries, LongCat-Flash counts twice num_layers, Nemotron-H takes any
    length): fastpe refuses exactly where the class refuses, and where it holds the list,
    counts the layers it holds."""
    from fastpe._hf_families import _LAYER_COUNT_RULES
    from fastpe._hf_model_types import _LAYER_COUNTS
    from fastpe.hf_config import _check_layer_count

    assert _hf.layer_counts() == _LAYER_COUNTS
    classes = _hf.config_classes()
    wrong, compared = [], 0
    for model_type in sorted(set(_LAYER_COUNTS) | set(_LAYER_COUNT_RULES)):
        cls = classes[model_type]
        for kwargs in _length_variants(model_type, cls):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    held = len(cls(**copy.deepcopy(kwargs)).layer_types)
            except Exception as exc:
                if "validate_layer_type" not in str(exc) and "num_hidden_layers" not in str(exc):
                    continue  # (refused for another reason: Bamba's, Mamba's, ... property)
                held = "refused"
            try:
                got = _check_layer_count({"model_type": model_type, **kwargs})
            except ValueError:
                got = "refused"
            shown = {k: len(v) if isinstance(v, list) else v for k, v in kwargs.items()}
            tag = f"{model_type} {shown}"
            if got != held:
                wrong.append(f"{tag}: the class holds {held} layers, fastpe {got}")
            compared += 1
    assert not wrong, "\n".join(wrong[:30])
    assert compared > 400


def test_layer_types_of_another_length_refused_where_read():
    """The families whose layer types fastpe reads (layer types derived, rope gates,
    hybrid blocks): a config the class refuses for its layer_types' length is refused,
    with a layer asked and without, where the same config with as many entries as layers
    is read."""
    from fastpe._hf_families import _BLOCKS, _LAYER_COUNT_RULES, _LAYER_TYPES

    read = (set(_LAYER_TYPES) | set(_ROPE_GATES) | set(_BLOCKS)) - set(_LAYER_COUNT_RULES)
    classes = _hf.config_classes()
    checked = 0
    for model_type in sorted(read & set(classes)):
        cls = classes[model_type]
        variants = _length_variants(model_type, cls)
        exact = {"model_type": model_type, "head_dim": 64, **variants[2]}
        asks = []
        for ask in ({"layer": 0}, {}):
            try:
                rope_kwargs_from_config(copy.deepcopy(exact), **ask)
                asks.append(ask)
            except (ValueError, TypeError):
                pass  # (refused for another reason)
        if {"layer": 0} not in asks:
            continue
        for kwargs in variants[:2]:
            assert _hf_layer_types(cls, copy.deepcopy(kwargs)) is None  # (the class refuses)
            d = {"model_type": model_type, "head_dim": 64, **kwargs}
            # (OLMo-hybrid's class may refuse the layer types for their kinds first)
            why = r"refuses a list of layer types whose len|which its config class refuses"
            for ask in asks:
                with pytest.raises(ValueError, match=why):
                    rope_kwargs_from_config(copy.deepcopy(d), **ask)
            with pytest.raises(ValueError, match=why):
                head_dim_from_config(copy.deepcopy(d))
            checked += 1
    assert checked > 40


def _hf_config(cls, kwargs: dict):
    """The config class built from ``kwargs`` (None where transformers refuses them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return cls(**copy.deepcopy(kwargs))
        except Exception:
            return None


def _answer(d: dict, **ask):
    """fastpe's reading of ``d`` (None where the layer does not rotate), or "refused"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rope_kwargs_from_config(copy.deepcopy(d), **ask)
    except (ValueError, TypeError):
        return "refused"


def test_layer_type_names_as_the_config_classes():
    """transformers' layer type names (fastpe._hf_families: _ALLOWED_LAYER_TYPES,
    _ALLOWED_MLP_LAYER_TYPES, _LEGACY_LAYER_TYPES) are configuration_utils' own; and for
    every config class of a model type fastpe reads or that holds layer types, given a
    layer_types list with one entry outside those names, with each legacy name, with
    "dense", and an mlp_layer_types with an unknown name, one entry more or one less:
    fastpe refuses (with layer=0 and without) exactly where the class refuses, and where
    the class renames a legacy name, reads the config as the one with the new name."""
    from transformers import configuration_utils as cu

    from fastpe._hf_families import (
        _ALLOWED_LAYER_TYPES,
        _ALLOWED_MLP_LAYER_TYPES,
        _BLOCKS,
        _FAMILIES,
        _LEGACY_LAYER_TYPES,
        _REFUSED_LAYER_KEYS,
    )
    from fastpe._hf_model_types import _GENERIC_TYPES, _LAYER_COUNTS

    assert _ALLOWED_LAYER_TYPES == cu.ALLOWED_ATTN_LAYER_TYPES
    assert _ALLOWED_MLP_LAYER_TYPES == cu.ALLOWED_MLP_LAYER_TYPES
    assert _LEGACY_LAYER_TYPES == cu._LEGACY_LAYER_TYPE_REMAP
    classes = _hf.config_classes()
    types = set(_LAYER_COUNTS) | _GENERIC_TYPES | set(_FAMILIES) | set(_ROPE_GATES) | set(_BLOCKS)
    wrong, compared = [], 0
    for model_type in sorted(types & set(classes)):
        cls = classes[model_type]
        built = _hf_config(cls, {"num_hidden_layers": 4})
        if built is None:
            continue  # (refused for another reason: dots3's vision encoder, ...)
        held = getattr(built, "layer_types", None)
        base = list(held) if isinstance(held, list) and len(held) == 4 else [_F] * 4
        mlp = getattr(built, "mlp_layer_types", None)
        variants = [{"layer_types": base}]
        variants += [{"layer_types": [name, *base[1:]]} for name in ("foo_attention", "dense")]
        variants += [{"layer_types": [name, *base[1:]]} for name in _LEGACY_LAYER_TYPES]
        if isinstance(mlp, list) and len(mlp) == 4:
            for entries in (["foo", *mlp[1:]], [*mlp, mlp[-1]], mlp[:-1]):
                variants.append({"layer_types": base, "mlp_layer_types": entries})
        for extra in variants:
            kwargs = {"num_hidden_layers": 4, **extra}
            config = _hf_config(cls, kwargs)
            d = {"model_type": model_type, "head_dim": 64, **kwargs}
            for ask in ({"layer": 0}, {}):
                got = _answer(d, **ask)
                tag = f"{model_type} {extra} {ask}"
                if config is None:
                    if got != "refused":
                        wrong.append(f"{tag}: the class refuses it, fastpe reads it")
                    continue
                kept = getattr(config, "layer_types", None)  # (a wrapper's: its text's)
                want = got
                if isinstance(kept, list) and extra["layer_types"] != base:
                    renamed = {"model_type": model_type, "head_dim": 64, **kwargs}
                    want = _answer({**renamed, "layer_types": list(kept)}, **ask)
                if got != want:
                    wrong.append(f"{tag}: fastpe {got}, with the class's layer types {want}")
                compared += 1
    assert not wrong, "\n".join(wrong[:40])
    assert compared > 500
    for model_type, (keys, _, _) in _REFUSED_LAYER_KEYS.items():  # (under either name)
        for key in keys:
            kwargs = {"num_hidden_layers": 4, key: [_F] * 4}
            assert _hf_config(classes[model_type], kwargs) is None
            d = {"model_type": model_type, "head_dim": 64, **kwargs}
            assert _answer(d) == _answer(d, layer=0) == "refused"
            nulled = {"model_type": model_type, "head_dim": 64, key: None}
            held = _hf_config(classes[model_type], {key: None}) is not None  # (HRM takes it)
            null_too = _REFUSED_LAYER_KEYS[model_type][1]
            assert (_answer(nulled) != "refused") == held == (not null_too)


def test_layer_past_the_last_refused_as_the_config_class_counts_layers():
    """For every model type fastpe reads whose config class counts its layers under one key
    (fastpe._hf_model_types._DEFAULT_LAYERS: the class holds a given count as given, checked
    by test_model_type_tables_are_current): where fastpe reads the last layer, the layer
    after it is refused, by both readers, with the count given (under the class's key, and
    under num_hidden_layers where that key is another) and with the class default; a null
    count is refused as the classes refuse it."""
    from fastpe._hf_model_types import _DEFAULT_LAYERS, _LAYER_COUNT_ALIASES

    classes = _hf.config_classes()
    wrong, checked = [], 0
    for model_type, default in sorted(_DEFAULT_LAYERS.items()):
        key = _LAYER_COUNT_ALIASES.get(model_type, "num_hidden_layers")
        counts = [({key: 4}, 4), ({}, default)]
        if key != "num_hidden_layers":
            counts.append(({"num_hidden_layers": 4}, 4))
        for given, n in counts:
            assert _hf_config(classes[model_type], given).num_hidden_layers == n
            d = {"model_type": model_type, "head_dim": 64, **given}
            tower = "vision" if model_type in fastpe.hf_config.AXIAL_HW else "text"
            if _answer(d, layer=n - 1, tower=tower) == "refused":
                continue  # (refused for another reason)
            for read in (rope_kwargs_from_config, head_dim_from_config):
                kw = {"tower": tower} if read is rope_kwargs_from_config else {}
                if read is head_dim_from_config and tower == "vision":
                    continue  # (the tower's head size is read from its own keys)
                try:
                    read(copy.deepcopy(d), layer=n, **kw)
                    wrong.append(f"{model_type} {given}: {read.__name__} reads layer={n}")
                except ValueError as exc:
                    if f"layer={n} is out of range" not in str(exc):
                        wrong.append(f"{model_type} {given}: {exc}")
            checked += 1
    assert not wrong, "\n".join(wrong[:30])
    assert checked > 300
    # a null count: every one of these classes refuses it but DBRX's (whose model fails on
    # it), and fastpe refuses it, whatever the layer
    accepted = set()
    for model_type in sorted(_DEFAULT_LAYERS):
        key = _LAYER_COUNT_ALIASES.get(model_type, "num_hidden_layers")
        if _hf_config(classes[model_type], {key: None}) is not None:
            accepted.add(model_type)
        d = {"model_type": model_type, "head_dim": 64, key: None}
        tower = "vision" if model_type in fastpe.hf_config.AXIAL_HW else "text"
        assert _answer(d, tower=tower) == _answer(d, layer=0, tower=tower) == "refused", d
    assert accepted == {"dbrx"}
    # a layer_types one entry longer than the layers the class counts (the count left out,
    # or given under the class's own key, or under both with num_hidden_layers winning):
    # refused where the class refuses it, read where it reads the exact one
    wrong, lengths = [], 0
    for model_type, default in sorted(_DEFAULT_LAYERS.items()):
        key = _LAYER_COUNT_ALIASES.get(model_type, "num_hidden_layers")
        counts = [({}, default), ({key: 3}, 3)]
        if key != "num_hidden_layers":
            counts.append(({key: 5, "num_hidden_layers": 3}, 3))
        for given, n in counts:
            exact = {**given, "layer_types": [_F] * n}
            if _hf_config(classes[model_type], exact) is None:
                continue  # (the class refuses these names or this list for another reason)
            tower = "vision" if model_type in fastpe.hf_config.AXIAL_HW else "text"
            d = {"model_type": model_type, "head_dim": 64, **exact}
            if _answer(d, tower=tower) == "refused":
                continue
            longer = {**given, "layer_types": [_F] * (n + 1)}
            assert _hf_config(classes[model_type], longer) is None, (model_type, given)
            d = {"model_type": model_type, "head_dim": 64, **longer}
            if _answer(d, tower=tower) != "refused":
                wrong.append(f"{model_type} {given}: {n + 1} layer types read")
            lengths += 1
    assert not wrong, "\n".join(wrong[:30])
    assert lengths > 300
    # the read types outside _DEFAULT_LAYERS that hold layer types count as their class
    # holds them: LongCat-Flash twice num_layers (the layer types' count), Zamba2 as given
    zamba2 = {"use_mem_rope": True, "attention_head_dim": 64}
    for model_type, given, n in (
        ("longcat_flash", {"num_layers": 2}, 4),
        ("longcat_flash", {"num_hidden_layers": 5}, 4),
        ("zamba2", zamba2, 54),
    ):
        assert _hf_config(classes[model_type], given).num_hidden_layers == n
        d = {"model_type": model_type, **given}
        assert _answer(d, layer=n - 1) != "refused", (model_type, given)
        with pytest.raises(ValueError, match=rf"layer={n} is out of range"):
            rope_kwargs_from_config(d, layer=n)


def test_layer_past_the_last_refused_in_stacks():
    """The model types fastpe reads whose layers no single key counts
    (fastpe._hf_families._STACK_LAYER_KEYS, and HRM): fastpe reads the last layer the
    config class holds (the largest count of the stacks: Moonshine's encoder and decoder)
    and refuses the one after it, by both readers where they read the type, with each count
    left out, given, and given under both of Moonshine's decoder names; a null count is
    refused where the class refuses it (before, any layer=i was read)."""
    from fastpe._hf_families import _HRM_LAYER_DEFAULTS, _STACK_LAYER_KEYS

    classes = _hf.config_classes()
    asked = {
        "moonshine": [
            {},
            {"encoder_num_hidden_layers": 3, "decoder_num_hidden_layers": 8},
            {"encoder_num_hidden_layers": 9, "decoder_num_hidden_layers": 2},
            {"num_hidden_layers": 2, "decoder_num_hidden_layers": 8},
        ],
        "hrm_text": [
            {},
            {"num_hidden_layers": 4},
            {"num_hidden_layers": 4, "H_cycles": 1, "L_cycles": 1},
            {"num_hidden_layers": 4, "num_layers_per_stack": 2},
            {"num_hidden_layers": 3, "num_layers_per_stack": None},
        ],
        "sam2_video": [{}, {"memory_attention_num_layers": 3}],
        "sam3_tracker_video": [{}, {"memory_attention_num_layers": 3}],
        "edgetam_video": [{}, {"memory_attention_num_layers": 5}],
        "dots3_note_vision_encoder": [{}],
    }
    assert set(asked) == set(_STACK_LAYER_KEYS) | {"hrm_text"}
    counted = {k for keys, _ in sum(_STACK_LAYER_KEYS.values(), ()) for k in keys}
    counted |= set(_HRM_LAYER_DEFAULTS) | {"num_layers_per_stack"}
    checked = 0
    for model_type, givens in asked.items():
        cls = classes[model_type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = {k: v for k, v in cls().to_dict().items() if k not in counted}
        for given in givens:
            held = _hf_config(cls, given)
            if model_type == "hrm_text":
                n = held.num_hidden_layers
            else:
                stacks = _STACK_LAYER_KEYS[model_type]
                n = max(getattr(held, keys[-1]) for keys, _ in stacks)
            d = {**base, **given}
            assert _answer(d, layer=n - 1) != "refused", (model_type, given)
            reads = [rope_kwargs_from_config]
            if model_type in ("moonshine", "hrm_text"):
                reads.append(head_dim_from_config)
            for read in reads:
                with pytest.raises(ValueError, match=rf"layer={n} is out of range"):
                    read(copy.deepcopy(d), layer=n)
            checked += 1
        # a null count: refused as the class refuses it (HRM's num_layers_per_stack: null
        # is the class's own default, derived)
        for key in sorted(counted & set(cls().to_dict())):
            nulled = {**base, key: None}
            refused = _hf_config(cls, {key: None}) is None
            assert refused == (key != "num_layers_per_stack"), (model_type, key)
            assert (_answer(nulled) == "refused") == refused, (model_type, key)
    assert checked == sum(len(g) for g in asked.values())


def test_no_model_type_reads_a_layer_past_the_last():
    """The default config of every model type of transformers 5.24 that fastpe reads (as
    the class writes it out, to_dict) is refused with layer=10**6: each is bounded by some
    count of its layers (before, six were read with any layer)."""
    read, wrong = 0, []
    for model_type, cls in sorted(_hf.config_classes().items()):
        built = _hf_config(cls, {})
        if built is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = built.to_dict()
        if _answer(d) == "refused":
            continue
        read += 1
        if _answer(d, layer=10**6) != "refused":
            wrong.append(model_type)
    assert not wrong
    assert read > 200


def test_layer_type_outside_transformers_names_refused():
    """layer_type= naming no layer type of transformers 5.24 is refused for every model
    type of _DEFAULT_LAYERS that fastpe reads with layer_type="full_attention" (before,
    the families with one rope dict for every layer read any string)."""
    from fastpe._hf_model_types import _DEFAULT_LAYERS

    checked = 0
    for model_type in sorted(_DEFAULT_LAYERS):
        d = {"model_type": model_type, "head_dim": 64}
        if _answer(d, layer_type="full_attention") == "refused":
            continue
        assert _answer(d, layer_type="full_attention_typo") == "refused", model_type
        checked += 1
    assert checked > 150


def test_hybrid_models_without_attention_layers_read_as_none():
    """A hybrid model (fastpe._hf_families._BLOCKS) whose class holds no layer with
    attention (Bamba without attn_layer_indices, ...) rotates nothing: fastpe reads it as
    None without a layer too, as where no layer rotates, and head_dim_from_config refuses
    it (no head size); one with an attention layer is read."""
    from fastpe._hf_families import _BLOCKS

    classes = _hf.config_classes()
    lin = "linear_attention"
    variants = {
        "bamba": [{"attn_layer_indices": None}, {"attn_layer_indices": []}, {}],
        "qwen3_next": [{"layer_types": [lin] * 4}, {"layer_types": [lin, lin, lin, _F]}],
        "lfm2": [{"full_attn_idxs": []}, {"layer_types": ["conv"] * 4}, {}],
        "lfm2_moe": [{"layer_types": ["conv"] * 4}, {"layer_types": ["conv", _F] * 2}],
        "lfm3": [{"layer_types": ["conv"] * 4}],
        "granitemoehybrid": [{}, {"layer_types": ["mamba"] * 4}, {"layer_types": [lin, _F] * 2}],
        "minimax": [{"layer_types": [lin] * 4}, {"layer_types": [lin, _F] * 2}],
        "qwen3_5_text": [{"layer_types": [lin] * 4}, {"layer_types": [lin, lin, lin, _F]}],
        "qwen3_5_moe_text": [{"layer_types": [lin] * 4}],
        "qwen4_exp_text": [{"layer_types": [lin] * 4}, {}, {"full_attention_interval": 5}],
        "bailing_hybrid": [{}, {"layer_group_size": 2}, {"layer_types": [lin] * 4}],
        "recurrent_gemma": [{"block_types": ["recurrent"]}, {}],
        "zamba2": [
            {"use_mem_rope": True, "layers_block_type": [lin] * 4},
            {"use_mem_rope": True, "layers_block_type": [lin, "hybrid"] * 2},
        ],
    }
    assert sorted(variants) == sorted(_BLOCKS)
    seen = set()
    for model_type, extras in sorted(variants.items()):
        for extra in extras:
            kwargs = {"num_hidden_layers": 4, **extra}
            if model_type == "granitemoehybrid":
                kwargs["position_embedding_type"] = "rope"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = classes[model_type](**copy.deepcopy(kwargs))
            kinds = list(getattr(config, "layers_block_type", None) or config.layer_types)
            attends = any(k not in _BLOCKS[model_type].no_attention for k in kinds)
            # (Qwen3.5's M-RoPE sections need its own head size: 256)
            hd = 256 if model_type.startswith("qwen3_5") else 64
            d = {"model_type": model_type, "head_dim": hd, **kwargs}
            if model_type == "lfm3":
                d["rope_parameters"] = copy.deepcopy(config.rope_parameters)
            got = rope_kwargs_from_config(d)
            assert (got is not None) == attends, f"{model_type} {extra}: {kinds}, fastpe {got}"
            if attends:
                assert head_dim_from_config(copy.deepcopy(d)) == hd
            else:  # (no attention anywhere: no head size either)
                with pytest.raises(ValueError, match=r"no layer of this model has attention"):
                    head_dim_from_config(copy.deepcopy(d))
            seen.add(attends)
    assert seen == {True, False}


def test_granitemoehybrid_null_layers_block_type_refused_as_the_model_fails():
    """GraniteMoeHybrid with an explicit null layers_block_type: its class holds null
    layer types (the alias is set last) and building the model fails; fastpe refuses it
    (a null layer_types alone is derived, every layer Mamba, and read)."""
    from transformers import AutoModel

    cls = _hf.config_classes()["granitemoehybrid"]
    for extra in ({}, {"layer_types": [_F] * 2}):
        kwargs = {**_TINY, "num_hidden_layers": 2, "position_embedding_type": "rope"}
        kwargs.update(extra, layers_block_type=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = cls(**copy.deepcopy(kwargs))
            assert config.layer_types is None
            with pytest.raises(TypeError):
                AutoModel.from_config(config)
        d = {"model_type": "granitemoehybrid", **kwargs}
        for ask in ({}, {"layer": 0}, {"layer_type": _F}):
            with pytest.raises(ValueError, match=r"config\['layers_block_type'\] is null"):
                rope_kwargs_from_config(d, **ask)
        with pytest.raises(ValueError, match=r"config\['layers_block_type'\] is null"):
            head_dim_from_config(d)
    d = {"model_type": "granitemoehybrid", "head_dim": 64, "num_hidden_layers": 2}
    assert rope_kwargs_from_config(dict(d, layer_types=None), layer=0) is None  # (Mamba)


def test_olmo_hybrid_sliding_layers_refused_as_the_model_fails():
    """OLMo-hybrid's class takes a sliding_attention layer type, but its model builds no
    mask for it (its forward fails): fastpe refuses the config, for every layer asked and
    none."""
    cls = _hf.config_classes()["olmo_hybrid"]
    types = ["linear_attention", "sliding_attention", _F]
    kwargs = {"num_hidden_layers": 3, "layer_types": types}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cls(**copy.deepcopy(kwargs)).layer_types == types
    d = {"model_type": "olmo_hybrid", "head_dim": 64, **kwargs}
    for ask in [{}, {"layer_type": _F}] + [{"layer": i} for i in range(3)]:
        with pytest.raises(ValueError, match=r"\[1\] is 'sliding_attention': .* model fails"):
            rope_kwargs_from_config(d, **ask)
    with pytest.raises(ValueError, match=r"'sliding_attention': .* model fails"):
        head_dim_from_config(d, layer=2)
    assert rope_kwargs_from_config(dict(d, layer_types=types[::2], num_hidden_layers=2), layer=1)


def test_flat_wrapper_configs_are_read_as_the_class_holds_them():
    """A wrapper's config given flat (the text model's keys at the top level, no
    text_config, non-default RoPE keys): fastpe refuses it, or reads what the rotary class
    built from the text config the wrapper's class holds does. Those that do not build
    their text config from the top-level keys (not in _FLAT_TEXT_WRAPPERS) are refused, and
    so is a top-level key beside a text_config that differs from it (the class ignores it)."""
    from fastpe._hf_families import _TEXT_MODEL_TYPES
    from fastpe._hf_model_types import _FLAT_TEXT_WRAPPERS

    classes = _hf.config_classes()
    flat = {
        "rope_theta": 1234.5,
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1234.5},
        "max_position_embeddings": 4321,
    }
    read = []
    for model_type, inner in sorted(_TEXT_MODEL_TYPES.items()):
        raw = {"model_type": model_type, **flat}
        if model_type not in _FLAT_TEXT_WRAPPERS:
            ignored = r"ignores the top-level 'rope_theta'|is not supported"
            with pytest.raises(ValueError, match=ignored):
                rope_kwargs_from_config(raw)
            with pytest.raises(ValueError, match=r"text_config|is not supported"):
                head_dim_from_config(raw)
            if inner is not None:
                both = {**raw, "text_config": {"model_type": inner}}
                with pytest.raises(ValueError, match=ignored):
                    rope_kwargs_from_config(both)
            continue
        try:
            kw = rope_kwargs_from_config(raw)
        except ValueError:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = classes[model_type](**flat)
        rc = _hf.rotary_class_for(config.text_config)
        assert kw is not None, model_type
        _compare(rc, config.text_config, raw, kw, None, None, f"flat {model_type}")
        read.append(model_type)
    assert set(read) <= _FLAT_TEXT_WRAPPERS
