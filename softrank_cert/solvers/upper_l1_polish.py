"""Upper construction ``l1_polish`` (UNTRUSTED).

Keep the row space of the truncated SVD (``W`` = top ``rank`` right singular vectors) and
replace every row's coefficients by the exact l1 regression ``u_i = argmin ||a_i - W u||_1``
(HiGHS, warm-started across rows).  For this ``W`` that is the exact minimiser of the
max-row-l1 error, so it never does worse than ``tsvd``.
"""

from __future__ import annotations

import numpy as np

from .dense import Dense, as_dense
from .l1 import l1_rows


def l1_polish(A: "Dense | np.ndarray", rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Factors (m x r, N x r) with ``W`` the SVD row basis and ``U`` the exact row-wise l1 fit."""
    d = as_dense(A)
    W = d.svd[2][:rank].T.copy()
    return l1_rows(d.A, W), W
