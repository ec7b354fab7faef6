"""Hugging Face model configs (``config.json`` as a dict) read into fastpe's RoPE arguments.

:func:`rope_kwargs_from_config` returns the keyword arguments of :func:`fastpe.apply_rope`
(layout, base, rotary dim, scaling, context length), ready to splat::

    fastpe.apply_rope(q, out=q, offset=past_len, **rope_kwargs_from_config(config))

:func:`head_dim_from_config` gives the channels per head, to reshape ``(..., heads *
head_dim)`` projections into heads first, and :func:`rotary_dim_from_config` the number of
rotated channels per head. The frequency formulas themselves live in :mod:`fastpe.scaling`.

How a config is read is one row of a table per model family (``_FAMILIES``, keyed by the
config's ``model_type``): which keys hold the head size, the head count, the rope theta and
the partial rotary factor, and in which layout the family's modelling code rotates. Every
family not in the table is read with the generic row, the convention of the ``transformers``
models that rotate with ``rotate_half`` (Llama, Mistral, Qwen2, Phi-3, DeepSeek-V3, Gemma,
...).

Errors follow one rule: ``TypeError`` for a value of the wrong type, ``ValueError`` for a
value of the right type that is not allowed; messages name the key, the value and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .scaling import (
    _check_count,
    _check_real,
    _resolve_rope_type,
    rope_frequencies,
)

__all__ = ["head_dim_from_config", "rope_kwargs_from_config", "rotary_dim_from_config"]

# Keys that live in a new-style ``rope_parameters`` dict but describe the model, not the
# scaling; :func:`rope_kwargs_from_config` moves them out of the ``scaling`` dict it returns.
_CONFIG_LEVEL_KEYS = ("rope_theta", "partial_rotary_factor")

# Rope types whose frequencies depend on the pre-training context length.
_NEEDS_ORIGINAL_CONTEXT = ("yarn", "longrope", "llama3")


@dataclass(frozen=True)
class _Family:
    """How the configs of one model family name what RoPE needs.

    Each ``*_keys`` tuple lists the config keys that may hold the value, first match wins.
    """

    layout: str = "half"  # the pairing the family's modelling code rotates
    head_dim_keys: tuple[str, ...] = ("head_dim",)
    hidden_size_keys: tuple[str, ...] = ("hidden_size",)
    num_heads_keys: tuple[str, ...] = ("num_attention_heads",)
    theta_keys: tuple[str, ...] = ("rope_theta",)
    default_theta: float = 10000.0
    partial_keys: tuple[str, ...] = ("partial_rotary_factor",)


#: The generic reading: ``transformers``' common keys and ``rotate_half``.
_GENERIC = _Family()

#: One row per ``model_type`` whose config keys or rotation differ from :data:`_GENERIC`.
#: No family differs in what this reader supports today; rows are added here, not as
#: branches in the functions below.
_FAMILIES: dict[str, _Family] = {}


def _family(config: Mapping[str, Any]) -> _Family:
    model_type = config.get("model_type")
    if model_type is None:
        return _GENERIC
    if not isinstance(model_type, str):
        raise TypeError(
            f"config['model_type'] must be a string such as 'llama', got {model_type!r} of "
            f"type {type(model_type).__name__}"
        )
    return _FAMILIES.get(model_type, _GENERIC)


def _check_config(config: object) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping (a parsed config.json, or config.to_dict()), got "
            f"{type(config).__name__}"
        )
    return config


def _first(config: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """``(key, value)`` of the first of ``keys`` set (not null) in ``config``."""
    for key in keys:
        value = config.get(key)
        if value is not None:
            return key, value
    return keys[0], None


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


def head_dim_from_config(config: Mapping[str, Any]) -> int:
    """Channels per attention head of a Hugging Face config dict.

    ``head_dim`` when the config sets it (not null), else ``hidden_size //
    num_attention_heads``, as ``transformers`` derives it. Use it to reshape ``(..., heads *
    head_dim)`` projections into heads before :func:`fastpe.apply_rope`.

    Parameters
    ----------
    config : mapping
        A model's ``config.json`` as a dict.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        If ``config`` is not a mapping or a size is not an integer (``128.0`` is not).
    ValueError
        If neither ``head_dim`` nor both ``hidden_size`` and ``num_attention_heads`` are
        set, or a size is not > 0.

    Examples
    --------
    >>> head_dim_from_config({"hidden_size": 4096, "num_attention_heads": 32})
    128
    >>> head_dim_from_config({"hidden_size": 7168, "num_attention_heads": 128, "head_dim": 192})
    192
    """
    config = _check_config(config)
    family = _family(config)
    key, head_dim = _first(config, family.head_dim_keys)
    if head_dim is not None:
        return _check_count(head_dim, f"config[{key!r}]")
    size_key, hidden_size = _first(config, family.hidden_size_keys)
    heads_key, num_heads = _first(config, family.num_heads_keys)
    if hidden_size is None or num_heads is None:
        raise ValueError(
            f"config needs {key!r}, or {size_key!r} and {heads_key!r} to derive it; add "
            f"the model's head size as config[{key!r}]"
        )
    return _check_count(hidden_size, f"config[{size_key!r}]") // _check_count(
        num_heads, f"config[{heads_key!r}]"
    )


def _merge_rope_dicts(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any]:
    """The config's rope dict: ``rope_parameters`` and/or ``rope_scaling`` (must agree)."""
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
        if value and all(isinstance(item, Mapping) for item in value.values()):
            # New-style per-layer-type parameters: {"full_attention": {...}, ...}.
            if layer_type is None:
                raise ValueError(
                    f"config[{name!r}] holds one rope dict per layer type "
                    f"({', '.join(map(repr, value))}); pass layer_type=... to pick one"
                )
            if layer_type not in value:
                raise ValueError(
                    f"layer_type {layer_type!r} is not in config[{name!r}]; known layer types "
                    f"are {', '.join(map(repr, value))}"
                )
            value = value[layer_type]
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


def rope_kwargs_from_config(
    config: Mapping[str, Any],
    *,
    seq_len: int | None = None,
    layer_type: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of :func:`fastpe.apply_rope` read from a Hugging Face config dict.

    The result splats straight into ``apply_rope``: ``apply_rope(q, **kw)``. The head size,
    which ``apply_rope`` takes from the array's shape, is :func:`head_dim_from_config`.

    Parameters
    ----------
    config : mapping
        A model's ``config.json`` as a dict. Read keys: ``rope_theta`` (default 10000.0),
        ``head_dim`` (else ``hidden_size // num_attention_heads``), ``partial_rotary_factor``
        (default 1.0), ``rope_scaling`` and/or ``rope_parameters``,
        ``max_position_embeddings`` and, for ``yarn``, ``longrope`` and ``llama3``, a
        top-level ``original_max_position_embeddings`` (as Phi-3 configs have). Keys of the
        new-style ``rope_parameters`` dict (``rope_theta``, ``partial_rotary_factor``) may sit
        at either level; a value given at both levels must agree. Other keys are ignored.
    seq_len : int or None
        Sequence length the model will run at. It is used to validate the config now (see
        below) and returned under ``"seq_len"``; omitted from the result when None.
    layer_type : str or None
        For new-style configs whose ``rope_parameters`` hold one dict per layer type (e.g.
        ``{"full_attention": {...}, "sliding_attention": {...}}``), the layer type to read.

    Returns
    -------
    dict
        ``{"layout": "half", "base": float, "rotary_dim": int, "scaling": dict | None,
        "max_position_embeddings": int | None}`` (plus ``"seq_len"`` when given), every key
        an ``apply_rope`` argument. ``layout`` is ``"half"`` because the ``transformers``
        modeling code for these configs rotates with ``rotate_half``. ``scaling`` is a
        fresh dict holding the scaling parameters only: ``rope_type`` set (from the legacy
        ``type`` if need be, which is dropped), ``rope_theta`` and ``partial_rotary_factor``
        removed (they are in ``base`` and ``rotary_dim``), and a top-level
        ``original_max_position_embeddings`` copied in; it is ``None`` when the rope type
        is ``default``.

    Raises
    ------
    TypeError
        If ``config`` is not a mapping, or a value has the wrong type (a string where a
        number belongs, ``4096.0`` where a count belongs, a rope dict that is not a dict).
    ValueError
        If a needed key is missing or invalid, values given twice disagree, or the scaling
        parameters are invalid (the config is checked by computing its frequencies with
        :func:`fastpe.scaling.rope_frequencies`, so errors surface here rather than
        mid-model).

    Notes
    -----
    The ``transformers`` modeling code for these configs rotates in the *half* layout
    (``rotate_half``), hence ``layout="half"`` in the result; to rotate in the interleaved
    layout instead, convert the q/k weights with
    :func:`fastpe.layout.half_to_interleaved_weights` and override ``layout``.

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
    """
    config = _check_config(config)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(
            f"layer_type must be a string such as 'full_attention', or None, got "
            f"{layer_type!r} of type {type(layer_type).__name__}"
        )
    family = _family(config)
    rope = _merge_rope_dicts(config, layer_type)

    theta_key, theta = _config_value(config, rope, family.theta_keys, family.default_theta)
    base = _check_real(theta, f"config[{theta_key!r}]")
    partial_key, partial = _config_value(config, rope, family.partial_keys, 1.0)
    partial = _check_real(partial, f"config[{partial_key!r}]")
    rotary_dim = rotary_dim_from_config(head_dim_from_config(config), partial)

    max_pos = config.get("max_position_embeddings")
    if max_pos is not None:
        max_pos = _check_count(max_pos, "config['max_position_embeddings']")

    rope_type = _resolve_rope_type(rope)
    scaling: dict[str, Any] | None = None
    if rope_type != "default":
        scaling = {
            key: value
            for key, value in rope.items()
            if key not in _CONFIG_LEVEL_KEYS and key != "type"
        }
        scaling["rope_type"] = rope_type
        if rope_type in _NEEDS_ORIGINAL_CONTEXT:
            _, original = _config_value(config, rope, ("original_max_position_embeddings",), None)
            if original is not None:
                scaling["original_max_position_embeddings"] = original

    # Validate now: raises for missing keys, wrong lengths, bad values.
    rope_frequencies(
        rotary_dim, base=base, scaling=scaling, seq_len=seq_len, max_position_embeddings=max_pos
    )
    kwargs: dict[str, Any] = {
        "layout": family.layout,
        "base": base,
        "rotary_dim": rotary_dim,
        "scaling": scaling,
        "max_position_embeddings": max_pos,
    }
    if seq_len is not None:
        kwargs["seq_len"] = int(seq_len)
    return kwargs

