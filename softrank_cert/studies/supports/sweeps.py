"""Supports sweeps (UNTRUSTED study logic): certified ranks on grid / sphere / ball supports.

docs/design.md section 1, "Supports": as ``x = 1 + kappa/eps^2`` grows, ranks should grow like
``x^e`` with ``e = r/2`` (grid in r dimensions), ``(d-1)/2`` (sphere S^{d-1}), ``d/2`` (ball
B^d), until they reach ``p``.  A sweep brackets the support operator of
:func:`~softrank_cert.geometry.supports.support_operator` at every kappa of a list, each end
VERIFIED by the trusted kernel (:func:`~softrank_cert.solvers.bracket.bracket_operator`).  From those integer ends:

* the **certified local exponents** between consecutive points
  (:mod:`~softrank_cert.studies.supports.exponents`, Arb logarithms rounded outward): the main
  result;
* least-squares slopes of ``log(end)`` against ``log x`` (:func:`fit_exponent`): float64
  estimates, reported under ``estimates``;
* per point, how spread the softmax rows are (float64 estimates,
  :func:`~softrank_cert.geometry.supports.row_spread`) and optionally the certified geometry
  rows (tau, kappa, Phi and ``lower / Phi_upper`` per retained rank r).

A point's task and result (:class:`~.points.SweepPoint`) are in
:mod:`~softrank_cert.studies.supports.points`.  ``softrank supports`` and
``benchmarks/supports_experiment.py`` run them; with ``--out`` the certificates and the campaign
manifest are written by :mod:`~softrank_cert.studies.supports.campaign`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ...geometry.supports import MAX_SWEEP_POINTS, MAX_X
from ...kernel import parse_tolerance
from .points import SweepPoint


def kappas_for_x_range(eps: str, x_min: float, x_max: float, points: int) -> tuple[float, ...]:
    """Radius products ``kappa_i = (x_i - 1) eps^2`` (in float64) for ``points`` values ``x_i``
    spaced geometrically from ``x_min`` to ``x_max`` (``1 < x_min < x_max <= 1e6``), each ``x_i``
    rounded to 6 significant digits (the exact x of a point is :func:`~.points.x_of` of its kappa)."""
    eps_q = parse_tolerance(eps)
    if not (isinstance(points, int) and 2 <= points <= MAX_SWEEP_POINTS):
        raise InvalidInputError(f"--points must be an integer in [2, {MAX_SWEEP_POINTS}], got {points!r}")
    if not (math.isfinite(x_min) and math.isfinite(x_max) and 1 < x_min < x_max <= MAX_X):
        raise InvalidInputError(f"the x range needs 1 < --x-min < --x-max <= {MAX_X:g}, got {x_min:g} and {x_max:g}")
    ratio = (x_max / x_min) ** (1.0 / (points - 1))
    values = [(float(f"{x_min * ratio**i:.6g}") - 1) * float(eps_q) ** 2 for i in range(points)]
    if len(set(values)) != len(values):
        raise InvalidInputError("the x range is too narrow for this many --points")
    return tuple(values)


def fit_exponent(points: list[SweepPoint], side: str) -> tuple[float | None, list[float]]:
    """Least-squares slope of ``log(end)`` against ``log(1 + kappa/eps^2)`` (a float64 estimate).

    Uses only points with ``1 < end < p`` (rank 1 is the floor, p the ceiling: neither grows).
    Returns ``(slope or None if fewer than 2 usable points with distinct x, kappas used)``.
    """
    xs, ys, used = [], [], []
    for pt in points:
        end = getattr(pt, side)
        if 1 < end < pt.p:
            eps = float(parse_tolerance(pt.eps))
            xs.append(math.log1p(pt.kappa / eps**2))
            ys.append(math.log(end))
            used.append(pt.kappa)
    if len(set(xs)) < 2:
        return None, used
    slope = float(np.polyfit(np.array(xs), np.array(ys), 1)[0])
    return slope, used


def sweep(support: str, dim: int, *, eps: str = "0.25", n: int = 64, kappas: tuple[float, ...],
          work: float | None = None, budget_seconds: float | None = None, geometry_ranks: list[int] | None = None,
          jobs: int = 1, scheduler: str | None = None, device: Any = None) -> list[SweepPoint]:
    """Bracket the support operator at every kappa (kernel-verified ends) at one tolerance, in
    kappa order, without writing certificates (for that, and for resuming:
    :func:`~.campaign.run_campaign`, which this calls).  With ``jobs > 1`` or a Dask
    ``scheduler`` every kappa is one :func:`~.points.support_point_task` in worker
    processes or on the cluster; a failed point raises its one-line error.  ``work`` and
    ``budget_seconds`` bound each point's search as in ``softrank bracket`` (default: the
    driver's deterministic work budget for the operator's size); ``device`` as there."""
    from ...geometry.supports import check_sweep_size
    from ...errors import WorkerError
    from .campaign import run_campaign

    parse_tolerance(eps)
    check_sweep_size(dim, n)
    if len(kappas) < 2:
        raise InvalidInputError("a sweep needs at least two kappa values")
    result = run_campaign(support, dim, n, eps, tuple(kappas), work=work, budget_seconds=budget_seconds,
                          ranks=geometry_ranks, jobs=jobs, scheduler=scheduler, device=device)
    if result.failed:
        first = result.failed[0]
        raise WorkerError(f"point {first['point']}: {first['reason']}", first["exit_code"])
    return result.points


def sweep_document(support: str, dim: int, eps: str, n: int, points: list[SweepPoint]) -> dict[str, Any]:
    """A sweep's report body: the certified local exponents (main result), the theory exponent,
    the float64 fits under ``estimates`` and the points."""
    from ...geometry.supports import COLLAPSED_ROW, theory_exponent
    from .exponents import exponents_document

    lower, used_lower = fit_exponent(points, "lower")
    upper, used_upper = fit_exponent(points, "upper")
    theory = theory_exponent(support, dim)
    spreads = [pt.spread for pt in points if pt.spread]
    return {"support": support, "dim": dim, "eps": eps, "n": points[0].p if points else n,
            "exponent_theory": theory,
            **exponents_document(points, theory),
            "estimates": {"exponent_fit_lower": lower, "exponent_fit_upper": upper,
                          "max_row_entry": max((s["max_row_entry"] for s in spreads), default=None),
                          "min_effective_support": min((s["min_effective_support"] for s in spreads), default=None)},
            "fit_points_lower": used_lower, "fit_points_upper": used_upper,
            "fit_note": "estimates: least-squares slopes of log(end) vs log(1 + kappa/eps^2) over points with "
                        "1 < end < p (float64 estimates from certified ends); null = fewer than two such points; "
                        f"row spread: max_ij A_ij and min_i 1/sum_j A_ij^2 (float64; rows with max > {COLLAPSED_ROW} "
                        "count as collapsed)",
            "points": [pt.to_json() for pt in points]}
