"""Upper construction ``alt_l1``: alternating minimisation of ``||A - U W^T||`` (UNTRUSTED).

* U-step (exact): for fixed ``W`` the objective separates by rows; row i takes the l1
  regression ``u_i = argmin ||a_i - W u||_1``.
* W-step (dualised): ``min_W max_i f_i(W)`` with ``f_i(W) = sum_j |A_ij - u_i . w_j|``
  equals ``max_lambda min_W sum_i lambda_i f_i(W)`` over the simplex (convex in W, linear
  in lambda).  For fixed ``lambda`` it splits into one weighted l1 regression per column
  ``j`` (design ``U``, weights ``lambda``); ``lambda`` follows multiplicative weights
  toward the rows with the largest error, and the best ``W`` seen is kept.

Every step keeps the best pair found, so the result is never worse than the start.
"""

from __future__ import annotations

import time

import numpy as np

from .dense import Dense, as_dense, row_errors
from .l1 import L1Fitter, l1_rows


def _w_step(A: np.ndarray, U: np.ndarray, W: np.ndarray, rounds: int, eta: float) -> np.ndarray:
    """Multiplicative-weights W-step: returns the W with the smallest max row error seen."""
    errors = row_errors(A, U, W)
    best, best_err = W, errors.max()
    fitter = L1Fitter(U)
    lam = np.exp(eta * (errors - best_err) / max(best_err, 1e-300))
    for _ in range(rounds):
        lam /= lam.sum()
        W_new = fitter.fit(A, weights=lam).T
        errors = row_errors(A, U, W_new)
        if errors.max() < best_err:
            best, best_err = W_new, errors.max()
        lam *= np.exp(eta * errors / errors.max())
    return best


def alt_l1(A: "Dense | np.ndarray", rank: int, *, start: tuple[np.ndarray, np.ndarray] | None = None,
           sweeps: int = 3, rounds: int = 5, eta: float = 4.0, seconds: float | None = None,
           ) -> tuple[np.ndarray, np.ndarray]:
    """Alternate exact U-steps and dualised W-steps from ``start`` (default: ``l1_polish``).

    ``sweeps`` alternations of (W-step with ``rounds`` multiplicative-weight rounds, U-step);
    stops early when a sweep gains < 0.1 % or after ``seconds``.
    """
    d = as_dense(A)
    if start is None:
        from .upper_l1_polish import l1_polish
        start = l1_polish(d, rank)
    U, W = start
    err = row_errors(d.A, U, W).max()
    t0 = time.perf_counter()
    for _ in range(sweeps):
        W_new = _w_step(d.A, U, W, rounds, eta)
        U_new = l1_rows(d.A, W_new)
        new_err = row_errors(d.A, U_new, W_new).max()
        if new_err < err:
            U, W, gain, err = U_new, W_new, err - new_err, new_err
        else:
            break
        if gain < 1e-3 * err or (seconds is not None and time.perf_counter() - t0 > seconds):
            break
    return U, W
