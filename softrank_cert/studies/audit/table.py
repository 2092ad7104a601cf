"""Audit of published bracket tables (docs/design.md section 5) -- an untrusted front end.

A published table is JSON Lines, one row per (operator, eps)::

    {"operator": "minilm/apache2/w32/L0H3", "eps": "0.25", "lower": 5, "upper": 26,
     "certificate": "certs/L0H3.json"}          # certificate optional, inside the table's folder

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

The modules: :mod:`~softrank_cert.studies.audit.rows` (the table's rows, judging),
:mod:`~softrank_cert.studies.audit.certificates` (supplied certificates, re-checked), this one
(the audit of a table), :mod:`~softrank_cert.studies.audit.reproduction`
(reproducing one operator's ends) and :mod:`~softrank_cert.studies.audit.campaign` (the
resumable audit: what it keeps is re-checked by the kernel and re-judged, never read back).
"""

from __future__ import annotations

import time
from contextlib import closing, nullcontext
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ...errors import InvalidInputError
from ...util.operator_files import load_operators, operator_names
from ...plumbing.parallel import in_process, pack_operator, run_tasks
from .certificates import check_certificate, check_certificate_bytes
from .reproduction import OperatorAudit, audit_operator, evidence_name
from .rows import (STATUSES, AuditResult, PublishedRow, RowError, RowResult, judge, parse_row, read_table,
                         row_certificate_bytes, summary)


def audit_table(table: str | Path, panel: str | Path, *, evidence_dir: Path, budget_seconds: float | None = None,
                trusted_keys: frozenset[str] | None = None,
                progress: Callable[[str, int, int], None] | None = None,
                jobs: int = 1, scheduler: str | None = None, max_memory: int | None = None,
                manifest: Path | None = None, resume: bool = False, resume_command: str | None = None) -> AuditResult:
    """Audit every row of ``table`` against the operators of ``panel`` (see the module docstring).

    Raises InvalidInputError only when the table or the panel is unusable; row problems become
    ``error`` / ``invalid-certificate`` rows.  ``progress(what, done, total)`` after each operator.
    ``jobs`` worker processes or a Dask ``scheduler`` address audit several operators at a time
    (one task per operator, see :mod:`softrank_cert.plumbing.parallel`); the report does not depend on them.
    An operator whose task fails (after a retry when its worker died) or is refused for memory
    (``max_memory``) gets ``error`` rows with the reason and is listed in ``AuditResult.failed``.

    ``manifest``: a campaign manifest (e.g. ``REPORT-campaign.json``; :mod:`~softrank_cert.studies.
    audit_campaign`) rewritten after every operator; each reproduction's certificate is kept in
    the folder of the same name without ``.json``.  ``resume`` keeps an operator whose inputs are
    unchanged (same exact operator, rows, supplied certificates' bytes, budget, trusted keys,
    provenance) when that certificate re-verifies; its rows are then judged again from the
    kernel's verdicts.  ``resume_command`` is named when the audit is interrupted.
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
    from ...util.memory import operator_task_bytes, recheck_reserve

    names, tasks, memory, named_ops = [], [], [], []
    for name, rows in sorted(groups.items()):
        try:
            named = load_operators(panel, [name])[0]
        except InvalidInputError as exc:
            for row in rows:
                results[row.line] = RowResult(row.line, name, row.eps, "error", row.lower, row.upper, error=f"operator: {exc}")
            continue
        raw = {row.certificate: row_certificate_bytes(table.parent, row.certificate)
               for row in rows if row.certificate is not None}
        names.append(name)
        named_ops.append(named)
        memory.append(operator_task_bytes(named.operator))
        tasks.append((name, pack_operator(named.operator), rows, raw, str(table.parent), evidence_name(evidence_dir, name),
                      budget_seconds, trusted_keys, named.provenance, manifest is not None))
    finished = [0]

    def done(i: int) -> None:
        finished[0] += 1
        if progress is not None:
            progress(names[i], finished[0], len(groups))

    evidence_files: dict[Path, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    campaign = None
    kept: dict[int, OperatorAudit] = {}
    if manifest is not None:
        from .campaign import AuditCampaign

        campaign = AuditCampaign(Path(manifest), resume, table, panel, budget_seconds, trusted_keys, max_memory, jobs,
                                 scheduler, named_ops, tasks, memory, resume_command)
        kept = campaign.kept
        for i, audited in kept.items():
            results.update((r.line, r) for r in audited.rows)
            if audited.evidence is not None:
                evidence_files[audited.evidence[0]] = audited.evidence[1]
            done(i)
    todo = [i for i in range(len(tasks)) if i not in kept]
    here = in_process(jobs, scheduler, len(todo))
    with campaign.running() if campaign is not None else nullcontext():
        with closing(run_tasks(audit_operator, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                               done=lambda j: done(todo[j]), memory=[memory[i] for i in todo],
                               max_memory=max_memory, returns=(OperatorAudit, RowResult),
                               reserve=recheck_reserve(named_ops[i].operator for i in todo))) as outcomes:
            for outcome in outcomes:
                i = todo[outcome.index]
                name, rows = names[i], tasks[i][2]
                if outcome.ok and not here:  # plain data from another process: its certificates are re-verified here
                    outcome = rechecked(outcome, named_ops[i], tasks[i])
                if not outcome.ok:  # the operator's task failed (after a retry if its worker died): its rows are errors
                    status = "refused" if outcome.refused else "failed"
                    failed.append({"operator": name, "status": status, "reason": outcome.failure,
                                   "attempts": outcome.attempts})
                    for row in rows:
                        results[row.line] = RowResult(row.line, name, row.eps, "error", row.lower, row.upper,
                                                      error=f"operator task {status}: {outcome.failure}")
                    if campaign is not None:
                        campaign.failed(name, outcome)
                    continue
                audited = outcome.value
                results.update((r.line, r) for r in audited.rows)
                if audited.evidence is not None:
                    evidence_files[audited.evidence[0]] = audited.evidence[1]
                if campaign is not None:
                    campaign.record(name, audited, outcome)
    if campaign is not None:
        campaign.finish(failed=bool(failed))
    ordered = [results[line] for line in sorted(results)]
    return AuditResult(ordered, evidence_files, time.perf_counter() - start, len(groups), failed)


def rechecked(outcome: Any, named: Any, task: tuple) -> Any:
    """The outcome of an operator's audit that ran in another process, its certificates -- the
    evidence (written, signed with ``--key``) and a campaign's reproduction (kept in the state
    folder) -- re-verified in this one before anything of it is written
    (:func:`~softrank_cert.plumbing.campaign.recheck_from_worker`: every claim VERIFIED, about the
    panel operator bit for bit, the panel's provenance; the reproduction at exactly the tolerances
    of the rows it reproduced), with the evidence going to the path this process chose.  Anything
    else makes the outcome a failure (the operator's rows become ``error`` rows with the reason).
    The kernel's checks here keep to the task's check budget
    (:func:`~softrank_cert.util.memory.operator_check_limit`), as the task's own did.
    The rows' statuses are the worker's judgement of verified ends: numbers in a report, not a
    certificate (a resumed audit judges them again from the kept reproduction)."""
    from ...plumbing.campaign import rechecked_outcome, worker_failure
    from ...util.memory import operator_check_limit
    from .reproduction import reproduction_tolerances

    audited = outcome.value
    name, _spec, rows, _raw, _table_dir, evidence_path, _budget, _trusted, provenance, keep = task
    if not isinstance(audited, OperatorAudit):
        return worker_failure(outcome, f"a worker returned a {type(audited).__name__}, not an operator's audit", 2)
    plain = [row for row in rows if row.certificate is None]
    certificates: dict[str, tuple[Any, list[str] | None]] = {}
    if audited.evidence is not None:
        path, document = audited.evidence if isinstance(audited.evidence, tuple) and len(audited.evidence) == 2 \
            else (None, None)
        if path is None or Path(path) != Path(evidence_path):
            return worker_failure(outcome, f"a worker named another evidence file than {Path(evidence_path).as_posix()}", 2)
        certificates["evidence"] = (document, None)
    if keep and plain:
        certificates["reproduction"] = (audited.reproduction, reproduction_tolerances(plain))

    def rebuild(verified: dict[str, tuple[dict[str, Any], Any]]) -> OperatorAudit:
        evidence = verified["evidence"][0] if "evidence" in verified else None
        reproduction = verified["reproduction"][0] if "reproduction" in verified else None
        return OperatorAudit(audited.rows, None if evidence is None else (Path(evidence_path), evidence), reproduction,
                             audited.solver_seconds)

    return rechecked_outcome(outcome, name, named.operator, provenance, certificates, rebuild,
                             operator_check_limit(named.operator))


__all__ = ["AuditResult", "OperatorAudit", "PublishedRow", "RowError", "RowResult", "STATUSES", "audit_operator",
           "audit_table", "check_certificate", "check_certificate_bytes", "judge", "parse_row", "read_table", "summary"]
