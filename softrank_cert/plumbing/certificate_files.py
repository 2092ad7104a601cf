"""Where certificates lie on disk (front end; decides nothing).

* :func:`certificate_path`: ``OUT/NAME.json`` for the operator ``NAME`` of a panel (its ``/`` as
  sub-folders; a name that is not one-to-one with its path refused); :func:`certificate_paths`
  for all the names of a run, refusing two names with one file and the manifest's name;
* :func:`expand_json_paths`: the JSON files named on a command line, folders replaced by the
  ``*.json`` files below them;
* :func:`declared_format`: the ``format`` a JSON file declares, so that reports and campaign
  manifests in a certificate folder are recognised by their content (never by their name);
  :func:`not_a_certificate`: what a JSON file that makes no claim to be a certificate is (one of
  the project's other documents, or a foreign file: a ``package.json``, a key file), so that a
  verifier skips it, where a file that claims to be a certificate is checked as one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import InvalidInputError
from ..util.removal import is_removal_leftover
from ..util.operator_files import natural_key

#: The ``format`` of a certificate (``certio.certificate.FORMAT_NAME``; a test checks they agree).
CERTIFICATE_FORMAT = "softrank-certificate"
#: The project's documents that are not certificates: every command's report
#: (``softrank-<command>-report``), the ``--json`` error document and the campaign manifest
#: (``plumbing.json_contract`` and ``plumbing.campaign``; ``tests/cli/test_verify_report.py`` checks
#: that every format they write matches).
NOT_CERTIFICATE_FORMATS = re.compile(r"softrank-[a-z0-9]+(-[a-z0-9]+)*-report|softrank-error|softrank-campaign")


#: Operator names whose certificate file would look like a campaign manifest (its file name,
#: ``softrank-campaign.json``, compared without case): refused in a certificate folder.
RESERVED_STEM = "softrank-campaign"


def _name_parts(name: str) -> list[str]:
    """The components of an operator name used as a path: split at ``/`` exactly, so that
    distinct names give distinct files.  A name with an empty, ``.`` or ``..`` component, a
    leading ``/``, a backslash or a NUL is refused (one line naming its normalised form)."""
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts) or "\\" in name or "\0" in name:
        normal = "/".join(part for part in parts if part not in ("", "."))
        raise InvalidInputError(f"operator name {name!r} cannot be used as a file name: as a path it is "
                                f"{normal or '(empty)'!r} (no empty, '.' or '..' components, no backslash); "
                                "rename the operator in the panel")
    return parts


def certificate_path(out: Path, name: str) -> Path:
    """``out/NAME.json`` with the panel name's '/' as sub-folders (one file per name: a name that
    does not map one-to-one onto a path -- ``x//a``, ``x/./a``, ``../a``, ``/a``, ``a/`` -- is
    refused, :func:`_name_parts`)."""
    parts = _name_parts(name)
    return out.joinpath(*parts[:-1], parts[-1] + ".json")


def certificate_paths(out: Path, names: list[str], *, reserve_manifest: bool = True) -> list[Path]:
    """:func:`certificate_path` of every name, checked together before any work (exit 2, one line
    naming both names): no two names may give one file, or files that differ only in case (one
    file on a case-insensitive file system), and with ``reserve_manifest`` no file may be named
    like the campaign manifest (``softrank-campaign*``, compared without case)."""
    seen: dict[str, str] = {}
    paths = []
    for name in names:
        path = certificate_path(out, name)
        if reserve_manifest and path.name.lower().startswith(RESERVED_STEM):
            raise InvalidInputError(f"operator {name!r}: its certificate would be named {path.name}, reserved for the "
                                    f"campaign manifest ({RESERVED_STEM}.json); rename the operator in the panel")
        key = str(path.relative_to(out)).casefold()
        if key in seen:
            raise InvalidInputError(f"operators {seen[key]!r} and {name!r} would share one certificate file "
                                    f"({path}); rename one of them in the panel")
        seen[key] = name
        paths.append(path)
    return paths


def expand_json_paths(paths: list[str]) -> list[str]:
    """Files as given; folders replaced by the ``*.json`` files below them (in natural order:
    ``L0H2`` before ``L0H10``), except those below a folder that a removal moved aside
    (``.softrank-removed-*``, :func:`~softrank_cert.util.removal.remove_outputs`: earlier outputs
    being deleted, not results).  Whether a file is a certificate is for its content to say
    (:func:`declared_format`), not its name."""
    out: list[str] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            out.extend(sorted((str(p) for p in json_files_below(path)), key=natural_key))
        else:
            out.append(item)
    return out


def json_files_below(folder: Path) -> list[Path]:
    """The ``*.json`` files below ``folder`` (``rglob``), less those below a
    ``.softrank-removed-*`` folder in it (:func:`~softrank_cert.util.removal.is_removal_leftover`)."""
    return [p for p in Path(folder).rglob("*.json")
            if not any(is_removal_leftover(part) for part in p.relative_to(folder).parts[:-1])]


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Duplicate
    return dict(pairs)


def declared_format(raw: bytes) -> str | None:
    """The ``format`` string that the JSON object in ``raw`` declares at its top level, or None
    when it declares none, or is not a JSON object that parses without duplicate keys.

    A document that declares one of the project's other formats (:data:`NOT_CERTIFICATE_FORMATS`:
    a ``softrank-*-report``, a ``softrank-campaign`` manifest) makes no certified claim: the
    verifier lists it as skipped.  Everything else -- a certificate, a document of an unknown
    format (``softrank-cert``: a damaged certificate?), anything that fails to parse -- goes to the
    strict certificate parser, which accepts it or says what is wrong (so a file that only
    *looks* like a report, e.g. through a duplicated ``format`` key, is never skipped).
    """
    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError, _Duplicate):
        return None
    fmt = document.get("format") if isinstance(document, dict) else None
    return fmt if isinstance(fmt, str) else None


#: Top-level fields only a certificate has: a JSON object with one of them claims to be one.
CERTIFICATE_FIELDS = ("operator", "brackets")
_JSON_KINDS = {list: "a JSON list", str: "a JSON string", bool: "a JSON boolean", int: "a JSON number",
               float: "a JSON number", type(None): "JSON null"}


def not_a_certificate(raw: bytes) -> str | None:
    """What the JSON file ``raw`` is when it makes no claim to be a certificate, else None (check
    it as a certificate: the strict parser accepts it or says what is wrong).

    Skipped, named: a JSON value that is not an object (``"a JSON list"``); an object declaring
    one of the project's other documents (:func:`is_certificate_format`: its format, e.g.
    ``"softrank-campaign"``); a foreign object -- none of :data:`CERTIFICATE_FIELDS`, and a
    ``format`` that is absent, not a string, or a string not starting with ``softrank``
    (``'a JSON object without "format": "softrank-certificate"'``, ``"a 'x' document"``).
    Checked: anything that fails to parse (not UTF-8, not JSON, a duplicate key: a damaged
    certificate?), an object with an ``operator`` or ``brackets`` field, and one whose format
    starts with ``softrank`` but is no project document (``softrank-cert``)."""
    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError, _Duplicate):
        return None
    if not isinstance(document, dict):
        return _JSON_KINDS.get(type(document), "a JSON value")
    fmt = document.get("format")
    if isinstance(fmt, str) and not is_certificate_format(fmt):
        return fmt
    if any(field in document for field in CERTIFICATE_FIELDS):
        return None
    if not isinstance(fmt, str):
        return f'a JSON object without "format": "{CERTIFICATE_FORMAT}"'
    return None if fmt.casefold().startswith("softrank") else f"a {fmt!r} document"


def is_certificate_format(fmt: str | None) -> bool:
    """Whether a file declaring ``fmt`` (:func:`declared_format`) is to be checked as a certificate:
    unless ``fmt`` is one of the project's documents that are not certificates."""
    return fmt is None or not NOT_CERTIFICATE_FORMATS.fullmatch(fmt)
