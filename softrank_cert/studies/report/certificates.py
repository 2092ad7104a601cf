"""A plain folder of certificate files read for the report (UNTRUSTED orchestration; every
verdict is the kernel's).

A folder without a campaign manifest: its certificates are the ``*.json`` files directly in it,
whatever their names (e.g. ``<sha256>.json``); subfolders are not read (:func:`unread_below`
names the JSON files there in a note).

* :func:`plan_files`: those files in natural name order, sized by ``stat`` alone and refused as a
  whole (exit 2) over the limits before a byte is read; a folder without one is refused too;
* :func:`check_file`: one file re-verified by
  :func:`softrank_cert.verification.verify_certificate_bytes` (what ``softrank-verify`` runs: a
  signature present is checked; ``trusted_keys`` and ``require_signature`` mean what
  ``--trusted-keys`` and ``--require-signature`` mean there);
* :func:`page_tolerances`: the page's one tolerance list, the list held by the most certificates
  whose every claim verified (a tie: the list of the first such file in natural name order);
* :func:`verify_files`: the records, each ``verified`` (every claim VERIFIED, the page's
  tolerances, the first such certificate of its operator in natural file order), ``failed`` (a
  file that does not verify, is not a certificate or holds other tolerances) or ``duplicate`` (a
  later such certificate of an operator already counted, named with the first file).

A record's operator is the ``operator_id`` of a certificate whose every claim the kernel verified
(None otherwise): nothing is read from a file the kernel did not accept.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FloatingPointEnvironmentError, InternalInvariantError, InvalidInputError, SoftrankError
from ...plumbing.certificate_files import CERTIFICATE_FORMAT, declared_format, json_files_below
from ...util.progress import Stage
from .folder import (
    DEFAULT_MAX_BYTES, DEFAULT_MAX_CERTIFICATES, WHAT_TO_GIVE, Planned, check_count, check_limits, claims_not_verified,
    summarize, verified_brackets,
)

#: The files read: directly in the folder, named ``*.json``.
SUFFIX = ".json"
#: How a JSON value that is not an object is named in a reason.
_JSON_KINDS = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}


def plan_files(folder: Path, *, max_certificates: int = DEFAULT_MAX_CERTIFICATES,
               max_bytes: int = DEFAULT_MAX_BYTES) -> list[Planned]:
    """The ``*.json`` entries directly in ``folder``, in natural name order (``a2`` before
    ``a10``), each sized by ``stat`` (no file is opened; an entry that is not a regular file has
    no size and is listed as failed).  None at all, or more than the limits
    (:func:`~.folder.check_limits`: every entry counts against ``max_certificates``, a regular
    file or not, and it is counted before any is sized), is one line, exit 2."""
    from ...util.operator_files import natural_key

    names = sorted((entry.name for entry in os.scandir(folder) if entry.name.endswith(SUFFIX)), key=natural_key)
    if not names:
        below = next(iter(folder.rglob(f"*{SUFFIX}")), None) is not None
        where = "; those in its subfolders are not read" if below else ""
        raise InvalidInputError(f"{folder}: neither a campaign folder (no softrank-campaign.json) nor a folder of "
                                f"certificates (no *{SUFFIX} file in it{where}): {WHAT_TO_GIVE}")
    check_count(folder, len(names), max_certificates)  # every entry counts, a regular file or not
    planned = []
    for name in names:
        path = folder / name
        try:
            info = os.stat(path)
        except OSError as exc:  # e.g. a dangling link
            planned.append(Planned(name, path, None, f"cannot be read ({exc.strerror or exc})"))
            continue
        if not stat.S_ISREG(info.st_mode):
            planned.append(Planned(name, path, None, "not a regular file"))
            continue
        planned.append(Planned(name, path, info.st_size))
    check_limits(folder, planned, max_certificates, max_bytes)
    return planned


def unread_below(folder: Path, shown: int = 3) -> str | None:
    """A note on the ``*.json`` files in subfolders of ``folder`` (not read; those below a
    ``.softrank-removed-*`` folder not counted), or None."""
    below = sorted(str(p.relative_to(folder)) for p in json_files_below(folder) if p.parent != folder)
    if not below:
        return None
    return (f"{len(below)} JSON file(s) in subfolders were not read (only the files directly in the folder are): "
            f"{', '.join(below[:shown])}" + (", ..." if len(below) > shown else ""))


@dataclass(frozen=True)
class Checked:
    """One file after the kernel: the ``operator`` and ``tolerances`` of a certificate whose every
    claim it verified, with their ``brackets``; else ``operator`` None and the ``reason``."""

    planned: Planned
    operator: str | None = None
    tolerances: tuple[str, ...] = ()
    brackets: list[dict[str, Any]] = field(default_factory=list)
    generator_version: str | None = None
    reason: str | None = None


def _not_verified(raw: bytes, exc: SoftrankError) -> str:
    """Why a file gave no verified certificate: ``not a certificate (what it is)`` for JSON that is
    not a certificate object or declares another format, else the verifier's one line."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        document = None
    if isinstance(document, dict):
        fmt = declared_format(raw)
        if fmt is None and "format" not in document:
            return f'not a certificate (a JSON object without "format": "{CERTIFICATE_FORMAT}")'
        if fmt is not None and fmt != CERTIFICATE_FORMAT:
            return f"not a certificate (a {fmt!r} document)"
    elif document is not None:
        return f"not a certificate (a JSON {_JSON_KINDS.get(type(document), 'value')})"
    return f"does not verify: {exc}"


def check_file(planned: Planned, *, trusted_keys: frozenset[str] | None = None,
               require_signature: bool = False) -> Checked:
    """:class:`Checked` of one planned file; a broken process or checker (exit 4) is raised."""
    from ...certio.certificate import read_certificate_bytes
    from ...verification import verify_certificate_bytes

    if planned.path is None or planned.size is None:
        return Checked(planned, reason=planned.why_missing)
    raw = b""
    try:
        raw = read_certificate_bytes(planned.path)
        verification = verify_certificate_bytes(raw, source=str(planned.path), trusted_keys=trusted_keys,
                                                require_signature=require_signature)
    except (FloatingPointEnvironmentError, InternalInvariantError):
        raise  # the process or the checker, not the file: exit 4, no page
    except SoftrankError as exc:
        return Checked(planned, reason=_not_verified(raw, exc))
    certificate = verification.certificate
    assert certificate is not None  # verify_certificate_bytes always decodes it
    if not verification.ok:
        return Checked(planned, reason=claims_not_verified(verification))
    generator = certificate.document.get("generator")
    version = generator.get("version") if isinstance(generator, dict) else None
    return Checked(planned, certificate.operator_id, tuple(b.eps for b in certificate.brackets),
                   verified_brackets(verification), version if isinstance(version, str) else None)


def page_tolerances(checked: list[Checked]) -> tuple[list[str], int]:
    """The page's tolerance list and how many verified certificates hold it: the list held by the
    most certificates whose every claim verified, a tie going to the list of the first such file
    in ``checked``'s (natural file) order; ``([], 0)`` when none verified."""
    held = [c.tolerances for c in checked if c.operator is not None]
    counts = Counter(held)
    if not counts:
        return [], 0
    most = max(counts.values())
    return list(next(t for t in held if counts[t] == most)), most


def _record(item: Checked, status: str, reason: str | None = None) -> dict[str, Any]:
    return {"operator": item.operator, "file": item.planned.name, "status": status, "manifest_status": None,
            "seconds": None, "certificate": str(item.planned.path) if item.planned.size is not None else None,
            "brackets": item.brackets if status == "verified" else [], "reason": reason}


def assign(checked: list[Checked], tolerances: list[str]) -> list[dict[str, Any]]:
    """The records of ``checked`` (natural file order), ordered for the page: operators in natural
    name order (a name's files in natural order), then the files of no verified operator.  A
    "failed" record names an operator only when its certificate verified but holds other
    tolerances than ``tolerances`` (the page labels it "verified, not counted")."""
    from ...util.operator_files import natural_key

    first: dict[str, str] = {}
    records = []
    for item in checked:
        if item.operator is None:
            records.append(_record(item, "failed", item.reason))
        elif list(item.tolerances) != tolerances:
            records.append(_record(item, "failed", f"holds the tolerances {','.join(item.tolerances)}, the page's "
                                                   f"are {','.join(tolerances)}"))
        elif item.operator in first:
            records.append(_record(item, "duplicate", f"a second certificate of {item.operator!r} (the first: "
                                                      f"{first[item.operator]}): not counted"))
        else:
            first[item.operator] = item.planned.name
            records.append(_record(item, "verified"))
    return sorted(records, key=lambda r: (r["operator"] is None, natural_key(r["operator"] or ""),
                                          natural_key(r["file"])))


@dataclass(frozen=True)
class FolderReading:
    """What :func:`verify_files` gives the page: the ``records``, the verify ``summary``, the page's
    ``tolerances`` (with a ``note`` on how they were chosen) and the versions of the software that
    made the verified certificates (as they say: bookkeeping)."""

    records: list[dict[str, Any]]
    summary: dict[str, Any]
    tolerances: list[str]
    note: str
    generator_version: str | None


def verify_files(planned: list[Planned], *, trusted_keys: frozenset[str] | None = None,
                 require_signature: bool = False,
                 stage: Stage | None = None) -> FolderReading:
    """:func:`check_file` of every planned file, then the page's tolerances
    (:func:`page_tolerances`) and the records (:func:`assign`).  ``stage("verifying", done, total)``
    after each file."""
    from ...util.operator_files import natural_key

    started = time.perf_counter()
    checked = []
    for index, item in enumerate(planned):
        checked.append(check_file(item, trusted_keys=trusted_keys, require_signature=require_signature))
        if stage is not None:
            stage("verifying", index + 1, len(planned))
    tolerances, held = page_tolerances(checked)
    records = assign(checked, tolerances)
    accepted = [c for c in checked if c.operator is not None]
    summary = summarize(records, operators=len({c.operator for c in accepted}), files=len(records), signer=None,
                        started=started)
    if tolerances:
        note = (f"The page's tolerances {', '.join(tolerances)} are the list held by the most certificates whose every "
                f"claim verified ({held} of {len(accepted)}; a tie goes to the list of the first file in natural "
                "name order); a certificate with another list is listed as verified but not counted (among the "
                "failed).")
    else:
        note = "No certificate verified, so the page has no tolerances."
    versions = sorted({c.generator_version for c in accepted if c.generator_version}, key=natural_key)
    return FolderReading(records, summary, tolerances, note, ", ".join(versions) or None)
