"""The float64 LP (HiGHS) for the query side ``X`` of a lower certificate, given the key side ``Y`` (UNTRUSTED).

WLOG ``X A Y = I`` (replace X by ``(XAY)^{-1} X``: the threshold cannot drop), and then the
certificate's threshold (proofs/lower-certificate.md) is ``t = 1 / (||X|| ||Y||)``.  For a fixed
``Y`` the best ``X`` is an LP: row ``x_a`` minimises ``||x_a||_1`` subject to ``x_a^T B = e_a^T``
with ``B = A Y``; by LP duality ``||x_a||_1 = max { w_a : ||B w||_inf <= 1 }``, so
``1 / max_a ||x_a||_1`` is the smallest l_inf distance of a column of ``B`` from the span of the
others (:class:`RowLP`).  Nothing here is trusted: the kernel checks every certificate.
"""

from __future__ import annotations

import os
import sys
import time

import highspy
import numpy as np

from ..work import Until, simplex_units


def quiet_highs() -> highspy.Highs:
    """A Highs instance, created with C-level stdout muted (HiGHS prints a banner on creation)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    return h

def fresh(h: highspy.Highs) -> None:
    """Reset ``h`` to a new instance's state (model, basis, options, the random draws of its
    perturbations), single-threaded and silent: the solves are then independent of one another,
    so that the work a search does does not depend on how it is sliced."""
    h.clear()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)


def signed_y(lab: np.ndarray, sign: np.ndarray, k: int) -> np.ndarray:
    """``Y`` (N x k) with ``Y[j, lab[j]] = sign[j]`` where ``lab[j] >= 0``, zero elsewhere."""
    Y = np.zeros((len(lab), k))
    used = np.flatnonzero(lab >= 0)
    Y[used, lab[used]] = sign[used]
    return Y

class RowLP:
    """Exact ``X`` for a given ``B = A Y``: rows ``x_a = argmin ||x||_1 s.t. x^T B = e_a^T``.

    Solved as the dual ``max w_a s.t. -1 <= B w <= 1`` (k free columns, m box rows) by HiGHS
    dual simplex; only the cost changes between rows, so each row warm-starts from the last.
    ``x_a`` is read off the row duals.
    """

    def __init__(self, scale: float = 1.0) -> None:
        self._h = quiet_highs()
        self.scale = scale  # factor on the simplex charges (.work.row_lp_scale of the operator)

    def solve(self, B: np.ndarray, until: Until, start: np.ndarray | None = None) -> np.ndarray | None:
        """``X`` (k x m) with ``X B = I`` whose largest row l1 norm is the LP optimum.

        Without ``start`` every row is solved.  With a feasible ``start`` (``start B = I``),
        rows are solved in decreasing order of their l1 norm in ``start`` and the rest are
        kept from ``start`` once the next norm is below the largest exact one: only the
        maximum matters, so the result has the same ``||X||`` as the full solve.  None if an
        LP is unbounded (B rank-deficient) or fails, or if the work (or time) of ``until``
        runs out; every simplex iteration is charged to it (:func:`~softrank_cert.solvers.work.simplex_units`).
        """
        m, k = B.shape
        self._pass(B)
        X = np.empty((k, m)) if start is None else np.array(start, dtype=np.float64)
        bounds = np.full(k, np.inf) if start is None else np.abs(X).sum(axis=1)
        worst = 0.0
        for a in np.argsort(-bounds, kind="stable"):
            if bounds[a] <= worst:
                break
            if until.reached():
                return None
            x = self._row(int(a), k, until)
            if x is None:
                return None
            if np.abs(x).sum() < bounds[a]:
                X[a] = x
            worst = max(worst, float(np.abs(X[a]).sum()))
        return X

    def _pass(self, B: np.ndarray) -> None:
        m, k = B.shape
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = k, m
        lp.col_cost_ = np.zeros(k)
        lp.col_lower_, lp.col_upper_ = np.full(k, -np.inf), np.full(k, np.inf)
        lp.row_lower_, lp.row_upper_ = -np.ones(m), np.ones(m)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(m + 1, dtype=np.int32) * k
        lp.a_matrix_.index_ = np.tile(np.arange(k, dtype=np.int32), m)
        lp.a_matrix_.value_ = np.ascontiguousarray(B, dtype=np.float64).ravel()
        fresh(self._h)  # a solve depends on its B alone, not on the solves before it
        self._h.setOptionValue("presolve", "off")
        self._h.passModel(lp)

    def _row(self, a: int, k: int, until: Until) -> np.ndarray | None:
        """Row a of the optimal X for the model passed last (None unless optimal within the
        iterations that the work left to ``until`` pays for)."""
        h = self._h
        m = h.getNumRow()
        cost = np.zeros(k)
        cost[a] = -1.0
        h.changeColsCost(k, np.arange(k, dtype=np.int32), cost)
        per_iteration = simplex_units(m, k, 1) * self.scale
        h.setOptionValue("simplex_iteration_limit", int(min(until.left() / per_iteration + 1, 2 ** 30)))
        if until.deadline is not None:  # HiGHS's run clock accumulates
            h.setOptionValue("time_limit", h.getRunTime() + max(until.deadline - time.perf_counter(), 0.0) + 0.05)
        h.run()
        until.charge(simplex_units(m, k, max(int(h.getInfo().simplex_iteration_count), 1)) * self.scale)
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kIterationLimit:
            until.charge(until.left())  # the work ran out inside the LP: the unit is cut off
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        return -np.asarray(h.getSolution().row_dual)

def normalised(X: np.ndarray) -> np.ndarray:
    """Rows of X scaled to unit l1 norm (the key-move proxy is flat at ``XAY = I`` otherwise)."""
    return X / np.maximum(np.abs(X).sum(axis=1, keepdims=True), 1e-300)


def feasible(A: np.ndarray, X0: np.ndarray, Y: np.ndarray) -> np.ndarray | None:
    """``(X0 A Y)^{-1} X0``: an X with ``X A Y = I`` spanned by the rows of X0 (None if singular)."""
    try:
        X = np.linalg.solve(X0 @ A @ Y, X0)
    except np.linalg.LinAlgError:
        return None
    return X if np.isfinite(X).all() else None
