"""Certified bounds on the theorem's geometric quantities (``proofs/geometry-bounds.md``).

docs/design.md section 1, "Interaction geometry".  For an unmasked ``qk``/``scores`` operator with
exact scores ``S`` (m x N):

* ``C = P_m S P_N`` (double centring; equals ``P_m (log A) P_N``), ``b`` = column means of
  ``S P_N``, so that ``S = C + 1 b^T + a 1^T`` and ``A = softmax_rows(C + 1 b^T)`` (Lemma G1);
* a retained part ``T := X Y^T`` given by float64 factors X (m x r), Y (N x r) -- the exact
  real product of the doubles, whatever they are;
* ``A_T = softmax_rows(T + 1 b^T)``, ``tau(T) = ||A - A_T||`` (max row l1), and the Hilbert
  projective bound ``||a_i - (A_T)_i||_1 <= 2 tanh(delta_i / 4)``, ``delta_i = osc_j (C - T)_ij``
  (Lemma G2);
* ``kappa(T) = min over T = X' Y'^T of max_i ||x'_i||_2 max_j ||y'_j||_2``: the given factors
  bound it from above; ``<T, D_u W D_v> / (||u||_2 ||v||_2 ||W||_op)`` bounds it from below for
  any float64 u, v, W (Lemma G3); so does ``max_ij |T_ij|``;
* ``Phi = (1 + kappa/(eps - tau)^2)^(r/2)`` enclosed from the bounds above (Lemma G4);
* native ``Gamma = beta * max_i ||q_i||_2 * max_j ||k_j||_2`` (``qk`` only).

Every function returns a :class:`Bound`: exact rationals ``lo <= value <= hi`` (``None`` = no
bound on that side).  Everything is computed with Arb balls from exact float64 inputs; floats
computed here by numpy are only row shifts (any finite shift is sound, softmax-enclosure.md
Lemma 1).  These are certified numbers but not verdicts: no verdict depends on them, so they
live outside the trusted kernel, built on its public enclosure API (``score_balls``,
``probability_balls``, the exact conversions, ``require_ieee_environment`` at every entry that
converts doubles).  Imports: python-flint, numpy (plumbing), the standard library and the
kernel's public interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable

import numpy as np
from flint import arb, arb_mat

from ..errors import InvalidInputError, InvalidOperatorError
from ..kernel import (Operator, arb_lower_fraction, arb_upper_fraction, check_shape, float64_matrix_to_arb,
                      fraction_to_arb, parse_tolerance, probability_balls, require_ieee_environment, score_balls,
                      working_precision)

#: Precisions tried in turn until every returned ball is finite.
GEOMETRY_PRECISIONS = (128, 256, 512)
COMMON_SUPPORT = ("the theorem assumes one common positive support: a causal mask gives every query its own "
                  "support, so the interaction geometry is not defined for causal operators")


@dataclass(frozen=True)
class Bound:
    """Exact rational enclosure ``lo <= value <= hi`` of a real number (None: unbounded side)."""

    lo: Fraction | None
    hi: Fraction | None

    @staticmethod
    def of(ball: arb) -> Bound:
        return Bound(arb_lower_fraction(ball), arb_upper_fraction(ball))


def require_common_support(op: Operator) -> None:
    """Refuse operators the theorem does not cover (causal masks, bare probabilities)."""
    if op.mask != "none":
        raise InvalidOperatorError(f"geometry of a causal operator: {COMMON_SUPPORT}")
    if op.kind not in ("qk", "scores"):
        raise InvalidOperatorError("geometry needs scores: use a 'qk' or 'scores' operator, not 'probabilities'")


def _factor(name: str, array: object, rows: int | None = None, cols: int | None = None) -> np.ndarray:
    a = np.asarray(array)
    if a.dtype != np.float64 or a.ndim != 2:
        raise InvalidInputError(f"{name} must be a 2-D float64 array")
    check_shape(name, tuple(int(n) for n in a.shape))
    if (rows is not None and a.shape[0] != rows) or (cols is not None and a.shape[1] != cols):
        raise InvalidInputError(f"{name} has shape {list(a.shape)}, expected {[rows, cols]}")
    if not np.isfinite(a).all():
        raise InvalidInputError(f"{name} contains NaN or Inf")
    return np.ascontiguousarray(a)


def _retry(compute: Callable[[int], tuple[arb, ...]]) -> tuple[arb, ...]:
    """Run ``compute`` at 128, 256, 512 bits until all balls are finite (precision only narrows balls)."""
    result: tuple[arb, ...] = ()
    for prec in GEOMETRY_PRECISIONS:
        with working_precision(prec):
            result = compute(prec)
        if all(ball.is_finite() for ball in result):
            break
    return result


def _ball_max(balls: list[arb]) -> arb:
    result = balls[0]
    for x in balls[1:]:
        result = result.max(x)
    return result


def _ball_min(balls: list[arb]) -> arb:
    return -_ball_max([-x for x in balls])


def _interaction(op: Operator, prec: int) -> tuple[list[list[arb]], list[arb]]:
    """Rows of balls containing ``C = P_m S P_N`` and balls containing ``b`` (Lemma G1)."""
    m, n = op.shape
    s = score_balls(op, prec)
    rows = [s[i * n:(i + 1) * n] for i in range(m)]
    zero = arb(0)
    row_mean = [sum(row, zero) / n for row in rows]
    col_mean = [sum((rows[i][j] for i in range(m)), zero) / m for j in range(n)]
    grand = sum(row_mean, zero) / m
    b = [c - grand for c in col_mean]
    C = [[rows[i][j] - row_mean[i] - col_mean[j] + grand for j in range(n)] for i in range(m)]
    return C, b


def _product_rows(X: np.ndarray, Y: np.ndarray) -> list[list[arb]]:
    """Rows of balls containing the exact ``T = X Y^T``."""
    m, n = X.shape[0], Y.shape[0]
    t = (float64_matrix_to_arb(X) * float64_matrix_to_arb(np.ascontiguousarray(Y.T))).entries()
    return [t[i * n:(i + 1) * n] for i in range(m)]


def interaction_bounds(op: Operator, C_estimate: np.ndarray) -> tuple[Bound, Bound]:
    """``(max_ij |C_ij|, max_ij |C_ij - C_estimate_ij|)``: size of C and the error of a float64 C."""
    require_ieee_environment()  # arb(float) reads subnormals wrongly under denormals-are-zero
    require_common_support(op)
    m, n = op.shape
    C_estimate = _factor("C estimate", C_estimate, m, n)

    def compute(prec: int) -> tuple[arb, ...]:
        C, _ = _interaction(op, prec)
        est = C_estimate.tolist()
        size = _ball_max([abs(x) for row in C for x in row])
        error = _ball_max([abs(C[i][j] - arb(est[i][j])) for i in range(m) for j in range(n)])
        return size, error

    size, error = _retry(compute)
    return Bound.of(size), Bound.of(error)


def residual_bounds(op: Operator, X: np.ndarray, Y: np.ndarray) -> tuple[Bound, Bound]:
    """``(tau, tau_tanh)`` for ``T = X Y^T``: ``tau = ||A - A_T||`` enclosed, and the enclosure of
    ``max_i 2 tanh(delta_i / 4)``, ``delta_i = max_j R_ij - min_j R_ij``, ``R = C - T`` (Lemma G2)."""
    require_ieee_environment()  # arb(float) reads subnormals wrongly under denormals-are-zero
    require_common_support(op)
    m, n = op.shape
    X = _factor("X", X, m, None)
    Y = _factor("Y", Y, n, X.shape[1])
    # float64 rough row maxima of T + 1 b^T: only shifts (softmax-enclosure.md Lemma 1).
    with np.errstate(all="ignore"):
        rough = X @ Y.T
    rough = np.where(np.isfinite(rough), rough, 0.0)

    def compute(prec: int) -> tuple[arb, ...]:
        A = probability_balls(op, prec)
        C, b = _interaction(op, prec)
        T = _product_rows(X, Y)
        zero, quarter, two = arb(0), arb(1) / 4, arb(2)
        row_l1: list[arb] = []
        row_tanh: list[arb] = []
        for i in range(m):
            z = [T[i][j] + b[j] for j in range(n)]
            shift = arb(float(np.max(rough[i])))  # exact double
            e = [(x - shift).exp() for x in z]
            total = sum(e, zero)
            row_l1.append(sum((abs(A[i * n + j] - e[j] / total) for j in range(n)), zero))
            R = [C[i][j] - T[i][j] for j in range(n)]
            delta = _ball_max(R) - _ball_min(R)
            row_tanh.append(two * (delta * quarter).tanh())
        return _ball_max(row_l1), _ball_max(row_tanh)

    tau, tanh_bound = _retry(compute)
    return Bound.of(tau), Bound.of(tanh_bound)


def _max_row_norm(M: np.ndarray) -> arb:
    """Ball containing ``max_i ||M_i||_2``."""
    rows = M.tolist()
    zero = arb(0)
    return _ball_max([sum((arb(v) * arb(v) for v in row), zero).sqrt() for row in rows])


def factorization_radius(X: np.ndarray, Y: np.ndarray) -> Bound:
    """Enclosure of ``max_i ||x_i||_2 * max_j ||y_j||_2``; its ``hi`` is an upper bound of
    ``kappa(X Y^T)`` (the factorization is one of those the minimum runs over)."""
    require_ieee_environment()  # arb(float) reads subnormals wrongly under denormals-are-zero
    X = _factor("X", X)
    Y = _factor("Y", Y, None, X.shape[1])
    (ball,) = _retry(lambda prec: (_max_row_norm(X) * _max_row_norm(Y),))
    return Bound.of(ball)


def kappa_lower_bound(X: np.ndarray, Y: np.ndarray, u: np.ndarray, v: np.ndarray,
                      WL: np.ndarray, WR: np.ndarray) -> Bound:
    """Enclosure of ``max( <T, D_u W D_v> / (||u|| ||v|| w), max_ij |T_ij| )`` with ``T = X Y^T``,
    ``W = WL WR^T`` and ``w = sqrt(||WL^T WL||_inf ||WR^T WR||_inf) >= ||W||_op``.  Its ``lo`` is a
    lower bound of ``kappa(T)`` (Lemma G3).  u (m), v (N) are float64 weights (not all zero)."""
    require_ieee_environment()  # arb(float) reads subnormals wrongly under denormals-are-zero
    X = _factor("X", X)
    m, r = X.shape
    Y = _factor("Y", Y, None, r)
    n = Y.shape[0]
    u = _factor("u", np.asarray(u, dtype=np.float64).reshape(m, 1), m, 1)
    v = _factor("v", np.asarray(v, dtype=np.float64).reshape(n, 1), n, 1)
    WL = _factor("WL", WL, m, None)
    WR = _factor("WR", WR, n, WL.shape[1])

    def compute(prec: int) -> tuple[arb, ...]:
        T = _product_rows(X, Y)
        entry_max = _ball_max([abs(x) for row in T for x in row])
        wl, wr = float64_matrix_to_arb(WL), float64_matrix_to_arb(WR)
        us, vs = [arb(x) for x in u.ravel().tolist()], [arb(x) for x in v.ravel().tolist()]
        zero = arb(0)
        k = WL.shape[1]
        # <X Y^T, D_u WL WR^T D_v> = sum_ac (X^T D_u WL)_ac (Y^T D_v WR)_ac   (trace identity)
        lw, rw = wl.entries(), wr.entries()
        dl = arb_mat(m, k, [us[i] * lw[i * k + c] for i in range(m) for c in range(k)])
        dr = arb_mat(n, k, [vs[j] * rw[j * k + c] for j in range(n) for c in range(k)])
        left = (float64_matrix_to_arb(np.ascontiguousarray(X.T)) * dl).entries()
        right = (float64_matrix_to_arb(np.ascontiguousarray(Y.T)) * dr).entries()
        inner = sum((x * y for x, y in zip(left, right)), zero)
        u_norm = sum((x * x for x in us), zero).sqrt()
        v_norm = sum((x * x for x in vs), zero).sqrt()
        gl, gr = (wl.transpose() * wl).entries(), (wr.transpose() * wr).entries()
        inf_norm = lambda g: _ball_max([sum((abs(g[a * k + c]) for c in range(k)), zero) for a in range(k)])  # noqa: E731
        w_op = (inf_norm(gl) * inf_norm(gr)).sqrt()
        dual = inner / (u_norm * v_norm * w_op)
        return entry_max, dual

    entry_max, dual = _retry(compute)
    candidates = [x for x in (Bound.of(entry_max).lo, Bound.of(dual).lo) if x is not None]
    lo = max(candidates) if candidates else None
    return Bound(lo, None)


def phi_bound(kappa: Bound, tau: Bound, eps: str, r: int) -> Bound:
    """Enclosure of ``Phi = (1 + kappa/(eps - tau)^2)^(r/2)`` given enclosures of kappa and tau.

    ``hi`` is None unless ``tau.hi < eps`` (the theorem needs ``tau < eps``); ``lo`` is None when
    ``tau.lo >= eps`` (the theorem does not apply at all).  Lemma G4: Phi is increasing in kappa
    and in tau on ``0 <= tau < eps``.
    """
    if not isinstance(r, int) or isinstance(r, bool) or r < 0:
        raise InvalidInputError(f"rank r must be a nonnegative integer, got {r!r}")
    eps_q = parse_tolerance(eps)

    def phi(k: Fraction, t: Fraction) -> arb:
        gap = fraction_to_arb(eps_q) - fraction_to_arb(t)
        base = 1 + fraction_to_arb(k) / (gap * gap)
        return base.sqrt() ** r

    lo = hi = None
    k_lo = max(kappa.lo, Fraction(0)) if kappa.lo is not None else Fraction(0)
    t_lo = max(tau.lo, Fraction(0)) if tau.lo is not None else Fraction(0)
    if t_lo < eps_q:  # exact rational comparison
        (ball,) = _retry(lambda prec: (phi(k_lo, t_lo),))
        lo = Bound.of(ball).lo
    if (k_hi := kappa.hi) is not None and (t_hi := tau.hi) is not None and t_hi < eps_q:
        (ball,) = _retry(lambda prec: (phi(max(k_hi, Fraction(0)), max(t_hi, Fraction(0))),))
        hi = Bound.of(ball).hi
    return Bound(lo, hi)


def native_gamma(op: Operator) -> Bound:
    """Enclosure of ``Gamma = beta * max_i ||q_i||_2 * max_j ||k_j||_2`` (``qk`` operators only)."""
    require_ieee_environment()  # arb(float) reads subnormals wrongly under denormals-are-zero
    if op.kind != "qk":
        raise InvalidOperatorError("native Gamma needs Q and K (a 'qk' operator)")

    def compute(prec: int) -> tuple[arb, ...]:
        beta = arb(op.head_dim).rsqrt() if op.beta_exact is None else fraction_to_arb(op.beta_exact)
        return (beta * _max_row_norm(op.arrays["Q"]) * _max_row_norm(op.arrays["K"]),)

    (ball,) = _retry(compute)
    return Bound.of(ball)
