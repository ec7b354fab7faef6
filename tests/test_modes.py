"""The engine's speed modes change how the work is walked, never a value (float32 and
float64 here, and 16-bit tables and sums of a few pairs; 16-bit short rows: within one
unit, tests/test_half.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _util import assert_rope_close, launches

import fastpe
from fastpe import _engine
from fastpe import _kernels as K
from fastpe._flag import ON

SPREAD = np.array([0, 10**5, 3 * 10**5 + 17, 7 * 10**5 - 3])  # no runs shared
CASES = [
    ("rope", {"layout": "interleaved"}, (8, 300, 128), np.float32),
    ("rope", {"layout": "interleaved", "offset": 7 * np.arange(8)}, (8, 300, 128), np.float32),
    (
        "rope",
        {
            "layout": "interleaved",
            "positions": np.stack([np.r_[np.arange(100), np.arange(200)]] * 8),
        },
        (8, 300, 64),
        np.float64,
    ),
    ("rope", {"layout": "half", "rotary_dim": 64}, (8, 300, 128), np.float32),
    ("rope", {"layout": "half"}, (8, 300, 128), np.float64),
    # half-layout rows of 1-4 KiB: prefetched; per-row offsets (the runs kernel), heads
    ("rope", {"layout": "half", "offset": 7 * np.arange(4)}, (4, 300, 256), np.float32),
    ("rope", {"layout": "half", "offset": 5}, (2, 300, 3, 512), np.float32),
    # per-row offsets too far apart to share cos/sin: rope_kernel's per-row items (their
    # rows prefetched while their cos/sin is computed, on Zen 5)
    ("rope", {"layout": "interleaved", "offset": SPREAD}, (4, 300, 128), np.float32),
    # interleaved rows of several heads of 512 bytes, and one head of 2 KiB: prefetched (not
    # on Zen 5), by position, the runs kernel and per-row items
    ("rope", {"layout": "interleaved", "offset": 7 * np.arange(3)}, (3, 40, 2, 128), np.float32),
    ("rope", {"layout": "interleaved", "offset": SPREAD[:3]}, (3, 40, 2, 64), np.float64),
    ("rope", {"layout": "interleaved", "inverse": True}, (3, 40, 512), np.float32),
    ("rope", {"layout": "interleaved", "rotary_dim": 128}, (3, 40, 2, 160), np.float32),
    # interleaved rows of 8 KiB and more: their two halves side by side (an odd count of
    # pairs: its last pair after them), by position, the runs kernel and per-row items
    ("rope", {"layout": "interleaved"}, (3, 40, 2, 2050), np.float32),
    ("rope", {"layout": "interleaved", "offset": 7 * np.arange(3)}, (3, 40, 1, 2048), np.float64),
    (
        "rope",
        {"layout": "interleaved", "offset": SPREAD[:3], "rotary_dim": 2050},
        (3, 40, 2304),
        np.float32,
    ),
    ("add", {"layout": "interleaved"}, (4, 300, 256), np.float32),
    ("add", {"layout": "half", "offset": np.arange(4) * 1000}, (4, 300, 256), np.float32),
    ("table", {"layout": "interleaved", "offset": 2**40}, (300, 256), np.float32),
    # a few channels (table_lanes_kernel; 8 pairs: folded, table_kernel), across a row
    # recomputed exactly (|sin| < 2**-20)
    ("table", {"layout": "interleaved", "offset": 4272943 - 300}, (5000, 2), np.float32),
    ("table", {"layout": "interleaved", "offset": -17}, (1000, 4), np.float32),
    ("table", {"layout": "interleaved", "offset": 4272943 - 300}, (5000, 16), np.float32),
    ("table", {"layout": "interleaved", "offset": 2**40 + 3}, (70000, 8), np.float32),
    # add_sinusoidal of a few channels (add_lanes_kernel), threaded, and single rows
    ("add", {"layout": "interleaved", "offset": 4272943 - 300}, (4, 70000, 2), np.float32),
    ("add", {"layout": "half", "offset": -17}, (3, 1000, 16), np.float32),
    ("add", {"layout": "half", "offset": 4272943 - 300}, (4, 70000, 4), np.float32),
    ("add", {"layout": "interleaved", "offset": 2**40 + 3}, (1, 333, 6), np.float32),
    ("add", {"layout": "half", "offset": -17}, (3, 1000, 10), np.float32),  # 5 pairs
    ("add", {"layout": "half", "offset": 2**40 + 3}, (2, 500, 14), np.float32),  # 7 pairs
    # one head of short half-layout rows (short_half): the short walk's fill, row by row
    ("rope", {"layout": "half", "offset": 2**40 + 3}, (4, 700, 8), np.float32),
    ("rope", {"layout": "half", "offset": 11}, (3, 500, 4), np.float64),
    ("rope", {"layout": "half", "offset": SPREAD[:3]}, (3, 500, 4), np.float64),
    ("rope", {"layout": "half", "offset": -7}, (4, 700, 4), np.float32),
    # (8 and 12 pairs: the fill's loop over a position's pairs; 4 pairs of float64, inverse)
    ("rope", {"layout": "half", "offset": 2**40 + 3}, (4, 700, 16), np.float32),
    ("rope", {"layout": "half", "offset": -21, "inverse": True}, (3, 500, 8), np.float64),
    ("rope", {"layout": "half", "offset": 2**33 + 9}, (3, 500, 24), np.float16),
    # 16-bit tables of a few pairs (table16_blocks_kernel where the float32 pass runs, else
    # table16_lanes_kernel), across zero at position 0
    ("table", {"layout": "interleaved", "offset": -17}, (5000, 4), np.float16),
    # half-layout tables of a few pairs (table_lanes_kernel; 8 pairs: folded; 16-bit: as
    # above, 3 pairs table16_lanes_kernel)
    ("table", {"layout": "half", "offset": 4272943 - 3000}, (7000, 6), np.float32),
    ("table", {"layout": "half", "offset": -17}, (5000, 16), np.float32),
    ("table", {"layout": "half", "offset": -17}, (5000, 8), np.float16),
    ("table", {"layout": "half", "offset": -17}, (5000, 6), np.float16),
    # 16-bit tables of a few pairs in blocks of 16 and 256 positions (serial: one worker,
    # items of several groups of 256), from negative positions and across a value near zero
    ("table", {"layout": "interleaved", "offset": -17}, (5000, 6), np.float16),
    ("table", {"layout": "interleaved", "offset": -4099}, (6000, 2), np.float16),
    ("table", {"layout": "interleaved", "offset": 4272943 - 3000}, (7000, 16), np.float16),
    ("table", {"layout": "interleaved", "offset": -4099}, (6000, 4), "bfloat16"),
    ("table", {"layout": "half", "offset": -4099}, (6000, 8), np.float16),
    ("table", {"layout": "half", "offset": 4272943 - 3000}, (7000, 16), "bfloat16"),
    # 16-bit add_sinusoidal of a few pairs (add16_lanes_kernel)
    ("add", {"layout": "half", "offset": -17}, (3, 1000, 4), np.float16),
    ("add", {"layout": "interleaved", "offset": 4272943 - 300}, (2, 70000, 2), np.float16),
]


@pytest.mark.parametrize("mode", list(_engine.MODES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{getattr(c[3], '__name__', c[3])}")
def test_mode_changes_no_value(mode, case, monkeypatch):
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (Zen 5 prefetches these small arrays too)
    monkeypatch.setattr(_engine, "_rest_reads", True)  # touch_end reads on every CPU here
    kind, kw, shape, dtype = case
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    if kind == "table":

        def call():
            return fastpe.sinusoidal_table(*shape, dtype=dtype, **kw)
    else:
        f = fastpe.apply_rope if kind == "rope" else fastpe.add_sinusoidal

        def call():
            return f(x, **kw)

    default = _engine.MODES[mode]
    results = []
    try:
        for state in (True, False):
            _engine.MODES[mode] = state
            results.append(call())
    finally:
        _engine.MODES[mode] = default
    assert results[1].tobytes() == results[0].tobytes()  # bits: signed zeros included


@pytest.mark.parametrize("dim", [4, 6, 8, 10, 12, 14, 16, 18])
def test_half_table_lanes_same_bits_as_stepped_rows(dim, monkeypatch):
    """float32 half-layout tables of up to 7 pairs a row at consecutive positions take the
    lanes (``table_lanes_kernel``): the bits of ``table_kernel``'s stepped rows (the
    ``lanes`` mode off) and of the interleaved table, permuted, rows back to back, a column
    slice and rows reversed, on the threads, from offsets 0, mid-group, far, and around
    6565759 (a pair-0 value near zero, recomputed exactly), at base 10000 and 1e7; dims 16
    and 18 fold their rows in ``table_kernel`` (``_engine.table_stepped``)."""
    from fastpe._kernels.tables import table_kernel, table_lanes_kernel

    seen = launches(monkeypatch)
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)  # on the threads, several workers
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    rows = 7000
    for offset in (0, 13, 6565759 - 3000, 2**40 + 5):
        for base in (10000.0, 1e7):
            kw = dict(dim=dim, layout="half", offset=offset, base=base)
            seen.clear()
            got = fastpe.sinusoidal_table(rows, **kw)
            gaps = np.full((rows, dim + 3), 9.0, np.float32)
            fastpe.sinusoidal_table(rows, out=gaps[:, 1 : dim + 1], **kw)
            back = np.zeros((rows, dim), np.float32)[::-1]
            fastpe.sinusoidal_table(rows, out=back, **kw)
            assert seen == [table_lanes_kernel if dim <= 14 else table_kernel] * 3
            with monkeypatch.context() as m:
                m.setitem(_engine.MODES, "lanes", False)
                want = fastpe.sinusoidal_table(rows, **kw)
            assert seen[-1] is table_kernel
            assert got.tobytes() == want.tobytes()
            assert gaps[:, 1 : dim + 1].tobytes() == want.tobytes()
            assert back.tobytes() == want.tobytes()
            inter = fastpe.sinusoidal_table(rows, **{**kw, "layout": "interleaved"})
            assert got.tobytes() == np.hstack([inter[:, 0::2], inter[:, 1::2]]).tobytes()
            assert (gaps[:, 0] == 9).all() and (gaps[:, dim + 1 :] == 9).all()


@pytest.mark.parametrize("dim", [2, 8, 14])
def test_lanes_into_rows_with_gaps(dim):
    """Tables of a few channels written into rows that are not back to back (``out=`` a
    column slice) take the lanes kernel's row-by-row copy: the same bytes as without
    lanes, and nothing outside the slice written."""
    results = []
    default = _engine.MODES["lanes"]
    try:
        for state in (True, False):
            _engine.MODES["lanes"] = state
            big = np.full((3000, dim + 3), 7.0, np.float32)
            fastpe.sinusoidal_table(3000, dim, offset=4272943 - 1500, out=big[:, 1 : dim + 1])
            results.append(big)
    finally:
        _engine.MODES["lanes"] = default
    assert results[0].tobytes() == results[1].tobytes()
    assert (results[0][:, 0] == 7).all() and (results[0][:, dim + 1 :] == 7).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_add_lanes_on_views(dtype, monkeypatch):
    """add_sinusoidal of a few channels on batch-sliced and reversed views, in place and
    into another array: the same bytes with and without lanes (float32, and 16-bit:
    add16_lanes_kernel)."""
    from fastpe._kernels import half
    from fastpe._kernels.tables import add_lanes_kernel

    seen = launches(monkeypatch)
    lanes = add_lanes_kernel if dtype == np.float32 else half.add16_lanes_kernel
    base = np.random.default_rng(5).standard_normal((6, 3000, 4)).astype(dtype)
    views = [lambda a: a[::2], lambda a: a[::-1], lambda a: a[1:4, 7:]]
    for view in views:
        for into in (False, True):
            results = []
            default = _engine.MODES["lanes"]
            try:
                for state in (True, False):
                    _engine.MODES["lanes"] = state
                    x = base.copy()
                    v = view(x)
                    out = np.empty_like(v) if into else v
                    seen.clear()
                    fastpe.add_sinusoidal(v, offset=4272943 - 1500, out=out)
                    assert (seen[-1] is lanes) == state
                    results.append((x, out.copy()))
            finally:
                _engine.MODES["lanes"] = default
            assert results[0][0].tobytes() == results[1][0].tobytes()
            assert results[0][1].tobytes() == results[1][1].tobytes()


def test_table_lanes_into_reversed_rows():
    """A table of a few channels written into rows in reverse order (a negative row
    stride): the same bytes as the forward table, reversed."""
    a = np.empty((3000, 4), np.float32)
    got = fastpe.sinusoidal_table(3000, 4, offset=4272943 - 1500, out=a[::-1])
    want = fastpe.sinusoidal_table(3000, 4, offset=4272943 - 1500)
    assert got.tobytes() == want.tobytes()
    assert a[::-1].tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "name, zen5",
    [
        ("znver5", True),
        ("znver6", True),
        ("znver10", True),
        ("znver5x", False),
        ("x86-64-v4", False),
        ("znver4", False),
        ("znver3", False),
        ("znver", False),
        ("rocketlake", False),
        ("generic", False),
        ("", False),
    ],
)
def test_zen5_by_cpu_name(name, zen5, monkeypatch):
    """Zen 5 and later (LLVM's names) take the prefetches measured there, among them
    half-layout RoPE rows from 512 bytes; every other CPU from 1 KiB (but those of
    ``prefetch_512``, in large arrays)."""
    assert _engine.zen5_or_later(name) == zen5
    monkeypatch.setattr(_engine, "_zen5", None)
    monkeypatch.setattr(_engine, "_prefetch512", None)
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: name)
    assert _engine.host_zen5() == zen5
    for nh, apart in ((1, False), (1, True), (2, False)):
        assert _engine.prefetch_rope_min_bytes(1 << 20, nh, apart) == (512 if zen5 else 1024)


@pytest.mark.parametrize(
    "name, p512",
    [
        ("emeraldrapids", True),
        ("sapphirerapids", False),
        ("rocketlake", False),
        ("znver5", False),
        ("generic", False),
        ("", False),
    ],
)
def test_rows_of_512_bytes_prefetch_where_measured_to_pay(name, p512, monkeypatch):
    """RoPE rows prefetch from 512 bytes, one head a position or several, in either layout,
    on the CPUs where that was measured to pay (``emeraldrapids``), in arrays of at least
    the cache counted on, and one head a position from 256 bytes there, from 128 where its
    rows lie apart (partial rotary); elsewhere, and in smaller arrays, half-layout rows
    from 1 KiB (512 bytes on Zen 5) and interleaved one-head rows from 2 KiB."""
    assert _engine.prefetch_512(name) == p512
    monkeypatch.setattr(_engine, "_zen5", None)
    monkeypatch.setattr(_engine, "_prefetch512", None)
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: name)
    assert _engine.prefetch_512() == p512
    zen5 = name == "znver5"
    # the bound: the cache counted on (asked once)
    monkeypatch.setattr(_engine, "_PREFETCH_512_BOUND", None)
    monkeypatch.setattr(_engine, "_CACHE_SHARE", None)
    from fastpe import _timing

    monkeypatch.setattr(_timing, "cache_share_bytes", lambda: 96 << 20)
    for nbytes in (1 << 30, 96 << 20, (96 << 20) - 1, 8 << 20):
        large = p512 and nbytes >= 96 << 20  # (in cache: not)
        least = 512 if large or zen5 else 1024
        assert _engine.prefetch_rope_min_bytes(nbytes, 2, False) == least
        assert _engine.prefetch_rope_min_bytes(nbytes, 1, False) == (256 if large else least)
        assert _engine.prefetch_rope_min_bytes(nbytes, 1, True) == (128 if large else least)
        for row_bytes in (64, 128, 256, 512, 1024, 2048, 4096, 8192):
            several = 512 <= row_bytes <= 4096 and not zen5
            assert _engine.prefetch_interleaved(2, row_bytes, nbytes, False) == several
            for apart in (False, True):
                least = ((128 if apart else 256) if large else 2048) if not zen5 else 1 << 20
                one = least <= row_bytes <= 4096
                assert _engine.prefetch_interleaved(1, row_bytes, nbytes, apart) == one, (
                    row_bytes,
                    apart,
                )


@pytest.mark.parametrize(
    "name, reads",
    [
        ("emeraldrapids", False),
        ("sapphirerapids", True),
        ("rocketlake", True),
        ("znver5", True),
        ("generic", True),
        ("", True),
    ],
)
def test_partial_rotary_reads_the_rest_but_where_measured_to_cost(name, reads, monkeypatch):
    """Partial rotary over half of each 512-byte head reads the channels it leaves (the
    ``touch_end`` mode) on every CPU but those where that was measured to cost
    (``emeraldrapids``); either way the same bits, and the channels left as they were."""
    assert _engine.reads_rest(name) == reads
    monkeypatch.setattr(_engine, "_rest_reads", None)
    # (the other flags asked of the CPU's name, restored after: none keeps the fake one)
    monkeypatch.setattr(_engine, "_zen5", None)
    monkeypatch.setattr(_engine, "_prefetch512", None)
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: name)
    assert _engine.reads_rest() == reads
    x = np.random.default_rng(3).standard_normal((2, 64, 4, 128)).astype(np.float32)
    rots = launches(monkeypatch, K.rope_kernel, lambda k, args: args[3])
    got = fastpe.apply_rope(x, rotary_dim=64, layout="half")
    assert [r[2] for r in rots] == [128 if reads else 0]
    want = fastpe.reference.apply_rope(x, rotary_dim=64, layout="half")
    assert_rope_close(got, want, x, "half", 64)
    monkeypatch.setattr(_engine, "_rest_reads", not reads)
    assert fastpe.apply_rope(x, rotary_dim=64, layout="half").tobytes() == got.tobytes()


@pytest.mark.parametrize(
    "name, takes",
    [
        ("znver3", False),
        ("znver4", True),
        ("znver5", True),
        ("emeraldrapids", True),
        ("rocketlake", True),
        ("generic", True),
        ("", True),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain_direct_pass_but_where_measured_to_cost(name, takes, dtype, monkeypatch):
    """A table below the streaming bound with rows the direct pass takes goes to it by
    plain stores (``_engine.plain_direct``) on every CPU but those where that was measured
    to cost (``znver3``), else to ``table_kernel``'s rows; the same bits either way."""
    from fastpe._kernels.direct import table_direct_kernel
    from fastpe._kernels.tables import table_kernel

    assert _engine.plain_direct_cpu(name) == takes
    monkeypatch.setattr(_engine, "_plain_direct_cpu", None)
    # (the other flags asked of the CPU's name, restored after: none keeps the fake one)
    monkeypatch.setattr(_engine, "_zen5", None)
    monkeypatch.setattr(_engine, "_prefetch512", None)
    monkeypatch.setattr(_engine, "_rest_reads", None)
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: name)
    assert _engine.plain_direct_cpu() == takes
    monkeypatch.setattr(_engine, "_PLAIN_DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(_engine, "_STREAM_MIN_BYTES", 1 << 62)
    tables = launches(monkeypatch)
    got = fastpe.sinusoidal_table(48, 512, dtype=dtype, offset=70001)  # rows of 2-4 KiB
    assert tables == [table_direct_kernel if takes else table_kernel]
    monkeypatch.setattr(_engine, "_plain_direct_cpu", not takes)
    again = fastpe.sinusoidal_table(48, 512, dtype=dtype, offset=70001)
    assert tables[1:] == [table_kernel if takes else table_direct_kernel]
    assert again.tobytes() == got.tobytes()


def _spy_last_arg(monkeypatch, kern=None, at=-1):
    """The last argument (``at``: another from the end) of each launch (of ``kern`` only,
    if given), in order."""
    return launches(monkeypatch, kern, lambda k, args: args[at])


# the rotation kernels' prefetch argument, before their last one (halves)
PREFETCH_AT = -2


@pytest.mark.parametrize(
    "shape, dtype, kw, prefetched",
    [
        ((2, 300, 128), np.float64, {"layout": "half"}, True),  # 1 KiB rows
        # 512 bytes, on Zen 5 only: float32 and float64, the runs kernel of per-row offsets
        ((2, 300, 128), np.float32, {"layout": "half"}, "zen5"),
        ((2, 300, 2, 64), np.float64, {"layout": "half", "offset": np.arange(2)}, "zen5"),
        ((2, 300, 1024), np.float32, {"layout": "half"}, True),  # 4 KiB
        ((2, 300, 2, 512), np.float32, {"layout": "half", "offset": np.arange(2)}, True),
        # one head of 256 bytes, of 128 bytes apart (partial rotary): on the CPUs of
        # prefetch_512 only
        ((2, 300, 64), np.float32, {"layout": "half"}, "p512"),
        ((2, 300, 128), np.float32, {"layout": "half", "rotary_dim": 32}, "p512"),
        ((2, 300, 32), np.float32, {"layout": "half"}, False),  # 128 bytes back to back
        ((2, 300, 128), np.float32, {"layout": "half", "rotary_dim": 16}, False),  # 64 apart
        ((2, 300, 2, 64), np.float32, {"layout": "half"}, False),  # two heads of 256 bytes
        ((2, 300, 1024), np.float64, {"layout": "half"}, False),  # 8 KiB
        ((2, 300, 1280), np.float32, {"layout": "half"}, False),  # 5 KiB
        # interleaved, one head of 512 bytes: on the CPUs of prefetch_512 only
        ((2, 300, 128), np.float32, {"layout": "interleaved"}, "p512"),
        ((2, 300, 256), np.float32, {"layout": "half", "rotary_dim": 64}, "p512"),
        ((2, 300, 64), np.float64, {"layout": "half", "rotary_dim": 16}, "p512"),
    ],
)
@pytest.mark.parametrize("host", ["other", "zen5", "p512"])
def test_prefetch_taken_for_half_rows_of_1_to_4_kib(
    monkeypatch, shape, dtype, kw, prefetched, host
):
    """The rotation kernels (per position, and the runs kernel of per-row offsets) get
    ``prefetch`` True (their argument before the last) for half-layout rows of 1 KiB up to 4 KiB of
    rotated channels, from 512 bytes on Zen 5 and on the CPUs of ``prefetch_512`` (whatever
    this CPU is), None otherwise or with the mode off; the values are the same."""
    zen5 = host == "zen5"
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_prefetch512", host == "p512")
    monkeypatch.setattr(_engine, "_PREFETCH_512_BOUND", 0)  # (its bound: these small arrays)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (Zen 5: no size bound here)
    if prefetched == "zen5":
        prefetched = host != "other"
    elif prefetched == "p512":
        prefetched = host == "p512"
    seen = _spy_last_arg(monkeypatch, at=PREFETCH_AT)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = fastpe.apply_rope(x, **kw)
    monkeypatch.setitem(_engine.MODES, "prefetch", False)
    assert got.tobytes() == fastpe.apply_rope(x, **kw).tobytes()
    assert seen == [ON if prefetched else None, None]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "dim, kw",
    [(128, {}), (64, {}), (128, {"rotary_dim": 32})],
    ids=["512 bytes", "256 bytes", "128 bytes apart"],
)
def test_rows_of_512_bytes_prefetch_from_the_bound(monkeypatch, layout, dim, kw):
    """On the CPUs of ``prefetch_512`` one-head RoPE rows of 512 bytes (256, or 128 apart)
    prefetch in arrays of at least ``_PREFETCH_512_BOUND`` bytes, not in smaller ones (in
    cache the prefetches cost); the same bits either way."""
    monkeypatch.setattr(_engine, "_zen5", False)
    monkeypatch.setattr(_engine, "_prefetch512", True)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)
    x = np.random.default_rng(0).standard_normal((4, 512, dim)).astype(np.float32)
    seen = _spy_last_arg(monkeypatch, at=PREFETCH_AT)
    got = []
    for bound in (x.nbytes, x.nbytes + 1):
        monkeypatch.setattr(_engine, "_PREFETCH_512_BOUND", bound)
        got.append(fastpe.apply_rope(x, layout=layout, **kw).tobytes())
    assert seen == [ON, None]
    assert got[0] == got[1]


@pytest.mark.parametrize(
    "shape, dtype, kw, prefetched",
    [
        ((2, 300, 2, 128), np.float32, {}, True),  # two heads of 512 bytes
        ((2, 300, 2, 128), np.float32, {"offset": np.arange(2)}, True),  # the runs kernel
        ((2, 300, 2, 64), np.float64, {"offset": SPREAD[:2]}, True),  # per-row items
        ((2, 300, 2, 64), np.float32, {}, False),  # 256 bytes
        ((2, 300, 128), np.float32, {}, "p512"),  # one head of 512 bytes (two rows walked)
        ((2, 300, 128), np.float64, {}, "p512"),  # one head of 1 KiB
        ((2, 300, 64), np.float32, {}, "p512"),  # one head of 256 bytes
        ((2, 300, 128), np.float32, {"rotary_dim": 32}, "p512"),  # of 128 bytes apart
        ((2, 300, 32), np.float32, {}, False),  # of 128 bytes back to back
        ((2, 300, 128), np.float32, {"rotary_dim": 16}, False),  # of 64 bytes apart
        ((2, 300, 512), np.float32, {}, True),  # one head of 2 KiB
        ((2, 300, 1024), np.float32, {}, True),  # 4 KiB
        ((2, 300, 1280), np.float32, {}, False),  # 5 KiB
        ((2, 300, 640), np.float32, {"rotary_dim": 512}, True),  # rotated channels count
        ((2, 300, 2, 256), np.float64, {}, True),  # two heads of 2 KiB
        ((300, 2, 128), np.float32, {"seq_axis": 0}, True),  # heads of a (seq, heads, dim)
    ],
)
@pytest.mark.parametrize("host", ["other", "zen5", "p512"])
def test_prefetch_taken_for_interleaved_rows(monkeypatch, shape, dtype, kw, prefetched, host):
    """Interleaved rows get ``prefetch`` ``ON`` (the rotation kernels' argument before the
    last) on CPUs other than Zen 5 (whatever this CPU is) for rows of 512 bytes to 4 KiB of
    rotated channels with several heads a position, and one-head rows from 2 KiB (from 512
    bytes on the CPUs of ``prefetch_512``); None otherwise, on Zen 5 or with the mode off;
    the values are the same."""
    zen5 = host == "zen5"
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_prefetch512", host == "p512")
    monkeypatch.setattr(_engine, "_PREFETCH_512_BOUND", 0)  # (its bound: these small arrays)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)
    if prefetched == "p512":
        prefetched = host == "p512"
    kw = {"layout": "interleaved", **kw}
    seen = _spy_last_arg(monkeypatch, at=PREFETCH_AT)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = fastpe.apply_rope(x, **kw)
    monkeypatch.setitem(_engine.MODES, "prefetch", False)
    assert got.tobytes() == fastpe.apply_rope(x, **kw).tobytes()
    assert seen == [ON if prefetched and not zen5 else None, None]


@pytest.mark.parametrize(
    "shape, dtype, kw, kern, halves",
    [
        ((2, 30, 2048), np.float32, {}, "rope_kernel", True),  # 8 KiB rows
        ((2, 30, 2, 1024), np.float64, {"offset": np.arange(2)}, "rope_runs_kernel", True),
        # per-row items (offsets far apart), an odd count of pairs
        ((2, 30, 2050), np.float32, {"offset": SPREAD[:2]}, "rope_kernel", True),
        ((2, 30, 2304), np.float32, {"rotary_dim": 2048}, "rope_kernel", True),  # rotated
        ((2, 30, 2304), np.float32, {"rotary_dim": 2046}, "rope_kernel", False),  # 8184 bytes
        ((2, 30, 1024), np.float32, {}, "rope_kernel", False),  # 4 KiB
        ((2, 30, 2048), np.float32, {"layout": "half"}, "rope_kernel", False),
    ],
)
@pytest.mark.parametrize("zen5", [False, True])
def test_halves_taken_for_interleaved_rows_of_8_kib(
    monkeypatch, shape, dtype, kw, kern, halves, zen5
):
    """The rotation kernels (per position, and the runs kernel of per-row offsets) get
    ``halves`` ``ON`` (their last argument) for interleaved rows of 8 KiB and more of
    rotated channels on CPUs other than Zen 5 (whatever this CPU is), None otherwise or
    with the mode off; the values are the same."""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (Zen 5: no size bound on its prefetches)
    kw = {"layout": "interleaved", **kw}
    seen = launches(monkeypatch, pick=lambda k, args: (k, args[-1]))
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = fastpe.apply_rope(x, **kw)
    monkeypatch.setitem(_engine.MODES, "halves", False)
    assert got.tobytes() == fastpe.apply_rope(x, **kw).tobytes()
    k = getattr(K, kern)
    assert seen == [(k, ON if halves and not zen5 else None), (k, None)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_halves_loop_same_bits_as_one_pass(dtype):
    """``_rotate_interleaved_halves`` writes what ``_rotate_interleaved`` writes, for every
    count of pairs from 0 (the engine takes it from 512 pairs on; odd counts rotate their
    last pair after the halves), from a row start inside the array."""
    from fastpe._kernels import rope

    rng = np.random.default_rng(5)
    for n in [*range(12), 1025]:
        s = rng.standard_normal((3, n)).astype(dtype)
        c = rng.standard_normal((3, n)).astype(dtype)
        x = rng.standard_normal(2 * n + 5).astype(dtype)
        one, two = x.copy(), x.copy()
        rope._rotate_interleaved(one, np.uint64(3), n, s, c, 2)
        rope._rotate_interleaved_halves(two, np.uint64(3), n, s, c, 2)
        assert two.tobytes() == one.tobytes(), n
        assert one[:3].tobytes() == x[:3].tobytes() and one[-2:].tobytes() == x[-2:].tobytes()
        assert n == 0 or one.tobytes() != x.tobytes()


# rope_kernel's stretches argument, before its prefetch and halves ones
STRETCHES_AT = -3


@pytest.mark.parametrize(
    "shape, dtype, kw, stretched",
    [
        ((2, 30, 8, 128), np.float32, {}, True),  # 8 heads: one batch row at a time
        ((1, 30, 2, 64), np.float64, {"layout": "half"}, True),  # one batch row
        ((2, 30, 2, 64), np.float32, {"offset": SPREAD[:2]}, True),  # per-row items
        ((1, 30, 16, 16), np.float32, {}, True),  # heads of 64 bytes
        ((1, 30, 2, 1024), np.float32, {"layout": "half"}, True),  # 4 KiB
        ((2, 30, 4, 128), np.float32, {}, False),  # 2 KiB a position: batch rows side by side
        ((2, 30, 2, 1280), np.float32, {"layout": "half"}, False),  # 5 KiB rows
        ((1, 30, 2, 2048), np.float32, {}, False),  # 8 KiB: halves
        ((1, 30, 2, 128), np.float32, {"rotary_dim": 64}, False),  # partial rotary reads
        ((1, 30, 1, 128), np.float32, {}, False),  # one head of one batch row: fused
    ],
)
@pytest.mark.parametrize("zen5", [False, True])
def test_stretches_taken_for_items_of_one_stretch(monkeypatch, shape, dtype, kw, stretched, zen5):
    """``rope_kernel`` gets ``stretches`` ``ON`` (with ``prefetch``) where a work item's
    batch rows are not walked side by side (several heads a position, one batch row, or
    per-row items), for rows of up to 4 KiB, on CPUs other than Zen 5 (whatever this CPU
    is); None otherwise, on Zen 5, or with the mode (or the prefetch mode) off; the values
    are the same. The partial-rotary row reads the rest of its rows here, as on CPUs
    other than those of ``_engine.reads_rest``."""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)
    monkeypatch.setattr(_engine, "_rest_reads", True)
    kw = {"layout": "interleaved", **kw}
    seen = launches(
        monkeypatch, K.rope_kernel, lambda k, args: (args[STRETCHES_AT], args[PREFETCH_AT])
    )
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = fastpe.apply_rope(x, **kw)
    for mode in ("stretches", "prefetch"):
        with monkeypatch.context() as m:
            m.setitem(_engine.MODES, mode, False)
            assert got.tobytes() == fastpe.apply_rope(x, **kw).tobytes()
            assert seen[-1][0] is None
    on = stretched and not zen5
    assert seen[0] == (ON, ON) if on else seen[0][0] is None


def test_partial_rotary_without_reads_takes_the_two_stretches(monkeypatch):
    """Where partial rotary does not read the rest of its rows (``_engine.reads_rest``), a
    work item of one stretch takes the two stretches, as the same rows rotated whole do:
    the bits of the walk with the reads."""
    monkeypatch.setattr(_engine, "_zen5", False)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)
    seen = launches(
        monkeypatch, K.rope_kernel, lambda k, args: (args[STRETCHES_AT], args[PREFETCH_AT])
    )
    x = np.random.default_rng(0).standard_normal((1, 30, 2, 128)).astype(np.float32)
    got = []
    for reads in (False, True):
        monkeypatch.setattr(_engine, "_rest_reads", reads)
        got.append(fastpe.apply_rope(x, rotary_dim=64, layout="half"))
    assert seen[0] == (ON, ON) and seen[1][0] is None
    assert got[0].tobytes() == got[1].tobytes()


def _same_walk_result(results, base, view, why):
    """Two walks' copies of ``base`` (each rotated through ``view``) hold the same bytes,
    rotated inside the view and untouched outside it."""
    assert results[0].tobytes() == results[1].tobytes(), why
    untouched = np.ones(base.shape, bool)
    view(untouched)[...] = False
    assert (results[0][untouched] == base[untouched]).all(), why
    assert results[0].tobytes() != base.tobytes(), why


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stretches_same_bits(monkeypatch, layout, dtype):
    """The two-stretch walk writes what the one-stretch walk writes: for every count of
    positions in a work item from 1 (odd counts: the last position after the stretches),
    items on the threads and serial, rows in reverse order (negative strides), heads in
    reverse, a slice of the channels, per-row offsets; nothing outside the view is
    written."""
    monkeypatch.setattr(_engine, "_zen5", False)
    seen = launches(monkeypatch, K.rope_kernel, lambda k, args: args[STRETCHES_AT])
    rng = np.random.default_rng(7)
    for serial in (True, False):
        with monkeypatch.context() as m:
            if not serial:  # on the threads, several workers: items of fewer positions
                m.setattr(_engine, "_SERIAL_MIN_BYTES", 0)
                m.setattr(_engine, "_SERIAL_BYTES", 0)
            for seq in (1, 2, 3, 7, 64, 301):
                base = rng.standard_normal((3, seq, 3, 70)).astype(dtype)
                views = [
                    lambda a: a[:1, :, :, :64],
                    lambda a: a[:1, ::-1, ::-1, :64],
                    lambda a: a[:2, :, :2, 2:66],
                ]
                for view in views:
                    for kw in ({}, {"offset": np.array([5, 10**6])}):
                        kw = {"layout": layout, "offset": 3, **kw}
                        if view(base).shape[0] == 1 and np.ndim(kw["offset"]):
                            kw["offset"] = kw["offset"][:1]
                        results = []
                        for state in (True, False):
                            m.setitem(_engine.MODES, "stretches", state)
                            x = base.copy()
                            seen.clear()
                            fastpe.apply_rope(view(x), out=view(x), **kw)
                            # (taken where batch rows are not walked side by side; one
                            # position may take another walk)
                            one = view(base).shape[0] == 1 or np.ndim(kw["offset"]) == 1
                            if seq > 1:
                                assert seen == [ON if state and one else None], (seq, kw)
                            results.append(x)
                        _same_walk_result(results, base, view, (seq, kw))


@pytest.mark.parametrize(
    "shape, kw, ahead",
    [
        ((4, 300, 128), {"offset": SPREAD}, ON),  # per-row items of one head
        ((4, 300, 128), {"offset": SPREAD, "layout": "half"}, ON),
        ((4, 300, 2, 64), {"offset": SPREAD}, ON),  # two heads of a position
        ((4, 300, 128), {"offset": 7 * np.arange(4)}, "runs"),  # the runs kernel
        ((4, 300, 128), {}, None),  # shared positions
        ((4, 300, 32, 128), {"offset": SPREAD}, None),  # an item's rows past the bound
    ],
)
@pytest.mark.parametrize("zen5", [False, True])
def test_fill_ahead_for_per_row_items_on_zen5(monkeypatch, shape, kw, ahead, zen5):
    """``rope_kernel`` gets ``fill_ahead`` ``ON`` (its argument after the split) for
    per-row positions that share no cos/sin, where an item's rows fit
    ``_FILL_AHEAD_BYTES``, on Zen 5, in arrays as large as the last-level cache; None
    otherwise or with the mode off; the values are the same."""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (no size bound here)
    seen = launches(monkeypatch, K.rope_kernel, lambda k, args: args[5])  # fill_ahead
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = fastpe.apply_rope(x, **kw)
    monkeypatch.setitem(_engine.MODES, "fill_ahead", False)
    assert got.tobytes() == fastpe.apply_rope(x, **kw).tobytes()
    assert seen == ([] if ahead == "runs" else [ahead if zen5 else None, None])
    # an array smaller than the last-level cache: no prefetch on Zen 5
    monkeypatch.setitem(_engine.MODES, "fill_ahead", True)
    monkeypatch.setattr(_engine, "_LLC_BYTES", x.nbytes + 1)
    seen.clear()
    fastpe.apply_rope(x, **kw)
    assert seen in ([], [None])


@pytest.mark.parametrize(
    "shape, dtype, kw, prefetched",
    [
        ((300, 256), np.float32, {"layout": "half"}, True),  # 1 KiB rows
        ((3, 300, 1024), np.float32, {"layout": "half", "offset": np.arange(3)}, True),  # 4 KiB
        ((300, 128), np.float32, {"layout": "half"}, False),  # 512 bytes
        ((300, 2048), np.float32, {"layout": "half"}, False),  # 8 KiB
        # interleaved rows: prefetched on Zen 5 only ("zen5")
        ((300, 256), np.float32, {"layout": "interleaved"}, "zen5"),
        ((3, 300, 256), np.float32, {"layout": "interleaved", "offset": np.arange(3)}, "zen5"),
        ((300, 128), np.float32, {"layout": "interleaved"}, False),  # 512 bytes
        ((300, 128), np.float64, {"layout": "half"}, False),  # float64: folded, one row
        # rows that several batch rows share (the laid-out walk): each batch row's block
        # after next, in either layout and dtype, at any row size
        ((3, 300, 256), np.float32, {"layout": "half"}, True),
        ((3, 300, 256), np.float32, {"layout": "interleaved"}, True),
        ((2, 300, 6), np.float64, {"layout": "interleaved"}, True),
        ((2, 300, 8192), np.float32, {"layout": "half"}, True),
        # one batch row per item (offsets per row): one pass, no prefetch
        ((3, 300, 256), np.float64, {"layout": "half", "offset": np.arange(3)}, False),
    ],
)
@pytest.mark.parametrize("zen5", [False, True])
def test_add_prefetch_taken(monkeypatch, shape, dtype, kw, prefetched, zen5):
    """``add_kernel`` gets ``prefetch`` True (its last argument) for float32 rows of 1 KiB
    up to 4 KiB that each add their own table row (half layout; either layout on Zen 5,
    whatever this CPU is) and for rows that several batch rows share (unit-stride
    channels), None otherwise or with the mode off; the values are the same.
    (The ``direct`` mode off: rows of a multiple of a line's pairs otherwise go to
    ``add_direct_kernel``, tests/test_stream.py.)"""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (Zen 5: no size bound here)
    monkeypatch.setitem(_engine.MODES, "direct", False)
    if prefetched == "zen5":
        prefetched = zen5
    seen = _spy_last_arg(monkeypatch, K.add_kernel)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    on = fastpe.add_sinusoidal(x, **kw)
    monkeypatch.setitem(_engine.MODES, "prefetch", False)
    off = fastpe.add_sinusoidal(x, **kw)
    assert seen == [ON if prefetched else None, None]
    assert on.tobytes() == off.tobytes()
    # an array below the last-level cache: on Zen 5 no prefetch, elsewhere as above
    monkeypatch.setitem(_engine.MODES, "prefetch", True)
    monkeypatch.setattr(_engine, "_LLC_BYTES", x.nbytes + 1)
    fastpe.add_sinusoidal(x, **kw)
    assert seen[-1] == (None if zen5 else seen[0])


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "dtype, dim", [("float32", 32), ("float64", 16), ("float16", 64), ("bfloat16", 64)]
)
@pytest.mark.parametrize(
    "kw", [{}, {"offset": 2**40 + 3}, {"positions": "rows"}, {"inverse": True}], ids=str
)
def test_rows_of_two_lines_as_runs_in_cache(monkeypatch, layout, dtype, dim, kw):
    """One head of RoPE rows of 128 bytes back to back takes the short walk (each batch
    row's block as one run, or row by row) in arrays under the cache counted on, the
    per-row loop from that size; the same bytes either way, within the reference's bound."""
    from fastpe._kernels import half

    if dtype == "bfloat16":
        dt = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        dt = np.dtype(dtype)
    x = np.random.default_rng(4).standard_normal((3, 300, dim)).astype(dt)
    if kw.get("positions") == "rows":
        kw = {"positions": np.random.default_rng(5).integers(0, 2**30, 300)}
    kern, at = (half.rope16_kernel, -2) if dt.itemsize == 2 else (K.rope_kernel, 8)
    seen = launches(monkeypatch, kern, lambda k, args: args[at])
    got = []
    for share in (x.nbytes + 1, x.nbytes):  # the array under the cache, then not
        monkeypatch.setattr(_engine, "_CACHE_SHARE", share)
        assert _engine.short_run_bytes(x.nbytes, True) == (128 if share > x.nbytes else 64)
        assert _engine.short_run_bytes(x.nbytes, False) == 64
        got.append(fastpe.apply_rope(x, layout=layout, **kw).tobytes())
    assert seen == [ON, None]
    assert got[0] == got[1]
    if dt.itemsize > 2:
        want = fastpe.reference.apply_rope(x, layout=layout, **kw)
        assert_rope_close(np.frombuffer(got[0], dt).reshape(x.shape), want, x, layout, dim)
    # rows whose cos/sin serve one row (one batch row, offsets per batch row): 64 bytes,
    # as before (the fused pass's rows, where it fits)
    monkeypatch.setattr(_engine, "_CACHE_SHARE", x.nbytes + 1)
    seen.clear()
    fastpe.apply_rope(x[:1], layout=layout, **kw)
    if "positions" not in kw:
        fastpe.apply_rope(x, layout=layout, offset=np.array([3, 10**6, 2**40]))
    assert seen == [None] * (1 if "positions" in kw else 2)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("host", ["other", "p512"])
@pytest.mark.parametrize("op", ["fused rope", "spread rope", "add one row", "add per row"])
def test_line_prefetch_distance(monkeypatch, layout, host, op):
    """The passes that prefetch each line as they go (the fused RoPE pass, float32
    ``add_sinusoidal`` a line at a time) reach 4 KiB ahead on the CPUs of ``prefetch_512``
    in arrays of at least ``_PREFETCH_512_BOUND`` bytes, 2 KiB otherwise
    (``_kernels.prefetch.AHEAD_BYTES``), whatever this CPU is; the distance changes no
    value."""
    from fastpe._kernels import prefetch
    from fastpe._kernels.direct import add_direct_kernel

    assert _engine._LINE_AHEAD == prefetch.AHEAD_BYTES
    monkeypatch.setattr(_engine, "_zen5", False)
    monkeypatch.setattr(_engine, "_prefetch512", host == "p512")
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)
    x = np.random.default_rng(0).standard_normal((3, 300, 256)).astype(np.float32)
    kw = {"layout": layout}
    if op.endswith("rope"):
        if op == "fused rope":
            x = x[:1]  # one batch row of one head
        else:
            kw["offset"] = np.array([0, 99_999, 7])
        call = lambda: fastpe.apply_rope(x, **kw)  # noqa: E731
        seen = launches(monkeypatch, K.rope_kernel, lambda k, args: args[6])  # fused
    else:
        if op == "add one row":
            x = x[:1]
        else:
            kw["positions"] = np.arange(900).reshape(3, 300) % 301
        call = lambda: fastpe.add_sinusoidal(x, **kw)  # noqa: E731
        seen = _spy_last_arg(monkeypatch, add_direct_kernel)
    got = []
    for bound in (x.nbytes, x.nbytes + 1):
        monkeypatch.setattr(_engine, "_PREFETCH_512_BOUND", bound)
        got.append(call().tobytes())
    assert seen == ([4096, 2048] if host == "p512" else [2048, 2048])
    assert got[0] == got[1]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("zen5", [False, True])
def test_add16_prefetch_distance(monkeypatch, layout, zen5):
    """16-bit ``add_sinusoidal`` prefetches x 8 KiB ahead on Zen 5, 2 KiB on other CPUs
    (``add16_kernel``'s last argument, in elements), whatever this CPU is; the distance
    changes no value."""
    from fastpe._kernels import half

    monkeypatch.setattr(_engine, "_zen5", zen5)
    seen = _spy_last_arg(monkeypatch, half.add16_kernel)
    x = np.random.default_rng(0).standard_normal((3, 300, 256)).astype(np.float16)
    got = fastpe.add_sinusoidal(x, layout=layout)
    assert seen == [(8192 if zen5 else 2048) // 2]
    monkeypatch.setattr(_engine, "_zen5", not zen5)
    assert got.tobytes() == fastpe.add_sinusoidal(x, layout=layout).tobytes()
    assert _engine.add16_ahead_bytes() == (2048 if zen5 else 8192)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("zen5", [False, True])
def test_add16_items_of_shared_rows(monkeypatch, dtype, layout, zen5):
    """16-bit ``add_sinusoidal`` whose table rows several batch rows share lays out 16 KiB
    of float32 table rows per work item on CPUs other than Zen 5 (4 positions of 512
    pairs), 192 KiB on Zen 5 (48), as before for one batch row or offsets per row (the
    items' ``chunk``); the same bytes whatever the items."""
    from fastpe._kernels import half

    dtype = np.dtype(dtype) if dtype == "float16" else pytest.importorskip("ml_dtypes").bfloat16
    monkeypatch.setattr(_engine, "_zen5", zen5)
    seen = launches(monkeypatch, half.add16_kernel, lambda k, args: args[3][0])
    x = np.random.default_rng(0).standard_normal((3, 400, 1024)).astype(dtype)
    got = fastpe.add_sinusoidal(x, layout=layout)
    one = fastpe.add_sinusoidal(x[:1], layout=layout)
    rows = fastpe.add_sinusoidal(x, layout=layout, offset=np.array([0, 0, 0]))
    assert seen == [48 if zen5 else 4, 48, 48]
    assert rows.tobytes() == got.tobytes() and one.tobytes() == got[:1].tobytes()
    monkeypatch.setattr(_engine, "_zen5", not zen5)
    assert got.tobytes() == fastpe.add_sinusoidal(x, layout=layout).tobytes()
    assert seen[-1] == (4 if zen5 else 48)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "dtype, dim, apart, rev",
    [
        (np.float64, 6, 0, False),  # (float32 rows of a few pairs: add_lanes_kernel)
        (np.float32, 36, 0, True),
        (np.float64, 36, 0, False),
        (np.float32, 1024, 0, False),
        (np.float32, 6, 3, False),
        (np.float64, 6, 3, True),
        (np.float32, 200, 24, True),
    ],
)
def test_shared_rows_added_in_blocks(monkeypatch, dtype, layout, dim, apart, rev):
    """Table rows that several batch rows share are added a block of
    ``SUM_BLOCK_BYTES`` at a time to every batch row (``add_kernel``'s laid-out walk, the
    ``prefetch`` argument ``ON``): the same bytes as each batch row alone (one batch row,
    one pass), with rows back to back or apart (a slice of wider rows, the rest
    untouched), runs that end inside a block, batch rows in reverse; the prefetch mode off
    changes no value."""
    seen = _spy_last_arg(monkeypatch, K.add_kernel)
    big = np.random.default_rng(0).standard_normal((3, 301, dim + apart)).astype(dtype)
    x = big[::-1] if rev else big
    x = x[:, :, :dim]
    alone = [fastpe.add_sinusoidal(x[b], layout=layout) for b in range(3)]
    before = big.copy()
    seen.clear()
    fastpe.add_sinusoidal(x, layout=layout, out=x)
    assert seen == [ON]
    for b in range(3):
        assert x[b].tobytes() == alone[b].tobytes()
    assert big[:, :, dim:].tobytes() == before[:, :, dim:].tobytes()
    monkeypatch.setitem(_engine.MODES, "prefetch", False)
    off = (before[::-1] if rev else before)[:, :, :dim]
    fastpe.add_sinusoidal(off, layout=layout, out=off)
    assert seen == [ON, None]
    assert off.tobytes() == x.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim, apart, rev", [(36, 0, True), (1024, 0, False), (200, 24, True)])
@pytest.mark.parametrize("zen5", [False, True])
def test_shared_16_bit_rows_added_in_blocks(monkeypatch, dtype, layout, dim, apart, rev, zen5):
    """16-bit table rows that several batch rows share are added ``SUM_BLOCK_BYTES`` at a
    time to every batch row on CPUs other than Zen 5 (``add16_kernel``'s ``block``: 128
    elements), in arrays of ``_SUM16_BLOCKS_MIN_BYTES`` and more (here lowered to 0), each
    batch row's rows in turn on Zen 5 and in smaller arrays (0): the same bytes either way
    and as each batch row alone, with rows back to back or apart (the rest untouched),
    batch rows in reverse."""
    from fastpe._kernels import half

    dtype = np.dtype(dtype) if dtype == "float16" else pytest.importorskip("ml_dtypes").bfloat16
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_SUM16_BLOCKS_MIN_BYTES", 0)
    seen = _spy_last_arg(monkeypatch, half.add16_kernel, at=-2)
    big = np.random.default_rng(0).standard_normal((3, 301, dim + apart)).astype(dtype)
    x = (big[::-1] if rev else big)[:, :, :dim]
    alone = [fastpe.add_sinusoidal(x[b], layout=layout) for b in range(3)]
    before = big.copy()
    seen.clear()
    fastpe.add_sinusoidal(x, layout=layout, out=x)
    assert seen == [0 if zen5 else 128]
    for b in range(3):
        assert x[b].tobytes() == alone[b].tobytes()
    assert big[:, :, dim:].tobytes() == before[:, :, dim:].tobytes()
    monkeypatch.setattr(_engine, "_zen5", not zen5)
    other = (before[::-1] if rev else before)[:, :, :dim]
    fastpe.add_sinusoidal(other, layout=layout, out=other)
    assert seen == [0 if zen5 else 128, 128 if zen5 else 0]
    assert other.tobytes() == x.tobytes()
    # an array below the bound: each batch row's rows in turn
    monkeypatch.setattr(_engine, "_SUM16_BLOCKS_MIN_BYTES", big.nbytes + 1)
    monkeypatch.setattr(_engine, "_zen5", False)
    fastpe.add_sinusoidal(big, layout=layout)
    assert seen[-1] == 0


@pytest.mark.parametrize("zen5", [False, True])
def test_add16_blocks_from_64_mib(monkeypatch, zen5):
    """16-bit sums of shared rows take blocks (128 elements) in arrays of 64 MiB and more
    on CPUs other than Zen 5 (in cache the rows in turn measured faster), none on Zen 5."""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    assert _engine.add16_block(64 << 20) == (0 if zen5 else 128)
    assert _engine.add16_block((64 << 20) - 1) == 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("zen5", [False, True])
def test_rope16_prefetch_not_on_zen5(monkeypatch, zen5, dtype):
    """16-bit RoPE prefetches each row on CPUs other than Zen 5 and not on Zen 5, at every
    size where unbounded (``test_prefetch_only_out_of_the_cache`` has the bound;
    ``prefetch16``: True or None, the last argument of ``rope16_kernel`` and of the
    multi-axis kernel), in every layout (the multi-axis kernel's blocks and its second
    channels too); the ``prefetch`` mode off, nowhere; the same bits either way."""
    from fastpe._kernels import half
    from fastpe._kernels.axes import rope_axes_kernel

    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(np.float16)
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_LLC_BYTES", 0)  # (no size bound: read where bounded)
    x = np.random.default_rng(0).standard_normal((2, 40, 3, 64)).astype(dt)
    pos = np.stack([np.arange(40), np.arange(40) // 2, np.arange(40) % 5])
    axes = np.arange(32) % 3
    calls = [
        (half.rope16_kernel, {"layout": "interleaved"}),
        (half.rope16_kernel, {"layout": "half"}),
        (rope_axes_kernel, {"layout": "half", "positions": pos, "pair_axes": axes}),
        (rope_axes_kernel, {"layout": "half", "positions": pos, "pair_axes": [axes, axes[::-1]]}),
        (rope_axes_kernel, {"layout": "half:2", "positions": pos[:2]}),
    ]
    for kern, kw in calls:
        seen = _spy_last_arg(monkeypatch, kern)
        got = [fastpe.apply_rope(x, **kw).tobytes()]
        monkeypatch.setitem(_engine.MODES, "prefetch", False)
        got.append(fastpe.apply_rope(x, **kw).tobytes())
        monkeypatch.setitem(_engine.MODES, "prefetch", True)
        assert seen == [None if zen5 else ON, None], kw
        assert got[0] == got[1], kw


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zen5", [False, True])
def test_axes_stretches(monkeypatch, dtype, zen5):
    """The multi-axis kernel walks float32/float64 items of one stretch in two as
    ``rope_kernel`` does (its last argument ``ON``; not on Zen 5, nor with the mode off),
    for the general layouts; the ``"half:k"`` blocks and second channels keep their walks
    (None), as do batch rows walked side by side; the same bits either way, for odd and
    even counts of positions in an item."""
    from fastpe._kernels.axes import rope_axes_kernel

    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_SERIAL_MIN_BYTES", 0)  # items of a few positions
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 0)
    seen = _spy_last_arg(monkeypatch, rope_axes_kernel)
    rng = np.random.default_rng(4)
    for nb, seq in [(1, 3), (1, 8), (1, 41), (1, 300), (2, 41)]:
        # (two batch rows of 768 bytes a position are walked side by side: not taken)
        x = rng.standard_normal((nb, seq, 3, 64)).astype(dtype)
        pos = np.stack([np.arange(seq), np.arange(seq) // 2, np.arange(seq) % 5])
        axes = np.arange(32) % 3
        calls = [
            ({"layout": "interleaved", "positions": pos, "pair_axes": axes}, True),
            ({"layout": "half", "positions": pos, "pair_axes": axes}, True),
            ({"layout": "half", "positions": pos, "pair_axes": [axes, axes[::-1]]}, False),
        ]
        if nb == 2:  # ((2, seq) positions of one batch row read as per-row positions)
            calls.append(({"layout": "half:2", "positions": pos[:2]}, False))
        for kw, walked in calls:
            seen.clear()
            got = fastpe.apply_rope(x, **kw)
            with monkeypatch.context() as m:
                m.setitem(_engine.MODES, "stretches", False)
                assert fastpe.apply_rope(x, **kw).tobytes() == got.tobytes(), (seq, kw)
            assert seen == [ON if walked and nb == 1 and not zen5 else None, None], (seq, kw)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rope16_stretches_same_bits(monkeypatch, layout, dtype):
    """16-bit rows that prefetch walk each batch row's positions of a work item in two
    stretches side by side (``_rotate16_rows``): the bits of the one-stretch walk (the
    ``prefetch`` mode off) for every count of positions in an item from 1 (odd counts: the
    last position after the stretches), serial and on the threads, rows and heads in
    reverse, a slice of the channels, per-row offsets, one head and several; nothing
    outside the view written."""
    from fastpe._kernels import half

    if dtype == "bfloat16":
        dt = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        dt = np.dtype(np.float16)
    monkeypatch.setattr(_engine, "_zen5", False)
    seen = _spy_last_arg(monkeypatch, half.rope16_kernel)
    rng = np.random.default_rng(9)
    for serial in (True, False):
        with monkeypatch.context() as m:
            if not serial:
                m.setattr(_engine, "_SERIAL_MIN_BYTES", 0)
                m.setattr(_engine, "_SERIAL_BYTES", 0)
            for seq in (1, 2, 3, 7, 64, 301):
                base = rng.standard_normal((3, seq, 3, 70)).astype(dt)
                views = [
                    lambda a: a[:, :, :, :64],
                    lambda a: a[:2, ::-1, ::-1, :64],
                    lambda a: a[:, :, :1, 2:66],
                ]
                for view in views:
                    for offset in (3, np.array([5, 10**6, 7])):
                        if np.ndim(offset):
                            offset = offset[: view(base).shape[0]]
                        results = []
                        for state in (True, False):
                            m.setitem(_engine.MODES, "prefetch", state)
                            x = base.copy()
                            seen.clear()
                            fastpe.apply_rope(view(x), out=view(x), layout=layout, offset=offset)
                            # (one position may take the decoding step's walk)
                            if seq > 1:
                                assert seen == [ON if state else None], seq
                            results.append(x)
                        _same_walk_result(results, base, view, (seq, offset))


@pytest.mark.parametrize("cpu", ["other", "bounded", "zen5"])
def test_prefetch_only_out_of_the_cache(monkeypatch, cpu):
    """On Zen 5 rows are prefetched only in arrays at least as large as the last-level
    cache; on the CPUs of ``_PREFETCH_BOUND_CPUS`` (``cpu`` "bounded") only in arrays of
    at least half of it: RoPE rows and the sums of a table row shared by batch rows, and
    (where they are made: not on Zen 5) the two stretches of RoPE's rows of heads, the
    multi-axis kernel's among them; there 16-bit RoPE rows (of either kernel) from the
    whole cache, and one-row ``add_sinusoidal`` at every size (``prefetch_fits``). Other
    CPUs prefetch at every size. The values are the same either way."""
    from fastpe._kernels import half
    from fastpe._kernels.axes import rope_axes_kernel
    from fastpe._kernels.direct import add_direct_kernel

    monkeypatch.setattr(_engine, "_zen5", cpu == "zen5")
    monkeypatch.setattr(_engine, "_prefetch_bounded", cpu == "bounded")

    def at_bound(a, call, share=2 if cpu == "bounded" else 1):
        """call() with ``a`` as large as the bound (the cache ``share`` times ``a``), then
        one byte smaller: the same bits."""
        got = []
        for llc in (a.nbytes * share, (a.nbytes + 1) * share):
            monkeypatch.setattr(_engine, "_LLC_BYTES", llc)
            got.append(call().tobytes())
        assert got[0] == got[1]

    bounded = [ON, ON if cpu == "other" else None]
    made = bounded if cpu != "zen5" else [None, None]  # (not made on Zen 5)
    x = np.random.default_rng(0).standard_normal((2, 300, 256)).astype(np.float32)  # 600 KiB
    rope = _spy_last_arg(monkeypatch, K.rope_kernel, at=PREFETCH_AT)
    at_bound(x, lambda: fastpe.apply_rope(x, layout="half"))
    assert rope == bounded
    assert _engine.prefetch_fits(x.nbytes + 1) is True
    assert _engine.prefetch_fits(x.nbytes) is (cpu == "other")
    heads = np.random.default_rng(1).standard_normal((1, 30, 8, 128)).astype(np.float32)
    stretched = _spy_last_arg(monkeypatch, K.rope_kernel, at=STRETCHES_AT)
    at_bound(heads, lambda: fastpe.apply_rope(heads))
    assert stretched == made
    pos = np.stack([np.arange(30), np.arange(30) // 2, np.arange(30) % 5])
    kw = {"positions": pos, "pair_axes": np.arange(64) % 3}
    walks = _spy_last_arg(monkeypatch, rope_axes_kernel)
    at_bound(heads, lambda: fastpe.apply_rope(heads, **kw))
    assert walks == made
    x16 = np.random.default_rng(2).standard_normal((3, 30, 3, 64)).astype(np.float16)
    rope16 = _spy_last_arg(monkeypatch, half.rope16_kernel)
    at_bound(x16, lambda: fastpe.apply_rope(x16), share=1)
    walks16 = _spy_last_arg(monkeypatch, rope_axes_kernel)
    at_bound(x16, lambda: fastpe.apply_rope(x16, **{**kw, "pair_axes": kw["pair_axes"][:32]}), 1)
    assert rope16 == walks16 == made
    shared = np.random.default_rng(3).standard_normal((3, 300, 256)).astype(np.float32)
    laid = _spy_last_arg(monkeypatch, K.add_kernel)
    at_bound(shared, lambda: fastpe.add_sinusoidal(shared))
    assert laid == bounded
    one = x[:1]
    once = bounded if cpu != "bounded" else [ON, ON]
    lines = _spy_last_arg(monkeypatch, add_direct_kernel)  # a line at a time: its distance
    at_bound(one, lambda: fastpe.add_sinusoidal(one, layout="half"))
    assert [None if d is None else ON for d in lines] == once
    monkeypatch.setitem(_engine.MODES, "direct", False)  # (else add_direct_kernel's rows)
    add = _spy_last_arg(monkeypatch, K.add_kernel)
    at_bound(one, lambda: fastpe.add_sinusoidal(one, layout="half"))
    assert add == once


@pytest.mark.parametrize("name, bounded", [("znver3", True), ("znver4", False), ("", False)])
def test_prefetch_bounded_by_cpu_name(monkeypatch, name, bounded):
    """``prefetch_bounded`` asks the CPU's name once: the CPUs of ``_PREFETCH_BOUND_CPUS``
    (znver3), not others (nor a CPU without a name)."""
    monkeypatch.setattr(_engine, "_prefetch_bounded", None)
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: name)
    assert _engine.prefetch_bounded() is bounded
    monkeypatch.setattr(_engine, "_host_cpu_name", lambda: "znver3" if not bounded else "")
    assert _engine.prefetch_bounded() is bounded  # (asked once)


@pytest.mark.parametrize("zen5", [False, True])
def test_serial_bytes_by_host(monkeypatch, zen5):
    """Calls run on the caller's thread up to 4 MiB on Zen 5 and 1 MiB elsewhere (a fixed
    rule, nothing timed); where ``_SERIAL_BYTES`` is set, up to it; one thread available,
    never the pool. The thread count changes no value."""
    monkeypatch.setattr(_engine, "_zen5", zen5)
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", None)
    want = (4 if zen5 else 1) << 20
    assert _engine.serial_bytes() == want
    monkeypatch.setattr(_engine, "num_threads", lambda: 2)
    assert _engine._threads(1 << 20) == 1
    assert _engine._threads(want) == 1
    assert _engine._threads(want + 1) == 2
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 3 << 20)
    assert _engine._threads(3 << 20) == 1 and _engine._threads((3 << 20) + 1) == 2
    monkeypatch.setattr(_engine, "num_threads", lambda: 1)
    assert _engine._threads(want + 1) == 1
    x = np.random.default_rng(0).standard_normal((4, 128, 32, 128)).astype(np.float32)
    one = fastpe.apply_rope(x, layout="half")  # (num_threads 1: the caller's thread)
    monkeypatch.setattr(_engine, "num_threads", lambda: 2)
    monkeypatch.setattr(_engine, "_SERIAL_BYTES", 1 << 20)
    assert fastpe.apply_rope(x, layout="half").tobytes() == one.tobytes()


def test_handoff_measured():
    """The handoff (bench/handoff.py reports it) is timed on the real pool: a positive
    time, well below a second."""
    assert 0 < _engine.handoff_seconds(3) < 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_one_pair_half_layout_is_interleaved(monkeypatch, dtype):
    """A row of one pair holds the same two channels in either layout: the half layout
    takes the interleaved paths (the lanes kernel for a float32 table of dim 2) and gives
    the interleaved call's bytes, for tables, sums and rotations, shared and per-row
    positions."""
    kerns = launches(monkeypatch)
    for off in (0, 4272943 - 300, 2**40 + 3):
        half = fastpe.sinusoidal_table(70000, 2, dtype=dtype, layout="half", offset=off)
        half_kerns = list(kerns)
        inter = fastpe.sinusoidal_table(70000, 2, dtype=dtype, layout="interleaved", offset=off)
        assert half.tobytes() == inter.tobytes()
        x = np.random.default_rng(0).standard_normal((3, 5000, 2)).astype(dtype)
        for kw in ({"offset": off}, {"offset": off + np.array([0, 10**5, 7])}):
            for f in (fastpe.add_sinusoidal, fastpe.apply_rope):
                if f is fastpe.add_sinusoidal and np.ndim(kw["offset"]):
                    continue
                a, b = (f(x, layout=lay, **kw) for lay in ("half", "interleaved"))
                assert a.tobytes() == b.tobytes(), (f, kw)
        if dtype == np.float32:
            from fastpe._kernels.tables import table_lanes_kernel

            assert half_kerns == [table_lanes_kernel]
        kerns.clear()
