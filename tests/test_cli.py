"""The fastpe command: compare (small sizes), demo, python -m fastpe."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _util import CHILD_CWD, run_python

import fastpe
from fastpe import _cases, cli


def test_compare_small_json(capsys):
    assert cli.main(["compare", "--sizes", "small", "--json", "--repeat", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(_cases.SIZES["small"])
    for row in rows:
        assert row["ok"] and row["error_ulp"] <= row["tolerance_ulp"]
        assert row["reference_s"] > 0 and row["fast_s"] > 0
        assert {"op", "shape", "dtype", "layout", "speedup"} <= set(row)


def test_compare_table_output_and_filters(capsys):
    code = cli.main(
        ["compare", "--sizes", "small", "--op", "apply_rope", "--dtype", "float64", "--repeat", "1"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "apply_rope[half]" in out and "1 of 1 case within tolerance" in out


def test_compare_exits_nonzero_when_out_of_tolerance(monkeypatch, capsys):
    monkeypatch.setattr(
        _cases, "ROPE_ULP", {np.dtype(np.float32): -1.0, np.dtype(np.float64): -1.0}
    )
    assert cli.main(["compare", "--sizes", "small", "--op", "apply_rope", "--repeat", "1"]) == 1
    assert "NO" in capsys.readouterr().out


def test_demo():
    d = cli.demo()
    assert d["dim"] == 8 and d["positions"] == [0, 1, 2, 3, 4, 5]
    # each row's norm is sqrt(dim / 2) = 2 within a few 2**-52, and printed to 12 decimals
    assert d["expected_norm"] == 2.0 and d["norms"] == [2.0] * 6
    assert d["dot_0_1"] > d["dot_0_5"] and d["dot_0_1_greater_than_dot_0_5"]
    # at dim 8 the dot product is not monotone in k (it rises again after k = 3)
    assert d["similarity_decays_with_distance"] is False
    assert d["encodings"][0] == [0.0, 1.0] * 4


@pytest.mark.parametrize("argv", [["demo"], ["compare", "--help"]])
def test_python_dash_m(argv):
    r = run_python(
        [sys.executable, "-m", "fastpe", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    if argv == ["demo"]:
        assert json.loads(r.stdout)["dot_0_1_greater_than_dot_0_5"] is True


def test_children_import_this_fastpe(tmp_path, monkeypatch):
    """A test's child process (``run_python`` in tests/_util.py: ``CHILD_CWD`` and
    ``child_env``) imports the fastpe this process imported, even where ``PYTHONPATH``
    already names another tree: here a decoy package that fails on import, which a child
    given this environment as it is imports instead. (Under the ``pytest`` script with
    ``PYTHONPATH`` at another tree, ``python -c`` children had imported the checkout in the
    working directory.)"""
    decoy = tmp_path / "fastpe"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy tree')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert not (Path(CHILD_CWD) / "fastpe").exists()
    code = "import fastpe; print(fastpe.__file__)"
    plain = run_python(
        [sys.executable, "-c", code],
        env=dict(os.environ),  # (this environment as it is)
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode != 0 and "the decoy tree" in plain.stderr
    r = run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(r.stdout.strip()).resolve() == Path(fastpe.__file__).resolve()


def test_every_python_child_of_the_tests_is_pinned():
    """A child Python process of the tests (``sys.executable``, ``fastpe_cmd``) starts
    through ``run_python`` or ``popen_python`` (tests/_util.py), or passes ``cwd=`` and
    ``env=`` of its own (a tree it means to import): no direct ``subprocess.run`` or
    ``Popen`` of one without them, which would import whatever checkout its working
    directory or this environment names. The benchmarks' and bench scripts' children
    (bench/) are held to the same rule."""
    import ast

    root = Path(__file__).resolve().parents[1]
    missing = []
    for path in sorted([*(root / "tests").glob("*.py"), *(root / "bench").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("run", "Popen")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "subprocess"
                and node.args
            ):
                continue
            first = ast.unparse(node.args[0])
            if "sys.executable" not in first and "fastpe_cmd" not in first:
                continue
            keys = {k.arg for k in node.keywords}
            if None not in keys and not {"cwd", "env"} <= keys:
                missing.append(f"{path.parent.name}/{path.name}:{node.lineno}")
    assert not missing, missing


def test_import_does_not_import_numba():
    code = "import sys, fastpe; print('numba' in sys.modules)"
    r = run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == "False"


def test_submodules_reachable_after_import_fastpe():
    """``import fastpe`` then ``fastpe.reference``, ``fastpe.files``: loaded on first use
    (the README names them so), not at import."""
    code = (
        "import sys, fastpe\n"
        "assert 'fastpe.reference' not in sys.modules and 'fastpe.files' not in sys.modules\n"
        "import numpy as np\n"
        "x = np.ones((1, 4, 8))\n"
        "assert np.allclose(fastpe.reference.apply_rope(x), fastpe.apply_rope(x))\n"
        "assert callable(fastpe.files.rope_file)\n"
        "try:\n"
        "    fastpe.no_such_name\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    run_python(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )


@pytest.mark.parametrize("argv", [["demo"], ["warmup", "--dtype", "float32"]])
def test_closed_stdout_ends_quietly(argv):
    # ``fastpe demo | head -1``: the reader is gone before the command writes (both ends of
    # the pipe closed here), so every write fails; no traceback, the status of a tool
    # stopped by SIGPIPE
    r, w = os.pipe()
    os.close(r)
    try:
        p = run_python(
            [sys.executable, "-m", "fastpe", *argv],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(w)
    assert p.stderr == "", p.stderr
    assert p.returncode == 141


@pytest.mark.skipif(
    shutil.which("head") is None or shutil.which("sh") is None,
    reason="needs a POSIX shell and head",
)
def test_demo_into_head():
    # the pipeline as typed; whether head leaves before the write is a race, which the
    # closed-pipe test above takes out
    cmd = f"{shlex.quote(sys.executable)} -m fastpe demo | head -1"
    p = run_python(
        ["sh", "-c", cmd],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0 and p.stdout == "{\n" and p.stderr == "", p.stderr
