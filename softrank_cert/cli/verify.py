"""``softrank-verify``: re-check certificates with the trusted kernel (float64 bounds, then Arb)."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from .. import __version__
from ..api import VerifyReport, verify
from ..certio.signing import load_trusted_keys
from ..errors import (
    EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_NOT_CHECKED, EXIT_REJECTED, EXIT_VERIFIED,
    FloatingPointEnvironmentError, InvalidInputError, KernelLimitError, SoftrankError,
)
from ..kernel import DEFAULT_MAX_PREC, Status, Verdict, precision_schedule
from ..plumbing.certificate_files import expand_json_paths
from ..plumbing.memory import parse_size
from ..plumbing.numfmt import format_down
from ..plumbing.progress import progress_bar
from ..plumbing.reports import dumps, envelope, verdict_fields
from ..plumbing.untrusted_text import safe_text
from ..verification import KERNELS
from .common import make_parser, name_table, parse_command_line, run_main, stdout_console

EPILOG = """\
examples:
  softrank-verify certificates/examples/*.json
  softrank-verify cert.json --trusted-keys certificates/examples/issuer.pub --require-signature
  softrank-verify cert.json --json --max-prec 1024
  softrank-verify cert.json --kernel exact     # re-check with the independent exact-rational kernel
  softrank-verify cert.json --kernel arb       # Arb balls only (slower; same verdicts)
  softrank-verify big.json --max-memory 3G     # the Arb fallback may use at most 3 GiB

exit codes:
  0  every claim VERIFIED
  1  some claim REJECTED (a witness or certificate that is provably false)
  2  invalid input (unreadable, schema, hash mismatch, bad/untrusted/missing signature, sizes)
  3  nothing rejected, but some claim INCONCLUSIVE at the maximum precision
  4  internal inconsistency (a verified lower end above a verified upper end: a bug), or a
     process without IEEE arithmetic (flush-to-zero / denormals-are-zero): nothing decided
  5  nothing rejected, but some valid certificate was not checked: too large for --kernel exact
     (m*N <= 4096, d <= 1024, k <= 32, r <= 64: use --kernel auto or arb), or a claim the
     float64 path cannot decide needs an Arb check larger than --max-memory (one line says
     how much; refused before anything is allocated)
When files disagree the most severe code wins: 4, then 2, then 1, then 5, then 3.
"""
#: Order in which per-file exit codes dominate the overall one.
SEVERITY = [EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_REJECTED, EXIT_NOT_CHECKED, EXIT_INCONCLUSIVE, EXIT_VERIFIED]


def overall_exit_code(codes: list[int]) -> int:
    return min(codes, key=SEVERITY.index) if codes else EXIT_VERIFIED


def verdict_json(v: Verdict) -> dict[str, Any]:
    """Machine-readable verdict (the report contract of :mod:`softrank_cert.plumbing.reports`): bounds are
    decimal strings with 17 significant digits rounded outward (never overstated)."""
    return {"eps": v.eps, "side": v.side, "claim": v.claim, "rank": v.rank, "method": v.method,
            **verdict_fields(v), "reason": v.reason}


STYLE = {Status.VERIFIED: "green", Status.REJECTED: "bold red", Status.INCONCLUSIVE: "yellow"}


def _engine_label(v: Verdict) -> str:
    """What decided a claim: a trivial end's exact comparison, the float64 bounds, or Arb/rational at some precision."""
    if v.engine in ("trivial", "float64"):
        return v.engine
    return f"{v.engine} {v.precision}"


def render_table(reports: list[VerifyReport], console: Console) -> None:
    table, shown = name_table("softrank-verify", [report.operator_id for report in reports],
                              ["operator", "eps", "claim", "method", "verdict", "margin", "checked by"], right=("eps",))
    for report in reports:
        for v in report.verdicts:
            margin = "exact" if v.precision == 0 else ("-" if v.margin is None else f">= {format_down(v.margin[0])}")
            table.add_row(shown(report.operator_id), v.eps, v.claim, safe_text(v.method),
                          f"[{STYLE[v.status]}]{v.status.value}[/]", margin, _engine_label(v))
    console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = make_parser(
        "softrank-verify",
        "Re-check softrank certificates: schema, hashes, signature, then every claim with the trusted kernel "
        "(proved float64 bounds, Arb balls where those cannot decide).",
        EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"softrank-cert {__version__}")
    parser.add_argument("certificates", nargs="+", metavar="CERT.json", help="certificate files, or folders searched for *.json")
    parser.add_argument("--trusted-keys", metavar="FILE", help="did:key list (or a .pub file): only these signers are accepted")
    parser.add_argument("--require-signature", action="store_true", help="unsigned certificates are invalid input (exit 2)")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of the table")
    parser.add_argument("--max-prec", type=int, default=DEFAULT_MAX_PREC, metavar="BITS",
                        help=f"highest Arb precision tried before INCONCLUSIVE (default {DEFAULT_MAX_PREC})")
    parser.add_argument("--kernel", choices=KERNELS, default="auto",
                        help="checker for the claims: auto (default) = proved float64 bounds, Arb balls for any claim "
                             "they cannot decide; arb = Arb balls only; float64 = float64 bounds only (undecided -> "
                             "INCONCLUSIVE); exact = the independent exact-rational kernel (small operators: "
                             "m*N <= 4096, k <= 32, r <= 64)")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="memory the Arb path may use for a claim the float64 path cannot decide, e.g. 3G or 800M "
                             "(K/M/G = 1024^1/2/3 bytes; default 75%% of this machine's memory, and never more than "
                             "an address-space limit leaves); a larger check is not checked (exit 5)")
    args = parse_command_line(parser, argv)
    run_main("softrank-verify", lambda: _run(args), json_errors=args.json)


def _run(args: Any) -> int:
    precision_schedule(args.max_prec)  # a bad global option is one error, not one per file
    max_memory = parse_size(args.max_memory) if args.max_memory is not None else None
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    console = stdout_console()
    paths = expand_json_paths(args.certificates)
    if not paths:
        raise InvalidInputError("no certificate files found")
    reports: list[VerifyReport] = []
    files: list[dict[str, Any]] = []
    codes: list[int] = []
    with progress_bar(len(paths) > 1 and not args.json) as progress:
        task = progress.add_task("verifying", total=len(paths))
        for path in paths:
            try:
                report = verify(path, trusted_keys=trusted, require_signature=args.require_signature,
                                max_prec=args.max_prec, kernel=args.kernel, max_memory=max_memory)
            except FloatingPointEnvironmentError:
                raise  # the process, not the file: one line, exit 4
            except SoftrankError as exc:
                if not args.json:
                    print(f"softrank-verify: {path}: {exc}", file=sys.stderr)
                files.append({"path": str(path), "status": "not-checked" if isinstance(exc, KernelLimitError) else "invalid",
                              "exit_code": exc.exit_code, "error": {"message": str(exc), "exit_code": exc.exit_code}})
                codes.append(exc.exit_code)
            else:
                reports.append(report)
                files.append({"path": report.path, "status": "checked", "operator": report.operator_id,
                              "signer": report.signer, "exit_code": report.exit_code,
                              "claims": [verdict_json(v) for v in report.verdicts]})
                codes.append(report.exit_code)
            progress.advance(task)
    code = overall_exit_code(codes)
    if args.json:
        print(dumps(envelope("verify", {"exit_code": code, "kernel": args.kernel, "max_prec": args.max_prec,
                                        "require_signature": bool(args.require_signature),
                                        "trusted_keys": args.trusted_keys, "files": files})))
    elif reports:
        render_table(reports, console)
    return code


if __name__ == "__main__":
    main()
