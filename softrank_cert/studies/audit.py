"""Audit of published bracket tables (DESIGN.md section 5) -- an untrusted front end.

A published table is JSON Lines, one row per (operator, eps)::

    {"operator": "minilm/apache2/w32/L0H3", "eps": "0.25", "lower": 5, "upper": 26,
     "certificate": "certs/L0H3.json"}          # certificate optional, relative to the table

Each row ends with one status:

* ``confirmed``  -- both published ends verified exactly as published;
* ``tightened``  -- both published ends hold and a verified end is strictly better;
* ``reproduced`` -- one published end verified, nothing contradicts the other;
* ``refuted``    -- a published end is proved false: a verified witness of rank < lower, or a
  verified lower certificate above upper (``r_eps`` is one number, so both cannot hold);
* ``invalid-certificate`` -- the supplied certificate does not check (unreadable, schema, hash,
  signature, a REJECTED claim), is about another operator, or lacks the row's eps;
* ``unresolved`` -- neither end could be verified (nor refuted);
* ``error``      -- the row is malformed or names no operator of the panel.

Soundness: every end this module reports is the ``rank`` of a kernel :class:`Verdict` with
status VERIFIED -- from the supplied certificate (re-checked by
:func:`~softrank_cert.verification.verify_certificate_bytes`) or from
:func:`~softrank_cert.solvers.bracket.bracket_operator`.  A REJECTED lower certificate never
refutes a published lower end (proofs/lower-certificate.md): only a verified witness does.
Rows with a certificate are judged by that certificate alone (never replaced by a
reproduction); the others are reproduced, one solver run per operator for all its tolerances.
"""

from __future__ import annotations

import functools
import json
import time
from contextlib import closing
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from ..certio.certificate import MAX_CERTIFICATE_BYTES, Certificate
from ..certio.issuing import certificate_for
from ..errors import InvalidInputError, SoftrankError
from ..kernel import Operator, Status, Verdict, parse_tolerance
from ..plumbing.files import canonical_dump, write_text_atomic
from ..plumbing.reports import verdict_fields
from ..plumbing.operators_npz import load_operators, operator_names
from ..plumbing.parallel import pack_operator, run_tasks, unpack_operator
from ..verification import Pairs, verify_certificate_bytes

STATUSES = ("confirmed", "tightened", "reproduced", "refuted", "invalid-certificate", "unresolved", "error")
#: Refuse bracket tables larger than this (bytes) before reading them.
MAX_TABLE_BYTES = 64 << 20
#: Version of the per-operator results a resumable audit records (rows and evidence JSON): a
#: resume reuses only results of this version, so a manifest from before a change of their shape
#: is recomputed rather than mixed into a report in the new shape.  2: the one JSON contract.
RESULT_VERSION = 2


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

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "RowResult":
        """The inverse of :meth:`to_json` (a resumed audit keeps finished operators this way)."""
        return cls(int(doc["line"]), doc["operator"], doc["eps"], doc["status"], doc["published_lower"],
                   doc["published_upper"], doc["lower"], doc["upper"], dict(doc["evidence"]), doc.get("error"))

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

def _is_int(value: Any) -> bool:
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
    return PublishedRow(line, name, eps, lower, upper, certificate)


def read_table(path: str | Path) -> list[PublishedRow | RowError]:
    """All rows of a JSON Lines table (blank lines skipped); InvalidInputError if unusable."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TABLE_BYTES:
            raise InvalidInputError(f"{path}: larger than {MAX_TABLE_BYTES} bytes")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None
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
    """A VERIFIED end as report JSON (:func:`~softrank_cert.plumbing.reports.verdict_fields`: enclosures rounded
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


def _result(row: PublishedRow, lower: Verdict | None, upper: Verdict | None, evidence: dict[str, Any],
            evidence_file: str | None) -> RowResult:
    status, refutes = judge(row, lower, upper)
    evidence["lower"] = None if lower is None else end_evidence(lower)
    evidence["upper"] = None if upper is None else end_evidence(upper)
    evidence["refutes"] = [{"end": item["end"], "published": item["published"],
                            **end_evidence(item["by"], certificate=evidence_file)} for item in refutes]
    return RowResult(row.line, row.operator, row.eps, status, row.lower, row.upper,
                     None if lower is None else lower.rank, None if upper is None else upper.rank, evidence)


# --------------------------------------------------------------------------- supplied certificates

def operator_mismatch(published: Operator, certified: Operator) -> str | None:
    """Why two operators differ (None when kind, mask, beta and every array are bit-identical)."""
    for attr in ("kind", "mask"):
        if getattr(published, attr) != getattr(certified, attr):
            return f"{attr} {getattr(certified, attr)!r} differs from the panel's {getattr(published, attr)!r}"
    if published.kind == "qk" and published.beta_exact != certified.beta_exact:
        return f"beta {certified.beta!r} differs from the panel's {published.beta!r}"
    if set(published.arrays) != set(certified.arrays):
        return f"arrays {sorted(certified.arrays)} differ from the panel's {sorted(published.arrays)}"
    for name, array in published.arrays.items():
        other = certified.arrays[name]
        if array.shape != other.shape or array.astype("<f8").tobytes() != other.astype("<f8").tobytes():
            return f"array {name} differs from the panel's (not bit-identical)"
    return None


@dataclass
class CheckedCertificate:
    """A supplied certificate after re-checking: ``error`` set when it is invalid; ``pairs`` one
    ``(lower, upper)`` kernel verdict pair per bracket of ``certificate``."""

    certificate: Certificate | None
    pairs: Pairs = ()
    signer: str | None = None
    error: str | None = None

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(v for pair in self.pairs for v in pair)


def check_certificate(path: Path, *, trusted_keys: frozenset[str] | None = None) -> CheckedCertificate:
    """Read the file once and re-check those bytes (decoded once, in memory)."""
    raw = read_certificate_bytes(path)
    if isinstance(raw, str):
        return CheckedCertificate(None, error=raw)
    return check_certificate_bytes(raw, str(path), trusted_keys=trusted_keys)


def read_certificate_bytes(path: Path) -> bytes | str:
    """The file's bytes, or a one-line reason why they cannot be read (too large, unreadable)."""
    try:
        if path.stat().st_size > MAX_CERTIFICATE_BYTES:
            return f"{path}: larger than {MAX_CERTIFICATE_BYTES} bytes"
        return path.read_bytes()
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"


def check_certificate_bytes(raw: bytes, shown_path: str, *,
                            trusted_keys: frozenset[str] | None = None) -> CheckedCertificate:
    """Re-check a certificate given as bytes (in memory: no temporary file), decoding them once."""
    try:
        report = verify_certificate_bytes(raw, source=shown_path, trusted_keys=trusted_keys)
    except InvalidInputError as exc:
        return CheckedCertificate(None, error=str(exc))
    certificate = report.certificate
    bad = [v for v in report.verdicts if v.status is Status.REJECTED]
    if bad:
        return CheckedCertificate(certificate, report.pairs, report.signer,
                                  f"claim {bad[0].claim} at eps {bad[0].eps} is REJECTED by the kernel")
    return CheckedCertificate(certificate, report.pairs, report.signer)


def audit_with_certificate(row: PublishedRow, op: Operator, checked: CheckedCertificate, shown_path: str) -> RowResult:
    """Judge a row by its supplied certificate only."""
    evidence: dict[str, Any] = {"source": "certificate", "certificate": shown_path, "signer": checked.signer}
    reason = checked.error
    if reason is None:
        reason = operator_mismatch(op, checked.certificate.operator)
        if reason is not None:
            reason = f"certificate is about another operator ({checked.certificate.operator_id}): {reason}"
    pair = None
    if reason is None:
        pair = next((ends for b, ends in zip(checked.certificate.brackets, checked.pairs) if b.eps_value == row.eps_value),
                    None)
        if pair is None:
            reason = f"certificate has no bracket at eps {row.eps}"
    if reason is not None:
        evidence["reason"] = reason
        return RowResult(row.line, row.operator, row.eps, "invalid-certificate", row.lower, row.upper, evidence=evidence,
                         error=reason)
    evidence["operator_id"] = checked.certificate.operator_id
    lower, upper = pair
    ok = lambda v: v if v.status is Status.VERIFIED else None  # noqa: E731  (INCONCLUSIVE: not verified)
    return _result(row, ok(lower), ok(upper), evidence, shown_path)


# --------------------------------------------------------------------------- reproduction

def audit_by_reproduction(op_name: str, op: Operator, rows: list[PublishedRow], *, budget_seconds: float | None,
                          evidence_path: Path, provenance: dict[str, Any]) -> tuple[list[RowResult], dict[str, Any] | None]:
    """One solver run for all tolerances of ``rows``; the evidence certificate (or None)."""
    from ..solvers.bracket import bracket_operator

    eps_by_value: dict[Fraction, str] = {}  # the first spelling of each tolerance, in row order
    for row in rows:
        eps_by_value.setdefault(row.eps_value, row.eps)
    start = time.perf_counter()
    brackets = bracket_operator(op, list(eps_by_value.values()), budget_seconds=budget_seconds)
    seconds = round(time.perf_counter() - start, 3)
    by_eps = dict(zip(eps_by_value, brackets))  # one bracket per tolerance, in the order asked
    results, kept = [], {}
    for row in rows:
        b = by_eps[row.eps_value]
        ok = lambda v: v if v.status is Status.VERIFIED else None  # noqa: E731
        evidence = {"source": "reproduction", "solver_seconds": seconds}
        result = _result(row, ok(b.lower.verdict), ok(b.upper.verdict), evidence, evidence_path.as_posix())
        if result.status in ("refuted", "tightened"):
            kept[b.eps] = b
            result.evidence["file"] = evidence_path.as_posix()
        results.append(result)
    if not kept:
        return results, None
    return results, certificate_for(op_name, op, kept.values(), provenance)


def evidence_name(evidence_dir: Path, operator: str) -> Path:
    """``evidence_dir/NAME.json`` with '/' in the panel name as sub-folders (unsafe parts replaced)."""
    parts = [part if part not in ("", ".", "..") else "_" for part in operator.split("/")]
    return evidence_dir.joinpath(*parts[:-1], parts[-1] + ".json")


# --------------------------------------------------------------------------- the audit

def audit_operator(name: str, spec: dict[str, Any], rows: list[PublishedRow], certificates: dict[str, bytes | str],
                   table_dir: str, evidence_path: Path, budget_seconds: float | None,
                   trusted_keys: frozenset[str] | None, provenance: dict[str, Any]
                   ) -> tuple[list[RowResult], tuple[Path, dict[str, Any]] | None]:
    """Audit the rows of one operator (a task for :func:`~softrank_cert.plumbing.parallel.run_ordered`).

    ``spec`` is the packed operator, ``certificates`` the supplied certificates' bytes (or the
    reason they are unreadable) by the rows' relative paths: the task needs no file system.
    Returns the row results and the evidence certificate ``(path, document)`` or None.
    """
    op = unpack_operator(spec)
    checked: dict[str, CheckedCertificate] = {}
    results: list[RowResult] = []
    for row in rows:
        if row.certificate is not None:
            if row.certificate not in checked:
                raw = certificates[row.certificate]
                shown = str(Path(table_dir) / row.certificate)
                checked[row.certificate] = (CheckedCertificate(None, error=raw) if isinstance(raw, str) else
                                            check_certificate_bytes(raw, shown, trusted_keys=trusted_keys))
            results.append(audit_with_certificate(row, op, checked[row.certificate], row.certificate))
    plain = [row for row in rows if row.certificate is None]
    if not plain:
        return results, None
    rows_out, document = audit_by_reproduction(name, op, plain, budget_seconds=budget_seconds,
                                               evidence_path=evidence_path, provenance=provenance)
    return results + rows_out, None if document is None else (evidence_path, document)


def audit_table(table: str | Path, panel: str | Path, *, evidence_dir: Path, budget_seconds: float | None = None,
                trusted_keys: frozenset[str] | None = None,
                progress: Callable[[str, int, int], None] | None = None,
                jobs: int = 1, scheduler: str | None = None, max_memory: int | None = None,
                manifest: Path | None = None, resume: bool = False) -> AuditResult:
    """Audit every row of ``table`` against the operators of ``panel`` (see the module docstring).

    Raises InvalidInputError only when the table or the panel is unusable; row problems become
    ``error`` / ``invalid-certificate`` rows.  ``progress(what, done, total)`` after each operator.
    ``jobs`` worker processes or a Dask ``scheduler`` address audit several operators at a time
    (one task per operator, see :mod:`softrank_cert.plumbing.parallel`); the report does not depend on them.
    An operator whose task fails (after a retry when its worker died) or is refused for memory
    (``max_memory``) gets ``error`` rows with the reason and is listed in ``AuditResult.failed``.

    ``manifest``: a campaign manifest (:mod:`softrank_cert.plumbing.campaign`, e.g. ``REPORT-campaign.json``)
    rewritten after every operator with its row results; its evidence certificates are staged in
    the folder of the same name without ``.json``.  ``resume`` keeps a previous manifest's results
    for operators whose task is unchanged (same exact operator, rows, supplied certificates' bytes,
    budget and trusted keys) and whose staged evidence, if any, still verifies.
    """
    start = time.perf_counter()
    table = Path(table)
    parsed = read_table(table)
    known = set(operator_names(panel))
    results: dict[int, RowResult] = {}
    groups: dict[str, list[PublishedRow]] = {}
    for item in parsed:
        if isinstance(item, RowError):
            results[item.line] = RowResult(item.line, item.operator, item.eps, "error", None, None, error=item.message)
        elif item.operator not in known:
            message = f"line {item.line}: operator {item.operator!r} is not in the panel {Path(panel).name}"
            results[item.line] = RowResult(item.line, item.operator, item.eps, "error", item.lower, item.upper, error=message)
        else:
            groups.setdefault(item.operator, []).append(item)
    from ..plumbing.memory import operator_task_bytes

    names, tasks, memory = [], [], []
    for name, rows in sorted(groups.items()):
        try:
            named = load_operators(panel, [name])[0]
        except InvalidInputError as exc:
            for row in rows:
                results[row.line] = RowResult(row.line, name, row.eps, "error", row.lower, row.upper, error=f"operator: {exc}")
            continue
        raw = {row.certificate: read_certificate_bytes(table.parent / row.certificate)
               for row in rows if row.certificate is not None}
        names.append(name)
        memory.append(operator_task_bytes(named.operator))
        tasks.append((name, pack_operator(named.operator), rows, raw, str(table.parent), evidence_name(evidence_dir, name),
                      budget_seconds, trusted_keys, named.provenance))
    finished = [0]

    def done(i: int) -> None:
        finished[0] += 1
        if progress is not None:
            progress(names[i], finished[0], len(groups))

    evidence_files: dict[Path, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    campaign = None
    if manifest is not None:
        campaign = _AuditCampaign(Path(manifest), resume, table, panel, budget_seconds, trusted_keys, max_memory, jobs,
                                  scheduler, names, tasks, memory)
        for i, (rows_out, evidence) in campaign.kept.items():
            results.update((r.line, r) for r in rows_out)
            if evidence is not None:
                evidence_files[evidence[0]] = evidence[1]
            done(i)
    todo = [i for i in range(len(tasks)) if campaign is None or i not in campaign.kept]
    try:
        with closing(run_tasks(audit_operator, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                               done=lambda j: done(todo[j]), memory=[memory[i] for i in todo],
                               max_memory=max_memory)) as outcomes:
            for outcome in outcomes:
                i = todo[outcome.index]
                name, rows = names[i], tasks[i][2]
                if not outcome.ok:  # the operator's task failed (after a retry if its worker died): its rows are errors
                    status = "refused" if outcome.refused else "failed"
                    failed.append({"operator": name, "status": status, "reason": outcome.failure,
                                   "attempts": outcome.attempts})
                    for row in rows:
                        results[row.line] = RowResult(row.line, name, row.eps, "error", row.lower, row.upper,
                                                      error=f"operator task {status}: {outcome.failure}")
                    if campaign is not None:
                        campaign.failed(name, status, outcome)
                    continue
                rows_out, evidence = outcome.value
                results.update((r.line, r) for r in rows_out)
                if evidence is not None:
                    evidence_files[evidence[0]] = evidence[1]
                if campaign is not None:
                    campaign.record(name, rows_out, evidence, outcome)
    except KeyboardInterrupt:
        if campaign is not None:
            campaign.stop("interrupted")
        raise
    if campaign is not None:
        campaign.manifest.finish("incomplete" if failed else "complete")
        campaign.manifest.save()
    ordered = [results[line] for line in sorted(results)]
    return AuditResult(ordered, evidence_files, time.perf_counter() - start, len(groups), failed)


# --------------------------------------------------------------------------- resumable audits

def _task_sha256(task: tuple) -> str:
    """SHA-256 of everything an operator's audit depends on: the exact operator, its rows, the
    supplied certificates' bytes, the evidence path, the budget, the trusted keys, the provenance."""
    import hashlib

    from ..plumbing.campaign import budget_json, operator_sha256

    name, spec, rows, raw, _table_dir, evidence_path, budget_seconds, trusted_keys, provenance = task
    digest = hashlib.sha256(operator_sha256(unpack_operator(spec)).encode())
    digest.update(json.dumps([name, [[r.line, r.operator, r.eps, r.lower, r.upper, r.certificate] for r in rows],
                              Path(evidence_path).as_posix(), budget_json(budget_seconds), sorted(trusted_keys or []),
                              provenance], sort_keys=True, default=str).encode())
    for path in sorted(raw):
        item = raw[path]
        digest.update(b"\0" + path.encode() + b"\0" + (item if isinstance(item, bytes) else item.encode()))
    return digest.hexdigest()


class _AuditCampaign:
    """The manifest of a resumable audit and the evidence certificates staged beside it."""

    def __init__(self, path: Path, resume: bool, table: Path, panel: str | Path, budget_seconds: float | None,
                 trusted_keys: frozenset[str] | None, max_memory: int | None, jobs: int, scheduler: str | None,
                 names: list[str], tasks: list[tuple], memory: list[int]) -> None:
        from ..plumbing.campaign import Manifest, budget_json, file_sha256

        self.staging = path.with_name(path.name[: -len(".json")] if path.name.endswith(".json") else path.name + ".d")
        parameters = {"panel": {"path": str(panel), "sha256": file_sha256(panel), "operators": len(names)},
                      "brackets": {"path": str(table), "sha256": file_sha256(table)}, "tolerances": None,
                      "budget_seconds": budget_json(budget_seconds), "max_memory": max_memory, "jobs": jobs,
                      "scheduler": scheduler, "signer": None, "trusted_keys": sorted(trusted_keys or []) or None}
        previous = Manifest.read(path) if resume else None
        keys = [_task_sha256(task) for task in tasks]
        self.manifest = Manifest.start(path, "audit", parameters,
                                       [(name, {"task_sha256": key, "output": None, "estimated_bytes": need,
                                                 "result_version": RESULT_VERSION})
                                        for name, key, need in zip(names, keys, memory)], resume=resume)
        self.kept: dict[int, tuple[list[RowResult], tuple[Path, dict[str, Any]] | None]] = {}
        old = (previous or {}).get("operators", {}) if (previous or {}).get("command") == "audit" else {}
        for i, (name, key, task) in enumerate(zip(names, keys, tasks)):
            entry = old.get(name)
            if not isinstance(entry, dict) or entry.get("status") != "done" or entry.get("task_sha256") != key \
                    or entry.get("result_version") != RESULT_VERSION:
                continue
            kept = self._reuse(entry.get("result"), task)
            if kept is None:
                continue
            self.kept[i] = kept
            self.manifest.update(name, status="done", resumed=True, seconds=entry.get("seconds"),
                                 task_seconds=entry.get("task_seconds"),
                                 attempts=entry.get("attempts", 0), finished=entry.get("finished"),
                                 result=entry["result"])
            self.manifest.run["skipped"] += 1
        self.manifest.save()

    def _reuse(self, result: Any, task: tuple) -> tuple[list[RowResult], tuple[Path, dict[str, Any]] | None] | None:
        """The recorded rows (and staged evidence, re-verified by the kernel), or None to recompute."""
        try:
            rows = [RowResult.from_json(doc) for doc in result["rows"]]
            evidence_rel = result["evidence"]
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if evidence_rel is None:
            return rows, None
        staged = self.staging / evidence_rel
        raw = read_certificate_bytes(staged)
        if isinstance(raw, str):
            return None
        checked = check_certificate_bytes(raw, str(staged))
        if checked.error is not None or any(v.status is not Status.VERIFIED for v in checked.verdicts) or \
                operator_mismatch(unpack_operator(task[1]), checked.certificate.operator) is not None:
            return None
        return rows, (Path(evidence_rel), json.loads(raw))

    def record(self, name: str, rows: list[RowResult], evidence: tuple[Path, dict[str, Any]] | None, outcome: Any) -> None:
        rel = None
        if evidence is not None:
            rel = Path(evidence[0]).as_posix()
            write_text_atomic(self.staging / rel, canonical_dump(evidence[1]))
        self.manifest.update(name, status="done", seconds=round(outcome.seconds, 3),
                             task_seconds=round(outcome.seconds, 3), attempts=outcome.attempts,
                             reason=None, resumed=False, result={"rows": [r.to_json() for r in rows], "evidence": rel})
        self.manifest.run["computed"] += 1
        self.manifest.save()

    def failed(self, name: str, status: str, outcome: Any) -> None:
        self.manifest.update(name, status=status, reason=outcome.failure, attempts=outcome.attempts,
                             task_seconds=round(outcome.seconds, 3))
        self.manifest.run["failed"] += 1
        self.manifest.save()

    def stop(self, state: str) -> None:
        self.manifest.finish(state)
        try:
            self.manifest.save()
        except SoftrankError:
            pass


def summary(result: AuditResult) -> dict[str, Any]:
    """Counts per status and the audit's size and time."""
    counts = {status: 0 for status in STATUSES}
    for row in result.rows:
        counts[row.status] += 1
    return {"rows": len(result.rows), "operators": result.operators, "statuses": counts,
            "evidence_certificates": len(result.evidence_files), "seconds": round(result.seconds, 3)}


def ratio(lower: int | None, upper: int | None) -> float | None:
    """``upper / max(lower, 1)`` for the plot (None without both ends)."""
    if lower is None or upper is None:
        return None
    return float(upper) / float(max(lower, 1))


__all__ = ["AuditResult", "PublishedRow", "RowError", "RowResult", "STATUSES", "audit_table", "check_certificate",
           "audit_operator", "check_certificate_bytes", "judge", "operator_mismatch", "parse_row", "read_table", "summary"]
