"""Certified KV budgets over a bracket folder (UNTRUSTED orchestration; ``softrank kv-budgets``).

For every head of a ``softrank bracket PANEL --all --out DIR/`` folder (its manifest names the
operators and tolerances; each certificate is re-checked by the kernel, :mod:`.heads`) and every
tolerance:

* the head's verified lower end ``k`` is reported as **the certified minimum number of cache
  slots for any common-set compression** (``proofs/kv-budgets.md``, Theorem KV1: outputs
  ``A' V`` with ``rank A' < k`` miss some value matrix with entries in [-1, 1] by more than eps);
* per policy (:mod:`.policies`) the smallest budget whose witness the kernel VERIFIES
  (:mod:`.certify`), minimal or an upper bound on the policy's minimum.

Every certified budget is written as a certificate through the one writer
(:func:`~softrank_cert.certio.issuing.certificate_for`, sealed ends only) to
``DIR/kv-budgets/POLICY/NAME.json``: per tolerance the head's lower end and the policy's witness,
so ``softrank-verify DIR/kv-budgets`` re-checks every budget.  A certificate is written as soon as
its head is done (atomically), so an interrupted run loses no finished head; ``resume`` keeps a
policy certificate already there when it re-verifies (every claim VERIFIED, the same operator,
the provenance of this run's policy and tolerances, a witness bit for bit the policy's) and
re-derives its budgets and labels with the kernel; nothing is read from an earlier report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...certio.issuing import certificate_for
from ...certio.verified import VerifiedBracket
from ...plumbing.certificate_files import certificate_path
from ...util.dense import attention_matrix
from ...util.files import write_json_atomic
from ...util.progress import Stage
from ..panel_names import name_fields
from .certify import BY_LOWER_END, BY_REJECTION, BudgetResult, certify_budget
from .heads import Head
from .policies import Policy, policy_errors, priority_order
from .witnesses import construction, policy_witness

#: The folder, inside the bracket folder, that holds the policy certificates.
OUTPUT_FOLDER = "kv-budgets"
#: The report's file name inside the bracket folder.
REPORT_NAME = "kv_budgets.json"
#: The claim a verified lower end makes about cache sizes, with its conditions (report and page).
LOWER_END_MEANING = ("certified minimum number of cache slots for any common-set compression: no cache that keeps a "
                     "common set of fewer slots for these queries, chosen without looking at the values (eviction "
                     "with renormalisation, token merging, a projection along the sequence as in Linformer: any "
                     "output A'V with rank A' below it and A' independent of V) keeps "
                     "every output of this head within eps for every value matrix with entries in [-1, 1]")


def policy_certificate_path(folder: Path, policy_name: str, operator_name: str) -> Path:
    """Where the certificate of ``policy_name``'s budgets for ``operator_name`` lies in ``folder``."""
    return certificate_path(Path(folder) / OUTPUT_FOLDER / policy_name, operator_name)


def policy_provenance(head: Head, policy: Policy, tolerances: list[str]) -> dict[str, Any]:
    """The provenance of a policy certificate: the head's, with the policy, its parameters and the
    tolerances this run asked for."""
    return {**head.provenance, "kv_policy": policy.name, "kv_policy_parameters": policy.parameters(),
            "kv_tolerances": list(tolerances)}


@dataclass(frozen=True)
class HeadStudy:
    """What one head gave: per policy, its results per tolerance and its certificate document (None
    when no budget was certified, or when a kept one was re-checked and left as it is)."""

    head: Head
    results: dict[str, list[BudgetResult]]
    documents: dict[str, dict[str, Any] | None]
    kept: dict[str, bool]


def _lower_k(head: Head, eps: str) -> int | None:
    bracket = head.brackets.get(eps)
    return None if bracket is None else bracket.lower.k


def study_policy(head: Head, A: np.ndarray, policy: Policy, tolerances: list[str],
                 key: Any = None) -> tuple[list[BudgetResult], dict[str, Any] | None]:
    """``policy`` on ``head`` at every tolerance, and the signed (with ``key``) certificate of its
    certified budgets, each beside the head's sealed lower end (None when none was certified)."""
    order = priority_order(policy, A)
    errors = policy_errors(A, order)
    results = [certify_budget(head.operator, A, order, errors, eps, policy.name, _lower_k(head, eps))
               for eps in tolerances]
    brackets = [VerifiedBracket(r.eps, head.brackets[r.eps].lower, r.sealed) for r in results
                if r.sealed is not None]
    if not brackets:
        return results, None
    document = certificate_for(head.name, head.operator, brackets, policy_provenance(head, policy, tolerances), key)
    return results, document


def kept_results(head: Head, A: np.ndarray, policy: Policy, tolerances: list[str],
                 path: Path, signer: str | None = None) -> list[BudgetResult] | None:
    """The results of a policy certificate already at ``path`` (``--resume``), re-derived with the
    kernel (module docstring; signed by ``signer`` when one is given); None when there is none or
    it cannot be kept."""
    from ...plumbing.campaign import recheck_certificate
    from ...plumbing.campaign_inputs import read_kept_bytes

    if not path.is_file():
        return None
    report, _why = recheck_certificate(read_kept_bytes(path), str(path), head.name, head.operator, None,
                                       signer=signer, provenance=policy_provenance(head, policy, tolerances))
    if report is None:
        return None
    order = priority_order(policy, A)
    errors = policy_errors(A, order)
    found: dict[str, int] = {}
    for bracket in report.certificate.brackets:
        upper = bracket.upper
        witness = policy_witness(A, order[:upper.r]) if upper.U is not None else None
        if (bracket.eps not in tolerances or upper.construction != construction(policy.name) or witness is None
                or not (np.array_equal(witness[0], upper.U) and np.array_equal(witness[1], upper.W))):
            return None
        found[bracket.eps] = upper.r
    return [_rederived(head, A, order, errors, eps, policy.name, found.get(eps)) for eps in tolerances]


def _rederived(head: Head, A: np.ndarray, order: np.ndarray, errors: np.ndarray, eps: str, policy_name: str,
               budget: int | None) -> BudgetResult:
    """A kept budget (verified again just now) with its minimality decided by the kernel again."""
    from ...kernel import Status, verify_upper

    if budget is None:
        return BudgetResult(eps, None, None, False, None, None, 0)
    lower_k = _lower_k(head, eps)
    why, checks = None, 0
    if lower_k is not None and budget <= lower_k:
        why = BY_LOWER_END
    elif budget > 1 and (witness := policy_witness(A, order[:budget - 1])) is not None:
        checks = 1
        status = verify_upper(head.operator, eps, budget - 1, *witness, method=construction(policy_name)).status
        why = BY_REJECTION if status is Status.REJECTED else None
    return BudgetResult(eps, budget, None, why is not None, why, float(errors[budget - 1]), checks)


def _signer_of(key: Any) -> str | None:
    """The ``did:key`` of ``key`` (a key file or an ``Ed25519PrivateKey``; None: none)."""
    from ...certio.signing import did_key, load_private_key

    if key is None:
        return None
    return did_key((key if hasattr(key, "public_key") else load_private_key(key)).public_key())


def study_head(head: Head, policies: list[Policy], tolerances: list[str], *, folder: Path, resume: bool = False,
               key: Any = None, compute: bool = True, signer: str | None = None) -> HeadStudy:
    """Every policy on ``head`` (kept ones re-derived with ``resume``: :func:`kept_results`, signed
    by ``key``'s signer, or ``signer``, when either is given).  Without ``compute`` nothing is
    searched or written: a policy without a certificate that re-verifies has no budget."""
    A = attention_matrix(head.operator)
    results: dict[str, list[BudgetResult]] = {}
    documents: dict[str, dict[str, Any] | None] = {}
    kept: dict[str, bool] = {}
    signer = _signer_of(key) or signer
    for policy in policies:
        path = policy_certificate_path(folder, policy.name, head.name)
        previous = kept_results(head, A, policy, tolerances, path, signer) if resume or not compute else None
        kept[policy.name] = previous is not None
        if previous is not None:
            results[policy.name], documents[policy.name] = previous, None
        elif compute:
            results[policy.name], documents[policy.name] = study_policy(head, A, policy, tolerances, key)
        else:
            results[policy.name] = [BudgetResult(eps, None, None, False, None, None, 0) for eps in tolerances]
            documents[policy.name] = None
    return HeadStudy(head, results, documents, kept)


def write_head(study: HeadStudy, folder: Path) -> dict[str, str]:
    """Write the new certificates of ``study`` (atomically, one file each) and return every
    policy certificate of the head, new or kept, by policy, relative to ``folder``."""
    files = {}
    for name, document in study.documents.items():
        path = policy_certificate_path(folder, name, study.head.name)
        if document is not None:
            write_json_atomic(path, document)
        if document is not None or study.kept[name]:
            files[name] = str(path.relative_to(folder))
    return files


def head_record(study: HeadStudy, files: dict[str, str]) -> dict[str, Any]:
    """The report's record of one head: its place (model, document, width, layer, head), its
    verified bracket per tolerance and every policy's budget."""
    head = study.head
    model, document, width, layer, index = head_fields(head.name)
    m, n = head.operator.shape
    return {"operator": head.name, "model": model, "document": document, "width": width, "layer": layer,
            "head": index, "m": m, "N": n, "status": "done", "reason": None,
            "brackets": [{"eps": eps, "lower": b.lower.k, "upper": b.upper.r} for eps, b in head.brackets.items()],
            "budgets": [_budget_record(name, r) for name, results in study.results.items() for r in results],
            "certificates": files, "kept": sorted(name for name, kept in study.kept.items() if kept)}


def _budget_record(policy_name: str, result: BudgetResult) -> dict[str, Any]:
    return {"policy": policy_name, "eps": result.eps, "budget": result.budget, "minimal": result.minimal,
            "minimal_by": result.why_minimal, "kernel_checks": result.checks,
            "estimates": {"error": result.estimate}}


def _is_width(segment: str, width: int | str) -> bool:
    """Whether ``segment`` names ``width`` (``w128``; zero-padded ``w016`` too)."""
    return segment[:1] == "w" and segment[1:].isdigit() and str(int(segment[1:])) == str(width)


def head_fields(name: str) -> tuple[str, str, int | str, int | None, int | None]:
    """``(model, document, width, layer, head)`` of an operator name such as
    ``smollm2/apache2/w128/L3H7`` (the model: the segments before the document; ``"-"`` when
    there are none)."""
    document, width, layer, head = name_fields(name, "-")
    parts = name.split("/")
    at = next((i for i in range(len(parts) - 1, -1, -1) if _is_width(parts[i], width)), None)
    model = "/".join(parts[:at - 1]) if at is not None and at >= 2 else "-"
    return model, document, width, layer, head


def failed_record(name: str, reason: str) -> dict[str, Any]:
    """The report's record of a head that could not be studied (its certificate missing or not verified)."""
    model, document, width, layer, index = head_fields(name)
    return {"operator": name, "model": model, "document": document, "width": width, "layer": layer, "head": index,
            "m": None, "N": None, "status": "failed", "reason": reason, "brackets": [], "budgets": [],
            "certificates": {}, "kept": []}


def run_study(entries: list[tuple[str, Path | None, str]], policies: list[Policy], tolerances: list[str], *,
              folder: Path, resume: bool = False, key: Any = None, signer: str | None = None,
              stage: Stage | None = None, compute: bool = True) -> list[dict[str, Any]]:
    """Every head of ``entries`` (``(name, certificate path or None, why missing)``, in order):
    its record (:func:`head_record` / :func:`failed_record`), its certificates written as it is
    done (without ``compute``: only the certificates there that re-verify, nothing written).
    ``stage("certifying budgets", done, total)`` after each head (:data:`~softrank_cert.util.progress.Stage`)."""
    from ...errors import HeadRefusedError
    from .heads import read_head

    records = []
    for index, (name, path, why_missing) in enumerate(entries):
        if path is None:
            records.append(failed_record(name, why_missing or "no certificate file"))
        else:
            try:
                head = read_head(name, path, signer)
            except HeadRefusedError as exc:
                records.append(failed_record(name, str(exc)))
            else:
                missing = [eps for eps in tolerances if eps not in head.brackets]
                if missing:
                    records.append(failed_record(name, f"{path}: holds no bracket at eps {','.join(missing)}"))
                else:
                    records.append(_studied(head, policies, tolerances, folder, resume, key, compute, signer))
        if stage is not None:
            stage("certifying budgets", index + 1, len(entries))
    return records


def _studied(head: Head, policies: list[Policy], tolerances: list[str], folder: Path, resume: bool,
             key: Any, compute: bool = True, signer: str | None = None) -> dict[str, Any]:
    """:func:`study_head` and its certificates written, or the failed record of a head the
    policies do not fit (a ``--keep`` position beyond its keys): nothing of it is written then."""
    from ...errors import InvalidInputError

    try:
        result = study_head(head, policies, tolerances, folder=folder, resume=resume, key=key, compute=compute,
                            signer=signer)
    except InvalidInputError as exc:
        return failed_record(head.name, str(exc))
    return head_record(result, write_head(result, folder))


def report_body(folder: Path, records: list[dict[str, Any]], policies: list[Policy], tolerances: list[str],
                started: float, *, signed: bool) -> dict[str, Any]:
    """The ``kv_budgets.json`` body (the envelope is the caller's): the records, the meaning of
    each number and the per-layer summary (:mod:`.summary`)."""
    from .summary import layer_summary

    return {"folder": str(folder), "tolerances": tolerances,
            "policies": [{"name": p.name, "parameters": p.parameters()} for p in policies],
            "meaning": {"lower": LOWER_END_MEANING,
                        "budget": "the smallest budget of the policy whose witness (the kept set, renormalised) "
                                  "the trusted kernel VERIFIED with worst-case error <= eps",
                        "minimal": "the budget is the policy's minimum: it equals the certified lower end (no "
                                   "common-set compression does with fewer slots), or the kernel REJECTED the "
                                   "policy's float64 witness one slot smaller (minimal for the policy as applied in "
                                   "float64: proofs/kv-budgets.md); otherwise it is an upper bound on the policy's "
                                   "minimum"},
            "certificates": OUTPUT_FOLDER, "signed_certificates": signed,
            "operators": records, "layers": layer_summary(records),
            "failed": [{"operator": r["operator"], "reason": r["reason"]} for r in records if r["status"] == "failed"],
            "seconds": round(time.perf_counter() - started, 3)}


__all__ = ["HeadStudy", "LOWER_END_MEANING", "OUTPUT_FOLDER", "REPORT_NAME", "failed_record", "head_fields",
           "head_record", "kept_results", "policy_certificate_path", "policy_provenance", "report_body", "run_study",
           "study_head", "study_policy", "write_head"]
