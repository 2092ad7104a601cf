"""Large-k general key sides: a smoothed Y-step on the affine set ``C Y = I`` (UNTRUSTED).

For a fixed query side ``X`` (``C = X A``, k x N) the best key side of Theorem L minimises
``||Y|| = max_j sum_b |Y_jb|`` subject to ``C Y = I`` (:class:`.general.KeyLP` solves it as an
LP with k^2 equality rows, too large past k ~ 28).  Here the same problem is solved
approximately by L-BFGS (:mod:`..upper.lbfgs`) on ``Y = Y0 + P Z`` with the projector
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

import numpy as np
import scipy.linalg

from ..upper.lbfgs import minimise
from ..work import CALL_UNITS, Until, entries_units

#: Continuation stages ``(tau * e, delta * k / e)`` for the current ``e = ||Y||``.
STAGES: tuple[tuple[float, float], ...] = ((30.0, 3e-2), (100.0, 1e-2), (300.0, 3e-3), (1000.0, 1e-3))
#: Objective evaluations per stage.
STAGE_EVALUATIONS = 60


class _Stop(Exception):
    """Raised inside an evaluation when the work runs out."""


def evaluation_flops(k: int, n: int) -> float:
    """Flops of one objective evaluation with its gradient (``C Z``, ``C^+ (.)`` twice each)."""
    return 8.0 * n * k * k + 12.0 * n * k


def smooth_key_side(C: np.ndarray, Y_start: np.ndarray, until: Until,
                    stages: tuple[tuple[float, float], ...] = STAGES,
                    evaluations: int = STAGE_EVALUATIONS) -> np.ndarray | None:
    """``Y`` (N x k) near ``C Y = I`` of small ``max_j ||Y_j||_1``, from ``Y_start`` projected
    onto the affine set; None if ``C C^T`` is singular or the work runs out first."""
    k, n = C.shape
    until.charge(CALL_UNITS + entries_units(2.0 * n * k * k + k ** 3 / 3.0 + 4.0 * n * k * k))
    try:
        factor = scipy.linalg.cho_factor(C @ C.T)
    except np.linalg.LinAlgError:
        return None

    def project(Z: np.ndarray) -> np.ndarray:  # P Z = Z - C^T (C C^T)^{-1} C Z
        return Z - C.T @ scipy.linalg.cho_solve(factor, C @ Z)

    Y0 = Y_start + C.T @ scipy.linalg.cho_solve(factor, np.eye(k) - C @ Y_start)
    if not np.isfinite(Y0).all():
        return None
    best, best_norm = Y0, float(np.abs(Y0).sum(axis=1).max())
    Z = np.zeros(n * k)
    per_evaluation = CALL_UNITS + entries_units(evaluation_flops(k, n))
    for tau_e, delta_k in stages:
        tau, delta = tau_e / best_norm, delta_k * best_norm / k

        def fun(z: np.ndarray, tau: float = tau, delta: float = delta) -> tuple[float, np.ndarray]:
            if until.reached():
                raise _Stop
            until.charge(per_evaluation)
            Y = Y0 + project(z.reshape(n, k))
            root = np.sqrt(Y * Y + delta * delta)
            s = (root - delta).sum(axis=1)
            top = s.max()
            w = np.exp(tau * (s - top))
            total = w.sum()
            p = w / total
            G = (p[:, None] * Y) / root
            return float(top + np.log(total) / tau), project(G).ravel()

        try:
            Z = minimise(fun, Z, iterations=evaluations, evaluations=evaluations)
        except _Stop:
            return None
        Y = Y0 + project(Z.reshape(n, k))
        value = float(np.abs(Y).sum(axis=1).max())
        if value < best_norm:
            best, best_norm = Y, value
    return best
