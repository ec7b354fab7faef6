"""bench/report.py: the suite's JSON read into rows, and the peers over several runs."""

from __future__ import annotations

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "report.py"
_spec = importlib.util.spec_from_file_location("bench_report", _PATH)
assert _spec is not None and _spec.loader is not None
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def _run(times: dict[str, float]) -> dict:
    """A pytest-benchmark JSON of one group holding ``times`` (impl -> median seconds)."""
    group = "apply_rope|4x2048x32x128|float32|half"
    return {
        "benchmarks": [
            {
                "group": group,
                "name": f"test_apply_rope[4x2048x32x128-float32-half-{impl}]",
                "params": {"impl": impl},
                "stats": {"median": t},
            }
            for impl, t in times.items()
        ]
    }


def test_rows_name_the_fastest_peer():
    rows = report.rows_from(_run({"fast": 1.0, "reference": 40.0, "torch": 9.0, "jax_jit": 6.0}))
    (row,) = rows
    assert row["best_peer"] == "jax_jit"
    assert row["vs_best_peer"] == 6.0
    assert row["vs_reference"] == 40.0


def test_peers_over_runs_median_and_range():
    runs = [
        report.rows_from(_run({"fast": 1.0, "torch_compile": 8.0})),
        report.rows_from(_run({"fast": 2.0, "torch_compile": 10.0, "jax_jit": 9.0})),
        report.rows_from(_run({"fast": 1.0, "torch_compile": 7.0})),
    ]
    table = report.peers_markdown(runs)
    line = table.splitlines()[2]
    # speedups 8.0, 4.5, 7.0: median 7.0, range 4.5-8.0; each run's fastest peer named
    assert "| 7.0x (4.5x-8.0x) |" in line
    assert "torch_compile, jax_jit, torch_compile" in line
    assert "over 3 runs" in table.splitlines()[0]


def test_groups_without_peers_left_out():
    runs = [report.rows_from(_run({"fast": 1.0, "reference": 3.0}))] * 2
    assert len(report.peers_markdown(runs).splitlines()) == 2  # the header only


def test_group_missing_from_a_run_says_so():
    runs = [
        report.rows_from(_run({"fast": 1.0, "torch": 3.0})),
        report.rows_from({"benchmarks": []}),
    ]
    assert "[1 of 2 runs]" in report.peers_markdown(runs).splitlines()[2]
