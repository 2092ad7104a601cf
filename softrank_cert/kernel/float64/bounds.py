"""Rigorous bounds computed in float64 (TRUSTED).  Proofs: ``proofs/float64-bounds.md``.

Everything here returns float64 numbers that are *proved* lower or upper bounds of exact real
quantities, under the IEEE 754 binary64 assumptions checked by :func:`ieee_preconditions_hold`.
The rules, in the style of mpmath's ``libmpi`` (every endpoint names its rounding direction):

* one elementwise operation (``+ - * /``) is faithfully rounded, so one ``nextafter`` step
  outward bounds its exact result: :func:`down` / :func:`up` (Lemma F1);
* a BLAS product or a numpy sum of ``n`` terms is within ``gamma_n`` (relative, Higham's
  ``gamma_n = n u / (1 - n u)`` with ``u = 2**-52``, valid for any summation order, fused or
  not, in any rounding mode) plus ``n * ETA`` (absolute, underflow and flush-to-zero) of the
  exact sum (Lemma F2): :func:`product_enclosure`, :func:`row_sums_upper`, :func:`row_sums_lower`;
* ``exp`` by range reduction to ``t`` with ``|t| <= 1/128``, tables of ``e**a`` and
  ``e**(b/64)`` whose relative errors Arb certifies, and a degree-7 Taylor polynomial: relative
  error below ``2**-47``, widened to :data:`EXP_REL` (Lemma F3): :func:`exp_bounds`.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache, cache
from math import factorial
from typing import Any

import numpy as np
from flint import arb

from ...errors import InternalInvariantError
from ..exact_inputs import arb_upper_fraction
from ..verdict import working_precision
from .fpenv import SMALLEST_NORMAL, has_subnormals, pow2, subnormal_mask

#: Unit roundoff for faithful rounding (any IEEE rounding mode); round-to-nearest has 2**-53.
UNIT = Fraction(1, 2**52)
#: Absolute error allowance per term of a BLAS product or numpy sum (underflow, FTZ, DAZ).
ETA = Fraction(1, 2**1016)
#: Relative error proved for :func:`exp_bounds`' approximation (Lemma F3 proves < 2**-47).
EXP_REL = pow2(-44)
#: exp is evaluated on [EXP_MIN, EXP_MAX]; below EXP_MIN the bound [0, EXP_TINY_UP] is used.
EXP_MIN, EXP_MAX = -700.0, 1.0
#: A double >= exp(-700) (700 / ln 2 > 1009, so e**-700 < 2**-1009 < 2**-1000).
EXP_TINY_UP = pow2(-1000)
_TAYLOR_DEGREE = 7


def up(x: Any) -> Any:
    """A double >= the exact result of the one faithfully rounded operation that gave ``x``."""
    return np.nextafter(x, np.inf)


def down(x: Any) -> Any:
    """A double <= the exact result of the one faithfully rounded operation that gave ``x``."""
    return np.nextafter(x, -np.inf)


def up_nonneg(x: np.ndarray) -> np.ndarray:
    """``up`` for arrays whose doubles are >= 0 (+0.0 or more): the next double is the bit
    pattern plus one (``x + 0.0`` turns a -0.0 into +0.0 first).  Non-finite stays non-finite."""
    with np.errstate(invalid="ignore"):
        return ((x + 0.0).view(np.int64) + 1).view(np.float64)


def down_nonneg(x: np.ndarray) -> np.ndarray:
    """A double <= max(v, 0) for the exact v of the faithfully rounded operation that gave the
    array ``x >= 0``: the previous double (bit pattern minus one), and 0 stays 0."""
    with np.errstate(invalid="ignore"):
        return np.maximum((x + 0.0).view(np.int64) - 1, 0).view(np.float64)


_MAX_DOUBLE = Fraction(float(np.finfo(np.float64).max))


def fraction_up(q: Fraction) -> float:
    """The least double >= q, or +inf beyond the largest double (Fraction -> float is
    correctly rounded)."""
    if abs(q) > _MAX_DOUBLE:
        return float("inf") if q > 0 else -float(_MAX_DOUBLE)
    f = float(q)
    return float(np.nextafter(f, np.inf)) if Fraction(f) < q else f


def fraction_down(q: Fraction) -> float:
    """The greatest double <= q, or -inf below the most negative double."""
    return -fraction_up(-q)


def gamma(n: int) -> Fraction:
    """Higham's ``gamma_n = n u / (1 - n u)`` for ``u = 2**-52`` (needs ``n u < 1/2``)."""
    if not 0 <= n < 2**50:
        raise InternalInvariantError(f"gamma_n undefined for n = {n}")
    return n * UNIT / (1 - n * UNIT)


@cache
def _sum_constants(n: int) -> tuple[float, float, float, float]:
    """Doubles (gamma_n up, 1/(1-gamma_n) up, 1+gamma_n up, n*ETA up) for n-term sums."""
    g = gamma(n)
    return fraction_up(g), fraction_up(1 / (1 - g)), fraction_up(1 + g), fraction_up(n * ETA)


def _normal_mid_rad(mid: np.ndarray, rad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """The same ball (or a larger one) with no subnormal entry: a subnormal midpoint becomes 0
    with ``2**-1022`` added to its radius, a subnormal radius becomes ``2**-1022``."""
    tiny_mid = subnormal_mask(mid)
    if tiny_mid.any():
        mid = np.where(tiny_mid, 0.0, mid)
        extra = np.where(tiny_mid, SMALLEST_NORMAL, 0.0)
        rad = extra if rad is None else up_nonneg(rad + extra)
    return mid, None if rad is None else _normal_upper(rad)


def _normal_upper(x: np.ndarray) -> np.ndarray:
    """A non-negative array with every subnormal entry raised to ``2**-1022`` (still an upper bound)."""
    return np.where(subnormal_mask(x), SMALLEST_NORMAL, x)


def product_enclosure(a_mid: np.ndarray, a_rad: np.ndarray | None,
                      b_mid: np.ndarray, b_rad: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(C, R) with ``|A B - C| <= R`` entrywise for every exact A in ``a_mid +/- a_rad`` and B in
    ``b_mid +/- b_rad`` (``None`` = radius 0).  ``C = a_mid @ b_mid`` by BLAS (Lemma F4); every
    BLAS operand is first made free of subnormals (a larger ball), and R is +inf wherever C is
    not finite."""
    n = a_mid.shape[1]
    g, inv_one_minus_g, _, _ = _sum_constants(n)
    (a_mid, a_rad), (b_mid, b_rad) = _normal_mid_rad(a_mid, a_rad), _normal_mid_rad(b_mid, b_rad)
    with np.errstate(all="ignore"):  # overflow shows as a non-finite C or radius, handled below
        c = a_mid @ b_mid
        abs_b = np.abs(b_mid)
        v1 = up_nonneg(g * abs_b) if b_rad is None else up_nonneg(up_nonneg(g * abs_b) + b_rad)  # >= gamma_n |Bm| + Br
        total = np.abs(a_mid) @ _normal_upper(v1)  # within gamma_n (+ n ETA) of its exact value
        terms = 1
        if a_rad is not None:
            v2 = abs_b if b_rad is None else up_nonneg(abs_b + b_rad)  # >= |Bm| + Br
            total = up_nonneg(total + a_rad @ _normal_upper(v2))
            terms = 2
        slack = fraction_up((terms + 1) * n * ETA)
        radius = up_nonneg(up_nonneg(total + slack) * inv_one_minus_g)
    return c, np.where(np.isfinite(c), radius, np.inf)


def product_bound(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C, R) with ``|a b - C| <= R`` for exact double matrices; ``C = a @ b`` by BLAS and the
    cheap rank-one radius ``R_ij = gamma_n ||a_i||_1 max_t |b_tj| + n ETA`` (Lemma F4')."""
    n = a.shape[1]
    g, _, _, n_eta = _sum_constants(n)
    if has_subnormals(a) or has_subnormals(b):
        raise InternalInvariantError("product_bound needs operands without subnormals")
    with np.errstate(all="ignore"):  # overflow shows as a non-finite C or radius
        row_l1 = up_nonneg(row_sums_upper(np.abs(a)) * g)  # >= gamma_n ||a_i||_1
        col_max = np.abs(b).max(axis=0)  # exact
        c = a @ b
        radius = up_nonneg(up_nonneg(np.multiply.outer(row_l1, col_max)) + n_eta)
    return c, np.where(np.isfinite(c), radius, np.inf)


def row_sums_upper(x: np.ndarray) -> np.ndarray:
    """Upper bounds of the exact row sums of a nonnegative matrix (Lemma F2)."""
    return sum_upper(x.sum(axis=1), x.shape[1])


def row_sums_lower(x: np.ndarray) -> np.ndarray:
    """Lower bounds (>= 0) of the exact row sums of a nonnegative matrix (Lemma F2)."""
    return sum_lower(x.sum(axis=1), x.shape[1])


def sum_upper(sums: np.ndarray, n: int) -> np.ndarray:
    """Upper bounds of exact sums of ``n`` nonnegative doubles from their numpy sums (Lemma F2)."""
    _, inv_one_minus_g, _, n_eta = _sum_constants(n)
    return up_nonneg(up_nonneg(sums + n_eta) * inv_one_minus_g)


def sum_lower(sums: np.ndarray, n: int) -> np.ndarray:
    """Lower bounds (>= 0) of exact sums of ``n`` nonnegative doubles from their numpy sums (Lemma F2)."""
    _, _, one_plus_g, n_eta = _sum_constants(n)
    s = down(sums - n_eta)
    return np.where(s > 0, down(s / one_plus_g), 0.0)


@lru_cache(maxsize=1)
def _exp_tables() -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Doubles ``E[a + 700] ~ e**a`` (a = -700..1) and ``F[b] ~ e**(b/64)`` (b = 0..63), each
    certified by Arb at 128 bits to have relative error <= 2**-52 (else an internal error), and
    the Taylor coefficients ``fl(1/k!)`` (correctly rounded by ``Fraction.__float__``).  Built
    on first use, which is inside a check whose environment probe has passed."""
    taylor = [float(Fraction(1, factorial(k))) for k in range(_TAYLOR_DEGREE + 1)]
    bound = arb(2) ** -52
    tables = []
    with working_precision(128):
        for points in ([arb(a) for a in range(-700, 2)], [arb(b) / 64 for b in range(64)]):
            values = [p.exp() for p in points]
            # A double near each value: the exact midpoint as a Fraction, correctly rounded by
            # Fraction.__float__ (any double would do: its error is certified just below).
            mids = [arb_upper_fraction(v.mid()) for v in values]
            if any(mid is None for mid in mids):
                raise InternalInvariantError("exp table entry is not finite")
            doubles = [float(mid) for mid in mids if mid is not None]
            for d, v in zip(doubles, values):
                if not abs(arb(d) - v) <= bound * arb(d):
                    raise InternalInvariantError("exp table entry not certified to 2**-52")
            table = np.array(doubles)
            table.setflags(write=False)
            tables.append(table)
    return tables[0], tables[1], taylor


def exp_bounds(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) with ``lo <= exp(y) <= hi`` entrywise, for doubles ``y`` in [EXP_MIN, EXP_MAX]
    (Lemma F3)."""
    if y.size and not (EXP_MIN <= y.min() and y.max() <= EXP_MAX):
        raise InternalInvariantError("exp_bounds argument outside [-700, 1]")
    value = exp_mid(y)
    return down(value * (1.0 - EXP_REL)), up(value * (1.0 + EXP_REL))


def exp_mid(y: np.ndarray) -> np.ndarray:
    """``v = exp(y) (1 + theta)`` with ``|theta| < 2**-47`` entrywise, for doubles ``y`` in
    [EXP_MIN, EXP_MAX] (Lemma F3, steps 1-6; the caller checks the range); ``exp_mid(0) = 1``."""
    e_table, f_table, taylor = _exp_tables()
    n = np.rint(y * 64.0)  # exact integer-valued, |y*64 - n| <= 1/2
    t = y - n / 64.0  # exact (Sterbenz), |t| <= 1/128
    a = np.floor(n / 64.0)
    b = (n - 64.0 * a).astype(np.intp)  # 0..63, exact
    poly = np.full_like(t, taylor[_TAYLOR_DEGREE])
    for coefficient in reversed(taylor[:_TAYLOR_DEGREE]):  # Horner
        poly *= t
        poly += coefficient
    value: np.ndarray = e_table[a.astype(np.intp) + 700] * f_table[b]
    value *= poly
    return value
