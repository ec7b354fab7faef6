"""``ON``: the value of the kernels' specialization flags (None or ``ON``). Private.

Pure Python, so that the engine can name it without importing numba; the kernels register
its numba type (:mod:`fastpe._kernels.flag`, which says why a flag is ``ON`` and not
True).
"""

from __future__ import annotations


class _On:
    """The type of :data:`ON`: one instance, which pickles to itself."""

    _instance: _On | None = None

    def __new__(cls) -> _On:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ON"

    def __reduce__(self):
        return (_On, ())


ON = _On()
Flag = _On | None  # a specialization flag's annotation
