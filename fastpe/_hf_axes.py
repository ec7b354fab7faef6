"""Multi-axis RoPE of Hugging Face model families: which position axis rotates each pair.

M-RoPE (Qwen2-VL and its descendants) gives a token three positions (time, height, width)
and rotates each channel pair by one of them, chosen by ``mrope_section`` (pairs per axis).
The families arrange the sections three ways (each read from the family's modelling code in
transformers 5.24 and checked against it by tests/test_hf_oracle.py):

``"split"``
    contiguous sections, axis ``i % 3`` for section ``i`` (Qwen2-VL, Qwen2.5-VL, Qwen2.5-Omni,
    PaddleOCR-VL, GLM-4V, GLM-Image, GLM-OCR);
``"interleaved"``
    pairs cycle t, h, w: pair ``j`` takes h when ``j % 3 == 1`` and ``j < 3 * section[1]``,
    w when ``j % 3 == 2`` and ``j < 3 * section[2]``, else t (Qwen3-VL, Qwen3.5, Qwen3-Omni,
    Cosmos3, HY-V4-VL);
``"rowcol"``
    two axes (an image's row and column) alternating over the pairs, no sections
    (NeoMME; positions ``(2, seq)``);
``"ernie"``
    ERNIE-4.5-VL: ``section[0] + section[1]`` pairs alternating h, w, then ``section[2]``
    pairs of t (its pre-rotated frequencies come back to the plain ``base**(-2i/d)``).

The result is :func:`fastpe.apply_rope`'s ``pair_axes``: positions are then ``(3, seq)`` or
``(3, batch, seq)`` (t, h, w), as the model's ``get_rope_index`` makes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

MROPE_KEYS = ("mrope_section", "mrope_interleaved", "xdrope_section")


def mrope_pair_axes(mode: str, section, npairs: int) -> np.ndarray:
    """``pair_axes`` of ``npairs`` rotated pairs for an M-RoPE ``section`` in ``mode``."""
    section = [int(s) for s in section]
    if mode == "rowcol":
        return (np.arange(npairs) % 2).astype(np.int64)
    if mode == "hunyuan":
        # HunYuan-VL cuts the doubled cos/sin (2 * npairs channels) into sections of
        # 2 * section[a] channels, axis a each: a pair's two channels (i, i + npairs) may
        # fall on different axes; two rows, the axes of the first and the second channel
        if sum(section) != npairs or len(section) < 3:
            raise ValueError(
                f"HunYuan-VL's mrope_section {section} must have at least 3 entries adding "
                f"up to rotary_dim // 2 = {npairs} (transformers refuses it otherwise)"
            )
        channel = np.repeat(np.arange(len(section)), 2 * np.asarray(section))
        return np.stack([channel[:npairs], channel[npairs:]]).astype(np.int64)
    if mode == "split":
        if sum(section) != npairs:
            raise ValueError(
                f"mrope_section {section} covers {sum(section)} pairs, but the rotary dim has "
                f"{npairs} pairs; the sections must add up to rotary_dim // 2"
            )
        return np.repeat(np.arange(len(section)) % 3, section).astype(np.int64)
    if len(section) != 3:
        raise ValueError(f"mrope_section must have 3 entries (t, h, w), got {section}")
    ax = np.zeros(npairs, dtype=np.int64)
    if mode == "interleaved":
        if 3 * section[1] > npairs + 1 or 3 * section[2] > npairs:
            raise ValueError(
                f"interleaved mrope_section {section} does not fit {npairs} pairs "
                f"(rotary_dim // 2): its h and w pairs would run past the last pair"
            )
        ax[1 : 3 * section[1] : 3] = 1
        ax[2 : 3 * section[2] : 3] = 2
        return ax
    if mode == "ernie":
        h, w, t = section
        if h != w or h + w + t != npairs:
            raise ValueError(
                f"ERNIE-4.5-VL's mrope_section {section} must be [n, n, t] with 2n + t = "
                f"{npairs} (rotary_dim // 2)"
            )
        ax[: 2 * h : 2] = 1
        ax[1 : 2 * h : 2] = 2
        return ax
    raise AssertionError(mode)


def read_mrope(rope: Mapping[str, Any], mode: str, default: tuple[int, ...], holder: str):
    """The ``mrope_section`` of a rope dict (or the family's default) and its check.

    ``mrope_interleaved``, where a config states it, must agree with the family's code.
    """
    section = rope.get("mrope_section")
    legacy = rope.get("xdrope_section") if mode == "hunyuan" else None
    if legacy is not None:  # HunYuan-VL's older name, which its config class renames
        if section is not None and list(section) != list(legacy):
            raise ValueError(
                f"config[{holder!r}] holds mrope_section {section!r} and xdrope_section "
                f"{legacy!r}, which differ (transformers refuses it too)"
            )
        section = legacy
    if section is None and mode == "hunyuan":
        raise ValueError(
            f"config[{holder!r}] has no mrope_section (or xdrope_section): HunYuan-VL's code "
            f"takes its number of position axes from it, and transformers fails without it"
        )
    if section is None:
        section = list(default)
    if not isinstance(section, (list, tuple)) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in section
    ):
        raise TypeError(
            f"config[{holder!r}]['mrope_section'] must be a list of pair counts such as "
            f"[16, 24, 24], got {section!r}"
        )
    flag = rope.get("mrope_interleaved")
    if flag is not None and bool(flag) != (mode == "interleaved"):
        raise ValueError(
            f"config[{holder!r}]['mrope_interleaved'] is {flag!r}, but this family's code "
            f"arranges the sections {mode!r}; fastpe does not guess which one the model uses"
        )
    return section


def without_mrope(rope: dict[str, Any]) -> dict[str, Any]:
    """``rope`` less the M-RoPE keys, with the legacy type ``"mrope"`` read as ``"default"``
    (as transformers' Qwen2-VL config does)."""
    out = {k: v for k, v in rope.items() if k not in MROPE_KEYS}
    if out.get("rope_type", out.get("type")) == "mrope":
        out.pop("type", None)
        out["rope_type"] = "default"
    elif out.get("type") == "mrope":  # {"type": "mrope", "rope_type": ...}: rope_type wins
        out.pop("type")
    return out


# --------------------------------------------------------------------------- vision towers

#: Vision towers and how their axial RoPE arranges a patch's row (axis 0) and column
#: (axis 1) over the pairs (each checked against the class by tests/test_hf_oracle.py).
#: With ``f = theta**(-2j / (d/2))``, ``j < d/4``, for a head of ``d`` channels:
#: ``"hw"`` the first ``d/4`` pairs by the row, the next by the column, ``f`` for both
#: (Qwen2-VL); ``"wh"`` the column first (Step3, Inkling2); ``"kimi"`` pairs alternating
#: column, row, each frequency twice; ``"pixtral"`` the frequencies of the whole head
#: ``theta**(-2k/d)``, the even ones for the row, the odd ones for the column; ``"thw"``
#: three axes (frame 0, row 1, column 2), each on ``s/2`` pairs in turn with
#: ``theta**(-2j/s)``, ``s = 2 * (d // 3 // 2)``: ``3 * s`` channels rotated, the rest kept
#: (MiniMax-M3-VL). The layout is ``"half:2"`` where the head is one block per axis, each
#: half-split within itself (Gemma 4's ``apply_multidimensional_rope``).
_HW = ("hw", "half")
AXIAL: dict[str, tuple[str, str]] = {
    **{
        name: _HW
        for name in (
            "cohere_compass_vision",
            "dots3_note_vision_encoder",
            "ernie4_5_vl_moe_vision",
            "exaone4_5_vision",
            "glm4v_moe_vision",
            "glm4v_vision",
            "glm5_next_vision",
            "glm_ocr_vision",
            "lfm3_vl_vision",
            "mlcd_vision_model",
            "muse_glimmer_vision",
            "muse_spark_vision",
            "paddleocr_vl_vision",
            "qwen2_vl_vision",
            "qwen2_5_omni_vision_encoder",
            "qwen2_5_vl_vision",
            "qwen3_omni_moe_vision_encoder",
            "qwen3_vl_moe_vision",
            "qwen3_vl_vision",
            "qwen3_5_moe_vision",
            "qwen3_5_vision",
            "qwen4_exp_vision",
            "video_llama_3_vision",
        )
    },
    "step3p5_vision": ("wh", "half"),
    "inkling2_vision": ("wh", "interleaved"),
    "kimi_k25_vision": ("kimi", "half"),
    "pixtral": ("pixtral", "half"),
    "minimax_m3_vl_vision": ("thw", "half"),
    # one block per axis (the row's, then the column's), each rotate_half within itself
    "gemma4_vision": ("hw", "half:2"),
    # SAM 2/3 (memory attention of the video models, and SAM 3's ViT): interleaved pairs
    **{
        name: ("hw", "interleaved")
        for name in ("sam2_video", "sam3_tracker_video", "edgetam_video", "sam3_vit_model")
    },
}
#: Towers whose head size is that of their memory attention (SAM 2 video and kin).
_MEMORY_ATTENTION = ("sam2_video", "sam3_tracker_video", "edgetam_video")
AXIAL_HW = frozenset(AXIAL)  # every vision tower read

#: The vision tower of each multimodal model_type whose config class fixes it (its
#: ``sub_configs["vision_config"]``; tests/test_hf_oracle.py checks the table against the
#: installed transformers). Published ``config.json`` files often leave the tower's
#: ``model_type`` out, and transformers 4 saved the parent's there (``"qwen2_5_vl"``): the
#: parent's model_type then names the tower.
VISION_TOWERS: dict[str, str] = {
    "cohere_compass": "cohere_compass_vision",
    "dots3_note": "dots3_note_vision_encoder",
    "ernie4_5_vl_moe": "ernie4_5_vl_moe_vision",
    "exaone4_5": "exaone4_5_vision",
    "gemma4": "gemma4_vision",
    "glm4v": "glm4v_vision",
    "glm4v_moe": "glm4v_moe_vision",
    "glm5_next": "glm5_next_vision",
    "glm_ocr": "glm_ocr_vision",
    "inkling2": "inkling2_vision",
    "kimi_k25": "kimi_k25_vision",
    "lfm3_vl": "lfm3_vl_vision",
    "minimax_m3_vl": "minimax_m3_vl_vision",
    "muse_glimmer": "muse_glimmer_vision",
    "muse_spark": "muse_spark_vision",
    "paddleocr_vl": "paddleocr_vl_vision",
    "qwen2_5_omni_thinker": "qwen2_5_omni_vision_encoder",
    "qwen2_5_vl": "qwen2_5_vl_vision",
    "qwen2_vl": "qwen2_vl_vision",
    "qwen3_5": "qwen3_5_vision",
    "qwen3_5_moe": "qwen3_5_moe_vision",
    "qwen3_omni_moe_thinker": "qwen3_omni_moe_vision_encoder",
    "qwen3_vl": "qwen3_vl_vision",
    "qwen3_vl_moe": "qwen3_vl_moe_vision",
    "qwen4_exp": "qwen4_exp_vision",
    "step3p7": "step3p5_vision",
    "video_llama_3": "video_llama_3_vision",
}


def axial_pairs(mode: str, theta: float, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pair_axes, inv_freq)`` of a vision tower's axial RoPE (see :data:`AXIAL`)."""
    from ._freq import inv_freq_dd

    if mode == "thw":
        s, _ = inv_freq_dd(theta, 2 * (head_dim // 3 // 2))
        return np.repeat([0, 1, 2], s.size), np.tile(s, 3)
    if mode == "pixtral":
        g, _ = inv_freq_dd(theta, head_dim)  # theta**(-2k/d), rounded once to float64
        n = g.size // 2
        return np.repeat([0, 1], n), np.concatenate([g[0::2], g[1::2]])
    f, _ = inv_freq_dd(theta, head_dim // 2)  # theta**(-2j/(d/2))
    n = f.size
    if mode == "hw":
        return np.repeat([0, 1], n), np.concatenate([f, f])
    if mode == "wh":
        return np.repeat([1, 0], n), np.concatenate([f, f])
    if mode == "kimi":
        return np.tile([1, 0], n), np.repeat(f, 2)
    raise AssertionError(mode)


def axial_rotary_dim(mode: str, head_dim: int) -> int:
    """The channels a vision tower's axial RoPE rotates (all but for ``"thw"``)."""
    return 3 * (2 * (head_dim // 3 // 2)) if mode == "thw" else head_dim


def axial_kwargs(config: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """``apply_rope`` keyword arguments of a vision tower's axial RoPE (see :data:`AXIAL`).

    Positions are then ``(2, patches)``: the row and the column of each patch, in the order
    the tower lays its patches out (the model's own position ids).
    """
    from ._hf_families import _CLASS_DEFAULTS
    from .scaling import _check_real

    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if not isinstance(rope, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict, got {type(rope).__name__}")
    kind = rope.get("rope_type", rope.get("type", "axial"))
    if kind != "axial":
        raise ValueError(
            f"model_type {model_type!r}: rope type {kind!r} in a vision tower whose code "
            f"rotates axially; fastpe reads only 'axial' here"
        )
    unknown = sorted(set(rope) - {"rope_type", "type", "rope_theta"})
    if unknown:
        raise ValueError(
            f"model_type {model_type!r}: rope key(s) {', '.join(map(repr, unknown))} of a "
            f"vision tower are not understood; fastpe refuses rather than guess"
        )
    # a key left out takes the config class's default, as transformers does (Gemma 4's tower:
    # theta 100, head_dim 64; LFM3-VL's: theta 1e6)
    defaults = _CLASS_DEFAULTS.get(model_type, {})
    theta = rope.get("rope_theta", config.get("rope_theta"))
    if theta is None:
        theta = defaults.get("rope_theta", 10000.0)
    theta = _check_real(theta, "rope_theta")
    head_dim = config.get("head_dim", defaults.get("head_dim"))
    if model_type in _MEMORY_ATTENTION:
        keys = (
            "memory_attention_hidden_size",
            "memory_attention_downsample_rate",
            "memory_attention_num_attention_heads",
        )
        sizes = [config.get(k) for k in keys]
        if not all(isinstance(v, int) and v > 0 for v in sizes):
            raise ValueError(
                f"model_type {model_type!r}: the config needs {', '.join(map(repr, keys))} "
                f"(positive integers) for the memory attention's head size"
            )
        w_, r_, h_ = (int(v) for v in sizes if isinstance(v, int))
        head_dim = w_ // (r_ * h_)
    if head_dim is None:
        if "embed_dim" in defaults:  # the tower's width; its hidden_size is the LM's
            width = config.get("embed_dim") or defaults["embed_dim"]
        else:
            width = next((config[k] for k in ("embed_dim", "hidden_size") if config.get(k)), None)
        heads = next(
            (config[k] for k in ("num_heads", "num_attention_heads") if config.get(k)), None
        )
        if not (isinstance(width, int) and isinstance(heads, int) and heads > 0):
            raise ValueError(
                f"model_type {model_type!r}: the vision config needs 'head_dim', or "
                f"'embed_dim' (or 'hidden_size') and 'num_heads' (or 'num_attention_heads')"
            )
        head_dim = width // heads
    if (
        not isinstance(head_dim, int)
        or head_dim <= 0
        or (head_dim % 4 and AXIAL[model_type][0] != "thw")
    ):
        raise ValueError(
            f"model_type {model_type!r}: axial RoPE needs a head size divisible by 4, got "
            f"{head_dim!r}"
        )
    mode, layout = AXIAL[model_type]
    axes, inv_freq = axial_pairs(mode, theta, head_dim)
    return {
        "layout": layout,
        "rotary_dim": axial_rotary_dim(mode, head_dim),
        "pair_axes": tuple(int(a) for a in axes),
        "inv_freq": tuple(float(v) for v in inv_freq),
    }
