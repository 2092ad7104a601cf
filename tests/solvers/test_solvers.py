"""Tests of the untrusted solvers (softrank_cert.solvers) against the trusted kernel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.solvers import LOWER, UPPER, Dense, bracket_operator, threshold, witness_error
from softrank_cert.solvers.dense import attention_matrix
from softrank_cert.solvers.l1 import L1Fitter


def qk_operator(seed: int, n: int = 24, d: int = 8, scale: float = 2.0, mask: str = "none") -> Operator:
    rng = np.random.default_rng(seed)
    return Operator("qk", {"Q": scale * rng.standard_normal((n, d)), "K": rng.standard_normal((n, d))}, mask=mask)


def up_eps(error: float) -> str:
    """A decimal tolerance just above a float64 error."""
    return f"{error * 1.0001 + 1e-9:.12f}"


def down_eps(t: float) -> str:
    return f"{t * 0.999:.12f}"


@pytest.fixture(scope="module")
def dense() -> tuple[Operator, Dense]:
    op = qk_operator(0)
    return op, Dense.of(op)


def test_attention_matrix_rows_and_mask() -> None:
    op = qk_operator(1, mask="causal")
    A = attention_matrix(op)
    assert np.allclose(A.sum(axis=1), 1.0)
    assert np.all(A[~op.allowed()] == 0.0)
    beta = Operator("qk", {"Q": op.arrays["Q"], "K": op.arrays["K"]}, beta="0.5")
    S = 0.5 * op.arrays["Q"] @ op.arrays["K"].T
    E = np.exp(S - S.max(axis=1, keepdims=True))
    assert np.allclose(attention_matrix(beta), E / E.sum(axis=1, keepdims=True))


def test_l1_fitter_matches_primal_lp() -> None:
    rng = np.random.default_rng(3)
    D, b, w = rng.standard_normal((15, 3)), rng.standard_normal(15), rng.uniform(0.5, 2, 15)
    x = L1Fitter(D).fit(b[:, None], weights=w)[:, 0]
    # primal: min w.t  s.t. -t <= b - D x <= t
    c = np.concatenate([np.zeros(3), w])
    A_ub = np.block([[-D, -np.eye(15)], [D, -np.eye(15)]])
    res = linprog(c, A_ub=A_ub, b_ub=np.concatenate([-b, b]), bounds=[(None, None)] * 3 + [(0, None)] * 15)
    assert np.isclose(w @ np.abs(b - D @ x), res.fun, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(UPPER))
@pytest.mark.parametrize("rank", [3, 8])
def test_upper_construction_verifies(dense: tuple[Operator, Dense], name: str, rank: int) -> None:
    op, d = dense
    U, W = UPPER[name](d, rank)
    assert U.shape[0] == 24 and W.shape[0] == 24 and U.shape[1] == W.shape[1] <= rank
    err = witness_error(d.A, U, W)
    verdict = verify_upper(op, up_eps(err), U.shape[1], U, W)
    assert verdict.status is Status.VERIFIED
    tight = verify_upper(op, f"{err * 0.999:.12f}", U.shape[1], U, W)
    assert tight.status is Status.REJECTED


def test_polish_and_alternation_never_worse(dense: tuple[Operator, Dense]) -> None:
    _, d = dense
    for rank in (2, 5):
        e_svd = witness_error(d.A, *UPPER["tsvd"](d, rank))
        start = UPPER["l1_polish"](d, rank)
        e_pol = witness_error(d.A, *start)
        e_alt = witness_error(d.A, *UPPER["alt_l1"](d, rank, start=start))
        assert e_pol <= e_svd + 1e-12 and e_alt <= e_pol + 1e-12


@pytest.mark.parametrize("name", sorted(LOWER))
@pytest.mark.parametrize("k", [1, 3])
def test_lower_certificate_verifies(dense: tuple[Operator, Dense], name: str, k: int) -> None:
    op, d = dense
    pair = LOWER[name](d, k)
    if pair is None:
        assert name == "trivial" and k != 1
        return
    X, Y = pair
    assert X.shape == (k, 24) and Y.shape == (24, k)
    t = threshold(d.A, X, Y)
    assert t > 0
    assert verify_lower(op, down_eps(t), k, X, Y).status is Status.VERIFIED
    assert verify_lower(op, f"{t * 1.001:.12f}", k, X, Y).status is Status.REJECTED


def test_lp_alternation_never_worse_than_start(dense: tuple[Operator, Dense]) -> None:
    _, d = dense
    start = LOWER["pooled"](d, 3)
    assert threshold(d.A, *LOWER["lp_alternation"](d, 3, start=start)) >= threshold(d.A, *start) * (1 - 1e-9)


EPS = ["0.05", "0.1", "0.25", "0.5", "0.9"]


@pytest.mark.parametrize("seed", [0, 1])
def test_brackets_sound_and_monotone(seed: int) -> None:
    op = qk_operator(seed, scale=1.0 + seed)
    brackets = bracket_operator(op, EPS, budget_seconds=8)
    for b in brackets:
        assert 1 <= b.lower.k <= b.upper.r <= op.p
        assert b.lower.verdict.status is Status.VERIFIED and b.upper.verdict.status is Status.VERIFIED
        if b.upper.U is not None:  # re-check the returned arrays independently
            assert verify_upper(op, b.eps, b.upper.r, b.upper.U, b.upper.W).status is Status.VERIFIED
        if b.lower.X is not None:
            assert verify_lower(op, b.eps, b.lower.k, b.lower.X, b.lower.Y).status is Status.VERIFIED
    lows, ups = [b.lower.k for b in brackets], [b.upper.r for b in brackets]
    assert lows == sorted(lows, reverse=True) and ups == sorted(ups, reverse=True)


def test_near_one_hot_resolves_at_p() -> None:
    rng = np.random.default_rng(5)
    op = Operator("scores", {"S": 30.0 * np.eye(24) + rng.standard_normal((24, 24))})
    for b in bracket_operator(op, ["0.1", "0.25", "0.5"], budget_seconds=10):
        assert b.resolved and b.lower.k == b.upper.r == 24


def test_trivial_ends() -> None:
    op = qk_operator(2)
    (big,) = bracket_operator(op, ["1"])
    assert (big.lower.k, big.upper.r) == (0, 0) and big.upper.construction == "zero"
    (none,) = bracket_operator(op, ["0.3"], budget_seconds=0)
    assert none.lower.k == 1 and none.lower.X is None
    # No search time at all: the truncated SVD (computed in the set-up) still gives an upper end.
    assert none.upper.construction == "tsvd" and none.upper.r < op.p


def test_rank_one_attention_resolves_at_one() -> None:
    rng = np.random.default_rng(6)
    row = rng.uniform(0.5, 1.5, 24)
    op = Operator("scores", {"S": np.tile(np.log(row), (24, 1)) + 1e-3 * rng.standard_normal((24, 24))})
    (b,) = bracket_operator(op, ["0.25"], budget_seconds=5)
    assert b.lower.k == b.upper.r == 1


def test_probabilities_and_causal_operators() -> None:
    A = attention_matrix(qk_operator(3, scale=3.0))
    op = Operator("probabilities", {"A": A})
    causal = qk_operator(4, scale=3.0, mask="causal")
    for operator in (op, causal):
        for b in bracket_operator(operator, ["0.25"], budget_seconds=5):
            assert 1 <= b.lower.k <= b.upper.r <= 24
