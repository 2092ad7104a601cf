"""Smoothed-minimax witnesses, the resumable rank search and the time-aware driver."""

from __future__ import annotations


import numpy as np
import pytest

from softrank_cert.kernel import Operator, Status, verify_upper
from softrank_cert.solvers import Dense, UpperCandidate, bracket_operator, norm
from softrank_cert.certio.verified import VerifiedBracket
from softrank_cert.solvers import bracket as bracket_module
from softrank_cert.solvers.bracket import default_budget_seconds, search_operator
from softrank_cert.solvers.one_shot import tsvd_errors
from softrank_cert.solvers.upper import search as upper_search
from softrank_cert.solvers.upper.search import UpperSearch
from softrank_cert.solvers.upper.smooth import STAGES, SmoothState, run_stages, smooth, tsvd_start
from softrank_cert.solvers.work import Budget, Until, seconds_units


def up_eps(error: float) -> str:
    """A decimal tolerance just above a float64 error."""
    return repr(float(np.nextafter(error * (1 + 1e-9), np.inf)))


def planted(seed: int = 0, m: int = 60, n: int = 50, r: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Rank-r nonnegative ``L`` plus sparse noise ``E`` (two entries per row): ``||A - L|| = ||E||``."""
    rng = np.random.default_rng(seed)
    L = rng.uniform(0, 1, (m, r)) @ rng.uniform(0, 1, (r, n)) / n
    E = np.zeros((m, n))
    for i in range(m):
        E[i, rng.choice(n, 2, replace=False)] = rng.uniform(-1, 1, 2) * 0.02
    return L + E, E


def qk(seed: int, n: int, d: int = 16, scale: float = 2.0) -> Operator:
    rng = np.random.default_rng(seed)
    return Operator("qk", {"Q": scale * rng.standard_normal((n, d)), "K": rng.standard_normal((n, d))})


@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_reaches_planted_optimum(seed: int) -> None:
    """The optimum at rank r is at most ||E||; the truncated SVD is far from it."""
    A, E = planted(seed)
    d = Dense(A)
    U0, W0 = tsvd_start(d, 4)
    U, W = smooth(d, 4, iterations=300)
    assert norm(A - U @ W.T) <= norm(E) * 1.01
    assert norm(A - U0 @ W0.T) > 1.5 * norm(E)


def test_smooth_never_worse_than_start_and_stops_at_target() -> None:
    A, _ = planted(2)
    d = Dense(A)
    state = SmoothState.start(A, *tsvd_start(d, 3))
    start = state.best_error
    target = 0.9 * start
    assert run_stages(d, state, stages=5, iterations=200, target=target)
    assert state.best_error <= target and norm(A - state.best_U @ state.best_W.T) == state.best_error
    assert state.best_error < start


def test_smooth_witnesses_verify() -> None:
    op = qk(3, 32)
    d = Dense.of(op)
    for r in (2, 5, 9):
        U, W = smooth(d, r, iterations=100)
        error = norm(d.A - U @ W.T)
        assert error < tsvd_errors(d.A, d.svd)[r]
        assert verify_upper(op, up_eps(error), r, U, W).status is Status.VERIFIED


@pytest.mark.slow
def test_upper_search_is_resumable_and_reports_every_improvement() -> None:
    op = qk(4, 48)
    d = Dense.of(op)
    seen: list[UpperCandidate] = []
    tsvd = tsvd_errors(d.A, d.svd)

    def best_rank(eps: float) -> int | None:
        ranks = [w.r for w in seen if w.error <= eps] + [r for r in range(d.p + 1) if tsvd[r] <= eps]
        return min(ranks, default=None)

    search = UpperSearch(d, [0.25, 0.5], seen.append, best_rank, lambda eps: 1, work=8000.0)
    budget = Budget()
    for _ in range(10):  # resumed slice after slice of 600 work units; each returns at its stop point
        until = Until(budget, budget.used + 600.0)
        finished = search.run(until)
        assert budget.used - until.at < 5.0  # at most one evaluation and one error check past it
        if finished:
            break
    assert seen and search.spent > 600.0
    for eps in (0.25, 0.5):
        assert best_rank(eps) < next(r for r in range(d.p + 1) if tsvd[r] <= eps)
    assert all(w.method == "smooth" and np.isclose(w.error, norm(d.A - w.U @ w.W.T)) for w in seen)


def test_default_budget_scales_with_size() -> None:
    assert default_budget_seconds(128, 128) == 16.0
    assert 100 < default_budget_seconds(512, 512) < 120
    assert default_budget_seconds(8, 8) == 4.0 and default_budget_seconds(10 ** 5, 10 ** 5) == 600.0


@pytest.mark.slow
def test_tiny_work_on_a_256_wide_operator_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small work budget (what 2 s buy on the calibration machine) is not overdrawn by more
    than a few calls' charges, and every end is still VERIFIED.  Whether the charges match CPU
    seconds is measured by benchmarks/bench_solvers.py (``max_seconds_over_budget``), not here."""
    op = qk(5, 256, d=32)
    work = seconds_units(*op.shape, 2.0)
    budgets: list[Budget] = []
    made = bracket_module.search_budget
    monkeypatch.setattr(bracket_module, "search_budget", lambda *a, **kw: budgets.append(made(*a, **kw)) or budgets[-1])
    pool, ends = search_operator(op, ["0.1", "0.25", "0.5"], work=work)
    (budget,) = budgets
    assert pool is not None and budget.work == work
    assert budget.used <= 1.02 * work, (budget.used, work)
    brackets = [VerifiedBracket(e.eps, e.lower, e.upper) for e in ends]
    for b in brackets:
        assert b.lower.verdict.status is Status.VERIFIED and b.upper.verdict.status is Status.VERIFIED
        assert 1 <= b.lower.k <= b.upper.r < op.p


def test_progress_names_stages() -> None:
    stages: list[tuple[str, float, float]] = []
    bracket_operator(qk(6, 40), ["0.25"], budget_seconds=2.0, progress=lambda *a: stages.append(a))
    names = [s[0] for s in stages]
    assert names[:2] == ["tsvd", "pivot"] and any(n.startswith("smooth") for n in names)
    # elapsed is the true wall time since the search began (it may pass the nominal budget on a busy machine)
    assert all(elapsed >= 0 and budget == 2.0 for _, elapsed, budget in stages)
    assert [e for _, e, _ in stages] == sorted(e for _, e, _ in stages)


def _recorded_search(monkeypatch: pytest.MonkeyPatch, wide: bool, work: float) -> tuple[UpperSearch, list[tuple]]:
    """An UpperSearch on a 48 x 48 operator, counted as wide or not, recording each probe as
    ``(phase, fresh rank, max_stage, abort, iterations)``."""
    if wide:
        monkeypatch.setattr(upper_search, "WIDE_FROM", 48 * 48)
    d = Dense.of(qk(4, 48))
    tsvd = tsvd_errors(d.A, d.svd)
    seen: list[UpperCandidate] = []

    def best_rank(eps: float) -> int | None:
        ranks = [w.r for w in seen if w.error <= eps] + [r for r in range(d.p + 1) if tsvd[r] <= eps]
        return min(ranks, default=None)

    search = UpperSearch(d, [0.25, 0.5], seen.append, best_rank, lambda eps: 1, work=work)
    probes: list[tuple] = []
    probe, bisect, squeeze = search._probe, search._bisect, search._squeeze
    phase = [""]

    def in_phase(name: str, method):
        def run(*args, **kwargs):
            phase[0] = name
            yield from method(*args, **kwargs)
        return run

    def recorded(r: int, target: float, *, iterations: int, max_stage: int, abort: bool = True):
        probes.append((phase[0], r not in search.states, max_stage, abort, iterations))
        return (yield from probe(r, target, iterations=iterations, max_stage=max_stage, abort=abort))

    monkeypatch.setattr(search, "_probe", recorded)
    monkeypatch.setattr(search, "_bisect", in_phase("bisect", bisect))
    monkeypatch.setattr(search, "_squeeze", in_phase("squeeze", squeeze))
    return search, probes


@pytest.mark.slow
def test_wide_operators_probe_two_stages_with_the_iterations_of_all() -> None:
    """From WIDE_FROM entries on, a bisection probe runs WIDE_STAGES continuation stages with
    len(STAGES) / WIDE_STAGES times the iterations per stage; below it, probes run every stage."""
    with pytest.MonkeyPatch.context() as mp:
        narrow, narrow_probes = _recorded_search(mp, False, 3000.0)
        narrow.run(Until(Budget(), 3000.0))
    with pytest.MonkeyPatch.context() as mp:
        wide, wide_probes = _recorded_search(mp, True, 3000.0)
        wide.run(Until(Budget(), 3000.0))
    assert (narrow.stages, wide.stages) == (len(STAGES), upper_search.WIDE_STAGES) and upper_search.WIDE_STAGES < len(STAGES)
    assert {p[2] for p in narrow_probes if p[0] == "bisect"} == {len(STAGES)}
    assert {p[2] for p in wide_probes if p[0] == "bisect"} == {upper_search.WIDE_STAGES}
    first_narrow, first_wide = narrow_probes[0][4], wide_probes[0][4]  # same rank, same work left
    assert upper_search.MIN_ITERATIONS < first_narrow < upper_search.MAX_ITERATIONS / 3
    assert first_wide == pytest.approx(first_narrow * len(STAGES) / upper_search.WIDE_STAGES, rel=0.02)
    assert all(p[3] for p in narrow_probes + wide_probes if p[0] == "bisect")

