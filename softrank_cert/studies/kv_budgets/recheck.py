"""A written KV-budget report read back for a page, every budget re-verified (UNTRUSTED
orchestration; every verdict is the kernel's).

:func:`rechecked_report` reads ``FOLDER/kv_budgets.json`` (bounded) and re-verifies each policy
certificate it names with :func:`softrank_cert.verification.verify_certificate_bytes` (what
``softrank-verify`` runs).  A budget stays on the page only when its certificate's claims all
verified, the certificate is about the same operator, and its verified upper end at that
tolerance is the budget, made by that policy; any other budget is shown as not certified, with
the reason, and the per-layer summary is derived again from what remains (the lower ends too:
those the policy certificates verify).  A budget "minimal" because it equals the lower end is
checked again; one "minimal" because the kernel rejected one slot fewer keeps that label from
the ``kv-budgets`` run (``softrank kv-budgets --resume`` re-derives it with the kernel).  Nothing in the report
is believed: a page drawn from a tampered ``kv_budgets.json`` loses budgets, never gains one.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from ...util.files import loads_unique, read_regular_file
from .certify import BY_LOWER_END
from .study import OUTPUT_FOLDER, REPORT_NAME
from .summary import layer_summary
from .witnesses import construction

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
    if not (isinstance(report, dict) and report.get("format") == "softrank-kv-budgets-report"
            and isinstance(report.get("operators"), list)):
        raise InvalidInputError(f"{path}: not a KV-budget report softrank wrote")
    return report


def _certificate(folder: Path, relative: Any) -> Path | None:
    """The policy certificate ``relative`` names, when it lies in ``FOLDER/kv-budgets`` (else None)."""
    if not isinstance(relative, str):
        return None
    inside = (folder / OUTPUT_FOLDER).resolve()
    path = (folder / relative).resolve()
    return path if path.is_relative_to(inside) and path.is_file() else None


def _verified_ends(path: Path, operator: str) -> dict[tuple[str, str], tuple[int, int]] | str:
    """``{(eps, construction): (lower, upper)}`` of the certificate at ``path``, or why it does not count."""
    from ..report.certificates import check_file
    from ..report.folder import Planned

    checked = check_file(Planned(operator, path, path.stat().st_size))
    if checked.operator is None:
        return checked.reason or "does not verify"
    if checked.operator != operator:
        return f"a certificate of {checked.operator!r}, not of {operator!r}"
    return {(str(b["eps"]), str(b["upper_construction"])): (int(b["lower"]), int(b["upper"])) for b in checked.brackets}


def _recheck_record(folder: Path, record: dict[str, Any]) -> int:
    """Re-verify the budgets of one head's ``record`` in place (a budget not backed by its
    certificate is dropped; the lower ends become the ones the policy certificates verify, None
    where none does); returns how many budgets stayed."""
    files = got if isinstance(got := record.get("certificates"), dict) else {}
    ends: dict[str, dict[tuple[str, str], tuple[int, int]] | str] = {}
    lowers: dict[str, int] = {}
    kept = 0
    for budget in record.get("budgets", []):
        policy, eps = str(budget.get("policy")), str(budget.get("eps"))
        if policy not in ends:
            path = _certificate(folder, files.get(policy))
            ends[policy] = "no certificate file" if path is None else _verified_ends(path, str(record["operator"]))
        found = ends[policy]
        pair = found.get((eps, construction(policy))) if isinstance(found, dict) else None
        if pair is not None:
            lowers[eps] = pair[0]
        if budget.get("budget") is None:
            continue
        if pair is not None and pair[1] == budget["budget"]:
            kept += 1
            if budget.get("minimal_by") == BY_LOWER_END and pair[0] != pair[1]:
                budget.update(minimal=False, minimal_by=None)
            continue
        reason = found if isinstance(found, str) else "the certificate's verified upper end is not this budget"
        budget.update(budget=None, minimal=False, minimal_by=None, not_reverified=reason)
    for bracket in record.get("brackets", []):
        bracket["lower"] = lowers.get(str(bracket.get("eps")))
    return kept


def rechecked_report(folder: Path) -> dict[str, Any] | None:
    """The KV-budget report of the bracket folder ``folder`` with every budget re-verified (module
    docstring), or None when the folder has none.  An unreadable report is one line, exit 2."""
    report = _read(Path(folder))
    if report is None:
        return None
    report = copy.deepcopy(report)
    records = [r for r in report["operators"] if isinstance(r, dict) and r.get("status") == "done"]
    report["rechecked"] = sum(_recheck_record(Path(folder), r) for r in records)
    report["layers"] = layer_summary(records)
    return report


__all__ = ["MAX_REPORT_BYTES", "rechecked_report"]
