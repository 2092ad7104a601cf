"""The report's tables from the verified records (UNTRUSTED summaries of kernel verdicts).

* :func:`group_of`: the operator name without its last component (``minilm/apache2/w64`` for
  ``minilm/apache2/w64/L0H3``; ``-`` for a name without ``/``);
* :func:`name_position`: the width (``w<N>``: at most 9 digits, N at least 1) and layer (``L<l>H<h>``,
  each of at most 9 digits) a name carries, each None when it has none (names of another shape,
  or with a number beyond these bounds, degrade to "no width", "no layer");
* :func:`head_of`: the name without its width, which names one head across widths;
* :func:`group_rows`: per group and tolerance, the operators, the medians of the verified
  ends, the median upper/lower ratio and the share resolved (``lower == upper``).

Only records with ``status == "verified"`` enter a median; the others are counted apart.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

#: The group of a name without ``/``.
NO_GROUP = "-"
#: The most digits a width or a layer may have (a name with a longer one has no width / layer:
#: no block is that wide, no model that deep, and a figure's axis stays finite).
MAX_POSITION_DIGITS = 9
_WIDTH = re.compile(rf"w([0-9]{{1,{MAX_POSITION_DIGITS}}})")
_HEAD = re.compile(rf"L([0-9]{{1,{MAX_POSITION_DIGITS}}})H([0-9]{{1,{MAX_POSITION_DIGITS}}})")


def group_of(name: str) -> str:
    """``minilm/apache2/w64/L0H3`` -> ``minilm/apache2/w64``; a name without ``/`` -> ``-``."""
    return name.rsplit("/", 1)[0] if "/" in name else NO_GROUP


def name_position(name: str) -> tuple[int | None, int | None]:
    """``(width, layer)`` from the last ``w<N>`` and the last ``L<l>H<h>`` component of ``name``
    (each None when there is none).  Only ASCII digits count, at most :data:`MAX_POSITION_DIGITS`
    of them and a width is at least 1: ``x/w0/...``, ``x/w<400 digits>/...`` have no width."""
    parts = name.split("/")
    width = next((int(m[1]) for m in map(_WIDTH.fullmatch, reversed(parts)) if m), None) or None  # w0: none
    layer = next((int(m[1]) for m in map(_HEAD.fullmatch, reversed(parts)) if m), None)
    return width, layer


def ratio(lower: int, upper: int) -> float | None:
    """``upper / lower`` of a verified bracket (1 when both are 0; None when only lower is 0,
    where the ratio is unbounded)."""
    if lower == 0:
        return 1.0 if upper == 0 else None
    return upper / lower


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def group_rows(records: list[dict[str, Any]], tolerances: list[str]) -> list[dict[str, Any]]:
    """One row per group (natural order of the group names): ``operators`` (the distinct names of
    the group: all of the manifest's, or of a plain folder those of a verified certificate;
    records without a name are in no group), ``verified``, and per tolerance ``median_lower``,
    ``median_upper``, ``median_ratio`` (None where no ratio is bounded) and ``resolved_share``
    (None without a verified operator)."""
    from ...util.operator_files import natural_key

    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["operator"] is not None:
            groups.setdefault(group_of(record["operator"]), []).append(record)
    rows = []
    for group in sorted(groups, key=natural_key):
        members = groups[group]
        verified = [r for r in members if r["status"] == "verified"]
        per_eps = {}
        for index, eps in enumerate(tolerances):
            ends = [(r["brackets"][index]["lower"], r["brackets"][index]["upper"]) for r in verified]
            ratios = [q for q in (ratio(lo, up) for lo, up in ends) if q is not None]
            per_eps[eps] = {"median_lower": _median([lo for lo, _ in ends]),
                            "median_upper": _median([up for _, up in ends]),
                            "median_ratio": _median(ratios),
                            "resolved_share": (sum(lo == up for lo, up in ends) / len(ends)) if ends else None}
        rows.append({"group": group, "operators": len({r["operator"] for r in members}), "verified": len(verified),
                     "eps": per_eps})
    return rows


def head_of(name: str) -> str | None:
    """The head a name is about across widths: the name without its last ``w<N>`` component
    (``minilm/apache2/w64/L0H3`` -> ``minilm/apache2/L0H3``), None when it has no width."""
    parts = name.split("/")
    for index in range(len(parts) - 1, -1, -1):
        match = _WIDTH.fullmatch(parts[index])
        if match:
            return "/".join(parts[:index] + parts[index + 1:]) if int(match[1]) else None
    return None


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
