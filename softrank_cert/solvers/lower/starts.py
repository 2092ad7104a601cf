"""Starts of the lower-certificate search: query selections and key labels (UNTRUSTED).

Queries are chosen by column-pivoted QR on centred square-root row profiles
(:func:`qr_queries`) or by complete pivoting (:mod:`.pivot`); keys are labelled by the
chosen query that weights them most relative to their mean (:func:`dev_labels`) or through
the pseudo-inverse of the chosen rows (:func:`pinv_labels`).  :func:`growth_pivot` picks the
query and key of a new singleton group from the Schur complement.  Every start is only a
proposal: the kernel checks every certificate.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ...util.dense import norm


def centred_profiles(A: np.ndarray) -> np.ndarray:
    """Square-root row profiles minus their mean profile (m x N)."""
    F = np.sqrt(A)
    return F - F.mean(axis=0)


def qr_queries(A: np.ndarray) -> np.ndarray:
    """Query order of column-pivoted QR on the centred square-root profiles (rows of A)."""
    _, _, piv = scipy.linalg.qr(centred_profiles(A).T, mode="economic", pivoting=True)
    return piv


def dev_labels(A: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each key joins the chosen query whose weight most exceeds the key's mean over the
    chosen queries (relative); keys within 10 % of their mean everywhere stay unused."""
    P = A[rows]
    R = P / np.maximum(P.mean(axis=0), 1e-300)
    lab = R.argmax(axis=0)
    lab[R.max(axis=0) < 1.1] = -1
    return lab, np.ones(A.shape[1])


def pinv_labels(A: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key j joins the group of the largest entry of row j of ``pinv(A[rows])``, with its sign."""
    P = np.linalg.pinv(A[rows])  # N x k
    lab = np.abs(P).argmax(axis=1)
    return lab, np.where(P[np.arange(len(lab)), lab] < 0, -1.0, 1.0)


def pivot_labels(cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Singleton groups on the given keys (complete-pivoting columns); other keys unused."""
    lab = np.full(n, -1)
    lab[cols] = np.arange(len(cols))
    return lab, np.ones(n)


def selection(rows: np.ndarray, m: int) -> np.ndarray:
    """0/1 matrix (len(rows) x m) selecting ``rows``."""
    X = np.zeros((len(rows), m))
    X[np.arange(len(rows)), rows] = 1.0
    return X


def growth_pivot(A: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple[int, int]:
    """Query and key ``(i, j)`` for a new singleton group: the best pivot of the Schur complement.

    With ``Z = (XAY)^{-1}``, ``B = AY``, ``C = XA``, the bordered matrix from a new query row i
    and key column j has Schur complement ``s_ij = (A - B Z C)_ij`` and its inverse has
    max-row-l1 norm at most ``max(||Z|| + p_j q_i / |s_ij|, q_i / |s_ij|)`` with
    ``q_i = ||(BZ)_i||_1 + 1`` and ``p_j = ||Z c_j||_inf``; the pair of the smallest bound.
    """
    B, C = A @ Y, X @ A
    Z = np.linalg.inv(C @ Y)
    BZ, ZC = B @ Z, Z @ C
    S = np.abs(A - BZ @ C)
    q = np.abs(BZ).sum(axis=1) + 1.0
    p = np.abs(ZC).max(axis=0)
    with np.errstate(divide="ignore", over="ignore"):  # s_ij = 0 or tiny: an infinite bound
        ratio = q[:, None] / S  # m x N
    with np.errstate(invalid="ignore"):  # 0 * inf where a key has p_j = 0 and s_ij = 0
        bound = np.maximum(norm(Z) + p[None, :] * ratio, ratio)
    bound[np.isnan(bound)] = np.inf  # argmin would pick a NaN

    i, j = np.unravel_index(int(np.argmin(bound)), bound.shape)
    return int(i), int(j)
