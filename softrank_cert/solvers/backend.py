"""Array back ends of the untrusted searches: where the smoothed evaluations and L-BFGS run.

The witness search (:mod:`.upper.smooth`, :mod:`.lbfgs`) and the large-k key sides
(:mod:`.lower.smooth_key`) are written once against the small set of operations of
:class:`NumpyBackend`; :class:`~softrank_cert.solvers.torch_backend.TorchBackend` does the same
operations on torch tensors on any device (CPU or CUDA).  A back end only *proposes*: what it
finds comes back as float64 numpy arrays (:meth:`NumpyBackend.to_numpy`), and the kernel
decides every end from those, exactly as for the numpy path.

``cost`` is the factor on every work charge of what runs here (:mod:`.work`): 1 for numpy (the
calibration machine's CPU), the measured or recorded cost of the device otherwise
(:mod:`.device`).  :data:`NUMPY` performs exactly the operations the numpy path always did, so
its certificates are unchanged byte for byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from ..util.dense import row_errors


class ArrayBackend:
    """The operations that numpy and torch spell alike, written once: ``xp`` is the array module
    (numpy or torch), whose functions of these names do the same thing on its arrays."""

    xp: Any

    # -- vectors of L-BFGS --------------------------------------------------------------
    def empty_like(self, x: Any) -> Any:
        return self.xp.empty_like(x)

    def scale_into(self, x: Any, t: float, out: Any) -> None:
        """``out = t x``."""
        self.xp.multiply(x, t, out=out)

    def add_into(self, a: Any, b: Any, out: Any) -> None:
        self.xp.add(a, b, out=out)

    def subtract_into(self, a: Any, b: Any, out: Any) -> None:
        self.xp.subtract(a, b, out=out)

    def dot(self, a: Any, b: Any) -> float:
        return float(self.xp.dot(a, b))

    # -- matrices of the witness search ---------------------------------------------------
    def rebalance(self, U: Any, W: Any) -> tuple[Any, Any]:
        """Same product ``U W^T`` with orthonormal ``W`` (``W = Q R``, ``U <- U R^T``)."""
        q, rr = self.xp.linalg.qr(W)
        return U @ rr.T, q

    # -- key sides of the large-k lower family --------------------------------------------
    def all_finite(self, a: Any) -> bool:
        return bool(self.xp.isfinite(a).all())

    def max_row_l1(self, Y: Any) -> float:
        return float(self.xp.abs(Y).sum(axis=1).max())

    def smooth_key(self, Y: Any, tau: float, delta: float) -> tuple[float, Any]:
        """Value of the key-side surrogate of :mod:`.lower.smooth_key` at ``Y`` and its gradient
        in ``Y`` (before projection)."""
        xp = self.xp
        root = xp.sqrt(Y * Y + delta * delta)
        s = (root - delta).sum(axis=1)
        top = s.max()
        w = xp.exp(tau * (s - top))
        total = w.sum()
        p = w / total
        G = (p[:, None] * Y) / root
        return float(top + xp.log(total) / tau), G


class NumpyBackend(ArrayBackend):
    """The numpy path: float64 vectors, float32 (or float64) evaluations, one CPU core."""

    name = "numpy"
    cost = 1.0
    xp = np

    # -- vectors of L-BFGS --------------------------------------------------------------
    def copy64(self, x: Any) -> Any:
        """A float64 copy of ``x``."""
        return np.array(x, dtype=np.float64)

    def norm(self, a: Any) -> float:
        return float(np.linalg.norm(a))

    # -- matrices of the witness search ---------------------------------------------------
    def matrix(self, memo: dict, A: np.ndarray, dtype: type) -> Any:
        """``A`` in ``dtype`` on this back end (kept in the operator's ``memo``)."""
        if dtype is np.float64:
            return A
        return memo.setdefault(("A", np.dtype(dtype).str), A.astype(dtype))

    def factors(self, U: np.ndarray, W: np.ndarray) -> tuple[Any, Any]:
        """float64 copies of a witness's factors on this back end."""
        return np.array(U, dtype=np.float64), np.array(W, dtype=np.float64)

    def clone(self, a: Any) -> Any:
        return a.copy()

    def flat(self, U: Any, W: Any) -> Any:
        """``U`` and ``W`` as one float64 vector (rows of ``U``, then rows of ``W``)."""
        return np.concatenate([U.ravel(), W.ravel()])

    def max_row_error(self, A: Any, U: Any, W: Any) -> float:
        """float64 ``max_i sum_j |A - U W^T|_ij``."""
        return float(row_errors(A, U, W).max())

    def row_errors(self, A: Any, U: Any, W: Any) -> Any:
        """float64 ``sum_j |A - U W^T|_ij`` of every row (a vector of this back end)."""
        return row_errors(A, U, W)

    def rows_at_least(self, values: Any, level: float) -> Any:
        """Indices (ascending, an index array of this back end) of the entries ``>= level``."""
        return np.flatnonzero(values >= level)

    def smooth_witness(self, A_eval: Any, U: Any, W: Any, tau: float, delta: float) -> tuple[float, Any]:
        """Value and float64 gradient (flat, as :meth:`flat`) of the smoothed objective of
        :mod:`.upper.smooth` at ``(U, W)``, evaluated in ``A_eval``'s precision."""
        n = A_eval.shape[1]
        dt = A_eval.dtype
        U, W = U.astype(dt, copy=False), W.astype(dt, copy=False)
        R = U @ W.T
        np.subtract(A_eval, R, out=R)
        S = np.multiply(R, R)
        S += dt.type(delta * delta)
        np.sqrt(S, out=S)
        f = (S.sum(axis=1, dtype=np.float64) - n * delta)
        top = f.max()
        z = np.exp(tau * (f - top))
        total = z.sum()
        value = top + np.log(total) / tau
        p = (z / total).astype(dt)
        np.divide(R, S, out=R)
        del S
        R *= p[:, None]
        gU, gW = -(R @ W), -(R.T @ U)
        return float(value), np.concatenate([gU.ravel(), gW.ravel()]).astype(np.float64)

    # -- key sides of the large-k lower family --------------------------------------------
    def key_matrix(self, C: np.ndarray) -> Any:
        return C

    def cholesky(self, M: Any) -> Any | None:
        """A Cholesky factor of the symmetric ``M`` (None when it is not positive definite)."""
        try:
            return scipy.linalg.cho_factor(M)
        except np.linalg.LinAlgError:
            return None

    def cho_solve(self, factor: Any, B: Any) -> Any:
        return scipy.linalg.cho_solve(factor, B)

    def eye(self, k: int) -> Any:
        return np.eye(k)

    def zeros(self, shape: tuple[int, ...]) -> Any:
        return np.zeros(shape)

    # -- results --------------------------------------------------------------------------
    def to_numpy(self, a: Any) -> np.ndarray:
        """``a`` as a float64 numpy array on the CPU (``a`` itself when it is one)."""
        return np.asarray(a, dtype=np.float64)

    def provenance(self) -> dict[str, str]:
        """What a certificate records of this back end (nothing for the numpy path)."""
        return {}


#: The numpy path (the default).
NUMPY = NumpyBackend()
