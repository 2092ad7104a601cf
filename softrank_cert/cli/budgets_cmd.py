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
from ..parallel import pack_operator, resolve_jobs, run_tasks
from .bracket_cmd import add_campaign_options, add_parallel_options, campaign_memory
from .common import (
    PLOT_SUFFIXES, OperatorProgress, OutputFiles, budget_help, check_distinct_outputs, check_output_file, safe_text,
    save_figure_atomic, stdout_console,
)

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

With --resume (and --out R.json) the study is a resumable campaign: R-campaign.json records each
finished operator (rewritten atomically after every one), and a later run with --resume keeps
the results recorded there for operators with the same exact inputs, --eps, --budgets and
--budget-seconds, and computes the rest. Pass --resume from the first run of a long study. A worker that dies costs its task
one retry; a task that fails again (or is refused by --max-memory) is left out and listed.

exit codes: 0 the study ran; 2 invalid input (bad --budgets or --eps, unreadable panel,
an operator name in two panels, an unusable --out/--table/--plot: checked before any work;
a failed run writes no report) or an output that cannot be written (a full disk);
4 a checker bug (verified lower above verified upper); 6 the study ran but some operators
failed or were refused (listed under "failed"); 130 interrupted (resume with --resume).
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
                   help=budget_help("bracket search time per operator, and at most as much again for the budget pass"))
    add_parallel_options(p)
    add_campaign_options(p)
    p.add_argument("--json", action="store_true", help="print the report JSON instead of the table")
    p.add_argument("--out", metavar="RESULTS.json", help="write the report JSON here (with --resume also the campaign "
                                                         "manifest RESULTS-campaign.json beside it)")
    p.add_argument("--plot", metavar="BUDGETS.png", help="plot the fractions against block width (.png, .pdf or .svg)")
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
          scheduler: str | None = None, show_progress: bool = True, manifest: Path | None = None,
          resume: bool = False, max_memory: int | None = None) -> dict[str, Any]:
    """Run the study on the panels and return the report (see :mod:`softrank_cert.budgets`).

    ``manifest``: a campaign manifest (:mod:`softrank_cert.campaign`) rewritten after every
    operator, with each finished operator's result; ``resume`` keeps the results of a previous
    manifest at that path for operators with the same exact inputs, tolerance, budgets and time
    budget.  Operators whose task fails (after a retry when its worker died) or is refused for
    memory (``max_memory``) are left out of the groups and listed under ``"failed"``.
    """
    from ..budgets import OperatorBudgets, summarize
    from ..certio.signing import utc_now_rfc3339

    operators = _load(panels)
    tasks = [(pack_operator(item.operator), item.name, stem, eps, budgets, budget_seconds) for item, stem in operators]
    start = time.perf_counter()
    results: dict[int, OperatorBudgets] = {}
    campaign = _budgets_campaign(manifest, resume, operators, panels, eps, budgets, budget_seconds, jobs, scheduler,
                                 max_memory) if manifest is not None else None
    if campaign is not None:
        results.update(campaign.kept)
    todo = [i for i in range(len(tasks)) if i not in results]
    failed: list[dict[str, Any]] = []
    try:
        _run_study(operators, tasks, todo, results, failed, campaign, eps, jobs, scheduler, show_progress, max_memory)
    except KeyboardInterrupt:
        if campaign is not None:
            campaign.manifest.finish("interrupted")
            try:
                campaign.manifest.save()
            except InvalidInputError:
                pass
        raise
    if campaign is not None:
        campaign.manifest.finish("incomplete" if failed else "complete")
        campaign.manifest.save()
    items = [results[i] for i in sorted(results)]
    return {"format": "softrank-budgets-report", "version": 1, "eps": eps, "budgets": budgets,
            "panels": [str(p) for p in panels], "budget_seconds": budget_seconds,
            "classes": {"feasible": "verified upper end <= budget (r_eps <= b proved)",
                        "impossible": "verified lower end > budget (r_eps > b proved)",
                        "unresolved": "neither end proves anything about the budget"},
            "generator": {"name": "softrank-cert", "version": __version__, "created": utc_now_rfc3339()},
            "seconds": round(time.perf_counter() - start, 3),
            "groups": summarize(items, budgets), "operators": [item.to_json() for item in items],
            "failed": failed}


def _run_study(operators: list[tuple[NamedOperator, str]], tasks: list[tuple], todo: list[int], results: dict[int, Any],
               failed: list[dict[str, Any]], campaign: Any, eps: str, jobs: int, scheduler: str | None,
               show_progress: bool, max_memory: int | None) -> None:
    from ..budgets import study_operator
    from ..memory import operator_task_bytes

    with OperatorProgress("softrank budgets", len(tasks), bar=show_progress, lines=show_progress) as bar:
        for i in sorted(results):
            bar.advance(operators[i][0].name)
            bar.finished(operators[i][0].name, "kept (resumed)")
        with closing(run_tasks(study_operator, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                               memory=[operator_task_bytes(operators[i][0].operator) for i in todo],
                               max_memory=max_memory, done=lambda j: bar.advance(operators[todo[j]][0].name))) as outcomes:
            for outcome in outcomes:
                i = todo[outcome.index]
                name = operators[i][0].name
                if not outcome.ok:
                    status = "refused" if outcome.refused else "failed"
                    failed.append({"operator": name, "status": status, "reason": outcome.failure,
                                   "attempts": outcome.attempts})
                    if campaign is not None:
                        campaign.manifest.update(name, status=status, reason=outcome.failure, attempts=outcome.attempts)
                        campaign.manifest.run["failed"] += 1
                        campaign.manifest.save()
                    bar.finished(name, f"{status.upper()}: {outcome.failure}")
                    continue
                item = outcome.value
                results[i] = item
                if campaign is not None:
                    campaign.manifest.update(name, status="done", seconds=round(item.seconds, 3),
                                             attempts=outcome.attempts, result=item.to_json(), resumed=False)
                    campaign.manifest.run["computed"] += 1
                    campaign.manifest.save()
                classes = ", ".join(f"{b} {cls}" for b, cls in item.classes.items())
                bar.finished(item.name, f"eps {eps} [{item.lower}, {item.upper}]: budget {classes} "
                                        f"in {item.seconds:.1f} s")


class _BudgetsCampaign:
    def __init__(self, manifest: Any, kept: dict[int, Any]) -> None:
        self.manifest, self.kept = manifest, kept


def _budgets_campaign(path: Path, resume: bool, operators: list[tuple[NamedOperator, str]], panels: list[str], eps: str,
                      budgets: list[int], budget_seconds: float | None, jobs: int, scheduler: str | None,
                      max_memory: int | None) -> _BudgetsCampaign:
    """The manifest of a budgets study and, with ``resume``, the results it keeps (index -> result)."""
    from ..budgets import OperatorBudgets
    from ..campaign import Manifest, budget_json, file_sha256, operator_sha256
    from ..memory import operator_task_bytes

    parameters = {"panel": [{"path": str(p), "sha256": file_sha256(p)} for p in panels],
                  "tolerances": [eps], "budgets": budgets, "budget_seconds": budget_json(budget_seconds),
                  "max_memory": max_memory, "jobs": jobs, "scheduler": scheduler, "signer": None}
    previous = Manifest.read(path) if resume else None
    digests = [operator_sha256(item.operator) for item, _stem in operators]
    manifest = Manifest.start(path, "budgets", parameters,
                              [(item.name, {"operator_sha256": digest, "output": None,
                                            "estimated_bytes": operator_task_bytes(item.operator)})
                               for (item, _stem), digest in zip(operators, digests)], resume=resume)
    kept: dict[int, Any] = {}
    same = previous is not None and previous.get("command") == "budgets" and all(
        previous.get(key) == parameters[key] for key in ("tolerances", "budgets", "budget_seconds"))
    if same:
        for i, ((item, _stem), digest) in enumerate(zip(operators, digests)):
            entry = previous["operators"].get(item.name)
            if not isinstance(entry, dict) or entry.get("status") != "done" or entry.get("operator_sha256") != digest:
                continue
            try:
                result = OperatorBudgets.from_json(entry["result"])
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if result.name != item.name or result.eps != eps or sorted(result.classes) != sorted(budgets):
                continue
            kept[i] = result
            manifest.update(item.name, status="done", resumed=True, seconds=entry.get("seconds"),
                            attempts=entry.get("attempts", 0), finished=entry.get("finished"), result=entry["result"])
            manifest.run["skipped"] += 1
    manifest.save()
    return _BudgetsCampaign(manifest, kept)


PLOT_FORMATS = PLOT_SUFFIXES


def run_budgets(args: Any) -> int:
    from ..budgets import parse_budgets

    budgets = parse_budgets(args.budgets)
    parse_tolerance(args.eps)
    if args.budget_seconds is not None and not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    out = check_output_file(args.out, "--out") if args.out else None
    table = check_output_file(args.table, "--table") if args.table else None
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_FORMATS) if args.plot else None
    jobs = resolve_jobs(args.jobs)
    for path in args.panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    check_distinct_outputs({"--out": out, "--table": table, "--plot": plot}, {f"panel {path}": Path(path) for path in args.panels})
    if args.resume and out is None:
        raise InvalidInputError("--resume needs --out RESULTS.json (the campaign manifest lives beside it)")
    manifest = out.with_name(out.stem + "-campaign.json") if args.resume else None
    if manifest is not None:
        from ..parallel import check_scheduler

        check_scheduler(args.scheduler)  # before the manifest is written
        check_output_file(manifest, "--out")
        check_distinct_outputs({"--out": out, "--table": table, "--plot": plot, "the campaign manifest": manifest})
    report = study(args.panels, args.eps, budgets, args.budget_seconds, jobs=jobs, scheduler=args.scheduler,
                   show_progress=not args.json, manifest=manifest, resume=args.resume,
                   max_memory=campaign_memory(args))
    with OutputFiles() as outputs:  # all or nothing: a failed run leaves no partial report
        if out:
            outputs.stage_json(out, report)
        if table:
            outputs.stage_text(table, markdown_table(report))
        if plot:
            outputs.stage_figure(budgets_figure(report), plot)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        render(report)
        written = [f"{what}: {path}" for what, path in (("report", args.out), ("table", args.table), ("plot", args.plot))
                   if path]
        if written:
            print("; ".join(written))
        if report["failed"]:
            print(f"{len(report['failed'])} operator(s) failed or were refused and are not counted: "
                  + ", ".join(entry["operator"] for entry in report["failed"][:5])
                  + (", ..." if len(report["failed"]) > 5 else ""))
    from ..errors import EXIT_SOME_FAILED

    return EXIT_SOME_FAILED if report["failed"] else 0


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
    save_figure_atomic(budgets_figure(report), path)


def budgets_figure(report: dict[str, Any]) -> Any:
    """The matplotlib figure of :func:`plot_budgets`."""
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
    return fig
