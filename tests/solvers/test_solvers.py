"""Tests of the untrusted solvers (softrank_cert.solvers) against the trusted kernel."""

from __future__ import annotations

import numpy as np
import pytest

from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.solvers import CandidatePool, Dense, OneShot, bracket_operator, threshold, witness_error
from softrank_cert.util.dense import attention_matrix
from softrank_cert.solvers.work import Budget
from tests.helpers import down_eps


def qk_operator(seed: int, n: int = 24, d: int = 8, scale: float = 2.0, mask: str = "none") -> Operator:
    rng = np.random.default_rng(seed)
    return Operator("qk", {"Q": scale * rng.standard_normal((n, d)), "K": rng.standard_normal((n, d))}, mask=mask)


def up_eps(error: float) -> str:
    """A decimal tolerance just above a float64 error."""
    return f"{error * 1.0001 + 1e-9:.12f}"


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


@pytest.mark.parametrize("method", ["tsvd", "smooth"])
@pytest.mark.parametrize("rank", [3, 8])
def test_one_shot_witness_verifies(dense: tuple[Operator, Dense], method: str, rank: int) -> None:
    op, d = dense
    w = OneShot(CandidatePool(d)).witness(method, rank)
    assert w.method == method and w.U.shape == (24, rank) and w.W.shape == (24, rank)
    assert np.isclose(w.error, witness_error(d.A, w.U, w.W), rtol=1e-12)
    assert verify_upper(op, up_eps(w.error), rank, w.U, w.W).status is Status.VERIFIED
    assert verify_upper(op, f"{w.error * 0.999:.12f}", rank, w.U, w.W).status is Status.REJECTED


def test_smoothed_witness_never_worse_than_the_truncated_svd(dense: tuple[Operator, Dense]) -> None:
    _, d = dense
    for rank in (2, 5):
        e_svd = OneShot(CandidatePool(d)).witness("tsvd", rank).error
        assert OneShot(CandidatePool(d)).witness("smooth", rank).error <= e_svd + 1e-12


@pytest.mark.parametrize("method", ["pivot", "pooled"])
@pytest.mark.parametrize("k", [1, 3])
def test_one_shot_lower_pair_verifies(dense: tuple[Operator, Dense], method: str, k: int) -> None:
    op, d = dense
    c = OneShot(CandidatePool(d)).lower_pair(method, k)
    assert c.method == method and c.X.shape == (k, 24) and c.Y.shape == (24, k)
    t = threshold(d.A, c.X, c.Y)
    assert t > 0 and np.isclose(t, c.threshold)
    assert verify_lower(op, down_eps(t), k, c.X, c.Y).status is Status.VERIFIED
    assert verify_lower(op, f"{t * 1.001:.12f}", k, c.X, c.Y).status is Status.REJECTED


def test_spent_one_shot_runs_nothing_but_the_truncated_svd(dense: tuple[Operator, Dense]) -> None:
    _, d = dense
    pool = CandidatePool(d)
    shots = OneShot(pool, Budget(work=0.0).until())
    assert shots.lower_pair("pivot", 3) is None and shots.witness("smooth", 4) is None
    assert shots.witness("tsvd", 4).method == "tsvd" and pool.witnesses[4].method == "tsvd"


EPS = ["0.05", "0.1", "0.25", "0.5", "0.9"]


@pytest.mark.slow
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


@pytest.mark.parametrize("work", [float("nan"), -1.0])
def test_a_nan_or_negative_work_budget_is_refused_not_unlimited(work: float) -> None:
    from softrank_cert.solvers.bracket import search_budget

    with pytest.raises(ValueError, match="the work budget must be >= 0"):
        search_budget(24, 24, work=work)
    with pytest.raises(ValueError, match="the work budget must be >= 0"):
        bracket_operator(qk_operator(2), ["0.5"], work=work)
    assert search_budget(24, 24, work=float("inf")).work == float("inf")
