"""Block-width budget study (issue 4 part 4): classification, the targeted pass, ``softrank budgets``.

Small operators only (the six-head MiniLM w32 example panel, tiny synthetic panels) and no time
budget in the runs that are compared, so every run does the same computation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.studies.budgets.operators import (NO_WIDTH, OperatorBudgets, classify, name_fields, parse_budgets, sharpen,
                                   study_operator, summarize)
from softrank_cert.errors import EXIT_INVALID_INPUT, InternalInvariantError, InvalidInputError
from softrank_cert.kernel import Status, verify_lower, verify_upper
from softrank_cert.util.operator_files import load_operators
from softrank_cert.plumbing.parallel import pack_operator
from conftest import run_in_process as cli
from tests.helpers import softrank_subprocess as softrank

ROOT = Path(__file__).resolve().parents[2]
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"


def deterministic(report: dict) -> dict:
    """The report without wall times and the creation stamp (the only run-dependent fields)."""
    out = {k: v for k, v in report.items() if k not in ("seconds", "generator")}
    out["operators"] = [{k: v for k, v in op.items() if k != "seconds"} for op in report["operators"]]
    return out


# -- pure logic ------------------------------------------------------------------------

def test_classify_fixed_ends():
    assert classify(3, 10, [2, 3, 8, 10, 12]) == {2: "impossible", 3: "unresolved", 8: "unresolved",
                                                   10: "feasible", 12: "feasible"}
    assert classify(5, 5, [4, 5]) == {4: "impossible", 5: "feasible"}  # resolved: nothing unresolved
    assert classify(0, 0, [1]) == {1: "feasible"}  # eps >= ||A||: the zero matrix
    assert classify(1, 512, [8, 16, 32]) == {8: "unresolved", 16: "unresolved", 32: "unresolved"}
    with pytest.raises(InternalInvariantError):
        classify(6, 5, [8])


@pytest.mark.parametrize("text, expected", [("8,16,32", [8, 16, 32]), ("32, 8", [8, 32]), ("1", [1])])
def test_parse_budgets(text, expected):
    assert parse_budgets(text) == expected


@pytest.mark.parametrize("text", ["8,x", "0", "8,8", "", "8,,16", "-1", "1.5", "8;16"])
def test_parse_budgets_refuses(text):
    with pytest.raises(InvalidInputError):
        parse_budgets(text)


def test_name_fields():
    assert name_fields("minilm/apache2/w128/L3H7", "panel") == ("apache2", 128, 3, 7)
    assert name_fields("gpt2/doc/w64/L11H0", "panel") == ("doc", 64, 11, 0)
    assert name_fields("op", "panel") == ("panel", NO_WIDTH, None, None)
    assert name_fields("w16/L0H1", "panel") == ("panel", 16, 0, 1)
    assert name_fields("x/wide/L1H2", "panel") == ("panel", NO_WIDTH, 1, 2)


def _item(name: str, lower: int, upper: int, budgets: list[int]) -> OperatorBudgets:
    document, width, layer, head = name_fields(name, "stem")
    return OperatorBudgets(name, document, width, layer, head, 64, "0.25", lower, upper, "m", "c",
                           classify(lower, upper, budgets))


def test_summarize_groups_and_fractions():
    budgets = [8, 16]
    items = [_item("m/a/w64/L0H0", 2, 6, budgets), _item("m/a/w64/L0H1", 9, 20, budgets),
             _item("m/a/w64/L0H2", 3, 12, budgets), _item("m/a/w128/L0H0", 1, 40, budgets),
             _item("m/b/w64/L0H0", 17, 17, budgets), _item("loose", 1, 2, budgets)]
    groups = summarize(items, budgets)
    assert [(g["document"], g["width"], g["heads"]) for g in groups] == [
        ("a", 64, 3), ("a", 128, 1), ("b", 64, 1), ("stem", NO_WIDTH, 1)]
    a64 = groups[0]["budgets"]
    assert a64["8"] == {"feasible": 1, "impossible": 1, "unresolved": 1, "feasible_fraction": 0.3333,
                        "impossible_fraction": 0.3333, "unresolved_fraction": 0.3333}
    assert (a64["16"]["feasible"], a64["16"]["impossible"], a64["16"]["unresolved"]) == (2, 0, 1)
    assert groups[2]["budgets"]["16"]["impossible"] == 1 and groups[1]["budgets"]["16"]["unresolved"] == 1
    assert groups[0]["median_lower"] == 3 and groups[0]["median_upper"] == 12


# -- the targeted pass and one operator's study (kernel verdicts) -------------------------

def test_sharpen_settles_budgets_from_weak_ends():
    """From the trivial ends [1, p], the pass finds a witness at each budget >= r_eps and a
    pooled certificate at k = 3 on a head resolved at 3; every moved end re-verifies."""
    (item,) = load_operators(PANEL, ["minilm/apache2/w32/L5H1"])
    op = item.operator
    (k, k_method), (r, r_method), notes = sharpen(op, "0.25", [2, 3, 8], (1, "trivial"), (op.p, "identity"))
    assert (k, r) == (3, 3)
    assert notes == ["upper 8 (tsvd)", "upper 3 (tsvd)", "lower 3 (pooled)"]
    assert classify(k, r, [2, 3, 8]) == {2: "impossible", 3: "feasible", 8: "feasible"}
    # nothing to do when no budget lies in [lower, upper)
    assert sharpen(op, "0.25", [2, 8], (3, "x"), (3, "y")) == ((3, "x"), (3, "y"), [])


def test_sharpen_counts_only_verified_ends(monkeypatch):
    """Candidates the kernel does not verify never move an end: here the kernel is asked about a
    much harder claim (tiny eps for witnesses, huge eps for certificates) and rejects them all."""
    import softrank_cert.certio.verified as sealing

    (item,) = load_operators(PANEL, ["minilm/apache2/w32/L5H1"])
    op = item.operator
    verdicts = []

    def hard_upper(op_, eps, r, U, W, **kw):
        verdicts.append(verify_upper(op_, "0.0001", r, U, W, **kw))
        return verdicts[-1]

    def hard_lower(op_, eps, k, X, Y, **kw):
        verdicts.append(verify_lower(op_, "1000", k, X, Y, **kw))
        return verdicts[-1]

    monkeypatch.setattr(sealing, "verify_upper", hard_upper)  # the one sealing routine sharpen's settling uses
    monkeypatch.setattr(sealing, "verify_lower", hard_lower)
    ends = sharpen(op, "0.25", [2, 3, 8], (1, "trivial"), (op.p, "identity"))
    assert ends == ((1, "trivial"), (op.p, "identity"), [])
    assert verdicts and all(v.status is Status.REJECTED for v in verdicts)


def test_study_operator_matches_classification():
    (item,) = load_operators(PANEL, ["minilm/apache2/w32/L0H0"])
    res = study_operator(pack_operator(item.operator), item.name, "stem", "0.25", [4, 8, 16], None)
    assert (res.document, res.width, res.layer, res.head, res.p) == ("apache2", 32, 0, 0, 32)
    assert res.lower <= res.upper and res.classes == classify(res.lower, res.upper, [4, 8, 16])
    doc = res.to_json()
    assert doc["classes"] == {"4": res.classes[4], "8": res.classes[8], "16": res.classes[16]}
    assert json.loads(json.dumps(doc)) == doc


def test_study_work_bounds_every_search_and_keys_the_campaign(tmp_path, monkeypatch):
    """``study(work=W)``: every operator's bracket and budget pass run with W work units; the
    campaign records W, a resume with the same W keeps every operator, another W recomputes."""
    import softrank_cert.solvers as solvers
    from softrank_cert.studies.budgets.campaign import study

    seen: list[float | None] = []
    bracket = solvers.bracket_operator

    def recording(op, eps_list, **kwargs):
        seen.append(kwargs.get("work"))
        return bracket(op, eps_list, **kwargs)

    passes: list[float | None] = []
    original_sharpen = sharpen

    def recording_sharpen(*args, **kwargs):
        passes.append(kwargs.get("work"))
        return original_sharpen(*args, **kwargs)

    monkeypatch.setattr(solvers, "bracket_operator", recording)
    monkeypatch.setattr("softrank_cert.studies.budgets.operators.sharpen", recording_sharpen)
    manifest = tmp_path / "b-campaign.json"
    first = study([str(PANEL)], "0.25", [2, 4, 8], None, show_progress=False, manifest=manifest, work=3000.0)
    assert seen == [3000.0] * 6 and passes == [3000.0] * 6
    assert json.loads(manifest.read_text())["budget_work"] == 3000.0
    again = study([str(PANEL)], "0.25", [2, 4, 8], None, show_progress=False, manifest=manifest, resume=True,
                  work=3000.0)
    assert len(seen) == 6 and deterministic(again)["operators"] == deterministic(first)["operators"]
    study([str(PANEL)], "0.25", [2, 4, 8], None, show_progress=False, manifest=manifest, resume=True, work=6000.0)
    assert seen[6:] == [6000.0] * 6  # another work: every operator computed again
    assert json.loads(manifest.read_text())["runs"][-1]["computed"] == 6


# -- the command ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """Two widths of a random qk 'document' plus an operator without a width in its name."""
    rng = np.random.default_rng(7)
    arrays = {}
    for width in (8, 16):
        for head in range(2):
            scale = 0.5 + 2.0 * head
            arrays[f"syn/doc/w{width}/L0H{head}/Q"] = scale * rng.standard_normal((width, 4))
            arrays[f"syn/doc/w{width}/L0H{head}/K"] = rng.standard_normal((width, 4))
    arrays["loose/A"] = np.full((6, 6), 1 / 6)
    path = tmp_path_factory.mktemp("synthetic") / "synth.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.slow
def test_cli_json_plot_table(tmp_path, synthetic):
    run = softrank("budgets", str(PANEL), str(synthetic), "--budgets", "4,8,16", "--eps", "0.25", "--json",
                   "--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "b.png"), "--table", str(tmp_path / "b.md"))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["format"] == "softrank-budgets-report" and report["eps"] == "0.25" and report["budgets"] == [4, 8, 16]
    names = [op["operator"] for op in report["operators"]]
    assert names[:6] == sorted(names[:6]) and len(names) == 6 + 5
    for op in report["operators"]:
        assert op["lower"] <= op["upper"] <= op["p"]
        assert op["classes"] == {str(b): c for b, c in classify(op["lower"], op["upper"], [4, 8, 16]).items()}
    groups = {(g["document"], g["width"]): g for g in report["groups"]}
    assert set(groups) == {("apache2", 32), ("doc", 8), ("doc", 16), ("synth", NO_WIDTH)}
    for g in groups.values():
        for entry in g["budgets"].values():
            assert entry["feasible"] + entry["impossible"] + entry["unresolved"] == g["heads"]
    # the uniform matrix is rank 1 (r = 1 for every budget): feasible everywhere
    assert groups["synth", NO_WIDTH]["budgets"]["4"]["feasible"] == 1
    assert deterministic(json.loads((tmp_path / "r.json").read_text())) == deterministic(report)
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (tmp_path / "b.md").read_text()
    assert "| document | width | budget | heads | feasible | impossible | unresolved |" in table
    assert "| apache2 | 32 | 8 | 6 |" in table and "| synth | - | 16 | 1 |" in table


def test_cli_table_output(capsys):
    code, out, err = cli(capsys, "budgets", str(PANEL), "--budgets", "8", "--eps", "0.5", "--budget-seconds", "20")
    assert code == 0, err
    assert "softrank budgets at eps 0.5" in out and "apache2" in out and "6 operators" in out


@pytest.mark.slow
def test_jobs_give_identical_results(tmp_path, synthetic):
    base = ["budgets", str(PANEL), str(synthetic), "--budgets", "4,8,16", "--eps", "0.25", "--json",
            "--budget-seconds", "inf"]
    one, two = softrank(*base, "--jobs", "1"), softrank(*base, "--jobs", "2")
    assert one.returncode == 0 and two.returncode == 0, (one.stderr, two.stderr)
    assert deterministic(json.loads(one.stdout)) == deterministic(json.loads(two.stdout))


@pytest.mark.parametrize("args, fragment", [
    (["--budgets", "8,x", "--eps", "0.25"], "--budgets expects"),
    (["--budgets", "0", "--eps", "0.25"], "must be >= 1"),
    (["--budgets", "8,16,8", "--eps", "0.25"], "twice"),
    (["--budgets", "8", "--eps", "0.1,0.25"], "tolerance"),
    (["--budgets", "8", "--eps", "-1"], "tolerance"),
    (["--budgets", "8", "--eps", "0.25", "--budget-seconds", "0"], "--budget-seconds"),
    (["--budgets", "8", "--eps", "0.25", "--jobs", "-1"], "--jobs"),
    (["--budgets", "8", "--eps", "0.25", "--plot", "out.txt"], "--plot"),
])
def test_cli_invalid_arguments(capsys, args, fragment):
    code, out, err = cli(capsys, "budgets", str(PANEL), *args)
    assert code == EXIT_INVALID_INPUT and out == ""
    assert err.count("\n") == 1 and err.startswith("softrank budgets: error:") and fragment in err, err


def test_cli_missing_or_bad_panels(capsys, tmp_path):
    code, _, err = cli(capsys, "budgets", str(tmp_path / "nope.npz"), "--budgets", "8", "--eps", "0.25")
    assert code == EXIT_INVALID_INPUT and err.count("\n") == 1 and "no such file" in err
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    code, _, err = cli(capsys, "budgets", str(tmp_path / "junk.npz"), "--budgets", "8", "--eps", "0.25")
    assert code == EXIT_INVALID_INPUT and err.count("\n") == 1 and "not a readable .npz" in err
    code, _, err = cli(capsys, "budgets", str(PANEL), str(PANEL), "--budgets", "8", "--eps", "0.25")
    assert code == EXIT_INVALID_INPUT and err.count("\n") == 1 and "in both" in err
    code, _, err = cli(capsys, "budgets", str(PANEL), "--eps", "0.25")  # --budgets is required
    assert code == EXIT_INVALID_INPUT and err.count("\n") == 1


def test_cli_help_has_examples():
    run = softrank("budgets", "--help")
    assert run.returncode == 0 and "examples:" in run.stdout and "--budgets 8,16,32" in run.stdout
    assert "softrank budgets" in softrank("--help").stdout
