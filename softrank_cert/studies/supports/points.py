"""One point of a supports sweep (UNTRUSTED study logic): its operator name, worker task and result.

Shared by the sweep (:mod:`~softrank_cert.studies.supports`) and its campaign
(:mod:`~softrank_cert.studies.supports.campaign`), which both import this module and not each
other's internals.  A point is one kappa: the support operator
:func:`~softrank_cert.geometry.supports.support_operator` (``Q = kappa P, K = P``), bracketed at
one tolerance by :func:`~softrank_cert.solvers.bracket.bracket_operator` with both ends VERIFIED
by the trusted kernel.  ``lower <= r_eps(A) <= upper`` is the certified content of a
:class:`SweepPoint`; its row spread is a float64 estimate and its geometry rows are certified
bounds of the geometry summary (its numbers from the kernel's enclosures).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ...kernel import Operator, parse_tolerance


def x_of(kappa: float, eps: str) -> Fraction:
    """The tolerance scale ``x = 1 + kappa/eps^2`` exactly (kappa is the float64 scale of Q)."""
    return 1 + Fraction(kappa) / parse_tolerance(eps) ** 2


def point_name(support: str, dim: int, n: int, eps: str, kappa: float) -> str:
    """The operator name (and certificate file stem) of one point, e.g. ``ball-d1-n1024-eps0.25-kappa16``."""
    return f"{support}-d{dim}-n{n}-eps{eps}-kappa{kappa:.6g}"


def provenance(support: str, dim: int, n: int, kappa: float) -> dict[str, Any]:
    """The provenance a point's certificate carries (and a resume requires, exactly)."""
    return {"study": "softrank supports", "support": support, "dim": dim, "n": n, "kappa": repr(float(kappa)),
            "construction": "Q = kappa P, K = P, beta = 1 (softrank_cert.geometry.supports.support_operator)"}


@dataclass
class SweepPoint:
    """One kappa of a sweep: the kernel-verified ends ``lower <= r_eps(A) <= upper``."""

    kappa: float
    eps: str
    lower: int
    upper: int
    p: int
    lower_method: str
    upper_construction: str
    seconds: float | None
    geometry: list[dict[str, Any]] = field(default_factory=list)  # per retained rank r (C_r estimates)
    spread: dict[str, float] = field(default_factory=dict)  # float64 estimates of row concentration
    certificate: str | None = None  # its file with --out
    resumed: bool = False

    @property
    def x(self) -> Fraction:
        return x_of(self.kappa, self.eps)

    def to_json(self) -> dict[str, Any]:
        return {"kappa": self.kappa, "x": float(self.x), "eps": self.eps, "lower": self.lower, "upper": self.upper,
                "p": self.p, "lower_method": self.lower_method, "upper_construction": self.upper_construction,
                "seconds": None if self.seconds is None else round(self.seconds, 3), "geometry": self.geometry,
                "estimates": dict(self.spread), "certificate": self.certificate, "resumed": self.resumed}


def geometry_rows(op: Operator, eps: str, lower: int, ranks: list[int]) -> list[dict[str, Any]]:
    """Certified tau, Phi for truncated-SVD T of each rank, and lower/Phi_upper (a C_r lower estimate)."""
    from ...geometry.summary import compute_geometry
    from ...plumbing.json_contract import bound_down, bound_up

    rows = []
    for r in ranks:
        if r > op.p:
            break
        g = compute_geometry(op, r, eps)
        row: dict[str, Any] = {"r": r, "tau": bound_up(g.tau.hi), "kappa_upper": bound_up(g.kappa.hi),
                               "kappa_lower": bound_down(g.kappa.lo), "phi": bound_up(g.phi.hi),
                               "lower_over_phi": None}
        if g.phi.hi is not None and g.phi.hi > 0:
            row["lower_over_phi"] = bound_down(Fraction(lower) / g.phi.hi)
        rows.append(row)
    return rows


def point_details(op: Operator, eps: str, lower: int, ranks: list[int] | None) -> dict[str, Any]:
    """The parts of a point that do not come from its certificate: the row spread (float64
    estimates) and, for ``ranks``, the certified geometry rows."""
    from ...geometry.supports import row_spread

    return {"spread": row_spread(op), "geometry": geometry_rows(op, eps, lower, ranks) if ranks else []}


def support_point_task(support: str, dim: int, n: int, kappa: float, eps: str, work: float | None,
                       budget_seconds: float | None, ranks: list[int] | None, progress: Any = None,
                       device: Any = None) -> dict[str, Any]:
    """One kappa of a sweep (a worker task: plain data in, plain data out): the unsigned certificate
    of the support operator's verified bracket at ``eps`` (written here, from the sealed ends), the
    solver seconds and :func:`point_details`.

    The search is bounded as ``softrank bracket``'s: ``work`` units (None: the driver's default
    work for the operator's size, :func:`~softrank_cert.solvers.effective_work`), capped by
    ``budget_seconds`` of wall time when given (alone, it replaces the work bound).  Without a
    time cap the same arguments give the same bracket, byte for byte, however busy the machine.
    ``device``: where the search runs (:func:`~softrank_cert.solvers.resolve_device`; recorded in the
    certificate's provenance off the numpy path)."""
    from ...certio.issuing import certificate_for
    from ...geometry.supports import stdout_to_stderr, support_operator
    from ...solvers import bracket_operator, resolve_device

    op = support_operator(support, dim, n, kappa)
    where = resolve_device(device, op.shape)
    start = time.perf_counter()
    with stdout_to_stderr():
        (b,) = bracket_operator(op, [eps], work=work, budget_seconds=budget_seconds, progress=progress, device=where)
    seconds = time.perf_counter() - start
    certificate = certificate_for(point_name(support, dim, n, eps, kappa), op, [b],
                                  {**provenance(support, dim, n, kappa), **where.provenance()})
    return {"certificate": certificate, "seconds": seconds, **point_details(op, eps, b.lower.k, ranks)}


def point_from_task(kappa: float, eps: str, p: int, value: dict[str, Any]) -> SweepPoint:
    """The :class:`SweepPoint` of a :func:`support_point_task` result."""
    (b,) = value["certificate"]["brackets"]
    lower, upper = b["lower"], b["upper"]
    return SweepPoint(float(kappa), eps, lower["k"], upper["r"], p, lower["method"], upper["construction"],
                      value["seconds"], value["geometry"], value["spread"])
