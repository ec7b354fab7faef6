"""Context-extension RoPE frequencies: Hugging Face's ``rope_scaling`` formulas in float64.

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

Reading a whole config (rope theta, head size, partial rotary factor, scaling, context
length) is the job of :mod:`fastpe.hf_config`; its ``rope_kwargs_from_config``,
``head_dim_from_config`` and ``rotary_dim_from_config`` can also be imported from here.

Errors follow one rule: ``TypeError`` for a value of the wrong type (a string where a number
belongs, a float where a count belongs), ``ValueError`` for a value of the right type that
is not allowed; messages name the argument or key, the value and the fix.

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

from . import _args as v

__all__ = [
    "KNOWN_ROPE_TYPES",
    "ROPE_TYPE_ALIASES",
    "rope_frequencies",
]

#: The ``rope_type`` values :func:`rope_frequencies` understands.
KNOWN_ROPE_TYPES: tuple[str, ...] = (
    "default",
    "linear",
    "dynamic",
    "yarn",
    "longrope",
    "llama3",
    "proportional",
    "ntk_alpha",
)

#: Older names of rope types, read as the type they name (``"su"``: Phi-3 128k's name for
#: LongRoPE, which ``transformers`` renames to ``"longrope"``).
ROPE_TYPE_ALIASES: dict[str, str] = {"su": "longrope"}

_Variant = Callable[..., "tuple[np.ndarray, float]"]

# The config readers of fastpe.hf_config, importable from here as before the split.
_FROM_HF_CONFIG = ("head_dim_from_config", "rope_kwargs_from_config", "rotary_dim_from_config")


def __getattr__(name: str) -> Any:
    # Imported on first access: fastpe.hf_config imports this module.
    if name in _FROM_HF_CONFIG:
        from . import hf_config

        return getattr(hf_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- validation


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_real(value: object, name: str, *, positive: bool = True) -> float:
    """``value`` as a finite float (> 0 when ``positive``).

    TypeError unless it is a real number (bool is not); ValueError if it is not finite or,
    with ``positive``, not > 0.
    """
    if not _is_real(value):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}; "
            f"write it as a number, e.g. 4.0"
        )
    out = float(value)  # type: ignore[arg-type]
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and out <= 0.0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def _check_int(value: object, name: str) -> int:
    """``value`` as an int: TypeError unless an integer (``4096.0`` is not)."""
    return v.check_int(value, name)


def _check_count(value: object, name: str) -> int:
    """``value`` as an int > 0: TypeError unless an integer, ValueError if not > 0."""
    out = _check_int(value, name)
    if out <= 0:
        raise ValueError(f"{name} must be a positive integer, got {out}")
    return out


def _check_dim(dim: object) -> int:
    dim = _check_int(dim, "dim")
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


def _need_real(
    params: Mapping[str, Any],
    key: str,
    rope_type: str,
    *,
    minimum: float | None = None,
    positive: bool = True,
) -> float:
    """Read a required number from ``params`` (a ``ValueError`` names it when missing)."""
    out = _get_real(params, key, rope_type, required=True, minimum=minimum, positive=positive)
    assert out is not None  # required=True raised otherwise
    return out


def _get_count(params: Mapping[str, Any], key: str) -> int | None:
    value = params.get(key)
    return None if value is None else _check_count(value, _key(key))


def _resolve_rope_type(scaling: Mapping[str, Any] | None) -> str:
    """The rope type named by ``scaling``: ``"rope_type"``, else the legacy ``"type"``.

    When both are set, ``"rope_type"`` wins, as in ``transformers`` (which writes both:
    ``{"type": "mrope", "rope_type": "default", ...}`` is how transformers 5 saves a Qwen2-VL
    config). Aliases (:data:`ROPE_TYPE_ALIASES`) resolve to the type they name.
    """
    if scaling is None:
        return "default"
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be a mapping such as a config's 'rope_scaling' dict, or None, "
            f"got {type(scaling).__name__}"
        )
    rope_type = scaling.get("rope_type")
    legacy = scaling.get("type")
    for key, value in (("rope_type", rope_type), ("type", legacy)):
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"{_key(key)} must be a string such as 'yarn', got {value!r} of type "
                f"{type(value).__name__}"
            )
    if rope_type is None:
        rope_type = "default" if legacy is None else legacy
    rope_type = ROPE_TYPE_ALIASES.get(rope_type, rope_type)
    if rope_type not in KNOWN_ROPE_TYPES:
        raise ValueError(
            f"unknown rope_type {rope_type!r}; known rope types are "
            f"{', '.join(map(repr, KNOWN_ROPE_TYPES))} (and the alias 'su' of 'longrope')"
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
    factor = _need_real(params, "factor", "linear", minimum=1.0)
    return _default_inv_freq(dim, base) / factor, 1.0


def _ntk_alpha_base(dim, base, params) -> float:
    """The base of ``"ntk_alpha"``: ``base * alpha ** (dim / (dim - 2))``, in float64."""
    alpha = _need_real(params, "alpha", "ntk_alpha")
    if dim < 4:
        raise ValueError(
            f"rope_type 'ntk_alpha' requires dim >= 4 (it raises alpha to dim / (dim - 2)), "
            f"got {dim}"
        )
    return float(base * alpha ** (dim / (dim - 2)))


def _ntk_alpha(dim, base, params, seq_len, max_pos):
    return _default_inv_freq(dim, _ntk_alpha_base(dim, base, params)), 1.0


def _dynamic(dim, base, params, seq_len, max_pos):
    if params.get("alpha"):
        raise ValueError(
            f"scaling['alpha'] = {params['alpha']!r} in a 'dynamic' dict: HunYuan's code reads "
            f"it as a fixed NTK-alpha base (rope_type 'ntk_alpha': base * alpha ** (dim / "
            f"(dim - 2))) while transformers' generic 'dynamic' ignores it; fastpe does not "
            f"guess which: pass rope_type 'ntk_alpha', or drop 'alpha'"
        )
    factor = _need_real(params, "factor", "dynamic", minimum=1.0)
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
    given = _get_real(params, "factor", "yarn")
    derived = given is None
    if given is not None:
        factor = given
    elif explicit_original is None or max_pos is None:
        raise ValueError(
            "rope_type 'yarn' requires scaling['factor'], which is missing (it can only be "
            "derived as max_position_embeddings / "
            "scaling['original_max_position_embeddings'] when both are given)"
        )
    else:
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
    # transformers: rope_parameters.get("truncate", True), then `if truncate`: absent is
    # True, an explicit null is False
    truncate = params.get("truncate", True)
    if truncate is None:
        truncate = False
    elif not isinstance(truncate, (bool, np.bool_)):
        raise TypeError(
            f"scaling['truncate'] must be True or False, got {truncate!r} of type "
            f"{type(truncate).__name__}"
        )

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
        raise TypeError(f"{_key(key)} must be a list of numbers, one per pair, got {value!r}")
    try:
        items = list(value)
    except TypeError:
        raise TypeError(
            f"{_key(key)} must be a list of numbers, one per pair, got {value!r}"
        ) from None
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
    factor = _need_real(params, "factor", "llama3", minimum=1.0)
    low_freq_factor = _need_real(params, "low_freq_factor", "llama3")
    high_freq_factor = _need_real(params, "high_freq_factor", "llama3")
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


def _proportional(dim, base, params, seq_len, max_pos):
    # Gemma 4's global layers: the first int(p * dim // 2) pairs turn with frequencies
    # base ** (-2i / dim) (exponent over the whole head, not over the rotated part), the rest
    # not at all (frequency 0); all divided by factor.
    factor = _get_real(params, "factor", "proportional")
    factor = 1.0 if factor is None else factor
    proportion = params.get("partial_rotary_factor")
    if proportion is None:
        proportion = 1.0
    proportion = _check_real(proportion, _key("partial_rotary_factor"))
    if proportion > 1.0:
        raise ValueError(
            f"{_key('partial_rotary_factor')} must be in (0, 1] for rope_type 'proportional', "
            f"got {proportion!r}"
        )
    angles = int(proportion * dim // 2)
    inv_freq = np.zeros(dim // 2, dtype=np.float64)
    inv_freq[:angles] = _default_inv_freq(dim, base)[:angles]
    return inv_freq / factor, 1.0


_VARIANTS: dict[str, _Variant] = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
    "proportional": _proportional,
    "ntk_alpha": _ntk_alpha,
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
          ``mscale_all_dim``, ``attention_factor``, ``truncate`` (True when absent; an
          explicit null is False, as transformers reads it). An explicit
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
        - ``"proportional"`` (Gemma 4's global layers): ``partial_rotary_factor`` ``p``
          (default 1) and ``factor`` (default 1). Pairs ``i < int(p * dim // 2)`` get
          ``1 / base ** (2i / dim) / factor`` (the exponent is over all ``dim`` channels),
          the others frequency 0 (not rotated); attention factor 1. Here ``dim`` is the
          whole head, and ``partial_rotary_factor`` stays in the dict.
        - ``"ntk_alpha"`` (HunYuan, whose configs write it as ``"dynamic"`` with an
          ``alpha``): ``alpha`` (> 0); the default frequencies of the base ``base * alpha **
          (dim / (dim - 2))``, fixed (no sequence length), attention factor 1. A
          ``"dynamic"`` dict holding a non-zero ``alpha`` is refused, since transformers'
          generic ``dynamic`` ignores it and HunYuan's code does not.

        ``scaling["rope_type"]`` wins over a legacy ``scaling["type"]`` that names another
        type, as in ``transformers``; ``"su"`` (Phi-3 128k) is read as ``"longrope"``.
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
    TypeError
        For a value of the wrong type: ``scaling`` not a mapping or None; ``dim``,
        ``seq_len``, ``max_position_embeddings`` or a count in ``scaling`` not an integer
        (``4096.0`` is not); ``base`` or a number in ``scaling`` not a real number; a
        ``rope_type`` that is not a string; a factor list that is not a list;
        ``truncate`` not a bool.
    ValueError
        For a value of the right type that is not allowed: an unknown rope type, a missing
        required key, a factor list of the wrong length, a factor < 1 where the formula
        needs >= 1, and non-finite, non-positive or otherwise invalid values. The message
        names the offending key.

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
    base = v.check_base(base)
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
