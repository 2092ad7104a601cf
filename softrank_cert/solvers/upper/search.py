"""Resumable smallest-rank search for smoothed-minimax witnesses (UNTRUSTED).

For each tolerance, largest first (smallest ranks, cheapest probes), the search looks for the
least rank r whose :mod:`.smooth` witness has float64 error ``<= eps``:

* start: ``hi`` = the least rank with a known witness (the truncated SVD's ``r_t`` is free);
  the first probe is at ``0.7 hi``, then steps of ``0.1 hi`` (doubling) go down while probes
  succeed, and bisection follows the first failure;
* a probe runs the continuation one stage at a time and is abandoned once its error cannot
  reach ``eps`` (:data:`.smooth.ABORT`); no rank below the verified lower end is tried; on
  operators of at least :data:`WIDE_FROM` entries a probe runs only the :data:`WIDE_STAGES`
  smoothest stages, with the iterations of all of them, and is abandoned before its last
  stage above :data:`LAST_STAGE_ABORT`;
* every rank keeps its solver state, so a later tolerance continues the iterate an earlier one
  left (nothing is recomputed), and every improved pair goes to the profiles at once -- within
  the search's memory (``memory`` bytes): a probe at rank r holds :data:`PROBE_VECTORS` float64
  vectors of ``(m + N) r`` and every kept state :data:`STATE_VECTORS`; to make room, states are
  dropped (their best pairs are published already) -- first those no probe can come back to,
  then those farthest below a tolerance's best rank (the squeezes probe just below it) -- and a
  probe that would not fit alone is made at the largest rank that does (:meth:`UpperSearch.rank_cap`);
* when the bisection is done and work is left, the ranks below the best one are squeezed
  with longer stages (galloping while they succeed; the single step right below the best
  rank runs without the abort rule, except at a rank no probe has started on a wide operator).

Each tolerance gets a cumulative share of the search's work (``1 : 1.5 : 2 : ...`` from the
largest eps down, in the units of :mod:`~softrank_cert.solvers.work`); what one leaves unused passes to the next.
:meth:`UpperSearch.run` works until a stop point and resumes where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Sequence

import numpy as np

from ...util.dense import Dense
from ...util.memory import PROBE_VECTORS, STATE_VECTORS, probe_rank_cap
from ..backend import NUMPY, NumpyBackend
from ..candidates import UpperCandidate
from .smooth import ABORT, CHECK_EVERY, EVALS_PER_ITERATION, STAGES, SmoothState, run_stages, tsvd_start
from ..work import Until, check_units, evaluation_units

#: L-BFGS iterations per continuation stage in a probe: as many as the tolerance's share of
#: work allows for the probes its bisection will need, within these bounds (more iterations
#: per stage lower the error markedly: 60 -> 400 takes one 128-wide head from 0.256 to 0.209).
MIN_ITERATIONS, MAX_ITERATIONS = 60, 1000
#: Continuation stages a squeeze may add beyond :data:`STAGES`.
SQUEEZE_EXTRA_STAGES = 3
#: Passes over all tolerances with ever longer squeezes, for work the shares leave unused.
LEFTOVER_PASSES = 3
#: Operators of at least this many entries are searched as wide (docs/solvers.md, "Wide
#: operators"): a probe runs :data:`WIDE_STAGES` continuation stages, not all of
#: :data:`STAGES`, with the iterations of the others.
WIDE_FROM = 512 * 512
#: Continuation stages of a probe on a wide operator (the smoothest ones).
WIDE_STAGES = 2
#: A probe with one stage left is abandoned when its error exceeds ``target * LAST_STAGE_ABORT``
#: (or the tighter :data:`~.smooth.ABORT` of its stage): the last stage of a wide two-stage probe
#: lowered the error by 4-9 % (docs/solvers.md, "Fewer probes at ranks that cannot succeed").
LAST_STAGE_ABORT = 1.10


def held_bytes(shape: tuple[int, int], probe: int, kept: Iterable[int]) -> int:
    """Bytes the search counts as held while it probes rank ``probe`` of an m x N operator
    (``shape``) with other states kept at the ranks ``kept``: the probe's vectors and its state,
    and each kept state's (what :attr:`UpperSearch.memory` bounds)."""
    vector = 8 * sum(shape)
    return (PROBE_VECTORS + STATE_VECTORS) * vector * probe + STATE_VECTORS * vector * sum(kept)


class UpperSearch:
    """Smallest-rank smoothed witnesses at several tolerances at once, resumable.

    ``add(witness)`` receives every improved :class:`~softrank_cert.solvers.candidates.UpperCandidate`; ``best_rank(eps)``
    is the least rank with a known float64 witness of error ``<= eps`` (``None`` if none);
    ``floor(eps)`` the verified lower end (no rank below it can succeed).  ``work`` is the
    total work (units of :mod:`~softrank_cert.solvers.work`) this search may use, split between the tolerances as
    described above.  ``ops``: the array back end the witnesses are searched on
    (:mod:`~softrank_cert.solvers.backend`; what is published is float64 numpy); ``memory``: the
    bytes its states and its probe's vectors may hold (module docstring; ``math.inf``: no limit).
    """

    def __init__(self, d: Dense, eps_values: Sequence[float], add: Callable[[UpperCandidate], None],
                 best_rank: Callable[[float], int | None], floor: Callable[[float], int], work: float,
                 ops: NumpyBackend = NUMPY, memory: float = math.inf) -> None:
        self.d, self.add, self.best_rank, self.floor, self.ops = d, add, best_rank, floor, ops
        self.memory = memory
        self.eps_values = sorted(set(eps_values), reverse=True)
        weights = np.array([1.0 + 0.5 * i for i in range(len(self.eps_values))])
        self.shares = np.cumsum(weights) / weights.sum() * work
        self.spent = 0.0
        self.until: Until | None = None
        self._run_started = 0.0
        self.states: dict[int, SmoothState] = {}
        self.stages = WIDE_STAGES if d.A.size >= WIDE_FROM else len(STAGES)  # continuation stages of a probe
        self._plan = self._search()
        self.done = False

    # -- public ---------------------------------------------------------------------
    def run(self, until: Until) -> bool:
        """Search until ``until`` is reached; True once nothing is left to try."""
        self.until = until
        start = self._run_started = until.budget.used
        try:
            while not self.done and not until.reached():
                try:
                    next(self._plan)
                except StopIteration:
                    self.done = True
        finally:
            self.spent += until.budget.used - start
        return self.done

    def grant(self, work: float) -> None:
        """Let the search use ``work`` more units in all (the current and later tolerances)."""
        total = self.shares[-1]
        if 0 < total < float("inf") and work > 0:
            self.shares = self.shares * ((total + work) / total)

    def rank_cap(self) -> int:
        """The largest rank whose probe fits in the search's memory with no other state kept."""
        return probe_rank_cap(*self.d.shape, self.memory)

    # -- internals ------------------------------------------------------------------
    def _gap(self, r: int) -> float:
        """How far below a tolerance's best rank r lies, for the nearest such tolerance whose lower end
        it is not below (the squeezes probe 1, 2, 4, ... below the best rank); inf when no probe
        can come back to r."""
        gaps = [best - r for eps in self.eps_values
                for best in [self.best_rank(eps) or self.d.p] if max(self.floor(eps), 1) <= r < best]
        return min(gaps, default=math.inf)

    def _state(self, r: int) -> SmoothState:
        """Rank r's state (made from the truncated SVD if none is kept), the most recently probed,
        after other states were dropped until the probe fits: first those no probe can come back to,
        then those farthest below a best rank (:meth:`_gap`), the least recently probed first."""
        others = sorted((s for s in self.states if s != r), key=self._gap, reverse=True)  # stable: LRU order
        while others and held_bytes(self.d.shape, r, others) > self.memory:
            del self.states[others.pop(0)]
        state = self.states.pop(r, None)
        self.states[r] = state or SmoothState.start(self.d.A, *tsvd_start(self.d, r), self.ops, self.d.memo)
        return self.states[r]

    def _publish(self, r: int, st: SmoothState) -> None:
        if np.isfinite(st.best_error):
            self.add(UpperCandidate(r, self.ops.to_numpy(st.best_U), self.ops.to_numpy(st.best_W), st.best_error,
                                    "smooth"))

    def _probe(self, r: int, target: float, *, iterations: int, max_stage: int,
               abort: bool = True) -> Generator[None, None, bool]:
        """Advance rank r one stage at a time until its error is ``<= target`` (True), the
        probe is hopeless or out of stages (False); yields whenever the stop point stops it."""
        st = self._state(r)
        while True:
            if st.best_error <= target * (1 - 1e-9):
                return True
            if st.stage >= max_stage:
                return False
            if abort and 0 < st.stage <= len(ABORT) and st.best_error > target * self._abort_at(st.stage, max_stage):
                return False
            before = st.stage
            reached = run_stages(self.d, st, stages=1, iterations=iterations, target=target,
                                 until=self.until, abort=False, ops=self.ops)
            self._publish(r, st)
            if reached:
                return True
            if st.stage == before:  # stopped by the stop point: resume this stage later
                yield

    def _search(self) -> Generator[None, None, None]:
        for index, eps in enumerate(self.eps_values):
            over = lambda index=index: self.spent_now() >= self.shares[index]  # noqa: E731
            yield from self._bisect(index, eps, over)
            yield from self._squeeze(index, eps, self.stages + SQUEEZE_EXTRA_STAGES, over)
        for extra in range(1, LEFTOVER_PASSES + 1):  # work the shares left: squeeze all again, longer
            for index, eps in enumerate(self.eps_values):
                yield from self._squeeze(index, eps, self.stages + SQUEEZE_EXTRA_STAGES * (extra + 1),
                                         lambda: False, MAX_ITERATIONS)

    def _fresh_wide(self, r: int) -> bool:
        """Whether rank r is on a wide operator and no probe has started it (its first squeeze
        step is then abandoned by the abort rule like any probe: 8 of 8 such steps failed on three
        heads at 512 and took 6-15 % of the witness work, docs/solvers.md)."""
        return self.stages == WIDE_STAGES and r not in self.states

    @staticmethod
    def _abort_at(stage: int, max_stage: int) -> float:
        """The abort factor of a probe after ``stage`` stages of its ``max_stage``."""
        return min(ABORT[stage - 1], LAST_STAGE_ABORT) if max_stage - stage == 1 else ABORT[stage - 1]

    def _bisect(self, index: int, eps: float, over: Callable[[], bool]) -> Generator[None, None, None]:
        """Gallop down from the best known rank, then bisect after the first failed probe."""
        hi = self.best_rank(eps)
        hi = self.d.p if hi is None else hi
        bad = max(self.floor(eps), 1) - 1  # ranks <= bad cannot reach eps (verified lower end)
        r = max(bad + 1, int(round(0.7 * hi)))
        step = max(1, int(round(0.1 * hi)))
        failed = False
        probes_left = int(np.ceil(np.log2(max(hi - bad, 2)))) + 3
        cap = self.rank_cap()
        while hi - bad > 1 and not over() and cap > bad:
            r = min(max(r, bad + 1), hi - 1, cap)
            iterations = self._iterations(index, r, probes_left)
            probes_left = max(probes_left - 1, 2)
            ok = yield from self._probe(r, eps, iterations=iterations, max_stage=self.stages)
            if ok:
                hi = min(hi, r)
            else:
                bad, failed = max(bad, r), True
            hi = min(hi, self.best_rank(eps) or hi)  # another rank's state may have got there
            bad = max(bad, max(self.floor(eps), 1) - 1)
            r = (bad + hi) // 2 if failed else hi - step
            step *= 2

    def _squeeze(self, index: int, eps: float, max_stage: int, over: Callable[[], bool],
                 iterations: int | None = None) -> Generator[None, None, None]:
        """Continue ranks below the best one with longer stages while they succeed (a failed
        bisection probe is only a guess; the verified lower end is the limit): steps of 1, 2,
        4, ... below the best rank, back to single steps after a failed longer one."""
        step = 1
        while not over():
            hi = self.best_rank(eps)
            floor = max(self.floor(eps), 1)
            if hi is None or hi - 1 < floor:
                return
            r = min(max(hi - step, floor), self.rank_cap())
            if r < floor:
                return
            ok = yield from self._probe(r, eps, iterations=iterations or self._iterations(index, r, 2),
                                        max_stage=max_stage, abort=step > 1 or self._fresh_wide(r))
            if ok:
                step *= 2
            elif step > 1:
                step = 1
            else:
                return

    def _units_per_evaluation(self, r: int) -> float:
        """Work units of one evaluation at rank r, its share of the error checks included."""
        m, n = self.d.shape
        return self.ops.cost * (evaluation_units(m, n, r) + check_units(m, n, r) / CHECK_EVERY)

    def _iterations(self, index: int, r: int, probes: int) -> int:
        """Iterations per stage so that ``probes`` probes of all stages fit in the work this
        tolerance has left."""
        left = max(self.shares[index] - self.spent_now(), 0.0)
        per_iteration = EVALS_PER_ITERATION * self._units_per_evaluation(r) * self.stages * probes
        return int(min(MAX_ITERATIONS, max(MIN_ITERATIONS, left / per_iteration)))

    def spent_now(self) -> float:
        """Work units this search has used, including the current :meth:`run` call."""
        return self.spent + (0.0 if self.until is None else self.until.budget.used - self._run_started)
