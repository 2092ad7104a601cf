"""Decimal tolerances next to a float64 estimate, rounded in the safe direction.

A profile step is verified at a short decimal string: a lower pair of float64 threshold ``t``
at the largest ``digits``-digit decimal strictly below ``t`` (:func:`decimal_below`), a witness
of float64 error ``e`` at the smallest one strictly above ``e`` (:func:`decimal_above`).  The
strings are exact rationals: the kernel then decides at exactly that tolerance.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: Significant digits of the decimal tolerance at which each step is verified.
STEP_DIGITS = 6


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
