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

MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def mrope_pair_axes(mode: str, section, npairs: int) -> np.ndarray:
    """``pair_axes`` of ``npairs`` rotated pairs for an M-RoPE ``section`` in ``mode``."""
    section = [int(s) for s in section]
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
