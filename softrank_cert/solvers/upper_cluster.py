"""Upper construction ``cluster`` (UNTRUSTED): rank <= number of clusters.

* Query clustering: k-means of the attention rows into ``rank`` clusters; ``W`` = the
  centroids, and each row then takes its exact l1-best combination of them (at least as
  good as replacing it by its own centroid).
* Key clustering: k-means of the attention columns into ``rank`` groups; ``W`` = the group
  indicators, so each row becomes piecewise constant over groups (its exact l1 fit is the
  within-group median).

The better of the two (max-row-l1 error) is returned.
"""

from __future__ import annotations

import numpy as np
from scipy.cluster.vq import kmeans2

from .dense import Dense, as_dense, row_errors
from .l1 import l1_rows


def _basis_fit(A: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    W = W[:, np.abs(W).sum(axis=0) > 0]
    U = l1_rows(A, W)
    return U, W, float(row_errors(A, U, W).max())


def cluster(A: "Dense | np.ndarray", rank: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Factors (m x r', N x r'), r' <= rank, from the better of query and key clustering."""
    a = as_dense(A).A
    centroids, _ = kmeans2(a, rank, minit="++", seed=seed)
    best = _basis_fit(a, centroids.T)
    _, labels = kmeans2(a.T.copy(), rank, minit="++", seed=seed)
    groups = np.zeros((a.shape[1], rank))
    groups[np.arange(a.shape[1]), labels] = 1.0
    keyed = _basis_fit(a, groups)
    U, W, _ = min(best, keyed, key=lambda item: item[2])
    return U, W
