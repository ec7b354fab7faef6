"""The vector width LLVM picks for a kernel's loops.

On CPUs with AVX-512 whose LLVM tuning prefers 256-bit vectors (Intel's server and client
cores since Skylake-SP, the development machine's ``rocketlake`` among them), LLVM
vectorises loops with 256-bit vectors even though 512-bit ones are there. A loop that
computes much per element (the 16-bit grid sum's rounding test) gets through half the
vectors with 512 bits. :func:`wide_vectors` asks for them in the function it is called
from. Elsewhere (no AVX-512, or a CPU that prefers 512 bits already) it changes nothing:
the attribute is a preference, capped by what the CPU has. It changes no value: the same
operations run on more lanes at a time.
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic


@intrinsic
def wide_vectors(typingctx):
    """Give the function being compiled LLVM's ``"prefer-vector-width"="512"`` attribute.

    Call it once in a kernel (a function inlined at numba's IR level, ``inline=True``,
    puts it on its caller). Numba's own wrappers do not carry it."""

    def codegen(context, builder, signature, args):
        _prefer_512(builder)
        return context.get_dummy_value()

    return types.void(), codegen


def _prefer_512(builder) -> None:
    """Put the attribute on the function ``builder`` writes. (set.add: llvmlite's add()
    accepts only the attributes it knows by name; a string attribute is written into the
    IR as it is.)"""
    set.add(builder.function.attributes, '"prefer-vector-width"="512"')


@intrinsic
def wide_vectors_float32(typingctx, a):
    """:func:`wide_vectors` where the array ``a`` holds float32 values; nothing for any
    other dtype (decided as the kernel is compiled, for each specialization)."""
    if not isinstance(a, types.Array):
        return None
    wide = a.dtype == types.float32

    def codegen(context, builder, signature, args):
        if wide:
            _prefer_512(builder)
        return context.get_dummy_value()

    return types.void(a), codegen
