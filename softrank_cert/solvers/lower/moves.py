"""Single-key moves of signed key groups, screened by Sherman-Morrison updates (UNTRUSTED).

A signed-group ``Y`` (N x k) has at most one nonzero entry per key row, ``Y[j, lab[j]] = sign[j]``
(``lab[j] = -1``: key j unused), so ``||Y|| = 1``.  With ``C = X A`` fixed (rows of X scaled to
unit l1 norm), a move of key j to another group, sign or none changes ``C Y`` by rank one
or two, and ``||(C Y')^{-1}||`` follows by Sherman-Morrison: :func:`screen` scores every move on
the rows at the maximum, :func:`key_moves` makes the ones that lower the norm.  A lower norm
is a valid certificate itself (proofs/lower-certificate.md), so the LP re-solve that follows
can only raise the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...util.dense import norm
from .lp import signed_y
from ..work import CALL_UNITS, Until, entries_units, key_move_scale, seconds_units

#: Keys whose best candidate group is scored are limited to this many groups (largest |w_h|).
MOVE_WIDTH = 12
#: Moves are screened on the rows of ``(XAY)^{-1}`` within this relative band of the maximum...
TOP_BAND = 1e-6
#: ... at most this many of them.
TOP_ROWS = 8
#: Largest number of entries of one screening chunk (memory bound of :func:`screen`).
SCREEN_ENTRIES = 1 << 21

def screen(Z: np.ndarray, C: np.ndarray, lab: np.ndarray, sign: np.ndarray, signs: np.ndarray,
           width: int) -> np.ndarray:
    """Candidate single-key moves scored on the rows of ``Z = (CY)^{-1}`` at the maximum only.

    A move can lower ``||Z||`` only if it lowers every row now at the maximum, so each move
    (key j to group h with sign sigma, among the ``width`` groups with the largest
    ``|(Z' c_j)_h|``, or to no group) is scored by the largest new l1 norm of those rows
    (two Sherman-Morrison updates, vectorised over keys).  Returns the moves whose score is
    below the current norm, best first, as rows ``(j, h, sigma index)`` (h = -1: no group).
    """
    k, n = C.shape
    norms = np.abs(Z).sum(axis=1)
    top = np.argsort(-norms)[:TOP_ROWS]
    top = top[norms[top] >= norms.max() * (1 - TOP_BAND)]
    W = Z @ C  # column j: Z c_j
    grouped = lab >= 0
    g = np.where(grouped, lab, 0)
    den = np.where(grouped, 1.0 - sign * W[g, np.arange(n)], 1.0)
    ok = np.abs(den) > 1e-10
    den = np.where(ok, den, 1.0)
    u = np.where(grouped, sign / den, 0.0)  # leaving g: Z0 = Z + u_j (Z c_j) Z[g_j]
    w = (W / den).T  # n x k: Z0 c_j = Z c_j / den_j
    L = min(width, k)
    H = np.argpartition(-np.abs(w), L - 1, axis=1)[:, :L] if L < k else np.tile(np.arange(k), (n, 1))
    Z0_top = Z[top][None] + (u * W[top]).T[:, :, None] * Z[g][:, None, :]  # n x T x k
    none = np.where(grouped & ok, np.abs(Z0_top).sum(axis=2).max(axis=1), np.inf)
    scores = np.empty((n, len(signs), L))
    chunk = max(1, SCREEN_ENTRIES // (len(top) * len(signs) * L * k))
    for lo in range(0, n, chunk):
        sl = slice(lo, lo + chunk)
        scores[sl] = _scores(Z, W[:, sl], w[sl], u[sl], g[sl], H[sl], Z0_top[sl], top, signs)
    same = (H == lab[:, None])[:, None, :] & (signs[None, :, None] == sign[:, None, None])
    scores[same | ~ok[:, None, None]] = np.inf
    S = len(signs)
    moves = np.concatenate([
        np.stack([np.repeat(np.arange(n), S * L), H[:, None, :].repeat(S, axis=1).ravel(),
                  np.tile(np.repeat(np.arange(S), L), n)], axis=1),
        np.stack([np.arange(n), np.full(n, -1), np.zeros(n, int)], axis=1)])
    values = np.concatenate([scores.ravel(), none])
    keep = np.flatnonzero(values < norms.max() * (1 - 1e-9))
    return moves[keep[np.argsort(values[keep], kind="stable")]]


def _scores(Z: np.ndarray, W: np.ndarray, w: np.ndarray, u: np.ndarray, g: np.ndarray, H: np.ndarray,
            Z0_top: np.ndarray, top: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Largest new l1 norm of rows ``top`` for each key of a chunk (c), sign (S) and group
    of ``H`` (c x L): ``Z' = Z0 - sigma (Z0 c) Z0[h] / (1 + sigma (Z0 c)_h)``."""
    Wh = np.take_along_axis(W.T, H, axis=1)  # c x L: (Z c_j)_h
    Z0_h = Z[H] + (u[:, None] * Wh)[:, :, None] * Z[g][:, None, :]  # c x L x k
    dens = 1.0 + signs[None, :, None] * np.take_along_axis(w, H, axis=1)[:, None, :]  # c x S x L
    safe = np.abs(dens) > 1e-10
    coef = signs[None, :, None] / np.where(safe, dens, 1.0)
    wt = w[:, top]  # c x T
    rows = (Z0_top[:, :, None, None, :]
            - (wt[:, :, None, None] * coef[:, None])[..., None] * Z0_h[:, None, None])  # c x T x S x L x k
    out = np.abs(rows).sum(axis=4).max(axis=1)
    out[~safe] = np.inf
    return out


def moved_inverse(Z: np.ndarray, C: np.ndarray, g: int, s: float, j: int, h: int, sigma: float) -> np.ndarray:
    """``(CY')^{-1}`` from ``Z = (CY)^{-1}`` when key j leaves group g (sign s) for group h
    (sign sigma; h = -1: no group), by two Sherman-Morrison updates."""
    c = C[:, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        return _moved(Z, c, g, s, h, sigma)


def _moved(Z: np.ndarray, c: np.ndarray, g: int, s: float, h: int, sigma: float) -> np.ndarray:
    if g >= 0:
        Zc = Z @ c
        Z = Z + s * np.outer(Zc, Z[g]) / (1.0 - s * Zc[g])
    if h >= 0:
        w = Z @ c
        Z = Z - sigma * np.outer(w, Z[h]) / (1.0 + sigma * w[h])
    return Z


@dataclass(frozen=True)
class MoveCharges:
    """Fixed work units of the key moves beyond their flop counts: per checked move (a rank-two
    inverse update and its norm in numpy, 16-18 us measured at 128 x 128 and 512 x 512) and per
    move listed by a screen (sorting and indexing the candidates, ~40 ns each); ``scale``
    multiplies every key-move charge (:func:`~softrank_cert.solvers.work.key_move_scale`)."""

    check: float = 0.0
    listed: float = 0.0
    scale: float = 1.0

    @classmethod
    def for_shape(cls, m: int, n: int) -> MoveCharges:
        scale = key_move_scale(m, n)
        return cls(scale * seconds_units(m, n, CHECK_SECONDS), scale * seconds_units(m, n, LISTED_SECONDS), scale)

    def screen_units(self, k: int, n: int, signs: int, width: int) -> float:
        """Work units of one screen of all single-key moves (k groups, n keys)."""
        entries = 2.0 * k * k * (k + n) + 4.0 * n * signs * min(width, k) * TOP_ROWS * k
        return CALL_UNITS + self.scale * entries_units(entries) + self.listed * n * signs * min(width, k)

    def check_units(self, k: int) -> float:
        """Work units of one checked move (a rank-two update of a k x k inverse and its norm)."""
        return self.check + self.scale * entries_units(8.0 * k * k)


#: CPU seconds of one checked move and of one listed move, beyond their flops (:class:`MoveCharges`).
CHECK_SECONDS, LISTED_SECONDS = 18e-6, 40e-9


def key_moves(C: np.ndarray, lab: np.ndarray, sign: np.ndarray, until: Until, signed: bool = True,
              width: int = MOVE_WIDTH, checks: int = 16, charges: MoveCharges = MoveCharges()
              ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Greedy single-key moves lowering ``||(C Y)^{-1}||`` (``C = X A`` fixed, k x N).

    Each round screens all moves (:func:`screen`) and walks its list best first, checking
    each move in full (every row, against the current labels) and making it when it lowers
    the norm; a round ends after ``checks`` failures in a row.  Rounds repeat until one
    makes no move or ``until`` is reached (screens and checks are charged to it, with the fixed
    costs of ``charges``).  Returns the new labels and whether anything moved.
    """
    k, n = C.shape
    lab, sign = lab.copy(), sign.copy()
    signs = np.array([1.0, -1.0]) if signed else np.array([1.0])
    moved = False
    while not until.reached():
        try:
            Z = np.linalg.inv(C @ signed_y(lab, sign, k))
        except np.linalg.LinAlgError:
            break
        best = norm(Z)
        moves = screen(Z, C, lab, sign, signs, width)
        until.charge(charges.screen_units(k, n, len(signs), width))
        touched: set[int] = set()
        fails = 0
        for j, h, s_i in moves:
            if fails >= checks or until.reached():
                break
            if j in touched:
                continue
            Zn = moved_inverse(Z, C, lab[j], sign[j], j, h, signs[s_i])
            until.charge(charges.check_units(k))
            value = norm(Zn)
            if np.isfinite(value) and value < best * (1 - 1e-9):
                lab[j], sign[j] = h, (signs[s_i] if h >= 0 else 1.0)
                Z, best, fails = Zn, value, 0
                touched.add(int(j))
            else:
                fails += 1
        if not touched:
            break
        moved = True
    return lab, sign, moved
