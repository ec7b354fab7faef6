"""fastpe against Hugging Face's own rotary code, per model family, at long positions.

    .venv/bin/python bench/hf_accuracy.py          # the README's table
    .venv/bin/python bench/hf_accuracy.py --json   # the same figures, machine-readable

Needs the ``hf`` extra (torch, transformers). For each published config of
tests/_published.py: the basis vectors of one head are rotated at positions up to
``max_position_embeddings - 1`` by the model's own rotary class and apply function run in
float64 (the yardstick, see tests/_hf.py), by the same HF code in its float32 path, and by
``fastpe.apply_rope`` in float32 from ``rope_kwargs_from_config``. Errors are the largest
absolute difference from the float64 result, also in float32 ulps of 1 (2**-24) scaled by
the attention factor. A few seconds of CPU; nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

FAMILIES = [
    "llama-3.1",
    "qwen2.5-yarn",
    "phi-3.5-mini",
    "phi-4-mini",
    "deepseek-v3",
    "gemma-3-flat-full",
    "pythia-1b",
    "gpt-j-6b",
    "command-r",
    "glm-4-9b-0414",
    "qwen2-vl",  # M-RoPE: text, an image, text to the end of the context
]


def measure(name: str) -> dict:
    import copy

    import _hf
    import transformers
    from _published import HF_FORM, PUBLISHED
    from test_published_configs import hf_vs_fastpe, positions_for

    config, layer_type, _ = PUBLISHED[name]
    kw, positions, want, _, got32, hf = hf_vs_fastpe(name)
    hf_config = transformers.AutoConfig.for_model(**copy.deepcopy(HF_FORM.get(name, config)))
    rc = _hf.rotary_class_for(hf_config)
    if rc.config_cls is not type(hf_config):
        hf_config = hf_config.text_config
    from fastpe.hf_config import head_dim_from_config

    hf32 = _hf.hf_rotate(
        rc, hf_config, positions, head_dim_from_config(config), layer_type, float64=False
    ).rotated.transpose(1, 0, 2)
    unit = hf.attention_factor * 2.0**-24
    err_fastpe = float(np.abs(got32.astype(np.float64) - want).max())
    err_hf = float(np.abs(hf32 - want).max())
    assert positions.max() == positions_for(kw["max_position_embeddings"]).max()
    return {
        "family": name,
        "max_position": int(positions.max()),
        "fastpe_float32_abs": err_fastpe,
        "fastpe_float32_ulp": err_fastpe / unit,
        "hf_float32_abs": err_hf,
        "hf_float32_ulp": err_hf / unit,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("needs the hf extra: pip install -e '.[hf]'", file=sys.stderr)
        return 2
    rows = [measure(name) for name in FAMILIES]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| config | max position | fastpe float32 | HF float32 |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['family']} | {r['max_position']:,} | {r['fastpe_float32_abs']:.1e} "
            f"({r['fastpe_float32_ulp']:.2f} ulp) | {r['hf_float32_abs']:.1e} "
            f"({r['hf_float32_ulp']:,.0f} ulp) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
