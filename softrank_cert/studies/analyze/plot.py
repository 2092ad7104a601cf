"""The figure of the analysis report (UNTRUSTED; draws the report of :func:`~softrank_cert.studies.analyze.study.analysis`).

Every (operator, eps) bracket [lower, upper] -- kernel-verified ends -- as a vertical segment at
the operator's score, one panel per score; a resolved bracket (lower = upper) as a dot of the
same colour.  The baseline is fitted to the brackets it is drawn against: its panel says so
(in-sample; the held-out comparison is in the report's tables).
"""

from __future__ import annotations

from typing import Any

from .document import SCORES, ci_text, number_text

#: The score fitted to the very brackets it is drawn against (its panel is marked in-sample).
IN_SAMPLE = "baseline"


def analysis_figure(report: dict[str, Any]) -> Any:
    """One panel per score: every (operator, eps) bracket [lower, upper] as a vertical segment at
    the operator's score (log rank axis), colour = eps; concordance and CI in the titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D

    from ...plumbing.plotting import label_log_axis

    names = [n for n in SCORES if n in report["scores"]] + [n for n in report["scores"] if n not in SCORES]
    cols = 2 if len(names) > 2 else max(len(names), 1)
    rows = -(-max(len(names), 1) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.3 * rows + 0.6), squeeze=False)
    axes = [list(grid.ravel())]
    for ax in axes[0][len(names):]:
        ax.set_visible(False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    eps_colour = {eps: colours[i % len(colours)] for i, eps in enumerate(report["eps"])}

    ranks = [max(v, 0.5) for op in report["operators"] for v in (op["lower"], op["upper"])]
    for ax, name in zip(axes[0], names):
        values = [op["scores"].get(name) for op in report["operators"]]
        finite = [v for v in values if isinstance(v, (int, float))]
        right = (max(finite) if finite else 0.0)
        span = (right - min(finite)) if finite else 1.0
        at_inf = right + 0.08 * (span or 1.0)
        n_inf = 0
        for op, value in zip(report["operators"], values):
            if value is None:
                continue
            x = at_inf if value == "inf" else float(value)
            n_inf += value == "inf"
            lo, hi = max(op["lower"], 0.5), max(op["upper"], 0.5)
            if lo == hi:  # resolved: r_eps known exactly
                ax.plot([x], [lo], marker="o", color=eps_colour[op["eps"]], alpha=0.8, markersize=3.2, linestyle="")
            else:
                ax.plot([x, x], [lo, hi], color=eps_colour[op["eps"]], alpha=0.6, linewidth=1.3,
                        solid_capstyle="butt")
        if n_inf:
            ax.axvline(at_inf, color="gray", linestyle=":", linewidth=0.8)
            ax.text(at_inf, 1.0, f" inf ({n_inf})", fontsize=7, color="gray", va="bottom")
        ax.set_yscale("log")
        label_log_axis(ax.yaxis, ranks, integers=True)
        entry = report["scores"][name]
        ci = entry["ci"]
        in_sample = name == IN_SAMPLE
        ax.set_title(f"{name} ({entry['certified']}{', IN-SAMPLE fit' if in_sample else ''})\nconcordance "
                     f"{number_text(entry['concordance'])} {ci_text(ci)}, {entry['pairs']} pairs", fontsize=9)
        if in_sample:
            ax.text(0.02, 0.97, "in-sample: fitted to these brackets\n(held-out comparison: the report's tables)",
                    transform=ax.transAxes, va="top", fontsize=8, color="0.2",
                    bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#c9a227", "alpha": 0.95})
        ax.set_xlabel(f"{name} score" + (" (inf: right of the dotted line)" if n_inf else ""))
        ax.grid(True, alpha=0.3, which="both")
    for ax in grid[:, 0]:
        ax.set_ylabel(r"certified bracket of $r_\varepsilon(A)$: lower to upper")
    handles: list[Any] = [Line2D([], [], color=eps_colour[eps], linewidth=2) for eps in report["eps"]]
    labels = [f"$\\varepsilon = {eps}$: bracket lower to upper" for eps in report["eps"]]
    handles.append(tuple(Line2D([], [], color=eps_colour[eps], marker="o", linestyle="", markersize=4)
                         for eps in report["eps"]))
    labels.append("resolved (lower = upper), coloured by $\\varepsilon$")
    fig.legend(handles, labels, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               handler_map={tuple: HandlerTuple(ndivide=None)})
    fig.suptitle("softrank analyze: scores against kernel-verified rank brackets", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    return fig
