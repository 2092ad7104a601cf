"""Certified local exponents of supports sweeps (issue 24 item 1): the interval
``[log(lower_2/upper_1), log(upper_2/lower_1)] / log(x2/x1)`` by hand on planted brackets,
outward rounding of its ends (checked against 60-digit mpmath), unbounded sides, verdicts."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrank_cert.studies.supports.sweeps import kappas_for_x_range
from softrank_cert.studies.supports.exponents import classify, local_exponent_bounds, local_exponents
from softrank_cert.studies.supports.points import SweepPoint, x_of


def planted(kappa: float, lower: int, upper: int, p: int = 1000) -> SweepPoint:
    return SweepPoint(kappa, "0.25", lower, upper, p, "m", "c", 0.0)


def test_local_exponent_interval_by_hand_on_planted_brackets():
    # x = 16 and 256 (kappa = 15/16 and 255/16 at eps = 1/4): brackets [3, 4] and [10, 12]
    a, b = planted(15 / 16, 3, 4), planted(255 / 16, 10, 12)
    assert a.x == 16 and b.x == 256
    lo, hi = local_exponent_bounds(a.x, b.x, 3, 4, 10, 12)
    by_hand_lo, by_hand_hi = math.log(10 / 4) / math.log(16), math.log(12 / 3) / math.log(16)  # 0.3305, 0.5
    assert abs(float(lo) - by_hand_lo) < 1e-15 and abs(float(hi) - by_hand_hi) < 1e-15
    (row,) = local_exponents([b, a], theory=0.5)  # sorted by x inside
    assert row["brackets"] == [[3, 4], [10, 12]] and (row["x1"], row["x2"]) == (16.0, 256.0)
    assert row["verdict"] == "contains"  # 0.5 is the upper end (Arb encloses it from above); width 0.17 <= 0.3
    assert abs(row["width"] - (by_hand_hi - by_hand_lo)) < 1e-12


def test_contains_excludes_too_wide_unbounded():
    half = Fraction(1, 2)
    assert classify(Fraction(2, 5), Fraction(3, 5), half) == "contains"
    assert classify(Fraction(1, 10), Fraction(3, 5), half) == "too wide"
    assert classify(Fraction(6, 10), Fraction(7, 10), half) == "excludes"
    assert classify(None, Fraction(4, 10), half) == "excludes"  # an upper side below the theory is enough
    assert classify(None, Fraction(7, 10), half) == "unbounded"
    # rank 0 at x1 (lower_1 = 0): no upper side; upper_1 > 0 still bounds it from below
    lo, hi = local_exponent_bounds(Fraction(4), Fraction(64), 0, 2, 5, 6)
    assert hi is None and lo is not None and abs(float(lo) - math.log(5 / 2) / math.log(16)) < 1e-15


def test_resolved_brackets_give_a_narrow_interval_that_still_encloses_the_exact_half():
    """log(8/2)/log(256/16) = 1/2 exactly: Arb cannot prove equality, so the ends straddle 1/2."""
    lo, hi = local_exponent_bounds(Fraction(16), Fraction(256), 2, 2, 8, 8)
    assert lo < Fraction(1, 2) < hi and hi - lo < Fraction(1, 10**30)
    (row,) = local_exponents([planted(15 / 16, 2, 2), planted(255 / 16, 8, 8)], theory=0.5)
    assert Fraction(row["lower"]) <= lo and Fraction(row["upper"]) >= hi  # decimal strings rounded outward
    assert row["verdict"] == "contains"


@settings(max_examples=60, deadline=None)
@given(l1=st.integers(1, 400), d1=st.integers(0, 40), l2=st.integers(1, 400), d2=st.integers(0, 40),
       x1=st.fractions(min_value=Fraction(11, 10), max_value=Fraction(10**5)), ratio=st.integers(2, 10**4))
def test_outward_rounding_against_high_precision(l1, d1, l2, d2, x1, ratio):
    """Both decimal ends enclose the 60-digit values of the two extreme quotients."""
    u1, u2 = l1 + d1, l2 + d2
    x1 = Fraction(x1).limit_denominator(10**6)
    x2 = x1 * ratio
    p1, p2 = planted(float((x1 - 1) / 16), l1, u1), planted(float((x2 - 1) / 16), l2, u2)
    (row,) = local_exponents([p1, p2], theory=0.5)
    with mpmath.workdps(60):
        span = mpmath.log(mpmath.mpf(p2.x.numerator) / p2.x.denominator / (mpmath.mpf(p1.x.numerator) / p1.x.denominator))
        true_lo = mpmath.log(mpmath.mpf(l2) / u1) / span
        true_hi = mpmath.log(mpmath.mpf(u2) / l1) / span
        assert mpmath.mpf(row["lower"]) <= true_lo and mpmath.mpf(row["upper"]) >= true_hi
        assert true_lo - mpmath.mpf(row["lower"]) < mpmath.mpf(10) ** -15 * (1 + abs(true_lo))


def test_x_of_is_exact_and_x_ranges_are_geometric():
    assert x_of(0.9375, "0.25") == 16 and x_of(0.1, "0.5") == 1 + 4 * Fraction(0.1)
    kappas = kappas_for_x_range("0.25", 16, 4096, 3)
    assert kappas == (0.9375, 15.9375, 255.9375)
    from softrank_cert.errors import InvalidInputError

    for bad in ((0.5, 10, 3), (100, 10, 3), (4, 16, 1), (4, 16, 33), (4, 2e6, 3)):
        with pytest.raises(InvalidInputError):
            kappas_for_x_range("0.25", *bad)
