"""The rotation of one pair, its roundings written out.

Every RoPE loop turns a pair ``(x1, x2)`` by cos/sin ``(c, s)`` into

    ``x1' = fma(x1, c, -(x2 s))``, ``x2' = fma(x2, c, x1 s)``

where the CPU has fused multiply-add (:data:`TARGET_FMA`), and into
``x1 c - x2 s``, ``x2 c + x1 s`` with each product rounded where it has not. Written as
``x1 * c - x2 * s`` in a function compiled with contraction, LLVM picks which product to
fuse, and the pick followed the code around it: a bfloat16 half-layout row compiled in one
process computed the second value as ``fma(x2, c, x1 s)``, the same kernel loaded from
numba's cache in the next process as ``fma(x1, s, x2 c)``: 1-3 values of a call's 173,376
one or more units apart (tests/test_coldstart.py). These intrinsics emit the one form, so
the bits of every loop and of every compile are the same; :func:`~.direct.rope_pass` writes
the same form.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _target_fma() -> bool:
    """Whether numba's code runs on a CPU with fused multiply-add (x86 FMA3, every
    aarch64): there the rotation takes :data:`FMA`'s form, in one instruction (elsewhere
    ``llvm.fma`` would call a slow library function: each product is rounded instead)."""
    import platform

    from llvmlite import binding
    from numba.core import config

    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    try:
        features = config.CPU_FEATURES
        if features is None:
            features = binding.get_host_cpu_features().flatten()
        return "+fma" in features.split(",")
    except Exception:  # no feature list: each product rounded
        return False


TARGET_FMA = _target_fma()


def multiply_add(builder: ir.IRBuilder, a, b, c):
    """The IR of ``a * b + c`` (float scalars or vectors of one type): one fused
    multiply-add (``llvm.fma``) where :data:`TARGET_FMA`, else the product rounded, then the
    sum (``llvm.fma`` would call libm's ``fma`` for each value there). No fast-math flags,
    so nothing contracts or splits it otherwise. The rotation, the float-position
    polynomials (``fractional._fma``) and the 16-bit tables' float32 pass
    (``rows16.row_pass``) take their multiply-adds from here."""
    if not TARGET_FMA:
        return builder.fadd(builder.fmul(a, b), c)
    t = a.type
    kind = f"v{t.count}{t.element.intrinsic_name}" if isinstance(t, ir.VectorType) else None
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(t, [t] * 3), f"llvm.fma.{kind or t.intrinsic_name}"
    )
    return builder.call(fn, [a, b, c])


def _turn(second: bool):
    """The intrinsic ``turn(a, b, c, s)``: ``fma(a, c, -(b s))`` (first value of a pair,
    ``a = x1``, ``b = x2``) or ``fma(a, c, b s)`` (``second``: ``a = x2``, ``b = x1``),
    for four float32 or four float64 scalars; without :data:`TARGET_FMA`, ``a c - b s`` or
    ``a c + b s``. The instructions carry no fast-math flags, so nothing contracts them
    otherwise (LLVM still vectorises the loops around them)."""

    def turn(typingctx, a, b, c, s):
        if not (a == b == c == s and a in (types.float32, types.float64)):
            return None

        def codegen(context, builder, signature, args):
            a_, b_, c_, s_ = args
            bs = builder.fmul(b_, s_)
            return multiply_add(builder, a_, c_, bs if second else builder.fneg(bs))

        return a(a, b, c, s), codegen

    turn.__name__ = "turn_second" if second else "turn_first"
    return intrinsic(turn)


turn_first = _turn(False)  # x1' = turn_first(x1, x2, c, s)
turn_second = _turn(True)  # x2' = turn_second(x2, x1, c, s)
