"""The Python API at the package top level (issue item 1) and the progress lines of item 3.

* the tutorial's notebook example (docs/tutorial.md) runs as it stands;
* reprs are compact (no arrays), constructors from arrays, loaders and tolerances behave;
* ``verify`` gives the same verdict pairs for a path, the bytes and the parsed dict, refuses
  what a file would be refused for, and writes no temporary file (nor does the audit);
* ``bracket(...).save()`` then ``verify()`` round-trips, signed or not;
* the documented default budget matches the driver; ``softrank bracket`` prints one line per
  finished operator when stderr is not a terminal.

Operators are small (at most 32 x 32, budgets of a second or two): the file runs in ~20 s.
"""

from __future__ import annotations

import json
import re
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import softrank_cert as sc
from softrank_cert.errors import CertificateFormatError, InvalidInputError, InvalidOperatorError, InvalidToleranceError

from conftest import run_softrank

ROOT = Path(__file__).resolve().parents[1]
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
HEAD = "minilm/apache2/w32/L5H2"


def verdict_key(v) -> tuple:
    return (v.status, v.side, v.rank, v.eps, v.method, v.margin, v.value, v.engine)


def pair_keys(report) -> list[tuple]:
    return [(verdict_key(lo), verdict_key(up)) for lo, up in report.pairs]


@pytest.fixture(scope="module")
def small_op():
    rng = np.random.default_rng(7)
    return sc.Operator.from_qk(rng.standard_normal((12, 4)), rng.standard_normal((12, 4)))


@pytest.fixture(scope="module")
def result(small_op):
    return sc.bracket(small_op, ["0.1", "0.3"], budget_seconds=1)


@pytest.fixture(scope="module")
def cert_path(result, tmp_path_factory) -> Path:
    return result.save(tmp_path_factory.mktemp("cert") / "cert.json")


# --------------------------------------------------------------------------------------
# The tutorial's notebook example
# --------------------------------------------------------------------------------------

def tutorial_example() -> str:
    text = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    section = text[text.index("## 4. The same from a notebook"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_tutorial_example_runs_and_writes_only_to_its_scratch_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the example's relative paths
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "tutorial"}
    exec(compile(tutorial_example(), "docs/tutorial.md", "exec"), namespace)
    out = capsys.readouterr().out
    assert "<BracketResult minilm/apache2/w32/L5H2 (32x32 qk)" in out
    assert "<VerificationResult minilm/apache2/w32/L5H2: all VERIFIED" in out
    work = namespace["work"]
    for name in ("cert.json", "cert-0.25.json", "profile.png"):
        assert (work / name).is_file(), name
    assert sc.verify(work / "cert-0.25.json").ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples"]  # nothing left in the working folder


# --------------------------------------------------------------------------------------
# Reprs, results, tolerances
# --------------------------------------------------------------------------------------

def test_bracket_result_is_compact_and_complete(result, small_op):
    text = repr(result)
    assert text.startswith("<BracketResult qk/12x12/sha256-") and text.endswith(" s>")
    assert "\n" not in text and "array" not in text and len(text) < 200
    assert result.eps == ("0.1", "0.3")
    assert set(result.lower) == set(result.upper) == set(result.resolved) == {"0.1", "0.3"}
    for eps in result.eps:
        b = result[eps]
        assert b.lower.verdict.status is sc.Status.VERIFIED and b.upper.verdict.status is sc.Status.VERIFIED
        assert result.lower[eps] <= result.upper[eps] <= small_op.p
        assert result.resolved[eps] == (result.lower[eps] == result.upper[eps])
    assert result["0.30"] is result["0.3"] and len(result) == 2 and list(result) == list(result.brackets)
    assert json.dumps(result.to_json())  # plain data


def test_profile_and_verification_reprs_are_compact(small_op, cert_path):
    verification = sc.verify(cert_path)
    for text in (repr(verification), repr(sc.profile(small_op, ["0.2"], budget_seconds=0.5))):
        assert "\n" not in text and "array" not in text and len(text) < 400, text


def test_verify_returns_a_verification_result_still_importable_by_its_former_name(cert_path):
    """``sc.verify`` returns :class:`sc.VerificationResult`; ``VerifyReport`` names the same class."""
    verification = sc.verify(cert_path)
    assert type(verification) is sc.VerificationResult is sc.VerifyReport
    assert {"VerificationResult", "VerifyReport"} <= set(sc.__all__) and repr(verification).startswith("<VerificationResult ")


def test_tolerances_are_exact_decimal_strings(small_op):
    with pytest.raises(InvalidToleranceError, match="float"):
        sc.bracket(small_op, [0.25])
    with pytest.raises(InvalidToleranceError, match="twice"):
        sc.bracket(small_op, "0.25,0.250")
    with pytest.raises(InvalidToleranceError):
        sc.bracket(small_op, "1e-3")
    with pytest.raises(InvalidInputError):
        sc.bracket(small_op, "0.25", budget_seconds=0)
    with pytest.raises(InvalidOperatorError):
        sc.bracket("not an operator", "0.25")


def test_progress_callback_sees_stages(small_op):
    seen = []
    sc.bracket(small_op, ["0.05"], budget_seconds=0.5, progress=lambda stage, elapsed, budget: seen.append(stage))
    assert seen and seen[0] == "tsvd"


# --------------------------------------------------------------------------------------
# Operators
# --------------------------------------------------------------------------------------

def test_constructors_from_arrays():
    rng = np.random.default_rng(1)
    Q32, K32 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    op = sc.Operator.from_qk(Q32, K32, causal=True)
    assert isinstance(op, sc.Operator) and op.kind == "qk" and op.mask == "causal" and op.shape == (5, 6)
    assert np.array_equal(op.arrays["Q"], Q32.astype(np.float64)) and op.beta == "inv_sqrt_d"
    assert sc.Operator.from_qk(Q32, K32, beta=0.125).beta == "0.125"
    assert sc.Operator.from_qk(Q32, K32, beta="0.3").beta_exact == Fraction(3, 10)
    assert sc.Operator.from_qk(Q32, K32, beta=8).beta == "8"
    assert Fraction(sc.Operator.from_qk(Q32, K32, beta=0.1).beta) == Fraction(0.1)  # the double, exactly
    assert sc.Operator.from_qk(Q32, K32, beta=np.float32(0.1)).beta_exact == Fraction(np.float32(0.1).item())
    wider = [np.longdouble(1) / 3] if np.finfo(np.longdouble).nmant > 52 else []  # not a double: refused, not rounded
    for bad in (Fraction(1, 3), True, float("nan"), *wider):
        with pytest.raises(InvalidOperatorError, match="beta must be"):
            sc.Operator.from_qk(Q32, K32, beta=bad)
    S = sc.Operator.from_scores([[0.0, 1.0], [2.0, -1.0]])
    assert S.kind == "scores" and S.arrays["S"].dtype == np.float64
    A = sc.Operator.from_probabilities(np.array([[0.5, 0.5], [1.0, 0.0]]))
    assert A.kind == "probabilities" and A.p == 2
    with pytest.raises(InvalidOperatorError, match="negative"):
        sc.Operator.from_probabilities([[1.5, -0.5], [0.5, 0.5]])
    with pytest.raises(InvalidOperatorError, match="2\\*\\*53"):
        sc.Operator.from_scores(np.array([[2 ** 60, 0]], dtype=np.int64))
    with pytest.raises(InvalidOperatorError, match="real numbers"):
        sc.Operator.from_scores(np.array([[1 + 1j, 0]]))
    with pytest.raises(InvalidOperatorError, match="NaN"):
        sc.Operator.from_scores([[np.nan, 0.0]])


def test_loaders_keep_panel_names():
    panel = sc.load_panel(PANEL)
    assert list(panel)[:3] == ["minilm/apache2/w32/L0H0", "minilm/apache2/w32/L0H1", "minilm/apache2/w32/L0H2"]
    assert all(isinstance(op, sc.Operator) for op in panel.values())
    op = sc.load_operator(PANEL, name=HEAD)
    assert sc.operator_id(op) == HEAD and op.shape == (32, 32)
    with pytest.raises(InvalidInputError, match="holds 6 operators"):
        sc.load_operator(PANEL)
    with pytest.raises(InvalidInputError, match="no operator named"):
        sc.load_operator(PANEL, name="nope")
    with pytest.raises(InvalidInputError, match="no such file"):
        sc.load_operator(PANEL.parent / "missing.npz")


def test_default_ids_follow_the_exact_inputs(small_op):
    same = sc.Operator.from_qk(np.array(small_op.arrays["Q"]), np.array(small_op.arrays["K"]))
    assert sc.operator_id(same) == sc.operator_id(small_op)
    other = sc.Operator.from_qk(np.array(small_op.arrays["Q"]), np.array(small_op.arrays["K"]), beta="0.5")
    assert sc.operator_id(other) != sc.operator_id(small_op)


# --------------------------------------------------------------------------------------
# Certificates and verification
# --------------------------------------------------------------------------------------

def test_save_then_verify_round_trips(result, cert_path):
    report = sc.verify(cert_path)
    assert report.ok and report.exit_code == 0 and report.signer is None
    assert report.operator_id == result.operator_id and report.path == str(cert_path)
    assert [(lo.rank, up.rank) for lo, up in report.pairs] == [(result.lower[e], result.upper[e]) for e in result.eps]
    assert [lo.eps for lo, _ in report.pairs] == list(result.eps)


def test_verify_path_bytes_and_dict_agree(cert_path):
    raw = cert_path.read_bytes()
    by_path, by_bytes, by_dict = sc.verify(cert_path), sc.verify(raw), sc.verify(json.loads(raw))
    assert pair_keys(by_path) == pair_keys(by_bytes) == pair_keys(by_dict)
    assert len(by_path) == 2 and by_bytes.source == "<bytes>" and by_dict.source == "<document>"
    assert by_path.operator_id == by_bytes.operator_id == by_dict.operator_id


def test_verify_refuses_like_a_file(cert_path):
    document = json.loads(cert_path.read_bytes())
    bad = json.loads(json.dumps(document))
    bad["brackets"][0]["lower"]["k"] = float(bad["brackets"][0]["lower"]["k"])
    with pytest.raises(CertificateFormatError, match="not an integer"):
        sc.verify(bad)
    with pytest.raises(CertificateFormatError, match="not JSON data"):
        sc.verify({**document, "generator": {"name": object()}})
    with pytest.raises(CertificateFormatError, match="duplicate"):
        sc.verify(b'{"format": "a", "format": "b"}')
    with pytest.raises(InvalidInputError, match="bytes"):
        sc.verify(cert_path.read_text())
    with pytest.raises(InvalidInputError, match="not signed"):
        sc.verify(cert_path, require_signature=True)


def test_signed_round_trip_with_trusted_keys(result, tmp_path, issuer_key, other_key):
    path = result.save(tmp_path / "signed.json", key=issuer_key)
    did = json.loads(Path(f"{issuer_key}.pub").read_text())["did"]
    report = sc.verify(path, trusted_keys=f"{issuer_key}.pub", require_signature=True)
    assert report.ok and report.signer.startswith(did)
    assert sc.verify(path.read_bytes(), trusted_keys=[did]).ok
    with pytest.raises(InvalidInputError, match="not in the trusted keys"):
        sc.verify(path, trusted_keys=f"{other_key}.pub")
    document = result.to_certificate(key=issuer_key, operator_id="my/op")
    assert document["operator"]["id"] == "my/op" and "proof" in document
    assert sc.verify(document, require_signature=True).ok


def test_save_refuses_a_folder(result, tmp_path):
    with pytest.raises(InvalidInputError, match="is a folder"):
        result.save(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_no_temporary_files(cert_path, monkeypatch):
    """verify() on bytes or a dict, and the audit's check of a supplied certificate, stay in memory."""
    from softrank_cert.studies.audit.table import check_certificate_bytes

    def refuse(*args, **kwargs):
        raise AssertionError("a temporary file was created")

    for name in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"):
        monkeypatch.setattr(tempfile, name, refuse)
    raw = cert_path.read_bytes()
    assert sc.verify(raw).ok and sc.verify(json.loads(raw)).ok
    checked = check_certificate_bytes(raw, "shown/cert.json")
    assert checked.error is None and checked.certificate.operator_id == sc.verify(raw).operator_id
    bad = check_certificate_bytes(b"{", "shown/bad.json")
    assert bad.certificate is None and "not valid JSON" in bad.error


# --------------------------------------------------------------------------------------
# Command line: default budget documented, one line per finished operator off a terminal
# --------------------------------------------------------------------------------------

def test_documented_default_budget_matches_the_driver():
    from softrank_cert.cli.common import DEFAULT_BUDGET_HELP
    from softrank_cert.solvers.bracket import default_budget_seconds

    for n, shown in ((32, "4 s"), (64, "about 6 s"), (128, "16 s"), (256, "42 s"), (512, "111 s")):
        value = default_budget_seconds(n, n)
        assert f"{shown} at {n} x {n}" in DEFAULT_BUDGET_HELP
        assert round(value) == int(shown.split()[-2]), (n, value)
    assert default_budget_seconds(1, 1) == 4 and default_budget_seconds(16384, 16384) == 600
    for command in ("bracket", "audit", "budgets", "profile"):
        res = run_softrank(command, "--help")
        assert res.returncode == 0 and "16 s at 128 x 128" in " ".join(res.stdout.split()), command


def test_bracket_prints_a_line_per_operator_off_a_terminal(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {}
    for name in ("t/w4/L0H1", "t/w4/L0H2"):
        arrays[f"{name}/Q"] = rng.standard_normal((4, 2))
        arrays[f"{name}/K"] = rng.standard_normal((4, 2))
    np.savez(tmp_path / "tiny.npz", **arrays)
    res = run_softrank("bracket", tmp_path / "tiny.npz", "--all", "--eps", "0.25", "--budget-seconds", "0.5",
                       "--out", tmp_path / "certs")
    assert res.returncode == 0, res.stderr
    lines = res.stderr_lines
    assert len(lines) == 2, lines
    assert lines[0].startswith("softrank bracket: [1/2] t/w4/L0H1: eps 0.25 ")
    assert lines[1].startswith("softrank bracket: [2/2] t/w4/L0H2: eps 0.25 ")
