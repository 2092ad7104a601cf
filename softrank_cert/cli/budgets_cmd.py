"""``softrank budgets``: which fixed rank budgets are feasible / impossible / unresolved per block width."""

from __future__ import annotations

import argparse
import json
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InvalidInputError
from ..kernel import parse_tolerance
from ..operators_npz import NamedOperator, load_operators
from ..parallel import pack_operator, resolve_jobs, run_ordered
from .bracket_cmd import add_parallel_options
from .common import progress_bar, safe_text, save_figure_atomic, stdout_console, write_text_atomic
from .keys import write_json_atomic

EPILOG = """\
examples:
  softrank budgets examples/panels/minilm-apache2-w32.npz --budgets 8,16,32 --eps 0.25
  softrank budgets apache2.npz mpl2.npz --budgets 8,16,32 --eps 0.25 --budget-seconds 6 --jobs 2 \\
      --out budgets.json --plot budgets.png --table budgets.md
  softrank budgets panel.npz --budgets 16 --eps 0.1 --json
  softrank budgets panel.npz --budgets 8,16,32 --eps 0.25 --scheduler tcp://10.0.0.5:8786

Each operator's r_eps(A) is bracketed with ends VERIFIED by the trusted kernel, then a cheap pass
aims at the budgets (a witness at rank b, a pooled certificate at k = b + 1; only VERIFIED
ones count). A budget b is feasible when the verified upper end is <= b (some rank-b matrix is
within eps), impossible when the verified lower end is > b (none is), unresolved otherwise.
Operators are grouped by document and block width read from names like
minilm/apache2/w128/L3H7 (no w<N> segment: width group "-"; document = the panel's stem).
Without --budget-seconds the searches run to the end; with it, each operator gets S seconds
of bracket search and at most S more for the targeted pass (a faster machine may resolve more).

exit codes: 0 the study ran; 2 invalid input (bad --budgets or --eps, unreadable panel,
an operator name in two panels); 4 a checker bug (verified lower above verified upper).
"""


def add_budgets(sub: Any) -> None:
    p = sub.add_parser("budgets", help="fraction of heads for which rank budgets are feasible / impossible",
                       description="For every operator of the panels, bracket r_eps with kernel-verified ends and "
                                   "classify each rank budget as feasible, impossible or unresolved; report the "
                                   "fractions per document and block width.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("panels", nargs="+", metavar="PANEL.npz")
    p.add_argument("--budgets", required=True, metavar="B1,B2,...", help="rank budgets, e.g. 8,16,32")
    p.add_argument("--eps", required=True, metavar="E", help="one exact decimal tolerance, e.g. 0.25")
    p.add_argument("--budget-seconds", type=float, metavar="S",
                   help="bracket search time per operator (and at most as much again for the budget pass)")
    add_parallel_options(p)
    p.add_argument("--json", action="store_true", help="print the report JSON instead of the table")
    p.add_argument("--out", metavar="RESULTS.json", help="write the report JSON here")
    p.add_argument("--plot", metavar="BUDGETS.png", help="plot the fractions against block width")
    p.add_argument("--table", metavar="BUDGETS.md", help="write the table as Markdown")
    p.set_defaults(run=run_budgets)


def _load(paths: list[str]) -> list[tuple[NamedOperator, str]]:
    """Every operator of every panel (panel order, then name order) with its panel's stem."""
    out: list[tuple[NamedOperator, str]] = []
    seen: dict[str, str] = {}
    for path in paths:
        for item in load_operators(Path(path)):
            if item.name in seen:
                raise InvalidInputError(f"operator {item.name!r} is in both {seen[item.name]} and {path}")
            seen[item.name] = path
            out.append((item, Path(path).stem))
    return out


def study(panels: list[str], eps: str, budgets: list[int], budget_seconds: float | None, *, jobs: int = 1,
          scheduler: str | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Run the study on the panels and return the report (see :mod:`softrank_cert.budgets`)."""
    from ..budgets import study_operator, summarize
    from ..certio.signing import utc_now_rfc3339

    operators = _load(panels)
    tasks = [(pack_operator(item.operator), item.name, stem, eps, budgets, budget_seconds) for item, stem in operators]
    start = time.perf_counter()
    with progress_bar(show_progress) as bar:
        task = bar.add_task("budgets", total=len(tasks))
        with closing(run_ordered(study_operator, tasks, jobs=jobs, scheduler=scheduler,
                                 done=lambda i: bar.update(task, advance=1,
                                                           description=safe_text(operators[i][0].name)))) as results:
            items = list(results)
    return {"format": "softrank-budgets-report", "version": 1, "eps": eps, "budgets": budgets,
            "panels": [str(p) for p in panels], "budget_seconds": budget_seconds,
            "classes": {"feasible": "verified upper end <= budget (r_eps <= b proved)",
                        "impossible": "verified lower end > budget (r_eps > b proved)",
                        "unresolved": "neither end proves anything about the budget"},
            "generator": {"name": "softrank-cert", "version": __version__, "created": utc_now_rfc3339()},
            "seconds": round(time.perf_counter() - start, 3),
            "groups": summarize(items, budgets), "operators": [item.to_json() for item in items]}


PLOT_FORMATS = (".png", ".pdf", ".svg")


def run_budgets(args: Any) -> int:
    from ..budgets import parse_budgets

    budgets = parse_budgets(args.budgets)
    parse_tolerance(args.eps)
    if args.budget_seconds is not None and not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    if args.plot and Path(args.plot).suffix.lower() not in PLOT_FORMATS:
        raise InvalidInputError(f"--plot must end in {', '.join(PLOT_FORMATS)}, got {args.plot!r}")
    jobs = resolve_jobs(args.jobs)
    for path in args.panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    report = study(args.panels, args.eps, budgets, args.budget_seconds, jobs=jobs, scheduler=args.scheduler,
                   show_progress=not args.json)
    if args.out:
        write_json_atomic(Path(args.out), report)
    if args.table:
        write_text_atomic(Path(args.table), markdown_table(report))
    if args.plot:
        plot_budgets(report, Path(args.plot))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        render(report)
        written = [f"{what}: {path}" for what, path in (("report", args.out), ("table", args.table), ("plot", args.plot))
                   if path]
        if written:
            print("; ".join(written))
    return 0


def _cell(entry: dict[str, Any], cls: str) -> str:
    return f"{entry[cls]} ({100 * entry[cls + '_fraction']:.0f}%)"


def _rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for g in report["groups"]:
        for b in report["budgets"]:
            entry = g["budgets"][str(b)]
            rows.append([g["document"], str(g["width"]), str(b), str(g["heads"]), _cell(entry, "feasible"),
                         _cell(entry, "impossible"), _cell(entry, "unresolved"),
                         f"{g['median_lower']:g} / {g['median_upper']:g}"])
    return rows


COLUMNS = ("document", "width", "budget", "heads", "feasible", "impossible", "unresolved", "median lower / upper")


def render(report: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"softrank budgets at eps {report['eps']} (every end VERIFIED by the trusted kernel)")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "document" else "right")
    previous = None
    for row in _rows(report):
        if previous is not None and row[:2] != previous:
            table.add_section()
        previous = row[:2]
        table.add_row(*[safe_text(cell) for cell in row])
    stdout_console().print(table)
    print(f"{len(report['operators'])} operators in {report['seconds']:.1f} s; feasible: verified upper end <= budget, "
          "impossible: verified lower end > budget")


def markdown_table(report: dict[str, Any]) -> str:
    """The table as GitHub Markdown (counts and fractions of heads per document, width, budget)."""
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"Rank budgets at eps {report['eps']}: heads per class (every end VERIFIED by the trusted kernel; "
             "feasible = verified upper end <= budget, impossible = verified lower end > budget).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" if c == "document" else "---:" for c in COLUMNS) + "|"]
    lines += ["| " + " | ".join(esc(cell) for cell in row) + " |" for row in _rows(report)]
    return "\n".join(lines) + "\n"


def plot_budgets(report: dict[str, Any], path: Path) -> None:
    """One panel per document: fraction of heads against block width (log2 axis); per budget a
    colour, solid = feasible, dashed = impossible, dotted = unresolved.  Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    from ..budgets import NO_WIDTH

    documents = sorted({g["document"] for g in report["groups"]})
    fig, axes = plt.subplots(1, max(len(documents), 1), figsize=(4.6 * max(len(documents), 1) + 1.8, 4.4),
                             sharey=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = {"feasible": ("-", "o"), "impossible": ("--", "s"), "unresolved": (":", "^")}
    for ax, document in zip(axes[0], documents):
        groups = [g for g in report["groups"] if g["document"] == document and g["width"] != NO_WIDTH]
        widths = [g["width"] for g in groups]
        for i, b in enumerate(report["budgets"]):
            for cls, (line, marker) in styles.items():
                ax.plot(widths, [g["budgets"][str(b)][cls + "_fraction"] for g in groups], linestyle=line,
                        marker=marker, color=colours[i % len(colours)], markersize=4,
                        linewidth=1.1 if cls == "unresolved" else 1.6, alpha=0.55 if cls == "unresolved" else 0.95)
        if widths:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(FixedLocator(widths))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([str(w) for w in widths])
            ax.set_xlim(min(widths) / 1.25, max(widths) * 1.25)
        else:
            ax.text(0.5, 0.5, "no operator with a w<N> width", ha="center", va="center", transform=ax.transAxes)
        heads = sorted({g["heads"] for g in groups})
        ax.set_title(f"{document} ({'/'.join(map(str, heads)) or 0} heads per width)", fontsize=10)
        ax.set_xlabel("block width w (tokens)")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("fraction of heads")
    handles = [Line2D([], [], color=colours[i % len(colours)], linewidth=2, label=f"budget {b}")
               for i, b in enumerate(report["budgets"])]
    meaning = {"feasible": "feasible\n(verified upper <= b)", "impossible": "impossible\n(verified lower > b)",
               "unresolved": "unresolved"}
    handles += [Line2D([], [], color="gray", linestyle=line, marker=marker, label=meaning[cls])
                for cls, (line, marker) in styles.items()]
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(f"softrank budgets: fraction of heads per rank budget b at eps = {report['eps']}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 1.6 / fig.get_figwidth(), 1))
    save_figure_atomic(fig, path)
