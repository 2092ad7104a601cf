"""Lower certificate ``pooled`` (UNTRUSTED): query pooling and key grouping.

``X`` has probability-vector rows (row a = uniform average over query cluster ``C_a``) and
``Y`` 0/1 columns (column b = indicator of key group ``G_b``, groups disjoint, keys may
stay ungrouped), so ``||X|| = ||Y|| = 1`` and the threshold is ``1 / ||M^{-1}||`` with
``M_ab`` = mean mass that cluster a puts on group b.  Clusters come from k-means on the
attention profiles (several feature maps and seeds); each key then joins the cluster it
favours most, and greedy local moves (each key to another group or none, each query to
another cluster or none) are kept while they raise the threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.cluster.vq import kmeans2

from ...util.dense import Dense, as_dense


def inv_norms(Ms: np.ndarray) -> np.ndarray:
    """``||M^{-1}||`` (max-row-l1) for a stack of square matrices; inf where singular."""
    out = np.full(len(Ms), np.inf)
    try:
        invs: Any = np.linalg.inv(Ms)  # a list of them where one is singular (below)
        ok: Any = np.arange(len(Ms))
    except np.linalg.LinAlgError:
        ok, invs = [], []
        for i, M in enumerate(Ms):
            try:
                invs.append(np.linalg.inv(M))
                ok.append(i)
            except np.linalg.LinAlgError:
                pass
        if not ok:
            return out
        ok, invs = np.array(ok), np.array(invs)
    values = np.abs(invs).sum(axis=2).max(axis=1)
    out[ok] = np.where(np.isfinite(values), values, np.inf)
    return out


def features(A: np.ndarray, kind: str) -> np.ndarray:
    """Row features for clustering queries: ``A``, ``sqrt(A)`` or column-standardised ``A``."""
    if kind == "sqrt":
        return np.sqrt(A)
    if kind == "standard":
        mean = A.mean(axis=0)
        return (A - mean) / np.sqrt(mean + 1e-12)
    return A


def cluster_queries(A: np.ndarray, k: int, kind: str, seed: int) -> np.ndarray:
    """k-means labels of the query rows (clusters may come out empty: label -1 never used)."""
    F = features(A, kind)
    _, labels = kmeans2(F, k, minit="++", seed=seed)
    return labels


def group_keys(A: np.ndarray, qlab: np.ndarray, k: int) -> np.ndarray:
    """Each key joins the cluster with the largest mean mass on it, relative to the key's
    average mass; keys no cluster favours by at least 10 % stay ungrouped (-1)."""
    P = np.stack([A[qlab == a].mean(axis=0) if np.any(qlab == a) else np.zeros(A.shape[1]) for a in range(k)])
    R = P / np.maximum(P.mean(axis=0), 1e-300)
    klab = R.argmax(axis=0)
    klab[R.max(axis=0) < 1.1] = -1
    return klab


def matrices(A: np.ndarray, qlab: np.ndarray, klab: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (k x m, rows uniform over clusters) and ``Y`` (N x k, group indicators)."""
    X = np.zeros((k, A.shape[0]))
    for a in range(k):
        members = qlab == a
        if members.any():
            X[a, members] = 1.0 / members.sum()
    Y = np.zeros((A.shape[1], k))
    grouped = klab >= 0
    Y[np.flatnonzero(grouped), klab[grouped]] = 1.0
    return X, Y


def local_moves(A: np.ndarray, qlab: np.ndarray, klab: np.ndarray, k: int, passes: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Greedy single-key and single-query moves while ``1/||M^{-1}||`` grows."""
    qlab, klab = qlab.copy(), klab.copy()
    X, Y = matrices(A, qlab, klab, k)
    XA, G = X @ A, A @ Y
    M = XA @ Y
    best = inv_norms(M[None])[0]
    options = np.arange(-1, k)
    for _ in range(passes):
        start = best
        for j in rng.permutation(A.shape[1]):
            g = klab[j]
            base = M.copy()
            if g >= 0:
                base[:, g] -= XA[:, j]
            cands = np.repeat(base[None], k + 1, axis=0)
            cands[1:, :, :][np.arange(k), :, np.arange(k)] += XA[:, j]
            values = inv_norms(cands)
            h = int(options[np.argmin(values)])
            if values.min() < best * (1 - 1e-12) and h != g:
                best, klab[j], M = values.min(), h, cands[h + 1]
                if g >= 0:
                    G[:, g] -= A[:, j]
                if h >= 0:
                    G[:, h] += A[:, j]
        sizes = np.bincount(qlab[qlab >= 0], minlength=k).astype(float)
        sums = np.stack([G[qlab == a].sum(axis=0) for a in range(k)])
        for i in rng.permutation(A.shape[0]):
            a = qlab[i]
            s0, n0 = sums.copy(), sizes.copy()
            if a >= 0:
                s0[a] -= G[i]
                n0[a] -= 1
            cands = np.repeat(s0[None], k + 1, axis=0)
            counts = np.repeat(n0[None], k + 1, axis=0)
            cands[np.arange(1, k + 1), np.arange(k)] += G[i]
            counts[np.arange(1, k + 1), np.arange(k)] += 1
            with np.errstate(divide="ignore", invalid="ignore"):
                Ms = cands / counts[:, :, None]
            Ms[~np.isfinite(Ms)] = 0.0
            values = inv_norms(Ms)
            h = int(options[np.argmin(values)])
            if values.min() < best * (1 - 1e-12) and h != a:
                best, qlab[i], sums, sizes = values.min(), h, cands[h + 1], counts[h + 1]
                M = Ms[h + 1]
        X, _ = matrices(A, qlab, klab, k)
        XA = X @ A
        if best > start * (1 - 1e-6):
            break
    return qlab, klab, 1.0 / best


def pooled(A: Dense | np.ndarray, k: int, *, kinds: tuple[str, ...] = ("plain", "sqrt", "standard"),
           seeds: int = 1, passes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Best pooled ``(X, Y)`` over the clusterings tried (threshold ``1/||(XAY)^{-1}||``)."""
    a = as_dense(A).A
    best: tuple[float, Any, Any] = (-1.0, None, None)
    for kind in kinds:
        for seed in range(seeds):
            qlab = cluster_queries(a, k, kind, seed)
            klab = group_keys(a, qlab, k)
            q, kk, t = local_moves(a, qlab, klab, k, passes, np.random.default_rng(seed))
            if t > best[0]:
                best = (t, q, kk)
    return matrices(a, best[1], best[2], k)
