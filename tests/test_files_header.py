"""Damaged and hostile ``.npy`` headers, and arguments of the wrong kind, for fastpe.files.

Every one is refused with one clear line, exit code 2 from the command, before any lock,
journal or output exists: the file, its directory and its (absent) journal are unchanged.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

import fastpe
from fastpe import _journal, cli, files


def has_journal(path: Path) -> bool:
    try:
        os.getxattr(path, _journal.XATTR)
    except OSError:
        return False
    return True


def npy(
    path: Path,
    header: str | bytes,
    *,
    version: int = 1,
    data: bytes = b"\0" * 4096,
    length: int | None = None,
) -> Path:
    """A file with ``header`` (a dict literal, or raw bytes) in place of np.save's own."""
    h = header.encode("latin1") if isinstance(header, str) else header
    h = h.ljust(118 if version == 1 else 116) + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(h) if length is None else length)
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + size + h + data)
    return path


def good(shape: str = "(4, 16)", descr: str = "<f4", fortran: str = "False") -> str:
    return f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"


def raw(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def overwritten(path: Path) -> Path:
    """np.save's file with bytes of its header overwritten (a quote, a bracket...)."""
    np.save(path, np.ones((4, 16), np.float32))
    raw = bytearray(path.read_bytes())
    raw[20:40] = b"\xff\x00'\"(" * 4
    path.write_bytes(bytes(raw))
    return path


CASES = [
    ("overwritten", overwritten, "its header is damaged"),
    ("negative-shape", lambda p: npy(p, good("(-2, 16)")), "negative dimension"),
    ("negative-last", lambda p: npy(p, good("(4, -16)")), "negative dimension"),
    ("float-shape", lambda p: npy(p, good("(4, 16.5)")), "its header is damaged"),
    ("expression", lambda p: npy(p, good("(2**70, 16)")), "its header is damaged"),
    ("huge-shape", lambda p: npy(p, good("(1099511627776, 16)")), "truncated"),
    ("bad-bool", lambda p: npy(p, good(fortran="1")), "its header is damaged"),
    ("not-a-dict", lambda p: npy(p, "[1, 2, 3]"), "its header is damaged"),
    (
        "missing-key",
        lambda p: npy(p, "{'descr': '<f4', 'shape': (4, 16), }"),
        "its header is damaged",
    ),
    ("bad-descr", lambda p: npy(p, good(descr="<q9")), "its header is damaged"),
    (
        "structured",
        lambda p: npy(p, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 16), }"),
        "dtype",
    ),
    ("length-past-end", lambda p: npy(p, good(), length=60000, data=b""), "its header is damaged"),
    (
        "length-over-limit",
        lambda p: npy(p, good(), version=2, length=2**21, data=b""),
        "more than the",
    ),
    ("version-3", lambda p: npy(p, good(), version=3), "not a readable .npy file"),
    ("v2-negative", lambda p: npy(p, good("(4, -1)"), version=2), "negative dimension"),
    ("empty", lambda p: raw(p, b""), "not a readable .npy file"),
    ("magic-only", lambda p: raw(p, b"\x93NUMPY\x01\x00"), "not a readable .npy file"),
    ("binary", lambda p: raw(p, np.random.default_rng(0).bytes(300)), "not a readable .npy file"),
]


@pytest.mark.parametrize(("make", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refuses_damaged_headers_before_anything_exists(tmp_path, capsys, make, match):
    src = make(tmp_path / "bad.npy")
    before = src.read_bytes()
    for args in (["--in-place"], ["-o", tmp_path / "out.npy"], ["--in-place", "--again"]):
        code = cli.main(["rope", str(src), *map(str, args)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith("fastpe rope: error: ") and len(err.strip().splitlines()) == 1
        assert match in err and str(src) in err, err
        for raw in (
            "Traceback",
            "TokenError",
            "[Errno",
            "partly rotated",
            "max_header_size",
            "allow_pickle",
        ):
            assert raw not in err, err
        assert src.read_bytes() == before and not has_journal(src)
        assert os.listdir(tmp_path) == ["bad.npy"]


def test_a_legal_header_longer_than_numpys_default_limit_is_read(tmp_path, capsys):
    # np.load refuses headers over 10 000 bytes unless told otherwise; such a header is legal
    # .npy all the same (format 2.0 allows 4 GiB), and fastpe reads up to 1 MiB of it.
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    h = good().encode().ljust(20000)
    h = h.ljust(len(h) + (-(12 + len(h) + 1)) % 64) + b"\n"
    head = b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h
    src = raw(tmp_path / "long.npy", head + x.tobytes())
    want = fastpe.apply_rope(x, offset=3).tobytes()
    out = files.rope_file(src, tmp_path / "o.npy", offset=3)
    assert out.read_bytes() == head + want
    assert cli.main(["rope", str(src), "--in-place", "--offset", "3", "--no-progress"]) == 0
    assert src.read_bytes() == head + want, capsys.readouterr().err


def test_negative_shape_in_place_leaves_nothing_for_o_to_trip_on(tmp_path, capsys):
    src = npy(tmp_path / "neg.npy", good("(-2, 16)"))
    assert cli.main(["rope", str(src), "--in-place"]) == 2
    assert cli.main(["rope", str(src), "-o", str(tmp_path / "o.npy")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert all("negative dimension in the shape (-2, 16)" in line for line in err), err
    np.save(src, np.ones((4, 16), np.float32))  # the file, repaired, rotates normally
    assert cli.main(["rope", str(src), "--in-place", "--no-progress"]) == 0
    assert np.array_equal(np.load(src), fastpe.apply_rope(np.ones((4, 16), np.float32)))


def test_the_os_names_what_went_wrong(tmp_path, capsys):
    assert cli.main(["rope", str(tmp_path), "--in-place"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: give a .npy file, not a directory" in err and "[Errno" not in err, err


# ------------------------------------------------------------------------------------------
# Arguments of the wrong kind (fastpe.files takes paths, never arrays)
# ------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_arrays_and_subclasses_are_refused_as_paths_and_offsets(tmp_path):
    src = tmp_path / "x.npy"
    np.save(src, np.ones((2, 16, 8), np.float32))
    before = src.read_bytes()
    arrays = [
        np.zeros((4, 8)),
        np.matrix(np.zeros((4, 8))),
        np.ma.zeros((4, 8)),
        np.zeros(3, dtype=[("a", "<f4")]).view(np.recarray),
    ]
    for a in arrays:
        with pytest.raises(TypeError, match=r"path must be a path .*got .*fastpe\.apply_rope"):
            files.rope_file(a, in_place=True)
        with pytest.raises(TypeError, match="output must be a path"):
            files.rope_file(src, a)
        with pytest.raises(TypeError, match="output must be a path"):
            files.table_file(a, seq_len=4, dim=8)
    # as apply_rope answers them (an array of one offset per batch row is accepted)
    with pytest.raises(ValueError, match=r"offset must be an int or a 1-D array"):
        files.rope_file(src, in_place=True, offset=np.matrix([[3]]))
    for off in (np.ma.array([3]), np.ma.array(3)):
        with pytest.raises(TypeError, match="offset is a masked array"):
            files.rope_file(src, in_place=True, offset=off)
    with pytest.raises(TypeError, match="path must be a path"):
        files.rope_file(b"x.npy", in_place=True)
    with pytest.raises(TypeError, match="in_place must be True or False"):
        files.rope_file(src, in_place=1)
    with pytest.raises(TypeError, match="again must be True or False"):
        files.rope_file(src, in_place=True, again="yes")
    with pytest.raises(TypeError, match="progress must be True, False or None"):
        files.rope_file(src, in_place=True, progress="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'input'"):
        files.rope_file(input=src, in_place=True)
    assert src.read_bytes() == before and not has_journal(src)
    assert os.listdir(tmp_path) == ["x.npy"]
