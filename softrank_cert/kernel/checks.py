"""The verify functions (TRUSTED).  Each decides one claim about one exact operator.

Every comparison below is a ball comparison: ``x <= y`` on Arb balls is True only when it
holds for *every* pair of points, so a True is a proof; when neither the claim nor its
negation is proved the precision is doubled (64, 128, 256, ... bits) and, at the maximum,
the verdict is INCONCLUSIVE.  Proofs: ``proofs/upper-witness.md`` (Theorem U, Lemma U3),
``proofs/lower-certificate.md`` (Theorem L, Lemma L1), ``proofs/trivial-ends.md`` (T1-T4),
``proofs/precision-retry.md`` (Theorem P: the retry loop of :func:`.verdict.decide`).

Engines: ``"auto"`` (default) tries the float64 path first (``float64/``,
``proofs/float64-bounds.md``) and hands what it cannot decide to the Arb balls; ``"arb"`` the
Arb balls only; ``"float64"`` the float64 path only (undecided -> INCONCLUSIVE).  Each check
passes its entry gate (:func:`_entry`) once, then hands :func:`.verdict.decide` its attempts.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Callable, Iterator

import numpy as np
from flint import arb

from ..errors import InvalidInputError
from .enclosure import _ball_max, enclosure, row_abs_sums, row_norm_max
from .exact import arb_lower_fraction, arb_upper_fraction, float64_matrix_to_arb, fraction_to_arb, parse_tolerance
from .float64.attempts import float64_stage, lower_attempt, norm_attempt, upper_attempt
from .float64.fpenv import require_ieee_environment
from .operator import Operator, check_shape
from .precision import working_precision
from .verdict import DEFAULT_MAX_PREC, Outcome, Stage, Verdict, decide, precision_schedule

# An Arb attempt at one precision returns (decision, margin ball, value ball, reason):
# decision True = claim proved, False = claim's certificate proved invalid, None = undecided.
Attempt = tuple[bool | None, arb | None, arb | None, str]
ENGINES = ("auto", "arb", "float64")


def _interval(ball: arb | None) -> tuple[Fraction, Fraction] | None:
    """Exact rational [lo, hi] containing the ball, or None (not finite, or beyond 2**4096)."""
    if ball is None or not ball.is_finite():
        return None
    lo, hi = arb_lower_fraction(ball), arb_upper_fraction(ball)
    return None if lo is None or hi is None else (lo, hi)


def _entry(eps: str, max_prec: int, engine: str) -> Fraction:
    """The entry gate of every check, passed once per claim: the exact ``eps``, ``max_prec`` and
    ``engine`` validated eagerly (also when no ball arithmetic is needed), then the one probe of
    the floating-point environment (``proofs/float64-bounds.md`` A1; ``proofs/exact-inputs.md``
    E2: ``arb(float)`` is exact only in an IEEE process).  The rest of the claim runs behind it:
    enclosures, exact conversions and float64 bounds do not probe again."""
    eps_q = parse_tolerance(eps)
    precision_schedule(max_prec)
    if engine not in ENGINES:
        raise InvalidInputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    require_ieee_environment()
    return eps_q


def _arb_outcome(attempt: Callable[[int], Attempt], prec: int) -> Outcome:
    """One Arb attempt at ``prec`` bits, its balls turned into exact intervals at that precision."""
    with working_precision(prec):
        decision, margin, value, reason = attempt(prec)
        return decision, _interval(margin), _interval(value), reason


def _stages(engine: str, max_prec: int, float64_attempt: Callable[[], Outcome],
            attempt: Callable[[int], Attempt]) -> Iterator[Stage]:
    """The float64 path first (engines auto/float64), then the Arb balls at every precision of
    the schedule (engines auto/arb): :func:`.verdict.decide` stops at the first decision, which
    is sound because every attempt is sound at any precision (``proofs/precision-retry.md``,
    Lemmas P1-P2, Theorem P; ``proofs/float64-bounds.md``, Theorems F6-F7 for the first stage)."""
    if engine != "arb":
        yield float64_stage(float64_attempt)
    if engine != "float64":
        for prec in precision_schedule(max_prec):
            yield "arb", prec, functools.partial(_arb_outcome, attempt, prec)


def _trivial(side: str, rank: int, eps: str, method: str, decision: bool, reason: str) -> Verdict:
    """A trivial end's verdict (``proofs/trivial-ends.md``), decided by an exact comparison of
    rationals alone: engine ``"trivial"``, no balls, precision 0."""
    return decide(side, rank, eps, method, [("trivial", 0, lambda: (decision, None, None, reason))])


def _factor(name: str, array: object, rows: int, cols: int) -> np.ndarray:
    """Validate a float64 factor of the expected shape (sizes checked before conversion)."""
    a = np.asarray(array)
    if a.dtype != np.float64 or a.ndim != 2:
        raise InvalidInputError(f"{name} must be a 2-D float64 array")
    check_shape(name, tuple(int(n) for n in a.shape))
    if a.shape != (rows, cols):
        raise InvalidInputError(f"{name} has shape {list(a.shape)}, expected {[rows, cols]}")
    if not np.isfinite(a).all():
        raise InvalidInputError(f"{name} contains NaN or Inf")
    return a


def _check_rank(name: str, value: object, top: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        raise InvalidInputError(f"{name} must be an integer in [0, {top}], got {value!r}")
    return value


def verify_upper(op: Operator, eps: str, r: int, U: np.ndarray, W: np.ndarray, *,
                 method: str = "witness", max_prec: int = DEFAULT_MAX_PREC, engine: str = "auto") -> Verdict:
    """Decide the claim ``r_eps(A) <= r`` witnessed by ``B = U W^T`` (U m x r, W N x r).

    VERIFIED iff ``max_i sum_j |A_ij - B_ij| <= eps`` is proved; REJECTED iff ``> eps`` is
    proved (the witness is false).  ``rank(U W^T) <= r`` holds by construction, so a proved
    error bound proves the claim (``proofs/upper-witness.md``, Theorem U and its decision rules).
    """
    eps_q = _entry(eps, max_prec, engine)
    m, n = op.shape
    r = _check_rank("r", r, max(m, n))
    if r == 0:
        raise InvalidInputError("a rank-0 upper end is the trivial 'zero' witness, not a factorisation")
    U, W = _factor("U", U, m, r), _factor("W", W, n, r)

    def attempt(prec: int) -> Attempt:
        enc = enclosure(op, prec)
        witness = float64_matrix_to_arb(U) * float64_matrix_to_arb(np.ascontiguousarray(W.T))
        error = _ball_max(row_abs_sums(enc.probabilities - witness))  # contains ||A - U W^T|| (Lemma U3)
        eps_ball = fraction_to_arb(eps_q)
        decision = True if error <= eps_ball else False if error > eps_ball else None
        return decision, eps_ball - error, error, "max-row-l1 error of U W^T against A"

    return decide("upper", r, eps, method, _stages(engine, max_prec, lambda: upper_attempt(op, eps_q, U, W), attempt))


def verify_lower(op: Operator, eps: str, k: int, X: np.ndarray, Y: np.ndarray, *,
                 method: str = "certificate", max_prec: int = DEFAULT_MAX_PREC, engine: str = "auto") -> Verdict:
    """Decide the claim ``r_eps(A) >= k`` certified by X (k x m), Y (N x k).

    VERIFIED iff ``eps ||X|| ||Y|| ||(X A Y)^{-1}|| < 1`` is proved (Theorem L of
    ``proofs/lower-certificate.md``, by the Neumann Lemma L1); REJECTED iff the product is proved
    ``>= 1``; INCONCLUSIVE if ``X A Y`` cannot be proved invertible at the maximum precision.
    """
    eps_q = _entry(eps, max_prec, engine)
    m, n = op.shape
    k = _check_rank("k", k, op.p)
    if k == 0:
        raise InvalidInputError("a k = 0 lower end is the trivial one, not a certificate")
    X, Y = _factor("X", X, k, m), _factor("Y", Y, n, k)

    def attempt(prec: int) -> Attempt:
        enc = enclosure(op, prec)
        xa, ya = float64_matrix_to_arb(X), float64_matrix_to_arb(Y)
        core = (xa * enc.probabilities) * ya  # contains X A Y
        try:
            inverse = core.inv()  # Arb raises unless it proves invertibility; then contains (XAY)^{-1}
        except ZeroDivisionError:
            return None, None, None, "X A Y not proved invertible at this precision"
        scale = row_norm_max(xa) * row_norm_max(ya) * row_norm_max(inverse)  # ||X|| ||Y|| ||M^-1|| (Lemma U3)
        product = fraction_to_arb(eps_q) * scale
        one = arb(1)
        decision = True if product < one else False if product >= one else None  # Theorem L, step 5
        return decision, one - product, one / scale, "eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1"

    return decide("lower", k, eps, method, _stages(engine, max_prec, lambda: lower_attempt(op, eps_q, X, Y), attempt))


def verify_trivial_upper(op: Operator, eps: str, r: int, *, max_prec: int = DEFAULT_MAX_PREC,
                         engine: str = "auto") -> Verdict:
    """Trivial upper ends (``proofs/trivial-ends.md``): ``r = p`` (B = A, rank A <= p) always (T1);
    ``r = 0`` iff ``||A|| <= eps`` (T2; ``||A||`` enclosed by Lemma U3 for ``probabilities``)."""
    eps_q = _entry(eps, max_prec, engine)
    r = _check_rank("r", r, op.p)
    if r == op.p:
        return _trivial("upper", r, eps, "identity", True, "B = A has rank <= p = min(m, N)")  # T1
    if r != 0:
        raise InvalidInputError(f"a trivial upper end must have r = 0 or r = p = {op.p}, got {r!r}")
    if op.row_sums_exactly_one():
        return _trivial("upper", 0, eps, "zero", eps_q >= 1, "||A|| = 1 exactly for softmax rows")  # T2

    def attempt(prec: int) -> Attempt:
        norm, eps_ball = enclosure(op, prec).row_abs_sum_max, fraction_to_arb(eps_q)
        decision = True if norm <= eps_ball else False if norm > eps_ball else None
        return decision, eps_ball - norm, norm, "||A|| against eps"

    return decide("upper", 0, eps, "zero",
                  _stages(engine, max_prec, lambda: norm_attempt(op, eps_q, claim_norm_above_eps=False), attempt))


def verify_trivial_lower(op: Operator, eps: str, k: int, *, max_prec: int = DEFAULT_MAX_PREC,
                         engine: str = "auto") -> Verdict:
    """Trivial lower ends (``proofs/trivial-ends.md``): ``k = 0`` always (T3); ``k = 1`` iff
    ``||A|| > eps`` (T4: B = 0 is then too far)."""
    eps_q = _entry(eps, max_prec, engine)
    k = _check_rank("k", k, op.p)
    if k == 0:
        return _trivial("lower", 0, eps, "trivial", True, "every rank is >= 0")  # T3
    if k != 1:
        raise InvalidInputError(f"a trivial lower end must have k = 0 or k = 1, got {k!r}")
    if op.row_sums_exactly_one():
        return _trivial("lower", 1, eps, "trivial", eps_q < 1, "||A|| = 1 exactly for softmax rows")  # T4

    def attempt(prec: int) -> Attempt:
        norm, eps_ball = enclosure(op, prec).row_abs_sum_max, fraction_to_arb(eps_q)
        decision = True if norm > eps_ball else False if norm <= eps_ball else None
        return decision, norm - eps_ball, norm, "||A|| against eps"

    return decide("lower", 1, eps, "trivial",
                  _stages(engine, max_prec, lambda: norm_attempt(op, eps_q, claim_norm_above_eps=True), attempt))
