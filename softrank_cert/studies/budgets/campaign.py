"""The budget study over panels, as a resumable campaign (UNTRUSTED study logic; ``softrank budgets``).

:func:`study` runs :func:`~softrank_cert.studies.budgets.operators.study_operator` on every operator of some
panels -- in worker processes or on a Dask cluster -- and returns the report.  With a manifest it
is a campaign (:mod:`softrank_cert.plumbing.campaign`): every finished operator's certificate of
its final ends is stored in the state folder beside the manifest (``R-campaign/NAME.json``), and a
resumed study keeps an operator only when that certificate re-verifies (every claim VERIFIED by
the kernel, the panel operator bit for bit, the tolerance, the provenance) under exactly the same
inputs key; its ends, methods and every class are then re-derived from the kernel's verdicts
(:meth:`~softrank_cert.studies.budgets.operators.OperatorBudgets.from_verified`), never read from the
manifest.  Resuming with another ``--eps`` or ``--budgets`` is refused (exit 2).
"""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from ...certio.signing import sign_certificate
from ...errors import InvalidInputError
from ...plumbing.certificate_files import certificate_path, certificate_paths
from ...plumbing.campaign import Campaign
from ...util.files import canonical_dump, write_json_atomic, write_text_atomic
from ...util.progress import Progress
from .operators import RESULT_VERSION, OperatorBudgets, study_operator, summarize

if TYPE_CHECKING:
    from ...util.operator_files import NamedOperator


def _load(paths: list[str], names: list[str] | None = None) -> list[tuple[NamedOperator, str]]:
    """Every operator of every panel (panel order, then name order) with its panel's stem; only
    those named in ``names`` when it is given (each must be in some panel)."""
    from ...util.operator_files import load_operators, operator_names, unknown_operator_message

    out: list[tuple[NamedOperator, str]] = []
    seen: dict[str, str] = {}
    wanted = None if names is None else list(dict.fromkeys(names))
    selected = {path: None if wanted is None else [n for n in operator_names(path) if n in wanted] for path in paths}
    if wanted is not None:
        found = {name for chosen in selected.values() for name in chosen}  # type: ignore[union-attr]  # wanted: lists
        missing = [name for name in wanted if name not in found]
        if missing:
            held = [n for path in paths for n in operator_names(path)]
            where = paths[0] if len(paths) == 1 else ", ".join(Path(p).name for p in paths)
            raise InvalidInputError(unknown_operator_message(where, missing[0], held, "--operator"))
    for path in paths:
        if selected[path] == []:
            continue
        for item in load_operators(Path(path), selected[path]):
            if item.name in seen:
                raise InvalidInputError(f"operator {item.name!r} is in both {seen[item.name]} and {path}")
            seen[item.name] = path
            out.append((item, Path(path).stem))
    return out


def study(panels: list[str], eps: str, budgets: list[int], budget_seconds: float | None, *, jobs: int = 1,
          scheduler: str | None = None, show_progress: bool = True, manifest: Path | None = None,
          resume: bool = False, max_memory: int | None = None, operators: list[str] | None = None,
          certificates: Path | None = None, key: str | None = None,
          staged: dict[Path, dict[str, Any]] | None = None, resume_command: str | None = None,
          work: float | None = None) -> dict[str, Any]:
    """Run the study on the panels and return the report (``softrank budgets``; module docstring).

    ``work``: each operator's search is bounded by this many work units (the bracket, and as much
    again at most for the budget pass; :mod:`~softrank_cert.solvers.work`), not by its default
    work; with ``budget_seconds`` too, whichever runs out first.  A campaign records it among its
    inputs: a resume with another ``work`` recomputes every operator.

    ``manifest``: a campaign manifest rewritten after every operator; ``resume`` keeps what a
    previous run there finished and still re-checks (module docstring); ``resume_command`` is
    named when the run is interrupted.  Operators whose task fails (after a retry when its worker
    died) or is refused for memory (``max_memory``) are left out of the groups and listed under
    ``"failed"``.

    ``operators``: study only these names of the panels.  ``certificates``: a folder; every
    operator with a feasible or impossible budget gets the certificate of its verified ends as
    ``certificates/NAME.json`` (signed with the key file ``key``), each listed in the report.
    They are put in ``staged`` (path -> document, written by the caller together with the
    report); in a campaign each is written as soon as its operator is done (a kept operator's is
    issued again from its re-checked certificate when the file there does not check).
    """
    from ...plumbing.campaign import budget_json
    from ...plumbing.parallel import pack_operator
    from ...plumbing.json_contract import envelope

    selected = _load(panels, operators)
    want = certificates is not None
    tasks = [(pack_operator(item.operator), item.name, stem, eps, budgets, budget_seconds, True,
              want or manifest is not None, item.provenance or None, work) for item, stem in selected]
    targets = certificate_paths(Path(certificates),  # type: ignore[arg-type]  # want: a path
                                [item.name for item, _stem in selected],
                                reserve_manifest=False) if want else []
    start = time.perf_counter()
    results: dict[int, OperatorBudgets] = {}
    campaign = None
    if manifest is not None:
        campaign = _BudgetsCampaign(Path(manifest), resume, selected, panels, eps, budgets, budget_seconds, jobs,
                                    scheduler, max_memory, resume_command, work)
        results.update(campaign.kept)
        for i, certificate in campaign.certificates.items():
            if want and results[i].settled:
                _reissue(targets[i], selected[i][0], certificate, key)
    todo = [i for i in range(len(tasks)) if i not in results]
    failed: list[dict[str, Any]] = []

    def finished(i: int, item: OperatorBudgets) -> None:
        """Store (campaign) and write or stage the certificate of a computed operator."""
        if campaign is not None and item.certificate is not None:
            campaign.store(selected[i][0].name, item.certificate)
        if not want or item.certificate is None or not item.settled:
            return
        document = sign_certificate(item.certificate, key) if key else item.certificate
        if campaign is not None:
            write_json_atomic(targets[i], document)
        elif staged is not None:
            staged[targets[i]] = document

    _run_study(selected, tasks, todo, results, failed, campaign, eps, jobs, scheduler, show_progress, max_memory,
               finished)
    if campaign is not None:
        campaign.finish(failed=bool(failed))
    items = [results[i] for i in sorted(results)]
    entries = []
    for i in sorted(results):
        entry = results[i].to_json()
        if want:
            entry["certificate"] = targets[i].as_posix() if results[i].settled else None
        entries.append(entry)
    return envelope("budgets", {
        "eps": eps, "budgets": budgets, "panels": [str(p) for p in panels], "operators_selected": operators,
        "budget_seconds": budget_json(budget_seconds),
        "classes": {"feasible": "verified upper end <= budget (r_eps <= b proved)",
                    "impossible": "verified lower end > budget (r_eps > b proved)",
                    "unresolved": "neither end proves anything about the budget"},
        "certificates": None if certificates is None else str(certificates), "signed_certificates": bool(want and key),
        "seconds": round(time.perf_counter() - start, 3),
        "groups": summarize(items, budgets), "operators": entries, "failed": failed})


def _reissue(target: Path, item: NamedOperator, verified: Any, key: str | None) -> None:
    """Write a kept operator's --certificates file again from its re-checked certificate
    ``verified`` unless the file there already checks (same ends, signed by ``key``'s signer
    when given)."""
    from ...certio.issuing import certificate_for
    from ...certio.signing import did_key, load_private_key
    from ...certio.verified import verify_bracket
    from ...errors import InternalInvariantError
    from ...plumbing.campaign import reusable_certificate

    signer = did_key(load_private_key(key).public_key()) if key else None
    (bracket,) = verified.brackets
    present, _why = reusable_certificate(target, item.name, item.operator, [bracket.eps], signer,
                                         provenance=item.provenance)
    if present is not None and [(b.lower.k, b.upper.r) for b in present.brackets] == [(bracket.lower.k,
                                                                                          bracket.upper.r)]:
        return
    sealed = verify_bracket(item.operator, bracket)  # the kernel again, on the panel's operator
    if sealed is None:
        raise InternalInvariantError(f"{item.name}: a re-checked certificate's claim is no longer VERIFIED")
    write_json_atomic(target, certificate_for(item.name, item.operator, [sealed], item.provenance, key))


def _run_study(operators: list[tuple[NamedOperator, str]], tasks: list[tuple], todo: list[int], results: dict[int, Any],
               failed: list[dict[str, Any]], campaign: Any, eps: str, jobs: int, scheduler: str | None,
               show_progress: bool, max_memory: int | None,
               finished: Callable[[int, Any], None] | None = None) -> None:
    from contextlib import nullcontext

    from ...plumbing.campaign import failure_record
    from ...util.memory import operator_task_bytes, recheck_reserve
    from ...plumbing.parallel import in_process, run_tasks

    here = in_process(jobs, scheduler, len(todo))
    with campaign.running() if campaign is not None else nullcontext(), \
            Progress("softrank budgets", len(tasks), bar=show_progress) as bar:
        for i in sorted(results):
            bar.advance(operators[i][0].name)
            bar.finished(operators[i][0].name, "kept (resumed: re-verified certificate)")
        with closing(run_tasks(study_operator, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                               memory=[operator_task_bytes(operators[i][0].operator) for i in todo],
                               max_memory=max_memory, done=lambda j: bar.advance(operators[todo[j]][0].name),
                               returns=(OperatorBudgets,),
                               reserve=recheck_reserve(operators[i][0].operator for i in todo))) as outcomes:
            for outcome in outcomes:
                i = todo[outcome.index]
                name = operators[i][0].name
                if outcome.ok and not here:  # plain data from another process: its certificate is re-verified here
                    outcome = _rechecked(outcome, operators[i], tasks[i])
                if not outcome.ok:
                    record = campaign.failed(name, outcome) if campaign is not None else failure_record(outcome, name)
                    failed.append(record)
                    bar.finished(name, f"{record['status'].upper()}: {outcome.failure}")
                    continue
                item = outcome.value
                results[i] = item
                if finished is not None:
                    finished(i, item)
                if campaign is not None:
                    campaign.done(name, outcome, item.seconds, result=item.to_json())
                classes = ", ".join(f"{b} {cls}" for b, cls in item.classes.items())
                bar.finished(item.name, f"eps {eps} [{item.lower}, {item.upper}]: budget {classes} "
                                        f"in {item.seconds:.1f} s")


def _rechecked(outcome: Any, operator: tuple[NamedOperator, str], task: tuple) -> Any:
    """The outcome of a task that ran in another process, its certificate re-verified in this one
    before it is stored, signed or written (:func:`~softrank_cert.plumbing.campaign.recheck_from_worker`):
    the result is then re-derived from the kernel's verdicts on it
    (:meth:`~softrank_cert.studies.budgets.operators.OperatorBudgets.from_verified`, as a resume
    does), or the outcome becomes a failure saying why; the kernel's checks keep to the task's check
    budget (:func:`~softrank_cert.util.memory.operator_check_limit`).  A task asked for no certificate (no
    ``--certificates``, no campaign) returns only numbers, which are passed on as they are."""
    from ...plumbing.campaign import rechecked_outcome
    from ...util.memory import operator_check_limit

    item, (named, stem) = outcome.value, operator
    _spec, name, _stem, eps, budgets, _seconds, _sharpen, wanted, _provenance, _work = task
    if not wanted:
        return outcome
    document = item.certificate if isinstance(item, OperatorBudgets) else None

    def rebuild(verified: dict[str, tuple[dict[str, Any], Any]]) -> OperatorBudgets:
        certificate, verification = verified[""]
        result = OperatorBudgets.from_verified(name, stem, named.operator, verification.certificate.brackets[0],
                                               verification.pairs[0], budgets, item.sharpened, item.seconds)
        result.certificate = certificate
        return result

    return rechecked_outcome(outcome, name, named.operator, named.provenance, {"": (document, [eps])}, rebuild,
                             operator_check_limit(named.operator))


class _BudgetsCampaign(Campaign):
    """The campaign of a budgets study: its manifest, its state folder (one certificate of the
    final ends per finished operator) and, with ``resume``, what it keeps (re-checked)."""

    def __init__(self, path: Path, resume: bool, operators: list[tuple[NamedOperator, str]], panels: list[str],
                 eps: str, budgets: list[int], budget_seconds: float | None, jobs: int, scheduler: str | None,
                 max_memory: int | None, resume_command: str | None, work: float | None = None) -> None:
        from ...plumbing.campaign import budget_json, file_sha256, operator_sha256, recheck_certificate
        from ...plumbing.campaign_inputs import inputs_sha256, read_kept_bytes
        from ...util.memory import operator_task_bytes

        self.state = path.with_name(path.name[: -len(".json")] if path.name.endswith(".json") else path.name + ".d")
        certificate_paths(self.state, [item.name for item, _stem in operators], reserve_manifest=False)  # one file each
        parameters = {"panel": [{"path": str(p), "sha256": file_sha256(p)} for p in panels],
                      "tolerances": [eps], "budgets": budgets, "budget_seconds": budget_json(budget_seconds),
                      "max_memory": max_memory, "jobs": jobs, "scheduler": scheduler, "signer": None}
        inputs = {"eps": eps, "budgets": budgets, "budget_seconds": budget_json(budget_seconds), "sharpen": True,
                  **({} if work is None else {"work": work})}  # no key without it: earlier campaigns still resume
        if work is not None:
            parameters["budget_work"] = work
        keys = [inputs_sha256(item.operator, RESULT_VERSION, {**inputs, "name": item.name, "document": stem,
                                                              "provenance": item.provenance})
                for item, stem in operators]
        super().__init__(path, "budgets", parameters,
                         [(item.name, {"operator_sha256": operator_sha256(item.operator), "inputs_sha256": key,
                                       "output": None, "estimated_bytes": operator_task_bytes(item.operator),
                                       "result_version": RESULT_VERSION})
                          for (item, _stem), key in zip(operators, keys)],
                         resume=resume, must_match={"tolerances": "--eps", "budgets": "--budgets"},
                         resume_command=resume_command)
        self.kept: dict[int, OperatorBudgets] = {}
        self.certificates: dict[int, Any] = {}  # index -> the re-checked Certificate
        for i, ((item, stem), key) in enumerate(zip(operators, keys)):
            entry = self.recorded(item.name, key)
            if entry is None or entry.get("result_version") != RESULT_VERSION:
                continue
            state = self._state_path(item.name)
            verification, why = recheck_certificate(read_kept_bytes(state), str(state), item.name, item.operator, [eps],
                                                    provenance=item.provenance)
            if verification is None:
                self.note(item.name, f"recomputed: {why}")
                continue
            recorded = got if isinstance(got := entry.get("result"), dict) else {}
            result = OperatorBudgets.from_verified(item.name, stem, item.operator, verification.certificate.brackets[0],
                                                   verification.pairs[0], budgets, recorded.get("sharpened"),
                                                   entry.get("seconds"))
            self.kept[i] = result
            self.certificates[i] = verification.certificate
            self.keep(item.name, entry, result=result.to_json())
        self.save()

    def _state_path(self, name: str) -> Path:
        return certificate_path(self.state, name)

    def store(self, name: str, document: dict[str, Any]) -> None:
        """Keep a computed operator's certificate in the state folder (before its manifest entry)."""
        write_text_atomic(self._state_path(name), canonical_dump(document))
