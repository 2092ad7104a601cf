"""Lower certificate ``pivot`` (UNTRUSTED): a k x k submatrix of A with a small inverse.

Rows ``I`` and columns ``J`` are the first k pivots of Gaussian elimination with complete
pivoting; then single row swaps and single column swaps are made while they reduce
``||A[I, J]^{-1}||`` (every candidate swap is scored at once by the Sherman-Morrison
formula).  ``X``/``Y`` are the 0/1 selections, so the threshold is ``1 / ||A[I, J]^{-1}||``.
"""

from __future__ import annotations

import numpy as np

from ...util.dense import Dense, as_dense


def pivot_order(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column orders of complete pivoting (length p = min(m, N))."""
    R = np.array(A, dtype=np.float64)
    m, n = R.shape
    rows, cols = np.arange(m), np.arange(n)
    for s in range(min(m, n)):
        sub = np.abs(R[s:, s:])
        i, j = map(int, np.unravel_index(int(np.argmax(sub)), sub.shape))
        i, j = i + s, j + s
        R[[s, i]], rows[[s, i]] = R[[i, s]], rows[[i, s]]
        R[:, [s, j]], cols[[s, j]] = R[:, [j, s]], cols[[j, s]]
        if R[s, s] == 0.0:
            break
        R[s + 1:, s:] -= np.outer(R[s + 1:, s] / R[s, s], R[s, s:])
    p = min(m, n)
    return rows[:p], cols[:p]


def _best_row_swap(A: np.ndarray, I: np.ndarray, J: np.ndarray, Z: np.ndarray, current: float,
                   transposed: bool) -> tuple[int, int, float] | None:
    """Best (position, new row, ||inverse||) over all swaps of one row of ``A[I, J]``.

    With ``transposed`` the call is on ``A^T`` (a column swap of the original), ``Z`` is the
    inverse transposed, and the norm is still taken over rows of the original inverse.
    """
    outside = np.setdiff1d(np.arange(A.shape[0]), I)
    if outside.size == 0:
        return None
    VZ = A[np.ix_(outside, J)] @ Z  # candidate rows times the inverse
    best = None
    k = len(I)
    for pos in range(k):
        den = VZ[:, pos]
        ok = np.abs(den) > 1e-12
        if not ok.any():
            continue
        w = VZ[ok].copy()
        w[:, pos] -= 1.0
        # Z' = Z - Z[:, pos] w / den  for every candidate (rows of w)
        Zn = Z[None, :, :] - Z[None, :, pos, None] * (w / den[ok, None])[:, None, :]
        norms = np.abs(Zn).sum(axis=1 if transposed else 2).max(axis=1)
        c = int(np.argmin(norms))
        if norms[c] < current * (1 - 1e-9) and (best is None or norms[c] < best[2]):
            best = (pos, int(outside[ok][c]), float(norms[c]))
    return best


def improve(A: np.ndarray, I: np.ndarray, J: np.ndarray, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Alternate best single row swap and best single column swap, ``rounds`` times each."""
    I, J = I.copy(), J.copy()
    for _ in range(rounds):
        moved = False
        for axis in (0, 1):
            M = A[np.ix_(I, J)]
            try:
                Z = np.linalg.inv(M)
            except np.linalg.LinAlgError:
                return I, J
            current = float(np.abs(Z).sum(axis=1).max())
            if axis == 0:
                swap = _best_row_swap(A, I, J, Z, current, False)
                if swap is not None:
                    I[swap[0]], moved = swap[1], True
            else:  # a column swap is a row swap of the transpose
                swap = _best_row_swap(A.T, J, I, Z.T, current, True)
                if swap is not None:
                    J[swap[0]], moved = swap[1], True
        if not moved:
            break
    return I, J


def selection(I: np.ndarray, J: np.ndarray, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """0/1 matrices ``X`` (k x m) selecting rows ``I`` and ``Y`` (N x k) selecting columns ``J``."""
    k = len(I)
    X = np.zeros((k, shape[0]))
    Y = np.zeros((shape[1], k))
    X[np.arange(k), I] = 1.0
    Y[J, np.arange(k)] = 1.0
    return X, Y


def pivot(A: Dense | np.ndarray, k: int, *, rounds: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Selections of a k x k submatrix: complete pivoting refined by ``rounds`` of swaps."""
    d = as_dense(A)
    if "pivot_order" not in d.memo:
        d.memo["pivot_order"] = pivot_order(d.A)
    rows, cols = d.memo["pivot_order"]
    I, J = improve(d.A, rows[:k], cols[:k], rounds)
    return selection(I, J, d.A.shape)
