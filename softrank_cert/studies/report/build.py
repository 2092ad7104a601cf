"""The report document of a folder (UNTRUSTED): its certificates re-verified, the tables' rows
and the figures to draw (``softrank report``, and the ``report`` stage of ``softrank survey``).

* :func:`page_outputs`: the page and its figures folder, checked before any work;
* :func:`read_campaign` / :func:`read_certificates`: a campaign folder (with its manifest) or a
  plain folder of certificate files, every certificate re-verified by the trusted kernel;
* :func:`document`: the report document (the page's content and ``--json``) and the figures;
* :func:`write_folder_page`: all of it for one folder, the page and its figures written together.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: Suffixes the page may have.
PAGE_SUFFIXES = (".html", ".htm")


def page_outputs(out: str | os.PathLike[str] | None, folder: Path, *, force: bool,
                 inputs: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """The page (``out``, default ``folder/report.html``) and its figures folder beside it
    (``PAGE-figures/``), checked before any work: an input, a key file, or without ``force`` an
    existing page or a figures folder that holds files, is refused (exit 2)."""
    from ...util.files import check_folder_unused, check_output_file, check_output_folder

    page = check_output_file(out if out else folder / "report.html", "--out", suffixes=PAGE_SUFFIXES, force=force,
                             inputs=inputs)
    figures = check_output_folder(page.with_name(page.stem + "-figures"), "--out (its figures folder)")
    check_folder_unused(figures, "--out (its figures folder)", force=force)
    return page, figures


def read_campaign(folder: Path, manifest: dict[str, Any], max_certificates: int, max_bytes: int,
                   progress: Any) -> dict[str, Any]:
    """The campaign folder re-verified: the document's ``campaign`` header (from the manifest:
    bookkeeping), ``signatures``, ``summary``, ``operators`` (records) and ``notes``."""
    from .folder import plan, unlisted_files, verify_operators

    planned = plan(folder, manifest, max_certificates=max_certificates, max_bytes=max_bytes)
    records, summary = verify_operators(planned, manifest, progress.stage)

    def text(key: str) -> str | None:
        return manifest.get(key) if isinstance(manifest.get(key), str) else None

    generator = manifest.get("generator")
    campaign = {"state": text("state"), "created": text("created"), "updated": text("updated"),
                "generator_version": generator.get("version") if isinstance(generator, dict) else None,
                "tolerances": list(manifest["tolerances"]), "operators": len(records), "signer": summary["signer"]}
    return {"campaign": campaign, "signatures": {"trusted_keys": None, "require_signature": bool(summary["signer"])},
            "summary": summary, "operators": records, "notes": [n for n in [unlisted_files(folder, planned)] if n]}


def read_certificates(folder: Path, trusted: frozenset[str] | None, signatures: dict[str, Any],
                       max_certificates: int, max_bytes: int, progress: Any) -> dict[str, Any]:
    """The plain folder re-verified, in the shape of :func:`_read_campaign` (no manifest: state and
    times None, the page's tolerances and the software versions from the verified certificates;
    ``signatures``: the --trusted-keys file and whether a signature is required)."""
    from .certificates import plan_files, unread_below, verify_files

    planned = plan_files(folder, max_certificates=max_certificates, max_bytes=max_bytes)
    reading = verify_files(planned, trusted_keys=trusted, require_signature=signatures["require_signature"],
                           stage=progress.stage)
    campaign = {"state": None, "created": None, "updated": None, "generator_version": reading.generator_version,
                "tolerances": reading.tolerances, "operators": reading.summary["operators"], "signer": None}
    return {"campaign": campaign, "signatures": signatures, "summary": reading.summary, "operators": reading.records,
            "notes": [reading.note] + [n for n in [unread_below(folder)] if n]}


def _css_width(figure: Any) -> int:
    """The width a figure is shown at on the page, in CSS pixels (100 per inch of the figure)."""
    return round(float(figure.get_size_inches()[0]) * 100)


def _drawn(what: str, chosen: list[str], every: list[str]) -> str:
    """What a figure left out, for its caption ("" when it drew all of ``every``)."""
    if len(chosen) == len(every):
        return ""
    return (f" Drawn for {len(chosen)} of the {len(every)} {what} ({', '.join(chosen)}: the first, the last and evenly "
            "spaced ones between); the tables hold all.")


def document(kind: str, folder: Path, page: Path, read: dict[str, Any],
              figures: Path) -> tuple[dict[str, Any], list[tuple[Any, Path]]]:
    """The report document (the page's content; ``--json``) and the figures to write."""
    from ...plumbing.json_contract import envelope
    from .figures import MAX_LAYERS, MAX_TOLERANCES, ratio_figure, spread, width_figure
    from .summary import group_rows, width_series

    records, tolerances = read["operators"], read["campaign"]["tolerances"]
    left_out = _drawn("tolerances", spread(tolerances, MAX_TOLERANCES), tolerances)
    drawn = [(ratio_figure(records, tolerances), figures / "ratios.png")]
    entries = [{"path": str(drawn[0][1]), "title": "upper/lower ratios", "width": _css_width(drawn[0][0]),
                "caption": "Empirical distribution of verified upper end / verified lower end per tolerance "
                           "(1 = resolved)." + left_out}]
    notes = list(read["notes"])
    series = width_series(records, tolerances)
    if series is not None:
        heads = list(series["heads"])
        drawn.append((width_figure(series, tolerances), figures / "width.png"))
        entries.append({"path": str(drawn[1][1]), "title": "certified rank against width", "width": _css_width(drawn[1][0]),
                        "caption": "Verified upper (solid) and lower (dashed) ends of each head against block "
                                   "width, per tolerance: one line per head of one model and document, joining only "
                                   "that head's widths (nothing pooled)." + left_out
                                   + _drawn("heads", spread(heads, MAX_LAYERS), heads)})
    else:
        notes.append("No rank-against-width figure: no verified head carries two block widths (names that "
                     "differ only in their w<N> component).")
    body = {"kind": kind, "folder": str(folder), "page": str(page), "campaign": read["campaign"],
            "signatures": read["signatures"], "summary": read["summary"], "groups": group_rows(records, tolerances),
            "figures": entries, "notes": notes, "operators": records}
    return envelope("report", body), drawn


def write_folder_page(kind: str, folder: Path, manifest: dict[str, Any] | None, page: Path, figures: Path, *,
                      trusted: frozenset[str] | None, signatures: dict[str, Any], max_certificates: int,
                      max_bytes: int, progress: Any) -> dict[str, Any]:
    """The page of ``folder`` (a campaign with its ``manifest``, or a plain folder of certificates
    with the signature options ``trusted`` and ``signatures``): size, then re-verify every
    certificate, draw the figures, write the page and its figures together (or nothing); returns
    the report document.  ``progress``: a :class:`~softrank_cert.util.progress.Progress`."""
    from ...util.files import OutputFiles
    from .page import render_page

    progress.stage("sizing the certificates")
    if manifest is not None:
        read = read_campaign(folder, manifest, max_certificates, max_bytes, progress)
    else:
        read = read_certificates(folder, trusted, signatures, max_certificates, max_bytes, progress)
    progress.stage("figures")
    doc, drawn = document(kind, folder, page, read, figures)
    progress.stage("writing the page")
    with OutputFiles() as outputs:  # the page and its figures together, or nothing
        for figure, path in drawn:
            outputs.stage_figure(figure, path)
        outputs.stage_text(page, render_page(doc, page))
    return doc
