"""The figure of a certified rank profile: both curves against the tolerance (an untrusted
front end: every drawn step is a kernel-VERIFIED step of the :class:`~.curves.Profile`)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import numpy as np

from ...kernel import parse_tolerance
from .steps import interval_value

if TYPE_CHECKING:
    from .curves import Profile


def _curve_values(profile: Profile, edges: list[Fraction]) -> tuple[list[int], list[int]]:
    """L and U on each open interval between consecutive ``edges`` (constant there)."""
    lows, ups = [], []
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        lows.append(max((s.k for s in profile.lower if mid <= s.value), default=0))
        ups.append(min(s.r for s in profile.upper if s.everywhere or mid >= s.value))
    return lows, ups


#: Labelled rank ticks on the log axis are at least this many octaves apart (about 11 points at
#: the figure's size: labels never overlap).
MIN_TICK_GAP_OCTAVES = 0.3


def step_ticks(heights: Sequence[int], gap: float = MIN_TICK_GAP_OCTAVES) -> list[int]:
    """The step heights to label on the log2 rank axis: from the bottom, each height at least
    ``gap`` octaves above the last one labelled, and the top one (``p``) always, dropping the
    one below it if it is too close.  The others keep an unlabelled tick."""
    chosen: list[int] = []
    for h in sorted(set(heights)):
        if not chosen or math.log2(h / chosen[-1]) >= gap:
            chosen.append(h)
    top = max(heights)
    if chosen[-1] != top:
        if len(chosen) > 1 and math.log2(top / chosen[-1]) < gap:
            chosen.pop()
        chosen.append(top)
    return chosen


def profile_figure(profile: Profile, *, marks: Sequence[str] = (), ax: Any = None, yscale: str = "log") -> Any:
    """Both certified curves against eps (log axis), the band between them shaded, the
    tolerances where they meet (resolved) marked; ``marks``: tolerances to annotate with
    their bracket (e.g. those of a certificate).  Every drawn step is a VERIFIED step.
    ``yscale``: ``"log"`` (base 2, default: small ranks stay readable; the rank ticks sit at the
    step heights, :func:`step_ticks` labels those that fit, grid lines at every labelled one) or
    ``"linear"`` (a linear grid)."""
    import matplotlib

    if ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from ...plumbing.plotting import DPI

    own = ax is None
    if own:  # at the commands' DPI, so that fig.savefig() writes what softrank profile --plot writes
        fig, ax = plt.subplots(figsize=(7.2, 5.2), layout="constrained", dpi=DPI)
    else:
        fig = ax.figure
    p = profile.operator.p
    left = parse_tolerance(profile.floor_eps)
    right = Fraction(1)
    inner = sorted({s.value for s in profile.lower} | {s.value for s in profile.upper if not s.everywhere})
    edges = [left] + [x for x in inner if left < x < right] + [right]
    ranks_below, ups = _curve_values(profile, edges)
    lows = [v if v > 0 else (0.5 if yscale == "log" else 0) for v in ranks_below]  # k = 0: off a log axis
    xs = np.array([float(x) for x in edges])
    blue, red, green, band = "#1f4e99", "#b2182b", "#1a9850", "#cfd8e6"
    ax.fill_between(xs, np.append(lows, lows[-1]), np.append(ups, ups[-1]), step="post", color=band, alpha=0.9,
                    linewidth=0, label=r"$r_\varepsilon(A)$ lies in this band")
    ax.stairs(ups, xs, color=red, linewidth=1.8, baseline=None,
              label=r"certified upper: witness with $r_\varepsilon \leq r$ for $\varepsilon \geq e_r$")
    ax.stairs(lows, xs, color=blue, linewidth=1.8, baseline=None,
              label=r"certified lower: certificate with $r_\varepsilon \geq k$ for $\varepsilon \leq t_k$")
    first = True
    for iv in profile.resolved:
        a, b = max(interval_value(iv.low), left), min(interval_value(iv.high), right)
        if a < b:
            ax.plot([float(a), float(b)], [iv.rank, iv.rank], color=green, linewidth=4.5, solid_capstyle="butt",
                    label=r"resolved: $r_\varepsilon$ exact" if first else None, zorder=4)
            first = False
    grid_pts = [(float(parse_tolerance(e)),) + profile.ends_at(e) for e in profile.grid]
    res = [(x, lo) for x, lo, up in grid_pts if lo == up]
    ax.plot([x for x, _ in res], [y for _, y in res], linestyle="none", marker="o", markersize=5.5,
            markerfacecolor=green, markeredgecolor="white", markeredgewidth=0.8, zorder=5,
            label="resolved grid tolerance" if res else None)
    for e in marks:
        x = float(parse_tolerance(e))
        if not float(left) <= x <= 1:
            continue
        lo, up = profile.ends_at(e)
        ax.axvline(x, color="0.3", linewidth=0.8, linestyle=(0, (4, 3)), zorder=1)
        text = rf"$\varepsilon = {e}$: " + (f"{lo}" if lo == up else f"[{lo}, {up}]")
        ax.annotate(text, (x, up), xytext=(4, 6), textcoords="offset points", fontsize=8, color="0.15")
    ax.axhline(p, color="0.55", linewidth=0.8, linestyle=":", zorder=1)
    ax.annotate(f"$p = {p}$", (float(left), p), xytext=(4, 3), textcoords="offset points", fontsize=8, color="0.35")
    ax.set_xscale("log")
    ax.set_xlim(float(left), 1.0)
    if yscale == "log":
        from matplotlib.ticker import FixedLocator

        ax.set_yscale("log", base=2)
        ax.set_ylim(0.8, p * 1.5)
        heights = sorted({int(v) for v in lows + ups if v >= 1} | {1, p})
        labelled = step_ticks(heights)
        ax.yaxis.set_major_locator(FixedLocator(labelled))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_locator(FixedLocator([h for h in heights if h not in labelled]))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(0, p * 1.06)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"tolerance $\varepsilon$ (max-row-$\ell_1$ error $\|A - B\|$)")
    ax.set_ylabel(r"approximation rank $r_\varepsilon(A)$")
    m, n = profile.operator.shape
    shown_id = profile.operator_id.replace("$", r"\$")  # no mathtext from an operator id
    ax.set_title(f"{shown_id}  ({m}\u00d7{n} {profile.operator.kind}"
                 f"{', causal' if profile.operator.mask == 'causal' else ''}): certified bounds on $r_\\varepsilon(A)$\n"
                 f"{len(profile.lower)} lower and {len(profile.upper)} upper steps, each VERIFIED by the trusted kernel",
                 fontsize=9.5)
    ax.grid(True, which="major", alpha=0.25, linewidth=0.6)
    ax.grid(True, which="minor", axis="y", alpha=0.1, linewidth=0.5)
    if own:  # below the axes: never over a curve
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    else:
        ax.legend(fontsize=7.5, loc="best", framealpha=0.92)
    return fig
