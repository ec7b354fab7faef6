"""Every sinusoidal convention of the field, exact: fairseq, tensor2tensor, diffusion
timesteps, 2-D and 3-D grids, and the general formula underneath them.

All of them are sines and cosines of ``position * w_i`` with geometrically spaced
frequencies ``w_i = scale * base**(-i / (n - shift))`` (``n = dim // 2``, or the channels
of one grid axis), laid out interleaved, ``[sin | cos]`` or ``[cos | sin]``, with a zero
column when ``dim`` is odd:

=====================  ==========================================  ======================
convention             frequencies                                 layout
=====================  ==========================================  ======================
transformer            ``base**(-i / n)`` = ``base**(-2i/dim)``    interleaved or halves
fairseq                ``10000**(-i / (n - 1))``                   ``[sin | cos]``
tensor2tensor          ``min * (max/min)**(-i / max(n - 1, 1))``   ``[sin | cos]``
diffusers timesteps    ``scale * max_period**(-i / (n - shift))``  ``[sin | cos]``
guided-diffusion, DiT  ``max_period**(-i / n)``                    ``[cos | sin]``
MAE grids              ``10000**(-2i / (dim / ndim))`` per axis    ``[sin | cos]`` per axis
=====================  ==========================================  ======================

The 1-D conventions of tables (fairseq, tensor2tensor) are ``convention=`` values of
:func:`fastpe.sinusoidal_table` and :func:`fastpe.add_sinusoidal`; this module holds the
others. Frequencies and angles are exact (double-double frequencies, error-free products,
see :mod:`fastpe._spacing`), for integer and float positions alike: fastpe computes the
formula's mathematical value, where the originals round the frequencies and angles in
float32 or float64 (README, "Conventions", gives the bounds against both).

Dtypes: float32 (default), float64, float16 and ml_dtypes' bfloat16. Values are computed
in float64 from the exact angles and rounded once, to nearest even, into the output dtype;
an ``add_`` call at fractional positions or on a grid adds in float64 and rounds the sum
once; at 1-D integer positions (fairseq, tensor2tensor, whole timesteps) the sum is
``add_sinusoidal``'s, with its bounds.

Integer positions of 1-D tables and sums run on the kernels of
:func:`fastpe.sinusoidal_table` and :func:`fastpe.add_sinusoidal`, in one parallel pass.
Fractional positions (timesteps such as 999.5) have a kernel of their own
(:mod:`fastpe._kernels.fractional`): the exact angle reduced by pi/2 in double-double and
fdlibm's sin/cos polynomials, vectorized, rows split over fastpe's thread pool for calls of
``_SERIAL_PAIRS`` (row, frequency, batch row) triples or more. A grid table or grid sum is
one small table per axis, then one pass over the output that copies (or adds) each cell's
channels from them, cells split over the thread pool for calls over 1 MiB.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _engine, _plans
from ._args import MAX_POSITION, EmbedCall, parse_embedding, parse_grid, parse_timestep
from ._flag import ON
from ._freq import angle_limit_of

__all__ = [
    "add_grid_sinusoidal",
    "add_sinusoidal_embedding",
    "add_timestep_embedding",
    "grid_sinusoidal",
    "sinusoidal_embedding",
    "timestep_embedding",
]


# --------------------------------------------------------------------------- engine calls
# The full path's calls of the integer kernels (through fastpe._engine.run): _write_table
# and _add_table. The fractional and grid kernels are launched below; planned 1-D calls
# call the kernels themselves (_embed_planned).


def _oriented(view: np.ndarray, block):
    """``(view, layout, wh, wl, key)`` for the kernels, which write sin first.

    ``[cos | sin]`` is ``[sin | cos]`` written into the channels reversed, with the
    frequencies reversed: channel ``n + j`` of a reversed view is channel ``n - 1 - j``.
    """
    layout, wh, wl, key = _oriented_freqs(block)
    return (view[..., ::-1] if block.order == 2 else view), layout, wh, wl, key


def _oriented_freqs(block):
    """``(layout, wh, wl, key)`` of :func:`_oriented`, without the view."""
    if block.order != 2:
        return block.order, block.wh, block.wl, block.key
    return 1, _reversed(block.wh), _reversed(block.wl), ("reversed", *block.key)


def _reversed(w: np.ndarray) -> np.ndarray:
    """``w[::-1]``, contiguous and read-only as the cached frequency sets are (the
    kernels' arguments then have one type: one compilation)."""
    r = np.ascontiguousarray(w[::-1])
    r.flags.writeable = False
    return r


def _where(block):
    if block.positions is not None:
        return block.positions[None, :], None
    return None, np.array([block.offset], dtype=np.int64)


def _write_table(out2d: np.ndarray, block, fixup: bool) -> None:
    """Write one block's ``(rows, 2*npairs)`` integer-position table into ``out2d``."""
    view, layout, wh, wl, key = _oriented(out2d, block)
    pos, offs = _where(block)
    _engine.run(
        view[None, :, None, :],
        op=_engine.OP_WRITE,
        npairs=block.npairs,
        layout=layout,
        positions=pos,
        offsets=offs,
        freq_key=key,
        wh=wh,
        wl=wl,
        fixup=fixup,
    )


def _add_table(x3d: np.ndarray, block) -> None:
    """Add one block's integer-position table to every batch row of ``x3d`` (B, rows, 2n)."""
    view, layout, wh, wl, key = _oriented(x3d, block)
    pos, offs = _where(block)
    _engine.run(
        view[:, :, None, :],
        op=_engine.OP_ADD,
        npairs=block.npairs,
        layout=layout,
        positions=pos,
        offsets=offs,
        freq_key=key,
        wh=wh,
        wl=wl,
    )


# --------------------------------------------------------------------------- filling

# Fractional positions: pairs (rows x frequencies x batch rows) below which a call runs on
# the caller's thread. A pair costs the work of several table values (a reduction by pi/2
# and two polynomials), so the threshold counts pairs, not bytes as the engine's does; a
# batch of 256 timesteps at dim 320 (41k pairs) stays on the caller's thread. Not yet
# tuned on a quiet machine.
_SERIAL_PAIRS = 1 << 17


_KERNELS: list = []


def _kernels():
    """:mod:`fastpe._kernels.fractional`, imported (hence numba) on the first call."""
    if not _KERNELS:
        from ._kernels import fractional

        _KERNELS.append(fractional)
    return _KERNELS[0]


def _is_float(block) -> bool:
    return block.positions is not None and block.positions.dtype.kind == "f"


def _geometry(part: np.ndarray) -> tuple:
    """``(flat, off0, sb, sr, sc, nb, nr)`` of ``part`` (rows, w) or (batch, rows, w), not
    empty: the view record of :mod:`fastpe._kernels.fractional` (16-bit: the flat bits).

    A C-contiguous ``part`` (nearly every call) in fewer steps than the general
    :func:`_geometry_of_view`, with the same record: 1 us against 3 us on the znver3 host, of
    a small planned grid call's 8-14 us."""
    if not part.flags.c_contiguous:
        return _geometry_of_view(part)
    item, st, shape = part.itemsize, part.strides, part.shape
    flat = part.reshape(-1)
    if item == 2:
        flat = flat.view(np.uint16)
    if len(shape) == 3:
        return (flat, 0, st[0] // item, st[1] // item, st[2] // item, shape[0], shape[1])
    return (flat, 0, 0, st[0] // item, st[1] // item, 1, shape[0])  # (part[None]: stride 0)


def _geometry_of_view(part: np.ndarray) -> tuple:
    """:func:`_geometry` of any ``part``, through :func:`fastpe._engine.flat_view`."""
    v3 = part if part.ndim == 3 else part[None]
    flat, off0, (sb, sr, sc) = _engine.flat_view(v3)
    if part.itemsize == 2:
        flat = flat.view(np.uint16)
    return (flat, off0, sb, sr, sc, v3.shape[0], v3.shape[1])


def _workers(n_items: int, threads: int) -> int:
    if threads == 1:
        return 1
    return max(1, min(n_items, _engine._ITEMS_PER_THREAD * threads))


def _fractional(part: np.ndarray, block, add: bool) -> None:
    """Write (or add) one block at fractional positions into ``part``, in place."""
    if part.size == 0:
        return
    geo = _geometry(part)
    nb, nr = geo[5], geo[6]
    threads = 1 if nb * nr * block.npairs < _SERIAL_PAIRS else _engine.num_threads()
    n_workers = _workers(nr, threads)
    pos, wh, wl = block.positions, block.wh, block.wl
    args: tuple
    if part.itemsize == 2:
        from ._kernels import fractional16

        kern = fractional16.frac16_kernel
        args = (geo, pos, wh, wl, block.order, add, n_workers, part.dtype != np.float16)
    else:
        kern = _kernels().frac_kernel
        args = (geo, pos, wh, wl, block.order, add, n_workers)
    _engine._launch(kern, args, n_workers, threads)


def _uncovered(call: EmbedCall) -> list[slice]:
    """The column ranges that no block covers (zeros: odd dims, tensor2tensor's rest)."""
    if len(call.blocks) == 1 and call.blocks[0].col == 0:  # one block from column 0
        end = 2 * call.blocks[0].npairs
        return [slice(end, call.dim)] if end < call.dim else []
    cols = sorted((b.col, b.col + 2 * b.npairs) for b in call.blocks)
    gaps, at = [], 0
    for c0, c1 in cols:
        if c0 > at:
            gaps.append(slice(at, c0))
        at = max(at, c1)
    if at < call.dim:
        gaps.append(slice(at, call.dim))
    return gaps


# The bytes of the last grid axis's table rows that one tile of cells uses (see
# fastpe._kernels.fractional.grid_spans), read again from the caches while the tile is
# done for every grid row of a worker's range, instead of streaming the axis's whole table
# once per grid row. On the AMD host of LLVM's znver3 (L2 512 KiB a core, L3 32 MiB), a
# scratch A/B (add_grid_sinusoidal, 1 GiB float32, 512 channels per axis, alternating
# processes) put a 64 x 4096 grid at 76-82% of the scale yardstick with 1 MiB, 72-83% with
# 512 KiB, 71-82% with 256 KiB, 55-73% untiled: the sizes could not be told apart. On the
# 480 MiB host (L2 2 MiB a core) the x stream pushes larger tiles out of L2. Scratch, the
# sizes alternated in one process, three processes, 2 rounds each: 512 x 512 (MAE and
# tensor2tensor) at 65-73% with 256 KiB, 69-71% with 512 KiB, 58-65% with 1 MiB, 60-61%
# with 128 KiB (runs of 32 cells stream x less well); 64 x 4096 at 64-68% with 256 KiB,
# 63-64% with 512 KiB, 59-63% with 1 MiB. So 256 KiB, but on Zen 5 1 MiB: on the znver5
# host (L2 1 MiB a core, L3 32 MiB), scratch, the sizes alternated in one process, 4
# rounds, bench/grids.py's sums: MAE 512 x 512 86% with 1 MiB against 84% with 256 KiB,
# its long last axis 86% against 81%, tensor2tensor 90% against 83%, float16 50% against
# 48%, bfloat16 60% against 56% (512 KiB between them); untiled, the long axis fell to 76%
# (README, "Large grids"). GRID_TILE_BYTES None: that rule (grid_tile_bytes); tests pin a
# size to tile small grids.
GRID_TILE_BYTES: int | None = None
_GRID_TILE_DEFAULT = 256 * 1024
_GRID_TILE_ZEN5 = 1 << 20


def grid_tile_bytes() -> int:
    """The tile of the grid kernels (see ``GRID_TILE_BYTES``): 1 MiB on Zen 5, 256 KiB
    on other CPUs, unless pinned."""
    if GRID_TILE_BYTES is not None:
        return GRID_TILE_BYTES
    return _GRID_TILE_ZEN5 if _engine.host_zen5() else _GRID_TILE_DEFAULT


# How far ahead of each cell a float32/float64 grid sum with contiguous channels prefetches
# x (the lines of one cell's width; 0: none), on Zen 5 (fastpe._engine.zen5_or_later; some
# other CPUs prefetch paced, GRID_PACE_AHEAD_BYTES below, the rest not at all). On the
# znver5 host (1 MiB L2 a core, 32 MiB L3), scratch, a 512 x 512 grid of 1024 float32
# channels, 1 GiB, the distances alternated in one process, 3 rounds, fraction of the scale
# yardstick: none 48-74% (48% in a fast-state round), 2 KiB 60-81%, 4 KiB 78-84%, 8 KiB
# 79-84%, 16 KiB 79-81%, 32 KiB 71-78%; in a second process none 65-73%, 4 KiB 82-85%, 8 KiB
# 83-88%. bench/grids.py in alternating invocations against the code before is in the README
# ("Large grids"). Elsewhere it was measured and not kept: on the 480 MiB host 2 KiB ahead
# (66-68% against 65-73%), on the znver3 host the next cell's row (0.79 against 0.82 and
# 0.69 against 0.83).
GRID_AHEAD_BYTES = 8192
# The same for 16-bit grid sums, per block of contiguous channels (their float32 pass), on
# every CPU (but where paced: GRID_PACE16_AHEAD_BYTES below): 2 KiB, as their loop had
# it. Scratch on the znver5 host as above (a 1024 x 512 grid, 4 rounds): float16 57% with
# 2 KiB, 63-64% with 4-8 KiB; bfloat16 55-57% with each.
GRID_AHEAD16_BYTES = 2048
# On the CPUs of _PACED_GRID_CPUS (LLVM's names) float32/float64 grid sums over arrays of at
# least GRID_PACE_MIN_BYTES (None: fastpe._engine.cache_share, 128 MiB there) prefetch
# x paced instead: GRID_PACE_BURST_BYTES of each block's channels at a time, each group's
# lines GRID_PACE_AHEAD_BYTES on before it is added (grid_sum_prefetch). On the
# `emeraldrapids` host (2 cores, 2 MiB L2 a core), scratch, add_grid_sinusoidal of float32 1
# GiB, the settings alternated in one process, 2 rounds, fraction of the scale yardstick
# (slow state, 50-52 ms per GiB): none 64-68% at 256, 1024 and 4096 channels. Per cell as on
# Zen 5: 1024 channels 79-82% at 256 bytes ahead, 85-86% at 512, 90% at 1 KiB, 86% at 2 KiB,
# 79-84% at 4-8 KiB; 256 channels 76-79% at 1 KiB, 86-91% at 2-4 KiB; 4096 channels 73-78%
# at 1 KiB, 70-73% at 4-8 KiB (a cell of 16 KiB prefetched at once). Paced, 1 KiB groups:
# 89-95% at each width 4-8 KiB ahead (256 channels 82% at 2 KiB); 256-byte groups 6 KiB
# ahead: 1024 channels 95%, 4096 91-93%, 256 91%, the 3-D 4 x 256 x 256 grid of 1020
# channels 94-96% against 67-70% (4 KiB ahead: 89-96%); 2 KiB groups 4-6 KiB ahead 87-90%.
# float64 sums (256 x 512, 1024 channels) 112-114% against 104-106%. In cache the prefetches
# only cost: paced 8 MiB 69-72% against 80-81% without, 16 MiB 59% against 65%, 32 MiB
# 62-70% against 71-83%, 64 MiB 64-65% against 75-77%. At 128 MiB the two left the cache in
# other states (the yardstick beside them 2.8-3.1 ms paced, 5.2 without): paced 3.6 ms a
# call, 8.0-8.2 without. At 256 and 512 MiB paced 94% against 61-67%. bench/grids.py
# --match add_grid alternated in fresh processes with the code before (f5f3138, no prefetch;
# PYTHONPATH at its worktree), three invocations each: float32 sums 87-104% against 65-72%
# (README, "Grid sums paced on the emeraldrapids host", which also withdraws an earlier
# comparison that had timed this code twice). Other CPUs: the 480
# MiB (rocketlake) host measured 2 KiB per cell and did not keep it; paced, unmeasured; so
# are other machines of this CPU (these figures are from a virtual machine of 2 cores).
GRID_PACE_AHEAD_BYTES = 6144
GRID_PACE_BURST_BYTES = 256
GRID_PACE_MIN_BYTES: int | None = None
_PACED_GRID_CPUS = frozenset({"emeraldrapids"})
_grid_paced: bool | None = None  # whether this CPU is one of them (asked once)
# On those CPUs 16-bit sums over arrays of at least GRID_PACE_MIN_BYTES are paced too (in
# place of GRID_AHEAD16_BYTES per block): each whole group of 16 values of their float32
# pass prefetches the line GRID_PACE16_AHEAD_BYTES past it (grid16_prefetch). On the
# `emeraldrapids` host, scratch, a 1024 x 512 grid of 1024 channels (1 GiB), the settings
# patched in fresh processes alternated, twice each, fraction of the scale yardstick: 2 KiB
# per block float16 69-71%, bfloat16 73-75%; paced 2 KiB ahead 72-74%, 76-78%; 3 KiB
# 74-75%, 77-82%; 4 KiB 77-80%, 81-85%; 6 KiB 76-79%, 83-85%; 8 KiB 73-79%, 79-82%. In
# cache (16 MiB, 2 threads) the sums take about 60 ms per GiB either way, as long as the
# yardstick out of the cache: their arithmetic alone leaves them short of 90% there.
GRID_PACE16_AHEAD_BYTES = 4096


def grid_sum_prefetch(nbytes: int, itemsize: int) -> tuple[int, int]:
    """``(ahead, burst)`` in elements for a float32/float64 grid sum over ``nbytes`` of
    ``itemsize``-byte values (``fractional.grid_add_kernel``): on Zen 5 each cell's lines
    ``GRID_AHEAD_BYTES`` ahead (burst 0); on the CPUs of ``_PACED_GRID_CPUS``, in arrays of
    at least ``GRID_PACE_MIN_BYTES``, paced (``GRID_PACE_AHEAD_BYTES`` ahead,
    ``GRID_PACE_BURST_BYTES`` at a time); else ``(0, 0)``, no prefetch. The CPU is known by
    LLVM's name for it (asked once): an LLVM too old to know a CPU of that set names it
    otherwise, and it takes no prefetch, as other CPUs."""
    if _engine.host_zen5():
        return GRID_AHEAD_BYTES // itemsize, 0
    ahead = GRID_PACE_AHEAD_BYTES // itemsize
    if ahead > 0 and _paced(nbytes):
        return ahead, max(1, GRID_PACE_BURST_BYTES // itemsize)
    return 0, 0


def _paced(nbytes: int) -> bool:
    """Whether a grid sum over ``nbytes`` is paced: on the CPUs of ``_PACED_GRID_CPUS``
    (asked once), from ``GRID_PACE_MIN_BYTES`` (None: ``fastpe._engine.cache_share``)."""
    global _grid_paced
    if _grid_paced is None:
        _grid_paced = _engine._host_cpu_name() in _PACED_GRID_CPUS
    if not _grid_paced:
        return False
    least = GRID_PACE_MIN_BYTES
    if least is None:
        least = _engine.cache_share()  # (asked once: a small sum takes 4 us)
    return nbytes >= least


def grid16_prefetch(nbytes: int) -> tuple[int, int]:
    """``(ahead, pace)`` of a 16-bit grid sum over ``nbytes``
    (``fractional16.grid_add16_kernel``): on the CPUs of ``_PACED_GRID_CPUS``, where
    :func:`_paced`, ``(0, GRID_PACE16_AHEAD_BYTES)``, each group of 16 values prefetching
    the line that many bytes on; else ``(GRID_AHEAD16_BYTES // 2, 0)``, each block's lines
    that many elements ahead (Zen 5 included)."""
    if GRID_PACE16_AHEAD_BYTES > 0 and not _engine.host_zen5() and _paced(nbytes):
        return 0, GRID_PACE16_AHEAD_BYTES
    return GRID_AHEAD16_BYTES // 2, 0


def _grid(call: EmbedCall, rows: np.ndarray, prep: tuple | None) -> None:
    """Write or add an N-D grid's values into ``rows`` (its cells, (tokens, dim) or (batch,
    tokens, dim)) in one threaded pass: one small table per block (float64 for an add, the
    output dtype for a write), copied or added per cell (``fractional.grid_kernel``,
    ``grid_add_kernel``, 16-bit sums ``fractional16.grid_add16_kernel``). ``prep``: the
    call's :func:`_grid_prepare`, where made already (a plan's first call)."""
    if rows.size == 0:
        return
    _grid_launch(_grid_prepare(call) if prep is None else prep, rows)


def _grid_prepare(call: EmbedCall) -> tuple:
    """What :func:`_grid_launch` needs of a checked grid call, whatever array it writes:
    ``(add, grid, blocks, tab, pair)``, the blocks' small tables made here (``pair``: for
    a 16-bit sum their values as float32 pairs, else None). A plan keeps it
    (:func:`_grid_plan`); the kernels only read it."""
    tdt = np.dtype(np.float64) if call.add else call.dtype
    spec, start = [], 0
    for b in call.blocks:
        spec.append((b.axis, b.col, 2 * b.npairs, start))
        start += call.grid[b.axis] * 2 * b.npairs
    # The blocks' tables side by side in one buffer, each written in place
    tab = np.zeros(1, dtype=tdt) if start == 0 else np.empty(start, dtype=tdt)
    for b, (axis, _, width, at) in zip(call.blocks, spec):
        part = tab[at : at + call.grid[axis] * width].reshape(call.grid[axis], width)
        _write_table(part, b, fixup=tdt == np.float32)
    if not call.add:
        spec += [(-1, g.start, g.stop - g.start, 0) for g in _uncovered(call)]
    blocks = np.array(spec, dtype=np.int64).reshape(-1, 4)
    if tab.itemsize == 2:
        tab = tab.view(np.uint16)
    grid = np.array(call.grid, dtype=np.int64)
    # a 16-bit sum: the float64 tables, and for its first pass each value as two float32s,
    # the float64 value rounded and the rest rounded (fractional16._first_pass)
    pair = None
    if call.add and call.dtype.itemsize == 2:
        pair = np.empty((2, tab.size), dtype=np.float32)
        pair[0] = tab
        pair[1] = tab - pair[0]
    return (call.add, grid, blocks, tab, pair)


def _grid_launch(prep: tuple, rows: np.ndarray, entries: dict | None = None) -> None:
    """Run a prepared grid call (:func:`_grid_prepare`) over ``rows`` (not empty), on the
    thread pool for a large one. ``entries``: a plan's compiled entry points
    (:func:`_grid_plan`), through which a call on the caller's thread goes
    (:func:`fastpe._engine.call_entry`: numba's dispatcher typed every argument anew,
    0.5-1 us of a small call)."""
    add, grid, blocks, tab, pair = prep
    geo = _geometry(rows)
    threads = _engine._threads(rows.size * rows.itemsize)
    n_workers = _workers(geo[5] * geo[6], threads)
    args: tuple
    if pair is not None:
        from ._kernels import fractional16

        kern = fractional16.grid_add16_kernel
        bf16 = ON if rows.dtype != np.float16 else None  # one specialization per dtype
        ahead, pace = grid16_prefetch(rows.nbytes)
        args = (geo, grid, blocks, tab, pair, n_workers, bf16, grid_tile_bytes(), ahead, pace)
    else:
        if add:  # (a kernel of its own: float32 sums with 512-bit vectors)
            ahead, burst = grid_sum_prefetch(rows.nbytes, rows.itemsize)
            kern = _kernels().grid_add_kernel
            args = (geo, grid, blocks, tab, n_workers, grid_tile_bytes(), ahead, burst)
        else:
            kern = _kernels().grid_kernel
            # a large write, every channel covered (the blocks and the zeros above): each
            # cell's row by streaming stores
            stream = _engine.streamed(rows, geo[0], geo[4])
            args = (geo, grid, blocks, tab, n_workers, grid_tile_bytes(), stream)
    if entries is not None and threads == 1:
        # the plan fixes the arguments' types (the dtypes, shapes and strides of the
        # arrays, the flags of the sum's kernels), but for the flag of a write's streaming
        # stores (its bound may move: fastpe._engine.stream_min_bytes) and the alignment
        # of the rows' flat array (the tables' are their own)
        key = args[-1] is None
        _engine.call_entry(entries, key, geo[0].flags.aligned, kern, (0, n_workers, *args))
        return
    _engine._launch(kern, args, n_workers, threads)


def _write(call: EmbedCall, prep: tuple | None = None) -> np.ndarray:
    t, result = call.target, call.result
    assert t is not None and result is not None  # the fast parsers always allocate
    if call.lead:
        t[: call.lead] = 0.0
    rows = t[call.lead :]
    if len(call.grid) > 1:
        _grid(call, rows, prep)
    else:
        for gap in _uncovered(call):
            rows[:, gap] = 0.0
        for b in call.blocks:
            part = rows[:, b.col : b.col + 2 * b.npairs]
            if _is_float(b):
                _fractional(part, b, add=False)
            else:  # straight into the target, in parallel
                _write_table(part, b, fixup=call.dtype == np.float32)
    if call.zero_rows is not None and call.zero_rows.size:
        t[call.lead + call.zero_rows] = 0.0
    return result


def _add(call: EmbedCall, prep: tuple | None = None) -> np.ndarray:
    t, result = call.target, call.result  # (rows, dim) or (batch, rows, dim): x's data
    assert t is not None and result is not None
    keep, zero = None, call.zero_rows
    if zero is not None and zero.size:
        keep = t[..., call.lead + zero, :].copy()  # fairseq: nothing added there
    rows = t[..., call.lead :, :]
    if len(call.grid) > 1:
        _grid(call, rows, prep)
    else:
        for b in call.blocks:
            part = rows[..., b.col : b.col + 2 * b.npairs]
            if _is_float(b):
                _fractional(part, b, add=True)
            else:
                _add_table(part if part.ndim == 3 else part[None], b)
    if keep is not None and zero is not None:
        t[..., call.lead + zero, :] = keep
    return result


def run_call(call: EmbedCall, prep: tuple | None = None) -> np.ndarray:
    """Carry out a checked convention call (fast path); ``prep``: an N-D grid call's
    :func:`_grid_prepare`, where made already."""
    return _add(call, prep) if call.add else _write(call, prep)


# --------------------------------------------------------------------------- public


def sinusoidal_embedding(
    positions: ArrayLike,
    dim: int,
    *,
    base: float = 10000.0,
    shift: float = 0.0,
    scale: float = 1.0,
    frequencies: ArrayLike | None = None,
    order: str = "interleaved",
    dtype: DTypeLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The general sinusoidal embedding: any positions, spacing, order and scale.

    Row ``r`` holds ``sin`` and ``cos`` of ``positions[r] * w_i`` for ``i < dim // 2``, with
    ``w_i = scale * base**(-i / (dim // 2 - shift))``; an odd ``dim`` ends with a zero column.

    Parameters
    ----------
    positions : array_like, 1-D
        Integers or floats (finite, within 2**53 in magnitude), one per row.
    dim : int
        Number of columns, >= 1.
    base : float, default 10000.0
        Frequency base (``max_period`` of the diffusion codebases).
    shift : float, default 0.0
        Subtracted from the denominator of the exponent: 0 is the transformer's
        ``base**(-2i/dim)``, 1 the ``n - 1`` spacing of fairseq, tensor2tensor and diffusers
        (their ``downscale_freq_shift``). ``dim // 2 - shift`` must not be 0.
    scale : float, default 1.0
        Multiplies every angle (diffusers' ``scale``, tensor2tensor's ``min_timescale``).
    frequencies : array_like, optional
        The ``dim // 2`` frequencies themselves, taken as exact float64 values (for instance
        an original's own rounded float64 frequencies); excludes base, shift and scale.
    order : {"interleaved", "sin_cos", "cos_sin"}
        ``[sin0, cos0, sin1, ...]``, ``[sin | cos]`` or ``[cos | sin]``.
    dtype : float32, float64, float16 or bfloat16, optional
        Output dtype; float32 unless ``out`` is given. Values are rounded once into it.
    out : ndarray, optional
        Array of shape ``(len(positions), dim)`` to write into; returned.

    Returns
    -------
    ndarray of shape ``(len(positions), dim)``.

    Raises
    ------
    TypeError, ValueError
        Before anything is written into ``out``.

    Notes
    -----
    Angles are exact for any float64 position: the position times the double-double
    frequency, formed with an error-free product; float32 values are within 1 ulp of the
    exact ones, float64 within a few units of 2**-53 (README, "Conventions").

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.sinusoidal_embedding([0.5, 2], 4, order="sin_cos", dtype=np.float64).round(4)
    array([[ 0.4794,  0.005 ,  0.8776,  1.    ],
           [ 0.9093,  0.02  , -0.4161,  0.9998]])
    """
    key = None
    if frequencies is None:
        key = _embed_key(
            "sinusoidal_embedding", positions, None, out, dim, base, shift, scale, order, dtype
        )
    return _embed(
        key,
        positions,
        None,
        out,
        lambda: parse_embedding(
            None,
            positions,
            dim,
            base=base,
            shift=shift,
            scale=scale,
            frequencies=frequencies,
            order=order,
            dtype=dtype,
            out=out,
        ),
    )


def add_sinusoidal_embedding(
    x: np.ndarray,
    /,
    positions: ArrayLike,
    *,
    base: float = 10000.0,
    shift: float = 0.0,
    scale: float = 1.0,
    frequencies: ArrayLike | None = None,
    order: str = "interleaved",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``x + sinusoidal_embedding(positions, x.shape[-1], ...)`` without building the table.

    ``x`` is ``(rows, dim)`` or ``(batch, rows, dim)`` (positions shared by the batch),
    float32, float64, float16 or bfloat16; ``out=x`` adds in place, ``out=None`` returns a
    new array. An odd last column is left as it is. Fractional positions are added in
    float64 and the sum rounded once; integer ones as by :func:`fastpe.add_sinusoidal`.
    Other arguments as in :func:`sinusoidal_embedding`.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> x = np.ones((2, 4))
    >>> fastpe.add_sinusoidal_embedding(x, [0, 1], order="sin_cos").round(4)
    array([[1.    , 1.    , 2.    , 2.    ],
           [1.8415, 1.01  , 1.5403, 2.    ]])
    """
    key = None
    if frequencies is None:
        key = _embed_key("add_sinusoidal_embedding", positions, x, out, base, shift, scale, order)
    return _embed(
        key,
        positions,
        x,
        out,
        lambda: parse_embedding(
            x,
            positions,
            None,
            base=base,
            shift=shift,
            scale=scale,
            frequencies=frequencies,
            order=order,
            dtype=None,
            out=out,
        ),
    )


def timestep_embedding(
    timesteps: ArrayLike,
    dim: int,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1,
    scale: float = 1,
    max_period: float = 10000,
    dtype: DTypeLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Diffusion timestep embeddings: diffusers' ``get_timestep_embedding``, exact.

    Row ``b`` is ``[sin | cos]`` of ``scale * timesteps[b] * w_i`` with
    ``w_i = max_period**(-i / (dim // 2 - downscale_freq_shift))``, flipped to
    ``[cos | sin]`` with ``flip_sin_to_cos``, and a zero column when ``dim`` is odd.
    guided-diffusion's and DiT's ``timestep_embedding(t, dim, max_period)`` is
    ``flip_sin_to_cos=True, downscale_freq_shift=0``.

    Parameters
    ----------
    timesteps : array_like, 1-D
        One timestep per row, float (float16, bfloat16, float32 or float64: each value
        exactly as in float64) or int (fractional timesteps are exact too).
    dim : int
        ``embedding_dim``, >= 1.
    flip_sin_to_cos, downscale_freq_shift, scale, max_period
        As in diffusers (same defaults).
    dtype : float32, float64, float16 or bfloat16, optional
        Output dtype; float32 (as diffusers) unless ``out`` is given. Values are rounded
        once into it.
    out : ndarray, optional
        ``(len(timesteps), dim)`` array to write into; returned.

    Returns
    -------
    ndarray of shape ``(len(timesteps), dim)``.

    Raises
    ------
    TypeError, ValueError
        Before anything is written into ``out``.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.timestep_embedding(np.array([0.0, 1.5]), 5, dtype=np.float64).round(3)
    array([[0.   , 0.   , 1.   , 1.   , 0.   ],
           [0.997, 0.   , 0.071, 1.   , 0.   ]])
    >>> dit = fastpe.timestep_embedding([10], 4, flip_sin_to_cos=True, downscale_freq_shift=0)
    """
    key = _embed_key(
        "timestep_embedding",
        timesteps,
        None,
        out,
        dim,
        flip_sin_to_cos,
        downscale_freq_shift,
        scale,
        max_period,
        dtype,
    )
    return _embed(
        key,
        timesteps,
        None,
        out,
        lambda: parse_timestep(
            None,
            timesteps,
            dim,
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
            dtype=dtype,
            out=out,
        ),
    )


# Repeated calls at fractional positions (a diffusion sampling loop: the same call at each
# step with new timesteps), for timestep_embedding, sinusoidal_embedding and their add_
# forms: as apply_rope's plans (fastpe._plans), the first call goes through every check and
# leaves a plan under a key made of everything those checks looked at; a later call with
# that key checks only what the key does not hold: its positions (finite, within 2**53,
# some fractional: one pass in a kernel), and the lengths, writeability and memory of the
# arrays. Then whole-number positions take the integer kernels and others the fractional
# kernel, as on the full path. 16-bit arrays, calls of _SERIAL_PAIRS pairs or 1 MiB or
# more, and anything else unplanned take the full path.


def _embed_key(fn: str, pos, x, out, *scalars):
    """The plan key of a call of ``fn``, or None (not planned).

    Planned: float64 or int64 contiguous 1-D positions (an ndarray, no subclass); ``out``
    None or an ndarray (an add: ``x`` a 2-D ndarray and ``out`` None or ``x`` itself);
    every scalar hashable (``frequencies`` None). Each scalar enters with its type, so that
    values that compare equal (``1``, ``1.0``, ``True``) are checked alike.
    """
    if not (
        _plans.ENABLED
        and type(pos) is np.ndarray
        and pos.strides == (8,)
        and (pos.dtype == np.float64 or pos.dtype == np.int64)
        and (out is None or type(out) is np.ndarray)
    ):
        return None
    if x is not None:
        if type(x) is not np.ndarray or x.ndim != 2 or not (out is None or out is x):
            return None
        arrays: tuple | None = (x.dtype, x.strides, x.shape[1], out is x)
    else:
        arrays = None if out is None else (out.dtype, out.strides)
    return (fn, arrays, scalars, tuple(map(type, scalars)))  # may be unhashable: see _embed


def _embed_plan(call: EmbedCall):
    """The plan of a checked 1-D call, or None (not planned).

    ``(dim, npairs, order, wh, wl, dtype, max_rows, ints, limit, entries)``: ``max_rows`` the most
    rows a planned call may have (below _SERIAL_PAIRS pairs and 1 MiB: the caller's thread);
    ``ints`` what the integer kernels take for whole-number positions: the layout, whether
    the channels are reversed (``[cos | sin]``, as :func:`_oriented` writes it), the
    frequency record (oriented, with its angle-addition tables), the ``interleaved``
    argument of the kernels, and the kernels' module; ``limit`` the largest position
    magnitude allowed (2**53, or less for frequencies above 1: ``fastpe._freq.angle_limit``);
    ``entries`` the kernels' compiled entry points, found by the plan's calls
    (:func:`fastpe._engine.call_entry`).
    """
    if (
        len(call.blocks) != 1
        or len(call.grid) != 1
        or call.lead
        or call.zero_rows is not None
        or call.dtype not in (np.float32, np.float64)
    ):
        return None
    b = call.blocks[0]
    layout, wh, wl, key = _oriented_freqs(b)
    e = _engine._kernels()
    layout = _engine.kernel_layout(e.args, layout, b.npairs)  # as _engine.run gives it
    freqs = e.args.freqs(wh, wl, *_engine.tables(key, wh, wl))
    ints = (layout, b.order == 2, freqs, e.args.loop(layout, False, False)[0], e)
    max_rows = min(
        -(-_SERIAL_PAIRS // max(b.npairs, 1)) - 1,
        -(-_engine._SERIAL_MIN_BYTES // (call.dim * call.dtype.itemsize)) - 1,
    )
    limit = min(int(MAX_POSITION), angle_limit_of(b.key, b.wh, b.wl))
    return (call.dim, b.npairs, b.order, b.wh, b.wl, call.dtype, max_rows, ints, limit, {})


def _embed_planned(plan, pos: np.ndarray, x, out) -> np.ndarray | None:
    """A planned call (written, or added to ``x``), or None (the full path decides)."""
    dim, npairs, order, wh, wl, dt, max_rows, ints, limit, entries = plan
    n = pos.shape[0]
    if n == 0 or n > max_rows or not pos.flags.writeable:
        return None
    is_int = pos.dtype.kind == "i"
    # (int positions compared with an int limit: as float64, 2**53 + 1 would pass)
    kind = _kernels().classify_positions(pos, limit if is_int else float(limit))
    if kind == 2:  # a position to be refused: the full path raises
        return None
    if x is not None:  # x + table: x's C-contiguous (rows, dim) data
        if x.shape[0] != n or not x.flags.c_contiguous or np.may_share_memory(x, pos):
            return None
        if out is None:
            res = x.copy()
        elif x.flags.writeable:
            res = x
        else:
            return None
    elif out is None:
        res = np.empty((n, dim), dt)
    else:
        flags = out.flags
        if not (
            out.shape == (n, dim)
            and flags.c_contiguous
            and flags.writeable
            and not np.may_share_memory(out, pos)
        ):
            return None
        res = out
    if x is None and dim > 2 * npairs:  # an odd dim's zero column
        res[:, 2 * npairs :] = 0.0
    flat = res.reshape(-1)
    # the kernels through their compiled entry points (fastpe._engine.call_entry): the plan
    # fixes the dtypes (of flat: dt, or out's and x's in the key), pos is float64 or int64
    # (a fractional position: float64), the arrays are contiguous and writeable; what it
    # does not fix is in each call's key
    aligned = flat.flags.aligned and pos.flags.aligned
    if kind == 0:  # some fractional: the fractional kernel, as _fractional calls it
        _engine.call_entry(
            entries,
            "frac",
            aligned,
            _kernels().frac_kernel,
            (0, 1, (flat, 0, n * dim, dim, 1, 1, n), pos, wh, wl, order, x is not None, 1),
        )
        return res
    # whole numbers: the integer kernels, with the arguments _engine.run gives them for
    # the (1, n, 1, 2*npairs) view of _write_table / _add_table, on the caller's thread
    # (records of fastpe._kernels.args written out: a builder call each costs more than
    # the work of a small call; one work item, the values do not depend on the split)
    layout, reverse, freqs, interleaved, e = ints
    off0, sd = (2 * npairs - 1, -1) if reverse else (0, 1)
    geo = (flat, off0, 0, dim, 0, sd, 1, n, 1, npairs, layout)
    posr = (
        (pos if is_int else pos.astype(np.int64))[None, :],
        True,
        _ZERO_OFFSET,
        False,
    )
    strided = ON if reverse else None  # the kernels' walk for channels in reverse
    args: tuple
    if x is None:  # float32 tables: fixed up, by the recurrence as _engine.table_stepped says
        fixup = dt.itemsize == 4
        fold_rows = None if fixup and _engine.table_stepped(npairs) else 1.0
        kern, args = e.table_kernel, (fixup, fold_rows, interleaved, strided, None)
    else:  # float32 sums by the recurrence, each table row added to one row of x
        fold_rows = None if _engine.MODES["recurrence"] and dt.itemsize == 4 else 1.0
        once = ON if fold_rows is None and not reverse else None
        kern, args = e.add_kernel, (fold_rows, interleaved, once, strided, None)
    _engine.call_entry(
        entries,
        (x is None, fold_rows is None),  # (x is None: fixed by the plan, as fixup)
        aligned,
        kern,
        (0, 1, geo, posr, freqs, (n, 1, 1), *args),
    )
    return res


_ZERO_OFFSET = np.zeros(1, dtype=np.int64)


def _embed(key, pos, x, out, parse) -> np.ndarray:
    """The call through its plan, else through ``parse()`` (every check), leaving a plan."""
    try:
        plan = _plans.lookup(key)
    except TypeError:  # an unhashable argument (a list as a scalar, ...): not planned
        plan = key = None
    if plan is not None:
        result = _embed_planned(plan, pos, x, out)
        if result is not None:
            return result
    call = parse()
    result = run_call(call)
    _plans.store(key, _embed_plan(call))
    return result


def _grid_key(fn: str, x, out, grid_shape, *scalars):
    """The plan key of a grid call, or None (not planned).

    Planned: ``grid_shape`` an int or a tuple of ints (each entering the key with its type,
    so that ``2.0`` is checked apart from ``2``); for an add, ``x`` a 2-D or 3-D ndarray (no
    subclass) added in place (``out is x``); for a table, ``out`` None or an ndarray. The
    key holds the dtype, shape and strides of the array written, and every other argument
    with its type; a call with the same key has passed the same checks, but for whether
    the array is writeable, checked again on each call.
    """
    if not _plans.ENABLED:
        return None
    if type(grid_shape) is int:
        shape_key: tuple = (grid_shape,)
    elif type(grid_shape) is tuple and all(type(n) is int for n in grid_shape):
        shape_key = grid_shape
    else:
        return None
    if x is not None:
        if type(x) is not np.ndarray or x.ndim not in (2, 3) or out is not x:
            return None
        arrays: tuple | None = (x.dtype, x.shape, x.strides)
    elif out is None:
        arrays = None
    elif type(out) is np.ndarray:
        arrays = (out.dtype, out.shape, out.strides)
    else:
        return None
    return (fn, arrays, type(grid_shape), shape_key, scalars, tuple(map(type, scalars)))


def _grid_plan(call: EmbedCall):
    """The plan of a checked N-D grid call: ``(prep, lead, shape, dtype, entries)`` (None
    for a 1-D grid, which takes the 1-D kernels, and for one with no cell to write: its
    tables, sized by the sum of the sides, are never made for it); ``entries`` the kernels'
    compiled entry points, found by the plan's calls (:func:`_grid_launch`)."""
    if len(call.grid) < 2 or call.zero_rows is not None or call.target is None:
        return None
    if call.target.size == 0 or 0 in call.grid:
        return None
    return (_grid_prepare(call), call.lead, call.target.shape, call.dtype, {})


def _grid_planned(plan, x, out) -> np.ndarray | None:
    """A planned grid call (added in place to ``x``, or written into ``out`` or a new
    array), or None (the full path decides: an array no longer writeable)."""
    prep, lead, shape, dt, entries = plan
    if x is not None:
        if not x.flags.writeable:
            return None
        rows = x[..., lead:, :]
        if rows.size:
            _grid_launch(prep, rows, entries)
        return x
    if out is None:
        t = np.empty(shape, dtype=dt)
    elif not out.flags.writeable:
        return None
    else:
        t = out
    if lead:
        t[:lead] = 0.0
    rows = t[lead:]
    if rows.size:
        _grid_launch(prep, rows, entries)
    return t


def _grid_call(key, x, out, parse) -> np.ndarray:
    """The grid call through its plan, else through ``parse()`` (every check), leaving a
    plan."""
    try:
        plan = _plans.lookup(key)
    except TypeError:  # an unhashable argument: not planned
        plan = key = None
    if plan is not None:
        result = _grid_planned(plan, x, out)
        if result is not None:
            return result
    call = parse()
    plan = _grid_plan(call) if key is not None else None  # (its tables made once)
    result = run_call(call, None if plan is None else plan[0])
    _plans.store(key, plan)
    return result


def add_timestep_embedding(
    x: np.ndarray,
    /,
    timesteps: ArrayLike,
    *,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1,
    scale: float = 1,
    max_period: float = 10000,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``x + timestep_embedding(timesteps, x.shape[1], ...)`` for ``x`` of shape ``(batch, dim)``.

    ``x`` is float32, float64, float16 or bfloat16. Fractional timesteps are added in
    float64 and the sum rounded once; whole ones as by :func:`fastpe.add_sinusoidal`.
    ``out=x`` adds in place; ``out=None`` returns a new array.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.add_timestep_embedding(np.ones((1, 4)), [0.0])
    array([[1., 1., 2., 2.]])
    """
    key = _embed_key(
        "add_timestep_embedding",
        timesteps,
        x,
        out,
        flip_sin_to_cos,
        downscale_freq_shift,
        scale,
        max_period,
    )
    return _embed(
        key,
        timesteps,
        x,
        out,
        lambda: parse_timestep(
            x,
            timesteps,
            None,
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
            dtype=None,
            out=out,
        ),
    )


def grid_sinusoidal(
    grid_shape: int | tuple[int, ...],
    dim: int,
    *,
    cls_token: bool = False,
    convention: str = "mae",
    base: float = 10000.0,
    min_timescale: float | None = None,
    max_timescale: float | None = None,
    dtype: DTypeLike | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Sinusoidal position table of an N-D grid: 1-D, 2-D, 3-D (patches of images, video) or
    more axes, by the same rule.

    Rows are the grid's cells in C order (for ``(h, w)``: row ``i * w + j``), after one zero
    row with ``cls_token``.

    ``convention="mae"``: the channels are ``ndim`` blocks of ``dim / ndim``, the last grid
    axis first (MAE's ``np.meshgrid(grid_w, grid_h)`` puts the w coordinate first); each
    block is ``[sin | cos]`` of that coordinate at frequencies
    ``base**(-2k / (dim / ndim))``. ``grid_sinusoidal((n, n), dim, cls_token=c)`` equals
    MAE's ``get_2d_sincos_pos_embed(dim, n, cls_token=c)`` (also in DiT, SiT, I-JEPA);
    ``(t, h, w)`` grids get blocks ``[w | h | t]``. ``dim`` must be a multiple of
    ``2 * ndim``.

    ``convention="tensor2tensor"``: ``add_timing_signal_nd``'s table. Axis ``d`` takes
    channels ``d*2n .. (d+1)*2n`` with ``n = dim // (2 * ndim)``, ``[sin | cos]`` at
    frequencies ``min_timescale * (max_timescale/min_timescale)**(-k / (n - 1))``; the
    channels left over are zero.

    Each value depends only on its cell's coordinates: a larger grid extends a smaller one
    exactly, with no interpolation.

    Parameters
    ----------
    grid_shape : int or tuple of int
        The grid's axis lengths; an int ``n`` is MAE's ``grid_size``, the grid ``(n, n)``.
    dim : int
        ``embed_dim``.
    cls_token : bool, default False
        Put one zero row first (MAE's class token).
    convention : {"mae", "tensor2tensor"}
    base : float, default 10000.0
        Frequency base (MAE convention).
    min_timescale, max_timescale : float, optional
        tensor2tensor's (defaults 1.0 and 1.0e4).
    dtype : float32, float64, float16 or bfloat16, optional
        float32 unless ``out`` is given (MAE's NumPy code returns float64: pass
        ``dtype=np.float64`` for its dtype).
    out : ndarray, optional
        ``(cls_token + prod(grid_shape), dim)`` array to write into; returned.

    Returns
    -------
    ndarray of shape ``(cls_token + prod(grid_shape), dim)``.

    Raises
    ------
    TypeError, ValueError
        Before anything is written into ``out``.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> fastpe.grid_sinusoidal((2, 3), 4, dtype=np.float64)[4].round(4)  # (i, j) = (1, 1)
    array([0.8415, 0.5403, 0.8415, 0.5403])
    >>> fastpe.grid_sinusoidal(14, 768, cls_token=True).shape
    (197, 768)
    """
    key = _grid_key(
        "grid_sinusoidal",
        None,
        out,
        grid_shape,
        dim,
        cls_token,
        convention,
        base,
        min_timescale,
        max_timescale,
        dtype,
    )
    return _grid_call(
        key,
        None,
        out,
        lambda: parse_grid(
            None,
            grid_shape,
            dim,
            cls_token=cls_token,
            convention=convention,
            base=base,
            min_timescale=min_timescale,
            max_timescale=max_timescale,
            dtype=dtype,
            out=out,
        ),
    )


def add_grid_sinusoidal(
    x: np.ndarray,
    /,
    grid_shape: int | tuple[int, ...],
    *,
    cls_token: bool = False,
    convention: str = "mae",
    base: float = 10000.0,
    min_timescale: float | None = None,
    max_timescale: float | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``x + grid_sinusoidal(grid_shape, x.shape[-1], ...)`` without building the table.

    ``x`` is ``(tokens, dim)`` or ``(batch, tokens, dim)`` with ``tokens = cls_token +
    prod(grid_shape)`` (the class token's row is left as it is). tensor2tensor's
    ``add_timing_signal_nd(x)`` for ``x`` of shape ``(batch, *grid, dim)`` is
    ``add_grid_sinusoidal(x.reshape(batch, -1, dim), x.shape[1:-1],
    convention="tensor2tensor")``. ``x`` is float32, float64, float16 or bfloat16; each
    element gets its one value (float64, from a small table per axis) added in float64, the
    sum rounded once, in one pass over ``x`` on fastpe's thread pool. ``out=x`` adds in
    place (views included); ``out=None`` returns a new array.

    Examples
    --------
    >>> import numpy as np, fastpe
    >>> x = np.zeros((2, 5, 4), dtype=np.float32)
    >>> fastpe.add_grid_sinusoidal(x, (2, 2), cls_token=True, out=x) is x
    True
    """
    key = _grid_key(
        "add_grid_sinusoidal",
        x,
        out,
        grid_shape,
        cls_token,
        convention,
        base,
        min_timescale,
        max_timescale,
    )
    return _grid_call(
        key,
        x,
        out,
        lambda: parse_grid(
            x,
            grid_shape,
            None,
            cls_token=cls_token,
            convention=convention,
            base=base,
            min_timescale=min_timescale,
            max_timescale=max_timescale,
            dtype=None,
            out=out,
        ),
    )
