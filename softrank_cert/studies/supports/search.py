"""Adversarial property test of the bound's structure (UNTRUSTED search, CERTIFIED ratios).

The theorem says ``r_eps(A) <= min{p, C_r Phi}`` with ``Phi = (1 + kappa/(eps - tau)^2)^(r/2)``
for a retained part T of rank r (``tau = ||A - A_T||``, ``kappa = kappa(T)``).  So for every
instance the certified ratio ``lower / Phi_upper`` (a verified lower end of the rank over a
certified upper bound of Phi, :func:`~softrank_cert.studies.supports.points.geometry_rows`, rounded
down) is at most ``C_r`` -- if the theorem holds.  This module searches for instances that
push that ratio up, per rank r:

* instances: a support point set (grid / sphere / ball in 1..3 dimensions, ``n`` points)
  stretched by a diagonal ``diag(s)`` (renormalised to max norm 1), at radius product kappa;
* search: a seeded random start, then a hill climb per r (kappa times ``2^(+-1/2)``, one
  stretch factor times ``2^(+-1/2)``, n times ``3/2`` or ``2/3``), each step accepted only
  when the certified ratio grows; ``evaluations`` bounds the work;
* then the best instance of each r is re-evaluated at kappa times 1, 2, 4, 8: a ratio that
  keeps growing with kappa would be evidence against the theorem; a bounded one is a
  measured lower estimate of ``C_r`` (never a value of it).  (``C_r >= 1`` holds trivially, from
  ``kappa -> 0``; the search stays at ``kappa >= 1``, where the ratio says something about growth.)

Comparisons use the exact rationals of the certified decimal strings.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from ...kernel import Operator

#: Point counts the search may use (small: every evaluation brackets and encloses the geometry).
N_RANGE = (8, 64)
#: Radius products searched.  Below kappa ~ 1 the ratio tends to the trivial value: as kappa -> 0,
#: Phi -> 1 while the verified lower end stays 1 (||A|| = 1 > eps), so C_r >= 1 always; the
#: search looks where the rank has room to grow (x = 1 + kappa/eps^2 >= 17 at eps = 0.25).
KAPPA_RANGE = (1.0, 64.0)


@dataclass(frozen=True)
class Instance:
    """A stretched support point set at radius product ``kappa``."""

    support: str
    dim: int
    n: int
    kappa: float
    stretch: tuple[float, ...]
    seed: int = 0

    def operator(self) -> Operator:
        from ...geometry.supports import support_points

        P = support_points(self.support, self.dim, self.n, self.seed) * np.array(self.stretch)
        P = P / np.linalg.norm(P, axis=1).max()
        return Operator("qk", {"Q": self.kappa * P, "K": P.copy()}, beta="1")


def evaluate(instance: Instance, eps: str, ranks: list[int], budget_seconds: float) -> dict[str, Any]:
    """The verified bracket of the instance and its geometry rows (certified ``lower_over_phi`` per r)."""
    from ...geometry.supports import stdout_to_stderr
    from ...solvers import bracket_operator
    from .points import geometry_rows

    op = instance.operator()
    with stdout_to_stderr():
        (b,) = bracket_operator(op, [eps], budget_seconds=budget_seconds)
    return {"instance": asdict(instance), "p": op.p, "lower": b.lower.k, "upper": b.upper.r,
            "geometry": geometry_rows(op, eps, b.lower.k, ranks)}


def ratio(result: dict[str, Any], r: int) -> Fraction | None:
    """The certified ``lower / Phi_upper`` of rank ``r`` in an :func:`evaluate` result (exact)."""
    for row in result["geometry"]:
        if row["r"] == r and row["lower_over_phi"] is not None:
            return Fraction(row["lower_over_phi"])
    return None


def _random_instance(rng: np.random.Generator) -> Instance:
    from ...geometry.supports import SUPPORTS

    dim = int(rng.integers(1, 4))
    kappa = 2.0 ** rng.uniform(math.log2(KAPPA_RANGE[0]), math.log2(KAPPA_RANGE[1]))
    return Instance(str(rng.choice(SUPPORTS)), dim, int(rng.integers(N_RANGE[0], N_RANGE[1] + 1)), float(f"{kappa:.6g}"),
                    tuple(float(f"{2.0 ** rng.uniform(-1, 1):.6g}") for _ in range(dim)), int(rng.integers(0, 1000)))


def _neighbour(instance: Instance, rng: np.random.Generator) -> Instance:
    move = int(rng.integers(0, 3))
    if move == 0:
        kappa = min(KAPPA_RANGE[1], max(KAPPA_RANGE[0], instance.kappa * 2.0 ** rng.choice([-0.5, 0.5])))
        return replace(instance, kappa=float(f"{kappa:.6g}"))
    if move == 1:
        i = int(rng.integers(0, instance.dim))
        stretch = list(instance.stretch)
        stretch[i] = float(f"{stretch[i] * 2.0 ** rng.choice([-0.5, 0.5]):.6g}")
        return replace(instance, stretch=tuple(stretch))
    n = int(round(instance.n * float(rng.choice([2 / 3, 3 / 2]))))
    return replace(instance, n=min(N_RANGE[1], max(N_RANGE[0], n)))


def search(*, eps: str = "0.25", ranks: Sequence[int] = (1, 2, 3, 4), evaluations: int = 40, start: int = 12,
           budget_seconds: float = 1.0, seed: int = 24, kappa_factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0),
           progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Search (see the module docstring); ``evaluations`` bounds the search proper (``start`` of
    them random), then ``len(kappa_factors)`` evaluations per rank follow the best instance."""
    ranks = list(ranks)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    done = 0
    results: list[dict[str, Any]] = []

    def run(instance: Instance, stage: str) -> dict[str, Any]:
        nonlocal done
        result = evaluate(instance, eps, ranks, budget_seconds)
        results.append(result)
        done += 1
        if progress is not None:
            progress(stage, done, evaluations + len(ranks) * len(kappa_factors))
        return result

    best: dict[int, dict[str, Any]] = {}

    def consider(result: dict[str, Any]) -> None:
        for r in ranks:
            value = ratio(result, r)
            if value is not None and (r not in best or value > ratio(best[r], r)):  # type: ignore[operator]  # kept: a ratio
                best[r] = result

    for _ in range(min(start, evaluations)):
        consider(run(_random_instance(rng), "random start"))
    steps = evaluations - min(start, evaluations)
    for step in range(steps):
        if not best:
            consider(run(_random_instance(rng), "random start"))
            continue
        r = ranks[step % len(ranks)] if ranks[step % len(ranks)] in best else next(iter(best))
        candidate = _neighbour(Instance(**{**best[r]["instance"], "stretch": tuple(best[r]["instance"]["stretch"])}), rng)
        consider(run(candidate, f"hill climb r={r}"))
    per_rank: list[dict[str, Any]] = []
    for r in ranks:
        if r not in best:
            per_rank.append({"r": r, "lower_over_phi": None, "instance": None, "kappa_trend": []})
            continue
        base = Instance(**{**best[r]["instance"], "stretch": tuple(best[r]["instance"]["stretch"])})
        trend = []
        for factor in kappa_factors:
            result = run(replace(base, kappa=float(f"{base.kappa * factor:.6g}")), f"kappa trend r={r}")
            value = ratio(result, r)
            row: dict[str, Any] = next((g for g in result["geometry"] if g["r"] == r), {})
            trend.append({"kappa": result["instance"]["kappa"], "lower": result["lower"], "upper": result["upper"],
                          "phi": row.get("phi"), "tau": row.get("tau"),
                          "lower_over_phi": None if value is None else row["lower_over_phi"]})
        row = next(g for g in best[r]["geometry"] if g["r"] == r)
        per_rank.append({"r": r, "lower_over_phi": row["lower_over_phi"], "phi": row["phi"], "tau": row["tau"],
                         "lower": best[r]["lower"], "upper": best[r]["upper"], "p": best[r]["p"],
                         "instance": best[r]["instance"], "kappa_trend": trend,
                         "trend": _trend([t["lower_over_phi"] for t in trend])})
    return {"eps": eps, "ranks": ranks, "evaluations": done, "budget_seconds": budget_seconds, "seed": seed,
            "seconds": round(time.perf_counter() - t0, 1), "per_rank": per_rank,
            "note": "lower_over_phi: certified lower end / certified upper bound of Phi, rounded down; at most C_r if "
                    "the theorem holds, so the maximum found is a measured lower estimate of C_r (never its value); "
                    "kappa_trend: the best instance of each r at growing kappa (growing without bound would be "
                    "evidence against the theorem)"}


def _trend(values: list[str | None]) -> str:
    """``decreasing`` / ``increasing`` / ``mixed`` / ``undefined`` over the kappa trend (exact comparisons)."""
    known = [Fraction(v) for v in values if v is not None]
    if len(known) < 2:
        return "undefined"
    if all(b <= a for a, b in zip(known, known[1:])):
        return "non-increasing"
    if all(b >= a for a, b in zip(known, known[1:])):
        return "non-decreasing"
    return "mixed"
