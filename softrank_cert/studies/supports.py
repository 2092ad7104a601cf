"""Supports sweeps (UNTRUSTED study logic): certified ranks on grid / sphere / ball supports.

DESIGN.md section 1, "Supports": as ``kappa/eps^2`` grows, ranks should grow like
``(kappa/eps^2)^e`` with ``e = r/2`` (grid in r dimensions), ``(d-1)/2`` (sphere S^{d-1}),
``d/2`` (ball B^d), until they reach ``p``.  A sweep brackets the support operator of
:func:`~softrank_cert.geometry.supports.support_operator` at every kappa of a list, each end
VERIFIED by the trusted kernel (:func:`~softrank_cert.solvers.bracket.bracket_operator`);
the exponent fits here are float64 least squares on those certified ends (the ends are
certified, the fitted slopes are estimates), and the optional geometry rows are certified
bounds of :mod:`softrank_cert.geometry`.  ``softrank supports`` and
``benchmarks/supports_experiment.py`` run them.
"""

from __future__ import annotations

import math
import time
from contextlib import closing
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ..errors import InvalidInputError
from ..kernel import Operator, parse_tolerance

DEFAULT_KAPPAS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@dataclass
class SweepPoint:
    kappa: float
    eps: str
    lower: int
    upper: int
    p: int
    lower_method: str
    upper_construction: str
    seconds: float
    geometry: list[dict[str, Any]] = field(default_factory=list)  # per retained rank r (C_r estimates)

    def to_json(self) -> dict[str, Any]:
        return {"kappa": self.kappa, "eps": self.eps, "lower": self.lower, "upper": self.upper, "p": self.p,
                "lower_method": self.lower_method, "upper_construction": self.upper_construction,
                "seconds": round(self.seconds, 3), "geometry": self.geometry}


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


def geometry_rows(op: Operator, eps: str, lower: int, ranks: list[int]) -> list[dict[str, Any]]:
    """Certified tau, Phi for truncated-SVD T of each rank, and lower/Phi_upper (a C_r lower estimate)."""
    from ..geometry.report import compute_geometry
    from ..plumbing.reports import bound_down, bound_up

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


def sweep_point(support: str, dim: int, eps: str, n: int, kappa: float, budget_seconds: float,
                ranks: list[int] | None) -> SweepPoint:
    """One kappa of :func:`sweep` (also its task for worker processes or a Dask cluster): bracket
    the support operator at ``eps`` (kernel-verified ends), then the optional geometry rows."""
    from ..geometry.supports import stdout_to_stderr, support_operator
    from ..solvers.bracket import bracket_operator

    op = support_operator(support, dim, n, kappa)
    start = time.perf_counter()
    with stdout_to_stderr():
        (b,) = bracket_operator(op, [eps], budget_seconds=budget_seconds)
    seconds = time.perf_counter() - start
    pt = SweepPoint(float(kappa), eps, b.lower.k, b.upper.r, op.p, b.lower.method, b.upper.construction, seconds)
    if ranks:
        pt.geometry = geometry_rows(op, eps, b.lower.k, ranks)
    return pt


def sweep(support: str, dim: int, *, eps: str = "0.25", n: int = 64, kappas: tuple[float, ...] = DEFAULT_KAPPAS,
          budget_seconds: float = 6.0, geometry_ranks: list[int] | None = None,
          progress: Callable[[int, int, float], None] | None = None, jobs: int = 1,
          scheduler: str | None = None) -> list[SweepPoint]:
    """Bracket the support operator at every kappa (kernel-verified ends) at one tolerance.

    ``progress(done, total, kappa)`` after each point.  With ``jobs > 1`` or a Dask ``scheduler``
    every kappa is one :func:`sweep_point` task (the same computation) in worker processes or on
    the cluster; the points come back in kappa order either way.
    """
    parse_tolerance(eps)
    if len(kappas) < 2:
        raise InvalidInputError("a sweep needs at least two kappa values")
    if jobs == 1 and not scheduler:
        points = []
        for index, kappa in enumerate(kappas):
            points.append(sweep_point(support, dim, eps, n, kappa, budget_seconds, geometry_ranks))
            if progress is not None:
                progress(index + 1, len(kappas), kappa)
        return points
    from ..plumbing.parallel import run_ordered

    finished: list[int] = []

    def done(i: int) -> None:
        finished.append(i)
        if progress is not None:
            progress(len(finished), len(kappas), kappas[i])

    tasks = [(support, dim, eps, n, kappa, budget_seconds, geometry_ranks) for kappa in kappas]
    with closing(run_ordered(sweep_point, tasks, jobs=jobs, scheduler=scheduler, done=done)) as results:
        return list(results)


def sweep_document(support: str, dim: int, eps: str, n: int, points: list[SweepPoint]) -> dict[str, Any]:
    from ..geometry.supports import theory_exponent

    lower, used_lower = fit_exponent(points, "lower")
    upper, used_upper = fit_exponent(points, "upper")
    return {"support": support, "dim": dim, "eps": eps, "n": points[0].p if points else n,
            "exponent_theory": theory_exponent(support, dim),
            "estimates": {"exponent_fit_lower": lower, "exponent_fit_upper": upper},
            "fit_points_lower": used_lower, "fit_points_upper": used_upper,
            "fit_note": "estimates: least-squares slopes of log(end) vs log(1 + kappa/eps^2) over points with "
                        "1 < end < p (float64 estimates from certified ends); null = fewer than two such points",
            "points": [pt.to_json() for pt in points]}


def plot_sweeps(documents: list[dict[str, Any]], out: str, title: str | None = None) -> None:
    """Write :func:`sweeps_figure` to ``out`` (PNG, PDF or SVG as its suffix says)."""
    import matplotlib.pyplot as plt

    from ..plumbing.plotting import save_figure

    fig = sweeps_figure(documents, title)
    try:
        save_figure(fig, out)
    finally:
        plt.close(fig)


def _fit(doc: dict[str, Any], side: str) -> float | None:
    return (doc.get("estimates") or {}).get(f"exponent_fit_{side}")


def sweeps_figure(documents: list[dict[str, Any]], title: str | None = None) -> Any:
    """Log-log plot of certified lower and upper ends against ``1 + kappa/eps^2``: per sweep the
    upper and lower ends (every line labelled, with the fitted slopes, float64 estimates), the
    theory slope (dotted) and the rank ceiling ``p`` (grey); ``eps`` and ``n`` in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plumbing.plotting import label_log_axis

    fig, ax = plt.subplots(figsize=(9.6, 5.0))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs_all: list[float] = []
    ys_all: list[float] = []
    ceilings: dict[int, list[str]] = {}
    for index, doc in enumerate(documents):
        color = colors[index % len(colors)]
        eps = float(parse_tolerance(doc["eps"]))
        x = np.array([1 + pt["kappa"] / eps**2 for pt in doc["points"]])
        lo = np.array([pt["lower"] for pt in doc["points"]], dtype=float)
        up = np.array([pt["upper"] for pt in doc["points"]], dtype=float)
        name = f"{doc['support']} $d = {doc['dim']}$"

        def slope(side: str) -> str:
            value = _fit(doc, side)
            return "fit n/a" if value is None else f"fit slope {0.0 if abs(value) < 0.005 else value:.2f}"

        ax.plot(x, up, "o-", color=color, label=f"{name}: certified upper ({slope('upper')})")
        ax.plot(x, lo, "v--", color=color, alpha=0.75, label=f"{name}: certified lower ({slope('lower')})")
        ax.fill_between(x, np.maximum(lo, 0.8), up, color=color, alpha=0.08, linewidth=0,
                        label=r"$r_\varepsilon(A)$ lies in the shaded band" if index == 0 else None)
        e = doc["exponent_theory"]
        if e > 0:
            anchor = max(up[0], 1.0)
            ax.plot(x, anchor * (x / x[0]) ** e, ":", color=color, linewidth=1.2,
                    label=f"{name}: theory slope {e:g}")
        ceilings.setdefault(int(doc["points"][0]["p"]), []).append(name)
        xs_all += list(x)
        ys_all += list(lo) + list(up)
    for p, names in sorted(ceilings.items()):
        ax.axhline(p, color="grey", linewidth=0.8, linestyle="-",
                   label=f"rank ceiling $p = {p}$" + (f" ({', '.join(names)})" if len(ceilings) > 1 else ""))
        ys_all.append(p)
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_log_axis(ax.xaxis, xs_all)
    label_log_axis(ax.yaxis, [max(y, 1.0) for y in ys_all], integers=True)
    ax.set_xlabel(r"$1 + \kappa / \varepsilon^2$")
    ax.set_ylabel(r"certified bracket of $r_\varepsilon(A)$: lower, upper")
    setting = ", ".join(sorted({f"$\\varepsilon = {doc['eps']}$, $n = {doc['n']}$" for doc in documents}))
    ax.set_title((title or "certified ranks on supports") + (f"\n{setting}" if setting else ""), fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.text(0.01, 0.01, "fit slopes: float64 least-squares estimates from the certified ends with 1 < end < p",
             ha="left", va="bottom", fontsize=7, color="dimgrey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
