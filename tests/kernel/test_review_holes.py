"""Issue 25 point 6: the small holes a review found around the kernel, each replayed as described."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from softrank_cert import exact_kernel
from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.errors import EXIT_INVALID_INPUT, InvalidInputError, InvalidOperatorError
from softrank_cert.kernel import Operator, Status, verify_upper


def _verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def _write(path: Path, op: Operator, brackets: list[Bracket]) -> Path:
    path.write_text(json.dumps(certificate_document("op", op, brackets, created="2026-01-01T00:00:00Z")))
    return path


def test_kernel_arb_max_memory_1M_checks_trivial_claims(tmp_path):
    """``--kernel arb --max-memory 1M`` decides trivial claims (which need no arithmetic) instead
    of refusing them with exit 5, and still refuses a claim that does need the Arb path."""
    rng = np.random.default_rng(2)
    scores = Operator("scores", {"S": rng.standard_normal((64, 64))})
    trivial = _write(tmp_path / "trivial.json", scores, [
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(64, "identity")),   # k = 1 (||A|| = 1 > eps), r = p
        Bracket("2", LowerEnd(0, "trivial"), UpperEnd(0, "zero"))])         # k = 0, r = 0 (||A|| = 1 <= eps)
    A = rng.random((64, 64))
    probabilities = _write(tmp_path / "probabilities.json", Operator("probabilities", {"A": A / A.sum(1, keepdims=True)}),
                           [Bracket("0.5", LowerEnd(0, "trivial"), UpperEnd(64, "identity"))])
    for path in (trivial, probabilities):
        run = _verify(path, "--kernel", "arb", "--max-memory", "1M")
        assert run.returncode == 0, run.stderr
    needs_arb = _write(tmp_path / "norm.json", Operator("probabilities", {"A": A}),
                       [Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(64, "identity"))])  # ||A|| needs an enclosure
    run = _verify(needs_arb, "--kernel", "arb", "--max-memory", "1M")
    assert run.returncode == 5 and "not checked" in run.stderr, run.stderr


def test_negative_probabilities_are_refused_by_kernel_format_api_and_npz(tmp_path):
    """One rule: a ``probabilities`` operator is an attention matrix (A >= 0).  The kernel, the
    format, the API and the ``.npz`` loader all refuse negative entries."""
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.verification import verify_certificate_bytes

    A = np.array([[0.5, 0.5], [0.75, -0.25]])
    with pytest.raises(InvalidOperatorError, match=r"A\[1, 1\] = -0.25"):
        Operator("probabilities", {"A": A})                                        # the kernel
    with pytest.raises(InvalidOperatorError):
        Operator.from_probabilities(A)                                             # the API
    np.savez(tmp_path / "p.npz", **{"op/A": A})
    with pytest.raises(InvalidOperatorError):
        load_operators(tmp_path / "p.npz")                                         # the .npz loader
    good = Operator("probabilities", {"A": np.abs(A)})
    document = certificate_document("op", good, [Bracket("0.5", LowerEnd(0, "trivial"), UpperEnd(2, "identity"))],
                                    created="2026-01-01T00:00:00Z")
    from softrank_cert.certio.arrays import encode_array

    document["operator"]["arrays"]["A"] = encode_array(A)                          # the format
    (tmp_path / "neg.json").write_text(json.dumps(document))
    with pytest.raises(InvalidInputError, match="negative"):
        verify_certificate_bytes((tmp_path / "neg.json").read_bytes())
    run = _verify(tmp_path / "neg.json")
    assert run.returncode == EXIT_INVALID_INPUT and "negative" in run.stderr, run.stderr


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="long double is a double on this platform")
def test_long_double_beta_in_npz_is_refused(tmp_path):
    """A long-double ``beta`` in an ``.npz`` was silently rounded to a double (the API refuses it)."""
    from softrank_cert.util.operator_files import load_operators

    rng = np.random.default_rng(3)
    Q, K = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    beta = np.longdouble(1) / np.longdouble(3)  # not a double
    with pytest.raises(InvalidOperatorError):
        Operator.from_qk(Q, K, beta=beta)
    np.savez(tmp_path / "b.npz", **{"op/Q": Q, "op/K": K, "op/beta": beta})
    with pytest.raises(InvalidOperatorError, match="longdouble|float128"):
        load_operators(tmp_path / "b.npz")
    np.savez(tmp_path / "ok.npz", **{"op/Q": Q, "op/K": K, "op/beta": np.float64(beta)})
    assert load_operators(tmp_path / "ok.npz")[0].operator.beta_exact is not None


def test_huge_qk_inputs_are_decided_by_the_arb_path():
    """With |Q|, |K| ~ 1e160 the float64 ``Q K^T`` overflows; the Arb path takes its softmax
    shift from the Arb scores, so ``auto`` / ``arb`` decide the non-trivial claims the exact
    kernel decides (not INCONCLUSIVE), and agree with it."""
    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((6, 2)) * 1e160, rng.standard_normal((6, 2)) * 1e160
    op = Operator.from_qk(Q, K)
    cols = ((Q / 1e160) @ (K / 1e160).T).argmax(axis=1)  # A is one-hot up to exp(-1e300)
    distinct = sorted(set(cols.tolist()))
    U, W = np.zeros((6, len(distinct))), np.zeros((6, len(distinct)))
    U[np.arange(6), [distinct.index(c) for c in cols]] = 1.0
    W[distinct, np.arange(len(distinct))] = 1.0
    for witness, expected in (((U, W), Status.VERIFIED), ((U, W[::-1].copy()), Status.REJECTED)):
        exact = exact_kernel.verify_upper(op, "0.1", len(distinct), *witness)
        assert exact.status is expected
        for engine in ("auto", "arb"):
            assert verify_upper(op, "0.1", len(distinct), *witness, engine=engine).status is expected, engine
