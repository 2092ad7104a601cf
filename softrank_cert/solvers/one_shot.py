"""One-shot constructions at one rank or one k, and the pivot stage's gallop over k (UNTRUSTED).

The driver (:func:`.bracket.bracket_operator`), the profile and the budget study's sharpening
run these; each hands what it forms to a :class:`~.candidates.CandidatePool`, which only holds
and ranks candidates:

* witnesses at rank r (:meth:`OneShot.witness`): the truncated SVD (``tsvd``; every rank's error
  is known from the SVD, :attr:`OneShot.tsvd`) and the smoothed-minimax witness (``smooth``,
  :func:`.upper.smooth.smooth`);
* lower pairs at k (:meth:`OneShot.lower_pair`): complete pivoting (``pivot``,
  :mod:`.lower.pivot`) and query pooling (``pooled``, :mod:`.lower.pooled`);
* the gallop over k of one lower construction (:meth:`OneShot.search_lower`: the pivot stage).

Each construction runs at most once per rank or k.  Nothing here is trusted: the kernel checks
every end before use (:func:`.settle.first_verified`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..util.dense import Dense, threshold, witness_error
from .candidates import CandidatePool, LowerCandidate, UpperCandidate
from .lower.pivot import pivot
from .lower.pooled import pooled
from .upper.smooth import smooth, tsvd_start
from .work import Until, entries_units


def tsvd_errors(A: np.ndarray, svd: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """``e[r]`` = float64 max-row-l1 error of the rank-r truncated SVD, r = 0..p.  Each rank's term
    and the residual's magnitudes go into one m x N buffer (the same operations, so the same
    errors, as with fresh temporaries, which from 32 MiB are fresh page-faulted maps each time:
    38 % of its CPU at width 2048)."""
    u, s, vt = svd
    R = np.array(A, dtype=np.float64)
    buffer = np.empty_like(R)
    errors = [np.abs(R, out=buffer).sum(axis=1).max()]
    for i in range(len(s)):
        R -= np.outer(u[:, i] * s[i], vt[i], out=buffer)
        errors.append(np.abs(R, out=buffer).sum(axis=1).max())
    return np.array(errors)


#: Largest k at which the (cubic-cost) pooled pairs are tried by targeted searches (the budget
#: study's sharpening).
POOLED_MAX_K = 40
#: One-shot lower constructions ``(Dense, k) -> (X, Y)``.
LOWER_PAIRS: dict[str, Callable[[Dense, int], tuple[np.ndarray, np.ndarray]]] = {"pivot": pivot, "pooled": pooled}


class OneShot:
    """The one-shot constructions of one operator, handing their candidates to ``pool``.

    ``until`` (a :class:`~.work.Until`; None: unbounded) stops the constructions once reached,
    and they are charged to it; the truncated SVD is formed regardless (it is computed in the
    set-up).
    """

    def __init__(self, pool: CandidatePool, until: Until | None = None) -> None:
        self.pool = pool
        self.d = pool.d
        self.until = until
        self._tried: set[tuple[str, int]] = set()
        if "tsvd_errors" not in self.d.memo:  # one operator's: shared by every OneShot of it
            self.d.memo["tsvd_errors"] = tsvd_errors(self.d.A, self.d.svd)
        self.tsvd: np.ndarray = self.d.memo["tsvd_errors"]

    def spent(self) -> bool:
        return self.until is not None and self.until.reached()

    def witness(self, method: str, r: int) -> UpperCandidate | None:
        """Form the ``"tsvd"`` or ``"smooth"`` witness at rank r once; return the best witness
        now known at r.  The smoothed one stops when the budget is spent."""
        if (method, r) not in self._tried and (method == "tsvd" or not self.spent()):
            self._tried.add((method, r))
            if method == "tsvd":
                U, W = tsvd_start(self.d, r)
            elif method == "smooth":
                U, W = smooth(self.d, r, until=self.until)
            else:
                raise ValueError(f"unknown witness construction {method!r}")
            U, W = (np.ascontiguousarray(f, dtype=np.float64) for f in (U, W))
            if np.isfinite(U).all() and np.isfinite(W).all():
                self.pool.add_witness(UpperCandidate(r, U, W, witness_error(self.d.A, U, W), method))
        return self.pool.witnesses.get(r)

    def lower_pair(self, method: str, k: int) -> LowerCandidate | None:
        """Run the lower construction ``method`` (:data:`LOWER_PAIRS`) at k once; return the best
        pair now known at k."""
        if (method, k) not in self._tried and not self.spent():
            self._tried.add((method, k))
            X, Y = (np.ascontiguousarray(f, dtype=np.float64) for f in LOWER_PAIRS[method](self.d, k))
            m, n = self.d.shape
            if self.until is not None:  # swaps scored / k-means and moves
                self.until.charge(entries_units(8.0 * m * n * k))
            if np.isfinite(X).all() and np.isfinite(Y).all():
                self.pool.add_lower_pair(LowerCandidate(k, X, Y, threshold(self.d.A, X, Y), method))
        return self.pool.lower_pairs.get(k)

    def search_lower(self, method: str, eps: float, lo: int, hi: int, scan: int = 2) -> None:
        """Look for the largest k in (lo, hi] with a pair of threshold > eps by ``method``.

        ``lo`` is a k already known to work.  Galloping up from ``lo`` (steps 1, 2, 4, ...)
        then bisection, assuming decreasing thresholds; then ``scan`` k above the answer.
        """
        def ok(k: int) -> bool:
            c = self.lower_pair(method, k)
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
