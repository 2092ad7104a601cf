"""``softrank audit``: re-check a published bracket table (docs/design.md section 5)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from ..certio.signing import sign_certificate
from ..errors import InvalidInputError
from ..util.files import OutputFiles, check_folder_unused, check_output_file
from ..util.numbers import format_down
from ..util.tolerances import check_budget
from ..plumbing.parallel import resolve_jobs
from ..plumbing.plotting import PLOT_SUFFIXES
from ..util.progress import Progress
from ..plumbing.json_contract import dumps, envelope
from ..util.escaping import safe_text
from .common import (PLOT_HELP, add_campaign_run_options, add_command, budget_help, campaign_memory,
                     check_distinct_outputs, key_inputs, name_table, stdout_console)

EPILOG = """\
examples:
  softrank audit certificates/published/brackets.jsonl \\
      --operators certificates/published/minilm-apache2-w32.npz --out audit.json --plot audit.png
  softrank audit table.jsonl --operators panel.npz --out report.json --budget-seconds 30 --key issuer.key
  softrank audit table.jsonl --operators panel.npz --out report.json --jobs 4
  softrank audit table.jsonl --operators panel.npz --out report.json --jobs 4 --resume
  softrank audit table.jsonl --operators panel.npz --out report.json --scheduler tls://10.0.0.5:8786

Rows look like {"operator": "NAME", "eps": "0.25", "lower": 5, "upper": 26} with an optional
"certificate": "path/relative/to/the/table.json" (inside the table's folder: no absolute path,
no '..', no symlink out). Statuses: confirmed, tightened, reproduced,
refuted, invalid-certificate, unresolved, error (see softrank_cert/studies/audit/table.py). Refuting and
tightening ends are written as certificates to REPORT-evidence/ (signed with --key); check
them with softrank-verify. With --jobs or --scheduler the evidence (and a campaign's
reproduction) that a worker returns is re-verified here before it is written or signed; an
operator whose certificates do not verify gets 'error' rows with the reason (exit 6).

With --resume the audit is a resumable campaign: REPORT-campaign.json records each audited
operator (rewritten atomically after every one) and REPORT-campaign/ the certificate of each
reproduction; a later run with --resume keeps an operator whose inputs are unchanged and whose
certificate there is re-verified by the kernel, judges its rows again from those verdicts (never
from the manifest), and audits the rest (docs/campaigns.md). Pass --resume from the first run of
a long audit.
A worker that dies costs its operator one retry; an operator whose task fails again (or that
--max-memory refuses) gets 'error' rows with the reason, and the audit goes on.

exit codes: 0 the audit ran (also when rows are refuted, invalid or in error: read the
report's statuses); 6 it ran, but some operator's task failed or was refused (listed under
"failed" in the report); 2 an input file is unusable (missing or unreadable table or panel,
no JSON row at all, bad key file) or an output path is (a folder, not writable, a --plot
that is not .png/.pdf/.svg: checked before any work; a failed run writes nothing);
4 a checker bug (verified lower above verified upper); 130 interrupted by Ctrl-C or SIGTERM
(with --resume the message names the command that continues).
"""


def add_audit(sub: Any) -> None:
    p = add_command(sub, "audit", epilog=EPILOG)
    p.add_argument("table", metavar="BRACKETS.jsonl")
    p.add_argument("--operators", required=True, metavar="PANEL.npz", help="the panel the rows' operator names refer to")
    p.add_argument("--out", required=True, metavar="REPORT.json")
    p.add_argument("--budget-seconds", type=float, metavar="S",
                   help=budget_help("solver time per operator reproduced (rows without a certificate)"))
    p.add_argument("--plot", metavar="RATIOS.png", help=f"plot published vs audited upper/lower ratios: {PLOT_HELP}")
    p.add_argument("--key", metavar="KEYFILE", help="sign the evidence certificates with this key")
    p.add_argument("--trusted-keys", metavar="FILE", help="supplied certificates must be signed by one of these did:keys")
    add_campaign_run_options(p, "print the report JSON instead of the table")
    p.set_defaults(run=run_audit)


def run_audit(args: Any) -> int:
    from ..studies.audit.table import audit_table, summary
    from ..studies.audit.plot import ratio_figure
    from ..plumbing.campaign import budget_json
    from ..certio.signing import load_private_key, load_trusted_keys
    from .bracket_cmd import resume_hint

    check_budget(None, args.budget_seconds, options=True)
    if args.key:
        load_private_key(args.key)  # fail before any work
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    table, panel = Path(args.table), Path(args.operators)
    if not table.is_file():
        raise InvalidInputError(f"{table}: no such file")
    if not panel.is_file():
        raise InvalidInputError(f"{panel}: no such file")
    inputs = {"bracket table": table, "panel": panel, "--trusted-keys file": args.trusted_keys, **key_inputs(args.key)}
    replace = bool(args.force or args.resume)  # --resume continues the campaign: its outputs are replaced
    out = check_output_file(args.out, "--out", force=replace, inputs=inputs)
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES, force=replace,
                             inputs=inputs) if args.plot else None
    evidence_rel = Path(out.stem + "-evidence")
    if (out.parent / evidence_rel).exists() and not (out.parent / evidence_rel).is_dir():
        raise InvalidInputError(f"--out {args.out}: the evidence folder {out.parent / evidence_rel} is a file")
    check_folder_unused(out.parent / evidence_rel, "--out (its evidence folder)", force=replace)
    manifest = out.with_name(out.stem + "-campaign.json") if args.resume else None
    if manifest is not None:
        check_output_file(manifest, "--out", force=True, inputs=inputs)
        if manifest.with_suffix("").exists() and not manifest.with_suffix("").is_dir():
            raise InvalidInputError(f"--out {args.out}: the campaign folder {manifest.with_suffix('')} is a file")
    check_distinct_outputs({"--out": out, "--plot": plot, "the campaign manifest": manifest}, inputs)
    if manifest is not None:
        from ..plumbing.parallel import check_scheduler

        check_scheduler(args.scheduler)  # before the manifest is written
    with Progress("softrank audit", None, bar=not args.json) as bar:
        def progress(name: str, done: int, total: int) -> None:
            bar.total = total
            bar.advance(name)
            bar.finished(name, "audited")

        result = audit_table(table, panel, evidence_dir=evidence_rel, budget_seconds=args.budget_seconds,
                             trusted_keys=trusted, jobs=resolve_jobs(args.jobs), scheduler=args.scheduler,
                             progress=progress, max_memory=campaign_memory(args), manifest=manifest,
                             resume=args.resume, resume_command=resume_hint(args) if args.resume else None)
    report = envelope("audit", {
        "brackets": str(table), "panel": str(panel), "budget_seconds": budget_json(args.budget_seconds),
        "evidence_dir": evidence_rel.as_posix() if result.evidence_files else None, "signed_evidence": bool(args.key),
        "rows": [row.to_json() for row in result.rows], "summary": summary(result), "failed": result.failed})
    with OutputFiles() as outputs:  # all or nothing: a failed run leaves no partial report
        stage_certificates(outputs, {out.parent / rel: document for rel, document in result.evidence_files.items()},
                           args.key)
        outputs.stage_json(out, report)
        if plot:
            outputs.stage_figure(ratio_figure(result.rows), plot)
    if args.json:
        print(dumps(report))
    else:
        render(report, out, args.plot)
        if result.failed:
            print(f"{len(result.failed)} operator(s) failed or were refused (their rows are 'error'): "
                  + ", ".join(entry["operator"] for entry in result.failed[:5]) + (", ..." if len(result.failed) > 5 else ""))
    from ..errors import EXIT_SOME_FAILED

    return EXIT_SOME_FAILED if result.failed else 0


def stage_certificates(outputs: OutputFiles, documents: dict[Path, dict[str, Any]], key: str | None) -> None:
    """Stage certificate documents (path -> document) with the run's other files, each signed with
    ``key`` when one is given (``audit``'s evidence, ``budgets --certificates``)."""
    for path, document in documents.items():
        outputs.stage_json(path, sign_certificate(document, key) if key else document)


STYLE = {"confirmed": "green", "tightened": "cyan", "reproduced": "yellow", "refuted": "bold red",
         "invalid-certificate": "red", "unresolved": "magenta", "error": "red"}


def _note(row: dict[str, Any]) -> str:
    if row.get("error"):
        return row["error"]
    ev = row["evidence"]
    parts = [f"refutes {r['end']} {r['published']}: {r['claim']} ({r['method']}, margin >= "
             f"{format_down(Fraction((r.get('margin') or {}).get('lower', '0')))})" for r in ev.get("refutes", [])]
    parts.append(ev.get("source", ""))
    return "; ".join(p for p in parts if p)


def render(report: dict[str, Any], out: Path, plot: str | None) -> None:
    table, shown = name_table("softrank audit (audited ends VERIFIED by the trusted kernel)",
                              [str(row["operator"] or "") for row in report["rows"]],
                              ["line", "operator", "eps", "published", "audited", "status", "evidence"], right=("line", "eps"))
    for row in report["rows"]:
        published = (f"[{row['published_lower']}, {row['published_upper']}]"
                     if row["published_lower"] is not None else "")
        audited = f"[{'-' if row['lower'] is None else row['lower']}, {'-' if row['upper'] is None else row['upper']}]"
        table.add_row(str(row["line"]), shown(str(row["operator"] or "")), safe_text(str(row["eps"] or "")),
                      safe_text(published), safe_text(audited) if row["status"] not in ("error", "invalid-certificate") else "",
                      f"[{STYLE[row['status']]}]{row['status']}[/]", safe_text(_note(row)))
    console = stdout_console()
    console.print(table)
    s = report["summary"]
    counts = ", ".join(f"{n} {status}" for status, n in s["statuses"].items() if n)
    print(f"{s['rows']} rows, {s['operators']} operators in {s['seconds']:.1f} s: {counts}")
    print(f"report: {out}" + (f"; evidence: {out.parent / report['evidence_dir']}" if report["evidence_dir"] else "")
          + (f"; plot: {plot}" if plot else ""))
