"""Issue 25: resume trusts nothing it reads back.  Each test replays one attack of the review
exactly -- tamper with a manifest, a state certificate or a cache, resume -- and requires the
report of an untampered run (times left out), or a clear one-line refusal.

Small operators (a four-head MiniLM width-8 panel) and no time budget, so that every run does
the same computation; the runs are in-process (``conftest.run_in_process``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_in_process as cli
from softrank_cert.errors import EXIT_INVALID_INPUT
from softrank_cert.plumbing.campaign import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def panel8(tmp_path_factory) -> Path:
    from softrank_cert.models import build_panel, write_panel

    arrays = build_panel("minilm", ROOT / "examples/data/apache2.txt", [8], layers=[0, 1], heads=[0, 5])
    return write_panel(tmp_path_factory.mktemp("panel8") / "w8.npz", arrays)


def _untimed(value):
    """A report without wall times (they differ run to run)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items()
                if k not in ("seconds", "solver_seconds", "created", "generated", "timing", "task_seconds")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _edit(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


# ----------------------------------------------------------------------------- bracket

def test_bracket_resume_refuses_a_planted_certificate_with_forged_provenance(panel8, tmp_path, capsys):
    """Issue 25 point 6: a valid but trivial certificate (ends [0, p]) with forged provenance,
    planted in the campaign folder, is not kept by ``bracket --resume``: provenance is compared."""
    from softrank_cert.certio.issuing import certificate_for
    from softrank_cert.certio.verified import VerifiedBracket, verify_lower_end, verify_upper_end
    from softrank_cert.plumbing.certificate_files import certificate_path
    from softrank_cert.util.operator_files import load_operators

    out = tmp_path / "certs"
    args = ("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out), "--budget-seconds", "inf", "--json")
    code, first, err = cli(capsys, *args)
    assert code == 0, err
    item = load_operators(panel8)[0]
    ends = (verify_lower_end(item.operator, "0.25", 0, None, None, "trivial"),
            verify_upper_end(item.operator, "0.25", item.operator.p, None, None, "identity"))
    trivial = certificate_for(item.name, item.operator, [VerifiedBracket("0.25", *ends)], {"source": "forged"})
    certificate_path(out, item.name).write_text(json.dumps(trivial))
    code, again, err = cli(capsys, *args, "--resume")
    assert code == 0, err
    assert _untimed(json.loads(again)["operators"]) == [
        {**entry, **({"resumed": True} if entry["operator"] != item.name else {})}
        for entry in _untimed(json.loads(first)["operators"])]
    assert json.loads(again)["campaign"]["computed"] == 1
    reason = json.loads((out / MANIFEST_NAME).read_text())["operators"][item.name]["reason"]
    assert reason is None  # recomputed (the note of the check is replaced by the computed entry)


def test_bracket_refuses_an_operator_named_like_the_manifest(tmp_path, capsys):
    """Issue 25 point 4: an operator named ``softrank-campaign`` had its certificate overwritten by
    the campaign manifest (exit 0, "2 certificates written"): refused with exit 2 before any work."""
    rng = np.random.default_rng(4)
    panel = tmp_path / "panel.npz"
    arrays = {}
    for name in ("softrank-campaign", "other"):
        arrays[f"{name}/Q"], arrays[f"{name}/K"] = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    np.savez(panel, **arrays)
    out = tmp_path / "certs"
    code, _out, err = cli(capsys, "bracket", str(panel), "--all", "--eps", "0.5", "--out", str(out))
    assert code == EXIT_INVALID_INPUT and err.count("\n") == 1 and "softrank-campaign" in err, err
    assert not out.exists() or not any(out.iterdir())


def test_bracket_resume_with_other_tolerances_is_refused(panel8, tmp_path, capsys):
    """Issue 26 point 3: resuming with other tolerances is refused, naming both, rather than
    leaving the certificates of the first ones in the folder."""
    out = tmp_path / "certs"
    assert cli(capsys, "bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out))[0] == 0
    before = {p: p.read_bytes() for p in out.rglob("*.json")}
    code, _out, err = cli(capsys, "bracket", str(panel8), "--all", "--eps", "0.5", "--out", str(out), "--resume")
    assert code == EXIT_INVALID_INPUT and "--eps 0.25" in err and "--eps 0.5" in err, err
    assert {p: p.read_bytes() for p in out.rglob("*.json")} == before


# ----------------------------------------------------------------------------- budgets

def _budgets(capsys, panel8: Path, out: Path, *extra: str) -> dict:
    code, stdout, err = cli(capsys, "budgets", str(panel8), "--budgets", "2,4,6", "--eps", "0.25", "--budget-seconds",
                            "inf", "--out", str(out), "--json", "--resume", *extra)
    assert code == 0, err
    return json.loads(stdout)


def test_budgets_resume_rederives_forged_classes(panel8, tmp_path, capsys):
    """Issue 25 point 1: the classes (and ends) of a done operator edited in R-campaign.json (say
    "budget 4 feasible" beside a verified lower end of 7) are not kept; they are re-derived from
    the re-verified certificate, with and without --certificates."""
    for certificates in (False, True):
        out = tmp_path / f"run{int(certificates)}" / "R.json"
        out.parent.mkdir()
        extra = ("--certificates", str(out.parent / "certs")) if certificates else ()
        first = _budgets(capsys, panel8, out, *extra)
        manifest = out.with_name("R-campaign.json")

        def forge(document: dict) -> None:
            for entry in document["operators"].values():
                entry["result"]["classes"] = {b: "feasible" for b in entry["result"]["classes"]}
                entry["result"]["lower"], entry["result"]["upper"] = 0, 1
        _edit(manifest, forge)
        again = _budgets(capsys, panel8, out, *extra)
        assert _untimed(again) == _untimed(first)
        assert json.loads(manifest.read_text())["runs"][-1]["skipped"] == 4


def test_budgets_resume_recomputes_when_the_stored_certificate_is_forged(panel8, tmp_path, capsys):
    """The certificate a budgets campaign keeps per operator is re-verified: one of another
    operator, or a missing one, makes the operator be computed again (same report)."""
    out = tmp_path / "R.json"
    first = _budgets(capsys, panel8, out)
    state = sorted((tmp_path / "R-campaign").rglob("*.json"))
    assert len(state) == 4
    state[0].write_text(state[1].read_text())
    state[2].unlink()
    again = _budgets(capsys, panel8, out)
    assert _untimed(again) == _untimed(first)
    run = json.loads(out.with_name("R-campaign.json").read_text())["runs"][-1]
    assert (run["skipped"], run["computed"]) == (2, 2)


def test_budgets_resume_with_other_budgets_is_refused(panel8, tmp_path, capsys):
    out = tmp_path / "R.json"
    _budgets(capsys, panel8, out)
    code, _stdout, err = cli(capsys, "budgets", str(panel8), "--budgets", "3", "--eps", "0.25", "--budget-seconds",
                             "inf", "--out", str(out), "--resume")
    assert code == EXIT_INVALID_INPUT and "--budgets 2,4,6" in err and "--budgets 3" in err, err


# ----------------------------------------------------------------------------- audit

def _audit(capsys, table: Path, panel8: Path, out: Path) -> dict:
    code, stdout, err = cli(capsys, "audit", str(table), "--operators", str(panel8), "--out", str(out),
                            "--budget-seconds", "inf", "--json", "--resume")
    assert code == 0, err
    return json.loads(stdout)


def test_audit_resume_rejudges_forged_rows(panel8, tmp_path, capsys):
    """Issue 25 point 2: a published row [20, 21] for a head whose verified bracket is small is
    not reported "confirmed" after its manifest entry is edited; the rows of a kept operator are
    judged again from its re-verified reproduction."""
    from softrank_cert.util.operator_files import operator_names

    names = operator_names(panel8)
    table = tmp_path / "table.jsonl"
    table.write_text("".join(json.dumps({"operator": name, "eps": "0.25", "lower": 7, "upper": 8}) + "\n"
                             for name in names))
    out = tmp_path / "audit.json"
    first = _audit(capsys, table, panel8, out)
    assert all(row["status"] != "confirmed" for row in first["rows"])
    manifest = tmp_path / "audit-campaign.json"

    def forge(document: dict) -> None:
        for entry in document["operators"].values():
            for row in entry["result"]["rows"]:
                row.update(status="confirmed", lower=7, upper=8, evidence={})
    _edit(manifest, forge)
    again = _audit(capsys, table, panel8, out)
    assert _untimed(again) == _untimed(first)
    assert json.loads(manifest.read_text())["runs"][-1]["skipped"] == 4


def test_audit_resume_recomputes_when_the_kept_reproduction_is_forged(panel8, tmp_path, capsys):
    """A reproduction certificate swapped for another operator's (or deleted) is not kept."""
    from softrank_cert.util.operator_files import operator_names

    table = tmp_path / "table.jsonl"
    table.write_text("".join(json.dumps({"operator": name, "eps": "0.25", "lower": 1, "upper": 2}) + "\n"
                             for name in operator_names(panel8)))
    out = tmp_path / "audit.json"
    first = _audit(capsys, table, panel8, out)
    state = sorted((tmp_path / "audit-campaign").rglob("*.json"))
    state[0].write_text(state[1].read_text())
    state[2].unlink()
    again = _audit(capsys, table, panel8, out)
    assert _untimed(again) == _untimed(first)
    run = json.loads((tmp_path / "audit-campaign.json").read_text())["runs"][-1]
    assert (run["skipped"], run["computed"]) == (2, 2)
