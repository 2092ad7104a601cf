"""Lower certificate ``lp_alternation`` (UNTRUSTED): alternate two exact LPs on (X, Y).

WLOG ``X A Y = I`` (replace X by ``(XAY)^{-1} X``: the threshold cannot drop), and then the
threshold is ``1 / (||X|| ||Y||)``.

* X-step: for fixed Y with ``B = A Y``, each row of X independently solves
  ``min ||x||_1  s.t.  x^T B = e_a^T`` (k small LPs).
* Y-step: for fixed X with ``C = X A``, ``min max_j ||Y_j||_1  s.t.  C Y = I`` (one LP).

Both steps are exact minimisations of the threshold's denominator in one factor, so the
best pair seen is kept and returned; started from ``pooled``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .dense import Dense, as_dense, threshold


def x_step(A: np.ndarray, Y: np.ndarray) -> np.ndarray | None:
    """Row-wise l1-minimal ``X`` with ``X A Y = I`` (None if an LP fails)."""
    B = A @ Y
    m, k = B.shape
    c = np.ones(2 * m)
    A_eq = np.hstack([B.T, -B.T])
    X = np.empty((k, m))
    for a in range(k):
        res = linprog(c, A_eq=A_eq, b_eq=np.eye(k)[a], bounds=(0, None), method="highs")
        if res.status != 0:
            return None
        X[a] = res.x[:m] - res.x[m:]
    return X


def y_step(A: np.ndarray, X: np.ndarray, seconds: float = 5.0) -> np.ndarray | None:
    """``Y`` with ``X A Y = I`` minimising the largest row l1 norm (interior point; None if
    the LP fails or takes more than ``seconds``)."""
    C = X @ A
    k, n = C.shape
    eq = sp.kron(sp.csr_matrix(C), sp.identity(k), format="csr")  # (a,b) x (j,b')
    rows = sp.kron(sp.identity(n), np.ones((1, k)), format="csr")  # j x (j,b)
    A_eq = sp.hstack([eq, -eq, sp.csr_matrix((k * k, 1))], format="csr")
    A_ub = sp.hstack([rows, rows, -np.ones((n, 1))], format="csr")
    c = np.zeros(2 * n * k + 1)
    c[-1] = 1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=np.eye(k).ravel(),
                  bounds=(0, None), method="highs-ipm", options={"time_limit": seconds})
    if res.status != 0 or res.x is None:
        return None
    return (res.x[:n * k] - res.x[n * k:2 * n * k]).reshape(n, k)


def lp_alternation(A: "Dense | np.ndarray", k: int, *, start: tuple[np.ndarray, np.ndarray] | None = None,
                   sweeps: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Alternate X- and Y-steps from ``start`` (default: ``pooled``); best pair seen."""
    a = as_dense(A).A
    if start is None:
        from .lower_pooled import pooled
        start = pooled(a, k)
    X, Y = start
    best = (threshold(a, X, Y), X, Y)
    for _ in range(sweeps):
        X = x_step(a, Y)
        if X is None:
            break
        t = threshold(a, X, Y)
        if t > best[0]:
            best = (t, X, Y)
        Y = y_step(a, X)
        if Y is None:
            break
        t = threshold(a, X, Y)
        if t <= best[0] * (1 + 1e-4):
            best = max(best, (t, X, Y), key=lambda item: item[0])
            break
        best = (t, X, Y)
    return best[1], best[2]
