"""The KV-budget section of a report page (UNTRUSTED rendering; a fragment the page embeds).

:func:`kv_budgets_section` renders a report of :mod:`.study` as one HTML ``<section>``: the
theorem's statement with its conditions, per model the figure (a relative link) and the per-layer
table (median certified lower end, median budget per policy and tolerance, their ratio, how many
budgets are proved minimal).  Untrusted text (model, document and file names) is escaped like
the rest of the page: visible escapes for control characters
(:func:`~softrank_cert.util.escaping.plain_text`), then HTML escapes; image sources are relative
and percent-encoded (:func:`~softrank_cert.studies.report.page.href`).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ...util.escaping import plain_text
from ..report.page import href, shown
from .plot import LABELS


def _e(value: Any) -> str:
    return html.escape(plain_text(shown(str(value))), quote=True)


def _n(value: float | None) -> str:
    return "&ndash;" if value is None else _e(f"{value:.3g}")


THEOREM = ("For every head and tolerance eps, the <b>certified lower bound</b> is the head's kernel-verified lower "
           "end k of r<sub>eps</sub>: no cache that keeps a common set of fewer than k key slots for these queries "
           "&mdash; eviction with renormalisation, token merging, a projection along the sequence as in Linformer; "
           "any output A&prime;V with rank A&prime; &lt; k, A&prime; chosen without looking at the values &mdash; keeps every output of this head within eps for "
           "every value matrix with entries in [&minus;1, 1]. A policy's budget is the smallest number of slots "
           "at which the kernel verified its worst-case error &le; eps (certificates in <code>kv-budgets/</code>). "
           "Not covered: per-query top-k selection (Quest, Loki), value-aware selection or merging, quantisation, errors on typical rather than "
           "worst-case values (proofs/kv-budgets.md).")


def _table(rows: list[dict[str, Any]]) -> str:
    head = ("<tr><th class=\"name\">document</th><th>width</th><th>layer</th><th class=\"name\">policy</th>"
            "<th>eps</th><th>heads</th><th>median certified lower bound</th><th>median budget</th>"
            "<th>median budget / lower bound</th><th>proved minimal</th><th>no budget certified</th></tr>")
    body = "".join(
        f"<tr><td class=\"name\">{_e(r['document'])}</td><td>{_e(r['width'])}</td>"
        f"<td>{'&ndash;' if r['layer'] is None else _e(r['layer'])}</td>"
        f"<td class=\"name\">{_e(LABELS.get(r['policy'], r['policy']))}</td><td>{_e(r['eps'])}</td>"
        f"<td>{_e(r['heads'])}</td><td>{_n(r['median_lower'])}</td><td>{_n(r['median_budget'])}</td>"
        f"<td>{_n(r['median_ratio'])}</td><td>{_e(r['minimal'])}</td><td>{_e(r['uncertified'])}</td></tr>"
        for r in rows)
    return f"<table>{head}{body}</table>"


def kv_budgets_section(report: dict[str, Any], page: Path, figures: dict[str, Path] | None = None) -> str:
    """The ``<section>`` of ``report`` (``kv_budgets.json``) for the page written at ``page``;
    ``figures``: each model's figure file (linked relative to the page)."""
    from .plot import models

    parts = ["<section id=\"kv-budgets\"><h2>Certified KV-cache budgets</h2>", f"<p class=\"note\">{THEOREM}</p>"]
    for model in models(report):
        parts.append(f"<h3>{_e(model)}</h3>")
        if figures and model in figures:
            parts.append(f"<p><img src=\"{_e(href(figures[model], page))}\" alt=\"KV budgets of {_e(model)}\"></p>")
        parts.append(_table([r for r in report["layers"] if r["model"] == model]))
    failed = report.get("failed") or []
    if failed:
        parts.append(f"<p class=\"note\">{len(failed)} head(s) not studied: "
                     + "; ".join(f"{_e(f['operator'])} ({_e(f['reason'])})" for f in failed[:5])
                     + ("; ..." if len(failed) > 5 else "") + "</p>")
    parts.append("</section>")
    return "\n".join(parts)


__all__ = ["THEOREM", "kv_budgets_section"]
