"""The conventions of the field (fastpe.conventions; fairseq and tensor2tensor tables).

Each convention is checked three ways:

- against mpmath at 200 bits, from the mathematical formula: float32 within 1 ulp of each
  value, float64 within ``TABLE_F64_ULP1`` units of 2**-52 (integer and float positions);
- against a plain float64 transcription of the original code, written here from its
  formula: the originals round the frequency (``exp`` of a rounded exponent) and the angle
  in float64, so they differ from the exact value by up to a few ulps of the angle; the
  bound is ``ORIG_UNITS + ORIG_ANGLE_ULPS * |angle|`` units of 2**-52 (README,
  "Conventions"). Given the original's own float64 frequencies (``frequencies=``), only the
  angle's rounding is left: half an ulp of the angle;
- bit for bit against fastpe's other functions where the formula is the same (fairseq,
  tensor2tensor and diffusers share one; guided-diffusion is the transformer's halves
  flipped; each MAE axis block is a ``layout="half"`` table).

float16 and bfloat16 are held to the bounds of tests/test_half.py, in ulps of the 16-bit
dtype: ``_cases.HALF_*_ULP`` against the reference, half an ulp plus 2**-20 against mpmath.
Threaded calls (large ones) give the bits of the same rows made in small calls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _util import DTYPES, make_layout, run_python, unaligned

import fastpe
from fastpe import _cases, _timing, reference

mpmath = pytest.importorskip("mpmath")

F64_UNITS = _cases.TABLE_F64_ULP1  # float64 against the exact values, units of 2**-52
# float64 transcriptions of the originals against fastpe: our own error plus theirs (the
# exponent's rounding, up to |log base| * 1.5 units, carried into exp, then the angle's)
ORIG_UNITS = F64_UNITS + 1.0
ORIG_ANGLE_ULPS = 8.0  # measured up to 4.8 (bench/conventions_accuracy.py)


# --------------------------------------------------------------------------- the originals
# Transcribed from each codebase's formula, in float64 NumPy (torch/TF calls replaced by
# their NumPy equivalents).


def fairseq_get_embedding(num_embeddings, embedding_dim, padding_idx=None):
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = np.exp(np.arange(half_dim, dtype=np.float64) * -emb)
    emb = np.arange(num_embeddings, dtype=np.float64)[:, None] * emb[None, :]
    emb = np.concatenate([np.sin(emb), np.cos(emb)], axis=1).reshape(num_embeddings, -1)
    if embedding_dim % 2 == 1:
        emb = np.concatenate([emb, np.zeros((num_embeddings, 1))], axis=1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb


def t2t_get_timing_signal_1d(
    length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0
):
    position = np.arange(length, dtype=np.float64) + start_index
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        float(num_timescales) - 1, 1
    )
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment
    )
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


def t2t_add_timing_signal_nd(x, min_timescale=1.0, max_timescale=1.0e4):
    num_dims = x.ndim - 2
    channels = x.shape[-1]
    num_timescales = channels // (num_dims * 2)
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / (
        float(num_timescales) - 1
    )
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment
    )
    x = x.astype(np.float64)
    for dim in range(num_dims):
        length = x.shape[dim + 1]
        position = np.arange(length, dtype=np.float64)
        scaled_time = position[:, None] * inv_timescales[None, :]
        signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
        prepad = dim * 2 * num_timescales
        postpad = channels - (dim + 1) * 2 * num_timescales
        signal = np.pad(signal, [[0, 0], [prepad, postpad]])
        for _ in range(1 + dim):
            signal = signal[None]
        for _ in range(num_dims - 1 - dim):
            signal = np.expand_dims(signal, -2)
        x = x + signal
    return x


def diffusers_get_timestep_embedding(
    timesteps,
    embedding_dim,
    flip_sin_to_cos=False,
    downscale_freq_shift=1,
    scale=1,
    max_period=10000,
):
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * np.arange(half_dim, dtype=np.float64)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = np.exp(exponent)
    emb = np.asarray(timesteps, dtype=np.float64)[:, None] * emb[None, :]
    emb = scale * emb
    emb = np.concatenate([np.sin(emb), np.cos(emb)], axis=-1)
    if flip_sin_to_cos:
        emb = np.concatenate([emb[:, half_dim:], emb[:, :half_dim]], axis=-1)
    if embedding_dim % 2 == 1:
        emb = np.pad(emb, [[0, 0], [0, 1]])
    return emb


def guided_diffusion_timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = np.exp(-math.log(max_period) * np.arange(half, dtype=np.float64) / half)
    args = np.asarray(timesteps, dtype=np.float64)[:, None] * freqs[None]
    embedding = np.concatenate([np.cos(args), np.sin(args)], axis=-1)
    if dim % 2:
        embedding = np.concatenate([embedding, np.zeros_like(embedding[:, :1])], axis=-1)
    return embedding


def mae_1d_from_grid(embed_dim, pos):
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False):
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0).reshape([2, 1, grid_size, grid_size])
    emb_h = mae_1d_from_grid(embed_dim // 2, grid[0])
    emb_w = mae_1d_from_grid(embed_dim // 2, grid[1])
    emb = np.concatenate([emb_h, emb_w], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
    return emb


# --------------------------------------------------------------------------- exact values


def exact_halves(positions, n, base, shift=0.0, scale=1.0):
    """mpmath ``(sin, cos)`` of ``p * scale * base**(-i / (n - shift))``, object arrays."""
    mpmath.mp.prec = 200
    w = [
        mpmath.mpf(scale) * mpmath.power(mpmath.mpf(base), -mpmath.mpf(i) / (n - mpmath.mpf(shift)))
        for i in range(n)
    ]
    s = np.empty((len(positions), n), dtype=object)
    c = np.empty((len(positions), n), dtype=object)
    for r, p in enumerate(positions):
        for i, wi in enumerate(w):
            a = mpmath.mpf(float(p)) * wi
            s[r, i], c[r, i] = mpmath.sin(a), mpmath.cos(a)
    return s, c


def exact_error(got, exact) -> np.ndarray:
    """float32: ulps of each exact value; float64: units of 2**-52 (absolute)."""
    err = np.zeros(got.shape)
    for idx in np.ndindex(got.shape):
        e = exact[idx]
        d = float(abs(mpmath.mpf(float(got[idx])) - e))
        if got.dtype == np.float32:
            err[idx] = d / float(np.spacing(np.float32(abs(float(e)))))
        else:
            err[idx] = d / 2.0**-52
    return err


def assert_exact(got, exact, what):
    err = exact_error(got, exact)
    bound = 1.0 if got.dtype == np.float32 else F64_UNITS
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err.max() <= bound, (
        f"{what} {got.dtype} {got.shape}: worst {err.max():.3f} at {idx}: got "
        f"{got[idx]!r}, exact {mpmath.nstr(exact[idx], 20)}"
    )


def zeros_obj(shape):
    z = np.empty(shape, dtype=object)
    z[...] = mpmath.mpf(0)
    return z


def assert_near_original(got, orig, angle, what):
    """float64 ``got`` against a float64 transcription, the original's rounding allowed."""
    unit = 2.0**-52
    d = np.abs(got - orig) / unit
    bound = ORIG_UNITS + ORIG_ANGLE_ULPS * np.abs(angle)
    idx = np.unravel_index(int(np.argmax(d - bound)), d.shape)
    assert (d <= bound).all(), (
        f"{what}: {d[idx]:.2f} units of 2**-52 at {idx} (angle {angle[idx]:.6g}), bound "
        f"{bound[idx]:.2f}"
    )


def angles_halves(positions, w, order_cos_first=False, pad=0):
    a = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(w)[None, :]
    return np.pad(np.concatenate([a, a], axis=1), [[0, 0], [0, pad]])


# --------------------------------------------------------------------------- fairseq


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [4, 7, 64])
def test_fairseq_exact(dtype, dim):
    n = 24
    got = fastpe.sinusoidal_table(n, dim, convention="fairseq", padding_idx=1, dtype=dtype)
    s, c = exact_halves(range(n), dim // 2, 10000.0, shift=1.0)
    exact = zeros_obj((n, dim))
    exact[:, : dim // 2], exact[:, dim // 2 : 2 * (dim // 2)] = s, c
    exact[1] = mpmath.mpf(0)
    assert_exact(got, exact, "fairseq")
    assert (got[1] == 0).all()
    if dim % 2:
        assert (got[:, -1] == 0).all()


@pytest.mark.parametrize("dim", [4, 9, 512])
@pytest.mark.parametrize("padding_idx", [None, 0, 1])
def test_fairseq_against_original(dim, padding_idx):
    n = 600
    got = fastpe.sinusoidal_table(
        n, dim, convention="fairseq", padding_idx=padding_idx, dtype=np.float64
    )
    orig = fairseq_get_embedding(n, dim, padding_idx)
    half = dim // 2
    w = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))
    assert_near_original(got, orig, angles_halves(np.arange(n), w, pad=dim % 2), "fairseq")
    if padding_idx is not None:
        assert (got[padding_idx] == 0).all()


def test_fairseq_given_the_originals_frequencies_only_the_angle_rounding_is_left():
    n, dim = 2000, 256
    half = dim // 2
    w = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))  # fairseq's, in float64
    got = fastpe.sinusoidal_embedding(
        np.arange(n), dim, frequencies=w, order="sin_cos", dtype=np.float64
    )
    orig = fairseq_get_embedding(n, dim)
    angle = angles_halves(np.arange(n), w)
    d = np.abs(got - orig) / 2.0**-52
    assert (d <= ORIG_UNITS + 0.5 * np.abs(angle)).all(), d.max()


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_fairseq_is_the_modules_forward(dtype, rng):
    """Positions from padding_idx + 1 (make_positions of an unpadded batch)."""
    x = rng.standard_normal((3, 40, 33)).astype(dtype)
    got = fastpe.add_sinusoidal(x, convention="fairseq", padding_idx=1)
    table = fastpe.sinusoidal_table(42, 33, convention="fairseq", padding_idx=1, dtype=np.float64)
    want = x.astype(np.float64) + table[2:42]
    assert _cases.add_error(got, want) <= _cases.ADD_ULP[np.dtype(dtype)]
    np.testing.assert_array_equal(got[..., -1], x[..., -1])  # the odd column
    # a padding position adds nothing
    pos = np.r_[1, 1, np.arange(2, 40)]
    got = fastpe.add_sinusoidal(x, convention="fairseq", padding_idx=1, positions=pos)
    np.testing.assert_array_equal(got[:, :2], x[:, :2])
    ref = reference.add_sinusoidal(x, convention="fairseq", padding_idx=1, positions=pos)
    assert _cases.add_error(got, ref) <= _cases.ADD_ULP[np.dtype(dtype)]


@pytest.mark.parametrize("impl", [fastpe, reference], ids=["fast", "reference"])
def test_add_fairseq_without_padding_idx_is_the_modules_forward(impl, rng):
    """fairseq's module takes padding_idx 0 when it is given None: positions from 1."""
    x = rng.standard_normal((2, 30, 16))
    got = impl.add_sinusoidal(x, convention="fairseq")
    np.testing.assert_allclose(got, x + fairseq_get_embedding(31, 16)[1:], rtol=0, atol=1e-14)
    given = impl.add_sinusoidal(x, convention="fairseq", padding_idx=0)
    np.testing.assert_array_equal(got, given)
    # an offset or positions given are taken as they are
    got = impl.add_sinusoidal(x[0], convention="fairseq", offset=0)
    np.testing.assert_allclose(got, x[0] + fairseq_get_embedding(30, 16), rtol=0, atol=1e-14)


@pytest.mark.parametrize("impl", [fastpe, reference], ids=["fast", "reference"])
def test_fairseq_dim_1_is_its_zero_column(impl):
    """get_embedding(n, 1) has no pairs, only the odd dim's zero column (dims 2 and 3
    divide by zero there, and are refused)."""
    np.testing.assert_array_equal(
        impl.sinusoidal_table(5, 1, convention="fairseq", padding_idx=2), np.zeros((5, 1))
    )
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3, 1)
    np.testing.assert_array_equal(impl.add_sinusoidal(x, convention="fairseq"), x)


# --------------------------------------------------------------------------- tensor2tensor


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dim, lo, hi, start",
    [(64, 1.0, 1.0e4, 0), (9, 2.0, 500.0, 7), (2, 1.0, 1.0e4, 3), (3, 0.5, 1.0e4, 0)],
)
def test_t2t_exact(dtype, dim, lo, hi, start):
    n = 20
    got = fastpe.sinusoidal_table(
        n,
        dim,
        convention="tensor2tensor",
        min_timescale=lo,
        max_timescale=hi,
        start_index=start,
        dtype=dtype,
    )
    half = dim // 2
    s, c = exact_halves(
        range(start, start + n), half, hi / lo, shift=0.0 if half == 1 else 1.0, scale=lo
    )
    exact = zeros_obj((n, dim))
    exact[:, :half], exact[:, half : 2 * half] = s, c
    assert_exact(got, exact, "tensor2tensor")


@pytest.mark.parametrize("dim, lo, hi, start", [(512, 1.0, 1.0e4, 0), (33, 2.0, 500.0, 11)])
def test_t2t_against_original(dim, lo, hi, start):
    n = 700
    got = fastpe.sinusoidal_table(
        n,
        dim,
        convention="tensor2tensor",
        min_timescale=lo,
        max_timescale=hi,
        start_index=start,
        dtype=np.float64,
    )
    orig = t2t_get_timing_signal_1d(n, dim, lo, hi, start)
    half = dim // 2
    w = lo * np.exp(np.arange(half) * -(math.log(hi / lo) / max(half - 1, 1)))
    assert_near_original(
        got, orig, angles_halves(np.arange(start, start + n), w, pad=dim % 2), "tensor2tensor"
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("grid", [(6,), (5, 7), (3, 4, 5)])
def test_t2t_nd_against_original(dtype, grid, rng):
    dim = 4 * len(grid) * 2 + 3  # leftover channels stay as they are
    x = rng.standard_normal((2, *grid, dim)).astype(dtype)
    got = fastpe.add_grid_sinusoidal(x.reshape(2, -1, dim), grid, convention="tensor2tensor")
    orig = t2t_add_timing_signal_nd(x).reshape(2, -1, dim)
    ref = reference.add_grid_sinusoidal(x.reshape(2, -1, dim), grid, convention="tensor2tensor")
    assert _cases.add_error(got, ref) <= _cases.ADD_ULP[np.dtype(dtype)]
    # positions below 8: the original's rounding is far inside the add bound
    assert _cases.add_error(got, orig) <= _cases.ADD_ULP[np.dtype(dtype)] + (
        0.0 if dtype == np.float32 else ORIG_ANGLE_ULPS * max(grid)
    )
    used = 2 * (dim // (2 * len(grid))) * len(grid)
    np.testing.assert_array_equal(got[..., used:], x.reshape(2, -1, dim)[..., used:])


def test_t2t_and_fairseq_share_one_formula():
    """10000**(-i / (n - 1)) in both (and diffusers' default): the same values, bit for bit."""
    for dt in DTYPES:
        for dim in (4, 65, 1024):
            a = fastpe.sinusoidal_table(300, dim, convention="fairseq", dtype=dt)
            b = fastpe.sinusoidal_table(300, dim, convention="tensor2tensor", dtype=dt)
            c = fastpe.timestep_embedding(np.arange(300), dim, dtype=dt)
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)


def test_add_t2t_1d(rng):
    x = rng.standard_normal((2, 50, 17)).astype(np.float32)
    got = fastpe.add_sinusoidal(x, convention="tensor2tensor", start_index=4)
    ref = reference.add_sinusoidal(x, convention="tensor2tensor", start_index=4)
    assert _cases.add_error(got, ref) <= _cases.ADD_ULP[np.dtype(np.float32)]
    np.testing.assert_array_equal(got[..., -1], x[..., -1])


# --------------------------------------------------------------------------- timesteps

TIMESTEPS = np.array(
    [0.0, 0.25, 1.0, 1.5, 17.125, 999.0, 999.75, -3.5, 12345.678, 2.0**40 + 0.5, 3.0e9]
)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"flip_sin_to_cos": True, "downscale_freq_shift": 0},
        {"scale": 1000.0, "max_period": 5000.0},
        {"downscale_freq_shift": 0.5, "flip_sin_to_cos": True},
    ],
)
@pytest.mark.parametrize("dim", [5, 32, 33])
def test_timestep_exact(dtype, kw, dim):
    got = fastpe.timestep_embedding(TIMESTEPS, dim, dtype=dtype, **kw)
    half = dim // 2
    s, c = exact_halves(
        TIMESTEPS,
        half,
        float(kw.get("max_period", 10000)),
        shift=float(kw.get("downscale_freq_shift", 1)),
        scale=float(kw.get("scale", 1)),
    )
    exact = zeros_obj((len(TIMESTEPS), dim))
    first, second = (c, s) if kw.get("flip_sin_to_cos") else (s, c)
    exact[:, :half], exact[:, half : 2 * half] = first, second
    assert_exact(got, exact, f"timestep {kw}")
    ref = reference.timestep_embedding(TIMESTEPS, dim, dtype=dtype, **kw)
    assert _cases.table_error(got, ref) <= (1.0 if dtype == np.float32 else F64_UNITS)


@pytest.mark.parametrize("kind", ["float16", "bfloat16", "float32"])
def test_timesteps_of_narrow_float_dtypes_read_exactly(kind):
    """Timesteps of a narrow float dtype (a half-precision pipeline's) hold float64 values
    exactly: the embedding is that of the same values in float64, fast and reference."""
    if kind == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="the bf16 extra is not installed")
        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(kind)
    t = np.array([0.0, 0.25, 1.5, 17.125, 999.0, -3.5]).astype(dt)
    for module in (fastpe, reference):
        got = module.timestep_embedding(t, 32)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, module.timestep_embedding(t.astype(np.float64), 32))
    got = fastpe.timestep_embedding(t, 32)
    assert _cases.table_error(got, reference.timestep_embedding(t, 32)) <= 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_fractional_near_multiples_of_half_pi(dtype):
    """Positions at and next to float64 multiples of pi/2 (frequency 1, exact), where the
    reduction by pi/2 cancels: the sines and cosines near zero are tiny, and float32 is
    held to 1 ulp of each; both sides of the kernel's switch to libm (angle 2**19)."""
    k = np.r_[1:400, 2**17 - 3 : 2**17 + 3, 333331, 333337, 2**20 - 1, 2**20, 2**21 + 7]
    base = k * (np.pi / 2)
    pos = np.r_[base, np.nextafter(base, 0), np.nextafter(base, np.inf)]
    pos = pos[pos != np.floor(pos)]  # fractional only: the kernel under test
    got = fastpe.sinusoidal_embedding(pos, 2, order="sin_cos", dtype=dtype)
    s, c = exact_halves(pos, 1, 10000.0)
    assert_exact(got, np.concatenate([s, c], axis=1), "near k*pi/2")


@pytest.mark.parametrize(
    "kw", [{}, {"flip_sin_to_cos": True, "downscale_freq_shift": 0}, {"scale": 1000.0}]
)
@pytest.mark.parametrize("dim", [320, 31])
def test_timestep_against_diffusers(kw, dim):
    t = np.r_[np.linspace(0, 999, 50), np.linspace(0, 1, 20) + 0.001]
    got = fastpe.timestep_embedding(t, dim, dtype=np.float64, **kw)
    orig = diffusers_get_timestep_embedding(t, dim, **kw)
    half = dim // 2
    shift = kw.get("downscale_freq_shift", 1)
    w = kw.get("scale", 1) * np.exp(-math.log(10000) * np.arange(half) / (half - shift))
    assert_near_original(got, orig, angles_halves(t, w, pad=dim % 2), f"diffusers {kw}")


@pytest.mark.parametrize("dim", [256, 7])
def test_guided_diffusion_is_flip_and_no_shift(dim):
    t = np.r_[np.arange(0, 1000, 37), 0.5, 250.25]
    got = fastpe.timestep_embedding(
        t, dim, flip_sin_to_cos=True, downscale_freq_shift=0, dtype=np.float64
    )
    orig = guided_diffusion_timestep_embedding(t, dim)
    w = np.exp(-math.log(10000) * np.arange(dim // 2) / (dim // 2))
    assert_near_original(got, orig, angles_halves(t, w, pad=dim % 2), "guided-diffusion")
    # the transformer's [sin | cos] halves, flipped: bit for bit on integer timesteps
    half = dim // 2
    ti = np.arange(0, 1000, 37)
    for dt in DTYPES:
        a = fastpe.timestep_embedding(
            ti, dim, flip_sin_to_cos=True, downscale_freq_shift=0, dtype=dt
        )
        b = fastpe.sinusoidal_table(positions=ti, dim=2 * half, layout="half", dtype=dt)
        np.testing.assert_array_equal(a[:, :half], b[:, half:])
        np.testing.assert_array_equal(a[:, half : 2 * half], b[:, :half])


def test_integer_and_float_timesteps_agree():
    t = np.arange(0, 1000, 7)
    for dt in DTYPES:
        a = fastpe.timestep_embedding(t, 64, dtype=dt)
        b = fastpe.timestep_embedding(t.astype(np.float64), 64, dtype=dt)
        c = fastpe.sinusoidal_embedding(t + 0.0, 64, shift=1, order="sin_cos", dtype=dt)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_timestep(dtype, rng):
    x = rng.standard_normal((TIMESTEPS.size, 33)).astype(dtype)
    x0 = x.copy()
    got = fastpe.add_timestep_embedding(x, TIMESTEPS, flip_sin_to_cos=True)
    np.testing.assert_array_equal(x, x0)  # out=None leaves x alone
    emb = reference.timestep_embedding(TIMESTEPS, 33, flip_sin_to_cos=True, dtype=np.float64)
    assert _cases.add_error(got, x.astype(np.float64) + emb) <= _cases.ADD_ULP[np.dtype(dtype)]
    assert fastpe.add_timestep_embedding(x, TIMESTEPS, out=x) is x
    np.testing.assert_array_equal(x[:, -1], x0[:, -1])


# --------------------------------------------------------------------------- grids


@pytest.mark.parametrize(
    "n, dim, cls", [(14, 768, True), (16, 1024, False), (1, 4, True), (7, 8, False)]
)
def test_mae_2d_against_original(n, dim, cls):
    got = fastpe.grid_sinusoidal((n, n), dim, cls_token=cls, dtype=np.float64)
    assert got.shape == (n * n + cls, dim)
    orig = mae_get_2d_sincos_pos_embed(dim, n, cls)
    np.testing.assert_array_equal(
        fastpe.grid_sinusoidal(n, dim, cls_token=cls, dtype=np.float64), got
    )
    d = dim // 2
    omega = 1.0 / 10000 ** (np.arange(d // 2) / (d / 2.0))
    i, j = np.divmod(np.arange(n * n), n)
    angle = np.concatenate(
        [
            np.pad(angles_halves(j, omega), [[0, 0], [0, d]]),
            np.pad(angles_halves(i, omega), [[0, 0], [d, 0]]),
        ]
    )
    angle = angle.reshape(2, n * n, dim).max(axis=0)
    if cls:
        angle = np.r_[np.zeros((1, dim)), angle]
    assert_near_original(got, orig, angle, "MAE")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("grid", [(5,), (3, 7), (2, 3, 4)])
def test_grid_blocks_are_half_tables(dtype, grid):
    """Each axis's block is sinusoidal_table(layout="half") of its coordinate, bit for bit;
    the blocks run from the last axis to the first (MAE's meshgrid puts w first)."""
    nd = len(grid)
    dim = 12 * nd
    got = fastpe.grid_sinusoidal(grid, dim, cls_token=True, dtype=dtype)
    assert (got[0] == 0).all()
    cells = got[1:].reshape(*grid, dim)
    width = dim // nd
    for k in range(nd):
        axis = nd - 1 - k
        tab = fastpe.sinusoidal_table(grid[axis], width, layout="half", dtype=dtype)
        idx = [0] * nd
        for r in range(grid[axis]):
            idx[axis] = r
            np.testing.assert_array_equal(cells[tuple(idx)][k * width : (k + 1) * width], tab[r])
    ref = reference.grid_sinusoidal(grid, dim, cls_token=True, dtype=dtype)
    assert _cases.table_error(got, ref) <= (1.0 if dtype == np.float32 else F64_UNITS)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grid_exact(dtype):
    grid, dim = (3, 5, 6), 12
    got = fastpe.grid_sinusoidal(grid, dim, dtype=dtype).reshape(*grid, dim)
    t, h, w = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    for k, coord in enumerate((w, h, t)):
        s, c = exact_halves(coord.ravel(), 2, 10000.0)
        exact = np.concatenate([s, c], axis=1).reshape(*grid, 4)
        assert_exact(got[..., 4 * k : 4 * (k + 1)], exact, f"3-D grid block {k}")


def test_larger_grid_extends_a_smaller_one():
    small = fastpe.grid_sinusoidal((6, 9), 64).reshape(6, 9, 64)
    large = fastpe.grid_sinusoidal((20, 31), 64).reshape(20, 31, 64)
    np.testing.assert_array_equal(large[:6, :9], small)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [None, 3])
def test_add_grid(dtype, batch, rng):
    grid, dim = (4, 6), 32
    shape = (25, dim) if batch is None else (batch, 25, dim)
    x = rng.standard_normal(shape).astype(dtype)
    x0 = x.copy()
    got = fastpe.add_grid_sinusoidal(x, grid, cls_token=True)
    np.testing.assert_array_equal(x, x0)
    table = reference.grid_sinusoidal(grid, dim, cls_token=True, dtype=np.float64)
    assert _cases.add_error(got, x.astype(np.float64) + table) <= _cases.ADD_ULP[x.dtype]
    np.testing.assert_array_equal(got[..., 0, :], x[..., 0, :])  # the class token
    assert fastpe.add_grid_sinusoidal(x, grid, cls_token=True, out=x) is x
    np.testing.assert_array_equal(x, got)


# --------------------------------------------------------------------------- general


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["interleaved", "sin_cos", "cos_sin"])
def test_general_embedding_exact(dtype, order):
    pos = np.r_[TIMESTEPS, np.arange(5)]
    dim = 11
    got = fastpe.sinusoidal_embedding(
        pos, dim, base=500.0, shift=-0.5, scale=0.75, order=order, dtype=dtype
    )
    s, c = exact_halves(pos, 5, 500.0, shift=-0.5, scale=0.75)
    exact = zeros_obj((pos.size, dim))
    if order == "interleaved":
        exact[:, 0:10:2], exact[:, 1:10:2] = s, c
    elif order == "sin_cos":
        exact[:, :5], exact[:, 5:10] = s, c
    else:
        exact[:, :5], exact[:, 5:10] = c, s
    assert_exact(got, exact, f"general {order}")


def test_transformer_convention_is_the_default():
    for dt in DTYPES:
        a = fastpe.sinusoidal_table(100, 64, dtype=dt)
        b = fastpe.sinusoidal_table(100, 64, convention="transformer", dtype=dt)
        c = fastpe.sinusoidal_embedding(np.arange(100), 64, dtype=dt)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("layout", ["sliced", "reversed", "transposed"])
@pytest.mark.parametrize("order", ["sin_cos", "cos_sin"])
def test_strided_out(layout, order, rng):
    out, parent = make_layout((40, 33), np.float32, layout, rng)
    before = parent.copy()
    pos = np.arange(40) * 3
    got = fastpe.sinusoidal_embedding(pos, 33, shift=1, order=order, out=out)
    assert got is out
    want = fastpe.sinusoidal_embedding(pos, 33, shift=1, order=order)
    np.testing.assert_array_equal(out, want)
    assert_only_view_changed(parent, before, out, want)


def assert_only_view_changed(parent, before, view, want):
    """``view`` (of ``parent``) holds ``want`` and nothing else of ``parent`` changed."""
    expected = before.copy()
    off = view.__array_interface__["data"][0] - parent.__array_interface__["data"][0]
    np.ndarray(view.shape, view.dtype, buffer=expected, offset=off, strides=view.strides)[...] = (
        want
    )
    np.testing.assert_array_equal(parent, expected)


@pytest.mark.parametrize("layout", ["sliced", "reversed", "transposed"])
@pytest.mark.parametrize(
    "grid, convention", [((4, 6), "mae"), ((2, 3, 4), "mae"), ((3, 5), "tensor2tensor")]
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_add_grid_strided_in_place(layout, grid, convention, dtype, rng):
    """Views are added to in place; the result equals the same call on a copy."""
    rows = 1 + int(np.prod(grid))
    x, parent = make_layout((3, rows, 24), dtype, layout, rng)
    before = parent.copy()
    want = fastpe.add_grid_sinusoidal(x.copy(), grid, cls_token=True, convention=convention)
    assert fastpe.add_grid_sinusoidal(x, grid, cls_token=True, convention=convention, out=x) is x
    assert_only_view_changed(parent, before, x, want)


@pytest.mark.parametrize("layout", ["sliced", "reversed", "transposed"])
def test_add_conventions_strided_in_place(layout, rng):
    x, parent = make_layout((2, 30, 17), np.float32, layout, rng)
    before = parent.copy()
    want = fastpe.add_sinusoidal(x.copy(), convention="fairseq", padding_idx=3)
    fastpe.add_sinusoidal(x, convention="fairseq", padding_idx=3, out=x)
    assert_only_view_changed(parent, before, x, want)
    y, parent = make_layout((6, 17), np.float64, layout, rng)
    before = parent.copy()
    t = [0.5, 1, 2.25, 999, 3, 4]
    want = fastpe.add_timestep_embedding(y.copy(), t, flip_sin_to_cos=True)
    fastpe.add_timestep_embedding(y, t, flip_sin_to_cos=True, out=y)
    assert_only_view_changed(parent, before, y, want)


# --------------------------------------------------------------------------- threaded calls
# Large calls split their rows (or cells) over fastpe's thread pool; each value depends on
# its row alone, so a threaded call gives the bits of the same rows made in small calls.


@pytest.mark.parametrize("dtype", DTYPES)
def test_threaded_fractional_equals_small_calls(dtype, rng):
    t = np.sort(rng.uniform(0, 1000, 2048)) + 0.125  # 2048 x 160 pairs: threaded
    full = fastpe.timestep_embedding(t, 320, dtype=dtype)
    parts = [
        fastpe.timestep_embedding(t[i : i + 256], 320, dtype=dtype) for i in range(0, 2048, 256)
    ]
    np.testing.assert_array_equal(full, np.concatenate(parts))
    x = rng.standard_normal((2048, 320)).astype(dtype)
    got = fastpe.add_timestep_embedding(x, t)
    want = (x.astype(np.float64) + fastpe.timestep_embedding(t, 320, dtype=np.float64)).astype(
        dtype
    )
    np.testing.assert_array_equal(got, want)  # the float64 values, added and rounded once


@pytest.mark.parametrize("dtype", DTYPES)
def test_threaded_grid_is_its_axis_tables(dtype, rng):
    """A 64 x 64 grid (several MiB: threaded): every cell holds the axis tables' rows, bit
    for bit; its sum with x is x plus the float64 tables, rounded once."""
    n, dim = 64, 512
    got = fastpe.grid_sinusoidal((n, n), dim, cls_token=True, dtype=dtype)
    tab = fastpe.sinusoidal_table(n, dim // 2, layout="half", dtype=dtype)
    cells = got[1:].reshape(n, n, dim)
    np.testing.assert_array_equal(
        cells[..., : dim // 2], np.broadcast_to(tab[None], (n, n, dim // 2))
    )
    np.testing.assert_array_equal(
        cells[..., dim // 2 :], np.broadcast_to(tab[:, None], (n, n, dim // 2))
    )
    assert not got[0].any()
    x = rng.standard_normal((2, 1 + n * n, dim)).astype(dtype)
    t64 = fastpe.sinusoidal_table(n, dim // 2, layout="half", dtype=np.float64)
    full = np.zeros((n, n, dim))
    full[..., : dim // 2] = t64[None]
    full[..., dim // 2 :] = t64[:, None]
    want = x.copy()
    want[:, 1:] = (x[:, 1:].astype(np.float64) + full.reshape(n * n, dim)).astype(dtype)
    np.testing.assert_array_equal(fastpe.add_grid_sinusoidal(x, (n, n), cls_token=True), want)


# --------------------------------------------------------------------------- 16-bit dtypes
# float16 and bfloat16 (ml_dtypes): values computed in float64 from the exact angles and
# rounded once, to nearest even, into 16 bits; bounds in ulps of the 16-bit dtype, as in
# tests/test_half.py (_cases.HALF_*_ULP against the reference, half an ulp plus float64's
# error against mpmath).


def _half_dtypes():
    out = [pytest.param(np.dtype(np.float16), id="float16")]
    try:
        import ml_dtypes
    except ImportError:  # the optional bf16 extra
        return out
    return [*out, pytest.param(np.dtype(ml_dtypes.bfloat16), id="bfloat16")]


HALF = _half_dtypes()
HALF_EXACT_ULP = 0.5 + 2.0**-20  # correctly rounded but for float64's own error


def bits16(a):
    return np.asarray(a).view(np.uint16)


HALF_TABLES = {  # name: call(module, dtype)
    "fairseq": lambda m, dt: m.sinusoidal_table(
        300, 37, convention="fairseq", padding_idx=2, dtype=dt
    ),
    "t2t": lambda m, dt: m.sinusoidal_table(
        200, 64, convention="tensor2tensor", start_index=2**30, dtype=dt
    ),
    "timestep": lambda m, dt: m.timestep_embedding(TIMESTEPS, 33, dtype=dt),
    "timestep_flip": lambda m, dt: m.timestep_embedding(
        np.linspace(0, 999, 300) + 0.125, 320, flip_sin_to_cos=True, dtype=dt
    ),
    "timestep_int": lambda m, dt: m.timestep_embedding(np.arange(0, 1000, 7), 64, dtype=dt),
    "general": lambda m, dt: m.sinusoidal_embedding(
        np.r_[TIMESTEPS, np.arange(9)], 21, base=500.0, shift=-0.5, scale=0.75, dtype=dt
    ),
    "mae": lambda m, dt: m.grid_sinusoidal(14, 768, cls_token=True, dtype=dt),
    "mae_3d": lambda m, dt: m.grid_sinusoidal((3, 5, 6), 24, dtype=dt),
    "grid_t2t": lambda m, dt: m.grid_sinusoidal((5, 7), 30, convention="tensor2tensor", dtype=dt),
}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(HALF_TABLES))
def test_16_bit_tables_against_reference(dt, name):
    call = HALF_TABLES[name]
    got, want = call(fastpe, dt), call(reference, dt)
    assert got.dtype == dt and want.dtype == dt
    err = _cases.table_error(got, want)
    assert err <= _cases.HALF_TABLE_ULP, (name, dt, err)
    # the same table, written into out
    out = np.full(got.shape, 7.0, dtype=dt)
    if name.startswith("mae"):
        kw = dict(cls_token=True) if name == "mae" else {}
        grid = 14 if name == "mae" else (3, 5, 6)
        assert fastpe.grid_sinusoidal(grid, got.shape[1], out=out, **kw) is out
        np.testing.assert_array_equal(bits16(out), bits16(got))


@pytest.mark.parametrize("dt", HALF)
def test_16_bit_timesteps_against_mpmath(dt):
    """Fractional timesteps (the float-position kernel) in both orders: each value within
    half an ulp of the exact one, so rounded once, from float64."""
    dim = 32
    for flip in (False, True):
        got = fastpe.timestep_embedding(TIMESTEPS, dim, flip_sin_to_cos=flip, dtype=dt)
        s, c = exact_halves(TIMESTEPS, dim // 2, 10000.0, shift=1.0)
        first, second = (c, s) if flip else (s, c)
        exact = np.concatenate([first, second], axis=1)
        g = got.astype(np.float64)
        err = np.zeros(got.shape)
        for idx in np.ndindex(got.shape):
            u = float(_cases._spacing(float(exact[idx]), dt))
            err[idx] = float(abs(mpmath.mpf(float(g[idx])) - exact[idx])) / u
        assert err.max() <= HALF_EXACT_ULP, (dt, flip, err.max())


@pytest.mark.parametrize("dt", HALF)
def test_16_bit_grid_against_mpmath(dt):
    grid, dim = (3, 5, 6), 12
    got = fastpe.grid_sinusoidal(grid, dim, dtype=dt).reshape(*grid, dim).astype(np.float64)
    t, h, w = np.meshgrid(*(np.arange(g) for g in grid), indexing="ij")
    worst = 0.0
    for k, coord in enumerate((w, h, t)):
        s, c = exact_halves(coord.ravel(), 2, 10000.0)
        exact = np.concatenate([s, c], axis=1).reshape(*grid, 4)
        part = got[..., 4 * k : 4 * (k + 1)]
        for idx in np.ndindex(part.shape):
            u = float(_cases._spacing(float(exact[idx]), dt))
            worst = max(worst, float(abs(mpmath.mpf(float(part[idx])) - exact[idx])) / u)
    assert worst <= HALF_EXACT_ULP, (dt, worst)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("conv", ["fairseq", "tensor2tensor"])
def test_16_bit_1d_tables_against_mpmath(dt, conv):
    """Integer positions (the 16-bit table kernel): within half an ulp plus float64's
    error of the exact values."""
    pos = np.r_[0, 1, 2, 355, 1000, 4095, 103993, 2**33 + 5]
    got = fastpe.sinusoidal_table(positions=pos, dim=64, convention=conv, dtype=dt)
    s, c = exact_halves(pos, 32, 10000.0, shift=1.0)
    exact = np.concatenate([s, c], axis=1)
    g = got.astype(np.float64)
    worst = 0.0
    for idx in np.ndindex(got.shape):
        u = float(_cases._spacing(float(exact[idx]), dt))
        worst = max(worst, float(abs(mpmath.mpf(float(g[idx])) - exact[idx])) / u)
    assert worst <= HALF_EXACT_ULP, (dt, conv, worst)


HALF_ADDS = {  # name: (x shape, call(module, x, out))
    "timestep": (
        (len(TIMESTEPS), 33),
        lambda m, x, out: m.add_timestep_embedding(x, TIMESTEPS, flip_sin_to_cos=True, out=out),
    ),
    "general_batch": (
        (3, len(TIMESTEPS), 20),
        lambda m, x, out: m.add_sinusoidal_embedding(x, TIMESTEPS, order="interleaved", out=out),
    ),
    "fairseq": (
        (2, 40, 17),
        lambda m, x, out: m.add_sinusoidal(x, convention="fairseq", padding_idx=3, out=out),
    ),
    "mae": (
        (2, 50, 32),
        lambda m, x, out: m.add_grid_sinusoidal(x, (7, 7), cls_token=True, out=out),
    ),
    "grid_t2t": (
        (60, 26),
        lambda m, x, out: m.add_grid_sinusoidal(x, (3, 4, 5), convention="tensor2tensor", out=out),
    ),
}


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("name", sorted(HALF_ADDS))
def test_16_bit_adds_against_reference(dt, name):
    shape, call = HALF_ADDS[name]
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, shape))).astype(dt)
    before = bits16(x).copy()
    got = call(fastpe, x, None)
    want = call(reference, x, None)
    np.testing.assert_array_equal(bits16(x), before)  # out=None leaves x alone
    assert got.dtype == dt and want.dtype == dt
    err = _cases.add_error(got, want)
    assert err <= _cases.HALF_ADD_ULP, (name, dt, err)
    t = x.T.copy().T  # strided channels, in place
    assert call(fastpe, t, t) is t
    np.testing.assert_array_equal(bits16(t), bits16(got))


@pytest.mark.parametrize("dt", HALF)
def test_16_bit_fractional_add_rounds_once(dt):
    """x plus the exact value, rounded once: within half an ulp of the exact sum."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((len(TIMESTEPS), 16)).astype(dt)
    got = fastpe.add_timestep_embedding(x, TIMESTEPS).astype(np.float64)
    s, c = exact_halves(TIMESTEPS, 8, 10000.0, shift=1.0)
    exact = np.concatenate([s, c], axis=1)
    worst = 0.0
    for idx in np.ndindex(got.shape):
        e = mpmath.mpf(float(x[idx])) + exact[idx]
        u = float(_cases._spacing(float(e), dt))
        worst = max(worst, float(abs(mpmath.mpf(float(got[idx])) - e)) / u)
    assert worst <= HALF_EXACT_ULP, (dt, worst)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("layout", ["sliced", "reversed", "every_other"])
def test_16_bit_views_in_place(dt, layout, rng):
    """Views of a larger buffer are added to in place as their copies would be, and
    nothing else in the buffer changes; a reversed, sliced out gets the same table."""
    rows = 1 + 4 * 6
    base = rng.standard_normal((4, rows + 3, 40)).astype(dt)
    views = {
        "sliced": lambda p: p[1:4, 2 : 2 + rows, 3:27],
        "reversed": lambda p: p[3:0:-1, rows + 1 : 1 : -1, 30:6:-1],
        "every_other": lambda p: p[:3, :rows, 24:0:-2],
    }
    view = views[layout]
    before = bits16(base).copy()
    want = fastpe.add_grid_sinusoidal(view(base).copy(), (4, 6), cls_token=True)
    v = view(base)
    assert fastpe.add_grid_sinusoidal(v, (4, 6), cls_token=True, out=v) is v
    expected = before.copy().view(dt)
    view(expected)[...] = want
    np.testing.assert_array_equal(bits16(base), bits16(expected))
    t = np.zeros((30, 40), dt)
    out = t[28:3:-1, 5:37]  # reversed rows, a slice of the channels
    fastpe.timestep_embedding(np.linspace(0, 9, 25) + 0.5, 32, out=out)
    np.testing.assert_array_equal(
        bits16(out), bits16(fastpe.timestep_embedding(np.linspace(0, 9, 25) + 0.5, 32, dtype=dt))
    )
    outside = np.ones(t.shape, bool)
    outside[4:29, 5:37] = False
    assert not bits16(t)[outside].any()


# --------------------------------------------------------------------------- refusals

BAD_CALLS = [
    (lambda m: m.sinusoidal_table(8, 3, convention="fairseq"), ValueError, "dim must be 1 or >= 4"),
    (lambda m: m.sinusoidal_table(8, 2, convention="fairseq"), ValueError, "dims 2 and 3"),
    (
        lambda m: m.add_sinusoidal(
            np.zeros((2, 6, 8)), convention="fairseq", padding_idx=1, offset=np.array([2, 3])
        ),
        ValueError,
        "single int with convention='fairseq'",
    ),
    (
        lambda m: m.add_sinusoidal(
            np.zeros((2, 6, 8)), convention="tensor2tensor", offset=np.array([2, 3])
        ),
        ValueError,
        "transformer convention only",
    ),
    # frequencies whose angles would leave float64 (they were NaN rows, or a math domain
    # error from the step tables)
    (
        lambda m: m.timestep_embedding([0.0, 1.0], 9, downscale_freq_shift=4.01),
        ValueError,
        "frequency inf .*downscale_freq_shift=4.01",
    ),
    (
        lambda m: m.sinusoidal_table(
            3, 8, convention="tensor2tensor", min_timescale=1e300, max_timescale=1e-5
        ),
        ValueError,
        "min_timescale=1e\\+300",
    ),
    (
        lambda m: m.sinusoidal_embedding([0, 1, 2], 4, frequencies=[1e308, 1.0]),
        ValueError,
        "below 2\\*\\*947 .*",
    ),
    (lambda m: m.sinusoidal_table(4, 128, base=1e-308), ValueError, "base=1e-308 with dim=128"),
    (lambda m: m.grid_sinusoidal((4, 4), 128, base=1e-308), ValueError, "base=1e-308"),
    (
        lambda m: m.timestep_embedding(np.arange(3), 64, max_period=1e-300, downscale_freq_shift=0),
        ValueError,
        "from max_period=1e-300",
    ),
    (
        lambda m: m.apply_rope(np.ones((1, 4, 128)), base=1e-308),
        ValueError,
        "base=1e-308 with dim=128",
    ),
    (
        lambda m: m.apply_rope(np.ones((1, 4, 8)), inv_freq=[1e300, 1.0, 1.0, 1.0]),
        ValueError,
        "from inv_freq",
    ),
    (lambda m: m.sinusoidal_table(8, 8, convention="fairseq", base=500.0), ValueError, "base"),
    (lambda m: m.sinusoidal_table(8, 8, convention="fairseq", layout="half"), ValueError, "layout"),
    # the module's positions from padding_idx + 1: the range error names padding_idx
    (
        lambda m: m.add_sinusoidal(np.zeros((4, 8)), convention="fairseq", padding_idx=2**53 - 2),
        ValueError,
        "padding_idx=9007199254740990",
    ),
    # their layout is [sin | cos]: an explicit "interleaved" is not ignored
    (
        lambda m: m.sinusoidal_table(8, 8, convention="fairseq", layout="interleaved"),
        ValueError,
        "leave layout out",
    ),
    (
        lambda m: m.add_sinusoidal(np.zeros((2, 8)), convention="fairseq", layout="interleaved"),
        ValueError,
        "leave layout out",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="tensor2tensor", layout="interleaved"),
        ValueError,
        "leave layout out",
    ),
    (
        lambda m: m.add_sinusoidal(
            np.zeros((2, 8)), convention="tensor2tensor", layout="interleaved"
        ),
        ValueError,
        "leave layout out",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="fairseq", padding_idx=-1),
        ValueError,
        "padding_idx",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="fairseq", padding_idx=1.0),
        TypeError,
        "padding_idx",
    ),
    (lambda m: m.sinusoidal_table(8, 8, padding_idx=1), ValueError, "padding_idx"),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="fairseq", min_timescale=2.0),
        ValueError,
        "min_timescale",
    ),
    (lambda m: m.sinusoidal_table(8, 8, convention="bert"), ValueError, "convention"),
    (lambda m: m.sinusoidal_table(8, 8, convention="fairseq", base="x"), TypeError, "base"),
    (lambda m: m.sinusoidal_table(8, 8, convention="fairseq", layout=0), TypeError, "layout"),
    (
        lambda m: m.sinusoidal_table(
            8, 8, convention="tensor2tensor", min_timescale=1e-300, max_timescale=1e300
        ),
        ValueError,
        "max_timescale / min",
    ),
    (
        lambda m: m.add_sinusoidal(
            np.zeros((2, 8)), convention="tensor2tensor", positions=[[0, 1]]
        ),
        ValueError,
        "1-D",
    ),
    (lambda m: m.sinusoidal_table(8, 8, convention=1), TypeError, "convention"),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="tensor2tensor", max_timescale=0.0),
        ValueError,
        "max_timescale",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="tensor2tensor", min_timescale="1"),
        TypeError,
        "min_timescale",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="tensor2tensor", start_index=1, offset=2),
        ValueError,
        "start_index",
    ),
    (
        lambda m: m.sinusoidal_table(8, 8, convention="tensor2tensor", start_index=1.5),
        TypeError,
        "start_index",
    ),
    (lambda m: m.timestep_embedding(np.zeros((2, 2)), 8), ValueError, "1-D"),
    (lambda m: m.timestep_embedding([np.nan], 8), ValueError, "finite"),
    (lambda m: m.timestep_embedding([2.0**54 + 0.0], 8), ValueError, "2\\*\\*53"),
    (lambda m: m.timestep_embedding(["a"], 8), TypeError, "timesteps must be real numbers"),
    (lambda m: m.timestep_embedding([True], 8), TypeError, "timesteps must be real numbers"),
    (lambda m: m.timestep_embedding(None, 8), TypeError, "timesteps is required"),
    (lambda m: m.timestep_embedding(np.ma.masked_array([1.0]), 8), TypeError, "masked"),
    (lambda m: m.timestep_embedding([1], 8, downscale_freq_shift=4), ValueError, "divide by zero"),
    (lambda m: m.timestep_embedding([1], 8, flip_sin_to_cos=1), TypeError, "flip_sin_to_cos"),
    (lambda m: m.timestep_embedding([1], 8, max_period=-1.0), ValueError, "max_period"),
    (lambda m: m.timestep_embedding([1], 8, scale=np.inf), ValueError, "scale"),
    (lambda m: m.timestep_embedding([1], 8, scale=10**400), ValueError, "scale"),
    (lambda m: m.timestep_embedding([1], 0), ValueError, "dim"),
    (lambda m: m.timestep_embedding([1], 8, dtype=np.int16), TypeError, "dtype"),
    (lambda m: m.grid_sinusoidal((2, 2), 8, dtype=">f2"), TypeError, "dtype"),
    (lambda m: m.grid_sinusoidal((4, 4), 6), ValueError, "multiple of 4"),
    (lambda m: m.grid_sinusoidal((4, 4, 4), 8), ValueError, "multiple of 6"),
    (lambda m: m.grid_sinusoidal((4, 4.0), 8), TypeError, "grid_shape"),
    (lambda m: m.grid_sinusoidal("4x4", 8), TypeError, "grid_shape"),
    (lambda m: m.grid_sinusoidal((4, 4), 8, cls_token=None), TypeError, "cls_token"),
    (lambda m: m.grid_sinusoidal((4, 4), 8, convention="vit"), ValueError, "convention"),
    (lambda m: m.grid_sinusoidal((4, 4), 8, min_timescale=2.0), ValueError, "min_timescale"),
    (
        lambda m: m.grid_sinusoidal((4, 4), 4, convention="tensor2tensor"),
        ValueError,
        "divides by zero",
    ),
    (lambda m: m.timestep_embedding([1], 3), ValueError, "divide by zero"),
    (
        lambda m: m.grid_sinusoidal((4, 4), 16, convention="tensor2tensor", base=5.0),
        ValueError,
        "base",
    ),
    (lambda m: m.add_grid_sinusoidal(np.zeros((2, 15, 8)), (4, 4)), ValueError, "tokens"),
    (lambda m: m.sinusoidal_embedding([1, 2], 8, order="half"), ValueError, "order"),
    (
        lambda m: m.sinusoidal_embedding([1, 2], 8, frequencies=[1.0] * 4, base=2.0),
        ValueError,
        "frequencies",
    ),
    (lambda m: m.sinusoidal_embedding([1, 2], 8, frequencies=[1.0] * 3), ValueError, "frequencies"),
    (lambda m: m.sinusoidal_embedding([1, 2], 8, shift=4), ValueError, "shift"),
    (lambda m: m.add_sinusoidal_embedding(np.zeros((3, 8)), [1, 2]), ValueError, "length 3"),
    (lambda m: m.add_timestep_embedding(np.zeros((3, 2, 8)), [1, 2, 3]), ValueError, "2-D"),
]


@pytest.mark.parametrize("impl", [fastpe, reference], ids=["fast", "reference"])
@pytest.mark.parametrize("call, exc, match", BAD_CALLS)
def test_refusals(call, exc, match, impl):
    with pytest.raises(exc, match=match):
        call(impl)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, m: m.add_sinusoidal(x, convention="fairseq", padding_idx=-2, out=x),
        lambda x, m: m.add_sinusoidal(x, convention="tensor2tensor", max_timescale=-1.0, out=x),
        lambda x, m: m.add_grid_sinusoidal(
            x, (1, 2, 3, 1, 1, 1), convention="tensor2tensor", out=x
        ),
        lambda x, m: m.add_grid_sinusoidal(x, (3, 3), out=x),
        lambda x, m: m.add_sinusoidal_embedding(x, np.arange(6), shift=6, out=x),
        lambda x, m: m.add_sinusoidal_embedding(x[0], [0.5] * 5 + [np.inf], out=x[0]),
        lambda x, m: m.add_timestep_embedding(x[0], np.arange(6), scale="2", out=x[0]),
        lambda x, m: m.add_timestep_embedding(
            x[0], np.arange(6), downscale_freq_shift=6.01, out=x[0]
        ),
        lambda x, m: m.add_sinusoidal_embedding(
            x[0], np.arange(6), frequencies=[1e300] * 6, out=x[0]
        ),
    ],
)
@pytest.mark.parametrize("impl", [fastpe, reference], ids=["fast", "reference"])
def test_in_place_error_leaves_x_unchanged(call, impl, rng):
    x = rng.standard_normal((2, 6, 12)).astype(np.float32)
    before = x.copy()
    with pytest.raises((TypeError, ValueError)):
        call(x, impl)
    np.testing.assert_array_equal(x, before)


def test_out_error_leaves_out_unchanged():
    out = np.full((5, 8), 7.0, dtype=np.float32)
    with pytest.raises(ValueError):
        fastpe.grid_sinusoidal((2, 3), 8, out=out)  # 6 rows needed
    with pytest.raises(TypeError):
        fastpe.timestep_embedding(np.arange(5), 8, out=out, dtype=np.float64)
    assert (out == 7.0).all()
    # an odd dim's zero column is not written before frequencies too large are refused
    out9 = np.full((2, 9), 7.0, dtype=np.float32)
    for f in (fastpe.timestep_embedding, reference.timestep_embedding):
        with pytest.raises(ValueError, match="frequency inf"):
            f(np.array([0.0, 1.0]), 9, downscale_freq_shift=4.01, out=out9)
    assert (out9 == 7.0).all()


def test_import_compiles_nothing():
    import sys

    code = "import sys, fastpe; fastpe.grid_sinusoidal; print('numba' in sys.modules)"
    res = run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.strip() == "False"


# --------------------------------------------------------------------------- properties

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    pos=st.lists(st.floats(-1e7, 1e7, allow_nan=False), min_size=1, max_size=8),
    dim=st.integers(1, 40),
    base=st.floats(1.5, 1e6),
    shift=st.sampled_from([0.0, 1.0, 0.5, -2.0]),
    scale=st.floats(1e-3, 1e3),
    f64=st.booleans(),
)
def test_property_fast_matches_reference_and_orders_agree(pos, dim, base, shift, scale, f64):
    dt = np.float64 if f64 else np.float32
    n = dim // 2
    hypothesis.assume(n == 0 or n - shift != 0)
    kw = dict(base=base, shift=shift, scale=scale, dtype=dt)
    inter = fastpe.sinusoidal_embedding(pos, dim, order="interleaved", **kw)
    sc = fastpe.sinusoidal_embedding(pos, dim, order="sin_cos", **kw)
    cs = fastpe.sinusoidal_embedding(pos, dim, order="cos_sin", **kw)
    ref = reference.sinusoidal_embedding(pos, dim, order="sin_cos", **kw)
    assert _cases.table_error(sc, ref) <= (1.0 if dt == np.float32 else F64_UNITS)
    # the three orders are one set of values, permuted (the same bits)
    np.testing.assert_array_equal(sc[:, :n], cs[:, n : 2 * n])
    np.testing.assert_array_equal(sc[:, n : 2 * n], cs[:, :n])
    np.testing.assert_array_equal(sc[:, :n], inter[:, 0 : 2 * n : 2])
    np.testing.assert_array_equal(sc[:, n : 2 * n], inter[:, 1 : 2 * n : 2])
    assert (sc[:, 2 * n :] == 0).all()


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(
    grid=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    per_axis=st.integers(1, 4),
    cls=st.booleans(),
)
def test_property_grid_cells_depend_only_on_their_coordinates(grid, per_axis, cls):
    nd = len(grid)
    dim = 2 * per_axis * nd
    got = fastpe.grid_sinusoidal(tuple(grid), dim, cls_token=cls)
    big = fastpe.grid_sinusoidal(tuple(g + 2 for g in grid), dim)
    cells = got[int(cls) :].reshape(*grid, dim)
    np.testing.assert_array_equal(
        big.reshape(*(g + 2 for g in grid), dim)[tuple(slice(0, g) for g in grid)], cells
    )


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(
    pos=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=8),
    dim=st.integers(1, 40),
    order=st.sampled_from(["interleaved", "sin_cos", "cos_sin"]),
    half=st.sampled_from([p.values[0] for p in HALF]),
    data=st.data(),
)
def test_property_16_bit_fast_matches_reference(pos, dim, order, half, data):
    """Any float positions, dim and order in float16/bfloat16: the table within
    HALF_TABLE_ULP of the reference, the sum with x within HALF_ADD_ULP."""
    got = fastpe.sinusoidal_embedding(
        pos, dim, shift=1.0 if dim // 2 != 1 else 0.0, order=order, dtype=half
    )
    want = reference.sinusoidal_embedding(
        pos, dim, shift=1.0 if dim // 2 != 1 else 0.0, order=order, dtype=half
    )
    assert _cases.table_error(got, want) <= _cases.HALF_TABLE_ULP
    scale = data.draw(st.sampled_from([1e-3, 1.0, 300.0]))
    x = (np.random.default_rng(len(pos) * dim).standard_normal((len(pos), dim)) * scale).astype(
        half
    )
    kw = dict(order=order, shift=1.0 if dim // 2 != 1 else 0.0)
    a = fastpe.add_sinusoidal_embedding(x, pos, **kw)
    b = reference.add_sinusoidal_embedding(x, pos, **kw)
    assert _cases.add_error(a, b) <= _cases.HALF_ADD_ULP


# ---------------------------------------------------------------- repeated timestep calls


def _full_timestep(*args, **kwargs):
    """``timestep_embedding`` through the full argument layer (no plan)."""
    fastpe._plans.ENABLED = False
    try:
        return fastpe.timestep_embedding(*args, **kwargs)
    finally:
        fastpe._plans.ENABLED = True


TIMESTEP_STEPS = [
    np.array([999.5]),
    np.array([0.25, 981.0, -3.75, 2.0**40 + 0.5]),  # fractional and whole, mixed
    np.array([999.0, 0.0]),  # whole: the integer kernels
    np.array([999, 0, -5, 2**53]),  # int64
    np.arange(300) * 3.9 + 0.5,  # 300 rows
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [1, 4, 9, 320])
@pytest.mark.parametrize(
    "kw", [{}, {"flip_sin_to_cos": True, "downscale_freq_shift": 0}, {"scale": 1000}]
)
def test_planned_timesteps_bytes_of_full_path(dtype, dim, kw):
    """A sampling loop (same call, new timesteps each step) gives the full path's bytes, with
    out=None and with out given, whatever the timesteps of each step."""
    fastpe._plans.clear()
    out = np.full((1, dim), np.nan, dtype)
    for t in TIMESTEP_STEPS * 2:
        try:
            want = _full_timestep(t, dim, dtype=dtype, **kw)
        except ValueError as exc:  # scale=1000: frequencies above 1 allow less than 2**53
            assert "make angles beyond 2**53" in str(exc)
            with pytest.raises(ValueError, match=r"make angles beyond 2\*\*53"):
                fastpe.timestep_embedding(t, dim, dtype=dtype, **kw)
            continue
        got = fastpe.timestep_embedding(t, dim, dtype=dtype, **kw)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        if out.shape[0] != t.shape[0]:
            out = np.full((t.shape[0], dim), np.nan, dtype)
        r = fastpe.timestep_embedding(t, dim, out=out, **kw)
        assert r is out and out.tobytes() == want.tobytes()


def test_planned_timesteps_take_the_plan():
    fastpe._plans.clear()
    t = np.array([999.5, 3.25])
    fastpe.timestep_embedding(t, 8)
    key = fastpe.conventions._embed_key(
        "timestep_embedding", t, None, None, 8, False, 1, 1, 10000, None
    )
    assert fastpe._plans.lookup(key) is not None


@pytest.mark.parametrize(
    "t, kwargs, exc, match",
    [
        (np.array([1.5, np.nan]), {}, ValueError, "finite"),
        (np.array([1.5, np.inf]), {}, ValueError, "finite"),
        (np.array([1.5, 2.0**54]), {}, ValueError, "2\\*\\*53"),
        (np.array([1, 2**53 + 1]), {}, ValueError, "2\\*\\*53"),
        (np.array([1, -(2**63)]), {}, ValueError, "2\\*\\*53"),
        (np.array([1.5, 2.5]), {"out": np.empty((3, 8), np.float32)}, ValueError, "shape"),
        (np.array([1.5, 2.5]), {"flip_sin_to_cos": 1}, TypeError, "flip_sin_to_cos"),
        (np.array([1.5, 2.5]), {"dtype": "int8"}, TypeError, "dtype"),
        # frequencies up to about 46 (scale=1000): positions within 2**53 / 46
        (np.array([1.5, 2.0**50]), {"scale": 1000}, ValueError, "beyond 2\\*\\*53"),
        (np.array([1, 2**50]), {"scale": 1000}, ValueError, "beyond 2\\*\\*53"),
    ],
)
def test_refusals_made_with_a_timestep_plan_cached(t, kwargs, exc, match):
    """With a plan of the same call cached, a bad step is refused as without one."""
    fastpe._plans.clear()
    out = kwargs.get("out")
    if out is not None:  # a plan with out given, of the right length
        fastpe.timestep_embedding(np.array([0.5, 1.5, 2.5]), 8, out=out)
    fastpe.timestep_embedding(np.array([0.5, 1.5]), 8, out=None)
    fastpe.timestep_embedding(np.array([0.5, 1.5]), 8, flip_sin_to_cos=True)
    fastpe.timestep_embedding(np.array([0.5, 1.5]), 8, scale=1000)
    with pytest.raises(exc, match=match):
        fastpe.timestep_embedding(t, 8, **kwargs)


def test_planned_timesteps_out_read_only_or_overlapping_refused():
    fastpe._plans.clear()
    buf = np.zeros(20)
    t = buf[:2]
    t[:] = [0.5, 1.5]
    out = np.empty((2, 8))
    fastpe.timestep_embedding(t, 8, out=out)  # planned
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.timestep_embedding(t, 8, out=out)
    over = buf[4:].reshape(2, 8)  # out shares memory with the timesteps' buffer only
    r = fastpe.timestep_embedding(t, 8, out=over)
    assert r.tobytes() == _full_timestep(np.array([0.5, 1.5]), 8, dtype=np.float64).tobytes()
    for planned in (True, False):  # timesteps inside out: read before they are overwritten
        fastpe._plans.ENABLED = planned
        try:
            inside = np.zeros(16)
            inside[:2] = [0.5, 1.5]
            r = fastpe.timestep_embedding(inside[:2], 8, out=inside.reshape(2, 8))
        finally:
            fastpe._plans.ENABLED = True
        assert r.tobytes() == _full_timestep(np.array([0.5, 1.5]), 8, dtype=np.float64).tobytes()
    x = np.zeros((2, 8))
    x[0, :2] = [0.5, 1.5]  # the same for an add whose timesteps lie in x
    want = fastpe.add_timestep_embedding(x.copy(), x[0, :2].copy())
    assert fastpe.add_timestep_embedding(x, x[0, :2], out=x).tobytes() == want.tobytes()


def _full(f, *args, **kwargs):
    fastpe._plans.ENABLED = False
    try:
        return f(*args, **kwargs)
    finally:
        fastpe._plans.ENABLED = True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [1, 4, 9, 64])
@pytest.mark.parametrize("order", ["interleaved", "sin_cos", "cos_sin"])
def test_planned_adds_and_general_embeddings_bytes_of_full_path(dtype, dim, order, rng):
    """add_timestep_embedding, sinusoidal_embedding and add_sinusoidal_embedding, repeated
    with new positions (out=None, out=x, out given): the full path's bytes each time."""
    fastpe._plans.clear()
    for t in TIMESTEP_STEPS * 2:
        n = t.shape[0]
        x = rng.standard_normal((n, dim)).astype(dtype)
        kw = {"flip_sin_to_cos": order == "cos_sin"}
        want = _full(fastpe.add_timestep_embedding, x, t, **kw)
        assert fastpe.add_timestep_embedding(x, t, **kw).tobytes() == want.tobytes()
        y = x.copy()
        assert fastpe.add_timestep_embedding(y, t, out=y, **kw) is y
        assert y.tobytes() == want.tobytes()
        want = _full(fastpe.sinusoidal_embedding, t, dim, order=order, dtype=dtype)
        got = fastpe.sinusoidal_embedding(t, dim, order=order, dtype=dtype)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        want = _full(fastpe.add_sinusoidal_embedding, x, t, order=order, scale=0.5)
        y = x.copy()
        fastpe.add_sinusoidal_embedding(y, t, order=order, scale=0.5, out=y)
        assert y.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("order", ["interleaved", "sin_cos", "cos_sin"])
def test_planned_one_pair_bytes_of_full_path(dtype, dim, order, rng):
    """One pair a row (dim 2 or 3) takes the interleaved paths in either layout, planned
    or not (``fastpe._engine.run``, ``_embed_plan``): the full path's bytes, timesteps
    included (with a shift other than dim // 2)."""
    fastpe._plans.clear()
    for t in TIMESTEP_STEPS * 2:
        x = rng.standard_normal((t.shape[0], dim)).astype(dtype)
        want = _full(fastpe.sinusoidal_embedding, t, dim, order=order, dtype=dtype)
        got = fastpe.sinusoidal_embedding(t, dim, order=order, dtype=dtype)
        assert got.tobytes() == want.tobytes()
        want = _full(fastpe.add_sinusoidal_embedding, x, t, order=order, scale=0.5)
        y = x.copy()
        fastpe.add_sinusoidal_embedding(y, t, order=order, scale=0.5, out=y)
        assert y.tobytes() == want.tobytes()
        kw = {"flip_sin_to_cos": order == "cos_sin", "downscale_freq_shift": 0}
        want = _full(fastpe.timestep_embedding, t, dim, dtype=dtype, **kw)
        got = fastpe.timestep_embedding(t, dim, dtype=dtype, **kw)
        assert got.tobytes() == want.tobytes()


def test_planned_add_read_only_x_refused():
    fastpe._plans.clear()
    t = np.array([0.5, 1.5])
    x = np.zeros((2, 8), np.float32)
    fastpe.add_timestep_embedding(x, t, out=x)  # planned
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.add_timestep_embedding(x, t, out=x)
    with pytest.raises(ValueError, match="length"):
        fastpe.add_timestep_embedding(np.zeros((3, 8), np.float32), t)


@pytest.mark.parametrize(
    "steps", [np.array([999.5, 3.25]), np.array([999.0, 3.0]), np.array([999, 3])]
)
@pytest.mark.parametrize("flip", [False, True])
def test_planned_calls_skip_the_argument_layer(steps, flip, monkeypatch):
    """Once planned, a call with fractional, whole or int64 timesteps runs without the
    argument layer (it would raise here) and gives the full path's bytes."""
    fastpe._plans.clear()
    want = _full(fastpe.timestep_embedding, steps, 8, flip_sin_to_cos=flip)
    fastpe.timestep_embedding(np.array([0.5, 1.5]), 8, flip_sin_to_cos=flip)  # the plan

    def refuse(*args, **kwargs):
        raise AssertionError("the planned call went through the argument layer")

    monkeypatch.setattr(fastpe.conventions, "parse_timestep", refuse)
    got = fastpe.timestep_embedding(steps, 8, flip_sin_to_cos=flip)
    assert got.tobytes() == want.tobytes()


def _spied_entries(monkeypatch, fn: str):
    """The entry points of the one plan of ``fn`` (one found so far), its key, a list of
    that entry's calls, and a list of the alignment each planned call hands call_entry (the
    full path hands none)."""
    plan = next(p for k, p in fastpe._plans._PLANS.items() if k[0] == fn)
    entries = plan[-1]
    assert len(entries) == 1
    (name, found), made = next(iter(entries.items())), []
    entries[name] = lambda *args: made.append(name) or found(*args)
    seen: list = []
    call_entry = fastpe._engine.call_entry
    monkeypatch.setattr(
        fastpe._engine, "call_entry", lambda e, k, a, *r: seen.append(a) or call_entry(e, k, a, *r)
    )
    return entries, name, made, seen


@pytest.mark.parametrize(
    "steps", [np.array([999.5, 3.25]), np.array([999.0, 3.0]), np.array([999, 3])]
)
@pytest.mark.parametrize("add", [False, True])
def test_planned_calls_through_entry_points_of_their_types(steps, add, monkeypatch):
    """A planned call calls its kernel's compiled entry point, kept per kernel and flag
    (fastpe._engine.call_entry), for aligned arrays alone: unaligned positions or output
    (the same plan key) go through numba's dispatcher; a mode switched between calls
    takes the entry of its own types. The full path's bytes in every case."""
    fastpe._plans.clear()
    dt = np.float32
    x0 = np.linspace(-1, 1, 16, dtype=dt).reshape(2, 8)

    def call(t, full=False, out_unaligned=False):
        f = _full if full else (lambda g, *a, **k: g(*a, **k))
        if add:
            x = unaligned(x0) if out_unaligned else x0.copy()
            return f(fastpe.add_timestep_embedding, x, t, out=x)
        out = np.empty((2, 8), dt)
        out = unaligned(out) if out_unaligned else out
        return f(fastpe.timestep_embedding, t, 8, out=out)

    call(steps.copy())  # the plan
    call(steps.copy())  # the first planned call: the dispatcher, which finds the entry
    fn = "add_timestep_embedding" if add else "timestep_embedding"
    entries, _, made, seen = _spied_entries(monkeypatch, fn)
    for mode in (True, False, True):
        # float32 sums by the recurrence or folded: another flag, another entry
        monkeypatch.setitem(fastpe._engine.MODES, "recurrence", mode)
        want = call(steps.copy(), full=True)
        n = len(made)
        seen.clear()
        assert call(steps.copy()).tobytes() == want.tobytes()
        assert call(unaligned(steps)).tobytes() == want.tobytes()
        assert call(steps.copy(), out_unaligned=True).tobytes() == want.tobytes()
        assert seen == [True, False, False]  # each through its plan
        # the entry found with the mode on: taken again then, and where the mode is not
        # asked (fractional timesteps); whole ones with the mode off take another
        assert len(made) == n + (1 if mode or steps[0] % 1 else 0)
    # whole timesteps: the integer kernels, whose flag follows the mode (fractional ones:
    # the fractional kernel, one entry)
    assert len(entries) == (1 if steps[0] % 1 else 2)


def test_planned_calls_without_an_entry_point_keep_the_dispatcher(monkeypatch):
    # a numba that keeps its compiled functions elsewhere: the dispatcher, the same bits
    monkeypatch.setattr(fastpe._engine, "_entry_point", lambda dispatcher, args: dispatcher)
    fastpe._plans.clear()
    t = np.array([999.5, 3.25])
    want = _full(fastpe.timestep_embedding, t, 8)
    for _ in range(3):
        assert fastpe.timestep_embedding(t, 8).tobytes() == want.tobytes()
    plan = next(p for k, p in fastpe._plans._PLANS.items() if k[0] == "timestep_embedding")
    assert plan[-1] == {"frac": fastpe.conventions._kernels().frac_kernel}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(
    "make",
    [
        lambda dt: np.empty((5, 8), dt),
        lambda dt: np.empty((2, 3, 8), dt),
        lambda dt: np.empty((1, 8), dt),
        lambda dt: np.empty((1, 1, 6), dt),
        lambda dt: np.empty((4, 1, 6), dt),
        lambda dt: np.empty((3, 2, 1), dt),
        # a length-1 axis of any stride: C-contiguous all the same
        lambda dt: np.lib.stride_tricks.as_strided(
            np.empty(8, dt), (1, 8), (13, np.dtype(dt).itemsize)
        ),
        lambda dt: np.empty((6, 9), dt)[:, :4],  # not contiguous: the general path
        lambda dt: np.empty((4, 6), dt)[::-1],
    ],
)
def test_geometry_of_contiguous_parts_as_of_any_view(make, dtype):
    # _geometry's short way for a C-contiguous part gives the record of the general one
    part = make(dtype)
    got, want = fastpe.conventions._geometry(part), fastpe.conventions._geometry_of_view(part)
    assert got[1:] == want[1:]
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
    assert got[0].ctypes.data == want[0].ctypes.data


# ------------------------------------------------------------------ repeated grid calls


GRID_CASES = [
    ((3, 4), 16, {}),
    ((3, 4), 16, {"cls_token": True}),
    ((2, 3, 5), 24, {}),
    ((4, 4), 20, {"convention": "tensor2tensor"}),
    (3, 8, {"cls_token": True, "base": 100.0}),
]


@pytest.mark.parametrize("dtype", [*DTYPES, *HALF])
@pytest.mark.parametrize("grid, dim, kw", GRID_CASES)
def test_planned_grids_bytes_of_full_path(grid, dim, kw, dtype, rng):
    """A repeated grid call (a ViT's per-batch embedding) takes its plan and gives the full
    path's bytes: added in place, 2-D and batched, and written (new, and into out=)."""
    fastpe._plans.clear()
    sides = grid if type(grid) is tuple else (grid, grid)
    rows = (1 if kw.get("cls_token") else 0) + int(np.prod(sides))
    for batch in ((), (3,)):
        x0 = rng.standard_normal((*batch, rows, dim)).astype(dtype)
        want = _full(fastpe.add_grid_sinusoidal, x0.copy(), grid, **kw)
        for _ in range(3):  # the first call leaves the plan, the others take it
            x = x0.copy()
            assert fastpe.add_grid_sinusoidal(x, grid, out=x, **kw) is x
            assert x.tobytes() == want.tobytes()
    want = _full(fastpe.grid_sinusoidal, grid, dim, dtype=dtype, **kw)
    out = np.full((rows, dim), np.nan, dtype)
    for _ in range(3):
        got = fastpe.grid_sinusoidal(grid, dim, dtype=dtype, **kw)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        out[:] = np.nan
        assert fastpe.grid_sinusoidal(grid, dim, out=out, **kw) is out
        assert out.tobytes() == want.tobytes()


def test_planned_grids_skip_the_argument_layer(monkeypatch):
    """Once planned, a grid call (add in place, table new or into out=) runs without the
    argument layer (it would raise here)."""
    fastpe._plans.clear()
    x = np.ones((2, 17, 32), np.float32)
    out = np.empty((17, 32), np.float32)
    fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True, out=x)
    fastpe.grid_sinusoidal((4, 4), 32, cls_token=True)
    fastpe.grid_sinusoidal((4, 4), 32, cls_token=True, out=out)

    def refuse(*args, **kwargs):
        raise AssertionError("the planned call went through the argument layer")

    monkeypatch.setattr(fastpe.conventions, "parse_grid", refuse)
    fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True, out=x)
    fastpe.grid_sinusoidal((4, 4), 32, cls_token=True)
    fastpe.grid_sinusoidal((4, 4), 32, cls_token=True, out=out)
    with pytest.raises(AssertionError, match="argument layer"):  # not planned: out=None add
        fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("add", [False, True])
def test_planned_grids_through_entry_points_of_their_types(add, dtype, monkeypatch):
    """A planned grid call on the caller's thread calls its kernel's compiled entry point
    (fastpe._engine.call_entry), for an aligned array alone: an unaligned one (the same plan
    key) goes through numba's dispatcher; a write whose streaming stores switch on (their
    bound lowered) takes an entry of its own. The full path's bytes in every case."""
    fastpe._plans.clear()
    kw = {"cls_token": True}

    def call(grid=(3, 4), full=False, unaligned_rows=False):
        f = _full if full else (lambda g, *a, **k: g(*a, **k))
        if add:
            x = np.linspace(-1, 1, 13 * 16).reshape(13, 16).astype(dtype)
            x = unaligned(x) if unaligned_rows else x
            return f(fastpe.add_grid_sinusoidal, x, grid, out=x, **kw)
        out = np.empty((13, 16), dtype)
        out = unaligned(out) if unaligned_rows else out
        return f(fastpe.grid_sinusoidal, grid, 16, out=out, **kw)

    call()  # the plan
    call()  # the first planned call: the dispatcher, which finds the entry
    fn = "add_grid_sinusoidal" if add else "grid_sinusoidal"
    entries, name, made, seen = _spied_entries(monkeypatch, fn)
    want = call(full=True)
    assert call().tobytes() == want.tobytes()
    assert call(unaligned_rows=True).tobytes() == want.tobytes()
    assert seen == [True, False] and made == [name]
    monkeypatch.setattr(fastpe._engine, "_STREAM_MIN_BYTES", 0)  # a write streams
    assert call().tobytes() == want.tobytes()
    assert call().tobytes() == want.tobytes()
    assert len(entries) == (1 if add else 2) and len(made) == (3 if add else 1)


def test_refusals_made_with_a_grid_plan_cached():
    """With a plan of the same call cached, what the full path refuses is still refused:
    an array no longer writeable, grid sides of another type (2.0 for 2), a list for a
    tuple (not planned, as sides other than Python ints), another dtype or shape (another
    key)."""
    fastpe._plans.clear()
    x = np.zeros((4, 8), np.float32)
    out = np.zeros((4, 8), np.float32)
    fastpe.add_grid_sinusoidal(x, (2, 2), out=x)
    fastpe.grid_sinusoidal((2, 2), 8, out=out)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.add_grid_sinusoidal(x, (2, 2), out=x)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastpe.grid_sinusoidal((2, 2), 8, out=out)
    y = np.zeros((4, 8), np.float32)
    fastpe.add_grid_sinusoidal(y, (2, 2), out=y)
    with pytest.raises((TypeError, ValueError), match="grid_shape"):
        fastpe.add_grid_sinusoidal(y, (2.0, 2.0), out=y)
    with pytest.raises((TypeError, ValueError), match="grid_shape"):
        fastpe.grid_sinusoidal((2.0, 2), 8)
    with pytest.raises(ValueError, match="tokens"):
        fastpe.add_grid_sinusoidal(np.zeros((5, 8), np.float32), (2, 2), out=None)
    with pytest.raises(ValueError, match="multiple of 4"):
        fastpe.grid_sinusoidal((2, 2), 6)
    key = fastpe.conventions._grid_key(
        "add_grid_sinusoidal", y, y, (2, 2), False, "mae", 10000.0, None, None
    )
    assert fastpe._plans.lookup(key) is not None
    assert fastpe.conventions._grid_key("add_grid_sinusoidal", y, y, [2, 2]) is None
    for sides in ((2.0, 2), (True, 2), (np.int64(2), 2), 2.0):  # not Python ints: unplanned
        assert fastpe.conventions._grid_key("add_grid_sinusoidal", y, y, sides) is None


def test_empty_grids_make_no_tables():
    """A grid with no cell to write (a side of 0, a batch of 0) makes none of its per-axis
    tables, planned or not: a side of 2**40 beside a 0 would need terabytes of them."""
    for _ in range(2):
        t = fastpe.grid_sinusoidal((0, 2**40), 8)
        assert t.shape == (0, 8)
        c = fastpe.grid_sinusoidal((0, 2**40), 8, cls_token=True)
        assert c.shape == (1, 8) and not c.any()
        x = np.zeros((0, 8), np.float32)
        assert fastpe.add_grid_sinusoidal(x, (0, 2**40), out=x) is x
        b = np.ones((0, 1, 8), np.float32)  # a batch of 0 (the class token's row only)
        assert fastpe.add_grid_sinusoidal(b, (2**40, 0), cls_token=True, out=b) is b


def test_every_grid_argument_is_in_the_plan_key():
    """A new argument of the grid functions must enter their plan key (the scalars passed
    to ``_grid_key``) or keep their calls off the plan path; then add it here."""
    import inspect

    keyed = {"cls_token", "convention", "base", "min_timescale", "max_timescale"}
    table = set(inspect.signature(fastpe.grid_sinusoidal).parameters)
    assert table == keyed | {"grid_shape", "dim", "dtype", "out"}, table
    add = set(inspect.signature(fastpe.add_grid_sinusoidal).parameters)
    assert add == keyed | {"x", "grid_shape", "out"}, add


# --------------------------------------------------------------------------- tiled grids
# A grid whose last axis's table rows do not fit in TILE_BYTES is taken in tiles of that
# axis (fastpe._kernels.fractional.grid_spans); the order of the cells changes, no value.


@pytest.mark.parametrize("itemsize", [2, 4, 8])
@pytest.mark.parametrize("grid", [(5, 7), (2, 3, 40), (9,), (4, 1)])
def test_grid_spans_cover_each_item_once(grid, itemsize):
    from fastpe._kernels.fractional import grid_spans

    g = np.array(grid, dtype=np.int64)
    n = int(np.prod(grid))
    last = len(grid) - 1
    tile_bytes = 4096
    for width in [0, 8, tile_bytes // (3 * itemsize), tile_bytes // itemsize + 1]:
        blocks = np.array([[last, 0, width, 0], [-1, width, 4, 0]], dtype=np.int64)
        for i0, i1 in [(0, n), (0, 3 * n), (1, 2 * n - 1), (n - 1, n + 1), (3, 3), (2, n)]:
            spans = grid_spans(i0, i1, g, blocks, itemsize, tile_bytes)
            items = np.concatenate([np.arange(a, z) for a, z in spans])
            np.testing.assert_array_equal(np.sort(items), np.arange(i0, i1))


@pytest.mark.parametrize("zen5", [False, True])
def test_grid_tile_by_host(monkeypatch, zen5):
    """Grid tiles hold 1 MiB of table rows on Zen 5, 256 KiB elsewhere, unless pinned."""
    monkeypatch.setattr(fastpe._engine, "_zen5", zen5)
    assert fastpe.conventions.grid_tile_bytes() == (1 << 20 if zen5 else 256 * 1024)
    monkeypatch.setattr(fastpe.conventions, "GRID_TILE_BYTES", 16384)
    assert fastpe.conventions.grid_tile_bytes() == 16384


@pytest.mark.parametrize("zen5", [True, False])
def test_grid_sum_prefetch_by_host(monkeypatch, zen5):
    """float32/float64 grid sums prefetch each cell's lines 8 KiB ahead on Zen 5; on the
    CPUs of ``_PACED_GRID_CPUS`` paced, 256 bytes at a time 6 KiB ahead, in arrays of at
    least the cache they may count on; elsewhere not at all."""
    c = fastpe.conventions
    monkeypatch.setattr(fastpe._engine, "_zen5", zen5)
    monkeypatch.setattr(c, "_grid_paced", None)
    monkeypatch.setattr(fastpe._engine, "_host_cpu_name", lambda: "emeraldrapids")
    share = _timing.cache_share_bytes()
    for nbytes, itemsize in [(share, 4), (share, 8), (share - 1, 4), (1 << 30, 8)]:
        got = c.grid_sum_prefetch(nbytes, itemsize)
        if zen5:
            assert got == (8192 // itemsize, 0)
        else:
            assert got == ((6144 // itemsize, 256 // itemsize) if nbytes >= share else (0, 0))
    monkeypatch.setattr(c, "GRID_PACE_MIN_BYTES", 0)
    assert c.grid_sum_prefetch(64, 4) == ((2048, 0) if zen5 else (1536, 64))
    monkeypatch.setattr(c, "GRID_PACE_AHEAD_BYTES", 0)  # no distance: no prefetch
    assert c.grid_sum_prefetch(64, 4) == ((2048, 0) if zen5 else (0, 0))
    monkeypatch.setattr(c, "GRID_PACE_AHEAD_BYTES", 6144)
    monkeypatch.setattr(c, "_grid_paced", None)  # another CPU: asked again
    monkeypatch.setattr(fastpe._engine, "_host_cpu_name", lambda: "rocketlake")
    assert c.grid_sum_prefetch(1 << 30, 4) == ((2048, 0) if zen5 else (0, 0))


@pytest.mark.parametrize("zen5", [True, False])
def test_grid16_prefetch_by_host(monkeypatch, zen5):
    """16-bit grid sums prefetch each block's lines 2 KiB ahead (1024 elements), on Zen 5
    and other CPUs; on the CPUs of ``_PACED_GRID_CPUS`` paced, each group of 16 values the
    line 4 KiB past it, in arrays of at least the cache they may count on."""
    c = fastpe.conventions
    monkeypatch.setattr(fastpe._engine, "_zen5", zen5)
    monkeypatch.setattr(c, "_grid_paced", None)
    monkeypatch.setattr(fastpe._engine, "_host_cpu_name", lambda: "emeraldrapids")
    share = _timing.cache_share_bytes()
    for nbytes in (share, share - 1, 1 << 30):
        paced = not zen5 and nbytes >= share
        assert c.grid16_prefetch(nbytes) == ((0, 4096) if paced else (1024, 0))
    monkeypatch.setattr(c, "GRID_PACE16_AHEAD_BYTES", 0)  # no distance: per block
    assert c.grid16_prefetch(1 << 30) == (1024, 0)
    monkeypatch.setattr(c, "GRID_PACE16_AHEAD_BYTES", 4096)
    monkeypatch.setattr(c, "_grid_paced", None)  # another CPU: asked again
    monkeypatch.setattr(fastpe._engine, "_host_cpu_name", lambda: "rocketlake")
    assert c.grid16_prefetch(1 << 30) == (1024, 0)


def test_paced_16_bit_pass_prefetches():
    """The paced float32 pass of 16-bit grid sums holds a prefetch (a hint: no value shows
    it, so the IR is read, the kernel compiled afresh), the unpaced one none."""
    import numba

    from fastpe._kernels import fractional16 as f16

    flat = np.zeros(40, np.uint16)
    pair = np.zeros((2, 40), np.float32)
    pend = np.zeros(3, np.int64)

    def ir_of(f):
        g = numba.njit(f)
        g(flat, pair, pend)
        return g.inspect_llvm(g.signatures[0])

    def paced(flat, pair, pend):
        return f16._first_f16_paced(flat, 0, pair, 0, 40, pend, 4096)

    def paced_bf16(flat, pair, pend):
        return f16._first_bf16_paced(flat, 0, pair, 0, 40, pend, 4096)

    def plain(flat, pair, pend):
        return f16._first_f16(flat, 0, pair, 0, 40, pend)

    assert "llvm.prefetch" in ir_of(paced)
    assert "llvm.prefetch" in ir_of(paced_bf16)
    assert "llvm.prefetch" not in ir_of(plain)


@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("pace", [64, 4096, 1 << 30])
def test_16_bit_grid_sums_paced_same_bits(monkeypatch, dt, pace):
    """A 16-bit grid sum paced (each group prefetching the line ``pace`` bytes on, past
    the array's end too: a hint) launches ``grid_add16_kernel`` with ``(0, pace)`` last and
    gives the bytes of the sum prefetched per block, whatever this CPU is; blocks of a
    width that is not a multiple of 16 (their last group masked) and strided channels
    included."""
    from _util import launches

    from fastpe._kernels import fractional16

    c = fastpe.conventions
    monkeypatch.setattr(fastpe._engine, "_zen5", False)
    monkeypatch.setattr(c, "_grid_paced", True)
    monkeypatch.setattr(c, "GRID_PACE_MIN_BYTES", 0)
    monkeypatch.setattr(c, "GRID_PACE16_AHEAD_BYTES", pace)
    seen = launches(monkeypatch, fractional16.grid_add16_kernel, lambda k, args: args[-2:])
    rng = np.random.default_rng(5)
    for grid, dim in [((6, 9), 100), ((3, 4, 5), 96)]:
        x = rng.standard_normal((2, int(np.prod(grid)), dim)).astype(dt)
        wide = rng.standard_normal((2, int(np.prod(grid)), 2 * dim)).astype(dt)
        got = [
            fastpe.add_grid_sinusoidal(x, grid),
            fastpe.add_grid_sinusoidal(wide[..., ::2], grid),
        ]
        monkeypatch.setattr(c, "_grid_paced", False)
        want = [
            fastpe.add_grid_sinusoidal(x, grid),
            fastpe.add_grid_sinusoidal(wide[..., ::2], grid),
        ]
        monkeypatch.setattr(c, "_grid_paced", True)
        for g, w in zip(got, want):
            assert bits16(g).tobytes() == bits16(w).tobytes()
    assert seen == [(0, pace), (0, pace), (1024, 0), (1024, 0)] * 2


@pytest.mark.parametrize("dt", DTYPES)
def test_grid_sums_launch_with_their_prefetch(monkeypatch, dt):
    """A grid sum's first call and its planned calls launch ``grid_add_kernel`` with
    ``grid_sum_prefetch`` of the cells they add to (their bytes, not the table's): ahead
    and burst last, in that order."""
    from _util import launches

    from fastpe._kernels import fractional

    c = fastpe.conventions
    monkeypatch.setattr(c, "_grid_paced", True)
    monkeypatch.setattr(fastpe._engine, "_zen5", False)
    size = np.dtype(dt).itemsize
    x = np.zeros((2, 17, 24), dtype=dt)
    monkeypatch.setattr(c, "GRID_PACE_MIN_BYTES", x[:, 1:].nbytes)  # the cells' bytes
    seen = launches(monkeypatch, fractional.grid_add_kernel, lambda k, args: args[-2:])
    for _ in range(2):  # the first call, then the plan
        fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True)
    fastpe.add_grid_sinusoidal(x[:, :9], (2, 4), cls_token=True)  # under the bound
    paced = (6144 // size, 256 // size)
    assert seen == [paced, paced, (0, 0)]
    monkeypatch.setattr(fastpe._engine, "_zen5", True)
    seen.clear()
    fastpe.add_grid_sinusoidal(x, (4, 4), cls_token=True)
    assert seen == [(8192 // size, 0)]


@pytest.mark.parametrize("dtype", [*DTYPES, np.float16])
@pytest.mark.parametrize("grid, dim, batch", [((17, 40), 512, None), ((3, 5, 40), 768, 2)])
@pytest.mark.parametrize("ahead", [None, 0, 1 << 30])
@pytest.mark.parametrize("scheme", ["cell", "paced"])
def test_tiled_grid_is_its_axis_tables(grid, dim, batch, dtype, ahead, scheme, rng, monkeypatch):
    """With tiles of 16 KiB of table rows (8 to 32 cells of the last axis here), grids over
    1 MiB (threaded: work split at cells within a grid row) are taken in tiles. Every cell
    holds its axis tables' rows; a sum is x plus the float64 tables, rounded once, whatever
    the sums prefetch (the default distance, none, or past the array's end: clipped), each
    cell's lines at its start as on Zen 5 or paced as on the CPUs of ``_PACED_GRID_CPUS``
    (groups of 88 bytes here, which divide no block's width), whatever this CPU is."""
    monkeypatch.setattr(fastpe.conventions, "GRID_TILE_BYTES", 16384)
    monkeypatch.setattr(fastpe._engine, "_zen5", scheme == "cell")
    if scheme == "paced":
        monkeypatch.setattr(fastpe.conventions, "_grid_paced", True)
        monkeypatch.setattr(fastpe.conventions, "GRID_PACE_MIN_BYTES", 0)
        monkeypatch.setattr(fastpe.conventions, "GRID_PACE_BURST_BYTES", 88)
    if ahead is not None:
        monkeypatch.setattr(fastpe.conventions, "GRID_AHEAD_BYTES", ahead)
        monkeypatch.setattr(fastpe.conventions, "GRID_AHEAD16_BYTES", ahead)
        monkeypatch.setattr(fastpe.conventions, "GRID_PACE_AHEAD_BYTES", ahead)
    if scheme == "paced" and dtype != np.float16:  # paced indeed (ahead 0: no prefetch)
        got = fastpe.conventions.grid_sum_prefetch(1, np.dtype(dtype).itemsize)
        assert (got[0] > 0 and got[1] > 0) if ahead != 0 else got == (0, 0)
    # 8 workers whatever the machine's thread count: each range then holds whole grid
    # rows (85 to 150 cells against rows of 40), which tiles need; more would split it finer
    monkeypatch.setattr(fastpe.conventions, "_workers", lambda n, threads: min(n, 8))
    per = dim // len(grid)
    assert per * 8 * grid[-1] > 16384 and per * 2 * grid[-1] > 16384  # every case tiled

    def full(dt):
        tabs = [fastpe.sinusoidal_table(n, per, layout="half", dtype=dt) for n in grid]
        out = np.zeros((*grid, dim), dtype=dt)
        for k, tab in enumerate(tabs):  # [w | h | t]: the last axis first
            shape = [1] * len(grid) + [per]
            shape[k] = grid[k]
            j = len(grid) - 1 - k
            out[..., j * per : (j + 1) * per] = tab.reshape(shape)
        return out.reshape(-1, dim)

    got = fastpe.grid_sinusoidal(grid, dim, cls_token=True, dtype=dtype)
    assert got[1:].tobytes() == full(dtype).tobytes()
    assert not got[0].any()
    lead = () if batch is None else (batch,)
    x = rng.standard_normal((*lead, 1 + int(np.prod(grid)), dim)).astype(dtype)
    want = x.copy()
    want[..., 1:, :] = (x[..., 1:, :].astype(np.float64) + full(np.float64)).astype(dtype)
    got = fastpe.add_grid_sinusoidal(x, grid, cls_token=True)
    assert got.tobytes() == want.tobytes()
