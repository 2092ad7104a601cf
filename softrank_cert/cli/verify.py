"""``softrank-verify``: re-check certificates with the trusted kernel (float64 bounds, then Arb).

A lean front end: it imports what checking needs (``verification``, and through it the kernel,
``exact_kernel`` on request and ``certio``), the JSON contract and a plain-text table -- not the
solvers, the studies, the API, scipy, HiGHS, matplotlib, tokenizers or rich
(``tests/cli/test_verify_report.py`` checks it).  ``--version`` and ``--help`` import nothing
heavy at all.  How to read the report: ``docs/verify.md``.
"""

from __future__ import annotations

import os
import sys
from fractions import Fraction
from typing import Any

from .. import __version__
from ..errors import (
    EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_NOT_CHECKED, EXIT_REJECTED, EXIT_VERIFIED,
    FloatingPointEnvironmentError, InvalidInputError, KernelLimitError, SoftrankError,
)
from .common import common_name_prefix, make_parser, parse_command_line, run_main

#: ``verification.KERNELS`` and ``kernel.DEFAULT_MAX_PREC``, written out so that ``--help`` and
#: ``--version`` import neither the kernel nor numpy (``tests/cli/test_verify_report.py`` checks
#: that they agree).
KERNEL_CHOICES = ("auto", "arb", "float64", "rowblock", "exact")
DEFAULT_MAX_PREC = 512

MARGIN_HELP = """\
margin: one definition for both ends, the relative slack (a certified bound):
  lower end r_eps >= k:  1 - eps / t, where t is the tolerance up to which the
      certificate proves r_eps >= k: t = 1 / (||X|| ||Y|| ||(XAY)^-1||), or
      t = ||A|| for k = 1 without a certificate; > 0 proves the claim
  upper end r_eps <= r:  1 - error / eps, where error = ||A - U W^T|| (max row
      L1 norm) of the witness (||A|| for r = 0); >= 0 proves the claim
  shown ">= x" (VERIFIED), "<= x" (REJECTED: a certified upper bound, < 0),
  "[lo, hi]" (INCONCLUSIVE), "-" (an end without arithmetic: r = p, k = 0, or
  ||A|| = 1 exactly).  --json gives this "relative_margin" and the kernel's own
  "margin" (lower: the same; upper: eps - error), strings rounded outward."""

EPILOG = f"""\
examples:
  softrank-verify certificates/examples/*.json
  softrank-verify certs/                       # every *.json below (reports: skipped)
  softrank-verify cert.json --trusted-keys certificates/examples/issuer.pub --require-signature
  softrank-verify cert.json --json --max-prec 1024
  softrank-verify cert.json --kernel exact     # re-check with the independent exact-rational kernel
  softrank-verify cert.json --kernel arb       # Arb balls only (slower; same verdicts)
  softrank-verify big.json --max-memory 3G     # the Arb fallback may use at most 3 GiB

report: a table of the files (operator; signer: its did:key shortened, then
"trusted" when in --trusted-keys, "untrusted" when the signature is valid but
nobody vouched for the key, or "unsigned"), a table of the claims (with a file
column when there are several files), and a summary line: N files, M claims:
verified / rejected / inconclusive / not checked, and the exit code.
A JSON file whose "format" says it is another of the project's documents (a
softrank-*-report, a softrank-campaign manifest), and a foreign JSON file found
in a folder (not an object, or an object with no "operator" nor "brackets" whose
"format" does not start with "softrank": a package.json, a key file), is listed
as skipped: it claims nothing.  Any other file is checked as a certificate,
whatever its name.
Details: docs/verify.md.

{MARGIN_HELP}

exit codes:
  0  every claim VERIFIED
  1  some claim REJECTED (a witness or certificate that is provably false)
  2  invalid input (unreadable, schema, hash mismatch, bad/untrusted/missing signature, sizes),
     or no certificate at all among the files (every one skipped)
  3  nothing rejected, but some claim INCONCLUSIVE at the maximum precision
  4  internal inconsistency (a verified lower end above a verified upper end: a bug), or a
     process without IEEE arithmetic (flush-to-zero / denormals-are-zero): nothing decided
  5  nothing rejected, but some valid certificate was not checked: too large for --kernel exact
     (m*N <= 4096, d <= 1024, k <= 32, r <= 64: use --kernel auto or arb), or a claim the
     float64 path cannot decide needs an Arb check larger than --max-memory (one line says
     how much; refused before anything is allocated)
When files disagree the most severe code wins: 4, then 2, then 1, then 5, then 3.
"""
#: How the reason of a skipped file ends (after what the file is).
SKIPPED = ", not a certificate: it claims nothing"
#: Order in which per-file exit codes dominate the overall one.
SEVERITY = [EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_REJECTED, EXIT_NOT_CHECKED, EXIT_INCONCLUSIVE, EXIT_VERIFIED]
#: What each overall exit code means, for the summary line.
EXIT_MEANING = {EXIT_VERIFIED: "every claim verified", EXIT_REJECTED: "some claim rejected",
                EXIT_INVALID_INPUT: "invalid input", EXIT_INCONCLUSIVE: "some claim inconclusive",
                EXIT_INTERNAL: "internal inconsistency", EXIT_NOT_CHECKED: "some certificate not checked"}


def overall_exit_code(codes: list[int]) -> int:
    return min(codes, key=SEVERITY.index) if codes else EXIT_VERIFIED


# --------------------------------------------------------------------------------------
# Margins and signers as the report shows them
# --------------------------------------------------------------------------------------

Interval = tuple[Fraction, Fraction]


def relative_margin(verdict: Any, eps: Fraction, trivial: bool) -> Interval | None:
    """An exact interval containing the claim's relative margin (``MARGIN_HELP``), or None.

    Upper ends: the kernel's margin is ``eps - error``; divided by ``eps > 0`` it is
    ``1 - error/eps`` (the order of the ends is kept).  Lower ends with a certificate: the
    kernel's margin is already ``1 - eps/t``.  The trivial lower end k = 1 (``||A|| > eps``): the
    kernel's margin is ``||A|| - eps`` and its value an interval ``[a, b]`` around ``||A||``,
    so ``1 - eps/||A||`` lies in ``[1 - eps/a, 1 - eps/b]`` (when ``a > 0``).  The sign of the
    result agrees with the verdict: it is computed from the very intervals the kernel compared.
    """
    margin, value = verdict.margin, verdict.value
    if verdict.side == "upper":
        return None if margin is None else (margin[0] / eps, margin[1] / eps)
    if not trivial:
        return margin
    if value is None or value[0] <= 0:
        return None
    return 1 - eps / value[0], 1 - eps / value[1]


def margin_cell(verdict: Any, rel: Interval | None) -> str:
    """The report's margin column: ``>= x`` (VERIFIED), ``<= x`` (REJECTED), ``[lo, hi]``."""
    from ..util.numbers import format_down, format_up

    if rel is None:
        return "-"
    status = verdict.status.value
    if status == "VERIFIED":
        return f">= {format_down(rel[0])}"
    if status == "REJECTED":
        return f"<= {format_up(rel[1])}"
    return f"[{format_down(rel[0])}, {format_up(rel[1])}]"


def short_did(signer: str) -> str:
    """``did:key:z6MkpTHR8VNs...dvktH`` -> ``did:key:z6MkpTHR...vktH`` (the verification method's
    fragment dropped; 8 characters of the key kept at the front, 4 at the end)."""
    did = signer.split("#", 1)[0]
    key = did.removeprefix("did:key:")
    return did if key == did or len(key) <= 16 else f"did:key:{key[:8]}...{key[-4:]}"


def signer_label(signer: str | None, trusted: bool) -> str:
    """``unsigned``, or the shortened did:key and ``trusted`` (in --trusted-keys) / ``untrusted``
    (a valid signature, but no --trusted-keys vouched for the key)."""
    return "unsigned" if signer is None else f"{short_did(signer)} {'trusted' if trusted else 'untrusted'}"


# --------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------

def build_parser():
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
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of the tables")
    parser.add_argument("--max-prec", type=int, default=DEFAULT_MAX_PREC, metavar="BITS",
                        help=f"highest Arb precision tried before INCONCLUSIVE (default {DEFAULT_MAX_PREC})")
    parser.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto",
                        help="checker for the claims: auto (default) = proved float64 bounds, Arb balls for any claim "
                             "they cannot decide; arb = Arb balls only; float64 = float64 bounds only (undecided -> "
                             "INCONCLUSIVE); exact = the independent exact-rational kernel (small operators: "
                             "m*N <= 4096, k <= 32, r <= 64)")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="memory the Arb path may use for a claim the float64 path cannot decide, e.g. 3G or 800M "
                             "(K/M/G = 1024^1/2/3 bytes; default 75%% of this machine's memory, and never more than "
                             "an address-space limit leaves); a larger check is not checked (exit 5)")
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help="BLAS threads for the float64 products (default 1: on a shared machine more threads "
                             "cost CPU time for little wall time; verdicts never depend on it)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parse_command_line(build_parser(), argv)
    run_main("softrank-verify", lambda: _run_with_blas_threads(args), json_errors=args.json)


def _run_with_blas_threads(args: Any) -> int:
    """:func:`_run` with at most ``--blas-threads`` BLAS threads (the kernel's bounds hold for any
    summation order, so the count changes the time only)."""
    if not isinstance(args.blas_threads, int) or args.blas_threads < 1:
        raise InvalidInputError(f"--blas-threads must be a positive integer, got {args.blas_threads!r}")
    import numpy  # noqa: F401  (BLAS must be loaded for threadpoolctl to limit it)
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return _run(args)


#: Files of another kind handed to the verifier, and which command takes each.
WRONG_KIND = {"a .npz file (a panel or operator file)": "softrank bracket FILE --eps E --out CERT.json makes a "
                                                        "certificate from it (softrank list FILE names its operators)",
              "a GGUF model file": "softrank panel --gguf FILE makes a panel from it",
              "a .npy array file": "save Q and K (or S, or A) in an .npz file for softrank bracket"}


def wrong_kind_message(path: str, raw: bytes) -> str | None:
    """``is a .npz file (a panel or operator file), not a certificate: softrank bracket ...`` for a
    file of a kind another command takes (:data:`WRONG_KIND`, from its leading bytes), else None."""
    from ..util.files import file_kind

    if raw.lstrip()[:1] == b"{":  # JSON: what is wrong with it as a certificate is the message
        return None
    kind = file_kind(path)
    return f"is {kind}, not a certificate: {WRONG_KIND[kind]}" if kind in WRONG_KIND else None


def _claim_count(raw: bytes) -> int:
    """Claims of a certificate that decoded but was not checked (two per bracket), for the summary."""
    import json

    try:
        brackets = json.loads(raw).get("brackets")
    except (ValueError, AttributeError, RecursionError):
        return 0
    return 2 * len(brackets) if isinstance(brackets, list) else 0


def _run(args: Any) -> int:
    from ..certio.certificate import read_certificate_bytes
    from ..certio.signing import load_trusted_keys
    from ..kernel import precision_schedule
    from ..plumbing.certificate_files import declared_format, expand_json_paths, is_certificate_format, not_a_certificate
    from ..util.memory import parse_size, process_limit
    from ..verification import verify_certificate_bytes

    precision_schedule(args.max_prec)  # a bad global option is one error, not one per file
    max_memory = parse_size(args.max_memory) if args.max_memory is not None else None
    memory_limit = process_limit(max_memory) if max_memory is not None and args.kernel in ("auto", "arb") else None
    trusted = load_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    paths = expand_json_paths(args.certificates)
    found = set(expand_json_paths([item for item in args.certificates if os.path.isdir(item)]))  # not named
    if not paths:
        raise InvalidInputError("no certificate files found (give CERT.json files, or folders holding *.json)")
    entries: list[dict[str, Any]] = []  # one per file, in order: the JSON report's "files"
    margins: dict[int, list[str]] = {}  # entry index -> the margin column of its claims
    with _progress(len(paths) > 1 and not args.json, len(paths)) as bar:
        for path in paths:
            raw = b""
            try:
                raw = read_certificate_bytes(path)
                verification = verify_certificate_bytes(raw, source=str(path), trusted_keys=trusted,
                                                        require_signature=args.require_signature,
                                                        max_prec=args.max_prec, kernel=args.kernel,
                                                        memory_limit=memory_limit)
            except FloatingPointEnvironmentError:
                raise  # the process, not the file: one line, exit 4
            except SoftrankError as exc:
                # A file that makes no claim to be a certificate (a report, a manifest; found in a
                # folder, also a foreign JSON file) is never a valid one (the schema's format is a
                # constant and it has no claims): asking only after a failure skips exactly what a
                # pre-check would, without parsing every certificate twice.  A foreign file named on
                # the command line was given as a certificate: what is wrong with it is the answer.
                what = None if isinstance(exc, KernelLimitError) else not_a_certificate(raw)
                if what is not None and (path in found or not is_certificate_format(declared_format(raw))):
                    entries.append({"path": str(path), "status": "skipped", "format": declared_format(raw),
                                    "reason": what + SKIPPED})
                    continue
                message = (f"is {what}, not a softrank certificate" if what is not None else
                           wrong_kind_message(path, raw) if isinstance(exc, InvalidInputError) else None) or str(exc)
                if not args.json:
                    print(f"softrank-verify: {path}: {message}", file=sys.stderr)
                not_checked = isinstance(exc, KernelLimitError)
                entry = {"path": str(path), "status": "not-checked" if not_checked else "invalid",
                         "exit_code": exc.exit_code, "error": {"message": message, "exit_code": exc.exit_code}}
                if not_checked:
                    entry["claims_not_checked"] = _claim_count(raw)
                entries.append(entry)
            else:
                entry, margins[len(entries)] = _checked_entry(verification, trusted)
                entries.append(entry)
            finally:
                bar.advance()
    summary = _summary(entries)
    code = summary["exit_code"]
    if args.json:
        from ..plumbing.json_contract import dumps, envelope

        print(dumps(envelope("verify", {"exit_code": code, "kernel": args.kernel, "max_prec": args.max_prec,
                                        "require_signature": bool(args.require_signature),
                                        "trusted_keys": args.trusted_keys, "summary": summary, "files": entries})))
    else:
        from .text_table import fold_text

        print(render_verify_table(entries, margins))
        print(fold_text(summary_line(summary)))
    if summary["files"] == summary["skipped"]:
        print(f"softrank-verify: error: no certificate among the {len(entries)} file(s): every one is a report "
              "or a manifest (see the skipped lines)", file=sys.stderr)
    return code


def _progress(enabled: bool, total: int) -> Any:
    """A bar over the ``total`` files on a terminal (:class:`~softrank_cert.util.progress.Progress`,
    no lines); its :meth:`~softrank_cert.util.progress.Progress.advance` counts a file."""
    from ..util.progress import Progress

    return Progress("softrank-verify", total, bar=enabled, lines=False, label="verifying")


def _checked_entry(verification: Any, trusted: frozenset[str] | None) -> tuple[dict[str, Any], list[str]]:
    """The JSON report's entry of a checked file (claims with both margins), and the text
    report's margin column of its claims."""
    from ..plumbing.json_contract import enclosure, verdict_fields

    claims, cells = [], []
    for bracket, pair in zip(verification.certificate.brackets, verification.pairs):
        for verdict, trivial in zip(pair, (bracket.lower.X is None, bracket.upper.U is None)):
            rel = relative_margin(verdict, bracket.eps_value, trivial)
            claims.append({"eps": verdict.eps, "side": verdict.side, "claim": verdict.claim, "rank": verdict.rank,
                           "method": verdict.method, **verdict_fields(verdict), "relative_margin": enclosure(rel),
                           "reason": verdict.reason})
            cells.append(margin_cell(verdict, rel))
    did = verification.signer.split("#", 1)[0] if verification.signer else None
    entry = {"path": verification.path, "status": "checked", "operator": verification.operator_id,
             "signer": verification.signer,
             "signer_trusted": None if did is None else bool(trusted is not None and did in trusted),
             "exit_code": verification.exit_code, "claims": claims}
    return entry, cells


def _summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of files and claims, and the overall exit code (no certificate at all: exit 2)."""
    statuses = [entry["status"] for entry in entries]
    claims = [claim for entry in entries for claim in entry.get("claims", [])]
    verdicts = [claim["verdict"] for claim in claims]
    codes = [entry["exit_code"] for entry in entries if entry["status"] != "skipped"]
    not_checked = sum(entry.get("claims_not_checked", 0) for entry in entries)
    code = overall_exit_code(codes) if codes else EXIT_INVALID_INPUT
    return {"files": len(entries), "checked": statuses.count("checked"), "invalid": statuses.count("invalid"),
            "not_checked_files": statuses.count("not-checked"), "skipped": statuses.count("skipped"),
            "claims": len(claims) + not_checked, "verified": verdicts.count("VERIFIED"),
            "rejected": verdicts.count("REJECTED"), "inconclusive": verdicts.count("INCONCLUSIVE"),
            "not_checked": not_checked, "exit_code": code}


def summary_line(s: dict[str, Any]) -> str:
    """``3 files (1 skipped), 4 claims: 4 verified, 0 rejected, 0 inconclusive, 0 not checked``
    and, on a second line, ``exit 0: every claim verified``."""
    files = f"{s['files']} file{'s' if s['files'] != 1 else ''}"
    extra = [f"{s[key]} {label}" for key, label in (("invalid", "invalid"), ("not_checked_files", "not checked"),
                                                    ("skipped", "skipped")) if s[key]]
    if extra:
        files += f" ({', '.join(extra)})"
    meaning = EXIT_MEANING[s["exit_code"]] if s["checked"] or s["invalid"] or s["not_checked_files"] else \
        "no certificate among the files"
    return (f"{files}, {s['claims']} claim{'s' if s['claims'] != 1 else ''}: {s['verified']} verified, "
            f"{s['rejected']} rejected, {s['inconclusive']} inconclusive, {s['not_checked']} not checked\n"
            f"exit {s['exit_code']}: {meaning}")


_COLOUR = {"VERIFIED": "\x1b[32m", "REJECTED": "\x1b[1;31m", "INCONCLUSIVE": "\x1b[33m"}


#: The width a claim table is rendered at when each claim is one line (nothing is folded).
UNFOLDED = 1 << 20


def _style(header: str, cell: str) -> str:
    word = cell.strip()
    return f"{_COLOUR[word]}{cell}\x1b[0m" if header == "verdict" and word in _COLOUR else cell


def render_verify_table(entries: list[dict[str, Any]], margins: dict[int, list[str]]) -> str:
    """The text report: the files (operator, signer or status), then the claims (a file column
    when there are several files), then the margin's definition.  Untrusted text (ids,
    methods, file names) is shown with control characters escaped.  When stdout is not a
    terminal and ``$COLUMNS`` is not set (a pipe, a log), each claim is one line that starts with
    its file's whole path, nothing folded, so that ``grep VERIFIED`` keeps the file."""
    import os

    from ..util.escaping import plain_text
    from .text_table import fold_text, render_table

    paths = [entry["path"] for entry in entries]
    prefix = common_name_prefix(paths) if len(paths) > 1 else ""
    name = {path: plain_text(path[len(prefix):]) for path in paths}
    colour = _style if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else None
    file_rows, notes = [], []
    for entry in entries:
        if entry["status"] == "checked":
            file_rows.append([name[entry["path"]], plain_text(entry["operator"]),
                              signer_label(entry["signer"], bool(entry["signer_trusted"]))])
        elif entry["status"] == "skipped":
            what = entry["reason"].removesuffix(SKIPPED)
            notes.append(f"skipped: {name[entry['path']]} ({plain_text(what)}: not a certificate)")
        else:
            reason = plain_text(entry["error"]["message"]).removeprefix(f"{plain_text(entry['path'])}: ")
            notes.append(f"{entry['status']}: {name[entry['path']]} (exit {entry['exit_code']}): {reason}")
    out = []
    if prefix:
        out.append(fold_text(f"files under {plain_text(prefix)}"))
    if file_rows:
        out.append(render_table(["file", "operator", "signer"], file_rows, fixed=("signer",),
                                fold_first=("operator", "file")))
    lines = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    several = len(entries) > 1 or lines
    claim_rows = []
    for index, entry in enumerate(entries):
        for claim, margin in zip(entry.get("claims", []), margins.get(index, [])):
            engine = claim["checked_by"] if claim["checked_by"] in ("trivial", "rowblock", "float64") else \
                f"{claim['checked_by']} {claim['precision_bits']}" if claim["precision_bits"] else claim["checked_by"]
            row = [claim["eps"], f"{'<=' if claim['side'] == 'upper' else '>='} {claim['rank']}",
                   plain_text(claim["method"]), claim["verdict"], margin, engine]
            file = plain_text(entry["path"]) if lines else name[entry["path"]]
            claim_rows.append(([file] if several else []) + row)
    if claim_rows:
        headers = (["file"] if several else []) + ["eps", "r_eps", "method", "verdict", "margin", "by"]
        out.append("")
        out.append(render_table(headers, claim_rows, right=("eps",), fixed=("verdict", "margin", "eps", "r_eps"),
                                fold_first=("method", "file"), style=colour, width=UNFOLDED if lines else None))
        out.append("margin: relative slack, a certified bound: lower ends 1 - eps/t, upper ends\n"
                   "1 - error/eps; by: what decided each claim (see docs/verify.md)")
    if notes:
        out.extend([""] * bool(out) + [fold_text(note) for note in notes])
    return "\n".join(out)


if __name__ == "__main__":
    main()
