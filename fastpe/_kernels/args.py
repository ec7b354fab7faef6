"""What the kernels take, grouped into records: one builder per record, here.

The engine (:mod:`fastpe._engine`) builds each record from arrays the public layer has
validated, with the builder of that name, and each kernel unpacks it by position once on
entry, so its loops see plain arrays and integers. A record is a plain tuple: numba's
dispatcher types a plain tuple in C, a namedtuple in Python, and building a namedtuple is
Python code too; together several microseconds per call, as long as a small call's work.
A field is added by adding it to the builder and to the unpacking in each kernel.
"""

from __future__ import annotations

import numpy as np

from .flag import ON

# Channel layouts (the index in ``fastpe._args.LAYOUTS``): pair ``i`` is channels
# ``2i, 2i+1`` (INTERLEAVED) or ``i, i + npairs`` (HALF).
INTERLEAVED, HALF = 0, 1

# Columns of a runs array (see :func:`runs`).
RUN_ROW, RUN_START, RUN_LENGTH, RUN_FIRST = 0, 1, 2, 3


def view(
    flat: np.ndarray,
    off0: int,
    sb: int,
    ss: int,
    sh: int,
    sd: int,
    nb: int,
    ns: int,
    nh: int,
    npairs: int,
    layout: int,
) -> tuple:
    """A ``(nb, ns, nh, 2*npairs)`` view of ``flat``, a contiguous 1-D span of memory.

    Element ``[b, s, h, j]`` lives at ``flat[off0 + b*sb + s*ss + h*sh + j*sd]``; pairs in
    ``layout`` (INTERLEAVED or HALF).
    """
    return (flat, off0, sb, ss, sh, sd, nb, ns, nh, npairs, layout)


def positions(values: np.ndarray, given: bool, offsets: np.ndarray, per_batch: bool) -> tuple:
    """The position of ``[b, s]``: ``values[bp, s]`` if ``given`` else ``offsets[bp] + s``.

    ``values`` int64 ``(Bp, S)`` (a ``(1, 1)`` placeholder when not given), ``offsets``
    int64 ``(Bp,)``; ``bp`` is ``b`` when ``per_batch`` (one row of positions or one offset
    per batch row), else 0 (every batch row shares them).
    """
    return (values, given, offsets, per_batch)


def freqs(wh: np.ndarray, wl: np.ndarray, tc: np.ndarray, ts: np.ndarray) -> tuple:
    """Frequencies ``wh + wl`` (double-double, one per pair) and their angle-addition tables.

    ``tc[l*RADIX + d, i], ts[...] = cos, sin(d * RADIX**l * (wh[i] + wl[i]))`` (built by
    ``fastpe._engine.step_tables``).
    """
    return (wh, wl, tc, ts)


def rotation(sin_mult: float, cos_mult: float, touch_end: int) -> tuple:
    """How ``rope_kernel`` writes: scale factors, and the partial-rotary reads.

    sin times ``sin_mult`` (attention factor; negative for the inverse), cos times
    ``cos_mult``; ``touch_end``: partial rotary, also read channels up to here (0: none).
    """
    return (sin_mult, cos_mult, touch_end)


def loop(
    layout: int,
    short: bool,
    two_pass: bool,
    prefetch: bool = False,
    halves: bool = False,
    stretches: bool = False,
) -> tuple:
    """Which rotation loop a call runs: the last arguments of the rotation kernels.

    ``(interleaved, short, two_pass, stretches, prefetch, halves)``, each None or ``ON``, not a
    record: numba prunes a branch on whether an argument is None before it compiles (for
    ``ON``, not for True: :mod:`.flag`), so each combination is a specialization of its own
    that holds that loop alone, compiled on its first use. ``interleaved``: pairs
    ``(2i, 2i+1)`` (else ``(i, i + npairs)``; a row of one pair comes as interleaved,
    ``fastpe._engine.kernel_layout``); ``short``: one head of short rows back to back, their
    cos/sin filled a group of positions at a time, each batch row's block rotated as one run
    of pairs (interleaved) or row by row (half layout); ``two_pass``: half layout, short
    float64 rows, rotated in three passes; ``prefetch``: the lines ahead of each row
    prefetched before its rotation (half layout: one pass; interleaved rows too, not
    short); ``halves``: interleaved rows (not short), the row's two halves rotated side by
    side, two streams of memory instead of one (``fastpe._engine._HALVES_MIN_BYTES``);
    ``stretches``: one-pass rows (not short, ``halves`` or ``two_pass``), the positions of
    a work item walked in two stretches side by side, a head of each in turn, each
    prefetched first: two streams of memory instead of one
    (``fastpe._engine.two_stretches``); it takes ``prefetch`` too (an odd count's last
    position is rotated by the one-stretch loop, prefetched as well).
    """
    half = not short and layout == HALF
    two = halves and layout == INTERLEAVED and not short
    walk = stretches and not short and not two and not (half and two_pass)
    return (
        ON if layout == INTERLEAVED else None,
        ON if short else None,
        ON if two_pass and half else None,
        ON if walk else None,
        ON if (prefetch or walk) and not short and not (half and two_pass) else None,
        ON if two else None,
    )


def split(chunk: int, group: int, n_workers: int) -> tuple:
    """The work split: items of ``chunk`` positions, cut into ``n_workers`` ranges.

    Batch rows (or runs) that share positions are walked ``group`` at a time.
    """
    return (chunk, group, n_workers)


def runs(rows: np.ndarray, first: int, count: int) -> tuple:
    """Runs of consecutive positions, for the position-major walk of ``rope_runs_kernel``.

    Row ``r`` of ``rows`` (int64, columns ``RUN_*``): batch row ``rows[r, RUN_ROW]`` holds
    position ``rows[r, RUN_FIRST] + d`` at sequence index ``rows[r, RUN_START] + d`` for
    ``d < rows[r, RUN_LENGTH]``. The walk covers positions ``first .. first + count - 1``.
    """
    return (rows, first, count)


def axes(values: np.ndarray, pair_axis: np.ndarray, per_batch: bool) -> tuple:
    """Positions of several kinds (multi-axis RoPE, ``rope_axes_kernel``).

    ``values`` int64 ``(n_axes, Bp, S)``: position of kind ``a`` of ``[b, s]`` is
    ``values[a, bp, s]`` (``bp`` as in :func:`positions`); pair ``i`` is rotated by the
    position of kind ``pair_axis[i]`` (one per pair, each ``< n_axes``), passed as spans:
    int64 rows ``(first pair, end pair, axis)`` of consecutive pairs of one axis, so that
    the kernel's loop over a span's pairs reads one axis's anchors (and vectorises).
    """
    pa = np.asarray(pair_axis, dtype=np.int64)
    cut = np.flatnonzero(np.diff(pa)) + 1
    starts = np.r_[0, cut]
    ends = np.r_[cut, pa.size]
    spans = np.stack([starts, ends, pa[starts]], axis=1).astype(np.int64)
    return (values, spans, per_batch)
