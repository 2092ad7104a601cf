"""The command-line contract (docs/design.md section 4) of ``softrank-verify``, ``softrank keygen``
and ``softrank sign``, through real subprocesses and in-process.

Exit codes: 0 all VERIFIED; 1 some claim REJECTED; 2 invalid input (one line on stderr,
never a traceback); 3 nothing rejected but some claim INCONCLUSIVE; 4 internal invariant.
"""

from __future__ import annotations

import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd
from softrank_cert.errors import InternalInvariantError, InvalidInputError, SignatureError
from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.verification import check_consistency, verify_certificate_file

from conftest import (
    assert_one_line_error,
    build_document,
    false_witness_brackets,
    peaked_operator,
    run_softrank,
    run_verify,
    transcendental_edge,
    valid_brackets,
    write_certificate,
)
from tests.oracle import decimal_above


@pytest.fixture(scope="module")
def certs(tmp_path_factory, issuer_key):
    """A set of certificate files with known outcomes."""
    d = tmp_path_factory.mktemp("certs")
    op = peaked_operator()
    out = {}
    out["valid"] = write_certificate(d / "valid.json", build_document(op, valid_brackets(op)))
    out["valid_signed"] = write_certificate(d / "valid_signed.json", build_document(op, valid_brackets(op)), key=issuer_key)
    out["false_witness"] = write_certificate(d / "false_witness.json", build_document(op, false_witness_brackets(op)))
    # INCONCLUSIVE: X A Y exactly singular (no precision can prove it invertible)
    singular = Operator("probabilities", {"A": np.full((2, 2), 0.5)})
    out["singular"] = write_certificate(d / "singular.json", build_document(singular, [
        Bracket("0.001", LowerEnd(2, "selection", np.eye(2), np.eye(2)), UpperEnd(2, "identity"))]))
    # ||A - B|| == eps exactly with equal scores: decided exactly (the shift makes exp(0) exact)
    edge = Operator("qk", {"Q": np.array([[1.0, 0.0]]), "K": np.array([[1.0, 0.0], [1.0, 0.0]])})
    out["edge"] = write_certificate(d / "edge.json", build_document(edge, [
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(1, "constant", np.array([[0.25]]), np.array([[1.0], [1.0]])))]))
    # INCONCLUSIVE at 64 bits, VERIFIED at 128: eps exceeds a transcendental error by <= 1e-30
    near, U, W, error = transcendental_edge()
    out["near_edge"] = write_certificate(d / "near_edge.json", build_document(near, [
        Bracket(decimal_above(error, 30), LowerEnd(1, "trivial"), UpperEnd(1, "constant", U, W))]))
    # only exact (trivial) verdicts: no ball arithmetic at all
    out["trivial"] = write_certificate(d / "trivial.json", build_document(op, [
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(3, "identity"))]))
    # causal qk with decimal beta and m < N, nontrivial ends on both sides
    Q = np.array([[1.0, 0.5], [0.0, 2.0]]); K = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    causal = Operator("qk", {"Q": Q, "K": K}, beta="0.75", mask="causal")
    out["causal"] = write_certificate(d / "causal.json", build_document(causal, [
        Bracket("0.0625", LowerEnd(1, "ones", np.array([[1.0, 0.0]]), np.ones((3, 1))),
                UpperEnd(2, "identity"))]))
    return out


# --------------------------------------------------------------------------------------
# Exit codes 0 / 1 / 3 and their output
# --------------------------------------------------------------------------------------

def test_exit_0_all_verified(certs):
    res = run_verify(certs["valid"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("VERIFIED") == 4
    assert "test/op-0" in res.stdout
    assert res.stderr.strip() == ""


def test_exit_0_json_report(certs):
    res = run_verify("--json", certs["valid"], certs["causal"])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["exit_code"] == 0
    claims = report["files"][0]["claims"]
    assert [c["verdict"] for c in claims] == ["VERIFIED"] * 4
    assert [c["claim"] for c in claims] == ["r_eps >= 3", "r_eps <= 3", "r_eps >= 1", "r_eps <= 3"]
    lower = claims[0]
    # bounds are decimal strings rounded outward; the lower threshold t = 0.99934664...
    assert float(lower["value"]["lower"]) <= 0.9993466411208566 <= float(lower["value"]["upper"])
    assert float(lower["margin"]["lower"]) > 0
    assert report["files"][1]["claims"][0]["verdict"] == "VERIFIED"


def test_exit_1_false_witness(certs):
    res = run_verify(certs["false_witness"])
    assert res.returncode == 1, res.stderr
    assert "REJECTED" in res.stdout
    res = run_verify("--json", certs["false_witness"])
    report = json.loads(res.stdout)
    statuses = [c["verdict"] for c in report["files"][0]["claims"]]
    assert statuses == ["VERIFIED", "REJECTED"]
    margin = report["files"][0]["claims"][1]["margin"]
    assert float(margin["upper"]) < 0  # eps - error is provably negative


def test_exit_3_inconclusive_singular_core(certs):
    res = run_verify(certs["singular"])
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert "INCONCLUSIVE" in res.stdout


def test_exit_3_inconclusive_at_max_prec_64(certs):
    res = run_verify("--max-prec", "64", certs["near_edge"])
    assert res.returncode == 3, (res.stdout, res.stderr)
    report = json.loads(run_verify("--json", "--max-prec", "64", certs["near_edge"]).stdout)
    up = report["files"][0]["claims"][1]
    assert up["verdict"] == "INCONCLUSIVE" and up["precision_bits"] == 64
    # decided once the precision suffices, and the exact equality case is proved outright
    assert run_verify(certs["near_edge"]).returncode == 0
    assert run_verify("--max-prec", "64", certs["edge"]).returncode == 0


def test_most_severe_code_wins(certs, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{", "utf-8")
    cases = [
        ([certs["valid"], certs["false_witness"]], 1),
        ([certs["singular"], certs["valid"]], 3),
        ([certs["singular"], certs["false_witness"]], 1),
        ([certs["false_witness"], bad], 2),
        ([bad, certs["valid"]], 2),
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: run_verify(*c[0]), cases))
    for (files, code), res in zip(cases, results):
        assert res.returncode == code, (files, res.stderr)
        assert "Traceback" not in res.stderr


def test_exact_kernel_agrees_on_exit_codes(certs):
    """--kernel exact (the independent exact-rational checker): same exit codes on the same files."""
    # edge.json's claim ||A - B|| <= eps holds with equality: VERIFIED (0) and INCONCLUSIVE (3)
    # are both honest answers there; REJECTED would be a false refutation.
    cases = [(certs["valid"], {0}), (certs["false_witness"], {1}), (certs["singular"], {3}), (certs["edge"], {0, 3}),
             (certs["causal"], {0})]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: run_verify("--kernel", "exact", c[0]), cases))
    for (path, codes), res in zip(cases, results):
        assert res.returncode in codes, (path.name, res.stdout[-1500:], res.stderr)
    assert_one_line_error(run_verify("--kernel", "flint", certs["valid"]), code=2)


def test_in_process_reports(certs):
    assert verify_certificate_file(certs["valid"]).exit_code == 0
    assert verify_certificate_file(certs["false_witness"]).exit_code == 1
    r = verify_certificate_file(certs["singular"])
    assert r.exit_code == 3 and r.verdicts[0].status is Status.INCONCLUSIVE
    r = verify_certificate_file(certs["near_edge"], max_prec=64)
    assert r.exit_code == 3 and r.verdicts[1].precision == 64
    r = verify_certificate_file(certs["near_edge"])
    assert r.exit_code == 0 and r.verdicts[1].precision == 128
    r = verify_certificate_file(certs["valid_signed"], require_signature=True)
    assert r.exit_code == 0 and r.signer.startswith("did:key:z6Mk")


def test_consistency_check_fails_loudly():
    """Step 6: a verified lower end above a verified upper end at the same or a larger eps is
    a checker bug (exit 4).  Real verdicts from two different operators simulate it."""
    near_identity = peaked_operator()
    lo = verify_lower(near_identity, "0.25", 3, np.eye(3), np.eye(3))
    flat = Operator("scores", {"S": np.zeros((3, 3))})
    up = verify_upper(flat, "0.25", 1, np.ones((3, 1)), np.full((3, 1), 1 / 3))
    assert lo.status is Status.VERIFIED and up.status is Status.VERIFIED
    with pytest.raises(InternalInvariantError) as info:
        check_consistency((lo, up), "mixed")
    assert info.value.exit_code == 4
    up_larger_eps = verify_upper(flat, "0.5", 1, np.ones((3, 1)), np.full((3, 1), 1 / 3))
    check_consistency((lo, up_larger_eps), "fine")  # r_0.5 <= 1 and r_0.25 >= 3 are compatible


# --------------------------------------------------------------------------------------
# Exit 2: invalid invocations and inputs
# --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_invalid_invocations(certs, tmp_path):
    cases = [
        [tmp_path / "does-not-exist.json"],
        [tmp_path],  # a directory
        ["--max-prec", "10", certs["valid"]],
        ["--max-prec", "100000", certs["valid"]],
        ["--max-prec", "abc", certs["valid"]],
        [],
        ["--no-such-option", certs["valid"]],
        ["--trusted-keys", tmp_path / "missing.pub", certs["valid_signed"]],
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda a: run_verify(*a), cases))
    for res in results:
        assert_one_line_error(res, code=2)


@pytest.mark.slow
def test_trivial_ends_are_checked_by_trivial(certs):
    """A trivial end is decided by an exact comparison: "checked by" trivial (not "exact", which
    would read as --kernel exact; that kernel's verdicts say "rational")."""
    report = json.loads(run_verify("--json", certs["trivial"]).stdout)
    assert [c["checked_by"] for c in report["files"][0]["claims"]] == ["trivial", "trivial"]
    rows = [line for line in run_verify(certs["trivial"]).stdout.splitlines() if "VERIFIED" in line]
    assert [row.split()[-1] for row in rows] == ["trivial", "trivial"]  # the last column: "by"
    report = json.loads(run_verify("--json", "--kernel", "exact", certs["trivial"]).stdout)
    assert {c["checked_by"] for c in report["files"][0]["claims"]} == {"rational"}


def test_invalid_max_prec_refused_even_for_trivial_certificates(certs):
    assert_one_line_error(run_verify("--max-prec", "10", certs["trivial"]), code=2)


def test_signature_options(certs, keys_dir):
    issuer_pub, other_pub = keys_dir / "issuer.key.pub", keys_dir / "other.key.pub"
    cases = [
        (["--require-signature", certs["valid"]], 2),              # missing proof
        (["--trusted-keys", issuer_pub, certs["valid"]], 2),       # unsigned but trust required
        (["--trusted-keys", other_pub, certs["valid_signed"]], 2),  # untrusted signer
        (["--trusted-keys", issuer_pub, "--require-signature", certs["valid_signed"]], 0),
        (["--require-signature", certs["valid_signed"]], 0),
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: run_verify(*c[0]), cases))
    for (args, code), res in zip(cases, results):
        if code == 2:
            assert_one_line_error(res, code=2)
        else:
            assert res.returncode == 0, (args, res.stderr)
    with pytest.raises(SignatureError):
        verify_certificate_file(certs["valid"], require_signature=True)


@pytest.mark.slow
def test_trusted_keys_file_formats(certs, keys_dir, tmp_path):
    did = json.loads((keys_dir / "issuer.key.pub").read_text())["did"]
    lines = tmp_path / "trusted.txt"
    lines.write_text(f"# issuers\n\n{did}\n", "utf-8")
    as_list = tmp_path / "trusted.json"
    as_list.write_text(json.dumps([did]), "utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nobody\n", "utf-8")
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("did:key:not-a-key\n", "utf-8")
    cases = [([lines], 0), ([as_list], 0), ([empty], 2), ([garbage], 2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: run_verify("--trusted-keys", c[0][0], certs["valid_signed"]), cases))
    for (_args, code), res in zip(cases, results):
        if code:
            assert_one_line_error(res, code=code)
        else:
            assert res.returncode == 0, res.stderr


# --------------------------------------------------------------------------------------
# Output robustness: operator ids and methods are data, not markup
# --------------------------------------------------------------------------------------

def test_markup_in_operator_id_is_printed_literally(tmp_path):
    op = peaked_operator()
    path = write_certificate(tmp_path / "markup.json", build_document(op, valid_brackets(op), operator_id="[/]"))
    res = run_verify(path)
    assert res.returncode == 0, res.stderr
    assert "[/]" in res.stdout


def test_control_characters_in_operator_id_are_not_emitted(tmp_path):
    op = peaked_operator()
    ident = "op\x1b[2J\x1b[1;1Hall claims VERIFIED\x07"
    path = write_certificate(tmp_path / "ansi.json", build_document(op, false_witness_brackets(op), operator_id=ident))
    res = run_verify(path)  # stdout is a pipe: rich itself emits no escape codes
    assert res.returncode == 1
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout


def test_markup_like_method_does_not_change_verdicts(tmp_path):
    """A method string that looks like a verdict must not alter the exit code or the verdict column."""
    op = peaked_operator()
    b = false_witness_brackets(op)[0]
    b = Bracket(b.eps, b.lower, UpperEnd(b.upper.r, "[green]VERIFIED[/green]", b.upper.U, b.upper.W))
    path = write_certificate(tmp_path / "spoof.json", build_document(op, [b]))
    res = run_verify("--json", path)
    assert res.returncode == 1
    claims = json.loads(res.stdout)["files"][0]["claims"]
    assert claims[1]["verdict"] == "REJECTED" and claims[1]["method"] == "[green]VERIFIED[/green]"


# --------------------------------------------------------------------------------------
# Resource use: a tiny certificate must not take minutes
# --------------------------------------------------------------------------------------

def test_tiny_certificate_with_extreme_margin_is_rejected_at_the_first_precision(tmp_path):
    """S = [[0, -1e6]]; a 1x1 lower certificate selecting A_01 ~ exp(-1e6): REJECTED (exit 1),
    decided at the first precision (the --json report's precision), not by an exact exp(-1e6).
    The cost itself is not timed here (busy machines): tests/kernel/test_kernel.py bounds the
    size of the rationals, benchmarks/bench_verify.py measures seconds."""
    op = Operator("scores", {"S": np.array([[0.0, -1e6]])})
    path = write_certificate(tmp_path / "extreme.json", build_document(op, [
        Bracket("0.5", LowerEnd(1, "selection", np.array([[1.0]]), np.array([[0.0], [1.0]])), UpperEnd(1, "identity"))]))
    res = run_verify(path, "--json")
    assert res.returncode == 1, res.stderr
    claims = json.loads(res.stdout)["files"][0]["claims"]
    lower = [c for c in claims if c["side"] == "lower"]
    assert lower and lower[0]["verdict"] == "REJECTED" and lower[0]["precision_bits"] <= 64, lower


# --------------------------------------------------------------------------------------
# softrank keygen / sign
# --------------------------------------------------------------------------------------

def test_keygen_modes_and_refusal(tmp_path):
    key = tmp_path / "k.key"
    res = run_softrank("keygen", "--out", key)
    assert res.returncode == 0, res.stderr
    assert "did:key:z6Mk" in res.stdout
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    pub = Path(f"{key}.pub")
    assert stat.S_IMODE(os.stat(pub).st_mode) & 0o077 in (0o044, 0o004, 0o040, 0o000)
    record = json.loads(pub.read_text())
    assert "privateKeyMultibase" not in record and record["did"].startswith("did:key:z6Mk")
    before = key.read_bytes(), pub.read_bytes()
    again = run_softrank("keygen", "--out", key)
    assert_one_line_error(again, code=2)
    assert (key.read_bytes(), pub.read_bytes()) == before
    # only the .pub exists: still refused, and no private key is left behind
    lone = tmp_path / "lone.key"
    Path(f"{lone}.pub").write_text("{}", "utf-8")
    assert_one_line_error(run_softrank("keygen", "--out", lone), code=2)
    assert not lone.exists()


@pytest.mark.slow
def test_sign_round_trip(tmp_path, issuer_key, other_key, keys_dir):
    op = peaked_operator()
    cert = write_certificate(tmp_path / "c.json", build_document(op, valid_brackets(op)))
    res = run_softrank("sign", cert, "--key", issuer_key)
    assert res.returncode == 0, res.stderr
    did = json.loads((keys_dir / "issuer.key.pub").read_text())["did"]
    assert did in res.stdout
    ok = run_verify(cert, "--require-signature", "--trusted-keys", keys_dir / "issuer.key.pub")
    assert ok.returncode == 0, ok.stderr
    # re-sign with another key into a new file: the old proof is replaced, not kept
    out = tmp_path / "c2.json"
    assert run_softrank("sign", cert, "--key", other_key, "--out", out).returncode == 0
    doc = json.loads(out.read_text())
    assert doc["proof"]["verificationMethod"].startswith(json.loads((keys_dir / "other.key.pub").read_text())["did"])
    assert_one_line_error(run_verify(out, "--trusted-keys", keys_dir / "issuer.key.pub"), code=2)
    assert verify_certificate_file(out, require_signature=True).exit_code == 0
    # sign refuses invalid certificates and bad key files
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "softrank-certificate"}', "utf-8")
    assert_one_line_error(run_softrank("sign", bad, "--key", issuer_key), code=2)
    assert_one_line_error(run_softrank("sign", cert, "--key", keys_dir / "issuer.key.pub"), code=2)
    assert_one_line_error(run_softrank("sign", cert, "--key", tmp_path / "missing.key"), code=2)


def _bump_lower(document: dict, index: int, row: str) -> dict:
    """``document`` with the lower end of bracket ``index`` bumped from k to k + 1: one more row
    of X and column of Y (``row`` "repeat": a copy of the last one; "unit": e_1), SHA-256
    recomputed, so that it decodes and only the kernel can tell the claim is not proved."""
    import base64
    import hashlib

    def decode(array: dict) -> np.ndarray:
        return np.frombuffer(base64.b64decode(array["data"]), "<f8").reshape(array["shape"])

    def encode(array: dict, value: np.ndarray) -> None:
        raw = np.ascontiguousarray(value, "<f8").tobytes()
        array.update(data=base64.b64encode(raw).decode("ascii"), shape=list(value.shape),
                     sha256=hashlib.sha256(raw).hexdigest())

    document = json.loads(json.dumps(document))
    lower = document["brackets"][index]["lower"]
    X, Y = decode(lower["X"]), decode(lower["Y"])
    extra = X[-1:] if row == "repeat" else np.eye(1, X.shape[1])
    encode(lower["X"], np.vstack([X, extra]))
    encode(lower["Y"], np.hstack([Y, extra.T if row == "unit" else Y[:, -1:]]))
    lower["k"] += 1
    return document


@pytest.mark.slow
@pytest.mark.parametrize("row, verdict, code", [("unit", "REJECTED", 1), ("repeat", "INCONCLUSIVE", 3)])
def test_sign_refuses_a_lower_end_bumped_by_one(tmp_path, issuer_key, row, verdict, code):
    """A certificate that decodes (schema, hashes, operator) but claims a lower end one higher
    than its arrays prove: softrank sign re-verifies every claim as softrank-verify does and
    refuses, with softrank-verify's exit code (1 REJECTED, 3 INCONCLUSIVE) and one line naming the
    first claim that is not VERIFIED; nothing is written.  The example's old proof no longer
    matches, which is not the reason: the claims are."""
    from conftest import TESTS

    original = json.loads((TESTS.parent / "certificates" / "examples" / "random-qk.json").read_text())
    forged = _bump_lower(original, 2, row)
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps({k: v for k, v in forged.items() if k != "proof"}))
    report = verify_certificate_file(unsigned)  # decodes; the kernel does not verify the bumped claim
    assert report.exit_code == code and [v.status.value for v in report.verdicts].count(verdict) == 1
    claim = f"claim r_eps >= {original['brackets'][2]['lower']['k'] + 1} (lower end) at eps 0.5 is {verdict}"
    for cert in (unsigned, tmp_path / "signed-before.json"):
        if cert.name == "signed-before.json":
            cert.write_text(json.dumps(forged))  # still carries the example's (now broken) proof
        before = cert.read_bytes()
        for out in ((), ("--out", str(tmp_path / "signed.json"))):
            res = run_softrank("sign", cert, "--key", issuer_key, *out)
            assert_one_line_error(res, code=code)
            assert claim in res.stderr and "refusing to sign" in res.stderr, res.stderr
            assert cert.read_bytes() == before and not (tmp_path / "signed.json").exists()


def test_sign_refuses_a_false_witness_and_signs_a_good_certificate(tmp_path, issuer_key, other_key, keys_dir, capsys):
    """A REJECTED upper end (exit 1, nothing written), then a certificate whose claims all verify
    is signed -- also over an old proof that does not verify (it is replaced: the claims are what
    is signed), and over one made by another key."""
    from conftest import run_in_process

    op = peaked_operator()
    false = write_certificate(tmp_path / "false.json", build_document(op, false_witness_brackets(op)))
    before = false.read_bytes()
    code, _out, err = run_in_process(capsys, "sign", str(false), "--key", str(issuer_key))
    assert code == 1 and err.count("\n") == 1, err
    assert "claim r_eps <= 1 (upper end) at eps 0.25 is REJECTED" in err
    assert false.read_bytes() == before
    # a good certificate, signed by another key, its proof then broken: signed afresh
    good = write_certificate(tmp_path / "good.json", build_document(op, valid_brackets(op)), key=other_key)
    document = json.loads(good.read_text())
    document["proof"]["proofValue"] = document["proof"]["proofValue"][:-2] + "11"
    good.write_text(json.dumps(document))
    with pytest.raises(SignatureError):
        verify_certificate_file(good)
    code, _out, err = run_in_process(capsys, "sign", str(good), "--key", str(issuer_key))
    assert code == 0, err
    trusted = frozenset({json.loads((keys_dir / "issuer.key.pub").read_text())["did"]})
    report = verify_certificate_file(good, require_signature=True, trusted_keys=trusted)
    assert report.ok and report.signer.startswith(next(iter(trusted)))
    # --kernel / --max-prec are softrank-verify's: a bad --max-prec is refused before any work
    code, _out, err = run_in_process(capsys, "sign", str(good), "--key", str(issuer_key), "--max-prec", "10")
    assert code == 2 and "--max-prec" in err
    code, _out, err = run_in_process(capsys, "sign", str(good), "--key", str(other_key), "--kernel", "exact",
                                     "--out", str(tmp_path / "exact.json"))
    assert code == 0 and verify_certificate_file(tmp_path / "exact.json", kernel="exact").ok, err


def test_signed_then_edited_by_hand_is_refused(tmp_path, issuer_key):
    op = peaked_operator()
    cert = write_certificate(tmp_path / "c.json", build_document(op, valid_brackets(op)), key=issuer_key)
    doc = json.loads(cert.read_text())
    doc["brackets"][1]["eps"] = "0.75"  # a weaker claim, still true: the signature must still fail
    cert.write_text(json.dumps(doc), "utf-8")
    assert_one_line_error(run_verify(cert), code=2)
    with pytest.raises(InvalidInputError):
        verify_certificate_file(cert)
