"""``softrank analyze``: does interaction geometry predict certified rank?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..util.tolerances import parse_eps_list
from ..errors import InvalidInputError
from ..util.files import OutputFiles, check_output_file
from ..plumbing.parallel import resolve_jobs
from ..plumbing.plotting import PLOT_SUFFIXES
from ..plumbing.json_contract import dumps
from ..util.escaping import safe_text
from .common import (add_json_options, PLOT_HELP, add_command, add_force_option, add_parallel_options, check_distinct_outputs,
                     int_list, stdout_console)

EPILOG = """\
examples:
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ --jobs 2
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --table analysis.md
  softrank analyze certs/ --operators a.npz b.npz --eps 0.25 --out analysis.json --plot analysis.png --jobs 2
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --resume   # after Ctrl-C
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --json \\
      --trusted-keys issuer.key.pub --require-signature

CERTS_DIR (e.g. the folder softrank bracket --all --out certs/ wrote) comes before
--operators, which takes one or more panels. Every certificate is re-verified by the trusted
kernel (as softrank-verify does) and must be about the panel operator of the same name, bit
for bit; only VERIFIED ends count. Operator i provably needs more rank than j at eps when
lower_i > upper_j. For each score (intrinsic =
certified upper bound of log Phi* over a rank grid; native = (d/2) log(1 + Gamma/eps^2);
baseline = width, eps, row entropy and effective rank of A fitted with the interval loss;
interaction_dim = the minimising r) the report gives the certified concordance with bootstrap
intervals over operators, held-out cross-validation by document and by layer, and the
power-of-two refactorization check (Q -> Q D, K -> K D^-1).

exit codes: 0 the analysis ran; 2 invalid input (unreadable or invalid certificate, a
certificate about another operator or not in the panels, a tolerance missing from a
certificate, a causal or probabilities operator, unusable --out/--plot/--table: checked
before any work; a failed run writes nothing); 1 / 3 a certificate with a REJECTED /
INCONCLUSIVE claim (without --drop-unverified); 4 a checker bug; 130 interrupted by Ctrl-C
or SIGTERM (with --resume the per-operator results finished so far stay in REPORT-cache/ and
the message names the command that continues; a cached result only saves the geometry: the
certificate is re-verified and its brackets re-derived, docs/campaigns.md).
"""


def add_analyze(sub: Any) -> None:
    p = add_command(sub, "analyze", epilog=EPILOG)
    p.add_argument("certificates", nargs="+", metavar="CERTS_DIR", help="certificate folders (*.json below) or files")
    p.add_argument("--operators", nargs="+", required=True, metavar="PANEL.npz",
                   help="the panels holding the certified operators (names must match the certificates)")
    p.add_argument("--eps", metavar="E1,E2,...", help="tolerances to analyse (default: those of every certificate)")
    p.add_argument("--out", required=True, metavar="REPORT.json", help="write the report JSON here")
    p.add_argument("--plot", required=True, metavar="FIG.png", help=f"score against bracket intervals: {PLOT_HELP}")
    p.add_argument("--table", metavar="REPORT.md", help="write the tables as Markdown")
    p.add_argument("--ranks", type=int_list, metavar="R1,R2,...",
                   help="rank grid of the intrinsic score (default 1,2,3,4,6,8,12,16,24,32,48,64 up to min(d, 64))")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B", help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=20260, help="bootstrap seed (default 20260)")
    p.add_argument("--trusted-keys", metavar="FILE", help="did:key list (or a .pub file): only these signers are accepted")
    p.add_argument("--require-signature", action="store_true", help="unsigned certificates are invalid input (exit 2)")
    p.add_argument("--drop-unverified", action="store_true",
                   help="leave out tolerances whose ends are not both VERIFIED instead of refusing the certificate")
    add_parallel_options(p)
    add_force_option(p)
    p.add_argument("--resume", action="store_true",
                   help="reuse the per-operator geometry an earlier run with --resume recorded in REPORT-cache/ "
                        "beside --out (for exactly this software version, certificate bytes, operator and options; "
                        "every certificate is verified again all the same) and compute the rest "
                        "(REPORT-campaign.json records the campaign)")
    add_json_options(p, "print the report JSON instead of the tables")
    p.set_defaults(run=run_analyze)


# ----------------------------------------------------------------------------- --resume

def resume_cache(out: Path) -> Path:
    """The per-operator results folder of ``--resume``: ``REPORT-cache/`` beside ``--out``
    (created by the analysis once its inputs have checked, so a refused run leaves nothing)."""
    return out.with_name(out.stem + "-cache")


# ----------------------------------------------------------------------------- command

def run_analyze(args: Any) -> int:
    from ..certio.signing import load_trusted_keys
    from ..studies.analyze.study import analysis
    from ..studies.analyze.plot import analysis_figure
    from ..studies.analyze.document import markdown_document
    from .bracket_cmd import resume_hint

    probed: set[Path] = set()
    inputs = {**{f"panel {path}": Path(path) for path in args.operators},
              **{f"certificates {path}": Path(path) for path in args.certificates},
              "--trusted-keys file": args.trusted_keys}
    replace = bool(args.force or args.resume)  # --resume continues the campaign: its outputs are replaced
    out = check_output_file(args.out, "--out", suffixes=(".json",), probed=probed, force=replace, inputs=inputs)
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES, probed=probed, force=replace, inputs=inputs)
    table = check_output_file(args.table, "--table", suffixes=(".md",), probed=probed, force=replace,
                              inputs=inputs) if args.table else None
    if args.eps is not None:
        parse_eps_list(args.eps)
    if args.bootstrap < 10:
        raise InvalidInputError(f"--bootstrap must be >= 10, got {args.bootstrap}")
    if args.ranks is not None and min(args.ranks) < 1:
        raise InvalidInputError("--ranks must be positive integers")
    jobs = resolve_jobs(args.jobs)
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    manifest = out.with_name(out.stem + "-campaign.json") if args.resume else None
    if manifest is not None:
        check_output_file(manifest, "--out", force=True, inputs=inputs)
    check_distinct_outputs({"--out": out, "--plot": plot, "--table": table, "the campaign manifest": manifest}, inputs)
    report = analysis(args.certificates, args.operators, args.eps, ranks=args.ranks, resamples=args.bootstrap,
                      seed=args.seed, trusted_keys=trusted, require_signature=args.require_signature,
                      drop_unverified=args.drop_unverified, jobs=jobs, scheduler=args.scheduler,
                      show_progress=not args.json, cache=resume_cache(out) if args.resume else None,
                      manifest=manifest, resume_command=resume_hint(args) if args.resume else None)
    with OutputFiles() as outputs:  # all or nothing
        outputs.stage_json(out, report)
        if table:
            outputs.stage_text(table, markdown_document(report))
        outputs.stage_figure(analysis_figure(report), plot)
    if args.json:
        print(dumps(report))
    else:
        render(report)
        print("; ".join(f"{what}: {path}" for what, path in (("report", args.out), ("plot", args.plot),
                                                              ("table", args.table)) if path))
    return 0


# ----------------------------------------------------------------------------- rendering

def render(report: dict[str, Any]) -> None:
    from rich.table import Table

    from ..studies.analyze.document import HELDOUT_COLUMNS, SCORE_COLUMNS, heldout_rows, invariance_line, score_rows

    console = stdout_console()
    c = report["counts"]
    table = Table(title=f"softrank analyze: certified concordance ({c['operators']} operators, {c['rows']} brackets, "
                        f"every end VERIFIED by the trusted kernel)")
    for column in SCORE_COLUMNS:
        table.add_column(column, overflow="fold")
    for row in score_rows(report):
        table.add_row(*[safe_text(cell) for cell in row])
    console.print(table)
    held = Table(title="held-out: adding a score to the calibrated baseline (differences: with score - baseline)")
    for column in HELDOUT_COLUMNS:
        held.add_column(column, overflow="fold")
    for row in heldout_rows(report):
        held.add_row(*[safe_text(cell) for cell in row])
    console.print(held)
    print(invariance_line(report))
    print(f"bootstrap: {report['bootstrap']['resamples']} resamples over operators, seed {report['bootstrap']['seed']}; "
          f"{report['seconds']:.1f} s")

