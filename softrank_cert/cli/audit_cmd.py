"""``softrank audit``: re-check a published bracket table (DESIGN.md section 5)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import InvalidInputError
from ..parallel import resolve_jobs
from .bracket_cmd import add_parallel_options
from .common import progress_bar, safe_text, save_figure_atomic, stdout_console
from .keys import sign_certificate, write_json_atomic

EPILOG = """\
examples:
  softrank audit certificates/published/brackets.jsonl \\
      --operators certificates/published/minilm-apache2-w32.npz --out audit.json --plot audit.png
  softrank audit table.jsonl --operators panel.npz --out report.json --budget-seconds 30 --key issuer.key
  softrank audit table.jsonl --operators panel.npz --out report.json --jobs 4
  softrank audit table.jsonl --operators panel.npz --out report.json --scheduler tcp://10.0.0.5:8786

Rows look like {"operator": "NAME", "eps": "0.25", "lower": 5, "upper": 26} with an optional
"certificate": "path/relative/to/the/table.json". Statuses: confirmed, tightened, reproduced,
refuted, invalid-certificate, unresolved, error (see softrank_cert/audit.py). Refuting and
tightening ends are written as certificates to REPORT-evidence/ (signed with --key); check
them with softrank-verify.

exit codes: 0 the audit ran (also when rows are refuted, invalid or in error: read the
report's statuses); 2 an input file is unusable (missing or unreadable table or panel,
no JSON row at all, bad key file); 4 a checker bug (verified lower above verified upper).
"""


def add_audit(sub: Any) -> None:
    p = sub.add_parser("audit", help="audit a published bracket table (confirm, tighten or refute each row)",
                       description="Verify supplied certificates, or reproduce and try to refute each published "
                                   "bracket end with the solvers; every audited end is VERIFIED by the trusted kernel.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", metavar="BRACKETS.jsonl")
    p.add_argument("--operators", required=True, metavar="PANEL.npz", help="the panel the rows' operator names refer to")
    p.add_argument("--out", required=True, metavar="REPORT.json")
    p.add_argument("--budget-seconds", type=float, metavar="S", help="solver time per operator (reproduction)")
    p.add_argument("--plot", metavar="RATIOS.png", help="plot published vs audited upper/lower ratios")
    p.add_argument("--key", metavar="KEYFILE", help="sign the evidence certificates with this key")
    p.add_argument("--trusted-keys", metavar="FILE", help="supplied certificates must be signed by one of these did:keys")
    add_parallel_options(p)
    p.add_argument("--json", action="store_true", help="print the report JSON instead of the table")
    p.set_defaults(run=run_audit)


def run_audit(args: Any) -> int:
    from ..audit import audit_table, summary
    from ..certio.signing import load_private_key, load_trusted_keys, utc_now_rfc3339

    if args.budget_seconds is not None and not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    if args.key:
        load_private_key(args.key)  # fail before any work
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    table, panel, out = Path(args.table), Path(args.operators), Path(args.out)
    if not table.is_file():
        raise InvalidInputError(f"{table}: no such file")
    if not panel.is_file():
        raise InvalidInputError(f"{panel}: no such file")
    evidence_rel = Path(out.stem + "-evidence")
    with progress_bar(not args.json) as bar:
        task = bar.add_task("auditing", total=None)
        result = audit_table(table, panel, evidence_dir=evidence_rel, budget_seconds=args.budget_seconds,
                             trusted_keys=trusted, jobs=resolve_jobs(args.jobs), scheduler=args.scheduler,
                             progress=lambda name, done, total: bar.update(task, description=safe_text(name), completed=done,
                                                                           total=total))
    for rel, document in result.evidence_files.items():
        write_json_atomic(out.parent / rel, sign_certificate(document, args.key) if args.key else document)
    report = {"format": "softrank-audit-report", "version": 1, "brackets": str(table), "panel": str(panel),
              "evidence_dir": evidence_rel.as_posix() if result.evidence_files else None, "signed_evidence": bool(args.key),
              "generator": {"name": "softrank-cert", "version": __version__, "created": utc_now_rfc3339()},
              "rows": [row.to_json() for row in result.rows], "summary": summary(result)}
    write_json_atomic(out, report)
    if args.plot:
        plot_ratios(result.rows, Path(args.plot))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        render(report, out, args.plot)
    return 0


STYLE = {"confirmed": "green", "tightened": "cyan", "reproduced": "yellow", "refuted": "bold red",
         "invalid-certificate": "red", "unresolved": "magenta", "error": "red"}


def _note(row: dict[str, Any]) -> str:
    if row.get("error"):
        return row["error"]
    ev = row["evidence"]
    parts = [f"refutes {r['end']} {r['published']}: {r['claim']} ({r['method']}, margin >= {r.get('margin', ['0'])[0]})"
             for r in ev.get("refutes", [])]
    parts.append(ev.get("source", ""))
    return "; ".join(p for p in parts if p)


def render(report: dict[str, Any], out: Path, plot: str | None) -> None:
    from rich.table import Table

    table = Table(title="softrank audit (audited ends VERIFIED by the trusted kernel)")
    for column in ("line", "operator", "eps", "published", "audited", "status", "evidence"):
        table.add_column(column, justify="right" if column in ("line", "eps") else "left")
    for row in report["rows"]:
        published = (f"[{row['published_lower']}, {row['published_upper']}]"
                     if row["published_lower"] is not None else "")
        audited = f"[{'-' if row['lower'] is None else row['lower']}, {'-' if row['upper'] is None else row['upper']}]"
        table.add_row(str(row["line"]), safe_text(str(row["operator"] or "")), safe_text(str(row["eps"] or "")),
                      safe_text(published), safe_text(audited) if row["status"] not in ("error", "invalid-certificate") else "",
                      f"[{STYLE[row['status']]}]{row['status']}[/]", safe_text(_note(row)))
    console = stdout_console()
    console.print(table)
    s = report["summary"]
    counts = ", ".join(f"{n} {status}" for status, n in s["statuses"].items() if n)
    print(f"{s['rows']} rows, {s['operators']} operators in {s['seconds']:.1f} s: {counts}")
    print(f"report: {out}" + (f"; evidence: {out.parent / report['evidence_dir']}" if report["evidence_dir"] else "")
          + (f"; plot: {plot}" if plot else ""))


def plot_ratios(rows: list[Any], path: Path) -> None:
    """Scatter of published vs audited ``upper / max(lower, 1)`` (log-log), written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..audit import ratio

    fig, ax = plt.subplots(figsize=(6, 5))
    top = 1.0
    for status in ("confirmed", "tightened", "reproduced", "refuted", "unresolved"):
        pts = [(ratio(r.published_lower, r.published_upper), ratio(r.lower, r.upper)) for r in rows if r.status == status]
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if pts:
            xs, ys = zip(*pts)
            top = max(top, *xs, *ys)
            ax.scatter(xs, ys, label=f"{status} ({len(pts)})", alpha=0.7, s=18)
    ax.plot([1, top], [1, top], color="gray", linewidth=0.8, linestyle="--", label="audited = published")
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _pos: f"{value:g}")
    sparse = FuncFormatter(lambda value, _pos: f"{value:g}" if f"{value:.0e}"[0] in "25" else "")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(sparse)
    ax.set_xlabel("published upper / lower")
    ax.set_ylabel("audited upper / lower (verified ends)")
    ax.set_title("softrank audit: bracket ratios")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, path)
