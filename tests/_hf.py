"""Run the ``*RotaryEmbedding`` classes of the installed ``transformers`` in float64.

Shared by tests/test_hf_oracle.py (every class, default config), tests/test_published_configs.py
(published configs) and bench/hf_accuracy.py (float32 errors). Needs torch and transformers
(the ``hf`` extra); import it only after ``pytest.importorskip("transformers")``.

:func:`rotary_classes` walks ``transformers.models``; :func:`hf_rotate` builds one class from a
config the way the model does (``Cls(config)``), runs it at the given positions in float64
and rotates basis vectors with the model's own apply function (``apply_rotary_pos_emb``,
``apply_rotary_pos_emb_interleave`` when the config sets ``rope_interleave`` or the module
has no other, ``apply_rotary_emb`` for complex multiplication, GPT-J's
``apply_rotary_pos_emb(tensor, sin, cos)``), so that frequencies, attention factor, rotary
dim, channel layout and sign are all in the result, none assumed.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import pkgutil
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
import transformers.models


@dataclass
class RotaryClass:
    name: str
    module: Any  # the modeling module
    cls: type
    config_cls: type | None  # the annotation of __init__'s config argument


def _model_modules(prefix: str):
    """The modules ``transformers.models.<name>.<prefix>*`` that import (call it with warnings
    silenced: importing them warns)."""
    for info in sorted(pkgutil.iter_modules(transformers.models.__path__), key=lambda i: i.name):
        pkg = f"transformers.models.{info.name}"
        try:
            sub = importlib.import_module(pkg)
        except Exception:
            continue
        for m in pkgutil.iter_modules(getattr(sub, "__path__", [])):
            if not m.name.startswith(prefix):
                continue
            try:
                yield importlib.import_module(f"{pkg}.{m.name}")
            except Exception:
                continue


#: Model types whose config class no rotary class takes: transformers 5.24 builds another
#: family's model from it (AutoModel), and with it that family's rotary class, named here
#: (checked by tests/test_hf_oracle.py, test_borrowed_rotary_classes_are_the_models').
#: Each is walked as that class built from this config class, named ``Class@model_type``.
BORROWED: dict[str, str] = {
    "sarvam_mla": "DeepseekV3RotaryEmbedding",
    # Llama's model (transformers.models.auto.modeling_auto: MODEL_MAPPING_NAMES)
    "exaone": "LlamaRotaryEmbedding",
    "internlm3": "LlamaRotaryEmbedding",
    "iquestcoder": "LlamaRotaryEmbedding",
    # GLM-4-MoE's model
    "sarvam_moe": "Glm4MoeRotaryEmbedding",
}


def rotary_classes() -> list[RotaryClass]:
    """Every ``*RotaryEmbedding`` class defined in a ``transformers.models.*.modeling_*``,
    and those another config class borrows (:data:`BORROWED`)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    found: list[RotaryClass] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mod in _model_modules("modeling_"):
            for name, cls in sorted(vars(mod).items()):
                if (
                    inspect.isclass(cls)
                    and name.endswith("RotaryEmbedding")
                    and cls.__module__ == mod.__name__
                ):
                    found.append(RotaryClass(name, mod, cls, _config_annotation(cls)))
    by_name = {rc.name: rc for rc in found}
    for model_type, name in sorted(BORROWED.items()):
        rc = by_name[name]
        found.append(
            RotaryClass(f"{name}@{model_type}", rc.module, rc.cls, CONFIG_MAPPING[model_type])
        )
    return found


def _config_annotation(cls: type) -> type | None:
    try:
        params = list(inspect.signature(cls.__init__, eval_str=True).parameters.values())[1:]
    except Exception:
        return None
    if not params or "config" not in params[0].name:
        return None
    ann = params[0].annotation
    return ann if inspect.isclass(ann) else None


@contextlib.contextmanager
def float64_torch():
    """Make ``torch.float`` / ``torch.float32`` / ``Tensor.float()`` mean float64 inside.

    The rotary classes compute their frequencies with an explicit ``dtype=torch.float``;
    running them in float64 gives the formulas rounded once per operation, the yardstick
    fastpe's float64 frequencies are held to.
    """
    saved = (torch.float, torch.float32, torch.Tensor.float, torch.get_default_dtype())
    torch.float = torch.float64  # type: ignore[misc]
    torch.float32 = torch.float64  # type: ignore[misc]
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)  # type: ignore[method-assign]
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.float, torch.float32, torch.Tensor.float = saved[:3]  # type: ignore[misc]
        torch.set_default_dtype(saved[3])


def default_config(rc: RotaryClass):
    """The default config of the class's ``__init__`` annotation, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rc.config_cls()


def _typed_rope(rc: RotaryClass, config) -> dict:
    fwd = inspect.signature(rc.cls.forward).parameters
    if not getattr(config, "layer_types", None) and getattr(config, "text_config", None):
        config = config.text_config  # the module is built from it (see build)
    if "layer_type" not in fwd or not getattr(config, "layer_types", None):
        return {}
    rope = getattr(config, "rope_parameters", None) or {}
    typed = {t: rope[t] for t in sorted(set(config.layer_types)) if t in rope}
    if not typed and rope and all(isinstance(v, dict) for v in rope.values()):
        return dict(sorted(rope.items()))  # keyed by labels, not layer types (DeepSeek-V4)
    return typed


def layer_types_of(rc: RotaryClass, config) -> list[str | None]:
    """The layer types the class is called with (``[None]`` when its forward takes none)."""
    typed = _typed_rope(rc, config)
    if not typed:
        return [None]
    return [t for t, params in typed.items() if params is not None]


def null_layer_types(rc: RotaryClass, config) -> list[str]:
    """Layer types whose rope parameters are null: layers without RoPE."""
    return [t for t, params in _typed_rope(rc, config).items() if params is None]


def depends_on_axes(
    rc: RotaryClass, config, positions, head_dim: int, layer_type: str | None = None
) -> bool:
    """Whether the class, given (n_axes, batch, seq) position ids, rotates by more than one
    axis.

    Classes that take only (batch, seq) ids fail or return an extra leading axis; a
    multi-axis class returns (batch, seq, dim) that changes when the height and width ids
    differ from the time ids.
    """
    pos = torch.as_tensor(np.asarray(positions, np.int64))
    with float64_torch(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = build(rc, config)
        x = torch.zeros((1, pos.shape[0], head_dim), dtype=torch.float64)
        fwd = inspect.signature(rc.cls.forward).parameters
        args = (layer_type,) if "layer_type" in fwd else ()
        for n in (4, 3, 2):  # HunYuan-VL's 4 axes, t/h/w (M-RoPE), or row/column
            same = torch.stack([pos] * n)[:, None, :]
            other = torch.stack([pos, pos * 3 + 1, pos * 7 + 2, pos * 11 + 3][:n])[:, None, :]
            try:
                a = module(x, same, *args)
                b = module(x, other, *args)
                break
            except Exception:
                continue
        else:
            return False
    if not isinstance(a, tuple) or a[0].dim() != 3:
        return False
    return not all(torch.equal(u, v) for u, v in zip(a, b))


def pick_apply(module, config) -> tuple[str, Any] | None:
    """The function the model's attention rotates q and k with, by name.

    ``apply_rotary_pos_emb_interleave`` when the module's attention calls it: always (the
    module never reads ``rope_interleave``) or when the config sets ``rope_interleave``.
    """
    names = vars(module)
    source = inspect.getsource(module)
    calls_interleave = re.search(r"[^f] apply_rotary_pos_emb_interleave\(", source) is not None
    if "rope_interleave" in source:
        interleave = bool(getattr(config, "rope_interleave", False))
    else:
        interleave = calls_interleave
    if interleave and "apply_rotary_pos_emb_interleave" in names:
        return "apply_rotary_pos_emb_interleave", names["apply_rotary_pos_emb_interleave"]
    for name in ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave"):
        if name in names:
            return name, names[name]
    return None


def build(rc: RotaryClass, config):
    """``rc.cls(config)``, or ``rc.cls(config.text_config)`` where the model passes that."""
    try:
        return rc.cls(config)
    except AttributeError:
        text = getattr(config, "text_config", None)
        if text is None:
            raise
        return rc.cls(text)


@dataclass
class HFResult:
    inv_freq: np.ndarray | None  # float64, per pair (HF's buffer after the forward call)
    attention_factor: float
    rotated: np.ndarray  # (heads=D, seq, D): basis vector h rotated at each position
    apply_name: str


def axis_positions(positions, n_axes: int = 3) -> np.ndarray:
    """(n_axes, seq) positions (time, height, width; HunYuan-VL a fourth) that differ from
    one another."""
    p = np.asarray(positions, np.int64)
    return np.stack([p, p // 3 + 1, (p * 7) // 5 + 2, (p * 11) // 7 + 3][:n_axes])


def hf_rotate(
    rc: RotaryClass,
    config,
    positions: np.ndarray,
    head_dim: int,
    layer_type: str | None = None,
    *,
    float64: bool = True,
) -> HFResult:
    """Build ``rc.cls(config)``, run it at ``positions`` and rotate the basis of R^head_dim.

    ``float64=False`` runs HF's own float32 path (frequencies, angles, cos/sin and the
    rotation of float32 inputs), as a model in float32 does.
    """
    dtype = torch.float64 if float64 else torch.float32
    with float64_torch() if float64 else contextlib.nullcontext(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = build(rc, config)
        pos = torch.as_tensor(np.asarray(positions, np.int64))
        # (seq,) -> (1, seq); multi-axis (n_axes, seq) -> (n_axes, 1, seq)
        pos = pos[None, :] if pos.dim() == 1 else pos[:, None, :]
        x = torch.zeros((1, pos.shape[-1], head_dim), dtype=dtype)
        fwd = inspect.signature(rc.cls.forward).parameters
        out = module(x, pos, layer_type) if "layer_type" in fwd else module(x, pos)
        prefix = "" if layer_type is None else f"{layer_type}_"
        inv_freq = getattr(module, f"{prefix}inv_freq", None)  # GPT-J keeps a sin/cos table
        factor = getattr(module, f"{prefix}attention_scaling", None)
        if factor is None:
            factor = getattr(module, "attention_scaling", 1.0)
        if float64 and isinstance(out, tuple) and pos.dim() == 2 and not pos[0, 0]:
            # 1-D positions from 0: the factor forward applies, as its cos at position 0
            # shows (PhiMoE multiplies by short_mscale / long_mscale, not the module's
            # attention_scaling);
            # (cos, sin) or GPT-J's (sin, cos): the larger of the two first entries
            factor = max(abs(float(out[0].flatten()[0])), abs(float(out[1].flatten()[0])))
        picked = pick_apply(rc.module, config)
        if picked is None:
            raise LookupError(f"{rc.module.__name__} has no apply_rotary_pos_emb")
        name, apply = picked
        # q[0, h, s, :] = e_h: (batch, heads, seq, head_dim)
        q = (
            torch.eye(head_dim, dtype=dtype)[None, :, None, :]
            .expand(1, head_dim, pos.shape[-1], head_dim)
            .contiguous()
        )
        rotated = _call_apply(name, apply, q, out)
    if inv_freq is not None:
        inv_freq = inv_freq.detach().to(torch.float64).numpy().copy()
    return HFResult(
        inv_freq, float(factor), rotated[0].detach().to(torch.float64).numpy().copy(), name
    )


def _call_apply(name, apply, q, out):
    params = list(inspect.signature(apply).parameters)
    if isinstance(out, torch.Tensor):  # complex freqs_cis (DeepSeek-V2, Llama 4)
        freqs = out
        if params[:3] == ["xq", "xk", "freqs_cis"]:
            # both take (batch, seq, heads, dim/2) after their own unsqueeze; pass (b, s, h, d)
            qq = q.transpose(1, 2)
            try:
                r, _ = apply(qq, qq, freqs)
                return r.transpose(1, 2)
            except RuntimeError:
                r, _ = apply(q, q, freqs)
                return r
        raise LookupError(f"unknown signature of {name}: {params}")
    cos, sin = out[0], out[1]
    if params[:3] == ["tensor", "sin", "cos"]:  # GPT-J, CodeGen: (batch, seq, heads, dim)
        sin, cos = out[0], out[1]  # their rotary module returns (sin, cos)
        qq = q.transpose(1, 2)
        return _partial(lambda t: apply(t, sin, cos), qq, sin.shape[-1] * 2).transpose(1, 2)
    if params[:4] == ["q", "k", "cos", "sin"]:
        return _partial(lambda t: apply(t, t, cos, sin)[0], q, cos.shape[-1])
    if params[:3] == ["x", "cos", "sin"]:  # Gemma 3n, Gemma 4: one tensor, (b, s, h, d)
        qq = q.transpose(1, 2)
        return _partial(lambda t: apply(t, cos, sin, unsqueeze_dim=2), qq, cos.shape[-1]).transpose(
            1, 2
        )
    raise LookupError(f"unknown signature of {name}: {params}")


def _partial(fn, q, rot):
    """``fn`` on all channels, else (shape mismatch) on the first ``rot``, the rest kept."""
    try:
        return fn(q)
    except RuntimeError:
        if rot >= q.shape[-1]:
            raise
        return torch.cat([fn(q[..., :rot].contiguous()), q[..., rot:]], dim=-1)


def rotary_class_for(config) -> RotaryClass:
    """The rotary class built from ``config`` (or its ``text_config``), by config class."""
    kinds = [type(config)]
    text = getattr(config, "text_config", None)
    if text is not None:
        kinds.append(type(text))
    for kind in kinds:
        for rc in _all():
            if rc.config_cls is kind:
                return rc
    raise LookupError(f"no rotary class takes {[k.__name__ for k in kinds]}")


_CACHE: list[RotaryClass] = []


def _all() -> list[RotaryClass]:
    if not _CACHE:
        _CACHE.extend(rotary_classes())
    return _CACHE


def class_defaults() -> dict[str, dict]:
    """Per ``model_type``, the defaults of its config class that a config may leave out and
    that differ from fastpe's generic reading (the table ``fastpe.hf_config._CLASS_DEFAULTS``
    must equal this): a set ``head_dim``, a theta other than 10000, a partial rotary factor
    other than 1, a rope dict of another type than ``default``, or one rope dict per layer
    type (``"nested"``)."""
    import dataclasses

    from transformers import PretrainedConfig

    from fastpe._hf_axes import AXIAL_HW
    from fastpe.hf_config import _FAMILIES, _is_nested

    out: dict[str, dict] = {}
    seen = set()
    configs = []
    for rc in _all():
        if rc.config_cls is None:
            continue
        try:
            configs.append(default_config(rc))
        except Exception:
            continue
    # the sub-configs too (BLT's modules, a VL model's towers): each is read on its own
    while configs:
        config = configs.pop(0)
        cls = type(config)
        if cls in seen:
            continue
        seen.add(cls)
        configs.extend(v for v in vars(config).values() if isinstance(v, PretrainedConfig))
        model_type = config.to_dict().get("model_type")
        family = _FAMILIES.get(model_type)
        if not model_type or (
            family is not None and family.refuse and model_type not in AXIAL_HW
        ):  # vision towers are read by their own reader (fastpe._hf_axes), with defaults
            continue
        entry: dict = {}
        # the head sizes the family reads where the config leaves them out: head_dim (the
        # generic reading), the keys of its row that size the head or the rotation
        # (qk_rope_head_dim of latent attention, Mistral 4's qk_nope_head_dim, GPT-J's
        # rotary_dim: absent, the class default; null, the whole head)
        sizes = {"head_dim"}
        if family is not None:
            sizes = set(family.head_dim_keys) | set(family.head_dim_sum)
            sizes |= set(family.same_size_keys) | set(family.rotary_dim_keys)
        fields = getattr(cls, "__dataclass_fields__", {})
        for key in sorted(sizes):
            field = fields.get(key)
            if (
                key in sizes
                and field is not None
                and field.default not in (dataclasses.MISSING, None)
            ):
                entry[key] = field.default
        # a vision tower whose width is ``embed_dim`` (Qwen2-VL's: its ``hidden_size`` is
        # the language model's)
        field = getattr(cls, "__dataclass_fields__", {}).get("embed_dim")
        if model_type in AXIAL_HW and field is not None and field.default is not None:
            if field.default is not dataclasses.MISSING:
                entry["embed_dim"] = field.default
        rope = getattr(config, "rope_parameters", None) or {}
        # top-level keys that the class's default rope dict wins over (no dict given)
        ignored = []
        for key, probe in (("rope_theta", 12345.0), ("partial_rotary_factor", 0.5)):
            if not rope or _is_nested(rope):
                break
            if family is not None and key in dict(family.flat_ignored):
                continue  # read from the family's own keys (GPT-NeoX's rotary_pct)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    made = cls(**{key: probe}).rope_parameters
            except Exception:
                continue
            if made.get(key) != probe:
                ignored.append(key)
        if ignored:
            entry["top_ignored"] = tuple(ignored)
        if rope and _is_nested(rope):
            entry["nested"] = True
        elif rope:
            theta = rope.get("rope_theta")
            if theta is not None and float(theta) != 10000.0:
                entry["rope_theta"] = float(theta)
            partial = rope.get("partial_rotary_factor")
            if partial is not None and float(partial) != 1.0:
                entry["partial_rotary_factor"] = float(partial)
            # (a vision tower's reader knows its rope type, "axial": only the rest counts)
            if rope.get("rope_type", "default") not in (
                "default",
                "axial" if model_type in AXIAL_HW else "default",
            ):
                entry["rope_parameters"] = {
                    k: v
                    for k, v in rope.items()
                    if k not in ("rope_theta", "partial_rotary_factor")
                }
        if entry:
            out[model_type] = entry
    return out


def grid_positions(rows: int, cols: int, frames: int = 0) -> np.ndarray:
    """(2, rows * cols) row and column of each patch of a grid, row-major; with ``frames``,
    (3, frames * rows * cols) frame, row and column."""
    if frames:
        t, r, c = np.meshgrid(np.arange(frames), np.arange(rows), np.arange(cols), indexing="ij")
        return np.stack([t.ravel(), r.ravel(), c.ravel()]).astype(np.int64)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.stack([r.ravel(), c.ravel()]).astype(np.int64)


def _vision_rotate(module) -> str:
    """The name of the function the tower's apply function rotates pairs with."""
    names = [n for n in vars(module) if n.startswith("apply_rotary_pos_emb")]
    for name in sorted(names, key=lambda n: ("vision" not in n and "2d" not in n, n)):
        found = re.search(r"(rotate_\w+)\(", inspect.getsource(vars(module)[name]))
        if found:
            return found.group(1)
    return "rotate_half"


def hf_rotate_axial(rc: RotaryClass, config, positions: np.ndarray):
    """A vision tower's axial RoPE at ``(2, patches)`` (row, column) or ``(3, patches)``
    (frame, row, column) positions, in float64.

    The module is called with its ``(patches, 2)`` position ids; the rotation is the formula
    of the family's ``apply_rotary_pos_emb_vision`` (``q * cos + rotate_half(q) * sin``, with
    the rotate function that one calls, ``rotate_half`` or ``rotate_pairwise``) in float64:
    the function itself casts to float32. Gemma 4's ``apply_multidimensional_rope``, which
    rotates one block per axis, is called as it is (it keeps float64).
    Returns ``(patches, d, d)``: basis vector ``e_h`` rotated at each patch.
    """
    with float64_torch(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = build(rc, config)
        pos = torch.as_tensor(np.asarray(positions, np.int64)).T.contiguous()
        multi = vars(rc.module).get("apply_multidimensional_rope")
        # Gemma 4 (one block per axis) takes (batch, patches, 2) position ids
        ids = pos[None] if multi is not None else pos
        cos, sin = module(torch.zeros((pos.shape[0], 8), dtype=torch.float64), ids)[:2]
        cos, sin = cos.to(torch.float64), sin.to(torch.float64)
        cos, sin = cos.reshape(-1, cos.shape[-1]), sin.reshape(-1, sin.shape[-1])  # (1, N, d)
        d = cos.shape[-1]
        q = torch.eye(d, dtype=torch.float64)[None].expand(pos.shape[0], d, d)  # (N, h, d)
        if multi is not None:  # Gemma 4: one block per axis, each rotated on its own
            out = multi(q[None], cos[None], sin[None], pos[None], unsqueeze_dim=2)[0]
        else:
            rotate_half = vars(rc.module)[_vision_rotate(rc.module)]
            out = q * cos[:, None, :] + rotate_half(q) * sin[:, None, :]
    return out.numpy().copy()


def vision_towers() -> dict[str, str]:
    """Per multimodal ``model_type``, the ``model_type`` of its vision tower where the
    config class fixes it (``sub_configs["vision_config"]``) and fastpe reads that tower:
    what ``fastpe._hf_axes.VISION_TOWERS`` must equal."""
    from transformers import CONFIG_MAPPING

    from fastpe._hf_axes import AXIAL_HW

    out = {}
    for model_type in CONFIG_MAPPING.keys():
        try:
            cls = CONFIG_MAPPING[model_type]
        except Exception:  # a config class that cannot be imported here
            continue
        tower = (getattr(cls, "sub_configs", None) or {}).get("vision_config")
        tower_type = getattr(tower, "model_type", None)
        if tower_type in AXIAL_HW:
            out[model_type] = tower_type
    return out


def _default_configs():
    """``(rotary class, its default config, config.to_dict())`` for each class whose default
    config builds."""
    for rc in _all():
        if rc.config_cls is None:
            continue
        try:
            config = default_config(rc)
            d = config.to_dict()
        except Exception:
            continue
        yield rc, config, d


def ignores_partial() -> set[str]:
    """The ``model_type`` of every rotary class whose default config holds one rope dict
    (not one per layer type) and whose module, built with ``rope_parameters`` of the
    default rope type, theta 10000 and ``partial_rotary_factor`` 0.5, keeps as many
    frequencies as with the factor 1: its default rotary code rotates the whole head
    whatever the factor (the table ``fastpe._hf_families._IGNORES_PARTIAL`` must equal
    this)."""
    from fastpe._hf_axes import AXIAL_HW
    from fastpe.hf_config import _FAMILIES

    found: dict[str, bool] = {}
    for rc, config, d in _default_configs():
        mt = d.get("model_type")
        rope = d.get("rope_parameters") or {}
        family = _FAMILIES.get(mt)
        if (
            not mt
            or mt in AXIAL_HW
            or (family is not None and family.refuse)
            or not isinstance(rope, dict)
            or any(isinstance(v, dict) for v in rope.values())
        ):
            continue
        counts = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for factor in (1.0, 0.5):
                    given = {"rope_type": "default", "rope_theta": 10000.0}
                    made = rc.config_cls(rope_parameters=dict(given, partial_rotary_factor=factor))
                    counts.append(getattr(build(rc, made), "inv_freq", None))
        except Exception:  # a class that needs more in its rope dict: its default config
            if rope.get("rope_type", "default") != "default" or rope.get(
                "partial_rotary_factor", d.get("partial_rotary_factor")
            ) not in (None, 1, 1.0):
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    d2 = {k: v for k, v in d.items() if k != "model_type"}
                    d2["partial_rotary_factor"] = 0.5
                    d2["rope_parameters"] = dict(rope, partial_rotary_factor=0.5)
                    made = rc.config_cls(**d2)
                    counts = [getattr(build(rc, c), "inv_freq", None) for c in (config, made)]
            except Exception:
                continue
        if counts[0] is None or counts[1] is None:
            continue
        found[mt] = counts[0].numel() == counts[1].numel()
    return {mt for mt, ignores in found.items() if ignores}


def ignores_partial_by_layer_type() -> dict[str, tuple[str, ...]]:
    """As :func:`ignores_partial`, for the classes whose default config holds one rope dict
    per layer type: per ``model_type``, the layer types of the default rope type whose
    frequencies the factor 0.5 (in each layer type's dict) leaves all in place (the table
    ``fastpe._hf_families._IGNORES_PARTIAL_BY_TYPE`` must equal this)."""
    import copy

    from fastpe.hf_config import _is_nested

    found: dict[str, tuple[str, ...]] = {}
    for rc, config, d in _default_configs():
        mt = d.get("model_type")
        rope = d.get("rope_parameters") or {}
        if not mt or not isinstance(rope, dict) or not rope or not _is_nested(rope):
            continue
        kinds = {
            lt: p.get("rope_type", "default")
            for lt, p in rope.items()
            if isinstance(p, dict) and p.get("partial_rotary_factor") in (None, 1, 1.0)
        }
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                full = build(rc, config)
                d2 = copy.deepcopy(d)
                d2.pop("model_type", None)
                for lt in kinds:
                    d2["rope_parameters"][lt]["partial_rotary_factor"] = 0.5
                half = build(rc, rc.config_cls(**d2))
        except Exception:
            continue
        ignored = []
        for lt, kind in sorted(kinds.items()):
            n0 = getattr(full, f"{lt}_inv_freq", None)
            n1 = getattr(half, f"{lt}_inv_freq", None)
            if kind == "default" and n0 is not None and n1 is not None:
                if n1.numel() == n0.numel():
                    ignored.append(lt)
        if ignored:
            found[mt] = tuple(ignored)
    return found


def given_defaults() -> dict[str, dict[str, dict]]:
    """Per ``model_type``, what applies to a rope dict the config gives without
    ``rope_theta`` or ``partial_rotary_factor`` (the table
    ``fastpe._hf_families._GIVEN_DEFAULTS`` must equal this).

    A class's default rope dict (``_CLASS_DEFAULTS``) applies only when the config gives
    none; a dict it gives is completed from the class's own fields, or not at all, and
    differently for ``rope_parameters`` and ``rope_scaling`` in some families. Each config
    class is built from its default config with its default rope dict(s) moved under each
    key, without ``rope_theta`` and ``partial_rotary_factor`` (at any level): the theta is
    the one it then holds (None: it holds none, and the rotary code fails); the factor is
    the one it then holds, else None where the rotary module (built with theta 10000 added)
    turns a part of each head all the same (a default of the rotary code). Built once more
    with a top-level ``rope_theta``: where a layer type's dict does not take it, the theta
    it holds then is ``"rope_theta_beside_top"``. Listed where a value differs from the
    generic reading (theta 10000, whole head, the top-level theta taken): ``{key:
    {"rope_theta": ..., ...}}``, or ``{key: {layer_type: {...}}}``.
    """
    import copy

    from fastpe._hf_axes import AXIAL_HW
    from fastpe.hf_config import _FAMILIES, _is_nested

    stripped_keys = ("rope_theta", "partial_rotary_factor")
    top_theta = 12345.0

    def freqs(module, lt):
        buf = getattr(module, "inv_freq" if lt is None else f"{lt}_inv_freq", None)
        return None if buf is None else buf.numel()

    out: dict[str, dict[str, dict]] = {}
    seen = set()
    for rc in _all():
        if rc.config_cls is None or rc.config_cls in seen:
            continue
        seen.add(rc.config_cls)
        try:
            config = default_config(rc)
            d = config.to_dict()
        except Exception:
            continue
        model_type = d.get("model_type")
        family = _FAMILIES.get(model_type)
        rope = d.get("rope_parameters") or {}
        if (
            not model_type
            or not isinstance(rope, dict)
            or not rope
            or model_type in AXIAL_HW
            or (family is not None and (family.refuse or family.rope_labels))
        ):
            continue
        nested = _is_nested(rope)
        types = [lt for lt, v in rope.items() if v is not None] if nested else [None]
        base = {
            k: v
            for k, v in d.items()
            if k not in ("model_type", "rope_parameters", "rope_scaling", "layer_rope_theta")
            and k not in stripped_keys
        }

        def made(holder, extra, top=None, rope=rope, nested=nested, base=base, rc=rc):
            def strip(one):
                return {k: v for k, v in one.items() if k not in stripped_keys} | extra

            given = (
                {lt: None if p is None else strip(p) for lt, p in rope.items()}
                if nested
                else strip(rope)
            )
            kwargs = dict(copy.deepcopy(base), **{holder: given})
            if top is not None:
                kwargs["rope_theta"] = top
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return rc.config_cls(**kwargs)

        def part_of(rp, lt, nested=nested):
            part = rp.get(lt) if nested else rp
            return part if isinstance(part, dict) else None

        entry: dict[str, dict] = {}
        for holder in ("rope_parameters", "rope_scaling"):
            try:
                rp = made(holder, {}).rope_parameters
                rp_top = made(holder, {}, top=top_theta).rope_parameters
            except Exception:
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    bare = build(rc, made(holder, {"rope_theta": 10000.0}))
                    whole = build(
                        rc, made(holder, {"rope_theta": 10000.0, "partial_rotary_factor": 1.0})
                    )
            except Exception:
                bare = whole = None
            per_type: dict = {}
            for lt in types:
                part, part_top = part_of(rp, lt), part_of(rp_top, lt)
                if part is None:
                    continue
                values: dict = {}
                theta = part.get("rope_theta")
                if theta is None or float(theta) != 10000.0:
                    values["rope_theta"] = None if theta is None else float(theta)
                partial = part.get("partial_rotary_factor")
                n, n1 = (None, None) if bare is None else (freqs(bare, lt), freqs(whole, lt))
                if partial is not None and float(partial) != 1.0:
                    values["partial_rotary_factor"] = float(partial)
                elif n is not None and n1 is not None and n != n1:
                    values["partial_rotary_factor"] = None  # the rotary code's own default
                beside = None if part_top is None else part_top.get("rope_theta")
                if beside is None or float(beside) != top_theta:
                    values["rope_theta_beside_top"] = None if beside is None else float(beside)
                if values:
                    per_type[lt] = values
            entry[holder] = per_type if nested else per_type.get(None, {})
        if any(entry.values()):
            out[model_type] = entry
    return out


def config_classes() -> dict[str, type]:
    """Every config class of the installed transformers with a ``model_type``, by it (the
    classes of ``transformers.models.*.configuration_*``, sub-configs included)."""
    from transformers import PretrainedConfig

    found: dict[str, type] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mod in _model_modules("configuration_"):
            for _, cls in sorted(vars(mod).items()):
                if (
                    inspect.isclass(cls)
                    and issubclass(cls, PretrainedConfig)
                    and cls.__module__ == mod.__name__
                    and getattr(cls, "model_type", "")
                ):
                    found.setdefault(cls.model_type, cls)
    return found


#: What a modelling module of transformers holds where its model rotates anything: a rotary
#: embedding class or function (``rotary``, ``rotate_half``, ``rotate_every_two``,
#: ``freqs_cis``) or a rope word (``rope_theta``, ``qk_rope_head_dim``, ``mrope_section``,
#: ``VisionRope``, ...; "property" does not count). It errs towards a match: a type with
#: one keeps the general reason.
_ROTARY_CODE = re.compile(r"(?<!p)rope|rotary|rotate_|freqs_ci", re.I)
#: A modelling module that builds another family's model from a sub-config or a backbone
#: (whose rotary code lives in that family's package).
_BUILDS_OTHER_MODEL = re.compile(r"Auto\w*\.from_config\(|load_backbone\(")


def no_rotary_types() -> set[str]:
    """The model types (:func:`config_classes`) whose model has no RoPE anywhere
    (fastpe._hf_model_types._NO_ROTARY_TYPES): their package of transformers holds modelling
    code (``modeling_*.py``), none of it matches :data:`_ROTARY_CODE` or builds another
    family's model (:data:`_BUILDS_OTHER_MODEL`), and every sub-config of their config
    class, as the class builds it by default, is of such a type too (a composite of parts
    that rotate nothing; one that fails to build, or leaves a sub-config unset, is not
    counted). A package of several model types counts for each of them."""
    from transformers import PretrainedConfig

    classes = config_classes()
    by_package: dict[str, bool] = {}  # (several model types share a package)
    plain: dict[str, bool] = {}
    for model_type, cls in classes.items():
        package = cls.__module__.rsplit(".", 1)[0]
        if package not in by_package:
            files = Path(importlib.import_module(package).__file__).parent.glob("modeling_*.py")
            sources = [f.read_text(encoding="utf-8") for f in files]
            by_package[package] = bool(sources) and not any(
                _ROTARY_CODE.search(src) or _BUILDS_OTHER_MODEL.search(src) for src in sources
            )
        plain[model_type] = by_package[package]
    done: dict[str, bool] = {}

    def rotates_nothing(model_type: str) -> bool:
        if model_type not in done:
            done[model_type] = False  # (a cycle counts as not shown)
            cls = classes.get(model_type)
            ok = cls is not None and plain[model_type]
            keys = getattr(cls, "sub_configs", None) or {}
            if ok and keys:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        config = cls()
                    except Exception:
                        config = None
                subs = [getattr(config, key, None) for key in keys]
                ok = config is not None and all(
                    isinstance(sub, PretrainedConfig) and rotates_nothing(sub.model_type)
                    for sub in subs
                )
            done[model_type] = ok
        return done[model_type]

    return {t for t in classes if rotates_nothing(t)}


def generic_model_types(families, rows, stacked) -> set[str]:
    """The model types of the config classes of the walked rotary classes (and of their
    text_config, which fastpe reads where the top level has no head size), and of the
    sub-configs of those named in ``stacked`` (compared stack by stack: the keys given,
    None: every one), that have no row
    in ``families`` or ``rows``: those test_rotary_class compares with the generic reading."""
    from transformers import PretrainedConfig

    kinds = set()
    for rc in _all():
        if rc.config_cls is None:
            continue
        kinds.add(getattr(rc.config_cls, "model_type", ""))
        text = getattr(default_config(rc), "text_config", None)
        if isinstance(text, PretrainedConfig):  # (read in its text_config: Emu3's)
            kinds.add(text.model_type)
        if rc.name in stacked:
            keys = stacked[rc.name]
            for key, sub in vars(default_config(rc)).items():
                if isinstance(sub, PretrainedConfig) and (keys is None or key in keys):
                    kinds.add(sub.model_type)
    return {k for k in kinds if k and k not in families and k not in rows}


def wrapper_text_types() -> dict[str, str | None]:
    """Per wrapper config class (a ``text_config`` sub-config), the ``model_type`` its
    class gives a ``text_config`` that names none (None: the class fails on it)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    out: dict[str, str | None] = {}
    for model_type, cls in sorted(config_classes().items()):
        if "text_config" not in (getattr(cls, "sub_configs", None) or {}):
            continue
        if model_type in CONFIG_MAPPING and CONFIG_MAPPING[model_type] is not cls:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                config = cls(text_config={"num_hidden_layers": 2})
            except KeyError as exc:
                if "model_type" in str(exc):
                    out[model_type] = None
                continue
            except Exception:
                continue
        text = getattr(config, "text_config", None)
        kind = getattr(text, "model_type", None)
        if kind:
            out[model_type] = kind
    return out


def layer_counts() -> dict[str, int]:
    """Per config class that holds ``layer_types`` (a field, or a list its default instance
    holds) or derives ``num_hidden_layers`` (a property), its default
    ``num_hidden_layers``: the count transformers' validate_layer_type holds a given
    ``layer_types`` to where the config leaves the key out."""
    out: dict[str, int] = {}
    for model_type, cls in sorted(config_classes().items()):
        fields = getattr(cls, "__dataclass_fields__", {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                config = cls()
            except Exception:
                continue
        held = getattr(config, "layer_types", None)
        count = getattr(cls, "num_hidden_layers", None)
        derived = isinstance(count, property) and _sets_layer_count(cls)
        if "layer_types" not in fields and not isinstance(held, list) and not derived:
            continue  # (LongCat-Flash's count, a property, is kept: it checks a given list)
        n = getattr(config, "num_hidden_layers", None)
        if isinstance(n, int) and not isinstance(n, bool):
            out[model_type] = n
    return out


def _sets_layer_count(cls) -> bool:
    """Whether the class takes a num_hidden_layers (its property has a setter that works)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return cls(num_hidden_layers=4).num_hidden_layers == 4
        except Exception:
            return False


#: flat text keys, each with a value no text config class defaults to
FLAT_PROBES: dict[str, Any] = {
    "rope_theta": 1234.5,
    "head_dim": 40,
    "hidden_size": 520,
    "max_position_embeddings": 4321,
}


def flat_text_wrappers() -> set[str]:
    """The wrappers (``wrapper_text_types``) whose config class, given no ``text_config``,
    builds it from the top-level keys: one built from a flat probe key
    (``FLAT_PROBES``) whose text config holds the value given."""
    classes = config_classes()
    out: set[str] = set()
    for model_type, inner in wrapper_text_types().items():
        if inner is None:
            continue
        for key, value in FLAT_PROBES.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    text = classes[model_type](**{key: value}).text_config.to_dict()
                except Exception:
                    continue
            rope = text.get("rope_parameters")
            held = rope.get(key) if key == "rope_theta" and isinstance(rope, dict) else None
            if text.get(key) == value or held == value:
                out.add(model_type)
                break
    return out


def layer_count_keys(types) -> tuple[dict[str, int], dict[str, str]]:
    """Per config class of the model types ``types`` whose layers one key counts: its
    default ``num_hidden_layers``, and, where its ``attribute_map`` sends that name to
    another key (``n_layer``, ``depth``), that key. Left out: classes without an int default
    (wrappers: their text config counts), classes that hold a given count otherwise or
    fail on it (HRM, LongCat-Flash, ...), and a count of one stack of two (Moonshine's
    ``decoder_num_hidden_layers``: a layer may be of either stack). fastpe counts the
    layers of those it reads by ``fastpe._hf_families._STACK_LAYER_KEYS``."""
    classes = config_classes()
    defaults: dict[str, int] = {}
    aliases: dict[str, str] = {}
    for model_type in sorted(set(types) & set(classes)):
        cls = classes[model_type]
        key = (getattr(cls, "attribute_map", None) or {}).get("num_hidden_layers")
        if key is not None and key.startswith("decoder_"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                n = cls().num_hidden_layers
                held = [cls(**{key or "num_hidden_layers": k}).num_hidden_layers for k in (3, 5)]
            except Exception:
                continue
        if not isinstance(n, int) or isinstance(n, bool) or held != [3, 5]:
            continue
        defaults[model_type] = n
        if key is not None:
            aliases[model_type] = key
    return defaults, aliases
