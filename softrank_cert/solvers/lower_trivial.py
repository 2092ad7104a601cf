"""Lower certificate ``trivial`` (UNTRUSTED): ``k = 1`` from one row and the all-ones column.

``X = e_i^T``, ``Y = 1``: ``XAY`` is the row sum of row i, so the threshold is that row sum
(exactly 1 for softmax rows).  The row with the largest sum is taken.
"""

from __future__ import annotations

import numpy as np

from .dense import Dense, as_dense


def trivial(A: "Dense | np.ndarray", k: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
    """``(X, Y)`` for ``k = 1`` (None for any other k)."""
    if k != 1:
        return None
    a = as_dense(A).A
    X = np.zeros((1, a.shape[0]))
    X[0, int(np.argmax(a.sum(axis=1)))] = 1.0
    return X, np.ones((a.shape[1], 1))
