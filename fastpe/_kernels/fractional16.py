"""16-bit (float16, bfloat16) twins of the conventions' kernels in :mod:`.fractional`. Private.

As in :mod:`.half`, the array is seen as its raw ``uint16`` bits. Values are computed in
float64 from the exact angles (:func:`~.fractional.row_values`) and rounded once, to
nearest even, into 16 bits (:func:`~.half.from_f64`); an addition converts the element to
float32 exactly, adds in float64 and rounds the sum once. Grid tables are written by
:func:`~.fractional.grid_kernel` itself (a copy of 16-bit values); only the addition needs
a twin. Imported on the first 16-bit call, so the float32/float64 paths never compile it.
"""

from __future__ import annotations

import numpy as np

from .._config import kernel
from .angles import worker_items
from .fractional import cell_coords, grid_spans, max_frequency, order_index, row_values
from .half import from_f64, to_f32


@kernel()
def frac16_kernel(w0, w1, view, pos, wh, wl, order, add, n_workers, bf16):
    """:func:`~.fractional.frac_kernel` on 16-bit bits (``bf16``: bfloat16, else float16)."""
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
                js = base + os * sc
                jc = base + oc * sc
                for i in range(n):
                    a = js + m * i * sc
                    d = jc + m * i * sc
                    if add:
                        flat[a] = from_f64(np.float64(to_f32(flat[a], bf16)) + s[i], bf16)
                        flat[d] = from_f64(np.float64(to_f32(flat[d], bf16)) + c[i], bf16)
                    else:
                        flat[a] = from_f64(s[i], bf16)
                        flat[d] = from_f64(c[i], bf16)
    return 0.0


@kernel()
def grid_add16_kernel(w0, w1, view, grid, blocks, tab, n_workers, bf16, tile_bytes):
    """The addition of :func:`~.fractional.grid_kernel` on 16-bit bits, ``tab`` float64."""
    flat, off0, sb, sr, sc, nb, nr = view
    coords = np.zeros(grid.shape[0], dtype=np.int64)
    for w in range(w0, w1):
        i0, i1 = worker_items(nb * nr, w, n_workers)
        spans = grid_spans(i0, i1, grid, blocks, tab.itemsize, tile_bytes)
        for span in range(spans.shape[0]):
            for item in range(spans[span, 0], spans[span, 1]):
                b = item // nr
                cell = item - b * nr
                cell_coords(cell, grid, coords)
                base = off0 + b * sb + cell * sr
                for k in range(blocks.shape[0]):
                    axis, col, width = blocks[k, 0], blocks[k, 1], blocks[k, 2]
                    if axis < 0:
                        continue
                    dst = base + col * sc
                    src = blocks[k, 3] + coords[axis] * width
                    if sc == 1:  # contiguous channels: unsigned indices, the loop vectorizes
                        d0 = np.uint64(dst)
                        s0 = np.uint64(src)
                        for j in range(np.uint64(width)):
                            v = np.float64(to_f32(flat[d0 + j], bf16)) + tab[s0 + j]
                            flat[d0 + j] = from_f64(v, bf16)
                    else:
                        for j in range(width):
                            v = np.float64(to_f32(flat[dst + j * sc], bf16)) + tab[src + j]
                            flat[dst + j * sc] = from_f64(v, bf16)
    return 0.0
