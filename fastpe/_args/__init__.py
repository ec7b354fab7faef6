"""The argument layer: every check and parser that fastpe's public functions go through.

The in-memory functions (:mod:`fastpe.rotary`, :mod:`fastpe.sinusoidal`), the reference
(:mod:`fastpe.reference`), :mod:`fastpe.dask`, :mod:`fastpe.layout`, :func:`fastpe.warmup`
and the file functions all check their arguments here, so one input gets one answer
everywhere. The rules:

- ``TypeError`` for a value of the wrong type (``rotary_dim=4.0``, ``base="x"``, an
  int32 array, a masked array), ``ValueError`` for a value of the right type that is not
  allowed (``rotary_dim=5``, ``base=0.0``, a position beyond 2**53, overlapping elements);
- every message names the argument, the value and the fix;
- nothing is written before every check has passed: the parsers return a description of
  the call and write nothing, except the copy of ``x`` into ``out`` (``copy_in``), made
  last, after every check of ``out`` itself.

Arrays: any :class:`numpy.ndarray` subclass (``np.matrix``, ``np.memmap``, record-array
views) is worked on as its base-class view ``a.view(np.ndarray)``, which shares its
memory, so in-place work lands in the caller's object; a masked array is refused, since
fastpe would ignore its mask. The functions return ``out`` itself when it is given (the
caller's object, of its own class), else a new base-class array.

Three parsers of one shape, each returning a dataclass: :func:`parse_table`,
:func:`parse_add`, :func:`parse_rope`.
"""

from __future__ import annotations

from .calls import (  # noqa: F401
    AddCall,
    RopeCall,
    TableCall,
    check_scaling_args,
    default_seq_len,
    frequencies,
    given_frequencies,
    max_position,
    parse_add,
    parse_rope,
    parse_table,
    rope_view,
)
from .checks import (  # noqa: F401
    FLOAT_DTYPES,
    HALF_DTYPE,
    LAYOUTS,
    MAX_POSITION,
    _dtype_hint,
    _fill_target,
    _integer,
    _is_default_offset,
    _is_masked,
    _prepare_target,
    _refuse_masked,
    all_positions,
    base_view,
    bfloat16_dtype,
    check_base,
    check_bool,
    check_choice,
    check_dim,
    check_float_array,
    check_float_dtype,
    check_int,
    check_inv_freq,
    check_layout,
    check_no_self_overlap,
    check_offset,
    check_optional_int,
    check_out,
    check_pair_axes,
    check_position_range,
    check_positions,
    check_positions_or_offset,
    check_positions_shape,
    check_rotary_dim,
    check_seq_axis,
    check_writable_view,
    check_writeable,
    is_bfloat16,
    is_float_dtype,
    may_self_overlap,
    pair_channels,
    resolve_axis_positions,
    resolve_positions,
    same_view,
)
from .conventions import (  # noqa: F401
    _COS_SIN,
    _SIN_COS,
    CONVENTIONS,
    FAIRSEQ_BASE,
    GRID_CONVENTIONS,
    ORDERS,
    Block,
    EmbedCall,
    _add_target,
    _check_default,
    _embed_target,
    _refuse_extra,
    _seq_positions,
    _spacing,
    _t2t_timescales,
    _table_dtype,
    check_block_frequencies,
    check_convention,
    check_grid_shape,
    check_real,
    check_real_positions,
    convention_blocks,
    parse_convention,
    parse_embedding,
    parse_grid,
    parse_timestep,
    plain_convention,
    t2t_blocks,
)
