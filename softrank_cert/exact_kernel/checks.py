"""The four checks of the second kernel, in exact rational arithmetic (TRUSTED, second kernel).

Same signatures and the same three-valued contract as :mod:`softrank_cert.kernel.checks`:
VERIFIED only when an exact integer / ``Fraction`` inequality proves the claim, REJECTED only
when one proves the certificate false, otherwise retry with more bits (64, 128, ... up to
``max_prec``) and finally INCONCLUSIVE.  Proofs: ``proofs/exact-kernel.md`` (and
``proofs/upper-witness.md``, ``proofs/lower-certificate.md``, ``proofs/trivial-ends.md`` for
the mathematics shared with the Arb kernel).

Nothing here calls python-flint: the only things taken from ``softrank_cert.kernel`` (its public
interface) are the exact input parsers (:class:`Operator`, :func:`parse_tolerance`), the
environment gate (:func:`require_ieee_environment`, numpy only) and the verdict wrapper: the
precision schedule and :func:`decide`, the one constructor of verdicts, to which the attempts
below are handed.  The arithmetic of every attempt is this kernel's own.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from collections.abc import Callable

import numpy as np

from ..errors import InvalidInputError, SizeLimitError
from ..kernel import (DEFAULT_MAX_PREC, START_PREC, Operator, Verdict, checked_float64, decide, parse_tolerance,
                      precision_schedule, require_ieee_environment)
from .arith import dyadic, round_interval, shift_floor
from .enclosure import IntervalMatrix, enclose, int_matrix

#: Size limits of the exact kernel (refused with SizeLimitError, exit 2).
MAX_OPERATOR_ENTRIES = 4096   # m * N
MAX_HEAD_DIM = 1024           # d of a qk operator
MAX_K = 32                    # lower-certificate rank
MAX_R = 64                    # upper-witness rank
#: Newton steps refining the approximate inverse (each squares the residual).
MAX_NEWTON = 12

# decision True = claim proved, False = certificate proved invalid, None = undecided
Attempt = tuple["bool | None", "tuple[Fraction, Fraction] | None", "tuple[Fraction, Fraction] | None", str]


def check_limits(op: Operator) -> None:
    """Refuse operators beyond the exact kernel's limits (before any arithmetic).  The entry gate
    of every check here: its environment probe is the one probe of the claim."""
    require_ieee_environment()  # Fraction(float) reads subnormals as 0 under denormals-are-zero
    if not isinstance(op, Operator):
        raise InvalidInputError("exact kernel: expected a softrank_cert.kernel.Operator")
    m, n = op.shape
    if m * n > MAX_OPERATOR_ENTRIES:
        raise SizeLimitError(
            f"exact kernel limit: operator is {m}x{n} = {m * n} entries, the exact kernel checks at most "
            f"{MAX_OPERATOR_ENTRIES} (use --kernel arb)")
    if op.kind == "qk" and (op.head_dim or 0) > MAX_HEAD_DIM:
        raise SizeLimitError(f"exact kernel limit: head dimension {op.head_dim} exceeds {MAX_HEAD_DIM} "
                             "(use --kernel arb)")


def _outcome(attempt: Callable[[int], Attempt], prec: int) -> Attempt:
    decision, margin, value, reason = attempt(prec)
    return decision, margin, value, "exact kernel: " + reason


def _decide(side: str, rank: int, eps: str, method: str, max_prec: int, attempt: Callable[[int], Attempt]) -> Verdict:
    """``attempt`` at f = 64, 128, ..., max_prec bits, handed to :func:`decide` (K8)."""
    return decide(side, rank, eps, method, (("rational", prec, functools.partial(_outcome, attempt, prec))
                                            for prec in precision_schedule(max_prec)))


def _exact(side: str, rank: int, eps: str, method: str, decision: bool, margin: tuple[Fraction, Fraction] | None,
           value: tuple[Fraction, Fraction] | None, reason: str) -> Verdict:
    """A verdict of an exact comparison (K7; precision 0)."""
    return decide(side, rank, eps, method,
                  [("rational", 0, lambda: (decision, margin, value, "exact kernel: " + reason))])


def _check_rank(name: str, value: object, top: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        raise InvalidInputError(f"{name} must be an integer in [0, {top}], got {value!r}")
    return value


def _max_row_abs_sum(rows: list[list[int]]) -> int:
    return max(sum(abs(v) for v in row) for row in rows)


def _matmul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    """Exact integer matrix product (plain Python integers)."""
    cols = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def _abs(a: list[list[int]]) -> list[list[int]]:
    return [[abs(v) for v in row] for row in a]


# ----------------------------------------------------------------------------------------
# upper witness
# ----------------------------------------------------------------------------------------

def verify_upper(op: Operator, eps: str, r: int, U: np.ndarray, W: np.ndarray, *,
                 method: str = "witness", max_prec: int = DEFAULT_MAX_PREC) -> Verdict:
    """Decide ``r_eps(A) <= r`` witnessed by ``B = U W^T``: VERIFIED iff ``||A - B|| <= eps`` proved."""
    eps_q = parse_tolerance(eps)
    check_limits(op)
    m, n = op.shape
    r = _check_rank("r", r, max(m, n))
    if r == 0:
        raise InvalidInputError("a rank-0 upper end is the trivial 'zero' witness, not a factorisation")
    if r > MAX_R:
        raise SizeLimitError(f"exact kernel limit: witness rank {r} exceeds {MAX_R} (use --kernel arb)")
    U, W = checked_float64("U", U, (m, r), InvalidInputError), checked_float64("W", W, (n, r), InvalidInputError)
    u, su = int_matrix(U)
    w, sw = int_matrix(W)
    b = _matmul(u, [list(col) for col in zip(*w)])  # B = U W^T exactly, scale 2**-(su + sw)
    sb = su + sw
    en, ed = eps_q.numerator, eps_q.denominator

    def attempt(prec: int) -> Attempt:
        enc = enclose(op, prec)
        s = max(enc.scale, sb)
        sh_a, sh_b = s - enc.scale, s - sb
        err_lo = err_hi = 0
        for i in range(m):
            row_lo = row_hi = 0
            for lo, hi, bv in zip(enc.lo[i], enc.hi[i], b[i]):
                lo, hi, bv = lo << sh_a, hi << sh_a, bv << sh_b
                row_hi += max(hi - bv, bv - lo)       # >= |A_ij - B_ij|
                row_lo += max(0, lo - bv, bv - hi)    # <= |A_ij - B_ij|
            err_lo, err_hi = max(err_lo, row_lo), max(err_hi, row_hi)
        scaled_eps = en << s  # compare err / 2**s with en / ed exactly
        decision = True if err_hi * ed <= scaled_eps else False if err_lo * ed > scaled_eps else None
        value = (dyadic(err_lo, s), dyadic(err_hi, s))
        margin = round_interval(eps_q - value[1], eps_q - value[0], prec + 16)
        return decision, margin, round_interval(*value, prec + 16), "max-row-l1 error of U W^T against A"

    return _decide("upper", r, eps, method, max_prec, attempt)


# ----------------------------------------------------------------------------------------
# lower certificate
# ----------------------------------------------------------------------------------------

def _core(enc: IntervalMatrix, x: list[list[int]], sx: int, y: list[list[int]], sy: int
          ) -> tuple[list[list[int]], list[list[int]] | None, int]:
    """``X A Y`` as midpoint and radius integer matrices at a common scale (K5)."""
    if enc.exact:
        mid_a, rad_a, sa = enc.lo, None, enc.scale
    else:  # [lo, hi] = (lo + hi)/2 +- (hi - lo)/2, exactly, at scale + 1
        mid_a = [[lo + hi for lo, hi in zip(rl, rh)] for rl, rh in zip(enc.lo, enc.hi)]
        rad_a = [[hi - lo for lo, hi in zip(rl, rh)] for rl, rh in zip(enc.lo, enc.hi)]
        sa = enc.scale + 1
    mid = _matmul(_matmul(x, mid_a), y)
    rad = None if rad_a is None else _matmul(_matmul(_abs(x), rad_a), _abs(y))
    return mid, rad, sx + sa + sy


def _approx_inverse(mid: list[list[int]], s_m: int) -> tuple[list[list[int]], int] | None:
    """An untrusted approximation R of the inverse of ``mid / 2**s_m`` (any R is sound, K6).

    Columns and rows are scaled by powers of two before the float inverse (F = D mid G, so
    mid^-1 = G F^-1 D): badly scaled certificates (an X row of 1e300, a Y column of 1e-155 next
    to entries of 1) keep their relative accuracy.
    """
    col_tops = [max(abs(v) for v in col).bit_length() for col in zip(*mid)]
    if min(col_tops) == 0:
        return None  # a zero column: M is singular
    gains = [max(col_tops) - t for t in col_tops]  # N = mid G, G = diag(2**gain): columns balanced
    scaled = [[v << g for v, g in zip(row, gains)] for row in mid]
    shifts = []
    for row in scaled:
        top = max(abs(v).bit_length() for v in row)
        if top == 0:
            return None  # a zero row: M is singular
        shifts.append(top - 60)
    approx = np.array([[float(shift_floor(v, sh)) for v in row] for row, sh in zip(scaled, shifts)])  # ~ D mid G
    try:
        with np.errstate(all="ignore"):
            inv = np.linalg.inv(approx)
    except np.linalg.LinAlgError:
        return None
    if not np.isfinite(inv).all() or not inv.any():
        return None
    # mid^-1 = G F^-1 D, so R_ab = 2**gain_a inv_ab 2**(s_m - sh_b), exactly, at one common scale
    entries = [[Fraction(v) * dyadic(1, sh - s_m - g) for v, sh in zip(row, shifts)]
               for row, g in zip(inv.tolist(), gains)]
    s_r = max(0, max(e.denominator.bit_length() - 1 for row in entries for e in row))
    return [[int(e * (1 << s_r)) for e in row] for row in entries], s_r


def _column_floor_bits(values: list[list[int]]) -> int:
    """Smallest over columns of the bit length of the column's largest entry (nonzero columns)."""
    tops = [max(abs(v) for v in col).bit_length() for col in zip(*values)]
    tops = [t for t in tops if t > 0]
    return min(tops) if tops else 0


def _residual(r: list[list[int]], mid: list[list[int]], rad: list[list[int]] | None, s: int) -> int:
    """``q * 2**s`` with ``q = max_i sum_j (|I - R M_mid|_ij + (|R| M_rad)_ij)`` (scale s = s_r + s_m)."""
    one = 1 << s
    rm = _matmul(r, mid)
    rr = _matmul(_abs(r), rad) if rad is not None else None
    best = 0
    for a, row in enumerate(rm):
        total = sum(abs((one if a == b else 0) - v) for b, v in enumerate(row))
        if rr is not None:
            total += sum(rr[a])
        best = max(best, total)
    return best


def _newton(r: list[list[int]], s_r: int, mid: list[list[int]], s_m: int, bits: int) -> tuple[list[list[int]], int]:
    """One Newton-Schulz step ``R (2I - M R)``, rounded to ~``bits`` bits (any R stays sound)."""
    mr = _matmul(mid, r)  # scale s_m + s_r
    two = 2 << (s_m + s_r)
    t = [[(two if a == b else 0) - v for b, v in enumerate(row)] for a, row in enumerate(mr)]
    rn = _matmul(r, t)  # scale 2 s_r + s_m
    s_n = 2 * s_r + s_m
    sh = _column_floor_bits(rn) - bits  # keep ``bits`` bits in every column (badly scaled M)
    if sh > 0:
        rn, s_n = [[v >> sh for v in row] for row in rn], s_n - sh
    if s_n < 0:
        rn, s_n = [[v << -s_n for v in row] for row in rn], 0
    return rn, s_n


def _exact_inverse(mid: list[list[int]]) -> list[list[Fraction]] | None:
    """The exact inverse of an integer matrix (Gauss-Jordan in Fractions); None if singular."""
    k = len(mid)
    aug = [[Fraction(v) for v in row] + [Fraction(int(a == b)) for b in range(k)] for a, row in enumerate(mid)]
    for col in range(k):
        pivot = next((rr for rr in range(col, k) if aug[rr][col] != 0), None)
        if pivot is None:
            return None
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for rr in range(k):
            if rr != col and aug[rr][col] != 0:
                fct = aug[rr][col]
                aug[rr] = [v - fct * w for v, w in zip(aug[rr], aug[col])]
    return [row[k:] for row in aug]


def _rounded_inverse(inv: list[list[Fraction]], s_m: int, bits: int) -> tuple[list[list[int]], int]:
    """R = (mid / 2**s_m)^{-1} = 2**s_m mid^{-1}, truncated to ~``bits`` bits (any R is sound, K6)."""
    tops = [max(abs(v) for v in col) for col in zip(*inv)]
    top = min(t for t in tops if t != 0)  # keep ``bits`` bits in every column
    e = top.numerator.bit_length() - top.denominator.bit_length() + s_m
    s_r = max(0, bits - e)
    scale = Fraction(1 << (s_r + s_m)) if s_r + s_m >= 0 else Fraction(1, 1 << -(s_r + s_m))
    return [[math.floor(v * scale) for v in row] for row in inv], s_r


def verify_lower(op: Operator, eps: str, k: int, X: np.ndarray, Y: np.ndarray, *,
                 method: str = "certificate", max_prec: int = DEFAULT_MAX_PREC) -> Verdict:
    """Decide ``r_eps(A) >= k``: VERIFIED iff ``eps ||X|| ||Y|| ||(XAY)^{-1}|| < 1`` proved."""
    eps_q = parse_tolerance(eps)
    check_limits(op)
    m, n = op.shape
    k = _check_rank("k", k, op.p)
    if k == 0:
        raise InvalidInputError("a k = 0 lower end is the trivial one, not a certificate")
    if k > MAX_K:
        raise SizeLimitError(f"exact kernel limit: certificate rank k = {k} exceeds {MAX_K} (use --kernel arb)")
    X, Y = checked_float64("X", X, (k, m), InvalidInputError), checked_float64("Y", Y, (n, k), InvalidInputError)
    x, sx = int_matrix(X)
    y, sy = int_matrix(Y)
    nx, ny = dyadic(_max_row_abs_sum(x), sx), dyadic(_max_row_abs_sum(y), sy)
    c = eps_q * nx * ny  # the product is c * ||M^{-1}||

    def report(inv_lo: Fraction, inv_hi: Fraction,
               prec: int) -> tuple[tuple[Fraction, Fraction], tuple[Fraction, Fraction]]:
        margin = round_interval(1 - c * inv_hi, 1 - c * inv_lo, prec + 16)
        value = round_interval(1 / (nx * ny * inv_hi), 1 / (nx * ny * inv_lo), prec + 16)
        return margin, value

    def attempt(prec: int) -> Attempt:
        enc = enclose(op, prec)
        mid, rad, s_m = _core(enc, x, sx, y, sy)
        q, r, s_r = None, None, 0
        approx = _approx_inverse(mid, s_m)
        if approx is not None:
            r, s_r = approx
            q_num = _residual(r, mid, rad, s_r + s_m)
            for _ in range(MAX_NEWTON):  # refine R (untrusted) while the residual halves
                q_old = dyadic(q_num, s_r + s_m)
                if q_old <= dyadic(1, prec + 8):
                    break
                r2, s_r2 = _newton(r, s_r, mid, s_m, prec + 64)
                q2 = _residual(r2, mid, rad, s_r2 + s_m)
                q_new = dyadic(q2, s_r2 + s_m)
                if q_new < q_old:
                    r, s_r, q_num = r2, s_r2, q2
                if not 2 * q_new <= q_old:
                    break
            q = dyadic(q_num, s_r + s_m)
        if (q is None or q >= 1) and prec > START_PREC:  # float inverse too poor: exact midpoint inverse
            inv = _exact_inverse(mid)
            if inv is not None:
                r, s_r = _rounded_inverse(inv, s_m, prec + 64)
                q = dyadic(_residual(r, mid, rad, s_r + s_m), s_r + s_m)
        if q is not None and r is not None and q < 1:
            # K6: M invertible, ||R||/(1+q) <= ||M^{-1}|| <= ||R||/(1-q)
            norm_r = dyadic(_max_row_abs_sum(r), s_r)
            inv_lo, inv_hi = norm_r / (1 + q), norm_r / (1 - q)
            decision = True if c * inv_hi < 1 else False if c * inv_lo >= 1 else None
            if decision is not None or not enc.exact:
                return (decision, *report(inv_lo, inv_hi, prec), "eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1")
        if enc.exact:  # exact M (probabilities kind): decide with the exact inverse
            exact_inv = _exact_inverse(mid)
            if exact_inv is None:
                return None, None, None, "X A Y is exactly singular: the certificate proves nothing"
            inv_norm = max(sum(abs(v) for v in row) for row in exact_inv) * dyadic(1, -s_m)  # ||2**s_m mid^-1||
            decision = c * inv_norm < 1
            return (decision, *report(inv_norm, inv_norm, prec),
                    "eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1 (exact inverse)")
        return None, None, None, "X A Y not proved invertible at this precision"

    return _decide("lower", k, eps, method, max_prec, attempt)


# ----------------------------------------------------------------------------------------
# trivial ends (proofs/trivial-ends.md; exact for every kind here)
# ----------------------------------------------------------------------------------------

def _norm_a(op: Operator, max_prec: int) -> Fraction:
    """``||A||`` exactly: 1 for softmax kinds, the exact max row l1 of the doubles otherwise."""
    if op.row_sums_exactly_one():
        return Fraction(1)
    precision_schedule(max_prec)  # validated where the Arb kernel would run its retry loop
    a, s = int_matrix(np.asarray(op.arrays["A"]))
    return dyadic(_max_row_abs_sum(a), s)


def verify_trivial_upper(op: Operator, eps: str, r: int, *, max_prec: int = DEFAULT_MAX_PREC) -> Verdict:
    """``r = p`` always; ``r = 0`` iff ``||A|| <= eps`` (decided exactly)."""
    eps_q = parse_tolerance(eps)
    check_limits(op)
    r = _check_rank("r", r, op.p)
    if r == op.p:
        return _exact("upper", r, eps, "identity", True, None, None, "B = A has rank <= p = min(m, N)")
    if r != 0:
        raise InvalidInputError(f"a trivial upper end must have r = 0 or r = p = {op.p}, got {r!r}")
    norm = _norm_a(op, max_prec)
    return _exact("upper", 0, eps, "zero", norm <= eps_q, (eps_q - norm, eps_q - norm), (norm, norm),
                  "||A|| against eps (exact)")


def verify_trivial_lower(op: Operator, eps: str, k: int, *, max_prec: int = DEFAULT_MAX_PREC) -> Verdict:
    """``k = 0`` always; ``k = 1`` iff ``||A|| > eps`` (decided exactly)."""
    eps_q = parse_tolerance(eps)
    check_limits(op)
    k = _check_rank("k", k, op.p)
    if k == 0:
        return _exact("lower", 0, eps, "trivial", True, None, None, "every rank is >= 0")
    if k != 1:
        raise InvalidInputError(f"a trivial lower end must have k = 0 or k = 1, got {k!r}")
    norm = _norm_a(op, max_prec)
    return _exact("lower", 1, eps, "trivial", norm > eps_q, (norm - eps_q, norm - eps_q), (norm, norm),
                  "||A|| against eps (exact)")
