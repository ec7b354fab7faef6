"""In-cache ratios at 4-32 MiB: fastpe against its yardstick where the array stays in cache.

Usage::

    python bench/incache.py              # 4, 8, 16, 32 MiB, 3 runs, median and range per row
    python bench/incache.py --runs 5 --repeat 21
    python bench/incache.py --off plain_direct   # with a mode of fastpe._engine.MODES off
                                                 # (that one is off on znver3 already:
                                                 # fastpe._engine.plain_direct_cpu)
    python bench/incache.py --match bfloat16     # only the ops with the word "bfloat16"

A chunk of a pipeline (1-32 MiB) stays in the last-level cache between calls, where the
bandwidth yardstick runs far faster than memory, so the same kernel that streams at memory
speed can be limited by its own work there. For RoPE (``(4, seq, 32, 128)`` in place, half
layout; rows ``interleaved``: interleaved pairs), the interleaved table (``(rows, 1024)``
into ``out=``; rows ``half``: the half layout; rows ``float64``: float64 values) and
``add_sinusoidal`` (``(8, seq, 1024)`` in place), float32 where not said, and RoPE on
float16 and bfloat16 (the same shape, twice the elements per MiB: the yardstick streams the
same bytes as unsigned integers; bfloat16 also interleaved, and only where ml_dtypes is
installed), and ``add_sinusoidal`` on bfloat16 likewise, each size
runs the fast call interleaved with its yardstick (``scale`` for in-place work, ``fill``
for the table: ``fastpe._timing``, the roofline's harness), ``--repeat`` pairs, and the
figure is the median of the per-pair ratios ``t_yardstick / t_fast``. The table runs
``--runs`` times; each row gives every run's fraction and their median and range, none set
aside, and whether the array is smaller than twice the last-level cache counted on
(``fastpe._timing.cache_resident``: the OS's figure, at most 128 MiB). The target (issue
13) is >= 60% of the yardstick at 8-32 MiB.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import fastpe
from fastpe import _engine, _timing

SIZES_MIB = (4, 8, 16, 32)
TARGET = 0.60


def _op_dtype(op: str) -> np.dtype:
    """The 16-bit dtype an op's name says (bfloat16, float16), else float32."""
    if "bfloat16" in op:
        import ml_dtypes  # the [bf16] extra; rows skipped without it (main)

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float16 if "float16" in op else np.float32)


def build(op: str, mib: int):
    """``(array, fast call, writes_only)`` for ``op`` at ``mib`` MiB (float32; float64 for
    ``sinusoidal_table float64``; float16 or bfloat16 for ``apply_rope float16``,
    ``apply_rope bfloat16`` and ``add_sinusoidal bfloat16``, whose yardstick runs on the
    same bytes as ``uint16``; RoPE in the half layout unless the op says ``interleaved``)."""
    n = (mib << 20) // 4
    if op.startswith("apply_rope"):
        dt = _op_dtype(op)
        n = n * 4 // dt.itemsize
        layout = "interleaved" if "interleaved" in op else "half"
        x = np.random.default_rng(0).standard_normal((4, n // (4 * 32 * 128), 32, 128))
        x = x.astype(dt)
        return x, (lambda: fastpe.apply_rope(x, out=x, layout=layout)), False
    if op.startswith("sinusoidal_table"):
        dt = np.float64 if op.endswith("float64") else np.float32
        layout = "half" if op.endswith("half") else "interleaved"
        t = np.zeros(((mib << 20) // (1024 * np.dtype(dt).itemsize), 1024), dt)
        return t, (lambda: fastpe.sinusoidal_table(t.shape[0], 1024, out=t, layout=layout)), True
    dt = _op_dtype(op)
    n = n * 4 // dt.itemsize
    x = np.random.default_rng(0).standard_normal((8, n // (8 * 1024), 1024)).astype(dt)
    return x, (lambda: fastpe.add_sinusoidal(x, out=x)), False


def _has_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=15, help="interleaved pairs per row and run")
    ap.add_argument(
        "--off",
        choices=list(_engine.MODES),
        help="a mode of fastpe._engine.MODES off for the whole run (to compare with a run "
        "without: alternate the two invocations)",
    )
    ap.add_argument(
        "--match",
        default="",
        help="only the ops whose name holds each word of this text as a word of its own",
    )
    args = ap.parse_args(argv)
    if args.off:
        _engine.MODES[args.off] = False
    table = [
        (op, mib)
        for op in (
            "apply_rope",
            "apply_rope interleaved",
            "sinusoidal_table",
            "sinusoidal_table half",
            "sinusoidal_table float64",
            "add_sinusoidal",
            "apply_rope float16",
            "apply_rope bfloat16",
            "apply_rope bfloat16 interleaved",
            "add_sinusoidal bfloat16",
        )
        if set(args.match.split()) <= set(op.split())
        for mib in SIZES_MIB
    ]
    if not _has_ml_dtypes() and any("bfloat16" in op for op, _ in table):
        print(
            "bench/incache.py: ml_dtypes is not installed: bfloat16 rows left out", file=sys.stderr
        )
        table = [(op, mib) for op, mib in table if "bfloat16" not in op]
    if not table:
        ap.error(f"--match {args.match!r} selects no row")
    got: list[list[float]] = [[] for _ in table]
    shapes: list[str] = []
    resident: list[bool] = []
    yard_names: list[str] = []
    for run in range(args.runs):
        for i, (op, mib) in enumerate(table):
            a, fast, writes = build(op, mib)
            name, yard = _timing.yardstick(
                a.view(np.uint16) if a.itemsize == 2 else a, writes_only=writes
            )
            ratio, _, _ = _timing.interleaved(fast, yard, args.repeat)
            got[i].append(ratio)
            if run == 0:
                shapes.append("x".join(map(str, a.shape)))
                resident.append(_timing.cache_resident(a.nbytes))
                yard_names.append(name)
    llc = _timing.last_level_cache_bytes() >> 20
    share = _timing.cache_share_bytes() >> 20
    off = f"; mode {args.off} off" if args.off else ""
    print(
        f"last-level cache reported: {llc} MiB, counted on: {share} MiB; "
        f"{args.runs} runs of {args.repeat} pairs each{off}"
    )
    print(
        "| op | MiB | shape | yardstick | in cache | % of yardstick per run "
        "| median (range) | target (>= 60% at 8-32 MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for i, (op, mib) in enumerate(table):
        pct = [100 * r for r in got[i]]
        med = statistics.median(pct)
        if mib < 8:
            verdict = "-"
        else:
            verdict = "met" if med >= 100 * TARGET else "missed"
        runs = ", ".join(f"{p:.0f}%" for p in pct)
        print(
            f"| {op} | {mib} | {shapes[i]} | {yard_names[i]} | {'yes' if resident[i] else 'no'} "
            f"| {runs} | {med:.0f}% ({min(pct):.0f}-{max(pct):.0f}%) | {verdict} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
