"""Reproducing a published table's ends for one operator (the audit's task; untrusted front end).

:func:`audit_operator` runs one solver search per operator for all its tolerances
(:func:`~softrank_cert.solvers.bracket.bracket_operator`: every end VERIFIED by the kernel),
judges each row with :func:`judge_reproduction` and stages the evidence certificate of refuting or
tightening ends; rows with a supplied certificate are judged by that certificate alone
(:mod:`~softrank_cert.studies.audit.certificates`).  docs/design.md section 5.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from ...certio.issuing import certificate_for
from ...certio.verified import VerifiedBracket
from ...kernel import Operator, Verdict, parse_tolerance
from ...plumbing.parallel import unpack_operator
from .certificates import CheckedCertificate, audit_with_certificate, check_certificate_bytes
from .rows import (PublishedRow, RowResult, result_of)

#: Version of the per-operator results a resumable audit records: part of their inputs key, so
#: results recorded under another version are recomputed, never mixed in.  3: the results in the
#: one JSON contract, with the reproduction's certificate kept in the campaign's state folder.
RESULT_VERSION = 3


# --------------------------------------------------------------------------- reproduction

#: One reproduced tolerance: its sealed bracket and the kernel's (lower, upper) verdicts on it.
Ends = tuple[VerifiedBracket, Verdict, Verdict]


def reproduction_tolerances(rows: Sequence[PublishedRow]) -> list[str]:
    """The tolerances one reproduction brackets: the first spelling of each eps, in row order."""
    spelled: dict[Fraction, str] = {}
    for row in rows:
        spelled.setdefault(row.eps_value, row.eps)
    return list(spelled.values())


def judge_reproduction(op_name: str, op: Operator, rows: list[PublishedRow], ends: list[Ends], *,
                       solver_seconds: float | None, evidence_path: Path, provenance: dict[str, Any]
                       ) -> tuple[list[RowResult], dict[str, Any] | None]:
    """The rows judged by a reproduction: ``ends`` holds one ``(bracket, lower verdict, upper
    verdict)`` per tolerance of :func:`reproduction_tolerances` (in that order), every verdict
    VERIFIED (the ends are sealed).  Returns the row results and the evidence certificate of the refuting or
    tightening brackets (or None)."""
    by_eps = dict(zip((parse_tolerance(eps) for eps in reproduction_tolerances(rows)), ends))
    results, kept = [], {}
    for row in rows:
        bracket, lower, upper = by_eps[row.eps_value]
        evidence = {"source": "reproduction", "solver_seconds": solver_seconds}
        result = result_of(row, lower, upper, evidence, evidence_path.as_posix())
        if result.status in ("refuted", "tightened"):
            kept[bracket.eps] = bracket
            result.evidence["file"] = evidence_path.as_posix()
        results.append(result)
    return results, (certificate_for(op_name, op, kept.values(), provenance) if kept else None)


def evidence_name(evidence_dir: Path, operator: str) -> Path:
    """``evidence_dir/NAME.json`` with '/' in the panel name as sub-folders (unsafe parts replaced)."""
    parts = [part if part not in ("", ".", "..") else "_" for part in operator.split("/")]
    return evidence_dir.joinpath(*parts[:-1], parts[-1] + ".json")


# --------------------------------------------------------------------------- the audit

@dataclass
class OperatorAudit:
    """The audit of one operator's rows: results, the evidence certificate ``(path, document)``
    and, for a campaign, the certificate of the whole reproduction (its state) and its seconds."""

    rows: list[RowResult]
    evidence: tuple[Path, dict[str, Any]] | None = None
    reproduction: dict[str, Any] | None = None
    solver_seconds: float | None = None


def audit_rows(name: str, op: Operator, rows: list[PublishedRow], certificates: dict[str, bytes | str], table_dir: str,
               evidence_path: Path, trusted_keys: frozenset[str] | None,
               reproduce: Callable[[list[PublishedRow]], tuple[list[Ends], float | None, dict[str, Any] | None] | None],
               provenance: dict[str, Any]) -> OperatorAudit | None:
    """Audit one operator's rows: those with a certificate by that certificate (re-checked here
    within ``softrank-verify``'s memory limit, as the user would check it: a supplied certificate
    was not made within this task's check budget), the others by ``reproduce(rows)`` ->
    ``(ends, solver seconds, reproduction certificate)`` (None: not available, and so is this audit)."""
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
        return OperatorAudit(results)
    reproduced = reproduce(plain)
    if reproduced is None:
        return None
    ends, seconds, state = reproduced
    rows_out, document = judge_reproduction(name, op, plain, ends, solver_seconds=seconds, evidence_path=evidence_path,
                                            provenance=provenance)
    return OperatorAudit(results + rows_out, None if document is None else (evidence_path, document), state, seconds)


def audit_operator(name: str, spec: dict[str, Any], rows: list[PublishedRow], certificates: dict[str, bytes | str],
                   table_dir: str, evidence_path: Path, budget_seconds: float | None,
                   trusted_keys: frozenset[str] | None, provenance: dict[str, Any], keep_reproduction: bool = False
                   ) -> OperatorAudit:
    """Audit the rows of one operator (a task for :func:`~softrank_cert.plumbing.parallel.run_tasks`).

    ``spec`` is the packed operator, ``certificates`` the supplied certificates' bytes (or the
    reason they are unreadable) by the rows' relative paths: the task needs no file system.
    Rows without a certificate are reproduced by one solver run for all their tolerances; with
    ``keep_reproduction`` the result carries that run's certificate (a campaign's state).
    """
    from ...solvers import bracket_operator

    op = unpack_operator(spec)

    def reproduce(plain: list[PublishedRow]) -> tuple[list[Ends], float, dict[str, Any] | None]:
        start = time.perf_counter()
        brackets = bracket_operator(op, reproduction_tolerances(plain), budget_seconds=budget_seconds)
        seconds = round(time.perf_counter() - start, 3)
        ends = [(b, b.lower.verdict, b.upper.verdict) for b in brackets]
        state = certificate_for(name, op, [e[0] for e in ends], provenance) if keep_reproduction else None
        return ends, seconds, state

    audited = audit_rows(name, op, rows, certificates, table_dir, evidence_path, trusted_keys, reproduce, provenance)
    assert audited is not None  # a reproduction is always available
    return audited
