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
interleaved pairs, Llama the half split. A config without ``model_type``, with a
``model_type`` of transformers 5.24 that the tests check against the generic reading
(``fastpe._hf_model_types._GENERIC_TYPES``), or with one unknown to transformers 5.24 (a
newer family), is read the generic way (``transformers``' common keys, ``rotate_half``)
provided it holds no RoPE-related key that the generic reading does not understand; such a
key (``rotary_pct``, ``qk_rope_head_dim``, ``mrope_section``, ...) is refused by name. Any
other ``model_type`` of transformers 5.24 without a row is refused, naming why (no RoPE, or
RoPE in another form): the 264 whose model rotates nothing anywhere
(``fastpe._hf_model_types._NO_ROTARY_TYPES``: BERT, T5, ViT, Whisper, ...) as having no
RoPE.

Errors follow one rule: ``TypeError`` for a value of the wrong type, ``ValueError`` for a
value of the right type that is not allowed; messages name the key, the value and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._hf_axes import (
    AXIAL_HW,
    VISION_TOWERS,
    axial_kwargs,
    mrope_pair_axes,
    read_mrope,
    without_mrope,
)
from ._hf_families import (
    _ALIAS_KEYS,
    _ALLOWED_LAYER_TYPES,
    _ALLOWED_MLP_LAYER_TYPES,
    _BLOCKS,
    _CLASS_DEFAULTS,
    _FAMILIES,
    _GENERIC,
    _GENERIC_READS,
    _GIVEN_DEFAULTS,
    _HARMLESS,
    _HRM_LAYER_DEFAULTS,
    _IGNORES_PARTIAL,
    _IGNORES_PARTIAL_BY_TYPE,
    _LAYER_COUNT_RULES,
    _LAYER_TYPES,
    _LAYER_TYPES_REFUSED,
    _LEGACY_LAYER_TYPES,
    _LEGACY_NAMES_REFUSED,
    _MULTI_AXIS,
    _NO_ROPE_LAYERS,
    _OWN_LAYER_TYPE_NAMES,
    _PARTIAL_FAILS,
    _REFUSED_LAYER_KEYS,
    _ROPE_GATES,
    _ROPE_KEY,
    _STACK_LAYER_KEYS,
    _TEXT_MODEL_TYPES,
    _UNREAD,
    _UNREAD_DEFAULT,
    _UNREAD_NO_ROTARY,
    _VISION,
    _Blocks,
    _Family,
    _LayerTypes,
    _NoRopeLayers,
    _RopeGate,
)
from ._hf_model_types import (
    _DEFAULT_LAYERS,
    _FLAT_TEXT_WRAPPERS,
    _GENERIC_TYPES,
    _LAYER_COUNT_ALIASES,
    _LAYER_COUNTS,
    _NO_ROTARY_TYPES,
    _TRANSFORMERS_TYPES,
)
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


def _check_config(config: object) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping (a parsed config.json, or config.to_dict()), got "
            f"{type(config).__name__}"
        )
    return config


# the top-level keys of a text model's config that fastpe reads (named where a wrapper's
# config class ignores them)
_TEXT_KEYS = (
    "head_dim",
    "hidden_size",
    "num_attention_heads",
    "n_embd",
    "d_model",
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "partial_rotary_factor",
    "rotary_pct",
    "rotary_dim",
    "max_position_embeddings",
    "num_hidden_layers",
    "layer_types",
    "sliding_window",
)


def _text_part(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The dict to read: ``config["text_config"]`` for a multimodal wrapper, else ``config``.

    A wrapper (Gemma 3, Llava, ...) keeps the language model's keys in ``text_config``. A
    wrapper of transformers 5.24 (``_TEXT_MODEL_TYPES``) builds its text model from
    ``text_config`` alone: a top-level text key (``_TEXT_KEYS``) whose value differs from
    ``text_config``'s is refused (the class ignores it). Without ``text_config``, only the
    wrappers of ``_FLAT_TEXT_WRAPPERS`` (Qwen2-VL, ...) build it from the top-level keys
    (read as given); the others build it from the text class's defaults, and are refused.
    A config unknown as a wrapper reads ``text_config`` when the top level has no head size
    of its own. A wrapper whose family is refused is refused before its text part is looked
    at. A text part without ``model_type`` takes the one its wrapper's config class gives it
    (Llava's Llama, Aya Vision's Cohere 2, Llama 4's Llama 4 text, ...).
    """
    text = config.get("text_config")
    model_type = config.get("model_type")
    wrapper = isinstance(model_type, str) and model_type in _TEXT_MODEL_TYPES
    if wrapper and not isinstance(text, Mapping):
        if model_type in _FLAT_TEXT_WRAPPERS:
            return config
        family, _ = _family(config)
        if family.refuse is not None:
            raise ValueError(f"model_type {model_type!r} is not supported: {family.refuse}")
        flat = [k for k in _TEXT_KEYS if config.get(k) is not None]
        ignored = (
            f"; its config class ignores the top-level {', '.join(map(repr, flat))}: move "
            "them into text_config"
            if flat
            else ""
        )
        raise ValueError(
            f"model_type {model_type!r} keeps the text model's settings in text_config, "
            f"which this config lacks{ignored} (without it the class builds the text model "
            "from its defaults, which fastpe does not reproduce; tower='vision' reads the "
            "vision tower)"
        )
    if isinstance(text, Mapping) and (
        wrapper
        or not any(
            config.get(key) is not None
            for key in ("head_dim", "hidden_size", "num_attention_heads", "n_embd", "d_model")
        )
    ):
        family, _ = _family(config)
        if family.refuse is not None:
            raise ValueError(f"model_type {model_type!r} is not supported: {family.refuse}")
        if wrapper:
            differ = [
                k for k in _TEXT_KEYS if config.get(k) is not None and config[k] != text.get(k)
            ]
            if differ:
                raise ValueError(
                    f"model_type {model_type!r} builds its text model from text_config "
                    f"alone; its config class ignores the top-level "
                    f"{', '.join(map(repr, differ))}, which differ from text_config's: drop "
                    "them, or move them into text_config"
                )
        if text.get("model_type") is None and model_type in _TEXT_MODEL_TYPES:
            inner = _TEXT_MODEL_TYPES[model_type]
            if inner is None:
                raise ValueError(
                    f"config['text_config'] has no model_type, on which model_type "
                    f"{model_type!r}'s config class fails; set it to the text model's"
                )
            return {**text, "model_type": inner}
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
    if (
        model_type is not None
        and model_type not in _FAMILIES
        and model_type not in _ROPE_GATES  # (a row of its own: which layers rotate)
        and model_type in _TRANSFORMERS_TYPES
        and model_type not in _GENERIC_TYPES
    ):
        why = _UNREAD.get(model_type)
        if why is None:
            why = _UNREAD_NO_ROTARY if model_type in _NO_ROTARY_TYPES else _UNREAD_DEFAULT
        raise ValueError(f"{what} is not read: {why}")
    _refuse_unknown_keys(config, family, what)
    if family.hardcoded:
        _refuse_ignored_keys(config, what)
    if family.dicts_ignored:
        _refuse_ignored_dicts(config, what)
    if model_type in _PARTIAL_FAILS:
        _refuse_failing_partial(config, what, _PARTIAL_FAILS[model_type])
    if model_type in _IGNORES_PARTIAL:
        _refuse_partial_factor(config, what)
    dropped = sorted(
        k
        for k in family.dropped
        if config.get(k) is not None
        # (a rope_scaling equal to rope_parameters reads the same: saved both ways)
        and not (k == "rope_scaling" and config[k] == config.get("rope_parameters"))
    )
    if dropped:
        raise ValueError(
            f"{what}: its config class drops the top-level {', '.join(map(repr, dropped))} "
            "(transformers never reads it for this family); fastpe refuses rather than "
            "rotate otherwise than the model: drop the key(s), or give the values in "
            "config['rope_parameters']"
        )
    flat = sorted(
        k
        for k, (own, default) in family.flat_ignored
        if config.get(k) is not None and config.get(k) != config.get(own, default)
    )
    if flat:
        raise ValueError(
            f"{what}: its config class does not read a top-level {', '.join(map(repr, flat))} "
            "(transformers builds its rope parameters from the family's own keys and ignores "
            "these), and the value differs from those keys'; fastpe refuses rather than "
            "rotate otherwise than the model: drop them, or give the values in the family's "
            "own keys or in config['rope_parameters']"
        )
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if isinstance(rope, Mapping):
            inner = [rope, *(v for v in rope.values() if isinstance(v, Mapping))]
            for part in inner:
                if family.mrope is not None:
                    continue  # read by fastpe._hf_axes
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


# config classes that build their rope as another's does (the same conversion, the same
# rotary class), read with that one's rows of the measured tables: T5Gemma 2's decoder
# config (reached only through its parent, which the tables' walk of rotary classes does
# not build) as its text config
_TABLE_ALIASES = {"t5gemma2_decoder": "t5gemma2_text"}


def _table_type(config: Mapping[str, Any]) -> str:
    """The ``model_type`` whose rows of the measured tables apply to ``config``."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        return ""
    return _TABLE_ALIASES.get(model_type, model_type)


def _refuse_partial_factor(config: Mapping[str, Any], what: str) -> None:
    """A family whose default rotary code rotates the whole head (:data:`_IGNORES_PARTIAL`):
    refuse a partial rotary factor other than 1 where the rope type is ``default`` (the
    scaled types' frequencies read the factor in transformers too), at the top level or in
    a rope dict (one per layer type included). (The families split by layer type are
    checked per layer type, :data:`_IGNORES_PARTIAL_BY_TYPE`, once the layer's dict is
    read.)"""
    parts: list[Mapping[str, Any]] = []
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if isinstance(rope, Mapping):
            nested = [v for v in rope.values() if isinstance(v, Mapping)]
            parts += nested if nested else [rope]
    if not parts:  # no rope dict: the class's default dict applies (llama3 in Apertus, ...)
        default = _CLASS_DEFAULTS.get(_table_type(config), {}).get("rope_parameters")
        parts = [default] if isinstance(default, Mapping) else []
    kinds = {p.get("rope_type", p.get("type", "default")) for p in parts}
    top = config.get("partial_rotary_factor")
    for part in parts or [{}]:
        kind = part.get("rope_type", part.get("type"))
        if kind is None:  # a dict without a type beside one that has it: that one's
            kind = next(iter(kinds - {"default"}), "default")
        factor = part.get("partial_rotary_factor", top)
        if kind == "default" and factor is not None and factor != 1:
            raise ValueError(
                f"{what}: its default rotary code rotates the whole head, and transformers "
                f"ignores partial_rotary_factor={factor!r} there; fastpe refuses rather than "
                "rotate a part (drop the key)"
            )


def _refuse_ignored_keys(config: Mapping[str, Any], what: str) -> None:
    """A family whose rotary code hard-codes base 10000 and no scaling: refuse the keys
    transformers ignores there wherever they would change the rotation."""
    ignored = []
    theta = config.get("rope_theta")
    if theta is not None and theta != 10000:
        ignored.append(f"rope_theta={theta!r}")
    factor = config.get("partial_rotary_factor")
    if factor is not None and factor != 1:
        ignored.append(f"partial_rotary_factor={factor!r}")
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if rope is None:
            continue
        kind = (
            rope.get("rope_type", rope.get("type", "default"))
            if isinstance(rope, Mapping)
            else rope
        )
        inner_theta = rope.get("rope_theta") if isinstance(rope, Mapping) else None
        inner_factor = rope.get("partial_rotary_factor") if isinstance(rope, Mapping) else None
        if (
            kind != "default"
            or (inner_theta is not None and inner_theta != 10000)
            or (inner_factor is not None and inner_factor != 1)
        ):
            ignored.append(f"{holder}={rope!r}")
    if ignored:
        raise ValueError(
            f"{what}: its rotary code hard-codes base 10000, no scaling and the channels of "
            f"rotary_dim, and transformers ignores {', '.join(ignored)}; fastpe refuses "
            "rather than rotate otherwise than the model (drop the key(s))"
        )


def _refuse_failing_partial(config: Mapping[str, Any], what: str, why: str) -> None:
    """A family whose model fails on a partial rotary factor (:data:`_PARTIAL_FAILS`):
    refuse one other than 1, at the top level or in a rope dict (one per layer type
    included)."""
    factors = [config.get("partial_rotary_factor")]
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if isinstance(rope, Mapping):
            inner = [v for v in rope.values() if isinstance(v, Mapping)] or [rope]
            factors += [d.get("partial_rotary_factor") for d in inner]
    partial = [f for f in factors if f is not None and f != 1]
    if partial:
        raise ValueError(
            f"{what}: partial_rotary_factor={partial[0]!r}, but {why}; fastpe refuses it "
            "(drop the key, or give 1)"
        )


def _refuse_ignored_dicts(config: Mapping[str, Any], what: str) -> None:
    """A family whose rotary code reads the top-level ``rope_theta`` alone (ESM): refuse a
    rope dict that would change the rotation (a rope type other than the default, another
    theta, a partial factor), which transformers ignores there."""
    top = config.get("rope_theta")
    theta = 10000.0 if top is None else top
    ignored = []
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if rope is None:
            continue
        if not isinstance(rope, Mapping):
            ignored.append(f"{holder}={rope!r}")
            continue
        kind = rope.get("rope_type", rope.get("type", "default"))
        inner_theta = rope.get("rope_theta")
        inner_factor = rope.get("partial_rotary_factor")
        if (
            kind not in ("default", None)
            or (inner_theta is not None and inner_theta != theta)
            or (inner_factor is not None and inner_factor != 1)
            or any(isinstance(v, Mapping) for v in rope.values())
        ):
            ignored.append(f"{holder}={rope!r}")
    if ignored:
        raise ValueError(
            f"{what}: its rotary code reads the top-level rope_theta alone (no rope type, "
            f"no scaling, the whole head), and transformers ignores {', '.join(ignored)}; "
            "fastpe refuses rather than rotate otherwise than the model (drop the key(s), "
            "or give the theta as config['rope_theta'])"
        )


def _refuse_unknown_keys(config: Mapping[str, Any], family: _Family, what: str) -> None:
    gate = _ROPE_GATES.get(str(config.get("model_type")))
    gate_keys = gate.keys() if gate is not None else ()
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
        and key not in gate_keys
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
    defaults = _CLASS_DEFAULTS.get(_table_type(config))
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
    # (a family with labelled rope dicts builds them from its flat keys and their class
    # defaults, as its config class does: see _labelled)
    if (
        defaults.get("nested")
        and not dicts
        and not family.rope_labels
        and family.split_by_type is None
    ):
        raise ValueError(
            f"model_type {config.get('model_type')!r}: the config gives no rope_parameters, "
            f"and transformers' default gives each layer type its own (a top-level theta "
            f"does not reach all of them); write them out (config.to_dict() of the loaded "
            f"config has them)"
        )
    filled = dict(config)
    # (a head size under the family's own key too: JetMoE's kv_channels, not where an alias
    # of it is given: _ALIAS_KEYS, the class sets the alias over its default)
    aliased = {f for a, f in _ALIAS_KEYS.get(str(config.get("model_type")), ()) if a in config}
    sizes = ("head_dim", "rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim")
    for key in dict.fromkeys((*sizes, *family.head_dim_keys)):
        if key in defaults and key not in config and key not in aliased:
            filled[key] = defaults[key]
    if dicts:
        return filled  # the class's default rope dict and its values do not apply
    # without a rope dict, the class's default dict wins over these top-level keys
    generic = {"rope_theta": 10000.0, "partial_rotary_factor": 1.0}
    for key in defaults.get("top_ignored", ()):
        value, kept = config.get(key), defaults.get(key, generic[key])
        if value is not None and value != kept:
            raise ValueError(
                f"model_type {config.get('model_type')!r}: without a rope dict, the config "
                f"class keeps its default rope dict, whose {key} is {kept!r}, and transformers "
                f"ignores config[{key!r}] = {value!r}; give the value in "
                f"config['rope_parameters'] (with the rope type), or drop the key"
            )
    if "rope_theta" in defaults and not theta_given:
        filled["rope_theta"] = defaults["rope_theta"]
    if "partial_rotary_factor" in defaults and not partial_given:
        filled["partial_rotary_factor"] = defaults["partial_rotary_factor"]
    if "rope_parameters" in defaults:
        filled["rope_parameters"] = dict(defaults["rope_parameters"])
    return filled


def _with_derived_partial(config: Mapping[str, Any], family: _Family) -> Mapping[str, Any]:
    """``config`` with the partial rotary factor its config class derives where none is
    given (Mistral 4: qk_rope_head_dim / (qk_nope_head_dim + qk_rope_head_dim), each its
    class default where left out), before the tables' fixed defaults fill one in. The class
    puts it in its rope_parameters (given or default), not in a legacy rope_scaling."""
    scaling = config.get("rope_scaling")
    if isinstance(scaling, Mapping) and scaling:
        return config
    dicts = [d for d in (config.get("rope_parameters"), config.get("rope_scaling")) if d]
    parts = [p for d in dicts if isinstance(d, Mapping) for p in (d, *d.values())]
    if any(config.get(k) is not None for k in family.partial_keys) or any(
        isinstance(p, Mapping) and p.get("partial_rotary_factor") is not None for p in parts
    ):
        return config
    defaults = _CLASS_DEFAULTS.get(_table_type(config), {})
    sizes = {k: config.get(k, defaults.get(k)) for k in family.head_dim_sum}
    rope_key = family.checked_rotary_keys[0]
    if any(v is None for v in sizes.values()):
        return config  # (a null size is refused where the head size is read)
    for k, v in sizes.items():
        _check_count(v, f"config[{k!r}]")
    return {**config, family.partial_keys[0]: sizes[rope_key] / sum(sizes.values())}


def _with_given_defaults(config: Mapping[str, Any], family: _Family) -> Mapping[str, Any]:
    """``config`` with what its config class and rotary code put in the rope dict it gives
    (:data:`_GIVEN_DEFAULTS`): a ``rope_theta`` or ``partial_rotary_factor`` the dict and
    the top level leave out, and, per layer type, the theta such a dict takes beside a
    top-level ``rope_theta`` that transformers does not apply to it; raises where
    transformers states none (its code then fails, or turns a part it does not state)."""
    table = _GIVEN_DEFAULTS.get(_table_type(config))
    if not table:
        return config
    scaling = config.get("rope_scaling")
    holder = "rope_scaling" if isinstance(scaling, Mapping) and scaling else "rope_parameters"
    rope, fill = config.get(holder), table.get(holder, {})
    if not isinstance(rope, Mapping) or not rope or not fill:
        return config
    nested = _is_nested(rope)
    if nested != all(isinstance(v, Mapping) for v in fill.values()):
        if not nested and rope.get("rope_theta") is None:
            # a flat dict for a family split by layer type: its config class completes a
            # copy per layer type, each its own way
            raise ValueError(
                f"model_type {config.get('model_type')!r}: config[{holder!r}] is one flat "
                "dict without rope_theta, which this family's config class completes per "
                "layer type (each its own theta); give one dict per layer type, or "
                "rope_theta in the dict"
            )
        return config
    theta_key, top_theta = _first(config, family.theta_keys)
    top_partial = any(config.get(k) is not None for k in family.partial_keys)
    parts = dict(rope) if nested else {None: rope}
    for layer_type, part in parts.items():
        if not isinstance(part, Mapping):
            continue
        values = (fill.get(str(layer_type)) if nested else fill) or {}
        missing: dict[str, Any] = {}
        if part.get("rope_theta") is None:
            if top_theta is None and "rope_theta" in values:
                missing["rope_theta"] = values["rope_theta"]
            elif top_theta is not None and nested:
                # transformers puts the top-level theta in each layer type's dict, or (a
                # layer type listed "beside top") a theta of its own; a scaled type's
                # frequency function completes its dict from the config's rope_theta
                # (standardize_rope_params) where the table has none (measured on the
                # default type)
                theta = values.get("rope_theta_beside_top", top_theta)
                scaled = _resolve_rope_type(part) != "default"
                missing["rope_theta"] = top_theta if theta is None and scaled else theta
        if (
            part.get("partial_rotary_factor") is None
            and not top_partial
            and "partial_rotary_factor" in values
        ):
            missing["partial_rotary_factor"] = values["partial_rotary_factor"]
        unknown = sorted(k for k, v in missing.items() if v is None)
        if unknown:
            where = f"config[{holder!r}]" + ("" if layer_type is None else f"[{layer_type!r}]")
            raise ValueError(
                f"model_type {config.get('model_type')!r}: {where} leaves out "
                f"{', '.join(map(repr, unknown))}, and fastpe does not know what transformers "
                "uses there for this family (its config class states none for a dict of the "
                "default rope type, and its rotary code then fails or turns a part of each "
                "head it does not state); add the value(s) the model was trained with"
            )
        if missing:
            parts[layer_type] = {**part, **missing}
    filled = {**config, holder: parts if nested else parts[None]}
    if nested and top_theta is not None:
        # each layer type's dict now holds the theta transformers gives it
        filled.pop(theta_key, None)
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


# what a per_layer_config entry may set in a family whose RoPE ignores it (head counts)
_HEAD_COUNT_KEYS = frozenset({"num_attention_heads", "num_key_value_heads"})


def _per_layer_config(
    config: Mapping[str, Any], family: _Family, layer: int | None
) -> tuple[Any, str | None]:
    """``(per_layer_config, how)``: the config's, or, where it leaves the key out (Gemma 4
    and its kin, :attr:`_LayerTypes.full_head_dim`), the head sizes its config class gives
    the full-attention layers, ``how`` then saying so (None for the config's own). As the
    class holds it: an entry equal to the top-level head size is no entry."""
    if "per_layer_config" not in family.reads:
        return None, None
    rule = _LAYER_TYPES.get(str(config.get("model_type")))
    if "per_layer_config" in config or rule is None or rule.full_head_dim is None:
        return config.get("per_layer_config"), None
    key, default = rule.full_head_dim
    value = config.get(key, default)
    where = f"config[{key!r}]" if key in config else f"the class default of {key!r}"
    if value is None:
        raise ValueError(
            f"config[{key!r}] is null: where the config leaves out per_layer_config, model_type "
            f"{config.get('model_type')!r}'s config class gives its full-attention layers "
            f"that head size; set it, or give per_layer_config"
        )
    head = _check_count(value, f"config[{key!r}]")
    how = (
        f"where the config leaves out per_layer_config, model_type "
        f"{config.get('model_type')!r}'s config class gives its full-attention layers the "
        f"head size {head} ({where})"
    )
    if head == config.get("head_dim"):
        return {}, how
    types = _layer_types(config, layer)
    return {i: {"head_dim": head} for i, t in enumerate(types) if t == rule.full}, how


def _head_dim(config: Mapping[str, Any], family: _Family, layer: int | None) -> int:
    nulls = [k for k in family.null_refused if k in config and config[k] is None]
    if nulls:
        raise ValueError(
            f"config[{nulls[0]!r}] is null, on which model_type {config.get('model_type')!r}'s "
            f"config class or model fails (transformers 5.24 requires an integer there; "
            f"fastpe does not derive it from hidden_size // num_attention_heads); set it, or "
            f"leave it out for the class default"
        )
    per_layer, derived = _per_layer_config(config, family, layer)
    if per_layer and family.per_layer_global:
        entries = per_layer.items() if isinstance(per_layer, Mapping) else enumerate(per_layer)
        for index, entry in entries:
            keys = (
                sorted(k for k in entry if isinstance(k, str) and _ROPE_KEY.search(k))
                if isinstance(entry, Mapping)
                else None
            )
            if keys is None or keys:
                raise ValueError(
                    f"config['per_layer_config'][{index!r}] sets {keys or entry!r}: model_type "
                    f"{config.get('model_type')!r}'s code reads these from the top-level config "
                    "(one rotary class, each attention built from the whole config), and "
                    "transformers 5.24's model fails on a per-layer value; fastpe refuses "
                    "rather than guess which the checkpoint is sized for"
                )
        per_layer = None  # (other keys: RoPE is the top level's)
    if per_layer and family.per_layer_heads_only:
        entries = per_layer.items() if isinstance(per_layer, Mapping) else enumerate(per_layer)
        for index, entry in entries:
            extra = sorted(set(entry) - _HEAD_COUNT_KEYS) if isinstance(entry, Mapping) else None
            if extra is None or extra:
                raise ValueError(
                    f"config['per_layer_config'][{index!r}] sets {extra or entry!r}: this "
                    "family's code builds its RoPE from the top-level config and ignores "
                    "per-layer values other than head counts; fastpe does not guess which "
                    "the checkpoint expects"
                )
        per_layer = None  # head counts alone: RoPE is sized by the top-level head size
    if per_layer:
        if layer is None:
            why = derived or "config['per_layer_config'] gives some layers their own head size"
            raise ValueError(
                f"{why}; pass layer=i (the layer's index) to read the head size of layer i"
            )
        entry = _layer_entry(per_layer, layer, "per_layer_config")
        if isinstance(entry, Mapping) and entry.get("head_dim") is not None:
            if derived:
                return int(entry["head_dim"])
            return _check_count(
                entry["head_dim"], f"config['per_layer_config'][{layer}]['head_dim']"
            )
    key, head_dim = _first(config, family.head_dim_keys)
    if head_dim is None and family.head_dim_sum:
        key = " + ".join(family.head_dim_sum)
        head_dim = sum(_check_count(config.get(k), f"config[{k!r}]") for k in family.head_dim_sum)
    if head_dim is not None and not family.class_head_dim:
        size = _check_count(head_dim, f"config[{key!r}]" if key in config else key)
        for other in family.same_size_keys:
            value = config.get(other)
            if value is None and other in config:
                # the class keeps the null, and its rotary class sizes itself by
                # hidden_size // num_attention_heads (DeepSeek-V3's getattr(...) or ...)
                hidden, heads = (
                    _first(config, family.hidden_size_keys)[1],
                    _first(config, family.num_heads_keys)[1],
                )
                ok = isinstance(hidden, int) and isinstance(heads, int) and heads > 0
                if not ok or hidden // heads != size:
                    raise ValueError(
                        f"config[{other!r}] is null, so model_type "
                        f"{config.get('model_type')!r}'s rotary class is sized by "
                        f"hidden_size // num_attention_heads ({hidden!r} // {heads!r}), but "
                        f"{key} = {size}: transformers 5.24's model fails where they differ; "
                        "make them agree"
                    )
                continue
            if value is not None and value != size:
                raise ValueError(
                    f"config[{other!r}] = {config[other]!r} (given, or its class default), but "
                    f"{key} = {size}: model_type {config.get('model_type')!r}'s code sizes the "
                    f"rotation by both (transformers 5.24's model fails where they differ); "
                    f"fastpe does not guess which the checkpoint is sized for: make them agree"
                )
        return size
    size_key, hidden_size = _first(config, family.hidden_size_keys)
    heads_key, num_heads = _first(config, family.num_heads_keys)
    if hidden_size is None or num_heads is None:
        if family.class_head_dim:
            raise ValueError(
                f"config needs {size_key!r} and {heads_key!r}: model_type "
                f"{config.get('model_type')!r}'s config class derives the head size from "
                "them (a given head_dim is overwritten); add them"
            )
        head = f"{key!r}, or " if key else ""
        raise ValueError(
            f"config needs {head}{size_key!r} and {heads_key!r} to derive the head size; "
            f"add the model's head size as config[{(key or 'head_dim')!r}]"
        )
    num_heads = _check_count(num_heads, f"config[{heads_key!r}]")
    for other in family.same_heads_keys:
        if config.get(other) is None:
            raise ValueError(
                f"config needs {other!r} beside {heads_key!r}: this family's code sizes the "
                "RoPE of both stacks by one head count, and fastpe reads the config only "
                "where the two agree"
            )
        if _check_count(config[other], f"config[{other!r}]") != num_heads:
            raise ValueError(
                f"config[{other!r}] = {config[other]!r} differs from config[{heads_key!r}] = "
                f"{num_heads!r}: this family's code sizes both stacks by one head count (it "
                f"writes {other!r} over {heads_key!r} while building the model), so one "
                "stack's heads are not rotated with their own head size; fastpe does not "
                "guess which the checkpoint expects"
            )
    from_sizes = (
        family.head_dim_factor * _check_count(hidden_size, f"config[{size_key!r}]") // num_heads
    )
    if head_dim is not None and _check_count(head_dim, f"config[{key!r}]") != from_sizes:
        raise ValueError(
            f"config[{key!r}] = {head_dim!r}, but model_type {config.get('model_type')!r}'s "
            f"config class overwrites it with {size_key} // {heads_key} = {from_sizes} (it "
            "ignores a given head_dim): fastpe does not guess which the checkpoint's weights "
            f"are sized for; drop {key!r} or set it to {from_sizes}"
        )
    return from_sizes


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
        (``per_layer_config``). A layer without attention in a hybrid family (Qwen3-Next's
        and OLMo-hybrid's linear attention, LFM2's and LFM3's convolutions, Bamba's and
        GraniteMoeHybrid's Mamba layers, ...) has no head size: refused (ValueError), where
        :func:`rope_kwargs_from_config` returns None for it; so is, without ``layer``, a
        hybrid model none of whose layers has attention.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``config`` is not a mapping or a size is not an integer (``128.0`` is not).
    ValueError
        If the head size cannot be derived, a size is not > 0, the family is refused (see
        :func:`rope_kwargs_from_config`), its config class refuses the config's layer
        types, or layer ``layer`` has no attention (the message names its type as the
        config class holds it), or lies past the model's last layer, or, without
        ``layer``, no layer has attention.

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
    _refuse_block_keys(config)
    _check_given_layer_types(config)
    if layer is not None:
        layer = _check_layer(layer)
    _check_layer_in_model(config, layer)
    config = _with_class_defaults(config, family)
    rule = _LAYER_TYPES.get(str(config.get("model_type")))
    if rule is not None and rule.check is not None:
        _layer_types(config, layer)  # (its class refuses some layer types, whatever layer)
    gate = _ROPE_GATES.get(str(config.get("model_type")))
    if gate is not None:
        _refuse_unbuilt_types(config, gate)
    if layer is not None:
        why = _attention_free(config, layer)
        if why is not None:
            blocks = _BLOCKS.get(str(config.get("model_type")))
            first = None if blocks is None else _first_attending(config, blocks)
            if first is not None:  # (refused first where the config is, as a whole)
                head_dim_from_config(config, layer=first)
            raise ValueError(
                f"layer={layer} has no attention, so no head size: {why}; "
                "rope_kwargs_from_config reads such a layer as None (nothing to rotate)"
            )
    else:
        blocks = _BLOCKS.get(str(config.get("model_type")))
        if blocks is not None and _no_attention_anywhere(config, blocks):
            raise ValueError(
                f"no layer of this model has attention, so no head size (model_type "
                f"{config.get('model_type')!r}: {blocks.what}, and the config's layer types "
                "hold none of the others); rope_kwargs_from_config reads it as None "
                "(nothing to rotate)"
            )
    if family.rope_labels:
        return _labelled(config, family, None, layer, size_only=True)[0]
    return _head_dim(config, family, layer)


def _labelled(
    config: Mapping[str, Any],
    family: _Family,
    layer_type: str | None,
    layer: int | None,
    *,
    size_only: bool = False,
) -> tuple[int, dict[str, Any]]:
    """``(rope dim, config of that rope slice)`` for a family whose rope dicts are keyed by
    labels (DeepSeek-V4: ``"main"`` for sliding-window layers, ``"compress"`` for the others).

    The dicts are built as the family's config class builds them: from a nested
    ``rope_parameters`` (as transformers 5 saves it), or from the flat keys of a published
    config (``rope_theta`` for ``"main"``; ``compress_rope_theta`` and the ``rope_scaling``
    or flat ``rope_parameters`` for ``"compress"``, a YaRN there with attention factor 1
    unless set). The head's rope slice is ``int(head_dim * partial_rotary_factor)``
    channels (``qk_rope_head_dim / head_dim`` in a published config), the trailing ones of
    each head; the returned config describes that slice alone, as a head of its own.
    ``size_only``: without a layer, the labels need agree only on the slice's size.
    """
    labels = {label for _, label in family.rope_labels}
    of_type = dict(family.rope_labels)
    head_key, head = _first(config, family.head_dim_keys)
    if head is None:
        raise ValueError(f"config needs {head_key!r}, the head size, to size the rope slice")
    head_dim = _check_count(head, f"config[{head_key!r}]")
    partial = config.get("partial_rotary_factor")
    if partial is None and config.get("qk_rope_head_dim") is not None:
        partial = _check_count(config["qk_rope_head_dim"], "config['qk_rope_head_dim']") / head_dim
    tops = {label: (key, config.get(key), default) for label, key, default in family.label_thetas}
    rope = config.get("rope_parameters")
    if rope is None:
        rope = config.get("rope_scaling")
    elif config.get("rope_scaling") is not None and config["rope_scaling"] != rope:
        raise ValueError(
            "config['rope_parameters'] and config['rope_scaling'] disagree; keep only one"
        )
    if rope is not None and not isinstance(rope, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {rope!r}")
    dicts: dict[str, dict[str, Any]] = {}
    if rope is not None and _is_nested(rope):
        if set(rope) != labels:
            raise ValueError(
                f"config['rope_parameters'] holds {sorted(rope)!r}; this family's has one "
                f"dict per label, {sorted(labels)!r}"
            )
        for label in sorted(labels):
            entry = rope[label]
            if not isinstance(entry, Mapping):
                raise ValueError(f"config['rope_parameters'][{label!r}] must be a dict")
            dicts[label] = dict(entry)
            # transformers completes each labelled dict from the top-level rope_theta (the
            # class's, 10000, when absent) and reads no other top-level theta here
            key, top, _ = tops[label]
            inner = entry.get("rope_theta")
            if top is not None and inner is not None and top != inner:
                raise ValueError(
                    f"config[{key!r}] ({top!r}) and config['rope_parameters'][{label!r}]"
                    f"['rope_theta'] ({inner!r}) disagree; keep only one"
                )
            if inner is None:  # (compress_rope_theta, which every saved config holds, is
                # not read for the nested dicts)
                theta = config.get("rope_theta")
                if theta is None:
                    theta = next(d for _, k, d in family.label_thetas if k == "rope_theta")
                dicts[label]["rope_theta"] = theta
    else:  # the published form: flat keys, from which the config class builds the dicts
        flat = {k: v for k, v in (rope or {}).items() if k not in ("rope_theta", "type")}
        kind = _resolve_rope_type(rope or {})
        flat["rope_type"] = kind
        if kind == "yarn":
            flat.setdefault("attention_factor", 1.0)
        main_label, compress_label = "main", "compress"
        for label in (main_label, compress_label):
            key, top, default = tops[label]
            theta = default if top is None else top
            if label == main_label:
                dicts[label] = {"rope_type": "default", "rope_theta": theta}
            else:
                dicts[label] = {**flat, "rope_theta": theta}
    for label, entry in dicts.items():
        inner = entry.pop("partial_rotary_factor", None)
        if inner is not None and partial is not None and inner != partial:
            raise ValueError(
                f"config['partial_rotary_factor'] ({partial!r}) and config['rope_parameters']"
                f"[{label!r}]['partial_rotary_factor'] ({inner!r}) disagree; keep only one"
            )
        entry["_partial"] = partial if inner is None else inner
        if _resolve_rope_type(entry) == "yarn" and "truncate" in entry:
            # transformers reads truncate from the outer (labelled) dict: it truncates
            if entry["truncate"] is None:
                entry["truncate"] = True
            elif entry["truncate"] is not True:
                raise ValueError(
                    f"the rope dict of label {label!r} sets truncate={entry['truncate']!r}, "
                    "which transformers does not apply to a labelled rope dict (it reads "
                    "truncate from the outer dict, so it truncates); drop the key"
                )
    # the layer's label
    chosen = None
    if layer_type is not None:
        chosen = layer_type if layer_type in labels else of_type.get(layer_type)
        if chosen is None:
            raise ValueError(
                f"layer_type {layer_type!r} is neither a rope label ({sorted(labels)!r}) nor "
                f"a layer type of this family ({sorted(of_type)!r})"
            )
    if layer is not None:
        derived = _layer_entry(_layer_types(config, layer), layer, "layer_types")
        where = _layer_type_where(config, layer, derived)
        if derived not in of_type:
            raise ValueError(
                f"{where} {derived!r}, not a layer type of this family ({sorted(of_type)!r})"
            )
        if chosen is not None and chosen != of_type[derived]:
            raise ValueError(
                f"layer_type={layer_type!r} (rope {chosen!r}) but {where} {derived!r} (rope "
                f"{of_type[derived]!r}); pass one of them"
            )
        chosen = of_type[derived]
    if chosen is None:
        first = dicts[min(labels)]
        differ = [lab for lab in labels if dicts[lab] != first]
        if size_only:
            differ = [lab for lab in labels if dicts[lab]["_partial"] != first["_partial"]]
        if differ:
            raise ValueError(
                f"config gives {' and '.join(repr(lab) for lab in sorted(labels))} layers "
                f"their own RoPE; pass layer_type={min(labels)!r} (or another label, or a "
                f"layer type such as {family.rope_labels[0][0]!r}), or layer=i"
            )
        chosen = min(labels)
    entry = dict(dicts[chosen])
    part_factor = entry.pop("_partial")
    if part_factor is None:
        raise ValueError(
            "config needs 'partial_rotary_factor' (or 'qk_rope_head_dim') to size the rope "
            "slice of each head"
        )
    rope_dim = int(head_dim * _check_real(part_factor, "the partial rotary factor"))
    if rope_dim <= 0 or rope_dim % 2:
        raise ValueError(
            f"the rope slice int({head_dim} * {part_factor!r}) = {rope_dim} must be a "
            f"positive even number"
        )
    part = {
        "model_type": "_deepseek_v4_rope",
        "head_dim": rope_dim,
        "rope_parameters": entry,
        "max_position_embeddings": config.get("max_position_embeddings"),
    }
    return rope_dim, part


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


# Families whose config class has a top-level original_max_position_embeddings (with this
# default) that transformers' standardisation writes over the rope dict's (llama3, yarn and
# longrope types): transformers 5.24's Phi-3 and Phi-4-multimodal.
_TOP_ORIGINAL = {"phi3": 4096, "phi4_multimodal": 4096}


def _merge_rope_dicts(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any] | None:
    """The config's rope dict: ``rope_parameters`` and/or ``rope_scaling`` (must agree).

    None when the dict of ``layer_type`` is null: a layer type without RoPE.
    """
    merged: dict[str, Any] = {}
    picked: dict[str, Mapping[str, Any]] = {}
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
            if isinstance(value, Mapping) and _legacy_type(value) is not None:
                # the per-layer-type form is transformers 5's, which names rope_type; some
                # config classes preset rope_type "default" there and ignore a legacy type
                raise ValueError(
                    f"config[{name!r}][{layer_type!r}] names its rope type by the legacy "
                    f"'type' ({value['type']!r}), which not every config class applies in a "
                    "dict per layer type; write 'rope_type'"
                )
        elif layer_type is not None:
            raise ValueError(
                f"layer_type={layer_type!r} was given but config[{name!r}] is not split by "
                f"layer type; drop layer_type"
            )
        picked[name] = value
        for key, item in value.items():
            if key in merged and merged[key] != item:
                raise ValueError(
                    f"config['rope_parameters'][{key!r}] ({merged[key]!r}) and "
                    f"config['rope_scaling'][{key!r}] ({item!r}) disagree; keep only one"
                )
            merged[key] = item
    params, scaling = picked.get("rope_parameters"), picked.get("rope_scaling")
    if params and scaling:
        kinds = [d.get("rope_type", d.get("type")) for d in (params, scaling)]
        if None not in kinds and kinds[0] != kinds[1]:
            # one dict's legacy "type" against the other's "rope_type" (the merge above
            # compares keys of the same name)
            raise ValueError(
                f"config['rope_parameters'] has rope type {kinds[0]!r} and "
                f"config['rope_scaling'] {kinds[1]!r}: with both dicts given, transformers "
                "reads rope_scaling alone; keep only one dict"
            )
        # transformers keeps `rope_scaling or rope_parameters` (modeling_rope_utils'
        # standardisation): with both given, the keys of rope_parameters alone are ignored
        # (the legacy "type" is "rope_type" there)
        held = set(scaling) | (
            {"rope_type", "type"} if {"rope_type", "type"} & set(scaling) else set()
        )
        # (a value equal to the top-level key of the same name is what transformers then
        # reads: late configs save rope_theta both ways)
        alone = sorted(
            k
            for k, v in params.items()
            if v is not None
            and k not in held
            and not (k in _CONFIG_LEVEL_KEYS and config.get(k) == v)
        )
        if alone:
            raise ValueError(
                f"config['rope_parameters'] holds {', '.join(map(repr, alone))}, which "
                "config['rope_scaling'] does not: with both dicts given, transformers reads "
                "rope_scaling alone and ignores rope_parameters; keep only one dict"
            )
    return merged


def _config_value(
    config: Mapping[str, Any], rope: Mapping[str, Any], keys: tuple[str, ...], default: Any
) -> tuple[str, Any]:
    """``(key, value)`` from the top level of ``config`` or from its rope dict (must agree).

    The rope dict is searched under the key found and under the first of ``keys``, the
    dict's own name (GPT-NeoX's top-level ``rotary_emb_base`` beside a rope dict's
    ``rope_theta``: transformers takes the dict's; it reads no ``rotary_emb_base`` there).
    """
    key, top = _first(config, keys)
    inner_key = next((k for k in (key, keys[0]) if rope.get(k) is not None), key)
    inner = rope.get(inner_key)
    if top is not None and inner is not None and top != inner:
        raise ValueError(
            f"config[{key!r}] ({top!r}) and the rope dict's {inner_key!r} ({inner!r}) disagree; "
            f"keep only one"
        )
    if inner is not None:
        return key, inner
    return key, (default if top is None else top)


def _layer_count(config: Mapping[str, Any], default: int, ask: str) -> tuple[int, str]:
    """``(num_hidden_layers, how it was found)``: the config's, else the class default."""
    if "num_hidden_layers" not in config:
        return default, f"the config leaves out num_hidden_layers, whose class default is {default}"
    n = config["num_hidden_layers"]
    if n is None:
        raise ValueError(
            f"config['num_hidden_layers'] is null: model_type {config.get('model_type')!r}'s "
            "config class needs it to derive per-layer values (its default applies only "
            f"where the key is left out); set it, or {ask}"
        )
    n = _check_int(n, "config['num_hidden_layers']")
    return n, f"config['num_hidden_layers'] is {n}"


def _held_layer_count(config: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(num_hidden_layers as the config class holds it, how a message names it)``: the
    config's (LongCat-Flash's rounded down to even; else the key the class's
    ``attribute_map`` names, GPT-J's ``n_layer``), else the class default
    (``_LAYER_COUNTS``, ``_DEFAULT_LAYERS``; LongCat-Flash's: twice ``num_layers``); None
    where fastpe does not know it (a null value, a model type in neither table)."""
    model_type = config.get("model_type")
    rule = _LAYER_COUNT_RULES.get(model_type) if isinstance(model_type, str) else None
    if "num_hidden_layers" in config:
        if config["num_hidden_layers"] is None:
            return None
        n = _check_int(config["num_hidden_layers"], "config['num_hidden_layers']")
        count = f"config['num_hidden_layers'] is {n}"
        if rule == "doubled" and n % 2:
            count += (
                f", which model_type {model_type!r}'s config class holds as {n - 1} (twice "
                "num_layers, which it sets to half of it)"
            )
            n -= 1
        return n, count
    if rule == "doubled" and config.get("num_layers") is not None:
        k = _check_int(config["num_layers"], "config['num_layers']")
        return 2 * k, (
            f"the config leaves out num_hidden_layers, which model_type {model_type!r}'s config "
            f"class holds as twice config['num_layers'] ({k}): {2 * k}"
        )
    alias = _LAYER_COUNT_ALIASES.get(model_type) if isinstance(model_type, str) else None
    if alias is not None and alias in config:  # (GPT-J's n_layer, a vision tower's depth)
        if config[alias] is None:
            return None
        n = _check_int(config[alias], f"config[{alias!r}]")
        return n, f"config[{alias!r}] is {n}"
    default = _LAYER_COUNTS.get(model_type) if isinstance(model_type, str) else None
    if default is None and isinstance(model_type, str):
        default = _DEFAULT_LAYERS.get(model_type)
    if default is None:
        return None
    key = alias or "num_hidden_layers"
    return default, f"the config leaves out {key}, whose class default is {default}"


def _check_layer_count(config: Mapping[str, Any]) -> int | None:
    """Refuses a given ``layer_types`` (GraniteMoeHybrid's ``layers_block_type``, which its
    class holds over it) whose length its config class refuses beside ``num_hidden_layers``
    (transformers' ``validate_layer_type``; the families that hold such a list otherwise:
    ``_LAYER_COUNT_RULES``), whether or not fastpe reads the list. Returns the number of
    layers the class holds (None where fastpe does not know it, or no list is given)."""
    model_type = config.get("model_type")
    blocks = _BLOCKS.get(model_type) if isinstance(model_type, str) else None
    key, given = _first(config, (blocks.keys if blocks is not None else ()) or ("layer_types",))
    if not isinstance(given, (list, tuple)):
        return None  # (none given, or not a list: refused where read)
    held = _held_layer_count(config)
    if held is None:
        return None
    n, count = held
    rule = _LAYER_COUNT_RULES.get(str(model_type))
    entries = len(given)
    if rule == "any":
        return entries
    # (the block that marks such a list: the family's _LAYER_TYPES row, which reads it so)
    block = _LAYER_TYPES[str(model_type)].halve_on if rule == "pairs" else None
    if block is not None and block in given:
        entries, n = len(given[::2]), n // 2
        count += (
            f"; the class pairs the entries of a list that holds {block!r} (each layer's "
            f"attention block, then its {block} block) into {entries} layers and halves "
            f"num_hidden_layers to {n}"
        )
    if entries == n or (rule == "trims" and entries > n):
        return n
    if rule == "mtp":
        k = config.get("num_nextn_predict_layers")
        k = 0 if k is None else _check_int(k, "config['num_nextn_predict_layers']")
        if k and entries == n + k:
            return n  # (the trailing multi-token-prediction entries, split off)
    entries_of = f"{len(given)} {'entry' if len(given) == 1 else 'entries'}"
    raise ValueError(
        f"config[{key!r}] has {entries_of}, but {count}: the config class of model_type "
        f"{model_type!r} refuses a list of layer types whose length is not the number of "
        "layers; give one entry per layer"
    )


def _renamed(types: Any) -> list[Any]:
    """A given list of layer types as transformers 5.24's classes hold it: the legacy
    names renamed (``_LEGACY_LAYER_TYPES``: GraniteMoeHybrid's ``"attention"``, ...)."""
    return [_LEGACY_LAYER_TYPES.get(t, t) if isinstance(t, str) else t for t in types]


def _check_given_layer_types(config: Mapping[str, Any]) -> None:
    """Refuses a given ``layer_types`` (GraniteMoeHybrid's ``layers_block_type``) or
    ``mlp_layer_types`` that its config class refuses (transformers' ``validate_layer_type``),
    whether or not fastpe reads it: a length that is not the number of layers
    (:func:`_check_layer_count`), and for a model type of transformers 5.24, a name outside
    its list or its legacy names (``_ALLOWED_LAYER_TYPES``; ``_OWN_LAYER_TYPE_NAMES`` check
    theirs their own way) and, where the class holds layer types, an ``mlp_layer_types``
    entry other than ``"sparse"`` or ``"dense"``, or one entry more or less than the
    layers."""
    model_type = config.get("model_type")
    # (no config class of transformers 5.24: its names are not guessed)
    known = isinstance(model_type, str) and model_type in _TRANSFORMERS_TYPES
    blocks = _BLOCKS.get(model_type) if isinstance(model_type, str) else None
    key, given = _first(config, (blocks.keys if blocks is not None else ()) or ("layer_types",))
    if known and isinstance(given, (list, tuple)) and model_type not in _OWN_LAYER_TYPE_NAMES:
        refused = _LEGACY_NAMES_REFUSED.get(str(model_type), ())
        legacy = [name for name in _LEGACY_LAYER_TYPES if name not in refused]
        for i, name in enumerate(given):
            if name not in _ALLOWED_LAYER_TYPES and name not in legacy:
                renames = (
                    f" (and the legacy names {', '.join(map(repr, legacy))}, which it renames)"
                    if legacy
                    else " (its class checks them before it renames the legacy names)"
                )
                raise ValueError(
                    f"config[{key!r}][{i}] is {name!r}, which the config class of "
                    f"model_type {model_type!r} refuses: transformers 5.24 takes the layer "
                    f"types {', '.join(map(repr, _ALLOWED_LAYER_TYPES))}{renames}"
                )
    _check_layer_count(config)
    mlp = config.get("mlp_layer_types")
    if not known or mlp is None or model_type in _OWN_LAYER_TYPE_NAMES:
        return  # (DeepSeek-V4's own check takes "hash_moe" entries and a longer list)
    if given is None and model_type not in _LAYER_COUNTS:
        return  # (transformers checks mlp_layer_types only beside layer types it holds)
    if not isinstance(mlp, (list, tuple)):
        raise TypeError(
            f"config['mlp_layer_types'] must be a list, one entry per layer, got {mlp!r} of "
            f"type {type(mlp).__name__}"
        )
    for i, name in enumerate(mlp):
        if name not in _ALLOWED_MLP_LAYER_TYPES:
            raise ValueError(
                f"config['mlp_layer_types'][{i}] is {name!r}, which the config class of "
                f"model_type {model_type!r} refuses: transformers 5.24 takes "
                f"{', '.join(map(repr, _ALLOWED_MLP_LAYER_TYPES))}"
            )
    held = _held_layer_count(config)
    if held is not None and len(mlp) != held[0]:
        raise ValueError(
            f"config['mlp_layer_types'] has {len(mlp)} entries, but {held[1]}: the config "
            f"class of model_type {model_type!r} refuses an mlp_layer_types whose length is "
            "not the number of layers; give one entry per layer"
        )


def _check_layer_in_model(config: Mapping[str, Any], layer: int | None) -> None:
    """Refuses ``layer`` past the model's last layer as :func:`_held_layer_count` counts
    them, for the model types whose config class counts its layers under one key
    (``_DEFAULT_LAYERS``: ``num_hidden_layers``, or the key its ``attribute_map`` names)
    and the other classes that hold layer types (``_LAYER_COUNTS``: LongCat-Flash's twice
    ``num_layers``, Zamba2's); and, for the first, a null count, whatever the layer."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        return
    if model_type in _STACK_LAYER_KEYS or model_type == "hrm_text":
        n, count = _hrm_layers(config) if model_type == "hrm_text" else _stack_layers(config)
        _out_of_range(layer, n, count)
        return
    if model_type in _DEFAULT_LAYERS:
        alias = _LAYER_COUNT_ALIASES.get(model_type)
        # (both given: the class sets num_hidden_layers last, through its attribute_map)
        key = next((k for k in ("num_hidden_layers", alias) if k and k in config), None)
        if key is not None and config[key] is None:
            raise ValueError(
                f"config[{key!r}] is null: fastpe needs model_type {model_type!r}'s number "
                "of layers (transformers' config classes refuse a null one under their own "
                "key, all but DBRX's); set it, or leave the key out for the class default "
                f"({_DEFAULT_LAYERS[model_type]})"
            )
    elif model_type not in _LAYER_COUNTS:
        return
    held = _held_layer_count(config) if layer is not None else None
    if held is None:
        return
    n, count = held
    if layer is not None and layer >= n:
        rule = _LAYER_TYPES.get(model_type)
        if rule is not None and rule.check is not None:
            _layer_types(config, None)  # (its class refuses some layer types: named first)
    _out_of_range(layer, n, count)


# layer types whose layers have no attention (a legacy "mamba" comes renamed)
_NO_ATTENTION_TYPES = ("conv", "linear_attention")


def _check_layer_type_asked(
    config: Mapping[str, Any], labels: bool, layer: int | None, layer_type: str | None
) -> None:
    """Refuses, for a config of a transformers 5.24 model type, a ``layer_type=`` outside
    transformers' layer types and their legacy names (a family's rope labels,
    DeepSeek-V4's, are checked where they are read), and, where the config gives
    ``layer_types`` as a list that its class holds as given, a type it does not hold or,
    with ``layer=i``, another type than entry ``i`` (legacy names compared renamed, as the
    class holds them). A type of layers without attention (``"conv"``,
    ``"linear_attention"`` or its legacy ``"mamba"``), asked by ``layer_type=`` or as the
    given list's entry ``layer``, is refused for a family whose layers without attention
    fastpe does not read (Llama, Falcon-H1, Zamba2, whose Mamba layers sit in
    ``layers_block_type``, and Bailing-hybrid and Qwen4-Exp, whose classes derive
    linear-attention layers: the one rope dict would be read for a layer that has nothing
    to rotate); the hybrid families fastpe reads (``_BLOCKS``, ``_ROPE_GATES``, ...) check
    the type where they read it."""
    model_type = config.get("model_type")
    given = config.get("layer_types")
    unread = model_type in _TRANSFORMERS_TYPES and not any(
        model_type in known
        for known in (_BLOCKS, _ROPE_GATES, _LAYER_TYPES, _LAYER_COUNT_RULES, _OWN_LAYER_TYPE_NAMES)
    )
    if (
        unread
        and not labels
        and layer_type is None
        and layer is not None
        and isinstance(given, (list, tuple))
        and layer < len(given)
        and _LEGACY_LAYER_TYPES.get(given[layer], given[layer]) in _NO_ATTENTION_TYPES
    ):
        raise ValueError(
            f"config['layer_types'][{layer}] is {given[layer]!r}, a layer without attention, "
            "which fastpe reads only for the hybrid families it transcribes, not for "
            f"model_type {model_type!r}: it cannot tell whether that layer has RoPE"
        )
    if layer_type is None or labels or model_type not in _TRANSFORMERS_TYPES:
        return  # (without a config class of transformers 5.24, the rope dicts name them)
    asked = _LEGACY_LAYER_TYPES.get(layer_type, layer_type)
    if asked not in _ALLOWED_LAYER_TYPES:
        raise ValueError(
            f"layer_type={layer_type!r} is not a layer type transformers 5.24 knows "
            f"({', '.join(map(repr, _ALLOWED_LAYER_TYPES))}, and the legacy names "
            f"{', '.join(map(repr, _LEGACY_LAYER_TYPES))})"
        )
    if asked in _NO_ATTENTION_TYPES and unread:
        raise ValueError(
            f"layer_type={layer_type!r} names layers without attention, which fastpe reads "
            "only for the hybrid families it transcribes, not for model_type "
            f"{model_type!r}: it cannot tell whether such a layer has RoPE; drop layer_type "
            "to read the layers with attention"
        )
    if (
        not isinstance(given, (list, tuple))
        or model_type in _BLOCKS
        or model_type in _LAYER_COUNT_RULES
        or model_type in _LAYER_TYPES
    ):
        return  # (no list, or one the family's own reading holds otherwise: checked there)
    held = _renamed(given)
    if layer is not None and layer < len(held) and held[layer] != asked:
        raise ValueError(
            f"layer_type={layer_type!r} but config['layer_types'][{layer}] is "
            f"{given[layer]!r}; pass one of them"
        )
    if asked not in held:
        raise ValueError(
            f"layer_type={layer_type!r}, but config['layer_types'] holds no such layer "
            f"({', '.join(map(repr, dict.fromkeys(given)))})"
        )


def _given_count(config: Mapping[str, Any], keys: tuple[str, ...], default: int) -> tuple[int, str]:
    """``(count, how a message names it)`` under the first of ``keys`` the config gives,
    else the class default; a null one refused (the config classes refuse it)."""
    model_type = config.get("model_type")
    key = next((k for k in keys if k in config), None)
    if key is None:
        return default, f"the config leaves out {keys[-1]}, whose class default is {default}"
    if config[key] is None:
        raise ValueError(
            f"config[{key!r}] is null: model_type {model_type!r}'s config class refuses a "
            f"null count; set it, or leave the key out for the class default ({default})"
        )
    n = _check_int(config[key], f"config[{key!r}]")
    return n, f"config[{key!r}] is {n}"


def _stack_layers(config: Mapping[str, Any]) -> tuple[int, str]:
    """``(layers, how a message names them)`` of a model type of ``_STACK_LAYER_KEYS``: the
    largest count of its stacks (a layer of any one of them)."""
    counts = [_given_count(config, keys, d) for keys, d in _STACK_LAYER_KEYS[config["model_type"]]]
    n = max(c[0] for c in counts)
    said = "; ".join(c[1] for c in counts)
    return n, said if len(counts) == 1 else f"{said}: a layer of either stack"


def _hrm_layers(config: Mapping[str, Any]) -> tuple[int, str]:
    """``(layers, how a message names them)`` of HRM as its config class holds them: a given
    ``num_layers_per_stack`` keeps ``num_hidden_layers`` as given; without it (or null) the
    class takes ``num_hidden_layers`` as each stack's layers and holds ``num_hidden_layers *
    H_cycles * (L_cycles + 1)``, one per attention call of its recurrent forward (the layer
    index its cache uses)."""
    got = {k: _given_count(config, (k,), d) for k, d in _HRM_LAYER_DEFAULTS.items()}
    n, said = got["num_hidden_layers"]
    if config.get("num_layers_per_stack") is not None:
        return n, said
    h, l_cycles = got["H_cycles"][0], got["L_cycles"][0]
    total = n * h * (l_cycles + 1)
    return total, (
        f"{said}, which HRM's config class (num_layers_per_stack not given) holds as "
        f"num_hidden_layers * H_cycles * (L_cycles + 1) = {n} * {h} * ({l_cycles} + 1) = {total}"
    )


def _out_of_range(layer: int | None, n: int, count: str) -> None:
    if layer is not None and layer >= n:
        span = f" (layers 0 to {n - 1})" if n > 0 else ""
        raise ValueError(f"layer={layer} is out of range: {count}{span}")


def _layer_types(config: Mapping[str, Any], layer: int | None) -> list[Any]:
    """``layer_types`` as the config's class holds them (transformers 5.24): the given list
    (with what the class writes over it: Gemma 4's last layer full, Dory's two blocks per
    layer), or, where the config gives none, the class's derivation (``_LAYER_TYPES``:
    Gemma 3 from ``sliding_window_pattern``, ModernBERT from ``global_attn_every_n_layers``,
    ...), with ``layer`` (None: every layer is read) checked against
    ``num_hidden_layers``. Refused for the other families, naming the key to add."""
    model_type = config.get("model_type")
    rule = _LAYER_TYPES.get(model_type) if isinstance(model_type, str) else None
    asked = f"layer={layer} was given" if layer is not None else "every layer is read"
    given = config.get("layer_types")
    if given is not None:
        if not isinstance(given, (list, tuple)):
            raise TypeError(
                f"config['layer_types'] must be a list, one layer type per layer, got "
                f"{given!r} of type {type(given).__name__}"
            )
        if not given and (rule is None or rule.check is None):
            raise ValueError(
                f"{asked}, but config['layer_types'] is empty; add the layer types as "
                "config.to_dict() of the loaded config gives them"
            )
        held = _check_layer_count(config)
        types = _renamed(given)
        if rule is not None and rule.halve_on is not None and rule.halve_on in types:
            types = types[::2]  # (attention, mlp) blocks listed one by one: one layer each
            if layer is not None and layer >= len(types):
                n = config.get("num_hidden_layers")
                halved = (
                    f", and halves config['num_hidden_layers'] ({n}) likewise"
                    if isinstance(n, int) and not isinstance(n, bool)
                    else ""
                )
                raise ValueError(
                    f"layer={layer} is out of range: the config class of model_type "
                    f"{model_type!r} holds {len(types)} layers (layers 0 to {len(types) - 1}): "
                    "it pairs the "
                    f"{len(given)} entries of config['layer_types'] (each layer's attention "
                    f"block, then its {rule.halve_on!r} block) into one layer each{halved}"
                )
        if held is not None:
            types = types[:held]  # (DeepSeek-V4, Step3p5's legacy lists: the class cuts them)
        if rule is not None and rule.forced:
            types[-1] = rule.full
        _check_layer_types(config, rule, types, "config['layer_types'] is")
        return types
    ask = (
        "pass layer_type=... alone, or add layer_types as config.to_dict() of the loaded "
        "config gives them"
    )
    if rule is None:
        why = _LAYER_TYPES_REFUSED.get(str(model_type)) or (
            "fastpe derives them only for the families whose config class's derivation it "
            f"transcribes (fastpe._hf_families._LAYER_TYPES), not for {model_type!r}"
            if model_type is not None
            else "a config without model_type has no config class to derive them"
        )
        raise ValueError(
            f"{asked}, but the config has no layer_types to find the layers' types (its "
            f"rope differs by layer type): {why}; {ask}"
        )
    n, count = _layer_count(config, rule.layers, ask)
    if rule.check is None:
        _out_of_range(layer, n, count)
    types = rule.types(config, n)
    if len(types) != n:
        raise ValueError(
            f"model_type {model_type!r}: the layer types derived from the config's keys "
            f"are {len(types)}, but {count}; transformers refuses such a config"
        )
    _check_layer_types(
        config, rule, types, f"the layer types its config class derives ({count}) are"
    )
    _out_of_range(layer, n, count)  # (after the class's check, which refuses any layer)
    return types


def _check_layer_types(
    config: Mapping[str, Any], rule: _LayerTypes | None, types: list[Any], held: str
) -> None:
    """Refuses the layer types ``types`` (``held`` says where from) where the family's
    config class refuses them (:attr:`_LayerTypes.check`), whatever layer is asked."""
    why = rule.check(types) if rule is not None and rule.check is not None else None
    if why is not None:
        shown = repr(types[:8])[:-1] + (", ...]" if len(types) > 8 else "]")
        raise ValueError(
            f"model_type {config.get('model_type')!r}: {held} {shown}, which its config "
            f"class refuses: {why}"
        )


def _layer_type_where(config: Mapping[str, Any], layer: int, derived: Any) -> str:
    """How an error names layer ``layer``'s type ``derived``: the entry of the given
    ``layer_types`` where it holds that value at that index, else the type as the config
    class holds it (derived, or the given list rewritten: Gemma 4's last layer, Dory's
    blocks), so that a message never shows a value the config does not contain."""
    given = config.get("layer_types")
    if given is None:
        return f"layer {layer}'s type, as its config class derives layer_types, is"
    if isinstance(given, (list, tuple)) and layer < len(given) and given[layer] == derived:
        return f"config['layer_types'][{layer}] is"
    return f"layer {layer}'s type, as its config class rewrites config['layer_types'], is"


def _layer_type_of(config: Mapping[str, Any], layer: int, layer_type: str | None) -> str | None:
    derived = _layer_entry(_layer_types(config, layer), layer, "layer_types")
    if layer_type is not None and derived != layer_type:
        where = _layer_type_where(config, layer, derived)
        raise ValueError(f"layer_type={layer_type!r} but {where} {derived!r}; pass one of them")
    return derived


def _gate_window(config: Mapping[str, Any], gate: _RopeGate) -> int | None:
    """The sliding window a gate reads (its class default where the key is left out)."""
    assert gate.window is not None
    key, default = gate.window
    if key not in config:
        return default
    value = config[key]
    if value is None:
        if not gate.window_null:
            raise ValueError(
                f"config[{key!r}] is null, which model_type {config.get('model_type')!r}'s "
                "config class refuses (its attention reads the window to decide which "
                "layers rotate); set it"
            )
        return None
    return _check_int(value, f"config[{key!r}]")


def _null_theta(config: Mapping[str, Any]) -> bool:
    """Whether the rope theta transformers keeps is null: the one in ``rope_scaling``
    where that is a dict given (transformers reads it first), else in ``rope_parameters``,
    else a top-level ``rope_theta`` (the class default, not null, where all leave it out)."""
    for holder in ("rope_scaling", "rope_parameters"):
        rope = config.get(holder)
        if isinstance(rope, Mapping) and rope:
            if "rope_theta" in rope:
                return rope["rope_theta"] is None
            break
    return "rope_theta" in config and config["rope_theta"] is None


def _gate_uniform(config: Mapping[str, Any], gate: _RopeGate) -> bool | None:
    """Whether every layer rotates (True), none does (False), or it depends on the layer."""
    if gate.never:
        return False
    if gate.requires is not None:
        key, default, wanted = gate.requires
        if config.get(key, default) != wanted:
            return False
    if gate.null_theta and _null_theta(config):
        return False
    if gate.window is not None and _gate_window(config, gate) is None:
        if gate.unset_all:
            if config.get("layer_types") is None and config.get("model_type") in _LAYER_TYPES:
                # the class derives the layer types even so, and may fail doing it
                # (EXAONE 4: a null window sets the pattern to 0): refused as it fails
                _layer_types(config, None)
            return True
        if gate.dense is None:
            return False
    if gate.rotating is None and gate.dense is None:
        return True
    return None


def _gate_layer(config: Mapping[str, Any], gate: _RopeGate, layer_type: Any, dense: bool) -> bool:
    """Whether a layer of ``layer_type`` rotates (``dense``: its mlp type is "dense"),
    where :func:`_gate_uniform` leaves it to the layer."""
    window = gate.window is None or _gate_window(config, gate) is not None
    if (gate.rotating is None or layer_type in gate.rotating) and window:
        return True
    if gate.dense is not None and dense:
        key, default = gate.dense
        value = config.get(key, default)
        if value is None:
            raise ValueError(
                f"config[{key!r}] is null, which model_type {config.get('model_type')!r}'s "
                "config class refuses; set it"
            )
        return _check_int(value, f"config[{key!r}]") == 1
    return False


def _gate_type(gate: _RopeGate, layer_type: Any, where: str) -> None:
    """Refuses a layer type the family does not have (``where`` names the value)."""
    if gate.types and layer_type not in gate.types:
        raise ValueError(
            f"{where}, not a layer type of this family ({', '.join(map(repr, gate.types))})"
        )


def _dense_layers(config: Mapping[str, Any], gate: _RopeGate, n: int) -> list[bool]:
    if gate.dense is None or gate.mlp_types is None:
        return [False] * n
    mlp = gate.mlp_types(config, n)
    if len(mlp) < n:
        raise ValueError(
            f"config['mlp_layer_types'] has {len(mlp)} entries for {n} layers; transformers "
            "fails on it"
        )
    return [kind == "dense" for kind in mlp[:n]]


def _rope_gate(
    config: Mapping[str, Any], gate: _RopeGate, layer: int | None, layer_type: str | None
) -> bool:
    """Whether the layer asked for rotates, by its family's rule (``_ROPE_GATES``): layer
    ``i``; else every layer of ``layer_type``, or every layer, where they agree (a
    ValueError asks for ``layer=`` where they do not)."""
    what = f"model_type {config.get('model_type')!r}: {gate.what}"
    keys = ", ".join(f"config[{k!r}]" for k in gate.keys())
    rule = _LAYER_TYPES.get(str(config.get("model_type")))
    if rule is not None and rule.check is not None:
        _layer_types(config, layer)  # (its class refuses some layer types: checked first)
    _refuse_unbuilt_types(config, gate)
    if gate.window_positive:
        _refuse_bad_window(config, gate)
    if layer is not None and gate.types:
        layer_type = _layer_type_of(config, layer, layer_type)
        where = _layer_type_where(config, layer, layer_type)
        _gate_type(gate, layer_type, f"{where} {layer_type!r}")
        uniform = _gate_uniform(config, gate)
        if uniform is not None:
            return uniform
        n = len(_layer_types(config, layer))
        return _gate_layer(config, gate, layer_type, _dense_layers(config, gate, n)[layer])
    if layer_type is not None:
        _gate_type(gate, layer_type, f"layer_type={layer_type!r} is given")
    uniform = _gate_uniform(config, gate)
    if uniform is not None:
        return uniform
    if layer_type is not None and _gate_layer(config, gate, layer_type, False):
        return True  # (a dense layer rotates too)
    types = _layer_types(config, None)
    dense = _dense_layers(config, gate, len(types))
    answers = {
        i: _gate_layer(config, gate, t, d)
        for i, (t, d) in enumerate(zip(types, dense))
        if layer_type is None or t == layer_type
    }
    if len(set(answers.values())) <= 1:
        return next(iter(answers.values()), layer_type is None)
    still = [i for i, rotates in answers.items() if not rotates]
    shown = ", ".join(map(str, still[:8])) + (", ..." if len(still) > 8 else "")
    shown = f"layers {shown} do not" if len(still) > 1 else f"layer {shown} does not"
    of_type = f"its {layer_type} layers" if layer_type is not None else "its layers"
    ask = "" if layer_type is not None else " or layer_type=..."
    raise ValueError(
        f"{what} ({keys}), so {of_type} differ in whether they rotate ({shown}); pass "
        f"layer=i (the layer's index){ask} to read one"
    )


def _has_attention(
    config: Mapping[str, Any], blocks: _Blocks, layer: int | None, layer_type: str | None
) -> bool:
    """Whether the layer asked for (layer ``i``, else every layer of ``layer_type``) has
    attention in a hybrid family (``_BLOCKS``): its block type is not one without (a
    legacy ``layer_type`` comes renamed from :func:`rope_kwargs_from_config`)."""
    if layer is None:
        if layer_type is not None and layer_type not in blocks.types:
            raise ValueError(
                f"layer_type={layer_type!r} is given, not a layer type of this family "
                f"({', '.join(map(repr, blocks.types))})"
            )
        return layer_type not in blocks.no_attention
    kind, where = _block_kind(config, blocks, layer)
    if layer_type is not None and layer_type != kind:
        raise ValueError(f"layer_type={layer_type!r} but {where} {kind!r}; pass one of them")
    return kind not in blocks.no_attention


def _refuse_block_keys(config: Mapping[str, Any]) -> None:
    """Refuses a key that a family's config class fails on, whatever its value
    (:attr:`_Blocks.refused_keys`: Bamba's layer types, a property without a setter), or
    that fastpe does not read for that family (``_REFUSED_LAYER_KEYS``)."""
    model_type = str(config.get("model_type"))
    keys, null_too, why = _REFUSED_LAYER_KEYS.get(model_type, ((), False, ""))
    for key in keys:
        if key in config and (null_too or config[key] is not None):
            raise ValueError(
                f"model_type {model_type!r}: fastpe does not read config[{key!r}] (given "
                f"{config[key]!r}): {why}"
            )
    blocks = _BLOCKS.get(model_type)
    _refuse_alias_keys(config, blocks)
    if blocks is None:
        return
    for key in blocks.refused_keys:
        if key in config:
            raise ValueError(
                f"model_type {config.get('model_type')!r}: its config class fails on "
                f"config[{key!r}] (given {config[key]!r}): {blocks.refused_why}"
            )
    for key in blocks.null_keys:
        if key in config and config[key] is None:
            raise ValueError(
                f"config[{key!r}] is null: model_type {config.get('model_type')!r}'s config "
                "class then holds null layer types, and transformers fails building the "
                "model; drop the key, or give the layer types"
            )
    _, given = _first(config, blocks.keys)
    if blocks.all_types and isinstance(given, (list, tuple)):
        for i, kind in enumerate(_renamed(given)):
            if kind not in blocks.types:
                raise ValueError(
                    f"config[{blocks.keys[0]!r}][{i}] is {kind!r}: model_type {model_type!r}'s "
                    f"model builds a layer of a type other than "
                    f"{', '.join(map(repr, blocks.types))} without attention, whatever its "
                    "name says; fastpe does not guess which the checkpoint holds"
                )


def _refuse_alias_keys(config: Mapping[str, Any], blocks: _Blocks | None) -> None:
    """Refuses an alias and the field it names (``_ALIAS_KEYS``) both given and different:
    the config class keeps one of them (Zamba2's, the later in the dict). Zamba2's ``layer_types``
    is compared with the layer types its class derives where ``layers_block_type`` is left
    out (its hybrid layers come from them)."""
    model_type = str(config.get("model_type"))
    for alias, field in _ALIAS_KEYS.get(model_type, ()):
        value = config.get(alias)
        if value is None:
            continue  # (left out; an explicit null is refused with the field's own nulls)
        held = config.get(field)
        derived = False
        if held is None and blocks is not None and field in blocks.keys and blocks.rule:
            n, _ = _layer_count(config, blocks.layers, "give num_hidden_layers")
            held, derived = blocks.rule(config, n), True
        if held is None:
            continue  # (the alias alone: read as the field)
        if isinstance(held, (list, tuple)) and isinstance(value, (list, tuple)):
            same = _renamed(held) == _renamed(value)
        else:
            same = held == value
        if same:
            continue
        if derived:
            raise ValueError(
                f"config[{alias!r}] differs from the layer types model_type {model_type!r}'s "
                f"class derives where config[{field!r}] is left out: it takes {alias!r} as "
                f"another name of {field!r} only after it has built its attention layers "
                f"from those, so its model does not hold the layers the list names; give the "
                f"list as config[{field!r}]"
            )
        raise ValueError(
            f"config[{alias!r}] = {value!r} and config[{field!r}] = {held!r} are both given "
            f"and differ: model_type {model_type!r}'s config class takes {alias!r} as "
            f"another name of {field!r} and keeps one of them (Zamba2: the later in the "
            "dict); fastpe does not guess which the checkpoint is built with: give one"
        )


def _block_kinds(config: Mapping[str, Any], blocks: _Blocks) -> list | None:
    """The layer types of a hybrid model (``_BLOCKS``), renamed: given, or as its config
    class derives them over ``num_hidden_layers`` layers; None where they are not known
    (none derived, or not a list: refused where read)."""
    _, types = _first(config, blocks.keys)
    if types is None:
        if blocks.rule is None:
            return None
        n, _ = _layer_count(config, blocks.layers, "give num_hidden_layers")
        types = blocks.rule(config, n)
    if not isinstance(types, (list, tuple)):
        return None
    return _renamed(types)


def _no_attention_anywhere(config: Mapping[str, Any], blocks: _Blocks) -> bool:
    """Whether no layer of a hybrid model (``_BLOCKS``) has attention (False where its
    layer types are not known: :func:`_block_kinds`)."""
    kinds = _block_kinds(config, blocks)
    return kinds is not None and all(t in blocks.no_attention for t in kinds)


def _first_attending(config: Mapping[str, Any], blocks: _Blocks) -> int | None:
    """The first layer with attention of a hybrid model (``_BLOCKS``); None where none
    has, or its layer types are not known (:func:`_block_kinds`)."""
    kinds = _block_kinds(config, blocks)
    if kinds is None:
        return None
    return next((i for i, t in enumerate(kinds) if t not in blocks.no_attention), None)


def _refuse_unbuilt_types(config: Mapping[str, Any], gate: _RopeGate) -> None:
    """Refuses, whatever layer is asked, layer types the family's model fails on
    (:attr:`_RopeGate.all_types`: OLMo-hybrid builds no attention mask for another type)."""
    if not gate.all_types:
        return
    for i, kind in enumerate(_layer_types(config, None)):
        if kind not in gate.types:
            raise ValueError(
                f"{_layer_type_where(config, i, kind)} {kind!r}: model_type "
                f"{config.get('model_type')!r}'s config class takes it, but its model "
                f"fails on it (it knows the layer types {', '.join(map(repr, gate.types))} "
                "alone)"
            )


def _block_kind(config: Mapping[str, Any], blocks: _Blocks, layer: int) -> tuple[str, str]:
    """``(block type of layer i, how a message names it)`` in a hybrid family
    (``_BLOCKS``): given, or as its config class derives it; refuses a type the family's
    code does not know."""
    what = f"model_type {config.get('model_type')!r}: {blocks.what}"
    key, types = _first(config, blocks.keys)
    where = f"config[{key!r}][{layer}] is"
    if types is None:
        if blocks.rule is None:
            raise ValueError(
                f"layer={layer} was given, but the config has no "
                f"{' or '.join(blocks.keys)} to tell whether the layer has attention ({what}; "
                "its config class derives none, and transformers fails building the model "
                "without it); add it as config.to_dict() of the loaded config gives it"
            )
        n, count = _layer_count(config, blocks.layers, "give num_hidden_layers")
        _out_of_range(layer, n, count)
        types = blocks.rule(config, n)
        where = f"layer {layer}'s type, as its config class derives it, is"
    elif not isinstance(types, (list, tuple)):
        raise TypeError(f"config[{key!r}] must be a list, one type per layer, got {types!r}")
    given = _layer_entry(types, layer, key or "layer_types")
    kind = _LEGACY_LAYER_TYPES.get(given, given) if isinstance(given, str) else given
    if kind != given:
        where = (
            f"layer {layer}'s type, as its config class renames config[{key!r}][{layer}] "
            f"({given!r}), is"
        )
    if kind not in blocks.types:
        raise ValueError(
            f"{where} {kind!r}, not a layer type of this family "
            f"({', '.join(map(repr, blocks.types))}); fastpe does not guess how the model "
            "builds it"
        )
    return kind, where


def _attention_free(config: Mapping[str, Any], layer: int) -> str | None:
    """Why layer ``layer`` has no attention (a hybrid family's linear-attention, Mamba or
    convolution block: ``_BLOCKS``, :attr:`_RopeGate.no_attention`), else None."""
    model_type = str(config.get("model_type"))
    blocks = _BLOCKS.get(model_type)
    if blocks is not None:
        kind, where = _block_kind(config, blocks, layer)
        if kind in blocks.no_attention:
            return f"{where} {kind!r} (model_type {model_type!r}: {blocks.what})"
    gate = _ROPE_GATES.get(model_type)
    if gate is not None and gate.no_attention:
        of_type = _layer_type_of(config, layer, None)
        if of_type in gate.no_attention:
            return (
                f"{_layer_type_where(config, layer, of_type)} {of_type!r} (model_type "
                f"{model_type!r} builds its {of_type} layers without attention)"
            )
    return None


def _refuse_bad_window(config: Mapping[str, Any], gate: _RopeGate) -> None:
    """A family whose class refuses a null or non-positive sliding window where a layer
    slides (Kolibri1): refused as the class does."""
    assert gate.window is not None
    key, default = gate.window
    value = config.get(key, default)
    if value is not None and _check_int(value, f"config[{key!r}]") > 0:
        return
    if "sliding_attention" in _layer_types(config, None):
        raise ValueError(
            f"config[{key!r}] is {value!r}, which model_type {config.get('model_type')!r}'s "
            "config class refuses where a layer is sliding_attention (it needs a positive "
            "window); set it"
        )


def _uses_layer_type(config: Mapping[str, Any], family: _Family) -> bool:
    """Whether the config's RoPE differs by layer type."""
    if family.split_by_type is not None:
        return True
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if isinstance(value, Mapping) and _is_nested(value):
            return True
    return False


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


def _legacy_type(rope: Mapping[str, Any]) -> Any:
    """The rope type a dict names by the legacy ``type`` alone (None: it names it by
    ``rope_type``, or names none or ``default``)."""
    if rope.get("rope_type") is None and rope.get("type") not in (None, "default"):
        return rope["type"]
    return None


def _split_by_type(config: Mapping[str, Any], family: _Family) -> Mapping[str, Any]:
    """``config`` with the rope dicts per layer type that its config class builds
    (:attr:`_Family.split_by_type`: Gemma 3, OLMo 3, ModernBERT, ...), as transformers 5.24
    builds them: ``rope_parameters`` (one dict per layer type; a null entry gets the
    default dict), a flat ``rope_scaling`` merged (``dict.update``) into the dicts of the
    layer types it goes to, and each dict without ``rope_theta`` given its type's theta
    (a top-level key, else the class's default). Refuses what the config class ignores:
    a flat ``rope_parameters``, a ``rope_scaling`` split by layer type, a legacy ``type``
    in ``rope_scaling`` (the update keeps the default ``rope_type``)."""
    assert family.split_by_type is not None
    scaled_types, full, sliding = family.split_by_type
    params, scaling = config.get("rope_parameters"), config.get("rope_scaling")
    what = f"model_type {config.get('model_type')!r}"
    for name, value in (("rope_parameters", params), ("rope_scaling", scaling)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(
                f"config[{name!r}] must be a dict or null, got {value!r} of type "
                f"{type(value).__name__}"
            )
    if params and not _is_nested(params):
        raise ValueError(
            f"{what}: config['rope_parameters'] is one flat dict, which this family's config "
            "class ignores (it builds one dict per layer type: 'full_attention', "
            "'sliding_attention'); give one dict per layer type, or the flat keys as "
            "rope_scaling"
        )
    if scaling and any(isinstance(v, Mapping) for v in scaling.values()):
        raise ValueError(
            f"{what}: config['rope_scaling'] is split by layer type, which this family's "
            "config class does not read (it merges a flat rope_scaling into "
            f"{', '.join(map(repr, scaled_types))}); give it as rope_parameters"
        )
    if scaling and _legacy_type(scaling) is not None:
        raise ValueError(
            f"{what}: config['rope_scaling'] names its rope type by the legacy 'type' "
            f"({scaling['type']!r}), which this family's config class does not apply (it "
            "merges the dict into one of rope type 'default', which stays); fastpe refuses "
            "rather than guess whether the model was trained with it: write 'rope_type'"
        )
    dicts: dict[str, Any] = {
        k: dict(v) if isinstance(v, Mapping) else v for k, v in (params or {}).items()
    }
    for layer_type in ("full_attention", "sliding_attention"):
        if dicts.get(layer_type) is None:
            dicts[layer_type] = {"rope_type": "default"}
    if scaling:
        for layer_type in scaled_types:
            dicts[layer_type].update(scaling)
    used = []
    for layer_type, (key, default) in (("full_attention", full), ("sliding_attention", sliding)):
        if dicts[layer_type].get("rope_theta") is None:
            top = None if key is None else config.get(key)
            dicts[layer_type]["rope_theta"] = default if top is None else top
        if key is not None:
            used.append(key)  # the config class consumes it (kwargs.pop)
    out = {k: v for k, v in config.items() if k not in ("rope_scaling", *used)}
    out["rope_parameters"] = dicts
    return out


def _per_layer_theta(config: Mapping[str, Any], family: _Family, layer: int | None) -> Any:
    """Theta of the layer from ``layer_rope_theta`` (None: not set; ``_NO_ROPE``: a NoPE
    layer, also from ``no_rope_layers``)."""
    theta = None
    if "layer_rope_theta" in family.reads and config.get("layer_rope_theta") is not None:
        theta = _all_layers("layer_rope_theta", config["layer_rope_theta"], layer)
        if not theta:
            return _NO_ROPE  # theta 0: a NoPE layer
    if "no_rope_layers" in family.reads:
        values, where = _no_rope_layers(config, layer)
        if (
            values is not None
            and layer is not None
            and not _layer_entry(values, layer, "no_rope_layers")
        ):
            return _NO_ROPE  # no_rope_layers[i] == 0: layer i has no RoPE
        if values and layer is None and not all(values):
            raise ValueError(
                f"{where} marks some layers as having no RoPE (entries 0); pass layer=i (the "
                "layer's index) to read layer i"
            )
    return theta


def _no_rope_layers(config: Mapping[str, Any], layer: int | None) -> tuple[Any, str]:
    """``(no_rope_layers, its name in messages)``: the config's, or where it gives none,
    the list its config class derives (``_NO_ROPE_LAYERS``: NoPE every
    ``no_rope_layer_interval``-th layer), checked against ``layer``."""
    given = config.get("no_rope_layers")
    model_type = config.get("model_type")
    rule = _NO_ROPE_LAYERS.get(str(model_type))
    if rule is None:
        return given, "config['no_rope_layers']"
    if given is not None and (given or not rule.empty):
        if isinstance(given, (list, tuple)):
            # (entries past the last layer are read by no layer)
            given = given[: _check_no_rope_length(config, rule, len(given), layer)]
        return given, "config['no_rope_layers']"
    ask = "or give no_rope_layers"
    n, count = _layer_count(config, rule.layers, ask)
    key = "no_rope_layer_interval"
    interval = config.get(key, rule.interval)
    if interval is None:
        raise ValueError(
            f"config[{key!r}] is null: model_type {model_type!r}'s config class derives "
            f"no_rope_layers from it where the config gives none (its default "
            f"{rule.interval} applies only where the key is left out) and fails on null; set "
            f"it, {ask}"
        )
    interval = _check_int(interval, f"config[{key!r}]")
    if interval == 0 and n:
        raise ValueError(
            f"config[{key!r}] is 0, on which model_type {model_type!r}'s config class fails "
            f"deriving no_rope_layers; set it, {ask}"
        )
    _out_of_range(layer, n, count)
    where = (
        f"no_rope_layers (as model_type {model_type!r}'s config class derives it where the "
        f"config gives none: every {key}-th layer, {interval}, without RoPE)"
    )
    return [int((i + 1) % interval != 0) for i in range(n)], where


def _check_no_rope_length(
    config: Mapping[str, Any], rule: _NoRopeLayers, entries: int, layer: int | None
) -> int:
    """The number of layers; refuses a given ``no_rope_layers`` of ``entries`` entries
    where transformers fails on it: fewer than the layers (the attention of layer ``i``
    reads entry ``i``), or, where the class derives ``layer_types`` from it one per entry,
    another count than the layers; and ``layer`` past the last layer."""
    model_type = config.get("model_type")
    n, count = _layer_count(config, rule.layers, "give num_hidden_layers")
    if entries < n:
        raise ValueError(
            f"config['no_rope_layers'] has {entries} entries, but {count}: the attention of "
            f"layer i reads entry i (model_type {model_type!r}), and transformers fails "
            f"building layer {entries}; give one entry per layer"
        )
    if entries > n and rule.types_per_entry and config.get("layer_types") is None:
        raise ValueError(
            f"config['no_rope_layers'] has {entries} entries, but {count}: where the config "
            f"gives no layer_types, model_type {model_type!r}'s config class derives one per "
            "entry and refuses a count other than num_hidden_layers; give one entry per layer"
        )
    _out_of_range(layer, n, count)
    return n


def rope_kwargs_from_config(
    config: Mapping[str, Any],
    *,
    seq_len: int | None = None,
    layer_type: str | None = None,
    layer: int | None = None,
    tower: str = "text",
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
        ``rope_local_base_freq``), the layer type to read. DeepSeek-V4 keys its dicts by
        label: ``"main"`` (sliding-window layers) or ``"compress"`` (the compressed ones),
        given as the label or as the layer type. Its RoPE turns the trailing
        ``qk_rope_head_dim`` channels of each head (``[nope | rope]``): the kwargs are for
        that slice, ``apply_rope(q[..., -r:], out=q[..., -r:], **kw)`` with ``r =
        head_dim_from_config(config)``.
    layer : int or None
        The layer's index, for configs with per-layer keys (``layer_types``,
        ``no_rope_layers``, ``layer_rope_theta``, ``rope_scaling_layers``,
        ``per_layer_config``); it also picks the layer type from ``layer_types``. Without
        it, such a key must be the same for every layer, else a ValueError asks for it.
        Where the config has no ``layer_types`` (Gemma 3 as published), the layer's type is
        derived as the family's config class derives it (transformers 5.24,
        ``fastpe._hf_families._LAYER_TYPES``): Gemma 3 and T5Gemma 2 make every
        ``sliding_window_pattern``-th layer full (6 where absent), ModernBERT layers 0, n,
        2n, ... (n = ``global_attn_every_n_layers``, 3), OLMo 3, Gemma 3n, Gemma 4, LFM3,
        DeepSeek-V4 and the others with one rope dict per layer type each by its class's
        rule, over ``num_hidden_layers`` layers (the class default where absent; a layer
        past the last is refused). Families without a transcribed rule (dots3) and configs
        without ``model_type`` need ``layer_types``. Where Gemma 4 or its kin leave out
        ``per_layer_config``, full-attention layers take the head size ``global_head_dim``
        (512), as their config class gives them. Families whose code rotates some layers
        only (``fastpe._hf_families._ROPE_GATES``: Cohere 2 and Cohere-2-MoE, EXAONE 4 and
        its kin, Flint, AFMoE, Lara-mini, OLMo-hybrid, ...) read layer ``i`` (or a layer
        type) by that rule, and without either are refused where their layers differ.
    tower : {"text", "vision"}
        ``"text"`` (the default): the language model's RoPE. ``"vision"``: the axial RoPE of
        the vision tower of a multimodal config, as described under Returns. A vision
        tower's own config is read as the vision tower either way.

    Returns
    -------
    dict or None
        ``{"layout": "half" | "interleaved" | "half:k", "base": float, "rotary_dim": int, "scaling":
        dict | None, "max_position_embeddings": int | None}`` (plus ``"seq_len"`` when
        given, ``"inverse": True`` for a family that rotates by ``-theta``, and
        ``"pair_axes"`` for the multi-axis (M-RoPE) families: Qwen2-VL, Qwen2.5-VL,
        Qwen3-VL, Qwen3.5, GLM-4V, ERNIE-4.5-VL, ... (see :mod:`fastpe._hf_axes`), whose
        positions are then ``(3, seq)`` or ``(3, batch, seq)`` time/height/width positions
        as the model's ``get_rope_index`` makes them), every key an ``apply_rope``
        argument. ``scaling`` is a fresh dict holding the scaling parameters only:
        ``rope_type`` set (from the legacy ``type`` if need be, which is dropped),
        ``rope_theta`` and ``partial_rotary_factor`` removed (they are in ``base``
        and ``rotary_dim``; ``proportional`` keeps ``partial_rotary_factor``), and a
        top-level ``original_max_position_embeddings`` copied in; it is ``None`` when the
        rope type is ``default``.

        ``tower="vision"`` (or a vision tower's own config) reads the axial RoPE of the
        vision tower of a multimodal config (``config["vision_config"]``) instead:
        ``{"layout", "rotary_dim", "pair_axes", "inv_freq"}``, for ``(2, patches)`` row and
        column positions (:func:`fastpe.patch_positions`). Read for the Qwen2-VL, Qwen2.5-VL,
        Qwen3-VL, Qwen3.5, GLM-4V, GLM-OCR, ERNIE-4.5-VL, PaddleOCR-VL, MLCD, Gemma 4 (layout
        ``"half:2"``: one block per axis), ... towers (``fastpe._hf_axes.AXIAL_HW``); other
        towers are refused by name.

        ``None`` when the layer asked for has no RoPE: a null entry in ``rope_parameters``
        for its layer type, a 0 in ``no_rope_layers`` (as given, or as Llama 4, SmolLM3
        and Mistral Large 4 derive it from ``no_rope_layer_interval`` where absent) or
        ``layer_rope_theta``, Zamba2 with ``use_mem_rope`` false, or a layer the family's
        code does not rotate (``_ROPE_GATES``: a full-attention layer of Cohere 2 or of
        EXAONE 4 with a sliding window, any layer of GraniteMoeHybrid without
        ``position_embedding_type`` "rope", ...), or a layer without attention in a hybrid
        model (``_BLOCKS``: Qwen3-Next's linear attention, LFM2's and LFM3's conv, Bamba's and
        GraniteMoeHybrid's Mamba layers; :func:`head_dim_from_config` refuses such a
        layer), and, without ``layer`` and ``layer_type``, such a model none of whose
        layers has attention (Bamba without ``attn_layer_indices``, ...), as where no
        layer rotates. ``apply_rope(q, **None)`` raises, never rotates.

    Raises
    ------
    TypeError
        If ``config`` is not a mapping, or a value has the wrong type (a string where a
        number belongs, ``4096.0`` where a count belongs, a rope dict that is not a dict).
    ValueError
        If a needed key is missing or invalid, values given twice disagree, the scaling
        parameters are invalid (the config is checked by computing its frequencies with
        :func:`fastpe.scaling.rope_frequencies`, so errors surface here rather than
        mid-model), or the config is one fastpe cannot reproduce: a refused family (each
        with its reason in ``fastpe._hf_families``: a multi-axis arrangement not read yet,
        a vision tower with no axial reading, encoder-decoder heads sized by sub-configs,
        RoPE not driven by position ids), or a RoPE-related key the family's reading does
        not understand (named in the message); or where the family's config class refuses
        the config's ``layer_types`` or ``mlp_layer_types`` (a name or a length), or
        ``layer`` lies past the model's last layer.

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
    config = _check_config(config)
    if layer is not None:
        layer = _check_layer(layer)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(
            f"layer_type must be a string such as 'full_attention', or None, got "
            f"{layer_type!r} of type {type(layer_type).__name__}"
        )
    vision = _vision_part(config, tower)
    if vision is not None:
        tower_config = {**vision[0], "model_type": vision[1]}
        _check_given_layer_types(tower_config)
        _check_layer_in_model(tower_config, layer)
        _check_layer_type_asked(tower_config, False, layer, layer_type)
        return axial_kwargs(*vision)
    config = _text_part(config)
    family = _checked_family(config)
    _refuse_block_keys(config)
    _check_given_layer_types(config)
    _check_layer_in_model(config, layer)
    _check_layer_type_asked(config, bool(family.rope_labels), layer, layer_type)
    if (
        layer_type in _LEGACY_LAYER_TYPES
        and config.get("model_type") in _TRANSFORMERS_TYPES
        and not family.rope_labels
    ):
        layer_type = _LEGACY_LAYER_TYPES[str(layer_type)]  # (as the classes rename them)
    blocks = _BLOCKS.get(str(config.get("model_type")))
    if blocks is not None and layer is None and layer_type is None:
        if _no_attention_anywhere(config, blocks):
            return None  # no layer has attention: the model rotates nothing
    if blocks is not None and (layer is not None or layer_type is not None):
        if not _has_attention(config, blocks, layer, layer_type):
            # a layer without attention: no q and k to rotate. The config must still read
            # as a whole (what its class or model refuses, it refuses whatever layer is
            # asked): its first layer with attention is read, and the answer dropped
            first = _first_attending(config, blocks)
            if first is not None:
                rope_kwargs_from_config(config, seq_len=seq_len, layer=first)
            return None
        if layer_type is not None and not _uses_layer_type(config, family):
            layer_type = None  # (a block type; the rope dict is one for all)
    gate = _ROPE_GATES.get(str(config.get("model_type")))
    if gate is not None:
        # the family's attention skips RoPE on some layers (or all): read before the rope
        # keys, which those layers do not use
        if not _rope_gate(config, gate, layer, layer_type):
            return None
        if gate.types and not _uses_layer_type(config, family):
            layer_type = None  # (it picked the layers; the rope dict is one for all)
    if family.split_by_type is not None:
        config = _split_by_type(config, family)
    if family.derived_partial:
        config = _with_derived_partial(config, family)
    config = _with_given_defaults(_with_class_defaults(config, family), family)
    if family.rope_labels:
        return rope_kwargs_from_config(
            _labelled(config, family, layer_type, layer)[1], seq_len=seq_len
        )
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

    merge_type, any_type = layer_type, False
    if merge_type is None:
        # one dict per layer type, all the same (OLMo 3 unscaled): any layer type reads it
        for name in ("rope_parameters", "rope_scaling"):
            value = config.get(name)
            if isinstance(value, Mapping) and _is_nested(value):
                items = list(value.values())
                if all(isinstance(v, Mapping) for v in items) and all(v == items[0] for v in items):
                    merge_type, any_type = next(iter(value)), True
    rope = _merge_rope_dicts(config, merge_type)
    if rope is None:
        return None
    if family.mrope is not None:
        mrope_holder = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
        section = read_mrope(rope, family.mrope, family.mrope_default, mrope_holder)
        rope = without_mrope(rope)
    for old, new in family.type_aliases:
        # the name as written (before the check of known types): rope_type, else type
        named = rope.get("rope_type") if rope.get("rope_type") is not None else rope.get("type")
        if named == old and family.aliases_in is not None:
            held = config.get(family.aliases_in)
            if not (isinstance(held, Mapping) and old in (held.get("type"), held.get("rope_type"))):
                raise ValueError(
                    f"the rope type {old!r} is renamed {new!r} by this family's config class "
                    f"only in config[{family.aliases_in!r}]; elsewhere transformers 5.24 "
                    f"keeps it and fails on it: give the dict as config"
                    f"[{family.aliases_in!r}], or write rope_type {new!r}"
                )
        if named == old:
            rope = {k: v for k, v in rope.items() if k != "type"} | {"rope_type": new}
    if family.ntk_alpha and _resolve_rope_type(rope) == "dynamic" and rope.get("alpha"):
        # HunYuan: a fixed base * alpha ** (d / (d - 2)), as its rotary class reads it
        rope = {k: v for k, v in rope.items() if k != "type"} | {"rope_type": "ntk_alpha"}

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
    if _table_type(config) in _IGNORES_PARTIAL and _resolve_rope_type(rope) == "default":
        # its default rotary code rotates the whole head: a factor the config gives is
        # refused above (_refuse_partial_factor), one its class sets (Mistral 4's) ignored
        partial = 1.0
    ignoring = _IGNORES_PARTIAL_BY_TYPE.get(_table_type(config))
    if (
        ignoring
        and partial != 1.0
        and _resolve_rope_type(rope) == "default"
        and (merge_type is None or any_type or merge_type in ignoring)
    ):
        raise ValueError(
            f"model_type {config.get('model_type')!r}: the default rotary code of "
            f"{'its' if merge_type is None or any_type else repr(merge_type)} layers "
            "rotates the whole "
            f"head, and transformers ignores partial_rotary_factor={partial!r} there; "
            "fastpe refuses rather than rotate a part (drop the key)"
        )
    head_dim = _head_dim(config, family, layer)
    rotary_key, rotary = _first(config, family.rotary_dim_keys)
    per_layer = config.get("per_layer_config") if "per_layer_config" in family.reads else None
    if per_layer and family.rotary_dim_keys and layer is not None:
        entry = _layer_entry(per_layer, layer, "per_layer_config")
        for key in family.rotary_dim_keys if isinstance(entry, Mapping) else ():
            if entry.get(key) is not None:
                rotary_key, rotary = f"per_layer_config'][{layer!r}]['{key}", entry[key]
                break
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
    stated_key, stated = _first(config, family.checked_rotary_keys)
    if stated is not None and stated != rotary_dim:
        raise ValueError(
            f"config[{stated_key!r}] says {stated!r} channels are rotated, but this family's "
            f"code (transformers 5.24) rotates head size {head_dim} times partial_rotary_factor "
            f"{partial!r} = {rotary_dim}; fastpe does not guess which one the checkpoint was "
            f"trained with (a latent-attention model fails where they differ): make them agree"
        )

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
        if rope_type == "yarn" and merge_type is not None and scaling.get("truncate", 1) is None:
            scaling["truncate"] = True  # transformers truncates there (below), null or not
        if (
            rope_type == "yarn"
            and merge_type is not None
            and scaling.get("truncate", True) is not True
        ):
            # read per layer type, the config's rope dict is nested in transformers 5.24,
            # which reads truncate from the outer dict: it truncates whatever the layer says
            raise ValueError(
                f"the rope dict of layer type {merge_type!r} sets truncate="
                f"{scaling['truncate']!r}, which transformers does not apply to a rope dict "
                "per layer type (it reads truncate from the outer dict, so it truncates); "
                "drop the key"
            )
        if rope_type in _NEEDS_ORIGINAL_CONTEXT:
            mt = config.get("model_type")
            top_default = _TOP_ORIGINAL.get(mt) if isinstance(mt, str) else None
            if top_default is not None and "original_max_position_embeddings" not in config:
                # the config class holds the value at the top level (its default when the
                # config leaves it out) and transformers writes it over the rope dict's
                inner = rope.get("original_max_position_embeddings")
                if inner is not None and inner != top_default:
                    raise ValueError(
                        f"the rope dict's 'original_max_position_embeddings' is {inner!r}, but "
                        f"model_type {mt!r} keeps it at the top level (its config class's "
                        f"default, {top_default}, when absent) and transformers writes that "
                        f"over the rope dict's; set config['original_max_position_embeddings'] "
                        f"to the model's pretraining length"
                    )
                original = top_default
            else:
                _, original = _config_value(
                    config, rope, ("original_max_position_embeddings",), None
                )
            if original is not None:
                scaling["original_max_position_embeddings"] = original

    if family.mscale_factor and scaling is not None:
        scaling = _mscale_as_attention_factor(scaling, rope_type)
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
    if family.mrope is not None:
        axes = mrope_pair_axes(family.mrope, section, rotary_dim // 2)
        if axes.ndim == 2 and (axes[0] == axes[1]).all():
            axes = axes[0]  # every pair's channels on one axis: one row
        kwargs["pair_axes"] = (
            tuple(int(a) for a in axes)
            if axes.ndim == 1
            else tuple(tuple(int(a) for a in row) for row in axes)
        )
    if family.sign < 0:
        if attention_factor != 1.0:
            raise ValueError(
                f"this family rotates by -theta, which apply_rope does as inverse=True; that "
                f"also divides by the attention factor {attention_factor!r} of rope type "
                f"{rope_type!r} instead of multiplying: not supported"
            )
        kwargs["inverse"] = True
    return kwargs


def _mscale_as_attention_factor(scaling: dict[str, Any], rope_type: str) -> dict[str, Any]:
    """PhiMoE's reading of a scaled rope dict: its rotary class multiplies cos and sin by
    ``long_mscale`` when the sequence is longer than ``original_max_position_embeddings``,
    else by ``short_mscale``, in place of the rope type's own attention factor. Read as
    ``attention_factor`` where the two are equal (as in the published configs)."""
    short, long = scaling.get("short_mscale"), scaling.get("long_mscale")
    if short is None or long is None:
        missing = "short_mscale" if short is None else "long_mscale"
        raise ValueError(
            f"this family's rotary class multiplies cos and sin by the rope dict's "
            f"short_mscale / long_mscale for rope type {rope_type!r}, and the dict has no "
            f"{missing!r} (transformers itself fails on it)"
        )
    short = _check_real(short, "rope_scaling['short_mscale']")
    long = _check_real(long, "rope_scaling['long_mscale']")
    if short != long:
        raise ValueError(
            f"rope_scaling['short_mscale'] ({short!r}) and ['long_mscale'] ({long!r}) differ: "
            f"this family's attention factor then depends on the sequence length, which "
            f"fastpe's scaling does not express; pass scaling with 'attention_factor' set to "
            f"the one for your sequence length"
        )
    if rope_type not in ("longrope", "yarn"):
        raise ValueError(
            f"this family multiplies cos and sin of rope type {rope_type!r} by "
            f"short_mscale {short!r}; fastpe carries an attention factor only for 'longrope' "
            f"and 'yarn'"
        )
    out = {k: v for k, v in scaling.items() if k not in ("short_mscale", "long_mscale")}
    out["attention_factor"] = short
    return out


def _vision_part(config: Mapping[str, Any], tower: str):
    """``(vision config, model_type)`` when the axial RoPE of a vision tower is asked for
    (``tower="vision"``, or a vision tower's own config), else None."""
    if tower not in ("text", "vision"):
        raise ValueError(f"tower must be 'text' or 'vision', got {tower!r}")
    part = config.get("vision_config") if tower == "vision" else config
    if tower == "vision" and part is None and config.get("model_type") in AXIAL_HW:
        part = config
    if not isinstance(part, Mapping):
        if tower == "text":
            return None
        raise ValueError(
            "tower='vision' needs a config with a 'vision_config' dict (or a vision tower's "
            "own config)"
        )
    model_type = part.get("model_type")
    parent = config.get("model_type")
    if tower == "vision" and part is not config and model_type in (None, parent):
        # a published config.json leaves the tower's model_type out (transformers 4 saved
        # the parent's): the parent's config class names its tower
        model_type = VISION_TOWERS.get(str(parent), model_type)
    if model_type in AXIAL_HW:
        return part, model_type
    if tower == "vision":
        if model_type is None or model_type == parent:
            raise ValueError(
                f"the vision_config of model_type {parent!r} has "
                f"{'no model_type' if model_type is None else 'its parent model_type'} and "
                f"fastpe does not know that model's vision tower; set "
                f"config['vision_config']['model_type'] to the tower's (e.g. "
                f"'qwen2_vl_vision') if it is one fastpe reads"
            )
        raise ValueError(
            f"the vision tower's model_type {model_type!r} is not read: its axial RoPE is "
            f"not one fastpe has checked against the model's code"
        )
    return None


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
