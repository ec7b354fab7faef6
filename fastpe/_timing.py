"""The timing harness of ``fastpe compare``, ``bench/roofline.py`` and ``bench/test_bench.py``.

Every series of timed calls starts after the same pause (:data:`SETTLE_S`), its calls then
run back to back, and every kernel is judged
against a bandwidth yardstick over the same bytes (:func:`yardstick`) that runs on fastpe's
own thread pool with fastpe's work split (``fastpe._engine.stream``): kernel and yardstick
are measured the same way, and no other thread pool is left spinning between them.
"""

from __future__ import annotations

import functools
import glob
import time
from collections.abc import Callable

import numpy as np

# Pause before each series of timed calls, so that it starts from the same state: whatever
# ran before (compiling, allocating and filling the input) finished and its threads parked.
# Not between the calls of a series: a small call that follows a pause runs from cold
# caches and a parked core, several times slower than the same call run back to back.
SETTLE_S = 0.05

# Last-level cache assumed where the OS does not report one.
_DEFAULT_LLC_BYTES = 32 << 20
# The most of the last-level cache an array counts on keeping (cache_share_bytes).
_CACHE_SHARE_MAX_BYTES = 128 << 20


def settle() -> None:
    """The pause before a series of timed calls."""
    time.sleep(SETTLE_S)


def timed(f: Callable[[], object]) -> float:
    """Seconds taken by one call of ``f()``."""
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def median_time(
    f: Callable[[], object], *, min_runs: int, budget_s: float, max_runs: int = 25
) -> float:
    """Median of :func:`timed` over at least ``min_runs`` runs (more while under budget),
    after :func:`settle`."""
    settle()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or (
        time.perf_counter() - start < budget_s and len(times) < max_runs
    ):
        times.append(timed(f))
    return float(np.median(times))


def interleaved(
    fast: Callable[[], object], yard: Callable[[], object], repeat: int
) -> tuple[float, float, float]:
    """Time ``fast`` and ``yard`` alternately, ``repeat`` pairs, after one untimed call each
    and :func:`settle`.

    Returns ``(ratio, t_fast, t_yard)``: the median of the per-pair ratios
    ``t_yard / t_fast`` and the median times. Pairs taken close together see the same
    machine, so their ratio holds where absolute times on a shared machine do not.
    """
    fast()
    yard()
    settle()
    ratios, tf, ty = [], [], []
    for _ in range(repeat):
        a = timed(fast)
        b = timed(yard)
        ratios.append(b / a)
        tf.append(a)
        ty.append(b)
    return float(np.median(ratios)), float(np.median(tf)), float(np.median(ty))


def yardstick(
    a: np.ndarray, *, writes_only: bool = False, rotated: int | None = None
) -> tuple[str, Callable[[], object]]:
    """The bandwidth yardstick of a kernel working on contiguous ``a``: ``(name, call)``.

    For tables (``writes_only``), the fastest way this machine writes ``a``'s bytes:
    ``"fill"`` (``a[:] = v``, plain stores) where ``a`` may stay in the last-level cache
    (:func:`cache_resident`), else ``"fill_stream"``, the same by streaming stores, which
    write memory without first reading each line (faster than ``"fill"`` there: ``python
    bench/roofline.py`` shows both). ``"scale"`` (``a *= s``, read + write) for in-place work;
    ``"scale[:r]"`` for partial rotary of ``rotated`` channels out of the last axis: only
    the channels the kernel rewrites.
    """
    from . import _engine

    if writes_only:
        kind = "fill" if cache_resident(a.nbytes) else "fill_stream"
        return kind, functools.partial(_engine.stream, kind, a)
    if rotated is not None and rotated < a.shape[-1]:
        return f"scale[:{rotated}]", functools.partial(_engine.stream, "scale", a, rotated)
    return "scale", functools.partial(_engine.stream, "scale", a)


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache the OS reports (Linux sysfs), else 32 MiB."""
    best = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or _DEFAULT_LLC_BYTES


def cache_share_bytes() -> int:
    """The last-level cache an array may count on: what the OS reports
    (:func:`last_level_cache_bytes`), at most 128 MiB.

    A virtual machine of a few cores reports the L3 of the whole socket, which it shares
    with its neighbours: 300 MiB on the `emeraldrapids` host (2 cores), 480 MiB on the
    `rocketlake` one, 260 MiB on the first development host. On the `emeraldrapids` host a
    table written again into the same array by plain stores stays in cache for an ``a *=
    s`` over it right after up to about 128 MiB, not beyond: ``python
    bench/stream_sizes.py`` (tables written both ways, each way in blocks of calls, before
    commit d4907c9's plain direct pass), t_plain / t_streamed with that read after, medians
    over 3 runs in two invocations: 1.05-2.11 at 256 and 512 MiB for every dtype;
    0.82-1.70 at 128 MiB; 0.59-1.26 at 8-64 MiB (README, "Tables streamed from 256 MiB").
    Alone, streaming float32 and float64 tables is faster at every size there (1.05-3.77x),
    16-bit ones 0.97-1.36x; but a table that fits is kept in cache for its reader. Hosts
    that report at most 128 MiB (the AMD host's 32 MiB) keep their bound; on the
    `rocketlake` and first hosts it moves from 960 and 520 MiB to 256 MiB, unmeasured there.
    """
    return min(last_level_cache_bytes(), _CACHE_SHARE_MAX_BYTES)


def cache_resident(nbytes: int) -> bool:
    """Whether an array of ``nbytes`` may stay in the last-level cache between calls:
    smaller than twice :func:`cache_share_bytes`.

    Such a case has no memory-bandwidth figure: kernel and yardstick then run at cache
    speed, and their ratio says nothing about the memory roofline.
    """
    return nbytes < 2 * cache_share_bytes()
