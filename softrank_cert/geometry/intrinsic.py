"""The intrinsic and native scores of an operator (UNTRUSTED study geometry; the bounds are the kernel's).

For ``softrank analyze`` (:mod:`softrank_cert.studies.analyze`, whose docstring states the
definitions): the rank grid of the intrinsic score (:func:`rank_grid`), the certified geometry of
an operator on it -- tau and kappa of the truncated SVDs ``T_r`` of C, certified where they can
matter, the intrinsic ``log Phi*`` as a certified upper bound of the minimum over the grid, the
native score (:func:`operator_geometry`) -- and the exact power-of-two refactorization
``Q -> Q D``, ``K -> K D^-1`` of the invariance check (:func:`refactored_operator`).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any
from collections.abc import Sequence

import numpy as np

from ..errors import InvalidInputError
from ..kernel import Operator, parse_tolerance

#: Rank grid of the intrinsic score (see the module docstring).
GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MAX_GRID_RANK = 64
#: A rank whose float64 tau estimate exceeds max eps * (1 + this) is not certified.
PRESCREEN_SLACK = 1e-6
#: Ranks whose float64 score estimate is within this relative gap of the best qualifying one
#: are certified too (see :func:`operator_geometry`).
TIE = 1e-6
#: Continuation powers of the smoothed-max kappa search (L-BFGS-B).
KAPPA_POWERS = (16.0, 256.0, 1024.0)
#: Exponents of the power-of-two refactorization D = diag(2^e_t), e_t = (t mod 7) - 3.
D_PERIOD = 7

def rank_grid(op: Operator, ranks: Sequence[int] | None = None) -> list[int]:
    """The ranks r of the intrinsic score for ``op`` (module docstring); ``ranks`` overrides."""
    if ranks is not None:
        grid = sorted({int(r) for r in ranks if 1 <= int(r) <= op.p})
        if not grid:
            raise InvalidInputError(f"--ranks: no rank in [1, {op.p}] for a {op.shape[0]} x {op.shape[1]} operator")
        return grid
    top: int = min(op.head_dim, op.p) if op.kind == "qk" else op.p - 1  # type: ignore[type-var, assignment]  # qk
    top = max(1, min(top, MAX_GRID_RANK))
    return sorted({r for r in GRID if r <= top} | {top})


def refactored_operator(op: Operator) -> Operator:
    """``Q -> Q D``, ``K -> K D^{-1}``, ``D = diag(2^e_t)``, ``e_t = (t mod 7) - 3``: exact in
    float64 (barring overflow / underflow, which is checked), same beta, same ``A``."""
    if op.kind != "qk":
        raise InvalidInputError("the refactorization needs Q and K (a 'qk' operator)")
    Q, K = op.arrays["Q"], op.arrays["K"]
    scale = np.ldexp(1.0, (np.arange(Q.shape[1]) % D_PERIOD) - D_PERIOD // 2)
    Q2, K2 = Q * scale, K / scale
    exact = (np.array_equal(Q2 / scale, Q) and np.array_equal(K2 * scale, K) and np.isfinite(Q2).all()
             and np.isfinite(K2).all())
    if not exact:
        raise InvalidInputError("the power-of-two refactorization is not exact for this operator (overflow/underflow)")
    return Operator("qk", {"Q": Q2, "K": K2}, beta=op.beta, mask=op.mask)


def _log_bound(x: Fraction):
    """Bound of ``log x`` for a rational ``x > 0`` (Arb at 128 bits, outward)."""
    from flint import arb, ctx

    from .bounds import Bound

    old = ctx.prec
    ctx.prec = 128
    try:
        ball = (arb(x.numerator) / arb(x.denominator)).log()
    finally:
        ctx.prec = old
    return Bound.of(ball)


def double_above(x: Fraction) -> float:
    """The smallest-but-one double above the nearest double of ``x``: a double >= x."""
    return math.nextafter(float(x), math.inf)


@dataclasses.dataclass
class RankGeometry:
    """One rank of the grid: float64 tau estimate and, if certified, the kernel's bounds."""

    r: int
    tau_float: float
    tau: Any = None  # Bound (certified enclosure of tau(T_r)) or None when not certified
    tau_tanh: Any = None  # Bound of the Hilbert tanh bound
    kappa_upper: Fraction | None = None  # certified upper bound of kappa(T_r)
    kappa_float: float | None = None

    @property
    def certified(self) -> bool:
        return self.tau is not None

    def key(self) -> tuple:
        """Everything certified about this rank (for the bit-identity check)."""
        return (self.r, self.tau_float, self.tau, self.tau_tanh, self.kappa_upper)


@dataclasses.dataclass
class Geometry:
    """An operator's geometry on the grid and its scores at each eps (exact rationals)."""

    C_bytes: bytes
    c_bounds: tuple
    ranks: list[RankGeometry]
    intrinsic: dict[str, tuple[Any, int | None]]  # eps -> (Bound of log Phi* or None = inf, r*)
    gamma: Any  # Bound of native Gamma, or None
    native: dict[str, Any]  # eps -> Bound of the native score


def _phi_estimate(r: int, kappa: float, tau: float, eps: float) -> float:
    """float64 estimate of ``(r/2) log(1 + kappa/(eps - tau)^2)`` (inf unless tau < eps)."""
    return 0.5 * r * math.log1p(kappa / (eps - tau) ** 2) if tau < eps else math.inf


def operator_geometry(op: Operator, grid: list[int], eps_list: list[str]) -> Geometry:
    """Certified geometry of ``op`` on ``grid`` and the intrinsic / native scores at each eps.

    Float64 first, for every rank of the grid: the truncated SVD ``T_r`` of C and its tau
    estimate; ranks whose estimate exceeds the largest eps (relative slack
    :data:`PRESCREEN_SLACK`) stop there.  The others get a kappa-optimised factorization and a
    float64 estimate of the score.  Then, per eps, the kernel certifies tau and kappa of the
    ranks in increasing order of that estimate -- the best one and every rank whose estimate
    is within a relative :data:`TIE` of the best *qualifying* (certified ``tau < eps``) one --
    and the score is the least certified upper bound among them.  A rank left uncertified is
    one whose float64 estimate is clearly worse: certifying it could not lower the minimum
    unless the certified bound and the float64 estimate differed by more than ``TIE``
    relatively (they agree to about 1e-12); and whatever is left out, the score remains a
    certified upper bound of the minimum over the grid.
    """
    from .interaction import interaction_float, retained_softmax
    from .kappa import optimise_factorization
    from .bounds import (Bound, factorization_radius, interaction_bounds, native_gamma, phi_bound,
                                   require_common_support, residual_bounds)
    from ..util.dense import attention_matrix, norm

    require_common_support(op)
    C, b = interaction_float(op)
    c_bounds = interaction_bounds(op, C)
    A = attention_matrix(op)
    U, s, Vt = np.linalg.svd(C, full_matrices=False)
    limit = float(max(parse_tolerance(e) for e in eps_list)) * (1 + PRESCREEN_SLACK)
    ranks: list[RankGeometry] = []
    factors: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for r in grid:
        root = np.sqrt(s[:r])
        X0, Y0 = U[:, :r] * root, Vt[:r].T * root
        tau_f = norm(A - retained_softmax(X0 @ Y0.T, b))
        g = RankGeometry(r, tau_f)
        if tau_f <= limit:
            search = optimise_factorization(np.ascontiguousarray(X0), np.ascontiguousarray(Y0), method="L-BFGS-B",
                                            powers=KAPPA_POWERS)
            factors[r] = (search.X, search.Y)
            g.kappa_float = search.upper_estimate
        ranks.append(g)
    by_r = {g.r: g for g in ranks}

    def certify(g: RankGeometry) -> None:
        if g.certified:
            return
        X, Y = factors[g.r]
        g.tau, g.tau_tanh = residual_bounds(op, X, Y)
        g.kappa_upper = factorization_radius(X, Y).hi

    intrinsic: dict[str, tuple[Any, int | None]] = {}
    for eps in eps_list:
        eps_q, eps_f = parse_tolerance(eps), float(parse_tolerance(eps))
        estimates = sorted((_phi_estimate(r, by_r[r].kappa_float, by_r[r].tau_float, eps_f), r)  # type: ignore[arg-type]
                           for r in factors)  # (a rank has factors once its kappa_float is set)
        best: tuple[Any, int | None] = (None, None)
        threshold = math.inf
        for estimate, r in estimates:
            if not math.isfinite(estimate) or estimate > threshold:
                break
            g = by_r[r]
            certify(g)
            if g.tau.hi is None or g.kappa_upper is None or not g.tau.hi < eps_q:
                continue
            phi = phi_bound(Bound(None, g.kappa_upper), g.tau, eps, g.r)
            if phi.hi is None:
                continue
            log_phi = _log_bound(max(phi.hi, Fraction(1)))
            if best[0] is None:
                threshold = estimate * (1 + TIE) + TIE
            if best[0] is None or log_phi.hi < best[0].hi:
                best = (log_phi, g.r)
        intrinsic[eps] = best
    gamma, native = None, {}
    if op.kind == "qk":
        gamma = native_gamma(op)
        zero = Bound(Fraction(0), Fraction(0))
        for eps in eps_list:
            phi = phi_bound(gamma, zero, eps, op.head_dim)  # type: ignore[arg-type]  # qk: a head_dim
            native[eps] = Bound(_log_bound(max(phi.lo, Fraction(1))).lo,  # type: ignore[type-var, arg-type]
                                _log_bound(phi.hi).hi)  # type: ignore[arg-type]  # tau 0, gamma finite: both ends set
    return Geometry(C.tobytes(), c_bounds, ranks, intrinsic, gamma, native)
