"""The figure of an audit (UNTRUSTED; draws the rows of :func:`~softrank_cert.studies.audit.table.audit_table`).

Published against audited bracket ratios; every audited end in it is a kernel verdict (see
:mod:`softrank_cert.studies.audit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...plumbing.plotting import save_figure_atomic


def plot_ratios(rows: list[Any], path: Path) -> None:
    """Scatter of published vs audited ``upper / lower`` (log-log;
    :func:`~softrank_cert.studies.report.summary.bracket_ratio`), written atomically."""
    save_figure_atomic(ratio_figure(rows), path)


def ratio_figure(rows: list[Any]) -> Any:
    """The matplotlib figure of :func:`plot_ratios`: rows with the same published and audited
    ratios are one marker, its area growing with their number, annotated with the count.  A row
    without both brackets, or whose ratio is unbounded (a lower end 0 below a positive upper
    end), is not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...plumbing.plotting import label_log_axis
    from ..report.summary import bracket_ratio

    def ratio(lower: int | None, upper: int | None) -> float | None:
        return None if lower is None or upper is None else bracket_ratio(lower, upper)

    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    values: list[float] = [1.0]
    plotted = 0
    for status in ("confirmed", "tightened", "reproduced", "refuted", "unresolved"):
        ends = [(ratio(r.published_lower, r.published_upper), ratio(r.lower, r.upper)) for r in rows if r.status == status]
        pts = [(x, y) for x, y in ends if x is not None and y is not None]
        if not pts:
            continue
        counts: dict[tuple[float, float], int] = {}
        for point in pts:
            counts[point] = counts.get(point, 0) + 1
        xs, ys = zip(*counts)
        sizes = [18 + 14 * (n - 1) ** 0.75 for n in counts.values()]
        ax.scatter(xs, ys, s=sizes, alpha=0.7, edgecolors="white", linewidths=0.5,
                   label=f"{status} ({len(pts)} rows)")
        for (x, y), n in counts.items():
            if n > 1:
                ax.annotate(f"{n}", (x, y), xytext=(-4, 4), textcoords="offset points", ha="right", va="bottom",
                            fontsize=7, color="dimgrey")
        values += list(xs) + list(ys)
        plotted += len(pts)
    top = max(values)
    ax.plot([1, top], [1, top], color="gray", linewidth=0.8, linestyle="--", label="audited = published")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        label_log_axis(axis, values)
    pad = (top / 1.0) ** 0.04 if top > 1 else 1.05
    ax.set_xlim(1 / pad, top * pad)
    ax.set_ylim(1 / pad, top * pad)
    ax.set_xlabel(r"published ratio $u / \ell$")
    ax.set_ylabel(r"audited ratio $u / \ell$ (kernel-verified ends)")
    ax.set_title(f"softrank audit: bracket ratios of {plotted} rows\n(numbers: rows at the same point)", fontsize=11)
    if not plotted:
        ax.text(0.5, 0.5, "no row has both published and audited ends", ha="center", va="center",
                transform=ax.transAxes, color="dimgrey")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    fig.tight_layout()
    return fig
