"""Large tables are written by streaming stores (``fastpe._kernels.stream``): the same bits.

The engine streams the rows of float32 and float64 tables (folded, or stepped by the
float32 recurrence: on Zen 5 not with the ``plain_stepped`` mode on) and 16-bit tables (on
Zen 5 a row at a time, elsewhere those whose rows lie back to back, behind the next row), of
at least
``_STREAM_MIN_BYTES``; the tests lower that bound so
that small tables take the streaming path, and compare every byte with the plain path,
over rows that start at every alignment (``out=`` a column slice of a wider array), row
lengths that are not whole lines, and positions whose rows are recomputed exactly. They
take the rule of CPUs other than Zen 5 (``_engine._zen5`` pinned) for float32 and float64
and Zen 5's for 16-bit tables, so that every path streams whatever the CPU;
``test_zen5_stepped_rows_by_the_mode`` checks both rules.
"""

from __future__ import annotations

import numpy as np
import pytest
from _util import assert_rope_close

import fastpe
from fastpe import _engine, reference
from fastpe._engine import _LANES_MAX_PAIRS
from fastpe._flag import ON


def _has_bf16() -> bool:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:  # the bfloat16 cases need the optional extra
        return False
    return True


DTYPES = ["float32", "float64", "float16"] + (["bfloat16"] if _has_bf16() else [])


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# 4272943 - 30: rows whose float32 values fall below FIXUP_THRESHOLD (recomputed exactly,
# to the same bits there); 21053343141 - 30: sin(21053343141) is about 1.75e-12, where
# angle addition's absolute error moves the float32 value and the fix-up changes its bytes
FIXUP_CHANGES = 21053343141
OFFSETS = [0, 4272943 - 30, FIXUP_CHANGES - 30, 2**40 + 3]


class _Spy(list):
    """The engine's decisions (True or None), in order; ``shapes``: the views asked about."""

    def __init__(self):
        super().__init__()
        self.shapes: list = []

    def clear(self):
        super().clear()
        self.shapes.clear()


@pytest.fixture
def spy(monkeypatch):
    """Stream every table (``_STREAM_MIN_BYTES`` 0, the rule of CPUs other than Zen 5);
    record what the engine decided."""
    seen = _Spy()
    real = _engine.streamed

    def streamed(view, flat, sd, *stepped):
        out = real(view, flat, sd, *stepped)
        seen.append(out)
        seen.shapes.append(view.shape)
        return out

    monkeypatch.setattr(_engine, "streamed", streamed)
    monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(_engine, "_zen5", False)
    return seen


def _zen5_for_16_bit(monkeypatch, dtype):
    """16-bit tables stream a row at a time on Zen 5, elsewhere only rows back to back
    (behind the next row: the ``trailed`` tests): take Zen 5's rule for them, under which
    rows apart stream too (float32 and float64 tables keep the other CPUs' rule, under
    which every one of them streams)."""
    if dtype.itemsize == 2:
        monkeypatch.setattr(_engine, "_zen5", True)


def _table_lanes(dtype: np.dtype, dim: int) -> bool:
    """Whether a table of ``dim`` channels at consecutive positions (rows of unit-stride
    channels) takes a lanes kernel, which writes plain stores: rows of a few pairs, float32
    ones where they are stepped (``_engine.table_stepped``)."""
    npairs = dim // 2
    if npairs > _LANES_MAX_PAIRS or dtype.itemsize > 4:
        return False
    return dtype.itemsize == 2 or _engine.table_stepped(npairs)


def _plain(monkeypatch, fn):
    """``fn()`` by plain stores: no streaming, and no direct pass by plain stores."""
    with monkeypatch.context() as m:
        m.setattr(_engine, "_STREAM_MIN_BYTES", 1 << 62)
        m.setitem(_engine.MODES, "plain_direct", False)
        return fn()


@pytest.mark.parametrize(
    ("reported_mib", "bound_mib"),
    [(300, 256), (480, 256), (128, 256), (100, 200), (32, 64), (12, 24), (1, 2)],
)
def test_tables_streamed_from_twice_the_cache_counted_on(monkeypatch, reported_mib, bound_mib):
    """Tables stream from twice the last-level cache the OS reports, counted at most as 128
    MiB (``_timing.cache_share_bytes``: a virtual machine reports the whole socket's L3),
    and the yardsticks and ``fastpe compare`` call smaller arrays cache-resident by the
    same bound."""
    from fastpe import _timing

    monkeypatch.setattr(_timing, "last_level_cache_bytes", lambda: reported_mib << 20)
    monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", None)  # asked again
    monkeypatch.setattr(_engine, "_zen5", False)
    assert _timing.cache_share_bytes() == min(reported_mib, 128) << 20
    bound = bound_mib << 20
    for nbytes, streams in ((bound, True), (bound - 4096, False)):
        t = np.empty((nbytes // 4096, 1024), np.float32)  # (never touched: no pages)
        assert (_engine.streamed(t, t.reshape(-1), 1) is ON) == streams
        assert _timing.cache_resident(nbytes) == (not streams)
        assert _timing.yardstick(t, writes_only=True)[0] == ("fill_stream" if streams else "fill")
    assert _engine._STREAM_MIN_BYTES == bound


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [6, 18, 40, 64, 1022])
@pytest.mark.parametrize("offset", OFFSETS)
def test_streamed_table_same_bits(spy, monkeypatch, dtype, layout, dim, offset):
    rows = 300
    dtype = _dtype(dtype)
    _zen5_for_16_bit(monkeypatch, dtype)

    def table():
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, layout=layout, offset=offset)

    want = _plain(monkeypatch, table)
    got = table()
    # every row but those of the lanes kernels (float32 and 16-bit rows of a few pairs,
    # which write plain stores)
    lanes = _table_lanes(dtype, dim)
    assert (ON in spy) == (not lanes)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("start", [0, 1, 3, 8, 17])
def test_streamed_rows_at_every_alignment(spy, monkeypatch, dtype, layout, start):
    """Rows that start mid-line, and the columns around them left untouched."""
    rows, dim, width = 200, 62, 62 + 40
    dtype = _dtype(dtype)
    _zen5_for_16_bit(monkeypatch, dtype)

    def table(**kw):
        return fastpe.sinusoidal_table(
            rows, dim, dtype=dtype, layout=layout, offset=OFFSETS[1], **kw
        )

    want = _plain(monkeypatch, table)
    wide = np.full((rows, width), 7, dtype=dtype)
    table(out=wide[:, start : start + dim])
    assert ON in spy
    assert wide[:, start : start + dim].tobytes() == want.tobytes()
    rest = np.delete(wide, np.s_[start : start + dim], axis=1)
    assert (rest.astype(np.float64) == 7).all()


def _many_workers(monkeypatch):
    """Split even a small call between the threads, in work items of 7 rows (eight workers
    on two threads): runs of short rows then meet mid-line between workers."""
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    monkeypatch.setattr(_engine, "_MAX_CHUNK", 7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [2, 6, 10, 18, 64, 66, 1022])
@pytest.mark.parametrize("split", [False, True])
def test_streamed_contiguous_rows_from_every_start(spy, monkeypatch, dtype, layout, dim, split):
    """A table whose rows lie back to back (each worker's rows one run, the lines two rows
    share streamed whole, ``stream_carry``), starting at every element of a line: rows
    shorter than a line, rows that end before the first line boundary, and (``split``)
    runs that meet mid-line between workers; the same bytes, the elements around
    untouched."""
    rows = 300
    dtype = np.dtype(dtype)
    if split:
        _many_workers(monkeypatch)
    lead = 64 // dtype.itemsize

    def table(**kw):
        return fastpe.sinusoidal_table(
            rows, dim, dtype=dtype, layout=layout, offset=OFFSETS[1], **kw
        )

    want = _plain(monkeypatch, table)
    raw = np.full(rows * dim + 3 * lead, 7, dtype=dtype)
    first = (-raw.ctypes.data % 64) // dtype.itemsize  # raw[first] starts a line
    streamed = False
    for start in range(first, first + lead):
        raw[:] = 7
        out = raw[start : start + rows * dim].reshape(rows, dim)
        spy.clear()
        table(out=out)
        streamed |= ON in spy
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()
    lanes = dtype.itemsize == 4 and _table_lanes(dtype, dim)
    assert streamed == (not lanes)


def _table16_trail(monkeypatch) -> list:
    """Record ``table16_kernel``'s ``stream`` and ``trail`` arguments, call by call."""
    from fastpe._kernels import half

    seen: list = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        if k is half.table16_kernel:
            seen.append(tuple(args[-2:]))
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", record)
    return seen


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [18, 34, 64, 100, 1022, 1024])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("kind", ["offset", "fixup", "positions"])
def test_trailed_16_bit_rows_from_every_start(spy, monkeypatch, dtype, layout, dim, split, kind):
    """16-bit tables whose rows lie back to back, on CPUs other than Zen 5: each row's lines
    streamed while the next row is computed (``table16_kernel``'s ``trail``), the values
    past a row's last whole line carried in front of the next. Starting at every element
    of a line; rows shorter than a line (18 values), of whole lines (64, 1024) and not
    (34, 100, 1022); runs that meet mid-line between workers (``split``); rows whose
    pairs the float64 pass writes again (every table), the bfloat16 fix-up (``fixup``),
    positions given as an array. The same bytes as plain stores, the elements around
    untouched."""
    if dtype == "bfloat16" and not _has_bf16():
        pytest.skip("needs ml_dtypes")
    rows = 300
    dtype = _dtype(dtype)
    if split:
        _many_workers(monkeypatch)
    kw: dict = {"offset": OFFSETS[1] if kind == "fixup" else 12345}
    if kind == "positions":  # runs, gaps, repeats and a descent
        kw = {"positions": (np.arange(rows) * 3 + 2**33) // 2 % 977 + np.arange(rows) // 50}
    lead = 64 // dtype.itemsize

    def table(**more):
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, layout=layout, **kw, **more)

    want = _plain(monkeypatch, table)
    seen = _table16_trail(monkeypatch)
    raw = np.full(rows * dim + 3 * lead, 7, dtype=np.uint16)
    first = (-raw.ctypes.data % 64) // 2  # raw[first] starts a line
    for start in range(first, first + lead):
        raw[:] = 7
        out = raw[start : start + rows * dim].view(dtype).reshape(rows, dim)
        table(out=out)
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()
    assert seen == [(None, ON)] * lead


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dim", [18, 34, 1024])
@pytest.mark.parametrize("rows", [1, 2, 3, 17])
def test_trailed_16_bit_runs_of_one_row_and_less_than_a_line(spy, monkeypatch, dtype, dim, rows):
    """Workers of one row each (work items of one row, eight workers on two threads), and
    runs shorter than a line (one or two rows of 18 values): the run's first partial line
    may be all of it, and nothing streams; the same bytes from every start."""
    if dtype == "bfloat16" and not _has_bf16():
        pytest.skip("needs ml_dtypes")
    dtype = _dtype(dtype)
    _many_workers(monkeypatch)
    monkeypatch.setattr(_engine, "_MAX_CHUNK", 1)

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, offset=OFFSETS[1], **kw)

    want = _plain(monkeypatch, table)
    seen = _table16_trail(monkeypatch)
    raw = np.full(rows * dim + 64, 7, dtype=np.uint16)
    first = (-raw.ctypes.data % 64) // 2
    for start in range(first, first + 32):
        raw[:] = 7
        out = raw[start : start + rows * dim].view(dtype).reshape(rows, dim)
        table(out=out)
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()
    assert seen == [(None, ON)] * 32


def test_trailed_16_bit_rows_stream():
    """The trail specialization of ``table16_kernel`` holds streaming stores (LLVM's
    ``!nontemporal``: the lines each row's pass streams, and the run's last lines); the
    plain one holds none. Compiled afresh (uncached), so that its IR can be read."""
    import numba

    from fastpe._kernels import half

    if not half.HW_HALF:
        pytest.skip("float16 takes the float32 pass only where the CPU converts it")
    seen = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        seen.append(args)
        return launch(k, args, n_workers, threads)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_engine, "_launch", record)
        m.setattr(_engine, "_zen5", False)
        m.setattr(_engine, "_STREAM_MIN_BYTES", 0)
        fastpe.sinusoidal_table(40, 64, dtype=np.float16)
        m.setattr(_engine, "_STREAM_MIN_BYTES", 1 << 62)
        fastpe.sinusoidal_table(40, 64, dtype=np.float16)
    (trail, plain) = seen
    assert trail[-2:] == (None, ON) and plain[-2:] == (None, None)
    for args, streams in ((trail, True), (plain, False)):
        fresh = numba.njit(half.table16_kernel.py_func)
        fresh(0, 1, *args)
        ir = fresh.inspect_llvm(fresh.signatures[0])
        assert ("!nontemporal" in ir) == streams
        assert ("llvm.x86.sse.sfence" in ir or "fence seq_cst" in ir) == streams


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_trailed_16_bit_rows_only_back_to_back(spy, monkeypatch, dtype):
    """Rows apart (a column slice) stream a row at a time on Zen 5 and take plain stores
    elsewhere; rows back to back stream behind the next row elsewhere, a row at a time on
    Zen 5; a table under the bound takes neither. The same bytes each way."""
    if dtype == "bfloat16" and not _has_bf16():
        pytest.skip("needs ml_dtypes")
    dtype = _dtype(dtype)
    rows, dim = 100, 64

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, offset=99, **kw)

    want = _plain(monkeypatch, table)
    seen = _table16_trail(monkeypatch)
    wide = np.full((rows, dim + 2), 7, dtype=dtype)
    for zen5 in (False, True):
        monkeypatch.setattr(_engine, "_zen5", zen5)
        assert table().tobytes() == want.tobytes()
        table(out=wide[:, 1 : dim + 1])
        assert wide[:, 1 : dim + 1].tobytes() == want.tobytes()
    assert (wide[:, [0, -1]].astype(np.float64) == 7).all()
    assert seen == [(None, ON), (None, None), (ON, None), (ON, None)]
    seen.clear()
    _plain(monkeypatch, table)
    assert seen == [(None, None)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start", [0, 3])
def test_streamed_rows_in_reverse(spy, monkeypatch, dtype, start):
    """Rows written last to first (``out=`` a view with a negative row stride, mid-line or
    not): the prefetch of the partial lines of a later row walks backwards and stops at the
    array's first element; the same bytes."""
    rows, dim, width = 200, 62, 62 + 8
    dtype = _dtype(dtype)
    _zen5_for_16_bit(monkeypatch, dtype)

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, offset=OFFSETS[1], **kw)

    want = _plain(monkeypatch, table)
    wide = np.full((rows, width), 7, dtype=dtype)
    out = wide[::-1, start : start + dim]
    table(out=out)
    assert ON in spy
    assert out.tobytes() == want.tobytes()
    rest = np.delete(wide, np.s_[start : start + dim], axis=1)
    assert (rest.astype(np.float64) == 7).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [64, 256])
def test_zen5_stepped_rows_by_the_mode(spy, monkeypatch, dtype, layout, dim):
    """On Zen 5 float32 rows stepped by the recurrence (either layout; rows of 128 pairs,
    not those of 32, which are folded: ``_engine.table_stepped``) stream, as every other
    table, unless the ``plain_stepped`` mode (off) asks for plain stores; 16-bit tables
    stream on Zen 5 only (the kernel gets the decision as its last argument). The same bits
    either way."""
    rows = 300
    dtype = _dtype(dtype)

    def table():
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, layout=layout, offset=OFFSETS[1])

    want = _plain(monkeypatch, table)
    monkeypatch.setattr(_engine, "_zen5", True)
    spy.clear()
    assert table().tobytes() == want.tobytes()
    assert spy == [ON]
    spy.clear()
    monkeypatch.setitem(_engine.MODES, "plain_stepped", True)  # the mode on: plain stores
    got = table()
    assert spy == [None if dtype == np.float32 and dim == 256 else ON]
    assert got.tobytes() == want.tobytes()
    monkeypatch.setitem(_engine.MODES, "plain_stepped", False)
    if dtype.itemsize == 2:  # other CPUs: rows streamed behind the next row (trail)
        seen = _table16_trail(monkeypatch)
        assert table().tobytes() == want.tobytes()
        monkeypatch.setattr(_engine, "_zen5", False)
        assert table().tobytes() == want.tobytes()
        assert seen == [(ON, None), (None, ON)]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_streamed_fixup_changes_the_bytes(spy, monkeypatch, layout):
    """A row whose value the fix-up changes (float32 rows stepped or folded, then streamed):
    the fixed value leaves, as on the plain path and in the reference."""
    rows, dim = 60, 40

    def table():
        return fastpe.sinusoidal_table(rows, dim, layout=layout, offset=FIXUP_CHANGES - 30)

    want = _plain(monkeypatch, table)
    got = table()
    assert ON in spy
    assert got.tobytes() == want.tobytes()
    # the value before its fix-up, as add_sinusoidal adds it (no fix-up there)
    unfixed = fastpe.add_sinusoidal(np.zeros((1, dim), np.float32), offset=FIXUP_CHANGES)
    exact = reference.sinusoidal_table(1, dim, offset=FIXUP_CHANGES, layout=layout)
    assert got[30, 0] != unfixed[0, 0]
    assert got[30, 0] == exact[0, 0]


# sin(2292816) is about 1.23 * FIXUP_THRESHOLD: above it, under twice it
NEAR_THRESHOLD = 2292816


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("stream", [False, True])
def test_pairs_just_above_the_threshold_keep_their_values(spy, monkeypatch, layout, stream):
    """A row whose sine lies between FIXUP_THRESHOLD and twice it: the rows' test
    (``_small_pair``: ``|sin cos|`` under twice the threshold) sends it to the fix-up, which
    recomputes only values under the threshold, so it keeps the value the rows computed,
    the reference's, streamed or not (the pass a line at a time, which streams, flags rows
    by their float32 values instead and leaves this one as it is)."""
    from fastpe._kernels.tables import FIXUP_THRESHOLD, _small, _small_pair

    rows, dim = 60, 40

    def table():
        return fastpe.sinusoidal_table(rows, dim, layout=layout, offset=NEAR_THRESHOLD - 30)

    got = table() if stream else _plain(monkeypatch, table)
    assert (ON in spy) == stream
    exact = reference.sinusoidal_table(1, dim, offset=NEAR_THRESHOLD, layout=layout)
    sv, cv = float(exact[0, 0]), float(exact[0, 1 if layout == "interleaved" else dim // 2])
    assert FIXUP_THRESHOLD < abs(sv) < 2 * FIXUP_THRESHOLD
    assert _small_pair(sv, cv) and not _small(sv, cv)
    assert got[30].tobytes() == exact[0].tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_misaligned_elements_take_plain_stores(spy, monkeypatch, dtype, layout):
    """Elements off their own alignment: no streaming (a streaming store there would
    fault), the same values."""
    rows, dim = 100, 64
    dtype = _dtype(dtype)
    _zen5_for_16_bit(monkeypatch, dtype)
    raw = np.zeros(rows * dim * dtype.itemsize + 1, dtype=np.uint8)
    out = np.frombuffer(raw.data, dtype=dtype, count=rows * dim, offset=1).reshape(rows, dim)
    assert not out.flags.aligned

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, layout=layout, dtype=dtype, **kw)

    want = _plain(monkeypatch, table)
    spy.clear()
    table(out=out)
    assert spy == [None]
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_strided_channels_are_not_streamed(spy, monkeypatch, layout):
    rows, dim = 100, 64
    want = _plain(monkeypatch, lambda: fastpe.sinusoidal_table(rows, dim, layout=layout))
    spy.clear()
    wide = np.zeros((rows, 2 * dim), dtype=np.float32)
    fastpe.sinusoidal_table(rows, dim, out=wide[:, ::2], layout=layout)
    assert spy == [None]
    assert wide[:, ::2].tobytes() == want.tobytes()


GRID_DTYPES = ["float32", "float64", "float16"] + (["bfloat16"] if _has_bf16() else [])


@pytest.mark.parametrize("dtype", GRID_DTYPES)
@pytest.mark.parametrize(
    "grid, dim, kw",
    [
        ((12, 17), 64, {}),
        ((12, 17), 28, {"cls_token": True}),
        ((3, 5, 7), 36, {}),
        ((64, 64), 128, {}),  # 2 MiB of float32: threaded
    ],
)
def test_streamed_grid_same_bits(spy, monkeypatch, dtype, grid, dim, kw):
    """Grid tables (every 16-bit dtype too: a grid's cells are copies, not roundings): into
    a new array, into rows that lie back to back from every element of a line (each span
    of cells one run of ``stream_carry``), and into a column slice (each cell a run)."""
    dt = _dtype(dtype)

    def table(**more):
        return fastpe.grid_sinusoidal(grid, dim, dtype=dt, **kw, **more)

    want = _plain(monkeypatch, table)
    got = table()
    assert ON in spy
    assert got.tobytes() == want.tobytes()
    rows = want.shape[0]
    raw = np.empty(rows * dim + 3 * 64, dtype=dt)
    first = (-raw.ctypes.data % 64) // dt.itemsize  # raw[first] starts a line
    for start in range(first, first + 64 // dt.itemsize):
        raw[:] = 3
        table(out=raw[start : start + rows * dim].reshape(rows, dim))
        assert raw[start : start + rows * dim].tobytes() == want.tobytes(), start
        assert (raw[:start] == 3).all() and (raw[start + rows * dim :] == 3).all()
    wide = np.full((rows, dim + 9), 3, dtype=dt)
    table(out=wide[:, 5 : 5 + dim])
    assert wide[:, 5 : 5 + dim].tobytes() == want.tobytes()
    assert (np.delete(wide, np.s_[5 : 5 + dim], axis=1).astype(np.float64) == 3).all()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "grid, dim, kw",
    [((17, 40), 512, {}), ((3, 5, 40), 768, {}), ((17, 40), 512, {"cls_token": True})],
)
@pytest.mark.parametrize("last_first", [False, True])
def test_streamed_tiled_grid_same_bits(spy, monkeypatch, dtype, grid, dim, kw, last_first):
    """Grids taken in tiles of 16 KiB of table rows by eight workers: each worker's cells
    come in spans out of memory order, each span one run; from every element of a line.
    ``last_first``: the workers run alone, the last first (see
    :func:`test_streamed_workers_write_only_their_rows`)."""
    dt = np.dtype(dtype)
    _zen5_for_16_bit(monkeypatch, dt)

    def table(**more):
        return fastpe.grid_sinusoidal(grid, dim, dtype=dt, **kw, **more)

    want = _plain(monkeypatch, table)
    ran = _workers_last_first(monkeypatch) if last_first else [2]
    monkeypatch.setattr(fastpe.conventions, "GRID_TILE_BYTES", 16384)
    monkeypatch.setattr(fastpe.conventions, "_workers", lambda n, threads: min(n, 8))
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    rows = want.shape[0]
    raw = np.empty(rows * dim + 3 * 64, dtype=dt)
    first = (-raw.ctypes.data % 64) // dt.itemsize
    for start in range(first, first + 64 // dt.itemsize, 3):
        raw[:] = 3
        spy.clear()
        table(out=raw[start : start + rows * dim].reshape(rows, dim))
        assert ON in spy
        assert raw[start : start + rows * dim].tobytes() == want.tobytes(), start
        assert (raw[:start] == 3).all() and (raw[start + rows * dim :] == 3).all()
    assert min(ran) > 1  # (the workers, run alone)


@pytest.mark.parametrize("dtype", ["float64", "float32", "uint16"])
def test_stream_carry_runs_of_any_lengths(dtype):
    """``stream_carry`` itself: an array cut into spans of 0 to 3 lines' elements, written
    one after another, runs ending at random spans, from every start within a line; every
    element once, nothing around it."""
    import numba

    from fastpe._kernels.stream import LINE, stream_carry

    @numba.njit
    def write(flat, row, lead, bases, counts, lasts, values):
        carry = -1
        for r in range(bases.size):
            for k in range(counts[r]):
                row[lead + k] = values[bases[r] + k]
            carry = stream_carry(flat, bases[r], row, lead, counts[r], carry, lasts[r])
        return carry

    dt = np.dtype(dtype)
    lead = LINE // dt.itemsize
    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        raw = np.zeros(n + 2 * lead, dtype=dt)
        start = (-raw.ctypes.data % LINE) // dt.itemsize + trial % lead
        flat = raw[start : start + n]
        values = (np.arange(n) % 251 + 1).astype(dt)
        cuts = [0]
        while cuts[-1] < n:
            cuts.append(min(n, cuts[-1] + int(rng.integers(0, 3 * lead))))
        bases = np.array(cuts[:-1], dtype=np.int64)
        counts = np.diff(cuts).astype(np.int64)
        lasts = rng.random(bases.size) < 0.2
        lasts[-1] = True
        row = np.zeros(lead + int(counts.max()), dtype=dt)
        assert write(flat, row, lead, bases, counts, lasts, values) == -1
        assert (flat == values).all(), trial
        assert not raw[:start].any() and not raw[start + n :].any()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("start, n", [(0, 5000), (3, 4093), (1, 70001), (0, 7)])
def test_streaming_fill_yardstick(dtype, start, n):
    """The tables' yardstick (``fill_stream``) writes every element, misaligned ends too."""
    a = np.zeros(n + start + 3, dtype=dtype)
    _engine.stream("fill_stream", a[start : start + n])
    assert (a[start : start + n] == 0.5).all()
    assert not a[:start].any() and not a[start + n :].any()
    # five workers, one after another, each span one run meeting the next mid-line
    from fastpe._kernels.yardstick import fill_stream

    b = a.view(f"u{a.itemsize}")  # the kernel writes unsigned integers of the width
    b[:] = 0
    for w in range(5):
        fill_stream(w, w + 1, b[start : start + n], b.dtype.type(2), 5)
    assert (b[start : start + n] == 2).all()
    assert not b[:start].any() and not b[start + n :].any()


def test_mode_off_and_additions_do_not_stream(spy):
    cells = 12 * 17
    fastpe.grid_sinusoidal((12, 17), 64)  # (its small per-axis tables are asked about first)
    assert spy[-1] is ON and np.prod(spy.shapes[-1]) == cells * 64
    spy.clear()
    fastpe.add_grid_sinusoidal(np.zeros((cells, 64), np.float32), (12, 17))
    # sums read every line anyway: the grid itself is never streamed (only its small tables)
    assert all(np.prod(shape) < cells * 64 for shape in spy.shapes)
    spy.clear()
    default = _engine.MODES["stream"]
    try:
        _engine.MODES["stream"] = False
        fastpe.grid_sinusoidal((12, 17), 64)
        fastpe.sinusoidal_table(100, 64, layout="half")
    finally:
        _engine.MODES["stream"] = default
    assert spy and all(out is None for out in spy)


def test_streaming_fill_of_16_bit_rows_writes_half():
    """16-bit rows reach the yardstick as raw bits: it writes 0.5's float16 bits, not 0."""
    a = np.zeros(5000, dtype=np.float16)
    _engine.stream("fill_stream", a.view(np.uint16))
    assert (a.view(np.uint16) == 0x3800).all()


@pytest.mark.parametrize("byte", [1, 2, 3])
def test_streaming_fill_of_misaligned_elements(byte):
    """Elements off their own alignment: every store plain (a streaming one would fault)."""
    raw = np.zeros(4 * 3000 + 8, dtype=np.uint8)
    a = np.frombuffer(raw.data, dtype=np.uint32, count=3000, offset=byte)
    _engine.stream("fill_stream", a)
    assert (a == np.array(0.5, np.float32).view(np.uint32)).all()
    assert not raw[:byte].any() and not raw[byte + a.nbytes :].any()


def test_streaming_stores_are_emitted():
    """The copies really use non-temporal stores (LLVM's ``!nontemporal``): the yardstick's
    runs (``stream_carry``) and ``stream_row``, which also prefetches the partial lines of
    a later row."""
    import numba

    from fastpe._kernels.stream import stream_row
    from fastpe._kernels.yardstick import fill_stream

    fresh = numba.njit(fill_stream.py_func)  # uncached: its IR can be inspected
    a = np.zeros(1000, dtype=np.uint32)
    fresh(0, 1, a, np.uint32(7), 1)
    assert (a == 7).all()
    assert "!nontemporal" in fresh.inspect_llvm(fresh.signatures[0])

    @numba.njit
    def rows(a, row):
        for i in range(0, a.size, row.size):
            stream_row(a, i, row, min(row.size, a.size - i), row.size)

    rows(a, np.full(100, 9, dtype=np.uint32))
    assert (a == 9).all()
    ir = rows.inspect_llvm(rows.signatures[0])
    assert "!nontemporal" in ir
    assert "llvm.prefetch" in ir


def test_unknown_yardstick_is_refused():
    with pytest.raises(ValueError, match="unknown yardstick 'fil'"):
        _engine.stream("fil", np.zeros(8, np.float32))


@pytest.fixture
def kernels(monkeypatch):
    """The kernels the engine launches, in order."""
    seen: list = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        seen.append(k)
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", record)
    return seen


@pytest.fixture(params=["streamed", "plain"])
def way(request, spy, monkeypatch):
    """How the direct pass stores its lines: by streaming stores (the spy's bound, 0), or by
    plain stores (tables below the streaming bound, ``_engine.plain_direct``, here from
    any size, on any CPU: ``_engine.plain_direct_cpu``)."""
    if request.param == "plain":
        monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", 1 << 62)
        monkeypatch.setattr(_engine, "_PLAIN_DIRECT_MIN_BYTES", 0)
        monkeypatch.setattr(_engine, "_PLAIN_DIRECT_ROW_BYTES", 0)
        monkeypatch.setattr(_engine, "_plain_direct_cpu", True)
    return request.param


def _direct_off(monkeypatch, fn):
    """``fn()`` with the ``direct`` mode off: streamed rows computed into L1, then copied."""
    with monkeypatch.context() as m:
        m.setitem(_engine.MODES, "direct", False)
        return fn()


def _direct(dtype, layout, dim, element_parity) -> bool:
    """Whether a table's rows go to ``direct.table_direct_kernel`` (see ``direct_rows``)."""
    per_line = 64 // dtype.itemsize
    group = per_line if layout == "half" else per_line // 2
    return (dim // 2) % group == 0 and (layout == "half" or element_parity % 2 == 0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [16, 32, 48, 64, 1024])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("given", [False, True])
def test_direct_rows_from_every_start(
    spy, way, kernels, monkeypatch, dtype, layout, dim, split, given
):
    """Rows computed a line at a time straight into memory (``_kernels.direct``): the bytes of the
    rows computed into L1 and copied, and of plain stores, for a table starting at every
    element of a line (the line two rows share completed in ``carry``; runs that meet
    mid-line between workers with ``split``), positions as offsets or as an array (no
    lanes kernel); the elements around untouched."""
    from fastpe._kernels.direct import table_direct_kernel

    rows = 120
    dtype = np.dtype(dtype)
    if split:
        _many_workers(monkeypatch)
    lead = 64 // dtype.itemsize
    pos = OFFSETS[1] + np.arange(rows)

    def table(**kw):
        at = {"positions": pos} if given else {"offset": int(pos[0])}
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, layout=layout, **at, **kw)

    want = _plain(monkeypatch, table)
    assert _direct_off(monkeypatch, table).tobytes() == want.tobytes()
    raw = np.full(rows * dim + 3 * lead, 7, dtype=dtype)
    first = (-raw.ctypes.data % 64) // dtype.itemsize  # raw[first] starts a line
    for start in range(first, first + lead):
        raw[:] = 7
        out = raw[start : start + rows * dim].reshape(rows, dim)
        kernels.clear()
        table(out=out)
        direct = _direct(dtype, layout, dim, start - first)
        lanes = not given and _table_lanes(dtype, dim)
        assert (table_direct_kernel in kernels) == (direct and not lanes), start
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("start", [0, 2, 5, 8])
@pytest.mark.parametrize("step", [1, -1])
def test_direct_rows_apart(spy, way, kernels, monkeypatch, dtype, layout, start, step):
    """Rows that do not lie back to back (``out=`` a column slice of a wider array, in
    order or last to first): each row's partial lines take masked plain stores; the same
    bytes, the columns around untouched."""
    from fastpe._kernels.direct import table_direct_kernel

    rows, dim, width = 100, 64, 64 + 18
    dtype = np.dtype(dtype)

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, dtype=dtype, layout=layout, offset=5, **kw)

    want = _plain(monkeypatch, table)
    wide = np.full((rows, width), 7, dtype=dtype)
    table(out=wide[::step, start : start + dim])
    assert (table_direct_kernel in kernels) == _direct(dtype, layout, dim, start)
    assert wide[::step, start : start + dim].tobytes() == want.tobytes()
    rest = np.delete(wide, np.s_[start : start + dim], axis=1)
    assert (rest == 7).all()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [16, 32, 64])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("every", [False, True])
def test_direct_rows_fixed_up_in_every_line(
    spy, way, kernels, monkeypatch, layout, dim, split, every
):
    """A row whose every sine the fix-up changes (``base=1``: every pair at the angle
    ``p``, and ``sin(FIXUP_CHANGES)`` about 1.75e-12), written from every start of a line:
    the values the fix-up recomputes lie in the row's first partial line (merged with the
    row before), its whole lines, and its last partial line (still in ``carry``, completed
    by the next row); the bytes of the other paths, and the reference's values. ``every``:
    every row at that position (each one restarts the recurrence), the first and last rows
    of each worker among them, then rows apart (``out=`` a column slice)."""
    from fastpe._kernels.direct import table_direct_kernel

    rows = 60
    if split:
        _many_workers(monkeypatch)
    pos = FIXUP_CHANGES - 30 + np.arange(rows)
    if every:
        pos[:] = FIXUP_CHANGES

    def table(**kw):
        return fastpe.sinusoidal_table(rows, dim, base=1.0, layout=layout, positions=pos, **kw)

    want = _plain(monkeypatch, table)
    assert _direct_off(monkeypatch, table).tobytes() == want.tobytes()
    exact = reference.sinusoidal_table(1, dim, base=1.0, offset=FIXUP_CHANGES, layout=layout)
    unfixed = fastpe.add_sinusoidal(np.zeros((1, dim), np.float32), base=1.0, offset=FIXUP_CHANGES)
    sines = np.s_[0::2] if layout == "interleaved" else np.s_[: dim // 2]
    assert (want[30] == exact[0]).all() and (unfixed[0][sines] != exact[0][sines]).all()
    raw = np.full(rows * dim + 32, 7, dtype=np.float32)
    first = (-raw.ctypes.data % 64) // 4
    for start in range(first, first + 16):
        raw[:] = 7
        out = raw[start : start + rows * dim].reshape(rows, dim)
        kernels.clear()
        table(out=out)
        assert (table_direct_kernel in kernels) == _direct(out.dtype, layout, dim, start - first)
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()
    if every:
        wide = np.full((rows, dim + 10), 7, dtype=np.float32)
        for start in (0, 2, 4, 10):
            kernels.clear()
            table(out=wide[:, start : start + dim])
            assert (table_direct_kernel in kernels) == _direct(wide.dtype, layout, dim, start)
            assert wide[:, start : start + dim].tobytes() == want.tobytes(), start
            wide[:] = 7


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("split", [False, True])
def test_direct_rows_at_any_positions(spy, way, kernels, monkeypatch, dtype, layout, split):
    """Positions with gaps, repeats and runs going down (the recurrence steps over gaps and
    restarts elsewhere), around positions whose rows are fixed up: the bytes of the copy
    and of plain stores."""
    from fastpe._kernels.direct import table_direct_kernel

    rng = np.random.default_rng(11)
    dim = 64
    if split:
        _many_workers(monkeypatch)
    parts = [
        np.arange(40) * 3,  # gaps of 2 within a group of 16
        np.repeat(np.arange(10), 3),  # repeats
        np.arange(50)[::-1],  # down
        FIXUP_CHANGES - 20 + np.cumsum(rng.integers(0, 4, 40)),  # gaps around a fix-up
        rng.integers(0, 2**40, 30),
    ]
    pos = np.concatenate(parts)

    def table():
        return fastpe.sinusoidal_table(pos.size, dim, dtype=dtype, layout=layout, positions=pos)

    want = _plain(monkeypatch, table)
    assert _direct_off(monkeypatch, table).tobytes() == want.tobytes()
    kernels.clear()
    assert table().tobytes() == want.tobytes()
    assert table_direct_kernel in kernels


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("step", [False, True])
@pytest.mark.parametrize("stream", [True, False])
def test_direct_rows_flag_each_small_pair(layout, step, stream):
    """``row_pass`` flags a row for the fix-up whichever of its values is small (a sine or a
    cosine whose float32 is under ``FIXUP_THRESHOLD``: one float32 step under it is, the
    threshold itself is not), wherever the row starts in its line (the pair in the first
    partial line, a whole line or the last partial line), and only then."""
    import numba

    from fastpe._kernels import direct
    from fastpe._kernels.tables import FIXUP_THRESHOLD

    threshold = float(np.float32(FIXUP_THRESHOLD))
    below = float(np.nextafter(np.float32(FIXUP_THRESHOLD), np.float32(0)))

    fn = {
        ("interleaved", False, True): direct._row_i_fold,
        ("interleaved", True, True): direct._row_i_step,
        ("half", False, True): direct._row_h_fold,
        ("half", True, True): direct._row_h_step,
        ("interleaved", False, False): direct._plain_i_fold,
        ("interleaved", True, False): direct._plain_i_step,
        ("half", False, False): direct._plain_h_fold,
        ("half", True, False): direct._plain_h_step,
    }[layout, step, stream]

    @numba.njit
    def one(flat, at, a_s, a_c, tc, ts, carry, tail):
        return fn(flat, at, a_s, a_c, 0, tc, ts, 0, carry, False, tail)

    n = 32
    raw = np.zeros(2 * n + 64, np.float32)
    first = (-raw.ctypes.data % 64) // 4
    tc, ts = np.ones((1, n)), np.zeros((1, n))
    carry = np.zeros(32, np.float32)
    for at in range(first, first + 16, 2 if layout == "interleaved" else 1):
        for tail in (False, True):
            a_s, a_c = np.full((1, n), 0.5), np.full((1, n), 0.5)
            assert one(raw, at, a_s, a_c, tc, ts, carry, tail) == 0
            for i in range(n):
                for small, flagged in ((1e-9, 1), (below, 1), (threshold, 0)):
                    for state in (0, 1):  # a sine or a cosine
                        a = [np.full((1, n), 0.5), np.full((1, n), 0.5)]
                        a[state][0, i] = small
                        got = one(raw, at, a[0], a[1], tc, ts, carry, tail)
                        assert got == flagged, (at, i, small, state)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("stream", [True, False])
def test_stepped_rows_step_their_own_state_alone(layout, stream):
    """A stepped row (``row_pass``'s ``step``; the half layout's lines computed as two
    groups of 8 pairs) writes each pair's stepped state back and its values to the row,
    and nothing on either side of the state's row, wherever the row starts in its line."""
    import numba

    from fastpe._kernels import direct

    fn = {
        ("interleaved", True): direct._row_i_step,
        ("half", True): direct._row_h_step,
        ("interleaved", False): direct._plain_i_step,
        ("half", False): direct._plain_h_step,
    }[layout, stream]

    @numba.njit
    def one(flat, at, a_s, a_c, tc, ts, carry):
        return fn(flat, at, a_s, a_c, 1, tc, ts, 0, carry, False, False)

    n = 48
    raw = np.zeros(2 * n + 64, np.float32)
    first = (-raw.ctypes.data % 64) // 4
    ang = np.arange(n) * 0.01
    tc, ts = np.cos(ang)[None], np.sin(ang)[None]
    s0, c0 = 0.6 - ang / 100, 0.8 + ang / 100  # (a value of its own for each pair)
    want_s, want_c = s0 * tc[0] + c0 * ts[0], c0 * tc[0] - s0 * ts[0]
    for at in range(first, first + 16, 2 if layout == "interleaved" else 1):
        a_s, a_c = np.full((3, n), 7.0), np.full((3, n), 7.0)  # the state in row 1
        a_s[1], a_c[1] = s0, c0
        raw[:] = 0
        assert one(raw, at, a_s, a_c, tc, ts, np.zeros(32, np.float32)) == 0
        assert (a_s[1] == want_s).all() and (a_c[1] == want_c).all(), at
        assert (a_s[[0, 2]] == 7.0).all() and (a_c[[0, 2]] == 7.0).all(), at
        row = raw[at : at + 2 * n]
        got_s, got_c = (row[0::2], row[1::2]) if layout == "interleaved" else (row[:n], row[n:])
        assert (got_s == want_s.astype(np.float32)).all(), at
        assert (got_c == want_c.astype(np.float32)).all(), at
        assert not raw[:at].any() and not raw[at + 2 * n :].any()


@pytest.mark.parametrize("stream", [True, False])
def test_direct_rows_use_streaming_stores(stream):
    """``row_pass``'s lines really leave by non-temporal stores (``stream`` False: by plain
    ones only, each line prefetched for writing first), the partial ones by masked
    stores."""
    import numba

    from fastpe._kernels import direct

    fn = direct._row_i_fold if stream else direct._plain_i_fold

    @numba.njit
    def one(flat, a_s, a_c, tc, ts, carry):
        return fn(flat, 2, a_s, a_c, 0, tc, ts, 0, carry, False, False)

    n = 32
    flat = np.zeros(2 * n + 8, np.float32)  # (16-byte aligned: flat[2] at an even value)
    a_s, a_c = np.full((1, n), 0.5), np.full((1, n), 0.25)
    tc, ts = np.ones((1, n)), np.zeros((1, n))
    assert one(flat, a_s, a_c, tc, ts, np.zeros(32, np.float32)) == 0
    assert (flat[2 : 2 + 2 * n : 2] == 0.5).all() and (flat[3 : 3 + 2 * n : 2] == 0.25).all()
    assert not flat[:2].any() and not flat[2 + 2 * n :].any()
    ir = one.inspect_llvm(one.signatures[0])
    assert ("!nontemporal" in ir) == stream and "llvm.masked.store" in ir
    assert ("llvm.prefetch" in ir) == (not stream)  # plain stores: each line asked for first


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_plain_direct_from_its_bound(kernels, monkeypatch, dtype, layout):
    """Tables below the streaming bound take the direct pass by plain stores (its kernel's
    ``stream`` None: no streaming store compiled) from ``_PLAIN_DIRECT_MIN_BYTES`` up, rows
    from ``_PLAIN_DIRECT_ROW_BYTES``, with the
    ``plain_direct`` mode on and rows it takes (``direct_rows``); smaller ones, shorter
    rows, every one with the mode off, and those from the streaming bound up with the
    ``stream`` mode off, ``table_kernel``'s rows; the same bits every way (on any CPU:
    ``_engine.plain_direct_cpu``)."""
    import numba

    from fastpe._kernels.direct import table_direct_kernel
    from fastpe._kernels.tables import table_kernel

    dtype = np.dtype(dtype)
    dim = 64
    rows = 64 * 1024 // (dim * dtype.itemsize)  # the bound's size
    monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", 2 * rows * dim * dtype.itemsize)
    monkeypatch.setattr(_engine, "_PLAIN_DIRECT_MIN_BYTES", 64 * 1024)
    # rows of 64 values at the row bound
    bound = dim * dtype.itemsize
    monkeypatch.setattr(_engine, "_PLAIN_DIRECT_ROW_BYTES", bound)
    monkeypatch.setattr(_engine, "_plain_direct_cpu", True)
    seen = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        seen.append((k, args))
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", record)
    want = None
    cases = [
        (rows, True, True, True),
        (rows - 1, True, True, False),
        (rows, False, True, False),
        (2 * rows, True, False, False),  # at the streaming bound, streaming off
        (rows, True, True, bound + 1),  # rows shorter than the bound
    ]
    for n, mode, stream, direct in cases:
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "plain_direct", mode)
            m.setitem(_engine.MODES, "stream", stream)
            if not isinstance(direct, bool):
                m.setattr(_engine, "_PLAIN_DIRECT_ROW_BYTES", direct)
                direct = False
            seen.clear()
            got = fastpe.sinusoidal_table(n, dim, dtype=dtype, layout=layout, offset=OFFSETS[2])
        kern, args = seen[-1]
        assert (kern is table_direct_kernel) == direct and (direct or kern is table_kernel)
        assert args[-1] is None  # (direct: its stream flag; table_kernel: its stream, off)
        want = got if want is None else want
        assert got[: rows - 1].tobytes() == want[: rows - 1].tobytes()
        if direct:  # compiled afresh (uncached), so that its IR can be read
            fresh = numba.njit(table_direct_kernel.py_func)
            fresh(0, 1, *args)
            ir = fresh.inspect_llvm(fresh.signatures[0])
            assert "!nontemporal" not in ir and "llvm.prefetch" in ir


# add_sinusoidal's float32 rows whose table row serves one row of x (one batch row, or
# positions per batch row) are added a line at a time by the same pass (``add``: plain loads
# and stores of x's lines), at any size


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [16, 32, 48, 64, 1024])
@pytest.mark.parametrize("kind", ["one row", "offsets", "positions"])
@pytest.mark.parametrize("split", [False, True])
def test_direct_add_from_every_start(kernels, monkeypatch, layout, dim, kind, split):
    """Rows added a line at a time (``add_direct_kernel``): the bytes of the walk that adds
    each value from the recurrence's state, for x starting at every element of a line, one
    batch row or positions per batch row (gaps, repeats, rows fixed up in tables); the
    elements around untouched."""
    from fastpe._kernels.direct import add_direct_kernel

    rng = np.random.default_rng(dim)
    if split:
        _many_workers(monkeypatch)
    nb, ns = (1, 90) if kind == "one row" else (3, 40)
    kw: dict = {}
    if kind == "offsets":
        kw["offset"] = np.array([0, FIXUP_CHANGES - 20, 2**40 + 3])
    elif kind == "positions":
        kw["positions"] = np.concatenate(
            [rng.integers(0, 2**40, (nb, 10)), np.arange(30)[::-1] * np.ones((nb, 1), int)],
            axis=1,
        )
    size = nb * ns * dim
    x0 = rng.standard_normal(size).astype(np.float32).reshape(nb, ns, dim)
    # -0.0 around x: a whole-line load, add and store over elements not x's would add
    # +0.0 there and leave +0.0 (7, or any other value, would stay as it was)
    raw = np.full(size + 32, -0.0, dtype=np.float32)
    first = (-raw.ctypes.data % 64) // 4
    around = raw.view(np.uint32)[0]

    def add(direct):
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "direct", direct)
            raw[:] = -0.0
            out = raw[start : start + size].reshape(nb, ns, dim)
            out[:] = x0
            kernels.clear()
            fastpe.add_sinusoidal(out, layout=layout, out=out, **kw)
            return out.copy(), add_direct_kernel in kernels

    for start in range(first, first + 16):
        want, used = add(False)
        assert not used
        got, used = add(True)
        group = 16 if layout == "half" else 8
        fits = (dim // 2) % group == 0 and (layout == "half" or (start - first) % 2 == 0)
        lanes = kind == "one row" and dim // 2 <= _LANES_MAX_PAIRS  # (add_lanes_kernel)
        assert used == (fits and not lanes)
        assert got.tobytes() == want.tobytes(), start
        bits = raw.view(np.uint32)
        assert (bits[:start] == around).all() and (bits[start + size :] == around).all()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("start", [0, 2, 3, 8])
@pytest.mark.parametrize("step", [1, -1])
def test_direct_add_rows_apart(kernels, monkeypatch, layout, start, step):
    """Rows of x that do not lie back to back (a column slice of a wider array, in order or
    last to first): the same bytes, the columns around untouched."""
    from fastpe._kernels.direct import add_direct_kernel

    rows, dim, width = 100, 64, 64 + 18
    x0 = np.random.default_rng(3).standard_normal((rows, width)).astype(np.float32)
    x0[:, :start] = x0[:, start + dim :] = -0.0  # (see test_direct_add_from_every_start)

    def add(direct):
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "direct", direct)
            wide = x0.copy()
            v = wide[::step, start : start + dim]
            kernels.clear()
            fastpe.add_sinusoidal(v, layout=layout, out=v, offset=5)
            return wide, add_direct_kernel in kernels

    want, used = add(False)
    assert not used
    got, used = add(True)
    assert used == (layout == "half" or start % 2 == 0)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_direct_add_not_for_rows_it_cannot_take(kernels, monkeypatch, layout):
    """x whose elements are off their own alignment (the pass's line loads would not be
    aligned), and interleaved rows of an odd batch stride (every other batch row at an odd
    element of its line): ``add_kernel``'s walk, the same values as with the mode off."""
    from fastpe._kernels.direct import add_direct_kernel

    dim = 32
    raw = np.zeros(4 * 3 * 40 * dim + 8, dtype=np.uint8)
    off = np.frombuffer(raw.data, dtype=np.float32, count=3 * 40 * dim, offset=1)
    odd = np.zeros((3, 40 * dim + 1), np.float32)[:, : 40 * dim].reshape(3, 40, dim)
    cases = [(off.reshape(3, 40, dim), False), (odd, layout == "half")]
    for x, taken in cases:
        x[:] = np.random.default_rng(0).standard_normal(x.shape)
        x0 = x.copy()
        kernels.clear()
        fastpe.add_sinusoidal(x, layout=layout, out=x, offset=np.array([0, 5, 9]))
        assert (add_direct_kernel in kernels) == taken
        got = x.copy()
        x[:] = x0
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, "direct", False)
            fastpe.add_sinusoidal(x, layout=layout, out=x, offset=np.array([0, 5, 9]))
        assert got.tobytes() == x.tobytes()


# RoPE rows whose cos/sin serve that row alone (one head; positions per batch row, or one
# batch row) are rotated a line at a time as their cos/sin are computed
# (_kernels.direct.rope_pass, rope_kernel's ``fused``), with the bits of the cache's path


def _rope_fused(monkeypatch, fused: bool, call):
    """``call()`` with the ``fused`` mode on or off (not Zen 5's host test: the pass is
    taken there with the mode on too), and whether rope_kernel ran it."""
    from fastpe._kernels import rope_kernel

    seen = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        if k is rope_kernel:
            seen.append(args[6] is not None)  # (fused, after fill_ahead)
        return launch(k, args, n_workers, threads)

    with monkeypatch.context() as m:
        m.setattr(_engine, "_launch", record)
        m.setattr(_engine, "host_zen5", lambda: False)
        m.setitem(_engine.MODES, "fused", fused)
        out = call()
    return out, any(seen)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [16, 32, 48, 64, 256])
@pytest.mark.parametrize("kind", ["one row", "offsets", "positions", "scaled"])
@pytest.mark.parametrize("split", [False, True])
def test_fused_rope_from_every_start(monkeypatch, dtype, layout, dim, kind, split):
    """Rows rotated as their cos/sin come: the bytes of the cache's path, for x starting at
    every element of a line, one batch row (2-D and 3-D x) or positions per batch row
    (offsets far apart, position arrays with gaps, repeats and descending runs, positions
    of 2**40), with an attention factor and the inverse (``scaled``); the elements around
    x (random values, which a rotation would change) untouched."""
    rng = np.random.default_rng(dim)
    if split:
        _many_workers(monkeypatch)
    nb, ns = (1, 90) if kind == "one row" else (3, 40)
    kw: dict = {"layout": layout}
    if kind == "offsets":
        kw["offset"] = np.array([0, 10**6 + 7, 2**40 + 3])
    elif kind == "positions":
        kw["positions"] = np.concatenate(
            [rng.integers(0, 2**40, (nb, 10)), np.arange(30)[::-1] * np.ones((nb, 1), int)],
            axis=1,
        )
    elif kind == "scaled":
        kw["offset"] = np.array([5, 70000, 3])
        kw["inverse"] = True
        kw["scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    else:
        kw["offset"] = 2**33 + 5
    size = nb * ns * dim
    x0 = rng.standard_normal(size).astype(dtype)
    # NaNs of either sign (the sign the cache's path leaves: its fused multiply-subtract
    # keeps it) and infinities in either channel of a pair
    x0[[5, 17, 30, 64]] = [-np.nan, np.inf, -np.inf, np.nan]
    per_line = 64 // x0.itemsize
    raw0 = rng.standard_normal(size + 2 * per_line).astype(dtype)
    raw = np.empty_like(raw0)
    first = (-raw.ctypes.data % 64) // raw.itemsize

    def rot(fused, start):
        raw[:] = raw0
        out = raw[start : start + size].reshape((ns, dim) if nb == 1 and split else (nb, ns, dim))
        out.reshape(-1)[:] = x0
        _, used = _rope_fused(monkeypatch, fused, lambda: fastpe.apply_rope(out, out=out, **kw))
        return out.copy(), used

    group = per_line if layout == "half" else per_line // 2
    # (the short walk's rows: one batch row, or positions per batch row, up to 64 bytes)
    short = dim * x0.itemsize <= _engine._SHORT_RUN_ROW_BYTES
    for start in range(first, first + per_line):
        want, used = rot(False, start)
        assert not used
        got, used = rot(True, start)
        fits = (dim // 2) % group == 0 and (layout == "half" or (start - first) % 2 == 0)
        assert used == (fits and not short)
        assert got.tobytes() == want.tobytes(), start
        assert raw[:start].tobytes() == raw0[:start].tobytes()
        assert raw[start + size :].tobytes() == raw0[start + size :].tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("start", [0, 2, 3, 8])
@pytest.mark.parametrize("step", [1, -1])
def test_fused_rope_rows_apart(monkeypatch, dtype, layout, start, step):
    """Rows of x that do not lie back to back (a column slice of a wider array, in order or
    last to first, per-row offsets): the same bytes, the columns around untouched."""
    rows, dim, width = 100, 64, 64 + 18
    x0 = np.random.default_rng(3).standard_normal((4, rows, width)).astype(dtype)

    def rot(fused):
        wide = x0.copy()
        v = wide[:, ::step, start : start + dim]
        offs = np.array([0, 10**6, 5, 2**40])
        _, used = _rope_fused(
            monkeypatch, fused, lambda: fastpe.apply_rope(v, layout=layout, out=v, offset=offs)
        )
        return wide, used

    want, used = rot(False)
    assert not used
    got, used = rot(True)
    assert used == (layout == "half" or start % 2 == 0)
    assert got.tobytes() == want.tobytes()


def test_fused_rope_not_for_rows_it_cannot_take(monkeypatch):
    """Several heads, several batch rows sharing positions, partial rotary that reads the
    rest of short rows, x off its element alignment, interleaved rows of an odd batch
    stride: the cache's path (the same values as with the mode off). Where partial rotary
    does not read the rest (``_engine.reads_rest``), its rows are taken, the same bits."""
    monkeypatch.setattr(_engine, "_rest_reads", True)
    raw = np.zeros(4 * 3 * 40 * 64 + 8, dtype=np.uint8)
    off = np.frombuffer(raw.data, dtype=np.float32, count=3 * 40 * 64, offset=1).reshape(3, 40, 64)
    odd = np.zeros((3, 40 * 64 + 1), np.float32)[:, : 40 * 64].reshape(3, 40, 64)
    spread = {"offset": np.array([0, 10**6, 5])}
    cases = [
        (np.zeros((3, 40, 2, 64), np.float32), spread),
        (np.zeros((3, 40, 64), np.float32), {"offset": 5}),
        (np.zeros((3, 40, 64), np.float32), {**spread, "rotary_dim": 48}),
        (off, spread),
        (odd, spread),
    ]
    for x, kw in cases:
        x[:] = np.random.default_rng(0).standard_normal(x.shape)
        x0 = x.copy()

        def call(x=x, kw=kw):
            return fastpe.apply_rope(x, out=x, **kw)

        _, used = _rope_fused(monkeypatch, True, call)
        assert not used
        got = x.copy()
        x[:] = x0
        _rope_fused(monkeypatch, False, call)
        assert got.tobytes() == x.tobytes()
    # taken: the odd batch stride in the half layout, and one batch row (its batch
    # stride plays no part)
    _, used = _rope_fused(
        monkeypatch, True, lambda: fastpe.apply_rope(odd, out=odd, layout="half", **spread)
    )
    assert used
    _, used = _rope_fused(monkeypatch, True, lambda: fastpe.apply_rope(odd[:1], out=odd[:1]))
    assert used
    x = np.random.default_rng(1).standard_normal((3, 40, 64)).astype(np.float32)
    part = {**spread, "rotary_dim": 48}
    monkeypatch.setattr(_engine, "_rest_reads", False)
    got, used = _rope_fused(monkeypatch, True, lambda: fastpe.apply_rope(x, **part))
    assert used
    want, used = _rope_fused(monkeypatch, False, lambda: fastpe.apply_rope(x, **part))
    assert not used
    assert got.tobytes() == want.tobytes()
    assert_rope_close(got, reference.apply_rope(x, **part), x, "interleaved", 48)


def test_fused_rope_needs_fused_multiply_add(monkeypatch):
    """A CPU without fused multiply-add (where the cache's path rounds each product) keeps
    the cache's path."""
    from fastpe._kernels import turn

    x = np.random.default_rng(0).standard_normal((3, 40, 64)).astype(np.float32)
    monkeypatch.setattr(_engine, "host_zen5", lambda: False)
    monkeypatch.setattr(_engine, "_prefetch512", False)
    assert _engine.fused_rows(x, 0, 40 * 64, 64, 32, False, x.nbytes) == _engine._LINE_AHEAD
    monkeypatch.setattr(turn, "TARGET_FMA", False)
    assert _engine.fused_rows(x, 0, 40 * 64, 64, 32, False, x.nbytes) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_rope_entry_points(monkeypatch, dtype):
    """Rows rotated as their cos/sin come through each way in: a 2-D x with a position
    array, a (seq, heads=1, dim) x along seq_axis=0, q and k of one head each
    (apply_rope_qk), long rows of which a part rotates (rows apart), per-row offsets with
    an attention factor: the bytes of the cache's path."""
    rng = np.random.default_rng(1)
    spread = np.array([3, 10**6, 2**40])
    calls = [
        (lambda v: fastpe.apply_rope(v[0], out=v[0], positions=rng_pos), (1, 300, 128)),
        (lambda v: fastpe.apply_rope(v[0], out=v[0], seq_axis=0, layout="half"), (300, 1, 64)),
        (
            lambda v: fastpe.apply_rope_qk(v[0], v[1], out=v, offset=7, layout="half"),
            (1, 300, 1, 256),
        ),
        (
            lambda v: fastpe.apply_rope(v[0], out=v[0], offset=spread, rotary_dim=2048),
            (3, 40, 2304),
        ),
        (
            lambda v: fastpe.apply_rope(
                v[0], out=v[0], offset=spread, scaling={"rope_type": "yarn", "factor": 8.0,
                "original_max_position_embeddings": 64}, layout="half",
            ),
            (3, 40, 128),
        ),
    ]  # fmt: skip
    rng_pos = rng.integers(0, 2**40, 300)
    for call, shape in calls:
        x0 = [rng.standard_normal(shape).astype(dtype) for _ in range(2)]

        def run(call=call, x0=x0):
            return call([a.copy() for a in x0])

        got, used = _rope_fused(monkeypatch, True, run)
        assert used, shape
        want, used = _rope_fused(monkeypatch, False, run)
        assert not used
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        assert [a.tobytes() for a in got] == [a.tobytes() for a in want], shape


def test_fused_rope_not_on_zen5(monkeypatch):
    """On Zen 5 the rows take the fill_ahead mode's prefetch instead (measured there)."""
    x = np.random.default_rng(0).standard_normal((3, 40, 64)).astype(np.float32)
    monkeypatch.setattr(_engine, "_prefetch512", False)
    monkeypatch.setattr(_engine, "host_zen5", lambda: True)
    assert _engine.fused_rows(x, 0, 40 * 64, 64, 32, False, x.nbytes) is None
    monkeypatch.setattr(_engine, "host_zen5", lambda: False)
    assert _engine.fused_rows(x, 0, 40 * 64, 64, 32, False, x.nbytes) == _engine._LINE_AHEAD


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_fused_rope_rows_back_to_back_in_reverse(monkeypatch, dtype, layout):
    """Rows back to back walked last to first (a row stride of -2n: no carry between them,
    each shared line stored by masked stores), x from every element of a line: the bytes
    of the cache's path, the elements around untouched."""
    rows, dim = 60, 64
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal(rows * dim).astype(dtype)
    per_line = 64 // x0.itemsize
    raw0 = rng.standard_normal(rows * dim + 2 * per_line).astype(dtype)
    raw = np.empty_like(raw0)
    first = (-raw.ctypes.data % 64) // raw.itemsize
    for start in range(first, first + per_line, 1 if layout == "half" else 2):

        def rot(fused, start=start):
            raw[:] = raw0
            v = raw[start : start + rows * dim].reshape(rows, dim)[::-1]
            v.reshape(-1)[:] = x0
            _, used = _rope_fused(
                monkeypatch, fused, lambda: fastpe.apply_rope(v, out=v, layout=layout, offset=9)
            )
            return raw.copy(), used

        want, used = rot(False)
        assert not used
        got, used = rot(True)
        assert used
        assert got.tobytes() == want.tobytes(), start


def test_fused_and_direct_sums_prefetch_ahead(monkeypatch):
    """The fused rows and the sums a line at a time prefetch as they go (a hint: no value
    shows it, so the IR is read); the sums on Zen 5 only in arrays as large as the
    last-level cache (``_engine.prefetch_fits``), the same values either way."""
    import numba

    from fastpe._kernels import direct

    n = 32
    flat = np.zeros(2 * n + 16, np.float32)
    a_s, a_c = np.full((4, n), 0.5), np.full((4, n), 0.25)
    tc, ts = np.ones((16, n)), np.zeros((16, n))
    carry = np.zeros(32, np.float32)

    def ir_of(f):  # uncached, so that its IR can be inspected (arrays as arguments)
        g = numba.njit(f)
        g(flat, a_s, a_c, tc, ts, carry)
        return g.inspect_llvm(g.signatures[0])

    def rot(flat, a_s, a_c, tc, ts, carry):
        direct._rope_i(flat, 2, a_s, a_c, 3, tc, ts, 0, 1.0, 1.0, carry, False, False, 4096)

    def add(flat, a_s, a_c, tc, ts, carry):
        direct._add_i_step(flat, 2, a_s, a_c, 0, tc, ts, 0, carry, False, False, 4096)

    def add_here(flat, a_s, a_c, tc, ts, carry):
        direct._add_i_here(flat, 2, a_s, a_c, 0, tc, ts, 0, carry, False, False, 4096)

    assert "llvm.prefetch" in ir_of(rot)
    assert "llvm.prefetch" in ir_of(add)
    assert "llvm.prefetch" not in ir_of(add_here)
    seen = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        if k is direct.add_direct_kernel:
            seen.append(args[-1])
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", record)
    x = np.random.default_rng(0).standard_normal((1, 40, 64)).astype(np.float32)
    got = []
    monkeypatch.setattr(_engine, "_prefetch512", False)
    for zen5, llc in ((False, 1 << 62), (True, 0), (True, 1 << 62)):
        monkeypatch.setattr(_engine, "_zen5", zen5)
        monkeypatch.setattr(_engine, "_LLC_BYTES", llc)
        got.append(fastpe.add_sinusoidal(x).tobytes())
    assert seen == [_engine._LINE_AHEAD, _engine._LINE_AHEAD, None]
    assert got[0] == got[1] == got[2]


def _workers_last_first(monkeypatch, reverse: bool = True) -> list:
    """Run each call's workers one at a time, the last first (``reverse``; else the first
    first) (the kernels' contract: a worker writes its own rows' elements and nothing
    else, so any order gives the same bytes); return each call's count of workers."""
    ran: list = []

    def alone(k, args, n_workers, threads):
        ran.append(n_workers)
        for w in reversed(range(n_workers)) if reverse else range(n_workers):
            k(w, w + 1, *args)

    monkeypatch.setattr(_engine, "_launch", alone)
    return ran


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [18, 64, 100, 1022])
@pytest.mark.parametrize("zen5", [False, True])
@pytest.mark.parametrize("reverse", [True, False])
def test_streamed_workers_write_only_their_rows(
    spy, monkeypatch, dtype, layout, dim, zen5, reverse
):
    """Streamed tables whose rows lie back to back, split between workers whose runs meet
    mid-line, each worker run alone, the last one first (``reverse``), then the first one
    first: a worker that streamed a line past its run's end (its last partial line written
    whole, a line too many in a row's trail) would overwrite the first values of the
    worker after it, written before it; one that wrote before its run's start, the last
    values of the worker before it. (Where the threads run the other worker later, it
    writes those values again, and the tests above see nothing.) Starting at every element
    of a line, on either CPU rule (16-bit
    rows: behind the next row elsewhere, a row at a time on Zen 5); the same bytes as
    plain stores, the elements around untouched."""
    rows = 300
    dtype = _dtype(dtype)
    _many_workers(monkeypatch)
    monkeypatch.setattr(_engine, "_zen5", zen5)

    def table(**kw):
        return fastpe.sinusoidal_table(
            rows, dim, dtype=dtype, layout=layout, offset=OFFSETS[1], **kw
        )

    want = _plain(monkeypatch, table)
    ran = _workers_last_first(monkeypatch, reverse)
    lead = 64 // dtype.itemsize
    raw = np.full(rows * dim + 3 * lead, 7, dtype=np.dtype(f"u{dtype.itemsize}"))
    first = (-raw.ctypes.data % 64) // dtype.itemsize  # raw[first] starts a line
    for start in range(first, first + lead):
        raw[:] = 7
        spy.clear()
        out = raw[start : start + rows * dim].view(dtype).reshape(rows, dim)
        table(out=out)
        assert spy == [ON], start
        assert out.tobytes() == want.tobytes(), start
        assert (raw[:start] == 7).all() and (raw[start + rows * dim :] == 7).all()
    assert len(ran) == lead and min(ran) > 1  # one launch a call, its workers alone


def test_every_streaming_kernel_holds_a_fence(spy, monkeypatch):
    """Streaming stores are weakly ordered: a kernel specialization that holds them
    (LLVM's ``!nontemporal``) also holds the fence that makes them visible before its
    worker returns (``stream_fence``: x86 ``sfence``, a full fence elsewhere; its place
    after the stores is not checked here). The kernels
    of streamed tables: float32 and float64 rows a line at a time (``table_direct_kernel``),
    float32 rows as a run and one by one (``table_kernel``), 16-bit rows behind the next
    row and a row at a time (Zen 5's rule; ``table16_kernel``), a grid table; each
    compiled afresh (uncached) so that its IR can be read. A fence left out passes every
    test of bytes above, run in one thread or not: nothing there reads the lines before
    they land. (``test_trailed_16_bit_rows_stream`` checks that a plain specialization
    holds neither.)"""
    import numba

    fence = "llvm.x86.sse.sfence" if _engine_x86() else "fence seq_cst"
    launched: list = []
    launch = _engine._launch

    def record(k, args, n_workers, threads):
        launched.append((k, args))
        return launch(k, args, n_workers, threads)

    monkeypatch.setattr(_engine, "_launch", record)
    wide = np.zeros((40, 64 + 2), np.float32)
    fastpe.sinusoidal_table(40, 64, dtype=np.float32)  # a line at a time
    fastpe.sinusoidal_table(40, 64, dtype=np.float64)
    fastpe.sinusoidal_table(40, 18, dtype=np.float32, layout="half")  # a run
    fastpe.sinusoidal_table(40, 18, out=wide[:, 1:19])  # rows apart, one by one
    fastpe.sinusoidal_table(40, 64, dtype=np.float16)  # behind the next row
    monkeypatch.setattr(_engine, "_zen5", True)
    fastpe.sinusoidal_table(40, 18, dtype=_dtype(DTYPES[-1]), layout="half")  # a row at a time
    fastpe.grid_sinusoidal((24, 24), 64)
    monkeypatch.setattr(_engine, "_launch", launch)
    assert [a[-2:] for k, a in launched if k.py_func.__name__ == "table16_kernel"] == [
        (None, ON),
        (ON, None),
    ]
    streaming = []
    for k, args in launched:
        fresh = numba.njit(k.py_func)
        fresh(0, 1, *args)
        ir = fresh.inspect_llvm(fresh.signatures[0])
        assert "!nontemporal" in ir, k.py_func.__name__
        assert fence in ir, k.py_func.__name__
        streaming.append(k.py_func.__name__)
    assert sorted(set(streaming)) == [
        "grid_kernel",
        "table16_kernel",
        "table_direct_kernel",
        "table_kernel",
    ], streaming


def _engine_x86() -> bool:
    from fastpe._kernels import stream

    return stream._x86()
