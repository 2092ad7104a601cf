"""The row-block float64 path (proofs/rowblock-bounds.md): the midpoint radius against Arb balls,
its decisions against the Arb path, that it proves only (never REJECTED), that it refuses to decide
inside its own rounding width, every decline case, and memory named in a verdict's reason."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.certio.certificate import decode_certificate, read_json_file
from softrank_cert.kernel import Operator, Status, float_to_decimal_string, probability_balls, verify_lower, verify_upper
from softrank_cert.kernel.exact_inputs import arb_lower_fraction, arb_upper_fraction
from softrank_cert.kernel.float64 import rowblock
from softrank_cert.kernel.checks import _entry
from softrank_cert.verification import check_claims

ROOT = Path(__file__).resolve().parents[2]


def _dec(value: Fraction) -> str:
    """A tolerance string: the exact decimal of the double nearest ``value``."""
    return float_to_decimal_string(float(value))


def _operators() -> dict[str, Operator]:
    rng = np.random.default_rng(45)
    q, k = rng.normal(size=(24, 8)), rng.normal(size=(30, 8))
    return {
        "qk": Operator.from_qk(q, k),
        "qk-causal": Operator.from_qk(q, k, causal=True),
        "qk-large-logits": Operator.from_qk(4 * q, 4 * k),  # rows near one-hot, many entries near the cut
        "qk-negative-beta": Operator.from_qk(q, k, beta="-0.3"),
        "scores": Operator.from_scores(rng.normal(size=(20, 26)) * 3),
        "scores-causal-underflow": Operator.from_scores(np.where(rng.random((20, 26)) < 0.3, -650.0, 0.5)
                                                        * rng.random((20, 26)), causal=True),
        "probabilities": Operator.from_probabilities(rng.dirichlet(np.ones(26), size=20)),
    }


def _enclosure(op: Operator) -> rowblock.RowBlockEnclosure:
    _entry("0.5", 512, "rowblock")  # the environment probe every check passes first
    enc = rowblock.rowblock_enclosure(op)
    assert enc is not None
    return enc


@pytest.mark.parametrize("name", sorted(_operators()))
def test_rowblock_midpoint_radius_contains_arb(name):
    """Lemma R3: sum_j |A_ij - a_ij| <= Delta for every row, with A_ij from 256-bit Arb balls."""
    op = _operators()[name]
    enc = _enclosure(op)
    m, n = op.shape
    balls = probability_balls(op, 256)
    worst = Fraction(0)
    for i in range(m):
        row = Fraction(0)
        for j in range(n):
            lo, hi = arb_lower_fraction(balls[i * n + j]), arb_upper_fraction(balls[i * n + j])
            assert lo is not None and hi is not None
            a = Fraction(float(enc.a[i, j]))
            row += max(abs(hi - a), abs(a - lo))
        worst = max(worst, row)
    assert worst <= enc.delta_norm, name
    assert enc.delta_norm < Fraction(1, 10**9)  # and the bound is useful
    assert not enc.a.flags.writeable


def _witness(op: Operator, r: int) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """A truncated-SVD witness of rank r and its exact error's enclosure midpoint (1024-bit Arb)."""
    enc = _enclosure(op)
    u, s, vt = np.linalg.svd(np.asarray(enc.a))
    U, W = u[:, :r] * s[:r], vt[:r].T.copy()
    reference = verify_upper(op, "1", r, U, W, engine="arb", max_prec=1024)
    lo, hi = reference.value
    return U, W, (lo + hi) / 2


@pytest.mark.parametrize("name", ["qk", "qk-causal", "scores", "probabilities"])
def test_rowblock_upper_proves_only_what_is_true(name):
    op = _operators()[name]
    U, W, error = _witness(op, 5)
    for factor in (Fraction(1001, 1000), Fraction(999, 1000)):
        eps = _dec(error * factor)
        got = verify_upper(op, eps, 5, U, W, engine="rowblock")
        ref = verify_upper(op, eps, 5, U, W, engine="arb", max_prec=1024)
        if factor > 1:
            assert got.status is Status.VERIFIED and got.engine == "rowblock" and ref.status is Status.VERIFIED
            lo, hi = got.value
            assert lo <= error <= hi
        else:  # false claim: the row-block path never rejects, it hands the claim on
            assert got.status is Status.INCONCLUSIVE and ref.status is Status.REJECTED
            auto = verify_upper(op, eps, 5, U, W)
            assert auto.status is Status.REJECTED and auto.engine in ("float64", "arb")


def test_rowblock_refuses_to_decide_at_its_rounding_bound():
    """A true claim whose margin is below the path's rounding width: undecided there, VERIFIED by
    the next stage (the Arb balls, exact to 1024 bits)."""
    op = _operators()["qk"]
    U, W, error = _witness(op, 5)
    width = _enclosure(op).delta_norm
    eps = _dec(error + width / 4)  # inside Delta: the row-block bound cannot separate it
    got = verify_upper(op, eps, 5, U, W, engine="rowblock")
    assert got.status is Status.INCONCLUSIVE
    assert got.value[0] <= Fraction(eps) <= got.value[1]
    assert verify_upper(op, eps, 5, U, W, engine="arb", max_prec=1024).status is Status.VERIFIED
    assert verify_upper(op, eps, 5, U, W, max_prec=1024).status is Status.VERIFIED


def _selection(op: Operator, k: int) -> tuple[np.ndarray, np.ndarray]:
    m, n = op.shape
    X, Y = np.zeros((k, m)), np.zeros((n, k))
    X[np.arange(k), np.arange(k) + (m - k)] = 1.0
    Y[np.arange(k) + (n - k), np.arange(k)] = 1.0
    return X, Y


@pytest.mark.parametrize("name", ["qk", "qk-causal", "scores", "probabilities"])
def test_rowblock_lower_proves_only_what_is_true(name):
    op = _operators()[name]
    X, Y = _selection(op, 4)
    ref = verify_lower(op, "0.000001", 4, X, Y, engine="arb", max_prec=1024)
    t_lo, t_hi = ref.value
    below, above = _dec(t_lo * Fraction(999, 1000)), _dec(t_hi * Fraction(1001, 1000))
    got = verify_lower(op, below, 4, X, Y, engine="rowblock")
    assert got.status is Status.VERIFIED and got.engine == "rowblock"
    assert got.value[0] <= t_lo and t_hi <= got.value[1]
    assert verify_lower(op, above, 4, X, Y, engine="rowblock").status is Status.INCONCLUSIVE
    assert verify_lower(op, above, 4, X, Y).status is Status.REJECTED


def test_rowblock_lower_singular_core_is_undecided():
    op = _operators()["qk"]
    X, Y = _selection(op, 3)
    X[1] = X[0]  # X A Y has two equal rows: singular
    assert verify_lower(op, "0.000001", 3, X, Y, engine="rowblock").status is Status.INCONCLUSIVE


def test_rowblock_declines_what_its_proof_does_not_cover():
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(6, 4)), rng.normal(size=(8, 4))
    U, W = np.ones((6, 1)) / 8, np.ones((8, 1))
    cases = {
        "huge logits": Operator.from_qk(q * 1e150, k * 1e150),  # Q K^T overflows
        "beta 0": Operator.from_qk(q, k, beta="0"),  # beta's interval holds 0
        "score radius too wide": Operator.from_qk(q * 1e6, k * 1e6),  # delta > 2**-10
        "subnormal inputs": Operator.from_qk(np.where(q > 0, 5e-324, q), k),
        "subnormal probabilities": Operator.from_probabilities(np.array([[0.5, 0.5 - 1e-310, 1e-310]] * 6)[:, [0, 1, 2, 0, 1, 2, 0, 1]]),
    }
    for what, op in cases.items():
        _entry("0.5", 512, "rowblock")
        assert rowblock.rowblock_enclosure(op) is None, what
        assert verify_upper(op, "1.5", 1, U, W, engine="rowblock").status is Status.INCONCLUSIVE, what
    op = _operators()["qk"]
    m, n = op.shape
    tiny = np.full((m, 1), 1e-310)  # a subnormal witness factor
    assert verify_upper(op, "1.5", 1, tiny, np.ones((n, 1)), engine="rowblock").status is Status.INCONCLUSIVE


def test_rowblock_never_verifies_through_a_nan(monkeypatch):
    """A NaN anywhere (here: a broken exp) must leave the claim undecided, not be dropped by a max."""
    op = Operator.from_qk(np.random.default_rng(1).normal(size=(5, 3)), np.random.default_rng(2).normal(size=(7, 3)))
    monkeypatch.setattr(rowblock, "exp_mid", lambda y: np.full_like(y, np.nan))
    assert verify_upper(op, "1.9", 1, np.ones((5, 1)) / 7, np.ones((7, 1)), engine="rowblock").status is Status.INCONCLUSIVE
    monkeypatch.undo()
    op2 = Operator.from_qk(np.ones((5, 3)), np.ones((7, 3)))
    _entry("0.5", 512, "rowblock")
    enc = rowblock.rowblock_enclosure(op2)
    assert enc is not None
    U = np.ones((5, 1)) / 7
    W = np.ones((7, 1))
    W[3, 0] = 1e308  # U W^T overflows to inf in one column
    U2 = U * 1e308
    assert verify_upper(op2, "1.9", 1, U2, W, engine="rowblock").status is Status.INCONCLUSIVE


def test_out_of_memory_is_named_in_the_verdict_reason(monkeypatch):
    """Issue 48: a float64 path that runs out of memory is named in the final verdict's reason."""
    from softrank_cert.kernel.float64 import attempts

    def no_memory(*_args, **_kwargs):
        raise MemoryError

    op = _operators()["qk"]
    U, W, error = _witness(op, 5)
    monkeypatch.setattr(attempts, "softmax_bounds", no_memory)
    monkeypatch.setattr(rowblock, "rowblock_enclosure", no_memory)
    verdict = verify_upper(op, _dec(error * 2), 5, U, W)
    assert verdict.status is Status.VERIFIED and verdict.engine == "arb"
    assert "rowblock path: out of memory" in verdict.reason and "float64 path: out of memory" in verdict.reason


def test_out_of_memory_is_named_when_the_arb_check_is_refused(monkeypatch):
    from softrank_cert.errors import KernelLimitError
    from softrank_cert.kernel.float64 import attempts

    def no_memory(*_args, **_kwargs):
        raise MemoryError

    path = ROOT / "certificates" / "examples" / "random-qk.json"
    certificate = decode_certificate(read_json_file(path))
    monkeypatch.setattr(attempts, "softmax_bounds", no_memory)
    monkeypatch.setattr(rowblock, "rowblock_enclosure", no_memory)
    with pytest.raises(KernelLimitError, match="out of memory"):
        check_claims(certificate, memory_limit=1)


def test_shipped_examples_get_the_same_verdicts_from_the_rowblock_path():
    decided = 0
    for path in sorted((ROOT / "certificates" / "examples").glob("*.json")):
        certificate = decode_certificate(read_json_file(path))
        auto = [v for pair in check_claims(certificate) for v in pair]
        ref = [v for pair in check_claims(certificate, kernel="float64") for v in pair]
        assert [v.status for v in auto] == [v.status for v in ref], path
        decided += sum(v.engine == "rowblock" for v in auto)
    assert decided >= 4


def test_entrywise_float64_path_is_not_started_beyond_the_memory_limit(monkeypatch):
    """Its twenty m x N arrays would not fit: never started (a process killed by the kernel's
    out-of-memory killer cannot say why); the one-line refusal names memory."""
    from softrank_cert.errors import KernelLimitError
    from softrank_cert.kernel.float64 import attempts

    def must_not_run(*_args, **_kwargs):
        raise AssertionError("the entrywise float64 path was started")

    path = ROOT / "certificates" / "examples" / "random-qk.json"
    certificate = decode_certificate(read_json_file(path))
    monkeypatch.setattr(attempts, "softmax_bounds", must_not_run)
    monkeypatch.setattr(rowblock, "rowblock_enclosure", lambda op: None)  # the row-block path declines
    with pytest.raises(KernelLimitError, match=r"float64 path: not run \(out of memory"):
        check_claims(certificate, memory_limit=1)

