"""``parse_rope`` and its helpers, under their older module name (see :mod:`fastpe._args`)."""

from __future__ import annotations

from ._args import RopeCall, default_seq_len, frequencies, parse_rope, rope_view  # noqa: F401
