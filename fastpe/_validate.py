"""The argument checks, under their older module name; they live in :mod:`fastpe._args`."""

from __future__ import annotations

from ._args import (  # noqa: F401
    FLOAT_DTYPES,
    LAYOUTS,
    MAX_POSITION,
    base_view,
    check_base,
    check_bool,
    check_choice,
    check_dim,
    check_float_array,
    check_float_dtype,
    check_int,
    check_layout,
    check_no_self_overlap,
    check_offset,
    check_optional_int,
    check_out,
    check_positions,
    check_positions_or_offset,
    check_positions_shape,
    check_rotary_dim,
    check_seq_axis,
    check_writable_view,
    check_writeable,
    may_self_overlap,
    parse_add,
    parse_table,
    resolve_positions,
    same_view,
)
