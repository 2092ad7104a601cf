"""Shared figure plumbing of every ``--plot`` (front end; decides nothing).

* :data:`PLOT_SUFFIXES`, :func:`figure_format`, :data:`DPI`, :func:`save_figure` (defined in
  :mod:`~softrank_cert.util.figure_formats`, re-exported here): formats, the one DPI, the one place figures are
  saved; :func:`save_figure_atomic` writes one to its file atomically
  (:class:`~softrank_cert.util.files.OutputFiles`) and closes it.
* :func:`label_log_axis`: plain-number tick labels on a log axis, at least a few of them even
  when the data span less than a decade (no ``2 x 10^0`` labels, no axis with one label).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from ..util.figure_formats import DPI, PLOT_SUFFIXES, figure_format, save_figure
from ..util.files import OutputFiles

#: Mantissas of the tick sets tried by :func:`label_log_axis`, sparsest first.
_MANTISSAS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0),
              (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0))


def save_figure_atomic(fig: Any, path: Path) -> None:
    """Save a matplotlib figure atomically in the format its suffix names (PNG by default), then
    close it."""
    with OutputFiles() as outputs:
        outputs.stage_figure(fig, path)


def log_ticks(low: float, high: float, *, minimum: int = 4, maximum: int = 12) -> list[float]:
    """Tick positions for a log axis over ``[low, high]``: the sparsest 1-2-5-style set with at
    least ``minimum`` ticks inside (at most ``maximum``; the densest set otherwise)."""
    if not (low > 0 and high > 0):
        return []
    low, high = min(low, high), max(low, high)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    best: list[float] = []
    for mantissas in _MANTISSAS:
        ticks = [round(m * 10.0 ** e, 12) for e in range(first, last + 1) for m in mantissas]
        ticks = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
        if len(ticks) > maximum and best:
            return best
        best = ticks
        if len(ticks) >= minimum:
            return ticks
    return best


def plain_number(value: float) -> str:
    """A tick label without powers of ten for moderate numbers (``0.02``, ``3``, ``1500``)."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e6:
        return f"{value:g}"
    exponent = math.floor(math.log10(abs(value)))
    mantissa = value / 10 ** exponent
    return rf"${mantissa:g} \times 10^{{{exponent}}}$" if abs(mantissa - 1) > 1e-9 else rf"$10^{{{exponent}}}$"


def label_log_axis(axis: Any, values: Iterable[float], *, integers: bool = False) -> None:
    """Fixed, plain-number tick labels on the log-scaled ``axis`` (``ax.xaxis`` / ``ax.yaxis``)
    spanning ``values`` (their positive finite part; nothing to do without any).  With
    ``integers`` (a rank axis) only whole numbers are ticked: every one of them up to 12 when
    the 1-2-5 ticks are too few."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    finite = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not finite:
        return
    low, high = min(finite), max(finite)
    ticks = log_ticks(low, high)
    if len(ticks) < 2:  # a single value (or a tiny span): the value itself and its neighbours
        ticks = sorted({*log_ticks(low / 2, low * 2), low})
    if integers:
        ticks = [t for t in ticks if t >= 1 and abs(t - round(t)) < 1e-9]
        if len(ticks) < 4:
            whole: list[float] = list(range(max(1, math.ceil(low)), math.floor(high) + 1))
            ticks = whole if len(whole) <= 12 else sorted({*ticks, *whole[:: max(1, len(whole) // 6)]})
        if not ticks:
            ticks = [max(1, round(low))]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: plain_number(value)))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


__all__ = ["DPI", "PLOT_SUFFIXES", "figure_format", "label_log_axis", "log_ticks", "plain_number", "save_figure",
           "save_figure_atomic"]
