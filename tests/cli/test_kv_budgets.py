"""Certified KV budgets (``softrank kv-budgets``; proofs/kv-budgets.md): the policies' exact error,
the witness the kernel verifies, no budget without a VERIFIED witness, the command's refusals."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.certio.issuing import certificate_for
from softrank_cert.certio.verified import VerifiedBracket, verify_lower_end
from softrank_cert.cli.main import main as softrank_main
from softrank_cert.cli.verify import main as verify_main
from softrank_cert.errors import InternalInvariantError
from softrank_cert.kernel import Operator
from softrank_cert.plumbing.json_contract import validate_report
from softrank_cert.studies.kv_budgets import certify as certify_module
from softrank_cert.studies.kv_budgets.certify import certify_budget
from softrank_cert.studies.kv_budgets.policies import (H2O, KEEP, STREAMING_LLM, Policy, h2o_order, policy_errors,
                                                       priority_order, streaming_order)
from softrank_cert.studies.kv_budgets.witnesses import policy_witness
from softrank_cert.util.dense import attention_matrix

NAMES = ["tiny/doc/w8/L0H0", "tiny/doc/w8/L1H1"]


def run(*argv, verify: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
        (verify_main if verify else softrank_main)([str(a) for a in argv])
    return int(stop.value.code), out.getvalue(), err.getvalue()


def dyadic_operator(seed: int = 0, m: int = 5, n: int = 7) -> tuple[Operator, list[list[Fraction]]]:
    """A probabilities operator whose rows are dyadic (exact in float64) and sum to exactly 1."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(m):
        counts = rng.integers(1, 9, size=n).astype(float)
        counts[-1] += 64 - counts.sum() if counts.sum() < 64 else 0
        counts *= 64 / counts.sum() if counts.sum() != 64 else 1
        rows.append([Fraction(c).limit_denominator(1 << 20) / 64 for c in counts])
    exact = [[Fraction(float(x)) for x in row] for row in rows]
    exact = [[x / sum(row) for x in row] for row in exact]
    A = np.array([[float(x) for x in row] for row in exact])
    exact = [[Fraction(float(x)) for x in row] for row in A]
    assert all(sum(row) == 1 for row in exact)
    return Operator.from_probabilities(A), exact


def test_policy_orders_are_nested_priority_lists():
    assert streaming_order(8, 3).tolist() == [0, 1, 2, 7, 6, 5, 4, 3]
    assert streaming_order(3, 4).tolist() == [0, 1, 2]
    A = np.array([[0.1, 0.5, 0.1, 0.1, 0.2], [0.1, 0.6, 0.1, 0.1, 0.1]])
    order = h2o_order(A, 0.5).tolist()
    assert sorted(order) == list(range(5))
    assert order[:2] == [1, 4]  # heavy hitter first, then the newest key
    assert h2o_order(A, 0.0).tolist()[:3] == [1, 4, 0]  # heavy hitters only; keys 0, 2, 3 tie: the lowest first


def test_policy_error_formula_matches_exact_fractions():
    op, exact = dyadic_operator()
    A = attention_matrix(op)
    for policy in (Policy(STREAMING_LLM, sinks=2), Policy(H2O), Policy(KEEP, keep=(3, 0, 5))):
        order = priority_order(policy, A)
        errors = policy_errors(A, order)
        for s in range(1, len(order) + 1):
            kept = order[:s].tolist()
            sigma = [sum(row[j] for j in kept) for row in exact]
            formula = max(2 * (1 - sg) for sg in sigma)
            renormalised = max(sum(abs(row[j] - (row[j] / sg if j in kept else 0)) for j in range(len(row)))
                               for row, sg in zip(exact, sigma))
            assert renormalised == formula  # Theorem KV2, exactly
            assert abs(errors[s - 1] - float(formula)) < 1e-12
            U, W = policy_witness(A, order[:s])
            product = [[sum(Fraction(float(U[i, t])) * Fraction(float(W[j, t])) for t in range(s))
                        for j in range(A.shape[1])] for i in range(A.shape[0])]
            assert all(product[i][j] == (Fraction(float(U[i, kept.index(j)])) if j in kept else 0)
                       for i in range(A.shape[0]) for j in range(A.shape[1]))  # U W^T exact in float64
        assert all(np.diff(errors) <= 1e-15)  # nested kept sets: non-increasing


def test_worst_value_matrix_attains_the_norm():
    rng = np.random.default_rng(1)
    E = rng.standard_normal((4, 9))
    norm = np.abs(E).sum(axis=1).max()
    for _ in range(50):
        assert np.abs(E @ rng.uniform(-1, 1, size=(9, 3))).max() <= norm + 1e-12
    i = int(np.abs(E).sum(axis=1).argmax())
    V = np.where(E[i] >= 0, 1.0, -1.0)[:, None]
    assert np.isclose((E @ V)[i, 0], norm)


def causal_operator(seed: int = 2, n: int = 8) -> Operator:
    rng = np.random.default_rng(seed)
    return Operator.from_qk(2 * rng.standard_normal((n, 2)), 2 * rng.standard_normal((n, 2)), causal=True)


def test_policy_witness_is_verified_and_passes_softrank_verify(tmp_path):
    op = causal_operator()
    A = attention_matrix(op)
    order = priority_order(Policy(STREAMING_LLM, sinks=1), A)
    errors = policy_errors(A, order)
    result = certify_budget(op, A, order, errors, "0.5", STREAMING_LLM, None)
    assert result.budget is not None and result.sealed is not None
    assert errors[result.budget - 1] <= 0.5 + 1e-12
    assert result.minimal and result.why_minimal == "rejected-below"
    assert errors[result.budget - 2] > 0.5  # the rejected budget one below is really above eps
    lower = verify_lower_end(op, "0.5", 1, None, None, "trivial")
    document = certificate_for("t/w8/L0H0", op, [VerifiedBracket("0.5", lower, result.sealed)])
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(document))
    code, out, err = run(path, verify=True)
    assert code == 0, out + err
    document["brackets"][0]["upper"]["U"] = document["brackets"][0]["upper"]["W"]  # the 0/1 selection as weights
    path.write_text(json.dumps(document))
    assert run(path, verify=True)[0] == 1  # a mutated witness is REJECTED


def test_mutated_witness_is_never_reported_as_a_budget(monkeypatch):
    op = causal_operator()
    A = attention_matrix(op)
    order = priority_order(Policy(H2O), A)
    errors = policy_errors(A, order)
    honest = certify_budget(op, A, order, errors, "0.25", H2O, None)
    assert honest.budget is not None

    def inflated(A_, kept):  # a float64 bug: weights 30% too large, error > eps at every budget
        witness = policy_witness(A_, kept)
        return None if witness is None else (1.3 * witness[0], witness[1])

    monkeypatch.setattr(certify_module, "policy_witness", inflated)
    lying = certify_budget(op, A, order, np.zeros_like(errors), "0.25", H2O, None)  # proposer says s = 1
    assert lying.budget is None and lying.sealed is None and not lying.minimal
    with pytest.raises(InternalInvariantError):
        certificate_for("x", op, [VerifiedBracket("0.25", verify_lower_end(op, "0.25", 1, None, None, "trivial"),
                                                  object())])  # an unsealed end is never written


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    rng = np.random.default_rng(5)
    work = tmp_path_factory.mktemp("kv")
    arrays = {}
    for name in NAMES:
        arrays[f"{name}/Q"] = 2 * rng.standard_normal((8, 2))
        arrays[f"{name}/K"] = 2 * rng.standard_normal((8, 2))
    np.savez(work / "tiny.npz", **arrays)
    code, _out, err = run("bracket", work / "tiny.npz", "--all", "--eps", "0.25,0.5", "--out", work / "certs/",
                          "--budget-seconds", "1", "--quiet")
    assert code == 0, err
    return work / "certs"


def fresh(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "certs"
    shutil.copytree(folder, target)
    return target


def test_kv_budgets_writes_verified_certificates_and_a_valid_report(folder, tmp_path):
    certs = fresh(folder, tmp_path)
    code, out, err = run("kv-budgets", certs, "--json")
    assert code == 0, err
    report = json.loads(out)
    validate_report(report)
    assert json.loads((certs / "kv_budgets.json").read_text())["operators"] == report["operators"]
    assert "certifying budgets (2/2 heads)" in err  # stage names in a log
    for record in report["operators"]:
        lower = {b["eps"]: b["lower"] for b in record["brackets"]}
        for budget in record["budgets"]:
            assert budget["budget"] is None or budget["budget"] >= lower[budget["eps"]]
        assert set(record["certificates"]) == {"streaming-llm", "h2o"}
    assert list((certs / "kv-budgets" / "figures").glob("*.png"))
    code, out, err = run(certs / "kv-budgets", verify=True)
    assert code == 0 and "0 rejected" in out, out + err
    code, out, err = run("kv-budgets", certs, "--resume", "--json", "--quiet")
    assert code == 0, err
    again = json.loads(out)
    assert [r["budgets"] for r in again["operators"]] == [
        [{**b, "kernel_checks": b2["kernel_checks"]} for b, b2 in zip(r["budgets"], r2["budgets"])]
        for r, r2 in zip(report["operators"], again["operators"])]
    assert all(r["kept"] == ["h2o", "streaming-llm"] for r in again["operators"])


def test_resume_does_not_keep_a_tampered_certificate(folder, tmp_path):
    certs = fresh(folder, tmp_path)
    assert run("kv-budgets", certs, "--policies", "streaming-llm", "--quiet")[0] == 0
    path = certs / "kv-budgets" / "streaming-llm" / "tiny" / "doc" / "w8" / "L0H0.json"
    document = json.loads(path.read_text())
    document["operator"]["provenance"]["kv_policy_parameters"] = {"sinks": 1}
    path.write_text(json.dumps(document))
    code, out, err = run("kv-budgets", certs, "--policies", "streaming-llm", "--resume", "--json", "--quiet")
    assert code == 0, err
    record = next(r for r in json.loads(out)["operators"] if r["operator"] == NAMES[0])
    assert record["kept"] == []
    assert json.loads(path.read_text())["operator"]["provenance"]["kv_policy_parameters"] == {"sinks": 4}


@pytest.mark.parametrize("argv, words", [
    (["--eps", "0.1"], "hold the tolerances"),
    (["--policies", "quest"], "unknown policy"),
    (["--policies", "keep"], "needs --keep"),
    (["--sinks", "-1"], "--sinks"),
    (["--h2o-recent-share", "2"], "--h2o-recent-share"),
    (["--keep", "{keep_bad}"], "not a non-empty JSON array"),
    (["--keep", "{keep_twice}"], "listed twice"),
])
def test_refusals_are_one_line_and_write_nothing(folder, tmp_path, argv, words):
    certs = fresh(folder, tmp_path)
    (tmp_path / "bad.json").write_text('{"a": 1}')
    (tmp_path / "twice.json").write_text("[1, 2, 1]")
    argv = [a.replace("{keep_bad}", str(tmp_path / "bad.json")).replace("{keep_twice}", str(tmp_path / "twice.json"))
            for a in argv]
    before = sorted(p.name for p in certs.rglob("*"))
    code, out, err = run("kv-budgets", certs, *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in certs.rglob("*")) == before


def test_refusals_of_the_folder_and_of_existing_outputs(folder, tmp_path):
    code, _out, err = run("kv-budgets", tmp_path / "nowhere")
    assert code == 2 and "no such folder" in err
    certs = fresh(folder, tmp_path)
    assert run("kv-budgets", certs, "--quiet")[0] == 0
    code, _out, err = run("kv-budgets", certs)
    assert code == 2 and "--resume" in err and "--force" in err and len(err.strip().splitlines()) == 1
    (certs / "kv_budgets.json").unlink()
    code, _out, err = run("kv-budgets", certs)  # a policy certificate is there: refused too
    assert code == 2 and "exists" in err
    assert run("kv-budgets", certs, "--force", "--quiet")[0] == 0


def test_a_head_whose_certificate_does_not_verify_is_listed_as_failed(folder, tmp_path):
    certs = fresh(folder, tmp_path)
    path = certs / "tiny" / "doc" / "w8" / "L1H1.json"
    document = json.loads(path.read_text())
    document["brackets"][0]["lower"]["k"] = 8  # a false claim
    path.write_text(json.dumps(document))
    code, out, err = run("kv-budgets", certs, "--json", "--quiet")
    assert code == 6, err
    report = json.loads(out)
    assert [f["operator"] for f in report["failed"]] == [NAMES[1]]
    assert not (certs / "kv-budgets" / "h2o" / "tiny" / "doc" / "w8" / "L1H1.json").exists()


def test_help_defaults_agree_with_the_study():
    from softrank_cert.cli import kv_budgets_cmd
    from softrank_cert.studies.kv_budgets import policies

    assert kv_budgets_cmd.POLICY_NAMES == policies.POLICY_NAMES
    assert kv_budgets_cmd.DEFAULT_SINKS == policies.DEFAULT_SINKS
    assert kv_budgets_cmd.DEFAULT_RECENT_SHARE == policies.DEFAULT_RECENT_SHARE


def test_page_section_escapes_names(folder, tmp_path):
    from softrank_cert.studies.kv_budgets.page import kv_budgets_section

    certs = fresh(folder, tmp_path)
    assert run("kv-budgets", certs, "--quiet")[0] == 0
    report = json.loads((certs / "kv_budgets.json").read_text())
    for record in report["operators"]:
        record["model"] = "<script>\u202e"
    for row in report["layers"]:
        row["model"], row["document"] = "<script>\u202e", "a&b"
    html = kv_budgets_section(report, tmp_path / "page.html", {"<script>\u202e": certs / "x y.png"})
    assert "<script>" not in html and "&lt;script&gt;\\u202e" in html and "a&amp;b" in html
    assert 'src="certs/x%20y.png"' in html and html.startswith("<section")


def test_a_survey_folder_is_read_through_its_certs_folder(folder, tmp_path):
    survey = tmp_path / "survey"
    shutil.copytree(folder, survey / "certs")
    code, out, err = run("kv-budgets", survey, "--policies", "h2o", "--json", "--quiet")
    assert code == 0, err
    assert Path(json.loads(out)["folder"]) == survey / "certs"
    assert (survey / "certs" / "kv_budgets.json").is_file() and not (survey / "kv_budgets.json").exists()


def test_a_head_without_a_bracket_at_an_asked_tolerance_is_failed_not_guessed(folder, tmp_path):
    certs = fresh(folder, tmp_path)
    target = certs / "tiny" / "doc" / "w8" / "L1H1.json"
    target.unlink()
    code, _out, err = run("bracket", folder.parent / "tiny.npz", "--operator", NAMES[1], "--eps", "0.25",
                          "--out", target, "--budget-seconds", "1", "--quiet")
    assert code == 0, err
    code, out, err = run("kv-budgets", certs, "--json", "--quiet")
    assert code == 6, err
    assert json.loads(out)["failed"] == [{"operator": NAMES[1], "reason": f"{target}: holds no bracket at eps 0.5"}]
    assert run("kv-budgets", certs, "--eps", "0.25", "--force", "--quiet")[0] == 0


def test_keep_policy_and_a_position_beyond_the_keys(folder, tmp_path):
    certs = fresh(folder, tmp_path)
    keep = tmp_path / "keep.json"
    keep.write_text("[7, 0, 3, 5, 1, 2, 4, 6]")
    code, out, err = run("kv-budgets", certs, "--policies", "keep", "--keep", keep, "--json", "--quiet")
    assert code == 0, err
    budgets = [b for r in json.loads(out)["operators"] for b in r["budgets"]]
    assert budgets and all(b["policy"] == "keep" and b["budget"] is not None for b in budgets)
    keep.write_text("[7, 0, 30]")
    code, out, err = run("kv-budgets", certs, "--policies", "keep", "--keep", keep, "--json", "--quiet", "--force")
    assert code == 6, err
    assert all("kept position 30 is not an integer in [0, 8)" in f["reason"] for f in json.loads(out)["failed"])
