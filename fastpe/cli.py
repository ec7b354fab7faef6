"""The ``fastpe`` command: ``compare`` (reference vs fast), ``demo``, ``warmup``, ``rope``,
``table``."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]

_CLOSED_PIPE = 141  # exit status when the reader of stdout went away (128 + SIGPIPE, as Unix tools)


def run_case(case, *, repeat: int = 5, rng_seed: int = 0) -> dict:
    """Accuracy and timing of one case, fast against reference, in this process.

    The fast kernel is timed interleaved with the bandwidth yardstick of the same bytes
    (:mod:`fastpe._timing`); ``fraction_of_bandwidth`` is None where the array may stay in
    the last-level cache, which has no memory-bandwidth figure.
    """
    from . import _timing

    rng = np.random.default_rng(rng_seed)
    x = case.make_input(rng)
    fast, ref = case.runner("fast"), case.runner("reference")
    a = x.copy()
    fast(a)  # compiles on first use; its result is checked below
    b = x.copy()
    t = time.perf_counter()
    ref(b)
    t_ref1 = time.perf_counter() - t  # decides how many timed runs the reference gets
    err = case.error(a, b, x)
    del b
    yard_name, yard = _timing.yardstick(
        a, writes_only=case.is_table, rotated=case.kwargs.get("rotary_dim")
    )
    ratio, t_fast, t_yard = _timing.interleaved(lambda: fast(a), yard, repeat)
    # The first reference run (above) pays first-touch page faults: time fresh runs.
    t_ref = _timing.median_time(lambda: ref(a), min_runs=3 if t_ref1 < 0.5 else 1, budget_s=0.5)
    in_cache = _timing.cache_resident(case.nbytes)
    return {
        "op": case.op,
        "case": case.name(),
        "shape": list(case.shape),
        "dtype": np.dtype(case.dtype).name,
        "layout": case.layout,
        "mib": case.nbytes / 2**20,
        "reference_s": t_ref,
        "fast_s": t_fast,
        "speedup": t_ref / t_fast,
        "bandwidth_kernel": yard_name,
        "bandwidth_s": t_yard,
        "cache_resident": in_cache,
        "fraction_of_bandwidth": None if in_cache else ratio,
        "fraction_of_yardstick": ratio,
        "error_ulp": err,
        "tolerance_ulp": case.tolerance,
        "ok": bool(err <= case.tolerance),
    }


# Below this size a call is mostly its fixed cost (checks, dispatch), and its ratio to the
# yardstick's own fixed cost says nothing about either kernel's speed.
_MIN_RATIO_BYTES = 1 << 20


def _fmt_bw(row: dict) -> str:
    if row["mib"] * 2**20 < _MIN_RATIO_BYTES:
        return "-"
    if row["fraction_of_bandwidth"] is None:
        return f"{100 * row['fraction_of_yardstick']:3.0f}%c"
    return f"{100 * row['fraction_of_bandwidth']:4.0f}%"


def _fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:8.1f} us"
    if s < 1.0:
        return f"{s * 1e3:8.2f} ms"
    return f"{s:8.3f} s "


def cmd_compare(args) -> int:
    from . import _cases

    cases = list(_cases.SIZES[args.sizes])
    if args.dtype:
        cases = [c for c in cases if np.dtype(c.dtype).name in args.dtype]
    if args.op:
        cases = [c for c in cases if c.op in args.op]
    if not cases:
        print("no case matches the options", file=sys.stderr)
        return 2
    rows = []
    if not args.json:
        import numba

        print(
            f"fastpe compare: {len(cases)} case{'s' if len(cases) != 1 else ''} "
            f"({args.sizes} sizes), "
            f"{numba.get_num_threads()} threads; times are medians, "
            "errors are fast vs reference in ulps (see README)"
        )
        print(
            "bw%: the fast kernel against a bandwidth kernel moving the same bytes "
            "(the rotated channels for partial rotary); 'NN%c': the array fits in the "
            "last-level cache, so the ratio is to the same kernel running from cache, not "
            "a memory-bandwidth figure; '-': under 1 MiB, a call is mostly fixed cost"
        )
        head = (
            f"{'operation':<46} {'shape':<20} {'dtype':<8} {'reference':>11} "
            f"{'fast':>11} {'speedup':>8} {'bw%':>5} {'err ulp':>8} {'tol':>5}  ok"
        )
        print(head)
        print("-" * len(head))
    for case in cases:
        row = run_case(case, repeat=args.repeat)
        rows.append(row)
        if not args.json:
            print(
                f"{row['case']:<46} {'x'.join(map(str, row['shape'])):<20} "
                f"{row['dtype']:<8} {_fmt_time(row['reference_s'])} "
                f"{_fmt_time(row['fast_s'])} {row['speedup']:7.1f}x {_fmt_bw(row):>5} "
                f"{row['error_ulp']:8.3f} {row['tolerance_ulp']:5.1f}  "
                f"{'yes' if row['ok'] else 'NO'}",
                flush=True,
            )
    bad = [r for r in rows if not r["ok"]]
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(
            f"{len(rows) - len(bad)} of {len(rows)} case{'s' if len(rows) != 1 else ''} "
            "within tolerance"
        )
    return 1 if bad else 0


def plot(rows: list[dict], path: str) -> None:
    """Throughput (GB/s of array bytes) against array size: reference, fast, bandwidth."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install fastpe[plot]") from exc
    ops = sorted({r["op"] for r in rows})
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=True):
        sel = sorted((r for r in rows if r["op"] == op), key=lambda r: r["mib"])
        mib = [r["mib"] for r in sel]
        yard = f"bandwidth kernel ({sel[0]['bandwidth_kernel']})"
        for key, label, style in [
            ("reference_s", "NumPy reference", "o-"),
            ("fast_s", "fastpe", "s-"),
            ("bandwidth_s", yard, "k--"),
        ]:
            gbs = [r["mib"] * 2**20 / r[key] / 1e9 for r in sel]
            ax.plot(mib, gbs, style, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("array size (MiB)")
        ax.set_ylabel("array bytes processed per second (GB/s)")
        ax.set_title(f"{op} ({sel[0]['dtype']})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("fastpe compare: throughput against size, measured in one process")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def demo() -> dict:
    """The worked example of the original formula, as a dict (what ``fastpe demo`` prints)."""
    from .sinusoidal import sinusoidal_table

    pe = sinusoidal_table(6, 8, dtype=np.float64)
    norms = np.linalg.norm(pe, axis=1)
    dots = pe @ pe[0]
    return {
        "dim": 8,
        "base": 10000.0,
        "formula": "PE[p, 2i] = sin(p / base**(2i/dim)), PE[p, 2i+1] = cos(p / base**(2i/dim))",
        "positions": list(range(6)),
        "encodings": pe.round(6).tolist(),
        "norms": norms.round(12).tolist(),
        "expected_norm": float(np.sqrt(8 / 2)),
        "dot_0_1": float(dots[1]),
        "dot_0_5": float(dots[5]),
        "dot_0_k": dots.round(6).tolist(),
        # Does <PE(0), PE(k)> fall steadily from k = 0 to 5? Not at dim 8: the fastest pair
        # (frequency 1) turns it back up after k = 3. Position 1 is still more similar to 0
        # than position 5 is.
        "similarity_decays_with_distance": bool(np.all(np.diff(dots) < 0)),
        "dot_0_1_greater_than_dot_0_5": bool(dots[1] > dots[5]),
    }


def cmd_warmup(args) -> int:
    from ._warmup import warmup

    t = time.perf_counter()
    times = warmup(dtypes=args.dtype or ("float32", "float64"))
    for name, s in times.items():
        print(f"{name:<28} {s:8.3f} s")
    print(f"{'total':<28} {time.perf_counter() - t:8.3f} s")
    return 0


def cmd_demo(args) -> int:
    json.dump(demo(), sys.stdout, indent=2)
    print()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fastpe",
        description="Fast, exact positional encodings on the CPU.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "compare",
        help="run the NumPy reference and the fast kernels, report speed and ulp errors",
        description="Run the reference and the fast kernels on a set of sizes and print one "
        "row per case: times, speedup, worst error in ulps and whether it is within "
        "tolerance. Exits 1 if any case is out of tolerance.",
    )
    p.add_argument(
        "--sizes",
        choices=["small", "default", "sweep", "large"],
        default="default",
        help="case set: small (seconds), default (<1 min), sweep (sizes from "
        "0.25 MiB to 256 MiB, for --plot), large (~1 GiB arrays)",
    )
    p.add_argument(
        "--dtype",
        action="append",
        choices=["float32", "float64"],
        help="only these dtypes (repeatable)",
    )
    p.add_argument(
        "--op",
        action="append",
        choices=[
            "sinusoidal_table",
            "add_sinusoidal",
            "apply_rope",
            "timestep_embedding",
            "grid_sinusoidal",
            "add_grid_sinusoidal",
        ],
        help="only these operations (repeatable)",
    )
    p.add_argument("--repeat", type=int, default=5, help="timed runs of the fast kernel")
    p.add_argument("--json", action="store_true", help="print machine-readable rows")
    p.add_argument(
        "--plot", metavar="FILE.png", help="also draw throughput against size (needs matplotlib)"
    )
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("demo", help="print the worked example of the original formula (JSON)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("warmup", help="compile (or load from the cache) every kernel now")
    p.add_argument(
        "--dtype",
        action="append",
        choices=["float32", "float64", "float16", "bfloat16"],
        help="only these dtypes (repeatable)",
    )
    p.set_defaults(func=cmd_warmup)
    _add_file_commands(sub)
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        # the reader went away (``fastpe demo | head -1``): stop quietly, as Unix tools do.
        # Point stdout at devnull so that Python's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _CLOSED_PIPE
    return code


# --------------------------------------------------------------------------------------------
# Files: ``fastpe rope`` and ``fastpe table`` (fastpe.files)
# --------------------------------------------------------------------------------------------

# Usage and validation errors exit with 2, other failures of the file system with 1.
_USAGE_ERRORS = (
    TypeError,
    ValueError,
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc)
    return " ".join(text.split()) or type(exc).__name__


def _fail(command: str, exc: BaseException) -> int:
    print(f"fastpe {command}: error: {_one_line(exc)}", file=sys.stderr)
    return 2 if isinstance(exc, _USAGE_ERRORS) else 1


def _chunk_mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of MiB, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _chunk_bytes(mib: float) -> int:
    return max(1, int(mib * 2**20))


def _load_scaling(text: str) -> dict:
    """A scaling dict from inline JSON (``{...}``) or from the path of a JSON file."""
    if text.lstrip().startswith("{"):
        source = "--scaling-json"
    else:
        source = text
        try:
            text = Path(text).read_text()
        except OSError as exc:
            raise ValueError(
                f"--scaling-json {source!r} is neither inline JSON (starting with '{{') nor a "
                f"readable file: {exc.strerror or exc}"
            ) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f'{source} must hold a JSON object such as {{"rope_type": "linear", '
            f'"factor": 2.0}}, got {type(value).__name__}'
        )
    return value


class _Say(logging.Handler):
    """Prints what ``fastpe.files`` logs (e.g. "nothing left to do") as the command's own."""

    def __init__(self, command: str):
        super().__init__(logging.INFO)
        self.command = command

    def emit(self, record: logging.LogRecord) -> None:
        print(f"fastpe {self.command}: {record.getMessage()}", file=sys.stderr)


def _load_array(path: str | None, option: str):
    """A small array from a .npy file (no pickles), or None."""
    if path is None:
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{option}: cannot read {path!r} as a .npy file: {exc}") from None


def _load_list(value: str | None, option: str):
    """Comma-separated ints (``0,0,1,1,2,2``), or a .npy file of them, or None."""
    if value is None:
        return None
    if value.endswith(".npy"):
        return _load_array(value, option)
    try:
        return [int(v) for v in value.split(",")]
    except ValueError:
        raise ValueError(
            f"{option} must be comma-separated integers (0,0,1,1) or a .npy file, got {value!r}"
        ) from None


def cmd_rope(args: argparse.Namespace) -> int:
    """``fastpe rope``: returns the exit code."""
    from .files import rope_file

    logger = logging.getLogger("fastpe.files")
    say, level = _Say("rope"), logger.level
    logger.addHandler(say)
    logger.setLevel(logging.INFO)
    try:
        scaling = _load_scaling(args.scaling_json) if args.scaling_json else None
        rope_file(
            args.path,
            args.output,
            in_place=args.in_place,
            again=args.again,
            chunk_bytes=_chunk_bytes(args.chunk_mib),
            progress=args.progress,
            layout=args.layout,
            base=args.base,
            offset=args.offset,
            rotary_dim=args.rotary_dim,
            seq_axis=args.seq_axis,
            inverse=args.inverse,
            scaling=scaling,
            max_position_embeddings=args.max_position_embeddings,
            seq_len=args.seq_len,
            positions=_load_array(args.positions, "--positions"),
            pair_axes=_load_list(args.pair_axes, "--pair-axes"),
            inv_freq=_load_array(args.inv_freq, "--inv-freq"),
        )
    except KeyboardInterrupt:
        what = (
            "the file may be partly rotated; rerun the same command to finish (it never "
            "rotates a byte twice)"
            if args.in_place
            else "no output was written"
        )
        print(f"\nfastpe rope: interrupted: {what}", file=sys.stderr)
        return 130
    except (OSError, TypeError, ValueError) as exc:
        return _fail("rope", exc)
    finally:
        logger.removeHandler(say)
        logger.setLevel(level)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    """``fastpe table``: returns the exit code."""
    from .files import table_file

    try:
        table_file(
            args.output,
            seq_len=args.seq_len,
            dim=args.dim,
            dtype=args.dtype,
            layout=args.layout,
            base=args.base,
            offset=args.offset,
            chunk_bytes=_chunk_bytes(args.chunk_mib),
            progress=args.progress,
        )
    except KeyboardInterrupt:
        print("\nfastpe table: interrupted: no output was written", file=sys.stderr)
        return 130
    except (OSError, TypeError, ValueError) as exc:
        return _fail("table", exc)
    return 0


def _add_file_commands(subparsers) -> None:
    """Add ``rope`` and ``table``; each sets ``func``, which returns the exit code.

    Values are checked by fastpe.files (one argument layer), not by argparse.
    """
    p = subparsers.add_parser(
        "rope",
        help="apply RoPE to a .npy file of any size, chunk by chunk (crash-safe)",
        description="Rotate a float32/float64/float16 .npy file with RoPE, bit for bit as "
        "fastpe.apply_rope on the loaded array, through a buffer of --chunk-mib. With -o the "
        "result appears only when complete. With --in-place a journal kept with the file "
        "makes the run crash-safe: rerunning the same command after an interruption finishes "
        "it, or says there is nothing left to do; no byte is ever rotated twice.",
    )
    p.add_argument("path", metavar="INPUT.npy", help="the .npy file to rotate")
    dest = p.add_mutually_exclusive_group(required=True)
    dest.add_argument("-o", "--output", metavar="OUTPUT.npy", help="write the result here")
    dest.add_argument("--in-place", action="store_true", help="rotate INPUT.npy itself")
    p.add_argument(
        "--again",
        action="store_true",
        help="with --in-place: rotate the file as it is now even if an earlier "
        "in-place run rotated it (or left it partly rotated)",
    )
    p.add_argument(
        "--layout",
        default="interleaved",
        metavar="{interleaved,half,half:k}",
        help="channel pairing: interleaved (x[2i], x[2i+1]), half (x[i], x[i + rotary_dim/2]) "
        "or half:k (k blocks, each paired as half)",
    )
    p.add_argument(
        "--base", type=float, default=10000.0, metavar="F", help="frequency base (rope_theta)"
    )
    p.add_argument(
        "--offset", type=int, default=0, metavar="N", help="position of the first element"
    )
    p.add_argument("--rotary-dim", type=int, metavar="N", help="rotate only the first N channels")
    p.add_argument(
        "--seq-axis",
        type=int,
        metavar="AXIS",
        help="sequence axis (default 0 for 2-D files, else 1)",
    )
    p.add_argument("--inverse", action="store_true", help="undo a forward rotation")
    p.add_argument(
        "--scaling-json",
        metavar="JSON_OR_PATH",
        help="a Hugging Face rope_scaling dict, inline or as a JSON file",
    )
    p.add_argument(
        "--max-position-embeddings",
        type=int,
        metavar="N",
        help="the model's max_position_embeddings (some scalings need it)",
    )
    p.add_argument(
        "--seq-len",
        type=int,
        metavar="N",
        help="sequence length for dynamic/longrope scaling (default: offset + the "
        "file's sequence length)",
    )
    p.add_argument(
        "--positions",
        metavar="POSITIONS.npy",
        help="int positions of the sequence axis (instead of --offset): (seq,), shared by "
        "every row, or (batch, seq), one row per batch row; (n_axes, seq) or (n_axes, "
        "batch, seq) with --pair-axes",
    )
    p.add_argument(
        "--pair-axes",
        metavar="LIST_OR_NPY",
        help="multi-axis RoPE: the position axis of each rotated pair, comma-separated "
        "(0,0,1,1,2,2,...) or a .npy file (two rows: the axes of each pair's first and "
        "second channel)",
    )
    p.add_argument(
        "--inv-freq",
        metavar="INV_FREQ.npy",
        help="multi-axis RoPE: one float64 frequency per rotated pair (vision towers)",
    )
    p.add_argument(
        "--chunk-mib",
        type=_chunk_mib,
        default=64.0,
        metavar="MIB",
        help="buffer size in MiB (default 64); bounds the memory used; --in-place "
        "needs twice this much free disk space",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    p.set_defaults(func=cmd_rope)

    p = subparsers.add_parser(
        "table",
        help="write a sinusoidal position table of any size to a .npy file",
        description="Write fastpe.sinusoidal_table(seq_len, dim) to a .npy file in chunks of "
        "rows; the file appears only when complete.",
    )
    p.add_argument(
        "--seq-len", type=int, required=True, metavar="N", help="number of rows (positions)"
    )
    p.add_argument("--dim", type=int, required=True, metavar="D", help="number of columns (even)")
    p.add_argument("--dtype", choices=["float32", "float64", "float16"], default="float32")
    p.add_argument(
        "--layout",
        default="interleaved",
        metavar="{interleaved,half}",
        help="interleaved (sin, cos, sin, ...) or half (sines, then cosines)",
    )
    p.add_argument("--base", type=float, default=10000.0, metavar="F", help="frequency base")
    p.add_argument("--offset", type=int, default=0, metavar="N", help="position of the first row")
    p.add_argument(
        "--chunk-mib",
        type=_chunk_mib,
        default=64.0,
        metavar="MIB",
        help="buffer size in MiB (default 64)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    p.add_argument("-o", "--output", metavar="OUT.npy", required=True, help="the file to write")
    p.set_defaults(func=cmd_table)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
