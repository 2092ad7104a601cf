"""Arb enclosures of S and A for one operator at one precision (TRUSTED).

Contract of :class:`Enclosure` (``proofs/softmax-enclosure.md``), at its working precision:
``scores`` (``qk``/``scores`` kinds) is an m x N Arb matrix whose (i, j) ball contains the exact
``S_ij = beta * sum_t Q_it K_jt`` (resp. the given ``S_ij``); ``probabilities`` one whose (i, j)
ball contains the exact ``A_ij`` (masked entries exactly 0); ``row_abs_sum_max`` contains
``||A|| = max_i sum_j |A_ij|``.

Softmax step (row i, allowed columns J_i): for ANY real shift ``c_i``,
``A_ij = exp(S_ij - c_i) / sum_{l in J_i} exp(S_il - c_i)``.  The shift comes from a float64
rough row maximum (its accuracy affects ball widths, not correctness), converted exactly; for
``qk``, ``c_i = beta * g_i`` and ``S_ij - c_i`` is enclosed as ``(G_ij - g_i) * beta`` with
``G = Q K^T``.  Arb's ``exp``, ``+`` and ``/`` return balls containing the exact results.

Enclosures are cached per operator and precision in a kernel-private ``WeakKeyDictionary`` (never
on the :class:`Operator`); code outside the kernel reads them only through :func:`score_balls` /
:func:`probability_balls`, fresh lists of immutable balls.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np
from flint import arb, arb_mat

from .exact_inputs import float64_matrix_to_arb, fraction_to_arb
from .float64.fpenv import require_ieee_environment
from .operator import Operator

#: operator -> {precision: Enclosure}; kernel-private, dropped with the operator.  Its values
#: never refer to the operator (a strong reference would keep the weak key alive).
_ENCLOSURES: weakref.WeakKeyDictionary[Operator, dict[int, Enclosure]] = weakref.WeakKeyDictionary()


def _rough_row_shifts(op: Operator, allowed: np.ndarray) -> list[float | None]:
    """One float64 ``g_i`` per row: for ``qk`` the float64 ``G_ij`` (``G = Q K^T``) at the column
    maximising ``beta * G_ij`` (shift ``c_i = beta * g_i``), for ``scores`` the row maximum
    (``c_i = g_i``).  Any finite ``g_i`` is sound (softmax-enclosure.md Lemma 1); a good one keeps the balls narrow,
    also for huge scores, because ``G_ij - g_i`` is formed before scaling."""
    if op.kind == "qk":
        with np.errstate(all="ignore"):
            rough = op.arrays["Q"] @ op.arrays["K"].T
        beta = op.beta_exact
        sign = 1.0 if beta is None or beta > 0 else (-1.0 if beta < 0 else 0.0)
        with np.errstate(invalid="ignore"):
            oriented = np.where(allowed, sign * rough, -np.inf)
        best = np.argmax(np.nan_to_num(oriented, nan=-np.inf), axis=1)
        shifts = rough[np.arange(rough.shape[0]), best]
    else:
        shifts = np.where(allowed, op.arrays["S"], -np.inf).max(axis=1)
    # An overflowed (|Q K^T| beyond double range) or unusable shift is None: the Arb row maximum is used.
    return [s if np.isfinite(s) else None for s in shifts.tolist()]


class Enclosure:
    """Arb enclosures of one operator at the current working precision."""

    def __init__(self, op: Operator) -> None:
        m, n = op.shape
        if op.kind == "probabilities":
            self.scores = None
            self.probabilities = float64_matrix_to_arb(op.arrays["A"])
            self.row_abs_sum_max = row_norm_max(self.probabilities)
            return
        raw, beta = self._enclose_raw_scores(op)
        self.scores = raw if beta is None else raw * beta  # contains S
        allowed = op.allowed()
        shifts = _rough_row_shifts(op, allowed)
        entries = raw.entries()
        lengths = allowed.sum(axis=1).tolist()  # allowed keys per row: a prefix (causal) or all
        probs: list[arb] = []
        zero = arb(0)
        sign = -1 if (op.beta_exact or 0) < 0 else 1  # orients qk's G so that the shift is the row's top score
        for i, length in enumerate(lengths):
            row = entries[i * n : i * n + length]
            # c_i = beta * g_i (qk) or g_i (scores), g_i the double or the midpoint of the Arb top (Lemma 1: any real)
            g = (arb(shifts[i]) if shifts[i] is not None
                 else (functools.reduce(arb.max, [sign * x for x in row]) * sign).mid())
            exps = [(x - g).exp() for x in row] if beta is None else [((x - g) * beta).exp() for x in row]
            total = sum(exps, zero)
            probs.extend(e / total for e in exps)
            probs.extend([zero] * (n - length))  # masked entries are exactly 0
        self.probabilities = arb_mat(m, n, probs)
        # Softmax rows are nonnegative and sum to exactly 1 (proofs/softmax-enclosure.md, Lemma 2).
        self.row_abs_sum_max = arb(1)

    @staticmethod
    def _enclose_raw_scores(op: Operator) -> tuple[arb_mat, arb | None]:
        """(ball matrix containing G = Q K^T, ball containing beta) for qk; (S exactly, None) for scores."""
        if op.kind == "scores":
            return float64_matrix_to_arb(op.arrays["S"]), None
        q = float64_matrix_to_arb(op.arrays["Q"])
        kt = float64_matrix_to_arb(np.ascontiguousarray(op.arrays["K"].T))
        beta = arb(op.head_dim).rsqrt() if op.beta_exact is None else fraction_to_arb(op.beta_exact)
        return q * kt, beta


def row_norm_max(matrix: arb_mat) -> arb:
    """Ball containing the max-row-l1 norm ``||M|| = max_i sum_j |M_ij|`` of an Arb matrix.

    ``abs`` of a ball contains the absolute values of its points, a sum of balls the sums of
    their points, ``arb.max`` the maxima of its arguments' points: the result contains ``||M||``
    (``proofs/upper-witness.md``, Lemma U3)."""
    cols, entries, zero = matrix.ncols(), matrix.entries(), arb(0)
    sums = [sum((abs(x) for x in entries[i : i + cols]), zero) for i in range(0, len(entries), cols)]
    result = sums[0]
    for row_sum in sums[1:]:
        result = result.max(row_sum)
    return result


def enclosure(op: Operator, prec: int) -> Enclosure:
    """The cached :class:`Enclosure` of ``op`` at ``prec`` bits (caller sets the precision); called
    only behind an environment probe (a check's entry gate), so nothing wrong is ever cached."""
    cache = _ENCLOSURES.setdefault(op, {})
    if prec not in cache:
        cache[prec] = Enclosure(op)
    return cache[prec]


def score_balls(op: Operator, prec: int) -> list[arb]:
    """Public enclosure API: row-major balls containing the exact ``S_ij`` of a ``qk``/``scores``
    operator at ``prec`` bits (caller sets the precision; softmax-enclosure.md Lemma 3), behind an environment probe
    (never build and cache an enclosure in a non-IEEE thread)."""
    require_ieee_environment()
    scores = enclosure(op, prec).scores
    if scores is None:
        raise ValueError("a 'probabilities' operator has no scores")
    return scores.entries()


def probability_balls(op: Operator, prec: int) -> list[arb]:
    """As :func:`score_balls`, for the exact ``A_ij`` (softmax-enclosure.md Lemma 4; masked entries exactly 0)."""
    require_ieee_environment()
    return enclosure(op, prec).probabilities.entries()
