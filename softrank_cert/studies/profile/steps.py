"""Steps of a certified rank profile: the search over a grid, then kernel-VERIFIED steps
(an untrusted front end; see :mod:`.curves` for the mathematics).

Only candidates that would improve a curve are offered to the kernel
(:func:`~softrank_cert.solvers.settle.first_verified`), and only VERIFIED steps are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ...errors import InternalInvariantError
from ...kernel import Operator, Verdict, parse_tolerance
from ...solvers import first_verified
from ...util.numbers import decimal_above, decimal_below

Progress = Callable[[str, float, float], None]


@dataclass(frozen=True, eq=False)
class LowerStep:
    """VERIFIED ``r_eps >= k`` at the decimal ``eps``, hence for every tolerance ``<= eps``.

    ``threshold`` is the float64 estimate of the pair's threshold; ``X``/``Y`` are None for the
    trivial ``k = 1``; ``method`` the search that found it (as in the report).
    """

    k: int
    eps: str
    method: str
    threshold: float | None
    X: np.ndarray | None = field(default=None, repr=False)
    Y: np.ndarray | None = field(default=None, repr=False)
    verdict: Verdict | None = field(default=None, repr=False)

    @property
    def value(self) -> Fraction:
        return parse_tolerance(self.eps)


@dataclass(frozen=True, eq=False)
class UpperStep:
    """VERIFIED ``r_eps <= r`` at the decimal ``eps``, hence for every tolerance ``>= eps``
    (the ``identity`` witness ``r = p`` holds at every tolerance).

    ``error`` is the float64 estimate of ``||A - U W^T||``; ``U``/``W`` are None for the
    trivial witnesses (``zero``, ``identity``); ``method`` the construction (the report's
    ``construction``)."""

    r: int
    eps: str
    method: str
    error: float | None
    U: np.ndarray | None = field(default=None, repr=False)
    W: np.ndarray | None = field(default=None, repr=False)
    verdict: Verdict | None = field(default=None, repr=False)

    @property
    def value(self) -> Fraction:
        return parse_tolerance(self.eps)

    @property
    def everywhere(self) -> bool:
        return self.method == "identity"


@dataclass(frozen=True)
class ResolvedInterval:
    """Tolerances at which the two profiles meet: ``r_eps == rank`` is proved for every eps in
    the interval from ``low`` to ``high`` (decimal strings; ``*_included`` says whether the
    endpoint belongs to it)."""

    rank: int
    low: str
    low_included: bool
    high: str
    high_included: bool

    def contains(self, eps: Fraction) -> bool:
        lo, hi = interval_value(self.low), interval_value(self.high)
        return (lo < eps or (self.low_included and lo == eps)) and (eps < hi or (self.high_included and eps == hi))

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "from": self.low, "from_included": self.low_included,
                "to": self.high, "to_included": self.high_included}


def interval_value(text: str) -> Fraction:
    """Exact value of a tolerance string, or 0 for the open left end ``"0"`` of an interval."""
    return Fraction(0) if text == "0" else parse_tolerance(text)


def search_candidates(op: Operator, grid: Sequence[str], work: float | None, budget_seconds: float | None,
                      progress: Progress | None, device: Any = None) -> tuple[Any, list[Any]]:
    """Run the bracket driver's searches at the ``grid`` tolerances within ``work`` units and/or
    ``budget_seconds``, on ``device`` (as for :func:`~softrank_cert.solvers.bracket.bracket_operator`).

    Returns the driver's :class:`~softrank_cert.solvers.candidates.CandidatePool` (every float64
    candidate) and its per-tolerance verified :class:`~softrank_cert.solvers.bracket.Ends`.  Uses
    the driver's stage loop (``softrank_cert.solvers.bracket.search_operator``) so that the
    profile sees exactly what :func:`~softrank_cert.solvers.bracket.bracket_operator` sees.
    """
    from ...solvers import CandidatePool, OneShot, search_operator
    from ...util.dense import Dense

    pool, ends = search_operator(op, list(grid), work=work, budget_seconds=budget_seconds, progress=progress,
                                 device=device, keep_candidates=True)
    if pool is None:
        pool = CandidatePool(Dense.of(op))
    shots = OneShot(pool)
    for r in range(1, pool.d.p):  # every rank's truncated SVD is known already: form the useful ones
        old = pool.witnesses.get(r)
        if old is None or shots.tsvd[r] < old.error:
            shots.witness("tsvd", r)
    return pool, ends


def _float_norm(pool: Any) -> float:
    return float(np.abs(pool.d.A).sum(axis=1).max())


def lower_steps(op: Operator, pool: Any, ends: Iterable[Any], floor_eps: str) -> list[LowerStep]:
    """VERIFIED lower steps on the Pareto front (k ascending, tolerances strictly decreasing),
    those at or above ``floor_eps`` (a step below it says nothing above it)."""
    options: dict[int, list[LowerStep]] = {}  # already verified (the driver's ends at grid tolerances)
    for e in ends:
        end = e.lower
        if end.k >= 1:  # sealed: VERIFIED
            options.setdefault(end.k, []).append(
                LowerStep(end.k, end.eps, end.method, end.estimate, end.X, end.Y, end.verdict))
    low = parse_tolerance(floor_eps)
    proposals = {c.k: c for c in pool.lower_pairs.values() if c.k >= 1 and c.threshold > low}
    norm = 1.0 if op.row_sums_exactly_one() else _float_norm(pool)
    steps: list[LowerStep] = []
    frontier: Fraction | None = None  # largest verified tolerance of a larger k
    for k in sorted(set(options) | set(proposals) | {1}, reverse=True):
        best = max(options.get(k, []), key=lambda s: s.value, default=None)
        floor = max((x for x in (frontier, best.value if best else None) if x is not None), default=None)
        threshold = norm if k == 1 else proposals[k].threshold if k in proposals else None
        attempts = []
        for units in ((1, 2) if threshold is not None else ()):
            eps = decimal_below(threshold, units=units)  # type: ignore[arg-type]  # set: the loop runs
            if eps is None or (floor is not None and parse_tolerance(eps) <= floor):
                break
            c = None if k == 1 else proposals[k]
            attempts.append((eps, LowerStep(1, eps, "trivial", norm) if c is None else
                             LowerStep(k, eps, c.method, c.threshold, c.X, c.Y)))
        found = first_verified(op, attempts)
        if found is not None:
            best = replace(found[1], verdict=found[2].verdict)
        if best is not None and best.value >= low and (frontier is None or best.value > frontier):
            steps.append(best)
            frontier = best.value
    return steps[::-1]


def upper_steps(op: Operator, pool: Any, ends: Iterable[Any], floor_eps: str) -> list[UpperStep]:
    """VERIFIED upper steps on the Pareto front (r ascending, tolerances strictly decreasing)
    down to the first at or below ``floor_eps`` (the rest do not matter above it); the last is
    the identity (``r = p``), valid at every eps, verified just below the others."""
    p = op.p
    options: dict[int, list[UpperStep]] = {}
    for e in ends:
        end = e.upper
        if end.r < p:  # sealed: VERIFIED
            options.setdefault(end.r, []).append(
                UpperStep(end.r, end.eps, end.construction, end.estimate, end.U, end.W, end.verdict))
    proposals = {w.r: w for w in pool.witnesses.values() if 1 <= w.r < p}
    exact_norm = op.row_sums_exactly_one()
    norm = 1.0 if exact_norm else _float_norm(pool)
    steps: list[UpperStep] = []
    frontier: Fraction | None = None  # smallest verified tolerance of a smaller r
    for r in sorted(set(options) | set(proposals) | {0}):
        best = min(options.get(r, []), key=lambda s: s.value, default=None)
        ceiling = min((x for x in (frontier, best.value if best else None) if x is not None), default=None)
        if r == 0:
            tries = ["1"] if exact_norm else ([decimal_above(norm, units=u) for u in (1, 2)] if norm > 0 else [])
        else:
            tries = [decimal_above(proposals[r].error, units=u) for u in (1, 2)] if r in proposals else []
        attempts = []
        for eps in tries:
            if ceiling is not None and parse_tolerance(eps) >= ceiling:
                break
            w = None if r == 0 else proposals[r]
            attempts.append((eps, UpperStep(0, eps, "zero", norm) if w is None else
                             UpperStep(r, eps, w.method, w.error, w.U, w.W)))
        found = first_verified(op, attempts)
        if found is not None:
            best = replace(found[1], verdict=found[2].verdict)
        if best is not None and (frontier is None or best.value < frontier):
            steps.append(best)
            frontier = best.value
            if frontier <= parse_tolerance(floor_eps):
                break
    at = decimal_below(min([parse_tolerance(floor_eps)] + [s.value for s in steps]), digits=2) or floor_eps
    found = first_verified(op, [(at, UpperStep(p, at, "identity", 0.0))])
    if found is None:  # the identity witness B = A is exact: anything else is a checker bug
        raise InternalInvariantError(f"the identity witness r = p = {p} is not VERIFIED at eps {at}")
    steps.append(replace(found[1], verdict=found[2].verdict))
    return steps


def check_profiles(lower: Sequence[LowerStep], upper: Sequence[UpperStep], name: str) -> None:
    """A verified ``r_eps >= k`` for eps <= t and a verified ``r_eps <= r`` for eps >= e with
    ``e <= t`` force ``k <= r`` (at eps = t both hold); anything else is a checker bug."""
    for lo in lower:
        for up in upper:
            if (up.everywhere or up.value <= lo.value) and lo.k > up.r:
                raise InternalInvariantError(
                    f"{name}: verified r_eps >= {lo.k} for eps <= {lo.eps} contradicts verified r_eps <= {up.r} "
                    f"for eps >= {up.eps}: the checker is unsound, report this bug")


def resolved_intervals(lower: Sequence[LowerStep], upper: Sequence[UpperStep]) -> list[ResolvedInterval]:
    """Where the certified lower and upper curves meet (ascending tolerances).

    ``L(eps) = k`` on ``(t_next, t_k]`` (``t_next``: the tolerance of the next larger k) and
    ``U(eps) = r`` on ``[e_r, e_prev)`` (``e_prev``: that of the next smaller r); a rank that
    is a step of both curves is proved exact on the intersection."""
    out: list[ResolvedInterval] = []
    by_rank = {s.r: i for i, s in enumerate(upper)}
    for i, lo in enumerate(lower):
        j = by_rank.get(lo.k)
        if j is None:
            continue
        up = upper[j]
        left = [(lower[i + 1].value, False, lower[i + 1].eps)] if i + 1 < len(lower) else []
        if not up.everywhere:
            left.append((up.value, True, up.eps))
        right = [(lo.value, True, lo.eps)]
        if j > 0:
            right.append((upper[j - 1].value, False, upper[j - 1].eps))
        if not left:  # the largest k meets the identity r = p: exact for every eps <= t_p
            left.append((Fraction(0), False, "0"))
        a = max(left, key=lambda x: (x[0], not x[1]))  # the tighter endpoint: larger, open before closed
        b = min(right, key=lambda x: (x[0], x[1]))
        if a[0] < b[0] or (a[0] == b[0] and a[1] and b[1]):
            out.append(ResolvedInterval(lo.k, a[2], a[1], b[2], b[1]))
    return sorted(out, key=lambda iv: interval_value(iv.low))
