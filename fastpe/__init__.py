"""fastpe: fast, exact positional encodings for transformers on the CPU.

Sinusoidal tables and rotary position embeddings (RoPE) for NumPy arrays, computed by
parallel Numba kernels in place, checked element for element against the pure-NumPy
:mod:`fastpe.reference`. ``import fastpe`` compiles nothing and does not import numba;
kernels are compiled (or loaded from numba's on-disk cache) on first use.
"""

from __future__ import annotations

from .rotary import apply_rope
from .sinusoidal import add_sinusoidal, sinusoidal_table

__all__ = ["add_sinusoidal", "apply_rope", "sinusoidal_table"]
__version__ = "0.1.0"
