"""Tests of the untrusted lower-certificate search (softrank_cert.solvers.lower.search)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.kernel import Operator, Status, verify_lower
from softrank_cert.util.operator_files import load_operators
from softrank_cert.solvers.lower.families import local as lower_local, signed
from softrank_cert.util.dense import Dense, threshold
from softrank_cert.solvers.lower.pooled import pooled
from softrank_cert.solvers.lower.lp import RowLP, feasible, signed_y
from softrank_cert.solvers.lower.moves import key_moves
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.candidates import LowerCandidate
from softrank_cert.solvers.work import Budget, Until, one_blas_thread, seconds_units
from tests.helpers import down_eps

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"
EPS = [0.1, 0.25, 0.5]


def for_seconds(seconds: float) -> Until:
    """A stop point ``seconds`` of wall time from now (no work bound)."""
    return Budget(deadline=time.perf_counter() + seconds).until()


def qk_operator(seed: int, n: int, d: int = 16, scale: float = 1.5) -> Operator:
    rng = np.random.default_rng(seed)
    return Operator("qk", {"Q": scale * rng.standard_normal((n, d)), "K": rng.standard_normal((n, d))})


def search(op: Operator, eps: list[float], ceiling: int | None = None, floor: int = 1
           ) -> tuple[LowerSearch, list[LowerCandidate]]:
    got: list[LowerCandidate] = []
    d = Dense.of(op)
    top = d.p if ceiling is None else ceiling
    return LowerSearch(d, eps, got.append, lambda e: top, lambda e: floor), got


@pytest.fixture(scope="module")
def heads() -> list[Operator]:
    return [item.operator for item in load_operators(PANEL, ["minilm/apache2/w32/L0H0", "minilm/apache2/w32/L5H2"])]


@pytest.mark.slow
def test_every_certificate_handed_over_verifies(heads: list[Operator]) -> None:
    for op in heads + [qk_operator(1, 24)]:
        s, got = search(op, EPS)
        s.run(for_seconds(1.5))
        assert got, "the search must find something above the trivial k = 1"
        A = Dense.of(op).A
        for c in got:
            assert c.X.shape == (c.k, A.shape[0]) and c.Y.shape == (A.shape[1], c.k)
            assert np.isclose(c.threshold, threshold(A, c.X, c.Y), rtol=1e-12)
            if not c.method.startswith("general_"):  # signed key groups: ||Y|| = 1
                assert np.abs(c.Y).sum(axis=1).max() == 1.0
            assert verify_lower(op, down_eps(c.threshold), c.k, c.X, c.Y).status is Status.VERIFIED
        for eps in EPS:  # the best k per tolerance was handed over
            assert max((c.k for c in got if c.threshold > eps), default=1) == max(s.best_k(eps), 1)


def test_ceiling_and_floor_are_respected(heads: list[Operator]) -> None:
    s, got = search(heads[0], EPS, ceiling=4, floor=2)
    assert s.run(for_seconds(10))  # little to do: finishes early
    assert got and all(2 < c.k <= 4 for c in got)


def test_row_lp_is_exact_and_lazy_rows_keep_the_optimum() -> None:
    A = Dense.of(qk_operator(2, 30)).A
    rng = np.random.default_rng(0)
    k = 5
    lab, sign = rng.integers(-1, k, 30), rng.choice([-1.0, 1.0], 30)
    lab[:k] = np.arange(k)
    Y = signed_y(lab, sign, k)
    lp = RowLP()
    X = lp.solve(A @ Y, for_seconds(10))
    assert np.allclose(X @ A @ Y, np.eye(k), atol=1e-10)
    start = feasible(A, np.abs(rng.standard_normal((k, 30))), Y)
    lazy = lp.solve(A @ Y, for_seconds(10), start)
    assert np.allclose(lazy @ A @ Y, np.eye(k), atol=1e-9)
    assert np.isclose(np.abs(lazy).sum(axis=1).max(), np.abs(X).sum(axis=1).max(), rtol=1e-9)
    # no feasible X has a smaller worst row: spot-check against random feasible ones
    for _ in range(20):
        other = feasible(A, rng.standard_normal((k, 30)), Y)
        assert np.abs(other).sum(axis=1).max() >= np.abs(X).sum(axis=1).max() * (1 - 1e-9)


def test_key_moves_never_raise_the_inverse_norm() -> None:
    A = Dense.of(qk_operator(3, 40)).A
    rng = np.random.default_rng(1)
    k = 6
    lab, sign = rng.integers(0, k, 40), rng.choice([-1.0, 1.0], 40)
    C = np.abs(rng.standard_normal((k, 40))) @ A
    before = np.abs(np.linalg.inv(C @ signed_y(lab, sign, k))).sum(axis=1).max()
    lab2, sign2, moved = key_moves(C, lab, sign, for_seconds(10))
    after = np.abs(np.linalg.inv(C @ signed_y(lab2, sign2, k))).sum(axis=1).max()
    assert moved and after < before


@pytest.mark.slow
def test_run_returns_near_its_stop_point_on_256() -> None:
    """The lower search stops at its work stop point, overdrawing it by at most a few calls'
    charges (that the charges track CPU seconds is benchmarks/bench_solvers.py's business)."""
    op = qk_operator(4, 256, d=32, scale=1.0)
    s, _ = search(op, EPS)
    for seconds in (1.0, 0.6):
        work = seconds_units(*op.shape, seconds)
        budget = Budget(work=work)
        with one_blas_thread():  # as the driver runs it
            s.run(budget.until())
        assert budget.used >= 0.5 * work and budget.used <= 1.05 * work, (budget.used, work)


@pytest.mark.slow
def test_planted_blocks_at_least_pooled() -> None:
    rng = np.random.default_rng(0)
    blocks = np.kron(np.eye(6), np.ones((8, 8)))
    op = Operator("scores", {"S": 6.0 * blocks + 0.3 * rng.standard_normal((48, 48))})
    d = Dense.of(op)
    for eps in (0.1, 0.25):
        k_pooled = 1
        while threshold(d.A, *pooled(d, k_pooled + 1, kinds=("sqrt",))) > eps:
            k_pooled += 1
        s, got = search(op, [eps])
        s.run(for_seconds(2.0))
        assert s.best_k(eps) >= k_pooled >= 6


def test_resumed_runs_do_the_same_work(heads: list[Operator], monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices of work (as the driver gives the search) larger than any one unit of it give the
    same states as one run."""
    monkeypatch.setattr(lower_local, "ILS_PATIENCE", 6)
    one, _ = search(heads[1], EPS)
    assert one.run(for_seconds(60))
    sliced, _ = search(heads[1], EPS)
    budget = Budget()
    calls = 0
    while not sliced.run(Until(budget, budget.used + 60.0)):
        calls += 1
    assert calls >= 2
    for eps in EPS:
        assert sliced.best_k(eps) >= one.best_k(eps)
    assert {k: s.t for k, s in sliced.states.items()} == {k: s.t for k, s in one.states.items()}


def test_a_cut_gallop_resumes_where_it_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leap cut off by its stop point goes on from its step, or bisects below the least k it
    found failing, when the next slice resumes it (it galloped again from step 1: at small work
    on wide heads, two probes a slice above k = 303 and the lower ends stuck near 309)."""
    s, _ = search(qk_operator(3, 64), [0.25])
    works = 37  # the cheap starts clear eps up to this k
    seen: list[int] = []

    probes = s.record("signed", dict)

    def probe(_: object, name: str, k: int, until: Until) -> float:
        until.charge(1.0)
        seen.append(k)
        probes[(name, k)] = 1.0 if k <= works else 0.0
        return probes[(name, k)]

    monkeypatch.setattr(signed, "probe", probe)
    monkeypatch.setattr(s, "best_k", lambda eps: max((k for k in seen if k <= works), default=0))
    budget = Budget()
    for _ in range(6):  # slices of two k (each k probes both leap starts)
        signed.leap(s, 0.25, Until(budget, budget.used + 2 * len(s.leap_starts)))
    assert s.best_k(0.25) == works
    assert len(set(seen)) <= 11


def test_a_probe_cut_off_twice_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gallop probe larger than any slice is cut off in every slice: cut off twice at the same
    k, the gallop bisects below it instead of trying it again forever."""
    s, _ = search(qk_operator(3, 64), [0.25])
    seen: list[int] = []

    probes = s.record("signed", dict)

    def probe(_: object, name: str, k: int, until: Until) -> float:
        cost = 100.0 if k >= 32 else 1.0  # from k = 32 on a probe needs more than a slice
        if until.left() < cost:
            until.charge(until.left())
            return 0.0
        until.charge(cost)
        seen.append(k)
        probes[(name, k)] = 1.0
        return 1.0

    monkeypatch.setattr(signed, "probe", probe)
    monkeypatch.setattr(s, "best_k", lambda eps: max(seen, default=0))
    budget = Budget()
    for _ in range(8):
        signed.leap(s, 0.25, Until(budget, budget.used + 2 * len(s.leap_starts)))
    assert s.best_k(0.25) == 31
