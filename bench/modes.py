"""Does each speed mode of the engine still pay? Each one on against off, on the roofline's rows.

Usage::

    python bench/modes.py            # ~1 GiB arrays, as bench/roofline.py
    python bench/modes.py --quick    # 256 MiB arrays
    python bench/modes.py --mode stream --runs 3   # one mode, the table 3 times

The engine lays the work out in a few ways that exist for speed alone
(``fastpe._engine.MODES``: walking batch rows side by side, the position-major walk over
runs of positions, reading the untouched channels of short partial-rotary rows, the
three-pass float64 half-layout rotation, the prefetch of rows of 1-4 KiB (interleaved
ones of 512 bytes to 4 KiB with several heads a position and of 2-4 KiB with one, not on
Zen 5; in large arrays on the CPUs of ``fastpe._engine.prefetch_512`` from 512 bytes,
one head a position from 256 bytes, from 128 where partial rotary leaves channels between)
and of every 16-bit RoPE row (see
``fastpe._engine.MODES``), the float32 row recurrence, groups of positions
side by side in tables of a few channels, large tables written by streaming stores, on
Zen 5 plain stores for the recurrence's large tables, off by default since the streamed
rows' partial lines are prefetched, on Zen 5 the prefetch of per-row items' rows
while their cos/sin is computed, interleaved rows of 8 KiB and more in two halves side by
side (not on Zen 5), one head's rows whose cos/sin serve that row alone rotated as their
cos/sin are computed (not on Zen 5), work items of one batch row's positions walked in two
stretches side by side (not on Zen 5), the short walk for half-layout rows of up to 64 bytes,
which no roofline row has: ``bench/dims.py --layout half`` times it, and float32/float64
tables below the streaming bound computed a line at a time by plain stores (not on
``znver3``), which no roofline row is either: ``bench/incache.py --off plain_direct`` times
it). For
each mode, on the roofline rows where it applies (and, for the streaming stores, on two
grid tables), the call runs with the mode on and with it off, interleaved
(on, off, on, ...) with fastpe's timing harness (the fused mode also on rows of its own,
``fused_cases``); the figure is the median of the per-pair
ratios ``t_off / t_on``: above 1 the mode pays.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from roofline import _label, build_case, cases

import fastpe
from fastpe import _engine, _timing


def applies(mode: str, op: str, shape: tuple, dtype, kw: dict) -> bool:
    """The roofline rows on which ``mode`` changes what the engine does."""
    rope = op == "apply_rope"
    one_head = len(shape) == 3
    if mode == "group":
        # (add_sinusoidal walks unit-stride rows one batch row after another: no groups)
        return (
            rope
            and one_head
            and shape[0] > 1
            and kw.get("offset") not in ("per_row", "spread")
            and kw.get("positions") != "packed"
        )
    if mode == "runs":
        return (
            rope and one_head and (kw.get("offset") == "per_row" or kw.get("positions") == "packed")
        )
    if mode == "touch_end":
        return rope and "rotary_dim" in kw
    if mode == "two_pass":
        return rope and np.dtype(dtype) == np.float64 and kw.get("layout") == "half"
    if mode == "prefetch":
        lo, hi = _engine._PREFETCH_ROW_BYTES
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        # (heads: the axis before the channels of 4-D arrays and of 3-D ones with
        # seq_axis=0, else one; one head's rows lie apart under partial rotary)
        nh = shape[-2] if len(shape) == 4 or kw.get("seq_axis") == 0 else 1
        apart = nh == 1 and kw.get("rotary_dim", shape[-1]) < shape[-1]
        if rope:  # from 512 bytes on Zen 5 (and prefetch_512's CPUs, in large arrays)
            lo = _engine.prefetch_rope_min_bytes(nbytes, nh, apart)
        row_bytes = kw.get("rotary_dim", shape[-1]) * np.dtype(dtype).itemsize
        # 16-bit RoPE: every row, every layout (the multi-axis kernel's too)
        if rope and np.dtype(dtype).itemsize == 2:
            return True
        # interleaved RoPE rows, not on Zen 5 (fastpe._engine.prefetch_interleaved)
        if rope and "pair_axes" not in kw and kw.get("layout") == "interleaved":
            return _engine.prefetch_interleaved(nh, row_bytes, nbytes, apart)
        # RoPE (half layout), and float32 add_sinusoidal on one batch row (half layout, either
        # on Zen 5), the roofline's rows where each table row serves one row of x
        return (
            (
                rope
                and "pair_axes" not in kw
                and np.dtype(dtype).itemsize > 2
                and kw.get("layout") == "half"
            )
            or (
                op == "add_sinusoidal"
                and np.dtype(dtype) == np.float32
                and shape[0] == 1
                and (kw.get("layout") == "half" or _engine.host_zen5())
                # (rows of a multiple of a line's pairs: added a line at a time, no
                # prefetch, unless the direct mode is off)
                and not (
                    _engine.MODES["direct"]
                    and (shape[-1] // 2) % (16 if kw.get("layout") == "half" else 8) == 0
                )
            )
        ) and lo <= row_bytes <= hi
    if mode == "recurrence":
        return np.dtype(dtype) == np.float32 and (
            op == "add_sinusoidal"
            or (op == "sinusoidal_table" and _engine.table_stepped(shape[-1] // 2))
        )
    if mode == "stream":
        # large tables of every dtype (16-bit ones on Zen 5 a row at a time, elsewhere
        # behind the next row: their rows lie back to back), and grid tables (the rows of
        # grid_cases); on Zen 5 not the float32 tables of stepped rows where the
        # plain_stepped mode (off by default) keeps them plain either way
        if op == "grid_sinusoidal":
            return True
        if op != "sinusoidal_table":
            return False
        zen5 = _engine.host_zen5()
        if np.dtype(dtype).itemsize == 2:
            return True
        return not (
            zen5
            and _engine.MODES["plain_stepped"]
            and np.dtype(dtype) == np.float32
            and _engine.table_stepped(shape[-1] // 2)
        )
    if mode == "direct":
        # large float32 and float64 tables, either layout, and float32 add_sinusoidal rows
        # whose table row serves one row of x
        if op == "add_sinusoidal":
            return np.dtype(dtype) == np.float32 and shape[0] == 1
        return op == "sinusoidal_table" and np.dtype(dtype).itemsize > 2
    if mode == "plain_stepped":
        # float32 tables of stepped rows (_engine.table_stepped), on Zen 5 only
        return (
            _engine.host_zen5()
            and op == "sinusoidal_table"
            and np.dtype(dtype) == np.float32
            and _engine.table_stepped(shape[-1] // 2)
        )
    if mode == "fill_ahead":
        # on Zen 5, RoPE with per-row offsets that share no cos/sin (the roofline's spread
        # offsets; its other per-row rows take the runs kernel)
        return _engine.host_zen5() and rope and kw.get("offset") == "spread"
    if mode == "fused":
        # one head whose cos/sin serve one row (the roofline's spread offsets; fused_cases's
        # rows), not on Zen 5
        return (
            not _engine.host_zen5()
            and rope
            and one_head
            and (kw.get("offset") == "spread" or shape[0] == 1)
        )
    if mode == "halves":
        # float32/float64 interleaved RoPE rows (one head's rotated channels) from 8 KiB up,
        # not on Zen 5: the roofline's 2048-channel head
        row_bytes = kw.get("rotary_dim", shape[-1]) * np.dtype(dtype).itemsize
        return (
            not _engine.host_zen5()
            and rope
            and "pair_axes" not in kw
            and np.dtype(dtype).itemsize > 2
            and kw.get("layout") == "interleaved"
            and row_bytes >= _engine._HALVES_MIN_BYTES
        )
    if mode == "stretches":
        # float32/float64 RoPE whose work items walk one batch row (the roofline's 4-D rows,
        # 32 heads a position, multi-axis ones too, and the vision row's one batch row of 16
        # heads), rows of up to 4 KiB, not with the partial-rotary reads (on the CPUs of
        # fastpe._engine.reads_rest), not on Zen 5 (fastpe._engine.two_stretches)
        row_bytes = kw.get("rotary_dim", shape[-1]) * np.dtype(dtype).itemsize
        return (
            not _engine.host_zen5()
            and rope
            and (len(shape) == 4 or kw.get("seq_axis") == 0)
            and (kw.get("rotary_dim", shape[-1]) == shape[-1] or not _engine.reads_rest())
            and np.dtype(dtype).itemsize > 2
            and row_bytes <= _engine._PREFETCH_ROW_BYTES[1]
        )
    if mode == "plain_direct":
        # float32/float64 tables below the streaming bound (from 4 MiB): none of the
        # roofline's rows, which stream; bench/incache.py --off plain_direct times them
        return False
    if mode in ("lanes", "short_half", "blocks16"):
        # tables and add_sinusoidal of dim <= 16, short half-layout RoPE rows (up to 64
        # bytes): none of the roofline's rows; bench/dims.py times those
        return False
    raise ValueError(mode)


def _with(mode: str, on: bool, f):
    def call():
        default, rest = _engine.MODES[mode], _engine._rest_reads
        _engine.MODES[mode] = on
        if mode == "touch_end":  # on: the reads, on every CPU (fastpe._engine.reads_rest)
            _engine._rest_reads = True
        try:
            f()
        finally:
            _engine.MODES[mode], _engine._rest_reads = default, rest

    return call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="256 MiB arrays instead of ~1 GiB")
    ap.add_argument("--mode", choices=list(_engine.MODES), help="this mode only")
    ap.add_argument("--runs", type=int, default=1, help="times the table runs")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.repeat < 1:
        ap.error("--runs and --repeat must be >= 1")
    print("| run | mode | op | shape | dtype | options | on (ms) | off (ms) | off / on |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in range(args.runs):
        _table(args, run + 1)
    return 0


def grid_cases(scale: int):
    """Grid tables written into ``out=`` (bench/grids.py's), float32 and bfloat16: the rows
    of the stream mode besides the roofline's; ``shape`` is the grid, ``kw["dim"]`` the
    channels."""
    g = 512 // scale
    yield "grid_sinusoidal", (g, g), np.float32, {"dim": 1024}
    try:
        import ml_dtypes
    except ImportError:
        return
    yield "grid_sinusoidal", (g, 2 * g), np.dtype(ml_dtypes.bfloat16), {"dim": 1024}


def fused_cases(scale: int):
    """The fused mode's rows besides the roofline's spread offsets: one batch row of one
    head, rows that took the prefetch, the two halves or the three passes before, and
    float64 half-layout rows with spread offsets."""
    yield "apply_rope", (1, 524288 // scale, 512), np.float32, {"layout": "interleaved"}
    yield "apply_rope", (1, 131072 // scale, 2048), np.float32, {"layout": "interleaved"}
    yield "apply_rope", (1, 1048576 // scale, 256), np.float32, {"layout": "half"}
    yield "apply_rope", (1, 1048576 // scale, 128), np.float64, {"layout": "half"}
    spread = {"layout": "half", "offset": "spread"}
    yield "apply_rope", (32, 32768 // scale, 128), np.float64, spread


def _build(op, shape, dtype, kw):
    if op != "grid_sinusoidal":
        return build_case(op, shape, dtype, kw)
    x = np.zeros((int(np.prod(shape)), kw["dim"]), dtype=dtype)

    def fast():
        fastpe.grid_sinusoidal(shape, kw["dim"], out=x)

    return x, fast, kw


def _table(args, run: int) -> None:
    scale = 4 if args.quick else 1
    for mode in [args.mode] if args.mode else list(_engine.MODES):
        extra = fused_cases(scale) if mode == "fused" else ()
        for op, shape, dtype, kw in [*cases(scale), *grid_cases(scale), *extra]:
            if not applies(mode, op, shape, dtype, kw):
                continue
            x, fast, _ = _build(op, shape, dtype, kw)
            ratio, t_on, t_off = _timing.interleaved(
                _with(mode, True, fast), _with(mode, False, fast), args.repeat
            )
            opts = ",".join(f"{k}={_label(k, v, shape)}" for k, v in kw.items())
            print(
                f"| {run} | {mode} | {op} | {'x'.join(map(str, shape))} | "
                f"{np.dtype(dtype).name} | {opts} | {t_on * 1e3:.1f} | {t_off * 1e3:.1f} | "
                f"{ratio:.2f} |",
                flush=True,
            )
            del x


if __name__ == "__main__":
    sys.exit(main())
