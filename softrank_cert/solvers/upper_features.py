"""Upper construction ``features`` (UNTRUSTED, ``qk`` operators only).

Kernel features of ``exp(q . k)`` with ``q = sqrt(beta) Q_i``, ``k = sqrt(beta) K_j`` (the
``Qs``/``Ks`` of :class:`~.dense.Dense`):

* FAVOR+ positive random features ``phi(x) = exp(w_l . x - |x|^2/2) / sqrt(r)``,
  ``w_l ~ N(0, I)`` (so ``E phi(q) . phi(k) = exp(q . k)``);
* truncated Taylor features of ``exp(q . k) = sum_n (q . k)^n / n!`` (degrees 0 and 1, and
  the symmetric degree-2 monomials while they fit in the rank).

Row normalisation makes each row of ``phi(Q) phi(K)^T`` sum to one; since the normaliser
is a per-row scale, the witness keeps ``W = phi(K)`` and lets each row take its exact
l1-best coefficients in that span (never worse than the normalised kernel estimate).
The better feature map wins.  Returns None for non-``qk`` operators.
"""

from __future__ import annotations

import numpy as np

from .dense import Dense, row_errors
from .l1 import l1_rows


def favor_plus(x: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Positive random features of the rows of ``x`` (omega: d x r Gaussian)."""
    return np.exp(x @ omega - 0.5 * (x * x).sum(axis=1, keepdims=True) - 0.5 * np.log(omega.shape[1]))


def taylor(x: np.ndarray, rank: int) -> np.ndarray:
    """Taylor features (1, x, x_a x_b / sqrt-weights ...) truncated to ``rank`` columns."""
    n, dim = x.shape
    cols = [np.ones((n, 1)), x]
    iu = np.triu_indices(dim)
    weight = np.where(iu[0] == iu[1], np.sqrt(0.5), 1.0)  # (q.k)^2/2 = sum_a<=b w^2 q_a q_b k_a k_b
    cols.append(x[:, iu[0]] * x[:, iu[1]] * weight)
    return np.hstack(cols)[:, :rank]


def features(A: Dense, rank: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """Factors (m x r, N x r) from the better of FAVOR+ and Taylor key features."""
    if A.Ks is None:
        return None
    rng = np.random.default_rng(seed)
    best = None
    for W in (favor_plus(A.Ks, rng.standard_normal((A.Ks.shape[1], rank))), taylor(A.Ks, rank)):
        W = W / np.maximum(np.abs(W).max(axis=0), 1e-300)
        U = l1_rows(A.A, W)
        err = float(row_errors(A.A, U, W).max())
        if best is None or err < best[0]:
            best = (err, U, W)
    return best[1], best[2]
