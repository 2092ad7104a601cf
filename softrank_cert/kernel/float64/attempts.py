"""The float64 path's attempts (TRUSTED): proved float64 bounds, Arb only where it is cheap.

Contract (``proofs/float64-bounds.md``, Theorems F5-F7): :func:`softmax_bounds` returns
doubles ``lo <= A_ij <= hi`` for every entry of the exact operator; :func:`upper_attempt`,
:func:`lower_attempt` and :func:`norm_attempt` decide the claims of the checks in
``kernel/checks.py`` from those bounds -- True (proved), False (proved invalid) or None (the
bounds cannot decide: :func:`softrank_cert.kernel.verdict.decide` moves on to the Arb balls).
Nothing here ever turns an undecided comparison into a decision; every ``None`` is safe.

The heavy steps are float64 (``Q K^T``, ``exp`` of m N scores, ``U W^T``, ``X A Y``) with the
a-priori error bounds of :mod:`.bounds`; Arb handles ``beta = 1/sqrt(d)``, the exp tables and
the small k x k inverse of a lower certificate.  Every function here runs behind a check's
entry gate (``checks._entry``), which has probed the floating-point environment (A1) for the
claim; the softmax bounds are cached per operator in a kernel-private ``WeakKeyDictionary``.
"""

from __future__ import annotations

import functools
import weakref
from fractions import Fraction
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from flint import arb, arb_mat

from ...errors import InternalInvariantError
from ..enclosure import row_norm_max
from ..exact_inputs import ball_interval, fraction_to_arb
from ..operator import Operator
from ..verdict import OUT_OF_MEMORY, working_precision
from .bounds import (EXP_MAX, EXP_MIN, EXP_TINY_UP, down, down_nonneg, exp_bounds, fraction_down, fraction_up,
                     product_bound, product_enclosure, row_sums_lower, row_sums_upper, up, up_nonneg)
from .fpenv import has_subnormals

Interval = tuple[Fraction, Fraction]
#: (decision, margin interval, value interval, reason) -- a ``verdict.Outcome``.
FastAttempt = tuple[bool | None, Interval | None, Interval | None, str]
#: Verdict.precision of a float64-path verdict (the significand bits of a double).
FLOAT64_BITS = 53
#: operator -> its softmax bounds (or None: declined); kernel-private, dropped with the operator.
_BOUNDS: weakref.WeakKeyDictionary[Operator, tuple[np.ndarray, np.ndarray] | None] = weakref.WeakKeyDictionary()


def _outcome(engine: str, attempt: Callable[[], FastAttempt]) -> FastAttempt:
    try:
        with np.errstate(all="ignore"):  # a global np.seterr(all="raise") must not interrupt the bounds
            return attempt()
    except MemoryError:  # the float64 path needs ~20 m x N temporaries: the next stage decides
        return None, None, None, f"{engine} path: {OUT_OF_MEMORY}"


def float64_stage(attempt: Callable[[], FastAttempt],
                  engine: str = "float64") -> tuple[str, int, Callable[[], FastAttempt]]:
    """A float64 path as one stage of :func:`softrank_cert.kernel.verdict.decide` (``engine``
    "float64" or "rowblock", precision 53): ``attempt`` is one of the attempts below or of
    :mod:`.rowblock`; out of memory is undecided (the next stage decides), never a verdict, and
    its reason says so (``decide`` carries it into the final verdict's reason)."""
    return engine, FLOAT64_BITS, functools.partial(_outcome, engine, attempt)


def float64_stages(engine: str, float64_attempt: Callable[[], FastAttempt],
                   rowblock_attempt: Callable[[], FastAttempt] | None
                   ) -> Iterator[tuple[str, int, Callable[[], FastAttempt]]]:
    """The float64 stages of a check: the row-block path (engines auto/rowblock; upper and lower
    ends, ``proofs/rowblock-bounds.md``), then the float64 path (auto/float64).  Norm claims have no
    row-block attempt: for them engine "rowblock" is the float64 path."""
    if rowblock_attempt is not None and engine in ("auto", "rowblock"):
        yield float64_stage(rowblock_attempt, "rowblock")
    if engine in ("auto", "float64") or (engine == "rowblock" and rowblock_attempt is None):
        yield float64_stage(float64_attempt)


def _beta_bounds(op: Operator) -> tuple[float, float]:
    """Doubles ``lo <= beta <= hi``: exact rational beta, or Arb's ball for ``1/sqrt(d)``."""
    if op.beta_exact is not None:
        return fraction_down(op.beta_exact), fraction_up(op.beta_exact)
    with working_precision(128):
        ball = arb(op.head_dim).rsqrt()
        bounds = ball_interval(ball)
    if bounds is None:
        raise InternalInvariantError("1/sqrt(d) has no finite bounds")
    return fraction_down(bounds[0]), fraction_up(bounds[1])


def _shifted_score_bounds(op: Operator, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Doubles bounding ``x_ij = S_ij - c_i`` for one exact shift ``c_i`` per row (any real
    shift gives the same softmax: proofs/softmax-enclosure.md, Lemma 1)."""
    if op.kind == "scores":
        s = op.arrays["S"]
        if has_subnormals(s):
            return None
        g = np.where(allowed, s, -np.inf).max(axis=1, keepdims=True)  # c_i = g_i, exact
        with np.errstate(all="ignore"):
            d = s - g
        return down(d), up(d)
    q, k = op.arrays["Q"], op.arrays["K"]
    if has_subnormals(q) or has_subnormals(k):
        return None
    with np.errstate(all="ignore"):
        gram, radius = product_bound(q, k.T)  # |Q K^T - gram| <= radius
        g_lo, g_hi = down(gram - radius), up(gram + radius)
        b_lo, b_hi = _beta_bounds(op)
        orient = np.where(allowed, gram if b_lo >= 0 else -gram, -np.inf)
        best = np.nan_to_num(orient, nan=-np.inf).argmax(axis=1)
        shift = gram[np.arange(gram.shape[0]), best][:, None]  # c_i = beta * shift_i, exact
        if not np.isfinite(shift).all():
            return None
        d_lo, d_hi = down(g_lo - shift), up(g_hi - shift)  # bound G_ij - shift_i
        products = (d_lo * b_lo, d_lo * b_hi, d_hi * b_lo, d_hi * b_hi)  # interval product
        return down(np.minimum.reduce(products)), up(np.maximum.reduce(products))


def softmax_bounds(op: Operator) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo, hi) doubles with ``lo <= A_ij <= hi`` entrywise (Theorem F5), or None when the
    float64 bounds do not apply (subnormal inputs, overflow, a score far above its shift).
    Cached per operator in the kernel-private ``_BOUNDS``, read-only; computed only behind a
    check's entry gate, which has probed the environment (A1): nothing wrong is cached."""
    if op not in _BOUNDS:
        bounds = _softmax_bounds(op)
        if bounds is not None:
            for array in bounds:
                array.setflags(write=False)
        _BOUNDS[op] = bounds
    return _BOUNDS[op]


def _softmax_bounds(op: Operator) -> tuple[np.ndarray, np.ndarray] | None:
    if op.kind == "probabilities":
        a = op.arrays["A"]
        return a, a  # exact (the same read-only array twice)
    allowed = op.allowed()
    x = _shifted_score_bounds(op, allowed)
    if x is None:
        return None
    x_lo, x_hi = x
    x_lo, x_hi = np.where(allowed, x_lo, EXP_MIN), np.where(allowed, x_hi, EXP_MIN)
    if not (np.isfinite(x_lo).all() and np.isfinite(x_hi).all()) or x_hi.max() > EXP_MAX:
        return None
    e_lo, _ = exp_bounds(np.maximum(x_lo, EXP_MIN))
    _, e_hi = exp_bounds(np.maximum(x_hi, EXP_MIN))
    e_lo = np.where(allowed & (x_lo >= EXP_MIN), e_lo, 0.0)  # exp > 0; masked entries are 0
    e_hi = np.where(allowed, np.where(x_hi >= EXP_MIN, e_hi, EXP_TINY_UP), 0.0)
    z_lo, z_hi = row_sums_lower(e_lo)[:, None], row_sums_upper(e_hi)[:, None]
    if not (z_lo > 0).all() or not np.isfinite(z_hi).all():
        return None
    a_lo = down_nonneg(e_lo / z_hi)  # quotients of nonnegative numbers
    a_hi = np.minimum(up_nonneg(e_hi / z_lo), 1.0)  # softmax entries are <= 1
    return a_lo, a_hi


def _interval(lo: float, hi: float) -> Interval:
    return Fraction(lo), Fraction(hi)  # exact: a double is a dyadic rational


def _bounds_if_applicable(op: Operator, *factors: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The softmax bounds, or None when the float64 path does not apply (a subnormal factor
    entry, or bounds that :func:`softmax_bounds` declines)."""
    if any(has_subnormals(f) for f in factors):
        return None
    return softmax_bounds(op)


def upper_attempt(op: Operator, eps: Fraction, U: np.ndarray, W: np.ndarray) -> FastAttempt:
    """Decide ``||A - U W^T|| <= eps`` from float64 bounds (Theorem F6)."""
    reason = "max-row-l1 error of U W^T against A (float64 bounds)"
    bounds = _bounds_if_applicable(op, U, W)
    if bounds is None:
        return None, None, None, reason
    a_lo, a_hi = bounds
    with np.errstate(all="ignore"):
        b, radius = product_bound(U, W.T)  # |U W^T - b| <= radius
        # |A - b| <= max(a_hi - b, b - a_lo), and that maximum is >= 0 (a_hi >= a_lo).
        diff_hi = up_nonneg(up_nonneg(np.maximum(a_hi - b, b - a_lo)) + radius)  # >= |A_ij - B_ij|
        # |A - b| >= max(a_lo - b, b - a_hi, 0); then |A - B| >= |A - b| - radius.
        near = down_nonneg(np.maximum(np.maximum(a_lo - b, b - a_hi), 0.0))
        diff_lo = down_nonneg(np.maximum(near - radius, 0.0))  # <= |A_ij - B_ij|
        error_hi = float(row_sums_upper(diff_hi).max())
        error_lo = float(row_sums_lower(diff_lo).max())
    if not (np.isfinite(error_hi) and np.isfinite(error_lo)):
        return None, None, None, reason
    value = _interval(error_lo, error_hi)
    decision = True if value[1] <= eps else False if value[0] > eps else None
    return decision, (eps - value[1], eps - value[0]), value, reason


def norm_attempt(op: Operator, eps: Fraction, claim_norm_above_eps: bool) -> FastAttempt:
    """Decide ``||A|| > eps`` (``claim_norm_above_eps``) or ``||A|| <= eps`` for a
    ``probabilities`` operator from float64 row sums of the exact ``|A|`` (Lemma F2)."""
    reason = "||A|| against eps (float64 bounds)"
    if op.kind != "probabilities":
        return None, None, None, reason
    magnitude = np.abs(op.arrays["A"])  # exact
    lo, hi = float(row_sums_lower(magnitude).max()), float(row_sums_upper(magnitude).max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None, None, None, reason
    value = _interval(lo, hi)
    if claim_norm_above_eps:
        decision = True if value[0] > eps else False if value[1] <= eps else None
        return decision, (value[0] - eps, value[1] - eps), value, reason
    decision = True if value[1] <= eps else False if value[0] > eps else None
    return decision, (eps - value[1], eps - value[0]), value, reason


def lower_attempt(op: Operator, eps: Fraction, X: np.ndarray, Y: np.ndarray) -> FastAttempt:
    """Decide ``eps ||X|| ||Y|| ||(X A Y)^{-1}|| < 1`` with ``X A Y`` enclosed in float64 and
    the k x k inverse in Arb (Theorem F7)."""
    reason = "eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1 (float64 bounds, Arb inverse)"
    bounds = _bounds_if_applicable(op, X, Y)
    if bounds is None:
        return None, None, None, reason
    a_lo, a_hi = bounds
    with np.errstate(all="ignore"):
        if a_lo is a_hi:  # probabilities: A is exact
            a_mid, a_rad = a_lo, None
        else:
            a_mid = 0.5 * (a_lo + a_hi)  # any double: the radius below covers the whole [lo, hi]
            a_rad = np.maximum(up(a_hi - a_mid), up(a_mid - a_lo))
        xa, xa_rad = product_enclosure(X, None, a_mid, a_rad)
        core, core_rad = product_enclosure(xa, xa_rad, Y, None)  # |X A Y - core| <= core_rad
        abs_x, abs_y = np.abs(X), np.abs(Y)
        norms = [(row_sums_lower(abs_x).max(), row_sums_upper(abs_x).max()),
                 (row_sums_lower(abs_y).max(), row_sums_upper(abs_y).max())]
    checked: tuple[Any, ...] = (core, core_rad, *norms)
    if not all(np.isfinite(v).all() for v in checked):
        return None, None, None, reason
    k = core.shape[0]
    for prec in (64, 128):
        with working_precision(prec):
            # arb(mid, rad) contains every point within rad of mid (the radius is rounded up).
            balls = arb_mat(k, k, [arb(c, r) for c, r in zip(core.ravel().tolist(), core_rad.ravel().tolist())])
            try:
                inverse = balls.inv()  # raises unless every matrix in the ball is proved invertible
            except ZeroDivisionError:
                continue
            norm_x, norm_y = (arb(lo).union(arb(hi)) for lo, hi in norms)  # contain ||X||, ||Y||
            scale = norm_x * norm_y * row_norm_max(inverse)
            product = fraction_to_arb(eps) * scale
            one = arb(1)
            decision = True if product < one else False if product >= one else None
            margin, value = one - product, one / scale
            if decision is not None or prec == 128:
                return decision, ball_interval(margin), ball_interval(value), reason
    return None, None, None, reason
