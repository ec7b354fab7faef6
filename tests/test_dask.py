"""fastpe.dask: lazy RoPE and sinusoidal encodings of dask arrays, equal to the in-memory ones.

Every result is compared bit for bit with the in-memory function on the whole array, on
dask's threaded scheduler and on a two-process ``distributed.LocalCluster``.
"""

from __future__ import annotations

import doctest
import importlib
import logging
import sys

import numpy as np
import pytest
from _util import run_python

da = pytest.importorskip("dask.array")

import dask  # noqa: E402

import fastpe  # noqa: E402
import fastpe.dask as fdask  # noqa: E402

LAYOUTS = ["interleaved", "half"]
DTYPES = [np.float32, np.float64]
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}


def _positions(shape, seed, high=100_000):
    """Unsorted positions, some past 2**16 (where the kernels' anchors change)."""
    return np.random.default_rng(seed).integers(0, high, size=shape)


# (id, shape, seq_axis, chunks, position kwargs). Chunks split every axis but the last.
ROPE_CASES = [
    ("2d", (37, 16), None, (10, -1), {}),
    ("2d-offset", (37, 16), 0, (5, -1), {"offset": 65_530}),
    ("3d", (3, 29, 12), None, (2, 7, -1), {"offset": 5}),
    ("3d-row-offsets", (3, 29, 12), 1, (1, 8, -1), {"offset": np.array([0, 65_520, 3])}),
    ("3d-positions-1d", (3, 29, 12), 1, (2, 6, -1), {"positions": _positions(29, 1)}),
    ("3d-positions-2d", (3, 29, 12), 1, (2, 6, -1), {"positions": _positions((3, 29), 2)}),
    ("4d", (2, 21, 3, 8), 1, (1, 5, 2, -1), {"offset": 65_530}),
    ("4d-bhsd-row-offsets", (2, 3, 21, 8), 2, (1, 2, 6, -1), {"offset": np.array([4, 9])}),
    (
        "4d-bhsd-positions-2d",
        (2, 3, 21, 8),
        -2,
        (1, 2, 6, -1),
        {"positions": _positions((2, 21), 3)},
    ),
    ("packed-3d", (23, 4, 8), 0, (6, 3, -1), {"offset": 2}),
    ("packed-3d-positions", (23, 4, 8), 0, (6, 3, -1), {"positions": _positions(23, 4)}),
    ("packed-4d", (11, 2, 3, 6), 0, (4, 1, 2, -1), {}),
]
ROPE_IDS = [c[0] for c in ROPE_CASES]


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _rotary_dim(dim, partial):
    return max(2, (dim // 2) // 2 * 2) if partial else None


def _check_lazy(res, darr, name):
    assert isinstance(res, da.Array)
    assert res.chunks == darr.chunks and res.dtype == darr.dtype
    assert res.name.startswith(f"fastpe-{name}-")


# --------------------------------------------------------------------------- threaded


@pytest.mark.parametrize("partial", [False, True], ids=["full", "partial"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ROPE_CASES, ids=ROPE_IDS)
def test_rope_equals_in_memory(case, dtype, layout, partial):
    _, shape, seq_axis, chunks, where = case
    x = _data(shape, dtype)
    x0 = x.copy()
    kw = dict(where, layout=layout, rotary_dim=_rotary_dim(shape[-1], partial), seq_axis=seq_axis)
    want = fastpe.apply_rope(x, **kw)
    darr = da.from_array(x, chunks=chunks)
    res = fdask.apply_rope(darr, **kw)
    _check_lazy(res, darr, "apply_rope")
    np.testing.assert_array_equal(res.compute(scheduler="threads"), want)
    np.testing.assert_array_equal(x, x0)  # from_array's blocks are views of x: not written


@pytest.mark.parametrize("case", ROPE_CASES, ids=ROPE_IDS)
def test_rope_inverse_equals_in_memory(case):
    _, shape, seq_axis, chunks, where = case
    x = _data(shape, np.float32, seed=1)
    kw = dict(where, seq_axis=seq_axis, layout="half", inverse=True)
    res = fdask.apply_rope(da.from_array(x, chunks=chunks), **kw)
    np.testing.assert_array_equal(res.compute(scheduler="threads"), fastpe.apply_rope(x, **kw))


SIN_CASES = [
    ("2d", (37, 16), (10, -1), {"offset": 3}),
    ("2d-positions", (37, 16), (8, -1), {"positions": _positions(37, 5)}),
    ("3d", (3, 29, 12), (2, 7, -1), {}),
    ("3d-row-offsets", (3, 29, 12), (1, 8, -1), {"offset": np.array([0, 65_520, 70_000])}),
    ("3d-positions-1d", (3, 29, 12), (2, 6, -1), {"positions": _positions(29, 6)}),
    ("3d-positions-2d", (3, 29, 12), (2, 6, -1), {"positions": _positions((3, 29), 7)}),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SIN_CASES, ids=[c[0] for c in SIN_CASES])
def test_sinusoidal_equals_in_memory(case, dtype, layout):
    _, shape, chunks, where = case
    x = _data(shape, dtype)
    x0 = x.copy()
    kw = dict(where, layout=layout)
    want = fastpe.add_sinusoidal(x, **kw)
    darr = da.from_array(x, chunks=chunks)
    res = fdask.add_sinusoidal(darr, **kw)
    _check_lazy(res, darr, "add_sinusoidal")
    np.testing.assert_array_equal(res.compute(scheduler="threads"), want)
    np.testing.assert_array_equal(x, x0)


# --------------------------------------------------------------------------- scaling


def test_dynamic_scaling_uses_the_global_seq_len():
    x = _data((2, 200, 2, 16), np.float32)
    kw = dict(scaling=DYNAMIC, max_position_embeddings=64, layout="half")
    want = fastpe.apply_rope(x, **kw)
    # Without the global seq_len a block would use its own (50 for the first one, below
    # max_position_embeddings, i.e. the unscaled base): the test would notice.
    assert not np.array_equal(fastpe.apply_rope(x[:, :50], **kw), want[:, :50])
    darr = da.from_array(x, chunks=(1, 50, 2, -1))
    assert darr.numblocks[1] == 4
    res = fdask.apply_rope(darr, **kw)
    np.testing.assert_array_equal(res.compute(scheduler="threads"), want)


@pytest.mark.parametrize(
    "where",
    [
        {"offset": 100},
        {"offset": np.array([0, 150])},
        {"positions": np.arange(200)[::-1]},
        {"positions": _positions((2, 200), 8, high=300)},
    ],
    ids=["offset", "row-offsets", "positions-1d", "positions-2d"],
)
def test_dynamic_scaling_positions(where):
    x = _data((2, 200, 16), np.float64)
    kw = dict(where, scaling=DYNAMIC, max_position_embeddings=64)
    res = fdask.apply_rope(da.from_array(x, chunks=(1, 50, -1)), **kw)
    np.testing.assert_array_equal(res.compute(scheduler="threads"), fastpe.apply_rope(x, **kw))


@pytest.mark.parametrize(
    "scaling, max_pos",
    [
        (YARN, None),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0 + i / 8 for i in range(4)],
                "long_factor": [2.0 + i / 4 for i in range(4)],
                "original_max_position_embeddings": 64,
            },
            256,
        ),
        ({"rope_type": "linear", "factor": 2.0}, None),
    ],
    ids=["yarn", "longrope", "linear"],
)
@pytest.mark.parametrize("inverse", [False, True])
def test_scaling_equals_in_memory(scaling, max_pos, inverse):
    x = _data((3, 200, 8), np.float32)
    kw = dict(scaling=scaling, max_position_embeddings=max_pos, inverse=inverse)
    res = fdask.apply_rope(da.from_array(x, chunks=(2, 50, -1)), **kw)
    np.testing.assert_array_equal(res.compute(scheduler="threads"), fastpe.apply_rope(x, **kw))


def test_explicit_seq_len_is_passed_to_every_block():
    x = _data((200, 16), np.float64)
    kw = dict(scaling=DYNAMIC, max_position_embeddings=64, seq_len=1000)
    want = fastpe.apply_rope(x, **kw)
    assert not np.array_equal(
        want, fastpe.apply_rope(x, scaling=DYNAMIC, max_position_embeddings=64)
    )
    res = fdask.apply_rope(da.from_array(x, chunks=(50, -1)), **kw)
    np.testing.assert_array_equal(res.compute(scheduler="threads"), want)


# --------------------------------------------------------------------------- lazy positions


@pytest.mark.parametrize("scaling", [None, DYNAMIC], ids=["plain", "dynamic"])
@pytest.mark.parametrize("ndim", [1, 2])
def test_rope_dask_positions(ndim, scaling):
    x = _data((2, 3, 40, 8), np.float32)  # (batch, heads, seq, head_dim)
    pos = _positions((2, 40) if ndim == 2 else 40, 9, high=500)
    kw = dict(seq_axis=2, scaling=scaling, max_position_embeddings=64)
    darr = da.from_array(x, chunks=(1, 2, 15, -1))
    dpos = da.from_array(pos, chunks=7)  # not aligned with darr's chunks: rechunked
    res = fdask.apply_rope(darr, positions=dpos, **kw)
    np.testing.assert_array_equal(
        res.compute(scheduler="threads"), fastpe.apply_rope(x, positions=pos, **kw)
    )


def test_sinusoidal_dask_positions():
    x = _data((3, 29, 12), np.float64)
    pos = _positions((3, 29), 10)
    res = fdask.add_sinusoidal(
        da.from_array(x, chunks=(2, 6, -1)), positions=da.from_array(pos, chunks=(3, 10))
    )
    np.testing.assert_array_equal(
        res.compute(scheduler="threads"), fastpe.add_sinusoidal(x, positions=pos)
    )


def test_bad_lazy_positions_raise_at_compute():
    darr = da.zeros((10, 8), chunks=(5, -1))
    res = fdask.apply_rope(darr, positions=da.from_array(np.arange(10) + 0.5, chunks=5))
    with pytest.raises(ValueError, match="positions must hold integers"):
        res.compute(scheduler="threads")


# --------------------------------------------------------------------------- blocks, graph


def test_shared_blocks_are_not_written():
    x = _data((4, 30, 8), np.float32)
    darr = da.from_array(x, chunks=(2, 10, -1)) * 1.0  # blocks owned by dask, not views of x
    res = fdask.apply_rope(darr, offset=3)
    plain, rotated = dask.compute(darr, res, scheduler="threads")
    np.testing.assert_array_equal(plain, x)
    np.testing.assert_array_equal(rotated, fastpe.apply_rope(x, offset=3))


def test_strided_and_read_only_blocks():
    parent = _data((8, 30), np.float64)
    x = parent.T  # channels not unit-stride: the in-memory function would refuse x itself
    x.flags.writeable = False
    res = fdask.apply_rope(da.from_array(x, chunks=(7, -1)), layout="half")
    np.testing.assert_array_equal(
        res.compute(scheduler="threads"), fastpe.apply_rope(np.ascontiguousarray(x), layout="half")
    )


@pytest.mark.parametrize("shape, chunks", [((2, 0, 8), (1, 5, -1)), ((0, 5, 8), (1, 2, -1))])
def test_empty(shape, chunks):
    x = np.zeros(shape, dtype=np.float32)
    res = fdask.apply_rope(da.from_array(x, chunks=chunks), offset=np.arange(shape[0]))
    assert res.compute(scheduler="threads").shape == shape
    res = fdask.add_sinusoidal(da.from_array(x, chunks=chunks))
    assert res.compute(scheduler="threads").shape == shape


def test_graph_is_deterministic_and_snapshots_arguments():
    x = _data((2, 30, 8), np.float64)
    darr = da.from_array(x, chunks=(1, 10, -1))
    pos = np.arange(30)
    scaling = dict(DYNAMIC)
    a = fdask.apply_rope(darr, positions=pos, scaling=scaling, max_position_embeddings=8)
    b = fdask.apply_rope(darr, positions=pos, scaling=scaling, max_position_embeddings=8)
    assert a.name == b.name
    assert fdask.apply_rope(darr, offset=1).name != fdask.apply_rope(darr, offset=2).name
    want = fastpe.apply_rope(
        x, positions=pos.copy(), scaling=dict(DYNAMIC), max_position_embeddings=8
    )
    pos[:] = 0  # later edits of the arguments do not reach the graph
    scaling["factor"] = 8.0
    np.testing.assert_array_equal(a.compute(scheduler="threads"), want)


# --------------------------------------------------------------------------- errors


def test_chunked_channels_are_refused_with_the_fix():
    darr = da.zeros((2, 10, 16), chunks=(1, 5, 8))
    for func in (fdask.apply_rope, fdask.add_sinusoidal):
        with pytest.raises(ValueError, match=r"darr\.rechunk\(\{-1: -1\}\)"):
            func(darr)
    res = fdask.apply_rope(darr.rechunk({-1: -1}))
    np.testing.assert_array_equal(
        res.compute(scheduler="threads"), fastpe.apply_rope(np.zeros((2, 10, 16)))
    )


@pytest.mark.parametrize("func", [fdask.apply_rope, fdask.add_sinusoidal])
@pytest.mark.parametrize(
    "darr, exc, match",
    [
        (np.zeros((4, 8)), TypeError, "must be a dask.array.Array"),
        (da.zeros((4, 8), dtype=np.int64), TypeError, "float32 or float64"),
        (da.zeros((4, 8), dtype=">f8"), TypeError, "native byte order"),
        (da.zeros(8), ValueError, "must be 2-D"),
        (da.zeros((2, 2, 2, 2, 8)), ValueError, "must be 2-D"),
    ],
    ids=["numpy", "int", "big-endian", "1d", "5d"],
)
def test_bad_array(func, darr, exc, match):
    with pytest.raises(exc, match=match):
        func(darr)


def test_masked_blocks_are_refused():
    """fastpe would ignore a mask: masked blocks and masked lazy positions are TypeErrors."""
    m = np.ma.array(np.ones((4, 10, 8)), mask=False)
    dm = da.from_array(m, chunks=(2, 5, -1), asarray=False)
    for func in (fdask.apply_rope, fdask.add_sinusoidal):
        with pytest.raises(TypeError, match="masked"):
            func(dm)
    pos = da.from_array(np.ma.array(np.arange(10)), chunks=5, asarray=False)
    with pytest.raises(TypeError, match="masked"):
        fdask.apply_rope(da.ones((4, 10, 8), chunks=(2, 5, -1)), positions=pos)


def test_memmap_blocks_are_handled_as_plain_arrays(tmp_path):
    m = np.memmap(tmp_path / "x.dat", dtype=np.float32, mode="w+", shape=(3, 10, 8))
    m[:] = _data((3, 10, 8), np.float32)
    plain = np.array(m)
    dm = da.from_array(m, chunks=(1, 4, -1))
    np.testing.assert_array_equal(
        fdask.apply_rope(dm, offset=3).compute(), fastpe.apply_rope(plain, offset=3)
    )
    np.testing.assert_array_equal(fdask.add_sinusoidal(dm).compute(), fastpe.add_sinusoidal(plain))
    np.testing.assert_array_equal(np.asarray(m), plain)  # the input blocks are never written


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_blocks_are_handled_as_plain_arrays():
    m = np.matrix(_data((10, 8), np.float64))
    dm = da.from_array(m, chunks=(5, -1))
    for func, in_memory in (
        (fdask.apply_rope, fastpe.apply_rope),
        (fdask.add_sinusoidal, fastpe.add_sinusoidal),
    ):
        got = func(dm, offset=7).compute()
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, in_memory(np.asarray(m), offset=7))


def test_unknown_chunks():
    darr = da.from_array(_data((10, 8), np.float64), chunks=(5, -1))
    darr = darr[darr[:, 0] > 0]
    with pytest.raises(ValueError, match=r"compute_chunk_sizes\(\)"):
        fdask.apply_rope(darr)


# Bad arguments raise at call time with the in-memory function's message.
ROPE_ERRORS = [
    dict(rotary_dim=3),
    dict(rotary_dim=32),
    dict(layout="rotate_half"),
    dict(base=0.0),
    dict(inverse=1),
    dict(seq_axis=3),
    dict(seq_axis=1.0),
    dict(positions=np.arange(7)),
    dict(positions=np.arange(10.0) + 0.5),
    dict(offset=np.arange(3)),
    dict(offset=np.zeros((2, 1), dtype=int)),
    dict(positions=np.arange(10), offset=1),
    dict(offset=2**53),
    dict(scaling={"rope_type": "warp"}),
    dict(scaling=DYNAMIC),
    dict(scaling=DYNAMIC, max_position_embeddings=8, seq_len=0),
    dict(scaling="dynamic"),
    dict(rotary_dim=4.0),
    dict(base="x"),
    dict(scaling=DYNAMIC, max_position_embeddings=8.0),
    dict(positions=np.full(10, -(2**63))),
    dict(positions=np.full(10, 2**63 + 1, dtype=np.uint64)),
    dict(offset=np.array([0, -(2**63)])),
    dict(positions=np.ma.array(np.arange(10))),
]


@pytest.mark.parametrize("kw", ROPE_ERRORS, ids=[str(sorted(kw)) for kw in ROPE_ERRORS])
def test_rope_errors_match_in_memory(kw):
    x = np.zeros((2, 10, 2, 8))
    with pytest.raises((TypeError, ValueError)) as want:
        fastpe.apply_rope(x, **kw)
    with pytest.raises(want.type) as got:
        fdask.apply_rope(da.from_array(x, chunks=(1, 5, 1, -1)), **kw)
    assert str(got.value) == str(want.value)


SIN_ERRORS = [
    dict(layout="sin-cos"),
    dict(base=-1.0),
    dict(positions=np.arange(7)),
    dict(positions=np.zeros((3, 10), dtype=int)),
    dict(offset=np.arange(3)),
    dict(base="x"),
    dict(layout=0),
    dict(positions=np.full(10, -(2**63))),
]


@pytest.mark.parametrize("kw", SIN_ERRORS, ids=[str(sorted(kw)) for kw in SIN_ERRORS])
def test_sinusoidal_errors_match_in_memory(kw):
    x = np.zeros((2, 10, 8))
    with pytest.raises((TypeError, ValueError)) as want:
        fastpe.add_sinusoidal(x, **kw)
    with pytest.raises(want.type) as got:
        fdask.add_sinusoidal(da.from_array(x, chunks=(1, 5, -1)), **kw)
    assert str(got.value) == str(want.value)


def test_sinusoidal_odd_dim():
    with pytest.raises(ValueError, match="positive even integer"):
        fdask.add_sinusoidal(da.zeros((4, 7)))


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(offset=da.zeros(2, dtype=int)), TypeError, r"offset\.compute\(\)"),
        (dict(positions=da.zeros(10, dtype=bool)), TypeError, "integer array"),
        (dict(positions=da.zeros(9, dtype=int)), ValueError, "length 10"),
        (dict(positions=da.zeros((3, 10), dtype=int)), ValueError, r"\(2, 10\)"),
        (dict(positions=da.zeros((1, 2, 10), dtype=int)), ValueError, "1-D or 2-D"),
        (dict(positions=da.zeros(10, dtype=int), offset=np.array([1, 2])), ValueError, "not both"),
    ],
    ids=["dask-offset", "bool", "length", "rows", "3d", "both"],
)
def test_dask_argument_errors(kw, exc, match):
    with pytest.raises(exc, match=match):
        fdask.apply_rope(da.zeros((2, 10, 8), chunks=(1, 5, -1)), **kw)


# --------------------------------------------------------------------------- module


def test_import_fastpe_does_not_import_dask():
    code = "import sys, fastpe; fastpe.apply_rope; assert 'dask' not in sys.modules"
    run_python([sys.executable, "-c", code], check=True)


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.delitem(sys.modules, "fastpe.dask")
    monkeypatch.setitem(sys.modules, "dask", None)  # makes `import dask...` fail
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r"pip install fastpe\[dask\]"):
        importlib.import_module("fastpe.dask")


def test_docstring_examples():
    result = doctest.testmod(fdask, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------- distributed


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as c,
    ):
        yield c


DISTRIBUTED_CASES = [
    c
    for c in ROPE_CASES
    if c[0]
    in (
        "2d-offset",
        "3d-row-offsets",
        "3d-positions-2d",
        "4d-bhsd-row-offsets",
        "4d-bhsd-positions-2d",
        "packed-3d-positions",
        "packed-4d",
    )
]


@pytest.mark.parametrize("case", DISTRIBUTED_CASES, ids=[c[0] for c in DISTRIBUTED_CASES])
def test_distributed_rope(client, case):
    _, shape, seq_axis, chunks, where = case
    x = _data(shape, np.float32)
    kw = dict(where, seq_axis=seq_axis, rotary_dim=_rotary_dim(shape[-1], True))
    res = fdask.apply_rope(da.from_array(x, chunks=chunks), **kw)
    np.testing.assert_array_equal(client.compute(res).result(), fastpe.apply_rope(x, **kw))


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy-positions", "dask-positions"])
def test_distributed_dynamic_scaling(client, lazy):
    x = _data((2, 200, 2, 16), np.float64)
    pos = _positions((2, 200), 11, high=400)
    kw = dict(scaling=DYNAMIC, max_position_embeddings=64, layout="half")
    dpos = da.from_array(pos, chunks=(1, 100)) if lazy else pos
    res = fdask.apply_rope(da.from_array(x, chunks=(1, 50, 1, -1)), positions=dpos, **kw)
    np.testing.assert_array_equal(
        client.compute(res).result(), fastpe.apply_rope(x, positions=pos, **kw)
    )


def test_distributed_sinusoidal(client):
    x = _data((3, 29, 12), np.float32)
    kw = dict(offset=np.array([0, 65_520, 70_000]), layout="half")
    res = fdask.add_sinusoidal(da.from_array(x, chunks=(1, 8, -1)), **kw)
    np.testing.assert_array_equal(client.compute(res).result(), fastpe.add_sinusoidal(x, **kw))


# --------------------------------------------------------------------------- multi-axis


@pytest.mark.parametrize("layout", ["half", "half:2"])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("chunks", [(1, 4, 2, -1), (2, 7, 3, -1)])
def test_multi_axis_equals_in_memory(layout, per_row, chunks, rng):
    x = rng.standard_normal((2, 19, 3, 32)).astype(np.float32)
    axes = [0] * 4 + [1] * 6 + [2] * 6
    pos = rng.integers(0, 5000, size=(3, 2, 19) if per_row else (3, 19))
    want = fastpe.apply_rope(x, positions=pos, pair_axes=axes, layout=layout)
    got = fdask.apply_rope(
        da.from_array(x, chunks=chunks), positions=pos, pair_axes=axes, layout=layout
    ).compute()
    np.testing.assert_array_equal(got, want)


def test_two_rows_of_pair_axes_equal_in_memory(rng):
    """HunYuan-VL: each pair's second channel on its own axis."""
    x = rng.standard_normal((2, 19, 3, 16)).astype(np.float32)
    axes = [[0] * 4 + [1] * 4, [2] * 4 + [3] * 4]
    pos = rng.integers(0, 5000, size=(4, 19))
    want = fastpe.apply_rope(x, positions=pos, pair_axes=axes, layout="half")
    got = fdask.apply_rope(
        da.from_array(x, chunks=(1, 7, 3, -1)), positions=pos, pair_axes=axes, layout="half"
    )
    np.testing.assert_array_equal(got.compute(), want)


def test_blocked_layout_with_offsets_equals_in_memory(rng):
    x = rng.standard_normal((2, 19, 3, 32)).astype(np.float32)
    want = fastpe.apply_rope(x, offset=[3, 900], layout="half:2")
    got = fdask.apply_rope(da.from_array(x, chunks=(1, 7, 3, -1)), offset=[3, 900], layout="half:2")
    np.testing.assert_array_equal(got.compute(), want)


def test_multi_axis_vision_tower_inv_freq(rng):
    x = rng.standard_normal((24, 4, 80)).astype(np.float32)  # (patches, heads, head_dim)
    kw = fastpe.rope_kwargs_from_config(
        {"model_type": "qwen2_vl_vision", "embed_dim": 320, "num_heads": 4}
    )
    hw = fastpe.patch_positions([1, 4, 6], merge=2)
    want = fastpe.apply_rope(x, positions=hw, seq_axis=0, **kw)
    got = fdask.apply_rope(
        da.from_array(x, chunks=(5, 2, -1)), positions=hw, seq_axis=0, **kw
    ).compute()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(positions=da.zeros((3, 5), dtype=int, chunks=2)), TypeError, "compute it first"),
        (dict(positions=np.zeros((3, 5), int), offset=2), ValueError, "offset"),
        (dict(positions=np.zeros((2, 5), int)), ValueError, "axis 2"),
        (dict(positions=np.zeros(5, int)), ValueError, r"\(n_axes, seq\)"),
    ],
)
def test_multi_axis_refusals(kw, exc, match):
    darr = da.zeros((2, 5, 16), dtype=np.float32, chunks=(1, 2, -1))
    with pytest.raises(exc, match=match):
        fdask.apply_rope(darr, pair_axes=[0, 1, 2, 2, 1, 0, 0, 0], **kw)


def test_offsets_beyond_the_angle_limit_refused_when_the_graph_is_built():
    """Frequencies above 1 (a base below 1) allow positions up to 2**53 / w: an offset
    beyond is refused at once, as one beyond 2**53 is (not when a block computes)."""
    from fastpe._freq import angle_limit, inv_freq_dd

    lim = angle_limit(*inv_freq_dd(0.5, 8))
    x = np.ones((2, 100, 8), np.float32)
    dx = da.from_array(x, chunks=(1, 50, 8))
    for f, g in (
        (fdask.apply_rope, fastpe.apply_rope),
        (fdask.add_sinusoidal, fastpe.add_sinusoidal),
    ):
        for offset in (lim - 50, np.array([0, lim - 50]), -lim - 1):
            with pytest.raises(ValueError, match=r"make angles beyond 2\*\*53"):
                f(dx, base=0.5, offset=offset)
        got = f(dx, base=0.5, offset=lim - 99).compute()
        np.testing.assert_array_equal(got, g(x, base=0.5, offset=lim - 99))
