"""Exact integer / rational arithmetic of the second kernel (TRUSTED, second kernel).

Everything here is Python integers and ``fractions.Fraction``: no float ever bounds anything.
A *scaled integer* ``(n, s)`` denotes the dyadic rational ``n / 2**s`` exactly.  Outward
rounding to ``s`` fractional bits is ``floor`` (``>>`` / ``//``, which Python floors towards
-inf for negative numbers too) or ``ceil`` (``-((-a) // b)``).

Proofs: ``proofs/exact-exp-enclosure.md`` (ln 2, exp, 1/sqrt(d)) and
``proofs/exact-kernel.md`` (scaled integers, rounding).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from collections.abc import Sequence

#: A float only *chooses* the range-reduction integer n (any integer is sound: X1 below).
_LN2_GUESS = 0.6931471805599453


# ----------------------------------------------------------------------------------------
# Rounding and exact conversions (proofs/exact-kernel.md, K1)
# ----------------------------------------------------------------------------------------

def floor_div(a: int, b: int) -> int:
    """floor(a / b) for b > 0."""
    return a // b


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for b > 0."""
    return -((-a) // b)


def shift_floor(a: int, k: int) -> int:
    """floor(a / 2**k) for k >= 0 (a << -k, exact, for k < 0)."""
    return a >> k if k >= 0 else a << -k


def shift_ceil(a: int, k: int) -> int:
    """ceil(a / 2**k) for k >= 0 (a << -k, exact, for k < 0)."""
    return -((-a) >> k) if k >= 0 else a << -k


def scaled_ints(values: Sequence[float]) -> tuple[list[int], int]:
    """Exact common-denominator form of finite doubles: ``values[i] == ints[i] / 2**s``.

    ``float.as_integer_ratio`` returns the exact ``(n, 2**e)`` of a finite double (its
    denominator is a power of two); bringing every entry to the largest ``e`` multiplies the
    numerator by an exact power of two.
    """
    pairs = [float(v).as_integer_ratio() for v in values]
    s = max((d.bit_length() - 1 for _, d in pairs), default=0)
    return [n << (s - (d.bit_length() - 1)) for n, d in pairs], s


def dyadic(n: int, s: int) -> Fraction:
    """The exact rational ``n / 2**s`` (any integer s)."""
    return Fraction(n, 1 << s) if s >= 0 else Fraction(n << -s)


def round_fraction(q: Fraction, bits: int, up: bool) -> Fraction:
    """A dyadic rational with about ``bits`` significant bits, <= q (up=False) or >= q (up=True)."""
    if q == 0:
        return Fraction(0)
    n, d = q.numerator, q.denominator
    e = abs(n).bit_length() - d.bit_length()
    s = bits - e  # keep ``bits`` bits: scale by 2**s
    if s >= 0:
        num, den = n << s, d
    else:
        num, den = n, d << -s
    f = ceil_div(num, den) if up else floor_div(num, den)
    return dyadic(f, s)


def round_interval(lo: Fraction, hi: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Outward rounding of ``[lo, hi]`` (reporting only)."""
    return round_fraction(lo, bits, up=False), round_fraction(hi, bits, up=True)


# ----------------------------------------------------------------------------------------
# ln 2 (proofs/exact-exp-enclosure.md, X2)
# ----------------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def ln2_bounds(w: int) -> tuple[int, int]:
    """Integers (lo, hi) with ``lo / 2**w <= ln 2 <= hi / 2**w``.

    ``ln 2 = 2 atanh(1/3) = sum_{k>=0} 2 / ((2k+1) 3^(2k+1))`` (positive terms); the tail after
    K terms is at most ``(9/8) * 2 / ((2K+1) 3^(2K+1))``.  Each term is rounded down (lo) or up
    (hi) at ``g`` bits; hi also gets the rounded-up tail bound.
    """
    g = w + 16 + w.bit_length()
    one = 1 << g
    k_terms = 0
    while 18 * one > 8 * (2 * k_terms + 1) * 3 ** (2 * k_terms + 1):  # tail > 2**-g
        k_terms += 1
    lo = hi = 0
    for k in range(k_terms):
        den = (2 * k + 1) * 3 ** (2 * k + 1)
        lo += floor_div(2 * one, den)
        hi += ceil_div(2 * one, den)
    hi += ceil_div(18 * one, 8 * (2 * k_terms + 1) * 3 ** (2 * k_terms + 1))
    return shift_floor(lo, g - w), shift_ceil(hi, g - w)


# ----------------------------------------------------------------------------------------
# exp (proofs/exact-exp-enclosure.md, X1, X3, X4)
# ----------------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _taylor_terms(w: int) -> int:
    """Smallest K with ``2**w <= 2**K (K+1)!``: then ``2 (1/2)^(K+1) / (K+1)! <= 2**-w``."""
    k, fact = 1, 2  # fact = (K+1)!
    while (1 << w) > (fact << k):
        k += 1
        fact *= k + 1
    return k


def _exp_taylor(r: int, w: int, upper: bool) -> int:
    """Bound (at scale 2**-w) on ``exp(r / 2**w)`` for ``|r / 2**w| <= 1/2``.

    Interval Horner for ``T_K(x) = 1 + x (1 + x/2 (1 + ... (1 + x/K)))`` with outward rounding,
    then +-1 ulp for the Lagrange remainder (X3).
    """
    one = 1 << w
    k_terms = _taylor_terms(w)
    lo = hi = one  # S_K = 1
    for k in range(k_terms, 0, -1):
        den = k << w  # S_{k-1} = 1 + (r / 2**w) S_k / k
        if r >= 0:  # increasing affine map of S_k
            lo, hi = one + floor_div(r * lo, den), one + ceil_div(r * hi, den)
        else:  # decreasing affine map of S_k
            lo, hi = one + floor_div(r * hi, den), one + ceil_div(r * lo, den)
    return hi + 1 if upper else lo - 1


def exp_point_bound(x: int, w: int, f: int, upper: bool) -> int:
    """Bound at scale 2**-f on ``exp(x / 2**w)`` for ``-f <= x / 2**w <= 0``; w >= f + 32.

    Lower bound (upper=False) or upper bound (upper=True), always within [0, 2**f].
    """
    if x > 0:
        raise AssertionError("exact kernel: exp argument must be <= 0 after the row shift")
    if x == 0:
        return 1 << f  # exp(0) = 1 exactly
    n = round((x / (1 << w)) / _LN2_GUESS)  # any integer n is sound (X1); this keeps |r| small
    l_lo, l_hi = ln2_bounds(w)
    # n * ln2 lies between n*l_lo and n*l_hi (scale 2**-w); r = x - n ln2
    a, b = n * l_lo, n * l_hi
    r = x - (min(a, b) if upper else max(a, b))
    if abs(r) > (1 << (w - 1)):
        raise AssertionError("exact kernel: range reduction left |r| > 1/2")
    t = _exp_taylor(r, w, upper)  # scale 2**-w bound on exp(r)
    # exp(x) = 2**n exp(r): rescale from w to f bits and multiply by 2**n (n <= 0)
    shift = w - f - n
    bound = shift_ceil(t, shift) if upper else shift_floor(t, shift)
    return min(bound, 1 << f) if upper else max(bound, 0)


def exp_interval(x_lo: int, x_hi: int, w: int, f: int) -> tuple[int, int]:
    """(lo, hi) at scale 2**-f with ``lo <= 2**f exp(x) <= hi`` for all x in [x_lo, x_hi] / 2**w.

    Requires x_hi <= 0.  Arguments below ``-f`` use ``exp(x) <= 2**x <= 2**-f`` (X4).
    """
    cut = -(f << w)
    hi = 1 if x_hi <= cut else exp_point_bound(x_hi, w, f, upper=True)
    lo = 0 if x_lo <= cut else exp_point_bound(x_lo, w, f, upper=False)
    return lo, hi


# ----------------------------------------------------------------------------------------
# 1/sqrt(d) (proofs/exact-exp-enclosure.md, X5)
# ----------------------------------------------------------------------------------------

def inv_sqrt_bounds(d: int, w: int) -> tuple[int, int]:
    """Integers (lo, hi) with ``lo / 2**w <= 1/sqrt(d) <= hi / 2**w`` (d >= 1)."""
    if d < 1:
        raise AssertionError("exact kernel: head dimension must be >= 1")
    s = math.isqrt(d << (2 * w))  # s <= sqrt(d) 2**w < s + 1
    return floor_div(1 << (2 * w), s + 1), ceil_div(1 << (2 * w), s)
