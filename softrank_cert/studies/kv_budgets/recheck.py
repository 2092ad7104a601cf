"""The KV budgets of a bracket folder derived again for a page, from the certificates alone
(UNTRUSTED orchestration; every verdict is the kernel's).

:func:`rechecked_report` takes from ``FOLDER/kv_budgets.json`` only which policies (and their
parameters) and tolerances were studied; everything the page shows is derived again as
``softrank kv-budgets --resume`` derives a kept certificate (:func:`~.study.kept_results`), with
nothing computed or written: every head's bracket certificate is re-verified by the kernel
(signed by the campaign's signer when it names one), and a policy certificate counts only when
it re-verifies about that head's exact operator, with this policy's provenance and parameters
and a witness bit for bit the policy's kept set; its budgets' minimality is decided by the
kernel again (the lower end, or a REJECTED witness one slot smaller).  The model, document,
width, layer and head of a record come from its operator's name.  So a page drawn from a
tampered report or folder can lose budgets, never gain one, and never moves one to another head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from ...util.files import loads_unique, read_regular_file
from .policies import Policy
from .study import REPORT_NAME, run_study
from .summary import layer_summary

#: The most bytes of ``kv_budgets.json`` read for a page.
MAX_REPORT_BYTES = 64 << 20


def _read(folder: Path) -> dict[str, Any] | None:
    path = folder / REPORT_NAME
    if not path.is_file():
        return None
    try:
        report = loads_unique(read_regular_file(path, MAX_REPORT_BYTES, REPORT_NAME))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInputError(f"{path}: not readable JSON ({exc})") from None
    if not (isinstance(report, dict) and report.get("format") == "softrank-kv-budgets-report"):
        raise InvalidInputError(f"{path}: not a KV-budget report softrank wrote")
    return report


def _policy(entry: Any, path: Path) -> Policy:
    """The policy a report entry ``{"name", "parameters"}`` names (one line, exit 2, otherwise)."""
    bad = InvalidInputError(f"{path}: a policy entry is not one softrank kv-budgets writes")
    if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("parameters"), dict)):
        raise bad
    params = entry["parameters"]
    try:
        policy = Policy(entry["name"], sinks=int(params.get("sinks", 4)),
                        recent_share=float(params.get("recent_share", 0.5)),
                        keep=tuple(int(j) for j in params.get("keep", ())))
    except (TypeError, ValueError):
        raise bad from None
    if policy.parameters() != params:
        raise bad
    return policy


def _studied_set(report: dict[str, Any], path: Path, held: list[str]) -> tuple[list[Policy], list[str]]:
    """The policies and tolerances ``report`` says were studied (tolerances among the campaign's ``held``)."""
    entries, tolerances = report.get("policies"), report.get("tolerances")
    if not isinstance(entries, list) or not entries:
        raise InvalidInputError(f"{path}: names no policies")
    policies = [_policy(entry, path) for entry in entries]
    if len({p.name for p in policies}) != len(policies):
        raise InvalidInputError(f"{path}: a policy is named twice")
    if not (isinstance(tolerances, list) and tolerances and all(isinstance(e, str) and e in held for e in tolerances)):
        raise InvalidInputError(f"{path}: its tolerances are not among the campaign's ({', '.join(held)})")
    return policies, list(dict.fromkeys(tolerances))


def rechecked_report(folder: Path) -> dict[str, Any] | None:
    """The KV-budget report of the bracket folder ``folder`` derived again from its certificates
    (module docstring), or None when the folder has no ``kv_budgets.json``.  A report that does
    not say which policies and tolerances were studied is one line, exit 2."""
    from ..report.folder import plan, read_manifest

    folder = Path(folder)
    report = _read(folder)
    if report is None:
        return None
    manifest = read_manifest(folder)
    policies, tolerances = _studied_set(report, folder / REPORT_NAME, list(manifest["tolerances"]))
    signer = manifest.get("signer") if isinstance(manifest.get("signer"), str) else None
    entries = [(p.name, p.path if p.size is not None else None, p.why_missing) for p in plan(folder, manifest)]
    records = run_study(entries, policies, tolerances, folder=folder, signer=signer, compute=False)
    studied = [r for r in records if r["status"] == "done"]
    missing = [{"operator": r["operator"], "policy": p.name} for r in studied for p in policies
               if p.name not in r["kept"]]
    return {"folder": str(folder), "tolerances": tolerances,
            "policies": [{"name": p.name, "parameters": p.parameters()} for p in policies],
            "operators": records, "layers": layer_summary(records),
            "failed": [{"operator": r["operator"], "reason": r["reason"]} for r in records if r["status"] == "failed"],
            "not_reverified": missing,
            "rechecked": sum(1 for r in studied for b in r["budgets"] if b["budget"] is not None)}


__all__ = ["MAX_REPORT_BYTES", "rechecked_report"]
