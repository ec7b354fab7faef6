"""How often float32 tables in the two layouts disagree (see ``fastpe.sinusoidal_table``).

Usage::

    python bench/layout_ties.py          # 3 tables of 262144 x 1024 (805 million values)

Interleaved float32 rows are stepped from row to row, half-layout rows folded from their
anchor; both are within 1 ulp, and they can differ only where a value lies within about
2**-50 of a float32 rounding tie. This counts the values that differ.
"""

from __future__ import annotations

import sys

import fastpe


def main() -> int:
    n, dim = 262144, 1024
    half = dim // 2
    total = differ = 0
    for offset in (0, 10**6, 10**8):
        a = fastpe.sinusoidal_table(n, dim, offset=offset, layout="interleaved")
        h = fastpe.sinusoidal_table(n, dim, offset=offset, layout="half")
        d = int((a[:, 0::2] != h[:, :half]).sum() + (a[:, 1::2] != h[:, half:]).sum())
        print(f"offset {offset}: {d} of {a.size} values differ", flush=True)
        total += a.size
        differ += d
    print(f"total: {differ} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
