"""Support experiments (front end): queries and keys on a finite grid, the sphere S^{d-1} or the
ball B^d, scaled to a radius product kappa; brackets verified by the kernel; growth exponents.

DESIGN.md section 1, "Supports": as ``kappa/eps^2`` grows, ranks should grow like
``(kappa/eps^2)^e`` with ``e = r/2`` (grid in r dimensions), ``(d-1)/2`` (sphere S^{d-1}),
``d/2`` (ball B^d), until they reach ``p``.  The exponent fits here are float64 least squares
on certified ends (the ends are certified, the fitted slopes are estimates).

Operators: ``Q = kappa * P``, ``K = P`` (``qk``, ``beta = 1``) for a point set ``P`` with
``max_i ||P_i||_2 = 1`` (up to rounding), so the native radius product is ``kappa``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import InvalidInputError
from ..kernel import Operator, parse_tolerance

SUPPORTS = ("grid", "sphere", "ball")
DEFAULT_KAPPAS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
_GOLDEN = math.pi * (3.0 - math.sqrt(5.0))


def theory_exponent(support: str, dim: int) -> float:
    """The theorem's exponent: r/2 (grid), (d-1)/2 (sphere S^{d-1}), d/2 (ball B^d)."""
    return {"grid": dim / 2, "sphere": (dim - 1) / 2, "ball": dim / 2}[support]


def _fibonacci_sphere(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    rho = np.sqrt(np.maximum(0.0, 1 - z * z))
    t = _GOLDEN * np.arange(n)
    return np.stack([rho * np.cos(t), rho * np.sin(t), z], axis=1)


def support_points(support: str, dim: int, n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` deterministic points of the support in R^dim, max 2-norm 1.

    grid: the ``k^dim`` grid ``{-1, ..., 1}^dim`` with ``k = round(n^(1/dim))`` (so ``n`` is
    rounded to ``k^dim``); sphere: ``{-1, +1}`` (dim 1, alternating), equally spaced on the
    circle (dim 2), Fibonacci points (dim 3), normalised Gaussians (dim > 3); ball: equally spaced
    on ``[-1, 1]`` (dim 1), a sunflower disc (dim 2), uniform random in B^dim (dim > 2).
    """
    if support not in SUPPORTS:
        raise InvalidInputError(f"support must be one of {', '.join(SUPPORTS)}, got {support!r}")
    if not isinstance(dim, int) or dim < 1 or dim > 64:
        raise InvalidInputError(f"--dim must be an integer in [1, 64], got {dim!r}")
    if not isinstance(n, int) or n < 2 or n > 4096:
        raise InvalidInputError(f"--n must be an integer in [2, 4096], got {n!r}")
    rng = np.random.default_rng(seed)
    if support == "grid":
        k = max(2, int(round(n ** (1.0 / dim))))
        axis = np.linspace(-1.0, 1.0, k)
        P = np.stack(np.meshgrid(*([axis] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
    elif support == "sphere":
        if dim == 1:
            P = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)[:, None]
        elif dim == 2:
            t = 2 * np.pi * np.arange(n) / n
            P = np.stack([np.cos(t), np.sin(t)], axis=1)
        elif dim == 3:
            P = _fibonacci_sphere(n)
        else:
            P = rng.standard_normal((n, dim))
    else:
        if dim == 1:
            P = np.linspace(-1.0, 1.0, n)[:, None]
        elif dim == 2:
            i = np.arange(n) + 0.5
            rad, t = np.sqrt(i / n), _GOLDEN * np.arange(n)
            P = np.stack([rad * np.cos(t), rad * np.sin(t)], axis=1)
        else:
            G = rng.standard_normal((n, dim))
            G /= np.linalg.norm(G, axis=1, keepdims=True)
            P = G * rng.random((n, 1)) ** (1.0 / dim)
    norms = np.linalg.norm(P, axis=1)
    if support == "sphere":
        P = P / norms[:, None]
    else:
        P = P / norms.max()
    return np.ascontiguousarray(P, dtype=np.float64)


def support_operator(support: str, dim: int, n: int, kappa: float, seed: int = 0) -> Operator:
    """``qk`` operator with ``Q = kappa P``, ``K = P``, ``beta = 1`` (radius product kappa)."""
    if not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa > 0):
        raise InvalidInputError(f"kappa must be a positive finite number, got {kappa!r}")
    P = support_points(support, dim, n, seed)
    return Operator("qk", {"Q": float(kappa) * P, "K": P.copy()}, beta="1")


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send file-descriptor-level stdout to stderr (solver banners must not spoil --json output)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        os.dup2(sys.stderr.fileno(), fd)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


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


def _geometry_rows(op: Operator, eps: str, lower: int, ranks: list[int]) -> list[dict[str, Any]]:
    """Certified tau, Phi for truncated-SVD T of each rank, and lower/Phi_upper (a C_r lower estimate)."""
    from ..numfmt import format_down, format_up
    from .report import compute_geometry

    rows = []
    for r in ranks:
        if r > op.p:
            break
        g = compute_geometry(op, r, eps)
        row: dict[str, Any] = {"r": r, "tau": None if g.tau.hi is None else format_up(g.tau.hi, 4),
                               "kappa_upper": None if g.kappa.hi is None else format_up(g.kappa.hi, 4),
                               "kappa_lower": None if g.kappa.lo is None else format_down(g.kappa.lo, 4),
                               "phi": None if g.phi.hi is None else format_up(g.phi.hi, 4),
                               "lower_over_phi": None}
        if g.phi.hi is not None and g.phi.hi > 0:
            row["lower_over_phi"] = format_down(Fraction(lower) / g.phi.hi, 4)
        rows.append(row)
    return rows


def sweep(support: str, dim: int, *, eps: str = "0.25", n: int = 64, kappas: tuple[float, ...] = DEFAULT_KAPPAS,
          budget_seconds: float = 6.0, geometry_ranks: list[int] | None = None,
          progress: Callable[[int, int, float], None] | None = None) -> list[SweepPoint]:
    """Bracket the support operator at every kappa (kernel-verified ends) at one tolerance."""
    from ..solvers.bracket import bracket_operator

    parse_tolerance(eps)
    if len(kappas) < 2:
        raise InvalidInputError("a sweep needs at least two kappa values")
    points = []
    for index, kappa in enumerate(kappas):
        op = support_operator(support, dim, n, kappa)
        start = time.perf_counter()
        with stdout_to_stderr():
            (b,) = bracket_operator(op, [eps], budget_seconds=budget_seconds)
        seconds = time.perf_counter() - start
        pt = SweepPoint(float(kappa), eps, b.lower.k, b.upper.r, op.p, b.lower.method, b.upper.construction, seconds)
        if geometry_ranks:
            pt.geometry = _geometry_rows(op, eps, b.lower.k, geometry_ranks)
        points.append(pt)
        if progress is not None:
            progress(index + 1, len(kappas), kappa)
    return points


def sweep_document(support: str, dim: int, eps: str, n: int, points: list[SweepPoint]) -> dict[str, Any]:
    lower, used_lower = fit_exponent(points, "lower")
    upper, used_upper = fit_exponent(points, "upper")
    return {"support": support, "dim": dim, "eps": eps, "n": points[0].p if points else n,
            "exponent_theory": theory_exponent(support, dim),
            "exponent_fit_lower": lower, "exponent_fit_upper": upper,
            "fit_points_lower": used_lower, "fit_points_upper": used_upper,
            "fit_note": "least-squares slope of log(end) vs log(1 + kappa/eps^2) over points with 1 < end < p "
                        "(float64 estimate from certified ends); null = fewer than two such points",
            "points": [pt.to_json() for pt in points]}


def plot_sweeps(documents: list[dict[str, Any]], out: str, title: str | None = None) -> None:
    """Log-log plot of certified lower and upper ends against 1 + kappa/eps^2 (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, doc in enumerate(documents):
        color = colors[index % len(colors)]
        eps = float(parse_tolerance(doc["eps"]))
        x = np.array([1 + pt["kappa"] / eps**2 for pt in doc["points"]])
        lo = np.array([pt["lower"] for pt in doc["points"]], dtype=float)
        up = np.array([pt["upper"] for pt in doc["points"]], dtype=float)
        label = f"{doc['support']} d={doc['dim']}"
        ax.plot(x, up, "o-", color=color, label=f"{label}: upper (theory {doc['exponent_theory']:g})")
        ax.plot(x, lo, "v--", color=color, alpha=0.7, label=f"{label}: lower")
        ax.fill_between(x, np.maximum(lo, 0.8), up, color=color, alpha=0.08)
        e = doc["exponent_theory"]
        if e > 0:
            anchor = max(up[0], 1.0)
            ax.plot(x, anchor * (x / x[0]) ** e, ":", color=color, linewidth=1)
        ax.axhline(doc["points"][0]["p"], color="grey", linewidth=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("1 + kappa / eps^2")
    ax.set_ylabel("certified rank bracket [lower, upper]")
    ax.set_title(title or "certified ranks on supports (dotted: theory slope)")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
