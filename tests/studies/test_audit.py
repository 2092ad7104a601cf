"""``softrank audit``: planted rows, supplied certificates, malformed input, exit codes, published set."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.studies.audit.table import STATUSES, audit_table, judge, parse_row, read_table
from softrank_cert.certio.signing import sign_certificate
from softrank_cert.certio.issuing import certificate_for
from softrank_cert.cli.main import build_parser
from softrank_cert.errors import InvalidInputError
from softrank_cert.kernel import Operator, verify_trivial_lower
from softrank_cert.util.files import write_json_atomic
from softrank_cert.util.operator_files import load_operators
from softrank_cert.plumbing.json_contract import validate_report
from softrank_cert.solvers.bracket import bracket_operator
from softrank_cert.verification import verify_certificate_file

ROOT = Path(__file__).resolve().parents[2]
KEY = ROOT / "examples" / "keys" / "demo-issuer.key"
PUBLISHED = ROOT / "certificates" / "published"
A, B = "toy/w16/a", "toy/w16/b"


def softrank(argv: list[str]) -> int:
    """Run ``softrank ARGV`` in-process; the exit code."""
    from softrank_cert.cli.common import run_main

    args = build_parser().parse_args(argv)
    with pytest.raises(SystemExit) as stop:
        run_main(f"softrank {args.command}", lambda: args.run(args))
    return int(stop.value.code)


def make_panel(path: Path) -> None:
    rng = np.random.default_rng(5)
    arrays = {}
    for name, scale in ((A, 2.0), (B, 1.5)):
        arrays[f"{name}/Q"] = rng.normal(size=(16, 8)) * scale
        arrays[f"{name}/K"] = rng.normal(size=(16, 8)) * scale
    np.savez(path, **arrays)


def write_certificate(path: Path, panel: Path, name: str, eps: list[str], *, signed: bool) -> dict:
    op = load_operators(panel, [name])[0].operator
    document = certificate_for(name, op, bracket_operator(op, eps, budget_seconds=20), None)
    if signed:
        document = sign_certificate(document, KEY)
    write_json_atomic(path, document)
    return document


def reencode(array_doc: dict, array: np.ndarray) -> None:
    raw = np.ascontiguousarray(array, dtype="<f8").tobytes()
    array_doc["data"] = base64.b64encode(raw).decode()
    array_doc["sha256"] = hashlib.sha256(raw).hexdigest()


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """One CLI audit of a planted table over a two-operator width-16 panel."""
    folder = tmp_path_factory.mktemp("audit")
    panel = folder / "panel.npz"
    make_panel(panel)
    good = write_certificate(folder / "certs" / "a.json", panel, A, ["0.25"], signed=True)
    b25 = good["brackets"][0]
    # tampered 1: one flipped byte in a signed certificate (hash and signature now fail)
    flipped = json.loads(json.dumps(good))
    data = bytearray(base64.b64decode(flipped["operator"]["arrays"]["Q"]["data"]))
    data[3] ^= 0x10
    flipped["operator"]["arrays"]["Q"]["data"] = base64.b64encode(bytes(data)).decode()
    write_json_atomic(folder / "certs" / "flipped.json", flipped)
    # tampered 2: unsigned, hashes recomputed, witness scaled: the kernel REJECTS the claim
    unsigned = write_certificate(folder / "certs" / "b.json", panel, B, ["0.25"], signed=False)
    forged = json.loads(json.dumps(unsigned))
    upper = forged["brackets"][0]["upper"]
    assert "U" in upper, "the test needs a non-trivial witness"
    shape = upper["U"]["shape"]
    u = np.frombuffer(base64.b64decode(upper["U"]["data"]), dtype="<f8").reshape(shape)
    reencode(upper["U"], u * 3.0)
    write_json_atomic(folder / "certs" / "forged.json", forged)
    p = 16
    rows = [
        {"operator": A, "eps": "0.5", "lower": p, "upper": p},                 # 1 lower far above the truth
        {"operator": A, "eps": "0.25", "lower": 1, "upper": p},                # 2 honest and loose
        {"operator": B, "eps": "0.1", "lower": 0, "upper": 0},                 # 3 upper end false (r >= 1)
        {"operator": "toy/w16/nope", "eps": "0.25", "lower": 1, "upper": 3},   # 4 unknown operator
        {"operator": A, "eps": 0.25, "lower": 1, "upper": 3},                  # 5 eps not a string
        "this line is not JSON",                                               # 6
        {"operator": A, "eps": "0.25", "lower": b25["lower"]["k"], "upper": b25["upper"]["r"],
         "certificate": "certs/a.json"},                                       # 7 valid signed certificate
        {"operator": A, "eps": "0.25", "lower": 1, "upper": p, "certificate": "certs/flipped.json"},  # 8
        {"operator": B, "eps": "0.25", "lower": 1, "upper": p, "certificate": "certs/forged.json"},   # 9
        {"operator": B, "eps": "0.25", "lower": 1, "upper": p, "certificate": "certs/a.json"},       # 10 other op
        {"operator": A, "eps": "0.3", "lower": 1, "upper": p, "certificate": "certs/a.json"},        # 11 no such eps
        {"operator": A, "eps": "0.25", "lower": 1, "upper": p, "certificate": "certs/missing.json"},  # 12
    ]
    table = folder / "table.jsonl"
    table.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    out = folder / "out" / "report.json"
    code = softrank(["audit", str(table), "--operators", str(panel), "--out", str(out), "--plot",
                     str(folder / "out" / "ratios.png"), "--budget-seconds", "20", "--key", str(KEY)])
    report = json.loads(out.read_text())
    return {"code": code, "report": report, "rows": {r["line"]: r for r in report["rows"]}, "out": out,
            "folder": folder, "panel": panel}


def test_audit_runs_with_exit_zero_and_writes_report_and_plot(audited):
    assert audited["code"] == 0
    assert (audited["out"].parent / "ratios.png").stat().st_size > 1000
    summary = audited["report"]["summary"]
    assert summary["rows"] == 12 and set(summary["statuses"]) == set(STATUSES)
    assert all(r["status"] in STATUSES for r in audited["report"]["rows"])
    validate_report(audited["report"])  # the report contract (certificates/schema/softrank-audit-report-v1)


def test_lower_end_far_above_truth_is_refuted_by_a_verified_witness(audited):
    row = audited["rows"][1]
    assert row["status"] == "refuted"
    (refute,) = row["evidence"]["refutes"]
    assert refute["end"] == "lower" and refute["kind"] == "upper-witness" and refute["verdict"] == "VERIFIED"
    assert refute["rank"] < 16 and refute["rank"] == row["upper"] and float(refute["margin"]["lower"]) >= 0
    evidence = audited["out"].parent / refute["certificate"]
    report = verify_certificate_file(evidence, require_signature=True)  # signed with --key
    assert all(v.status.value == "VERIFIED" for v in report.verdicts)
    assert any(v.side == "upper" and v.rank == refute["rank"] and v.eps == "0.5" for v in report.verdicts)


def test_upper_end_below_a_verified_lower_certificate_is_refuted(audited):
    row = audited["rows"][3]
    assert row["status"] == "refuted" and row["lower"] >= 1
    assert [r["end"] for r in row["evidence"]["refutes"]] == ["upper"]


def test_honest_loose_bracket_is_confirmed_or_tightened(audited):
    row = audited["rows"][2]
    assert row["status"] in ("confirmed", "tightened")
    assert 1 <= row["lower"] <= row["upper"] <= 16 and row["evidence"]["refutes"] == []


def test_bad_rows_get_errors_and_the_rest_still_runs(audited):
    rows = audited["rows"]
    assert rows[4]["status"] == "error" and "not in the panel" in rows[4]["error"]
    assert rows[5]["status"] == "error" and "exact decimal string" in rows[5]["error"]
    assert rows[6]["status"] == "error" and "line 6" in rows[6]["error"]


def test_supplied_certificates(audited):
    rows = audited["rows"]
    assert rows[7]["status"] == "confirmed" and rows[7]["evidence"]["signer"].startswith("did:key:")
    for line, words in ((8, "sha-256"), (9, "rejected"), (10, "another operator"), (11, "no bracket at eps"),
                        (12, "cannot read")):
        assert rows[line]["status"] == "invalid-certificate", line
        assert words in rows[line]["error"].lower(), (line, rows[line]["error"])
        assert rows[line]["lower"] is None and rows[line]["upper"] is None  # never replaced by a reproduction


def test_cli_exit_codes_and_one_line_errors(tmp_path, capsys):
    panel = tmp_path / "panel.npz"
    make_panel(panel)
    out = str(tmp_path / "r.json")
    assert softrank(["audit", str(tmp_path / "missing.jsonl"), "--operators", str(panel), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.jsonl" in err and "no such file" in err
    table = tmp_path / "t.jsonl"
    table.write_text("garbage\n\n[1, 2]\n")
    assert softrank(["audit", str(table), "--operators", str(panel), "--out", out]) == 2
    assert "JSON" in capsys.readouterr().err
    table.write_text(json.dumps({"operator": A, "eps": "0.25", "lower": 1, "upper": 16}) + "\n")
    assert softrank(["audit", str(table), "--operators", str(tmp_path / "none.npz"), "--out", out]) == 2
    assert "none.npz" in capsys.readouterr().err
    assert not Path(out).exists()


def test_judge_never_refutes_from_unverified_or_equal_ends(tmp_path):
    row = parse_row(1, json.dumps({"operator": "x", "eps": "0.5", "lower": 1, "upper": 4}))
    op = Operator(kind="scores", arrays={"S": np.zeros((3, 3))})
    one = verify_trivial_lower(op, "0.5", 1)
    assert judge(row, one, None) == ("reproduced", [])
    assert judge(row, None, None) == ("unresolved", [])
    with pytest.raises(InvalidInputError):
        table = tmp_path / "empty.jsonl"
        table.write_text("\n\n")
        read_table(table)


def test_published_set_is_small_and_a_subset_audits_confirmed(tmp_path):
    table, panel = PUBLISHED / "brackets.jsonl", PUBLISHED / "minilm-apache2-w32.npz"
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    assert len(rows) == 216 and len({r["operator"] for r in rows}) == 72
    assert sum(p.stat().st_size for p in (PUBLISHED / "certs").rglob("*.json")) < 15_000_000
    assert all((PUBLISHED / r["certificate"]).is_file() for r in rows)
    subset = [r for r in rows if r["operator"].endswith(("/L0H3", "/L5H7"))]
    small = tmp_path / "subset.jsonl"
    for r in subset:  # a table names certificates inside its own folder only
        (tmp_path / r["certificate"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PUBLISHED / r["certificate"], tmp_path / r["certificate"])
    small.write_text("".join(json.dumps(r) + "\n" for r in subset))
    result = audit_table(small, panel, evidence_dir=tmp_path / "ev", trusted_keys=None)
    assert [r.status for r in result.rows] == ["confirmed"] * 6
    assert all(r.evidence["signer"] for r in result.rows) and not result.evidence_files
