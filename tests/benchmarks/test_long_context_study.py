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
