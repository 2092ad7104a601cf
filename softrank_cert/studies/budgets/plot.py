"""The figure of the budget study (UNTRUSTED; draws the report of :func:`~softrank_cert.studies.budgets.campaign.study`).

It draws fractions of heads that the report counts; every class in it rests on kernel-verified
ends (see :mod:`softrank_cert.studies.budgets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...plumbing.plotting import save_figure_atomic


#: The legend's text of each class.
CLASS_MEANING = {"feasible": "feasible\n(verified upper $\\leq b$)", "impossible": "impossible\n(verified lower $> b$)",
                 "unresolved": "unresolved"}


def plot_budgets(report: dict[str, Any], path: Path) -> None:
    """One panel per document: fraction of heads against block width (log2 axis); per budget a
    colour, solid = feasible, dashed = impossible, dotted = unresolved.  Written atomically."""
    save_figure_atomic(budgets_figure(report), path)


def budgets_figure(report: dict[str, Any]) -> Any:
    """The matplotlib figure of :func:`plot_budgets`.  Lines of different budgets are shifted a
    little sideways so that equal fractions stay visible; where every document has one width
    (or its operator names carry no ``w<N>`` width) there is no line to draw, and each panel is
    one stacked bar per budget instead (:func:`_bars_figure`); a report without any operator
    gives a figure that says so (never an empty frame)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    from ..panel_names import NO_WIDTH

    eps_text = f"$\\varepsilon = {report['eps']}$"
    documents = sorted({g["document"] for g in report["groups"]})
    if not documents:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no operator was studied\n(none selected, or every task failed: see the report)",
                ha="center", va="center", fontsize=11, transform=ax.transAxes)
        fig.suptitle(f"softrank budgets at {eps_text}", fontsize=11)
        return fig
    single = all(len({g["width"] for g in report["groups"] if g["document"] == d}) == 1 for d in documents)
    if single:
        return _bars_figure(report, documents, eps_text)
    fig, axes = plt.subplots(1, len(documents), figsize=(4.6 * len(documents) + 2.2, 4.6), sharey=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"feasible": ("-", "o"), "impossible": ("--", "s"), "unresolved": (":", "^")}
    nb = len(report["budgets"])
    for ax, document in zip(axes[0], documents):
        groups = [g for g in report["groups"] if g["document"] == document and g["width"] != NO_WIDTH]
        unsized = [g for g in report["groups"] if g["document"] == document and g["width"] == NO_WIDTH]
        categorical = not groups
        shown = unsized if categorical else groups
        widths = [1.0] if categorical else [float(g["width"]) for g in groups]
        for i, b in enumerate(report["budgets"]):
            shift = (i - (nb - 1) / 2) * (0.05 if categorical else 0.035)
            xs = [shift] if categorical else [w * 2 ** shift for w in widths]
            for cls, (line, marker) in styles.items():
                ax.plot(xs, [g["budgets"][str(b)][cls + "_fraction"] for g in shown], linestyle=line,
                        marker=marker, color=colours[i % len(colours)], markersize=4.5,
                        linewidth=1.1 if cls == "unresolved" else 1.6, alpha=0.55 if cls == "unresolved" else 0.95)
        if categorical:
            ax.set_xlim(-0.5, 0.5)
            ax.xaxis.set_major_locator(FixedLocator([0.0]))
            ax.set_xticklabels(["all heads\n(no $w$ in the names)"])
            ax.set_xlabel("")
        else:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(FixedLocator(widths))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([str(int(w)) for w in widths])
            ax.set_xlim(min(widths) / 1.3, max(widths) * 1.3)
            ax.set_xlabel("block width $w$ (tokens)")
        heads = sorted({g["heads"] for g in shown})
        extra = f"; {sum(g['heads'] for g in unsized)} heads without a width not shown" if unsized and not categorical else ""
        per = "" if categorical else " per width"
        ax.set_title(f"{document} ({'/'.join(map(str, heads))} heads{per}{extra})", fontsize=10)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("fraction of heads")
    handles = [Line2D([], [], color=colours[i % len(colours)], linewidth=2, label=f"budget $b = {b}$")
               for i, b in enumerate(report["budgets"])]
    handles += [Line2D([], [], color="gray", linestyle=line,  # type: ignore[arg-type]  # "-", "--", ":" (stubs: Literal)
                       marker=marker, label=CLASS_MEANING[cls])
                for cls, (line, marker) in styles.items()]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(f"softrank budgets: fraction of heads per rank budget $b$ at {eps_text}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 1))
    return fig


#: Colours of the classes in the bar figure.
CLASS_COLOURS = {"feasible": "#1a9850", "impossible": "#b2182b", "unresolved": "#bdbdbd"}


def _bars_figure(report: dict[str, Any], documents: list[str], eps_text: str) -> Any:
    """One panel per document of a single width: per budget a bar of the heads, stacked by
    class (feasible, impossible, unresolved: the fractions add up to 1), each part labelled
    with its count where it is tall enough to hold the number."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from ..panel_names import NO_WIDTH

    budgets = report["budgets"]
    fig, axes = plt.subplots(1, len(documents), figsize=(1.1 * len(budgets) * len(documents) + 2.6 * len(documents) + 2.2,
                                                         4.6), sharey=True, squeeze=False)
    for ax, document in zip(axes[0], documents):
        (group,) = [g for g in report["groups"] if g["document"] == document]
        bottoms = [0.0] * len(budgets)
        for cls, colour in CLASS_COLOURS.items():
            heights = [group["budgets"][str(b)][cls + "_fraction"] for b in budgets]
            ax.bar(range(len(budgets)), heights, bottom=bottoms, width=0.6, color=colour, edgecolor="white")
            for i, (b, h) in enumerate(zip(budgets, heights)):
                if h >= 0.06:
                    ax.text(i, bottoms[i] + h / 2, str(group["budgets"][str(b)][cls]), ha="center", va="center",
                            fontsize=8, color="white" if cls != "unresolved" else "black")
            bottoms = [a + h for a, h in zip(bottoms, heights)]
        ax.set_xticks(range(len(budgets)), [f"$b = {b}$" for b in budgets])
        ax.set_xlim(-0.6, len(budgets) - 0.4)
        ax.set_ylim(0, 1.02)
        width = "no $w$ in the names" if group["width"] == NO_WIDTH else f"width $w = {group['width']}$"
        ax.set_title(f"{document} ({group['heads']} heads, {width})", fontsize=10)
        ax.set_xlabel("rank budget")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("fraction of heads (count in the bar)")
    fig.legend(handles=[Patch(color=c, label=CLASS_MEANING[cls]) for cls, c in CLASS_COLOURS.items()], loc="center right",
               fontsize=8, frameon=False)
    fig.suptitle(f"softrank budgets: heads per class and rank budget $b$ at {eps_text}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 1.9 / fig.get_figwidth(), 1))
    return fig
