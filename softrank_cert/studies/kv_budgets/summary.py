"""The per-layer summary of a KV-budget report (UNTRUSTED arithmetic on verified integers).

For each model, document, width, layer, policy and tolerance: how many heads, the median
certified lower end (the minimum cache for any common-set compression), the median certified
budget of the policy, and the median of their ratio -- how far the policy is from the certified
lower bound.  Heads without a certified budget are counted, not guessed.
"""

from __future__ import annotations

import statistics
from typing import Any


def _key(record: dict[str, Any]) -> tuple[str, str, int | str, int]:
    layer = record["layer"] if record["layer"] is not None else -1
    return record["model"], record["document"], record["width"], layer


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sort key of a row: widths as numbers (a width ``"-"`` after them), layers as numbers."""
    model, document, width, layer, policy, eps = key
    return model, document, isinstance(width, str), 0 if isinstance(width, str) else width, str(width), layer, \
        policy, eps


def layer_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, document, width, layer, policy, eps) of the studied heads."""
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        if record["status"] != "done":
            continue
        lower = {b["eps"]: b["lower"] for b in record["brackets"]}
        for budget in record["budgets"]:
            key = (*_key(record), budget["policy"], budget["eps"])
            row = rows.setdefault(key, {"lowers": [], "budgets": [], "ratios": [], "minimal": 0, "uncertified": 0})
            k = lower.get(budget["eps"])
            if k is not None:
                row["lowers"].append(k)
            if budget["budget"] is None:
                row["uncertified"] += 1
                continue
            row["budgets"].append(budget["budget"])
            row["minimal"] += bool(budget["minimal"])
            if k:
                row["ratios"].append(budget["budget"] / k)
    out = []
    for (model, document, width, layer, policy, eps), row in sorted(rows.items(), key=lambda item: _order(item[0])):
        out.append({"model": model, "document": document, "width": width, "layer": None if layer < 0 else layer,
                    "policy": policy, "eps": eps, "heads": len(row["lowers"]) or len(row["budgets"]),
                    "median_lower": _median(row["lowers"]), "median_budget": _median(row["budgets"]),
                    "median_ratio": _median(row["ratios"]), "minimal": row["minimal"],
                    "uncertified": row["uncertified"]})
    return out


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


__all__ = ["layer_summary"]
