"""The rows of an audit (UNTRUSTED): a published table's rows, their judging, the report's rows.

A published table is JSON Lines, one row per (operator, eps) (see :mod:`softrank_cert.studies.audit`
for the statuses).  :func:`parse_row` / :func:`read_table` check every field (exact decimal eps
strings, integer ends, no floats, no duplicate keys); :func:`judge` gives a row its status from
VERIFIED kernel verdicts only; :func:`end_evidence` is such a verdict as report JSON.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path, PurePosixPath
from typing import Any, TypeGuard

from ...errors import InvalidInputError, SoftrankError
from ...kernel import Status, Verdict, parse_tolerance
from ...plumbing.json_contract import verdict_fields

STATUSES = ("confirmed", "tightened", "reproduced", "refuted", "invalid-certificate", "unresolved", "error")
#: Refuse bracket tables larger than this (bytes) before reading them.
MAX_TABLE_BYTES = 64 << 20
#: Version of the per-operator results a resumable audit records (rows and evidence JSON): a

@dataclass(frozen=True)
class PublishedRow:
    """One well-formed row of a published table (``line`` is 1-based)."""

    line: int
    operator: str
    eps: str
    lower: int
    upper: int
    certificate: str | None = None

    @functools.cached_property
    def eps_value(self) -> Fraction:
        """The exact rational of ``eps`` (parsed on first use, then kept)."""
        return parse_tolerance(self.eps)


@dataclass(frozen=True)
class RowError:
    """A row that could not be parsed (reported with status ``error``)."""

    line: int
    message: str
    operator: str | None = None
    eps: str | None = None
    syntax: bool = False  # the line is not a JSON object at all


@dataclass
class RowResult:
    """The audit of one row; ``lower``/``upper`` are the best VERIFIED ends (None: none)."""

    line: int
    operator: str | None
    eps: str | None
    status: str
    published_lower: int | None
    published_upper: int | None
    lower: int | None = None
    upper: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {"line": self.line, "operator": self.operator, "eps": self.eps, "status": self.status,
               "lower": self.lower, "upper": self.upper, "published_lower": self.published_lower,
               "published_upper": self.published_upper, "evidence": self.evidence}
        if self.error is not None:
            doc["error"] = self.error
        return doc


@dataclass
class AuditResult:
    """Row results in table order plus the evidence certificates to write (path -> document)."""

    rows: list[RowResult]
    evidence_files: dict[Path, dict[str, Any]]
    seconds: float
    operators: int
    failed: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------- reading the table

def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class _Inexact(str):
    """A JSON number with a fraction or exponent (kept as text, never a float)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate JSON key")
    return dict(pairs)


def _refuse(text: str) -> Any:
    raise ValueError(f"JSON constant {text} is not allowed")


def parse_row(line: int, text: str) -> PublishedRow | RowError:
    """One JSON Lines row, checked field by field (never raises)."""
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_Inexact, parse_constant=_refuse)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return RowError(line, f"line {line}: not a JSON object ({reason})", syntax=True)
    if not isinstance(doc, dict):
        return RowError(line, f"line {line}: a row must be a JSON object", syntax=True)
    name, eps = doc.get("operator"), doc.get("eps")
    exact_str = lambda v: isinstance(v, str) and not isinstance(v, _Inexact)  # noqa: E731
    shown = (name if exact_str(name) else None, eps if exact_str(eps) else None)
    if not exact_str(name) or not name:
        return RowError(line, f"line {line}: 'operator' must be a non-empty string", *shown)
    if isinstance(eps, (_Inexact, int)) and not isinstance(eps, bool):
        return RowError(line, f"line {line}: eps must be an exact decimal string: write \"{eps}\", not {eps}", *shown)
    if not isinstance(eps, str):
        return RowError(line, f"line {line}: 'eps' must be an exact decimal string such as \"0.25\"", *shown)
    try:
        parse_tolerance(eps)
    except SoftrankError as exc:
        return RowError(line, f"line {line}: eps: {exc}", *shown)
    lower, upper = doc.get("lower"), doc.get("upper")
    if not (_is_int(lower) and _is_int(upper)) or lower < 0 or upper < 0:
        return RowError(line, f"line {line}: 'lower' and 'upper' must be non-negative integers", *shown)
    if lower > upper:
        return RowError(line, f"line {line}: lower {lower} exceeds upper {upper}: not a bracket", *shown)
    certificate = doc.get("certificate")
    if certificate is not None and (not exact_str(certificate) or not certificate):
        return RowError(line, f"line {line}: 'certificate' must be a path string", *shown)
    if certificate is not None and not _inside_folder(certificate):
        return RowError(line, f"line {line}: 'certificate' {certificate[:200]!r} must be a relative path inside the "
                              "table's folder (no absolute path, no '..')", *shown)
    return PublishedRow(line, name, eps, lower, upper, certificate)


def _inside_folder(name: str) -> bool:
    """Whether a row's certificate path names a place inside the table's folder (lexically:
    relative, no ``..`` component, no NUL; :func:`row_certificate_bytes` checks symlinks)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return bool(parts) and "\0" not in name and not PurePosixPath(name).is_absolute() and \
        not Path(name).is_absolute() and ".." not in parts


def row_certificate_bytes(folder: str | Path, name: str) -> bytes | str:
    """The bytes of the certificate that a row of the table in ``folder`` names, or the one-line
    reason why not: it must be a regular file that lies inside ``folder`` once every symlink is
    resolved (the table is untrusted: it may not make the audit read elsewhere, nor block on a
    FIFO), of at most the certificate size limit."""
    from ...plumbing.campaign_inputs import read_kept_bytes

    if not _inside_folder(name):
        return f"certificate {name[:200]!r} is not a relative path inside the table's folder"
    base = Path(folder).resolve()
    target = (base / name).resolve()
    if target != base and base not in target.parents:
        return f"certificate {name[:200]!r} leads outside the table's folder (to {target})"
    return read_kept_bytes(target)


def read_table(path: str | Path) -> list[PublishedRow | RowError]:
    """All rows of a JSON Lines table (blank lines skipped); InvalidInputError if unusable (not
    a regular file, more than :data:`MAX_TABLE_BYTES`: refused before reading)."""
    from ...util.files import read_regular_file

    path = Path(path)
    try:
        text = read_regular_file(path, MAX_TABLE_BYTES, "table").decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"{path}: not UTF-8 text") from None
    rows = [parse_row(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not rows:
        raise InvalidInputError(f"{path}: holds no rows (expected JSON Lines)")
    if all(isinstance(r, RowError) and r.syntax for r in rows):
        raise InvalidInputError(f"{path}: no line is a JSON object: not a JSON Lines bracket table")
    return rows


# --------------------------------------------------------------------------- verdicts as evidence

def end_evidence(verdict: Verdict, *, certificate: str | None = None) -> dict[str, Any]:
    """A VERIFIED end as report JSON (:func:`~softrank_cert.plumbing.json_contract.verdict_fields`: enclosures rounded
    outward to 17 significant digits)."""
    kind = ("trivial" if verdict.method in ("trivial", "identity", "zero")
            else "lower-certificate" if verdict.side == "lower" else "upper-witness")
    doc: dict[str, Any] = {"side": verdict.side, "kind": kind, "rank": verdict.rank, "method": verdict.method,
                           "claim": verdict.claim, **verdict_fields(verdict)}
    if certificate is not None:
        doc["certificate"] = certificate
    return doc


def judge(row: PublishedRow, lower: Verdict | None, upper: Verdict | None) -> tuple[str, list[dict[str, Any]]]:
    """Status of a row from its VERIFIED ends (None: not verified) and the refutations found."""
    for v in (lower, upper):
        if v is not None and v.status is not Status.VERIFIED:
            raise ValueError("judge() takes VERIFIED verdicts only")
    k = None if lower is None else lower.rank
    r = None if upper is None else upper.rank
    refutes = []
    if r is not None and r < row.lower:
        refutes.append({"end": "lower", "published": row.lower, "by": upper})
    if k is not None and k > row.upper:
        refutes.append({"end": "upper", "published": row.upper, "by": lower})
    if refutes:
        return "refuted", refutes
    lower_holds, upper_holds = k is not None and k >= row.lower, r is not None and r <= row.upper
    if lower_holds and upper_holds:
        return ("confirmed" if (k, r) == (row.lower, row.upper) else "tightened"), []
    return ("reproduced" if lower_holds or upper_holds else "unresolved"), []


def result_of(row: PublishedRow, lower: Verdict | None, upper: Verdict | None, evidence: dict[str, Any],
              evidence_file: str | None) -> RowResult:
    """The row's result from its VERIFIED ends (None: not verified), the refutations as evidence."""
    status, refutes = judge(row, lower, upper)
    evidence["lower"] = None if lower is None else end_evidence(lower)
    evidence["upper"] = None if upper is None else end_evidence(upper)
    evidence["refutes"] = [{"end": item["end"], "published": item["published"],
                            **end_evidence(item["by"], certificate=evidence_file)} for item in refutes]
    return RowResult(row.line, row.operator, row.eps, status, row.lower, row.upper,
                     None if lower is None else lower.rank, None if upper is None else upper.rank, evidence)



def summary(result: AuditResult) -> dict[str, Any]:
    """Counts per status and the audit's size and time."""
    counts = {status: 0 for status in STATUSES}
    for row in result.rows:
        counts[row.status] += 1
    return {"rows": len(result.rows), "operators": result.operators, "statuses": counts,
            "evidence_certificates": len(result.evidence_files), "seconds": round(result.seconds, 3)}
