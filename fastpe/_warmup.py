"""Compile (or load from numba's on-disk cache) every kernel ahead of the first call."""

from __future__ import annotations

import time

import numpy as np


def warmup(dtypes=("float32", "float64")) -> dict[str, float]:
    """Compile or load every fastpe kernel now, so that no later call pauses to compile.

    Numba compiles a kernel on its first call for each dtype (a few seconds with an empty
    cache) and writes it to its on-disk cache; later processes load it in milliseconds.
    Call this once at start-up (or run ``fastpe warmup``) to pay that cost up front.

    Parameters
    ----------
    dtypes : sequence of {"float32", "float64", "float16", "bfloat16"}
        The array dtypes to prepare (bfloat16 needs ml_dtypes). The 16-bit kernels are
        compiled per 16-bit dtype (and layout): warm each 16-bit dtype you use.

    Returns
    -------
    dict
        Seconds spent per kernel and dtype (small when loaded from the cache).
        ``sinusoidal_table[...]`` includes grid tables (``grid_sinusoidal``),
        ``add_sinusoidal[...]`` grid sums, ``timestep_embedding[fractional]`` the
        fractional-position kernel of every dtype.

    Raises
    ------
    TypeError
        For ``dtypes`` that is not a sequence of the dtypes above (as
        ``sinusoidal_table(dtype=...)``).

    Examples
    --------
    >>> import fastpe
    >>> times = fastpe.warmup(dtypes=["float32"])
    >>> for name in sorted(times):
    ...     print(name)
    add_sinusoidal[float32]
    apply_rope[float32]
    sinusoidal_table[float32]
    timestep_embedding[fractional]
    """
    from . import _engine
    from ._args import check_float_dtype
    from .conventions import add_grid_sinusoidal, grid_sinusoidal, timestep_embedding
    from .rotary import apply_rope
    from .sinusoidal import add_sinusoidal, sinusoidal_table

    if isinstance(dtypes, (str, bytes)) or not hasattr(dtypes, "__iter__"):
        raise TypeError(
            f"dtypes must be a sequence of dtypes, got {dtypes!r}; e.g. dtypes=['float32']"
        )
    dts = [check_float_dtype(name, "dtypes") for name in dtypes]  # all checked first
    out: dict[str, float] = {}
    _engine.tables(("warmup", 10000.0, 8), *(np.ones(4), np.zeros(4)))  # table builder
    # rows are prefetched on Zen 5 only in arrays as large as the last-level cache, on some
    # CPUs from half of it (_engine.prefetch_fits): the small arrays here take those paths
    # with the bound at 0
    llc = _engine._LLC_BYTES
    _engine._LLC_BYTES = 0
    try:
        for dt in dts:
            t = time.perf_counter()
            # on the CPUs whose rows prefetch from half the last-level cache
            # (_engine.prefetch_bounded), the same calls again with a cache no array
            # fills: the loops that do not prefetch are specializations of their own
            for cache in (0, 1 << 62) if _engine.prefetch_bounded() else (0,):
                _engine._LLC_BYTES = cache
                # each loop is a specialization of its own (see fastpe._kernels.args.loop)
                for layout in ("interleaved", "half"):  # one head, short rows back to back
                    apply_rope(np.zeros((1, 2, 1, 8), dt), layout=layout)
                # per-row offsets far apart share no cos/sin: per-row items (on Zen 5 their rows
                # prefetched while their cos/sin is computed: _engine.fill_ahead)
                spread = np.array([0, 1000])
                for layout in ("interleaved", "half"):
                    # rows of heads: batch rows side by side, or one batch row's positions in two
                    # stretches (fastpe._engine.two_stretches, not on Zen 5; as per-row items)
                    apply_rope(np.zeros((2, 2, 2, 8), dt), layout=layout)
                    apply_rope(np.zeros((1, 2, 2, 8), dt), layout=layout)
                    apply_rope(np.zeros((2, 2, 1, 8), dt), offset=np.array([0, 1]), layout=layout)
                    apply_rope(np.zeros((2, 2, 2, 8), dt), offset=spread, layout=layout)
                # half-layout rows of 1-4 KiB: prefetched (fastpe._engine.MODES), by position and
                # by the runs walk
                kib = 1024 // dt.itemsize
                apply_rope(np.zeros((2, 2, 1, kib), dt), layout="half")
                apply_rope(np.zeros((2, 2, 1, kib), dt), offset=np.array([0, 1]), layout="half")
                # one head whose cos/sin serve one row (positions per batch row, or one batch
                # row; rows of a multiple of a line's values): rotated as they are computed
                # (fastpe._engine.fused_rows; Zen 5: prefetched while computed, fill_ahead)
                for layout in ("interleaved", "half"):
                    apply_rope(np.zeros((2, 2, 1, kib), dt), offset=spread, layout=layout)
                # interleaved rows of 512 bytes to 4 KiB, several heads a position (one head from
                # 2 KiB; from 128-512 bytes in large arrays where fastpe._engine.prefetch_512):
                # prefetched on CPUs other than Zen 5 (fastpe._engine.prefetch_interleaved);
                # and of 8 KiB and more: their two halves side by side (MODES["halves"]). By
                # position and by the runs walk (per-row items of spread offsets are fused, or on
                # Zen 5 take fill_ahead's specialization: there neither is taken)
                heads = np.zeros((2, 2, 2, 512 // dt.itemsize), dt)
                long = np.zeros((2, 2, 1, 8192 // dt.itemsize), dt)
                for rows in (heads, long):
                    apply_rope(rows, layout="interleaved")  # (one batch row of one head: fused)
                    apply_rope(rows, offset=np.array([0, 1]), layout="interleaved")
                # per-row positions made of runs of consecutive positions: their scans
                apply_rope(
                    np.zeros((2, 16, 1, 8), dt), positions=np.arange(16) + np.array([[0], [5]])
                )
                apply_rope(np.zeros((1, 1, 2, 8), dt), offset=3)  # one position: the decoding step
            _engine._LLC_BYTES = 0
            out[f"apply_rope[{dt.name}]"] = time.perf_counter() - t
            t = time.perf_counter()
            # tables from twice the cache counted on up are written by streaming stores: a path
            # of their own, prepared here by lowering that bound for the second round of calls
            saved = _engine._STREAM_MIN_BYTES
            plain_min = _engine._PLAIN_DIRECT_MIN_BYTES
            plain_rows = _engine._PLAIN_DIRECT_ROW_BYTES
            try:
                for bound in (saved, 0):
                    _engine._STREAM_MIN_BYTES = bound
                    for layout in ("interleaved", "half"):  # float32: one path per layout
                        # streamed, rows of a multiple of a line's pairs are computed
                        # straight into memory (_kernels.direct), rows of other counts in
                        # L1 and copied
                        sinusoidal_table(2, 32, dtype=dt, layout=layout)
                        sinusoidal_table(2, 30, dtype=dt, layout=layout)
                        # channels of another stride: a walk of their own
                        sinusoidal_table(
                            2, 32, dtype=dt, layout=layout, out=np.empty((32, 2), dt).T
                        )
                        # float32 rows of 128 pairs and more are stepped, not folded
                        # (_engine.table_stepped): the same three paths
                        sinusoidal_table(2, 256, dtype=dt, layout=layout)
                        sinusoidal_table(2, 260, dtype=dt, layout=layout)
                        sinusoidal_table(
                            2, 256, dtype=dt, layout=layout, out=np.empty((256, 2), dt).T
                        )
                        sinusoidal_table(2, 2, dtype=dt, layout=layout)  # a few channels (lanes)
                        # two pairs or more: the half layout's lanes are their own; 16-bit
                        # rows back to back take blocks (table16_blocks_kernel), rows of 3
                        # pairs in the half layout and rows apart the lanes
                        sinusoidal_table(2, 4, dtype=dt, layout=layout)
                        sinusoidal_table(2, 6, dtype=dt, layout=layout)
                        apart = np.empty((2, 8), dt)[:, :4]
                        sinusoidal_table(2, 4, dtype=dt, layout=layout, out=apart)
                    grid_sinusoidal((2, 2), 8, dtype=dt)  # grid tables: the grid kernel
                # below that bound, float32/float64 tables from a few MiB take the direct
                # pass by plain stores (_engine.plain_direct): prepared by lowering its bounds
                # (not on the CPUs of _engine.plain_direct_cpu, where these calls take
                # table_kernel's rows, warmed above)
                if dt.itemsize > 2:
                    _engine._STREAM_MIN_BYTES = saved
                    _engine._PLAIN_DIRECT_MIN_BYTES = 0
                    _engine._PLAIN_DIRECT_ROW_BYTES = 0
                    for layout in ("interleaved", "half"):
                        sinusoidal_table(2, 32, dtype=dt, layout=layout)
                        sinusoidal_table(2, 256, dtype=dt, layout=layout)  # (stepped)
            finally:
                _engine._STREAM_MIN_BYTES = saved
                _engine._PLAIN_DIRECT_MIN_BYTES = plain_min
                _engine._PLAIN_DIRECT_ROW_BYTES = plain_rows
            out[f"sinusoidal_table[{dt.name}]"] = time.perf_counter() - t
            t = time.perf_counter()
            for layout in ("interleaved", "half"):
                # add_kernel's walks: one row of x per table row (float32), table rows added to
                # each batch row, strided channels (in place: without out=, x is first copied
                # into a contiguous result)
                # (float32 rows of a multiple of a line's pairs: a line at a time,
                # _kernels.direct; rows of other counts: add_kernel's walk)
                add_sinusoidal(np.zeros((2, 32), dt), layout=layout)
                add_sinusoidal(np.zeros((2, 30), dt), layout=layout)
                add_sinusoidal(np.zeros((2, 2, 32), dt), layout=layout)
                # the same two in arrays below the last-level cache: on Zen 5 their lines
                # are not prefetched, nor on the CPUs of _PREFETCH_BOUND_CPUS the rows
                # batch rows share (prefetch_fits), specializations of their own
                _engine._LLC_BYTES = 1 << 62
                add_sinusoidal(np.zeros((2, 32), dt), layout=layout)
                add_sinusoidal(np.zeros((2, 2, 32), dt), layout=layout)
                _engine._LLC_BYTES = 0
                strided = np.zeros((2, 64), dt)[:, ::2]
                add_sinusoidal(strided, layout=layout, out=strided)
                # a few channels (lanes; two pairs: a row of one pair takes the interleaved
                # path in either layout)
                add_sinusoidal(np.zeros((2, 4), dt), layout=layout)
            # rows of 1-4 KiB (float32; half layout, either on Zen 5): the next row prefetched
            for layout in ("interleaved", "half"):
                add_sinusoidal(np.zeros((2, 1024 // dt.itemsize), dt), layout=layout)
                add_sinusoidal(np.zeros((2, 1040 // dt.itemsize), dt), layout=layout)
            add_grid_sinusoidal(np.zeros((4, 8), dt), (2, 2))
            out[f"add_sinusoidal[{dt.name}]"] = time.perf_counter() - t
    finally:
        _engine._LLC_BYTES = llc
    if dts:  # fractional positions (diffusion timesteps): one kernel per dtype
        t = time.perf_counter()
        for dt in dts:
            for ts in ([0.5], [0.5], [3.0], [3]):  # planned after the first: the check
                timestep_embedding(np.array(ts), 8, dtype=dt)  # of float and int64 positions
        out["timestep_embedding[fractional]"] = time.perf_counter() - t
    return out
