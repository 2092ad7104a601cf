"""Honest display of exact bounds: decimal strings rounded in the safe direction.

``format_down(x)`` is a decimal <= x and ``format_up(x)`` one >= x, so a table that prints
"margin >= 1.23e-3" never claims more than was proved.  Display only: nothing here decides.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: Significant digits of every certified bound in a report (outward rounding).
CERTIFIED_DIGITS = 17


def _directed(value: Fraction, digits: int, up: bool) -> str:
    if value == 0:
        return "0"
    sign = -1 if value < 0 else 1
    magnitude = abs(value)
    exponent = math.floor(math.log10(magnitude.numerator) - math.log10(magnitude.denominator))
    # fix a possible off-by-one of the floating log10
    while Fraction(10) ** exponent > magnitude:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= magnitude:
        exponent += 1
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
