"""Roofline ratios at ~1 GiB, measured in one process: fastpe against the machine's limit.

Usage::

    python bench/roofline.py            # the table 3 times, then median and range per row
    python bench/roofline.py --runs 5   # 5 times
    python bench/roofline.py --json     # machine-readable rows
    python bench/roofline.py --quick    # 256 MiB arrays (partly cache-resident: reads high)
    python bench/roofline.py --scale 1024 --runs 2 --repeat 2   # a smoke run, ~1 MiB arrays
    python bench/roofline.py --match spread   # only the rows whose label holds "spread"

For each case the fast kernel and its bandwidth yardstick run interleaved (fast, yardstick,
fast, ...) on the same array, ``--repeat`` times, with fastpe's timing harness
(``fastpe._timing``: one pause, then the pairs back to back); the figure is the median of
the per-pair ratios ``t_yardstick / t_fast``. The yardsticks stream the same bytes on
fastpe's own thread pool and work split: ``scale`` (``a *= s``: read + write, for in-place
RoPE and add_sinusoidal), ``scale[:r]`` (partial rotary: only the ``r`` rotated channels of
each row, the bytes the kernel rewrites) and, for tables, the fastest way the machine
writes those bytes: ``fill_stream`` (``a[:] = v`` by streaming stores, which write memory
without first reading each line; ``fill``, the same by plain stores, for arrays that may
stay in cache). 100% means as fast as streaming those bytes through memory; the machine is
shared, so only ratios taken in one run are quoted. The row ``fill`` (plain stores) against
``fill_stream`` shows what the streaming stores gain over plain ones on the host, the
yardstick of the tables before fastpe wrote large tables by streaming stores. The last rows
compare 1 and all threads, next to the yardstick's own gain from the extra cores.

The whole table runs ``--runs`` times (default 3), and each row is summed up as the median
and the range of its fractions over the runs, none set aside. The machine's memory moves
between two states, set by its neighbours: ``a *= s`` at about 93 GiB/s read + write (20-25
ms per GiB of array: "fast") and at about 50 GiB/s (40-46 ms/GiB: "slow"). Each run of a
row is put in one of them from the time per GiB of an ``a *= s`` over whole rows (the
``scale`` yardstick): its own where that is its yardstick, else that of the nearest row of
the same run that has one (``fill``, ``fill_stream`` and ``scale[:r]`` move memory in
other patterns, so their own times per GiB do not tell the state; a run with no such
row, as ``--match`` may select, times an ``a *= s`` over 1 GiB of float32 for it, divided
by ``--scale``): ``fast`` up to 30
ms/GiB, ``slow`` from 36 ms/GiB, ``between`` in between. Each row also gets the median of
its slow runs and of its fast runs, with their counts, and whether each reaches the target
of that state (>= 90% of the yardstick in the slow state, >= 80% in the fast one; "between"
runs are judged by neither; the ``fill`` row, a yardstick itself, by none).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import fastpe
from fastpe import _engine, _timing


def _fill_random(x: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    flat = x.reshape(-1)
    for i in range(0, flat.size, 1 << 24):
        flat[i : i + (1 << 24)] = rng.standard_normal(min(1 << 24, flat.size - i))


def cases(scale: int):
    s = scale  # 1 for ~1 GiB, 4 for ~256 MiB
    rope3 = (64, 32768 // s, 128)  # (batch, seq, head_dim): one head per position
    rope4 = (4, 16384 // s, 32, 128)
    wide = (8, 16384 // s, 2048)  # one 2048-channel head: 8 KiB of cos/sin per position
    for shape in (rope3, rope4):
        yield "apply_rope", shape, np.float32, {"layout": "interleaved"}
        yield "apply_rope", shape, np.float32, {"layout": "half"}
        yield "apply_rope", shape, np.float32, {"layout": "half", "rotary_dim": 64}
        yield "apply_rope", shape, np.float32, {"layout": "interleaved", "positions": "arange"}
        # one offset per batch row: rows share each position's cos/sin by walking positions
        yield "apply_rope", shape, np.float32, {"layout": "interleaved", "offset": "per_row"}
        if shape == rope3:
            # offsets spread over far more than a sequence (batched decoding or chunked
            # prefill at unrelated positions): every row needs cos/sin of its own
            yield "apply_rope", shape, np.float32, {"layout": "interleaved", "offset": "spread"}
        # (batch, seq) positions that restart inside each row (packed sequences): each row
        # needs its own cos/sin, shared only between the heads of a position
        yield "apply_rope", shape, np.float32, {"layout": "interleaved", "positions": "packed"}
    # multi-axis RoPE: Qwen2-VL's M-RoPE sections and Qwen3-VL's interleaved t/h/w on
    # (3, seq) positions of video patches; a vision tower's axial RoPE (given frequencies)
    # on the (row, column) of 4096 x 51 patches, 16 heads of 80 channels
    mrope = [0] * 16 + [1] * 24 + [2] * 24
    inter = [(1 if j % 3 == 1 and j < 60 else 2 if j % 3 == 2 and j < 60 else 0) for j in range(64)]
    for axes in (mrope, inter):
        yield (
            "apply_rope",
            rope4,
            np.float32,
            {"layout": "half", "positions": "thw", "pair_axes": axes},
        )
    axial = fastpe.rope_kwargs_from_config(
        {"model_type": "qwen2_vl_vision", "embed_dim": 1280, "num_heads": 16}
    )
    yield (
        "apply_rope",
        (4096 * 51 // s, 16, 80),
        np.float32,
        dict(axial, positions="hw", seq_axis=0),
    )
    yield "apply_rope", wide, np.float32, {"layout": "interleaved"}
    yield "apply_rope", wide, np.float32, {"layout": "half"}
    yield "apply_rope", (2, 16384 // s, 32, 128), np.float64, {"layout": "half"}
    yield "apply_rope", (32, 32768 // s, 128), np.float64, {"layout": "interleaved"}
    yield "apply_rope", (32, 32768 // s, 128), np.float64, {"layout": "half"}
    yield "fill", (262144 // s, 1024), np.float32, {}  # plain stores (see the docstring)
    yield "sinusoidal_table", (262144 // s, 1024), np.float32, {"layout": "interleaved"}
    yield "sinusoidal_table", (262144 // s, 1024), np.float32, {"layout": "half"}
    yield "sinusoidal_table", (131072 // s, 1024), np.float64, {"layout": "interleaved"}
    yield "add_sinusoidal", (8, 32768 // s, 1024), np.float32, {"layout": "interleaved"}
    yield "add_sinusoidal", (1, 262144 // s, 1024), np.float32, {"layout": "interleaved"}
    # 16-bit arrays (computed in float32, rounded once): twice the elements per GiB
    for dt in _half_dtypes():
        yield "apply_rope", (4, 32768 // s, 32, 128), dt, {"layout": "interleaved"}
        yield "apply_rope", (4, 32768 // s, 32, 128), dt, {"layout": "half"}
        yield "sinusoidal_table", (524288 // s, 1024), dt, {"layout": "interleaved"}
        yield "add_sinusoidal", (16, 32768 // s, 1024), dt, {"layout": "interleaved"}


def _half_dtypes():
    """float16, and ml_dtypes' bfloat16 where it is installed."""
    out = [np.dtype(np.float16)]
    try:
        import ml_dtypes
    except ImportError:
        return out
    return [*out, np.dtype(ml_dtypes.bfloat16)]


# A run's memory state from its yardstick's milliseconds per GiB of array, read + write
# (see the module docstring).
FAST_MS_PER_GIB = 30.0
SLOW_MS_PER_GIB = 36.0


def state(ms_per_gib: float) -> str:
    if ms_per_gib <= FAST_MS_PER_GIB:
        return "fast"
    if ms_per_gib >= SLOW_MS_PER_GIB:
        return "slow"
    return "between"


def yardstick_ms_per_gib(yard_ms: float, nbytes: int) -> float:
    """The yardstick's time per GiB of array."""
    return yard_ms / (nbytes / 2**30)


def run_states(rows: list[dict], probe_ms_per_gib: float | None = None) -> list[str]:
    """The memory state of each row of one run (see the module docstring): from the
    nearest row whose yardstick is ``scale``, else from ``probe_ms_per_gib`` (the run's
    own ``a *= s``, :func:`probe`), else from each row's own yardstick."""
    whole = [i for i, r in enumerate(rows) if r["yardstick"] == "scale"]
    out = []
    for i, r in enumerate(rows):
        if whole:
            ms = rows[min(whole, key=lambda k: abs(k - i))]["yardstick_ms_per_gib"]
        elif probe_ms_per_gib is not None:
            ms = probe_ms_per_gib
        else:
            ms = r["yardstick_ms_per_gib"]
        out.append(state(ms))
    return out


def probe(scale: int, repeat: int) -> float:
    """``a *= s`` over 1 GiB of float32 (divided by ``scale``), milliseconds per GiB, the
    median of ``repeat`` calls: the memory state of a run whose rows have no ``scale``
    yardstick of their own."""
    x = np.ones((2**28 // scale,), np.float32)
    _, yard = _timing.yardstick(x, writes_only=False)
    yard()
    ms = float(np.median([_timing.timed(yard) for _ in range(repeat)])) * 1e3
    return yardstick_ms_per_gib(ms, x.nbytes)


def _label(k, v, shape):
    if k == "pair_axes":
        a = np.asarray(v)
        kind = "sections" if np.all(np.diff(a) >= 0) else "cycled"
        return f"({int(a.max()) + 1} axes, {kind})"
    if k == "inv_freq":
        return "given"
    if isinstance(v, np.ndarray):
        if k == "positions" and v.ndim == 2 and v.shape[0] in (2, 3) and v.shape[0] != shape[0]:
            return f"({v.shape[0]}, seq) array"
        if k == "offset" and np.ptp(v) > 2 * shape[1]:
            return "array spread over 10**6"
        return "per-row array" if v.ndim == 2 else "array"
    return v


def build_case(op, shape, dtype, kw):
    """``(x, fast, kw)``: the filled array, the in-place call timed, its keyword arguments."""
    x = np.empty(shape, dtype=dtype)
    kw = dict(kw)
    if isinstance(kw.get("positions"), str) and kw["positions"] == "arange":
        kw["positions"] = np.arange(shape[1])
    if isinstance(kw.get("positions"), str) and kw["positions"] == "packed":
        # two sequences per row, split at 3/8 or 5/8
        s = shape[1]
        cut = [(3 + 2 * (b % 2)) * s // 8 for b in range(shape[0])]
        kw["positions"] = np.stack([np.r_[np.arange(c), np.arange(s - c)] for c in cut])
    if isinstance(kw.get("positions"), str) and kw["positions"] == "thw":
        p = np.arange(shape[1])  # frames of 64 x 64 patches
        kw["positions"] = np.stack([p // 4096, (p // 64) % 64, p % 64])
    if isinstance(kw.get("positions"), str) and kw["positions"] == "hw":
        p = np.arange(shape[0])  # rows of 51 patches
        kw["positions"] = np.stack([p // 51, p % 51])
    if kw.get("offset") == "per_row":
        kw["offset"] = 7 * np.arange(shape[0])
    elif kw.get("offset") == "spread":
        kw["offset"] = np.random.default_rng(1).integers(0, 10**6, shape[0])
    if op == "fill":
        x.fill(0)

        def fast():
            _engine.stream("fill", x)
    elif op == "sinusoidal_table":
        x.fill(0)

        def fast():
            fastpe.sinusoidal_table(shape[0], shape[1], out=x, **kw)
    else:
        _fill_random(x)
        f = fastpe.apply_rope if op == "apply_rope" else fastpe.add_sinusoidal

        def fast():
            f(x, out=x, **kw)

    return x, fast, kw


def _row_text(op, shape, dtype, kw) -> str:
    """A row's op, shape, dtype and options as :func:`cases` writes them (``offset=spread``,
    ``positions=packed``, ``layout=half``, ...), for ``--match``."""
    opts = ",".join(
        f"{k}={v if isinstance(v, str) else _label(k, v, shape)}" for k, v in kw.items()
    )
    return f"{op} {'x'.join(map(str, shape))} {np.dtype(dtype).name} {opts}"


def run_case(op, shape, dtype, kw, repeat):
    x, fast, kw = build_case(op, shape, dtype, kw)
    # 16-bit arrays: the yardstick streams the same bytes as unsigned integers (numba has no
    # float16 or bfloat16 arithmetic)
    bits = x.view(np.uint16) if x.itemsize == 2 else x
    yard_name, yard = _timing.yardstick(
        bits, writes_only=op in ("sinusoidal_table", "fill"), rotated=kw.get("rotary_dim")
    )
    ratio, tf, ty = _timing.interleaved(fast, yard, repeat)
    label = ",".join(f"{k}={_label(k, v, shape)}" for k, v in kw.items())
    return {
        "op": op,
        "shape": list(shape),
        "dtype": np.dtype(dtype).name,
        "options": label,
        "mib": x.nbytes / 2**20,
        "fast_ms": tf * 1e3,
        "yardstick": yard_name,
        "yardstick_ms": ty * 1e3,
        "yardstick_ms_per_gib": yardstick_ms_per_gib(ty * 1e3, x.nbytes),
        "fraction_of_roofline": ratio,
    }


def threads_rows(scale: int, repeat: int):
    """1 vs all threads, each kernel next to its yardstick at the same thread counts.

    ``cpu_per_wall`` is the process's CPU time over wall time during the fast calls (2.0:
    both cores busy throughout). The yardstick's own speedup is the most that a kernel
    limited by memory bandwidth can gain from more threads on this machine.
    """
    import numba

    rows = []
    full = numba.get_num_threads()
    for op in ("apply_rope", "sinusoidal_table"):
        if op == "apply_rope":
            x = np.empty((64, 32768 // scale, 128), np.float32)
            _fill_random(x)

            def fast(x=x):
                fastpe.apply_rope(x, out=x)
        else:
            x = np.zeros((262144 // scale, 1024), np.float32)

            def fast(x=x):
                fastpe.sinusoidal_table(x.shape[0], x.shape[1], out=x)

        _, yard = _timing.yardstick(x, writes_only=op == "sinusoidal_table")
        res = {}
        for n in sorted({1, full}):
            numba.set_num_threads(n)
            fast()
            yard()
            _timing.settle()
            tf, ty, cpu = [], [], []
            for _ in range(repeat):
                c = time.process_time()
                tf.append(_timing.timed(fast))
                cpu.append((time.process_time() - c) / tf[-1])
                ty.append(_timing.timed(yard))
            res[n] = (float(np.median(tf)), float(np.median(ty)), float(np.median(cpu)))
        numba.set_num_threads(full)
        rows += [
            {
                "op": op,
                "threads": n,
                "shape": list(x.shape),
                "fast_ms": f * 1e3,
                "yardstick_ms": y * 1e3,
                "speedup_vs_1_thread": res[1][0] / f,
                "yardstick_speedup_vs_1_thread": res[1][1] / y,
                "cpu_per_wall": c,
            }
            for n, (f, y, c) in res.items()
        ]
        del x
    return rows


def summarise(runs: list[list[dict]], probes: list | None = None) -> list[dict]:
    """One row per case: its runs' figures, states, and the median and range of the
    fraction; ``probes``: each run's :func:`probe`, or None."""
    out = []
    probes = probes or [None] * len(runs)
    states = [run_states(rows, p) for rows, p in zip(runs, probes)]
    for k, rows in enumerate(zip(*runs)):
        fr = [r["fraction_of_roofline"] for r in rows]
        by_state = {
            name: [f for f, st in zip(fr, (st[k] for st in states)) if st == name]
            for name in TARGETS
        }
        out.append(
            {
                **{k: rows[0][k] for k in ("op", "shape", "dtype", "options", "mib", "yardstick")},
                "fast_ms": [r["fast_ms"] for r in rows],
                "yardstick_ms": [r["yardstick_ms"] for r in rows],
                "yardstick_ms_per_gib": [r["yardstick_ms_per_gib"] for r in rows],
                "states": [st[k] for st in states],
                "fraction_median": float(np.median(fr)),
                "fraction_min": min(fr),
                "fraction_max": max(fr),
                **{
                    f"{name}_median": float(np.median(v)) if v else None
                    for name, v in by_state.items()
                },
                **{f"{name}_runs": len(v) for name, v in by_state.items()},
                # the plain fill is a yardstick, not a kernel of fastpe: no target
                "target": "-" if rows[0]["op"] == "fill" else target(by_state),
            }
        )
    return out


#: The issue's targets: the fraction of the yardstick to reach in each memory state.
TARGETS = {"slow": 0.90, "fast": 0.80}


def target(by_state: dict[str, list[float]]) -> str:
    """'met' or 'missed' per state that has runs: the median of that state's runs against
    its target ('between' runs are judged by neither)."""
    parts = [
        f"{name} {'met' if np.median(v) >= TARGETS[name] else 'missed'}"
        for name, v in by_state.items()
        if v
    ]
    return ", ".join(parts) if parts else "no slow or fast run"


def _state_cell(r: dict, name: str) -> str:
    m = r[f"{name}_median"]
    return f"{100 * m:.0f}% ({r[f'{name}_runs']})" if m is not None else "-"


def _nums(values, fmt="{:.1f}") -> str:
    return ", ".join(fmt.format(v) for v in values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="interleaved pairs per row and run")
    ap.add_argument("--runs", type=int, default=3, help="times the whole table runs")
    ap.add_argument("--quick", action="store_true", help="256 MiB arrays instead of ~1 GiB")
    ap.add_argument("--scale", type=int, default=None, help="divide the sizes by this (--quick: 4)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--match",
        default=None,
        help="only the rows whose op, shape, dtype or options contain this text (an A/B of "
        "one change); no threads rows",
    )
    args = ap.parse_args(argv)
    if args.runs < 1 or args.repeat < 1:
        ap.error("--runs and --repeat must be >= 1")
    scale = args.scale if args.scale is not None else (4 if args.quick else 1)
    if scale < 1:
        ap.error("--scale must be >= 1")
    runs: list[list[dict]] = []
    probes: list = []
    for i in range(args.runs):
        rows = []
        for op, shape, dtype, kw in cases(scale):
            if args.match is not None and args.match not in _row_text(op, shape, dtype, kw):
                continue
            rows.append(run_case(op, shape, dtype, kw, args.repeat))
            if not args.json:
                r = rows[-1]
                print(
                    f"run {i + 1}/{args.runs} | {r['op']} | {'x'.join(map(str, r['shape']))} | "
                    f"{r['dtype']} | {r['options']} | {r['fast_ms']:.1f} | {r['yardstick']} "
                    f"{r['yardstick_ms']:.1f} ({r['yardstick_ms_per_gib']:.0f} ms/GiB) | "
                    f"{100 * r['fraction_of_roofline']:.0f}% |",
                    file=sys.stderr,
                    flush=True,
                )
        if rows and not any(r["yardstick"] == "scale" for r in rows):
            probes.append(probe(scale, args.repeat))  # the run's memory state
            if not args.json:
                print(
                    f"run {i + 1}/{args.runs} | a *= s (the memory state) | "
                    f"{probes[-1]:.0f} ms/GiB | {state(probes[-1])} |",
                    file=sys.stderr,
                    flush=True,
                )
        else:
            probes.append(None)
        runs.append(rows)
    if not runs[0]:
        ap.error(f"no row matches {args.match!r}")
    summary = summarise(runs, probes)
    trows = threads_rows(scale, args.repeat) if args.match is None else []
    if args.json:
        out = {"runs": runs, "probes_ms_per_gib": probes, "summary": summary, "threads": trows}
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"| op | shape | dtype | options | fast ms | yardstick ms | yardstick ms/GiB | state | "
        f"% of yardstick, median (range) over {args.runs} runs | slow runs: median (n) | "
        "fast runs: median (n) | target (>= 90% slow, >= 80% fast) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in summary:
        print(
            f"| {r['op']} | {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['options']} | "
            f"{_nums(r['fast_ms'])} | {r['yardstick']} {_nums(r['yardstick_ms'])} | "
            f"{_nums(r['yardstick_ms_per_gib'], '{:.0f}')} | {', '.join(r['states'])} | "
            f"{100 * r['fraction_median']:.0f}% ({100 * r['fraction_min']:.0f}-"
            f"{100 * r['fraction_max']:.0f}%) | {_state_cell(r, 'slow')} | "
            f"{_state_cell(r, 'fast')} | {r['target']} |"
        )
    if not trows:
        return 0
    print()
    print(
        "| op | threads | shape | fast ms | speedup | CPU/wall | yardstick ms | yardstick speedup |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for t in trows:
        print(
            f"| {t['op']} | {t['threads']} | {'x'.join(map(str, t['shape']))} | "
            f"{t['fast_ms']:.1f} | "
            f"x{t['speedup_vs_1_thread']:.2f} | {t['cpu_per_wall']:.2f} | "
            f"{t['yardstick_ms']:.1f} | x{t['yardstick_speedup_vs_1_thread']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
