"""Exact-rational enclosure of the attention matrix A (TRUSTED, second kernel).

:func:`enclose` returns integer matrices ``LO``, ``HI`` and a scale ``s`` such that
``LO[i][j] / 2**s <= A_ij <= HI[i][j] / 2**s`` for the exact real A of docs/design.md section 1
(``proofs/exact-kernel.md``, K2-K4).  ``probabilities`` operators are exact (LO == HI).
Softmax kinds: per row the exact scores are shifted by an exact row maximum (so every
exponent is <= 0 and the maximal one is exactly 0), each ``exp`` is enclosed by
``arith.exp_interval`` and the quotient uses the monotonicity of ``e_j / sum_l e_l``.
"""

from __future__ import annotations

import weakref

import numpy as np
from typing import TYPE_CHECKING

from .arith import ceil_div, exp_interval, floor_div, inv_sqrt_bounds, scaled_ints

if TYPE_CHECKING:
    from ..kernel import Operator

#: Enclosures per operator, kept apart from the Arb kernel's own cache.
_CACHE: weakref.WeakKeyDictionary[Operator, dict[int, IntervalMatrix]] = weakref.WeakKeyDictionary()
#: Guard bits of the exp argument beyond the output's fixed point (>= 32, see arith).
GUARD_BITS = 48


class IntervalMatrix:
    """Entries in ``[lo / 2**scale, hi / 2**scale]``; ``exact`` when lo == hi everywhere."""

    __slots__ = ("lo", "hi", "scale", "exact", "rows", "cols")

    def __init__(self, lo: list[list[int]], hi: list[list[int]], scale: int, exact: bool) -> None:
        self.lo, self.hi, self.scale, self.exact = lo, hi, scale, exact
        self.rows, self.cols = len(lo), len(lo[0])


def int_matrix(array: np.ndarray) -> tuple[list[list[int]], int]:
    """Exact integer matrix and scale of a finite float64 2-D array (value = M / 2**s)."""
    rows, cols = array.shape
    flat, s = scaled_ints(array.ravel().tolist())  # tolist(): bit-identical Python floats
    return [flat[i * cols:(i + 1) * cols] for i in range(rows)], s


def _row_lengths(op: Operator) -> list[int]:
    """Allowed keys per row: a prefix (causal, j <= i + N - m) or the whole row."""
    m, n = op.shape
    if op.mask == "none":
        return [n] * m
    return [i + n - m + 1 for i in range(m)]


def _softmax_rows(t_rows: list[list[tuple[int, int]]], w: int, f: int, n: int) -> IntervalMatrix:
    """Rows of A from exponent intervals ``t`` (scale 2**-w, all <= 0, row max exactly 0)."""
    lo_rows, hi_rows = [], []
    one = 1 << f
    for t_row in t_rows:
        e = [exp_interval(a, b, w, f) for a, b in t_row]
        s_lo = sum(x for x, _ in e)
        s_hi = sum(y for _, y in e)
        lo_row, hi_row = [], []
        for el, eh in e:
            # A_j = e_j / (e_j + sum_{l != j} e_l): increasing in e_j, decreasing in the others.
            lo_row.append(max(0, floor_div(el << f, el + (s_hi - eh))))
            hi_row.append(min(one, ceil_div(eh << f, eh + (s_lo - el))))
        pad = n - len(t_row)  # masked entries: exactly 0
        lo_rows.append(lo_row + [0] * pad)
        hi_rows.append(hi_row + [0] * pad)
    return IntervalMatrix(lo_rows, hi_rows, f, exact=False)


def enclose(op: Operator, f: int) -> IntervalMatrix:
    """Enclosure of A with fixed point ``f`` bits (softmax kinds) or exactly (probabilities)."""
    cache = _CACHE.setdefault(op, {})  # per operator (operators are immutable), keyed by f
    if f in cache:
        return cache[f]
    m, n = op.shape
    if op.kind == "probabilities":
        a, s = int_matrix(np.asarray(op.arrays["A"]))
        result = IntervalMatrix(a, a, s, exact=True)
        cache[f] = result
        return result
    w = f + GUARD_BITS
    lengths = _row_lengths(op)
    t_rows: list[list[tuple[int, int]]] = []
    if op.kind == "scores":
        s_int, ss = int_matrix(np.asarray(op.arrays["S"]))
        for i in range(m):
            s_row = s_int[i][:lengths[i]]
            c = max(s_row)  # exact row maximum: every shifted score <= 0, the max is exactly 0
            # t = (S_ij - c) / 2**ss, exactly; rounded outward to scale 2**-w
            t_rows.append([(floor_div((v - c) << w, 1 << ss), ceil_div((v - c) << w, 1 << ss)) for v in s_row])
    else:  # qk: S = beta Q K^T
        q, sq = int_matrix(np.asarray(op.arrays["Q"]))
        k, sk = int_matrix(np.asarray(op.arrays["K"]))
        den_d = 1 << (sq + sk)  # dot products are exact integers / 2**(sq + sk)
        if op.beta_exact is None:  # beta = 1/sqrt(d) in [b_lo, b_hi] / 2**wb, b_lo > 0
            wb = w + 16
            b_lo, b_hi = inv_sqrt_bounds(op.arrays["Q"].shape[1], wb)
            den = den_d << wb
        else:  # exact rational beta = b / den_b
            beta = op.beta_exact
            b_lo = b_hi = beta.numerator
            den = den_d * beta.denominator
        positive = b_lo >= 0
        for i in range(m):
            dots = [sum(x * y for x, y in zip(q[i], k[j])) for j in range(lengths[i])]
            c = max(dots) if positive else min(dots)  # beta (dot - c) <= 0 for every beta in range
            row = []
            for v in dots:
                dd = v - c
                prods = (b_lo * dd, b_hi * dd)
                row.append((floor_div(min(prods) << w, den), ceil_div(max(prods) << w, den)))
            t_rows.append(row)
    result = _softmax_rows(t_rows, w, f, n)
    cache[f] = result
    return result
