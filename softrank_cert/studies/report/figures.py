"""The report's figures (UNTRUSTED drawing of kernel-verified ends; matplotlib, Agg).

* :func:`ratio_figure`: per tolerance, the distribution (empirical CDF) of upper/lower over
  the verified operators -- 1 is resolved;
* :func:`width_figure`: per tolerance, certified rank against block width, one colour per
  head (one model, document, layer and head: never a median, and a line joins only the widths
  of one head), its verified upper end solid and its verified lower end dashed
  (:data:`UPPER_STYLE`, :data:`LOWER_STYLE`, the styles of every line figure of the report).

Both return a matplotlib figure (a figure that says so when there is nothing to draw, never
an empty frame); :class:`~softrank_cert.util.files.OutputFiles` writes and closes it.

A figure's size does not grow with the input: at most :data:`MAX_TOLERANCES` tolerances (curves;
panels, :data:`PANEL_COLUMNS` a row) and :data:`MAX_LAYERS` heads are drawn, chosen by
:func:`spread` (the first, the last and evenly spaced ones between; the page names them), and no
figure is larger than :data:`MAX_FIGURE_INCHES`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from ...plumbing.plotting import label_log_axis
from .summary import bracket_ratio

#: The line styles of every figure: a verified upper end solid with dots, a verified lower end
#: dashed with squares.
UPPER_STYLE, LOWER_STYLE = "-o", "--s"

#: The most tolerances a figure draws: curves of the ratio figure, panels of the width figure.
MAX_TOLERANCES = 6
#: The width figure's panels a row (so at most two rows).
PANEL_COLUMNS = 3
#: The most heads the width figure draws (one colour each: matplotlib's default cycle has 10).
MAX_LAYERS = 10
#: The most block widths labelled on the width figure's axis (every width is drawn).
MAX_WIDTH_TICKS = 8
#: No figure of the report is larger than this, in inches (at the 200 dpi the PNG files are
#: written at: 2,880 x 1,800 pixels).
MAX_FIGURE_INCHES = (14.4, 9.0)
_PANEL_INCHES = 4.2
_LEGEND_INCHES = 1.8

T = TypeVar("T")


def spread(items: Sequence[T], limit: int) -> list[T]:
    """At most ``limit`` of ``items`` in their order: all when they are that few, else the first,
    the last and evenly spaced ones between (``limit`` at least 2)."""
    if len(items) <= limit:
        return list(items)
    last = len(items) - 1
    return [items[round(i * last / (limit - 1))] for i in range(limit)]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _empty(plt: Any, title: str, text: str) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=11, transform=ax.transAxes)
    fig.suptitle(title, fontsize=11)
    return fig


def ratio_figure(records: list[dict[str, Any]], tolerances: list[str]) -> Any:
    """Empirical CDF of upper/lower per tolerance over the verified operators (a lower end of 0
    with a positive upper end has no bounded ratio and is left out, counted in the legend); at
    most :data:`MAX_TOLERANCES` tolerances, :func:`spread` over ``tolerances``."""
    plt = _pyplot()
    verified = [r for r in records if r["status"] == "verified"]
    title = "Verified upper / lower end per operator"
    if not verified:
        return _empty(plt, title, "no certificate verified: nothing to draw\n(see the table of operators)")
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    values_seen: list[float] = []
    drawn = 0
    for index, eps in spread(list(enumerate(tolerances)), MAX_TOLERANCES):
        ends = [(r["brackets"][index]["lower"], r["brackets"][index]["upper"]) for r in verified]
        ratios = sorted(q for q in (bracket_ratio(lo, up) for lo, up in ends) if q is not None)
        unbounded = len(ends) - len(ratios)
        if not ratios:
            continue
        values_seen += ratios
        share = [(i + 1) / len(ends) for i in range(len(ratios))]
        resolved = sum(1 for q in ratios if q == 1.0)
        label = f"$\\varepsilon$ = {eps}: {resolved}/{len(ends)} resolved" + (f", {unbounded} unbounded" if unbounded else "")
        ax.step([ratios[0], *ratios], [0.0, *share], where="post", label=label, linewidth=1.8)
        drawn += 1
    if max(values_seen, default=1.0) > 4:  # a wide spread: a log axis; a narrow one stays linear
        ax.set_xscale("log")
        label_log_axis(ax.xaxis, values_seen)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("verified upper end / verified lower end (1 = resolved)")
    ax.set_ylabel("share of verified operators with ratio <= x")
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=9, loc="lower right")
    else:  # every verified lower end drawn is 0 below a positive upper end: no ratio is bounded
        ax.text(0.5, 0.5, "no bounded ratio at the tolerances drawn\n(each verified lower end is 0, its upper end "
                "positive)", ha="center", va="center", fontsize=11, transform=ax.transAxes)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def width_figure(series: dict[str, Any], tolerances: list[str]) -> Any:
    """Certified rank against block width (log2 axis), one panel per tolerance, one colour per
    head (``series``: :func:`~softrank_cert.studies.report.summary.width_series`); at most
    :data:`MAX_TOLERANCES` panels, :data:`PANEL_COLUMNS` a row, and :data:`MAX_LAYERS` heads
    (each :func:`spread` over all)."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    shown = spread(tolerances, MAX_TOLERANCES)
    columns = max(1, min(len(shown), PANEL_COLUMNS))
    rows = math.ceil(len(shown) / columns)
    width = _PANEL_INCHES * columns + _LEGEND_INCHES
    fig, axes = plt.subplots(rows, columns, figsize=(width, _PANEL_INCHES * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    heads = spread(list(series["heads"]), MAX_LAYERS)
    ticks = spread(series["widths"], MAX_WIDTH_TICKS)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(shown):]:  # the second row's empty places
        ax.set_axis_off()
    for ax, eps in zip(flat, shown):
        ranks: list[float] = []
        for index, head in enumerate(heads):
            points = series["heads"][head][eps]
            colour = colours[index % len(colours)]
            widths = [p[0] for p in points]
            ax.plot(widths, [p[2] for p in points], UPPER_STYLE, color=colour, markersize=4)
            ax.plot(widths, [p[1] for p in points], LOWER_STYLE, color=colour, markersize=3, alpha=0.8)
            ranks += [p[1] for p in points] + [p[2] for p in points]
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(w) for w in ticks])
        ax.minorticks_off()
        ax.set_xlabel("block width (tokens)")
        ax.set_title(f"$\\varepsilon$ = {eps}", fontsize=11)
        ax.grid(True, alpha=0.3)
        if any(r > 0 for r in ranks):
            ax.set_yscale("log")
            label_log_axis(ax.yaxis, [r for r in ranks if r > 0], integers=True)
    for row in axes:
        row[0].set_ylabel("certified rank of the head")
    handles = [Line2D([], [], color=colours[i % len(colours)], marker="o", label=_short(head))
               for i, head in enumerate(heads)]
    handles += [Line2D([], [], color="0.3", linestyle="-", label="verified upper end"),
                Line2D([], [], color="0.3", linestyle="--", label="verified lower end")]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle("Certified rank against block width, per head", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - (_LEGEND_INCHES + 0.2) / width, 1))
    return fig


def _short(label: str, limit: int = 28) -> str:
    """A legend label of at most ``limit`` characters (its end kept: the layer and head)."""
    return label if len(label) <= limit else "..." + label[-(limit - 3):]
