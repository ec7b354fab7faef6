"""Dispatch from validated arrays to the kernels: flat views, tables, work split."""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._args.checks import check_position_range
from ._flag import ON, Flag
from ._freq import sincos_dd

# the operations of run()
OP_WRITE, OP_ADD, OP_ROPE = 0, 1, 2

_TABLE_CACHE: OrderedDict = OrderedDict()
_TABLE_CACHE_SIZE = 32
_TABLE_LOCK = threading.Lock()  # calls may come from many Python threads at once


def _kernels():
    # Imported on first use so that ``import fastpe`` does not import numba.
    from . import _kernels

    return _kernels


def flat_view(a: np.ndarray) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """Return ``(flat, off0, strides)``: a contiguous 1-D view spanning ``a``'s memory.

    Element ``a[i0, i1, ...]`` is ``flat[off0 + i0*strides[0] + i1*strides[1] + ...]``.
    No data is copied; writes through ``flat`` land in ``a``.
    """
    item = a.itemsize
    if a.flags.c_contiguous:  # the common case, without as_strided's overhead
        return a.reshape(-1), 0, tuple([st // item for st in a.strides])  # (list: faster)
    if any(st % item for st in a.strides):
        raise ValueError(
            f"array strides {a.strides} are not multiples of the item size {item}; "
            "pass an array whose strides are whole elements"
        )
    st = tuple(s // item for s in a.strides)
    lo = sum((n - 1) * s for n, s in zip(a.shape, st) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, st) if s > 0)
    first = tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(a.shape, st))
    start = a[first]
    flat = as_strided(start, shape=(hi - lo + 1,), strides=(item,))
    return flat, -lo, st


def _libm(f, a: np.ndarray) -> np.ndarray:
    return np.fromiter(map(f, a.ravel().tolist()), np.float64, a.size).reshape(a.shape)


def step_tables(wh, wl, levels: int, radix: int) -> tuple[np.ndarray, np.ndarray]:
    """``tc[l*radix + d, i], ts[...] = cos, sin(d * radix**l * (wh[i] + wl[i]))``.

    Bit for bit what the kernels' ``sincos_exact`` returns: the same error-free product
    (:func:`fastpe._freq.sincos_dd`, no fused multiply-add on either side) and libm's
    ``sin``/``cos`` through :mod:`math`, the functions numba's compiled code calls. Built
    here rather than by a kernel, so that no first call compiles one; it has only
    ``levels * radix`` rows and is cached per frequency set.
    """
    wh = np.asarray(wh, dtype=np.float64)
    wl = np.asarray(wl, dtype=np.float64)
    row = np.arange(levels * radix)
    p = ((row % radix) * radix ** (row // radix)).astype(np.float64)[:, None]
    s, c = sincos_dd(p, wh, wl, partial(_libm, math.sin), partial(_libm, math.cos))
    return c, s


def tables(key, wh: np.ndarray, wl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angle-addition tables for the frequencies ``wh + wl`` (cached under ``key``)."""
    with _TABLE_LOCK:
        hit = _TABLE_CACHE.get(key)
        if hit is not None:
            _TABLE_CACHE.move_to_end(key)
            return hit
    k = _kernels()
    tc, ts = step_tables(wh, wl, k.LEVELS, k.RADIX)
    tc.flags.writeable = False
    ts.flags.writeable = False
    with _TABLE_LOCK:
        _TABLE_CACHE[key] = (tc, ts)
        if len(_TABLE_CACHE) > _TABLE_CACHE_SIZE:
            _TABLE_CACHE.popitem(last=False)
    return tc, ts


def num_threads() -> int:
    import numba

    return numba.get_num_threads()


# Threads. Kernels are compiled without numba's parallel=True: each call covers a range of
# independent workers and releases the GIL, and fastpe runs disjoint ranges on a small pool
# of Python threads. The thread count follows numba (NUMBA_NUM_THREADS, or
# numba.set_num_threads in the calling thread). This keeps OpenMP out of the kernels, so a
# process that used fastpe can fork() and its children can use fastpe too (GNU OpenMP's
# pool does not survive fork), calls from many Python threads at once are safe, and each
# kernel is compiled once instead of twice (a parallel twin costs as long again).
_POOL: tuple[int, int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _executor(threads: int) -> ThreadPoolExecutor:
    """The process's thread pool (a new one after fork: threads do not survive it)."""
    global _POOL
    pid = os.getpid()
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != pid or _POOL[1] < threads:
            _POOL = (
                pid,
                threads,
                ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fastpe"),
            )
        return _POOL[2]


def parallel_for(fn, n_tasks: int, threads: int) -> None:
    """Run ``fn(task)`` for ``task < n_tasks`` on ``threads`` threads, the caller included.

    Tasks are handed out one at a time, so a thread slowed down by a busy core takes fewer.
    """
    if threads <= 1 or n_tasks <= 1:
        for t in range(n_tasks):
            fn(t)
        return
    tasks = iter(range(n_tasks))
    lock = threading.Lock()

    def drain() -> None:
        while True:
            with lock:
                t = next(tasks, None)
            if t is None:
                return
            fn(t)

    helpers = min(threads, n_tasks) - 1
    futures = [_executor(threads - 1).submit(drain) for _ in range(helpers)]
    try:
        drain()
    finally:
        for f in futures:
            f.result()


def parts(n: int, nbytes: int) -> list[int]:
    """Cuts of ``range(n)`` into contiguous parts, one per thread (one part when ``nbytes``
    is small): part ``i`` is ``cuts[i] .. cuts[i + 1] - 1``."""
    k = max(1, min(n, _threads(nbytes)))
    return [n * i // k for i in range(k + 1)]


def in_parts(fn, cuts: list[int]) -> list:
    """``[fn(i, cuts[i], cuts[i + 1]) for each part i]``, the parts run on the threads; for
    scans of inputs."""
    out: list = [None] * (len(cuts) - 1)

    def part(i: int) -> None:
        out[i] = fn(i, cuts[i], cuts[i + 1])

    parallel_for(part, len(out), len(out))
    return out


def kernel_ints(a) -> np.ndarray:
    """``a`` as the kernels take integer arrays: int64, C-contiguous and writable.

    numba compiles a read-only array as a type of its own, so read-only positions (a
    read-only memmap, ``np.frombuffer``) would compile every kernel they reach again,
    seconds that ``fastpe.warmup()`` did not prepare; they are copied instead (positions
    are a small fraction of the array they rotate).
    """
    a = np.ascontiguousarray(a, dtype=np.int64)
    return a if a.flags.writeable else a.copy()


_EMPTY_POS = np.zeros((1, 1), dtype=np.int64)
# Calls over at most serial_bytes() bytes run on the caller's thread: handing work to the
# pool costs a handoff (waking a pool thread and waiting for it), which a small call does
# not earn back. 1 MiB, except on Zen 5, 4 MiB: on the znver5 host (a VM) a handoff took
# 19-60 us (handoff_seconds, in different processes), and in two invocations of
# bench/handoff.py one thread ran RoPE and add_sinusoidal 1.2-2.2x as fast as two at 2-4
# MiB, tables 1.3-1.4x at 2 MiB and 0.97-1.07x at 4 MiB, while tables were as fast or
# faster on two threads from 6 MiB (README, "Calls up to 4 MiB on one thread on Zen 5"). A
# fixed rule, not the handoff measured at run time: that varied 3x between processes on
# that host, and would put the same call on one thread in one process and on two in the
# next. Other CPUs keep 1 MiB (unmeasured).
_SERIAL_MIN_BYTES = 1 << 20
_SERIAL_ZEN5_BYTES = 4 << 20
_SERIAL_BYTES: int | None = None  # None: the host's rule (serial_bytes); tests pin it
_ITEMS_PER_THREAD = 4  # work items per thread, so that a thread on a busy core takes fewer
_CACHE_BYTES = 192 * 1024  # the cos/sin cache of one work item stays in L1/L2
_MAX_CHUNK = 256  # positions per work item at most
_ADD16_ITEM_BYTES = 16 * 1024  # the same for 16-bit sums of shared rows (add16_item_bytes)
# the same for short rows rotated as runs (fastpe._engine.short_run): their items fill the
# cos/sin cache in one inlined call (fastpe._kernels.angles.fill_short), whose array
# arguments' reference counts, shared by the threads, cost about 10% of a float32 dim-4
# call with items of 256 positions (32 MiB, scratch, alternated processes: 27-31% of the
# yardstick against 33-34% with the fill written out in the kernel; 36-37% with 2048)
_SHORT_MAX_CHUNK = 2048
# Half-layout RoPE rows (one head's rotated channels, float32/float64) that prefetch the
# lines 2 KiB past their start before their rotation (fastpe._kernels.prefetch): from 1 KiB
# up to 4 KiB of rotated channels, both included. The one-pass half-layout loop reads and
# writes each row's two halves side by side, and there the cores waited on memory.
# Scratch comparison in one process, 1 GiB, prefetch against none (above 1: faster): rows
# of 1 KiB 1.11-1.36x, 2 KiB 1.39-1.43x, 4 KiB 1.13x; rows of 512 bytes 0.69-0.70x and of
# 8 KiB 0.81-0.86x (slower), so not those, nor the sizes between 4 and 8 KiB, which were
# not measured; interleaved rows 1.00-1.07x, so not those either there (on the rocketlake
# host some interleaved rows gained: see prefetch_interleaved). bench/modes.py --mode
# prefetch measures it on the roofline's rows. float32 add_sinusoidal, one batch row, half
# layout, next row prefetched (scratch, 1 GiB, fraction of a *= s, without -> with): rows
# of 1 KiB 0.51 -> 0.82, 4 KiB 0.43 -> 0.73; 512 bytes 0.55 -> 0.50, 16 KiB 0.67 -> 0.64, so
# the same bounds. Those figures are from the AMD host of LLVM's `znver3` (AVX2), where a
# prefetch in the interleaved single-row loop was slower than none (README, "table rows
# laid out as x's rows"), and on the 480 MiB host it measured 0.45-0.53 against 0.51. On
# Zen 5 (see zen5_or_later) such interleaved rows prefetch too: scratch, one batch row, 1
# GiB, both variants alternated in each of 3 processes, 4 rounds each: rows of 4 KiB
# 0.88-0.97 against 0.64-0.86 without, 1 KiB 0.79-0.96 against 0.56-0.84.
_PREFETCH_ROW_BYTES = (1024, 4096)
# On AMD Zen 5 cores (LLVM's `znver5`) RoPE rows of 512 bytes (one float32 head of 128
# channels, half layout) prefetch too: there the one-pass loop over their two halves of 256
# bytes waited on memory. Scratch, 1 GiB float32 half layout, one process per variant,
# alternated, 2 rounds of 3: (64, 32768, 128) at 76-89% of the scale yardstick against
# 49-62% without, (4, 16384, 32, 128) 81-104% against 75-92%; rows of 256 bytes were
# slower prefetched ((128, 32768, 64): 48-68% against 74-85%), and interleaved rows of 512
# bytes no faster (61-89% against 63-82%). Other CPUs keep 1 KiB (but those of
# _PREFETCH_512_CPUS, below): on the znver3 host rows of 512 bytes were slower prefetched
# (above); Zen 4 was not measured.
_PREFETCH_ROPE_MIN_ZEN5 = 512
_zen5: bool | None = None  # whether this CPU is a Zen 5 or later, found on first use

# Interleaved RoPE rows (one head's rotated channels, float32/float64) of 8 KiB and more
# rotate their two halves side by side (MODES["halves"]): a core that streams one long
# interleaved row waits on memory, where the half layout's loop, which reads and writes a
# row's two halves side by side, did not (one thread, 8 x 16384 x 2048 float32 in place:
# 122 ms against 89 with the halves, 89-91 for the half layout). On the `rocketlake` host
# (480 MiB L3), 1 GiB (8, rows, channels), 2 threads, fraction of the `a *= s` yardstick,
# the mode off, then on twice in one process (scratch): float32 rows of 8 KiB 57% -> 77-78%,
# 16 KiB 58% -> 72%, 32 KiB 61% -> 76-78%; float64 rows of 8 KiB 75% -> 77-78%, 16 KiB
# 70% -> 76%. Shorter rows lost or gained too little: float32 2 KiB 69% -> 62-64%, 4 KiB
# 52-55% -> 59-60%, float64 2 KiB 74% -> 60-62%, 4 KiB 70% -> 59-62%. Four quarters side
# by side compiled into a slower loop. bench/modes.py --mode halves measures it on the
# roofline's 2048-channel head: off/on 1.38-1.39 at d0f4ed5 (README "Long interleaved rows
# in two halves"). Not on Zen 5 (zen5_or_later), where it was not measured and where that
# head met the slow state's target without it (95% at 162b8f3; 67% in its one fast run).
# One head whose cos/sin serve one row (one batch row, or positions per batch row) is
# rotated by the fused pass instead, where it fits (fused_rows).
_HALVES_MIN_BYTES = 8192


def zen5_or_later(cpu_name: str) -> bool:
    """Whether ``cpu_name``, LLVM's name for a CPU (``llvmlite.binding.get_host_cpu_name()``),
    is AMD Zen 5 or a later Zen (``znver5``, ``znver6``, ...): the CPUs on which the
    prefetches measured only there are made (RoPE rows of 512 bytes, interleaved
    ``add_sinusoidal`` rows, grid sums per cell (some other CPUs pace theirs:
    ``fastpe.conventions.grid_sum_prefetch``), RoPE rows of positions per batch row while
    their cos/sin is computed; the figures are at each), and where row prefetches
    are bounded by the cache's size (:func:`prefetch_fits`; a part of it on the CPUs of
    ``_PREFETCH_BOUND_CPUS``). An LLVM too old to know
    Zen 5 (before LLVM 19) names it otherwise, and it takes the other CPUs' paths."""
    m = re.fullmatch(r"znver([0-9]+)", cpu_name)
    return m is not None and int(m.group(1)) >= 5


def _host_cpu_name() -> str:
    from llvmlite import binding

    try:
        return str(binding.get_host_cpu_name())
    except Exception:  # no name: the paths of other CPUs
        return ""


def host_zen5() -> bool:
    """:func:`zen5_or_later` of this CPU (asked once)."""
    global _zen5
    if _zen5 is None:
        _zen5 = zen5_or_later(_host_cpu_name())
    return _zen5


# Interleaved RoPE rows (float32/float64) that prefetch the lines 2 KiB past their start
# before their rotation, on CPUs other than Zen 5: rows of 512 bytes to 4 KiB of rotated
# channels where a position holds several heads, and one-head rows from 2 KiB (from 512
# bytes in large arrays on the CPUs of _PREFETCH_512_CPUS, below). Measured on
# the `rocketlake` host only, where 4 x 16384 x 32 x 128 float32 interleaved ran at
# 58-61% of the `a *= s` yardstick for some minutes and at 79-83% in the minutes after,
# the yardstick at 34-37 ms per GiB throughout (a change on the host, perhaps in its
# hardware prefetch: "the 60% state" and "the 80% state" below). Scratch, 1 GiB, 2
# threads, the prefetch off, on, off, on in one process, once in each state (first the
# 60% state): 4-D float32 heads of 512 bytes (32 heads) 59-60% -> 77%, and 80% -> 79%;
# float64 heads of 1 KiB 78-80% -> 81%, 77-79% -> 82%; one-head float32 rows of 2 KiB
# 77-79% -> 81-82%, 73-79% -> 79-81%; of 4 KiB 55-57% -> 66%, 55-56% -> 64-65%. One-head
# rows under 2 KiB lost or gained nothing, so not those: 512 bytes 93-95% -> 78-84%,
# 92-93% -> 86-89%; 1 KiB float32 86-96% -> 90% and 92% -> 92%, float64 84-89% -> 88-90%.
# Not measured: 2 to 7 heads a position, float64 one-head rows of 2-4 KiB, several
# float32 heads of 1-4 KiB, arrays in cache, and other CPUs (on the znver3 host interleaved
# rows had measured 1.00-1.07x, above). README, "Interleaved rows prefetched".
_PREFETCH_IL_ROW_BYTES = (512, 4096)
_PREFETCH_IL_ONE_HEAD_MIN = 2048
# CPUs (LLVM's names) on which RoPE rows of 512 bytes and more prefetch, one head a position
# or several: half-layout rows from 512 bytes (as on Zen 5), interleaved one-head rows from
# 512 bytes (prefetch_512). On the `emeraldrapids` host (2 cores, 2 MiB L2 a core), where
# the hardware's prefetch left such rows waiting on memory (as it did the grid sums, which
# pace their own: fastpe.conventions.grid_sum_prefetch), `bench/roofline.py --runs 1` with
# the rule patched in (a script that sets these bounds, then runs it), alternated in fresh
# processes, twice each, the yardstick in the slow state: the (64, 32768, 128) float32 rows
# interleaved 90%, 95% -> 108%, 104%; half layout 91%, 91% -> 106%, 112%; positions
# 88%, 82% -> 108%, 100%; offsets 86%, 84% -> 107%, 116%; per-row positions 74%, 84% ->
# 102%, 105%; partial rotary (256 bytes rotated, not taken then) 74%, 88% -> 83%, 93%; spread
# offsets (the fused pass) 85%, 91% -> 84%, 84%; (32, 32768, 128) float64 interleaved 103%,
# 97% -> 116%, 120%; the 4-D float32 rows (32 heads, which prefetched before: their two
# stretches) 104-126% either way. Unmeasured: half-layout rows of 512 bytes with 2 to 7
# heads a position or through the runs kernel, and arrays of 128-256 MiB. On the
# `rocketlake` host one-head float32 rows of 512 bytes were slower prefetched (above), so
# other CPUs keep their bounds; other machines of this CPU are unmeasured. In cache the
# prefetches cost: scratch, fresh processes alternated with the code before, three each,
# median of 41 calls, (16, 1024, 128) float32 interleaved (8 MiB) 366-374 us against
# 245-260, (16, 4096, 128) (32 MiB) 1114-1134 against 729-792 interleaved, 1209-1243
# against 717-791 in the half layout; so only arrays of at least the cache counted on
# (_PREFETCH_512_BOUND, None: cache_share(), 128 MiB there).
_PREFETCH_512_CPUS = frozenset({"emeraldrapids"})
# On those CPUs, one-head RoPE rows (one head a position) of under 512 bytes of rotated
# channels prefetch too, in the same arrays, in either layout: from 256 bytes where the rows
# lie back to back, from 128 bytes where the rows lie apart (partial rotary: each row's
# rotated channels followed by channels left as they are). Scratch on the `emeraldrapids`
# host, 1 GiB float32, fresh processes alternated, the rule patched in, two rounds each,
# fraction of the yardstick moving the same bytes (`a *= s`, or `scale[:r]` over the
# rotated channels), without -> with: (64, 32768, 128) rotary_dim 64 half layout 81%, 81% ->
# 98%, 94%, interleaved 82%, 82% -> 95%, 92%; rotary_dim 32 half 58%, 55% -> 68%, 67%,
# interleaved 46%, 46% -> 68%, 69%; (128, 32768, 64) (rows of 256 bytes back to back) half
# 92%, 90% -> 99%, 96%, interleaved 95%, 89% -> 104%, 96%. Rows of 128 bytes back to back
# were slower prefetched: (256, 32768, 32) half 81%, 82% -> 57%, 54%, interleaved 73%, 71%
# -> 47%, 47%. Several heads a position (which walk two stretches, each head prefetched:
# two_stretches) were the same either way: (8, 16384, 32, 64) 97-106% against 99-103%,
# (4, 16384, 32, 128) rotary_dim 64 103-106% against 103-106%, and keep 512 bytes.
# Unmeasured: 2 to 7 heads a position, the runs kernel, arrays of 128-256 MiB, and rows
# apart by a stride that does not divide 2 KiB (prefetch_ahead then hints lines partly
# of channels left alone: e.g. 32 of 80 float32 channels rotated).
_PREFETCH_SHORT_BYTES = (256, 128)  # (rows back to back, rows apart)
_prefetch512: bool | None = None
_PREFETCH_512_BOUND: int | None = None
_CACHE_SHARE: int | None = None  # fastpe._timing.cache_share_bytes (asked once)


def cache_share() -> int:
    """``fastpe._timing.cache_share_bytes``, asked once (the import alone took 1.3 us a
    call): the bound from which the prefetches that pay only out of the cache are made
    (rows of 512 bytes here, the paced grid sums of ``fastpe.conventions``)."""
    global _CACHE_SHARE
    if _CACHE_SHARE is None:
        from ._timing import cache_share_bytes

        _CACHE_SHARE = cache_share_bytes()
    return _CACHE_SHARE


def prefetch_512(cpu_name: str | None = None) -> bool:
    """Whether RoPE rows prefetch from 512 bytes of rotated channels, one head a position
    or several, in either layout, one head from 128-256 bytes (``_PREFETCH_SHORT_BYTES``),
    and the line passes reach further (:func:`line_ahead_bytes`), in large arrays
    (:data:`_PREFETCH_512_CPUS`). ``cpu_name``: LLVM's name of
    a CPU; None: this one (asked once). An LLVM too old to know the name calls such a CPU
    otherwise, and it keeps other CPUs' bounds."""
    global _prefetch512
    if cpu_name is not None:
        return cpu_name in _PREFETCH_512_CPUS
    if _prefetch512 is None:
        _prefetch512 = _host_cpu_name() in _PREFETCH_512_CPUS
    return _prefetch512


def _prefetch_512_for(nbytes: int) -> bool:
    """:func:`prefetch_512` for an array of ``nbytes``: only from ``_PREFETCH_512_BOUND``
    (None: :func:`cache_share`)."""
    bound = _PREFETCH_512_BOUND
    return prefetch_512() and nbytes >= (cache_share() if bound is None else bound)


# How far ahead the passes that prefetch each line as they go reach (bytes from the line):
# the fused RoPE pass (fused_rows) and float32 add_sinusoidal a line at a time
# (add_direct_kernel). _kernels.prefetch.AHEAD_BYTES (2 KiB), but on the CPUs of
# _PREFETCH_512_CPUS in arrays from _PREFETCH_512_BOUND, _LINE_AHEAD_FAR: there 2 KiB left
# both waiting on memory. Scratch on the `emeraldrapids` host, 1 GiB float32, the distance
# patched (2, 1, 4, 8 KiB), fresh processes alternated, twice each, fraction of the `a *= s`
# yardstick: (1, 262144, 1024) add_sinusoidal interleaved 89%, 85% at 2 KiB; 79%, 78% at
# 1 KiB; 94%, 93% at 4 KiB; 94%, 94% at 8 KiB; (64, 32768, 128) RoPE with spread offsets
# (the fused pass) 86%, 86%; 73%, 68%; 98%, 97%; 97%, 100%. In cache unmeasured, hence the
# bound; other CPUs keep 2 KiB (unmeasured).
_LINE_AHEAD = 2048  # _kernels.prefetch.AHEAD_BYTES (named here without importing numba)
_LINE_AHEAD_FAR = 4096


def line_ahead_bytes(nbytes: int) -> int:
    """How many bytes ahead of each line the passes that prefetch a line as they go
    prefetch, in an array of ``nbytes`` (``_LINE_AHEAD_FAR`` where :func:`prefetch_512`,
    from its bound; else ``_LINE_AHEAD``, ``_kernels.prefetch.AHEAD_BYTES``)."""
    return _LINE_AHEAD_FAR if _prefetch_512_for(nbytes) else _LINE_AHEAD


def prefetch_interleaved(nh: int, row_bytes: int, nbytes: int, apart: bool) -> bool:
    """Whether interleaved RoPE rows of ``row_bytes`` rotated bytes, ``nh`` heads a
    position, prefetch (the ``prefetch`` mode; see ``_PREFETCH_IL_ROW_BYTES``): on CPUs
    other than Zen 5, rows of 512 bytes to 4 KiB with several heads a position, or one head
    from 2 KiB (but for one head whose cos/sin serve one row, which :func:`fused_rows`
    rotates where it fits, prefetching as it goes). Where :func:`prefetch_512`, in arrays
    of ``nbytes`` from ``_PREFETCH_512_BOUND``, one head from 256 bytes, or 128 where the
    rows lie ``apart`` (each row's rotated channels not followed by the next row's:
    ``_PREFETCH_SHORT_BYTES``)."""
    lo, hi = _PREFETCH_IL_ROW_BYTES
    if nh > 1:
        least = lo
    elif _prefetch_512_for(nbytes):
        least = _PREFETCH_SHORT_BYTES[apart]
    else:
        least = _PREFETCH_IL_ONE_HEAD_MIN
    return not host_zen5() and least <= row_bytes <= hi


def prefetch_rope_min_bytes(nbytes: int, nh: int, apart: bool) -> int:
    """The smallest half-layout RoPE row (bytes of rotated channels) that prefetches on this
    CPU in an array of ``nbytes``, ``nh`` heads a position: 512 on Zen 5 and later; where
    :func:`prefetch_512`, in arrays from ``_PREFETCH_512_BOUND``, 512 for several heads and
    for one 256, or 128 where the rows lie ``apart`` (``_PREFETCH_SHORT_BYTES``); 1 KiB on
    the others."""
    if _prefetch_512_for(nbytes):
        return _PREFETCH_SHORT_BYTES[apart] if nh == 1 else _PREFETCH_ROPE_MIN_ZEN5
    if host_zen5():
        return _PREFETCH_ROPE_MIN_ZEN5
    return _PREFETCH_ROW_BYTES[0]


_LLC_BYTES: int | None = None  # the last-level cache the OS reports (asked once)

# The most bytes of rotated rows one work item of rope_kernel prefetches while it computes
# their cos/sin (fill_ahead): an eighth of the znver5 host's 1 MiB L2, so that the rows
# are still there when they are rotated (one float32 head of 128 channels: 256 positions,
# 128 KiB).
_FILL_AHEAD_BYTES = 128 * 1024


def fill_ahead(per_batch: bool, item_bytes: int, nbytes: int) -> Flag:
    """Whether ``rope_kernel`` prefetches each position's rows while it computes their
    cos/sin (its ``fill_ahead``: ``ON``, or None): where positions are per batch row (each
    item is one batch row's positions; nothing shares their cos/sin), the item's rows
    (``item_bytes`` of rotated channels) fit ``_FILL_AHEAD_BYTES``, and, on Zen 5 only,
    the array is as large as the last-level cache (:func:`prefetch_fits`). Without it an
    item computes, then waits on memory for its rotation, one after the other. On the
    znver5 host, the roofline's ``(64, 32768, 128)`` float32 row with offsets spread over
    10**6 (1 GiB, 2 threads): 72% and 76% of the scale yardstick against 50% before, in
    alternated invocations of ``bench/roofline.py --match spread``; the mode off against on
    1.40-1.49x slower (``bench/modes.py --mode fill_ahead``; README, "Per-row positions
    that share no cos/sin"). The half layout's rows of 512 bytes, which its ``prefetch``
    mode already prefetches 2 KiB ahead as they are rotated, gained nothing and lost
    nothing (the same shape, half layout, mode on against off in one process, 3 rounds:
    1.01-1.02x, scratch). Other CPUs: not measured, so not made there."""
    if (
        per_batch
        and MODES["fill_ahead"]
        and host_zen5()
        and item_bytes <= _FILL_AHEAD_BYTES
        and prefetch_fits(nbytes)
    ):
        return ON
    return None


def short_run(
    a, layout: int, nh: int, ss: int, npairs: int, itemsize: int, nbytes: int, shared: bool
) -> bool:
    """Whether RoPE takes the kernels' ``short`` loop (cos/sin filled a group of positions
    at a time, each batch row's block rotated as one run of pairs, or row by row in the
    half layout): one head of short rows (:func:`short_run_bytes` at most, of an array of
    ``nbytes`` whose batch rows do or do not share positions, ``shared``) back to back,
    interleaved pairs or one pair, or half-split pairs with the ``short_half`` mode on
    (``a``: :mod:`fastpe._kernels.args`).
    float32/float64 calls whose positions take the runs walk do not; 16-bit ones have no
    runs walk. On the znver5 host, ``bench/dims.py --dtype float16``: float16 RoPE at dim
    2 1.05-1.08x dim 128's time per byte against 5.7-10.9x before (README, "Short 16-bit
    rows rotated as runs")."""
    return (
        nh == 1
        and ss == 2 * npairs
        and 2 * npairs * itemsize <= short_run_bytes(nbytes, shared)
        and (layout == a.INTERLEAVED or MODES["short_half"])
    )


def kernel_layout(a, layout: int, npairs: int) -> int:
    """The layout the kernels are given for a call of ``npairs`` pairs a row in ``layout``
    (``a``: the kernels' argument module, :mod:`fastpe._kernels.args`): a row of one pair
    holds the same two channels in either layout, so it takes the interleaved paths (the
    lanes kernels' interleaved paths, which float32 tables of one pair take in no other
    layout): the values of the interleaved call. :func:`run` and the planned 1-D calls of
    ``fastpe.conventions`` ask it."""
    return a.INTERLEAVED if npairs == 1 else layout


def prefetch16(nbytes: int) -> Flag:
    """Whether 16-bit RoPE over ``nbytes`` prefetches each row's lines first (the ``prefetch``
    mode): on other CPUs ``ON``, at every size but on the CPUs of ``_PREFETCH_BOUND_CPUS``,
    where only in arrays at least as large as the last-level cache (:func:`prefetch_fits`);
    on Zen 5 None (no prefetch, the row loops compiled without it) at every size. On the
    znver5 host, float16 ``(4, s, 32, 128)`` half layout, the prefetch on against off in one
    process (3 rounds of 9 pairs, the fraction of the yardstick): 33-34% against 41-44% at 8
    MiB, 55-67% against 81-85% at 32 MiB (the last-level cache's size), 89-94% against
    88-90% at 64 MiB, 93-97% against 94-102% at 256 MiB; at 1 GiB ``bench/modes.py --mode
    prefetch`` 0.95-1.12x (README, "16-bit RoPE without prefetch on Zen 5")."""
    return ON if MODES["prefetch"] and not host_zen5() and prefetch_fits(nbytes, 1.0) else None


def prefetch_fits(nbytes: int, part: float = 0.5) -> bool:
    """Whether a call over ``nbytes`` may prefetch its rows (the float32/float64 RoPE rows
    of the ``prefetch`` mode and their two stretches, 16-bit RoPE rows (:func:`prefetch16`),
    ``add_sinusoidal``'s float32/float64 rows; the per-row items of :func:`fill_ahead`,
    Zen 5 only): on Zen 5 only arrays at least as large as the last-level cache the OS
    reports; on the CPUs of ``_PREFETCH_BOUND_CPUS`` (:func:`prefetch_bounded`) only
    arrays of at least ``part`` of it (half; 16-bit RoPE rows the whole; 0, every size,
    for one-row ``add_sinusoidal``: see there); on other CPUs every size.

    Below it the array may stay in the cache between calls, where the prefetch
    instructions mostly take issue slots: on the znver5 host (32 MiB L3, the mode on
    against off in one process, scratch) RoPE rows of 512 bytes to 4 KiB ran 0.69-0.98x as
    fast prefetched at 0.5-16 MiB and 0.91-1.09x at 32 MiB, one-row ``add_sinusoidal``
    0.75-0.78x at 8 MiB, 0.98x and 1.34x at 16 MiB (two rounds: a loss there is possible)
    and 1.36-1.67x at 32 MiB (README, "Prefetch out of the cache only"); the znver3
    host's figures are at ``_PREFETCH_BOUND_CPUS``. Other CPUs keep prefetching in cache:
    unmeasured there. On Zen 5 16-bit RoPE rows are not prefetched at all
    (:func:`prefetch16`). Not bounded anywhere: 16-bit ``add_sinusoidal``, the grid sums,
    and the fused pass of one-head RoPE rows (:func:`fused_rows`, unmeasured in cache).
    """
    global _LLC_BYTES
    zen5 = host_zen5()
    if not zen5 and not (part and prefetch_bounded()):
        return True
    if _LLC_BYTES is None:
        from ._timing import last_level_cache_bytes

        _LLC_BYTES = last_level_cache_bytes()
    return nbytes >= (_LLC_BYTES if zen5 else _LLC_BYTES * part)


# CPUs (LLVM's names) whose rows prefetch only in arrays of at least a part of the
# last-level cache the OS reports (prefetch_fits; measured on one host, a VM that shares
# that cache: a Zen 3 that reports more L3, 96 MiB on some, takes a bound as much higher,
# unmeasured). On the znver3 host (AMD EPYC, 2 cores; 32 MiB of L3 reported, shared with
# the neighbours: `a *= s` over 16 MiB on one core ran at about memory speed), the rows of
# bench/incache.py's shapes, the prefetch mode on and off in one process (the yardstick, on,
# off, 11 or 15 rounds; the median of the per-round fractions of the yardstick; t_off /
# t_on below 1 where prefetching pays), scratch:
# - float32 RoPE (4, s, 32, 128), half layout: 1.06 and 1.09 at 8 and 12 MiB, 0.98 at 16,
#   0.76-0.88 at 24-256 MiB; interleaved 1.21 and 1.15 at 8 and 12 MiB, 0.75-0.87 at
#   16-256: from half the cache;
# - float16 RoPE 1.61, 1.21, 1.22 at 8, 12, 16 MiB, 0.84-0.91 at 24-64, 1.14 at 256;
#   again at 12-28 MiB 0.94-1.19 (0.97 at 24); bfloat16 1.13-1.19 at 8-16, 1.00-1.13 at
#   24-256, again at 12-28 1.03-1.19 (interleaved 0.97-1.24): from the whole cache (above
#   it 0.85-1.14, not changed);
# - add_sinusoidal (8, s, 1024) float32 (a table row shared by 8 batch rows): 1.18 and
#   1.15 at 4 and 8 MiB, 0.96 at 16, 1.08-1.10 at 32-64 (above half the cache as before:
#   those two within this host's noise between processes, 10 points);
# - one-row add_sinusoidal ((s, 1024) float32, the lines of add_direct_kernel), the bound
#   on and off likewise: 0.97-0.99 at 4-12 MiB, so left unbounded (``part`` 0).
# README, "Prefetch in cache on znver3".
_PREFETCH_BOUND_CPUS = frozenset({"znver3"})
_prefetch_bounded: bool | None = None


def prefetch_bounded() -> bool:
    """Whether this CPU is one of ``_PREFETCH_BOUND_CPUS`` (asked once)."""
    global _prefetch_bounded
    if _prefetch_bounded is None:
        _prefetch_bounded = _host_cpu_name() in _PREFETCH_BOUND_CPUS
    return _prefetch_bounded


# how far ahead of each row 16-bit add_sinusoidal prefetches x on Zen 5 (other CPUs:
# fastpe._kernels.prefetch.AHEAD_BYTES, 2 KiB). Scratch on the znver5 host, 16 x 32768 x
# 1024, interleaved, 1 GiB, five alternating processes per distance, fraction of the scale
# yardstick: bfloat16 87-90% at 8 KiB against 76-81% at 2 KiB; float16 79-92% against
# 81-87%; 4 KiB 65-85% (two processes); none 48-60%
_ADD16_AHEAD_ZEN5 = 8192


def add16_item_bytes() -> int:
    """The float32 table rows of one work item of a 16-bit ``add_sinusoidal`` whose rows are
    shared by several batch rows (``half.add16_kernel`` lays an item's rows out once, and
    every batch row adds them): ``_ADD16_ITEM_BYTES`` (16 KiB: rows that stay in L1 while
    x streams past them) on CPUs other than Zen 5, ``_CACHE_BYTES`` (192 KiB, from L2) on
    Zen 5, where the smaller items were not measured. On the rocketlake host, 1 GiB (16,
    32768, 1024), 2 threads, one process, six rounds alternating (scratch): float16 71-74
    ms against 80-87 with 192 KiB, bfloat16 79-82 against 83-85 (README, "16-bit sums in
    items of 16 KiB")."""
    return _CACHE_BYTES if host_zen5() else _ADD16_ITEM_BYTES


def add16_block(nbytes: int) -> int:
    """How many elements of x a 16-bit ``add_sinusoidal`` over ``nbytes`` whose table rows
    several batch rows share adds to each batch row at a time (``half.add16_kernel``'s
    ``block``): ``SUM_BLOCK_BYTES`` of them (``fastpe._kernels.tables``, as float32 and
    float64 sums) on CPUs other than Zen 5, in arrays of ``_SUM16_BLOCKS_MIN_BYTES`` and
    more; else 0 (each batch row's rows in turn: on Zen 5 that walk, with each row's lines
    prefetched 8 KiB ahead, was measured, the blocks not). On the rocketlake host, float16
    (16, s, 1024), 2 threads, one process per setting, alternated (scratch; README, "Shared
    table rows added a block at a time"): the blocks 0.77-0.86 of the ``a *= s`` yardstick
    at 64-512 MiB against 0.58-0.70 (1 GiB: 0.84-0.88 against 0.60, bfloat16 0.68-0.73
    against 0.53-0.54), but 0.45-0.61 at 4-32 MiB (in cache) against 0.51-0.67."""
    from ._kernels.tables import SUM_BLOCK_BYTES

    if host_zen5() or nbytes < _SUM16_BLOCKS_MIN_BYTES:
        return 0
    return SUM_BLOCK_BYTES // 2


# 16-bit sums of shared rows take blocks from this size (add16_block)
_SUM16_BLOCKS_MIN_BYTES = 64 << 20


def add16_ahead_bytes() -> int:
    """How far ahead of each row (bytes) a 16-bit ``add_sinusoidal`` prefetches x: 8 KiB
    on Zen 5 and later, 2 KiB on the others (where 8 KiB is unmeasured)."""
    from ._kernels.prefetch import AHEAD_BYTES

    return _ADD16_AHEAD_ZEN5 if host_zen5() else AHEAD_BYTES


# per-row positions with fewer heads than this walk the positions (rows then share each
# position's cos/sin: the runs kernel)
_ROWS_PER_ANGLE = 4
_MIN_RUN = 16  # the position-major walk needs runs this long on average
_SHORT_ROW_BYTES = 2048  # partial rotary reads the rest of rows up to this long (reads_rest)
# CPUs (LLVM's names) on which partial rotary never reads the rest of the rows (the
# touch_end mode: see reads_rest). On the `emeraldrapids` host (2 cores, 300 MiB L3
# reported, float32, 1 GiB, 2 threads) `bench/modes.py` measured the reads off / on at
# 0.67-0.80 on the roofline's 4 x 16384 x 32 x 128 row with rotary_dim 64 and 0.95-1.03 on
# the one-head row 64 x 32768 x 128 (eight runs in four invocations); `bench/roofline.py
# --match rotary_dim=64 --runs 3`, alternated with 3bb637b three times: the 4-D row at
# medians of 99-101% of its yardstick (runs 97-110%) against 75-76% (74-77%), the one-head
# row 81% (80-84%) against 78% (77-79%). Without the reads, one head of positions per batch
# row (or of one batch row) takes the fused pass (fused_rows): scratch, 1 GiB of spread
# offsets in 44.3-54.8 ms (five of six rounds under 46), 66.3-72.5 with the fused mode
# off, 90.1-94.6 at 3bb637b. On the first development host (260 MiB last-level cache) the
# reads paid 1.80x and 1.36x on those two rows; on the `rocketlake` host the rows met their
# target with them (101% and 97% at 89d025c), not measured without (README, "Partial
# rotary rows without reading the rest"). Other CPUs of that family (`sapphirerapids`,
# `graniterapids`) have not run it, and keep the reads.
_NO_REST_READS_CPUS = frozenset({"emeraldrapids"})
_rest_reads: bool | None = None


def reads_rest(cpu_name: str | None = None) -> bool:
    """Whether partial rotary over at least half of short rows (up to ``_SHORT_ROW_BYTES``)
    also reads the channels it leaves, one element a cache line, which kept the prefetcher
    streaming half-rotated rows where it was measured (the ``touch_end`` mode): on every
    CPU but those of ``_NO_REST_READS_CPUS``. ``cpu_name``: LLVM's name of a CPU; None: this
    one (asked once). An LLVM too old to know the name calls such a CPU otherwise, and it
    reads as other CPUs do."""
    global _rest_reads
    if cpu_name is not None:
        return cpu_name not in _NO_REST_READS_CPUS
    if _rest_reads is None:
        _rest_reads = _host_cpu_name() not in _NO_REST_READS_CPUS
    return _rest_reads


# one head of rows up to this long (a cache line; two in cache, below) is rotated as one run
# per batch row; longer rows take the per-row loop, faster there on the current host (3-D
# float32 interleaved, 128 channels: 56-62 against 82-87 ms per GiB; the run wins up to 16
# channels, even at 32)
_SHORT_RUN_ROW_BYTES = 64
# In arrays under the cache counted on (cache_share) rows up to two lines, where batch rows
# share positions (elsewhere one head's rows take the fused pass, fused_rows, where it
# fits, or the per-row items: unmeasured as runs): there the per-row loop's cost a row
# showed. On the `emeraldrapids` host, `bench/dims.py --ops apply_rope` (32 MiB, in cache)
# with the bound patched, two invocations each, time per
# byte against dim 128, 64 -> 128 bytes: float32 dim 32 interleaved 2.61, 2.61 -> 1.61,
# 1.56, half 2.16, 2.14 -> 1.63, 1.66; float64 dim 16 interleaved 1.94, 2.00 -> 1.37,
# 1.26, half 2.02, 1.90 -> 1.62, 1.72; float16 dim 64 interleaved 1.37, 1.37 -> 0.72,
# 0.64, half 1.44, 1.48 -> 0.62, 0.65. Out of the cache the runs lost or gained too little
# (scratch, 1 GiB, fresh processes alternated, twice each, % of `a *= s`): float32 dim 32
# half 80%, 80% -> 69%, 70%, interleaved 72%, 67% -> 74%, 77%; float64 dim 16 interleaved
# 91%, 89% -> 74%, 70%, half 83%, 84% -> 51%, 55%; float16 dim 64 53-55% -> 48-51%
# interleaved, 45-53% -> 55-69% half. Other CPUs unmeasured in cache.
_SHORT_RUN_CACHE_ROW_BYTES = 128


def short_run_bytes(nbytes: int, shared: bool) -> int:
    """The longest one-head RoPE row (bytes) that :func:`short_run` rotates as runs in an
    array of ``nbytes``: ``_SHORT_RUN_CACHE_ROW_BYTES`` under :func:`cache_share` where
    batch rows share positions (``shared``: several batch rows, one set of positions),
    else ``_SHORT_RUN_ROW_BYTES`` (rows whose cos/sin serve one row: the fused pass's,
    where it fits)."""
    if shared and nbytes < cache_share():
        return _SHORT_RUN_CACHE_ROW_BYTES
    return _SHORT_RUN_ROW_BYTES


# the lanes kernels: float32 tables (stepped: dim <= 14, table_stepped) and add_sinusoidal
# of dim <= 16 (dim 32: no gain), 16-bit tables and add_sinusoidal of dim <= 16, in either
# layout
_LANES_MAX_PAIRS = 8
# float32 table rows of this many pairs are folded from their anchors, the others stepped
# by the recurrence (table_stepped): [first, end)
_FOLDED_PAIRS = (8, 128)


def table_stepped(npairs: int) -> bool:
    """Whether the rows of a float32 table of ``npairs`` pairs are stepped from row to row
    by the recurrence (the ``recurrence`` mode of :data:`MODES` on), in either layout, else
    folded each from its anchor: rows of fewer than 8 pairs or of at least 128
    (``_FOLDED_PAIRS``). The two ways agree but within about 2**-50 of a float32 rounding
    tie, so the choice depends on the table's pairs alone, never on its size or the path
    (every caller asks here, ``fastpe.conventions`` included; a grid's table, or a
    convention's of several blocks, asks for each block's pairs).

    Which is faster depends on the row: stepping keeps a row's state in L1 and reads one
    step row; folding reads anchors and the step tables (16 rows of the row's pairs),
    which leave L1 from some 256 pairs. `emeraldrapids` host, scratch, the ``recurrence``
    mode off / on (fold / step, above 1: stepping faster), 32 MiB (in cache) and 1 GiB,
    either layout: dims 4-14 1.13-2.54 (their steps side by side in the lanes kernels, the
    folded rows' vectors not full: dim 14 1.50-1.51 at 1 GiB), dims 16-128 0.67-0.97 (8
    MiB 0.68-0.95; dim 16 at 1 GiB 0.69-1.05), dim 256 0.97-1.13, dims 512-1024
    0.99-1.24 (in cache 0.80-1.11)."""
    if not MODES["recurrence"]:
        return False
    return not (_FOLDED_PAIRS[0] <= npairs < _FOLDED_PAIRS[1])


# the float64 rows of one of their work items (a sine and a cosine of 8 bytes per position
# and pair; the float32 lanes' rows are float32 since 4dd45d4, half this, the items not
# resized) within L2, as the cos/sin caches of the other kernels (_CACHE_BYTES); scratch
# comparison against items of _MAX_CHUNK positions (32 MiB float32, 41 alternating rounds):
# tables 1.08x at dim 2, 1.10x at dim 4, add_sinusoidal 1.13x and 1.06x, 0.99-1.08x at dims
# 8-16 (32 KiB: 1.08x, 1.06x, 1.20x, 0.99x)
_LANES_OUT_BYTES = 64 * 1024
# tables at least this large are written by streaming stores (see _kernels.stream); None:
# twice the last-level cache counted on (fastpe._timing.cache_share_bytes: the OS's figure,
# at most 128 MiB; fastpe._timing.cache_resident's bound), so that a table that may stay in
# cache for its reader goes there
_STREAM_MIN_BYTES: int | None = None


def stream_min_bytes() -> int:
    """The size from which tables are written by streaming stores: ``_STREAM_MIN_BYTES``,
    asked of the cache the first time (twice ``fastpe._timing.cache_share_bytes``)."""
    global _STREAM_MIN_BYTES
    if _STREAM_MIN_BYTES is None:
        from ._timing import cache_share_bytes

        _STREAM_MIN_BYTES = 2 * cache_share_bytes()
    return _STREAM_MIN_BYTES


def streamed(view: np.ndarray, flat: np.ndarray, sd: int, stepped: bool = False) -> Flag:
    """``ON`` where a table's rows are written by streaming stores, else None (the kernels'
    constant): large tables with unit-stride channels, elements aligned to their size;
    ``stepped``: float32 rows stepped by the recurrence, not streamed on Zen 5 where the
    ``plain_stepped`` mode of :data:`MODES` is on (it is off by default).

    The callers ask for float32 and float64 tables (written a line at a time where
    :func:`direct_rows`, else a row at a time through L1), grid tables and 16-bit tables
    (not those of a few pairs a row, which the lanes kernels write by plain stores): on Zen
    5 a row at a time, elsewhere only rows back to back, each row's lines while the next
    row is computed (:func:`trailed16`); ``python bench/modes.py --mode stream`` measures
    them, streaming on against off.
    float64 tables streamed were no faster on the AMD host (0.93-1.05 over six runs at
    commit a1a9d3e) and 1.28-1.44x faster on the 480 MiB host (README, "float64 tables
    streamed"); on the znver5 host 1.23-1.58x.
    float32 interleaved rows (the recurrence, which stores its state as it goes) were no
    faster streamed until the streaming specializations were compiled for 512-bit vectors
    (README, "Streamed tables with 512-bit vectors"); on the znver5 host they were slower
    streamed, hence ``stepped`` (README, "Tables streamed on the znver5 host"), until the
    partial lines of rows that start off a line were prefetched (:mod:`._kernels.stream`):
    streamed, they are now faster there too, and the ``plain_stepped`` mode is off (README,
    "Streamed rows off the line"). 16-bit tables (bound by their
    rounding) were no faster, or slower, in scratch comparisons on earlier hosts a row at a
    time, and are streamed so on Zen 5 only: on the znver5 host float16 1.11-1.20x and
    bfloat16 1.16-1.34x in one invocation, 0.95-1.12 and 1.00-1.18 over five runs in two
    earlier ones. Streamed behind the next row (:func:`trailed16`) they are faster on the
    rocketlake host: float16 1.17-1.25x, bfloat16 1.20-1.27x (``--mode stream --runs 3`` at
    7b654f3).
    """
    if sd != 1 or not MODES["stream"] or (stepped and MODES["plain_stepped"] and host_zen5()):
        return None
    if view.size * view.itemsize < stream_min_bytes():
        return None
    return ON if flat.ctypes.data % flat.itemsize == 0 else None


# float32/float64 tables from this size up to the streaming bound take the direct pass by
# plain stores (plain_direct), with rows of at least these bytes
_PLAIN_DIRECT_MIN_BYTES = 4 << 20
_PLAIN_DIRECT_ROW_BYTES = 1024
# CPUs on which those tables keep table_kernel's rows: on the `znver3` host (AVX2) the
# direct pass by plain stores was slower in nearly every case measured (scratch: the
# plain_direct mode off / on in one process, 15 alternating pairs of calls, 4-48 MiB,
# rows of 1-8 KiB; at b70de26 float32 interleaved 0.68-1.05, half layout 0.55-0.93,
# float64 0.74-1.04; the half layout's 0.55-0.92 with its lines in two groups (17e04b6),
# below 1 at every size; bench/incache.py against --off plain_direct, four alternating
# invocations: float32 tables of 8-32 MiB at 31-57% of the yardstick against 37-63%);
# other CPUs of that family have not run it, and take the pass
_NO_PLAIN_DIRECT_CPUS = frozenset({"znver3"})
_plain_direct_cpu: bool | None = None


def plain_direct_cpu(cpu_name: str | None = None) -> bool:
    """Whether :func:`plain_direct` may take tables on ``cpu_name`` (LLVM's name of a CPU;
    None: this one, asked once): every CPU but those of ``_NO_PLAIN_DIRECT_CPUS``. Either
    way the same bits."""
    global _plain_direct_cpu
    if cpu_name is None:
        if _plain_direct_cpu is None:
            _plain_direct_cpu = plain_direct_cpu(_host_cpu_name())
        return _plain_direct_cpu
    return cpu_name not in _NO_PLAIN_DIRECT_CPUS


def plain_direct(view: np.ndarray, flat: np.ndarray, sd: int) -> bool:
    """Whether a float32 or float64 table that is not streamed (:func:`streamed` None) is
    still written a line at a time by ``_kernels.direct.table_direct_kernel``, by plain
    stores (where :func:`direct_rows` takes its rows): tables of unit-stride channels from
    ``_PLAIN_DIRECT_MIN_BYTES`` up to the streaming bound, rows of at least
    ``_PLAIN_DIRECT_ROW_BYTES`` (1 KiB), elements aligned to their size. The
    ``plain_direct`` mode of :data:`MODES`.

    Below the streaming bound a table stays in cache for its reader, and its rows went
    through ``table_kernel``'s loops by plain stores. The direct pass by plain stores
    prefetches each line for writing before its store
    (``_kernels.direct.row_pass``): without that prefetch it was slower than those loops
    for the float32 interleaved table (the recurrence's rows) on the `emeraldrapids` host,
    faster for the folded rows (the half layout, float64); with it, faster for all three
    (``bench/incache.py`` against ``--off plain_direct``, README "In-cache tables a line at
    a time"). Not for shorter rows, nor below 4 MiB: 16 MiB tables, off / on, three rounds
    each (scratch): float32 half-layout rows of 256 bytes to 2 KiB 0.59-1.00, of 4 KiB
    1.09-1.12 (when those rows were folded, not stepped); float32 interleaved rows of 128
    bytes 0.70-0.85, 1-4 KiB 1.04-1.29; float64 rows of 512 bytes 0.85-1.01, of 1-8 KiB
    1.15-1.54 (either layout); rows of 4-8 KiB at 0.5-2 MiB 0.52-1.57, mixed. Since
    float32 rows of 128 pairs and more are stepped in either layout (:func:`table_stepped`),
    the half layout's take the pass from 1 KiB too: against those rows folded
    (``table_kernel`` below 4 KiB), 8 and 32 MiB, three alternating invocations each
    (scratch), rows of 1-2 KiB 1.02-1.55.

    Not on the CPUs of ``_NO_PLAIN_DIRECT_CPUS`` (``znver3``: :func:`plain_direct_cpu`).
    """
    nbytes = view.size * view.itemsize
    if sd != 1 or not MODES["plain_direct"] or nbytes < _PLAIN_DIRECT_MIN_BYTES:
        return False
    if not plain_direct_cpu():
        return False
    row_bytes = view.shape[-1] * view.itemsize
    if row_bytes < _PLAIN_DIRECT_ROW_BYTES:
        return False
    if nbytes >= stream_min_bytes():  # (with the stream mode off: table_kernel's rows)
        return False
    return flat.ctypes.data % flat.itemsize == 0


def trailed16(view: np.ndarray, flat: np.ndarray, sd: int, ss: int, npairs: int) -> Flag:
    """``ON`` where a 16-bit table's rows go out to memory by streaming stores while the
    next row is computed (``half.table16_kernel``'s ``trail``), else None: where
    :func:`streamed` would stream it, with rows back to back (``ss == 2 * npairs``), on
    CPUs other than Zen 5 (which stream 16-bit tables a row at a time after each row, and
    where this was not measured).

    A row streamed right after it is computed (``stream_row``) made no difference on the
    rocketlake host: the core stalls on the stores, a row's 32 lines at once, then
    computes the next row with the stores done. Streamed while the next row is computed,
    the stores drain behind the arithmetic (README, "16-bit tables streamed behind the
    next row").
    """
    if ss != 2 * npairs or host_zen5():
        return None
    return streamed(view, flat, sd)


def two_stretches(group: int, row_bytes: int, nbytes: int) -> bool:
    """Whether RoPE over ``nbytes`` walks each work item's positions in two stretches side by
    side, for rows of ``row_bytes`` of rotated channels (each head prefetched: so only where
    :func:`prefetch_fits`).

    A work item whose batch rows are not walked side by side (``group`` 1: several heads a
    position, one batch row, or per-row items) streams one stretch of memory: a
    position's heads, then the next position's. On the `rocketlake` host one core streams
    two stretches, a head of each in turn and each head's lines prefetched first, faster
    than one (as it does a long interleaved row's two halves, ``_HALVES_MIN_BYTES``). For
    rows of up to 4 KiB of rotated channels (``_PREFETCH_ROW_BYTES[1]``), with the
    ``prefetch`` mode, not on Zen 5 (not measured there); the engine does not ask with the
    partial-rotary reads, the runs kernel, ``halves`` or ``two_pass``. Scratch, 1 GiB, 2
    threads, the mode off then on in one process (its rounds alternated), fraction of the
    ``a *= s`` yardstick:

    - (4, 16384, 32, 128) float32 interleaved 0.79-0.82 -> 0.88-0.92, half layout
      0.84-0.88 -> 0.91-0.93;
    - (2, 16384, 32, 128) float64 interleaved 0.77-0.80 -> 0.92-0.95, half 0.75-0.76 ->
      0.86-0.88;
    - 8 heads of 512 bytes 0.79-0.80 -> 0.94-0.98; 4 heads of 1 KiB 0.79-0.82 -> 0.89-0.92;
      4 heads of 4 KiB (half layout) 0.67-0.68 -> 0.81-0.82, interleaved 0.72-0.73 ->
      0.77-0.80;
    - heads of 256 bytes 0.61-0.65 -> 0.92-0.99, of 128 bytes 0.66-0.81 -> 0.96-0.97, of
      64 bytes 0.25 -> 0.46-0.50 (the prefetch alone: 0.74-0.80, 0.74-0.80, 0.41-0.43);
    - (4, 64..2048, 32, 128) float32 interleaved, 4-32 MiB (in this host's cache): no
      loss (0.47-0.91 -> 0.64-1.04, noisy).

    A position's whole 16 KiB from each of two batch rows in turn (``group`` 2) was slower
    than one stretch (0.76 against 0.81); a loop over the two stretches, or over heads and
    stretches as one, ran as slowly as one stretch, and three stretches slower.
    ``bench/modes.py --mode stretches`` measures it on the roofline's rows.
    """
    return (
        MODES["stretches"]
        and MODES["prefetch"]
        and group == 1
        and row_bytes <= _PREFETCH_ROW_BYTES[1]
        and not host_zen5()
        and prefetch_fits(nbytes)
    )


def group_rows(op: int, nh: int, position_bytes: int) -> int:
    """How many batch rows that share positions are walked side by side, position by
    position, for ``nh`` heads per position holding ``position_bytes`` of channels.

    Each position's cos/sin (or table row) then serves that many rows while in L1, and as
    many stretches of memory stream at once: by default enough rows for ``_ROWS_PER_ANGLE``
    heads together.
    RoPE positions of 512 bytes to 4 KiB stream best two at a time on the current host
    (float32, ``a *= s`` yardstick, 1 GiB, alternating runs): one 128-channel head 96-100%
    of the yardstick against 91-92% with four rows, four such heads 95-98% against 93-95%
    alone. ``add_sinusoidal`` with unit-stride channels lays a work item's table rows out
    once and adds them a block of every batch row at a time instead (see
    :func:`~._kernels.tables.add_kernel`; 16-bit: :func:`add16_block`); float32 and float64
    strided ones take the groups (the 16-bit kernel walks batch row after batch row there).
    """
    if op == OP_ROPE and 512 <= position_bytes < 4096:
        return 2
    return -(-_ROWS_PER_ANGLE // nh)


# The ways of laying out the work that exist for speed alone; each is on. They change how
# the work is walked, never a value, except "recurrence", whose float32 values agree with
# the folded ones but within about 2**-50 of a rounding tie (the rotation's fused
# multiply-adds are written out, _kernels/turn.py, so every loop rounds as every other).
# bench/modes.py turns each one on and off in turn to show whether it still pays on the
# roofline's rows.
MODES = {
    "group": True,  # batch rows that share positions walked side by side (few heads)
    # short half-layout rows (one head, up to 64 bytes, 128 in cache: short_run) take the
    # short walk's fill and rotate each batch row's block row by row (interleaved ones: as
    # one run)
    "short_half": True,
    "runs": True,  # per-row positions made of runs: the position-major kernel
    # partial rotary on short rows reads the untouched channels too (on the CPUs of
    # reads_rest: not on `emeraldrapids`)
    "touch_end": True,
    # float64 half-layout rows of <= 1 KiB rotated in three passes: off, since
    # bench/modes.py measured it 5-14% slower than one pass on the roofline's rows (before
    # "prefetch": it now compares against the prefetched one-pass loop of 1 KiB rows;
    # short rows of up to 64 bytes (128 in cache) take the short walk instead, on or off)
    "two_pass": False,
    # half-layout RoPE rows of 1-4 KiB (from 512 bytes on Zen 5): software prefetch of the
    # lines ahead of each row before its rotation (see _PREFETCH_ROW_BYTES; from 128-512
    # bytes in large arrays on the CPUs of prefetch_512), and on CPUs other than Zen 5
    # interleaved ones of 512 bytes to 4 KiB (prefetch_interleaved); float32
    # add_sinusoidal rows of 1-4 KiB each adding its own table row (half layout; either on
    # Zen 5) that the direct mode does not take (see direct_rows): the next row's lines;
    # float32/float64 add_sinusoidal rows that several batch rows share: each batch row's
    # block after next (SUM_BLOCK_BYTES in fastpe._kernels.tables); on Zen 5 only in
    # arrays as large as the last-level cache, on the CPUs of _PREFETCH_BOUND_CPUS from
    # half of it but for one-row sums (prefetch_fits). 16-bit RoPE rows prefetch each
    # row's lines first, except on Zen 5 (prefetch16), short rows (their run or block),
    # and on the CPUs of _PREFETCH_BOUND_CPUS arrays below the last-level cache
    "prefetch": True,
    # float32 rows stepped from the previous row, not folded (tables: table_stepped)
    "recurrence": True,
    # tables (float32 and 16-bit, either layout) and add_sinusoidal's rows (either
    # layout, back to back, positions shared by the batch) of a few pairs a row at
    # consecutive positions: groups of positions stepped side by side (the same values)
    "lanes": True,
    # of those, 16-bit tables with rows back to back (interleaved; half layout of 2, 4 or 8
    # pairs): blocks of 16 or 256 positions, each one row of the float32 pass
    # (half.table16_blocks_kernel), not lanes
    "blocks16": True,
    # large tables written by streaming stores, bypassing the cache (see _kernels.stream;
    # 16-bit tables: on Zen 5 a row at a time, elsewhere rows back to back, behind the next)
    "stream": True,
    # of those, float32 and float64 tables computed a line at a time straight into memory
    # by streaming stores, not into a row in L1 then copied (see direct_rows); and float32
    # add_sinusoidal rows whose table row serves one row of x added a line at a time
    "direct": True,
    # float32/float64 tables below the streaming bound (from 4 MiB, rows from 1 KiB, where
    # direct_rows takes them, with the direct mode on)
    # computed a line at a time as the streamed ones are, by plain stores (plain_direct; on
    # the CPUs of plain_direct_cpu: not on `znver3`)
    "plain_direct": True,
    # on Zen 5, large float32 tables stepped by the recurrence (either layout) keep plain
    # stores: off, since the partial lines of rows off a line are prefetched (see
    # _kernels.stream): bench/modes.py --mode plain_stepped then measured plain stores
    # slower than streaming ones on the znver5 host, off / on 0.75-0.87 over three
    # invocations (see streamed)
    "plain_stepped": False,
    # on Zen 5, RoPE with positions per batch row (no cos/sin shared between rows): each
    # position's rows prefetched while its cos/sin is computed (see fill_ahead)
    "fill_ahead": True,
    # interleaved RoPE rows of _HALVES_MIN_BYTES and more, on CPUs other than Zen 5: the
    # row's two halves rotated side by side, two streams of memory
    # (fastpe._kernels.rope._rotate_interleaved_halves)
    "halves": True,
    # RoPE rows whose cos/sin serve that row alone (one head; positions per batch row, or
    # one batch row): each row rotated a line at a time as its cos/sin are computed, with
    # no cos/sin cache between them (see _kernels.direct.rope_pass)
    "fused": True,
    # RoPE whose work item streams one stretch of memory (no batch rows side by side:
    # several heads a position, one batch row, or positions per batch row), rows of up to
    # 4 KiB, on CPUs other than Zen 5, with "prefetch" (and where prefetch_fits): the
    # item's positions walked in two stretches side by side, a head of each in turn, each
    # prefetched (see two_stretches)
    "stretches": True,
}


def direct_rows(
    flat: np.ndarray, off0: int, ss: int, npairs: int, half: bool, mode: str = "direct"
) -> bool:
    """Whether a streamed float32 or float64 table (unit-stride channels; or one below the
    streaming bound, :func:`plain_direct`) is written by
    ``_kernels.direct.table_direct_kernel``, each row computed a line at a time into memory
    by streaming stores (or by plain ones), and whether float32 rows are added to x by
    ``add_direct_kernel`` (asked for the row stride ``ss`` and the batch stride), where its
    rows fit what that pass assumes: rows of a multiple of a group's pairs (half a line's
    values interleaved, a line's in the half layout: its halves then start at the same
    place in their lines), interleaved rows at even values of their lines (a line then
    holds whole pairs). The ``direct`` mode of :data:`MODES`, or ``mode`` (``"fused"``:
    RoPE rows rotated a line at a time by ``_kernels.direct.rope_pass``, which assumes the
    same, :func:`fused_rows`)."""
    per_line = 64 // flat.itemsize
    if not MODES[mode] or npairs % (per_line if half else per_line // 2) != 0:
        return False
    return half or (ss % 2 == 0 and (flat.ctypes.data // flat.itemsize + off0) % 2 == 0)


def fused_rows(
    flat: np.ndarray, off0: int, sb: int, ss: int, npairs: int, half: bool, nbytes: int
) -> int | None:
    """Whether ``rope_kernel`` rotates each row a line at a time as its cos/sin are computed
    (its ``fused``: the prefetch distance, :func:`line_ahead_bytes` for an array of
    ``nbytes``, or None; ``_kernels.direct.rope_pass``), for rows whose cos/sin
    serve that row alone (one head, positions per batch row or one batch row: the caller
    asks), where the rows fit what that pass assumes (:func:`direct_rows` for the batch
    stride ``sb`` and the row stride ``ss``; x aligned to its element's size), on CPUs with
    fused multiply-add (``_kernels.turn.TARGET_FMA``: the bits of the cache's path), not
    on Zen 5, where it was not measured (there positions per batch row take the
    ``fill_ahead`` mode's prefetch, measured there, and one batch row the cache's path).
    The cache's path computes an item's cos/sin into a cache, then rotates its rows: a
    thread computes, then waits on memory. The fused pass loads each line of x, rotates it
    by the values just computed and stores it, and prefetches the line
    :func:`line_ahead_bytes` ahead. The ``fused`` mode of :data:`MODES`. On the
    rocketlake host, ``bench/modes.py --mode fused --runs 3`` at 57e64b3 (1 GiB, 2 threads,
    off / on): the roofline's spread offsets 1.56-1.58, one batch row of float32 rows of 2
    KiB (interleaved, prefetched before) 1.51-1.57, of 8 KiB (two halves before) 1.37-1.38,
    half layout 1 KiB 1.57-1.65, float64 half layout 1 KiB (three passes before) 1.50-1.54,
    float64 half layout with spread offsets 1.50-1.53; ``bench/roofline.py`` at 57e64b3:
    the spread row at 74% (72-75%) of the yardstick against 46% (46-48%) at c7b13ca. In
    cache (scratch at 58509ad, one head, 0.25-32 MiB): 0.90-1.10x at 0.25-2 MiB, 1.06-1.27x
    at 8-32 MiB (README, "RoPE rows rotated as their cos/sin are computed")."""
    from ._kernels import turn

    if host_zen5() or not turn.TARGET_FMA or flat.ctypes.data % flat.itemsize != 0:
        return None
    if direct_rows(flat, off0, sb, npairs, half, "fused") and direct_rows(
        flat, off0, ss, npairs, half, "fused"
    ):
        return line_ahead_bytes(nbytes)
    return None


def position_runs(pos, offs, nb: int, ns: int, cuts: list, counts: list):
    """Runs of consecutive positions: the ``runs`` record of ``rope_runs_kernel`` (see
    ``_kernels.args.runs``: the rows, the first position and how many the walk covers), or
    None.

    Rows ``(b, s0, length, p0)``: batch row ``b`` holds position ``p0 + d`` at ``s0 + d``
    for ``d < length``. One run per row for per-row offsets (``pos`` None); for ``(nb, ns)``
    positions, one per stretch where the position goes up by 1 (packed sequences: one per
    sequence; ``counts[i]`` of them in rows ``cuts[i] .. cuts[i + 1] - 1``, as counted by
    ``scan_rows``). None when the runs are short (under ``_MIN_RUN`` positions on average)
    or spread over more than twice the sequence length of positions: then rows gain little
    from sharing cos/sin. Runs that hold the same positions come next to each other, so that
    the runs walked side by side stream together (the packed row of ``bench/roofline.py``).
    """
    from ._kernels.args import RUN_FIRST, RUN_LENGTH, RUN_ROW, RUN_START, runs

    if pos is None:
        rr = np.empty((nb, 4), dtype=np.int64)
        rr[:, RUN_ROW] = np.arange(nb)
        rr[:, RUN_START] = 0
        rr[:, RUN_LENGTH] = ns
        rr[:, RUN_FIRST] = offs
    else:
        if sum(counts) * _MIN_RUN > nb * ns:
            return None
        from ._kernels.scan import fill_runs

        rr = np.empty((sum(counts), 4), dtype=np.int64)
        k0 = np.cumsum([0, *counts])
        ends = in_parts(lambda i, b0, b1: fill_runs(pos, b0, b1, rr, k0[i], k0[i + 1]), cuts)
        if list(ends) != list(k0[1:]):  # the positions changed while they were scanned
            return None
    first = rr[:, RUN_FIRST]
    lo = int(first.min())
    count = int((first + rr[:, RUN_LENGTH]).max()) - lo
    if count > 2 * ns:
        return None
    # fill_runs wrote them in (row, start) order: a stable sort by (first, length) keeps it
    return runs(
        rr[np.argsort((first - lo) * (ns + 1) + rr[:, RUN_LENGTH], kind="stable")], lo, count
    )


def _lanes_split(ns: int, npairs: int, threads: int) -> tuple[tuple, int]:
    """The work split of the lanes kernels (``table_lanes_kernel``, ``add_lanes_kernel``,
    ``table16_lanes_kernel``, ``add16_lanes_kernel``):
    ``(split, n_workers)``.

    Their work items are longer than the others' (``_MAX_CHUNK``): the kernels step each
    item's rows in one call of ``lanes_rows``, whose array arguments cost atomic reference
    count updates on counts every thread shares, so fewer, longer items (their rows, sized
    as float64 ones, within ``_LANES_OUT_BYTES``, in L2) pay them less often; still
    ``_ITEMS_PER_THREAD`` items per thread at least.
    """
    from ._kernels import args as a

    chunk = max(1, min(ns, max(_MAX_CHUNK, _LANES_OUT_BYTES // (16 * npairs) - 32)))
    if (ns + chunk - 1) // chunk < _ITEMS_PER_THREAD * threads:
        chunk = max(1, -(-ns // (_ITEMS_PER_THREAD * threads)))
    n_items = (ns + chunk - 1) // chunk
    n_workers = 1 if threads == 1 else max(1, min(n_items, _ITEMS_PER_THREAD * threads))
    return a.split(chunk, 1, n_workers), n_workers


def _threads(nbytes: int) -> int:
    """Threads for a call over ``nbytes``: small calls (a decoding step) run on the caller."""
    if nbytes <= _SERIAL_MIN_BYTES:
        return 1
    threads = num_threads()
    return 1 if threads == 1 or nbytes <= serial_bytes() else threads


def serial_bytes() -> int:
    """The most bytes a call runs on the caller's thread alone (see ``_SERIAL_MIN_BYTES``):
    ``_SERIAL_BYTES`` where set, else 4 MiB on Zen 5 and 1 MiB elsewhere."""
    if _SERIAL_BYTES is not None:
        return _SERIAL_BYTES
    return _SERIAL_ZEN5_BYTES if host_zen5() else _SERIAL_MIN_BYTES


def handoff_seconds(rounds: int = 15) -> float:
    """The median time of ``parallel_for`` over two tasks that do nothing, on two threads:
    what a threaded call pays beyond its work (the pool started first). Reported by
    ``bench/handoff.py``; the engine does not time it."""

    def nothing(task: int) -> None:
        return None

    parallel_for(nothing, 2, 2)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        parallel_for(nothing, 2, 2)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]  # (the median of an odd count, the default)


def _launch(kern, args: tuple, n_workers: int, threads: int) -> None:
    """Run workers ``0 .. n_workers - 1`` of ``kern`` on ``threads`` threads."""
    if threads == 1:
        kern(0, n_workers, *args)
    else:
        parallel_for(lambda w: kern(w, w + 1, *args), n_workers, threads)


def run(
    view: np.ndarray,
    *,
    op: int,
    npairs: int,
    layout: int,
    positions,
    offsets,
    freq_key,
    wh,
    wl,
    sin_sign: float = 1.0,
    scale: float = 1.0,
    fixup: bool = False,
    axis_positions=None,
    pair_axes=None,
    check_range: bool = False,
):
    """Run ``op`` over the 4-D ``(B, S, H, D)`` view in place.

    ``positions`` is an int64 ``(Bp, S)`` array or None; ``offsets`` an int64 ``(Bp,)``
    array used when ``positions`` is None. ``Bp`` is 1 (shared) or B (per batch row).
    Multi-axis RoPE: ``axis_positions`` int64 ``(n_axes, Bp, S)`` and ``pair_axes`` int64
    ``(npairs,)`` instead (``positions`` and ``offsets`` unused). ``layout`` ``k >= 2``
    (``"half:k"``, blocks of half-split pairs) takes the multi-axis kernel alone.
    ``check_range``: the range of ``positions`` is still to check (``RopeCall.
    range_unchecked``); the scan of per-row positions finds it, and raises before the work.
    """
    if check_range and (positions is None or op != OP_ROPE or positions.shape[0] < 2):
        raise AssertionError("only per-row rope positions are range-checked by the scan")
    if view.size == 0 or npairs == 0:
        if check_range and positions.size:
            check_position_range(int(positions.min()), int(positions.max()))
        return
    k = _kernels()
    a = k.args  # the records' builders and constants
    blocks = None
    if layout >= 2:
        if axis_positions is None:  # the argument layer gives blocked calls axis positions
            raise AssertionError("a blocked layout needs axis positions")
        blocks, layout = layout, a.HALF
    elif axis_positions is None:
        layout = kernel_layout(a, layout, npairs)
    nb, ns, nh, dfull = view.shape
    flat, off0, (sb, ss, sh, sd) = flat_view(view)
    geo = a.view(flat, off0, sb, ss, sh, sd, nb, ns, nh, npairs, layout)
    tc, ts = tables(freq_key, wh, wl)
    freqs = a.freqs(wh, wl, tc, ts)
    axes = spans2 = None
    cuts: list = []  # per-row positions: the parts of the rows scanned (scan_rows) ...
    counts: list = []  # ... and how many runs of consecutive positions each part holds
    if axis_positions is not None:
        vals = kernel_ints(axis_positions)
        if vals.shape[1] > 1 and (vals == vals[:, :1]).all():  # rows alike: shared
            vals = vals[:, :1]
        pa = kernel_ints(pair_axes)
        axes = a.axes(vals, pa if pa.ndim == 1 else pa[0], vals.shape[1] > 1)
        if pa.ndim == 2:  # each pair's second channel on its own axis (HunYuan-VL)
            spans2 = a.axes(vals, pa[1], vals.shape[1] > 1)[1]
        pos, offs = None, np.zeros(vals.shape[1], dtype=np.int64)
    elif positions is not None:
        pos = kernel_ints(positions)
        if op == OP_ROPE and pos.shape[0] > 1:
            from ._kernels.scan import scan_rows  # compiled on the first per-row call

            cuts = parts(pos.shape[0], pos.nbytes)
            scans = in_parts(lambda _, b0, b1: scan_rows(pos, b0, b1), cuts)
            alike = all(r[0] for r in scans)
            counts = [r[1] for r in scans]
            bits = 0
            for r in scans:
                bits |= int(r[2])
            if check_range and not 0 <= bits < 1 << 54:  # some may be out of range
                check_position_range(int(pos.min()), int(pos.max()))
            # (B, S) positions that are the same in every row run as shared positions:
            # same values (each depends on its position only), one cos/sin per position
            if alike:
                pos = pos[:1]
        offs = np.zeros(pos.shape[0], dtype=np.int64)
    else:
        pos = None
        offs = kernel_ints(offsets)
    per_batch = offs.shape[0] > 1
    posr = a.positions(_EMPTY_POS if pos is None else pos, pos is not None, offs, per_batch)
    # per-row positions (offsets, or (B, S) arrays made of long runs such as packed
    # sequences) with few heads: walk the rope work along positions (n_q of them) so that
    # rows share each position's cos/sin
    runs, n_q = None, ns
    if (
        op == OP_ROPE
        and per_batch
        and nh < _ROWS_PER_ANGLE
        and ns > 1
        and view.itemsize > 2
        and axes is None
        and MODES["runs"]
    ):
        runs = position_runs(pos, offs, nb, ns, cuts, counts)
        if runs is not None:
            n_q = runs[2]
            per_batch = False
    nbytes = view.size * view.itemsize  # the array's
    threads = _threads(nbytes)
    # positions per work item: their cos/sin cache (2 * npairs values each) fits in
    # _CACHE_BYTES, and there are enough items to keep every thread busy
    # (16-bit arrays: a float32 cache)
    per_pos = 2 * npairs * (max(view.itemsize, 4) if op != OP_WRITE else 8)
    # one head of short rows back to back (short_run): one run of pairs per batch row
    # (interleaved pairs, or a single pair; half-split pairs row by row), items of more
    # positions
    short = (
        op == OP_ROPE
        and runs is None
        and axes is None
        and sd == 1
        and short_run(
            a,
            layout,
            nh,
            ss,
            npairs,
            view.itemsize,
            nbytes,
            nb > 1 and not per_batch,
        )
    )
    cache_bytes = _CACHE_BYTES
    if op == OP_ADD and view.itemsize == 2 and sd == 1 and not per_batch and nb > 1:
        cache_bytes = add16_item_bytes()
    chunk = max(1, min(_SHORT_MAX_CHUNK if short else _MAX_CHUNK, cache_bytes // per_pos))
    n_outer = nb if per_batch else 1
    if n_outer * ((n_q + chunk - 1) // chunk) < _ITEMS_PER_THREAD * threads:
        chunk = max(1, -(-n_q * n_outer // (_ITEMS_PER_THREAD * threads)))
        chunk = min(chunk, n_q)
    group = 1
    if not per_batch and MODES["group"]:
        group = max(1, min(nb, group_rows(op, nh, nh * 2 * npairs * view.itemsize)))
    n_items = n_outer * ((n_q + chunk - 1) // chunk)
    n_workers = 1 if threads == 1 else max(1, min(n_items, _ITEMS_PER_THREAD * threads))
    split = a.split(chunk, group, n_workers)
    args: tuple
    if axes is not None:
        if view.itemsize == 2:
            walk = prefetch16(nbytes)
        else:  # items of one stretch walked in two, as rope_kernel's (below)
            walk = (
                ON
                if blocks is None
                and spans2 is None
                and two_stretches(group, 2 * npairs * view.itemsize, nbytes)
                else None
            )
        kern, args = _axes_kernel(
            geo, axes, freqs, split, sin_sign * scale, scale, view.dtype, blocks, spans2, walk
        )
    elif (
        view.itemsize == 2
        and op == OP_WRITE
        and pos is None
        and sd == 1
        and npairs <= _LANES_MAX_PAIRS
        and MODES["lanes"]
        and MODES["recurrence"]
    ):
        # a 16-bit table of a few pairs a row at consecutive positions (the bits of
        # table16_kernel): rows back to back (interleaved; half layout of 2, 4 or 8 pairs)
        # in blocks of 16 and 256 positions, rows of the float32 pass, where it runs
        # (bfloat16, or float16 on CPUs that convert it); else groups of positions stepped
        # side by side, as float32 tables take them
        from ._kernels import half as h  # compiled on first use

        geo16 = (flat.view(np.uint16), *geo[1:])
        bf16 = ON if view.dtype != np.float16 else None
        split, n_workers = _lanes_split(ns, npairs, threads)
        half = ON if layout == a.HALF else None
        if (
            (half is None or npairs in (2, 4, 8))
            and ss == 2 * npairs
            and (bf16 is not None or h.HW_HALF)
            and MODES["blocks16"]
        ):
            args = (geo16, posr, freqs, split, bf16, half)
            _launch(h.table16_blocks_kernel, args, n_workers, threads)
            return
        args = (geo16, posr, freqs, split, bf16, half)
        _launch(h.table16_lanes_kernel, args, n_workers, threads)
        return
    elif (
        view.itemsize == 2
        and op == OP_ADD
        and pos is None
        and not per_batch
        and sd == 1
        and ss == 2 * npairs
        and npairs <= _LANES_MAX_PAIRS
        and MODES["lanes"]
        and MODES["recurrence"]
    ):
        # 16-bit add_sinusoidal of a few pairs a row, rows back to back at shared
        # consecutive positions: as float32 (add_lanes_kernel), the bits of add16_kernel
        from ._kernels.half import add16_lanes_kernel  # compiled on first use

        split, n_workers = _lanes_split(ns, npairs, threads)
        geo16 = (flat.view(np.uint16), *geo[1:])
        bf16 = ON if view.dtype != np.float16 else None
        args = (geo16, posr, freqs, split, bf16, a.loop(layout, False, False)[0])
        _launch(add16_lanes_kernel, args, n_workers, threads)
        return
    elif view.itemsize == 2:  # float16 or bfloat16: kernels of their own, on the raw bits
        kern, args = _half_kernel(
            op,
            geo,
            posr,
            freqs,
            split,
            sin_sign * scale,
            scale,
            view.dtype != np.float16,
            # 16-bit tables streamed on Zen 5 a row at a time (measured faster there, no
            # faster or slower on earlier hosts: see streamed), elsewhere with rows back to
            # back, each row's lines while the next row is computed (trailed16)
            streamed(view, flat, sd) if op == OP_WRITE and host_zen5() else None,
            trailed16(view, flat, sd, ss, npairs) if op == OP_WRITE else None,
            # (short rows take no prefetch: one specialization, as the float32 kernel's)
            prefetch16(nbytes) if op == OP_ROPE and not short else None,
            short,
            add16_block(nbytes) if op == OP_ADD else 0,
        )
    elif op == OP_ROPE:
        if sd != 1:  # the public layer refuses such views; never reached
            raise AssertionError("rope needs unit-stride channels")
        # one head's rows lie apart: channels left as they are (partial rotary), or other
        # bytes, between one position's rotated channels and the next's
        apart = bool(nh == 1 and ss > 2 * npairs)
        rot = a.rotation(
            float(sin_sign * scale),
            float(scale),
            # partial rotary over at least half of short rows (<= 2 KiB, e.g. one head):
            # read the rest too, which keeps the prefetcher streaming (long rows do it
            # alone), but on the CPUs where that was measured to cost (reads_rest)
            dfull
            if (
                MODES["touch_end"]
                and reads_rest()
                and 2 * npairs < dfull <= 4 * npairs
                and dfull * view.itemsize <= _SHORT_ROW_BYTES
            )
            else 0,
        )
        loop = a.loop(
            layout,
            short,
            # half layout, float64 rows of at most 1 KiB: three sequential passes per row
            MODES["two_pass"] and layout == a.HALF and view.itemsize == 8 and npairs <= 64,
            # half layout, rows of 1-4 KiB (from 512 bytes on Zen 5, and in large arrays on
            # the CPUs of prefetch_512 from 128-512 bytes: prefetch_rope_min_bytes), and
            # interleaved ones (prefetch_interleaved): the lines ahead of each row
            # prefetched first
            MODES["prefetch"]
            and (
                prefetch_rope_min_bytes(nbytes, nh, apart)
                <= 2 * npairs * view.itemsize
                <= _PREFETCH_ROW_BYTES[1]
                if layout == a.HALF
                else prefetch_interleaved(nh, 2 * npairs * view.itemsize, nbytes, apart)
            )
            and prefetch_fits(nbytes),
            # interleaved rows of 8 KiB and more: their two halves side by side (not on Zen 5)
            MODES["halves"] and not host_zen5() and 2 * npairs * view.itemsize >= _HALVES_MIN_BYTES,
            # work items of one stretch of memory, rows of up to 4 KiB: two stretches side
            # by side, each head prefetched (not on Zen 5)
            runs is None
            and rot[2] == 0
            and two_stretches(group, 2 * npairs * view.itemsize, nbytes),
        )
        if runs is None:
            item = chunk * nh * 2 * npairs * view.itemsize
            # (the short loop fills its cache a group at a time and takes no prefetch)
            short = loop[1] is not None
            ahead = None if short else fill_ahead(per_batch, item, nbytes)
            fused: int | None = None
            if not short and nh == 1 and (per_batch or nb == 1) and rot[2] == 0:
                fused = fused_rows(
                    flat,
                    off0,
                    sb if per_batch else 0,
                    ss,
                    npairs,
                    layout == a.HALF,
                    nbytes,
                )
            if fused is not None:  # (one specialization per layout: no other loop flag)
                ahead, loop = None, (loop[0], None, None, None, None, None)
            kern, args = k.rope_kernel, (geo, posr, freqs, rot, split, ahead, fused, *loop)
        else:
            kern = k.rope_runs_kernel
            args = (geo, runs, freqs, rot, split, loop[0], loop[2], loop[4], loop[5])
    elif op == OP_ADD:  # views (B, S, 1, D); float32 rows by the recurrence
        kern = k.add_kernel
        stepped = view.itemsize == 4 and MODES["recurrence"]
        if (
            stepped
            and pos is None
            and not per_batch
            and sd == 1
            and ss == 2 * npairs
            and npairs <= _LANES_MAX_PAIRS
            and MODES["lanes"]
        ):
            # a few pairs a row, rows back to back at shared consecutive positions: the
            # table rows of a work item stepped side by side, then added to each batch row
            # in one contiguous pass
            from ._kernels.tables import add_lanes_kernel  # compiled on first use

            split, n_workers = _lanes_split(ns, npairs, threads)
            args = (geo, posr, freqs, split, a.loop(layout, False, False)[0])
            _launch(add_lanes_kernel, args, n_workers, threads)
            return
        # the walk (see add_kernel), each choice a specialization of its own: float32 rows
        # whose table row serves one row of x (one batch row, or positions per batch row)
        # add straight from the recurrence; strided channels go through a cos/sin cache
        once = stepped and sd == 1 and (per_batch or nb == 1)
        if (
            once
            and flat.ctypes.data % flat.itemsize == 0
            and direct_rows(flat, off0, sb if per_batch else 0, npairs, layout == a.HALF)
            and direct_rows(flat, off0, ss, npairs, layout == a.HALF)
        ):
            # that walk a line at a time (loads, adds and stores of whole lines; the same
            # bits)
            from ._kernels.direct import add_direct_kernel  # compiled on first use

            # each line prefetches the line line_ahead_bytes on; on Zen 5 only in arrays
            # as large as the last-level cache (prefetch_fits: not measured there), at
            # every size on other CPUs (no half-cache bound: see prefetch_fits)
            dist = line_ahead_bytes(nbytes) if prefetch_fits(nbytes, 0.0) else None
            args = (geo, posr, freqs, split, a.loop(layout, False, False)[0], dist)
            _launch(add_direct_kernel, args, n_workers, threads)
            return
        args = (
            geo,
            posr,
            freqs,
            split,
            None if stepped else 1.0,
            a.loop(layout, False, False)[0],
            ON if once else None,
            ON if sd != 1 else None,
            # float32 rows of 1-4 KiB on that first walk, half layout (either on Zen 5):
            # the next row prefetched; on the laid-out walk (rows several batch rows
            # share, unit stride) each batch row's block after next (SUM_BLOCK_BYTES in
            # fastpe._kernels.tables); the strided walk reads it not (no specialization
            # compiled for nothing)
            ON
            if MODES["prefetch"]
            and prefetch_fits(nbytes, 0.0 if once else 0.5)
            and (
                (
                    once
                    and (layout == a.HALF or host_zen5())
                    and _PREFETCH_ROW_BYTES[0]
                    <= 2 * npairs * view.itemsize
                    <= _PREFETCH_ROW_BYTES[1]
                )
                or (not once and sd == 1 and not per_batch and nb > 1)
            )
            else None,
        )
    else:  # a table: view (1, S, 1, D); float32 rows by the recurrence (table_stepped)
        kern = k.table_kernel
        stepped = fixup and table_stepped(npairs)
        if stepped and pos is None and sd == 1 and npairs <= _LANES_MAX_PAIRS and MODES["lanes"]:
            # a few pairs a row at consecutive positions: groups of positions side by side
            from ._kernels.tables import table_lanes_kernel  # compiled on first use

            split, n_workers = _lanes_split(ns, npairs, threads)
            inter = a.loop(layout, False, False)[0]
            _launch(table_lanes_kernel, (geo, posr, freqs, split, inter), n_workers, threads)
            return
        stream = streamed(view, flat, sd, stepped)
        if (
            (stream is not None or plain_direct(view, flat, sd))
            and bool(fixup) == (view.itemsize == 4)  # (float32 tables are fixed up)
            and direct_rows(flat, off0, ss, npairs, layout == a.HALF)
        ):
            # rows computed straight into memory (or the cache) a line at a time (the same
            # bits)
            from ._kernels.direct import table_direct_kernel  # compiled on first use

            inter = a.loop(layout, False, False)[0]
            args = (
                geo, posr, freqs, split, inter, ON if stepped else None, ON if fixup else None,
                stream,
            )  # fmt: skip
            _launch(table_direct_kernel, args, n_workers, threads)
            return
        args = (
            geo,
            posr,
            freqs,
            split,
            bool(fixup),
            None if stepped else 1.0,
            a.loop(layout, False, False)[0],
            ON if sd != 1 else None,  # strided channels: a specialization of their own
            stream,
        )
    _launch(kern, args, n_workers, threads)


def _half_kernel(
    op: int,
    geo: tuple,
    posr: tuple,
    freqs: tuple,
    split: tuple,
    sin_mult: float,
    cos_mult: float,
    bf16: bool,
    streamed16: Flag,
    trail16: Flag,
    prefetch: Flag,
    short: bool,
    block16: int,
) -> tuple:
    """The kernel and arguments of a 16-bit call (imported, hence compiled, on first use);
    ``streamed16``: :func:`streamed` for the call's view, ``trail16``: :func:`trailed16`
    (tables only); ``prefetch``:
    :func:`prefetch16` for the call's view, ``short``: :func:`short_run` (RoPE only),
    ``block16``: :func:`add16_block` for the call's view (sums only)."""
    from ._kernels import args as a
    from ._kernels import half

    flat = geo[0].view(np.uint16)  # numba has no bfloat16: the kernels convert the bits
    geo = (flat, *geo[1:])
    if op == OP_ROPE:
        rot = a.rotation(float(sin_mult), float(cos_mult), 0)
        args = (
            geo,
            posr,
            freqs,
            rot,
            split,
            ON if bf16 else None,
            a.loop(geo[10], False, False)[0],  # interleaved: None or ON
            ON if short else None,
            prefetch,
        )
        return half.rope16_kernel, args
    # the arguments the sums and the tables share; interleaved: None or ON
    shared = (geo, posr, freqs, split, ON if bf16 else None, a.loop(geo[10], False, False)[0])
    if op == OP_ADD:
        # (block and ahead in elements)
        return half.add16_kernel, (*shared, block16, add16_ahead_bytes() // 2)
    return half.table16_kernel, (*shared, streamed16, trail16)


def _axes_kernel(
    geo: tuple,
    axes: tuple,
    freqs: tuple,
    split: tuple,
    sin_mult: float,
    cos_mult: float,
    dtype,
    blocks: int | None,
    spans2: np.ndarray | None,
    prefetch: Flag,
) -> tuple:
    """The multi-axis kernel and its arguments (imported, hence compiled, on first use).

    ``blocks``: None, or the block count of a ``"half:k"`` layout (``geo``'s layout HALF).
    ``spans2``: None, or the spans of the axes of each pair's second channel.
    ``prefetch``: :func:`prefetch16` for 16-bit views; for others ``ON`` where the
    work items' positions are walked in two stretches (:func:`two_stretches`), else None.
    """
    from ._kernels import args as a
    from ._kernels.axes import rope_axes_kernel

    rot = a.rotation(float(sin_mult), float(cos_mult), 0)
    half16 = bf16 = None  # None or ON: constants of each specialization
    like = geo[0][:0]  # the cos/sin cache's dtype
    if dtype.itemsize == 2:  # the 16-bit kernels' raw bits (numba has no bfloat16)
        geo = (geo[0].view(np.uint16), *geo[1:])
        half16 = ON
        bf16 = ON if dtype != np.float16 else None
        like = np.empty(0, dtype=np.float32)
    interleaved = a.loop(geo[10], False, False)[0]
    return rope_axes_kernel, (
        geo,
        axes,
        freqs,
        rot,
        split,
        half16,
        bf16,
        like,
        interleaved,
        blocks,
        spans2,
        prefetch,
    )


def stream(kind: str, a: np.ndarray, rotated: int | None = None) -> None:
    """Run a bandwidth yardstick over contiguous ``a``, split and threaded as :func:`run`.

    ``kind`` "scale": ``a *= 1`` (read + write; with ``rotated``, only the first ``rotated``
    channels of each row of the last axis); "fill": ``a[:] = 0.5`` (write only; 0.5 in the
    float type of the element's width); "fill_stream": the same by streaming stores (see
    ``_kernels.stream``).

    The bytes are streamed as unsigned integers of the element's width (the values and
    bytes are unchanged: times 1, or the bits of 0.5): on some hosts a floating-point
    ``a *= 1`` runs well below the memory's speed (seen: 73 ms per GiB in float32 or
    float64 against 44 ms as integers of the same bytes), which would make the yardstick
    judge the core, not the memory.
    """
    if kind not in ("scale", "fill", "fill_stream"):
        raise ValueError(f"unknown yardstick {kind!r}: 'scale', 'fill' or 'fill_stream'")
    k = _kernels()
    flat = a.reshape(-1)
    ints = flat.view(f"u{flat.itemsize}")
    threads = _threads(a.nbytes)
    n_workers = 1 if threads == 1 else _ITEMS_PER_THREAD * threads
    one = ints.dtype.type(1)
    args: tuple
    if kind in ("fill", "fill_stream"):
        # 0.5's bits in the float type of the element's width (16-bit rows come as raw
        # unsigned bits, where 0.5 would become 0, and the AMD host writes zeros by
        # streaming stores faster than other values)
        fdt = {2: np.float16, 4: np.float32, 8: np.float64}[flat.itemsize]
        half = np.array(0.5, dtype=fdt).view(ints.dtype)[()]
        if kind == "fill":
            kern, args = k.fill, (ints, half, n_workers)
        else:
            from ._kernels.yardstick import fill_stream  # compiled on first use

            kern, args = fill_stream, (ints, half, n_workers)
    elif rotated is None or rotated == a.shape[-1]:
        kern, args = k.scale_inplace, (ints, one, n_workers)
    else:
        kern, args = k.scale_columns, (ints, a.shape[-1], rotated, one, n_workers)
    _launch(kern, args, n_workers, threads)


# --------------------------------------------------------------------------- decoding steps

STEP_BYTES = 1 << 16  # calls up to this size take the decoding-step kernel when they can
_STEP_BITS = 4  # fastpe._kernels.angles.BITS (not imported here: that would import numba)
_STEP_GROUPS = 4  # groups of cos/sin rows kept per setup
_STEP_LOCK = threading.Lock()
_STEP_KERNELS: list = []


def _step_kernels():
    if not _STEP_KERNELS:
        from ._kernels.angles import BITS
        from ._kernels.step import rope_step_kernel, step_angles

        if BITS != _STEP_BITS:
            raise AssertionError("fastpe._engine._STEP_BITS must equal angles.BITS")
        _STEP_KERNELS[:] = [rope_step_kernel, step_angles]
    return _STEP_KERNELS


def step_setup(
    freq_key,
    wh,
    wl,
    npairs: int,
    layout: int,
    row_len: int,
    sin_mult,
    cos_mult,
    dtype,
    a_rows: int,
    b_rows: int,
) -> tuple:
    """What :func:`run_step` needs of a call besides its arrays and position, built once.

    ``(rows, step, freqs, dtype, sin_mult, cos_mult, entry)``: ``rows`` a dict from a group of
    ``RADIX`` positions (``p >> BITS``) to its cos/sin rows (:func:`~fastpe._kernels.step.
    step_angles`), at most ``_STEP_GROUPS`` of them, the oldest dropped first (a decoding
    loop meets each group on ``RADIX`` consecutive steps, and makes its rows once); ``step``
    the integers of :func:`~fastpe._kernels.step.rope_step_kernel` but the row of the group
    (``npairs, layout, row_len, a_rows, b_rows``: the rows rotated of the first array and of
    the second, 0 when there is none), then the length of a cos/sin row (``npairs``, or
    twice that: :func:`~fastpe._kernels.step.row_width`), in an array
    (the dispatcher unboxes an array faster than a tuple of ints, and so does the entry
    point's wrapper); ``freqs`` the record of
    :func:`~fastpe._kernels.step.step_angles`; ``entry`` a list that :func:`run_step` fills
    on its first call of aligned arrays with the step kernel's compiled entry point for
    these types (:func:`_entry_point`), or with the dispatcher itself where none is found.
    """
    from ._kernels.step import row_width

    k = _kernels()
    tc, ts = tables(freq_key, wh, wl)
    return (
        {},
        np.array(
            [npairs, layout, row_len, a_rows, b_rows, row_width(npairs, layout)],
            dtype=np.int64,
        ),
        k.args.freqs(wh, wl, tc, ts),
        np.dtype(dtype),
        float(sin_mult),
        float(cos_mult),
        [],  # the kernel's compiled entry point for these types, once known (run_step)
    )


def _entry_point(dispatcher, args: tuple):
    """The compiled function that ``dispatcher`` calls for ``args``, else ``dispatcher``.

    numba's dispatcher finds it anew on every call, typing each argument (some 0.7 us of a
    3-5 us decoding step on the znver3 host, 0.5-0.9 us of a one-timestep call); a plan
    fixes the types of its calls' arguments but for their arrays' alignment, which the
    caller checks (and, for a convention's plan, a flag: :func:`call_entry`'s key). Where
    this numba keeps it elsewhere, the dispatcher itself: called as before, and not looked
    for again.
    """
    try:
        sig = tuple(dispatcher.typeof_pyval(v) for v in args)
        entry = dispatcher.overloads[sig].entry_point
    except (AttributeError, KeyError, TypeError):
        return dispatcher
    return entry if callable(entry) else dispatcher


def call_entry(entries: dict, key, aligned: bool, kernel, args: tuple):
    """``kernel(*args)``, through the compiled entry point kept in ``entries`` under ``key``.

    For a planned call's kernel (``fastpe.conventions``): the caller's ``key`` names what of
    the arguments' types its plan does not fix (a flag None or not), so that the arguments
    of one key are always of one type, but for the alignment of their arrays (``aligned``:
    every array argument aligned; an unaligned one goes through the dispatcher, which types
    it apart). The first call of a key goes through numba's dispatcher and finds the entry
    point, or the dispatcher itself where there is none (:func:`_entry_point`).
    """
    if aligned:
        entry = entries.get(key)
        if entry is not None:
            return entry(*args)
    result = kernel(*args)
    if aligned and key not in entries:
        entries[key] = _entry_point(kernel, args)
    return result


def run_step(setup: tuple, a: np.ndarray, b: np.ndarray, p: int, aligned: bool) -> bool:
    """Rotate the rows of flat ``a`` and of flat ``b`` that ``setup`` counts to position ``p``.

    ``setup`` from :func:`step_setup`; ``a`` and ``b`` contiguous, writeable 1-D arrays of
    its dtype, checked by the caller (``b`` may be ``a`` when the setup counts no rows of a
    second array; calls of one setup pass ``b is a`` alike: the plans of one array and of
    two have keys of their own); ``aligned``: whether both are aligned (``flags.aligned``),
    which the caller reads from the flags it checks (one ``flags`` object per array: each
    costs 0.1 us of a 3-4 us step). True when done; False, with nothing written, when the
    setup counts rows of ``b`` and ``a`` and ``b`` share memory (the caller then takes the
    full path, which refuses the call). One thread: the work is a few kilobytes. The rows
    of a group are made before they are stored and only read after: looked up without the
    lock (a dict lookup is atomic), stored under it.
    """
    rows, step, freqs, dtype, sin_mult, cos_mult, entry = setup
    group = p >> _STEP_BITS
    cs = rows.get(group)
    if cs is None:
        cs = np.empty((2, 1 << _STEP_BITS, step[5]), dtype)  # sin rows, cos rows
        _step_kernels()[1](group << _STEP_BITS, freqs, sin_mult, cos_mult, cs[0], cs[1])
        with _STEP_LOCK:
            rows[group] = cs
            while len(rows) > _STEP_GROUPS:
                del rows[next(iter(rows))]
    k = p - (group << _STEP_BITS)
    # aligned: the types of the compiled entry point (an unaligned view of the same dtype,
    # shape and strides has a plan's key too, and is typed apart by the dispatcher)
    if entry and aligned:
        return entry[0](a, b, cs, step, k)
    kernel = _step_kernels()[0]
    done = kernel(a, b, cs, step, k)
    if aligned and not entry:
        entry.append(_entry_point(kernel, (a, b, cs, step, k)))
    return done
