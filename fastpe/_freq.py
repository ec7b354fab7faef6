"""Inverse frequencies as double-double numbers.

The angle of pair ``i`` at position ``p`` is ``p * base**(-2i/dim)``. At long positions
(p ~ 2**24) the float64 rounding of the frequency alone moves the angle by ~1e-9, which is
many float32 ulps for a small sine. fastpe therefore carries each frequency as an
unevaluated sum ``hi + lo`` of two float64 numbers (about 106 bits), computed once with
Python's :mod:`decimal` at 50 significant digits and cached, and forms ``p * (hi + lo)``
with an error-free product (:func:`two_prod_err`). Both the reference and the kernels use
these frequencies and this product (the kernels compile the same function with numba).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

import numpy as np

_PRECISION = 50
_SPLIT = 134217729.0  # 2**27 + 1, the constant that splits a float64 into two halves


def two_prod_err(a, b, p):
    """Exact rounding error of the float64 product ``p = fl(a * b)``, by splitting.

    Needs no fused multiply-add. Plain arithmetic, so the same function serves NumPy arrays
    (the reference, the step tables) and scalars in compiled kernels.
    """
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@lru_cache(maxsize=64)
def _inv_freq_dd_cached(base: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
    n = dim // 2
    hi = np.empty(n, dtype=np.float64)
    lo = np.empty(n, dtype=np.float64)
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        # w_i = r**i, r = base**(-2/dim): one exp, then a product per pair (each rounds at
        # 10**-50 relative, so n of them stay far below the 2**-106 the pair keeps); an
        # exp per pair took 5 times as long (0.3 s at dim 16384)
        ratio = (Decimal(-2) * Decimal(base).ln() / Decimal(dim)).exp() if n else Decimal(1)
        w = Decimal(1)
        for i in range(n):
            h = float(w)
            hi[i] = h
            lo[i] = float(w - Decimal(h))
            w *= ratio
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo


# Every frequency is below this in magnitude, so that the angle of every position fastpe
# takes (up to 2**53) stays below 2**1000: the exact product position * frequency splits
# its factors (Dekker's split multiplies by 2**27 + 1) and must stay finite; beyond, the
# angle overflows float64 (a NaN row, or an error in the step tables).
FREQUENCY_LIMIT = 2.0**947


def check_frequencies(w, source: str) -> None:
    """Refuse frequencies that are not finite or reach ``FREQUENCY_LIMIT`` in magnitude,
    naming ``source`` (the arguments they come from)."""
    a = np.abs(np.asarray(w, dtype=np.float64))
    bad = ~(a < FREQUENCY_LIMIT)  # NaN too
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"frequency {float(np.asarray(w).flat[i])!r} (pair {i}) from {source}: "
            "frequencies must be finite and below 2**947 in magnitude, so that the angle "
            "position * frequency of every position (up to 2**53) stays within float64; "
            "pass parameters that give smaller frequencies"
        )


# Positions are within this in magnitude everywhere (fastpe._args.checks.MAX_POSITION).
_MAX_POSITION = 2**53


def angle_limit(wh, wl) -> int:
    """The largest magnitude of a position whose angle ``p * (wh + wl)`` the double-double
    frequencies give to float64's precision.

    A frequency carried inexactly (a nonzero ``wl``: about 106 bits of an irrational value)
    puts an error of about ``|p * w| * 2**-106`` into the angle, which stays within float64's
    last place while ``|p * w| <= 2**53``: at every position fastpe takes (up to 2**53)
    when such frequencies are at most 1, the transformer convention's at any base of 1 or
    more. Above 1 (a base below 1, a tensor2tensor ``min_timescale`` above 1, a timestep
    ``scale``, ...) the limit is ``floor(2**53 / w)`` for the largest of them (a sufficient
    bound: the error reaches a few units of the last place only some way beyond). Frequencies held
    exactly (``wl`` zero: ``inv_freq``, the scaled sets, ``frequencies=``) give exact
    angles at any position.
    """
    wh = np.asarray(wh)
    if wh.size == 0:
        return _MAX_POSITION
    inexact = np.asarray(wl) != 0
    if not inexact.any():
        return _MAX_POSITION
    w = float(np.abs(wh[inexact]).max())
    if w <= 1.0:
        return _MAX_POSITION
    return math.floor(Fraction(_MAX_POSITION) / Fraction(w))  # exact: lim * w <= 2**53


_LIMITS: dict = {}  # angle_limit by a frequency set's cache key


def angle_limit_of(key, wh, wl) -> int:
    """:func:`angle_limit`, cached under the frequency set's ``key`` (the conventions'
    small calls check it on every call)."""
    lim = _LIMITS.get(key)
    if lim is None:
        lim = angle_limit(wh, wl)
        if len(_LIMITS) >= 256:
            _LIMITS.clear()
        _LIMITS[key] = lim
    return lim


def check_angles(pmax, wh, wl, source: str, limit: int | None = None) -> None:
    """Refuse positions up to ``pmax`` in magnitude where they exceed :func:`angle_limit`
    (``limit``, when the caller has it), naming ``source`` (the arguments the frequencies
    come from), before anything is written."""
    lim = angle_limit(wh, wl) if limit is None else limit
    if pmax <= lim:
        return
    inexact = np.asarray(wl) != 0
    w = float(np.abs(np.asarray(wh)[inexact]).max())
    raise ValueError(
        f"positions up to {pmax!r} in magnitude with frequencies up to {w!r} (from {source}) "
        f"make angles beyond 2**53, where the frequencies, carried to about 106 bits, no "
        f"longer guarantee the angle to float64's precision: keep positions within {lim} "
        f"(2**53 / {w!r}), or choose parameters whose frequencies stay at or below 1"
    )


def inv_freq_dd(base: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(hi, lo)``: ``base**(-2i/dim)`` for ``i < dim // 2`` as double-double.

    ``hi`` is the correctly rounded float64 value and ``lo`` the float64 nearest to the
    remainder, so ``hi + lo`` carries about 106 bits. The arrays are read-only and cached.
    A base below 1 whose frequencies reach ``FREQUENCY_LIMIT`` is refused.
    """
    hi, lo = inv_freq_dd_unchecked(base, dim)
    if hi.size and hi[-1] >= FREQUENCY_LIMIT:  # the largest when base < 1
        check_frequencies(hi, f"base={base!r} with dim={dim}")
    return hi, lo


def inv_freq_dd_unchecked(base: float, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`inv_freq_dd` for callers that check the frequencies themselves, naming their
    own arguments (the conventions' ``max_period``, a grid's ``dim``)."""
    return _inv_freq_dd_cached(float(base), int(dim))


def scaled_dd(
    inv_freq: np.ndarray, source: str = "the scaled frequencies"
) -> tuple[np.ndarray, np.ndarray]:
    """Double-double form of frequencies known only as float64 (``lo`` is zero); refused
    as :func:`check_frequencies` does, naming ``source``."""
    hi = np.ascontiguousarray(inv_freq, dtype=np.float64)
    check_frequencies(hi, source)
    return hi, np.zeros_like(hi)


def sincos_dd(p, wh, wl, sin, cos):
    """``sin`` and ``cos`` of ``p * (wh + wl)``, the angle carried in double-double.

    ``sin``/``cos`` are the functions to apply (NumPy's in the reference, libm's for the
    step tables); the kernels compile the same steps in ``fastpe._kernels.angles``.
    """
    th = p * wh
    tl = two_prod_err(p, wh, th) + p * wl
    s0, c0 = sin(th), cos(th)
    sl, cl = sin(tl), cos(tl)
    return s0 * cl + c0 * sl, c0 * cl - s0 * sl
