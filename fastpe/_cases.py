"""The registry of fast-vs-reference cases, shared by ``fastpe compare``, tests and bench/.

Each case knows how to build its inputs, how to run the fast and the reference function on
them, and how to measure the difference in ulps, with the bound the tests also use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import DTypeLike

from . import reference
from .conventions import add_grid_sinusoidal, grid_sinusoidal, timestep_embedding
from .rotary import apply_rope
from .sinusoidal import add_sinusoidal, sinusoidal_table

# Error bounds, fast against reference (see README, "Accuracy").
TABLE_F32_ULP = 1.0  # ulps of each value
TABLE_F64_ULP1 = 4.0  # units of 2**-52, the ulp of the pair norm 1.0
# ulps of max(|result|, 1), the scale of the operands (|PE| <= 1). float32: the table value
# is rounded to float32 (at most 1/4 ulp of 1) and the sum rounded once more, in float32 at
# x's SIMD width; float64 carries the table's own error (TABLE_F64_ULP1).
ADD_ULP = {np.dtype(np.float32): 1.5, np.dtype(np.float64): 4.0}
# ulps of each pair's norm. float32: cos/sin exact in float64, rounded once to float32, then
# the rotation in float32 with fused multiply-adds (x's SIMD width); float64: cos/sin from
# angle addition (a few 2**-53) and the rotation in float64.
ROPE_ULP = {np.dtype(np.float32): 2.0, np.dtype(np.float64): 6.0}
# float16 and bfloat16, in ulps of the 16-bit dtype (same measures as above). Both sides
# round once to nearest even into 16 bits: the reference from float64, fastpe from float32
# arithmetic on the exact angles' cos/sin (tables: from float64). Each lands within half an
# ulp (plus float32's or float64's own error, a few 2**-16 ulps at most) of the exact
# value, on the same grid, so the two differ by at most one step of it, only near ties.
HALF_TABLE_ULP = 1.0
HALF_ADD_ULP = 1.0
HALF_ROPE_ULP = 1.0
# float16: 10 stored significand bits, normal exponents from -14; bfloat16: 7 and -126
_HALF_FORMAT = {"float16": (10, -14), "bfloat16": (7, -126)}


def is_half(dtype) -> bool:
    """float16 or ml_dtypes' bfloat16."""
    return np.dtype(dtype).itemsize == 2


FUNCTIONS: dict[str, tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]] = {
    "sinusoidal_table": (sinusoidal_table, reference.sinusoidal_table),
    "add_sinusoidal": (add_sinusoidal, reference.add_sinusoidal),
    "apply_rope": (apply_rope, reference.apply_rope),
    "timestep_embedding": (timestep_embedding, reference.timestep_embedding),
    "grid_sinusoidal": (grid_sinusoidal, reference.grid_sinusoidal),
    "add_grid_sinusoidal": (add_grid_sinusoidal, reference.add_grid_sinusoidal),
}
# operations that write a table (the rest add to or rotate their input)
TABLE_OPS = ("sinusoidal_table", "timestep_embedding", "grid_sinusoidal")
ADD_OPS = ("add_sinusoidal", "add_grid_sinusoidal")


def timesteps_for(batch: int) -> np.ndarray:
    """Diffusion timesteps of a ``timestep_embedding`` case: fractional, 0 to 999."""
    return np.linspace(0.0, 999.0, batch) + 0.25


def _spacing(v, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    if is_half(dt):
        return _spacing_half(v, dt)
    a = np.abs(np.asarray(v, dtype=dt))
    return np.spacing(np.maximum(a, np.finfo(dt).tiny)).astype(np.float64)


def _spacing_half(v, dt: np.dtype) -> np.ndarray:
    """The spacing of float16/bfloat16 at ``|v|`` rounded into ``dt`` (as ``np.spacing``)."""
    bits, emin = _HALF_FORMAT[dt.name]
    a = np.abs(reference.round_to(v, dt).astype(np.float64))
    _, e = np.frexp(a)  # a = m * 2**e with 0.5 <= m < 1
    e = np.where(a > 0, np.maximum(e - 1, emin), emin)
    return np.ldexp(1.0, e - bits)


def table_error(got, want) -> float:
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    if got.dtype == np.float32 or is_half(got.dtype):
        return float((d / _spacing(want, np.float32)).max(initial=0.0))
    return float((d / 2.0**-52).max(initial=0.0))


def add_error(got, want) -> float:
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = np.maximum(np.abs(want.astype(np.float64)), 1.0)
    return float((d / _spacing(scale, got.dtype)).max(initial=0.0))


def rope_error(got, want, x, layout: str, rotary_dim: int) -> float:
    """Worst ``|got - want|`` over the rotated channels, in ulps of each pair's norm."""

    def split(a):
        a = np.asarray(a, dtype=np.float64)
        if layout == "interleaved":
            return a[..., 0:rotary_dim:2], a[..., 1:rotary_dim:2]
        h = rotary_dim // 2
        return a[..., :h], a[..., h:rotary_dim]

    g1, g2 = split(got)
    w1, w2 = split(want)
    x1, x2 = split(x)
    u = _spacing(np.hypot(x1, x2), got.dtype)
    e = np.maximum(np.abs(g1 - w1), np.abs(g2 - w2)) / u
    rest_same = np.array_equal(np.asarray(got)[..., rotary_dim:], np.asarray(x)[..., rotary_dim:])
    return float(e.max(initial=0.0)) if rest_same else float("inf")


@dataclass
class Case:
    """One comparison: ``op`` on ``shape``/``dtype`` with ``kwargs``."""

    op: str
    shape: tuple
    dtype: DTypeLike
    kwargs: dict = field(default_factory=dict)
    label: str = ""

    @property
    def layout(self) -> str:
        return self.kwargs.get("layout", "interleaved")

    @property
    def is_table(self) -> bool:
        return self.op in TABLE_OPS

    @property
    def tolerance(self) -> float:
        if is_half(self.dtype):
            if self.is_table:
                return HALF_TABLE_ULP
            return HALF_ADD_ULP if self.op in ADD_OPS else HALF_ROPE_ULP
        if self.is_table:
            return TABLE_F32_ULP if self.dtype == np.float32 else TABLE_F64_ULP1
        if self.op in ADD_OPS:
            return ADD_ULP[np.dtype(self.dtype)]
        return ROPE_ULP[np.dtype(self.dtype)]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    def make_input(self, rng: np.random.Generator | None = None):
        if self.is_table:
            return np.empty(self.shape, dtype=self.dtype)
        rng = rng or np.random.default_rng(0)
        x = np.empty(self.shape, dtype=self.dtype)
        # fill in slices to keep the float64 temporary small for large arrays
        flat = x.reshape(-1)
        step = 1 << 24
        for i in range(0, flat.size, step):
            flat[i : i + step] = rng.standard_normal(min(step, flat.size - i))
        return x

    def runner(self, which: str) -> Callable[[np.ndarray], object]:
        """A function of the input array doing the work in place (into it, for tables)."""
        fast, ref = FUNCTIONS[self.op]
        f = fast if which == "fast" else ref
        kw = self.kwargs
        if self.op == "sinusoidal_table":
            n, d = self.shape
            return lambda a: f(n, d, out=a, **kw)
        if self.op == "timestep_embedding":
            t = timesteps_for(self.shape[0])
            return lambda a: f(t, self.shape[1], out=a, **kw)
        if self.op in ("grid_sinusoidal", "add_grid_sinusoidal"):
            kw = dict(kw)
            grid = kw.pop("grid_shape")
            if self.op == "grid_sinusoidal":
                return lambda a: f(grid, self.shape[1], out=a, **kw)
            return lambda a: f(a, grid, out=a, **kw)
        return lambda a: f(a, out=a, **kw)

    def error(self, got, want, x) -> float:
        if self.is_table:
            return table_error(got, want)
        if self.op in ADD_OPS:
            return add_error(got, want)
        rot = self.kwargs.get("rotary_dim") or self.shape[-1]
        return rope_error(got, want, x, self.layout, rot)

    def name(self) -> str:
        if self.label and (
            self.op not in ("sinusoidal_table", "add_sinusoidal", "apply_rope")
            or "convention" in self.kwargs  # fairseq, tensor2tensor: [sin | cos], theirs
        ):
            return f"{self.op}[{self.label}]"
        if self.label:
            return f"{self.op}[{self.layout},{self.label}]"
        extra = ",".join(f"{k}={v}" for k, v in self.kwargs.items() if k != "layout")
        return f"{self.op}[{self.layout}{',' + extra if extra else ''}]"


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}


def _conventions(scale: int) -> list[Case]:
    """One case per convention of ``fastpe.conventions`` (README, "Conventions")."""
    g = 14 * scale  # patches per side: 14 is ViT-B/16 at 224 pixels
    return [
        Case(
            "sinusoidal_table",
            (1024 * scale, 1025),
            np.float32,
            {"convention": "fairseq", "padding_idx": 1},
            "fairseq",
        ),
        Case(
            "sinusoidal_table",
            (1024 * scale, 1024),
            np.float32,
            {"convention": "tensor2tensor", "start_index": 3},
            "tensor2tensor",
        ),
        Case(
            "add_sinusoidal",
            (4, 512 * scale, 1024),
            np.float32,
            {"convention": "fairseq", "padding_idx": 1},
            "fairseq",
        ),
        Case("timestep_embedding", (256, 320), np.float32, {}, "diffusers"),
        Case(
            "timestep_embedding",
            (256, 256),
            np.float64,
            {"flip_sin_to_cos": True, "downscale_freq_shift": 0},
            "guided-diffusion",
        ),
        Case(
            "grid_sinusoidal",
            (g * g + 1, 768),
            np.float32,
            {"grid_shape": (g, g), "cls_token": True},
            f"mae {g}x{g}+cls",
        ),
        Case(
            "grid_sinusoidal",
            (4 * g * g, 768),
            np.float32,
            {"grid_shape": (4, g, g)},
            f"mae 3-D 4x{g}x{g}",
        ),
        Case(
            "add_grid_sinusoidal",
            (8, g * g, 768),
            np.float32,
            {"grid_shape": (g, g), "convention": "tensor2tensor"},
            f"tensor2tensor nd {g}x{g}",
        ),
    ]


SIZES = {
    # finishes in seconds: used by the tests of the command itself
    "small": [
        Case("sinusoidal_table", (512, 64), np.float32),
        Case("add_sinusoidal", (2, 256, 64), np.float32),
        Case("apply_rope", (2, 128, 4, 64), np.float32),
        Case("apply_rope", (2, 128, 4, 64), np.float64, {"layout": "half"}),
        Case(
            "apply_rope",
            (1, 128, 4, 64),
            np.float32,
            {"layout": "half", "scaling": YARN, "offset": 8000},
            "yarn x4",
        ),
        *_conventions(1),
    ],
    # the default of `fastpe compare`: well under a minute on 2 cores
    "default": [
        Case("sinusoidal_table", (16384, 1024), np.float32),
        Case("sinusoidal_table", (16384, 1024), np.float32, {"layout": "half"}),
        Case("sinusoidal_table", (8192, 1024), np.float64),
        Case("sinusoidal_table", (4096, 512), np.float32, {"offset": 2**24 - 4096}),
        Case("add_sinusoidal", (8, 2048, 1024), np.float32),
        Case("add_sinusoidal", (4, 2048, 1024), np.float64, {"layout": "half"}),
        Case("apply_rope", (1, 128, 64), np.float32),
        Case("apply_rope", (4, 2048, 32, 128), np.float32),
        Case("apply_rope", (4, 2048, 32, 128), np.float32, {"layout": "half"}),
        Case("apply_rope", (2, 2048, 32, 128), np.float64),
        Case(
            "apply_rope",
            (4, 2048, 32, 128),
            np.float32,
            {"layout": "half", "rotary_dim": 64, "offset": 2**24},
        ),
        Case(
            "apply_rope",
            (4, 2048, 32, 128),
            np.float32,
            {"layout": "half", "scaling": YARN, "offset": 12288},
            "yarn x4,offset=12288",
        ),
        *_conventions(4),
    ],
    # throughput against size, for `fastpe compare --sizes sweep --plot FILE.png`
    "sweep": [
        *[
            Case("apply_rope", (4, n, 32, 128), np.float32, {"layout": "half"})
            for n in (8, 64, 512, 2048, 8192)
        ],
        *[Case("sinusoidal_table", (n, 1024), np.float32) for n in (256, 2048, 16384, 65536)],
        *[Case("add_sinusoidal", (8, n, 1024), np.float32) for n in (32, 256, 2048, 8192)],
    ],
    # about 1 GiB per array: the roofline sizes of the README
    "large": [
        Case("sinusoidal_table", (131072, 1024), np.float32),
        Case("sinusoidal_table", (131072, 1024), np.float64),
        Case("add_sinusoidal", (8, 32768, 1024), np.float32),
        Case("apply_rope", (8, 16384, 2048), np.float32),
        Case("apply_rope", (8, 16384, 2048), np.float32, {"layout": "half"}),
        Case("apply_rope", (4, 16384, 32, 128), np.float32),
        Case("apply_rope", (4, 16384, 32, 128), np.float32, {"layout": "half"}),
    ],
}
