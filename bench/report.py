"""Turn a pytest-benchmark JSON file into the README's speed table.

Usage::

    pytest --benchmark-only --benchmark-json=bench.json      # add --bench-large for 1 GiB
    python bench/report.py bench.json                        # markdown table on stdout
    python bench/report.py run1.json run2.json run3.json     # the peers over several runs

Each benchmark group (``op|shape|dtype|layout``) holds the fast kernel, the NumPy
reference, the bandwidth yardstick and, where the packages were installed, the peers: the
Hugging Face formula on torch (``torch``: in the ``apply_rope`` groups cos/sin made in the
call, as the model's rotary module does; in the decoding-step groups cos/sin made
beforehand), and with cos/sin made beforehand in torch eager (``torch_cached``),
``torch.compile`` (``torch_compile``) and ``jax.jit`` (``jax_jit``), all measured in the same
run. The table gives the fast kernel's median time, its fraction of the yardstick (the
roofline: 100% = as fast as streaming the bytes; "cache" where the array fits in this
machine's last-level cache, which has no memory-bandwidth figure, see
``fastpe._timing.cache_resident``), its speedup over the reference, and the fastest peer
of the group with fastpe's speedup over it (below 1: the peer is faster). Decoding-step
groups compare ``fast_qk`` (q and k in one call) where there is no ``fast``, against
``reference_qk``. ``jax_jit`` returns new arrays (JAX arrays are immutable); the others
work in place.
"""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np

from fastpe import _timing

#: The implementations of other packages that the benchmark groups may hold.
PEERS = ("torch", "torch_cached", "torch_compile", "jax_jit")


def rows_from(data: dict) -> list[dict]:
    groups: dict[str, dict[str, float]] = {}
    for b in data["benchmarks"]:
        impl = b["params"].get("impl", b["name"].rsplit("-", 1)[-1].rstrip("]"))
        groups.setdefault(b["group"], {})[impl] = b["stats"]["median"]
    rows = []
    for group, t in sorted(groups.items()):
        if "fast" not in t and "fast_qk" in t:
            t = {**t, "fast": t["fast_qk"]}
            if "reference_qk" in t:
                t["reference"] = t["reference_qk"]
        if "fast" not in t:
            continue
        peers = {k: v for k, v in t.items() if k in PEERS}
        best = min(peers, key=peers.__getitem__) if peers else None
        op, shape, dtype, layout = ([*group.split("|"), "", "", "", ""])[:4]
        yard = t.get("scale", t.get("fill"))
        try:
            nbytes = math.prod(map(int, shape.split("x"))) * np.dtype(dtype).itemsize
        except (ValueError, TypeError):
            nbytes = None
        in_cache = nbytes is not None and _timing.cache_resident(nbytes)
        rows.append(
            {
                "op": op,
                "shape": shape,
                "dtype": dtype,
                "layout": layout,
                "fast_s": t["fast"],
                "cache_resident": in_cache,
                "roofline": yard / t["fast"] if yard and not in_cache else None,
                "vs_reference": t["reference"] / t["fast"] if "reference" in t else None,
                "best_peer": best,
                "vs_best_peer": t[best] / t["fast"] if best else None,
            }
        )
    return rows


def _time(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def markdown(rows: list[dict]) -> str:
    out = [
        "| op | shape | dtype | layout | fast | % of roofline | vs reference | fastest peer | "
        "vs fastest peer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        roof = f"{100 * r['roofline']:.0f}%" if r["roofline"] else ""
        if r["cache_resident"]:
            roof = "cache"
        ref = f"{r['vs_reference']:.1f}x" if r["vs_reference"] else ""
        peer = f"{r['vs_best_peer']:.1f}x" if r["vs_best_peer"] else ""
        out.append(
            f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['layout']} | "
            f"{_time(r['fast_s'])} | {roof} | {ref} | {r['best_peer'] or ''} | {peer} |"
        )
    return "\n".join(out)


def _spread(values: list[float], fmt) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def peers_markdown(runs: list[list[dict]]) -> str:
    """The groups that hold peers, over several runs of the suite: fastpe's median time and
    its speedup over the fastest peer of each run, median and range over the runs (each
    run's fastest peer named; a group missing from a run is left out of that run)."""
    keyed: dict[tuple, list[dict]] = {}
    for rows in runs:
        for r in rows:
            if r["best_peer"]:
                keyed.setdefault((r["op"], r["shape"], r["dtype"], r["layout"]), []).append(r)
    out = [
        f"| op | shape | dtype | layout | fast, median (range) over {len(runs)} runs | "
        "fastest peer in each run | vs fastest peer, median (range) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (op, shape, dtype, layout), rs in sorted(keyed.items()):
        fast = _spread([r["fast_s"] for r in rs], _time)
        if len(rs) < len(runs):  # the group is missing from some runs
            fast += f" [{len(rs)} of {len(runs)} runs]"
        vs = _spread([r["vs_best_peer"] for r in rs], lambda v: f"{v:.1f}x")
        names = ", ".join(r["best_peer"] for r in rs)
        out.append(f"| {op} | {shape} | {dtype} | {layout} | {fast} | {names} | {vs} |")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for path in argv:
        with open(path) as f:
            runs.append(rows_from(json.load(f)))
    if len(runs) == 1:
        print(markdown(runs[0]))
    else:
        print(peers_markdown(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
