"""The adversarial search of ``lower / Phi`` over stretched support sets
(softrank_cert.studies.supports.search, run at scale by benchmarks/supports_experiment.py), on
the smallest instances."""

from __future__ import annotations

from softrank_cert.studies.supports.search import Instance, evaluate, search


def test_an_instance_is_bracketed_and_its_geometry_row_certified() -> None:
    result = evaluate(Instance("sphere", 2, 8, 4.0, (1.0, 0.5)), "0.25", [1], budget_seconds=5.0)
    assert 1 <= result["lower"] <= result["upper"] <= result["p"] == 8
    (row,) = result["geometry"]
    assert row["r"] == 1 and {"phi", "tau", "lower_over_phi"} <= set(row)


def test_the_search_reports_every_rank_and_its_kappa_trend() -> None:
    doc = search(ranks=(1,), evaluations=1, start=1, budget_seconds=5.0, kappa_factors=(1.0,), seed=3)
    (rank,) = doc["per_rank"]
    assert rank["r"] == 1 and len(rank["kappa_trend"]) == (0 if rank["instance"] is None else 1)
