"""Upper construction ``tsvd``: the truncated SVD ``U = u_r diag(s_r)``, ``W = v_r`` (UNTRUSTED)."""

from __future__ import annotations

import numpy as np

from .dense import Dense, as_dense


def tsvd(A: "Dense | np.ndarray", rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Best Frobenius rank-``rank`` approximation of ``A`` as factors (m x r, N x r)."""
    u, s, vt = as_dense(A).svd
    return u[:, :rank] * s[:rank], vt[:rank].T.copy()
