"""The survey's sections of the report page and their figures (UNTRUSTED rendering of verified ends).

A survey folder's page is the campaign page of ``OUT/certs`` (:mod:`~softrank_cert.studies.report`)
with the sections of :data:`SECTIONS` after its header: the survey's parameters and stages (the
``--work`` that drew every figure, CPU seconds), one layer x head heatmap per model, document,
width and tolerance (lower and upper end in each cell, resolved marked), and the per-layer table.
Nothing is pooled: a heatmap or a table row is one model on one document at one width, and a
cell is one head.  Every end comes from the report's re-verification of the certificates.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..report.figures import MAX_FIGURE_INCHES, MAX_TOLERANCES, spread
from ..report.page import _e, href, table_row
from ..panel_names import head_position

#: A survey section: (report document, page path) -> HTML lines.
Section = Callable[[dict[str, Any], Path], list[str]]
#: The most heads and layers whose cells carry their numbers on a PNG heatmap (beyond: colour only).
MAX_ANNOTATED = (16, 40)


def grids(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One grid per (model/document, width), in that order: ``{"source", "width", "layers",
    "heads", "cells": {(layer, head): brackets}}`` over the verified records."""
    found: dict[tuple[str, int], dict[tuple[int, int], list[dict[str, Any]]]] = {}
    for record in records:
        where = head_position(record["operator"]) if record["status"] == "verified" else None
        if where is not None:
            found.setdefault(where[:2], {})[where[2:]] = record["brackets"]
    return [{"source": source, "width": width, "layers": sorted({c[0] for c in cells}),
             "heads": sorted({c[1] for c in cells}), "cells": cells}
            for (source, width), cells in sorted(found.items())]


def layer_rows(grid: dict[str, Any], tolerances: list[str]) -> list[dict[str, Any]]:
    """Per layer of ``grid``: its verified heads and, per tolerance, the median verified lower and
    upper ends and how many heads are resolved."""
    rows = []
    for layer in grid["layers"]:
        heads = [b for (lay, _), b in grid["cells"].items() if lay == layer]
        per_eps = {}
        for index, eps in enumerate(tolerances):
            ends = [(b[index]["lower"], b[index]["upper"]) for b in heads]
            per_eps[eps] = {"median_lower": float(statistics.median(lo for lo, _ in ends)),
                            "median_upper": float(statistics.median(up for _, up in ends)),
                            "resolved": sum(lo == up for lo, up in ends)}
        rows.append({"layer": layer, "heads": len(heads), "eps": per_eps})
    return rows


def heatmap_figure(grid: dict[str, Any], tolerances: list[str], work: str) -> Any:
    """The PNG heatmaps of one grid: a row per tolerance (at most :data:`MAX_TOLERANCES`), the
    verified lower end left and the verified upper end right (one colour scale per row), layers
    down and heads across; a resolved cell is boxed in red.  Bounded by
    :data:`MAX_FIGURE_INCHES`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = spread(list(enumerate(tolerances)), MAX_TOLERANCES)
    layers, heads = grid["layers"], grid["heads"]
    inches = (min(MAX_FIGURE_INCHES[0], 1.5 + 2 * (1.6 + 0.4 * max(4, len(heads)))),
              min(MAX_FIGURE_INCHES[1], 1.0 + len(shown) * (1.5 + 0.22 * len(layers))))
    fig, axes = plt.subplots(len(shown), 2, figsize=inches, squeeze=False, layout="constrained")
    from matplotlib.patches import Rectangle

    annotate = len(heads) <= MAX_ANNOTATED[0] and len(layers) <= MAX_ANNOTATED[1]
    for row, (index, eps) in zip(axes, shown):
        values = {side: np.full((len(layers), len(heads)), np.nan) for side in ("lower", "upper")}
        resolved = []
        for (layer, head), brackets in grid["cells"].items():
            i, j = layers.index(layer), heads.index(head)
            for side in values:
                values[side][i, j] = brackets[index][side]
            if brackets[index]["lower"] == brackets[index]["upper"]:
                resolved.append((i, j))
        top = max(1.0, float(np.nanmax(values["upper"])))
        for ax, side in zip(row, ("lower", "upper")):
            image = ax.imshow(values[side], vmin=0, vmax=top, cmap="viridis", aspect="auto", interpolation="nearest")
            for i, j in resolved:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
            if annotate:
                for i in range(len(layers)):
                    for j in range(len(heads)):
                        if not np.isnan(values[side][i, j]):
                            ax.text(j, i, f"{values[side][i, j]:.0f}", ha="center", va="center", fontsize=6,
                                    color="white" if values[side][i, j] < 0.6 * top else "black")
            ax.set_title(f"{side} end, $\\varepsilon$ = {eps}", fontsize=9)
            ax.set_xticks(range(len(heads)), [str(h) for h in heads], fontsize=7)
            ax.set_yticks(range(len(layers)), [str(lay) for lay in layers], fontsize=7)
            ax.set_xlabel("head", fontsize=8)
            ax.set_ylabel("layer", fontsize=8)
        fig.colorbar(image, ax=list(row), shrink=0.9, label="certified rank")
    fig.suptitle(f"{grid['source']}, width {grid['width']}, --work {work}\nverified ends per layer x head; red box: "
                 "resolved", fontsize=10)
    return fig


def _cell(brackets: list[dict[str, Any]] | None, index: int, top: int) -> str:
    if brackets is None:
        return "<td class=\"none\">&ndash;</td>"
    lower, upper = brackets[index]["lower"], brackets[index]["upper"]
    light = 96 - round(50 * lower / max(top, 1))
    style = f"background: hsl(210, 60%, {light}%);" + (" color: #fff;" if light < 62 else "")
    if lower == upper:
        return f"<td class=\"resolved\" data-sort=\"{lower}\" style=\"{style}\" title=\"resolved\">{lower}</td>"
    return f"<td data-sort=\"{lower}\" style=\"{style}\" title=\"lower {lower}, upper {upper}\">{lower}&ndash;{upper}</td>"


def _heatmap_tables(doc: dict[str, Any], page: Path) -> list[str]:
    survey, tolerances = doc["survey"], doc["campaign"]["tolerances"]
    out = ["<h2 id=\"heatmaps\">Layer x head</h2>",
           "<p class=\"note\">One table per model, document, width and tolerance; a cell is one head: "
           "<strong>bold</strong> = resolved (r_eps known exactly), else verified lower&ndash;upper end. Shade: the "
           f"verified lower end. Drawn at --work {_e(survey['work'])}.</p>"]
    for grid in grids(doc["operators"]):
        for index, eps in enumerate(tolerances):
            top = max((b[index]["upper"] for b in grid["cells"].values()), default=1)
            out.append(f"<h3>{_e(grid['source'])}, width {grid['width']}, eps {_e(eps)}</h3>")
            out.append("<table class=\"heatmap sortable\"><tr><th>layer</th>"
                       + "".join(f"<th>H{h}</th>" for h in grid["heads"]) + "</tr>")
            for layer in grid["layers"]:
                cells = "".join(_cell(grid["cells"].get((layer, h)), index, top) for h in grid["heads"])
                out.append(f"<tr><th data-sort=\"{layer}\">L{layer}</th>{cells}</tr>")
            out.append("</table>")
    for figure in survey["figures"]:
        out.append(f"<figure><img src=\"{href(figure['path'], page)}\" alt=\"{_e(figure['title'])}\" "
                   f"width=\"{int(figure['width'])}\"><figcaption>{_e(figure['caption'])}</figcaption></figure>")
    return out


def _layer_table(doc: dict[str, Any], page: Path) -> list[str]:
    tolerances = doc["campaign"]["tolerances"]
    out = ["<h2 id=\"layers\">Per layer</h2>",
           "<p class=\"note\">Per model, document, width and layer: medians over its verified heads and the heads "
           "resolved. Click a column to sort.</p>",
           "<table class=\"sortable\"><tr><th class=\"name\">model/document</th><th>width</th><th>layer</th>"
           "<th>heads</th>" + "".join(f"<th>median lower {_e(e)}</th><th>median upper {_e(e)}</th>"
                                      f"<th>resolved {_e(e)}</th>" for e in tolerances) + "</tr>"]
    for grid in grids(doc["operators"]):
        for row in layer_rows(grid, tolerances):
            cells = "".join(f"<td>{c['median_lower']:g}</td><td>{c['median_upper']:g}</td>"
                            f"<td data-sort=\"{c['resolved']}\">{c['resolved']}/{row['heads']}</td>"
                            for c in row["eps"].values())
            out.append(f"<tr><td class=\"name\">{_e(grid['source'])}</td><td>{grid['width']}</td>"
                       f"<td>{row['layer']}</td><td>{row['heads']}</td>{cells}</tr>")
    out.append("</table>")
    return out


def _stages(doc: dict[str, Any], page: Path) -> list[str]:
    from ...util.progress import seconds_text

    survey = doc["survey"]
    p = survey["parameters"]
    items = [("model", p["model"]), ("document", f"{p['document']} (SHA-256 {p['document_sha256']})"),
             ("widths", ", ".join(map(str, p["widths"])) if p["widths"] else "the model's own"),
             ("--work", survey["work"]), ("estimate", f"{seconds_text(survey['estimate_cpu_seconds'])} CPU s"
                                          if survey["estimate_cpu_seconds"] is not None else "none recorded")]
    out = ["<h2 id=\"survey\">Survey</h2>", "<dl>"] + [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items]
    out += ["</dl>", "<table class=\"sortable\"><tr><th class=\"name\">stage</th><th>status</th><th>CPU s</th>"
            "<th>wall s</th></tr>"]
    for stage in survey["stages"]:
        times = ["&ndash;" if s is None else seconds_text(s) for s in (stage["cpu_seconds"], stage["wall_seconds"])]
        out.append(table_row([_e(stage["status"]), *times], name=_e(stage["name"])))
    out.append("</table>")
    return out


def _kv_budgets(doc: dict[str, Any], page: Path) -> list[str]:
    report = doc["survey"].get("kv_budgets")
    if report is None:
        return []
    from ..kv_budgets.page import kv_budgets_section

    figures = {model: Path(path) for model, path in report.get("figures", {}).items()}
    missing = report["not_reverified"]
    note = (f"Every budget above was derived again for this page from its certificate ({report['rechecked']} "
            "budgets, their minimality decided by the kernel again); the figure is drawn from them.")
    if missing:
        shown = "; ".join(f"{_e(m['operator'])} ({_e(m['policy'])})" for m in missing[:5])
        note += (f" {len(missing)} policy certificate(s) missing or not re-verified, shown as no budget: {shown}"
                 + ("; ..." if len(missing) > 5 else "") + ".")
    return [kv_budgets_section(report, page, figures), f"<p class=\"note\">{note}</p>"]


#: The survey's sections of the page, in order (another section joins this list).
SECTIONS: list[Section] = [_stages, _heatmap_tables, _layer_table, _kv_budgets]


def survey_document(out: Path, page: Path, figures: Path, *, max_certificates: int, max_bytes: int,
                    progress: Any) -> tuple[dict[str, Any], list[tuple[Any, Path]]]:
    """The report document of the survey folder ``out`` (the campaign page of ``out/certs``, every
    certificate re-verified, with a ``survey`` part: parameters, stages, ``--work``, heatmap
    figures) and the figures to write (``progress``: a
    :class:`~softrank_cert.util.progress.Progress`)."""
    from ...util.progress import seconds_text
    from ..report.build import _css_width, document, read_campaign
    from ..report.folder import read_manifest
    from .plan import CERTS_NAME, MANIFEST_NAME, SurveyManifest

    manifest = SurveyManifest.read(out / MANIFEST_NAME)
    if manifest is None:
        from ...errors import InvalidInputError

        raise InvalidInputError(f"{out}: {MANIFEST_NAME} is not a survey manifest softrank wrote")
    certs = out / CERTS_NAME
    read = read_campaign(certs, read_manifest(certs), max_certificates, max_bytes, progress)
    progress.stage("figures")
    doc, drawn = document("campaign", certs, page, read, figures)
    work = str(manifest["parameters"].get("work"))
    tolerances = read["campaign"]["tolerances"]
    entries: list[dict[str, Any]] = []
    for grid in grids(read["operators"]):
        figure = heatmap_figure(grid, tolerances, work)
        path = figures / f"heatmap-{len(entries) + 1}-w{grid['width']}.png"
        drawn.append((figure, path))
        entries.append({"path": str(path), "title": f"layer x head heatmaps, {grid['source']} w{grid['width']}",
                        "width": _css_width(figure),
                        "caption": f"{grid['source']} at width {grid['width']}: verified lower (left) and upper "
                                   f"(right) end of every head per tolerance, drawn at --work {work}; a red box marks a "
                                   "resolved head." + _drawn_tolerances(tolerances)})
    from ..kv_budgets.recheck import rechecked_report

    progress.stage("KV budgets")
    kv_report = rechecked_report(certs)
    if kv_report is not None:
        from ..kv_budgets.plot import figure_name, kv_figures

        kv_report["figures"] = {}
        for model, figure in kv_figures(kv_report).items():
            path = figures / figure_name(model)
            drawn.append((figure, path))
            kv_report["figures"][model] = str(path)
    recorded = manifest.get("estimate")
    estimate: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    doc["survey"] = {"folder": str(out), "parameters": manifest["parameters"], "work": work,
                     "estimate_cpu_seconds": estimate.get("cpu_seconds"), "stages": manifest.get("stages", []),
                     "figures": entries, "kv_budgets": kv_report}
    for figure in doc["figures"]:
        figure["caption"] += f" Drawn at --work {work}."
    cpu = sum(s["cpu_seconds"] or 0 for s in doc["survey"]["stages"])
    doc["notes"].append(f"Survey CPU time so far: {seconds_text(cpu)} s (survey.json, bookkeeping).")
    return doc, drawn


def _drawn_tolerances(tolerances: list[str]) -> str:
    shown = spread(tolerances, MAX_TOLERANCES)
    return "" if len(shown) == len(tolerances) else f" Tolerances drawn: {', '.join(shown)} (the tables hold all)."


def kv_shortfall(doc: dict[str, Any]) -> int:
    """How many policy certificates the page's KV section found missing or not re-verified (0: none, or no section)."""
    report = doc["survey"].get("kv_budgets")
    return 0 if report is None else len(report["not_reverified"]) + len(report["failed"])


def write_survey_page(out: Path, page: Path, *, progress: Any, max_certificates: int = 10_000,
                      max_bytes: int = 4 << 30) -> dict[str, Any]:
    """Write the survey folder ``out``'s page at ``page`` and its figures beside it (``PAGE-figures/``),
    together, atomically; returns the report document."""
    from ...util.files import OutputFiles
    from ..report.page import render_page

    figures = page.with_name(page.stem + "-figures")
    doc, drawn = survey_document(out, page, figures, max_certificates=max_certificates, max_bytes=max_bytes,
                                 progress=progress)
    progress.stage("writing the page")
    with OutputFiles() as outputs:
        for figure, path in drawn:
            outputs.stage_figure(figure, path)
        outputs.stage_text(page, render_page(doc, page, SECTIONS))
    return doc
