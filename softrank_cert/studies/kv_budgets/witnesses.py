"""An eviction policy's kept set as an ordinary upper witness (UNTRUSTED construction; the kernel checks it).

Keeping the set ``S`` (``s`` key positions) and renormalising gives row ``i`` the probabilities
``a_ij / sigma_i`` on ``S`` and 0 elsewhere, ``sigma_i = sum_{j in S} a_ij``.  That matrix is
``U W^T`` with ``W`` (N x s) selecting the columns of ``S`` (``W[S[t], t] = 1``) and ``U``
(m x s) holding the renormalised rows (``U[i, t] = a_{i S[t]} / sigma_i``): rank at most ``s``,
error exactly ``max_i 2 (1 - sigma_i)`` on softmax rows (``proofs/kv-budgets.md``, Theorem
KV2).  The factors are float64: what the kernel verifies is exactly ``U W^T`` as written here
(``W`` is 0/1, so every product ``U_it W_jt`` and every sum of them is exact in float64).
"""

from __future__ import annotations

import numpy as np

#: The certificate's ``construction`` of a policy witness: ``kv-<policy name>``.
CONSTRUCTION_PREFIX = "kv-"


def construction(policy_name: str) -> str:
    """The ``construction`` recorded for the witness of policy ``policy_name``."""
    return CONSTRUCTION_PREFIX + policy_name


def policy_witness(A: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(U, W)`` of the renormalised eviction that keeps the key positions ``kept`` (distinct,
    in any order) of the float64 attention matrix ``A`` (m x N); None when some row keeps no mass
    (``sigma_i = 0`` in float64: renormalisation is undefined, and the theorem does not cover it)."""
    A = np.asarray(A, dtype=np.float64)
    kept = np.asarray(kept, dtype=np.int64)
    part = A[:, kept]
    sigma = part.sum(axis=1, keepdims=True)
    if not (sigma > 0).all():
        return None
    U = np.ascontiguousarray(part / sigma)
    W = np.zeros((A.shape[1], len(kept)))
    W[kept, np.arange(len(kept))] = 1.0
    return U, W


__all__ = ["CONSTRUCTION_PREFIX", "construction", "policy_witness"]
