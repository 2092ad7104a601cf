"""The verify functions (TRUSTED).  Each decides one claim about one exact operator.

Every comparison below is a ball comparison: ``x <= y`` on Arb balls is True only when it
holds for *every* pair of points, so a True is a proof; when neither the claim nor its
negation is proved the precision is doubled (64, 128, 256, ... bits) and, at the maximum,
the verdict is INCONCLUSIVE.  Proofs: ``proofs/upper-witness.md``,
``proofs/lower-certificate.md``, ``proofs/trivial-ends.md``.

Engines of :func:`verify_upper` / :func:`verify_lower`: ``"auto"`` (default) first tries the
float64 path (``fast.py``: proved a-priori rounding bounds, ``proofs/float64-bounds.md``) and
hands every claim it cannot decide to the Arb balls; ``"arb"`` uses the Arb balls only;
``"float64"`` the float64 path only (undecided -> INCONCLUSIVE; for cross-checks).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import numpy as np
from flint import arb

from ..errors import InvalidInputError
from . import fast
from .enclosure import _ball_max, enclosure, row_abs_sums, row_norm_max
from .fpenv import require_ieee_environment
from .exact import arb_lower_fraction, arb_upper_fraction, float64_matrix_to_arb, fraction_to_arb, parse_tolerance
from .operator import Operator, check_shape
from .precision import DEFAULT_MAX_PREC, precision_schedule, working_precision
from .verdict import _KERNEL_SEAL, Status, Verdict

# An attempt at one precision returns (decision, margin ball, value ball, reason):
# decision True = claim proved, False = claim's certificate proved invalid, None = undecided.
Attempt = tuple[bool | None, arb | None, arb | None, str]
ENGINES = ("auto", "arb", "float64")
#: Verdict.precision of a float64-path verdict (the significand bits of a double).
FLOAT64_BITS = 53


def _interval(ball: arb | None) -> tuple[Fraction, Fraction] | None:
    """Exact rational [lo, hi] containing the ball, or None (not finite, or beyond 2**4096)."""
    if ball is None or not ball.is_finite():
        return None
    lo, hi = arb_lower_fraction(ball), arb_upper_fraction(ball)
    return None if lo is None or hi is None else (lo, hi)


def _decide(side: str, rank: int, eps: str, method: str, max_prec: int, attempt: Callable[[int], Attempt]) -> Verdict:
    """Run ``attempt`` at increasing precision until it decides; wrap the result in a Verdict."""
    schedule = precision_schedule(max_prec)
    for prec in schedule:
        with working_precision(prec):
            decision, margin, value, reason = attempt(prec)
            margin_q, value_q = _interval(margin), _interval(value)
        if decision is not None or prec == schedule[-1]:
            status = {True: Status.VERIFIED, False: Status.REJECTED, None: Status.INCONCLUSIVE}[decision]
            return Verdict(
                seal=_KERNEL_SEAL, status=status, side=side, rank=rank, eps=eps, method=method,
                margin=margin_q, value=value_q, precision=prec, reason=reason, engine="arb",
            )
    raise AssertionError("unreachable: the schedule is never empty")


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise InvalidInputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def _decide_float64_first(side: str, rank: int, eps: str, method: str, max_prec: int, engine: str,
                          float64_attempt: Callable[[], fast.FastAttempt], attempt: Callable[[int], Attempt]) -> Verdict:
    """The float64 path decides if it can (engine auto/float64); otherwise the Arb balls do
    (engine auto/arb), or the verdict is INCONCLUSIVE (engine float64)."""
    if engine != "arb":
        try:
            with np.errstate(all="ignore"):  # a global np.seterr(all="raise") must not interrupt the bounds
                decision, margin, value, reason = float64_attempt()
        except MemoryError:  # the float64 path needs ~20 m x N temporaries: let Arb decide
            decision, margin, value, reason = None, None, None, "float64 path out of memory"
        if decision is not None or engine == "float64":
            status = {True: Status.VERIFIED, False: Status.REJECTED, None: Status.INCONCLUSIVE}[decision]
            return Verdict(
                seal=_KERNEL_SEAL, status=status, side=side, rank=rank, eps=eps, method=method,
                margin=margin, value=value, precision=FLOAT64_BITS, reason=reason, engine="float64",
            )
    return _decide(side, rank, eps, method, max_prec, attempt)


def _exact_verdict(status: Status, side: str, rank: int, eps: str, method: str, reason: str) -> Verdict:
    """A verdict decided by exact rational arithmetic alone (no balls needed)."""
    return Verdict(
        seal=_KERNEL_SEAL, status=status, side=side, rank=rank, eps=eps, method=method,
        margin=None, value=None, precision=0, reason=reason, engine="exact",
    )


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
    proved (the witness is false).  ``rank(U W^T) <= r`` holds by construction.
    """
    eps_q = parse_tolerance(eps)
    precision_schedule(max_prec)  # validate eagerly, also when no ball arithmetic is needed
    _check_engine(engine)
    require_ieee_environment()  # proofs/float64-bounds.md A1; exact-inputs.md (arb(float) is exact)
    m, n = op.shape
    r = _check_rank("r", r, max(m, n))
    if r == 0:
        raise InvalidInputError("a rank-0 upper end is the trivial 'zero' witness, not a factorisation")
    U, W = _factor("U", U, m, r), _factor("W", W, n, r)

    def attempt(prec: int) -> Attempt:
        enc = enclosure(op, prec)
        witness = float64_matrix_to_arb(U) * float64_matrix_to_arb(np.ascontiguousarray(W.T))
        error = _ball_max(row_abs_sums(enc.probabilities - witness))  # contains ||A - U W^T||
        eps_ball = fraction_to_arb(eps_q)
        decision = True if error <= eps_ball else False if error > eps_ball else None
        return decision, eps_ball - error, error, "max-row-l1 error of U W^T against A"

    return _decide_float64_first("upper", r, eps, method, max_prec, engine,
                                 lambda: fast.upper_attempt(op, eps_q, U, W), attempt)


def verify_lower(op: Operator, eps: str, k: int, X: np.ndarray, Y: np.ndarray, *,
                 method: str = "certificate", max_prec: int = DEFAULT_MAX_PREC, engine: str = "auto") -> Verdict:
    """Decide the claim ``r_eps(A) >= k`` certified by X (k x m), Y (N x k).

    VERIFIED iff ``eps ||X|| ||Y|| ||(X A Y)^{-1}|| < 1`` is proved (the lemma in
    ``proofs/lower-certificate.md``); REJECTED iff the product is proved ``>= 1``;
    INCONCLUSIVE if ``X A Y`` cannot be proved invertible at the maximum precision.
    """
    eps_q = parse_tolerance(eps)
    precision_schedule(max_prec)  # validate eagerly, also when no ball arithmetic is needed
    _check_engine(engine)
    require_ieee_environment()  # proofs/float64-bounds.md A1; exact-inputs.md (arb(float) is exact)
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
        scale = row_norm_max(xa) * row_norm_max(ya) * row_norm_max(inverse)  # contains ||X|| ||Y|| ||M^-1||
        product = fraction_to_arb(eps_q) * scale
        one = arb(1)
        decision = True if product < one else False if product >= one else None
        return decision, one - product, one / scale, "eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1"

    return _decide_float64_first("lower", k, eps, method, max_prec, engine,
                                 lambda: fast.lower_attempt(op, eps_q, X, Y), attempt)


def verify_trivial_upper(op: Operator, eps: str, r: int, *, max_prec: int = DEFAULT_MAX_PREC,
                         engine: str = "auto") -> Verdict:
    """Trivial upper ends: ``r = p`` (B = A, rank A <= p) always; ``r = 0`` iff ``||A|| <= eps``."""
    eps_q = parse_tolerance(eps)
    precision_schedule(max_prec)  # validate eagerly, also when no ball arithmetic is needed
    _check_engine(engine)
    require_ieee_environment()  # proofs/float64-bounds.md A1; exact-inputs.md (arb(float) is exact)
    r = _check_rank("r", r, op.p)
    if r == op.p:
        return _exact_verdict(Status.VERIFIED, "upper", r, eps, "identity", "B = A has rank <= p = min(m, N)")
    if r != 0:
        raise InvalidInputError(f"a trivial upper end must have r = 0 or r = p = {op.p}, got {r!r}")
    if op.row_sums_exactly_one():
        status = Status.VERIFIED if eps_q >= 1 else Status.REJECTED
        return _exact_verdict(status, "upper", 0, eps, "zero", "||A|| = 1 exactly for softmax rows")

    def attempt(prec: int) -> Attempt:
        norm, eps_ball = enclosure(op, prec).row_abs_sum_max, fraction_to_arb(eps_q)
        decision = True if norm <= eps_ball else False if norm > eps_ball else None
        return decision, eps_ball - norm, norm, "||A|| against eps"

    return _decide_float64_first("upper", 0, eps, "zero", max_prec, engine,
                                 lambda: fast.norm_attempt(op, eps_q, claim_norm_above_eps=False), attempt)


def verify_trivial_lower(op: Operator, eps: str, k: int, *, max_prec: int = DEFAULT_MAX_PREC,
                         engine: str = "auto") -> Verdict:
    """Trivial lower ends: ``k = 0`` always; ``k = 1`` iff ``||A|| > eps`` (B = 0 is then too far)."""
    eps_q = parse_tolerance(eps)
    precision_schedule(max_prec)  # validate eagerly, also when no ball arithmetic is needed
    _check_engine(engine)
    require_ieee_environment()  # proofs/float64-bounds.md A1; exact-inputs.md (arb(float) is exact)
    k = _check_rank("k", k, op.p)
    if k == 0:
        return _exact_verdict(Status.VERIFIED, "lower", 0, eps, "trivial", "every rank is >= 0")
    if k != 1:
        raise InvalidInputError(f"a trivial lower end must have k = 0 or k = 1, got {k!r}")
    if op.row_sums_exactly_one():
        status = Status.VERIFIED if eps_q < 1 else Status.REJECTED
        return _exact_verdict(status, "lower", 1, eps, "trivial", "||A|| = 1 exactly for softmax rows")

    def attempt(prec: int) -> Attempt:
        norm, eps_ball = enclosure(op, prec).row_abs_sum_max, fraction_to_arb(eps_q)
        decision = True if norm > eps_ball else False if norm <= eps_ball else None
        return decision, norm - eps_ball, norm, "||A|| against eps"

    return _decide_float64_first("lower", 1, eps, "trivial", max_prec, engine,
                                 lambda: fast.norm_attempt(op, eps_q, claim_norm_above_eps=True), attempt)
