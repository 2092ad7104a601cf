"""The exact-rational second kernel: its lemmas, its limits, and agreement with the Arb kernel.

* mechanical checks of proofs/exact-exp-enclosure.md (ln 2, exp, 1/sqrt(d), rounding) against
  mpmath at 2000 bits;
* both kernels give the same Status on every shipped example certificate within the exact
  kernel's limits, and on >= 200 generated claims (6x6 .. 12x12, all kinds), including
  near-threshold claims decided both ways (relative gaps 1e-6 .. 1e-12), with the truth
  computed independently by mpmath at 256 bits (``tests/oracle.py``);
* the exact kernel's reported intervals contain that truth;
* the CLI option ``--kernel exact``.
"""

from __future__ import annotations

import ast
import math
import random
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from mpmath import mp, mpf

import softrank_cert.exact_kernel as ek
import softrank_cert.kernel as ak
from softrank_cert.errors import InvalidInputError, KernelLimitError, SizeLimitError
from softrank_cert.exact_kernel.arith import (
    _taylor_terms, exp_interval, inv_sqrt_bounds, ln2_bounds, round_fraction, scaled_ints,
)
from softrank_cert.kernel import Operator, Status
from tests.oracle import (
    decimal_string, exact_fraction, masked_softmax, true_A_mp, true_lower_threshold, true_witness_error,
)

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------------------
# proofs/exact-exp-enclosure.md, mechanically
# ----------------------------------------------------------------------------------------

def test_ln2_bounds_contain_ln2():
    with mp.workprec(12000):
        ln2 = mp.log(2)
        for w in (1, 8, 53, 64, 100, 333, 1000, 4000, 8300):
            lo, hi = ln2_bounds(w)
            assert mpf(lo) / 2**w <= ln2 <= mpf(hi) / 2**w, w
            assert 0 < hi - lo <= 2, (w, hi - lo)


def test_taylor_terms_meet_the_remainder_condition():
    for w in (8, 64, 112, 600, 4000):
        k = _taylor_terms(w)
        assert 2**w <= 2**k * math.factorial(k + 1)  # X3: remainder <= 2**-w
        assert k == 1 or 2**w > 2 ** (k - 1) * math.factorial(k)  # and K is the smallest such


def test_exp_interval_contains_exp():
    rng = random.Random(5)
    with mp.workprec(2000):
        for f in (64, 128, 512):
            w = f + 48
            for _ in range(150):
                x = -rng.choice([1e-30, 1e-9, 0.3, 0.35, 0.7, 5, 44.3, 63.9, 64.5, 88.0, 700.0]) * rng.random()
                xi = math.floor(Fraction(x) * 2**w)
                lo, hi = exp_interval(xi, xi, w, f)
                e = mp.exp(mpf(xi) / 2**w) * 2**f
                assert lo <= e <= hi, (f, x)
                assert hi - lo <= 3, (f, x, hi - lo)
                # an interval argument: monotone endpoints
                lo2, hi2 = exp_interval(xi - 2**(w - 3), xi, w, f)
                assert lo2 <= mp.exp(mpf(xi - 2**(w - 3)) / 2**w) * 2**f and hi2 >= e
            assert exp_interval(0, 0, w, f) == (2**f, 2**f)
            assert exp_interval(-(f << w) - 1, -(f << w) - 1, w, f) == (0, 1)  # X4 cut-off


def test_inv_sqrt_bounds():
    with mp.workprec(600):
        for d in (1, 2, 3, 4, 7, 64, 1000, 1023):
            lo, hi = inv_sqrt_bounds(d, 300)
            v = mpf(2) ** 300 / mp.sqrt(d)
            assert lo <= v <= hi and hi - lo <= 2


def test_rounding_and_scaled_ints_are_exact():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(size=50) * 10.0 ** rng.integers(-300, 300, 50), [5e-324, -0.0, 1.7e308]])
    ints, s = scaled_ints(values.tolist())
    assert all(Fraction(n, 2**s) == Fraction(float(v)) for n, v in zip(ints, values))
    for _ in range(200):
        q = Fraction(int(rng.integers(-10**12, 10**12)), int(rng.integers(1, 10**9)))
        for bits in (1, 10, 64):
            assert round_fraction(q, bits, up=False) <= q <= round_fraction(q, bits, up=True)


def test_exact_kernel_is_independent_of_flint_and_the_arb_numerics():
    """No python-flint, no import of the Arb kernel's numeric modules: only the kernel's public
    interface (exact input, the environment gate, the verdict wrapper)."""
    allowed = {"softrank_cert.kernel"}
    for path in (ROOT / "softrank_cert" / "exact_kernel").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                names = [("softrank_cert." + mod.lstrip(".")) if node.level == 2 else mod]
            for name in names:
                assert "flint" not in name, (path.name, name)
                if name.startswith("softrank_cert.kernel"):
                    assert name in allowed, (path.name, name)


# ----------------------------------------------------------------------------------------
# limits and input validation
# ----------------------------------------------------------------------------------------

def test_size_limits_are_refused_with_a_clear_message():
    big = Operator("scores", {"S": np.zeros((65, 64))})
    with pytest.raises(SizeLimitError, match="exact kernel limit"):
        ek.verify_trivial_lower(big, "0.5", 1)
    op = Operator("scores", {"S": np.zeros((40, 40))})
    with pytest.raises(SizeLimitError, match="k = 33"):
        ek.verify_lower(op, "0.1", 33, np.ones((33, 40)), np.ones((40, 33)))
    with pytest.raises(SizeLimitError, match="rank 65"):
        ek.verify_upper(Operator("scores", {"S": np.zeros((40, 80))}), "0.1", 65, np.ones((40, 65)), np.ones((80, 65)))
    with pytest.raises(InvalidInputError):
        ek.verify_upper(op, "0.1", 2, np.full((40, 2), np.nan), np.ones((40, 2)))
    with pytest.raises(InvalidInputError):
        ek.verify_upper(op, "1e-3", 2, np.ones((40, 2)), np.ones((40, 2)))
    with pytest.raises(InvalidInputError):
        ek.verify_lower(op, "0.1", 2, np.ones((2, 40)), np.ones((40, 2)), max_prec=32)


def test_singular_core_is_inconclusive_in_both_kernels():
    op = Operator("scores", {"S": np.arange(16.0).reshape(4, 4) / 7})
    X = np.array([[1.0, 0, 0, 0], [1.0, 0, 0, 0]])
    Y = np.eye(4)[:, :2].copy()
    for kernel in (ak, ek):
        assert kernel.verify_lower(op, "0.01", 2, X, Y, max_prec=128).status is Status.INCONCLUSIVE
    A = np.full((3, 3), 1 / 3)
    opp = Operator("probabilities", {"A": A})
    X, Y = np.eye(3)[:2].copy(), np.eye(3)[:, :2].copy()
    for kernel in (ak, ek):
        assert kernel.verify_lower(opp, "0.01", 2, X, Y, max_prec=128).status is Status.INCONCLUSIVE


def test_trivial_ends_exact():
    A = np.array([[0.5, 0.25], [0.125, 0.5]])
    op = Operator("probabilities", {"A": A})  # ||A|| = 0.75 exactly
    assert ek.verify_trivial_upper(op, "0.75", 0).status is Status.VERIFIED
    assert ek.verify_trivial_upper(op, "0.7499999999999999999999", 0).status is Status.REJECTED
    assert ek.verify_trivial_lower(op, "0.75", 1).status is Status.REJECTED
    assert ek.verify_trivial_lower(op, "0.7499999999999999999999", 1).status is Status.VERIFIED
    sm = Operator("scores", {"S": A})
    assert ek.verify_trivial_lower(sm, "1", 1).status is Status.REJECTED
    assert ek.verify_trivial_upper(sm, "1", 0).status is Status.VERIFIED
    assert ek.verify_trivial_upper(sm, "0.1", 2).status is Status.VERIFIED
    with pytest.raises(InvalidInputError):
        ek.verify_trivial_lower(sm, "0.1", 2)


# ----------------------------------------------------------------------------------------
# agreement: shipped certificates
# ----------------------------------------------------------------------------------------

def _shipped():
    return sorted((ROOT / "certificates" / "examples").glob("*.json"))


def test_both_kernels_agree_on_shipped_examples():
    from softrank_cert.certio.certificate import decode_certificate, read_json_file
    from softrank_cert.verification import check_claims

    checked = 0
    for path in _shipped():
        try:
            cert = decode_certificate(read_json_file(path))
        except Exception:  # not a certificate (e.g. a key list): other tests cover these
            continue
        try:
            exact = check_claims(cert, kernel="exact")
        except KernelLimitError:
            continue  # beyond the exact kernel's limits
        arb = check_claims(cert, kernel="arb")
        assert [(lo.status, up.status) for lo, up in arb] == [(lo.status, up.status) for lo, up in exact], path.name
        checked += 1
    if checked == 0:
        pytest.skip("no shipped example certificate within the exact kernel's limits (certificates/examples/)")


# ----------------------------------------------------------------------------------------
# agreement: >= 200 generated claims, near-threshold both ways
# ----------------------------------------------------------------------------------------

N_OPERATORS = 25
GAPS = ("1e-6", "1e-8", "1e-10", "1e-12")


def _operator(index: int):
    rng = np.random.default_rng([2024, index])
    m = int(rng.integers(6, 13))
    n = int(rng.integers(m, 13))
    variant = index % 5
    if variant == 0:
        S = rng.normal(size=(m, n)) * rng.uniform(1, 4)
        op = Operator("scores", {"S": S})
    elif variant == 1:
        S = rng.normal(size=(m, n)) * 3
        op = Operator("scores", {"S": S}, mask="causal")
    elif variant == 2:
        d = int(rng.integers(2, 8))
        Q, K = rng.normal(size=(m, d)) * 2, rng.normal(size=(n, d)) * 2
        op = Operator("qk", {"Q": Q, "K": K})
        S = Q @ K.T / math.sqrt(d)
    elif variant == 3:
        d = int(rng.integers(2, 8))
        Q, K = rng.normal(size=(m, d)), rng.normal(size=(n, d))
        op = Operator("qk", {"Q": Q, "K": K}, beta="-0.75" if index % 2 else "1.25", mask="causal" if index % 3 else "none")
        S = Q @ K.T * (-0.75 if index % 2 else 1.25)
    else:
        S = rng.normal(size=(m, n)) * 2
        op = Operator("probabilities", {"A": masked_softmax(S, np.ones((m, n), bool))})
    Af = np.array(op.arrays["A"]) if op.kind == "probabilities" else masked_softmax(S, op.allowed())
    return op, Af, rng


@pytest.fixture(scope="module")
def generated():
    cases = []
    for index in range(N_OPERATORS):
        op, Af, rng = _operator(index)
        u, s, vt = np.linalg.svd(Af)
        r = int(rng.integers(1, min(op.p, 5) + 1))
        U, W = np.ascontiguousarray(u[:, :r] * s[:r]), np.ascontiguousarray(vt[:r].T)
        k = int(rng.integers(2, min(op.p, 6) + 1))
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
        if index % 4 == 3:  # a pooling-style certificate: row-stochastic X, group-indicator Y
            X = np.abs(X) / np.abs(X).sum(axis=1, keepdims=True)
            Y = (np.arange(op.shape[1])[:, None] % k == np.arange(k)[None, :]).astype(float)
        A = true_A_mp(op.kind, dict(op.arrays), op.beta, op.mask)
        err = true_witness_error(A, U, W)
        res = true_lower_threshold(A, X, Y)
        cases.append((index, op, U, W, r, err, X, Y, k, None if res is None else res[0]))
    return cases


def _eps(value: mpf, up: bool) -> str:
    return decimal_string(exact_fraction(value), direction="up" if up else "down", digits=37)


@pytest.mark.parametrize("index", range(N_OPERATORS))
def test_kernels_agree_on_generated_claims(generated, index):
    _, op, U, W, r, err, X, Y, k, T = generated[index]
    claims = []  # (kind, eps, expected status or None)
    with mp.workprec(256):
        for g in GAPS:
            claims.append(("upper", _eps(err * (1 - mpf(g)), up=False), Status.REJECTED))
            claims.append(("upper", _eps(err * (1 + mpf(g)), up=True), Status.VERIFIED))
            if T is not None:
                claims.append(("lower", _eps(T * (1 + mpf(g)), up=True), Status.REJECTED))
                claims.append(("lower", _eps(T * (1 - mpf(g)), up=False), Status.VERIFIED))
        for e in ("0.03", "0.3"):
            claims.append(("upper", e, None))
            claims.append(("lower", e, None))
    assert len(claims) >= 12
    for side, eps, expected in claims:
        if side == "upper":
            va, ve = ak.verify_upper(op, eps, r, U, W), ek.verify_upper(op, eps, r, U, W)
        else:
            va, ve = ak.verify_lower(op, eps, k, X, Y), ek.verify_lower(op, eps, k, X, Y)
        assert va.status is ve.status, (index, side, eps, va, ve)
        if expected is not None:
            assert ve.status is expected, (index, side, eps, ve, ve.reason)
        if ve.value is not None:  # the exact kernel's interval contains the mpmath truth
            truth_value = err if side == "upper" else T
            lo, hi = ve.value
            with mp.workprec(256):
                slack = truth_value * mpf(2) ** -200
                assert exact_fraction(truth_value - slack) <= hi and lo <= exact_fraction(truth_value + slack)


def test_generated_claim_count(generated):
    """The parametrized test above covers >= 200 claims (>= 8 near-threshold per operator)."""
    near = sum(2 * len(GAPS) * (2 if T is not None else 1) for *_, T in generated)
    assert near >= 200, near
    assert near + 4 * len(generated) >= 300


# ----------------------------------------------------------------------------------------
# the command line
# ----------------------------------------------------------------------------------------

def test_cli_kernel_exact(tmp_path, valid_document):
    from softrank_cert.certio.certificate import certificate_document
    from softrank_cert.util.files import write_json_atomic
    from softrank_cert.verification import verify_certificate_file

    from conftest import false_witness_brackets, peaked_operator, run_verify

    good = tmp_path / "good.json"
    write_json_atomic(good, valid_document)
    op = peaked_operator()
    bad = tmp_path / "bad.json"
    write_json_atomic(bad, certificate_document("t/bad", op, false_witness_brackets(op), created="2026-01-02T03:04:05Z"))
    assert verify_certificate_file(good, kernel="exact").exit_code == 0
    assert verify_certificate_file(bad, kernel="exact").exit_code == 1
    res = run_verify(good, "--kernel", "exact", "--json")
    assert res.returncode == 0, res.stderr
    assert "exact kernel" in res.stdout
    res = run_verify(bad, "--kernel", "exact")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    big = tmp_path / "big.json"
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd

    bop = Operator("scores", {"S": np.zeros((70, 70))})
    write_json_atomic(big, certificate_document("t/big", bop, [Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(70, "identity"))],
                                                created="2026-01-02T03:04:05Z"))
    res = run_verify(big, "--kernel", "exact")  # valid, but beyond the exact kernel: not checked (exit 5)
    assert res.returncode == 5 and "exact kernel limit" in res.stderr and "Traceback" not in res.stderr
    assert run_verify(big).returncode == 0  # the Arb kernel has no such limit
    assert run_verify(good, "--kernel", "bogus").returncode == 2
