"""The bracket campaign: every operator of a panel to its own certificate in one folder, resumable.

What ``softrank bracket`` and the ``brackets`` stage of ``softrank survey`` run: the outputs of a
run checked before any work (:func:`bracket_targets`), then a campaign (:func:`run_campaign`,
``--out`` a folder) or one operator to one certificate file (:func:`run_single`).  The rules are
:mod:`.campaign`'s: the manifest is written before any work and after every operator; with
``resume`` a certificate is kept only when the kernel re-verifies it here
(:func:`~softrank_cert.plumbing.campaign.recheck_certificate`), and what is reported about it is
re-derived from those verdicts.  Each operator runs with its own work bound (``works``), so that
one campaign may hold operators of several shapes at a work level that depends on the shape.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..util.escaping import plain_text
from ..errors import InvalidInputError
from ..util.files import check_output_file, check_output_folder, write_json_atomic
from ..util.memory import operator_task_bytes
from ..util.operator_files import NamedOperator
from .bracketing import bracket_rows, run_brackets
from .campaign import (MANIFEST_NAME, Campaign, budget_json, check_campaign_start, file_sha256, operator_sha256,
                       recheck_certificate)
from .certificate_files import certificate_paths
from .campaign_inputs import read_kept_bytes


@dataclass(frozen=True)
class CampaignPlan:
    """A checked bracket campaign: ``operators`` to ``targets`` (certificate files in ``out``),
    ``works[i]`` the work bound operator ``i``'s search runs with (None: the driver's default,
    ``math.inf``: none; recorded in the manifest as None when it is not finite), the search's options,
    the signing ``key`` (or None), the ``panel`` path recorded in the manifest and
    ``resume_command``, the line an interruption names.  ``max_memory``: what the tasks may use
    together (``--max-memory`` or its default); ``given_memory``: the ``--max-memory`` the user gave
    (None: not given), with which a task's checks may use more than 1 GiB."""

    out: Path
    panel: Path
    operators: Sequence[NamedOperator]
    targets: Sequence[Path]
    eps_list: list[str]
    works: Sequence[float | None]
    budget_seconds: float | None
    key: Any = None
    jobs: int = 1
    scheduler: str | None = None
    max_memory: int | None = None
    device: str | None = None
    given_memory: int | None = None
    resume: bool = False
    force: bool = False
    resume_command: str | None = None

    @property
    def budget_work(self) -> float | None:
        """The work every operator runs with, or None when there is none or it differs (each
        manifest entry's ``work`` says)."""
        works = {recorded_work(work) for work in self.works}
        return works.pop() if len(works) == 1 else None


@dataclass
class CampaignRun:
    """What a campaign did: ``entries`` (one summary per written or kept certificate, in operator
    order), ``failed`` (failure records), ``kept`` (how many were kept from an earlier run) and the
    :class:`~softrank_cert.plumbing.campaign.Campaign` itself (its manifest)."""

    entries: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    kept: int
    campaign: Campaign


def bracket_targets(text: str, names: list[str], *, several: bool = False, resume: bool = False, force: bool = False,
                    inputs: dict[str, Path] | None = None) -> tuple[Path, list[Path]]:
    """``--out`` and the certificate file of each operator, checked before any work (exit 2).

    ``--out`` is a folder when it ends in ``/``, names an existing folder, or there are several
    operators (``--all``): operator NAME then goes to ``FOLDER/NAME.json``.  Otherwise it is
    the certificate file itself.  No target may be one of ``inputs`` or a key file; an existing
    one is replaced only with ``force`` (in a campaign folder also with ``resume``), and a
    folder that holds a campaign is refused without either (:func:`check_campaign_start`).
    """
    out = Path(text)
    probed: set[Path] = set()
    if several or len(names) > 1 or text.endswith(("/", os.sep)) or out.is_dir():
        if out.suffix == ".json" and not out.is_dir() and not text.endswith(("/", os.sep)):
            raise InvalidInputError(f"--out {text}: with several operators --out must be a folder, not a .json file")
        check_output_folder(text, "--out", probed=probed)
        check_campaign_start(out / MANIFEST_NAME, "--out", resume=resume, force=force)
        targets = certificate_paths(out, names)
        for target in targets:
            check_output_file(target, "--out", probed=probed, force=force or resume, inputs=inputs)
        return out, targets
    return out, [check_output_file(text, "--out", probed=probed, force=force, inputs=inputs)]


def brackets_summary(rows: list[dict[str, Any]], seconds: float | None = None) -> str:
    """``eps 0.1 [5, 7], 0.25 3 (resolved) in 4.0 s`` for bracket rows with ``eps``, ``lower``, ``upper``."""
    ends = ", ".join(f"{b['eps']} {b['lower']} (resolved)" if b["lower"] == b["upper"] else f"{b['eps']} [{b['lower']}, {b['upper']}]"
                     for b in rows)
    return f"eps {ends}" + (f" in {seconds:.1f} s" if seconds is not None else "")


def recorded_work(work: float | None) -> float | None:
    """A work bound as a manifest records it: the number, or None when it is unbounded or unset."""
    return float(work) if work is not None and math.isfinite(work) else None


def entry(item: NamedOperator, target: Path, rows: list[dict[str, Any]], seconds: float | None, signed: bool,
          resumed: bool = False) -> dict[str, Any]:
    """The report's summary of one operator's certificate (no arrays)."""
    value = {"operator": item.name, "certificate": str(target),
             "seconds": None if seconds is None else round(seconds, 3), "p": item.operator.p, "signed": signed,
             "brackets": rows}
    if resumed:
        value["resumed"] = True
    return value


def expected_provenance(item: NamedOperator, device: str | None) -> dict[str, Any]:
    """The provenance a certificate of ``item`` carries: the panel's, and off the numpy path the
    record of the search's device (so that a resume with ``--device`` keeps what that device wrote)."""
    if device is None:
        return dict(item.provenance)
    from ..solvers import resolve_device
    from .bracketing import search_provenance

    return search_provenance(item.provenance, resolve_device(device, item.operator.shape))


def start(plan: CampaignPlan, inputs: dict[str, Path]) -> tuple[Campaign, dict[int, dict[str, Any]]]:
    """The campaign (its manifest written before any work) and, with ``resume``, the certificates
    kept (index -> summary entry, re-derived from the kernel's verdicts on each)."""
    from ..certio.signing import did_key

    manifest_path = plan.out / MANIFEST_NAME
    check_output_file(manifest_path, "--out", force=True, inputs=inputs)  # a campaign there: check_campaign_start
    signer = did_key(plan.key.public_key()) if plan.key is not None else None
    parameters = {"panel": {"path": str(plan.panel), "sha256": file_sha256(plan.panel),
                            "operators": len(plan.operators)},
                  "tolerances": plan.eps_list, "budget_seconds": budget_json(plan.budget_seconds),
                  "budget_work": plan.budget_work, "max_memory": plan.max_memory,
                  "jobs": plan.jobs, "scheduler": plan.scheduler, "signer": signer}
    entries = [(item.name, {"operator_sha256": operator_sha256(item.operator),
                            "output": target.relative_to(plan.out).as_posix(), "work": recorded_work(work),
                            "estimated_bytes": operator_task_bytes(item.operator, plan.device, plan.given_memory)})
               for item, target, work in zip(plan.operators, plan.targets, plan.works)]
    campaign = Campaign(manifest_path, "bracket", parameters, entries, resume=plan.resume, force=plan.force,
                        must_match={"tolerances": "--eps"}, resume_command=plan.resume_command)
    kept: dict[int, dict[str, Any]] = {}
    if plan.resume:
        for i, (item, target) in enumerate(zip(plan.operators, plan.targets)):
            if not target.is_file():
                continue
            verification, why = recheck_certificate(read_kept_bytes(target), str(target), item.name, item.operator,
                                                    plan.eps_list, signer=signer,
                                                    provenance=expected_provenance(item, plan.device))
            if verification is None:
                campaign.note(item.name, f"recomputed: {why}")
                continue
            campaign.keep(item.name, campaign.recorded(item.name) or {})
            seconds = campaign.manifest.operators[item.name]["seconds"]
            # every claim of these brackets was just VERIFIED by the kernel: they are what is reported
            kept[i] = entry(item, target, bracket_rows(verification.certificate.brackets), seconds,
                            plan.key is not None,
                            resumed=True)
    campaign.save()
    return campaign, kept


def run_campaign(plan: CampaignPlan, inputs: dict[str, Path], bar: Any) -> CampaignRun:
    """Run the campaign of ``plan`` (its outputs checked by the caller; ``inputs``: the files no
    output may replace), reporting on ``bar`` (an :class:`~softrank_cert.util.progress.Progress`
    over the plan's operators; a finished operator's line is :func:`brackets_summary`).  Every
    certificate written was VERIFIED in this process first; a failed or refused operator is
    recorded in the manifest with the reason and the campaign goes on."""
    campaign, kept = start(plan, inputs)
    entries: dict[int, dict[str, Any]] = dict(kept)
    failed: list[dict[str, Any]] = []
    operators = plan.operators
    todo = [i for i in range(len(operators)) if i not in kept]
    with campaign.running():
        for i in kept:
            bar.advance(operators[i].name)
            bar.finished(operators[i].name, "kept (resumed: verified certificate)")
        for work in dict.fromkeys(plan.works[i] for i in todo):  # one pool per work bound, in operator order
            group = [i for i in todo if plan.works[i] == work]
            results = run_brackets([(operators[i].operator, operators[i].name, operators[i].provenance) for i in group],
                                   plan.eps_list, work=work, budget_seconds=plan.budget_seconds, jobs=plan.jobs,
                                   scheduler=plan.scheduler, progress=bar.stage_callback,
                                   memory=[operator_task_bytes(operators[i].operator, plan.device, plan.given_memory)
                                           for i in group],
                                   max_memory=plan.max_memory, device=plan.device, given_memory=plan.given_memory,
                                   done=_advance(bar, [operators[i].name for i in group]))
            with closing(results):
                for outcome in results:
                    _record(plan, campaign, group[outcome.index], outcome, bar, entries, failed)
    campaign.finish(failed=bool(failed))
    return CampaignRun([entries[i] for i in sorted(entries)], failed, len(kept), campaign)


def run_single(item: NamedOperator, target: Path, eps_list: list[str], work: float | None,
               budget_seconds: float | None, bar: Any, *, key: Any = None, jobs: int = 1, scheduler: str | None = None,
               max_memory: int | None = None, device: str | None = None,
               given_memory: int | None = None) -> dict[str, Any]:
    """One operator to one certificate file ``target`` (checked by the caller; no manifest): its
    search (``work`` as ``--work`` gives it: None, the driver's default), the certificate VERIFIED
    in this process written (signed with ``key``), reported on ``bar``; returns its summary entry
    (:func:`entry`); ``given_memory`` as for :class:`CampaignPlan`.  A failure is the caller's error (raised)."""
    with closing(run_brackets([(item.operator, item.name, item.provenance)], eps_list, work=work,
                              budget_seconds=budget_seconds, jobs=jobs, scheduler=scheduler,
                              progress=bar.stage_callback,
                              memory=[operator_task_bytes(item.operator, device, given_memory)],
                              max_memory=max_memory, done=lambda i: bar.advance(item.name), device=device,
                              given_memory=given_memory)) as results:
        (outcome,) = list(results)
    issued = outcome.unwrap()
    write_json_atomic(target, issued.signed(key))
    bar.finished(item.name, brackets_summary(issued.rows, issued.seconds))
    return entry(item, target, issued.rows, issued.seconds, key is not None)


def _advance(bar: Any, names: list[str]) -> Callable[[int], None]:
    """The ``done(j)`` callback of a pool over operators ``names``: count ``names[j]`` on ``bar``."""
    return lambda j: bar.advance(names[j])


def _record(plan: CampaignPlan, campaign: Campaign, i: int, outcome: Any, bar: Any,
            entries: dict[int, dict[str, Any]], failed: list[dict[str, Any]]) -> None:
    """Write operator ``i``'s certificate (or record its failure) and report it."""
    item, target = plan.operators[i], plan.targets[i]
    if not outcome.ok:
        record = campaign.failed(item.name, outcome)
        failed.append(record)
        bar.finished(item.name, f"{record['status'].upper()}: {outcome.failure}")
        if bar.tty:  # the bar shows no lines
            print(f"{bar.prog}: {plain_text(item.name)}: {record['status']}: {outcome.failure}", file=sys.stderr)
        return
    issued = outcome.value
    write_json_atomic(target, issued.signed(plan.key))
    campaign.done(item.name, outcome, issued.seconds)
    bar.finished(item.name, brackets_summary(issued.rows, issued.seconds))
    entries[i] = entry(item, target, issued.rows, issued.seconds, plan.key is not None)
