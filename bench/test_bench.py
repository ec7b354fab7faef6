"""Speed: reference vs fast vs the machine's bandwidth kernels (and torch, where installed).

``pytest --benchmark-only`` runs the default sizes; ``--bench-large`` adds ~1 GiB arrays.
Each group ``op|shape|dtype|layout`` holds the NumPy reference, the fast kernel and the
bandwidth yardstick of the same bytes (``scale``: ``a *= s`` in place, read+write;
``fill``: ``a[:] = v``, write only; both on fastpe's thread pool, see ``fastpe._timing``),
so pytest-benchmark's table shows them side by side. The rounds start after the harness's
pause and run back to back, as in ``bench/roofline.py`` and ``fastpe compare``. Ratios, not
absolute times, are what these measurements support on a shared machine.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastpe
from fastpe import _cases, _timing, reference
from fastpe._freq import inv_freq_dd

try:  # torch is a peer where installed, never a dependency
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

large = pytest.mark.large


def size(*shape, is_large=False):
    return pytest.param(shape, id="x".join(map(str, shape)), marks=[large] if is_large else [])


TABLE_SIZES = [size(2048, 256), size(16384, 1024), size(131072, 1024, is_large=True)]
ADD_SIZES = [size(4, 2048, 512), size(8, 32768, 1024, is_large=True)]
ROPE_SIZES = [
    size(1, 1, 32, 128),  # one decoding step
    size(1, 128, 64),
    size(4, 2048, 32, 128),
    size(64, 32768, 128, is_large=True),
    size(8, 16384, 2048, is_large=True),
    size(4, 16384, 32, 128, is_large=True),
]
DTYPES = [np.float32, np.float64]
LAYOUTS = ["interleaved", "half"]


def _group(op, shape, dtype, layout):
    return f"{op}|{'x'.join(map(str, shape))}|{np.dtype(dtype).name}|{layout}"


def _rounds(nbytes, impl):
    if impl == "reference":
        return 3 if nbytes < 2**27 else 1
    return 20 if nbytes < 2**27 else 7


def _run(benchmark, f, arg, nbytes, impl):
    f(arg)  # warm-up: compiles or loads the kernel, touches the pages
    _timing.settle()
    benchmark.pedantic(f, args=(arg,), rounds=_rounds(nbytes, impl), iterations=1, warmup_rounds=0)


def _bandwidth(a, kind):
    _, run = _timing.yardstick(a, writes_only=kind == "fill")
    return lambda _a: run()


@pytest.mark.parametrize("impl", ["reference", "fast", "fill"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", TABLE_SIZES)
def test_sinusoidal_table(benchmark, shape, dtype, layout, impl):
    benchmark.group = _group("sinusoidal_table", shape, dtype, layout)
    n, d = shape
    out = np.empty(shape, dtype=dtype)
    if impl == "fill":
        f = _bandwidth(out, "fill")
    else:
        table = fastpe.sinusoidal_table if impl == "fast" else reference.sinusoidal_table

        def f(a):
            return table(n, d, layout=layout, out=a)

    _run(benchmark, f, out, out.nbytes, impl)


@pytest.mark.parametrize("impl", ["reference", "fast", "scale"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ADD_SIZES)
def test_add_sinusoidal(benchmark, shape, dtype, impl, rng):
    benchmark.group = _group("add_sinusoidal", shape, dtype, "interleaved")
    x = _cases.Case("add_sinusoidal", shape, dtype).make_input(rng)
    if impl == "scale":
        f = _bandwidth(x, "scale")
    else:
        add = fastpe.add_sinusoidal if impl == "fast" else reference.add_sinusoidal

        def f(a):
            return add(a, out=a)

    _run(benchmark, f, x, x.nbytes, impl)


def _torch_rope(layout):
    """The Hugging Face formula with torch on the CPU (float32 cos/sin cache per call)."""

    def rotate_half(t):
        h = t.shape[-1] // 2
        return torch.cat((-t[..., h:], t[..., :h]), dim=-1)

    def run(t):
        seq_axis = 0 if t.dim() == 2 else 1
        n, d = t.shape[seq_axis], t.shape[-1]
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        freqs = torch.outer(torch.arange(n, dtype=torch.float32), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        shape = [1] * t.dim()
        shape[seq_axis], shape[-1] = n, d
        cos, sin = emb.cos().to(t.dtype).view(shape), emb.sin().to(t.dtype).view(shape)
        t.copy_(t * cos + rotate_half(t) * sin)

    return run


# Peers of the half layout with cos/sin made beforehand (as a model's cos/sin cache holds
# them, broadcast over batch and heads): the same work as fastpe minus the angles (jax.jit
# writes a new array, JAX arrays being immutable; the others work in place).
CACHED_PEERS = ["torch_cached", "torch_compile", "jax_jit"]


@pytest.mark.parametrize("impl", ["reference", "fast", "scale", "torch", *CACHED_PEERS])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROPE_SIZES)
def test_apply_rope(benchmark, shape, dtype, layout, impl, rng):
    benchmark.group = _group("apply_rope", shape, dtype, layout)
    if impl not in ("reference", "fast", "scale") and layout != "half":
        pytest.skip("the peers run the Hugging Face (half layout) formula")
    x = _cases.Case("apply_rope", shape, dtype).make_input(rng)
    if impl == "scale":
        f = _bandwidth(x, "scale")
    elif impl == "torch":
        if torch is None:
            pytest.skip("torch is not installed")
        run = _torch_rope(layout)
        t = torch.from_numpy(x)
        _run(benchmark, run, t, x.nbytes, impl)
        return
    elif impl in CACHED_PEERS:
        seq_axis = 0 if x.ndim == 2 else 1
        s, c = reference.sincos(np.arange(x.shape[seq_axis]), *inv_freq_dd(10000.0, x.shape[-1]))
        bshape = [1] * x.ndim
        bshape[seq_axis], bshape[-1] = x.shape[seq_axis], x.shape[-1]
        cos = np.concatenate([c, c], axis=-1).astype(dtype).reshape(bshape)
        sin = np.concatenate([s, s], axis=-1).astype(dtype).reshape(bshape)
        run = _peer(impl.removesuffix("_cached"), [x], cos, sin)
        _run(benchmark, lambda _: run(), None, x.nbytes, impl)
        return
    else:
        rope = fastpe.apply_rope if impl == "fast" else reference.apply_rope

        def f(a):
            return rope(a, out=a, layout=layout)

    _run(benchmark, f, x, x.nbytes, impl)


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_apply_rope_yarn(benchmark, impl, rng):
    shape, dtype = (4, 2048, 32, 128), np.float32
    benchmark.group = _group("apply_rope[yarn x4]", shape, dtype, "half")
    x = _cases.Case("apply_rope", shape, dtype).make_input(rng)
    rope = fastpe.apply_rope if impl == "fast" else reference.apply_rope

    def f(a):
        return rope(a, out=a, layout="half", scaling=_cases.YARN, offset=12288)

    _run(benchmark, f, x, x.nbytes, impl)


# --------------------------------------------------------------------------- decoding steps
# One new token: q (1, 1, 32, 128) and, with grouped-query attention, k (1, 1, 8, 128),
# float32, half layout, at one position. fastpe checks every argument on every call (the
# checks of a repeated call are cached, never skipped); the peers get their cos/sin for that
# position made beforehand, as a model's cos/sin cache holds them, and run the Hugging Face
# formula ``x * cos + rotate_half(x) * sin``: torch eager, torch.compile (inductor) and
# jax.jit, each skipped where the package is not installed.
DECODE_Q = (1, 1, 32, 128)
DECODE_K = (1, 1, 8, 128)
DECODE_POSITION = 4097
_DECODE_ROUNDS = dict(rounds=30, iterations=200, warmup_rounds=3)


def _decode_group(op: str) -> str:
    shapes = "x".join(map(str, DECODE_Q))
    if op == "apply_rope_qk":
        shapes += "+" + "x".join(map(str, DECODE_K))
    return f"decode {op}|{shapes}|float32|half|p={DECODE_POSITION}"


def _decode_cos_sin(dtype, d: int = DECODE_Q[-1]):
    """cos and sin of the decoding position for the half layout, ``(d,)`` in ``dtype``."""
    s, c = reference.sincos(np.array([DECODE_POSITION]), *inv_freq_dd(10000.0, d))
    return (
        np.concatenate([c[0], c[0]]).astype(dtype),
        np.concatenate([s[0], s[0]]).astype(dtype),
    )


def _peer(impl: str, arrays: list, cos: np.ndarray, sin: np.ndarray):
    """A call that rotates ``arrays`` (half layout) with a peer, cos/sin cached."""
    if impl in ("torch", "torch_compile"):
        torch = pytest.importorskip("torch")
        ts = [torch.from_numpy(a) for a in arrays]
        tc, tsn = torch.from_numpy(cos), torch.from_numpy(sin)

        def rotate(t, c, s):
            h = t.shape[-1] // 2
            t.copy_(t * c + torch.cat((-t[..., h:], t[..., :h]), dim=-1) * s)

        if impl == "torch_compile":
            rotate = torch.compile(rotate)

        def run():
            for t in ts:
                rotate(t, tc, tsn)

        return run
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # else float64 arrays are computed in float32
    jnp = jax.numpy
    xs = [jnp.asarray(a) for a in arrays]
    jc, js = jnp.asarray(cos), jnp.asarray(sin)

    @jax.jit
    def rotate_all(xs, c, s):
        def rotate(x):
            h = x.shape[-1] // 2
            return x * c + jnp.concatenate((-x[..., h:], x[..., :h]), axis=-1) * s

        return [rotate(x) for x in xs]

    def run_jax():
        jax.block_until_ready(rotate_all(xs, jc, js))

    return run_jax


def _decode_run(benchmark, f) -> None:
    f()  # warm-up: compiles or loads the kernel (and, for fastpe, leaves the call's plan)
    _timing.settle()
    benchmark.pedantic(f, **_DECODE_ROUNDS)


@pytest.mark.parametrize("impl", ["fast", "reference", "torch", "torch_compile", "jax_jit"])
def test_decode_step(benchmark, impl, rng):
    benchmark.group = _decode_group("apply_rope")
    q = rng.standard_normal(DECODE_Q).astype(np.float32)
    if impl in ("fast", "reference"):
        rope = fastpe.apply_rope if impl == "fast" else reference.apply_rope

        def f():
            rope(q, out=q, offset=DECODE_POSITION, layout="half")

    else:
        f = _peer(impl, [q], *_decode_cos_sin(np.float32))
    _decode_run(benchmark, f)


@pytest.mark.parametrize(
    "impl", ["fast_qk", "fast_two_calls", "reference_qk", "torch", "torch_compile", "jax_jit"]
)
def test_decode_step_qk(benchmark, impl, rng):
    benchmark.group = _decode_group("apply_rope_qk")
    q = rng.standard_normal(DECODE_Q).astype(np.float32)
    k = rng.standard_normal(DECODE_K).astype(np.float32)
    kw = dict(offset=DECODE_POSITION, layout="half")
    if impl == "fast_qk":

        def f():
            fastpe.apply_rope_qk(q, k, out=(q, k), **kw)

    elif impl == "fast_two_calls":

        def f():
            fastpe.apply_rope(q, out=q, **kw)
            fastpe.apply_rope(k, out=k, **kw)

    elif impl == "reference_qk":

        def f():
            reference.apply_rope_qk(q, k, out=(q, k), **kw)

    else:
        f = _peer(impl, [q, k], *_decode_cos_sin(np.float32))
    _decode_run(benchmark, f)
