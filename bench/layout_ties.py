"""How often float32 table values stepped by the recurrence differ from folded ones.

Usage::

    python bench/layout_ties.py          # 3 tables of 262144 x 1024 (805 million values)

float32 table rows of dim 1024 are stepped from row to row (in either layout:
``fastpe._engine.table_stepped``); folding each row from its anchor (the ``recurrence``
mode of ``fastpe._engine.MODES`` off) gives values within 1 ulp too, and the two can
differ only where a value lies within about 2**-50 of a float32 rounding tie. This counts
the values that differ, and checks that the two layouts hold the same values (they are
stepped alike).
"""

from __future__ import annotations

import sys

import numpy as np

import fastpe
from fastpe import _engine


def main() -> int:
    n, dim = 262144, 1024
    half = dim // 2
    total = differ = apart = 0
    for offset in (0, 10**6, 10**8):
        a = fastpe.sinusoidal_table(n, dim, offset=offset, layout="interleaved")
        h = fastpe.sinusoidal_table(n, dim, offset=offset, layout="half")
        apart += int(np.count_nonzero(a[:, 0::2] != h[:, :half]))
        apart += int(np.count_nonzero(a[:, 1::2] != h[:, half:]))
        del h
        saved = _engine.MODES["recurrence"]
        _engine.MODES["recurrence"] = False
        try:
            f = fastpe.sinusoidal_table(n, dim, offset=offset, layout="interleaved")
        finally:
            _engine.MODES["recurrence"] = saved
        d = int(np.count_nonzero(a != f))
        print(f"offset {offset}: {d} of {a.size} values differ", flush=True)
        total += a.size
        differ += d
    print(f"total: {differ} of {total} stepped values differ from folded ones")
    print(f"interleaved against half layout: {apart} values differ")
    return 1 if apart else 0


if __name__ == "__main__":
    sys.exit(main())
