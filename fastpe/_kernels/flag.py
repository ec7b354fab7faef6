"""Numba's type of ``ON`` (:mod:`fastpe._flag`), the value of the kernels'
specialization flags, on which numba prunes branches. Private.

The kernels take flags that select what each compiled specialization holds (a dtype, a
layout, a loop, a walk) as None or ``ON``, and branch on ``flag is not None``. Numba's dead
branch pruning, which runs before type inference (and again after functions marked
``inline="always"`` are inlined), resolves such a test only where it knows the argument's
type: ``NoneType`` itself, or a type with a ``literal_type``. A plain True is typed
``boolean``, which it leaves alone: a specialization called with True had kept the code of
both branches (every inlined body a flag could select), typed and lowered them all, and left
them to LLVM to remove. ``ON``'s numba type carries a ``literal_type``, so ``ON is not
None`` is decided before numba types anything, and a flag's other branch is never compiled.
A first bfloat16 ``add_sinusoidal`` (``add16_kernel``) took 4.3 s of CPU to compile with
True, 1.6 s with ``ON`` (README, "Cold start"). Arguments that carry a value (an array, a
count) and are None otherwise are not pruned this way: both branches stay for them.

``ON`` carries no value: a kernel only tests it against None. It has no truth value in
compiled code; numba would read it as ``literal_type`` (boolean) where it looks for a
non-literal type, and then fail to convert it, so it must not reach ``if flag:``, ``bool``
or a return value. Its class names this type (``_numba_type_``), so numba's dispatcher
types an ``ON`` argument without calling back into Python (about 0.2 us a flag against
1.2 us).
"""

from __future__ import annotations

from numba.core import types
from numba.core.datamodel import models
from numba.extending import NativeValue, box, register_model, typeof_impl, unbox

from .._flag import ON, _On


class OnType(types.Dummy):
    """Numba's type of :data:`ON`. ``literal_type`` is what dead branch pruning reads
    (``numba.core.analysis.dead_branch_prune``): a type that has one is never None."""

    literal_type = types.boolean

    def __init__(self) -> None:
        super().__init__(name="fastpe.ON")


on_type = OnType()


@typeof_impl.register(_On)
def _typeof_on(val, c):
    return on_type


register_model(OnType)(models.OpaqueModel)


@unbox(OnType)
def _unbox_on(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


@box(OnType)
def _box_on(typ, val, c):
    return c.pyapi.unserialize(c.pyapi.serialize_object(ON))


# numba's dispatcher types an argument in C when its class names its numba type: without
# this every ON argument of every kernel call was typed in Python (about 1.2 us each)
_On._numba_type_ = on_type  # type: ignore[attr-defined]
