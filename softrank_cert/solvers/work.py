"""Deterministic work budget of one operator's search (UNTRUSTED bookkeeping).

The searches are bounded by WORK, not wall time, so that the same command on the same
installation proposes the same candidates (and so writes the same certificate) however busy
the machine is.  Work is counted in **work units**: one unit is nominally one million
floating-point operations of the float64 solvers (:data:`UNIT_FLOPS`); parts whose time is not
their flop count are charged their fitted CPU seconds at the unit rate (:func:`seconds_units`).
Every charge is a formula of the sizes involved, never a measurement:

* one evaluation of the smoothed objective and gradient at rank r, with its L-BFGS step:
  a fitted model of its CPU seconds (:data:`EVAL_FIXED` ...), converted at the unit rate of the
  operator's size (:func:`seconds_units`); one float64 error check likewise;
* one HiGHS simplex iteration on an LP with ``rows x cols`` dense constraints:
  ``2 (rows + cols) cols`` flops plus ``rows`` (pricing) and :data:`ITERATION_UNITS`, as HiGHS
  reports the iterations (sparse LPs: per nonzero, :mod:`~softrank_cert.solvers.lower.general`);
* one screen of key moves, one Sherman-Morrison check, one dense solve: their entry counts
  (and the fixed costs of :class:`~softrank_cert.solvers.lower.moves.MoveCharges`).

The fitted constants were measured on a 2-core x86-64 machine (one core per
search, MiniLM heads at 128 x 128 and 512 x 512; ``benchmarks/results/solvers_lbfgs.md``), so
that there a default search takes about its nominal seconds.

A :class:`Budget` holds the units allowed and used and, optionally, a wall-clock deadline
(``--budget-seconds``): with a deadline the result may depend on the load of the machine.
The searches run with one BLAS thread (:func:`one_blas_thread`): a float64 product summed by
two threads may differ in its last bits from one summed by one, and on a shared 2-core machine
one thread is also the faster (a pivoted QR of 256 x 256 took 0.03 s with one thread and 2.6 s
with two under load).  A search is given a :class:`Until` (a point on the budget's work counter, and the deadline),
so that the driver can slice one budget between its searches deterministically.  The default
work of an m x N operator, :func:`default_work`, is calibrated so that a quiet 2-core machine
of the project's kind spends about :func:`default_seconds` on it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

#: Floating-point operations per work unit.
UNIT_FLOPS = 1e6
#: Default budget in seconds on the calibration machine: ``BASE * (m N / 128^2) ** EXPONENT``,
#: clamped to [MIN, MAX] (16 s at 128 x 128, 111 s at 512 x 512).
BASE_SECONDS, EXPONENT, MIN_SECONDS, MAX_SECONDS = 16.0, 0.7, 4.0, 600.0
#: Work units per CPU second of the search on the calibration machine (one core):
#: ``RATE_BASE * (m N / 128^2) ** RATE_EXPONENT`` -- larger products run at more flops per
#: second (measured with a time-only budget on MiniLM apache2 heads: 5,400-7,700, median 6,500,
#: at 128 x 128 on L0H1, L2H6, L4H1; at 512 x 512 20,600 on apache2 L4H6 and 10,200 on the
#: pydoc 'import' topic's L1H1; the CPU time of the default work varies about 2x between heads).
RATE_BASE, RATE_EXPONENT = 7000.0, 0.25
#: Fixed work units of one call (an objective evaluation, one LP row solve, one key-move
#: screen): the interpreter's and HiGHS's overhead, which dominates on small operators.
CALL_UNITS = 0.25
#: Fixed work units of one simplex iteration (HiGHS's own overhead, about 4 us).
ITERATION_UNITS = 0.02


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the enclosed search with one BLAS thread (thread-count-independent results)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def default_seconds(m: int, n: int) -> float:
    """The wall time the default work budget takes on the calibration machine."""
    return float(min(MAX_SECONDS, max(MIN_SECONDS, BASE_SECONDS * (m * n / 128.0 ** 2) ** EXPONENT)))


def units_per_second(m: int, n: int) -> float:
    """Work units per CPU second on the calibration machine for an m x N operator."""
    return RATE_BASE * (m * n / 128.0 ** 2) ** RATE_EXPONENT


def default_work(m: int, n: int) -> float:
    """Default work units for an m x N operator (all tolerances together): what
    :func:`default_seconds` buys on the calibration machine (112,000 at 128 x 128, about 1.56
    million at 512 x 512)."""
    return float(round(units_per_second(m, n) * default_seconds(m, n)))


def effective_work(work: float | None, budget_seconds: float | None, m: int, n: int) -> float | None:
    """The work bound a search of an m x N operator runs with (the one rule of the driver's
    :func:`~softrank_cert.solvers.bracket.search_budget`, the manifests' and reports'
    ``budget_work``): ``work`` when given, else :func:`default_work` when there is no time cap
    either, else None (a time-only budget, or ``work`` infinite: unbounded work)."""
    if work is not None:
        return float(work) if math.isfinite(work) else None
    return default_work(m, n) if budget_seconds is None else None


def _size(m: int, n: int) -> float:
    return m * n / 128.0 ** 2


def seconds_units(m: int, n: int, seconds: float) -> float:
    """Work units of ``seconds`` of CPU time on the calibration machine, for an m x N operator."""
    return seconds * units_per_second(m, n)


#: CPU seconds of one smoothed-objective evaluation with its L-BFGS step (:mod:`~softrank_cert.solvers.lbfgs`) on
#: the calibration machine: ``EVAL_FIXED + EVAL_PER_ENTRY m N + EVAL_PER_MFLOP (6 r m N / 1e6)
#: (mN/128^2)^EVAL_MFLOP_EXPONENT`` -- fitted on MiniLM heads at 128 x 128 (r = 6-40: 85-244 us)
#: and 512 x 512 (r = 40-150: 1.8-4.7 ms), one core; the elementwise part is memory-bound.
EVAL_FIXED, EVAL_PER_ENTRY, EVAL_PER_MFLOP, EVAL_MFLOP_EXPONENT = 13e-6, 2.7e-9, 47.6e-6, -0.37
#: CPU seconds of one float64 error check ``max_i sum_j |A - U W^T|_ij``: ``CHECK_PER_ENTRY m N
#: (mN/128^2)^CHECK_ENTRY_EXPONENT + CHECK_PER_MFLOP (2 r m N / 1e6)`` (33-53 us at 128 x 128,
#: 3.3-4.7 ms at 512 x 512: the temporaries leave the cache).
CHECK_PER_ENTRY, CHECK_ENTRY_EXPONENT, CHECK_PER_MFLOP = 1.6e-9, 0.68, 22e-6
#: Factor ``SEARCH_FIT (mN/128^2)^SEARCH_FIT_EXPONENT`` on both, so that whole witness searches
#: in the driver run at :func:`units_per_second` (measured: the fits above charged them 1.25x
#: their time at 128 x 128 and 0.8x at 512 x 512, where the search probes higher ranks).
SEARCH_FIT, SEARCH_FIT_EXPONENT = 0.8, 0.134


def row_lp_scale(m: int, n: int) -> float:
    """Factor on :func:`simplex_units` for the dense X-step LPs of an m x N operator: their charge
    ran at 1,100 units per CPU second at 128 x 128 and 1,010 at 512 x 512
    (``1,100 (mN/128^2)^-0.03``), against :func:`units_per_second`."""
    return units_per_second(m, n) / (1100.0 * _size(m, n) ** -0.03)


#: Exponent of :func:`key_move_scale` (provisional: fitted on KEY_MOVE_FIT_HEADS heads, see there).
KEY_MOVE_EXPONENT = 0.68


def key_move_scale(m: int, n: int) -> float:
    """Factor on every key-move charge (:class:`~softrank_cert.solvers.lower.moves.MoveCharges`):
    ``max(1, mN/512^2) ** KEY_MOVE_EXPONENT``.  The charges were fitted at 128 x 128 and 512 x 512;
    past 512 x 512 the moves' CPU per charged unit grows (their k x k inverses and the screen's
    temporaries leave the cache at the larger k of wide operators)."""
    return max(1.0, m * n / 512.0 ** 2) ** KEY_MOVE_EXPONENT


def key_lp_scale(m: int, n: int) -> float:
    """Factor on the sparse Y-step LPs' per-nonzero charge (fitted at 4,300 units per second)."""
    return units_per_second(m, n) / 4300.0


#: The fewest rows an evaluation on active rows is charged for (docs/solvers.md, "Active rows").
MIN_CHARGED_ROWS = 64


def evaluation_units(m: int, n: int, r: int, rows: int | None = None) -> float:
    """Work units of one smoothed-objective evaluation at rank r (with its L-BFGS step) on an
    m x N operator, on ``rows`` of its rows (default all; the active rows of
    :mod:`~softrank_cert.solvers.upper.smooth`): the seconds of a ``rows x N`` evaluation,
    converted at the m x N operator's unit rate.  At least :data:`MIN_CHARGED_ROWS` rows are
    charged: L-BFGS's vector work on the ``(rows + N) r`` variables and the fixed cost of a call
    do not shrink with the rows (measured: a 1-row evaluation cost 5x its rows' share at 512)."""
    rows = m if rows is None else max(rows, min(m, MIN_CHARGED_ROWS))
    flops = 6.0 * r * rows * n / 1e6
    seconds = (EVAL_FIXED + EVAL_PER_ENTRY * rows * n
               + EVAL_PER_MFLOP * flops * _size(rows, n) ** EVAL_MFLOP_EXPONENT)
    return seconds_units(m, n, seconds * _search_fit(m, n))


def check_units(m: int, n: int, r: int) -> float:
    """Work units of one float64 max-row-l1 error of ``A - U W^T`` at rank r."""
    seconds = CHECK_PER_ENTRY * m * n * _size(m, n) ** CHECK_ENTRY_EXPONENT + CHECK_PER_MFLOP * 2.0 * r * m * n / 1e6
    return seconds_units(m, n, seconds * _search_fit(m, n))


def _search_fit(m: int, n: int) -> float:
    return SEARCH_FIT * _size(m, n) ** SEARCH_FIT_EXPONENT


def simplex_units(rows: int, cols: int, iterations: int) -> float:
    """Work units of ``iterations`` simplex iterations on a dense ``rows x cols`` LP."""
    return iterations * ((2.0 * (rows + cols) * cols + rows) / UNIT_FLOPS + ITERATION_UNITS) + CALL_UNITS


def entries_units(entries: float) -> float:
    """Work units of elementwise or product work touching ``entries`` numbers."""
    return entries / UNIT_FLOPS


class Budget:
    """Work units allowed (``work``, ``math.inf``: unbounded) and used, and an optional wall
    deadline (a ``time.perf_counter()`` value).

    :attr:`plan` is the work the searches plan their shares with: ``work`` when it is finite,
    else ``plan`` (e.g. what the deadline would buy on the calibration machine; ``math.inf``).
    """

    def __init__(self, work: float = math.inf, deadline: float | None = None, plan: float = math.inf) -> None:
        if not work >= 0:
            raise ValueError("the work budget must be >= 0")
        self.work = float(work)
        self.used = 0.0
        self.deadline = deadline
        self.plan = self.work if math.isfinite(self.work) else float(plan)

    def charge(self, units: float) -> None:
        self.used += units

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def spent(self) -> bool:
        """Whether the work is used up or the deadline has passed."""
        return self.used >= self.work or self.out_of_time()

    def left(self) -> float:
        """Work units left (``math.inf`` when unbounded)."""
        return max(self.work - self.used, 0.0)

    def plan_left(self) -> float:
        """Planned work units left (:attr:`plan` less what was used)."""
        return max(self.plan - self.used, 0.0)

    def until(self, fraction: float = 1.0) -> Until:
        """A stop point after ``fraction`` of what is left: of the work, and of the time to the
        deadline (both capped by the budget)."""
        at = self.work if fraction >= 1 else min(self.used + fraction * self.left(), self.work)
        deadline = self.deadline
        if deadline is not None and fraction < 1:
            deadline = min(deadline, time.perf_counter() + fraction * max(deadline - time.perf_counter(), 0.0))
        return Until(self, at, deadline)


class Until:
    """Stop point of one piece of search: the budget's counter reaching ``at``, or the wall
    ``deadline`` (None: no deadline) passing."""

    def __init__(self, budget: Budget, at: float, deadline: float | None = None) -> None:
        self.budget, self.at, self.deadline = budget, at, deadline

    def reached(self) -> bool:
        return self.budget.used >= self.at or (self.deadline is not None and time.perf_counter() >= self.deadline)

    def left(self) -> float:
        """Work units left before this stop point."""
        return max(self.at - self.budget.used, 0.0)

    def charge(self, units: float) -> None:
        self.budget.charge(units)
