"""float64 interaction geometry (UNTRUSTED): C, b, the retained part T and its factors.

These are estimates used to *choose* a retained part ``T``; everything reported as certified
is recomputed from exact inputs by ``softrank_cert.geometry.bounds``.  docs/design.md
section 1: ``C = P_m S P_N``, ``b`` = column means of ``S P_N``, ``A = softmax(C + 1 b^T)``.
"""

from __future__ import annotations

import numpy as np

from ..kernel import Operator
from .bounds import require_common_support
from ..util.dense import beta_float, softmax_rows


def scores_float(op: Operator) -> np.ndarray:
    """float64 scores ``S`` of a ``qk``/``scores`` operator."""
    require_common_support(op)
    if op.kind == "scores":
        return np.array(op.arrays["S"], dtype=np.float64)
    Q, K = op.arrays["Q"], op.arrays["K"]
    return beta_float(op) * (Q @ K.T)


def double_centre(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(C, b)``: ``C = P_m S P_N`` and ``b`` = column means of ``S P_N`` (float64)."""
    row = S.mean(axis=1, keepdims=True)
    col = S.mean(axis=0, keepdims=True)
    grand = S.mean()
    C = S - row - col + grand
    b = (col - grand).ravel()
    return C, b


def interaction_float(op: Operator) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``(C, b)`` of an operator."""
    return double_centre(scores_float(op))


def balanced_factors(T: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank-r truncated SVD as balanced factors ``X = U_r sqrt(s)``, ``Y = V_r sqrt(s)``.

    Returns ``(X, Y, s)`` with all singular values ``s`` of ``T``.
    """
    U, s, Vt = np.linalg.svd(T, full_matrices=False)
    root = np.sqrt(s[:r])
    return U[:, :r] * root, Vt[:r].T * root, s


def numerical_rank(s: np.ndarray, rtol: float = 1e-12) -> int:
    """Number of singular values above ``rtol * s_max`` (a float64 estimate)."""
    return int((s > rtol * s[0]).sum()) if s.size and s[0] > 0 else 0


def retained_softmax(T: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 ``A_T = softmax_rows(T + 1 b^T)``."""
    return softmax_rows(T + b[None, :])
