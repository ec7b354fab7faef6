"""Kernels of the conventions: rows at fractional positions, and grid tables. Private.

Fractional positions (diffusion timesteps such as 999.5). Integer positions go to the
table kernels of :mod:`fastpe._kernels`, which fold cos/sin from exact anchors by angle
addition over the position's digits; a fractional position has no digits to fold, so each
value here is computed directly (:func:`row_values`). The angle ``p * (wh + wl)`` is carried
as ``th + tl`` by an error-free product (as in ``fastpe.reference.sincos``) and reduced by
``pi/2`` in double-double, Cody and Waite's way, with ``pi/2`` in four parts of which the
first three have 33 bits (fdlibm's ``pio2_1 .. pio2_3t``): for ``|th| < MEDIUM`` the
quadrant ``k < 2**20``, so ``k`` times each part is exact and the reduced angle ``x + y``
carries an absolute error near 2**-100 (the exact angle's own, from the double-double
frequency, is ``|th| * 2**-106``). fdlibm's ``__kernel_sin``/``__kernel_cos``
(FreeBSD's ``k_sin.c``/``k_cos.c``: polynomials within 2**-58 on ``|x| <= pi/4``, under one
ulp with the tail ``y``) then give sin and cos of the one reduced angle, and the quadrant
picks their signs and order. The loop has no branch and no call, so LLVM vectorizes it; a
row with a larger angle (``|p| * max(w) >= MEDIUM``) takes libm's ``sin``/``cos`` of
``th`` and the angle-addition of ``tl``, per value (:func:`_values_libm`).

Each value is computed once in float64 and rounded once into the output: stored into a
float32/float64 row, or added to the element in float64 and the sum rounded once
(:func:`frac_kernel`; 16-bit arrays: :mod:`.fractional16`).

Grid tables (:func:`grid_kernel`) and grid sums (:func:`grid_add_kernel`): the cells of an
N-D grid in C order, each cell's channels copied (or added, in float64) from one small
table per grid axis, indexed by the
cell's coordinate on that axis. That is a stream over the output at memory speed, split
into ranges of cells over fastpe's thread pool like every other kernel.
"""

from __future__ import annotations

import math

import numpy as np
from numba.core import types
from numba.extending import intrinsic

from .._config import kernel
from .angles import _two_prod_err, worker_items
from .prefetch import prefetch_lines
from .stream import LINE, stream_fence, stream_next
from .turn import TARGET_FMA, multiply_add
from .vectors import wide_vectors, wide_vectors_float32

MEDIUM = 2.0**19  # |angle| below which the Cody-Waite reduction is exact (quadrant < 2**20)
_TAYLOR = 2.0**-26  # |tl| below which sin/cos(tl) are tl, 1 - tl**2/2 (terms < 2**-78)

INVPIO2 = 6.36619772367581382433e-01  # 2/pi
ROUNDER = 1.5 * 2.0**52  # x + ROUNDER - ROUNDER rounds x to an integer
PIO2_1 = 1.57079632673412561417e00  # pi/2: first 33 bits
PIO2_2 = 6.07710050630396597660e-11  # next 33 bits
PIO2_3 = 2.02226624871116645580e-21  # next 33 bits
PIO2_3T = 8.47842766036889956997e-32  # pi/2 - (PIO2_1 + PIO2_2 + PIO2_3)

S1 = -1.66666666666666324348e-01  # k_sin.c
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10
C1 = 4.16666666666666019037e-02  # k_cos.c
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11


@kernel()
def order_index(order, n):
    """``(m, os, oc)``: ``order`` (0 interleaved, 1 ``[sin | cos]``, 2 ``[cos | sin]``) puts
    pair ``i``'s sin at channel ``m*i + os`` and its cos at ``m*i + oc``."""
    if order == 0:
        return 2, 0, 1
    if order == 1:
        return 1, 0, n
    return 1, n, 0


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` (:func:`~.turn.multiply_add`): with one rounding where the CPU has fused
    multiply-add (:data:`~.turn.TARGET_FMA`); elsewhere the product rounded, then the sum,
    as fdlibm's C code evaluates its polynomials. (``llvm.fma`` is exact on every
    CPU, but without the instruction it is a call of libm's ``fma`` per value: float32
    timestep embeddings 4.6x slower, scratch, README "Without fused multiply-add".)"""
    if not (a == types.float64 and b == types.float64 and c == types.float64):
        return None

    def codegen(context, builder, signature, args):
        return multiply_add(builder, *args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@kernel()
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@kernel()
def _ksin(x, y):
    """sin(x + y) for ``|x| <= pi/4``, ``|y|`` below half an ulp of ``x`` (k_sin.c).

    k_sin.c's ``r = S2 + z (S3 + z S4) + z w (S5 + z S6)`` and ``x - ((z (y/2 - v r) - y) -
    v S1)``, each multiply-add written out (:func:`_fma`: fused where the CPU has it, else
    rounded twice), so that no compile of a caller fuses others (LLVM's contraction picks
    products by the code around them: ``fastpe._kernels.turn``)."""
    z = x * x
    w = z * z
    r = _fma(z * w, _fma(z, S6, S5), _fma(z, _fma(z, S4, S3), S2))
    v = z * x
    return x - _fma(-v, S1, _fma(z, _fma(-v, r, 0.5 * y), -y))


@kernel()
def _kcos(x, y):
    """cos(x + y) for ``|x| <= pi/4``, ``|y|`` below half an ulp of ``x`` (k_cos.c), its
    multiply-adds written out as :func:`_ksin`'s: ``r = z (C1 + z (C2 + z C3)) + w w (C4 +
    z (C5 + z C6))``, then ``w + (((1 - w) - z/2) + (z r - x y))``."""
    z = x * x
    w = z * z
    r = _fma(z, _fma(z, _fma(z, C3, C2), C1), (w * w) * _fma(z, _fma(z, C6, C5), C4))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + _fma(z, r, -(x * y)))


@kernel()
def _values_reduced(p, wh, wl, s, c):
    """``s[i], c[i]`` = sin, cos of ``p * (wh[i] + wl[i])``, every ``|angle| < MEDIUM``.

    Compiled for 512-bit vectors (:mod:`.vectors`): the loop is float64 arithmetic alone
    (the reduction, two polynomials), and where LLVM's tuning prefers 256 bits (the
    rocketlake host) 512 took 1.2x less time for 2**16 float32 timesteps of dim 256 and
    about 1.3x less for 256 of dim 320 (scratch and ``bench/small_calls.py``, README, "Float
    timesteps with 512-bit vectors")."""
    wide_vectors()
    for i in range(wh.shape[0]):
        th = p * wh[i]
        # the product's exact error: one fused multiply-add, else _two_prod_err's split
        # (the same value: both are exact)
        if TARGET_FMA:
            tl = _fma(p, wh[i], -th) + p * wl[i]
        else:
            tl = _two_prod_err(p, wh[i], th) + p * wl[i]
        k = (th * INVPIO2 + ROUNDER) - ROUNDER  # to nearest (|k| < 2**51), no call
        a = th - k * PIO2_1  # exact (Sterbenz), k * PIO2_1 too
        r, e1 = _two_sum(a, -(k * PIO2_2))
        r, e2 = _two_sum(r, -(k * PIO2_3))
        lo = (e1 + e2) + (tl - k * PIO2_3T)
        x = r + lo
        y = (r - x) + lo
        sv = _ksin(x, y)
        cv = _kcos(x, y)
        q = k - 4.0 * np.floor(k * 0.25)  # the quadrant, 0 .. 3
        odd = q == 1.0 or q == 3.0
        s1 = cv if odd else sv
        c1 = sv if odd else cv
        s[i] = -s1 if q >= 2.0 else s1
        c[i] = -c1 if (q == 1.0 or q == 2.0) else c1


@kernel()
def _values_libm(p, wh, wl, s, c):
    """As :func:`_values_reduced` at any angle: libm's sin/cos of ``th``, then ``tl`` added."""
    for i in range(wh.shape[0]):
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
        s[i] = s0 * cl + c0 * sl
        c[i] = c0 * cl - s0 * sl


@kernel()
def row_values(p, wh, wl, wmax, s, c):
    """sin and cos of ``p * (wh + wl)`` into ``s``, ``c`` (float64, one per frequency);
    ``wmax`` bounds ``|wh + wl|``."""
    if abs(p) * wmax < MEDIUM:
        _values_reduced(p, wh, wl, s, c)
    else:
        _values_libm(p, wh, wl, s, c)


@kernel()
def max_frequency(wh, wl):
    m = 0.0
    for i in range(wh.shape[0]):
        m = max(m, abs(wh[i]) + abs(wl[i]))
    return m


@kernel()
def _store(flat, j0, step, v, add):
    """``flat[j0 + i*step] = v[i]`` (``add``: ``+=``, in float64) for every ``i``.

    The indices are unsigned (a negative ``step`` wraps modulo 2**64 to the same element),
    so that no negative-index check stands in the loop's way of being vectorized.
    """
    u0 = np.uint64(j0)
    st = np.uint64(step)
    if add:
        for i in range(np.uint64(v.shape[0])):
            flat[u0 + i * st] = flat[u0 + i * st] + v[i]
    else:
        for i in range(np.uint64(v.shape[0])):
            flat[u0 + i * st] = v[i]


@kernel()
def classify_positions(pos, limit):
    """Of float64 or int64 positions: 0 when some are fractional, 1 when all are whole
    numbers, 2 when one is not finite or exceeds ``limit`` in magnitude (the checks of a
    repeated call's positions in one pass, as ``fastpe._args.check_real_positions`` and
    the whole-number test of ``parse_embedding`` make them)."""
    whole = 1
    for i in range(pos.shape[0]):
        v = pos[i]
        if not -limit <= v <= limit:  # NaN fails too (limit: an int for int positions)
            return 2
        if v != math.floor(v):
            whole = 0
    return whole


@kernel()
def frac_kernel(w0, w1, view, pos, wh, wl, order, add, n_workers):
    """Rows at fractional positions into the ``(nb, nr, 2*n)`` ``view``: workers ``w0 .. w1 - 1``.

    ``view`` is ``(flat, off0, sb, sr, sc, nb, nr)``: element ``[b, r, j]`` at
    ``flat[off0 + b*sb + r*sr + j*sc]`` (float32 or float64). Row ``r`` holds sin/cos of
    ``pos[r] * (wh + wl)`` in ``order`` (see :func:`order_index`) for every ``b``; with ``add``
    they are added to the elements (in float64, the sum rounded once). Work items are rows.
    """
    flat, off0, sb, sr, sc, nb, nr = view
    n = wh.shape[0]
    m, os, oc = order_index(order, n)
    wmax = max_frequency(wh, wl)
    s = np.empty(n)
    c = np.empty(n)
    for w in range(w0, w1):
        r0, r1 = worker_items(nr, w, n_workers)
        for r in range(r0, r1):
            row_values(pos[r], wh, wl, wmax, s, c)
            for b in range(nb):
                base = off0 + b * sb + r * sr
                _store(flat, base + os * sc, m * sc, s, add)
                _store(flat, base + oc * sc, m * sc, c, add)
    return 0.0


@kernel()
def cell_coords(cell, grid, coords):
    """The coordinates of cell ``cell`` of ``grid`` (C order) into ``coords``."""
    rem = cell
    for d in range(grid.shape[0] - 1, -1, -1):
        coords[d] = rem % grid[d]
        rem //= grid[d]


@kernel()
def grid_spans(i0, i1, grid, blocks, itemsize, tile_bytes):
    """Items ``i0 .. i1 - 1`` (cells in C order, batch rows after one another) as ``(start,
    stop)`` spans in the order a worker takes them: whole runs of the last grid axis when its
    table rows (``itemsize`` bytes a value) fit in ``tile_bytes``, else tiles of that axis,
    each done for every grid row of the range before the next (a partial grid row at each
    end stays whole).

    Cell after cell along the last axis reads a new table row each time; a long axis streams
    its whole table once per grid row (16 MiB of float64 for 4096 cells of 512 channels),
    from L3 or memory. Tiled, the rows of one tile are read again from the caches.
    """
    last = grid.shape[0] - 1
    period = grid[last]
    width = 0
    for k in range(blocks.shape[0]):
        if blocks[k, 0] == last:
            width += blocks[k, 2]
    tile = period if width == 0 else max(1, tile_bytes // (width * itemsize))
    if tile >= period or i1 - i0 <= period:
        out = np.empty((1, 2), dtype=np.int64)
        out[0, 0], out[0, 1] = i0, i1
        return out
    q0 = (i0 + period - 1) // period  # the first whole grid row
    q1 = i1 // period  # one past the last
    nt = (period + tile - 1) // tile
    out = np.empty((2 + (q1 - q0) * nt, 2), dtype=np.int64)
    out[0, 0], out[0, 1] = i0, q0 * period
    k = 1
    for t0 in range(0, period, tile):
        for q in range(q0, q1):
            out[k, 0] = q * period + t0
            out[k, 1] = q * period + min(period, t0 + tile)
            k += 1
    out[k, 0], out[k, 1] = q1 * period, i1
    return out


@kernel(inline=True)  # the body of grid_kernel and grid_add_kernel
def _grid_work(w0, w1, view, grid, blocks, tab, add, n_workers, tile_bytes, stream, ahead, burst):
    """Write (or, with ``add``, add) a grid's values into ``view``: workers ``w0 .. w1 - 1``.
    Inlined into :func:`grid_kernel` (writes) and :func:`grid_add_kernel` (sums).

    ``view`` as in :func:`frac_kernel`, its ``nr`` rows the cells of ``grid`` in C order.
    Row ``k`` of ``blocks`` (int64 ``(axis, col, width, start)``): channels ``col ..
    col + width`` of a cell are ``tab[start + c*width : ... + width]`` with ``c`` the cell's
    coordinate on ``axis`` (``axis < 0``: zeros, written only). ``tab`` has the view's dtype
    for a write (the flat 16-bit bits included), float64 for an add (the sum is rounded
    once). Work items are (batch row, cell) pairs, taken in the order of :func:`grid_spans`.
    With ``stream`` ``ON`` (None: off), each cell's row of a write with unit-stride channels
    is put together in a buffer and copied out by streaming stores (:mod:`.stream`; the
    cells of each span of :func:`grid_spans` as one run where their rows lie back to back,
    :func:`~.stream.stream_next`); the
    blocks must then cover every channel (the caller's zero blocks fill the gaps), or the
    channels no block covers would be written from the buffer's leftovers. An add with
    unit-stride channels prefetches x ``ahead`` elements on (0: none): with ``burst`` 0,
    before each cell, the lines of the cell's width (as on Zen 5); with ``burst`` > 0, the
    channels of each block ``burst`` at a time, each group's lines ``ahead`` on before it is
    added, a steady distance whatever the width of a cell. Without it the hardware
    prefetchers alone left the loop waiting on memory where it was measured: see the
    comments on ``GRID_AHEAD_BYTES`` and ``GRID_PACE_AHEAD_BYTES`` in
    :mod:`fastpe.conventions` (the choice: ``grid_sum_prefetch`` there).
    """
    flat, off0, sb, sr, sc, nb, nr = view
    coords = np.zeros(grid.shape[0], dtype=np.int64)
    ncol = 0  # channels of a cell
    for k in range(blocks.shape[0]):
        ncol = max(ncol, blocks[k, 1] + blocks[k, 2])
    # a cell's row after a line's elements that stream_carry may fill with the last ones of
    # the cell before (the cells of a span whose rows lie back to back: one run)
    lead = LINE // flat.itemsize
    if stream is not None:
        row = np.empty(lead + ncol, dtype=flat.dtype)
    run = sr == ncol and (nb == 1 or sb == nr * sr)
    for w in range(w0, w1):
        i0, i1 = worker_items(nb * nr, w, n_workers)
        spans = grid_spans(i0, i1, grid, blocks, tab.itemsize, tile_bytes)
        for span in range(spans.shape[0]):
            carry = -1  # see stream_carry
            for item in range(spans[span, 0], spans[span, 1]):
                b = item // nr
                cell = item - b * nr
                cell_coords(cell, grid, coords)
                base = off0 + b * sb + cell * sr
                if stream is not None and sc == 1 and not add:
                    for k in range(blocks.shape[0]):
                        axis, col, width = blocks[k, 0], blocks[k, 1], blocks[k, 2]
                        d0 = np.uint64(lead + col)
                        if axis < 0:
                            for j in range(np.uint64(width)):
                                row[d0 + j] = 0
                        else:
                            s0 = np.uint64(blocks[k, 3] + coords[axis] * width)
                            for j in range(np.uint64(width)):
                                row[d0 + j] = tab[s0 + j]
                    last = item == spans[span, 1] - 1
                    carry = stream_next(flat, base, row, lead, ncol, sr, run, carry, last)
                    continue
                if add and sc == 1 and ahead > 0 and burst == 0:
                    prefetch_lines(flat, base + ahead, ncol)
                for k in range(blocks.shape[0]):
                    axis, col, width = blocks[k, 0], blocks[k, 1], blocks[k, 2]
                    dst = base + col * sc
                    if axis < 0:
                        if not add:
                            for j in range(width):
                                flat[dst + j * sc] = 0
                        continue
                    src = blocks[k, 3] + coords[axis] * width
                    if add and sc == 1 and ahead > 0 and burst > 0:
                        for c0 in range(0, width, burst):  # paced: see the docstring
                            cn = min(burst, width - c0)
                            prefetch_lines(flat, dst + c0 + ahead, cn)
                            d0 = np.uint64(dst + c0)
                            s0 = np.uint64(src + c0)
                            for j in range(np.uint64(cn)):
                                flat[d0 + j] = flat[d0 + j] + tab[s0 + j]
                    elif add and sc == 1:  # contiguous rows (unsigned: the loop vectorizes)
                        d0 = np.uint64(dst)
                        s0 = np.uint64(src)
                        for j in range(np.uint64(width)):
                            flat[d0 + j] = flat[d0 + j] + tab[s0 + j]
                    elif add:
                        for j in range(width):
                            flat[dst + j * sc] = flat[dst + j * sc] + tab[src + j]
                    elif sc == 1:  # contiguous rows: a plain copy (unsigned: no wraparound)
                        d0 = np.uint64(dst)
                        s0 = np.uint64(src)
                        for j in range(np.uint64(width)):
                            flat[d0 + j] = tab[s0 + j]
                    else:
                        for j in range(width):
                            flat[dst + j * sc] = tab[src + j]
        if stream is not None:
            stream_fence()
    return 0.0


@kernel()
def grid_kernel(w0, w1, view, grid, blocks, tab, n_workers, tile_bytes, stream):
    """Write a grid's values into ``view``: :func:`_grid_work` with ``add`` False (sums
    take :func:`grid_add_kernel`)."""
    return _grid_work(w0, w1, view, grid, blocks, tab, False, n_workers, tile_bytes, stream, 0, 0)


@kernel()
def grid_add_kernel(w0, w1, view, grid, blocks, tab, n_workers, tile_bytes, ahead, burst):
    """:func:`grid_kernel` adding (``add`` True, no ``stream``), a dispatcher of its own.

    A float32 sum is compiled for 512-bit vectors (:mod:`.vectors`): it converts each
    value of x to float64 and the sum back, four conversions a vector that take half the
    instructions with 512 bits. On the rocketlake host (whose LLVM tuning prefers 256
    bits) ``bench/grids.py`` put its three float32 sums at 69-75% of the ``a *= s``
    yardstick against 63-68% without (README, "float32 grid sums with 512-bit vectors").
    float64 sums (no conversions) read 76-79% with them against 79-82% without, writes
    (a copy of the table rows) were no faster: neither asks for them.

    A kernel of its own rather than a flag of :func:`grid_kernel` (None or ``ON``, which
    numba would prune): a call of a trivial two-argument function took 0.44 us with an
    ``ON`` against 0.21 with a bool (scratch), and a small grid sum takes about 5 us in
    all (README, "float32 grid sums with 512-bit vectors").
    """
    wide_vectors_float32(view[0])
    return _grid_work(
        w0, w1, view, grid, blocks, tab, True, n_workers, tile_bytes, None, ahead, burst
    )
