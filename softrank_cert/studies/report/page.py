"""The report's HTML (UNTRUSTED rendering): one static page, no network, one small inline script.

The script (:data:`SORT_SCRIPT`, inline: the page works offline as one file) sorts a table whose
class is ``sortable`` by the column whose header is clicked (numbers by a cell's ``data-sort``
value or its text, text in natural order; a second click reverses); without it the page reads the
same, unsorted.

:func:`render_page` turns the report document (``softrank_cert.cli.report_cmd``: header,
verify summary, group rows, operator records, figure files) into HTML, worded for the kind of
folder read (a campaign; a plain folder of certificate files, whose rows of no verified operator
are named by their file).  Every piece of
untrusted text (operator names, reasons, methods, paths) is escaped: HTML's special characters,
and control and format characters (NUL, bidi overrides such as U+202E: they would reorder or
hide what a reader sees) shown as visible escapes as the verifier's tables show them
(:func:`~softrank_cert.util.escaping.plain_text`); links and image sources
are relative to the page's folder and percent-encoded, so the page moves with its folder.

A file name that is not UTF-8 (Python holds its undecodable bytes as the surrogate escapes
U+DC80..U+DCFF) is shown with those bytes as ``\\xNN`` (:func:`shown`) and linked by its bytes
(:func:`href`): the page is always UTF-8 text.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence
from urllib.parse import quote

from ...util.escaping import plain_text

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; } td.name, th.name { text-align: left; font-family: monospace; }
td.failed { color: #a00; text-align: left; } td.missing, td.duplicate { color: #855; text-align: left; }
.resolved { font-weight: bold; } img { max-width: 100%; height: auto; border: 1px solid #ddd; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; } dt { font-weight: bold; }
p.note { color: #555; font-size: 0.9em; }
th.sorter { cursor: pointer; } th[data-order=ascending]::after { content: " \\25B2"; }
th[data-order=descending]::after { content: " \\25BC"; }
table.heatmap td { text-align: center; min-width: 2.2em; } table.heatmap td.resolved { font-weight: bold; }
"""


#: Click a header of a ``table.sortable`` to sort its rows by that column (again: reversed).
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var header = table.rows[0];
  Array.prototype.forEach.call(header.cells, function (th, column) {
    th.classList.add("sorter");
    th.addEventListener("click", function () {
      var rows = Array.prototype.slice.call(table.rows, 1);
      var ascending = th.getAttribute("data-order") !== "ascending";
      Array.prototype.forEach.call(header.cells, function (h) { h.removeAttribute("data-order"); });
      th.setAttribute("data-order", ascending ? "ascending" : "descending");
      function key(row) {
        var cell = row.cells[column];
        if (!cell) { return ""; }
        var text = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent;
        var number = Number(text);
        return text !== "" && !isNaN(number) ? number : text;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = (typeof x === "number" && typeof y === "number") ? x - y
          : String(x).localeCompare(String(y), undefined, {numeric: true});
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { row.parentNode.appendChild(row); });
    });
  });
});
"""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` as Unicode text that can be written: an undecodable byte of a file name (its
    surrogate escape, U+DC80..U+DCFF) as ``\\xNN``, any other lone surrogate as ``\\uNNNN``
    (``\\xff\\xfe.json``; text without surrogates is unchanged)."""
    return _SURROGATE.sub(_escape_surrogate, text)


def _e(value: Any) -> str:
    """Untrusted text for the page: :func:`shown`, control and format characters as visible
    escapes (``\\u202e``, ``\\x00``), then HTML-escaped."""
    return html.escape(plain_text(shown(str(value))), quote=True)


def href(target: str | Path, page: Path) -> str:
    """``target`` as a relative, percent-encoded URL from the folder of ``page``: the bytes of
    its name (``os.fsencode``), so a file name that is not UTF-8 is linked as it is."""
    relative = Path(os.path.relpath(os.path.abspath(target), os.path.abspath(page.parent))).as_posix()
    try:
        raw = os.fsencode(relative)
    except UnicodeEncodeError:  # a surrogate no file name has: not a file of this disk, still a URL
        raw = relative.encode("utf-8", "surrogatepass")
    return quote(raw, safe="/")


def table_row(cells: Sequence[str], name: str | None = None) -> str:
    """One ``<tr>`` of a page's table: a ``<td>`` of each of ``cells`` (HTML, escaped already),
    after the row's ``name`` cell (HTML, class ``name``) when it has one."""
    head = "" if name is None else f"<td class=\"name\">{name}</td>"
    return "<tr>" + head + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _number(value: float | None, digits: int = 3) -> str:
    return "&ndash;" if value is None else _e(f"{value:.{digits}g}")


def _seconds(value: float | None) -> str:
    """Seconds with sensible digits (``3.1``, ``179``: never ``1.8e+02``)."""
    from ...util.progress import seconds_text

    return "&ndash;" if value is None else _e(seconds_text(value))


def _share(value: float | None) -> str:
    return "&ndash;" if value is None else f"{100 * value:.0f}%"


def _ends(bracket: dict[str, Any]) -> str:
    lower, upper = bracket["lower"], bracket["upper"]
    title = _e(f"lower: {bracket['lower_method']}, upper: {bracket['upper_construction']}; checked by "
               + " / ".join(bracket["checked_by"]))
    if lower == upper:
        return f'<td class="resolved" data-sort="{lower}" title="{title}">{lower}</td>'
    return f'<td data-sort="{lower}" title="{title}">[{lower}, {upper}]</td>'


def _header_items(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """The header's (label, value) pairs for the kind of folder read."""
    c, signatures = doc["campaign"], doc["signatures"]
    tolerances = ", ".join(c["tolerances"]) or "none (no certificate verified)"
    if doc["kind"] == "campaign":
        return [("folder", doc["folder"]), ("page written", doc["generator"]["created"]),
                ("software", f"softrank-cert {doc['generator']['version']} (campaign run by {c['generator_version']})"),
                ("tolerances", tolerances), ("operators", c["operators"]),
                ("campaign", f"{c['state']}; created {c['created']}, updated {c['updated']}"),
                ("signer", c["signer"] or "unsigned (no --key)")]
    if signatures["trusted_keys"]:
        signed = f"required, by a key in {signatures['trusted_keys']}"
    elif signatures["require_signature"]:
        signed = "required (any valid signature)"
    else:
        signed = "checked where present (as softrank-verify does); none required"
    return [("folder", f"{doc['folder']} (certificate files, no campaign manifest)"),
            ("page written", doc["generator"]["created"]),
            ("software", f"softrank-cert {doc['generator']['version']} (certificates made by "
                         f"{c['generator_version'] or 'unknown'})"),
            ("tolerances", tolerances), ("operators", c["operators"]),
            ("files", doc["summary"]["files"]), ("signatures", signed)]


def _verify_summary(doc: dict[str, Any]) -> str:
    """The verify summary's paragraph (counts, engines, what the numbers come from)."""
    s = doc["summary"]
    engines = ", ".join(f"{n} by {_e(e)}" for e, n in s["checked_by"].items()) or "none"
    checked = (f"{s['claims_verified']} claims verified ({engines}), in {s['seconds']:.1f} s. Only verified "
               "certificates give brackets")
    files = doc["folder"] if doc["kind"] == "campaign" else str(Path(doc["folder"]) / "*.json")
    again = f"Check them again with <code>softrank-verify {_e(files)}</code>."
    if doc["kind"] == "campaign":
        return (f"<p>Every certificate was re-checked by the trusted kernel for this page (the entry point of "
                f"<code>softrank-verify</code>): <strong>{s['verified']} verified</strong>, "
                f"<strong>{s['failed']} failed</strong>, <strong>{s['missing']} missing</strong> of {s['operators']} "
                f"operators, {checked}; the manifest is bookkeeping and no number on this page is read from it. "
                f"{again}</p>")
    return (f"<p>Every file was re-checked by the trusted kernel for this page (the entry point of "
            f"<code>softrank-verify</code>): <strong>{s['verified']} verified</strong>, "
            f"<strong>{s['failed']} failed</strong>, <strong>{s['duplicates']} not counted</strong> (a second "
            f"certificate of an operator) of {s['files']} files, {checked}; an operator's name is the one its "
            f"verified certificate states. {again}</p>")


def _header(doc: dict[str, Any]) -> list[str]:
    out = ["<dl>"] + [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in _header_items(doc)] + ["</dl>"]
    return out + ["<h2 id=\"verify\">Verify summary</h2>", _verify_summary(doc)]


def _group_tables(doc: dict[str, Any]) -> list[str]:
    tolerances = doc["campaign"]["tolerances"]
    out = ["<h2 id=\"groups\">Groups</h2>",
           "<p class=\"note\">A group is the operator name without its last component. Medians over the verified "
           "operators of the group; ratio = verified upper end / verified lower end (1: resolved); resolved = "
           "share of verified operators with lower end = upper end.</p>"]
    for row in doc["groups"]:
        out.append(f"<h3>{_e(row['group'])}</h3>")
        out.append(f"<p>{row['verified']} of {row['operators']} operators verified.</p>")
        out.append("<table><tr><th>eps</th><th>median lower</th><th>median upper</th><th>median ratio</th>"
                   "<th>resolved</th></tr>")
        for eps in tolerances:
            cell = row["eps"][eps]
            out.append(table_row([_e(eps), _number(cell["median_lower"]), _number(cell["median_upper"]),
                                  _number(cell["median_ratio"]), _share(cell["resolved_share"])]))
        out.append("</table>")
    return out


def _figures(doc: dict[str, Any], page: Path) -> list[str]:
    out = ["<h2 id=\"figures\">Figures</h2>"]
    for figure in doc["figures"]:
        out.append(f"<figure><img src=\"{href(figure['path'], page)}\" alt=\"{_e(figure['title'])}\" "
                   f"width=\"{int(figure['width'])}\">"
                   f"<figcaption>{_e(figure['caption'])}</figcaption></figure>")
    out += [f"<p class=\"note\">{_e(note)}</p>" for note in doc["notes"]]
    return out


#: What a record that gives no brackets is shown as, by status.
_LABELS = {"failed": "not verified", "missing": "missing", "duplicate": "not counted"}
#: A plain folder's "failed" record that names an operator: every claim verified, but the
#: certificate holds another tolerance list than the page's (the one such case,
#: :func:`softrank_cert.studies.report.certificates.assign`).
_OTHER_TOLERANCES = "verified, not counted"


def _label(record: dict[str, Any], campaign: bool) -> str:
    if record["status"] == "failed" and not campaign and record["operator"] is not None:
        return _OTHER_TOLERANCES
    return _LABELS[record["status"]]


def _operator_table(doc: dict[str, Any], page: Path) -> list[str]:
    tolerances = doc["campaign"]["tolerances"]
    campaign = doc["kind"] == "campaign"
    seconds = ("<th title=\"the search's wall seconds, as the manifest records them (bookkeeping; a busy machine "
               "makes them longer, not the certificate different)\">search wall s</th>"
               if campaign else "")
    out = ["<h2 id=\"operators\">Operators</h2>",
           "<p class=\"note\">Ends per tolerance as the kernel verified them: one number when resolved, else "
           "[lower, upper] (hover for the methods and what checked them). Each name links to its certificate"
           + ("." if campaign else "; a file of no verified operator is named by its file name.") + "</p>",
           "<table class=\"sortable\"><tr><th class=\"name\">operator</th>"
           + "".join(f"<th>eps {_e(e)}</th>" for e in tolerances)
           + seconds + "</tr>"]
    for record in doc["operators"]:
        name = _e(record["operator"] if record["operator"] is not None else record["file"])
        cell = (f"<a href=\"{href(record['certificate'], page)}\">{name}</a>" if record["certificate"] else name)
        if record["status"] == "verified":
            ends = "".join(_ends(b) for b in record["brackets"])
        else:
            ends = (f"<td class=\"{record['status']}\" colspan=\"{max(1, len(tolerances))}\">"
                    f"{_label(record, campaign)}: {_e(record['reason'])}</td>")
        tail = f"<td>{_seconds(record['seconds'])}</td>" if campaign else ""
        out.append(f"<tr data-status=\"{record['status']}\"><td class=\"name\">{cell}</td>{ends}{tail}</tr>")
    out.append("</table>")
    return out


def render_page(doc: dict[str, Any], page: Path,
                sections: Sequence[Callable[[dict[str, Any], Path], list[str]]] = ()) -> str:
    """The HTML text of the report document ``doc`` to be written at ``page``; ``sections`` (each
    ``(doc, page) -> HTML lines``) come after the header, before the groups."""
    what = "survey" if "survey" in doc else "campaign" if doc["kind"] == "campaign" else "certificate folder"
    title = f"softrank {what} report: {doc['survey']['folder'] if 'survey' in doc else doc['folder']}"
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<link rel=\"icon\" href=\"data:,\">", f"<title>{_e(title)}</title>", f"<style>{_CSS}</style>",
             "</head><body>", f"<h1>{_e(title)}</h1>"]
    parts += _header(doc) + [line for section in sections for line in section(doc, page)]
    parts += _group_tables(doc) + _figures(doc, page) + _operator_table(doc, page)
    parts.append(f"<script>{SORT_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"
