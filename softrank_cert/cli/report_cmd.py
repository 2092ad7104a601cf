"""``softrank report``: a ``softrank bracket`` campaign folder, or a plain folder of certificate files, as
one static HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EXIT_SOME_FAILED, InvalidInputError
from .common import add_command, add_force_option, add_json_options

#: ``studies.report.folder``'s limits, written out so that ``--help`` imports no study
#: (``tests/cli/test_report.py`` checks that they agree).
DEFAULT_MAX_CERTIFICATES = 10_000
DEFAULT_MAX_BYTES_TEXT = "4G"

EPILOG = f"""\
examples:
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ && softrank report certs/
  softrank report certs/ --out site/campaign.html       # figures in site/campaign-figures/
  softrank report certs/ --json --quiet                 # the page's content as JSON too
  softrank report big-campaign/ --max-certificates 50000 --max-bytes 20G
  softrank report benchmarks/results/seed_scale/sample --out /tmp/sample/index.html
  softrank report signed/ --trusted-keys issuer.pub     # a plain folder: only these signers count

A 'softrank survey' folder (DIR/survey.json) gets the survey page: the campaign page of DIR/certs
with the survey's parameters and stages, layer x head heatmaps per width and tolerance and a
per-layer table (docs/survey.md). Otherwise DIR is one of two kinds (the page and --json say which):
  campaign      DIR holds softrank-campaign.json, the manifest of 'softrank bracket PANEL --all':
                one certificate per operator of the manifest, DIR/NAME.json;
  certificates  any other folder: the certificates are the *.json files directly in DIR,
                whatever their names (e.g. <sha256>.json); subfolders are not read (a note
                names the JSON files there: report each folder on its own).
A folder that is neither (no manifest, no *.json file in it) is refused.

The page (default DIR/report.html; its figures, PNG files, in the folder beside it named after
it: DIR/report-figures/) shows a header (folder and its kind, time, software version,
tolerances, operator count), the verify summary, one table per group (the operator name without
its last component, e.g. minilm/apache2/w64: medians of the verified ends, the median
upper/lower ratio and the share resolved per tolerance), the figures (the upper/lower ratios
per tolerance; certified rank against block width per layer when the names carry several
widths w<N>, N of at most 9 digits; each figure draws at most 6 tolerances and 10 layers, its
caption naming those drawn) and one row per operator, in natural name order, linking to its
certificate (a file name that is not UTF-8: shown with its bytes as \\xNN, linked by its bytes).
Every bracket on it comes from re-verifying the certificates with the trusted kernel (what
softrank-verify runs), never from a manifest or a file's own claims: only a certificate whose
every claim is VERIFIED gives brackets.
  campaign: a certificate that does not verify, is about another operator or holds other
  tolerances than the manifest's is listed as not verified with the reason, an operator
  without a certificate as missing; the campaign's signer (--key) is required.
  certificates: an operator's name is the operator_id of its verified certificate. The page's
  tolerances are the list held by the most verified certificates (a tie: the list of the
  first such file in natural name order); a certificate with another list is listed as
  verified but not counted (status failed in --json), a file that does not verify and a file
  that is not a certificate (bad JSON, another format, e.g. a saved --json report) as not
  verified with the reason (rows of no verified operator after the others, named by their
  file). Of two or more certificates of one operator that verify with the page's tolerances,
  the first file in natural name order counts; each other is listed as not counted, naming
  it. Signatures present are checked as softrank-verify checks them; none is required unless
  --require-signature or --trusted-keys is given (their softrank-verify meaning: unsigned
  files, or files signed by a key not in FILE, do not verify). Both options are refused for a
  campaign.
Certificates are counted and sized before any is read: more than --max-certificates (default
{DEFAULT_MAX_CERTIFICATES}; every operator of a manifest counts, and every *.json entry of a folder, a regular
file or not) or more than --max-bytes of them together (default {DEFAULT_MAX_BYTES_TEXT}) is refused.
The page and its figures are written together, atomically, after everything was checked; a
page that exists, or a figures folder that holds files, is replaced only with --force.

exit codes: 0 the page was written and every operator of the manifest (campaign), or every
file (certificates), verified and counted; 2 invalid input (not a folder, neither a campaign
nor a folder with *.json files, a manifest of another command or unreadable or with an operator
name that is not Unicode text, over a limit, an unusable --out or --trusted-keys, a signature
option for a campaign; nothing is written) or an output that cannot be written; 4 a checker
bug (a verified lower end above a verified upper end: no page); 6 the page was written but
some operators or files failed verification, have no certificate or were not counted (listed
on the page).
"""


def add_report(sub: Any) -> None:
    """The parser of ``softrank report`` (imports no study: ``--help`` stays light)."""
    p = add_command(sub, "report", epilog=EPILOG)
    p.add_argument("folder", metavar="DIR", help="the --out folder of a 'softrank bracket PANEL --all' campaign, or a "
                                                 "folder holding certificate files (*.json, read without subfolders)")
    p.add_argument("--out", metavar="REPORT.html", help="the page (default DIR/report.html); its figures go to the "
                                                        "folder beside it named REPORT-figures/")
    add_force_option(p, "replace the page and its figures where they exist already (else refused before any work)")
    p.add_argument("--max-certificates", type=int, default=DEFAULT_MAX_CERTIFICATES, metavar="N",
                   help=f"refuse a folder with more certificates (default {DEFAULT_MAX_CERTIFICATES})")
    p.add_argument("--max-bytes", default=DEFAULT_MAX_BYTES_TEXT, metavar="SIZE",
                   help=f"refuse certificates larger than this together, e.g. 20G or 800M (K/M/G = 1024^1/2/3 "
                        f"bytes; default {DEFAULT_MAX_BYTES_TEXT})")
    p.add_argument("--trusted-keys", metavar="FILE",
                   help="a folder of certificates: only certificates signed by these keys verify (did:key list or "
                        "a .pub file, as softrank-verify --trusted-keys)")
    p.add_argument("--require-signature", action="store_true",
                   help="a folder of certificates: unsigned certificates do not verify")
    add_json_options(p, "also print the page's content as JSON on stdout")
    p.set_defaults(run=run_report)


def run_report(args: Any) -> int:
    """Check the limits, the folder, ``--out`` and the signature options; then the page
    (:func:`~softrank_cert.studies.report.build.write_folder_page`, or a survey's page).  Returns
    0, or 6 when some operator or file is not verified, missing or not counted."""
    from ..studies.report.build import page_outputs, write_folder_page
    from ..studies.report.folder import folder_kind, read_manifest
    from ..studies.report.page import shown
    from ..util.memory import parse_size
    from ..util.progress import Progress

    if args.max_certificates < 1:
        raise InvalidInputError(f"--max-certificates must be at least 1, got {args.max_certificates}")
    max_bytes = parse_size(args.max_bytes, "--max-bytes")
    folder = Path(args.folder)
    if (folder / "survey.json").is_file():
        return _run_survey_report(args, folder, max_bytes)
    kind = folder_kind(folder)
    if kind == "campaign" and (args.trusted_keys or args.require_signature):
        raise InvalidInputError(f"{folder}: a campaign folder: --trusted-keys and --require-signature are for a folder "
                                "of certificates (a campaign's certificates are held to the signer its manifest names)")
    manifest = read_manifest(folder) if kind == "campaign" else None
    page, figures = page_outputs(args.out, folder, force=args.force, inputs={"--trusted-keys file": args.trusted_keys})
    trusted = None
    if args.trusted_keys:
        from ..certio.signing import load_trusted_keys

        trusted = load_trusted_keys(args.trusted_keys)
    signatures = {"trusted_keys": args.trusted_keys,
                  "require_signature": bool(args.require_signature or args.trusted_keys)}
    with Progress("softrank report", bar=not args.json, unit="certificates") as progress:
        doc = write_folder_page(kind, folder, manifest, page, figures, trusted=trusted, signatures=signatures,
                                max_certificates=args.max_certificates, max_bytes=max_bytes, progress=progress)
    summary = doc["summary"]
    shown_page = shown(str(page))  # a path that is not UTF-8: its bytes as \xNN
    if args.json:
        from ..plumbing.json_contract import dumps

        print(dumps(doc))
    elif kind == "campaign":
        print(f"{summary['verified']} verified, {summary['failed']} failed, {summary['missing']} missing of "
              f"{summary['operators']} operators (re-verified in {summary['seconds']:.1f} s); page: {shown_page}")
    else:
        print(f"{summary['verified']} verified, {summary['failed']} failed, {summary['duplicates']} not counted of "
              f"{summary['files']} certificate files ({summary['operators']} operators; re-verified in "
              f"{summary['seconds']:.1f} s); page: {shown_page}")
    return EXIT_SOME_FAILED if summary["failed"] or summary["missing"] or summary["duplicates"] else 0


def _run_survey_report(args: Any, folder: Path, max_bytes: int) -> int:
    """The page of a survey folder (``studies/survey/page.py``): every certificate re-verified."""
    from ..studies.report.build import page_outputs
    from ..studies.survey.page import kv_shortfall, write_survey_page
    from ..util.progress import Progress

    if args.trusted_keys or args.require_signature:
        raise InvalidInputError(f"{folder}: a survey folder: --trusted-keys and --require-signature are for a folder "
                                "of certificates (a survey's certificates are held to the signer its manifest names)")
    page, _figures = page_outputs(args.out, folder, force=args.force)
    with Progress("softrank report", bar=not args.json, unit="certificates") as progress:
        doc = write_survey_page(folder, page, progress=progress, max_certificates=args.max_certificates,
                                max_bytes=max_bytes)
    summary = doc["summary"]
    if args.json:
        from ..plumbing.json_contract import dumps

        print(dumps(doc))
    else:
        print(f"{summary['verified']} verified, {summary['failed']} failed, {summary['missing']} missing of "
              f"{summary['operators']} heads of the survey (re-verified in {summary['seconds']:.1f} s); page: {page}")
        if kv_shortfall(doc):
            print(f"{kv_shortfall(doc)} KV-budget certificate(s) missing or not re-verified (named on the page)")
    return EXIT_SOME_FAILED if summary["failed"] or summary["missing"] or kv_shortfall(doc) else 0
