"""The row-block float64 path (TRUSTED): norm-level a-priori bounds, ``proofs/rowblock-bounds.md``.

``A`` is held as one double matrix ``a`` (the midpoint, computed row block by row block with
the proved ``exp``) and one bound ``||A - a|| <= Delta`` (Lemmas R1-R3); every product is plain
BLAS, its rounding bounded a priori by Higham's ``gamma_n`` at the level of row sums, in any
summation order and thread count.  :func:`rowblock_upper` and :func:`rowblock_lower` return
True (proved, Theorems R4, R7) or None (undecided: the next stage decides) -- never False.
Temporaries are ``block x N``; the midpoint is cached once per operator (kernel-private).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..operator import Operator
from .attempts import FastAttempt, _beta_bounds
from .bounds import (ETA, UNIT, _normal_upper, _sum_constants, down, down_nonneg, exp_mid, fraction_down, fraction_up,
                     gamma, row_sums_lower, row_sums_upper, sum_lower, sum_upper, up_nonneg)
from .fpenv import SMALLEST_NORMAL, has_subnormals, subnormal_mask

#: Entries of one row block (``block x N``): the size of every temporary of this path.
ROWBLOCK_ENTRIES = 1 << 19
#: Entries of one exp_mid call (its ~25 passes stay in cache).
_EXP_CHUNK = 1 << 16
#: Shifted scores below CUT are not exponentiated: exp <= SMALL there (Lemma R1, R2).
CUT = -600.0
SMALL = Fraction(1, 2**860)
#: The absolute radius of every midpoint entry (Lemma R3).
ALPHA = Fraction(1, 2**855)
_EXP_REL = Fraction(1, 2**47)  # Lemma F3: exp_mid's relative error is below this
_U_PRIME = UNIT / (1 - UNIT)
_INV_ONE_MINUS_U = fraction_up(1 / (1 - UNIT))
_INV_ONE_PLUS_U = fraction_down(1 / (1 + UNIT))
_UNDECIDED_ROWS = "row-block float64 path"


@dataclass(frozen=True)
class RowBlockEnclosure:
    """``|A_ij - a_ij| <= rho a_ij + ALPHA`` entrywise, hence ``||A - a|| <= delta_norm``
    (Lemma R3); ``a_norm_up`` bounds ``||a||`` above.  ``a`` is read-only."""

    a: np.ndarray
    delta_norm: Fraction
    a_norm_up: float


#: operator -> its row-block enclosure (or None: declined); kernel-private, dropped with the operator.
_ENCLOSURES: weakref.WeakKeyDictionary[Operator, RowBlockEnclosure | None] = weakref.WeakKeyDictionary()


def _rows_per_block(n: int) -> int:
    return max(1, ROWBLOCK_ENTRIES // n)


def rowblock_enclosure(op: Operator) -> RowBlockEnclosure | None:
    """The cached midpoint enclosure of ``A`` (Lemma R3), or None when the path declines.
    Computed only behind a check's entry gate (A1 probed)."""
    if op not in _ENCLOSURES:
        with np.errstate(all="ignore"):
            _ENCLOSURES[op] = _build(op)
    return _ENCLOSURES[op]


def _score_radius(op: Operator) -> tuple[Fraction, Fraction, float] | None:
    """``(kappa, B r_max, bm)`` of Lemma R1, or None when they are too wide (or beta's interval holds 0)."""
    if op.kind == "scores":
        return _U_PRIME, Fraction(0), 1.0
    q, k = op.arrays["Q"], op.arrays["K"]
    if has_subnormals(q) or has_subnormals(k):
        return None
    b_lo, b_hi = _beta_bounds(op)
    if not (np.isfinite(b_lo) and np.isfinite(b_hi) and (b_lo > 0 or b_hi < 0)):
        return None
    bm = b_lo if b_lo > 0 else b_hi
    big, width = max(abs(Fraction(b_lo)), abs(Fraction(b_hi))), Fraction(b_hi) - Fraction(b_lo)
    q_norm, k_max = float(row_sums_upper(np.abs(q)).max()), float(np.abs(k).max())
    if not (np.isfinite(q_norm) and np.isfinite(k_max)):
        return None
    d = q.shape[1]
    r_max = gamma(d) * Fraction(q_norm) * Fraction(k_max) + d * ETA  # F4', all rows and keys
    kappa = (width + big * _U_PRIME) * (1 + _U_PRIME) / abs(Fraction(bm)) + _U_PRIME
    if kappa > Fraction(1, 2**20) or big * r_max > Fraction(1, 2**10):
        return None
    return kappa, big * r_max, bm


def _shifted_block(op: Operator, i0: int, i1: int, bm: float) -> np.ndarray:
    """Doubles ``xm`` (rows i0..i1-1) of Lemma R1: shifted scores, masked entries set to CUT - 1."""
    m, n = op.shape
    allowed = None if op.mask == "none" else np.arange(n)[None, :] <= np.arange(i0, i1)[:, None] + (n - m)
    rows = np.arange(i1 - i0)
    if op.kind == "scores":
        xm = np.array(op.arrays["S"][i0:i1])
        shift = (xm if allowed is None else np.where(allowed, xm, -np.inf)).max(axis=1)  # exact g_i
    else:
        xm = op.arrays["Q"][i0:i1] @ op.arrays["K"].T  # gram
        oriented = xm if bm > 0 else -xm
        best = (oriented if allowed is None else np.where(allowed, oriented, -np.inf)).argmax(axis=1)
        shift = xm[rows, best]  # s_i, an exact double
    xm -= shift[:, None]  # scores: fl(S - g); qk: diff = fl(gram - s)
    if op.kind == "qk":
        xm *= bm  # fl(bm diff)
    if allowed is not None:
        xm[~allowed] = CUT - 1.0
    return xm


def _midpoint_radius(delta: Fraction, n: int) -> Fraction:
    """``rho`` of Lemma R3 from the score radius ``delta`` (Lemma R1) and the row length ``n``."""
    tau = (1 + delta + delta * delta) / (1 - _EXP_REL) - 1  # e**delta <= 1 + delta + delta**2 (Lemma R2)
    g = gamma(n)
    lam_hi = (1 + g) / ((1 - 4 * n * ETA) * (1 - tau))
    lam_lo = 1 / ((1 + 4 * n * ETA) * (1 + tau) / (1 - g) + 2 * n * SMALL)
    rho_prime = max((1 + tau) * lam_hi - (1 - UNIT) ** 2, (1 + UNIT) ** 2 - (1 - tau) * lam_lo)
    return rho_prime / (1 - UNIT) ** 2


def _build(op: Operator) -> RowBlockEnclosure | None:
    if op.kind == "probabilities":
        a = op.arrays["A"]  # exact: rho = 0, Delta = 0; a BLAS operand of Lemma R5, so no subnormals
        norm = float(row_sums_upper(a).max())
        return RowBlockEnclosure(a, Fraction(0), norm) if np.isfinite(norm) and not has_subnormals(a) else None
    radius = _score_radius(op)
    if radius is None:
        return None
    kappa, b_rmax, bm = radius
    delta = 600 * kappa + b_rmax + Fraction(1, 2**1073)
    if delta > Fraction(1, 2**10):
        return None
    m, n = op.shape
    a = np.empty((m, n))
    norm, step = np.float64(0.0), _rows_per_block(n)
    for i0 in range(0, m, step):
        i1 = min(m, i0 + step)
        xm = _shifted_block(op, i0, i1, bm)
        if not (xm.max() <= 1.0 and xm.min() > -np.inf):  # NaN fails both tests
            return None
        below = xm < CUT
        np.copyto(xm, 0.0, where=below)  # exp_mid's range; these entries become 0 below
        v = np.empty_like(xm)
        flat_x, flat_v = xm.reshape(-1), v.reshape(-1)
        for start in range(0, flat_x.size, _EXP_CHUNK):  # cache-sized pieces: the same values, 3x faster
            flat_v[start:start + _EXP_CHUNK] = exp_mid(flat_x[start:start + _EXP_CHUNK])
        np.copyto(v, 0.0, where=below)  # Lemma R2: exp(x) <= SMALL there
        s_hat = v.sum(axis=1)
        c = 1.0 / s_hat
        if not (s_hat.min() >= 0.5 and c.min() >= 2.0 ** -20):
            return None
        block = a[i0:i1]
        np.multiply(v, c[:, None], out=block)
        norm = np.maximum(norm, row_sums_upper(block).max())  # NaN propagates (Python's max would drop it)
    if not np.isfinite(norm):
        return None
    a.setflags(write=False)
    rho = _midpoint_radius(delta, n)
    return RowBlockEnclosure(a, rho * Fraction(float(norm)) + n * ALPHA, float(norm))


def _undecided(reason: str) -> FastAttempt:
    return None, None, None, reason


def _witness_row_radius(U: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Upper bounds ``sr_i >= sum_j |(U W^T)_ij - fl(U @ W^T)_ij|`` (Theorem R4, step 2)."""
    n, r = W.shape
    g, inv_one_minus_g, _, r_eta = _sum_constants(r)
    col = _normal_upper(row_sums_upper(np.abs(W).T))  # >= c_t = sum_j |W_jt|, no subnormals
    weighted = up_nonneg(up_nonneg(np.abs(U) @ col + r_eta) * inv_one_minus_g)  # >= (|U| c)_i
    return up_nonneg(up_nonneg(weighted * g) + fraction_up(n * r * ETA))


def _enclosure_for(op: Operator, *factors: np.ndarray) -> RowBlockEnclosure | None:
    """``op``'s enclosure for a claim with these float64 factors, or None (undecided) when one
    has a subnormal entry (a BLAS operand: Lemmas R4, R5) or the enclosure declines."""
    if any(has_subnormals(factor) for factor in factors):
        return None
    return rowblock_enclosure(op)


def rowblock_upper(op: Operator, eps: Fraction, U: np.ndarray, W: np.ndarray) -> FastAttempt:
    """Prove ``||A - U W^T|| <= eps`` (Theorem R4), or leave it undecided (never False)."""
    reason = f"max-row-l1 error of U W^T against A ({_UNDECIDED_ROWS})"
    enc = _enclosure_for(op, U, W)
    if enc is None:
        return _undecided(reason)
    m, n = op.shape
    with np.errstate(all="ignore"):
        radius = _witness_row_radius(U, W)
        hi_max, lo_max, step = np.float64(0.0), np.float64(0.0), _rows_per_block(n)
        for i0 in range(0, m, step):
            i1 = min(m, i0 + step)
            d = U[i0:i1] @ W.T  # b
            np.subtract(enc.a[i0:i1], d, out=d)
            np.abs(d, out=d)  # |fl(a - b)|
            sums = d.sum(axis=1)  # non-finite b shows here
            hi = up_nonneg(up_nonneg(sum_upper(sums, n) * _INV_ONE_MINUS_U) + radius[i0:i1])
            lo = down(down_nonneg(sum_lower(sums, n) * _INV_ONE_PLUS_U) - radius[i0:i1])
            hi_max, lo_max = np.maximum(hi_max, hi.max()), np.maximum(lo_max, lo.max())  # NaN propagates
    if not (np.isfinite(hi_max) and np.isfinite(lo_max)):
        return _undecided(reason)
    err_hi = Fraction(float(hi_max)) + enc.delta_norm
    err_lo = max(Fraction(0), Fraction(float(lo_max)) - enc.delta_norm)
    decision = True if err_hi <= eps else None
    return decision, (eps - err_hi, eps - err_lo), (err_lo, err_hi), reason


def _flush(x: np.ndarray) -> np.ndarray:
    """``x`` with subnormal entries replaced by 0 (each moves by less than ``2**-1022``)."""
    return np.where(subnormal_mask(x), 0.0, x)


class _Declined(Exception):
    """A bound is not finite: the path leaves the claim undecided."""


def _norm_bounds(x: np.ndarray) -> tuple[Fraction, Fraction]:
    """Exact lower and upper bounds of ``||x||`` (Lemma F2 on ``|x|``); :class:`_Declined` if not finite."""
    magnitude = np.abs(x)
    lo, hi = row_sums_lower(magnitude).max(), row_sums_upper(magnitude).max()
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise _Declined
    return Fraction(float(lo)), Fraction(float(hi))


def _inverse_bound(core: np.ndarray, error: Fraction) -> tuple[Fraction, Fraction, Fraction] | None:
    """``(rn_lo, rn, q)`` of Theorem R6 for ``M`` with ``||M - core|| <= error``, or None unless q < 1."""
    try:
        inverse = _flush(np.linalg.inv(core))  # any R will do: nothing about it is trusted
    except np.linalg.LinAlgError:
        return None
    if not np.isfinite(inverse).all():
        return None
    k = core.shape[0]
    residual = -(inverse @ core)
    residual[np.diag_indices(k)] += 1.0  # D = I - T, the diagonal fl(1 - T_ii)
    if not np.isfinite(residual).all():
        return None
    rn_lo, rn = _norm_bounds(inverse)
    _, mn = _norm_bounds(core)
    _, dn = _norm_bounds(residual)
    q = dn / (1 - UNIT) + gamma(k) * rn * mn + k * k * ETA + rn * error
    return (rn_lo, rn, q) if q < 1 else None


def rowblock_lower(op: Operator, eps: Fraction, X: np.ndarray, Y: np.ndarray) -> FastAttempt:
    """Prove ``eps ||X|| ||Y|| ||(X A Y)^{-1}|| < 1`` with a verified float64 inverse bound
    (Lemma R5, Theorems R6-R7), or leave it undecided (never False)."""
    reason = f"eps * ||X|| * ||Y|| * ||(XAY)^-1|| against 1 ({_UNDECIDED_ROWS}, Neumann inverse bound)"
    enc = _enclosure_for(op, X, Y)
    if enc is None:
        return _undecided(reason)
    m, n = op.shape
    k = X.shape[0]
    with np.errstate(all="ignore"):
        p = _flush(X @ enc.a)
        if not np.isfinite(p).all():
            return _undecided(reason)
        core = _flush(p @ Y)
    if not np.isfinite(core).all():
        return _undecided(reason)
    try:
        with np.errstate(all="ignore"):
            (xl, xn), (yl, yn), (_, pn) = _norm_bounds(X), _norm_bounds(Y), _norm_bounds(p)
            tiny = Fraction(SMALLEST_NORMAL)
            error = (xn * yn * enc.delta_norm + gamma(m) * xn * Fraction(enc.a_norm_up) * yn
                     + n * (m * ETA + tiny) * yn + gamma(n) * pn * yn + k * n * ETA + k * tiny)  # Lemma R5
            bound = _inverse_bound(core, error)
    except _Declined:
        return _undecided(reason)
    if bound is None:
        return _undecided(reason)
    rn_lo, rn, q = bound
    s_hi, s_lo = xn * yn * rn / (1 - q), xl * yl * rn_lo / (1 + q)
    decision = True if eps * s_hi < 1 else None
    value = (1 / s_hi, 1 / s_lo) if s_lo > 0 else None
    return decision, (1 - eps * s_hi, 1 - eps * s_lo), value, reason
