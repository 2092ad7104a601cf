"""benchmarks/gpu_long_context.py at a CPU size: the run mode searches on torch (device "cpu")
without python-flint or highspy importable, as on the device machine, and the verify mode
checks every witness it brought back with the kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_long_context.py"
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
HEADS = "minilm/apache2/w32/L0H0,minilm/apache2/w32/L5H1"

#: The run mode as the device machine runs it: python-flint and highspy cannot be imported.
DEVICE_RUN = ("import runpy, sys\n"
              "sys.modules['flint'] = None\n"
              "sys.modules['highspy'] = None\n"
              "sys.argv = sys.argv[1:]\n"
              "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.slow
def test_dry_run_on_cpu_then_verify(tmp_path: Path) -> None:
    out, results = tmp_path / "out", tmp_path / "results"
    proc = subprocess.run([sys.executable, "-c", DEVICE_RUN, str(SCRIPT), "run", str(PANEL), "--out", str(out),
                           "--device", "cpu", "--seconds", "5", "--operators", HEADS],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    timings = json.loads((out / "timings.json").read_text())
    assert [r["operator"] for r in timings["operators"]] == HEADS.split(",")
    assert all(r["device"]["device"].startswith("cpu") and r["evaluations"] > 0 for r in timings["operators"])
    proc = subprocess.run([sys.executable, str(SCRIPT), "verify", str(PANEL), "--arrays", str(out), "--name", "dry",
                           "--results", str(results)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((results / "dry.json").read_text())
    verdicts = [v["verdict"] for row in report["operators"] for v in row["verified"].values()]
    assert len(verdicts) == 6 and set(verdicts) == {"VERIFIED"}
    assert (results / "dry.md").read_text().count("VERIFIED") == 6
