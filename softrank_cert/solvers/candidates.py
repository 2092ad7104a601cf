"""The float64 candidate pool of one operator (UNTRUSTED): it holds and ranks, and never searches.

* Witnesses: rank r -> the best witness found (smallest float64 error ``||A - U W^T||``).  A
  witness at rank r proposes ``r_eps <= r`` for every eps >= its error.
* Lower pairs: k -> the best pair ``(X, Y)`` found (largest float64 threshold
  ``t = 1/(||X|| ||Y|| ||(XAY)^{-1}||)``, proofs/lower-certificate.md).  It proposes
  ``r_eps >= k`` for every eps < t.

The searches (:mod:`~softrank_cert.solvers.upper.search`, :mod:`~softrank_cert.solvers.lower.search`)
and the one-shot constructions (:mod:`~softrank_cert.solvers.one_shot`) fill the pool.  Nothing
here is trusted: the kernel checks every end before use (:func:`.settle.first_verified`).
``method`` names where a candidate came from on both sides, as the sealed ends and the kernel's
verdicts do; the certificate format writes it ``method`` (lower) and ``construction`` (upper).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..util.dense import Dense

#: Relative slack with which a float64 figure is taken to meet a tolerance: the kernel decides the
#: claim, so a hair too generous costs one check, never an end.
SLACK = 1e-12


@dataclass(frozen=True, eq=False)
class UpperCandidate:
    """Float64 upper witness ``B = U W^T`` of rank <= r with float64 error ``error``."""

    r: int
    U: np.ndarray
    W: np.ndarray
    error: float
    method: str

    def meets(self, eps: float) -> bool:
        """Whether the witness proposes ``r_eps <= r``: its error is ``<= eps`` (with :data:`SLACK`)."""
        return self.error <= eps * (1 + SLACK)


@dataclass(frozen=True, eq=False)
class LowerCandidate:
    """Float64 lower pair ``(X, Y)`` for k with float64 threshold ``threshold``."""

    k: int
    X: np.ndarray
    Y: np.ndarray
    threshold: float
    method: str

    def meets(self, eps: float) -> bool:
        """Whether the pair proposes ``r_eps >= k``: its threshold is ``> eps`` (with :data:`SLACK`)."""
        return self.threshold > eps * (1 - SLACK)


class CandidatePool:
    """Best witnesses per rank and lower pairs per k of one operator (``d``: its float64 arrays)."""

    def __init__(self, dense: Dense) -> None:
        self.d = dense
        self.witnesses: dict[int, UpperCandidate] = {}
        self.lower_pairs: dict[int, LowerCandidate] = {}

    def add_witness(self, w: UpperCandidate) -> None:
        old = self.witnesses.get(w.r)
        if old is None or w.error < old.error:
            self.witnesses[w.r] = w

    def add_lower_pair(self, c: LowerCandidate) -> None:
        old = self.lower_pairs.get(c.k)
        if old is None or c.threshold > old.threshold:
            self.lower_pairs[c.k] = c

    def prune(self, ends: list[tuple[float, int, int]]) -> None:
        """Drop the candidates that no tolerance can use any more: ``ends`` holds ``(eps, k, r)``,
        each tolerance's verified ends.  A witness stays while some eps it meets has its upper
        end at or above its rank (:meth:`upper_candidates` and :meth:`best_rank` read it); a lower
        pair while some eps below its threshold has its lower end at or below its k.  What goes
        could never be proposed again: the ends only improve."""
        self.witnesses = {r: w for r, w in self.witnesses.items()
                          if any(w.meets(eps) and r <= up for eps, _lo, up in ends)}
        self.lower_pairs = {k: c for k, c in self.lower_pairs.items()
                            if any(c.meets(eps) and k >= lo for eps, lo, _up in ends)}

    # -- read-outs ------------------------------------------------------------------
    def upper_candidates(self, eps: float) -> list[UpperCandidate]:
        """Witnesses whose float64 error is <= eps (with a hair of slack), smallest rank first."""
        ok = [w for w in self.witnesses.values() if w.meets(eps)]
        return sorted(ok, key=lambda w: (w.r, w.error))

    def best_rank(self, eps: float) -> int | None:
        """Least rank with a float64 witness of error ``<= eps`` (None if there is none), with the
        slack of :meth:`upper_candidates` and :meth:`prune` (:meth:`UpperCandidate.meets`)."""
        return min((w.r for w in self.witnesses.values() if w.meets(eps)), default=None)

    def lower_candidates(self, eps: float) -> list[LowerCandidate]:
        """Lower pairs whose float64 threshold exceeds eps (minus a hair), largest k first."""
        ok = [c for c in self.lower_pairs.values() if c.meets(eps)]
        return sorted(ok, key=lambda c: (-c.k, -c.threshold))
