"""Certified rank profiles of one operator (docs/design.md section 7) -- an untrusted front end.

Two step functions of the tolerance ``eps`` bound ``r_eps(A)`` at every tolerance at once:

* the **lower profile**: steps ``(k, t_k)``, each a lower certificate (or the trivial ``k = 1``)
  that the kernel VERIFIED at the decimal tolerance ``t_k``.  ``r_eps`` is non-increasing in
  eps, so ``r_eps >= r_{t_k} >= k`` for **every** ``eps <= t_k``;
* the **upper profile**: steps ``(r, e_r)``, each a witness (or a trivial one) VERIFIED at the
  decimal ``e_r``, so ``r_eps <= r`` for **every** ``eps >= e_r`` (the identity witness
  ``r = p`` holds at every eps).

How the steps are found: the bracket driver's searches
(:func:`softrank_cert.solvers.bracket.bracket_operator`: truncated SVD, pivots, the smoothed
witness search and the lower-certificate search) run once over a grid of tolerances and
leave their float64 candidates in a :class:`~softrank_cert.solvers.candidates.CandidatePool`;
truncated-SVD witnesses of every rank are added (they are free).  A certificate's float64
threshold ``t`` proposes ``r_eps >= k`` for eps < t, so it is verified at the largest
``STEP_DIGITS``-digit decimal strictly below ``t`` (one digit unit lower if that fails); a
witness of float64 error ``e`` at the smallest such decimal strictly above ``e``.  Only
candidates that would improve the curve are verified, and only VERIFIED steps are kept --
nothing here decides a claim, and a solver bug can only cost steps, never soundness.  The
ends the driver verified at the grid tolerances are steps too, so the profile is never
looser at a grid tolerance than :func:`~softrank_cert.solvers.bracket.bracket_operator`
with the same budget.

A verified lower step above a verified upper step at an overlapping tolerance is impossible;
it raises :class:`~softrank_cert.errors.InternalInvariantError` (a checker bug, exit 4).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from collections.abc import Callable, Iterable, Sequence

from ...plumbing.bracketing import BracketResult
from ...errors import InternalInvariantError, InvalidInputError
from ...kernel import Operator, Verdict, parse_tolerance
from ...util.tolerances import parse_eps
from ...solvers import first_verified
from ...util.numbers import STEP_DIGITS, decimal_above, decimal_below
from .plot import profile_figure
from .steps import (LowerStep, ResolvedInterval, UpperStep, check_profiles, lower_steps,
                                 resolved_intervals, search_candidates, upper_steps)

__all__ = ["DEFAULT_GRID", "STEP_DIGITS", "LowerStep", "Profile", "ResolvedInterval", "UpperStep",
           "check_profiles", "compute_profile", "decimal_above", "decimal_below", "floor_tolerance",
           "profile_figure", "resolved_intervals"]

#: Tolerances the searches aim at by default: 11 values, roughly log-spaced from 0.02 to 0.9.
DEFAULT_GRID = ("0.02", "0.03", "0.05", "0.075", "0.1", "0.15", "0.25", "0.35", "0.5", "0.7", "0.9")
Progress = Callable[[str, float, float], None]


# --------------------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Profile:
    """The two certified curves of one operator (see the module docstring).

    ``lower`` (k ascending) and ``upper`` (r ascending) hold only kernel-VERIFIED steps;
    :meth:`lower_at` / :meth:`upper_at` read the certified ends at any tolerance, and
    :meth:`bracket` turns them into a certificate-ready
    :class:`~softrank_cert.plumbing.bracketing.BracketResult` (re-verified at the tolerances asked for).
    """

    operator: Operator = field(repr=False)
    operator_id: str
    provenance: dict[str, Any] = field(repr=False)
    grid: tuple[str, ...]
    lower: tuple[LowerStep, ...] = field(repr=False)
    upper: tuple[UpperStep, ...] = field(repr=False)
    floor_eps: str = field(repr=False)
    budget_seconds: float = field(repr=False)
    work: float = field(repr=False)
    search_seconds: float = field(repr=False)
    verify_seconds: float = field(repr=False)

    # -- reading the curves -------------------------------------------------------------
    def lower_at(self, eps: str) -> LowerStep | None:
        """The largest verified k with ``r_eps >= k`` at ``eps`` (None: only ``k = 0``)."""
        value = parse_tolerance(eps)
        return max((s for s in self.lower if value <= s.value), key=lambda s: s.k, default=None)

    def upper_at(self, eps: str) -> UpperStep:
        """The smallest verified r with ``r_eps <= r`` at ``eps``."""
        value = parse_tolerance(eps)
        return min((s for s in self.upper if s.everywhere or value >= s.value), key=lambda s: s.r)

    def ends_at(self, eps: str) -> tuple[int, int]:
        """``(lower, upper)`` certified by the profile at ``eps``."""
        lo = self.lower_at(eps)
        return (0 if lo is None else lo.k), self.upper_at(eps).r

    @property
    def resolved(self) -> list[ResolvedInterval]:
        return resolved_intervals(self.lower, self.upper)

    def bracket(self, eps: str | Iterable[str]) -> Any:
        """Kernel-verified brackets at ``eps`` read off the profile, as a
        :class:`~softrank_cert.plumbing.bracketing.BracketResult` (``.save(path)`` writes the certificate).

        Each end is the best profile step that covers ``eps``, VERIFIED again at ``eps``
        itself (the claim a certificate at ``eps`` makes); a step that does not verify there
        gives way to the next one, down to the trivial ends.
        """
        from ...certio.verified import VerifiedBracket
        from ...solvers import Ends

        start = time.perf_counter()
        brackets = []
        for e in parse_eps(eps):
            value = parse_tolerance(e)
            trivial = Ends(self.operator, e)  # k = 1 (or 0), and r = p (or 0)
            lower = sorted((s for s in self.lower if value <= s.value), key=lambda s: -s.k)
            found: tuple[str, Any, Any] | None = first_verified(self.operator, ((e, s) for s in lower))
            lower_end = trivial.lower if found is None or found[1].k <= trivial.lower.k else found[2]
            upper = sorted((s for s in self.upper if s.everywhere or value >= s.value), key=lambda s: s.r)
            found = first_verified(self.operator, ((e, s) for s in upper))
            upper_end = trivial.upper if found is None or found[1].r >= trivial.upper.r else found[2]
            if lower_end.k > upper_end.r:
                raise InternalInvariantError(f"{self.operator_id}: verified lower end {lower_end.k} exceeds "
                                             f"verified upper end {upper_end.r} at eps {e}")
            brackets.append(VerifiedBracket(e, lower_end, upper_end))
        return BracketResult(self.operator, tuple(brackets), self.operator_id, dict(self.provenance),
                             time.perf_counter() - start, None)

    # -- output ---------------------------------------------------------------------------
    def to_json(self, marks: Sequence[str] = ()) -> dict[str, Any]:
        """The profile as plain JSON data (``softrank-profile-report``, the contract of
        :mod:`softrank_cert.plumbing.json_contract`): every listed step is a kernel-VERIFIED end."""
        m, n = self.operator.shape

        from ...plumbing.json_contract import envelope, verdict_fields

        def verdict(v: Verdict | None) -> dict[str, Any]:
            return {} if v is None else verdict_fields(v)

        def ends(values: Iterable[str]) -> list[dict[str, Any]]:
            rows = []
            for e in values:
                lo, up = self.ends_at(e)
                rows.append({"eps": e, "lower": lo, "upper": up, "resolved": lo == up})
            return rows

        return envelope("profile", {
            "operator": self.operator_id, "kind": self.operator.kind, "mask": self.operator.mask,
            "shape": [m, n], "p": self.operator.p,
            "meaning": {
                "lower": "r_eps >= k for every eps <= eps (a lower certificate VERIFIED by the kernel at eps)",
                "upper": "r_eps <= r for every eps >= eps (a witness VERIFIED by the kernel at eps; the identity "
                         "witness r = p holds at every eps)",
                "resolved": "r_eps = rank for every eps in the interval",
            },
            "grid": list(self.grid),
            "budget_seconds": None if math.isinf(self.budget_seconds) else round(self.budget_seconds, 3),
            "budget_work": None if math.isinf(self.work) else self.work,
            "search_seconds": round(self.search_seconds, 3), "verify_seconds": round(self.verify_seconds, 3),
            "lower": [{"k": s.k, "eps": s.eps, "method": s.method, **verdict(s.verdict),
                       "estimates": {"threshold": _estimate(s.threshold)}} for s in self.lower],
            "upper": [{"r": s.r, "eps": s.eps, "construction": s.method, **verdict(s.verdict),
                       "estimates": {"error": _estimate(s.error)}} for s in self.upper],
            "resolved": [iv.to_json() for iv in self.resolved],
            "brackets": ends(_sorted_unique(list(self.grid) + list(marks))),
            "plot": None, "certificate": None,
        })

    def figure(self, marks: Sequence[str] = (), ax: Any = None, yscale: str = "log") -> Any:
        """A matplotlib figure of both curves (see :func:`profile_figure`)."""
        return profile_figure(self, marks=marks, ax=ax, yscale=yscale)

    def __repr__(self) -> str:
        m, n = self.operator.shape
        tops = ", ".join(f"{e}: " + (f"{lo}" + " (resolved)" if lo == up else f"[{lo}, {up}]")
                         for e in self.grid for lo, up in [self.ends_at(e)])
        return (f"<Profile {self.operator_id} ({m}x{n} {self.operator.kind}): {len(self.lower)} lower and "
                f"{len(self.upper)} upper VERIFIED steps; {tops}>")


def _estimate(x: float | None) -> float | None:
    """A float64 estimate for JSON (a number; None when absent or not finite)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _sorted_unique(values: Iterable[str]) -> list[str]:
    out: dict[Fraction, str] = {}
    for e in values:
        out.setdefault(parse_tolerance(e), e)
    return [out[key] for key in sorted(out)]


def floor_tolerance(grid: Sequence[str]) -> str:
    """Left end of the profile's range: half the smallest grid tolerance, rounded down to 2 digits."""
    low = min(parse_tolerance(e) for e in grid) / 2
    return decimal_below(low, digits=2, strict=False) or "0.0001"


def compute_profile(op: Operator, grid: Sequence[str] | None = None, *, work: float | None = None,
                    budget_seconds: float | None = None, progress: Progress | None = None,
                    operator_id: str = "operator", provenance: dict[str, Any] | None = None,
                    device: Any = None) -> Profile:
    """Search, then verify every step that improves either curve (see the module docstring).

    ``grid``: the tolerances the searches aim at (default :data:`DEFAULT_GRID`).
    ``work`` / ``budget_seconds``: the search's bound, as for
    :func:`~softrank_cert.solvers.bracket.bracket_operator` (default: the default work, the same
    profile however busy the machine; ``budget_seconds`` alone: a wall-time bound, ``math.inf``:
    none); the verification of the steps comes on top (milliseconds per step).
    ``progress(stage, elapsed, budget)`` as for the bracket driver, plus ``"verify"`` at the end.
    ``device``: where the search runs (:mod:`~softrank_cert.solvers.device`; recorded in the
    provenance off the numpy path).
    """
    from ...solvers import default_budget_seconds, resolve_device, search_budget

    where = resolve_device(device, op.shape)
    provenance = {**dict(provenance or {}), **where.provenance()}

    grid = tuple(_sorted_unique(DEFAULT_GRID if grid is None else grid))
    if not grid:
        raise InvalidInputError("the profile needs at least one grid tolerance")
    nominal = default_budget_seconds(*op.shape) if budget_seconds is None else float(budget_seconds)
    bound = search_budget(*op.shape, work=work, budget_seconds=budget_seconds).work
    start = time.perf_counter()
    pool, ends = search_candidates(op, grid, work, budget_seconds, progress, where)
    searched = time.perf_counter()
    floor_eps = floor_tolerance(grid)
    lower = lower_steps(op, pool, ends, floor_eps)
    upper = upper_steps(op, pool, ends, floor_eps)
    check_profiles(lower, upper, operator_id)
    done = time.perf_counter()
    if progress is not None:
        progress("verify", min(done - start, nominal), nominal)
    return Profile(op, operator_id, provenance, grid, tuple(lower), tuple(upper), floor_eps,
                   math.inf if budget_seconds is None else float(budget_seconds), bound,
                   searched - start, done - searched)
