"""Figures of supports sweeps (front-end drawing of certified numbers; decides nothing).

Only what was certified is drawn as data:

* left panel, per sweep: at each sampled ``x = 1 + kappa/eps^2`` the verified bracket
  ``[lower, upper]`` as a vertical bar with its two ends marked (a resolved rank is one
  marker); nothing is interpolated between sampled points;
* right panel, per sweep: each certified local-exponent interval between consecutive points as
  a vertical bar spanning ``[lower, upper]`` placed at the geometric mean of its ``x1, x2`` (a
  thin horizontal line shows the span ``x1 .. x2``), each decade interval (``x2/x1 >= 10``)
  that is not also a consecutive one as a pale box spanning ``x1 .. x2`` and ``[lower, upper]``
  (the legend shows a box too), against the theory exponent as a horizontal dashed line.

The theory lines are references, labelled so; the rank ceiling ``p`` is a grey line.  Legends
sit below the panels, in axes of their own (``fig.axes[2:]``), in 10-point type.
"""

from __future__ import annotations

import math
from typing import Any

#: Type size of legends, labels and titles (points).
LEGEND_SIZE, LABEL_SIZE = 10, 11
#: Drawn in place of an unbounded side of a local-exponent interval (an arrow marks it).
_OPEN_END = 0.6


def _decimal(text: str | None) -> float | None:
    """The float of a certified decimal string, for drawing only (None stays None)."""
    return None if text is None else float(text)


def sweeps_figure(documents: list[dict[str, Any]], title: str | None = None) -> Any:
    """The two-panel figure of the sweep reports ``documents`` (see the module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...plumbing.plotting import label_log_axis

    entries = 4 * len(documents) + 2  # legend lines below the taller panel (fits take two)
    legend_height = 0.24 * entries + 0.3
    fig, grid = plt.subplots(2, 2, figsize=(13.0, 4.8 + legend_height),
                             gridspec_kw={"height_ratios": [4.8, legend_height]})
    (ranks_ax, exp_ax), legend_axes = grid[0], grid[1]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xs_all: list[float] = []
    ys_all: list[float] = []
    ceilings: dict[int, list[str]] = {}
    width = 0.09 / max(1, len(documents))  # horizontal offset between sweeps, in decades
    for index, doc in enumerate(documents):
        color = colors[index % len(colors)]
        name = f"{doc['support']} $d = {doc['dim']}$, $N = {doc['n']}$"
        shift = 10 ** (width * (index - (len(documents) - 1) / 2))
        eps = float(doc["eps"])
        xs = [(1 + pt["kappa"] / eps**2) * shift for pt in doc["points"]]
        lo = [max(pt["lower"], 0.8) for pt in doc["points"]]
        up = [pt["upper"] for pt in doc["points"]]
        bar_x, bar_y = [], []
        for x, a, b in zip(xs, lo, up):  # one vertical bar per point, NaN between: nothing interpolated
            bar_x += [x, x, math.nan]
            bar_y += [a, b, math.nan]
        ranks_ax.plot(bar_x, bar_y, "-", marker="_", color=color, linewidth=2.2, markersize=12, markeredgewidth=2.2,
                      label=f"{name}: certified bracket [lower, upper]{_fits(doc)}")
        e = doc["exponent_theory"]
        if e > 0 and xs:
            anchor = math.sqrt(max(lo[0], 1.0) * max(up[0], 1.0))
            grid = [xs[0], xs[-1]]
            ranks_ax.plot(grid, [anchor * (g / xs[0]) ** e for g in grid], ":", color=color, linewidth=1.2,
                          label=f"{name}: theory slope {e:g} (reference)")
        ceilings.setdefault(int(doc["points"][0]["p"]), []).append(name)
        xs_all += xs
        ys_all += lo + up
        _draw_exponents(exp_ax, doc, color, name, shift)
    for p, names in sorted(ceilings.items()):
        ranks_ax.axhline(p, color="grey", linewidth=0.8,
                         label=f"rank ceiling $p = {p}$" + (f" ({', '.join(names)})" if len(ceilings) > 1 else ""))
        ys_all.append(p)
    for ax in (ranks_ax, exp_ax):
        ax.set_xscale("log")
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel(r"$x = 1 + \kappa / \varepsilon^2$", fontsize=LABEL_SIZE)
        label_log_axis(ax.xaxis, xs_all)
    ranks_ax.set_yscale("log")
    label_log_axis(ranks_ax.yaxis, [max(y, 1.0) for y in ys_all], integers=True)
    ranks_ax.set_ylabel(r"certified bracket of $r_\varepsilon(A)$", fontsize=LABEL_SIZE)
    tolerances = ", ".join(sorted({str(doc["eps"]) for doc in documents}))
    sizes = ", ".join(str(n) for n in sorted({int(doc["n"]) for doc in documents}))
    setting = f"$\\varepsilon = {tolerances}$, $n = {sizes}$" if documents else ""
    ranks_ax.set_title("kernel-verified rank brackets (sampled points only)" + (f"\n{setting}" if setting else ""),
                       fontsize=LABEL_SIZE)
    exp_ax.set_ylabel(r"local exponent $\log(r_2/r_1)/\log(x_2/x_1)$", fontsize=LABEL_SIZE)
    exp_ax.set_title("certified local-exponent intervals", fontsize=LABEL_SIZE)
    fig.suptitle(title or "certified ranks on supports", fontsize=12)
    for ax, below in zip((ranks_ax, exp_ax), legend_axes):
        below.axis("off")  # the legends get their own row, so the panels keep their size
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            below.legend(handles, labels, fontsize=LEGEND_SIZE, loc="upper center", ncol=1, frameon=False)
    fig.tight_layout()
    return fig


def _fits(doc: dict[str, Any]) -> str:
    """`` (fit slopes 0.41 / 0.47, float64 estimates)`` of the lower and upper ends, when there are any."""
    estimates = doc.get("estimates") or {}
    values = [estimates.get("exponent_fit_lower"), estimates.get("exponent_fit_upper")]
    if all(v is None for v in values):
        return ""
    text = " / ".join("n/a" if v is None else f"{0.0 if abs(v) < 0.005 else v:.2f}" for v in values)
    return f"\n(fit slope {text}: float64 estimates, lower / upper ends)"


def _draw_exponents(ax: Any, doc: dict[str, Any], color: str, name: str, shift: float) -> None:
    """The certified local-exponent intervals of one sweep and its theory line."""
    rows = doc.get("local_exponents") or []
    drawn = False
    for row in rows:
        lo, hi = _decimal(row["lower"]), _decimal(row["upper"])
        if lo is None and hi is None:
            continue
        x = math.sqrt(row["x1"] * row["x2"]) * shift
        bottom = lo if lo is not None else (hi - _OPEN_END)  # type: ignore[operator]  # both None: `continue` above
        top = hi if hi is not None else (lo + _OPEN_END)  # type: ignore[operator]  # both None: `continue` above
        ax.plot([x, x], [bottom, top], "-", marker="_", markersize=12, markeredgewidth=2.5, color=color,
                linewidth=3.0, label="_nolegend_" if drawn else f"{name}: certified local-exponent interval "
                                                                 "(thin line: its span)")
        ax.hlines([(bottom + top) / 2], [row["x1"] * shift], [row["x2"] * shift], color=color, linewidth=0.6,
                  alpha=0.5)
        for open_end, marker in ((lo is None, "v"), (hi is None, "^")):
            if open_end:  # an unbounded side: an arrow head at the drawn end
                ax.plot([x], [bottom if marker == "v" else top], marker, color=color, markersize=7)
        drawn = True
    decade_drawn = False
    for row in doc.get("decade_exponents") or []:
        if row["lower"] is None or row["upper"] is None or row in rows:
            continue  # a decade interval that is also a consecutive one is drawn once
        ax.fill_between([row["x1"] * shift, row["x2"] * shift], _decimal(row["lower"]), _decimal(row["upper"]),
                        facecolor=color, alpha=0.18, edgecolor=color, linewidth=0.8,
                        label="_nolegend_" if decade_drawn else f"{name}: certified exponent over "
                                                                r"$x_2/x_1 \geq 10$ (box: its span)")
        decade_drawn = True
    ax.axhline(doc["exponent_theory"], color=color, linestyle="--", linewidth=1.2,
               label=f"{name}: theory exponent {doc['exponent_theory']:g} (reference)")


def plot_sweeps(documents: list[dict[str, Any]], out: str, title: str | None = None) -> None:
    """Write :func:`sweeps_figure` to ``out`` (PNG, PDF or SVG as its suffix says)."""
    import matplotlib.pyplot as plt

    from ...plumbing.plotting import save_figure

    fig = sweeps_figure(documents, title)
    try:
        save_figure(fig, out)
    finally:
        plt.close(fig)
