"""What the kernels take, grouped into records (numba passes namedtuples by value).

The engine (:mod:`fastpe._engine`) builds these from arrays the public layer has validated;
each kernel unpacks them once on entry, so its loops see plain arrays and integers.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# Channel layouts (the index in ``fastpe._validate.LAYOUTS``): pair ``i`` is channels
# ``2i, 2i+1`` (INTERLEAVED) or ``i, i + npairs`` (HALF).
INTERLEAVED, HALF = 0, 1

# Columns of a runs array (see :class:`Runs`).
RUN_ROW, RUN_START, RUN_LENGTH, RUN_FIRST = 0, 1, 2, 3


class View(NamedTuple):
    """A ``(nb, ns, nh, 2*npairs)`` view of ``flat``, a contiguous 1-D span of memory.

    Element ``[b, s, h, j]`` lives at ``flat[off0 + b*sb + s*ss + h*sh + j*sd]``.
    """

    flat: np.ndarray
    off0: int
    sb: int
    ss: int
    sh: int
    sd: int
    nb: int
    ns: int
    nh: int
    npairs: int
    layout: int


class Positions(NamedTuple):
    """The position of ``[b, s]``: ``values[bp, s]`` if ``given`` else ``offsets[bp] + s``.

    ``bp`` is ``b`` when ``per_batch`` (one row of positions or one offset per batch row),
    else 0 (every batch row shares them).
    """

    values: np.ndarray  # int64 (Bp, S); a (1, 1) placeholder when not given
    given: bool
    offsets: np.ndarray  # int64 (Bp,)
    per_batch: bool


class Freqs(NamedTuple):
    """Frequencies ``wh + wl`` (double-double, one per pair) and their angle-addition tables.

    ``tc[l*RADIX + d, i], ts[...] = cos, sin(d * RADIX**l * (wh[i] + wl[i]))`` (built by
    ``fastpe._engine.step_tables``).
    """

    wh: np.ndarray
    wl: np.ndarray
    tc: np.ndarray
    ts: np.ndarray


class Rotation(NamedTuple):
    """How ``rope_kernel`` writes: scale factors, and the loop variants chosen for speed."""

    sin_mult: float  # sin times this (attention factor; negative for the inverse)
    cos_mult: float  # cos times this (attention factor)
    touch_end: int  # partial rotary: also read channels up to here (0: none)
    two_pass: bool  # half layout, short float64 rows: rotate in three passes


class Split(NamedTuple):
    """The work split: items of ``chunk`` positions, cut into ``n_workers`` ranges.

    Batch rows (or runs) that share positions are walked ``group`` at a time.
    """

    chunk: int
    group: int
    n_workers: int


class Runs(NamedTuple):
    """Runs of consecutive positions, for the position-major walk of ``rope_runs_kernel``.

    Row ``r`` of ``runs`` (int64, columns ``RUN_*``): batch row ``runs[r, RUN_ROW]`` holds
    position ``runs[r, RUN_FIRST] + d`` at sequence index ``runs[r, RUN_START] + d`` for
    ``d < runs[r, RUN_LENGTH]``. The walk covers positions ``first .. first + count - 1``.
    """

    runs: np.ndarray
    first: int
    count: int
