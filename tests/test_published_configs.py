"""Published model configs (tests/_published.py, written by hand from the checkpoints).

Each config is read by ``rope_kwargs_from_config`` and compared with the arguments written
out by hand; where transformers is installed (the ``hf`` extra), the result of fastpe is also
compared with the model's own rotary class and apply function run in float64 (see
tests/_hf.py), at positions up to ``max_position_embeddings - 1``: fastpe in float64 within
a few ulps of the angle, and fastpe in float32 within a few float32 ulps of that float64
result (bench/hf_accuracy.py prints these errors beside HF's own float32 error).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from _published import (
    GEMMA3_4B,
    GEMMA3_4B_NESTED,
    GEMMA3_4B_TEXT,
    HF_FORM,
    PUBLISHED,
    QWEN2_VL_7B,
    QWEN2_VL_7B_VISION,
    QWEN25_VL_7B,
    QWEN25_VL_7B_VISION,
    REFUSED_PUBLISHED,
)

import fastpe
from fastpe.hf_config import (
    head_dim_from_config,
    output_layout_from_config,
    rope_kwargs_from_config,
)
from fastpe.layout import interleaved_to_half


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_config_read(name):
    config, layer_type, want = PUBLISHED[name]
    before = copy.deepcopy(config)
    assert rope_kwargs_from_config(config, layer_type=layer_type) == want
    assert config == before


@pytest.mark.parametrize("name", sorted(REFUSED_PUBLISHED))
def test_published_config_refused(name):
    config, pattern = REFUSED_PUBLISHED[name]
    with pytest.raises(ValueError, match=pattern):
        rope_kwargs_from_config(config)


def test_deepseek_v3_output_layout():
    # apply_rotary_pos_emb_interleave rotates interleaved pairs, returns the half order
    config = PUBLISHED["deepseek-v3"][0]
    assert output_layout_from_config(config) == "half"
    assert output_layout_from_config(dict(config, rope_interleave=False)) == "half"
    assert rope_kwargs_from_config(dict(config, rope_interleave=False))["layout"] == "half"
    assert output_layout_from_config(PUBLISHED["deepseek-v2-lite"][0]) == "interleaved"


def test_gemma3_published_layers_read_as_the_saved_layer_types():
    """Gemma 3 as published (no layer_types: the config class derives them from
    sliding_window_pattern) read layer by layer: the same kwargs as the same model saved by
    transformers 5 (layer_types and one rope dict per layer type written out)."""
    n = GEMMA3_4B_NESTED["num_hidden_layers"]
    for flat in (
        dict(GEMMA3_4B_TEXT, num_hidden_layers=n),
        {**GEMMA3_4B, "text_config": dict(GEMMA3_4B_TEXT, num_hidden_layers=n)},
    ):
        for layer in range(n):
            want = rope_kwargs_from_config(GEMMA3_4B_NESTED, layer=layer)
            assert rope_kwargs_from_config(flat, layer=layer) == want, layer
        with pytest.raises(ValueError, match=rf"layer={n} is out of range"):
            rope_kwargs_from_config(flat, layer=n)


# --------------------------------------------------------------------------- against HF

# float64: a few ulps of the angle (HF rounds position * inv_freq once); float32: fastpe's
# own bound for apply_rope in float32 (ROPE_ULP), against HF's float64 result.
ANGLE_ULP = 4
FLOAT32_ULP = 2.0


def positions_for(max_pos: int | None) -> np.ndarray:
    top = (max_pos or 4096) - 1
    return np.unique(np.array([0, 1, 2, 77, 1000, 4095, 4096, top // 2, top - 1, top]).clip(0, top))


def mixed_positions(max_pos: int | None) -> np.ndarray:
    """(3, seq) t/h/w positions of text, an image of 1 x 4 x 6 patches, then text again,
    as Qwen2-VL's ``get_rope_index`` numbers them, the text running up to the context end."""
    text = positions_for(max_pos)[:4]  # 0, 1, 2, 77
    start = int(text[-1]) + 1
    t, h, w = np.meshgrid(np.arange(1), np.arange(4), np.arange(6), indexing="ij")
    image = start + np.stack([t.ravel(), h.ravel(), w.ravel()])
    after = int(image.max()) + 1
    tail = np.unique(np.r_[after, after + 1, positions_for(max_pos)[4:]])
    tail = tail[tail >= after]
    return np.concatenate(
        [np.repeat(text[None], 3, axis=0), image, np.repeat(tail[None], 3, axis=0)], axis=1
    )


def hf_vs_fastpe(name):
    """``(kw, positions, hf_rotated, fastpe_float64, fastpe_float32)``, (seq, e_h, ch)."""
    _hf = pytest.importorskip("_hf")
    transformers = pytest.importorskip("transformers")
    config, layer_type, _ = PUBLISHED[name]
    hf_config = transformers.AutoConfig.for_model(**copy.deepcopy(HF_FORM.get(name, config)))
    rc = _hf.rotary_class_for(hf_config)
    if rc.config_cls is not type(hf_config):
        hf_config = hf_config.text_config
    kw = rope_kwargs_from_config(config, layer_type=layer_type)
    head_dim = head_dim_from_config(config)
    if "pair_axes" in kw:  # M-RoPE: a mixed text + image sequence
        positions = mixed_positions(kw["max_position_embeddings"])
    else:
        positions = positions_for(kw["max_position_embeddings"])
    hf = _hf.hf_rotate(rc, hf_config, positions, head_dim, layer_type)
    want = hf.rotated.transpose(1, 0, 2)
    out = []
    for dtype in (np.float64, np.float32):
        x = np.broadcast_to(
            np.eye(head_dim, dtype=dtype)[None], (positions.shape[-1], head_dim, head_dim)
        ).copy()
        got = fastpe.apply_rope(x, positions=positions, seq_axis=0, **kw)
        if output_layout_from_config(config) != kw["layout"]:
            got = interleaved_to_half(got, rotary_dim=kw["rotary_dim"])
        out.append(got)
    return kw, positions, want, out[0], out[1], hf


def test_hf_cannot_load_su_as_published():
    transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
    with pytest.raises(KeyError, match="original_max_position_embeddings"):
        transformers.AutoConfig.for_model(**copy.deepcopy(PUBLISHED["phi-3-mini-128k-su"][0]))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_config_against_hf(name):
    pytest.importorskip(
        "transformers", reason="the hf extra (torch, transformers) is not installed"
    )
    _, positions, want, got64, got32, hf = hf_vs_fastpe(name)
    factor = hf.attention_factor
    inv_max = 1.0 if hf.inv_freq is None else float(np.max(hf.inv_freq))
    angle = positions.max() * inv_max
    err64 = np.abs(got64 - want).max() / (factor * np.spacing(1.0) * (1.0 + angle))
    assert err64 <= ANGLE_ULP, f"{name}: float64 differs from HF by {err64:.3g} angle ulps"
    err32 = np.abs(got32.astype(np.float64) - want).max() / (factor * 2.0**-24)
    assert err32 <= FLOAT32_ULP, f"{name}: float32 differs from HF float64 by {err32:.3g} ulp"


def test_dynamic_ntk_fresh_and_stateful():
    # HF's dynamic module keeps the frequencies of the longest sequence it has seen (until a
    # sequence shorter than max_position_embeddings resets it); fastpe computes what a fresh
    # module computes for the call, and the stateful result when given that seq_len.
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    import _hf
    import torch
    import transformers

    from fastpe.scaling import rope_frequencies

    config = dict(
        PUBLISHED["llama-3.1"][0],
        max_position_embeddings=2048,
        rope_scaling={"rope_type": "dynamic", "factor": 4.0},
    )
    kw = rope_kwargs_from_config(config)
    hf_config = transformers.AutoConfig.for_model(**copy.deepcopy(config))
    rc = _hf.rotary_class_for(hf_config)

    def inv_freq_after(*lengths):
        with _hf.float64_torch():
            module = _hf.build(rc, hf_config)
            for n in lengths:
                module(torch.zeros((1, n, 128)), torch.arange(n)[None, :])
            return module.inv_freq.numpy().copy()

    def fastpe_inv_freq(seq_len):
        return rope_frequencies(
            128,
            base=kw["base"],
            scaling=kw["scaling"],
            seq_len=seq_len,
            max_position_embeddings=2048,
        )[0]

    def ulp(a, b):
        return float(np.max(np.abs(a - b) / np.spacing(b)))

    assert ulp(fastpe_inv_freq(3000), inv_freq_after(3000)) <= 4  # fresh
    stateful = inv_freq_after(6000, 3000)  # 3000 after 6000: keeps 6000's frequencies
    assert ulp(fastpe_inv_freq(6000), stateful) <= 4
    assert ulp(fastpe_inv_freq(3000), stateful) > 1e6
    assert ulp(fastpe_inv_freq(100), inv_freq_after(6000, 100)) <= 4  # reset below 2048


# --------------------------------------------------------------------------- vision towers


@pytest.mark.parametrize(
    ("parent", "vision", "tower"),
    [
        (QWEN2_VL_7B, QWEN2_VL_7B_VISION, "qwen2_vl_vision"),
        (QWEN25_VL_7B, QWEN25_VL_7B_VISION, "qwen2_5_vl_vision"),
    ],
    ids=["qwen2-vl", "qwen2.5-vl"],
)
def test_published_vision_config_without_model_type(parent, vision, tower):
    """The published config.json files leave the tower's model_type out (and transformers 4
    saved the parent's there): the parent's model_type names the tower."""
    want = rope_kwargs_from_config(dict(vision, model_type=tower))
    assert want["rotary_dim"] == 80 and want["layout"] == "half"
    assert want["pair_axes"] == (0,) * 20 + (1,) * 20
    for form in (vision, dict(vision, model_type=parent["model_type"])):
        config = dict(parent, vision_config=form)
        assert rope_kwargs_from_config(config, tower="vision") == want


def test_vision_config_of_an_unknown_parent_refused():
    config = {"model_type": "some_vl", "vision_config": {"hidden_size": 64, "num_heads": 4}}
    with pytest.raises(ValueError, match=r"'some_vl' has no model_type.*vision_config"):
        rope_kwargs_from_config(config, tower="vision")
