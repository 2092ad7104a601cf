"""Does interaction geometry predict certified rank?  (UNTRUSTED study logic.)

The research's fourth finding (``shared/seed``): the computable intrinsic score does not
predict how much rank a trained head needs -- its agreement with the certified order is
heterogeneous across families and it adds no detectable held-out information beyond a
calibrated baseline -- and the native-coordinate geometry moves under changes of coordinates
that leave ``A`` fixed.  This module asks the same question where every bracket end is a
kernel-VERIFIED certificate end.

**Brackets.**  Each certificate is re-checked by :func:`~softrank_cert.verification.
verify_certificate_bytes` (the engine of ``softrank-verify``); only VERIFIED ends count, and a
certificate whose operator is not bit-identical to the panel operator of the same name is
refused.  At tolerance eps operator i **provably needs more rank** than j when
``lower_i > upper_j`` (then ``r_eps(A_i) >= lower_i > upper_j >= r_eps(A_j)``).  No midpoint of
a bracket is ever used as a rank.

**Scores** (per operator and eps; larger = predicts more rank):

* ``intrinsic`` -- ``log Phi*(eps) = min over r in R with tau(T_r) < eps of
  (r/2) log(1 + kappa(T_r)/(eps - tau(T_r))^2)``, ``T_r`` the rank-r truncated SVD of
  ``C = P_m S P_N`` refactored for a small radius product, evaluated with the kernel's
  **certified upper bounds** of tau and kappa (:func:`phi_bound`), so the score is a certified
  *upper* bound of the minimum over the grid; the minimising r is the **interaction
  dimension**.  Infinite when no r of the grid has a certified ``tau < eps``.  The rank grid
  ``R`` (:func:`rank_grid`) is ``{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}`` up to
  ``min(d, 64)`` for ``qk`` operators (plus that top rank: at ``r = d`` the retained part is
  all of C, since ``rank C <= d``) and up to ``min(p - 1, 64)`` for ``scores``.  The kernel
  certifies the ranks that can matter (:func:`operator_geometry`): ranks whose float64 tau
  estimate exceeds the largest eps cannot qualify and are skipped, and per eps only the rank
  with the best float64 estimate of the score and those within a relative 1e-6 of it are
  certified.  Leaving a rank out could only raise the minimum, so the score stays a certified
  upper bound of the minimum over the grid either way.
* ``native`` -- the same formula in the given coordinates: the head dimension d for r, the
  native ``Gamma = beta rho_Q rho_K`` for kappa, and ``tau = 0`` (``A = softmax(beta Q K^T)``
  exactly, so the native factorization leaves no residual): ``(d/2) log(1 + Gamma/eps^2)``
  with the certified upper bound of Gamma (``qk`` operators only).  Not invariant: that is the
  point (see the invariance check).
* ``baseline`` -- a calibrated baseline from cheap operator statistics that know nothing of
  the theorem: ``log width``, ``log eps``, the mean row entropy of A (nats) and
  ``log effective rank`` of A (Roy & Vetterli: ``exp`` of the entropy of the normalised
  singular values), combined linearly and fitted to the brackets with the interval loss
  (:func:`fit_interval_model`).  A float64 estimate, not certified.
* ``interaction_dim`` -- the interaction dimension r* itself (the r attaining the intrinsic
  score): the research's "robust interaction dimension", a derived quantity, not a bound.

**Certified concordance** of a score: among the certified-ordered pairs (same eps), the share
the score orders the same way (ties count half); pairs are pooled over the tolerances and
broken down by family / document / width / layer (pairs inside one group).  Confidence
intervals: percentile bootstrap over operators (an operator's rows at every eps move
together), :data:`BOOTSTRAP_RESAMPLES` resamples, seed :data:`BOOTSTRAP_SEED`.

**Held-out information** (:func:`heldout`): group-wise cross-validation, folds by document
and, separately, by layer.  On the training operators the baseline is fitted against the
brackets with the interval loss (zero inside ``[log lower, log upper]``, the distance outside)
and so is the baseline plus one score; the held-out interval loss and the held-out certified
concordance (pairs inside one test fold) of the two models are compared with paired bootstrap
intervals of the differences.

**Invariance** (:func:`refactored_operator`): ``Q -> Q D``, ``K -> K D^{-1}`` with a
power-of-two diagonal D is exact in float64 and leaves ``A`` fixed; every operator's
certificate ends are re-verified on the refactored operator and its whole geometry recomputed,
and the report counts operators whose brackets, C, tau, kappa and intrinsic score come out
bit-identical and those whose native score moves.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..plumbing.tolerances import parse_eps_list
from ..errors import InvalidInputError, SoftrankError
from ..kernel import Operator, Status, parse_tolerance
from ..plumbing.certificate_files import expand_json_paths
from ..plumbing.files import write_text_atomic
from ..plumbing.progress import progress_bar
from ..plumbing.untrusted_text import safe_text

if TYPE_CHECKING:
    from ..plumbing.operators_npz import NamedOperator

#: Version of the per-operator results (:func:`analyze_task`): bump it whenever what they
#: contain or how it is computed changes (study caches are keyed by it).
RESULT_VERSION = "2"  # 2: certified strings with the report contract's 17 digits (were 9 and 6)
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
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260
CI_LEVEL = 0.95
#: L1 weight of the non-intercept coefficients in the interval fit (a tie-breaker only).
L1_PENALTY = 1e-4
#: Exponents of the power-of-two refactorization D = diag(2^e_t), e_t = (t mod 7) - 3.
D_PERIOD = 7

SCORES = ("intrinsic", "native", "baseline", "interaction_dim")
BASELINE_FEATURES = ("log_width", "log_eps", "mean_row_entropy", "log_effective_rank")
#: name -> (certified side, meaning)
DEFINITIONS = {
    "intrinsic": ("upper", "min over r in the grid with certified tau(T_r) < eps of (r/2) log(1 + kappa(T_r)/(eps - "
                           "tau(T_r))^2), T_r the rank-r truncated SVD of C, certified upper bounds of tau and kappa "
                           "(a certified upper bound of the minimum); inf when no r qualifies"),
    "native": ("upper", "(d/2) log(1 + Gamma/eps^2), Gamma = beta rho_Q rho_K of the given Q, K (certified upper "
                        "bound), d the head dimension, tau = 0 (A = softmax(beta Q K^T) exactly); not invariant"),
    "baseline": ("estimate", "float64 estimate: linear in log width, log eps, mean row entropy of A and log effective "
                             "rank of A, fitted to the brackets with the interval loss (in-sample for this table)"),
    "interaction_dim": ("derived", "the r attaining the intrinsic score (the interaction dimension; inf when none "
                                   "qualifies): derived from certified upper bounds, not itself a bound"),
}


class CertificateRefusedError(SoftrankError):
    """A certificate whose claims do not all verify (exit code of ``softrank-verify``: 1 / 3)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ============================================================================ geometry

def rank_grid(op: Operator, ranks: Sequence[int] | None = None) -> list[int]:
    """The ranks r of the intrinsic score for ``op`` (module docstring); ``ranks`` overrides."""
    if ranks is not None:
        grid = sorted({int(r) for r in ranks if 1 <= int(r) <= op.p})
        if not grid:
            raise InvalidInputError(f"--ranks: no rank in [1, {op.p}] for a {op.shape[0]} x {op.shape[1]} operator")
        return grid
    top = min(op.head_dim, op.p) if op.kind == "qk" else op.p - 1
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

    from ..geometry.bounds import Bound

    old = ctx.prec
    ctx.prec = 128
    try:
        ball = (arb(x.numerator) / arb(x.denominator)).log()
    finally:
        ctx.prec = old
    return Bound.of(ball)


def _up(x: Fraction) -> float:
    """The smallest-but-one double above the nearest double of ``x``: a double >= x."""
    return math.nextafter(float(x), math.inf)


def _down(x: Fraction) -> float:
    return math.nextafter(float(x), -math.inf)


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
    from ..geometry.interaction import interaction_float, retained_softmax
    from ..geometry.kappa import optimise_factorization
    from ..geometry.bounds import (Bound, factorization_radius, interaction_bounds, native_gamma, phi_bound,
                                   require_common_support, residual_bounds)
    from ..solvers.dense import attention_matrix, norm

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
        estimates = sorted((_phi_estimate(r, by_r[r].kappa_float, by_r[r].tau_float, eps_f), r) for r in factors)
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
            phi = phi_bound(gamma, zero, eps, op.head_dim)
            native[eps] = Bound(_log_bound(max(phi.lo, Fraction(1))).lo, _log_bound(phi.hi).hi)
    return Geometry(C.tobytes(), c_bounds, ranks, intrinsic, gamma, native)


def operator_features(op: Operator) -> dict[str, float]:
    """Cheap float64 statistics of A that know nothing of the theorem (the baseline's inputs)."""
    from ..solvers.dense import attention_matrix

    A = attention_matrix(op)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(A > 0, A * np.log(A), 0.0)
    entropy = float(-plogp.sum(axis=1).mean())
    sv = np.linalg.svd(A, compute_uv=False)
    weights = sv / sv.sum() if sv.sum() > 0 else np.ones(1)
    weights = weights[weights > 0]
    erank = float(np.exp(-(weights * np.log(weights)).sum()))
    return {"width": int(op.shape[1]), "queries": int(op.shape[0]), "mean_row_entropy": entropy,
            "effective_rank": erank}


# ============================================================================ one operator

def _verdict_key(v: Any) -> tuple:
    """What a bracket end claims and its verdict (the bracket itself)."""
    return (v.status, v.side, v.rank, v.eps)


def _overlap(a: tuple[Fraction, Fraction] | None, b: tuple[Fraction, Fraction] | None) -> bool:
    """Two enclosures of one real number must intersect (None: no enclosure on either side)."""
    if a is None or b is None:
        return a is None and b is None
    return a[0] <= b[1] and b[0] <= a[1]


def analyze_task(spec: dict[str, Any], name: str, raw: bytes, source: str, eps_list: list[str],
                 ranks: list[int] | None, options: dict[str, Any]) -> dict[str, Any]:
    """Everything about one operator (a task for :func:`~softrank_cert.plumbing.parallel.run_ordered`).

    Re-verifies the certificate (refusing it unless every claim is VERIFIED, or dropping the
    tolerances that are not with ``options["drop_unverified"]``), checks that it is about the
    panel operator ``spec`` bit for bit, computes features, geometry, scores and the
    invariance check.  Returns plain data (floats, ints, strings).
    """
    from ..plumbing.campaign_inputs import operator_mismatch
    from ..plumbing.reports import bound_up
    from ..plumbing.parallel import unpack_operator
    from ..verification import check_claims, verify_certificate_bytes

    start = time.perf_counter()
    op = unpack_operator(spec)
    report = verify_certificate_bytes(raw, source=source, trusted_keys=options.get("trusted_keys"),
                                      require_signature=bool(options.get("require_signature")),
                                      max_prec=options.get("max_prec", 512))
    certificate = report.certificate
    reason = operator_mismatch(op, certificate.operator)
    if certificate.operator_id != name or reason:
        raise InvalidInputError(f"{source}: certificate is not about the panel operator {name!r}: "
                                f"{reason or 'operator id ' + repr(certificate.operator_id)}")
    if op.mask != "none" or op.kind not in ("qk", "scores"):
        raise InvalidInputError(f"{name}: softrank analyze needs unmasked 'qk' or 'scores' operators (the theorem "
                                "assumes one common positive support and needs scores)")
    verdicts = report.verdicts
    by_eps: dict[Fraction, tuple[Any, Any]] = {}
    for bracket, pair in zip(certificate.brackets, report.pairs):
        by_eps[bracket.eps_value] = pair
    brackets: dict[str, dict[str, Any]] = {}
    dropped: list[str] = []
    for eps in eps_list:
        pair = by_eps.get(parse_tolerance(eps))
        if pair is None:
            raise InvalidInputError(f"{source}: no bracket at eps {eps}")
        bad = [v for v in pair if v.status is not Status.VERIFIED]
        if bad:
            if options.get("drop_unverified"):
                dropped.append(eps)
                continue
            worst = Status.REJECTED if any(v.status is Status.REJECTED for v in bad) else Status.INCONCLUSIVE
            raise CertificateRefusedError(
                f"{source}: claim {bad[0].claim} at eps {bad[0].eps} is {bad[0].status.value} by the kernel; only "
                "VERIFIED ends count (use --drop-unverified to leave such tolerances out)",
                1 if worst is Status.REJECTED else 3)
        brackets[eps] = {"lower": pair[0].rank, "upper": pair[1].rank, "lower_method": pair[0].method,
                         "upper_method": pair[1].method}
    verify_s = time.perf_counter() - start
    grid = rank_grid(op, ranks)
    features = operator_features(op)
    t = time.perf_counter()
    geo = operator_geometry(op, grid, eps_list)
    geometry_s = time.perf_counter() - t
    scores: dict[str, dict[str, Any]] = {}
    for eps in eps_list:
        log_phi, r_star = geo.intrinsic[eps]
        entry: dict[str, Any] = {
            "intrinsic": math.inf if log_phi is None else _up(log_phi.hi),
            "intrinsic_bound": None if log_phi is None else bound_up(log_phi.hi),
            "interaction_dim": math.inf if r_star is None else r_star,
        }
        if geo.native:
            entry["native"] = _up(geo.native[eps].hi)
            entry["native_bound"] = bound_up(geo.native[eps].hi)
        scores[eps] = entry
    invariance = None
    t = time.perf_counter()
    try:
        op2 = refactored_operator(op) if op.kind == "qk" else None
    except InvalidInputError:  # the power-of-two scaling would overflow or underflow: not exact
        op2 = None
    if op2 is not None:
        verdicts2 = [v for pair in check_claims(dataclasses.replace(certificate, operator=op2),
                                                max_prec=options.get("max_prec", 512)) for v in pair]
        geo2 = operator_geometry(op2, rank_grid(op2, ranks), eps_list)
        invariance = {
            "brackets_identical": [_verdict_key(v) for v in verdicts] == [_verdict_key(v) for v in verdicts2],
            "margins_identical": [(v.margin, v.value) for v in verdicts] == [(v.margin, v.value) for v in verdicts2],
            "margins_consistent": all(_overlap(a.margin, b.margin) and _overlap(a.value, b.value)
                                      for a, b in zip(verdicts, verdicts2)),
            "C_identical": geo.C_bytes == geo2.C_bytes and geo.c_bounds == geo2.c_bounds,
            "tau_identical": [(g.r, g.tau_float, g.tau, g.tau_tanh) for g in geo.ranks]
            == [(g.r, g.tau_float, g.tau, g.tau_tanh) for g in geo2.ranks],
            "kappa_identical": [(g.r, g.kappa_float, g.kappa_upper) for g in geo.ranks]
            == [(g.r, g.kappa_float, g.kappa_upper) for g in geo2.ranks],
            "intrinsic_identical": geo.intrinsic == geo2.intrinsic,
            "native_moved": geo.gamma != geo2.gamma and all(geo.native[e] != geo2.native[e] for e in eps_list),
            "native_refactored": {eps: _up(geo2.native[eps].hi) for eps in eps_list},
        }
    invariance_s = time.perf_counter() - t
    return {
        "operator": name, "source": source, "kind": op.kind, "shape": list(op.shape), "p": op.p, "d": op.head_dim,
        "features": features, "brackets": brackets, "dropped": dropped, "scores": scores,
        "grid": [{"r": g.r, "tau_float": g.tau_float, "certified": g.certified,
                  "tau_upper": None if not g.certified else bound_up(g.tau.hi),
                  "kappa_upper": None if g.kappa_upper is None else bound_up(g.kappa_upper)} for g in geo.ranks],
        "gamma_upper": None if geo.gamma is None else bound_up(geo.gamma.hi),
        "invariance": invariance,
        "seconds": {"verify": round(verify_s, 3), "geometry": round(geometry_s, 3),
                    "invariance": round(invariance_s, 3), "total": round(time.perf_counter() - start, 3)},
    }


# ============================================================================ concordance

def pair_matrices(lower: np.ndarray, upper: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(P, credit)`` for one tolerance: ``P[i, j]`` = i provably needs more rank than j
    (``lower_i > upper_j``) with both scores available; ``credit[i, j]`` = 1 if the score puts i
    above j, 1/2 on a tie, 0 otherwise (only where P).  NaN = score not available; +inf is a
    score above every finite one (two infinities tie)."""
    lower, upper, score = (np.asarray(a, dtype=np.float64) for a in (lower, upper, score))
    valid = ~np.isnan(score)
    P = (lower[:, None] > upper[None, :]) & valid[:, None] & valid[None, :]
    with np.errstate(invalid="ignore"):
        credit = (score[:, None] > score[None, :]) + 0.5 * (score[:, None] == score[None, :])
    return P.astype(np.float64), np.where(P, credit, 0.0)


def concordance(lower: Sequence[float], upper: Sequence[float], score: Sequence[float]) -> tuple[float | None, int]:
    """Certified concordance of ``score`` at one tolerance: ``(share, certified pairs)``
    (share None when no pair is certified)."""
    P, credit = pair_matrices(np.asarray(lower), np.asarray(upper), np.asarray(score))
    pairs = int(P.sum())
    return (float(credit.sum() / pairs) if pairs else None), pairs


def bootstrap_weights(n: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """``resamples x n`` multiplicities of a bootstrap over n units (fixed seed)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64) if n else np.zeros((resamples, 0))


def _interval(samples: np.ndarray, level: float = CI_LEVEL) -> list[float] | None:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    tail = 100 * (1 - level) / 2
    return [round(float(np.percentile(samples, tail)), 4), round(float(np.percentile(samples, 100 - tail)), 4)]


def _pair_sums(LO: np.ndarray, UP: np.ndarray, S: np.ndarray, idx: np.ndarray, W: np.ndarray):
    """Point and bootstrap sums (credit, pairs) over operators ``idx``, pooled over eps columns."""
    num = den = 0.0
    numb = np.zeros(W.shape[0])
    denb = np.zeros(W.shape[0])
    Wg = W[:, idx]
    for e in range(LO.shape[1]):
        P, credit = pair_matrices(LO[idx, e], UP[idx, e], S[idx, e])
        if not P.any():
            continue
        num += credit.sum()
        den += P.sum()
        numb += ((Wg @ credit) * Wg).sum(axis=1)
        denb += ((Wg @ P) * Wg).sum(axis=1)
    return num, den, numb, denb


def _summary(num: float, den: float, numb: np.ndarray, denb: np.ndarray) -> dict[str, Any]:
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = np.where(denb > 0, numb / np.where(denb > 0, denb, 1), np.nan)
    return {"concordance": round(num / den, 4) if den else None, "ci": _interval(samples) if den else None,
            "pairs": int(den)}


def score_concordance(LO: np.ndarray, UP: np.ndarray, S: np.ndarray, W: np.ndarray, eps_list: list[str],
                      groups: dict[str, list[Any]]) -> dict[str, Any]:
    """Concordance of one score (matrices: operators x eps), pooled, by eps and by groups."""
    n = LO.shape[0]
    everyone = np.arange(n)
    out = _summary(*_pair_sums(LO, UP, S, everyone, W))
    out["by_eps"] = {eps: _summary(*_pair_sums(LO[:, [e]], UP[:, [e]], S[:, [e]], everyone, W))
                     for e, eps in enumerate(eps_list)}
    for key, labels in groups.items():
        values = sorted({label for label in labels if label is not None}, key=_group_order)
        table = {}
        for value in values:
            idx = np.array([i for i, label in enumerate(labels) if label == value])
            table[str(value)] = _summary(*_pair_sums(LO, UP, S, idx, W))
        out[f"by_{key}"] = table
    return out


def _group_order(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


# ============================================================================ interval loss and fits

def log_rank(x: np.ndarray | Sequence[float]) -> np.ndarray:
    """``log`` of a rank bracket end (a rank 0, only possible at eps >= ||A||, enters as log 1/2)."""
    return np.log(np.maximum(np.asarray(x, dtype=np.float64), 0.5))


def interval_loss(pred: np.ndarray | Sequence[float], lo: np.ndarray | Sequence[float],
                  hi: np.ndarray | Sequence[float]) -> np.ndarray:
    """Distance of each prediction to its interval ``[lo, hi]`` (zero inside)."""
    pred, lo, hi = (np.asarray(a, dtype=np.float64) for a in (pred, lo, hi))
    return np.maximum(lo - pred, 0.0) + np.maximum(pred - hi, 0.0)


@dataclasses.dataclass
class IntervalModel:
    """``prediction = intercept + coef . (x - mean) / scale`` on the kept columns."""

    columns: list[int]
    mean: np.ndarray
    scale: np.ndarray
    intercept: float
    coef: np.ndarray

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = (X[:, self.columns] - self.mean) / self.scale
        return self.intercept + Z @ self.coef


def fit_interval_model(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, l1: float = L1_PENALTY) -> IntervalModel:
    """Minimise ``mean_i dist(x_i . beta, [lo_i, hi_i]) + l1 * |beta|_1`` (intercept free) exactly
    as a linear program (HiGHS).  Columns constant on the data are dropped; the others are
    standardised."""
    from scipy import sparse
    from scipy.optimize import linprog

    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        raise InvalidInputError("no operator to fit the baseline on")
    sd = X.std(axis=0)
    columns = [j for j in range(X.shape[1]) if sd[j] > 1e-12 * max(1.0, abs(X[:, j]).max())]
    mean, scale = X[:, columns].mean(axis=0), sd[columns]
    Z = (X[:, columns] - mean) / scale
    k = len(columns)
    # variables: b0, b+ (k), b- (k), s (n);   b0 + Z b + s >= lo,   b0 + Z b - s <= hi
    ones = np.ones((n, 1))
    block = sparse.hstack([sparse.csr_matrix(ones), sparse.csr_matrix(Z), sparse.csr_matrix(-Z)])
    eye = sparse.identity(n, format="csr")
    A_ub = sparse.vstack([sparse.hstack([-block, -eye]), sparse.hstack([block, -eye])]).tocsc()
    b_ub = np.concatenate([-np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)])
    c = np.concatenate([[0.0], np.full(2 * k, l1), np.full(n, 1.0 / n)])
    bounds = [(None, None)] + [(0, None)] * (2 * k + n)
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise InvalidInputError(f"the interval fit failed: {res.message}")
    x = res.x
    return IntervalModel(columns, mean, scale, float(x[0]), x[1:1 + k] - x[1 + k:1 + 2 * k])


def baseline_matrix(rows: list[dict[str, Any]]) -> np.ndarray:
    """Baseline features of rows (operator, eps): log width, log eps, entropy, log effective rank."""
    return np.array([[math.log(r["features"]["width"]), math.log(float(parse_tolerance(r["eps"]))),
                      r["features"]["mean_row_entropy"], math.log(max(r["features"]["effective_rank"], 1e-300))]
                     for r in rows], dtype=np.float64).reshape(len(rows), len(BASELINE_FEATURES))


def with_score(base: np.ndarray, score: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Baseline columns plus a score column (+inf replaced by 1 + the largest finite training
    value) and an "infinite" indicator column (dropped by the fit when constant)."""
    score = np.asarray(score, dtype=np.float64)
    finite = score[train][np.isfinite(score[train])]
    cap = (finite.max() + 1.0) if finite.size else 0.0
    value = np.where(np.isinf(score), cap, score)
    return np.column_stack([base, value, np.isinf(score).astype(np.float64)])


# ============================================================================ held-out

def heldout(rows: list[dict[str, Any]], op_index: np.ndarray, n_ops: int, fold_labels: list[Any],
            added: list[str], W: np.ndarray) -> dict[str, Any]:
    """Group-wise cross-validation (one fold per distinct label of the operators).

    ``rows`` (operator, eps) with lower, upper, features, scores; ``op_index[i]`` the operator of
    row i; ``fold_labels[op]`` its fold.  Models: the baseline, and the baseline plus each score
    in ``added``.  Returns the held-out interval loss and certified concordance (pairs inside
    one test fold, same eps) of each model and, for each added score, the paired bootstrap
    intervals of the differences (model - baseline).
    """
    labels = sorted({label for label in fold_labels if label is not None}, key=_group_order)
    if len(labels) < 2:
        return {"skipped": f"fewer than two groups ({len(labels)})"}
    row_fold = np.array([fold_labels[o] for o in op_index], dtype=object)
    lo = log_rank([r["lower"] for r in rows])
    hi = log_rank([r["upper"] for r in rows])
    base = baseline_matrix(rows)
    models = {"baseline": None, **{f"baseline+{name}": name for name in added}}
    preds = {m: np.full(len(rows), np.nan) for m in models}
    skipped: dict[str, str] = {}
    for model, name in models.items():
        score = None if name is None else np.array([r["scores"].get(name, np.nan) for r in rows], dtype=np.float64)
        if score is not None and np.isnan(score).any():
            skipped[model] = f"{name} is not available for every operator"
            continue
        for label in labels:
            test = row_fold == label
            train = ~test & (row_fold != None)  # noqa: E711 (object array)
            X = base if score is None else with_score(base, score, train)
            fitted = fit_interval_model(X[train], lo[train], hi[train])
            preds[model][test] = fitted.predict(X[test])
    eps_list = sorted({r["eps"] for r in rows}, key=parse_tolerance)
    col = {eps: e for e, eps in enumerate(eps_list)}
    LO = np.full((n_ops, len(eps_list)), np.nan)
    UP = LO.copy()
    for i, r in enumerate(rows):
        LO[op_index[i], col[r["eps"]]], UP[op_index[i], col[r["eps"]]] = r["lower"], r["upper"]
    out_models: dict[str, Any] = {}
    stats: dict[str, tuple] = {}
    for model in models:
        if model in skipped:
            out_models[model] = {"skipped": skipped[model]}
            continue
        pred = preds[model]
        tested = np.isfinite(pred)  # rows of operators without a fold label are never held out
        loss = interval_loss(pred, lo, hi)[tested]
        per_op = np.zeros(n_ops)
        count = np.zeros(n_ops)
        np.add.at(per_op, op_index[tested], loss)
        np.add.at(count, op_index[tested], 1.0)
        S = np.full((n_ops, len(eps_list)), np.nan)
        for i, r in enumerate(rows):
            S[op_index[i], col[r["eps"]]] = pred[i]
        num = den = 0.0
        numb = np.zeros(W.shape[0])
        denb = np.zeros(W.shape[0])
        for label in labels:
            idx = np.array([o for o in range(n_ops) if fold_labels[o] == label])
            a, b, c, d = _pair_sums(np.nan_to_num(LO, nan=-1.0), np.nan_to_num(UP, nan=np.inf), S, idx, W)
            num, den, numb, denb = num + a, den + b, numb + c, denb + d
        with np.errstate(invalid="ignore", divide="ignore"):
            loss_b = (W @ per_op) / (W @ count)  # operators with no held-out row weigh nothing
            conc_b = np.where(denb > 0, numb / np.where(denb > 0, denb, 1), np.nan)
        point_loss = float(per_op.sum() / count.sum())
        point_conc = num / den if den else float("nan")
        stats[model] = (point_loss, point_conc, loss_b, conc_b)
        out_models[model] = {"loss": round(point_loss, 4), "loss_ci": _interval(loss_b),
                             "concordance": round(point_conc, 4) if den else None,
                             "concordance_ci": _interval(conc_b) if den else None, "pairs": int(den),
                             "inside_share": round(float((loss == 0).mean()), 4)}
    differences: dict[str, Any] = {}
    if "baseline" in stats:
        b_loss, b_conc, b_loss_b, b_conc_b = stats["baseline"]
        for model, name in models.items():
            if name is None or model not in stats:
                continue
            m_loss, m_conc, m_loss_b, m_conc_b = stats[model]
            loss_ci, conc_ci = _interval(m_loss_b - b_loss_b), _interval(m_conc_b - b_conc_b)
            differences[name] = {
                "loss_difference": round(m_loss - b_loss, 4), "loss_difference_ci": loss_ci,
                "loss_ci_includes_zero": None if loss_ci is None else bool(loss_ci[0] <= 0 <= loss_ci[1]),
                "concordance_difference": round(m_conc - b_conc, 4) if np.isfinite(m_conc - b_conc) else None,
                "concordance_difference_ci": conc_ci,
                "concordance_ci_includes_zero": None if conc_ci is None else bool(conc_ci[0] <= 0 <= conc_ci[1]),
                "verdict": _verdict_text(name, loss_ci, conc_ci),
            }
    return {"folds": [str(label) for label in labels], "models": out_models, "added": differences}


def _verdict_text(name: str, loss_ci: list[float] | None, conc_ci: list[float] | None) -> str:
    """One plain sentence on whether adding ``name`` helped held out."""
    if loss_ci is None or conc_ci is None:
        return f"adding {name}: not enough held-out pairs to say"
    parts = []
    if loss_ci[0] <= 0 <= loss_ci[1]:
        parts.append("the loss-difference interval includes zero")
    elif loss_ci[1] < 0:
        parts.append("it lowers the held-out interval loss")
    else:
        parts.append("it raises the held-out interval loss")
    if conc_ci[0] <= 0 <= conc_ci[1]:
        parts.append("the concordance-difference interval includes zero")
    elif conc_ci[0] > 0:
        parts.append("it raises the held-out certified concordance")
    else:
        parts.append("it lowers the held-out certified concordance")
    helps = loss_ci[1] < 0 or conc_ci[0] > 0
    return (f"adding {name} to the baseline: " + "; ".join(parts)
            + ("" if helps else " -- no detectable held-out information beyond the baseline"))


# ============================================================================ the report

def name_groups(name: str, fallback_document: str) -> dict[str, Any]:
    """family / document / width / layer / head of a panel name (``minilm/apache2/w128/L3H7``)."""
    from .budgets import name_fields

    document, width, layer, head = name_fields(name, fallback_document)
    return {"family": name.split("/", 1)[0] if "/" in name else fallback_document, "document": document,
            "width": width, "layer": layer, "head": head}


def _json_value(x: Any) -> Any:
    if isinstance(x, float):
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if math.isnan(x):
            return None
        return float(f"{x:.17g}")
    return x


def build_report(results: list[dict[str, Any]], stems: dict[str, str], eps_list: list[str], *,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The analysis report from the per-operator results (see the module docstring)."""
    ops = [r for r in results if r["brackets"]]
    n = len(ops)
    if n == 0:
        raise InvalidInputError("no verified bracket to analyse")
    meta = [name_groups(r["operator"], stems.get(r["operator"], "")) for r in ops]
    rows: list[dict[str, Any]] = []
    op_index: list[int] = []
    for i, r in enumerate(ops):
        for eps in eps_list:
            if eps not in r["brackets"]:
                continue
            b = r["brackets"][eps]
            rows.append({"operator": r["operator"], "eps": eps, "lower": b["lower"], "upper": b["upper"],
                         "features": r["features"], "scores": dict(r["scores"][eps])})
            op_index.append(i)
    op_index_a = np.array(op_index)
    lo, hi = log_rank([r["lower"] for r in rows]), log_rank([r["upper"] for r in rows])
    base = baseline_matrix(rows)
    calibrated = fit_interval_model(base, lo, hi)
    base_pred = calibrated.predict(base)
    for row, value in zip(rows, base_pred):
        row["scores"]["baseline"] = float(value)
    col = {eps: e for e, eps in enumerate(eps_list)}
    LO = np.full((n, len(eps_list)), -1.0)  # missing rows: lower -1 / upper inf never pair
    UP = np.full((n, len(eps_list)), np.inf)
    for i, row in zip(op_index, rows):
        LO[i, col[row["eps"]]], UP[i, col[row["eps"]]] = row["lower"], row["upper"]
    W = bootstrap_weights(n, resamples, seed)
    groups = {key: [m[key] for m in meta] for key in ("family", "document", "width", "layer")}
    score_table: dict[str, Any] = {}
    for name in SCORES:
        S = np.full((n, len(eps_list)), np.nan)
        for i, row in zip(op_index, rows):
            value = row["scores"].get(name)
            S[i, col[row["eps"]]] = np.nan if value is None else float(value)
        if np.isnan(S).all():
            continue
        side, meaning = DEFINITIONS[name]
        score_table[name] = {"certified": side, "meaning": meaning,
                             **score_concordance(LO, UP, S, W, eps_list, groups)}
    added = [name for name in ("intrinsic", "native", "interaction_dim") if name in score_table]
    held: dict[str, Any] = {}
    for scheme in ("document", "layer"):
        held[scheme] = heldout(rows, op_index_a, n, groups[scheme], added, W)
    inv = [r["invariance"] for r in ops if r["invariance"] is not None]
    invariance = {
        "operators": n, "checked": len(inv), "not_applicable": n - len(inv),
        "refactorization": f"Q -> Q D, K -> K D^-1, D = diag(2^e_t), e_t = (t mod {D_PERIOD}) - {D_PERIOD // 2}",
        **{key: sum(1 for item in inv if item[key]) for key in
           ("brackets_identical", "margins_identical", "margins_consistent", "C_identical", "tau_identical",
            "kappa_identical", "intrinsic_identical", "native_moved")},
    }
    operators_out = []
    for i, row in zip(op_index, rows):
        r = ops[i]
        s = r["scores"][row["eps"]]
        entry = {"operator": row["operator"], "eps": row["eps"], "lower": row["lower"], "upper": row["upper"],
                 **{k: meta[i][k] for k in ("family", "document", "width", "layer", "head")},
                 "scores": {name: _json_value(row["scores"].get(name)) for name in SCORES if name in row["scores"]},
                 "intrinsic_bound": s.get("intrinsic_bound"), "native_bound": s.get("native_bound"),
                 "lower_method": r["brackets"][row["eps"]]["lower_method"],
                 "upper_method": r["brackets"][row["eps"]]["upper_method"]}
        if r["invariance"] is not None:
            entry["native_refactored"] = _json_value(r["invariance"]["native_refactored"][row["eps"]])
        operators_out.append(entry)
    geometry = [{"operator": r["operator"], "p": r["p"], "d": r["d"], "features": r["features"],
                 "gamma_upper": r["gamma_upper"], "grid": r["grid"], "seconds": r["seconds"],
                 "dropped_eps": r["dropped"],
                 "invariance": None if r["invariance"] is None else
                 {k: v for k, v in r["invariance"].items() if k != "native_refactored"}} for r in ops]
    return {
        "format": "softrank-analysis", "version": 1, "eps": eps_list,
        "definitions": {name: {"certified": DEFINITIONS[name][0], "meaning": DEFINITIONS[name][1]} for name in SCORES},
        "grid": {"ranks": sorted({g["r"] for r in ops for g in r["grid"]}),
                 "rule": "1,2,3,4,6,8,12,16,24,32,48,64 up to min(d, 64) (qk; plus that top rank) or min(p-1, 64) "
                         "(scores); certified by the kernel per eps: the rank with the best float64 estimate of the "
                         "score and every rank within a relative 1e-6 of the best qualifying one (ranks whose "
                         "float64 tau exceeds the largest eps are never certified)"},
        "baseline": {"features": list(BASELINE_FEATURES),
                     "fit": "interval loss on [log lower, log upper] (linear program, l1 tie-breaker "
                            f"{L1_PENALTY:g}), standardised features",
                     "columns": [BASELINE_FEATURES[j] for j in calibrated.columns],
                     "intercept": round(calibrated.intercept, 6),
                     "coefficients": [round(float(c), 6) for c in calibrated.coef],
                     "in_sample_loss": round(float(interval_loss(base_pred, lo, hi).mean()), 4)},
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "operator", "level": CI_LEVEL,
                      "interval": "percentile"},
        "operators": operators_out,
        "scores": score_table,
        "heldout": held,
        "invariance": invariance,
        "geometry": geometry,
        "timing": timing(ops, meta),
        "counts": {"operators": n, "rows": len(rows),
                   "dropped_rows": sum(len(r["dropped"]) for r in results),
                   "resolved_rows": sum(1 for row in rows if row["lower"] == row["upper"])},
    }


def timing(ops: list[dict[str, Any]], meta: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per operator (one worker each) by width: verification, geometry, invariance."""
    by_width: dict[str, list[dict[str, float]]] = {}
    for r, m in zip(ops, meta):
        by_width.setdefault(str(m["width"]), []).append(r["seconds"])
    out = {}
    for width in sorted(by_width, key=lambda w: (not w.isdigit(), int(w) if w.isdigit() else 0)):
        items = by_width[width]
        out[width] = {"operators": len(items),
                      **{f"median_{part}_s": round(float(np.median([s[part] for s in items])), 3)
                         for part in ("verify", "geometry", "invariance", "total")},
                      "mean_total_s": round(float(np.mean([s["total"] for s in items])), 3),
                      "max_total_s": round(float(np.max([s["total"] for s in items])), 3)}
    return out


# ----------------------------------------------------------------------------- the study over certificates

def _load_panels(paths: list[str]) -> tuple[dict[str, NamedOperator], dict[str, str]]:
    from ..plumbing.operators_npz import load_operators

    operators: dict[str, NamedOperator] = {}
    stems: dict[str, str] = {}
    where: dict[str, str] = {}
    for path in paths:
        for item in load_operators(Path(path)):
            if item.name in operators:
                raise InvalidInputError(f"operator {item.name!r} is in both {where[item.name]} and {path}")
            operators[item.name], stems[item.name], where[item.name] = item, Path(path).stem, path
    return operators, stems


def _read_certificates(paths: list[str]) -> list[tuple[str, bytes, str, list[str]]]:
    """``(path, bytes, operator id, eps strings)`` of each certificate, schema-checked (exit 2)."""
    from ..certio.certificate import MAX_CERTIFICATE_BYTES, check_schema, parse_json_strict

    out = []
    for path in paths:
        try:
            if Path(path).stat().st_size > MAX_CERTIFICATE_BYTES:
                raise InvalidInputError(f"{path}: larger than {MAX_CERTIFICATE_BYTES} bytes")
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            document = parse_json_strict(raw)
            check_schema(document)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None
        out.append((path, raw, document["operator"]["id"], [b["eps"] for b in document["brackets"]]))
    return out


def _choose_eps(requested: str | None, certificates: list[tuple[str, bytes, str, list[str]]]) -> list[str]:
    """Requested tolerances (each in every certificate) or those common to all certificates."""
    def values(eps: list[str]) -> dict[Fraction, str]:
        return {parse_tolerance(e): e for e in eps}

    if requested is not None:
        wanted = parse_eps_list(requested)
        for path, _raw, _name, eps in certificates:
            have = values(eps)
            for e in wanted:
                if parse_tolerance(e) not in have:
                    raise InvalidInputError(f"{path}: no bracket at eps {e} (it has {', '.join(eps)})")
        # the certificates' own spelling (so that "0.250" matches "0.25")
        first = values(certificates[0][3])
        return [first[parse_tolerance(e)] for e in wanted]
    common = set(values(certificates[0][3]))
    for _path, _raw, _name, eps in certificates[1:]:
        common &= set(values(eps))
    if not common:
        raise InvalidInputError("the certificates share no tolerance: choose with --eps")
    first = values(certificates[0][3])
    return [first[v] for v in sorted(common)]


def analysis(certificates: list[str], panels: list[str], eps: str | None = None, *, ranks: list[int] | None = None,
             resamples: int = 2000, seed: int = 20260, trusted_keys: frozenset[str] | None = None,
             require_signature: bool = False, drop_unverified: bool = False, jobs: int = 1,
             scheduler: str | None = None, show_progress: bool = True, cache: Path | None = None) -> dict[str, Any]:
    """Run the analysis (``softrank analyze``; see the module docstring) and return the report.

    ``cache`` (``--resume``; studies): a folder of per-operator results keyed by the SHA-256 of
    the certificate's bytes, the panel operator, the tolerances and the options, each written
    atomically as soon as its operator is done, so that an interrupted analysis resumes where it
    stopped.  A recorded result (verdicts included) is reused only under exactly the same key.
    """
    from contextlib import closing

    from ..kernel import DEFAULT_MAX_PREC
    from ..plumbing.operators_npz import natural_key
    from ..plumbing.parallel import pack_operator, run_ordered
    from ..plumbing.reports import envelope

    for path in panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    paths = expand_json_paths(certificates)
    if not paths:
        raise InvalidInputError("no certificate files found")
    operators, stems = _load_panels(panels)
    read = _read_certificates(paths)
    seen: dict[str, str] = {}
    for path, _raw, name, _eps in read:
        if name not in operators:
            raise InvalidInputError(f"{path}: certificate operator {name!r} is not in the panels "
                                    f"({', '.join(Path(p).name for p in panels)})")
        if name in seen:
            raise InvalidInputError(f"{path} and {seen[name]} are both about {name!r}")
        seen[name] = path
    eps_list = _choose_eps(eps, read)
    read.sort(key=lambda item: natural_key(item[2]))
    options = {"trusted_keys": trusted_keys, "require_signature": require_signature,
               "drop_unverified": drop_unverified, "max_prec": DEFAULT_MAX_PREC}
    tasks = [(pack_operator(operators[name].operator), name, raw, path, eps_list, ranks, options)
             for path, raw, name, _eps in read]
    start = time.perf_counter()
    results: list[Any] = [None] * len(tasks)
    keys = [_cache_key(task) for task in tasks] if cache is not None else []
    if cache is not None:
        try:
            Path(cache).mkdir(exist_ok=True)
        except OSError as exc:
            raise InvalidInputError(f"cannot create the --resume folder {cache}: {exc.strerror or exc}") from None
        for i, key in enumerate(keys):
            hit = Path(cache) / f"{key}.json"
            if hit.is_file():
                results[i] = json.loads(hit.read_text(encoding="utf-8"))
    todo = [i for i, result in enumerate(results) if result is None]
    with progress_bar(show_progress) as bar:
        task = bar.add_task("analysing", total=len(todo))
        with closing(run_ordered(analyze_task, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                                 done=lambda j: bar.update(task, advance=1,
                                                           description=safe_text(read[todo[j]][2])))) as out:
            for i, result in zip(todo, out):
                results[i] = result
                if cache is not None:
                    write_text_atomic(Path(cache) / f"{keys[i]}.json", json.dumps(result))
    report = envelope("analyze", build_report(results, stems, eps_list, resamples=resamples, seed=seed))
    report["inputs"] = {"certificates": len(paths), "panels": [str(p) for p in panels],
                        "operators_without_certificate": len(set(operators) - set(seen))}
    report["seconds"] = round(time.perf_counter() - start, 1)
    return report


def _cache_key(task: tuple) -> str:
    """SHA-256 of everything a per-operator result depends on (and of the result format's version)."""
    import hashlib

    spec, name, raw, path, eps_list, ranks, options = task
    digest = hashlib.sha256()
    digest.update(RESULT_VERSION.encode())
    digest.update(raw)
    for key in sorted(spec["arrays"]):
        digest.update(key.encode() + spec["arrays"][key].astype("<f8").tobytes())
    digest.update(json.dumps([name, spec["beta"], spec["mask"], eps_list, ranks, options["drop_unverified"],
                              options["require_signature"], sorted(options["trusted_keys"] or [])]).encode())
    return digest.hexdigest()
