"""The four checks (TRUSTED): each decides one claim about one exact operator.

A ball comparison ``x <= y`` is True only when it holds for every pair of points, so a True is a
proof; a claim neither proved nor refuted is retried at doubled precision by
:func:`.verdict.decide` and is INCONCLUSIVE at the maximum.  Proofs: ``proofs/upper-witness.md``
(Theorem U, Lemma U3), ``proofs/lower-certificate.md`` (Theorem L, Lemma L1),
``proofs/trivial-ends.md`` (T1-T4), ``proofs/precision-retry.md`` (Theorem P).  Engines:
``"auto"`` the row-block path (``proofs/rowblock-bounds.md``), the float64 path (``float64/``,
``proofs/float64-bounds.md``), then the Arb balls; ``"arb"``, ``"float64"``, ``"rowblock"`` one only.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from collections.abc import Callable, Iterator

import numpy as np
from flint import arb

from ..errors import InvalidInputError
from .enclosure import enclosure, row_norm_max
from .exact_inputs import ball_interval, float64_matrix_to_arb, fraction_to_arb, parse_tolerance
from .float64.attempts import float64_stages, lower_attempt, norm_attempt, upper_attempt
from .float64.fpenv import require_ieee_environment
from .float64.rowblock import rowblock_lower, rowblock_upper
from .operator import Operator, checked_float64
from .verdict import DEFAULT_MAX_PREC, Outcome, Stage, Verdict, decide, precision_schedule, working_precision

#: An Arb attempt at one precision: (decision, margin ball, value ball, reason), as Outcome.
Attempt = tuple[bool | None, arb | None, arb | None, str]
ENGINES = ("auto", "arb", "float64", "rowblock")


def _entry(eps: str, max_prec: int, engine: str) -> Fraction:
    """The entry gate of every check, passed once per claim: ``eps``, ``max_prec`` and ``engine``
    validated (also when no arithmetic is needed), then the one probe of the floating-point
    environment (``proofs/float64-bounds.md`` A1; ``proofs/exact-inputs.md`` E2) that everything
    behind it relies on."""
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
        return decision, ball_interval(margin), ball_interval(value), reason


def _stages(engine: str, max_prec: int, float64_attempt: Callable[[], Outcome],
            attempt: Callable[[int], Attempt],
            rowblock_attempt: Callable[[], Outcome] | None = None) -> Iterator[Stage]:
    """The float64 paths (:func:`float64_stages`: rowblock-bounds.md R4, R7; float64-bounds.md F6-F7), then the
    Arb balls at every precision of the schedule (auto/arb; precision-retry.md P1-P2): each sound on its own."""
    yield from float64_stages(engine, float64_attempt, rowblock_attempt)
    if engine in ("auto", "arb"):
        for prec in precision_schedule(max_prec):
            yield "arb", prec, functools.partial(_arb_outcome, attempt, prec)


def _trivial(side: str, rank: int, eps: str, method: str, decision: bool, reason: str) -> Verdict:
    """A trivial end's verdict (trivial-ends.md), by an exact comparison alone (engine "trivial", precision 0)."""
    return decide(side, rank, eps, method, [("trivial", 0, lambda: (decision, None, None, reason))])


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
    U, W = checked_float64("U", U, (m, r), InvalidInputError), checked_float64("W", W, (n, r), InvalidInputError)

    def attempt(prec: int) -> Attempt:
        enc = enclosure(op, prec)
        witness = float64_matrix_to_arb(U) * float64_matrix_to_arb(np.ascontiguousarray(W.T))
        error = row_norm_max(enc.probabilities - witness)  # contains ||A - U W^T|| (Lemma U3)
        eps_ball = fraction_to_arb(eps_q)
        decision = True if error <= eps_ball else False if error > eps_ball else None
        return decision, eps_ball - error, error, "max-row-l1 error of U W^T against A"

    return decide("upper", r, eps, method, _stages(engine, max_prec, lambda: upper_attempt(op, eps_q, U, W), attempt,
                                                   lambda: rowblock_upper(op, eps_q, U, W)))


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
    X, Y = checked_float64("X", X, (k, m), InvalidInputError), checked_float64("Y", Y, (n, k), InvalidInputError)

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

    return decide("lower", k, eps, method, _stages(engine, max_prec, lambda: lower_attempt(op, eps_q, X, Y), attempt,
                                                   lambda: rowblock_lower(op, eps_q, X, Y)))


def _norm_claim(op: Operator, eps: str, eps_q: Fraction, side: str, rank: int, method: str, max_prec: int,
                engine: str) -> Verdict:
    """``||A|| <= eps`` (side upper, T2) or ``||A|| > eps`` (side lower, T4), ``||A||`` exactly 1 for
    softmax rows (an exact comparison) and enclosed by Lemma U3 for ``probabilities``."""
    above = side == "lower"
    if op.row_sums_exactly_one():
        return _trivial(side, rank, eps, method, eps_q < 1 if above else eps_q >= 1,
                        "||A|| = 1 exactly for softmax rows")

    def attempt(prec: int) -> Attempt:
        norm, eps_ball = enclosure(op, prec).row_abs_sum_max, fraction_to_arb(eps_q)
        proved, refuted = (norm > eps_ball, norm <= eps_ball) if above else (norm <= eps_ball, norm > eps_ball)
        margin = norm - eps_ball if above else eps_ball - norm
        return True if proved else False if refuted else None, margin, norm, "||A|| against eps"

    return decide(side, rank, eps, method,
                  _stages(engine, max_prec, lambda: norm_attempt(op, eps_q, claim_norm_above_eps=above), attempt))


def verify_trivial_upper(op: Operator, eps: str, r: int, *, max_prec: int = DEFAULT_MAX_PREC,
                         engine: str = "auto") -> Verdict:
    """Trivial upper ends (``proofs/trivial-ends.md``): ``r = p`` (B = A, rank A <= p) always (T1);
    ``r = 0`` iff ``||A|| <= eps`` (T2)."""
    eps_q = _entry(eps, max_prec, engine)
    r = _check_rank("r", r, op.p)
    if r == op.p:
        return _trivial("upper", r, eps, "identity", True, "B = A has rank <= p = min(m, N)")  # T1
    if r != 0:
        raise InvalidInputError(f"a trivial upper end must have r = 0 or r = p = {op.p}, got {r!r}")
    return _norm_claim(op, eps, eps_q, "upper", 0, "zero", max_prec, engine)  # T2


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
    return _norm_claim(op, eps, eps_q, "lower", 1, "trivial", max_prec, engine)  # T4
