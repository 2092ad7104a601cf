"""Large-k general key sides: a smoothed Y-step on the affine set ``C Y = I`` (UNTRUSTED).

For a fixed query side ``X`` (``C = X A``, k x N) the best key side of Theorem L minimises
``||Y|| = max_j sum_b |Y_jb|`` subject to ``C Y = I`` (:class:`.general.KeyLP` solves it as an
LP with k^2 equality rows, too large past k ~ 28).  Here the same problem is solved
approximately by L-BFGS (:mod:`..lbfgs`) on ``Y = Y0 + P Z`` with the projector
``P = I - C^+ C`` (``C^+ = C^T (C C^T)^{-1}``: one k x k Cholesky factorisation), which keeps
every iterate on the affine set, and the smooth surrogate::

    F(Y) = (1/tau) log sum_j exp(tau s_j),   s_j = sum_b (sqrt(Y_jb^2 + delta^2) - delta),

with continuation in ``(tau, delta)`` relative to the current ``||Y||`` (as the witness search
does).  One evaluation costs about ``8 N k^2`` flops (``C Z``, ``C^+ (C Z)`` and the same for
the gradient).  The best float64 iterate by true ``||Y||`` is returned; the caller evaluates
the threshold of the actual pair with :func:`~softrank_cert.util.dense.threshold`, and the
kernel verifies every certificate, so nothing here needs ``C Y = I`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import numpy as np

from ...util.dense import threshold
from ..backend import NUMPY, NumpyBackend
from ..lbfgs import minimise
from ..work import CALL_UNITS, Until, entries_units, seconds_units
from .starts import selection

#: Continuation stages ``(tau * e, delta * k / e)`` for the current ``e = ||Y||``.
STAGES: tuple[tuple[float, float], ...] = ((30.0, 3e-2), (100.0, 1e-2), (300.0, 3e-3), (1000.0, 1e-3))
#: Objective evaluations per stage.
STAGE_EVALUATIONS = 60


class _Stop(Exception):
    """Raised inside an evaluation when the work runs out."""


def evaluation_flops(k: int, n: int) -> float:
    """Flops of one objective evaluation with its gradient (``C Z``, ``C^+ (.)`` twice each)."""
    return 8.0 * n * k * k + 12.0 * n * k


@dataclass(frozen=True)
class SmoothCharges:
    """Work units of one evaluation: ``fixed`` plus ``scale`` per million flops of
    :func:`evaluation_flops` (the defaults: the flop count itself; :meth:`for_shape`: the fitted CPU
    seconds, converted at the unit rate of the operator's size)."""

    fixed: float = CALL_UNITS
    scale: float = 1.0

    @classmethod
    def for_shape(cls, m: int, n: int) -> SmoothCharges:
        size = m * n / 128.0 ** 2
        return cls(seconds_units(m, n, EVAL_FIXED_SECONDS),
                   seconds_units(m, n, EVAL_PER_MFLOP * size ** EVAL_MFLOP_EXPONENT))

    def evaluation_units(self, k: int, n: int) -> float:
        return self.fixed + self.scale * entries_units(evaluation_flops(k, n))


#: CPU seconds of one evaluation with its L-BFGS step: ``EVAL_FIXED_SECONDS + EVAL_PER_MFLOP
#: (flops / 1e6) (mN/128^2)^EVAL_MFLOP_EXPONENT`` -- fitted on one core (the machine shared) on
#: gfdl13 L1H1 and L4H6 cut to 128 x 128 (k = 30-110: 0.2-1.3 ms) and at 512 x 512 (k = 30-200:
#: 0.43-9.7 ms); :class:`SmoothCharges`.
EVAL_FIXED_SECONDS, EVAL_PER_MFLOP, EVAL_MFLOP_EXPONENT = 200e-6, 85e-6, -0.145


def smooth_key_side(C: np.ndarray, Y_start: np.ndarray, until: Until, evaluations: int = STAGE_EVALUATIONS,
                    charges: SmoothCharges = SmoothCharges(), ops: NumpyBackend = NUMPY) -> np.ndarray | None:
    """``Y`` (N x k, float64 numpy) near ``C Y = I`` of small ``max_j ||Y_j||_1``, from ``Y_start``
    projected onto the affine set, searched on ``ops``'s back end (whose ``cost`` scales the
    charges); None if ``C C^T`` is singular or the work runs out first."""
    k, n = C.shape
    until.charge(ops.cost * (charges.fixed + charges.scale * entries_units(6.0 * n * k * k + k ** 3 / 3.0)))  # C C^T, Y0
    C = ops.key_matrix(C)
    factor = ops.cholesky(C @ C.T)
    if factor is None:
        return None

    def project(Z: Any) -> Any:  # P Z = Z - C^T (C C^T)^{-1} C Z
        return Z - C.T @ ops.cho_solve(factor, C @ Z)

    Y_start = ops.key_matrix(Y_start)
    Y0 = Y_start + C.T @ ops.cho_solve(factor, ops.eye(k) - C @ Y_start)
    if not ops.all_finite(Y0):
        return None
    best, best_norm = Y0, ops.max_row_l1(Y0)
    Z = ops.zeros((n * k,))
    per_evaluation = ops.cost * charges.evaluation_units(k, n)
    for tau_e, delta_k in STAGES:
        tau, delta = tau_e / best_norm, delta_k * best_norm / k

        def fun(z: Any, tau: float = tau, delta: float = delta) -> tuple[float, Any]:
            if until.reached():
                raise _Stop
            until.charge(per_evaluation)
            value, G = ops.smooth_key(Y0 + project(z.reshape(n, k)), tau, delta)
            return value, project(G).reshape(-1)

        try:
            Z = minimise(fun, Z, iterations=evaluations, evaluations=evaluations, ops=ops)
        except _Stop:
            return None
        Y = Y0 + project(Z.reshape(n, k))
        value = ops.max_row_l1(Y)
        if value < best_norm:
            best, best_norm = Y, value
    return ops.to_numpy(best)


def selection_pair(A: np.ndarray, rows: np.ndarray, until: Until, evaluations: int = STAGE_EVALUATIONS,
                   charges: SmoothCharges = SmoothCharges(), ops: NumpyBackend = NUMPY
                   ) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The query selection ``rows`` as ``X`` (``||X|| = 1``), its smoothed key side (from the
    least-norm solution of ``A_I Y = I``, on ``ops``'s back end) and the pair's float64 threshold
    (numpy, on the CPU); None as :func:`smooth_key_side`."""
    m, n = A.shape
    k = len(rows)
    Y = smooth_key_side(A[rows], np.zeros((n, k)), until, evaluations, charges, ops)
    if Y is None:
        return None
    until.charge(entries_units(2.0 * k * m * n + 2.0 * k * k * n + 2.0 * k ** 3))  # the threshold
    X = selection(rows, m)
    return X, Y, threshold(A, X, Y)
