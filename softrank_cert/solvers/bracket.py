"""Bracket driver: kernel-verified ``[lower, upper]`` ends of ``r_eps(A)`` per tolerance.

The solvers (untrusted) fill one :class:`~.candidates.CandidatePool` per operator (the one-shot
constructions of :class:`~.one_shot.OneShot`, then the searches); after every
search stage, each tolerance takes the largest-k lower pair and the smallest-rank witness
that the *kernel* verifies (:func:`.settle.first_verified`), trying the next candidate when
one is REJECTED or INCONCLUSIVE.  Trivial ends are always there: ``k = 1`` when ``||A|| > eps``
(else ``k = 0``), ``r = p`` (``B = A``), and ``r = 0`` when ``eps >= ||A||``.  Stages stop once
every tolerance is resolved or the work budget (:mod:`.work`; optionally a wall-time cap) is
spent; the best verified ends so far are returned.
"""

from __future__ import annotations

import itertools
import math
import time
import weakref
from typing import Any, TypeVar
from collections.abc import Callable

from ..certio.verified import VerifiedBracket, VerifiedLower, VerifiedUpper, verify_lower_end, verify_upper_end
from ..errors import InternalInvariantError
from ..kernel import Operator, parse_tolerance
from .backend import NUMPY, NumpyBackend
from .candidates import CandidatePool
from .device import SearchDevice, check_device_memory, resolve_device, search_memory
from .one_shot import OneShot
from ..util.dense import Dense
from ..util.memory import CheckPlan, lower_factor_bytes, operator_check_plan
from .lower.search import LowerSearch
from .settle import first_verified
from .upper.search import UpperSearch
from .work import Budget, Until, default_seconds, effective_work, one_blas_thread, units_per_second


End = TypeVar("End", VerifiedLower, VerifiedUpper)


def _always(end: End | None, eps: str) -> End:
    """A trivial end that always holds (k = 0, r = p): the kernel not verifying it is a checker bug."""
    if end is None:
        raise InternalInvariantError(f"a trivial end that always holds is not VERIFIED at eps {eps}")
    return end


class Ends:
    """Best kernel-verified ends at one tolerance (``.lower``, ``.upper``), upgraded from the
    candidates of a pool by :meth:`settle`; ``plan``: the memory the kernel's fallback paths may
    use for them (:func:`~softrank_cert.util.memory.task_check_plan`; None: the kernel's defaults)."""

    def __init__(self, op: Operator, eps: str, plan: CheckPlan | None = None) -> None:
        self.op, self.eps, self.value, self.plan = op, eps, float(parse_tolerance(eps)), plan
        self.lower: VerifiedLower = (verify_lower_end(op, eps, 1, None, None, "trivial", plan=plan)
                                     or _always(verify_lower_end(op, eps, 0, None, None, "trivial"), eps))
        self.upper: VerifiedUpper = (verify_upper_end(op, eps, 0, None, None, "zero", plan=plan)
                                     or _always(verify_upper_end(op, eps, op.p, None, None, "identity"), eps))
        # Candidates already tried, held weakly: a superseded witness is freed (on high-rank
        # heads they were most of the search's memory), and a freed one cannot come back.
        self._checked: weakref.WeakSet[object] = weakref.WeakSet()

    @property
    def resolved(self) -> bool:
        return self.lower.k >= self.upper.r

    def _fresh(self, c: object) -> bool:
        if c in self._checked:
            return False
        self._checked.add(c)
        return True

    def settle(self, pool: CandidatePool) -> None:
        """Verify candidates better than the current ends, best first, until one passes."""
        lower = itertools.takewhile(lambda c: c.k > self.lower.k, pool.lower_candidates(self.value))
        found: tuple[str, Any, Any] | None = first_verified(self.op, ((self.eps, c) for c in lower if self._fresh(c)),
                                                            self.plan)
        if found is not None:
            self.lower = found[2]
        upper = itertools.takewhile(lambda w: w.r < self.upper.r, pool.upper_candidates(self.value))
        found = first_verified(self.op, ((self.eps, w) for w in upper if self._fresh(w)), self.plan)
        if found is not None:
            self.upper = found[2]
        if self.lower.k > self.upper.r:
            raise InternalInvariantError(
                f"verified lower end {self.lower.k} exceeds verified upper end {self.upper.r} at eps {self.eps}")


#: The pivot stage (one evaluation is not interruptible: ~0.5 s at k = 48 on 512 x 512, 17 s at
#: k = 128) stops at this k and this share of the budget; larger k are the lower search's work.
PIVOT_MAX_K, PIVOT_SHARE = 48, 0.15
#: Share of the search work (after the set-up) that the witness search may use; the lower
#: search has the rest, and either takes over what the other leaves when it finishes early.
UPPER_SHARE = 0.6
#: The two searches alternate in this many rounds, so that neither end is starved and each
#: sees the other's verified ends (the upper search never probes below the lower end; the
#: lower search never looks above the upper end).
ROUNDS = 3


def default_budget_seconds(m: int, n: int) -> float:
    """Wall time of the default work budget on the calibration machine (all tolerances together).

    16 s at 128 x 128, about 42 s at 256, 111 s at 512, 294 s at 1024; never below 4 s or
    above 600 s.  The default search is bounded by work (:func:`.work.default_work`), not by
    this time: on a busy or slower machine it takes longer and finds the same ends.
    """
    return default_seconds(m, n)


def search_budget(m: int, n: int, work: float | None = None, budget_seconds: float | None = None) -> Budget:
    """The budget of one operator's search (its deadline counted from now).

    Neither given: :func:`.work.default_work` units, no deadline (the same ends however busy the
    machine).  ``budget_seconds`` alone: a wall-time bound only (``math.inf``: none at all) --
    the ends may then depend on the load.  Both: whichever runs out first.  A ``work`` that is
    NaN or negative is refused (ValueError); ``math.inf`` is unbounded work.
    """
    if work is not None and not work >= 0:
        raise ValueError("the work budget must be >= 0")
    work = effective_work(work, budget_seconds, m, n)
    if work is None:
        work = math.inf
    timed = budget_seconds is not None and math.isfinite(budget_seconds)
    deadline = time.perf_counter() + budget_seconds if timed else None  # type: ignore[operator]  # timed: a float
    plan = units_per_second(m, n) * budget_seconds if timed else math.inf  # type: ignore[operator]  # timed: a float
    return Budget(work, deadline, plan)


class _Clock:
    """Start, budget and stage reporting of one operator's search (``progress(stage,
    elapsed_seconds, nominal_seconds)``: the true wall seconds since the search began, which may
    exceed the nominal budget of a work-bounded search on a busy machine)."""

    def __init__(self, budget: Budget, nominal: float, progress: Callable[[str, float, float], None] | None) -> None:
        self.start = time.perf_counter()
        self.budget, self.nominal, self.progress = budget, nominal, progress

    def report(self, stage: str) -> None:
        if self.progress is not None:
            self.progress(stage, time.perf_counter() - self.start, self.nominal)


def _search(pool: CandidatePool, ends: list[Ends], clock: _Clock, ops: NumpyBackend = NUMPY,
            keep_candidates: bool = False, memory: float = math.inf) -> None:
    """The search: free truncated-SVD witnesses and pivot pairs, then the smoothed witness
    search (its states and vectors within ``memory`` bytes) and the lower-pair search (its states
    within :func:`~softrank_cert.util.memory.lower_factor_bytes`) in alternating rounds, each round a fixed share of work.  After every settling the pool drops
    what no tolerance can use (:meth:`CandidatePool.prune`), unless ``keep_candidates``."""
    budget = clock.budget
    shots = OneShot(pool, budget.until())
    open_ = lambda: [e for e in ends if not e.resolved]  # noqa: E731

    def settle() -> None:
        for e in ends:
            e.settle(pool)
        if not keep_candidates:
            pool.prune([(e.value, e.lower.k, e.upper.r) for e in ends])

    for e in open_():  # truncated SVD: every rank's error is already known
        r = next((r for r in range(1, pool.d.p) if shots.tsvd[r] <= e.value), None)
        if r is not None:
            shots.witness("tsvd", r)
    settle()
    clock.report("tsvd")
    shots.until = budget.until(PIVOT_SHARE)  # the pivot stage: a share of the work (and time), k <= PIVOT_MAX_K
    for e in open_():
        shots.search_lower("pivot", e.value, e.lower.k, min(e.upper.r, PIVOT_MAX_K))
    settle()
    clock.report("pivot")
    by_value = {e.value: e for e in ends}
    values = [e.value for e in open_()]
    if not values or budget.spent():
        return
    total = budget.plan_left()
    upper = UpperSearch(pool.d, values, pool.add_witness, pool.best_rank,
                        lambda eps: by_value[eps].lower.k, UPPER_SHARE * total, ops=ops, memory=memory)
    lower = LowerSearch(pool.d, values, pool.add_lower_pair, lambda eps: by_value[eps].upper.r,
                        lambda eps: by_value[eps].lower.k, ops=ops, memory=lower_factor_bytes(*pool.d.shape))
    searches: list[tuple[str, Any, float]] = [("smooth", upper, UPPER_SHARE), ("lower", lower, 1.0 - UPPER_SHARE)]
    finished: set[str] = set()
    left_at_start = budget.left(), (None if budget.deadline is None else max(budget.deadline - time.perf_counter(), 0.0))
    for round_ in range(1, ROUNDS + 1):
        for name, search, share in searches:
            if name in finished or all(e.resolved for e in ends) or budget.spent():
                continue
            alone = len(finished) == len(searches) - 1
            last = alone or round_ == ROUNDS and name == searches[-1][0]
            if search.run(budget.until() if last else _slice(budget, share / ROUNDS, left_at_start)):
                finished.add(name)
                if name == "lower":
                    upper.grant(budget.plan_left())
            settle()
            clock.report(f"{name} {round_}/{ROUNDS}")
    while len(finished) < len(searches) and not all(e.resolved for e in ends) and not budget.spent():
        for name, search, _ in searches:  # work the other search left unused
            if name not in finished and search.run(budget.until()):
                finished.add(name)
            settle()
            clock.report(name)


def _slice(budget: Budget, fraction: float, start: tuple[float, float | None]) -> Until:
    """A stop point after ``fraction`` of the work (and of the seconds) that were left when the
    rounds began (``start``)."""
    work_left, seconds_left = start
    deadline = budget.deadline
    if deadline is not None and seconds_left is not None:
        deadline = min(deadline, time.perf_counter() + fraction * seconds_left)
    return Until(budget, min(budget.used + fraction * work_left, budget.work), deadline)


def search_operator(op: Operator, eps_list: list[str], *, work: float | None = None,
                    budget_seconds: float | None = None,
                    progress: Callable[[str, float, float], None] | None = None,
                    device: str | SearchDevice | None = None, keep_candidates: bool = False,
                    max_memory: int | None = None) -> tuple[CandidatePool | None, list[Ends]]:
    """Run the driver's search; return its float64 candidate pool (None when every tolerance
    was settled by trivial ends) and, per tolerance, the best kernel-verified :class:`Ends`.
    See :func:`bracket_operator` for the budget, ``progress`` and ``device``.  The kernel's checks
    keep to the task's memory (:func:`~softrank_cert.util.memory.task_check_plan`; ``max_memory``, a
    ``--max-memory`` the user gave, lets them use what it leaves beside the task); the pool keeps
    only what the tolerances can still use unless ``keep_candidates`` (every candidate found)."""
    from ..blas_kernels import warn_if_unpinned

    warn_if_unpinned()
    where = resolve_device(device, op.shape)
    check_device_memory(where, *op.shape)
    budget = search_budget(*op.shape, work=work, budget_seconds=budget_seconds)
    nominal = (default_budget_seconds(*op.shape) if budget_seconds is None else float(budget_seconds))
    clock = _Clock(budget, nominal, progress)
    plan = operator_check_plan(op, max_memory, where.kind)
    ends = [Ends(op, eps, plan) for eps in eps_list]
    pool = None
    if not all(e.resolved for e in ends):
        with one_blas_thread(), where.threads():
            pool = CandidatePool(Dense.of(op))
            _search(pool, ends, clock, where.backend(), keep_candidates, search_memory(where, *op.shape))
    return pool, ends


def bracket_operator(op: Operator, eps_list: list[str], *, work: float | None = None,
                     budget_seconds: float | None = None,
                     progress: Callable[[str, float, float], None] | None = None,
                     device: str | SearchDevice | None = None, max_memory: int | None = None) -> list[VerifiedBracket]:
    """Kernel-verified brackets of ``r_eps(A)`` for each tolerance in ``eps_list``.

    The search is bounded by ``work`` units (:mod:`.work`; default :func:`.work.default_work`,
    about :func:`default_budget_seconds` on the calibration machine): the same operator,
    tolerances and work give the same brackets, byte for byte, however busy the machine.
    ``budget_seconds`` adds a wall-time cap (alone it is the only bound, ``math.inf``: none):
    then the ends may depend on the load.  The best verified ends so far are returned.  The
    trivial ends need no search; the truncated-SVD witness is always formed.
    ``progress(stage, elapsed_seconds, nominal_seconds)`` is called after each stage.
    ``device`` (:mod:`.device`): where the smoothed witness search and the large-k key sides run
    (default: the numpy path); their work is charged at the device's cost, and the kernel
    decides every end from float64 numpy arrays as on the numpy path.  ``max_memory``: a
    ``--max-memory`` the user gave; the kernel's checks of the candidates may then use what it
    leaves beside the task (:func:`~softrank_cert.util.memory.task_check_cap`; None: at most
    1 GiB), so from width 1024 the ends may depend on it.
    """
    _, ends = search_operator(op, eps_list, work=work, budget_seconds=budget_seconds, progress=progress,
                              device=device, max_memory=max_memory)
    return [VerifiedBracket(e.eps, e.lower, e.upper) for e in ends]
