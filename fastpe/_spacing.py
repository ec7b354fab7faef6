"""Exact frequencies of the sinusoidal conventions: ``scale * base**(-i / (n - shift))``.

fairseq, tensor2tensor, diffusers and guided-diffusion all space their ``n`` frequencies
geometrically and differ only in the denominator of the exponent (``n`` in the original
transformer and guided-diffusion, ``n - 1`` in fairseq and tensor2tensor, ``n - shift`` in
diffusers) and in a factor (tensor2tensor's ``min_timescale``, diffusers' ``scale``, which
multiplies the angle and so the frequency). As in :mod:`fastpe._freq`, each frequency is
computed with :mod:`decimal` at 50 digits (one exp, then a product per frequency) and
carried as a double-double ``hi + lo``: the mathematical value of the formula, not the
value the originals round to in float32 or float64 (see the README, "Conventions").
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from functools import lru_cache

import numpy as np

from ._freq import inv_freq_dd_unchecked

_PRECISION = 50


@lru_cache(maxsize=64)
def _spaced_dd_cached(n: int, base: float, shift: float, scale: float):
    hi = np.empty(n, dtype=np.float64)
    lo = np.empty(n, dtype=np.float64)
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        # w_i = scale * r**i, r = base**(-1 / (n - shift)): one exp, then a product per
        # frequency (as fastpe._freq.inv_freq_dd: far below the 2**-106 kept)
        ratio = (-Decimal(base).ln() / (Decimal(n) - Decimal(shift))).exp() if n else Decimal(1)
        w = Decimal(scale)
        for i in range(n):
            h = float(w)
            hi[i] = h
            lo[i] = float(w - Decimal(h))
            w *= ratio
    hi.flags.writeable = False
    lo.flags.writeable = False
    return hi, lo


def spaced_dd(n: int, base: float, shift: float = 0.0, scale: float = 1.0):
    """``(hi, lo, key)``: ``scale * base**(-i / (n - shift))`` for ``i < n`` as double-double.

    ``shift=0, scale=1`` is the transformer's ``base**(-2i/dim)`` and returns exactly the
    arrays of :func:`fastpe._freq.inv_freq_dd` (so a convention that shares that formula
    shares its values bit for bit). ``n - shift`` must not be zero (checked by the caller).
    ``key`` names the set for the kernels' table cache.
    """
    n, base, shift, scale = int(n), float(base), float(shift), float(scale)
    if shift == 0.0 and scale == 1.0:
        hi, lo = inv_freq_dd_unchecked(base, 2 * n)  # the callers check (their names)
        return hi, lo, ("default", base, 2 * n)
    hi, lo = _spaced_dd_cached(n, base, shift, scale)
    return hi, lo, ("spaced", n, base, shift, scale)
