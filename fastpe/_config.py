"""Numba options for every fastpe kernel, in one place.

No kernel module sets its own flags: each one decorates its functions with :func:`kernel`,
which applies the options below. This module imports nothing heavy; numba itself is
imported only when the first kernel module is imported (that is, on the first call that
needs a kernel), so ``import fastpe`` stays cheap.

Options
-------
fastmath
    Off, contraction included. Fast-math lets LLVM reassociate and contract floating-point
    expressions, which breaks the compensated (double-double) arithmetic that makes the
    angles exact and changes results between builds. Contraction alone (fusing ``a * b +
    c`` into one multiply-add) changes them between compiles of the same code: which
    product LLVM fuses follows the code around it, and a kernel compiled in one process
    gave other bits than the same kernel loaded from the cache in the next. Where a kernel
    wants a fused multiply-add it writes it out (``fastpe._kernels.turn``,
    ``fastpe._kernels.fractional._fma``).
cache
    On. Compiled kernels are written to numba's on-disk cache (next to the package, or in
    ``NUMBA_CACHE_DIR`` when that is set or the package directory is read-only), so a fresh
    process loads them instead of compiling again. Where numba finds no writable cache
    directory at all, kernels run uncached (compiled in every process) after one warning.
error_model
    ``"numpy"``: no Python-style division checks in hot loops (kernels never divide by a
    user-supplied zero; the public layer validates everything first).
nogil
    On: kernels release the GIL. fastpe's kernels are not compiled with
    ``parallel=True``; ``fastpe._engine`` runs disjoint ranges of work on a pool of Python
    threads, as many as ``numba.get_num_threads()`` (``NUMBA_NUM_THREADS`` or
    ``numba.set_num_threads``). That keeps numba's OpenMP layer, whose thread pool does not
    survive ``fork()``, out of fastpe. The bandwidth yardsticks of the benchmarks
    (``fastpe._kernels.yardstick``) run the same way.
"""

from __future__ import annotations

FASTMATH = False
CACHE = True
ERROR_MODEL = "numpy"
BOUNDSCHECK = False


def kernel(*, parallel: bool = False, inline: bool = False):
    """Return numba's ``njit`` decorator with fastpe's options.

    Parameters
    ----------
    parallel : bool
        Compile with ``parallel=True`` (``prange`` loops run on numba's thread pool). No
        fastpe kernel uses it (see the module docstring).
    inline : bool
        Inline the function into its callers at numba's IR level. A call between compiled
        functions increments and decrements the reference count of every array argument
        atomically; for helpers called once per row that costs more than their work.
    """
    import numba

    options = dict(
        parallel=parallel,
        fastmath=FASTMATH,
        error_model=ERROR_MODEL,
        boundscheck=BOUNDSCHECK,
        nogil=True,
        **({"inline": "always"} if inline else {}),
    )

    def decorate(func):
        return _njit_cached_if_possible(numba, func, options)

    return decorate


_uncached = False  # set once numba has found no writable cache directory


def _njit_cached_if_possible(numba, func, options):
    """``numba.njit(cache=CACHE)``, or uncached with one warning when nothing is writable.

    numba raises "cannot cache function ...: no locator available" at decoration time when
    neither ``NUMBA_CACHE_DIR``, the package's ``__pycache__`` nor the user cache directory
    is writable (a read-only install); the kernels then work, only slower to start.
    """
    global _uncached
    if CACHE and not _uncached:
        try:
            return numba.njit(cache=True, **options)(func)
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
            _uncached = True
            import warnings

            warnings.warn(
                "fastpe: numba found no writable cache directory (NUMBA_CACHE_DIR, the "
                "package's __pycache__, the user cache directory), so fastpe's kernels are "
                "compiled again in every process (seconds on first use). To cache them, set "
                "the environment variable NUMBA_CACHE_DIR to a writable directory.",
                RuntimeWarning,
                stacklevel=4,
            )
    return numba.njit(cache=False, **options)(func)
