"""A campaign folder read for the report (UNTRUSTED orchestration; every verdict is the kernel's).

* :func:`folder_kind`: ``"campaign"`` for a folder holding ``softrank-campaign.json``, else
  ``"certificates"`` (a plain folder of certificate files: :mod:`.certificates`);
* :func:`read_manifest`: ``DIR/softrank-campaign.json`` of a ``softrank bracket`` campaign, read
  within a size bound; anything else (no folder, no manifest, unreadable JSON, a manifest of
  another command, an operator name with a lone surrogate, a number that is not finite or
  beyond 2**53) is one
  :class:`~softrank_cert.errors.InvalidInputError` (exit 2);
* :func:`plan`: each operator's certificate file and its size, from ``stat`` alone, refused as a
  whole (exit 2) when the count (of operators, a certificate file or not) or the total exceeds
  the limits (:func:`check_limits`), before a byte is read;
* :func:`unlisted_files`: a note on JSON files below the folder that belong to no operator;
* :func:`verify_operators`: each certificate re-checked by
  :func:`softrank_cert.verification.verify_certificate_bytes` (what ``softrank-verify`` runs);
  only a certificate whose every claim is VERIFIED, about the manifest's operator of that name
  with exactly the campaign's tolerances, gives brackets (:func:`claims_not_verified`,
  :func:`verified_brackets` and :func:`summarize` serve both kinds of folder).

The manifest supplies the operator names, the tolerances and bookkeeping (status, reason,
seconds); no bracket is ever read from it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import FloatingPointEnvironmentError, InternalInvariantError, InvalidInputError, SoftrankError
from ...plumbing.campaign import FORMAT as CAMPAIGN_FORMAT, MANIFEST_NAME, check_manifest_numbers, operator_sha256
from ...plumbing.certificate_files import certificate_path, json_files_below
from ...util.files import loads_unique, read_regular_file
from ...util.progress import Stage

#: The most certificates one report reads (``--max-certificates``).
DEFAULT_MAX_CERTIFICATES = 10_000
#: The most bytes of certificates one report reads, all together (``--max-bytes``): 4 GiB.
DEFAULT_MAX_BYTES = 4 << 30
#: A manifest larger than this is refused (one of 10,000 operators is about 5 MB).
MAX_MANIFEST_BYTES = 256 << 20
#: The one campaign command whose folder holds one certificate per operator of a panel.
COMMAND = "bracket"
#: A record's status: brackets shown; a certificate there but not verified or not belonging; no
#: certificate file (campaign); a second certificate of an operator, not counted (plain folder).
STATUSES = ("verified", "failed", "missing", "duplicate")
#: What to give, in the one line that refuses a folder.
WHAT_TO_GIVE = "give the --out folder of 'softrank bracket PANEL --all', or a folder holding certificate files"


def folder_kind(folder: Path) -> str:
    """``"campaign"`` when ``folder`` holds a campaign manifest (``softrank-campaign.json``, read
    by :func:`read_manifest`), else ``"certificates"``; no folder is one line, exit 2."""
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise InvalidInputError(f"{folder}: {what} ({WHAT_TO_GIVE})")
    return "campaign" if (folder / MANIFEST_NAME).exists() else "certificates"


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the ``bracket`` campaign in ``folder``, checked for the fields the report
    uses (``tolerances``: decimal strings; ``operators``: an object of objects)."""
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise InvalidInputError(f"{folder}: {what} (give the --out folder of 'softrank bracket PANEL --all')")
    path = folder / MANIFEST_NAME
    if not path.exists():
        raise InvalidInputError(f"{folder}: no {MANIFEST_NAME} (not a campaign folder: give the --out folder of "
                                "'softrank bracket PANEL --all')")
    try:
        document = loads_unique(read_regular_file(path, MAX_MANIFEST_BYTES, "manifest"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInputError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != CAMPAIGN_FORMAT:
        raise InvalidInputError(f"{path}: not a campaign manifest (its format is not {CAMPAIGN_FORMAT!r})")
    if document.get("command") != COMMAND:
        raise InvalidInputError(f"{path}: the manifest of a 'softrank {document.get('command')}' campaign; the report "
                                f"reads 'softrank {COMMAND}' campaigns")
    tolerances, operators = document.get("tolerances"), document.get("operators")
    if not (isinstance(tolerances, list) and tolerances and all(isinstance(t, str) for t in tolerances)):
        raise InvalidInputError(f"{path}: 'tolerances' is not a list of decimal strings")
    if not (isinstance(operators, dict) and all(isinstance(e, dict) for e in operators.values())):
        raise InvalidInputError(f"{path}: 'operators' is not an object of operator entries")
    check_manifest_numbers(document, str(path))
    for name in operators:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # JSON's "\ud800": no file, no page can carry it
            shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "..."
            raise InvalidInputError(f"{path}: the operator name {shown} is not Unicode text (it holds a lone "
                                    "surrogate escape, \\ud800-\\udfff)") from None
    return document


@dataclass(frozen=True)
class Planned:
    """One operator of the manifest: its certificate file (None when its name cannot be a file
    name) and that file's size (None when there is no regular file)."""

    name: str
    path: Path | None
    size: int | None
    why_missing: str = ""


def plan(folder: Path, manifest: dict[str, Any], *, max_certificates: int = DEFAULT_MAX_CERTIFICATES,
         max_bytes: int = DEFAULT_MAX_BYTES) -> list[Planned]:
    """Every operator of ``manifest``, in natural name order (``L0H2`` before ``L0H10``), with its
    certificate ``folder/NAME.json`` sized by ``stat`` (no file is opened).  More than
    ``max_certificates`` operators (each counts, with a certificate file or not), or more than
    ``max_bytes`` bytes of certificates together, is refused with one line naming the option that
    raises the limit."""
    from ...util.operator_files import natural_key

    check_count(folder, len(manifest["operators"]), max_certificates, "operators in its manifest")
    planned = []
    for name in sorted(manifest["operators"], key=natural_key):
        try:
            path = certificate_path(folder, name)
        except InvalidInputError as exc:
            planned.append(Planned(name, None, None, f"no certificate file: {exc}"))
            continue
        try:
            info = os.stat(path)
        except OSError:
            planned.append(Planned(name, path, None, "no certificate file"))
            continue
        if not os.path.isfile(path):
            planned.append(Planned(name, path, None, "not a regular file"))
            continue
        planned.append(Planned(name, path, info.st_size))
    check_limits(folder, planned, max_certificates, max_bytes)
    return planned


def check_count(folder: Path, count: int, max_certificates: int, what: str = "certificates") -> None:
    """Refuse more than ``max_certificates`` entries (one line naming the option that raises it),
    before any is sized."""
    if count > max_certificates:
        raise InvalidInputError(f"{folder}: {count} {what}, more than the limit of {max_certificates} certificates "
                                "(raise it with --max-certificates N)")


def check_limits(folder: Path, planned: list[Planned], max_certificates: int, max_bytes: int) -> None:
    """Refuse (one line naming the option that raises the limit) more than ``max_certificates``
    entries in ``planned`` -- every one counts, a regular file or not (a missing certificate, a
    FIFO, a dangling link, a folder named ``*.json``) -- or more than ``max_bytes`` bytes of its
    regular files together."""
    check_count(folder, len(planned), max_certificates)
    total = sum(p.size or 0 for p in planned)
    if total > max_bytes:
        from ...util.memory import format_bytes

        raise InvalidInputError(f"{folder}: {format_bytes(total)} of certificates, more than the limit of "
                                f"{format_bytes(max_bytes)} (raise it with --max-bytes SIZE)")


#: What ``softrank kv-budgets`` adds to a bracket folder (``studies/kv_budgets/study.py``: ``REPORT_NAME``,
#: ``OUTPUT_FOLDER``): its report and its policy certificates, not certificates of the manifest's operators.
KV_BUDGETS_REPORT, KV_BUDGETS_FOLDER = "kv_budgets.json", "kv-budgets"


def unlisted_files(folder: Path, planned: list[Planned], shown: int = 3) -> str | None:
    """A note on the ``*.json`` files below ``folder`` that are neither the manifest nor the
    certificate of one of its operators (they are not read; those below a ``.softrank-removed-*``
    folder, being deleted, are not counted), or None when there are none."""
    expected = {p.path.resolve() for p in planned if p.path is not None} | {(folder / MANIFEST_NAME).resolve()}
    expected |= {(folder / KV_BUDGETS_REPORT).resolve()}
    kv_folder = (folder / KV_BUDGETS_FOLDER).resolve()
    extra = sorted(str(p.relative_to(folder)) for p in json_files_below(folder)
                   if p.resolve() not in expected and not p.resolve().is_relative_to(kv_folder))
    if not extra:
        return None
    return (f"{len(extra)} JSON file(s) in the folder are not certificates of the manifest's operators and were "
            f"not read: {', '.join(extra[:shown])}" + (", ..." if len(extra) > shown else ""))


def claims_not_verified(verification: Any) -> str:
    """``r_eps >= 5 at eps 0.1: REJECTED (reason); ...`` for the claims that are not VERIFIED."""
    bad = [v for v in verification.verdicts if v.status.value != "VERIFIED"]
    shown = "; ".join(f"r_eps {'>=' if v.side == 'lower' else '<='} {v.rank} at eps {v.eps}: {v.status.value}"
                      + (f" ({v.reason})" if v.reason else "") for v in bad[:3])
    return f"{len(bad)} claim(s) not verified: {shown}" + ("; ..." if len(bad) > 3 else "")


def verified_brackets(verification: Any) -> list[dict[str, Any]]:
    """The verified ends, per tolerance in file order (from the kernel's verdicts)."""
    return [{"eps": lo.eps, "lower": lo.rank, "upper": up.rank, "lower_method": lo.method,
             "upper_construction": up.method, "checked_by": [lo.engine, up.engine]} for lo, up in verification.pairs]


def check_one(planned: Planned, entry: dict[str, Any], tolerances: list[str],
              signer: str | None) -> dict[str, Any]:
    """The report's record of one operator: ``status`` "verified" (with its ``brackets``),
    "failed" (a certificate that is there but does not verify or does not belong, with the
    ``reason``) or "missing" (no certificate file; the manifest's status and reason shown)."""
    from ...certio.certificate import read_certificate_bytes
    from ...verification import verify_certificate_bytes

    record: dict[str, Any] = {"operator": planned.name, "file": f"{planned.name}.json" if planned.path else None,
                              "manifest_status": entry.get("status"),
                              "seconds": entry.get("seconds") if isinstance(entry.get("seconds"), (int, float)) else None,
                              "certificate": None, "brackets": [], "reason": None}
    if planned.size is None or planned.path is None:
        note = entry.get("reason") if isinstance(entry.get("reason"), str) else None
        record.update(status="missing", reason=planned.why_missing + (f" (manifest: {note})" if note else ""))
        return record
    record["certificate"] = str(planned.path)
    trusted = frozenset({signer.split("#", 1)[0]}) if signer else None
    try:
        raw = read_certificate_bytes(planned.path)
        verification = verify_certificate_bytes(raw, source=str(planned.path), trusted_keys=trusted,
                                                require_signature=bool(signer))
    except (FloatingPointEnvironmentError, InternalInvariantError):
        raise  # the process or the checker, not the file: exit 4, no page
    except SoftrankError as exc:
        record.update(status="failed", reason=f"does not verify: {exc}")
        return record
    certificate = verification.certificate
    assert certificate is not None  # verify_certificate_bytes always decodes it
    recorded = entry.get("operator_sha256")
    if not verification.ok:
        reason = claims_not_verified(verification)
    elif certificate.operator_id != planned.name:
        reason = f"the certificate is about {certificate.operator_id!r}, not this operator"
    elif [b.eps for b in certificate.brackets] != tolerances:
        reason = (f"holds the tolerances {','.join(b.eps for b in certificate.brackets)}, the campaign's are "
                  f"{','.join(tolerances)}")
    elif isinstance(recorded, str) and recorded != operator_sha256(certificate.operator):
        reason = "its operator is not the one the campaign recorded (operator_sha256 differs)"
    else:
        record.update(status="verified", brackets=verified_brackets(verification))
        return record
    record.update(status="failed", reason=reason)
    return record


def verify_operators(planned: list[Planned], manifest: dict[str, Any],
                     stage: Stage | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`check_one` of every planned operator, in the manifest's order, and the verify
    summary (:func:`summarize`).  ``stage("verifying", done, total)`` after each certificate read."""
    signer = manifest.get("signer") if isinstance(manifest.get("signer"), str) else None
    started = time.perf_counter()
    records = []
    for index, item in enumerate(planned):
        entry = manifest["operators"][item.name]
        records.append(check_one(item, entry, list(manifest["tolerances"]), signer))
        if stage is not None:
            stage("verifying", index + 1, len(planned))
    files = sum(1 for item in planned if item.size is not None)
    return records, summarize(records, operators=len(records), files=files, signer=signer, started=started)


def summarize(records: list[dict[str, Any]], *, operators: int, files: int, signer: str | None,
              started: float) -> dict[str, Any]:
    """The verify summary: ``operators`` and certificate ``files`` as the caller counts them, the
    records per status (verified / failed / missing / duplicate), the claims verified and what
    checked them, the signer a campaign requires, and the seconds since ``started``
    (``time.perf_counter``)."""
    counts = {status: sum(1 for r in records if r["status"] == status) for status in STATUSES}
    engines: dict[str, int] = {}
    for record in records:
        for bracket in record["brackets"]:
            for engine in bracket["checked_by"]:
                engines[engine] = engines.get(engine, 0) + 1
    return {"operators": operators, "files": files, "verified": counts["verified"], "failed": counts["failed"],
            "missing": counts["missing"], "duplicates": counts["duplicate"], "claims_verified": sum(engines.values()),
            "checked_by": dict(sorted(engines.items())), "signer": signer,
            "seconds": round(time.perf_counter() - started, 3)}
