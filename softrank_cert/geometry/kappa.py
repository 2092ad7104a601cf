"""Optimised factorizations for kappa(T) (UNTRUSTED float64 search; scipy allowed here).

``kappa(T) = min over T = X Y^T of max_i ||x_i|| max_j ||y_j||`` (docs/design.md section 1).  Every
factorization with the same product is ``(X0 G, Y0 G^{-T})``; we minimise the smoothed
``log max_i ||G^T x_i||^2 + log max_j ||G^{-1} y_j||^2`` (p-norm smoothing, continuation in
p) with L-BFGS.  The smoothing weights approximate the dual multipliers ``lambda``, ``mu``;
the dual value ``||D_sqrt(lambda) T D_sqrt(mu)||_tr`` (polished by a damped fixed-point
iteration) is a lower bound of kappa (proofs/geometry-bounds.md, Lemma G3) that the kernel
then certifies with ``u = sqrt(lambda)``, ``v = sqrt(mu)`` and ``W = U V^T``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

_TINY = 1e-300


@dataclass(frozen=True)
class KappaSearch:
    X: np.ndarray  # optimised factors (float64); T := X Y^T as represented
    Y: np.ndarray
    upper_estimate: float  # max ||x_i|| max ||y_j|| of (X, Y), float64
    u: np.ndarray  # dual weights (unit vectors) and the trace-norm direction W = WL WR^T
    v: np.ndarray
    WL: np.ndarray
    WR: np.ndarray
    lower_estimate: float  # float64 dual value


def _smooth_max_log(values: np.ndarray, p: float) -> tuple[float, np.ndarray]:
    """``(1/p) log sum values^p`` and its weights ``values^p / sum`` (values >= 0)."""
    logs = np.log(values + _TINY)
    top = logs.max()
    z = np.exp(p * (logs - top))
    total = z.sum()
    return top + np.log(total) / p, z / total


def radius(X: np.ndarray, Y: np.ndarray) -> float:
    return float(np.sqrt((X**2).sum(axis=1).max()) * np.sqrt((Y**2).sum(axis=1).max()))


def _objective(g: np.ndarray, X0: np.ndarray, Y0: np.ndarray, p: float):
    r = X0.shape[1]
    G = g.reshape(r, r)
    try:
        Ginv = np.linalg.inv(G)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(g)
    Z = X0 @ G
    Wm = Y0 @ Ginv.T
    a, b = (Z**2).sum(axis=1), (Wm**2).sum(axis=1)
    f1, w1 = _smooth_max_log(a, p)
    f2, w2 = _smooth_max_log(b, p)
    grad = 2 * X0.T @ ((w1 / (a + _TINY))[:, None] * Z)
    grad -= 2 * Ginv.T @ (Wm.T @ ((w2 / (b + _TINY))[:, None] * Wm))
    value = f1 + f2
    if not np.isfinite(value) or not np.isfinite(grad).all():
        return np.inf, np.zeros_like(g)
    return value, grad.ravel()


def _weights(X: np.ndarray, Y: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    _, w1 = _smooth_max_log((X**2).sum(axis=1), p)
    _, w2 = _smooth_max_log((Y**2).sum(axis=1), p)
    return w1, w2


def weighted_svd(X: np.ndarray, Y: np.ndarray, u: np.ndarray, v: np.ndarray):
    """SVD ``D_u X Y^T D_v = U diag(s) V^T`` through QR of the thin factors."""
    Qa, Ra = np.linalg.qr(u[:, None] * X)
    Qb, Rb = np.linalg.qr(v[:, None] * Y)
    Uc, s, Vct = np.linalg.svd(Ra @ Rb.T)
    return Qa @ Uc, s, Qb @ Vct.T


def dual_value(X: np.ndarray, Y: np.ndarray, lam: np.ndarray, mu: np.ndarray):
    u, v = np.sqrt(lam / lam.sum()), np.sqrt(mu / mu.sum())
    U, s, V = weighted_svd(X, Y, u, v)
    return float(s.sum()), u, v, U, s, V


def polish_dual(X: np.ndarray, Y: np.ndarray, lam: np.ndarray, mu: np.ndarray, iters: int = 60):
    """Damped fixed point ``lambda_i <- ||(U S^1/2)_i||^2 / tr S`` (same for mu); keep the best."""
    best = dual_value(X, Y, lam, mu)
    alpha = 0.5
    for _ in range(iters):
        h, u, v, U, s, V = best
        if h <= 0:
            break
        lam_new = ((U * np.sqrt(s)) ** 2).sum(axis=1) / s.sum()
        mu_new = ((V * np.sqrt(s)) ** 2).sum(axis=1) / s.sum()
        cand = dual_value(X, Y, (1 - alpha) * u**2 + alpha * lam_new + 1e-300, (1 - alpha) * v**2 + alpha * mu_new + 1e-300)
        if cand[0] > h * (1 + 1e-12):
            best = cand
        else:
            alpha *= 0.5
            if alpha < 1e-3:
                break
    return best


def optimise_factorization(X0: np.ndarray, Y0: np.ndarray, *, powers=(4.0, 16.0, 64.0, 256.0, 1024.0),
                           maxiter: int = 200, method: str = "BFGS") -> KappaSearch:
    """Search the factorization ``(X0 G, Y0 G^{-T})`` of smallest radius product, and a dual bound.

    ``method``: the scipy minimiser, ``"BFGS"`` (default) or ``"L-BFGS-B"`` (limited memory:
    much faster at large r -- the dense r^2 x r^2 BFGS update dominates from r = 32 on)."""
    m, r = X0.shape
    keep = np.flatnonzero((np.abs(X0).sum(axis=0) > 0) & (np.abs(Y0).sum(axis=0) > 0))
    X0, Y0 = X0[:, keep], Y0[:, keep]
    r = X0.shape[1]
    if r == 0:
        zero_x, zero_y = np.zeros((m, 1)), np.zeros((Y0.shape[0], 1))
        return KappaSearch(zero_x, zero_y, 0.0, np.ones(m) / np.sqrt(m), np.ones(len(zero_y)) / np.sqrt(len(zero_y)),
                           zero_x + 1.0 / np.sqrt(m), zero_y + 1.0 / np.sqrt(len(zero_y)), 0.0)
    G = np.eye(r)
    best_G, best_val = G, radius(X0, Y0)
    for p in powers:
        options = {"maxiter": maxiter, "gtol": 1e-9} if method == "BFGS" else {"maxiter": maxiter}
        res = minimize(_objective, G.ravel(), args=(X0, Y0, p), jac=True, method=method, options=options)
        cand = res.x.reshape(r, r)
        try:
            cand = cand / abs(np.linalg.det(cand)) ** (1.0 / r)  # fix the scale gauge
            val = radius(X0 @ cand, Y0 @ np.linalg.inv(cand).T)
        except (np.linalg.LinAlgError, FloatingPointError, ZeroDivisionError):
            continue
        if np.isfinite(val):
            G = cand
            if val < best_val:
                best_G, best_val = cand, val
    X, Y = X0 @ best_G, Y0 @ np.linalg.inv(best_G).T
    u, v, WL, WR, h = dual_search(X, Y, powers[-1])
    return KappaSearch(np.ascontiguousarray(X), np.ascontiguousarray(Y), radius(X, Y), u, v, WL, WR, h)


def dual_search(X: np.ndarray, Y: np.ndarray, p: float = 1024.0):
    """Dual weights for the lower bound of kappa(X Y^T): ``(u, v, WL, WR, value)``.

    Starts from the smoothing weights of the factorization (approximate multipliers), polishes
    them, and falls back to uniform weights (``||T||_tr / sqrt(mN)``) when that is better.
    """
    lam, mu = _weights(X, Y, p)
    h, u, v, U, s, V = polish_dual(X, Y, lam, mu)
    h0 = dual_value(X, Y, np.ones(len(X)), np.ones(len(Y)))
    if h0[0] > h:
        h, u, v, U, s, V = h0
    pad = lambda A: np.hstack([A, np.zeros((A.shape[0], max(0, 1 - A.shape[1])))])  # noqa: E731
    return u, v, np.ascontiguousarray(pad(U)), np.ascontiguousarray(pad(V)), h
