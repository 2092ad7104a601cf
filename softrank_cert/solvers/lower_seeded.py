"""Lower certificate ``seeded`` (UNTRUSTED): pooling grown around complete-pivoting seeds.

``pivot`` keeps single entries and suits peaked heads; ``pooled`` clusters profiles and
suits diffuse ones.  This method joins them: the first k complete pivots ``(i_a, j_a)`` of A
seed k query clusters and k key groups.  Query i joins the seed whose key it weights most,
relative to the other seed keys, if that share is above 1/2; key j joins the seed query
that weights it most, relative to the key's mean over seed queries, if the ratio is above
1.1; then the greedy local moves of ``pooled`` raise the threshold ``1/||(XAY)^{-1}||``.
"""

from __future__ import annotations

import numpy as np

from .dense import Dense, as_dense
from .lower_pivot import pivot_order
from .lower_pooled import local_moves, matrices


def seeded(A: "Dense | np.ndarray", k: int, *, passes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Pooled ``(X, Y)`` grown from the first k complete pivots, refined by local moves."""
    d = as_dense(A)
    if "pivot_order" not in d.memo:
        d.memo["pivot_order"] = pivot_order(d.A)
    rows, cols = d.memo["pivot_order"]
    I, J = rows[:k], cols[:k]
    share = d.A[:, J] / np.maximum(d.A[:, J].sum(axis=1, keepdims=True), 1e-300)  # m x k
    qlab = np.where(share.max(axis=1) > 0.5, share.argmax(axis=1), -1)
    qlab[I] = np.arange(k)
    ratio = d.A[I] / np.maximum(d.A[I].mean(axis=0), 1e-300)  # k x N
    klab = np.where(ratio.max(axis=0) > 1.1, ratio.argmax(axis=0), -1)
    klab[J] = np.arange(k)
    qlab, klab, _ = local_moves(d.A, qlab, klab, k, passes, np.random.default_rng(0))
    return matrices(d.A, qlab, klab, k)
