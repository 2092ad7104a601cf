"""The theorem's quantities for one operator, rank and tolerance (front end: UNTRUSTED search,
CERTIFIED numbers from ``softrank_cert.geometry.bounds``).

Pipeline (docs/design.md section 1):

1. float64 ``C = P_m S P_N`` and ``b``; the retained part starts as the rank-r truncated SVD
   of C (or a user matrix T, refactored the same way; or user factors X, Y used exactly);
2. the factorization is optimised for kappa (``kappa.py``) and ``T := X Y^T`` is **defined**
   as the exact product of the optimised float64 factors -- every certified number below is
   about this T (its rank is <= r by construction);
3. the kernel encloses ``C``, ``b``, ``A``, ``A_T`` with Arb and returns exact rational bounds:
   ``tau`` (both sides), the tanh bound (upper), ``kappa`` (lower from the dual, upper from
   the factors), ``Phi`` (interval), native ``Gamma`` (interval, qk only).

``Phi`` is only the structural factor of ``r_eps(A) <= min{p, C_r Phi}``; ``C_r`` is unknown,
so no rank is ever derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..kernel import Operator, parse_tolerance
from ..util.numbers import bound_down, bound_up
from ..util.dense import attention_matrix, norm
from .bounds import (Bound, factorization_radius, interaction_bounds, kappa_lower_bound, native_gamma, phi_bound,
                     require_common_support, residual_bounds)
from .interaction import balanced_factors, interaction_float, numerical_rank, retained_softmax
from .kappa import KappaSearch, dual_search, optimise_factorization, radius

PHI_NOTE = ("Phi is the structural factor of the theorem r_eps(A) <= min{p, C_r * Phi}; C_r is unknown, "
            "so Phi is not a rank and no rank is derived from it")

#: name -> (the bound it reads, which end of it is certified, meaning), in the order of the JSON
#: document; "estimates" there are float64, not certified.
MEANINGS = {
    "tau": ("tau", "upper", "tau(T) = ||A - A_T||, A_T = softmax(T + 1 b^T)"),
    "tau_lower": ("tau", "lower", "lower end of the enclosure of tau(T)"),
    "tau_tanh": ("tau_tanh", "upper", "max_i 2 tanh(delta_i/4), delta_i = osc_j (C - T)_ij (Hilbert bound, >= tau)"),
    "kappa_upper": ("kappa", "upper", "kappa(T) <= max||x_i|| max||y_j|| of the optimised factorization"),
    "kappa_lower": ("kappa", "lower", "kappa(T) >= <T, D_u W D_v>/(||u|| ||v|| ||W||_op) and >= max|T_ij|"),
    "phi": ("phi", "upper", "Phi <= (1 + kappa_upper/(eps - tau_upper)^2)^(r/2) (needs tau_upper < eps)"),
    "phi_lower": ("phi", "lower", "Phi >= (1 + kappa_lower/(eps - tau_lower)^2)^(r/2)"),
    "gamma_native": ("gamma_native", "upper", "native Gamma = beta rho_Q rho_K of the given Q, K (not invariant)"),
    "gamma_native_lower": ("gamma_native", "lower", "lower end of the enclosure of native Gamma"),
    "c_max_abs": ("c_max_abs", "upper", "max_ij |C_ij|, C = P_m S P_N"),
    "c_float64_error": ("c_float64_error", "upper", "max_ij |C_ij - C64_ij|: error of the float64 C used to choose T"),
}


class _Bound:
    """``summary.<name>`` reads the certified bound ``summary.bounds[<name>]``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, summary: Any, owner: type | None = None) -> Bound:
        return summary.bounds[self.name]


@dataclass
class GeometrySummary:
    """Certified bounds (exact rationals) and float64 estimates of the theorem's quantities."""

    shape: tuple[int, int]
    rank: int
    eps: str
    retained: str
    bounds: dict[str, Bound]
    estimates: dict[str, float]
    X: np.ndarray = field(repr=False)
    Y: np.ndarray = field(repr=False)
    b: np.ndarray = field(repr=False)
    singular_values: np.ndarray = field(repr=False)

    # ---- certified ends -------------------------------------------------------------
    tau = _Bound()
    tau_tanh = _Bound()
    kappa = _Bound()
    phi = _Bound()

    @property
    def gamma_native(self) -> Bound | None:
        return self.bounds.get("gamma_native")

    @property
    def theorem_applies(self) -> bool | None:
        """True: tau < eps proved; False: tau >= eps proved; None: undecided."""
        eps_q = parse_tolerance(self.eps)
        if self.tau.hi is not None and self.tau.hi < eps_q:
            return True
        if self.tau.lo is not None and self.tau.lo >= eps_q:
            return False
        return None

    def strings(self) -> dict[str, str | None]:
        """Decimal strings rounded in the safe direction (upper ends up, lower ends down; None for
        a bound this operator has not: native Gamma of a non-qk operator)."""
        out: dict[str, str | None] = {}
        for name, (key, side, _) in MEANINGS.items():
            bound = self.bounds.get(key)
            out[name] = None if bound is None else bound_up(bound.hi) if side == "upper" else bound_down(bound.lo)
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": list(self.shape), "retained_rank": self.rank, "eps": self.eps, "retained": self.retained}
        out.update(self.strings())
        out["theorem_applies"] = self.theorem_applies
        out["certified"] = {name: side for name, (_, side, _) in MEANINGS.items()}  # "estimates": float64, not certified
        out["meaning"] = {name: text for name, (_, _, text) in MEANINGS.items()}
        out["estimates"] = {k: (v if isinstance(v, int) else float(v)) for k, v in self.estimates.items()}
        out["note"] = PHI_NOTE
        return out


def _factors_for(C: np.ndarray, r: int, T: np.ndarray | None, factors: tuple[np.ndarray, np.ndarray] | None,
                 optimise: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, float]:
    """Initial factors (X0, Y0), singular values of the source, label, max|source - X0 Y0^T|."""
    if factors is not None:
        X0, Y0 = (np.ascontiguousarray(np.asarray(f, dtype=np.float64)) for f in factors)
        if X0.ndim != 2 or Y0.ndim != 2 or X0.shape[0] != C.shape[0] or Y0.shape[0] != C.shape[1] or X0.shape[1] != Y0.shape[1]:
            raise InvalidInputError(f"factors must be X ({C.shape[0]} x r) and Y ({C.shape[1]} x r)")
        if X0.shape[1] > r:
            raise InvalidInputError(f"factors have inner dimension {X0.shape[1]} > rank {r}")
        source = X0 @ Y0.T
        if not optimise:
            return X0, Y0, np.linalg.svd(source, compute_uv=False), "user factors (used exactly)", 0.0
        X0, Y0, s = balanced_factors(source, r)
        return X0, Y0, s, "user factors (refactored)", float(np.abs(source - X0 @ Y0.T).max())
    source = C if T is None else np.asarray(T, dtype=np.float64)
    if source.shape != C.shape or not np.isfinite(source).all():
        raise InvalidInputError(f"retained part T must be a finite {C.shape[0]} x {C.shape[1]} float64 matrix")
    X0, Y0, s = balanced_factors(source, r)
    label = "tsvd of C" if T is None else "user matrix T (refactored at rank r)"
    return X0, Y0, s, label, float(np.abs(source - X0 @ Y0.T).max()) if T is not None else 0.0


def compute_geometry(op: Operator, r: int, eps: str, *, T: np.ndarray | None = None,
                     factors: tuple[np.ndarray, np.ndarray] | None = None, optimise: bool = True) -> GeometrySummary:
    """Certified geometry of ``op`` with a rank-``r`` retained part at tolerance ``eps``.

    ``T``: a user m x N matrix (refactored at rank r); ``factors``: user ``(X, Y)``, used exactly
    when ``optimise`` is False.  Default: truncated SVD of C, then kappa-optimised factors.
    """
    require_common_support(op)
    parse_tolerance(eps)
    m, n = op.shape
    if not isinstance(r, int) or isinstance(r, bool) or not 1 <= r <= op.p:
        raise InvalidInputError(f"--rank must be an integer in [1, {op.p}], got {r!r}")
    C, b = interaction_float(op)
    X0, Y0, s, label, refactor_gap = _factors_for(C, r, T, factors, optimise)
    if optimise:
        search = optimise_factorization(X0, Y0)
    else:  # the user's factors exactly as given; dual weights for the lower bound only
        u, v, WL, WR, h = dual_search(X0, Y0)
        search = KappaSearch(X0, Y0, radius(X0, Y0), u, v, WL, WR, h)
    X, Y = search.X, search.Y
    # ---- certified (kernel) ----
    c_size, c_err = interaction_bounds(op, C)
    tau, tau_tanh = residual_bounds(op, X, Y)
    k_hi = factorization_radius(X, Y)
    k_lo = kappa_lower_bound(X, Y, search.u, search.v, search.WL, search.WR)
    kappa = Bound(k_lo.lo, k_hi.hi)
    phi = phi_bound(kappa, tau, eps, r)
    bounds = {"tau": tau, "tau_tanh": tau_tanh, "kappa": kappa, "phi": phi, "c_max_abs": c_size, "c_float64_error": c_err}
    if op.kind == "qk":
        bounds["gamma_native"] = native_gamma(op)
    # ---- float64 estimates (not certified) ----
    T_float = X @ Y.T
    A, A_T = attention_matrix(op), retained_softmax(T_float, b)
    eps_f = float(parse_tolerance(eps))
    tau_f = norm(A - A_T)
    kappa_f = search.upper_estimate
    estimates = {
        "tau": tau_f, "kappa_upper": kappa_f, "kappa_dual": search.lower_estimate,
        "kappa_unoptimised": float(np.sqrt((X0**2).sum(1).max() * (Y0**2).sum(1).max())),
        "rank_C": numerical_rank(np.linalg.svd(C, compute_uv=False)),
        "rank_T": numerical_rank(np.linalg.svd(T_float, compute_uv=False)) if T_float.any() else 0,
        "retained_energy": float((s[:r] ** 2).sum() / max((s**2).sum(), 1e-300)),
        "refactor_gap_max_abs": refactor_gap,
    }
    if tau_f < eps_f:
        estimates["phi"] = float((1 + kappa_f / (eps_f - tau_f) ** 2) ** (r / 2))
    return GeometrySummary((m, n), r, eps, label, bounds, estimates, X, Y, b, s)
