"""The report's tables from the verified records (UNTRUSTED summaries of kernel verdicts).

* :func:`group_of`: the operator name without its last component (``minilm/apache2/w64`` for
  ``minilm/apache2/w64/L0H3``; ``-`` for a name without ``/``);
* :func:`~softrank_cert.studies.panel_names.name_position`, :func:`~softrank_cert.studies.panel_names.head_of`:
  the width, layer and head of a name, by the one parser of names (:mod:`..panel_names`);
* :func:`bracket_ratio`: the one upper/lower ratio of a verified bracket (every table, figure
  and summary that shows one: the report's, the audit's, the seed-scale campaign's);
* :func:`group_rows`: per group and tolerance, the operators, the medians of the verified
  ends, the median upper/lower ratio and the share resolved (``lower == upper``);
  :func:`group_table_markdown`, the same rows as a Markdown table.

Only records with ``status == "verified"`` enter a median; the others are counted apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from ..panel_names import MAX_POSITION_DIGITS, head_of, name_position

#: The group of a name without ``/``.
NO_GROUP = "-"


def group_of(name: str) -> str:
    """``minilm/apache2/w64/L0H3`` -> ``minilm/apache2/w64``; a name without ``/`` -> ``-``."""
    return name.rsplit("/", 1)[0] if "/" in name else NO_GROUP


def bracket_ratio(lower: int, upper: int) -> float | None:
    """``upper / lower`` of a bracket (1 when both are 0; None when only lower is 0, where the
    ratio is unbounded): the one ratio convention of the package."""
    if lower == 0:
        return 1.0 if upper == 0 else None
    return upper / lower


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def group_rows(records: list[dict[str, Any]], tolerances: list[str],
               group: Callable[[str], str] = group_of) -> list[dict[str, Any]]:
    """One row per group (``group(name)``, default :func:`group_of`; natural order of the group
    names): ``operators`` (the distinct names of
    the group: all of the manifest's, or of a plain folder those of a verified certificate;
    records without a name are in no group), ``verified``, and per tolerance ``median_lower``,
    ``median_upper``, ``median_ratio`` (None where no ratio is bounded) and ``resolved_share``
    (None without a verified operator)."""
    from ...util.operator_files import natural_key

    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["operator"] is not None:
            groups.setdefault(group(record["operator"]), []).append(record)
    rows = []
    for name in sorted(groups, key=natural_key):
        members = groups[name]
        verified = [r for r in members if r["status"] == "verified"]
        per_eps = {}
        for index, eps in enumerate(tolerances):
            ends = [(r["brackets"][index]["lower"], r["brackets"][index]["upper"]) for r in verified]
            ratios = [q for q in (bracket_ratio(lo, up) for lo, up in ends) if q is not None]
            per_eps[eps] = {"median_lower": _median([lo for lo, _ in ends]),
                            "median_upper": _median([up for _, up in ends]),
                            "median_ratio": _median(ratios),
                            "resolved_share": (sum(lo == up for lo, up in ends) / len(ends)) if ends else None}
        rows.append({"group": name, "operators": len({r["operator"] for r in members}), "verified": len(verified),
                     "eps": per_eps})
    return rows


def group_table_markdown(rows: list[dict[str, Any]], tolerances: list[str], heading: str = "group") -> list[str]:
    """:func:`group_rows` as the lines of a Markdown table: one line per group and tolerance
    (the group's name under ``heading``, the verified operators, the medians of the ends and of
    :func:`bracket_ratio`, the share resolved); ``-`` where there is no value."""
    def number(value: float | None, digits: str) -> str:
        return "-" if value is None else format(value, digits)

    lines = [f"| {heading} | eps | verified operators | median lower | median upper | median upper/lower | resolved |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        for eps in tolerances:
            cell = row["eps"][eps]
            share = None if cell["resolved_share"] is None else 100 * cell["resolved_share"]
            lines.append(f"| {row['group']} | {eps} | {row['verified']} | {number(cell['median_lower'], 'g')} | "
                         f"{number(cell['median_upper'], 'g')} | {number(cell['median_ratio'], '.2f')} | "
                         f"{number(share, '.1f')} % |".replace("| - % |", "| - |"))
    return lines


def width_series(records: list[dict[str, Any]], tolerances: list[str]) -> dict[str, Any] | None:
    """The data of the rank-against-width figure, or None when no head carries two distinct
    widths: ``{"widths": [...], "heads": {head: {eps: [(width, lower, upper), ...]}}}``, one
    series per head (:func:`head_of`: the same model, document, layer and head at each width; a
    head of one width only is left out), its own verified ends: nothing is pooled or averaged."""
    from ...util.operator_files import natural_key

    cells: dict[str, dict[str, list[tuple[int, float, float]]]] = {}
    for record in records:
        if record["status"] != "verified":
            continue
        width, head = name_position(record["operator"])[0], head_of(record["operator"])
        if width is None or head is None:
            continue
        for index, eps in enumerate(tolerances):
            bracket = record["brackets"][index]
            cells.setdefault(head, {e: [] for e in tolerances})[eps].append(
                (width, float(bracket["lower"]), float(bracket["upper"])))
    heads = {head: {eps: sorted(points) for eps, points in per_eps.items()}
             for head, per_eps in sorted(cells.items(), key=lambda item: natural_key(item[0]))
             if len({p[0] for p in next(iter(per_eps.values()), [])}) >= 2}
    if not heads:
        return None
    widths = sorted({p[0] for per_eps in heads.values() for points in per_eps.values() for p in points})
    return {"widths": widths, "heads": heads}


__all__ = ["MAX_POSITION_DIGITS", "NO_GROUP", "bracket_ratio", "group_of", "group_rows", "group_table_markdown",
           "head_of", "name_position", "width_series"]
