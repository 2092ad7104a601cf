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
from typing import Callable

import numpy as np

from ..certio.certificate import Bracket, LowerEnd, UpperEnd
from ..errors import InternalInvariantError
from ..kernel import (Operator, Status, Verdict, parse_tolerance, verify_lower, verify_trivial_lower,
                      verify_trivial_upper, verify_upper)
from .dense import Dense
from .lower_search import LowerSearch
from .profiles import Profiles
from .upper_search import UpperSearch

#: Largest k at which the (cubic-cost) pooled certificates are tried by targeted searches.
POOLED_MAX_K = 40


@dataclass(frozen=True, eq=False)
class VerifiedLower:
    """Kernel-verified claim ``r_eps >= k``; ``X``/``Y`` None for the trivial ends (k <= 1)."""

    k: int
    X: np.ndarray | None
    Y: np.ndarray | None
    method: str
    verdict: Verdict
    threshold: float | None = None  # float64 estimate of 1/(||X|| ||Y|| ||(XAY)^-1||)


@dataclass(frozen=True, eq=False)
class VerifiedUpper:
    """Kernel-verified claim ``r_eps <= r``; ``U``/``W`` None for the trivial ends (r = 0 or p)."""

    r: int
    U: np.ndarray | None
    W: np.ndarray | None
    construction: str
    verdict: Verdict
    error: float | None = None  # float64 estimate of ||A - U W^T||


@dataclass(frozen=True, eq=False)
class VerifiedBracket:
    """Both verified ends at one tolerance ``eps`` (an exact decimal string)."""

    eps: str
    lower: VerifiedLower
    upper: VerifiedUpper

    @property
    def resolved(self) -> bool:
        return self.lower.k == self.upper.r

    def to_certificate(self) -> Bracket:
        """The certificate format's bracket of these ends (ranks, arrays and method names; the
        kernel's verdicts and the float64 estimates stay here): the one conversion from solver
        results to a certificate document (:func:`~softrank_cert.certio.issuing.certificate_for`)."""
        lower, upper = self.lower, self.upper
        return Bracket(self.eps, LowerEnd(lower.k, lower.method, lower.X, lower.Y),
                       UpperEnd(upper.r, upper.construction, upper.U, upper.W))


class _Ends:
    """Best verified ends at one tolerance, upgraded from profile candidates."""

    def __init__(self, op: Operator, eps: str) -> None:
        self.op, self.eps, self.value = op, eps, float(parse_tolerance(eps))
        one = verify_trivial_lower(op, eps, 1)
        self.lower = (VerifiedLower(1, None, None, "trivial", one) if one.status is Status.VERIFIED
                      else VerifiedLower(0, None, None, "trivial", verify_trivial_lower(op, eps, 0)))
        zero = verify_trivial_upper(op, eps, 0)
        self.upper = (VerifiedUpper(0, None, None, "zero", zero) if zero.status is Status.VERIFIED
                      else VerifiedUpper(op.p, None, None, "identity", verify_trivial_upper(op, eps, op.p)))
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
                self.lower = VerifiedLower(c.k, c.X, c.Y, c.method, v, c.threshold)
                break
        for w in prof.upper_candidates(self.value):
            if w.r >= self.upper.r:
                break
            if id(w) in self._checked:
                continue
            self._checked[id(w)] = w
            v = verify_upper(self.op, self.eps, w.r, w.U, w.W, method=w.construction)
            if v.status is Status.VERIFIED:
                self.upper = VerifiedUpper(w.r, w.U, w.W, w.construction, v, w.error)
                break
        if self.lower.k > self.upper.r:
            raise InternalInvariantError(
                f"verified lower end {self.lower.k} exceeds verified upper end {self.upper.r} at eps {self.eps}")


#: The pivot stage (one evaluation is not interruptible: ~0.5 s at k = 48 on 512 x 512, 17 s at
#: k = 128) stops at this k and this share of the budget; larger k are the lower search's work.
PIVOT_MAX_K, PIVOT_SHARE = 48, 0.15
#: Share of the search time (after the set-up) that the witness search may use; the lower
#: search has the rest, and either takes over what the other leaves when it finishes early.
UPPER_SHARE = 0.6
#: The two searches alternate in this many rounds, so that neither end is starved and each
#: sees the other's verified ends (the upper search never probes below the lower end; the
#: lower search never looks above the upper end).
ROUNDS = 3
#: Default budget: ``BUDGET_BASE * (m N / 128^2) ** BUDGET_EXPONENT`` seconds, clamped.
BUDGET_BASE, BUDGET_EXPONENT, BUDGET_MIN, BUDGET_MAX = 16.0, 0.7, 4.0, 600.0


def default_budget_seconds(m: int, n: int) -> float:
    """Default solver time for an m x N operator (all tolerances together).

    16 s at 128 x 128, about 42 s at 256, 111 s at 512, 294 s at 1024; never below 4 s or
    above 600 s.  Pass ``budget_seconds=math.inf`` to :func:`bracket_operator` for no bound.
    """
    return float(min(BUDGET_MAX, max(BUDGET_MIN, BUDGET_BASE * (m * n / 128.0 ** 2) ** BUDGET_EXPONENT)))


class _Clock:
    """Start, deadline and stage reporting of one operator's search."""

    def __init__(self, budget: float, progress: Callable[[str, float, float], None] | None) -> None:
        self.start = time.perf_counter()
        self.budget = budget
        self.deadline = self.start + budget
        self.progress = progress

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def report(self, stage: str) -> None:
        if self.progress is not None:
            self.progress(stage, min(time.perf_counter() - self.start, self.budget), self.budget)


def _search(prof: Profiles, ends: list[_Ends], clock: _Clock) -> None:
    """The time-aware search: free truncated-SVD witnesses and pivot certificates, then the
    smoothed witness search and the lower-certificate search in alternating rounds."""
    open_ = lambda: [e for e in ends if not e.resolved]  # noqa: E731
    settle = lambda: [e.settle(prof) for e in ends]  # noqa: E731
    for e in open_():  # truncated SVD: every rank's error is already known
        r = next((r for r in range(1, prof.d.p) if prof.tsvd[r] <= e.value), None)
        if r is not None:
            prof.witness("tsvd", r)
    settle()
    clock.report("tsvd")
    full_deadline = prof.deadline  # the pivot stage may use PIVOT_SHARE of the budget, k <= PIVOT_MAX_K
    if full_deadline is not None:
        prof.deadline = min(full_deadline, time.perf_counter() + PIVOT_SHARE * clock.budget)
    for e in open_():
        prof.search_lower("pivot", e.value, e.lower.k, min(e.upper.r, PIVOT_MAX_K))
    prof.deadline = full_deadline
    settle()
    clock.report("pivot")
    by_value = {e.value: e for e in ends}
    values = [e.value for e in open_()]
    if not values or clock.left() <= 0:
        return
    total = clock.left()
    upper = UpperSearch(prof.d, values, prof.add_witness, prof.best_rank,
                        lambda eps: by_value[eps].lower.k, UPPER_SHARE * total)
    lower = LowerSearch(prof.d, values, prof.add_certificate, lambda eps: by_value[eps].upper.r,
                        lambda eps: by_value[eps].lower.k)
    searches = [("smooth", upper, UPPER_SHARE), ("lower", lower, 1.0 - UPPER_SHARE)]
    finished: set[str] = set()
    for round_ in range(1, ROUNDS + 1):
        for name, search, share in searches:
            if name in finished or all(e.resolved for e in ends) or clock.left() <= 0:
                continue
            alone = len(finished) == len(searches) - 1
            until = clock.deadline if alone or round_ == ROUNDS and name == searches[-1][0] \
                else time.perf_counter() + share * total / ROUNDS
            if search.run(min(until, clock.deadline)):
                finished.add(name)
                if name == "lower":
                    upper.grant(clock.left())
            settle()
            clock.report(f"{name} {round_}/{ROUNDS}")
    while len(finished) < len(searches) and not all(e.resolved for e in ends) and clock.left() > 0:
        for name, search, _ in searches:  # time the other search left unused
            if name not in finished and search.run(clock.deadline):
                finished.add(name)
            settle()
            clock.report(name)


def search_operator(op: Operator, eps_list: list[str], *, budget_seconds: float | None = None,
                    progress: Callable[[str, float, float], None] | None = None
                    ) -> tuple[Profiles | None, list[_Ends]]:
    """Run the driver's search; return its float64 profiles (None when every tolerance was
    settled by trivial ends) and, per tolerance, the best kernel-verified ends (``.lower``,
    ``.upper``).  See :func:`bracket_operator` for the budget and ``progress``."""
    budget = default_budget_seconds(*op.shape) if budget_seconds is None else float(budget_seconds)
    clock = _Clock(budget, progress)
    ends = [_Ends(op, eps) for eps in eps_list]
    prof = None
    if not all(e.resolved for e in ends):
        prof = Profiles(Dense.of(op), None if budget == float("inf") else clock.deadline)
        _search(prof, ends, clock)
    return prof, ends


def bracket_operator(op: Operator, eps_list: list[str], *, budget_seconds: float | None = None,
                     progress: Callable[[str, float, float], None] | None = None) -> list[VerifiedBracket]:
    """Kernel-verified brackets of ``r_eps(A)`` for each tolerance in ``eps_list``.

    ``budget_seconds`` bounds the search (default :func:`default_budget_seconds`; ``math.inf``
    for none): every search checks the deadline inside its evaluations, and the best verified
    ends so far are returned.  The trivial ends need no search; the truncated-SVD witness is
    always formed.  ``progress(stage, elapsed_seconds, budget_seconds)`` is called after each
    stage.
    """
    _, ends = search_operator(op, eps_list, budget_seconds=budget_seconds, progress=progress)
    return [VerifiedBracket(e.eps, e.lower, e.upper) for e in ends]
