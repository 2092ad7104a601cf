"""Exact parsing of everything that enters a bound (TRUSTED; ``proofs/exact-inputs.md``).

Every value returned here is the *exact* real number the input denotes:

* tolerances and decimal ``beta`` values are strings of a strict decimal grammar, parsed to exact
  rationals (``"0.1"`` is 1/10); exponents, hex floats, signs, spaces, ``inf``/``nan`` are refused;
* float64 arrays become Arb matrices through ``arb(float)``, exact (radius 0) in an IEEE process:
  callers run behind the environment gate (a check's entry, or ``require_ieee_environment()``);
* Arb endpoints leave the kernel only as exact ``Fraction`` bounds (:func:`arb_lower_fraction`,
  :func:`arb_upper_fraction`), never through ``float(arb)``, which rounds to nearest.
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
from flint import arb, arb_mat, fmpq

from ..errors import InvalidOperatorError, InvalidToleranceError
from .float64.fpenv import require_ieee_environment

#: Longest decimal string accepted (an exact double needs at most ~770 significant digits).
MAX_DECIMAL_CHARS = 1100
_TOLERANCE_RE = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_SIGNED_DECIMAL_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")


def _decimal_to_fraction(text: str) -> Fraction:
    negative = text.startswith("-")
    body = text[1:] if negative else text
    whole, _, frac = body.partition(".")
    value = Fraction(int(whole + frac), 10 ** len(frac))
    return -value if negative else value


def parse_tolerance(text: object) -> Fraction:
    """Return the exact positive rational a tolerance string denotes.

    Accepted grammar: ``0|[1-9][0-9]*`` optionally followed by ``.[0-9]+``; the value
    must be > 0.  Anything else (JSON numbers, exponents, spaces, signs) is refused.
    """
    if not isinstance(text, str):
        raise InvalidToleranceError(
            f"tolerance must be an exact decimal string such as \"0.25\", got {type(text).__name__}"
        )
    if len(text) > MAX_DECIMAL_CHARS or not _TOLERANCE_RE.fullmatch(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise InvalidToleranceError(
            f"tolerance {shown!r} is not a plain decimal string such as \"0.25\" "
            "(no exponent, sign, spaces or hex)"
        )
    value = _decimal_to_fraction(text)
    if value <= 0:
        raise InvalidToleranceError(f"tolerance {text!r} must be > 0")
    return value


def parse_decimal(text: object, what: str) -> Fraction:
    """Exact rational of a signed plain decimal string (used for an explicit ``beta``)."""
    if not isinstance(text, str) or len(text) > MAX_DECIMAL_CHARS or not _SIGNED_DECIMAL_RE.fullmatch(text):
        raise InvalidOperatorError(f"{what} must be a plain decimal string such as \"0.125\"")
    return _decimal_to_fraction(text)


def float_to_decimal_string(x: float) -> str:
    """The exact decimal expansion of a finite double (every double has a finite one)."""
    require_ieee_environment()  # Fraction(float) reads subnormals as 0 under denormals-are-zero
    value = Fraction(x)  # exact
    if value.denominator == 1:
        return str(value.numerator)
    # denominator is 2**e; multiply by 5**e to get a power of ten.
    e = value.denominator.bit_length() - 1
    digits = abs(value.numerator) * 5**e
    s = str(digits).rjust(e + 1, "0")
    text = s[:-e] + "." + s[-e:]
    return ("-" if value < 0 else "") + text


def fraction_to_arb(value: Fraction) -> arb:
    """Arb ball containing the exact rational ``value`` (at the current precision)."""
    return arb(fmpq(value.numerator, value.denominator))


def float64_matrix_to_arb(array: np.ndarray) -> arb_mat:
    """Exact Arb matrix of a finite float64 2-D array (every entry has radius 0; E2), behind the
    environment gate: ``arb(float)`` reads subnormals as 0 under denormals-are-zero."""
    if array.dtype != np.float64 or array.ndim != 2:
        raise InvalidOperatorError("internal: expected a 2-D float64 array")
    if not np.isfinite(array).all():
        raise InvalidOperatorError("array contains NaN or Inf")
    rows, cols = array.shape
    if rows == 0 or cols == 0:
        raise InvalidOperatorError("array has an empty dimension")
    # .tolist() yields Python floats bit-identical to the stored doubles; arb(float) is exact.
    return arb_mat(rows, cols, [arb(v) for v in array.ravel().tolist()])


#: Reported bounds are dyadic rationals with binary exponents in [-EXPONENT_LIMIT, EXPONENT_LIMIT]:
#: an endpoint like exp(-5e7) is rounded outward to a multiple of 2**-EXPONENT_LIMIT instead of
#: being expanded into a Fraction with a 5e7-bit denominator.
EXPONENT_LIMIT = 4096


def _dyadic_bound(x: arb, up: bool) -> Fraction | None:
    """A Fraction >= every point of the ball ``x`` (``up``) or <= every point; None if ``x`` is not
    finite or that endpoint, exactly ``M * 2**E``, has ``E >= 0`` and magnitude >= ``2**EXPONENT_LIMIT`` (E4)."""
    if not x.is_finite():
        return None
    point = x.upper() if up else x.lower()  # an exact endpoint, rounded outward by Arb
    mantissa, exponent = map(int, point.man_exp())  # exact: point = mantissa * 2**exponent
    if exponent >= 0:
        if exponent + mantissa.bit_length() > EXPONENT_LIMIT:
            return None  # |point| > 2**EXPONENT_LIMIT: no finite bound is reported
        return Fraction(mantissa << exponent)
    shift = -exponent - EXPONENT_LIMIT
    if shift > 0:  # round to a multiple of 2**-EXPONENT_LIMIT in the safe direction
        mantissa = -((-mantissa) >> shift) if up else mantissa >> shift  # ceil / floor
        exponent = -EXPONENT_LIMIT
    return Fraction(mantissa, 1 << -exponent)


def arb_lower_fraction(x: arb) -> Fraction | None:
    """An exact rational <= every point of the ball ``x`` (None if x is not finite or huge)."""
    return _dyadic_bound(x, up=False)


def arb_upper_fraction(x: arb) -> Fraction | None:
    """An exact rational >= every point of the ball ``x`` (None if x is not finite or huge)."""
    return _dyadic_bound(x, up=True)


def ball_interval(ball: arb | None) -> tuple[Fraction, Fraction] | None:
    """Exact rational [lo, hi] containing the ball, or None (no ball, not finite, beyond 2**4096)."""
    lo, hi = (None, None) if ball is None else (arb_lower_fraction(ball), arb_upper_fraction(ball))
    return None if lo is None or hi is None else (lo, hi)
