"""Float64 view of an attention operator (UNTRUSTED) and the max-row-l1 norm helpers, shared by
the solvers and the geometry (a utility layer below both: docs/design.md section 2).

Everything here is plain float64: good enough to *propose* bracket ends, never to prove
them (the kernel does that).  :class:`Dense` carries the float64 matrix ``A`` together
with what some constructions need (the mask, the ``Q``/``K`` factors of a ``qk``
operator) and caches the SVD, which several constructions share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the float64 helpers run without the kernel's Arb (e.g. the device benchmark)
    from ..kernel import Operator


def softmax_rows(S: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
    """Row softmax of ``S`` with the max subtracted; entries where ``allowed`` is False are 0."""
    S = np.array(S, dtype=np.float64)
    if allowed is not None:
        S[~allowed] = -np.inf
    S -= S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


def beta_float(op: Operator) -> float:
    """float64 value of the score scale of a ``qk`` operator."""
    if op.beta == "inv_sqrt_d":
        return 1.0 / np.sqrt(op.head_dim)  # type: ignore[arg-type]  # inv_sqrt_d: a qk operator, with a head_dim
    return float(op.beta)


def attention_matrix(op: Operator) -> np.ndarray:
    """float64 ``A`` of ``op`` (stable softmax, causal zeros exact)."""
    if op.kind == "probabilities":
        return np.array(op.arrays["A"], dtype=np.float64)
    allowed = op.allowed()
    if op.kind == "scores":
        return softmax_rows(op.arrays["S"], allowed)
    Q, K = op.arrays["Q"], op.arrays["K"]
    return softmax_rows(beta_float(op) * (Q @ K.T), allowed)


def norm(E: np.ndarray) -> float:
    """Max-row-l1 norm ``max_i sum_j |E_ij|`` (0 for an empty matrix)."""
    return float(np.abs(E).sum(axis=1).max()) if E.size else 0.0


def row_errors(A: np.ndarray, U: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Per-row l1 errors ``sum_j |A_ij - (U W^T)_ij|`` (one m x N temporary)."""
    R = np.asarray(U @ W.T, dtype=np.result_type(A, U, W))
    np.subtract(A, R, out=R)
    np.abs(R, out=R)
    return R.sum(axis=1)


def witness_error(A: np.ndarray, U: np.ndarray, W: np.ndarray) -> float:
    """``||A - U W^T||`` in float64."""
    return float(row_errors(A, U, W).max())


def threshold(A: np.ndarray, X: np.ndarray, Y: np.ndarray) -> float:
    """float64 estimate of ``1 / (||X|| ||Y|| ||(X A Y)^{-1}||)``; 0 when ``XAY`` is singular."""
    M = X @ A @ Y
    try:
        inv = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        return 0.0
    if not np.isfinite(inv).all():
        return 0.0
    return 1.0 / (norm(X) * norm(Y) * norm(inv))


@dataclass(eq=False)
class Dense:
    """float64 data of one operator, shared by all constructions.

    ``A`` (m x N), ``allowed`` (True where ``A_ij`` may be nonzero), and for ``qk``
    operators the scaled factors ``Qs = sqrt(beta) Q`` and ``Ks = sqrt(beta) K`` (so
    ``S = Qs Ks^T``).  ``memo``
    is a per-operator cache that constructions share (e.g. the complete-pivoting order).
    """

    A: np.ndarray
    allowed: np.ndarray | None = None
    Qs: np.ndarray | None = None
    Ks: np.ndarray | None = None
    memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, op: Operator) -> Dense:
        Qs = Ks = None
        if op.kind == "qk":
            root = np.sqrt(beta_float(op))
            Qs, Ks = root * op.arrays["Q"], root * op.arrays["K"]
        allowed = None if op.mask == "none" else op.allowed()
        return cls(attention_matrix(op), allowed, Qs, Ks)

    @property
    def shape(self) -> tuple[int, int]:
        return self.A.shape

    @property
    def p(self) -> int:
        return min(self.A.shape)

    @cached_property
    def svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Thin SVD ``(u, s, vt)`` of ``A``."""
        return np.linalg.svd(self.A, full_matrices=False)


def as_dense(a: Dense | np.ndarray) -> Dense:
    """Accept either a :class:`Dense` or a bare float64 matrix."""
    return a if isinstance(a, Dense) else Dense(np.asarray(a, dtype=np.float64))
