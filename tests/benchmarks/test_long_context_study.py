"""benchmarks/long_context_study.py: run resumes (a finished operator is not run again), every
bracket is kernel-verified, and report writes the table and the figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "long_context_study.py"
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"


def _run(tmp_path: Path, *args: str) -> str:
    command = [sys.executable, str(SCRIPT), *args, "--widths", "32", "--heads", "L0H0,L5H0",
               "--work-scale", "0.05", "--name", "t", "--out-dir", str(tmp_path)]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def test_run_resumes_and_report_writes_table_and_figure(tmp_path: Path) -> None:
    first = _run(tmp_path, "run", str(PANEL))
    assert first.count("minilm/apache2/w32/") == 2
    assert _run(tmp_path, "run", str(PANEL)) == ""  # both finished: nothing runs again
    rows = [json.loads(line) for line in (tmp_path / "long_context_t_work0.05.jsonl").read_text().splitlines()]
    assert [r["head"] for r in rows] == ["L0H0", "L5H0"]
    for r in rows:
        assert all(0 <= b["lower"] <= b["upper"] <= 32 for b in r["brackets"])
    _run(tmp_path, "report")
    table = (tmp_path / "long_context_t_work0.05.md").read_text()
    assert "| L0H0 |" in table and "w32" in table
    assert (tmp_path / "long_context_t_work0.05.png").stat().st_size > 1000


def _study_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("long_context_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_head_profile_tells_sink_local_and_broad_heads_apart() -> None:
    import numpy as np

    study = _study_module()
    n = 64
    sink = np.zeros((n, n))
    sink[:, 0] = 1.0
    local = np.eye(n)
    broad = np.full((n, n), 1.0 / n)
    profiles = [study.head_profile(A) for A in (sink, local, broad)]
    assert [p["sink"] for p in profiles] == [1.0, 1.0 / n, 1.0 / n]
    assert profiles[1]["local"] == 1.0 and profiles[2]["local"] < 0.6
    assert profiles[2]["entropy"] == max(p["entropy"] for p in profiles)


def test_auto_heads_are_classified_recorded_and_labelled(tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPT), "run", str(PANEL), "--widths", "32", "--heads", "auto",
               "--classify-width", "32", "--work-scale", "0.05", "--name", "a", "--out-dir", str(tmp_path)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    chosen = json.loads((tmp_path / "long_context_a_work0.05_heads.json").read_text())["heads"]
    assert sorted(c["kind"] for c in chosen.values()) == ["broad", "local", "sink-heavy", "typical"]
    rows = [json.loads(line) for line in (tmp_path / "long_context_a_work0.05.jsonl").read_text().splitlines()]
    assert {r["head"]: r["kind"] for r in rows} == {h: c["kind"] for h, c in chosen.items()}
    subprocess.run([sys.executable, str(SCRIPT), "report", "--name", "a", "--work-scale", "0.05",
                    "--out-dir", str(tmp_path)], check=True, capture_output=True, text=True)
    table = (tmp_path / "long_context_a_work0.05.md").read_text()
    assert "| 32 | 4 |" in table  # the median row: width 32, four heads
