"""Upper construction ``skeleton`` (UNTRUSTED): a cross / CUR approximation.

Rows ``I`` and columns ``J`` (|I| = |J| = rank) are the first pivots of complete pivoting
(maxvol-like).  The cross approximation is ``B = A[:, J] A[I, J]^{-1} A[I, :]``; its row
space is spanned by the actual attention rows ``A[I, :]``, so every row's coefficients are
then re-fitted by exact l1 regression on those rows (never worse than the plain cross).
"""

from __future__ import annotations

import numpy as np

from .dense import Dense, as_dense, row_errors
from .l1 import l1_rows
from .lower_pivot import pivot_order


def skeleton(A: "Dense | np.ndarray", rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Factors (m x r, N x r) with ``W = A[I, :]^T`` and the better of the cross and l1 ``U``."""
    d = as_dense(A)
    if "pivot_order" not in d.memo:
        d.memo["pivot_order"] = pivot_order(d.A)
    rows, cols = d.memo["pivot_order"]
    I, J = rows[:rank], cols[:rank]
    W = d.A[I].T.copy()
    try:
        cross = np.linalg.solve(d.A[np.ix_(I, J)].T, d.A[:, J].T).T  # A[:, J] A[I, J]^{-1}
    except np.linalg.LinAlgError:
        cross = None
    U = l1_rows(d.A, W)
    if cross is not None and row_errors(d.A, cross, W).max() < row_errors(d.A, U, W).max():
        U = cross
    return U, W
