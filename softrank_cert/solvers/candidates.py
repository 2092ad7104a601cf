"""The float64 candidate pool of one operator (UNTRUSTED).

* Witnesses: rank r -> the best witness found (smallest float64 error ``||A - U W^T||``).  A
  witness at rank r proposes ``r_eps <= r`` for every eps >= its error.
* Lower pairs: k -> the best pair ``(X, Y)`` found (largest float64 threshold
  ``t = 1/(||X|| ||Y|| ||(XAY)^{-1}||)``, proofs/lower-certificate.md).  It proposes
  ``r_eps >= k`` for every eps < t.

The searches (:mod:`~softrank_cert.solvers.upper.search`, :mod:`~softrank_cert.solvers.lower.search`) fill the pool; the pool also runs a
few one-shot constructions itself (:meth:`CandidatePool.witness`: the truncated SVD and the
smoothed witness at one rank; :meth:`CandidatePool.lower_pair`: complete pivoting and query
pooling at one k) and a gallop over k for one of them (:meth:`CandidatePool.search_lower`).
Nothing here is trusted: the kernel checks every end before use
(:func:`.settle.first_verified`).  ``origin`` names where a candidate came from on both
sides; the certificate format calls it ``construction`` (upper) and ``method`` (lower).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from ..util.dense import Dense, threshold, witness_error
from .lower.pivot import pivot
from .lower.pooled import pooled
from .upper.smooth import smooth, tsvd_start
from .work import Until, entries_units


@dataclass(frozen=True, eq=False)
class UpperCandidate:
    """Float64 upper witness ``B = U W^T`` of rank <= r with float64 error ``error``."""

    r: int
    U: np.ndarray
    W: np.ndarray
    error: float
    origin: str


@dataclass(frozen=True, eq=False)
class LowerCandidate:
    """Float64 lower pair ``(X, Y)`` for k with float64 threshold ``threshold``."""

    k: int
    X: np.ndarray
    Y: np.ndarray
    threshold: float
    origin: str


def tsvd_errors(A: np.ndarray, svd: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """``e[r]`` = float64 max-row-l1 error of the rank-r truncated SVD, r = 0..p."""
    u, s, vt = svd
    R = np.array(A, dtype=np.float64)
    errors = [np.abs(R).sum(axis=1).max()]
    for i in range(len(s)):
        R -= np.outer(u[:, i] * s[i], vt[i])
        errors.append(np.abs(R).sum(axis=1).max())
    return np.array(errors)


#: Largest k at which the (cubic-cost) pooled pairs are tried by targeted searches (the budget
#: study's sharpening).
POOLED_MAX_K = 40
#: One-shot lower constructions ``(Dense, k) -> (X, Y)`` that the pool runs itself.
LOWER_PAIRS: dict[str, Callable[[Dense, int], tuple[np.ndarray, np.ndarray]]] = {"pivot": pivot, "pooled": pooled}


class CandidatePool:
    """Best witnesses per rank and lower pairs per k of one operator.

    ``until`` (a :class:`~.work.Until`; None: unbounded) stops the constructions the pool runs
    itself once reached, and they are charged to it; the truncated SVD is formed regardless (it
    is computed in the set-up).
    """

    def __init__(self, dense: Dense, until: Until | None = None) -> None:
        self.d = dense
        self.until = until
        self.witnesses: dict[int, UpperCandidate] = {}
        self.lower_pairs: dict[int, LowerCandidate] = {}
        self._tried: set[tuple[str, int]] = set()
        self.tsvd = tsvd_errors(dense.A, dense.svd)

    def spent(self) -> bool:
        return self.until is not None and self.until.reached()

    # -- one-shot constructions --------------------------------------------------------
    def witness(self, origin: str, r: int) -> UpperCandidate | None:
        """Form the ``"tsvd"`` or ``"smooth"`` witness at rank r once; return the best witness
        now known at r.  The smoothed one stops when the budget is spent."""
        if (origin, r) not in self._tried and (origin == "tsvd" or not self.spent()):
            self._tried.add((origin, r))
            if origin == "tsvd":
                U, W = tsvd_start(self.d, r)
            elif origin == "smooth":
                U, W = smooth(self.d, r, until=self.until)
            else:
                raise ValueError(f"unknown witness construction {origin!r}")
            U, W = (np.ascontiguousarray(f, dtype=np.float64) for f in (U, W))
            if np.isfinite(U).all() and np.isfinite(W).all():
                self.add_witness(UpperCandidate(r, U, W, witness_error(self.d.A, U, W), origin))
        return self.witnesses.get(r)

    def add_witness(self, w: UpperCandidate) -> None:
        old = self.witnesses.get(w.r)
        if old is None or w.error < old.error:
            self.witnesses[w.r] = w

    def lower_pair(self, origin: str, k: int) -> LowerCandidate | None:
        """Run the lower construction ``origin`` (:data:`LOWER_PAIRS`) at k once; return the best
        pair now known at k."""
        if (origin, k) not in self._tried and not self.spent():
            self._tried.add((origin, k))
            X, Y = (np.ascontiguousarray(f, dtype=np.float64) for f in LOWER_PAIRS[origin](self.d, k))
            m, n = self.d.shape
            if self.until is not None:  # swaps scored / k-means and moves
                self.until.charge(entries_units(8.0 * m * n * k))
            if np.isfinite(X).all() and np.isfinite(Y).all():
                self.add_lower_pair(LowerCandidate(k, X, Y, threshold(self.d.A, X, Y), origin))
        return self.lower_pairs.get(k)

    def add_lower_pair(self, c: LowerCandidate) -> None:
        old = self.lower_pairs.get(c.k)
        if old is None or c.threshold > old.threshold:
            self.lower_pairs[c.k] = c

    # -- read-outs ------------------------------------------------------------------
    def upper_candidates(self, eps: float) -> list[UpperCandidate]:
        """Witnesses whose float64 error is <= eps (with a hair of slack), smallest rank first."""
        ok = [w for w in self.witnesses.values() if w.error <= eps * (1 + 1e-12)]
        return sorted(ok, key=lambda w: (w.r, w.error))

    def best_rank(self, eps: float) -> int | None:
        """Least rank with a float64 witness of error ``<= eps`` (None if there is none)."""
        return min((w.r for w in self.witnesses.values() if w.error <= eps), default=None)

    def lower_candidates(self, eps: float) -> list[LowerCandidate]:
        """Lower pairs whose float64 threshold exceeds eps (minus a hair), largest k first."""
        ok = [c for c in self.lower_pairs.values() if c.threshold > eps * (1 - 1e-12)]
        return sorted(ok, key=lambda c: (-c.k, -c.threshold))

    # -- the gallop of the pivot stage ---------------------------------------------------
    def search_lower(self, origin: str, eps: float, lo: int, hi: int, scan: int = 2) -> None:
        """Look for the largest k in (lo, hi] with a pair of threshold > eps by ``origin``.

        ``lo`` is a k already known to work.  Galloping up from ``lo`` (steps 1, 2, 4, ...)
        then bisection, assuming decreasing thresholds; then ``scan`` k above the answer.
        """
        def ok(k: int) -> bool:
            c = self.lower_pair(origin, k)
            return c is not None and c.threshold > eps

        spent = self.spent
        best = lo
        step = 1
        while best + step <= hi and not spent():
            if ok(best + step):
                best += step
                step *= 2
            else:
                break
        bad = min(best + step, hi + 1)  # k >= bad are (presumed) too large
        while bad - best > 1 and not spent():
            mid = (best + bad) // 2
            if ok(mid):
                best = mid
            else:
                bad = mid
        for k in range(best + 1, min(best + 1 + scan, hi + 1)):
            if spent():
                break
            if ok(k):
                best = k
