"""The one outward-rounding formatter: decimal strings rounded in the safe direction.

* ``format_down(x)`` is a decimal <= x and ``format_up(x)`` one >= x (scientific notation), so a
  table that prints "margin >= 1.23e-3" never claims more than was proved;
* ``bound_down(x)`` / ``bound_up(x)``: a certified lower / upper bound as every JSON document
  prints it, with :data:`CERTIFIED_DIGITS` digits (None stays None);
* ``decimal_below(x)`` / ``decimal_above(x)``: short *plain* decimals (no exponent: the strict
  tolerance grammar of the kernel) strictly below / above a float64 estimate, at which a
  candidate end is then verified (a profile step, a threshold rounded down, an error rounded up).

Display and choice of tolerances only: nothing here decides; the kernel decides at the exact
rational the string denotes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import overload

#: Significant digits of every certified bound in a report (outward rounding).
CERTIFIED_DIGITS = 17


def decimal_exponent(magnitude: Fraction) -> int:
    """The ``e`` with ``10**e <= magnitude < 10**(e + 1)`` (``magnitude > 0``), exactly."""
    exponent = math.floor(math.log10(magnitude.numerator) - math.log10(magnitude.denominator))
    # fix a possible off-by-one of the floating log10
    while Fraction(10) ** exponent > magnitude:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= magnitude:
        exponent += 1
    return exponent


def _directed(value: Fraction, digits: int, up: bool) -> str:
    if value == 0:
        return "0"
    sign = -1 if value < 0 else 1
    magnitude = abs(value)
    exponent = decimal_exponent(magnitude)
    scale = Fraction(10) ** (digits - 1 - exponent)
    scaled = magnitude * scale
    # round the magnitude away from zero when (up and positive) or (down and negative)
    away = up == (sign > 0)
    integer = math.ceil(scaled) if away else math.floor(scaled)
    mantissa = str(integer)
    if len(mantissa) > digits:  # 9.99 rounded up to 10.0
        exponent += 1
        mantissa = mantissa[:digits]
    text = mantissa[0] + ("." + mantissa[1:] if digits > 1 else "") + f"e{exponent:+03d}"
    return ("-" if sign < 0 else "") + text


def format_down(value: Fraction, digits: int = 3) -> str:
    """A decimal string whose value is <= ``value`` (scientific notation, ``digits`` digits)."""
    return _directed(value, digits, up=False)


def format_up(value: Fraction, digits: int = 3) -> str:
    """A decimal string whose value is >= ``value``."""
    return _directed(value, digits, up=True)


@dataclass(frozen=True)
class _CertifiedEnd:
    """A certified bound as a decimal string of :data:`CERTIFIED_DIGITS` significant digits,
    rounded outward (``up``: >= the value, an upper end; else <=, a lower end); None stays None."""

    up: bool

    @overload
    def __call__(self, value: Fraction | int) -> str: ...
    @overload
    def __call__(self, value: None) -> None: ...
    def __call__(self, value: Fraction | int | None) -> str | None:
        return None if value is None else _directed(Fraction(value), CERTIFIED_DIGITS, self.up)


#: A certified lower bound as a decimal string <= the value (None stays None).
bound_down = _CertifiedEnd(up=False)
#: A certified upper bound as a decimal string >= the value (None stays None).
bound_up = _CertifiedEnd(up=True)


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
    return digits - 1 - decimal_exponent(x)


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
