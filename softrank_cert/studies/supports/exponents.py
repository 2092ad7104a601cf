"""Certified local exponents of a supports sweep (UNTRUSTED study logic, CERTIFIED numbers).

Between two tolerance-scale points ``x1 < x2`` (``x = 1 + kappa/eps^2``) with kernel-verified
ends ``lower_i <= r(x_i) <= upper_i``, the local growth exponent
``e(x1, x2) = log(r(x2)/r(x1)) / log(x2/x1)`` satisfies::

    log(lower_2 / upper_1) / log(x2/x1)  <=  e(x1, x2)  <=  log(upper_2 / lower_1) / log(x2/x1)

whenever the ends inside the logarithms are positive (otherwise that side is unbounded,
``None``).  Both sides are evaluated here in Arb ball arithmetic from the exact integers and
the exact rationals ``x_i`` (the float64 kappa is a dyadic rational), and rounded outward:
the lower side to a rational below the ball, the upper side to one above, then to decimal
strings rounded the same way (:func:`~softrank_cert.plumbing.json_contract.bound_down` /
``bound_up``).  No float enters a certified interval.

The theory exponent ``e`` of the support is then compared with the exact rational ends:
``excludes`` when it lies outside, ``contains`` when inside and the interval is at most
:data:`NARROW` wide, ``too wide`` when inside a wider interval, ``unbounded`` when a side is
missing.  A point near the rank ceiling (``upper_2 > NEAR_CEILING * p``) or with collapsed
rows is flagged: there the finite-N rank no longer follows the asymptotic law.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any
from collections.abc import Sequence

from flint import arb

from ...kernel import arb_lower_fraction, arb_upper_fraction, fraction_to_arb, working_precision

#: An interval at most this wide that contains the theory exponent is reported as ``contains``.
NARROW = Fraction(3, 10)
#: ``upper_2 > NEAR_CEILING * p``: the rank is no longer well below its ceiling p.
NEAR_CEILING = Fraction(1, 4)
PRECISIONS = (128, 256, 512)


def local_exponent_bounds(x1: Fraction, x2: Fraction, lower1: int, upper1: int, lower2: int,
                          upper2: int) -> tuple[Fraction | None, Fraction | None]:
    """Exact rationals ``lo <= log(r2/r1)/log(x2/x1) <= hi`` for every ``r1`` in
    ``[lower1, upper1]`` and ``r2`` in ``[lower2, upper2]`` (None: that side is unbounded).

    Needs ``0 < x1 < x2`` and ``0 <= lower_i <= upper_i``.
    """
    x1, x2 = Fraction(x1), Fraction(x2)
    if not 0 < x1 < x2:
        raise ValueError("local exponents need 0 < x1 < x2")
    for lo, up in ((lower1, upper1), (lower2, upper2)):
        if not (isinstance(lo, int) and isinstance(up, int) and 0 <= lo <= up):
            raise ValueError("bracket ends must be integers 0 <= lower <= upper")
    lo_q = hi_q = None
    for prec in PRECISIONS:
        with working_precision(prec):
            span = (fraction_to_arb(x2) / fraction_to_arb(x1)).log()  # > 0, a ball
            if lower2 > 0 and upper1 > 0:
                lo_q = arb_lower_fraction((arb(lower2) / arb(upper1)).log() / span)
            if lower1 > 0 and upper2 > 0:
                hi_q = arb_upper_fraction((arb(upper2) / arb(lower1)).log() / span)
        if (lo_q is not None or not (lower2 > 0 and upper1 > 0)) and \
                (hi_q is not None or not (lower1 > 0 and upper2 > 0)):
            break
    return lo_q, hi_q


def classify(lo: Fraction | None, hi: Fraction | None, theory: Fraction) -> str:
    """``excludes`` / ``contains`` / ``too wide`` / ``unbounded`` (see the module docstring)."""
    if (lo is not None and theory < lo) or (hi is not None and theory > hi):
        return "excludes"
    if lo is None or hi is None:
        return "unbounded"
    return "contains" if hi - lo <= NARROW else "too wide"


#: A decade interval spans at least this factor in x.
DECADE = 10


def consecutive_pairs(ordered: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Each point (ascending x) with the next one."""
    return [(a, b) for a, b in zip(ordered, ordered[1:]) if a.x < b.x]


def decade_pairs(ordered: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Each point (ascending x) with the nearest point at least a decade (x / 10) below it."""
    pairs = []
    for j, b in enumerate(ordered):
        below = [a for a in ordered[:j] if a.x * DECADE <= b.x]
        if below:
            pairs.append((below[-1], b))
    return pairs


def local_exponents(points: Sequence[Any], theory: float, *, decades: bool = False) -> list[dict[str, Any]]:
    """The certified local-exponent interval between each pair of consecutive points (ascending x),
    or with ``decades`` between each point and the nearest one at least a decade below it:
    ``lower`` / ``upper`` as outward-rounded decimal strings, the verdict against ``theory``, the
    exact width (a float of an exact difference) and the flags of the larger point."""
    from ...plumbing.json_contract import bound_down, bound_up

    theory_q = Fraction(theory).limit_denominator(1000)  # r/2, (d-1)/2, d/2: exact halves
    ordered = sorted(points, key=lambda pt: pt.x)
    rows = []
    for a, b in (decade_pairs if decades else consecutive_pairs)(ordered):
        x1, x2 = a.x, b.x
        lo, hi = local_exponent_bounds(x1, x2, a.lower, a.upper, b.lower, b.upper)
        spread = b.spread or {}
        rows.append({"x1": float(x1), "x2": float(x2), "kappa1": a.kappa, "kappa2": b.kappa,
                     "brackets": [[a.lower, a.upper], [b.lower, b.upper]],
                     "lower": bound_down(lo), "upper": bound_up(hi),
                     "width": None if lo is None or hi is None else float(hi - lo),
                     "verdict": classify(lo, hi, theory_q),
                     "near_ceiling": b.upper > NEAR_CEILING * b.p,
                     "collapsed_rows": bool(spread.get("collapsed_rows", 0.0) > 0)})
    return rows


def exponents_document(points: Sequence[Any], theory: float) -> dict[str, Any]:
    """``local_exponents`` (consecutive points), ``decade_exponents`` (each point against the
    nearest one a decade below) and ``largest_scale``: the decade interval ending at the largest
    x, else the last consecutive one (None for fewer than two points)."""
    rows = local_exponents(points, theory)
    decade_rows = local_exponents(points, theory, decades=True)
    largest = next(reversed(decade_rows or rows), None)
    return {"local_exponents": rows, "decade_exponents": decade_rows, "largest_scale": largest,
            "exponent_note": "certified: log(lower_2/upper_1)/log(x2/x1) <= local exponent <= "
                             "log(upper_2/lower_1)/log(x2/x1) between consecutive points (decade_exponents: each point and the "
                             "nearest one at least a decade below; largest_scale: the last decade interval), from the kernel-verified "
                             "ends, Arb logarithms rounded outward; verdict against the theory exponent: excludes / "
                             f"contains (width <= {float(NARROW):g}) / too wide / unbounded"}
