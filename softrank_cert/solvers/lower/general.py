"""Lower pairs with a GENERAL key side: a query selection and the LP-optimal ``Y`` (UNTRUSTED).

Theorem L (proofs/lower-certificate.md): ``r_eps(A) >= k`` for every
``eps < T = 1 / (||X|| ||Y|| ||(X A Y)^{-1}||)`` (max-row-l1 norms).  WLOG ``X A Y = I`` (replace
``Y`` by ``Y (XAY)^{-1}``), and then ``T = 1 / (||X|| ||Y||)``.  The signed key groups of
:mod:`.search` fix ``||Y|| = 1`` and can only reach the spans of signed key groups; here
``Y`` is any N x k matrix:

* **Y-step** (:class:`KeyLP`): for fixed ``X`` with ``C = X A`` (k x N), the LP
  ``min t  s.t.  C Y = I,  sum_b |Y_jb| <= t  (every key j)`` gives the ``Y`` of least
  ``||Y||`` with ``X A Y = I``, so ``T = 1 / (||X|| t)``.  Rows of ``Y`` outside a key subset
  ``S`` may be fixed at zero (``C_S Y_S = I``): still a feasible ``Y``, so a valid pair, only
  ``t`` may grow -- the LP then has ``2 |S| k + 1`` columns instead of ``2 N k + 1``;
* **X-step**: for fixed ``Y``, the float64 LP of :class:`.lp.RowLP`;
* the two steps alternate from a **selection** ``X`` (k rows of A: pivoted QR of the centred
  square-root profiles, complete pivoting, or the rows the signed-group search leans on), where
  ``||X|| = 1``; each step minimises the threshold's denominator in one factor, so the best pair
  seen is kept.  Started from a signed-group pair instead, the Y-step is (measured) a fixed
  point: the gain comes from starting at a selection.

Every pair is an ordinary float64 ``(X, Y)`` that the kernel verifies like any other; nothing
here is trusted.  Work is charged to the caller's :class:`~softrank_cert.solvers.work.Until` per simplex iteration.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from ...util.dense import threshold
from .lp import RowLP, fresh, quiet_highs
from ..work import CALL_UNITS, Until, entries_units

#: Largest number of LP columns (``2 |S| k + 1``): the key subset is cut to fit, down to
#: :data:`MIN_KEYS_PER_QUERY` keys per query (a Y-step at k = 28 on all 128 keys, 7,169
#: columns, took 8.5 s).
MAX_COLUMNS = 4000
MIN_KEYS_PER_QUERY = 3
#: Keys kept per query row of the selection at least (the largest entries of ``C``), before the
#: subset is filled up by the largest column maxima.
KEYS_PER_ROW = 3
#: Work of one simplex iteration: fixed units plus flops per constraint nonzero (fitted on one
#: core: 26-33 us per iteration at 2-6 thousand nonzeros, 152 us at 108 thousand, 333 us at
#: 251 thousand, 5,300 units per second).
ITERATION_UNITS, ITERATION_FLOPS_PER_NONZERO = 0.1, 6.5


def key_support(C: np.ndarray, size: int) -> np.ndarray:
    """Sorted key subset of at most ``size`` keys: every row's :data:`KEYS_PER_ROW` largest
    ``|C_aj|``, then the keys of largest ``max_a |C_aj|``."""
    k, n = C.shape
    if size >= n:
        return np.arange(n)
    mag = np.abs(C)
    chosen = set(np.argsort(-mag, axis=1)[:, :KEYS_PER_ROW].ravel().tolist())
    for j in np.argsort(-mag.max(axis=0), kind="stable"):
        if len(chosen) >= size:
            break
        chosen.add(int(j))
    return np.array(sorted(chosen)[:max(size, k)])


class KeyLP:
    """The Y-step LP ``min max_j ||Y_j||_1  s.t.  C Y = I`` on a key subset, by HiGHS."""

    def __init__(self, scale: float = 1.0) -> None:
        self._h = quiet_highs()
        self.scale = scale  # factor on the per-iteration charge (.work.key_lp_scale of the operator)

    def solve(self, C: np.ndarray, until: Until, keys: np.ndarray | None = None) -> np.ndarray | None:
        """``Y`` (N x k) with ``C Y = I`` (up to the LP's tolerances; the caller recomputes the
        threshold of the pair it gets) and least ``max_j ||Y_j||_1`` among those zero outside
        ``keys`` (default: as many keys as :data:`MAX_COLUMNS` allows, :func:`key_support`).
        None if the LP is infeasible (``C_S`` of rank < k), fails, or runs out of ``until``."""
        k, n = C.shape
        if keys is None:
            keys = key_support(C, max(MIN_KEYS_PER_QUERY * k, (MAX_COLUMNS - 1) // (2 * k)))
        s = len(keys)
        if s < k or until.reached():
            return None
        eq = sp.kron(sp.csr_matrix(C[:, keys]), sp.identity(k), format="csr")  # row (a, b), column (j, b)
        rows = sp.kron(sp.identity(s), np.ones((1, k)), format="csr")  # row j: sum_b of (j, b)
        M = sp.vstack([sp.hstack([eq, -eq, sp.csr_matrix((k * k, 1))]),
                       sp.hstack([rows, rows, -np.ones((s, 1))])], format="csr")
        cols = 2 * s * k + 1
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols, M.shape[0]
        cost = np.zeros(cols)
        cost[-1] = 1.0
        lp.col_cost_ = cost
        lp.col_lower_, lp.col_upper_ = np.zeros(cols), np.full(cols, np.inf)
        rhs = np.eye(k).ravel()
        lp.row_lower_ = np.concatenate([rhs, np.full(s, -np.inf)])
        lp.row_upper_ = np.concatenate([rhs, np.zeros(s)])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = M.indptr.astype(np.int32)
        lp.a_matrix_.index_ = M.indices.astype(np.int32)
        lp.a_matrix_.value_ = M.data.astype(np.float64)
        h = self._h
        fresh(h)  # a solve depends on its C alone, not on the solves before it
        h.passModel(lp)
        per_iteration = (ITERATION_UNITS + entries_units(ITERATION_FLOPS_PER_NONZERO * M.nnz)) * self.scale
        h.setOptionValue("simplex_iteration_limit", int(min(until.left() / per_iteration + 1, 2 ** 30)))
        if until.deadline is not None:
            import time

            h.setOptionValue("time_limit", h.getRunTime() + max(until.deadline - time.perf_counter(), 0.0) + 0.05)
        h.run()
        until.charge(CALL_UNITS + per_iteration * max(int(h.getInfo().simplex_iteration_count), 1))
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kIterationLimit:
            until.charge(until.left())  # the work ran out inside the LP: the unit is cut off
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        x = np.asarray(h.getSolution().col_value)
        Y = np.zeros((n, k))
        Y[keys] = (x[:s * k] - x[s * k:2 * s * k]).reshape(s, k)
        return Y


def alternate(A: np.ndarray, X: np.ndarray, key_lp: KeyLP, row_lp: RowLP, until: Until,
              sweeps: int = 2) -> tuple[np.ndarray, np.ndarray, float] | None:
    """From query side ``X``: Y-step, then ``sweeps`` rounds of X-step and Y-step; the pair of
    the largest float64 threshold seen, with it (None if the first Y-step fails)."""
    m, n = A.shape
    k = X.shape[0]
    until.charge(entries_units(2.0 * k * m * n))
    Y = key_lp.solve(X @ A, until)
    if Y is None:
        return None
    best = (X, Y, threshold(A, X, Y))
    for _ in range(sweeps):
        until.charge(entries_units(4.0 * k * m * n))
        X2 = row_lp.solve(A @ Y, until)
        if X2 is None:
            break
        t = threshold(A, X2, Y)
        if t > best[2]:
            best = (X2, Y, t)
        Y2 = key_lp.solve(X2 @ A, until)
        if Y2 is None:
            break
        t2 = threshold(A, X2, Y2)
        if t2 <= best[2] * (1 + 1e-6):
            break
        X, Y, best = X2, Y2, (X2, Y2, t2)
    return best
