"""What ``softrank-verify``'s report shows (issue 26 point 2, issue 25 point 5) and what the
verifier imports (issue 21 item 7): summary line, file column, signer, one margin definition,
non-certificates skipped by their ``format`` (never by their file name), 80 columns."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd
from softrank_cert.kernel import Operator
from softrank_cert.plumbing.json_contract import validate_report

from conftest import (
    assert_one_line_error, build_document, false_witness_brackets, peaked_operator, run_verify, valid_brackets,
    write_certificate,
)

#: What checking a certificate never needs (issue 21 item 7).
HEAVY = ("scipy", "matplotlib", "highspy", "tokenizers", "torch", "transformers", "rich", "dask",
         "softrank_cert.solvers", "softrank_cert.studies", "softrank_cert.api", "softrank_cert.geometry")


def _imported(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_verifier_imports_only_what_checking_needs(tmp_path):
    """Importing the verifier's CLI, and verifying a certificate in-process, load no solver,
    study, plotting, LP, tokenizer or rich module."""
    assert _heavy(_imported("import softrank_cert.cli.verify")) == []
    op = peaked_operator()
    cert = write_certificate(tmp_path / "c.json", build_document(op, valid_brackets(op)))
    code = ("import sys\nfrom softrank_cert.cli.verify import main\nsys.stdout = open('/dev/null', 'w')\n"
            f"try:\n    main([{str(cert)!r}])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "sys.stdout = sys.__stdout__")
    assert _heavy(_imported(code)) == []


def test_version_imports_neither_numpy_nor_the_kernel():
    code = ("import sys\nfrom softrank_cert.cli.verify import build_parser\n"
            "try:\n    build_parser().parse_args(['--version'])\nexcept SystemExit:\n    pass")
    modules = _imported(code)
    assert not {"numpy", "flint", "jsonschema", "softrank_cert.kernel"} & modules


def test_written_out_constants_agree_with_their_sources():
    from softrank_cert.certio.certificate import FORMAT_NAME
    from softrank_cert.cli.verify import DEFAULT_MAX_PREC, KERNEL_CHOICES
    from softrank_cert.kernel import DEFAULT_MAX_PREC as KERNEL_DEFAULT
    from softrank_cert.plumbing.certificate_files import CERTIFICATE_FORMAT
    from softrank_cert.verification import KERNELS

    assert KERNEL_CHOICES == KERNELS and DEFAULT_MAX_PREC == KERNEL_DEFAULT and CERTIFICATE_FORMAT == FORMAT_NAME


# --------------------------------------------------------------------------------------
# Files that are not certificates: by their format, never by their name
# --------------------------------------------------------------------------------------

def test_false_certificate_named_like_a_campaign_manifest_is_rejected(tmp_path):
    """issue 25 point 5: a file called softrank-campaign.json is checked, not skipped by its name."""
    op = peaked_operator()
    folder = tmp_path / "certs"
    folder.mkdir()
    write_certificate(folder / "softrank-campaign.json", build_document(op, false_witness_brackets(op)))
    res = run_verify(folder)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "REJECTED" in res.stdout
    report = json.loads(run_verify("--json", folder).stdout)
    assert [f["status"] for f in report["files"]] == ["checked"] and report["summary"]["rejected"] == 1


def test_report_in_a_certificate_folder_is_skipped_not_an_error(tmp_path):
    """issue 26 point 2: a profile report (floats such as 40.0) beside a certificate is skipped,
    not an error "JSON number '40.0' is not an integer" (exit 2)."""
    op = peaked_operator()
    write_certificate(tmp_path / "cert.json", build_document(op, valid_brackets(op)))
    (tmp_path / "profile.json").write_text(json.dumps({"format": "softrank-profile-report", "seconds": 40.0}))
    (tmp_path / "softrank-campaign.json").write_text(json.dumps({"format": "softrank-campaign", "version": 1}))
    res = run_verify(tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stderr == ""
    assert "skipped: profile.json (softrank-profile-report: not a certificate)" in res.stdout
    assert "3 files (2 skipped), 4 claims: 4 verified" in res.stdout
    report = json.loads(run_verify("--json", tmp_path).stdout)
    validate_report(report)
    assert {f["path"].rsplit("/", 1)[-1]: f["status"] for f in report["files"]} == {
        "cert.json": "checked", "profile.json": "skipped", "softrank-campaign.json": "skipped"}
    assert report["summary"]["skipped"] == 2 and report["exit_code"] == 0


def test_only_non_certificates_is_exit_2(tmp_path):
    (tmp_path / "profile.json").write_text(json.dumps({"format": "softrank-profile-report", "seconds": 40.0}))
    res = run_verify(tmp_path)
    assert_one_line_error(res, code=2)
    assert "no certificate" in res.stderr and "profile.json (softrank-profile-report: not a certificate)" in res.stdout


def test_unknown_format_is_checked_as_a_certificate(tmp_path):
    """Only the project's own reports and manifests are skipped: a certificate whose format was
    damaged (tests/data/bad/wrong-format-name.json: "softrank-cert") stays invalid, exit 2."""
    from pathlib import Path

    bad = Path(__file__).parents[1] / "data" / "bad" / "wrong-format-name.json"
    res = run_verify(bad)
    assert_one_line_error(res, code=2)
    assert "softrank-certificate' was expected" in res.stderr


def test_every_format_the_project_writes_is_recognised():
    from softrank_cert.plumbing import campaign
    from softrank_cert.plumbing.certificate_files import is_certificate_format
    from softrank_cert.plumbing.json_contract import COMMANDS, ERROR_FORMAT, report_format

    for fmt in [report_format(c) for c in COMMANDS] + [ERROR_FORMAT, campaign.FORMAT]:
        assert not is_certificate_format(fmt), fmt
    for fmt in ("softrank-certificate", "softrank-cert", "softrank-report", "other", None):
        assert is_certificate_format(fmt), fmt


def test_duplicated_format_key_is_not_skipped(tmp_path):
    """A certificate cannot hide behind a second "format" key: the strict parser refuses it."""
    op = peaked_operator()
    text = json.dumps(build_document(op, false_witness_brackets(op)))
    sneaky = tmp_path / "sneaky.json"
    sneaky.write_text(text[:-1] + ', "format": "softrank-profile-report"}')
    res = run_verify(sneaky)
    assert_one_line_error(res, code=2)
    assert "duplicate" in res.stderr


# --------------------------------------------------------------------------------------
# Summary, files, signer, margins
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_files(tmp_path_factory, issuer_key):
    d = tmp_path_factory.mktemp("two")
    op = peaked_operator()
    signed = write_certificate(d / "signed.json", build_document(op, valid_brackets(op)), key=issuer_key)
    unsigned = write_certificate(d / "unsigned.json", build_document(op, false_witness_brackets(op)))
    return signed, unsigned


@pytest.mark.slow
def test_summary_file_column_and_signer(two_files, keys_dir):
    signed, unsigned = two_files
    res = run_verify(signed, unsigned)
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert "2 files, 6 claims: 5 verified, 1 rejected, 0 inconclusive, 0 not checked" in lines
    assert "exit 1: some claim rejected" in lines
    did = json.loads((keys_dir / "issuer.key.pub").read_text())["did"]
    short = f"did:key:{did[8:16]}...{did[-4:]}"
    assert any(line.startswith("signed.json") and f"{short} untrusted" in line for line in lines), res.stdout
    assert any(line.startswith("unsigned.json") and line.rstrip().endswith("unsigned") for line in lines)
    claim_rows = [line for line in lines if "VERIFIED" in line or "REJECTED" in line]
    assert [row.split()[0] for row in claim_rows] == ["signed.json"] * 4 + ["unsigned.json"] * 2  # file column
    trusted = run_verify(signed, "--trusted-keys", keys_dir / "issuer.key.pub")
    assert f"{short} trusted" in trusted.stdout
    assert "file" not in [row.split()[0] for row in trusted.stdout.splitlines()[3:] if row.split()]  # one file: no column


def test_relative_margin_is_one_definition_and_agrees_with_the_verdict(two_files):
    signed, unsigned = two_files
    report = json.loads(run_verify("--json", signed, unsigned).stdout)
    validate_report(report)
    for file in report["files"]:
        for claim in file["claims"]:
            rel, margin = claim["relative_margin"], claim["margin"]
            if margin is None:
                assert rel is None
                continue
            lo, hi = Fraction(rel["lower"]), Fraction(rel["upper"])
            if claim["verdict"] == "VERIFIED":
                assert lo >= 0 if claim["side"] == "upper" else lo > 0
            if claim["verdict"] == "REJECTED":
                assert hi < 0
            if claim["side"] == "upper":  # 1 - error/eps = (eps - error)/eps, outward-rounded both ways
                eps = Fraction(claim["eps"])
                for mine, kernels in ((lo, Fraction(margin["lower"]) / eps), (hi, Fraction(margin["upper"]) / eps)):
                    assert abs(mine - kernels) <= abs(kernels) * Fraction(1, 10**15)
    rejected = run_verify(unsigned).stdout
    assert "<= -" in rejected  # a REJECTED claim shows a certified negative upper bound


def test_trivial_lower_end_margin_is_relative_too(tmp_path):
    """k = 1 with no certificate on a probabilities operator: ||A|| > eps, margin 1 - eps/||A||."""
    A = np.array([[0.5, 0.25], [0.25, 0.5]])  # ||A|| = 3/4 (max row L1 norm), not exactly 1
    op = Operator("probabilities", {"A": A})
    path = write_certificate(tmp_path / "t.json", build_document(op, [
        Bracket("0.25", LowerEnd(1, "trivial"), UpperEnd(2, "identity"))]))
    claim = json.loads(run_verify("--json", path).stdout)["files"][0]["claims"][0]
    assert claim["verdict"] == "VERIFIED"
    rel = claim["relative_margin"]
    assert Fraction(rel["lower"]) <= Fraction(2, 3) <= Fraction(rel["upper"])  # 1 - (1/4)/(3/4)


def test_report_fits_80_columns(two_files, monkeypatch):
    import os

    signed, unsigned = two_files
    env = dict(os.environ, COLUMNS="80")
    out = subprocess.run([*__import__("conftest").VERIFY_CMD, str(signed), str(unsigned)], capture_output=True,
                         text=True, env=env).stdout
    assert max(len(line) for line in out.splitlines()) <= 80, out


def test_help_defines_the_margin_once():
    res = run_verify("--help")
    assert res.returncode == 0
    assert "1 - eps / t" in res.stdout and "1 - error / eps" in res.stdout


@pytest.mark.slow
def test_a_foreign_json_file_in_a_folder_is_skipped_not_invalid(tmp_path):
    """Issue 48: a ``package.json`` (or a key's .pub, a list) beside certificates failed the whole
    run (exit 2, a message about integers); such files found in a folder are skipped, naming what
    they are, while a file that claims to be a certificate (an ``operator`` or ``brackets`` field,
    a ``softrank`` format) and is broken, or a foreign file named on the command line, stays
    invalid."""
    op = peaked_operator()
    write_certificate(tmp_path / "cert.json", build_document(op, valid_brackets(op)))
    (tmp_path / "package.json").write_text(json.dumps({"name": "x", "version": 3, "size": 40.0}))
    (tmp_path / "tool.json").write_text(json.dumps({"format": "vega-lite", "width": 1.5}))
    (tmp_path / "list.json").write_text("[1, 2.5]")
    (tmp_path / "issuer.pub.json").write_text(json.dumps({"publicKeyMultibase": "z6Mk", "id": "did:key:z6Mk"}))
    res = run_verify(tmp_path)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stderr == ""
    assert 'skipped: package.json (a JSON object without "format": "softrank-certificate": not a' in res.stdout
    assert "skipped: tool.json (a 'vega-lite' document: not a certificate)" in res.stdout
    assert "skipped: list.json (a JSON list: not a certificate)" in res.stdout
    assert "5 files (4 skipped), 4 claims: 4 verified" in " ".join(res.stdout.split())
    report = json.loads(run_verify("--json", tmp_path).stdout)
    validate_report(report)
    assert {f["path"].rsplit("/", 1)[-1]: (f["status"], f.get("format")) for f in report["files"]} == {
        "cert.json": ("checked", None), "package.json": ("skipped", None), "tool.json": ("skipped", "vega-lite"),
        "list.json": ("skipped", None), "issuer.pub.json": ("skipped", None)}
    res = run_verify(tmp_path / "package.json")  # named: given as a certificate, so checked as one
    assert_one_line_error(res, code=2)
    assert 'package.json: is a JSON object without "format": "softrank-certificate", not a softrank certificate' \
        in res.stderr
    for broken in ({"operator": {"id": "x"}, "version": 1}, {"brackets": [], "format": 7},
                   {"format": "softrank-cert", "name": "x"}):
        (tmp_path / "broken.json").write_text(json.dumps(broken))
        res = run_verify(tmp_path)
        assert res.returncode == 2, (broken, res.stdout)
        assert "invalid: broken.json (exit 2" in res.stdout


def test_a_panel_given_to_the_verifier_is_named(tmp_path):
    """Issue 48: a panel given to softrank-verify said only "file is not UTF-8 text"."""
    panel = tmp_path / "panel.npz"
    np.savez(panel, **{"a/Q": np.eye(2), "a/K": np.eye(2)})
    res = run_verify(panel)
    assert_one_line_error(res, code=2)
    assert "panel.npz: is a .npz file (a panel or operator file), not a certificate: softrank bracket FILE" \
           in res.stderr
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    res = run_verify(gguf)
    assert_one_line_error(res, code=2)
    assert "is a GGUF model file, not a certificate: softrank panel --gguf FILE makes a panel from it" in res.stderr
