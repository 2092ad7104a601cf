"""Bracket driver: kernel-verified ``[lower, upper]`` ends of ``r_eps(A)`` per tolerance.

The solvers (untrusted) fill one :class:`~.profiles.Profiles` per operator; after every
search stage, each tolerance takes the largest-k certificate and the smallest-rank witness
that the *kernel* verifies, trying the next candidate when one is REJECTED or INCONCLUSIVE.
Trivial ends are always there: ``k = 1`` when ``||A|| > eps`` (else ``k = 0``), ``r = p``
(``B = A``), and ``r = 0`` when ``eps >= ||A||``.  Stages stop once every tolerance is
resolved or the time budget is spent; the best verified ends so far are returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ..errors import InternalInvariantError
from ..kernel import (Operator, Status, Verdict, parse_tolerance, verify_lower, verify_trivial_lower,
                      verify_trivial_upper, verify_upper)
from .dense import Dense
from .profiles import Profiles

#: Largest k at which the (cubic-cost) pooled and LP-alternation certificates are tried.
POOLED_MAX_K = 40
#: How many k above the current lower end LP alternation tries per tolerance.
LP_STEPS = 3


@dataclass(frozen=True, eq=False)
class LowerEnd:
    """Verified claim ``r_eps >= k``; ``X``/``Y`` None for the trivial ends (k <= 1)."""

    k: int
    X: np.ndarray | None
    Y: np.ndarray | None
    method: str
    verdict: Verdict
    threshold: float | None = None  # float64 estimate of 1/(||X|| ||Y|| ||(XAY)^-1||)


@dataclass(frozen=True, eq=False)
class UpperEnd:
    """Verified claim ``r_eps <= r``; ``U``/``W`` None for the trivial ends (r = 0 or p)."""

    r: int
    U: np.ndarray | None
    W: np.ndarray | None
    construction: str
    verdict: Verdict
    error: float | None = None  # float64 estimate of ||A - U W^T||


@dataclass(frozen=True, eq=False)
class Bracket:
    """Both verified ends at one tolerance ``eps`` (an exact decimal string)."""

    eps: str
    lower: LowerEnd
    upper: UpperEnd

    @property
    def resolved(self) -> bool:
        return self.lower.k == self.upper.r


class _Ends:
    """Best verified ends at one tolerance, upgraded from profile candidates."""

    def __init__(self, op: Operator, eps: str) -> None:
        self.op, self.eps, self.value = op, eps, float(parse_tolerance(eps))
        one = verify_trivial_lower(op, eps, 1)
        self.lower = (LowerEnd(1, None, None, "trivial", one) if one.status is Status.VERIFIED
                      else LowerEnd(0, None, None, "trivial", verify_trivial_lower(op, eps, 0)))
        zero = verify_trivial_upper(op, eps, 0)
        self.upper = (UpperEnd(0, None, None, "zero", zero) if zero.status is Status.VERIFIED
                      else UpperEnd(op.p, None, None, "identity", verify_trivial_upper(op, eps, op.p)))
        # Candidates already tried, kept alive so that id() is never reused by a new one.
        self._checked: dict[int, object] = {}

    @property
    def resolved(self) -> bool:
        return self.lower.k >= self.upper.r

    def settle(self, prof: Profiles) -> None:
        """Verify candidates better than the current ends, best first, until one passes."""
        for c in prof.lower_candidates(self.value):
            if c.k <= self.lower.k:
                break
            if id(c) in self._checked:
                continue
            self._checked[id(c)] = c
            v = verify_lower(self.op, self.eps, c.k, c.X, c.Y, method=c.method)
            if v.status is Status.VERIFIED:
                self.lower = LowerEnd(c.k, c.X, c.Y, c.method, v, c.threshold)
                break
        for w in prof.upper_candidates(self.value):
            if w.r >= self.upper.r:
                break
            if id(w) in self._checked:
                continue
            self._checked[id(w)] = w
            v = verify_upper(self.op, self.eps, w.r, w.U, w.W, method=w.construction)
            if v.status is Status.VERIFIED:
                self.upper = UpperEnd(w.r, w.U, w.W, w.construction, v, w.error)
                break
        if self.lower.k > self.upper.r:
            raise InternalInvariantError(
                f"verified lower end {self.lower.k} exceeds verified upper end {self.upper.r} at eps {self.eps}")


def _stages(prof: Profiles, ends: list[_Ends]) -> Iterator[str]:
    """Search stages, cheapest first; each yields its name after filling the profiles."""
    open_ = lambda: [e for e in ends if not e.resolved]  # noqa: E731
    p = prof.d.p
    for e in open_():  # truncated SVD: every rank's error is already known
        r = next((r for r in range(1, p) if prof.tsvd[r] <= e.value), None)
        if r is not None:
            prof.witness("tsvd", r)
    yield "tsvd"
    for e in open_():
        prof.search_lower("pivot", e.value, e.lower.k, e.upper.r)
    yield "pivot"
    for e in open_():
        prof.search_upper("l1_polish", e.value, max(e.lower.k, 1), e.upper.r)
    yield "l1_polish"
    for e in open_():
        for construction in ("skeleton", "cluster", "features"):
            if e.upper.r > 1:
                prof.witness(construction, e.upper.r - 1)
    yield "constructions"
    for method in ("seeded", "pooled"):
        for e in open_():
            prof.search_lower(method, e.value, e.lower.k, min(e.upper.r, POOLED_MAX_K))
        yield method
    for e in open_():
        for k in range(e.lower.k + 1, min(e.lower.k + LP_STEPS, e.upper.r, POOLED_MAX_K) + 1):
            c = prof.certificate("lp_alternation", k)
            if c is None or c.threshold <= e.value:
                break
    yield "lp_alternation"
    for e in open_():
        prof.search_upper("alt_l1", e.value, max(e.lower.k, 1), e.upper.r)
    yield "alt_l1"


def bracket_operator(op: Operator, eps_list: list[str], *, budget_seconds: float | None = None,
                     progress: Callable[[str, int, int], None] | None = None) -> list[Bracket]:
    """Kernel-verified brackets of ``r_eps(A)`` for each tolerance in ``eps_list``.

    ``budget_seconds`` bounds the solver time (searches stop, the best verified ends so far
    are kept; the trivial ends need no search).  ``progress(stage, done, total)`` is called
    after each search stage.
    """
    deadline = None if budget_seconds is None else time.perf_counter() + budget_seconds
    ends = [_Ends(op, eps) for eps in eps_list]
    if not all(e.resolved for e in ends):
        prof = Profiles(Dense.of(op), deadline)
        stages = list(_STAGE_NAMES)
        for done, name in enumerate(_stages(prof, ends), start=1):
            for e in ends:
                e.settle(prof)
            if progress is not None:
                progress(name, done, len(stages))
            if all(e.resolved for e in ends) or prof.out_of_time():
                break
    return [Bracket(e.eps, e.lower, e.upper) for e in ends]


_STAGE_NAMES = ("tsvd", "pivot", "l1_polish", "constructions", "seeded", "pooled", "lp_alternation", "alt_l1")
