"""Active rows in the witness search (softrank_cert.solvers.upper.smooth, issue 44 item 2): a
continuation stage from the second on evaluates the smoothed minimax on the rows near the top
only, on numpy and on torch (CPU); every error check still measures all rows, the work charged
is that of the rows evaluated, the witnesses verify, and the ends are of the same quality."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import softrank_cert as sc
from softrank_cert.kernel import Status, verify_upper
from softrank_cert.solvers import bracket_operator, norm
from softrank_cert.solvers.backend import NUMPY, NumpyBackend
from softrank_cert.solvers.upper import smooth as sm
from softrank_cert.solvers.upper.smooth import SmoothState, run_stages, tsvd_start
from softrank_cert.solvers.work import MIN_CHARGED_ROWS, Budget, evaluation_units, units_per_second
from softrank_cert.util.dense import Dense

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"
HEADS = ("minilm/apache2/w32/L0H0", "minilm/apache2/w32/L0H1", "minilm/apache2/w32/L5H0")
EPS = ["0.1", "0.25", "0.5"]


def _backends() -> list[NumpyBackend]:
    torch_backend = pytest.importorskip("softrank_cert.solvers.torch_backend")
    return [NUMPY, torch_backend.TorchBackend("cpu")]


@pytest.fixture
def rows_seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Active rows on every operator; the number of rows each selection kept (m when all)."""
    seen: list[int] = []
    select = sm._active_rows

    def spy(A, U, W, margin, until, ops):  # type: ignore[no-untyped-def]
        rows = select(A, U, W, margin, until, ops)
        seen.append(A.shape[0] if rows is None else len(rows))
        return rows

    monkeypatch.setattr(sm, "ACTIVE_FROM", 0)
    monkeypatch.setattr(sm, "_active_rows", spy)
    return seen


@pytest.mark.parametrize("backend", range(2))
def test_active_stages_run_on_fewer_rows_and_their_witness_verifies(backend: int, rows_seen: list[int]) -> None:
    ops = _backends()[backend]
    op = sc.load_operator(PANEL, HEADS[0])
    d = Dense.of(op)
    state = SmoothState.start(d.A, *tsvd_start(d, 6), ops, d.memo)
    start = state.best_error
    budget = Budget()
    run_stages(d, state, stages=4, iterations=80, abort=False, until=budget.until(), ops=ops)
    assert rows_seen and min(rows_seen) < d.A.shape[0]  # the stages after the first used active rows
    U, W = ops.to_numpy(state.best_U), ops.to_numpy(state.best_W)
    assert norm(d.A - U @ W.T) == pytest.approx(state.best_error, rel=1e-12)  # the error of all rows
    assert state.best_error < start
    eps = repr(float(np.nextafter(state.best_error * (1 + 1e-9), np.inf)))
    assert verify_upper(op, eps, 6, U, W).status is Status.VERIFIED


def test_a_held_row_that_nears_the_top_makes_the_stage_select_again() -> None:
    rng = np.random.default_rng(1)
    A = rng.random((12, 10))
    U, W = np.zeros((12, 2)), np.zeros((10, 2))
    A[:6] *= 0.5  # rows 6..11 have the larger errors of the zero witness
    state = SmoothState.start(A, U, W)
    rows = np.arange(6, 12)
    obj = sm._Objective(A, A[rows].astype(np.float32), state, 1.0, 1e-3, None, None, NUMPY, rows, U, 0.1)
    x = NUMPY.flat(U[rows], W)
    obj._check_true_error(x)  # the held rows are far below the top: nothing happens
    A[0] *= 3.0  # a held row now exceeds the top
    with pytest.raises(sm._Reselect):
        obj._check_true_error(x)
    assert state.history[-1] == pytest.approx(norm(A))  # the check measured every row


def test_fewer_rows_are_charged_less_at_the_operators_unit_rate() -> None:
    m, n, r = 1024, 1024, 200
    assert evaluation_units(m, n, r, m) == evaluation_units(m, n, r)
    half = evaluation_units(m, n, r, m // 2)
    assert evaluation_units(m, n, r) / 2 < half < evaluation_units(m, n, r)
    # the rows' seconds converted at the m x N rate, not at the smaller rows x N one
    assert half > evaluation_units(m // 2, n, r) * units_per_second(m, n) / units_per_second(m // 2, n) * 0.99
    # a handful of rows is charged as MIN_CHARGED_ROWS: the optimiser's own work does not shrink with them
    assert evaluation_units(m, n, r, 1) == evaluation_units(m, n, r, MIN_CHARGED_ROWS) < evaluation_units(m, n, r, 65)


# one head in the fast tier, the others slow (each several seconds)
@pytest.mark.parametrize("name", [HEADS[0], *(pytest.param(name, marks=pytest.mark.slow) for name in HEADS[1:])])
def test_ends_with_active_rows_are_as_good(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    op = sc.load_operator(PANEL, name)
    before = bracket_operator(op, EPS, work=20000.0)
    monkeypatch.setattr(sm, "ACTIVE_FROM", 0)
    after = bracket_operator(op, EPS, work=20000.0)
    for b, a in zip(before, after):
        assert a.lower.k >= b.lower.k - 1 and a.upper.r <= b.upper.r + 1
    assert sum(a.upper.r - a.lower.k for a in after) <= sum(b.upper.r - b.lower.k for b in before)
