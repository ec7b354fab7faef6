"""Dispatch from validated arrays to the kernels: flat views, tables, work split."""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict

import numpy as np
from numpy.lib.stride_tricks import as_strided

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
        return a.reshape(-1), 0, tuple(st // item for st in a.strides)
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


def tables(key, wh: np.ndarray, wl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angle-addition tables for the frequencies ``wh + wl`` (cached under ``key``)."""
    with _TABLE_LOCK:
        hit = _TABLE_CACHE.get(key)
        if hit is not None:
            _TABLE_CACHE.move_to_end(key)
            return hit
    k = _kernels()
    n = wh.shape[0]
    tc = np.empty((k.LEVELS * k.RADIX, n))
    ts = np.empty((k.LEVELS * k.RADIX, n))
    build = k.build_tables if _parallel_ok() else k.build_tables_serial
    build(np.ascontiguousarray(wh), np.ascontiguousarray(wl), tc, ts)
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


# Fork safety. Numba's default threading layer here is GNU OpenMP, whose thread pool does
# not survive fork(): a forked child that launches a parallel region is terminated ("fork()
# called from a process already using GNU OpenMP"). When a process is forked while numba's
# pool is running on the OpenMP layer (started by fastpe or anyone else), the child runs
# every fastpe kernel's serial twin on the calling thread: same results, one core.
# Processes started with "spawn" or "forkserver", children forked before the pool started,
# and the TBB layer stay parallel.
_FORKED_FROM_OMP_POOL = False


def _after_fork_in_child() -> None:
    global _FORKED_FROM_OMP_POOL
    par = sys.modules.get("numba.np.ufunc.parallel")
    if par is None or not getattr(par, "_is_initialized", False):
        return
    try:
        layer = par.threading_layer()
    except Exception:  # pragma: no cover - layer unknown: be safe
        layer = "omp"
    if layer == "omp":
        _FORKED_FROM_OMP_POOL = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _parallel_ok() -> bool:
    return not _FORKED_FROM_OMP_POOL


def in_forked_child() -> bool:
    """True when kernels run serially because this process was forked from a pool."""
    return _FORKED_FROM_OMP_POOL


_EMPTY_POS = np.zeros((1, 1), dtype=np.int64)
_SERIAL_BYTES = 256 * 1024  # below this, thread start-up costs more than it saves


def run(view: np.ndarray, *, op: int, npairs: int, layout: int, positions, offsets,
        freq_key, wh, wl, sin_sign: float = 1.0, scale: float = 1.0, fixup: bool = False):
    """Run ``op`` over the 4-D ``(B, S, H, D)`` view in place.

    ``positions`` is an int64 ``(Bp, S)`` array or None; ``offsets`` an int64 ``(Bp,)``
    array used when ``positions`` is None. ``Bp`` is 1 (shared) or B (per batch row).
    """
    if view.size == 0 or npairs == 0:
        return
    k = _kernels()
    nb, ns, nh, _ = view.shape
    flat, off0, (sb, ss, sh, sd) = flat_view(view)
    tc, ts = tables(freq_key, wh, wl)
    if positions is not None:
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        has_pos = True
        per_batch = pos.shape[0] > 1
        offs = np.zeros(pos.shape[0], dtype=np.int64)
    else:
        pos = _EMPTY_POS
        has_pos = False
        offs = np.ascontiguousarray(offsets, dtype=np.int64)
        per_batch = offs.shape[0] > 1
    threads = num_threads()
    # positions per work item: their cos/sin cache (2 * npairs values each) fits in about
    # 192 KiB, and there are enough items to keep every thread busy
    per_pos = 2 * npairs * (view.itemsize if op != k.OP_WRITE else 8)
    chunk = max(1, min(256, (192 * 1024) // per_pos))
    n_outer = nb if per_batch else 1
    if n_outer * ((ns + chunk - 1) // chunk) < 4 * threads:
        chunk = max(1, -(-ns * n_outer // (4 * threads)))
        chunk = min(chunk, ns)
    # partial rotary over at least half of short rows (<= 2 KiB, e.g. one head): read the
    # rest too (see the kernel); long rows keep the prefetcher streaming on their own
    dfull = view.shape[3]
    touch = op == k.OP_ROPE and 2 * npairs < dfull <= 4 * npairs and dfull * view.itemsize <= 2048
    touch_end = dfull if touch else 0
    n_items = n_outer * ((ns + chunk - 1) // chunk)
    n_workers = max(1, min(n_items, 4 * threads))
    # small calls (a decoding step) run on the calling thread: no thread-pool launch
    small = view.size * view.itemsize <= _SERIAL_BYTES
    kern = k.position_kernel if (_parallel_ok() and not small) else k.position_kernel_serial
    kern(flat, off0, sb, ss, sh, sd, nb, ns, nh, npairs, op, layout,
         pos, has_pos, offs, per_batch, wh, wl, tc, ts,
         float(sin_sign), float(scale), bool(fixup), chunk, touch_end, n_workers)
