"""Figure files (a utility below the output-file staging that writes them): the formats every
``--plot`` takes, the one DPI and the one place a figure is saved.

* :data:`PLOT_SUFFIXES` / :func:`figure_format`: a figure is written as PNG, PDF or SVG as its
  file name's suffix says (matplotlib writes each without extra packages); anything else is
  refused before any work (``check_output_file(..., suffixes=PLOT_SUFFIXES)``, exit 2).
* :func:`save_figure`: format from the suffix, PNG at :data:`DPI`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Figure formats of every ``--plot`` option.
PLOT_SUFFIXES = (".png", ".pdf", ".svg")
#: Resolution of PNG figures (PDF and SVG are vector graphics): the one value of every figure,
#: written by a command (``--plot``) or by the API (a figure the API makes carries it, so that a
#: plain ``fig.savefig("x.png")`` gives the same pixels as the command; a 7.2 x 5.2 in profile
#: figure is 1440 x 1040 px).
DPI = 200


def figure_format(path: str | Path) -> str:
    """``"png"``, ``"pdf"`` or ``"svg"`` from a file name's suffix (no suffix: PNG)."""
    suffix = Path(path).suffix.lower()
    if not suffix:
        return "png"
    if suffix not in PLOT_SUFFIXES:
        from ..errors import InvalidInputError

        raise InvalidInputError(f"{path}: unsupported figure type ('{suffix}'); use {', '.join(PLOT_SUFFIXES)}")
    return suffix[1:]


def save_figure(fig: Any, target: str | Path, *, name: str | Path | None = None, dpi: int = DPI) -> None:
    """Save ``fig`` to ``target`` in the format of ``name``'s suffix (default: ``target``'s)."""
    fmt = figure_format(name if name is not None else target)
    options: dict[str, Any] = {"format": fmt, "dpi": dpi}
    if fmt in ("pdf", "svg"):
        options["metadata"] = {"Creator": "softrank-cert"}
    fig.savefig(target, **options)
