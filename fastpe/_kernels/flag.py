"""Numba's type of ``ON`` (:mod:`fastpe._flag`), the value of the kernels'
specialization flags, on which numba prunes branches. Private.

The kernels take flags that select what each compiled specialization holds (a dtype, a
layout, a loop) as None or ``ON``, and branch on ``flag is not None``. Numba's dead branch
pruning, which runs before type inference (and again after functions marked
``inline="always"`` are inlined), resolves such a test only where it knows the argument's
type cannot hold None: ``NoneType`` itself, or a type with a ``literal_type``. A plain
``True`` is typed ``boolean``, which it leaves alone: a specialization called with True
had kept the code of both branches (every inlined body a flag could select), typed and
lowered them all, and left them to LLVM to remove. ``ON`` is the one instance of a class
whose numba type carries ``literal_type``, so ``ON is not None`` is decided before numba
types anything: each specialization holds only the code it runs. A first bfloat16
``add_sinusoidal`` (``add16_kernel``) took 3.6-4.1 s of CPU to compile with True, 1.4 s
with one body (README, "Cold start").

``ON`` carries no value: a kernel only tests it against None (it has no truth value in
compiled code).
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
