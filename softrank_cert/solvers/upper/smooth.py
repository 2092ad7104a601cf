"""Upper construction ``smooth``: smoothed-minimax witnesses, joint in ``(U, W)`` (UNTRUSTED).

Minimises a smooth surrogate of the max-row-l1 error ``max_i sum_j |A_ij - (U W^T)_ij|``::

    F(U, W) = (1/tau) log sum_i exp(tau f_i),   f_i = sum_j (sqrt(R_ij^2 + delta^2) - delta),
    R = A - U W^T,

with gradient ``G = p_i R_ij / sqrt(R_ij^2 + delta^2)`` (``p = softmax(tau f)``), ``dF/dU = -G W``
and ``dF/dW = -G^T U``: three m x N x r products per evaluation.  ``F`` overestimates the true
error by at most ``log(m)/tau`` and underestimates each row by at most ``N delta``, so sharpening
``tau`` up and ``delta`` down (continuation, relative to the current error) drives it to the
true objective.  L-BFGS (:mod:`..lbfgs`, memory 5) does each stage; between stages ``W`` is
re-orthonormalised (QR, the triangle folded into ``U``).  The float64 true error of the current
iterate is measured every few evaluations and the best pair seen is what comes back: the
surrogate only steers.  ``F`` and its gradient may be evaluated in float32 (the error that
decides is always float64).  Figures behind the defaults: docs/design.md section 7 (solver notes) and docs/solvers.md.

Active rows: from stage :data:`ACTIVE_FROM_STAGE` on, on operators of at least :data:`ACTIVE_FROM`
entries, a stage evaluates ``F`` only on the rows whose float64 error is within ``ACTIVE_MARGIN /
tau_units`` (relative) of the largest; in ``p = softmax(tau f)`` the others weigh less than
``exp(-ACTIVE_MARGIN)`` of the top row, and their factors ``u_i`` are held.  Every error check
still measures all rows; when a held row comes within half the margin of the top, the stage
selects its rows again and continues (L-BFGS restarted).  Every product of an evaluation then
has ``|rows|`` rows instead of ``m``, and it is charged so (:func:`~softrank_cert.solvers.work.evaluation_units`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ...util.dense import Dense, as_dense
from ..backend import NUMPY, NumpyBackend
from ..lbfgs import minimise
from ..work import Until, check_units, evaluation_units

#: Continuation stages ``(tau * e, delta * N / e)`` for the current error ``e``.
STAGES: tuple[tuple[float, float], ...] = ((30.0, 3e-2), (100.0, 1e-2), (300.0, 3e-3), (1000.0, 1e-3), (3000.0, 3e-4))
#: A probe is abandoned after stage s when its best error exceeds ``target * ABORT[s]``
#: (observed best-after-stage / final ratios: 1.05-1.12, 1.02-1.03, 1.005-1.009, 1.001-1.002).
ABORT: tuple[float, ...] = (1.2, 1.06, 1.02, 1.006)
#: The true (float64) error is measured every this many evaluations.
CHECK_EVERY = 25
#: Evaluations per L-BFGS iteration (line searches), for the work estimates.
EVALS_PER_ITERATION = 1.15
#: Active rows (module docstring): the first stage (0-based) that uses them, the least operator
#: size (entries), the margin (rows held weigh less than ``exp(-ACTIVE_MARGIN)`` of the top one)
#: and how often one stage may select its rows again.
ACTIVE_FROM_STAGE, ACTIVE_FROM, ACTIVE_MARGIN, ACTIVE_RESELECT = 1, 512 * 512, math.log(1e6), 20


class _Stop(Exception):
    """Raised inside an evaluation to leave L-BFGS: target reached or work (or time) up."""


class _Reselect(Exception):
    """Raised at an error check of an active-row stage when a held row has come near the top:
    ``x`` is the point checked (the stage continues from it with its rows selected again)."""

    def __init__(self, x: Any) -> None:
        super().__init__()
        self.x = x


@dataclass
class SmoothState:
    """Resumable solver state at one rank: the best pair seen and the continuation reached.

    ``U``, ``W`` are the current iterate (what the next stage starts from); ``best_U``,
    ``best_W`` the pair of smallest float64 true error ``best_error``; ``stage`` the index of
    the next continuation stage; ``evaluations`` how many objective evaluations it took.
    """

    U: Any
    W: Any
    best_U: Any
    best_W: Any
    best_error: float
    stage: int = 0
    evaluations: int = 0
    history: list[float] = field(default_factory=list)

    @classmethod
    def start(cls, A: np.ndarray, U: np.ndarray, W: np.ndarray, ops: NumpyBackend = NUMPY,
              memo: dict | None = None) -> SmoothState:
        """The state at ``(U, W)`` (float64 copies on ``ops``'s back end; ``memo``: where the
        back end keeps its copy of ``A``)."""
        U, W = ops.factors(U, W)
        error = ops.max_row_error(ops.matrix({} if memo is None else memo, A, np.float64), U, W)
        return cls(U, W, ops.clone(U), ops.clone(W), error)

    @property
    def rank(self) -> int:
        return self.U.shape[1]


def tsvd_start(d: Dense, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank-r truncated SVD as factors ``U = u_r s_r``, ``W = v_r`` (orthonormal columns)."""
    u, s, vt = d.svd
    return u[:, :r] * s[:r], vt[:r].T.copy()


class _Objective:
    """``F`` and its gradient at one ``(tau, delta)``; tracks the float64 true error.

    ``rows`` (None: all): the active rows ``A_eval`` holds (an index array of ``ops``); the
    variables are then those rows of ``U`` and all of ``W``, the other rows of ``U`` are
    ``U_held``'s, and a check raises :class:`_Reselect` when a held row's error is within
    ``margin / 2`` (relative) of the largest (``margin`` None: never)."""

    def __init__(self, A: Any, A_eval: Any, state: SmoothState, tau: float, delta: float,
                 target: float | None, until: Until | None, ops: NumpyBackend = NUMPY, rows: Any = None,
                 U_held: Any = None, margin: float | None = None) -> None:
        self.A, self.A_eval, self.state, self.ops = A, A_eval, state, ops
        self.m, self.n = A.shape
        self.m_eval = A_eval.shape[0]
        self.r = state.rank
        self.tau, self.delta = tau, delta
        self.rows, self.U_held, self.margin = rows, U_held, margin
        self.stop_at = None if target is None else target * (1 - 1e-9)
        self.until = until
        self.calls = 0

    def split(self, x: Any) -> tuple[Any, Any]:
        k = self.m_eval * self.r
        return x[:k].reshape(self.m_eval, self.r), x[k:].reshape(self.n, self.r)

    def full(self, x: Any) -> tuple[Any, Any]:
        """Copies of the whole factors ``(U, W)`` at ``x`` (held rows of ``U`` filled in)."""
        U, W = self.split(x)
        if self.rows is None:
            return self.ops.clone(U), self.ops.clone(W)
        U_full = self.ops.clone(self.U_held)
        U_full[self.rows] = U
        return U_full, self.ops.clone(W)

    def _check_true_error(self, x: Any) -> None:
        U, W = self.full(x) if self.rows is not None else self.split(x)
        if self.until is not None:
            self.until.charge(self.ops.cost * check_units(self.m, self.n, self.r))
        held = None
        if self.rows is None:
            error = self.ops.max_row_error(self.A, U, W)
        else:
            errors = self.ops.row_errors(self.A, U, W)
            error = float(errors.max())
            errors[self.rows] = -1.0
            held = float(errors.max())
        st = self.state
        st.history.append(error)
        if error < st.best_error:
            st.best_U, st.best_W, st.best_error = self.ops.clone(U), self.ops.clone(W), error
        if self.stop_at is not None and st.best_error <= self.stop_at:
            raise _Stop
        if held is not None and self.margin is not None and held >= error * (1 - 0.5 * self.margin):
            raise _Reselect(x)

    def __call__(self, x: Any) -> tuple[float, Any]:
        self.calls += 1
        self.state.evaluations += 1
        if self.calls % CHECK_EVERY == 0:
            self._check_true_error(x)
        if self.until is not None:
            if self.until.reached():
                raise _Stop
            self.until.charge(self.ops.cost * evaluation_units(self.m, self.n, self.r, self.m_eval))
        return self.ops.smooth_witness(self.A_eval, *self.split(x), self.tau, self.delta)


def _active_rows(A: Any, U: Any, W: Any, margin: float, until: Until | None, ops: NumpyBackend) -> Any:
    """The rows whose float64 error is within ``margin`` (relative) of the largest; None when
    that is every row.  Charged as one error check."""
    m, n = A.shape
    if until is not None:
        until.charge(ops.cost * check_units(m, n, U.shape[1]))
    errors = ops.row_errors(A, U, W)
    rows = ops.rows_at_least(errors, float(errors.max()) * (1.0 - margin))
    return None if len(rows) == m else rows


def _stage(A: Any, A_eval: Any, state: SmoothState, tau_units: float, delta_units: float, iterations: int,
           target: float | None, until: Until | None, ops: NumpyBackend) -> tuple[_Objective, Any]:
    """One continuation stage from ``state``'s iterate: L-BFGS on all rows, or (:data:`ACTIVE_FROM_STAGE`
    on, :data:`ACTIVE_FROM` entries) on the active rows, selected again when a held row comes
    near the top.  Leaves the stage's last point in ``state.U``, ``state.W``; returns its
    objective and that point (for the final check).  Raises :class:`_Stop` (``state`` then holds its best pair)."""
    m, n = A.shape
    e = state.best_error
    tau, delta = tau_units / e, delta_units * e / n
    U, W = ops.rebalance(state.U, state.W)
    active = state.stage >= ACTIVE_FROM_STAGE and m * n >= ACTIVE_FROM
    margin = ACTIVE_MARGIN / tau_units
    evaluations, used = 2 * iterations + 20, 0
    for attempt in range(ACTIVE_RESELECT + 1):
        rows = _active_rows(A, U, W, margin, until, ops) if active else None
        again = margin if attempt < ACTIVE_RESELECT else None
        obj = (_Objective(A, A_eval, state, tau, delta, target, until, ops) if rows is None else
               _Objective(A, A_eval[rows], state, tau, delta, target, until, ops, rows, U, again))
        x0 = ops.flat(U if rows is None else U[rows], W)
        steps = iterations if used == 0 else max(iterations - int(used / EVALS_PER_ITERATION), 1)
        try:
            x = minimise(obj, x0, iterations=steps, evaluations=max(evaluations - used, 1), memory=5, ops=ops)
        except _Reselect as moved:
            used += obj.calls
            U, W = obj.full(moved.x)
            continue
        except _Stop:
            state.U, state.W = ops.clone(state.best_U), ops.clone(state.best_W)
            raise
        state.U, state.W = obj.full(x)
        obj.margin = None
        return obj, x
    raise AssertionError("unreachable: the last attempt never reselects")


def run_stages(d: Dense, state: SmoothState, *, stages: int, iterations: int, target: float | None = None,
               until: Until | None = None, abort: bool = True, dtype: type = np.float32,
               ops: NumpyBackend = NUMPY) -> bool:
    """Advance ``state`` by up to ``stages`` continuation stages of ``iterations`` L-BFGS steps.

    Stops early (returns True) once the best true error is ``<= target (1 - 1e-9)``; returns
    False when the work (or time) of ``until`` is up, when the continuation is exhausted, or (``abort``) when
    after stage s the best error exceeds ``target * ABORT[s]`` (the probe cannot reach target).
    Stages after the last of :data:`STAGES` repeat it, relative to the error then.  ``state``
    lives on ``ops``'s back end (:meth:`SmoothState.start` with the same ``ops``).
    """
    A = ops.matrix(d.memo, d.A, np.float64)
    A_eval = ops.matrix(d.memo, d.A, dtype)
    try:
        for _ in range(stages):
            if state.best_error == 0.0 or (until is not None and until.reached()):
                return target is not None and state.best_error <= target * (1 - 1e-9)
            s = state.stage
            tau_units, delta_units = STAGES[min(s, len(STAGES) - 1)]
            obj, x = _stage(A, A_eval, state, tau_units, delta_units, iterations, target, until, ops)
            obj._check_true_error(x)  # may raise _Stop (target reached)
            state.stage += 1
            if abort and target is not None and s < len(ABORT) and state.best_error > target * ABORT[s]:
                return False
        return target is not None and state.best_error <= target * (1 - 1e-9)
    except _Stop:
        return target is not None and state.best_error <= target * (1 - 1e-9)


def smooth(A: Dense | np.ndarray, rank: int, *, start: tuple[np.ndarray, np.ndarray] | None = None,
           iterations: int = 200, stages: int = len(STAGES), until: Until | None = None,
           target: float | None = None, ops: NumpyBackend = NUMPY) -> tuple[np.ndarray, np.ndarray]:
    """Best ``(U, W)`` of the smoothed-minimax continuation at ``rank`` (from ``start`` or the
    truncated SVD), as float64 numpy arrays, searched on ``ops``'s back end; stops at ``target``
    error or when ``until`` is reached.  Never worse than the start."""
    d = as_dense(A)
    U, W = start if start is not None else tsvd_start(d, rank)
    state = SmoothState.start(d.A, U, W, ops, d.memo)
    run_stages(d, state, stages=stages, iterations=iterations, target=target, until=until, abort=False, ops=ops)
    return ops.to_numpy(state.best_U), ops.to_numpy(state.best_W)
