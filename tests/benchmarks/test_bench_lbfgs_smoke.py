"""CI-sized run of benchmarks/bench_lbfgs.py (the committed results come from the full run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_lbfgs_smoke(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_lbfgs.py"), "--smoke",
                          "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads((tmp_path / "solvers_lbfgs_smoke.json").read_text())["rows"]
    assert len(rows) == 1
    row = rows[0]
    for loop in ("scipy", "numpy", "numpy_equal_cpu"):
        assert row[loop]["evaluations"] > 20 and 0 < row[loop]["best_error"] < 2.0
        assert 0 < row[loop]["objective_cpu_seconds"] <= row[loop]["cpu_seconds"] * 1.05 + 0.01
    # the same continuation with either minimiser ends at about the same error
    assert abs(row["numpy"]["best_error"] - row["scipy"]["best_error"]) < 0.05
    assert "| width | head | rank |" in (tmp_path / "solvers_lbfgs_smoke.md").read_text()
