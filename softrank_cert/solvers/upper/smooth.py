"""Upper construction ``smooth``: smoothed-minimax witnesses, joint in ``(U, W)`` (UNTRUSTED).

Minimises a smooth surrogate of the max-row-l1 error ``max_i sum_j |A_ij - (U W^T)_ij|``::

    F(U, W) = (1/tau) log sum_i exp(tau f_i),   f_i = sum_j (sqrt(R_ij^2 + delta^2) - delta),
    R = A - U W^T,

with gradient ``G = p_i R_ij / sqrt(R_ij^2 + delta^2)`` (``p = softmax(tau f)``), ``dF/dU = -G W``
and ``dF/dW = -G^T U``: three m x N x r products per evaluation.  ``F`` overestimates the true
error by at most ``log(m)/tau`` and underestimates each row by at most ``N delta``, so sharpening
``tau`` up and ``delta`` down (continuation, relative to the current error) drives it to the
true objective.  L-BFGS (:mod:`.lbfgs`, memory 5) does each stage; between stages ``W`` is
re-orthonormalised (QR, the triangle folded into ``U``).  The float64 true error of the current
iterate is measured every few evaluations and the best pair seen is what comes back: the
surrogate only steers.  ``F`` and its gradient may be evaluated in float32 (the error that
decides is always float64).  Figures behind the defaults: docs/design.md section 7 (solver notes) and docs/solvers.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ...util.dense import Dense, as_dense
from ..backend import NUMPY, NumpyBackend
from .lbfgs import minimise
from ..work import Until, check_units, evaluation_units

#: Continuation stages ``(tau * e, delta * N / e)`` for the current error ``e``.
STAGES: tuple[tuple[float, float], ...] = ((30.0, 3e-2), (100.0, 1e-2), (300.0, 3e-3), (1000.0, 1e-3), (3000.0, 3e-4))
#: A probe is abandoned after stage s when its best error exceeds ``target * ABORT[s]``
#: (observed best-after-stage / final ratios: 1.05-1.12, 1.02-1.03, 1.005-1.009, 1.001-1.002).
ABORT: tuple[float, ...] = (1.2, 1.06, 1.02, 1.006)
#: The true (float64) error is measured every this many evaluations.
CHECK_EVERY = 25


class _Stop(Exception):
    """Raised inside an evaluation to leave L-BFGS: target reached or work (or time) up."""


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
    """``F`` and its gradient at one ``(tau, delta)``; tracks the float64 true error."""

    def __init__(self, A: Any, A_eval: Any, state: SmoothState, tau: float, delta: float,
                 target: float | None, until: Until | None, ops: NumpyBackend = NUMPY) -> None:
        self.A, self.A_eval, self.state, self.ops = A, A_eval, state, ops
        self.m, self.n = A.shape
        self.r = state.rank
        self.tau, self.delta = tau, delta
        self.stop_at = None if target is None else target * (1 - 1e-9)
        self.until = until
        self.calls = 0

    def split(self, x: Any) -> tuple[Any, Any]:
        k = self.m * self.r
        return x[:k].reshape(self.m, self.r), x[k:].reshape(self.n, self.r)

    def _check_true_error(self, x: Any) -> None:
        U, W = self.split(x)
        if self.until is not None:
            self.until.charge(self.ops.cost * check_units(self.m, self.n, self.r))
        error = self.ops.max_row_error(self.A, U, W)
        st = self.state
        st.history.append(error)
        if error < st.best_error:
            st.best_U, st.best_W, st.best_error = self.ops.clone(U), self.ops.clone(W), error
        if self.stop_at is not None and st.best_error <= self.stop_at:
            raise _Stop

    def __call__(self, x: Any) -> tuple[float, Any]:
        self.calls += 1
        self.state.evaluations += 1
        if self.calls % CHECK_EVERY == 0:
            self._check_true_error(x)
        if self.until is not None:
            if self.until.reached():
                raise _Stop
            self.until.charge(self.ops.cost * evaluation_units(self.m, self.n, self.r))
        return self.ops.smooth_witness(self.A_eval, *self.split(x), self.tau, self.delta)


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
    m, n = A.shape
    try:
        for _ in range(stages):
            if state.best_error == 0.0 or (until is not None and until.reached()):
                return target is not None and state.best_error <= target * (1 - 1e-9)
            s = state.stage
            tau_units, delta_units = STAGES[min(s, len(STAGES) - 1)]
            e = state.best_error
            U, W = ops.rebalance(state.U, state.W)
            obj = _Objective(A, A_eval, state, tau_units / e, delta_units * e / n, target, until, ops)
            x0 = ops.flat(U, W)
            try:
                x = minimise(obj, x0, iterations=iterations, evaluations=2 * iterations + 20, memory=5, ops=ops)
            except _Stop:
                x = None
            if x is not None:
                state.U, state.W = (ops.clone(f) for f in obj.split(x))
                obj._check_true_error(x)  # may raise _Stop (target reached)
            else:
                state.U, state.W = ops.clone(state.best_U), ops.clone(state.best_W)
                raise _Stop
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
