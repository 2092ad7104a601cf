"""CI-sized run of benchmarks/bench_startup.py: the figures it writes, not how fast they are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("softrank --help", "python -c 'import numpy, flint'")


def test_bench_startup_writes_medians_of_both_commands(tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--label", "smoke",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["label"] == "smoke" and report["repeats"] == 11 and len(report["load_average_before"]) == 3
    for command in COMMANDS:
        for clock in ("wall", "cpu"):
            figures = report["seconds"][command][clock]
            assert 0 < figures["min"] <= figures["median"] <= figures["max"], (command, clock, figures)
    assert all(command in run.stdout for command in COMMANDS)


def test_bench_startup_refuses_fewer_than_eleven_runs(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--repeats", "3",
                          "--out", str(tmp_path / "x.json")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "at least 11" in run.stderr and not (tmp_path / "x.json").exists()
