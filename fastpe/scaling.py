"""Context-extension RoPE frequencies, read straight from Hugging Face model configs.

Models trained with rotary position embeddings are often run past their training context
with a *RoPE scaling* variant, declared in the model's ``config.json`` as ``rope_scaling``
(``rope_parameters`` in newer files)::

    "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                     "original_max_position_embeddings": 32768}

:func:`rope_frequencies` turns such a dict into the inverse frequencies ``inv_freq`` (the
angle of pair ``i`` at position ``p`` is ``p * inv_freq[i]``) and the *attention factor* by
which ``cos`` and ``sin`` are multiplied, with the parameters, defaults and formulas of
``transformers`` (``src/transformers/modeling_rope_utils.py``) for the rope types
``default``, ``linear``, ``dynamic``, ``yarn``, ``longrope`` and ``llama3``. Everything is
computed in float64 (``transformers`` computes in float32), so the values are those formulas
rounded once per operation, not float32 approximations of them.

:func:`rope_kwargs_from_config` reads a whole config dict (rope theta, head size, partial
rotary factor, scaling, context length) and :func:`rotary_dim_from_config` computes the
number of rotated channels the way ``transformers`` does.

Examples
--------
>>> from fastpe.scaling import rope_frequencies
>>> inv_freq, attention_factor = rope_frequencies(
...     8, scaling={"rope_type": "linear", "factor": 2.0})
>>> inv_freq.round(6).tolist()
[0.5, 0.05, 0.005, 0.0005]
>>> attention_factor
1.0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = [
    "KNOWN_ROPE_TYPES",
    "rope_frequencies",
    "rope_kwargs_from_config",
    "rotary_dim_from_config",
]

#: The ``rope_type`` values :func:`rope_frequencies` understands.
KNOWN_ROPE_TYPES: tuple[str, ...] = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")

# Keys that live in a new-style ``rope_parameters`` dict but describe the model, not the
# scaling; :func:`rope_kwargs_from_config` moves them out of the ``scaling`` dict it returns.
_CONFIG_LEVEL_KEYS = ("rope_theta", "partial_rotary_factor")

# Rope types whose frequencies depend on the pre-training context length.
_NEEDS_ORIGINAL_CONTEXT = ("yarn", "longrope", "llama3")

_Variant = Callable[..., "tuple[np.ndarray, float]"]


# --------------------------------------------------------------------------- validation


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_real(value: object, name: str, *, positive: bool = True) -> float:
    """Return ``value`` as a finite float (> 0 when ``positive``), else raise ValueError."""
    if not _is_real(value):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    out = float(value)  # type: ignore[arg-type]
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and out <= 0.0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def _check_count(value: object, name: str) -> int:
    """Return ``value`` as a positive int; integral floats such as ``4096.0`` are accepted."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        out = int(value)
    else:
        as_float = float(value) if _is_real(value) else math.nan  # type: ignore[arg-type]
        if not (math.isfinite(as_float) and as_float.is_integer()):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        out = int(as_float)
    if out <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return out


def _check_dim(dim: object) -> int:
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, numbers.Integral):
        raise ValueError(f"dim (the rotary dimension) must be a positive even int, got {dim!r}")
    dim = int(dim)
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim (the rotary dimension) must be a positive even int, got {dim}")
    return dim


def _key(key: str) -> str:
    return f"scaling[{key!r}]"


def _get_real(
    params: Mapping[str, Any],
    key: str,
    rope_type: str,
    *,
    required: bool = False,
    minimum: float | None = None,
    positive: bool = True,
) -> float | None:
    """Read an optional (``None`` when absent or null) or required number from ``params``."""
    value = params.get(key)
    if value is None:
        if required:
            raise ValueError(f"rope_type {rope_type!r} requires {_key(key)}, which is missing")
        return None
    out = _check_real(value, _key(key), positive=positive)
    if minimum is not None and out < minimum:
        raise ValueError(
            f"{_key(key)} must be >= {minimum:g} for rope_type {rope_type!r}, got {value!r}"
        )
    return out


def _get_count(params: Mapping[str, Any], key: str) -> int | None:
    value = params.get(key)
    return None if value is None else _check_count(value, _key(key))


def _resolve_rope_type(scaling: Mapping[str, Any] | None) -> str:
    """The rope type named by ``scaling`` (``"rope_type"``, or the legacy ``"type"``)."""
    if scaling is None:
        return "default"
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be a mapping such as a config's 'rope_scaling' dict, or None, "
            f"got {type(scaling).__name__}"
        )
    rope_type = scaling.get("rope_type")
    legacy = scaling.get("type")
    if rope_type is not None and legacy is not None and rope_type != legacy:
        raise ValueError(
            f"scaling['rope_type'] ({rope_type!r}) and the legacy scaling['type'] ({legacy!r}) "
            f"disagree; keep only one of them"
        )
    if rope_type is None:
        rope_type = "default" if legacy is None else legacy
    if rope_type not in KNOWN_ROPE_TYPES:
        raise ValueError(
            f"unknown rope_type {rope_type!r}; known rope types are "
            f"{', '.join(map(repr, KNOWN_ROPE_TYPES))}"
        )
    return rope_type


# --------------------------------------------------------------------------- variants


def _powers(dim: int, base: float) -> np.ndarray:
    """``base ** (2i / dim)`` for ``i < dim // 2``, in float64."""
    return base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def _default_inv_freq(dim: int, base: float) -> np.ndarray:
    return 1.0 / _powers(dim, base)


def _default(dim, base, params, seq_len, max_pos):
    return _default_inv_freq(dim, base), 1.0


def _linear(dim, base, params, seq_len, max_pos):
    factor = _get_real(params, "factor", "linear", required=True, minimum=1.0)
    return _default_inv_freq(dim, base) / factor, 1.0


def _dynamic(dim, base, params, seq_len, max_pos):
    factor = _get_real(params, "factor", "dynamic", required=True, minimum=1.0)
    if max_pos is None:
        raise ValueError(
            "rope_type 'dynamic' requires max_position_embeddings (the context length the "
            "model was trained with); pass max_position_embeddings=..."
        )
    if dim < 4:
        raise ValueError(
            f"rope_type 'dynamic' requires dim >= 4 (it raises the base to dim / (dim - 2)), "
            f"got {dim}"
        )
    # As in transformers: no sequence length (e.g. at init time) or a short one leaves
    # seq_len at max_position_embeddings, where the base is unchanged.
    length = max_pos if seq_len is None else max(seq_len, max_pos)
    scaled_base = base * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    return _default_inv_freq(dim, scaled_base), 1.0


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn_correction_dim(num_rotations: float, dim: int, base: float, max_pos: int) -> float:
    """The (fractional) pair index whose wavelength fits ``num_rotations`` times in max_pos."""
    return (dim * math.log(max_pos / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def _yarn(dim, base, params, seq_len, max_pos):
    explicit_original = _get_count(params, "original_max_position_embeddings")
    original = max_pos if explicit_original is None else explicit_original
    factor = _get_real(params, "factor", "yarn")
    derived = factor is None
    if derived:
        if explicit_original is None or max_pos is None:
            raise ValueError(
                "rope_type 'yarn' requires scaling['factor'], which is missing (it can only be "
                "derived as max_position_embeddings / "
                "scaling['original_max_position_embeddings'] when both are given)"
            )
        factor = max_pos / explicit_original
    if factor < 1.0:
        what = (
            "the derived factor max_position_embeddings / "
            "scaling['original_max_position_embeddings']"
            if derived
            else "scaling['factor']"
        )
        raise ValueError(f"{what} must be >= 1 for rope_type 'yarn', got {factor!r}")
    if original is None:
        raise ValueError(
            "rope_type 'yarn' requires scaling['original_max_position_embeddings'] or "
            "max_position_embeddings, and neither was given"
        )
    if base == 1.0:
        raise ValueError("base must not be 1 for rope_type 'yarn' (it divides by log(base))")
    attention_factor = _get_real(params, "attention_factor", "yarn")
    mscale = _get_real(params, "mscale", "yarn", minimum=0.0, positive=False)
    mscale_all_dim = _get_real(params, "mscale_all_dim", "yarn", minimum=0.0, positive=False)
    beta_fast = _get_real(params, "beta_fast", "yarn")
    beta_slow = _get_real(params, "beta_slow", "yarn")
    beta_fast = 32.0 if beta_fast is None else beta_fast
    beta_slow = 1.0 if beta_slow is None else beta_slow
    if beta_fast < beta_slow:
        raise ValueError(
            f"scaling['beta_fast'] must be >= scaling['beta_slow'] for rope_type 'yarn', got "
            f"beta_fast={beta_fast!r} and beta_slow={beta_slow!r} (defaults are 32 and 1)"
        )
    truncate = params.get("truncate")
    if truncate is None:
        truncate = True
    elif not isinstance(truncate, (bool, np.bool_)):
        raise ValueError(f"scaling['truncate'] must be True or False, got {truncate!r}")

    if attention_factor is None:
        # transformers tests truthiness: a zero mscale counts as not given.
        if mscale and mscale_all_dim:
            attention_factor = _get_mscale(factor, mscale) / _get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _get_mscale(factor)

    low = _yarn_correction_dim(beta_fast, dim, base, original)
    high = _yarn_correction_dim(beta_slow, dim, base, original)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    # The upper clamp is dim - 1 (not dim // 2 - 1), as in transformers.
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid dividing by zero, as transformers does
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolation_weight = 1.0 - ramp

    powers = _powers(dim, base)
    inv_freq_extrapolation = 1.0 / powers
    inv_freq_interpolation = 1.0 / (factor * powers)
    inv_freq = (
        inv_freq_interpolation * (1.0 - extrapolation_weight)
        + inv_freq_extrapolation * extrapolation_weight
    )
    return inv_freq, attention_factor


def _factor_list(params: Mapping[str, Any], key: str, dim: int) -> np.ndarray:
    value = params.get(key)
    if value is None:
        raise ValueError(f"rope_type 'longrope' requires {_key(key)}, which is missing")
    if isinstance(value, (str, bytes)) or isinstance(value, Mapping):
        raise ValueError(f"{_key(key)} must be a list of numbers, got {value!r}")
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"{_key(key)} must be a list of numbers, got {value!r}") from None
    if len(items) != dim // 2:
        raise ValueError(
            f"{_key(key)} must have dim // 2 = {dim // 2} entries (one per rotated pair), "
            f"got {len(items)}"
        )
    for i, item in enumerate(items):
        _check_real(item, f"{_key(key)}[{i}]")
    return np.array([float(item) for item in items], dtype=np.float64)


def _longrope(dim, base, params, seq_len, max_pos):
    short_factor = _factor_list(params, "short_factor", dim)
    long_factor = _factor_list(params, "long_factor", dim)
    explicit_original = _get_count(params, "original_max_position_embeddings")
    original = max_pos if explicit_original is None else explicit_original
    if original is None:
        raise ValueError(
            "rope_type 'longrope' requires scaling['original_max_position_embeddings'] or "
            "max_position_embeddings, and neither was given"
        )
    factor = _get_real(params, "factor", "longrope")
    attention_factor = _get_real(params, "attention_factor", "longrope")
    if attention_factor is None:
        if factor is None:
            if max_pos is None:
                raise ValueError(
                    "rope_type 'longrope' requires scaling['factor'], scaling['attention_factor'] "
                    "or max_position_embeddings (factor defaults to max_position_embeddings / "
                    "original_max_position_embeddings), and none was given"
                )
            factor = max_pos / original
        if factor <= 1.0:
            attention_factor = 1.0
        elif original == 1:
            raise ValueError(
                "original_max_position_embeddings must be > 1 for rope_type 'longrope' with a "
                "factor > 1 (the attention factor divides by log(original))"
            )
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original))
    # transformers switches to the long factors only past the original context.
    ext_factors = long_factor if seq_len is not None and seq_len > original else short_factor
    return 1.0 / (ext_factors * _powers(dim, base)), attention_factor


def _llama3(dim, base, params, seq_len, max_pos):
    factor = _get_real(params, "factor", "llama3", required=True, minimum=1.0)
    low_freq_factor = _get_real(params, "low_freq_factor", "llama3", required=True)
    high_freq_factor = _get_real(params, "high_freq_factor", "llama3", required=True)
    original = _get_count(params, "original_max_position_embeddings")
    if original is None:
        raise ValueError(
            "rope_type 'llama3' requires scaling['original_max_position_embeddings'], which is "
            "missing"
        )
    if high_freq_factor <= low_freq_factor:
        raise ValueError(
            f"scaling['high_freq_factor'] must be > scaling['low_freq_factor'] for rope_type "
            f"'llama3', got high_freq_factor={high_freq_factor!r} and "
            f"low_freq_factor={low_freq_factor!r}"
        )
    inv_freq = _default_inv_freq(dim, base)
    low_freq_wavelen = original / low_freq_factor
    high_freq_wavelen = original / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # Wavelengths longer than low_freq_wavelen are divided by factor, shorter than
    # high_freq_wavelen kept; both edges belong to the smoothly interpolated middle band.
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama), 1.0


_VARIANTS: dict[str, _Variant] = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
}


# --------------------------------------------------------------------------- public API


def rope_frequencies(
    dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
    max_position_embeddings: int | None = None,
) -> tuple[np.ndarray, float]:
    """Inverse RoPE frequencies and attention factor for a Hugging Face ``rope_scaling`` dict.

    This is the reference formula, in plain float64 NumPy. For the ``default`` variant
    fastpe's own kernels compute ``base ** (-2i / dim)`` more exactly (as a double-double,
    see ``fastpe._freq``); this function evaluates ``1.0 / base ** (2i / dim)`` the way
    ``transformers`` writes it, and the scaled variants on top of that.

    Parameters
    ----------
    dim : int
        The rotary dimension (number of rotated channels per head), a positive even int; the
        result has ``dim // 2`` frequencies.
    base : float, default 10000.0
        The RoPE base (``rope_theta`` in configs), finite and > 0.
    scaling : mapping or None
        The config's ``rope_scaling`` (or new-style ``rope_parameters``) dict. The variant is
        ``scaling["rope_type"]`` (legacy key ``"type"``); ``None``, ``{}`` or a missing type
        mean ``"default"``. Keys with the value ``None`` count as absent, unknown keys are
        ignored. If the dict carries ``"rope_theta"`` it must equal ``base``. Per type:

        - ``"default"``: ``inv_freq[i] = 1 / base ** (2i / dim)``, attention factor 1.
        - ``"linear"``: ``factor`` (>= 1); the default frequencies divided by ``factor``.
        - ``"dynamic"`` (NTK-aware): ``factor`` (>= 1), needs ``max_position_embeddings``;
          the base becomes ``base * (factor * L / max_pos - (factor - 1)) ** (dim / (dim -
          2))`` with ``L = max(seq_len, max_pos)`` (``L = max_pos``, i.e. the plain base,
          when ``seq_len`` is None).
        - ``"yarn"``: ``factor``, ``original_max_position_embeddings`` (defaults to
          ``max_position_embeddings``), ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``,
          ``mscale_all_dim``, ``attention_factor``, ``truncate`` (True). An explicit
          ``factor`` is used as given even when it differs from ``max_position_embeddings /
          original_max_position_embeddings``; only a missing ``factor`` is derived from that
          ratio. The attention factor is ``attention_factor`` if given, else
          ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` when both are non-zero,
          else ``mscale(factor) = 0.1 ln(factor) + 1`` (1 for ``factor <= 1``).
        - ``"longrope"``: ``short_factor`` and ``long_factor`` (``dim // 2`` numbers each),
          ``original_max_position_embeddings`` (defaults to ``max_position_embeddings``),
          ``factor``, ``attention_factor``. The long factors apply when ``seq_len >
          original_max_position_embeddings``, else the short ones. The attention factor
          defaults to ``sqrt(1 + ln(factor) / ln(original))`` (1 when ``factor <= 1``), with
          ``factor`` defaulting to ``max_position_embeddings / original``.
        - ``"llama3"``: ``factor`` (>= 1), ``low_freq_factor``, ``high_freq_factor`` (greater
          than ``low_freq_factor``), ``original_max_position_embeddings`` (required). Pairs
          with wavelength ``2 pi / inv_freq`` longer than ``original / low_freq_factor`` are
          divided by ``factor``, shorter than ``original / high_freq_factor`` kept, and
          interpolated smoothly in between (both edges inclusive), attention factor 1.
    seq_len : int or None
        The sequence length the frequencies are for; used by ``dynamic`` and ``longrope``.
        ``None`` means "no longer than the trained context", as at model initialisation in
        ``transformers``.
    max_position_embeddings : int or None
        The config's ``max_position_embeddings``; needed by ``dynamic``, and by ``yarn`` and
        ``longrope`` when the scaling dict lacks ``original_max_position_embeddings`` (or, for
        ``longrope``, lacks ``factor`` and ``attention_factor``).

    Returns
    -------
    inv_freq : numpy.ndarray
        float64, shape ``(dim // 2,)``; the angle of pair ``i`` at position ``p`` is
        ``p * inv_freq[i]``.
    attention_factor : float
        Multiply ``cos`` and ``sin`` by this (1.0 unless ``yarn`` or ``longrope``).

    Raises
    ------
    ValueError
        For an unknown rope type, a missing required key, a factor list of the wrong length,
        a factor < 1 where the formula needs >= 1, and non-finite, non-positive or otherwise
        invalid values. The message names the offending key.
    TypeError
        If ``scaling`` is neither a mapping nor None.

    Notes
    -----
    The formulas, parameter names, defaults and precedence rules follow ``transformers``'
    ``modeling_rope_utils.py``; the arithmetic is float64 instead of float32, so results
    agree with ``transformers`` to float32 precision, not bit for bit.

    Examples
    --------
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    >>> inv_freq, attention_factor = rope_frequencies(8, base=10000.0, scaling=yarn)
    >>> (inv_freq / rope_frequencies(8)[0]).round(6).tolist()  # fast pairs kept, slow ones / 4
    [1.0, 1.0, 0.625, 0.25]
    >>> round(attention_factor, 6)  # 0.1 * ln(4) + 1
    1.138629
    """
    dim = _check_dim(dim)
    base = _check_real(base, "base")
    if seq_len is not None:
        seq_len = _check_count(seq_len, "seq_len")
    if max_position_embeddings is not None:
        max_position_embeddings = _check_count(max_position_embeddings, "max_position_embeddings")
    rope_type = _resolve_rope_type(scaling)
    params: Mapping[str, Any] = {} if scaling is None else scaling
    theta = params.get("rope_theta")
    if theta is not None and _check_real(theta, _key("rope_theta")) != base:
        raise ValueError(
            f"scaling['rope_theta'] is {theta!r} but base is {base!r}; pass "
            f"base=scaling['rope_theta'] (rope_kwargs_from_config does this for whole configs)"
        )
    inv_freq, attention_factor = _VARIANTS[rope_type](
        dim, base, params, seq_len, max_position_embeddings
    )
    return np.ascontiguousarray(inv_freq, dtype=np.float64), float(attention_factor)


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
    ValueError
        If an argument is out of range or the result is not a positive even number.

    Examples
    --------
    >>> rotary_dim_from_config(128, 0.75)
    96
    """
    if isinstance(head_dim, (bool, np.bool_)) or not isinstance(head_dim, numbers.Integral):
        raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
    head_dim = int(head_dim)
    if head_dim <= 0:
        raise ValueError(f"head_dim must be a positive int, got {head_dim}")
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


def _merge_rope_dicts(config: Mapping[str, Any], layer_type: str | None) -> dict[str, Any]:
    """The config's rope dict: ``rope_parameters`` and/or ``rope_scaling`` (must agree)."""
    merged: dict[str, Any] = {}
    for name in ("rope_parameters", "rope_scaling"):
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"config[{name!r}] must be a dict or null, got {value!r}")
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
    config: Mapping[str, Any], rope: Mapping[str, Any], key: str, default: Any
) -> Any:
    """``key`` from the top level of ``config`` or from its rope dict; they must agree."""
    top, inner = config.get(key), rope.get(key)
    if top is not None and inner is not None and top != inner:
        raise ValueError(
            f"config[{key!r}] ({top!r}) and the rope dict's {key!r} ({inner!r}) disagree; "
            f"keep only one"
        )
    if inner is not None:
        return inner
    return default if top is None else top


def rope_kwargs_from_config(
    config: Mapping[str, Any],
    *,
    seq_len: int | None = None,
    layer_type: str | None = None,
) -> dict[str, Any]:
    """RoPE arguments for :func:`fastpe.apply_rope` read from a Hugging Face config dict.

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
        ``{"layout": "half", "base": float, "rotary_dim": int, "head_dim": int,
        "scaling": dict | None, "max_position_embeddings": int | None}`` (plus
        ``"seq_len"`` when given). ``layout`` is ``"half"`` because the ``transformers``
        modeling code for these configs rotates with ``rotate_half``.
        ``scaling`` is a fresh dict holding the scaling parameters only: ``rope_type`` set
        (from the legacy ``type`` if need be, which is dropped), ``rope_theta`` and
        ``partial_rotary_factor`` removed (they are in ``base`` and ``rotary_dim``), and a
        top-level ``original_max_position_embeddings`` copied in; it is ``None`` when the
        rope type is ``default``. ``head_dim`` is not an ``apply_rope`` argument: pop it
        (``kw.pop("head_dim")``) and use it to reshape ``(..., num_heads * head_dim)``
        projections into heads before splatting the rest, ``apply_rope(x, **kw)``.

    Raises
    ------
    ValueError
        If a needed key is missing or invalid, values given twice disagree, or the scaling
        parameters are invalid (the config is checked by computing its frequencies with
        :func:`rope_frequencies`, so errors surface here rather than mid-model).

    Notes
    -----
    The ``transformers`` modeling code for these configs rotates in the *half* layout
    (``rotate_half``), hence ``layout="half"`` in the result; to rotate in the interleaved
    layout instead, convert the q/k weights with
    :func:`fastpe.layout.half_to_interleaved_weights` and override ``layout``.

    Examples
    --------
    >>> config = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
    ...           "max_position_embeddings": 131072,
    ...           "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
    ...                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...                            "original_max_position_embeddings": 8192}}
    >>> kw = rope_kwargs_from_config(config)
    >>> kw["base"], kw["rotary_dim"], kw.pop("head_dim"), kw["scaling"]["factor"]
    (500000.0, 128, 128, 8.0)
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (a parsed config.json), got {type(config)}")
    rope = _merge_rope_dicts(config, layer_type)

    base = _check_real(_config_value(config, rope, "rope_theta", 10000.0), "rope_theta")
    partial = _config_value(config, rope, "partial_rotary_factor", 1.0)

    head_dim = config.get("head_dim")
    if head_dim is None:
        hidden_size = config.get("hidden_size")
        num_heads = config.get("num_attention_heads")
        if hidden_size is None or num_heads is None:
            raise ValueError(
                "config needs 'head_dim', or 'hidden_size' and 'num_attention_heads' to derive it"
            )
        head_dim = _check_count(hidden_size, "config['hidden_size']") // _check_count(
            num_heads, "config['num_attention_heads']"
        )
    head_dim = _check_count(head_dim, "head_dim")
    rotary_dim = rotary_dim_from_config(head_dim, partial)

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
            original = _config_value(config, rope, "original_max_position_embeddings", None)
            if original is not None:
                scaling["original_max_position_embeddings"] = original

    # Validate now: raises for missing keys, wrong lengths, bad values.
    rope_frequencies(
        rotary_dim, base=base, scaling=scaling, seq_len=seq_len, max_position_embeddings=max_pos
    )
    kwargs: dict[str, Any] = {
        "layout": "half",
        "base": base,
        "rotary_dim": rotary_dim,
        "head_dim": head_dim,
        "scaling": scaling,
        "max_position_embeddings": max_pos,
    }
    if seq_len is not None:
        kwargs["seq_len"] = int(seq_len)
    return kwargs
