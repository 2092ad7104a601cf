"""Arb enclosures of S, A and log A for one operator at one precision (TRUSTED).

Contract of :class:`Enclosure` (``proofs/softmax-enclosure.md``): at the working precision
it was built with,

* ``scores`` (``qk``/``scores`` kinds) is an m x N Arb matrix whose (i, j) ball contains the
  exact ``S_ij = beta * sum_t Q_it K_jt`` (resp. the given ``S_ij``);
* ``probabilities`` is an m x N Arb matrix whose (i, j) ball contains the exact ``A_ij``;
  masked entries are the exact value 0;
* ``log_probability(i, j)`` contains ``log A_ij`` for unmasked entries of softmax kinds;
* ``row_abs_sum_max`` contains ``||A|| = max_i sum_j |A_ij|``.

Softmax step (per row i with allowed columns J_i): for ANY real shift ``c_i``
``A_ij = exp(S_ij - c_i) / sum_{l in J_i} exp(S_il - c_i)``.  The shift comes from a float64
rough row maximum (computed by numpy: it is only a shift, its accuracy affects ball
widths, not correctness), converted to Arb exactly; for ``qk`` it is ``c_i = beta * g_i``
and ``S_ij - c_i`` is enclosed as ``(G_ij - g_i) * beta`` with ``G = Q K^T``.  Arb's ``exp``, ``+`` and ``/``
return balls containing the exact results, so the quotient ball contains ``A_ij``.

Enclosures are cached per operator and precision in a kernel-private ``WeakKeyDictionary``
(never on the :class:`Operator` a caller holds).  Code outside the kernel reads them only
through :func:`score_balls` / :func:`probability_balls`: fresh lists of immutable balls.
"""

from __future__ import annotations

import weakref

import numpy as np
from flint import arb, arb_mat

from .exact import float64_matrix_to_arb, fraction_to_arb
from .float64.fpenv import require_ieee_environment
from .operator import Operator

#: operator -> {precision: Enclosure}; kernel-private, dropped with the operator.  Its values
#: never refer to the operator (a strong reference would keep the weak key alive).
_ENCLOSURES: "weakref.WeakKeyDictionary[Operator, dict[int, Enclosure]]" = weakref.WeakKeyDictionary()


def _rough_row_shifts(op: Operator, allowed: np.ndarray) -> list[float]:
    """One float64 ``g_i`` per row, near the row maximum of the *unscaled* scores.

    For ``qk`` the scores are ``beta * G`` with ``G = Q K^T``; ``g_i`` is a float64 value of
    ``G_ij`` at the column maximising ``beta * G_ij``, and the softmax shift is the exact real
    ``c_i = beta * g_i``.  For ``scores``, ``g_i`` is the float64 row maximum and ``c_i = g_i``.
    Any finite ``g_i`` is sound (Lemma 1 of proofs/softmax-enclosure.md); a good one keeps the
    balls narrow, also for huge scores, because ``(G_ij - g_i)`` is formed before scaling.
    """
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
    # Overflowed or otherwise unusable shifts fall back to 0: still exact, still sound.
    return np.where(np.isfinite(shifts), shifts, 0.0).tolist()


class Enclosure:
    """Arb enclosures of one operator at the current working precision."""

    def __init__(self, op: Operator) -> None:
        m, n = op.shape
        self.shape = (m, n)
        allowed = op.allowed()
        # Number of allowed keys per row: a prefix of the row (causal) or all of it.
        self._row_lengths = allowed.sum(axis=1).tolist()
        if op.kind == "probabilities":
            self.scores = None
            self.probabilities = float64_matrix_to_arb(op.arrays["A"])
            self._shifted, self._log_norm = None, None
            self.row_abs_sum_max = row_norm_max(self.probabilities)
            return
        raw, beta = self._enclose_raw_scores(op)
        self.scores = raw if beta is None else raw * beta  # contains S
        shifts = _rough_row_shifts(op, allowed)
        entries = raw.entries()
        probs: list[arb] = []
        shifted_rows: list[list[arb]] = []
        log_norms: list[arb] = []
        zero = arb(0)
        for i in range(m):
            length = self._row_lengths[i]
            g = arb(shifts[i])  # exact double
            # S_ij - c_i with c_i = beta * g_i (qk) or g_i (scores), formed before scaling.
            shifted = [(x - g) * beta for x in entries[i * n : i * n + length]] if beta is not None \
                else [x - g for x in entries[i * n : i * n + length]]
            exps = [t.exp() for t in shifted]
            total = sum(exps, zero)
            probs.extend(e / total for e in exps)
            probs.extend([zero] * (n - length))  # masked entries are exactly 0
            shifted_rows.append(shifted)
            log_norms.append(total.log())
        self.probabilities = arb_mat(m, n, probs)
        self._shifted, self._log_norm = shifted_rows, log_norms
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

    def log_probability(self, i: int, j: int) -> arb:
        """Ball containing ``log A_ij = (S_ij - c_i) - log Z_i`` (unmasked softmax entries only)."""
        if self._shifted is None:
            raise ValueError("log A of a 'probabilities' operator: use log of the entries")
        if j >= self._row_lengths[i]:
            raise ValueError("log A_ij of a masked entry is -inf")
        return self._shifted[i][j] - self._log_norm[i]


def _ball_max(balls: list[arb]) -> arb:
    """Ball containing the maximum of the exact values the balls contain."""
    result = balls[0]
    for b in balls[1:]:
        result = result.max(b)
    return result


def row_abs_sums(matrix: arb_mat) -> list[arb]:
    """Balls containing ``sum_j |M_ij|`` for each row i of an Arb matrix M.

    ``abs`` of a ball is a ball containing the absolute values of its points, and sums of
    balls contain the sums of their points, so each result contains the exact row sum.
    """
    rows, cols = matrix.nrows(), matrix.ncols()
    entries = matrix.entries()
    zero = arb(0)
    return [sum((abs(x) for x in entries[i * cols : (i + 1) * cols]), zero) for i in range(rows)]


def row_norm_max(matrix: arb_mat) -> arb:
    """Ball containing the max-row-l1 norm ``||M|| = max_i sum_j |M_ij|`` of an Arb matrix."""
    return _ball_max(row_abs_sums(matrix))


def enclosure(op: Operator, prec: int) -> Enclosure:
    """The cached :class:`Enclosure` of ``op`` at ``prec`` bits (caller sets the precision).

    Kernel-internal, called only behind a check's entry gate (``checks._entry``), which has
    probed the floating-point environment for this claim: nothing wrong is ever cached."""
    cache = _ENCLOSURES.setdefault(op, {})
    if prec not in cache:
        cache[prec] = Enclosure(op)
    return cache[prec]


def score_balls(op: Operator, prec: int) -> list[arb]:
    """Public enclosure API: row-major balls containing the exact ``S_ij`` of a ``qk``/``scores``
    operator at ``prec`` bits (caller sets the precision; Lemma 3 of proofs/softmax-enclosure.md).
    A fresh list of immutable balls (no kernel state reachable), behind an environment probe
    (it may fill the kernel's cache)."""
    require_ieee_environment()  # never build (and cache) an enclosure in a non-IEEE thread
    scores = enclosure(op, prec).scores
    if scores is None:
        raise ValueError("a 'probabilities' operator has no scores")
    return scores.entries()


def probability_balls(op: Operator, prec: int) -> list[arb]:
    """As :func:`score_balls`, for the exact ``A_ij`` (Lemma 4; masked entries exactly 0)."""
    require_ieee_environment()  # never build (and cache) an enclosure in a non-IEEE thread
    return enclosure(op, prec).probabilities.entries()
