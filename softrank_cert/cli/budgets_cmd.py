"""``softrank budgets``: which fixed rank budgets are feasible / impossible / unresolved per block width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..certio.signing import load_private_key
from ..errors import InvalidInputError
from ..util.tolerances import check_budget, parse_one_eps
from ..plumbing.certificate_files import certificate_paths
from ..util.files import OutputFiles, check_output_file, check_output_folder
from ..plumbing.parallel import resolve_jobs
from ..plumbing.plotting import PLOT_SUFFIXES
from ..plumbing.json_contract import dumps
from ..util.escaping import safe_text
from .audit_cmd import stage_certificates
from .bracket_cmd import resume_hint
from .common import (PLOT_HELP, add_campaign_run_options, add_command, budget_help, campaign_memory,
                     check_distinct_outputs, key_inputs, stdout_console)

EPILOG = """\
examples:
  softrank budgets examples/panels/minilm-apache2-w32.npz --budgets 8,16,32 --eps 0.25
  softrank budgets apache2.npz mpl2.npz --budgets 8,16,32 --eps 0.25 --budget-seconds 6 --jobs 2 \\
      --out budgets.json --plot budgets.png --table budgets.md
  softrank budgets panel.npz --budgets 16 --eps 0.1 --json
  softrank budgets panel.npz --operator minilm/apache2/w32/L0H0 --operator minilm/apache2/w32/L5H2 \\
      --budgets 8,16 --eps 0.25 --certificates certs/ --key issuer.key
  softrank budgets panel.npz --budgets 8,16,32 --eps 0.25 --scheduler tls://10.0.0.5:8786

Each operator's r_eps(A) is bracketed with ends VERIFIED by the trusted kernel, then a cheap pass
aims at the budgets (a witness at rank b, a pooled certificate at k = b + 1; only VERIFIED
ones count). A budget b is feasible when the verified upper end is <= b (some rank-b matrix is
within eps), impossible when the verified lower end is > b (none is), unresolved otherwise.
--certificates DIR writes, for every operator with a feasible or impossible budget, the
certificate of its verified ends to DIR/NAME.json (signed with --key), which proves each
such class: check them with softrank-verify DIR. With --jobs or --scheduler a worker's
certificate (--certificates, or a campaign's R-campaign/) is re-verified here before it is
stored, signed or written, and the operator's ends and classes are re-derived from it; one that
does not verify fails its operator (exit 6). Without either, the workers' numbers are reported.
--operator NAME (repeatable) restricts the study to those operators of the panels.
Operators are grouped by document and block width read from names like
minilm/apache2/w128/L3H7 (no w<N> segment: width group "-"; document = the panel's stem).
Without --budget-seconds each operator's searches are bounded by the bracket driver's default
work (the same classes however busy the machine: docs/solvers.md); with it, each operator gets
S seconds of bracket search and at most S more for the targeted pass (then a faster or quieter
machine may resolve more).

With --resume (and --out R.json) the study is a resumable campaign: R-campaign.json records each
finished operator (rewritten atomically after every one) and R-campaign/ the certificate of its
final ends; a later run with --resume keeps an operator with the same exact inputs and
--budget-seconds whose certificate there is re-verified by the kernel, re-derives its ends and
classes from that certificate (never from the manifest), and computes the rest; another --eps or
--budgets is refused (docs/campaigns.md). Pass --resume from the first run of a long study. A worker that dies costs its task
one retry; a task that fails again (or is refused by --max-memory) is left out and listed.

exit codes: 0 the study ran; 2 invalid input (bad --budgets or --eps, unreadable panel,
an operator name in two panels, an unusable --out/--table/--plot: checked before any work;
a failed run writes no report) or an output that cannot be written (a full disk);
4 a checker bug (verified lower above verified upper); 6 the study ran but some operators
failed or were refused (listed under "failed"); 130 interrupted by Ctrl-C or
SIGTERM (the message names the --resume command).
"""


def add_budgets(sub: Any) -> None:
    p = add_command(sub, "budgets", epilog=EPILOG)
    p.add_argument("panels", nargs="+", metavar="PANEL.npz")
    p.add_argument("--budgets", required=True, metavar="B1,B2,...", help="rank budgets, e.g. 8,16,32")
    p.add_argument("--eps", required=True, metavar="E", help="one exact decimal tolerance, e.g. 0.25")
    p.add_argument("--budget-seconds", type=float, metavar="S",
                   help=budget_help("bracket search time per operator, and at most as much again for the budget pass"))
    add_campaign_run_options(p, "print the report JSON instead of the table")
    p.add_argument("--out", metavar="RESULTS.json", help="write the report JSON here (with --resume also the campaign "
                                                         "manifest RESULTS-campaign.json beside it)")
    p.add_argument("--plot", metavar="BUDGETS.png", help=f"plot the fractions against block width: {PLOT_HELP}")
    p.add_argument("--table", metavar="BUDGETS.md", help="write the table as Markdown")
    p.add_argument("--operator", action="append", metavar="NAME",
                   help="study only this operator of the panels (repeatable)")
    p.add_argument("--certificates", metavar="DIR",
                   help="write the certificate behind every feasible / impossible class to DIR/NAME.json")
    p.add_argument("--key", metavar="KEYFILE", help="sign the --certificates with this key (softrank keygen)")
    p.set_defaults(run=run_budgets)


PLOT_FORMATS = PLOT_SUFFIXES


def run_budgets(args: Any) -> int:
    from ..studies.budgets.operators import parse_budgets
    from ..studies.budgets.campaign import study
    from ..studies.budgets.plot import budgets_figure

    budgets = parse_budgets(args.budgets)
    args.eps = parse_one_eps(args.eps)
    check_budget(None, args.budget_seconds, options=True)
    if args.key and not args.certificates:
        raise InvalidInputError("--key signs the --certificates: give --certificates DIR")
    if args.key:
        load_private_key(args.key)  # fail before any work
    inputs = {**{f"panel {path}": Path(path) for path in args.panels}, **key_inputs(args.key)}
    replace = bool(args.force or args.resume)  # --resume continues the campaign: its outputs are replaced
    out = check_output_file(args.out, "--out", force=replace, inputs=inputs) if args.out else None
    table = check_output_file(args.table, "--table", force=replace, inputs=inputs) if args.table else None
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_FORMATS, force=replace,
                             inputs=inputs) if args.plot else None
    jobs = resolve_jobs(args.jobs)
    for path in args.panels:
        if not Path(path).is_file():
            raise InvalidInputError(f"{path}: no such file")
    certificates = _check_certificates_folder(args, inputs, replace) if args.certificates else None
    check_distinct_outputs({"--out": out, "--table": table, "--plot": plot}, inputs)
    if args.resume and out is None:
        raise InvalidInputError("--resume needs --out RESULTS.json (the campaign manifest lives beside it)")
    manifest = out.with_name(out.stem + "-campaign.json") if args.resume and out is not None else None
    if manifest is not None:
        from ..plumbing.parallel import check_scheduler

        check_scheduler(args.scheduler)  # before the manifest is written
        check_output_file(manifest, "--out", force=True, inputs=inputs)
        check_distinct_outputs({"--out": out, "--table": table, "--plot": plot, "the campaign manifest": manifest})
    staged: dict[Path, dict[str, Any]] = {}
    report = study(args.panels, args.eps, budgets, args.budget_seconds, jobs=jobs, scheduler=args.scheduler,
                   show_progress=not args.json, manifest=manifest, resume=args.resume,
                   max_memory=campaign_memory(args), operators=args.operator, certificates=certificates,
                   key=args.key, staged=staged, resume_command=resume_hint(args))
    with OutputFiles() as outputs:  # all or nothing: a failed run leaves no partial report
        stage_certificates(outputs, staged, None)  # signed already
        if out:
            outputs.stage_json(out, report)
        if table:
            outputs.stage_text(table, markdown_table(report))
        if plot:
            outputs.stage_figure(budgets_figure(report), plot)
    if args.json:
        print(dumps(report))
    else:
        render(report)
        written = [f"{what}: {path}" for what, path in (("report", args.out), ("table", args.table), ("plot", args.plot))
                   if path]
        if certificates is not None:
            count = sum(1 for entry in report["operators"] if entry.get("certificate"))
            written.append(f"{count} certificate(s) in {certificates} (check them with: softrank-verify {certificates})")
        if written:
            print("; ".join(written))
        if report["failed"]:
            print(f"{len(report['failed'])} operator(s) failed or were refused and are not counted: "
                  + ", ".join(entry["operator"] for entry in report["failed"][:5])
                  + (", ..." if len(report["failed"]) > 5 else ""))
    from ..errors import EXIT_SOME_FAILED

    return EXIT_SOME_FAILED if report["failed"] else 0


def _check_certificates_folder(args: Any, inputs: dict[str, Path], replace: bool) -> Path:
    """``--certificates DIR`` and the file of every selected operator in it, checked before any work
    (an existing one is replaced only when ``replace``: ``--force`` or ``--resume``)."""
    from ..util.operator_files import operator_names

    probed: set[Path] = set()
    folder = check_output_folder(args.certificates, "--certificates", probed=probed)
    wanted = None if args.operator is None else set(args.operator)
    names = [name for path in args.panels for name in operator_names(path) if wanted is None or name in wanted]
    for target in certificate_paths(folder, names, reserve_manifest=False):
        check_output_file(target, "--certificates", probed=probed, force=replace, inputs=inputs)
    return folder


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
