"""Certified rank profiles of one operator (DESIGN.md section 7) -- an untrusted front end.

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
leave their float64 candidates in a :class:`~softrank_cert.solvers.profiles.Profiles`;
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
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..certio.issuing import BracketResult
from ..errors import InternalInvariantError, InvalidInputError
from ..kernel import (Operator, Status, Verdict, parse_tolerance, verify_lower, verify_trivial_lower,
                     verify_trivial_upper, verify_upper)
from ..plumbing.tolerances import parse_eps

#: Tolerances the searches aim at by default: 11 values, roughly log-spaced from 0.02 to 0.9.
DEFAULT_GRID = ("0.02", "0.03", "0.05", "0.075", "0.1", "0.15", "0.25", "0.35", "0.5", "0.7", "0.9")
#: Significant digits of the decimal tolerance at which each step is verified.
STEP_DIGITS = 6

Progress = Callable[[str, float, float], None]


# --------------------------------------------------------------------------------------
# Decimal tolerances next to a float
# --------------------------------------------------------------------------------------

def _plain(n: int, places: int) -> str:
    """The plain decimal string of ``n * 10**-places`` (no exponent, no trailing zeros)."""
    if places <= 0:
        return str(n * 10 ** -places)
    text = str(n).rjust(places + 1, "0")
    whole, frac = text[:-places], text[-places:].rstrip("0")
    return whole + ("." + frac if frac else "")


def _places(x: Fraction, digits: int) -> int:
    """Decimal places that give ``x`` (> 0) ``digits`` significant digits."""
    exponent = math.floor(math.log10(x.numerator) - math.log10(x.denominator))
    while Fraction(10) ** exponent > x:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= x:
        exponent += 1
    return digits - 1 - exponent


def decimal_below(x: float | Fraction, digits: int = STEP_DIGITS, units: int = 1, strict: bool = True) -> str | None:
    """The largest ``digits``-digit plain decimal strictly below ``x`` (``strict=False``: at most
    ``x``; ``units`` > 1: that many last-digit units lower still); None when that is not a
    positive tolerance."""
    x = Fraction(x)
    if x <= 0:
        return None

    def at(places: int) -> int:
        scaled = x * Fraction(10) ** places
        return (math.ceil(scaled) - 1 if strict else math.floor(scaled)) - (units - 1)

    places = _places(x, digits)
    n = at(places)
    if 0 < n < 10 ** (digits - 1):  # x a power of ten: 0.999999 below 1, not 0.99999
        places += 1
        n = at(places)
    return _plain(n, places) if n > 0 else None


def decimal_above(x: float | Fraction, digits: int = STEP_DIGITS, units: int = 1) -> str:
    """The smallest ``digits``-digit plain decimal strictly above ``x`` >= 0 (``units`` > 1: that
    many last-digit units higher)."""
    x = Fraction(x)
    if x <= 0:
        raise ValueError("decimal_above needs x > 0")
    places = _places(x, digits)
    return _plain(math.floor(x * Fraction(10) ** places) + units, places)


# --------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class LowerStep:
    """VERIFIED ``r_eps >= k`` at the decimal ``eps``, hence for every tolerance ``<= eps``.

    ``threshold`` is the float64 estimate of the certificate's threshold (None for the ends
    the driver verified at a grid tolerance); ``X``/``Y`` are None for the trivial ``k = 1``.
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
    trivial witnesses (``zero``, ``identity``)."""

    r: int
    eps: str
    construction: str
    error: float | None
    U: np.ndarray | None = field(default=None, repr=False)
    W: np.ndarray | None = field(default=None, repr=False)
    verdict: Verdict | None = field(default=None, repr=False)

    @property
    def value(self) -> Fraction:
        return parse_tolerance(self.eps)

    @property
    def everywhere(self) -> bool:
        return self.construction == "identity"


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
        lo, hi = _value(self.low), _value(self.high)
        return (lo < eps or (self.low_included and lo == eps)) and (eps < hi or (self.high_included and eps == hi))

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "from": self.low, "from_included": self.low_included,
                "to": self.high, "to_included": self.high_included}


def _value(text: str) -> Fraction:
    """Exact value of a tolerance string, or 0 for the open left end ``"0"`` of an interval."""
    return Fraction(0) if text == "0" else parse_tolerance(text)


def _verified(v: Verdict) -> bool:
    return v.status is Status.VERIFIED


# --------------------------------------------------------------------------------------
# The search: the bracket driver's stages over a grid of tolerances
# --------------------------------------------------------------------------------------

def search_candidates(op: Operator, grid: Sequence[str], budget: float, progress: Progress | None) -> tuple[Any, list[Any]]:
    """Run the bracket driver's searches at the ``grid`` tolerances for ``budget`` seconds.

    Returns the driver's :class:`~softrank_cert.solvers.profiles.Profiles` (every float64
    candidate) and its per-tolerance verified ends.  Uses the driver's stage loop
    (``softrank_cert.solvers.bracket.search_operator``) so that the profile sees exactly what
    :func:`~softrank_cert.solvers.bracket.bracket_operator` sees.
    """
    from ..solvers.bracket import search_operator
    from ..solvers.dense import Dense
    from ..solvers.profiles import Profiles

    prof, ends = search_operator(op, list(grid), budget_seconds=budget, progress=progress)
    if prof is None:
        prof = Profiles(Dense.of(op))
    for r in range(1, prof.d.p):  # every rank's truncated SVD is known already: form the useful ones
        old = prof.witnesses.get(r)
        if old is None or prof.tsvd[r] < old.error:
            prof.witness("tsvd", r)
    return prof, ends


def _float_norm(prof: Any) -> float:
    return float(np.abs(prof.d.A).sum(axis=1).max())


def lower_steps(op: Operator, prof: Any, ends: Iterable[Any], floor_eps: str) -> list[LowerStep]:
    """VERIFIED lower steps on the Pareto front (k ascending, tolerances strictly decreasing),
    those at or above ``floor_eps`` (a step below it says nothing above it)."""
    options: dict[int, list[LowerStep]] = {}  # already verified (the driver's ends at grid tolerances)
    for e in ends:
        end = e.lower
        if end.k >= 1 and _verified(end.verdict):
            options.setdefault(end.k, []).append(
                LowerStep(end.k, end.verdict.eps, end.method, end.threshold, end.X, end.Y, end.verdict))
    low = parse_tolerance(floor_eps)
    proposals = {c.k: c for c in prof.certificates.values() if c.k >= 1 and c.threshold > low}
    norm = 1.0 if op.row_sums_exactly_one() else _float_norm(prof)
    steps: list[LowerStep] = []
    frontier: Fraction | None = None  # largest verified tolerance of a larger k
    for k in sorted(set(options) | set(proposals) | {1}, reverse=True):
        best = max(options.get(k, []), key=lambda s: s.value, default=None)
        floor = max((x for x in (frontier, best.value if best else None) if x is not None), default=None)
        threshold = norm if k == 1 else proposals[k].threshold if k in proposals else None
        for units in ((1, 2) if threshold is not None else ()):
            eps = decimal_below(threshold, units=units)
            if eps is None or (floor is not None and parse_tolerance(eps) <= floor):
                break
            if k == 1:
                v = verify_trivial_lower(op, eps, 1)
                step = LowerStep(1, eps, "trivial", norm, None, None, v)
            else:
                c = proposals[k]
                v = verify_lower(op, eps, k, c.X, c.Y, method=c.method)
                step = LowerStep(k, eps, c.method, c.threshold, c.X, c.Y, v)
            if _verified(v):
                best = step
                break
        if best is not None and best.value >= low and (frontier is None or best.value > frontier):
            steps.append(best)
            frontier = best.value
    return steps[::-1]


def upper_steps(op: Operator, prof: Any, ends: Iterable[Any], floor_eps: str) -> list[UpperStep]:
    """VERIFIED upper steps on the Pareto front (r ascending, tolerances strictly decreasing)
    down to the first at or below ``floor_eps`` (the rest do not matter above it); the last is
    the identity (``r = p``), valid at every eps, verified just below the others."""
    p = op.p
    options: dict[int, list[UpperStep]] = {}
    for e in ends:
        end = e.upper
        if end.r < p and _verified(end.verdict):
            options.setdefault(end.r, []).append(
                UpperStep(end.r, end.verdict.eps, end.construction, end.error, end.U, end.W, end.verdict))
    proposals = {w.r: w for w in prof.witnesses.values() if 1 <= w.r < p}
    exact_norm = op.row_sums_exactly_one()
    norm = 1.0 if exact_norm else _float_norm(prof)
    steps: list[UpperStep] = []
    frontier: Fraction | None = None  # smallest verified tolerance of a smaller r
    for r in sorted(set(options) | set(proposals) | {0}):
        best = min(options.get(r, []), key=lambda s: s.value, default=None)
        ceiling = min((x for x in (frontier, best.value if best else None) if x is not None), default=None)
        if r == 0:
            tries = ["1"] if exact_norm else ([decimal_above(norm, units=u) for u in (1, 2)] if norm > 0 else [])
        else:
            tries = [decimal_above(proposals[r].error, units=u) for u in (1, 2)] if r in proposals else []
        for eps in tries:
            if ceiling is not None and parse_tolerance(eps) >= ceiling:
                break
            if r == 0:
                v = verify_trivial_upper(op, eps, 0)
                step = UpperStep(0, eps, "zero", norm, None, None, v)
            else:
                w = proposals[r]
                v = verify_upper(op, eps, r, w.U, w.W, method=w.construction)
                step = UpperStep(r, eps, w.construction, w.error, w.U, w.W, v)
            if _verified(v):
                best = step
                break
        if best is not None and (frontier is None or best.value < frontier):
            steps.append(best)
            frontier = best.value
            if frontier <= parse_tolerance(floor_eps):
                break
    at = decimal_below(min([parse_tolerance(floor_eps)] + [s.value for s in steps]), digits=2) or floor_eps
    identity = verify_trivial_upper(op, at, p)
    if not _verified(identity):  # the identity witness B = A is exact: anything else is a checker bug
        raise InternalInvariantError(f"the identity witness r = p = {p} is not VERIFIED at eps {at}")
    steps.append(UpperStep(p, at, "identity", 0.0, None, None, identity))
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
    return sorted(out, key=lambda iv: _value(iv.low))


# --------------------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Profile:
    """The two certified curves of one operator (see the module docstring).

    ``lower`` (k ascending) and ``upper`` (r ascending) hold only kernel-VERIFIED steps;
    :meth:`lower_at` / :meth:`upper_at` read the certified ends at any tolerance, and
    :meth:`bracket` turns them into a certificate-ready
    :class:`~softrank_cert.certio.issuing.BracketResult` (re-verified at the tolerances asked for).
    """

    operator: Operator = field(repr=False)
    operator_id: str
    provenance: dict[str, Any] = field(repr=False)
    grid: tuple[str, ...]
    lower: tuple[LowerStep, ...] = field(repr=False)
    upper: tuple[UpperStep, ...] = field(repr=False)
    floor_eps: str = field(repr=False)
    budget_seconds: float = field(repr=False)
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
        :class:`~softrank_cert.certio.issuing.BracketResult` (``.save(path)`` writes the certificate).

        Each end is the best profile step that covers ``eps``, VERIFIED again at ``eps``
        itself (the claim a certificate at ``eps`` makes); a step that does not verify there
        gives way to the next one, down to the trivial ends.
        """
        from ..solvers.bracket import VerifiedBracket, VerifiedLower, VerifiedUpper

        start = time.perf_counter()
        brackets = []
        for e in parse_eps(eps):
            value = parse_tolerance(e)
            lower_end = None
            for s in sorted((s for s in self.lower if value <= s.value), key=lambda s: -s.k):
                v = (verify_trivial_lower(self.operator, e, 1) if s.X is None else
                     verify_lower(self.operator, e, s.k, s.X, s.Y, method=s.method))
                if _verified(v):
                    lower_end = VerifiedLower(s.k, s.X, s.Y, s.method, v, s.threshold)
                    break
            if lower_end is None:
                v = verify_trivial_lower(self.operator, e, 1)
                lower_end = (VerifiedLower(1, None, None, "trivial", v) if _verified(v) else
                             VerifiedLower(0, None, None, "trivial", verify_trivial_lower(self.operator, e, 0)))
            upper_end = None
            for s in sorted((s for s in self.upper if s.everywhere or value >= s.value), key=lambda s: s.r):
                v = (verify_trivial_upper(self.operator, e, s.r) if s.U is None else
                     verify_upper(self.operator, e, s.r, s.U, s.W, method=s.construction))
                if _verified(v):
                    upper_end = VerifiedUpper(s.r, s.U, s.W, s.construction, v, s.error)
                    break
            if upper_end is None:  # the identity step is always there; kept for robustness
                upper_end = VerifiedUpper(self.operator.p, None, None, "identity",
                                          verify_trivial_upper(self.operator, e, self.operator.p))
            if lower_end.k > upper_end.r:
                raise InternalInvariantError(f"{self.operator_id}: verified lower end {lower_end.k} exceeds "
                                             f"verified upper end {upper_end.r} at eps {e}")
            brackets.append(VerifiedBracket(e, lower_end, upper_end))
        return BracketResult(self.operator, tuple(brackets), self.operator_id, dict(self.provenance),
                             time.perf_counter() - start, None)

    # -- output ---------------------------------------------------------------------------
    def to_json(self, marks: Sequence[str] = ()) -> dict[str, Any]:
        """The profile as plain JSON data (``softrank-profile-report``, the contract of
        :mod:`softrank_cert.plumbing.reports`): every listed step is a kernel-VERIFIED end."""
        m, n = self.operator.shape

        from ..plumbing.reports import envelope, verdict_fields

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
            "search_seconds": round(self.search_seconds, 3), "verify_seconds": round(self.verify_seconds, 3),
            "lower": [{"k": s.k, "eps": s.eps, "method": s.method, **verdict(s.verdict),
                       "estimates": {"threshold": _estimate(s.threshold)}} for s in self.lower],
            "upper": [{"r": s.r, "eps": s.eps, "construction": s.construction, **verdict(s.verdict),
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


def compute_profile(op: Operator, grid: Sequence[str] | None = None, *, budget_seconds: float | None = None,
                    progress: Progress | None = None, operator_id: str = "operator",
                    provenance: dict[str, Any] | None = None) -> Profile:
    """Search, then verify every step that improves either curve (see the module docstring).

    ``grid``: the tolerances the searches aim at (default :data:`DEFAULT_GRID`).
    ``budget_seconds``: search time, default
    :func:`~softrank_cert.solvers.bracket.default_budget_seconds` (``math.inf``: no bound);
    the verification of the steps comes on top (milliseconds per step).
    ``progress(stage, elapsed, budget)`` as for the bracket driver, plus ``"verify"`` at the end.
    """
    from ..solvers.bracket import default_budget_seconds

    grid = tuple(_sorted_unique(DEFAULT_GRID if grid is None else grid))
    if not grid:
        raise InvalidInputError("the profile needs at least one grid tolerance")
    budget = default_budget_seconds(*op.shape) if budget_seconds is None else float(budget_seconds)
    if not budget > 0:
        raise InvalidInputError("budget_seconds must be > 0")
    start = time.perf_counter()
    prof, ends = search_candidates(op, grid, budget, progress)
    searched = time.perf_counter()
    floor_eps = floor_tolerance(grid)
    lower = lower_steps(op, prof, ends, floor_eps)
    upper = upper_steps(op, prof, ends, floor_eps)
    check_profiles(lower, upper, operator_id)
    done = time.perf_counter()
    if progress is not None:
        progress("verify", min(done - start, budget), budget)
    return Profile(op, operator_id, dict(provenance or {}), grid, tuple(lower), tuple(upper), floor_eps, budget,
                   searched - start, done - searched)


# --------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------

def _curve_values(profile: Profile, edges: list[Fraction]) -> tuple[list[int], list[int]]:
    """L and U on each open interval between consecutive ``edges`` (constant there)."""
    lows, ups = [], []
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        lows.append(max((s.k for s in profile.lower if mid <= s.value), default=0))
        ups.append(min(s.r for s in profile.upper if s.everywhere or mid >= s.value))
    return lows, ups


def profile_figure(profile: Profile, *, marks: Sequence[str] = (), ax: Any = None, yscale: str = "log") -> Any:
    """Both certified curves against eps (log axis), the band between them shaded, the
    tolerances where they meet (resolved) marked; ``marks``: tolerances to annotate with
    their bracket (e.g. those of a certificate).  Every drawn step is a VERIFIED step.
    ``yscale``: ``"log"`` (base 2, default: small ranks stay readable) or ``"linear"``."""
    import matplotlib

    if ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ..plumbing.plotting import DPI

    own = ax is None
    if own:  # at the commands' DPI, so that fig.savefig() writes what softrank profile --plot writes
        fig, ax = plt.subplots(figsize=(7.2, 5.2), layout="constrained", dpi=DPI)
    else:
        fig = ax.figure
    p = profile.operator.p
    left = parse_tolerance(profile.floor_eps)
    right = Fraction(1)
    inner = sorted({s.value for s in profile.lower} | {s.value for s in profile.upper if not s.everywhere})
    edges = [left] + [x for x in inner if left < x < right] + [right]
    lows, ups = _curve_values(profile, edges)
    lows = [v if v > 0 else (0.5 if yscale == "log" else 0) for v in lows]  # k = 0: off a log axis
    xs = np.array([float(x) for x in edges])
    blue, red, green, band = "#1f4e99", "#b2182b", "#1a9850", "#cfd8e6"
    ax.fill_between(xs, np.append(lows, lows[-1]), np.append(ups, ups[-1]), step="post", color=band, alpha=0.9,
                    linewidth=0, label=r"$r_\varepsilon(A)$ lies in this band")
    ax.stairs(ups, xs, color=red, linewidth=1.8, baseline=None,
              label=r"certified upper: witness with $r_\varepsilon \leq r$ for $\varepsilon \geq e_r$")
    ax.stairs(lows, xs, color=blue, linewidth=1.8, baseline=None,
              label=r"certified lower: certificate with $r_\varepsilon \geq k$ for $\varepsilon \leq t_k$")
    first = True
    for iv in profile.resolved:
        a, b = max(_value(iv.low), left), min(_value(iv.high), right)
        if a < b:
            ax.plot([float(a), float(b)], [iv.rank, iv.rank], color=green, linewidth=4.5, solid_capstyle="butt",
                    label=r"resolved: $r_\varepsilon$ exact" if first else None, zorder=4)
            first = False
    grid_pts = [(float(parse_tolerance(e)),) + profile.ends_at(e) for e in profile.grid]
    res = [(x, lo) for x, lo, up in grid_pts if lo == up]
    ax.plot([x for x, _ in res], [y for _, y in res], linestyle="none", marker="o", markersize=5.5,
            markerfacecolor=green, markeredgecolor="white", markeredgewidth=0.8, zorder=5,
            label="resolved grid tolerance" if res else None)
    for e in marks:
        x = float(parse_tolerance(e))
        if not float(left) <= x <= 1:
            continue
        lo, up = profile.ends_at(e)
        ax.axvline(x, color="0.3", linewidth=0.8, linestyle=(0, (4, 3)), zorder=1)
        text = rf"$\varepsilon = {e}$: " + (f"{lo}" if lo == up else f"[{lo}, {up}]")
        ax.annotate(text, (x, up), xytext=(4, 6), textcoords="offset points", fontsize=8, color="0.15")
    ax.axhline(p, color="0.55", linewidth=0.8, linestyle=":", zorder=1)
    ax.annotate(f"$p = {p}$", (float(left), p), xytext=(4, 3), textcoords="offset points", fontsize=8, color="0.35")
    ax.set_xscale("log")
    ax.set_xlim(float(left), 1.0)
    if yscale == "log":
        from matplotlib.ticker import FixedLocator, NullLocator

        ax.set_yscale("log", base=2)
        ax.set_ylim(0.8, p * 1.5)
        ticks = list(range(1, p + 1)) if p <= 12 else [2 ** i for i in range(int(math.log2(p)) + 1)]
        ax.yaxis.set_major_locator(FixedLocator(ticks + ([p] if p not in ticks else [])))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        ax.set_ylim(0, p * 1.06)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"tolerance $\varepsilon$ (max-row-$\ell_1$ error $\|A - B\|$)")
    ax.set_ylabel(r"approximation rank $r_\varepsilon(A)$")
    m, n = profile.operator.shape
    shown_id = profile.operator_id.replace("$", r"\$")  # no mathtext from an operator id
    ax.set_title(f"{shown_id}  ({m}\u00d7{n} {profile.operator.kind}"
                 f"{', causal' if profile.operator.mask == 'causal' else ''}): certified bounds on $r_\\varepsilon(A)$\n"
                 f"{len(profile.lower)} lower and {len(profile.upper)} upper steps, each VERIFIED by the trusted kernel",
                 fontsize=9.5)
    ax.grid(True, which="major", alpha=0.25, linewidth=0.6)
    if own:  # below the axes: never over a curve
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    else:
        ax.legend(fontsize=7.5, loc="best", framealpha=0.92)
    return fig
