"""fastpe: fast, exact positional encodings for transformers on the CPU.

Sinusoidal tables and rotary position embeddings (RoPE) for NumPy arrays, computed in place
by serial Numba kernels run on a small pool of threads, checked element for element against
the pure-NumPy :mod:`fastpe.reference`. ``import fastpe`` compiles nothing and does not
import numba; kernels are compiled (or loaded from numba's on-disk cache) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._warmup import warmup
from .conventions import (
    add_grid_sinusoidal,
    add_sinusoidal_embedding,
    add_timestep_embedding,
    grid_sinusoidal,
    sinusoidal_embedding,
    timestep_embedding,
)
from .hf_config import head_dim_from_config, rope_kwargs_from_config
from .layout import half_to_interleaved, interleaved_to_half
from .rotary import apply_rope, apply_rope_qk, patch_positions
from .scaling import rope_frequencies
from .sinusoidal import add_sinusoidal, sinusoidal_table

__all__ = [
    "add_grid_sinusoidal",
    "add_sinusoidal",
    "add_sinusoidal_embedding",
    "add_timestep_embedding",
    "apply_rope",
    "apply_rope_qk",
    "grid_sinusoidal",
    "half_to_interleaved",
    "head_dim_from_config",
    "interleaved_to_half",
    "patch_positions",
    "rope_frequencies",
    "rope_kwargs_from_config",
    "sinusoidal_embedding",
    "sinusoidal_table",
    "timestep_embedding",
    "warmup",
]
__version__ = "0.1.0"

#: Submodules loaded on first attribute access, so that ``import fastpe`` then
#: ``fastpe.reference.apply_rope(...)`` works without importing them (or dask) up front.
_LAZY_SUBMODULES = frozenset({"reference", "files", "dask", "cli"})

if TYPE_CHECKING:  # type checkers see the submodules as the attributes they are
    from . import cli, dask, files, reference  # noqa: F401
else:

    def __getattr__(name: str):
        if name in _LAZY_SUBMODULES:
            import importlib

            try:
                return importlib.import_module(f"{__name__}.{name}")
            except ImportError as exc:  # fastpe.dask without dask: hasattr() says False
                raise AttributeError(f"fastpe.{name} is not available: {exc}") from exc
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES})
