"""Batched weighted l1 regressions by warm-started HiGHS dual simplex (UNTRUSTED).

For a fixed design ``D`` (n x r) and many right-hand sides ``b`` (columns of ``B``),
:class:`L1Fitter` computes ``x_b = argmin_x sum_i w_i |b_i - (D x)_i|`` exactly.  It solves
the LP dual ``max b^T z  s.t.  D^T z = 0,  -w <= z <= w`` (n box-bounded variables, r
equality rows: far smaller than the primal) and reads ``x`` off the row duals.  One HiGHS
model is kept and only its costs (and bounds, for new weights) change between solves, so
each solve starts from the previous optimal basis.
"""

from __future__ import annotations

import os
import sys

import highspy
import numpy as np


def _quiet_highs() -> "highspy.Highs":
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


class L1Fitter:
    """Exact weighted l1 regressions against one design matrix ``D`` (n x r)."""

    def __init__(self, D: np.ndarray) -> None:
        self.D = np.ascontiguousarray(D, dtype=np.float64)
        n, r = self.D.shape
        self._idx = np.arange(n, dtype=np.int32)
        self._weights = np.ones(n)
        h = _quiet_highs()
        h.setOptionValue("threads", 1)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, r
        lp.col_cost_ = np.zeros(n)
        lp.col_lower_, lp.col_upper_ = -self._weights, self._weights.copy()
        lp.row_lower_, lp.row_upper_ = np.zeros(r), np.zeros(r)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(r + 1, dtype=np.int32) * n
        lp.a_matrix_.index_ = np.tile(self._idx, r)
        lp.a_matrix_.value_ = np.ascontiguousarray(self.D.T).ravel()
        h.passModel(lp)
        self._h = h

    def fit(self, B: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Return ``X`` (r x s): column b minimises ``sum_i w_i |B_ib - (D X_b)_i|``.

        ``weights`` (length n, >= 0) default to all ones.  A column whose LP does not
        solve to optimality falls back to least squares (still a valid float64 proposal).
        """
        n, r = self.D.shape
        B = np.asarray(B, dtype=np.float64).reshape(n, -1)
        if weights is not None:
            w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
            self._h.changeColsBounds(n, self._idx, -w, w)
        X = np.empty((r, B.shape[1]))
        for b in range(B.shape[1]):
            self._h.changeColsCost(n, self._idx, -B[:, b])
            self._h.run()
            if self._h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
                X[:, b] = -np.asarray(self._h.getSolution().row_dual)
            else:
                X[:, b] = np.linalg.lstsq(self.D, B[:, b], rcond=None)[0]
        return X


def l1_rows(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``U`` (m x r) whose row i minimises ``||a_i - W u_i||_1``: the exact best U for this W."""
    return L1Fitter(W).fit(A.T).T
