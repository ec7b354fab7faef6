"""Numba kernels. Private: every argument was validated and normalised by the public layer.

Three drivers share the expensive part, the cos/sin of every (position, frequency) pair
(:mod:`.angles`):

* :func:`~.tables.table_kernel` writes the sinusoidal table (``sinusoidal_table``;
  :func:`~.tables.table_lanes_kernel` for float32 tables of dim <= 14,
  :func:`~.direct.table_direct_kernel` for float32 and float64 tables from a few MiB,
  computed a line at a time straight into memory by streaming stores, or into the cache
  by plain ones below the streaming bound, not on ``znver3``),
* :func:`~.tables.add_kernel` adds it to embeddings (``add_sinusoidal``;
  :func:`~.tables.add_lanes_kernel` for float32 rows of dim <= 16 back to back),
* :func:`~.rope.rope_kernel` and :func:`~.rope.rope_runs_kernel` rotate channel pairs in
  place (``apply_rope``).

:mod:`.scan` reads ``(batch, seq)`` position arrays once to choose how ``apply_rope`` walks
them. :mod:`.fractional` computes rows at fractional positions (diffusion timesteps) directly
and writes grid tables from one small table per axis (:mod:`.fractional16`: 16-bit twins).
:mod:`.yardstick` holds the bandwidth kernels they are measured against. Each kernel
compiles on its own first use, so the first call of one operation does not pay for the
others. Arguments travel in the records built by :mod:`.args`. float16 and bfloat16 arrays
have kernels of their own (:mod:`.half`), imported by the engine on the first 16-bit call.

The array is seen as ``(B, S, H, D)`` through a flat, contiguous 1-D view of the memory it
spans plus element strides, so slices, transposes and the q/k part of a fused buffer are
worked on in place with no copy.
"""

from . import args
from .angles import LEVELS, RADIX, sincos_exact
from .rope import rope_kernel, rope_runs_kernel
from .tables import FIXUP_THRESHOLD, add_kernel, table_kernel
from .yardstick import fill, scale_columns, scale_inplace

__all__ = [
    "FIXUP_THRESHOLD",
    "LEVELS",
    "RADIX",
    "add_kernel",
    "args",
    "fill",
    "rope_kernel",
    "rope_runs_kernel",
    "scale_columns",
    "scale_inplace",
    "sincos_exact",
    "table_kernel",
]
