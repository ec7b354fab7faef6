"""Kernel for fractional positions (diffusion timesteps such as 999.5). Private.

Integer positions go to the table kernels of :mod:`fastpe._kernels`, which fold cos/sin
from exact anchors by angle addition over the position's digits; a fractional position
has no digits to fold, so each value here is computed directly: the angle ``p * (wh + wl)``
carried as ``th + tl`` by an error-free product (as in ``fastpe.reference.sincos``), libm's
``sin``/``cos`` of ``th``, and of ``tl`` by its Taylor series when ``|tl| < 2**-26`` (the
usual case: ``tl`` is the product's rounding error, at most an ulp of ``th``), where the
first omitted terms are below 2**-78 and 2**-104. Two libm calls per value instead of four.
"""

from __future__ import annotations

import math

from .._config import kernel
from .angles import _two_prod_err

_TAYLOR = 2.0**-26


@kernel()
def float_rows(pos, wh, wl, order, out):
    """``out[r]`` = sin/cos of ``pos[r] * (wh + wl)`` in ``order`` (0 interleaved,
    1 ``[sin | cos]``, 2 ``[cos | sin]``); ``out`` is float64 ``(len(pos), 2 * len(wh))``."""
    n = wh.shape[0]
    for r in range(pos.shape[0]):
        p = pos[r]
        for i in range(n):
            th = p * wh[i]
            tl = _two_prod_err(p, wh[i], th) + p * wl[i]
            s0 = math.sin(th)
            c0 = math.cos(th)
            if abs(tl) < _TAYLOR:
                sl = tl
                cl = 1.0 - 0.5 * tl * tl
            else:
                sl = math.sin(tl)
                cl = math.cos(tl)
            s = s0 * cl + c0 * sl
            c = c0 * cl - s0 * sl
            if order == 0:
                out[r, 2 * i] = s
                out[r, 2 * i + 1] = c
            elif order == 1:
                out[r, i] = s
                out[r, n + i] = c
            else:
                out[r, i] = c
                out[r, n + i] = s
    return 0.0
