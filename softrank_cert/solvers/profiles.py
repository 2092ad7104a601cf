"""Per-operator profiles of float64 bracket-end candidates (UNTRUSTED).

* Upper profile: rank r -> the best witness found (smallest float64 error ``||A - U W^T||``).
  A witness at rank r proposes ``r_eps <= r`` for every eps >= its error.
* Lower profile: k -> the best certificate found (largest float64 threshold
  ``t = 1/(||X|| ||Y|| ||(XAY)^{-1}||)``).  It proposes ``r_eps >= k`` for every eps < t.

Profiles are filled by searches over ranks.  Error is not monotone in rank (nor threshold in
k), so each search is a bisection under a monotonicity guess followed by a local scan past
its answer; every evaluation is kept, so later searches (other tolerances, other
constructions) reuse it.  Nothing here is trusted: the kernel checks every end before use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .dense import Dense, threshold, witness_error
from .lower import LOWER
from .upper import UPPER


@dataclass(frozen=True, eq=False)
class UpperCandidate:
    """Float64 upper witness ``B = U W^T`` of rank <= r with float64 error ``error``."""

    r: int
    U: np.ndarray
    W: np.ndarray
    error: float
    construction: str


@dataclass(frozen=True, eq=False)
class LowerCandidate:
    """Float64 lower certificate ``(X, Y)`` for k with float64 threshold ``threshold``."""

    k: int
    X: np.ndarray
    Y: np.ndarray
    threshold: float
    method: str


def tsvd_errors(A: np.ndarray, svd: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """``e[r]`` = float64 max-row-l1 error of the rank-r truncated SVD, r = 0..p."""
    u, s, vt = svd
    R = np.array(A, dtype=np.float64)
    errors = [np.abs(R).sum(axis=1).max()]
    for i in range(len(s)):
        R -= np.outer(u[:, i] * s[i], vt[i])
        errors.append(np.abs(R).sum(axis=1).max())
    return np.array(errors)


class Profiles:
    """Best witnesses per rank and certificates per k of one operator, with searches.

    ``deadline`` (a ``time.perf_counter()`` value or None) stops every search early.
    """

    def __init__(self, dense: Dense, deadline: float | None = None) -> None:
        self.d = dense
        self.deadline = deadline
        self.witnesses: dict[int, UpperCandidate] = {}
        self.certificates: dict[int, LowerCandidate] = {}
        self._tried: set[tuple[str, int]] = set()
        self.tsvd = tsvd_errors(dense.A, dense.svd)

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    # -- evaluations ----------------------------------------------------------------
    def witness(self, construction: str, r: int) -> UpperCandidate | None:
        """Run ``construction`` at rank r once (alt_l1 starts from the best witness at r; alt_l1
        and smooth stop at the deadline);
        return the best witness now known at r.  The truncated SVD is already computed, so a
        ``tsvd`` witness is formed even after the deadline (a budget spent on the set-up alone
        must not leave the operator without its cheapest upper end)."""
        if (construction, r) not in self._tried and (construction == "tsvd" or not self.out_of_time()):
            self._tried.add((construction, r))
            left = None if self.deadline is None else max(self.deadline - time.perf_counter(), 0.0)
            if construction == "alt_l1":
                if r not in self.witnesses:
                    self.witness("l1_polish", r)
                start = self.witnesses[r]
                factors = UPPER[construction](self.d, r, start=(start.U, start.W), seconds=left)
            elif construction == "smooth":
                factors = UPPER[construction](self.d, r, seconds=left)
            else:
                factors = UPPER[construction](self.d, r)
            if factors is not None:
                U, W = (np.ascontiguousarray(f, dtype=np.float64) for f in factors)
                if np.isfinite(U).all() and np.isfinite(W).all():
                    self.add_witness(UpperCandidate(r, U, W, witness_error(self.d.A, U, W), construction))
        return self.witnesses.get(r)

    def add_witness(self, w: UpperCandidate) -> None:
        old = self.witnesses.get(w.r)
        if old is None or w.error < old.error:
            self.witnesses[w.r] = w

    def certificate(self, method: str, k: int, start: LowerCandidate | None = None) -> LowerCandidate | None:
        """Run lower ``method`` at k once (``lp_alternation`` polishes ``start`` or the best
        certificate at k); return the best certificate now known at k."""
        if (method, k) not in self._tried and not self.out_of_time():
            self._tried.add((method, k))
            if method == "lp_alternation":
                base = start or self.certificates.get(k) or self.certificate("pooled", k)
                pair = LOWER[method](self.d, k, start=(base.X, base.Y)) if base else None
            else:
                pair = LOWER[method](self.d, k)
            if pair is not None:
                X, Y = (np.ascontiguousarray(f, dtype=np.float64) for f in pair)
                if np.isfinite(X).all() and np.isfinite(Y).all():
                    self.add_certificate(LowerCandidate(k, X, Y, threshold(self.d.A, X, Y), method))
        return self.certificates.get(k)

    def add_certificate(self, c: LowerCandidate) -> None:
        old = self.certificates.get(c.k)
        if old is None or c.threshold > old.threshold:
            self.certificates[c.k] = c

    # -- read-outs ------------------------------------------------------------------
    def upper_candidates(self, eps: float) -> list[UpperCandidate]:
        """Witnesses whose float64 error is <= eps (with a hair of slack), smallest rank first."""
        ok = [w for w in self.witnesses.values() if w.error <= eps * (1 + 1e-12)]
        return sorted(ok, key=lambda w: (w.r, w.error))

    def best_rank(self, eps: float) -> int | None:
        """Least rank with a float64 witness of error ``<= eps`` (None if there is none)."""
        return min((w.r for w in self.witnesses.values() if w.error <= eps), default=None)

    def lower_candidates(self, eps: float) -> list[LowerCandidate]:
        """Certificates whose float64 threshold exceeds eps (minus a hair), largest k first."""
        ok = [c for c in self.certificates.values() if c.threshold > eps * (1 - 1e-12)]
        return sorted(ok, key=lambda c: (-c.k, -c.threshold))

    # -- searches -------------------------------------------------------------------
    def search_upper(self, construction: str, eps: float, lo: int, hi: int, scan: int = 2) -> None:
        """Look for the smallest r in [lo, hi) with a witness of error <= eps by ``construction``.

        ``hi`` is a rank already known to work.  Galloping down from ``hi`` (steps 1, 2, 4,
        ...) then bisection, assuming monotone errors; then ``scan`` ranks below the answer.
        """
        ok: Callable[[int], bool] = lambda r: (w := self.witness(construction, r)) is not None and w.error <= eps
        best = hi
        step = 1
        while best - step >= lo and not self.out_of_time():
            if ok(best - step):
                best -= step
                step *= 2
            else:
                break
        bad = max(best - step, lo - 1)  # ranks <= bad are (presumed) too small
        while best - bad > 1 and not self.out_of_time():
            mid = (best + bad) // 2
            if ok(mid):
                best = mid
            else:
                bad = mid
        for r in range(best - 1, max(best - 1 - scan, lo - 1, 0), -1):
            if self.out_of_time():
                break
            if ok(r):
                best = r

    def search_lower(self, method: str, eps: float, lo: int, hi: int, scan: int = 2) -> None:
        """Look for the largest k in (lo, hi] with a certificate of threshold > eps by ``method``.

        ``lo`` is a k already known to work.  Galloping up from ``lo`` (steps 1, 2, 4, ...)
        then bisection, assuming decreasing thresholds; then ``scan`` k above the answer.
        """
        ok: Callable[[int], bool] = lambda k: (c := self.certificate(method, k)) is not None and c.threshold > eps
        best = lo
        step = 1
        while best + step <= hi and not self.out_of_time():
            if ok(best + step):
                best += step
                step *= 2
            else:
                break
        bad = min(best + step, hi + 1)  # k >= bad are (presumed) too large
        while bad - best > 1 and not self.out_of_time():
            mid = (best + bad) // 2
            if ok(mid):
                best = mid
            else:
                bad = mid
        for k in range(best + 1, min(best + 1 + scan, hi + 1)):
            if self.out_of_time():
                break
            if ok(k):
                best = k
