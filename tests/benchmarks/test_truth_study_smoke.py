"""CI-sized run of benchmarks/truth_study.py (the committed results come from the full run):
one MiniLM head at width 16 with tiny work; the output has the documented shape and every end
it reports was VERIFIED by the kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("resolved_default", "resolved_more", "open_lower_up", "open_upper_down", "open_both_moved", "open_neither")


@pytest.mark.slow
def test_truth_study_smoke_reports_only_verified_ends(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "truth_study.py"), "--smoke",
                          "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((tmp_path / "truth_study.json").read_text())
    assert len(report["operators"]) == 1 and report["skipped"] == []
    row = report["operators"][0]
    assert row["width"] == 16 and row["levels"][0]["level"] == "default"
    for eps in ("0.1", "0.25", "0.5"):
        summary = report["summary"][f"w16 eps {eps}"]
        assert sum(summary[k] for k in KINDS) == 1
        best = row["best"][eps]
        assert 1 <= best["lower"] <= best["upper"] <= 16
        for level in row["levels"]:  # every end the driver returned was verified by the kernel
            ends = level["ends"][eps]
            assert ends["lower_status"] == "VERIFIED" and ends["upper_status"] == "VERIFIED"
            assert ends["lower"] <= best["lower"] or best["lower_from"] == "push"
        push = row["pushes"].get(eps)
        if push is not None:  # a pushed end counts only when the kernel verified it
            for side in ("upper", "lower"):
                if push[side]["best"] is not None:
                    assert push[side]["best"]["status"] == "VERIFIED"
                    rank = push[side]["best"]["r" if side == "upper" else "k"]
                    assert any(t["status"] == "VERIFIED" and t.get("r", t.get("k")) == rank
                               for t in push[side]["tried"])
        if best["lower_from"] == "push":
            assert push["lower"]["best"]["k"] == best["lower"]
        if best["upper_from"] == "push":
            assert push["upper"]["best"]["r"] == best["upper"]
    # the resume file holds the operator, and a resumed run reproduces the summary without recomputing
    assert len((tmp_path / "truth_study.jsonl").read_text().splitlines()) == 1
    again = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "truth_study.py"), "--smoke", "--resume",
                            "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "[truth]" not in again.stderr
    assert json.loads((tmp_path / "truth_study.json").read_text())["summary"] == report["summary"]
    assert "| width, eps |" in (tmp_path / "truth_study.md").read_text()
