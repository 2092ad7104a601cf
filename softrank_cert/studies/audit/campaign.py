"""The resumable audit (UNTRUSTED; ``softrank audit --resume``): a campaign whose kept operators are
re-checked by the kernel and judged again, never read back.

Per finished operator the state folder beside the manifest (``REPORT-campaign/NAME.json``) holds
the certificate of its reproduction -- every tolerance its rows without a certificate asked for.
A resumed audit keeps an operator only when its inputs key
(:func:`~softrank_cert.plumbing.campaign_inputs.inputs_sha256` of the exact operator, its rows,
the supplied certificates' bytes, the evidence path, the budget, the trusted keys and the
provenance) is unchanged and that certificate re-verifies (every claim VERIFIED by the kernel,
the panel operator bit for bit, exactly those tolerances, the panel's provenance).  Its rows are
then judged again (:func:`~softrank_cert.studies.audit.reproduction.audit_rows`) from the kernel's verdicts --
rows with a supplied certificate by re-checking that certificate -- and its evidence certificate
is issued again from the verified brackets.  The manifest's copy of the rows is never read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...certio.verified import verify_bracket
from ...plumbing.campaign import Campaign, budget_json, file_sha256, operator_sha256, recheck_certificate
from ...plumbing.campaign_inputs import inputs_sha256, read_kept_bytes
from ...plumbing.certificate_files import certificate_path, certificate_paths
from ...util.files import canonical_dump, write_text_atomic
from .reproduction import RESULT_VERSION, Ends, OperatorAudit, audit_rows, reproduction_tolerances


def task_inputs_sha256(op: Any, task: tuple) -> str:
    """The inputs key of one operator's audit task (see the module docstring)."""
    name, _spec, rows, raw, _table_dir, evidence_path, budget_seconds, trusted_keys, provenance, _keep = task
    inputs = [name, [[r.line, r.operator, r.eps, r.lower, r.upper, r.certificate] for r in rows],
              Path(evidence_path).as_posix(), budget_json(budget_seconds), sorted(trusted_keys or []), provenance,
              {path: isinstance(item, bytes) for path, item in raw.items()}]
    files = {path: item if isinstance(item, bytes) else item.encode() for path, item in raw.items()}
    return inputs_sha256(op, RESULT_VERSION, inputs, files)


class AuditCampaign(Campaign):
    """The campaign of a resumable audit (module docstring): manifest, state folder, what it keeps."""

    def __init__(self, path: Path, resume: bool, table: Path, panel: str | Path, budget_seconds: float | None,
                 trusted_keys: frozenset[str] | None, max_memory: int | None, jobs: int, scheduler: str | None,
                 operators: list[Any], tasks: list[tuple], memory: list[int], resume_command: str | None) -> None:
        self.state = path.with_name(path.name[: -len(".json")] if path.name.endswith(".json") else path.name + ".d")
        certificate_paths(self.state, [item.name for item in operators], reserve_manifest=False)  # one file each
        parameters = {"panel": {"path": str(panel), "sha256": file_sha256(panel), "operators": len(tasks)},
                      "brackets": {"path": str(table), "sha256": file_sha256(table)}, "tolerances": None,
                      "budget_seconds": budget_json(budget_seconds), "max_memory": max_memory, "jobs": jobs,
                      "scheduler": scheduler, "signer": None, "trusted_keys": sorted(trusted_keys or []) or None}
        keys = [task_inputs_sha256(item.operator, task) for item, task in zip(operators, tasks)]
        super().__init__(path, "audit", parameters,
                         [(item.name, {"operator_sha256": operator_sha256(item.operator), "inputs_sha256": key,
                                       "output": None, "estimated_bytes": need, "result_version": RESULT_VERSION})
                          for item, key, need in zip(operators, keys, memory)],
                         resume=resume, resume_command=resume_command)
        self.kept: dict[int, OperatorAudit] = {}
        for i, (item, key, task) in enumerate(zip(operators, keys, tasks)):
            entry = self.recorded(item.name, key)
            if entry is None or entry.get("result_version") != RESULT_VERSION:
                continue
            audited = self._reaudit(item, task, entry)
            if audited is None:
                continue
            self.kept[i] = audited
            self.keep(item.name, entry, result=self._result(audited))
        self.save()

    def _state_path(self, name: str) -> Path:
        return certificate_path(self.state, name)

    def _reaudit(self, item: Any, task: tuple, entry: dict[str, Any]) -> OperatorAudit | None:
        """The operator's audit again from its re-checked reproduction certificate (None: recompute)."""
        name, _spec, rows, raw, table_dir, evidence_path, _budget, trusted_keys, provenance, _keep = task
        recorded = got if isinstance(got := entry.get("result"), dict) else {}
        seconds = recorded.get("solver_seconds")
        seconds = seconds if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None
        state = self._state_path(name)
        why: list[str] = []

        def reproduce(plain: list[Any]) -> tuple[list[Ends], float | None, None] | None:
            report, reason = recheck_certificate(read_kept_bytes(state), str(state), name, item.operator,
                                                 reproduction_tolerances(plain), provenance=provenance)
            if report is None:
                why.append(reason)
                return None
            sealed = [verify_bracket(item.operator, bracket) for bracket in report.certificate.brackets]
            if any(b is None for b in sealed):  # the kernel again, on the panel's operator
                why.append("a claim of the kept certificate is not VERIFIED again")
                return None
            return [(b, b.lower.verdict, b.upper.verdict) for b in sealed if b is not None], seconds, None

        audited = audit_rows(name, item.operator, rows, raw, table_dir, evidence_path, trusted_keys, reproduce, provenance)
        if audited is None:
            self.note(name, f"recomputed: {why[0]}")
        return audited

    @staticmethod
    def _result(audited: OperatorAudit) -> dict[str, Any]:
        """The manifest's record of an operator's rows (for people reading it; never read back)."""
        return {"rows": [r.to_json() for r in audited.rows], "solver_seconds": audited.solver_seconds,
                "evidence": None if audited.evidence is None else Path(audited.evidence[0]).as_posix()}

    def record(self, name: str, audited: OperatorAudit, outcome: Any) -> None:
        """A computed operator: its reproduction certificate into the state folder, then its entry."""
        if audited.reproduction is not None:
            write_text_atomic(self._state_path(name), canonical_dump(audited.reproduction))
        self.done(name, outcome, outcome.seconds, result=self._result(audited))
