"""``softrank report``: a ``softrank bracket`` campaign folder as one static HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EXIT_SOME_FAILED, InvalidInputError
from ..util.files import OutputFiles, check_output_file, check_output_folder
from .common import add_command, add_quiet_option

#: ``studies.report.folder``'s limits, written out so that ``--help`` imports no study
#: (``tests/cli/test_report.py`` checks that they agree).
DEFAULT_MAX_CERTIFICATES = 10_000
DEFAULT_MAX_BYTES_TEXT = "4G"
#: Suffixes the page may have.
PAGE_SUFFIXES = (".html", ".htm")

EPILOG = f"""\
examples:
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ && softrank report certs/
  softrank report certs/ --out site/campaign.html       # figures in site/campaign-figures/
  softrank report certs/ --json --quiet                 # the page's content as JSON too
  softrank report big-campaign/ --max-certificates 50000 --max-bytes 20G

The page (default DIR/report.html; its figures, PNG files, in the folder beside it named after
it: DIR/report-figures/) shows a header (folder, time, software version, tolerances, operator
count), the verify summary, one table per group (the operator name without its last component,
e.g. minilm/apache2/w64: medians of the verified ends, the median upper/lower ratio and the
share resolved per tolerance), the figures (the upper/lower ratios per tolerance; certified
rank against block width per layer when the names carry several widths w<N>) and one row per
operator linking to its certificate. Every bracket on it comes from re-verifying the
certificates with the trusted kernel (what softrank-verify runs), never from the manifest; a
certificate that does not verify, is about another operator or holds other tolerances is
listed as not verified with the reason, and an operator without a certificate as missing.
Certificates are counted and sized before any is read: more than --max-certificates (default
{DEFAULT_MAX_CERTIFICATES}) or more than --max-bytes of them together (default {DEFAULT_MAX_BYTES_TEXT}) is refused.
The page and its figures are written together, atomically, after everything was checked.

exit codes: 0 the page was written and every operator of the manifest verified; 2 invalid
input (not a folder, no manifest, a manifest of another command or unreadable, over a limit,
an unusable --out; nothing is written) or an output that cannot be written; 4 a checker bug
(a verified lower end above a verified upper end: no page); 6 the page was written but some
operators failed verification or have no certificate (listed on the page).
"""


def add_report(sub: Any) -> None:
    """The parser of ``softrank report`` (imports no study: ``--help`` stays light)."""
    p = add_command(sub, "report",
                    description="Render a 'softrank bracket --all' campaign folder as one static HTML page: every "
                                "certificate re-verified by the trusted kernel, tables per group, figures, links.",
                    epilog=EPILOG)
    p.add_argument("folder", metavar="DIR", help="the --out folder of a 'softrank bracket PANEL --all' campaign")
    p.add_argument("--out", metavar="REPORT.html", help="the page (default DIR/report.html); its figures go to the "
                                                        "folder beside it named REPORT-figures/")
    p.add_argument("--max-certificates", type=int, default=DEFAULT_MAX_CERTIFICATES, metavar="N",
                   help=f"refuse a folder with more certificates (default {DEFAULT_MAX_CERTIFICATES})")
    p.add_argument("--max-bytes", default=DEFAULT_MAX_BYTES_TEXT, metavar="SIZE",
                   help=f"refuse certificates larger than this together, e.g. 20G or 800M (K/M/G = 1024^1/2/3 "
                        f"bytes; default {DEFAULT_MAX_BYTES_TEXT})")
    p.add_argument("--json", action="store_true", help="also print the page's content as JSON on stdout")
    add_quiet_option(p)
    p.set_defaults(run=run_report)


def run_report(args: Any) -> int:
    """Check the limits, the folder and ``--out``; size, then re-verify every certificate; write the
    page and its figures together.  Returns 0, or 6 when some operator is not verified or missing."""
    from ..util.memory import parse_size
    from ..util.progress import StageProgress

    if args.max_certificates < 1:
        raise InvalidInputError(f"--max-certificates must be at least 1, got {args.max_certificates}")
    max_bytes = parse_size(args.max_bytes, "--max-bytes")
    folder = Path(args.folder)
    from ..studies.report.folder import plan, read_manifest, unlisted_files, verify_operators

    manifest = read_manifest(folder)
    page = check_output_file(args.out if args.out else folder / "report.html", "--out", suffixes=PAGE_SUFFIXES)
    figures = check_output_folder(page.with_name(page.stem + "-figures"), "--out (its figures folder)")
    with StageProgress("softrank report", not args.json, unit="certificates") as progress:
        progress.stage("sizing the certificates")
        planned = plan(folder, manifest, max_certificates=args.max_certificates, max_bytes=max_bytes)
        records, summary = verify_operators(planned, manifest, lambda done, total: progress.stage("verifying", done, total))
        progress.stage("figures")
        doc, drawn = _document(folder, page, manifest, records, summary, figures)
        doc["notes"] += [note for note in [unlisted_files(folder, planned)] if note]
        progress.stage("writing the page")
        from ..studies.report.page import render_page

        with OutputFiles() as outputs:  # the page and its figures together, or nothing
            for figure, path in drawn:
                outputs.stage_figure(figure, path)
            outputs.stage_text(page, render_page(doc, page))
    if args.json:
        from ..plumbing.reports import dumps

        print(dumps(doc))
    else:
        print(f"{summary['verified']} verified, {summary['failed']} failed, {summary['missing']} missing of "
              f"{summary['operators']} operators (re-verified in {summary['seconds']:.1f} s); page: {page}")
    return EXIT_SOME_FAILED if summary["failed"] or summary["missing"] else 0


def _css_width(figure: Any) -> int:
    """The width a figure is shown at on the page, in CSS pixels (100 per inch of the figure)."""
    return round(float(figure.get_size_inches()[0]) * 100)


def _document(folder: Path, page: Path, manifest: dict[str, Any], records: list[dict[str, Any]],
              summary: dict[str, Any], figures: Path) -> tuple[dict[str, Any], list[tuple[Any, Path]]]:
    """The report document (the page's content; ``--json``) and the figures to write."""
    from ..plumbing.reports import envelope
    from ..studies.report.figures import ratio_figure, width_figure
    from ..studies.report.summary import group_rows, width_series

    tolerances = list(manifest["tolerances"])
    drawn = [(ratio_figure(records, tolerances), figures / "ratios.png")]
    entries = [{"path": str(drawn[0][1]), "title": "upper/lower ratios", "width": _css_width(drawn[0][0]),
                "caption": "Empirical distribution of verified upper end / verified lower end per tolerance "
                           "(1 = resolved)."}]
    notes = []
    series = width_series(records, tolerances)
    if series is not None:
        drawn.append((width_figure(series, tolerances), figures / "width.png"))
        entries.append({"path": str(drawn[1][1]), "title": "certified rank against width", "width": _css_width(drawn[1][0]),
                        "caption": "Median verified upper (solid) and lower (dashed) ends against block width, "
                                   "per layer and tolerance."})
    else:
        notes.append("No rank-against-width figure: the verified operators' names carry fewer than two block "
                     "widths (w<N> components).")

    def text(key: str) -> str | None:
        return manifest.get(key) if isinstance(manifest.get(key), str) else None

    generator = manifest.get("generator")
    campaign = {"state": text("state"), "created": text("created"), "updated": text("updated"),
                "generator_version": generator.get("version") if isinstance(generator, dict) else None,
                "tolerances": tolerances, "operators": len(records), "signer": summary["signer"]}
    body = {"folder": str(folder), "page": str(page), "campaign": campaign, "summary": summary,
            "groups": group_rows(records, tolerances), "figures": entries, "notes": notes, "operators": records}
    return envelope("report", body), drawn
