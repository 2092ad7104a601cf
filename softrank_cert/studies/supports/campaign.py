"""A supports sweep as a campaign (UNTRUSTED study logic): certificates, manifest, resume.

Everything campaign-specific of ``softrank supports`` is here, on the campaign runner
:class:`~softrank_cert.plumbing.campaign.Campaign` exactly as ``softrank bracket`` uses it
(``docs/campaigns.md``):

* every point (one kappa) is one operator named :func:`~.points.point_name`; with
  ``out`` its certificate (:func:`~softrank_cert.certio.issuing.certificate_for`, signed with
  ``key`` when one is given) goes to ``OUT/NAME.json`` and the manifest
  ``OUT/softrank-campaign.json`` is rewritten atomically after every point;
* ``resume`` keeps a point only when its certificate is re-verified by the kernel (every claim
  VERIFIED, signed by ``key`` when one is given), is about the same operator bit for bit, has
  exactly the sweep's tolerance and the point's provenance
  (:func:`~softrank_cert.plumbing.campaign.recheck_certificate`); its ends and methods are then
  those verified claims, its row spread and geometry rows are recomputed (deterministic), only
  its seconds come from the earlier manifest;
* a resume with another sweep (support, ``--dim``, ``--n``, the x points) or another ``--eps``
  is refused with exit 2 naming both values; Ctrl-C or SIGTERM records ``interrupted`` and
  exits 130 naming the exact ``--resume`` command.

The points run as :func:`~softrank_cert.studies.supports.points.support_point_task` tasks
through :func:`~softrank_cert.plumbing.parallel.run_tasks` (``jobs`` worker processes or a Dask
``scheduler``); a failed task is recorded (manifest ``failed``, a failure record in the
report) and the sweep goes on (the command then exits 6).  Each search is bounded by work as
in ``softrank bracket`` (``work``; default the driver's work for the operator's size), with an
optional wall cap ``budget_seconds``; the manifest and report record ``budget_work``.
"""

from __future__ import annotations

from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from .points import (SweepPoint, point_details, point_from_task, point_name, provenance,
                     support_point_task)

#: Sweep parameters a resume may not change, and the option that sets each.
SWEEP_OPTIONS = {"support": "SUPPORT", "dim": "--dim", "n": "--n", "kappas": "--kappas (or --x-min/--x-max/--points)"}


@dataclass
class CampaignResult:
    """The points that finished (kappa order), the failures and the manifest's bookkeeping."""

    points: list[SweepPoint]
    budget_work: float | None = None
    failed: list[dict[str, Any]] = field(default_factory=list)
    manifest: str | None = None
    computed: int = 0
    kept: int = 0

    def to_json(self) -> dict[str, Any] | None:
        if self.manifest is None:
            return None
        return {"manifest": self.manifest, "computed": self.computed, "kept": self.kept, "failed": len(self.failed)}


def check_campaign_folder(out: str | None, resume: bool, force: bool = False) -> Path | None:
    """``--out`` as a folder checked before any work (exit 2); ``--resume`` needs one, and a
    folder that holds a campaign needs ``--resume`` or ``--force``
    (:func:`~softrank_cert.plumbing.campaign.check_campaign_start`)."""
    from ...plumbing.campaign import MANIFEST_NAME, check_campaign_start
    from ...util.files import check_output_folder

    if out is None:
        if resume:
            raise InvalidInputError("--resume needs --out DIR (the folder of the earlier run's certificates)")
        return None
    if Path(out).suffix == ".json" and not Path(out).is_dir():
        raise InvalidInputError(f"--out {out}: a supports sweep writes one certificate per point; give a folder")
    folder = check_output_folder(out, "--out")
    check_campaign_start(folder / MANIFEST_NAME, "--out", resume=resume, force=force)
    return folder


def run_campaign(support: str, dim: int, n: int, eps: str, kappas: tuple[float, ...], *,
                 work: float | None = None, budget_seconds: float | None = None, ranks: list[int] | None,
                 out: Path | None = None, resume: bool = False, force: bool = False, key: Any = None, jobs: int = 1,
                 scheduler: str | None = None, max_memory: int | None = None, bar: Any = None,
                 resume_command: str | None = None, device: Any = None) -> CampaignResult:
    """Bracket the support operator at every kappa, write the certificates and the manifest when
    ``out`` is given, keep re-verified ones with ``resume`` (module docstring; ``force``: replace
    the certificates and start the campaign there again, keeping its run history).  ``bar``: an
    :class:`~softrank_cert.util.progress.Progress` (stage names in process);
    ``resume_command``: the line an interruption names to continue; ``device``: where the
    searches run (resolved once here, :mod:`~softrank_cert.solvers.device`)."""
    from ...certio.issuing import signed
    from ...geometry.supports import support_operator
    from ...plumbing.certificate_files import certificate_paths
    from ...util.files import check_output_file, write_json_atomic
    from ...util.memory import operator_task_bytes, recheck_reserve
    from ...plumbing.parallel import in_process, run_tasks

    names = [point_name(support, dim, n, eps, kappa) for kappa in kappas]
    if len(set(names)) != len(names):
        raise InvalidInputError("two kappas agree to 6 significant digits: their points would share a name")
    ops = [support_operator(support, dim, n, kappa) for kappa in kappas]
    from ...solvers import effective_work, resolve_device

    where = resolve_device(device, ops[0].shape)
    budget_work = effective_work(work, budget_seconds, *ops[0].shape)
    targets = [check_output_file(path, "--out", force=force or resume)
               for path in certificate_paths(out, names)] if out else []
    campaign, kept = (_start(support, dim, n, eps, kappas, names, ops, targets, out, budget_work, budget_seconds,
                             ranks, resume, force, key, jobs, scheduler, max_memory, resume_command, where)
                      if out else (None, {}))
    points: dict[int, SweepPoint] = dict(kept)
    todo = [i for i in range(len(kappas)) if i not in kept]
    here = in_process(jobs, scheduler, len(todo))
    result = CampaignResult([], budget_work, manifest=None if campaign is None else str(campaign.path), kept=len(kept))
    with campaign.running() if campaign is not None else nullcontext():
        for i in kept:
            if bar is not None:
                bar.advance(names[i])
                bar.finished(names[i], "kept (resumed: verified certificate)")
        tasks = [(support, dim, n, kappas[i], eps, budget_work, budget_seconds, ranks,
                  bar.stage_callback(names[i]) if bar is not None and here else None, where) for i in todo]
        outcomes = run_tasks(support_point_task, tasks, jobs=jobs, scheduler=scheduler, max_memory=max_memory,
                             memory=[operator_task_bytes(ops[i], where.kind) for i in todo],
                             reserve=recheck_reserve(ops[i] for i in todo) if campaign is not None else 0,
                             done=lambda j: bar.advance(names[todo[j]]) if bar is not None else None)
        with closing(outcomes):
            for outcome in outcomes:
                i = todo[outcome.index]
                if outcome.ok and campaign is not None and not here:  # its certificate is written: re-verified here
                    outcome = _rechecked(outcome, names[i], ops[i], eps,
                                         {**provenance(support, dim, n, kappas[i]), **where.provenance()})
                if not outcome.ok:
                    record = _failure(campaign, names[i], kappas[i], outcome)
                    result.failed.append(record)
                    if bar is not None:
                        bar.finished(names[i], f"{record['status'].upper()}: {outcome.failure}")
                    continue
                point = point_from_task(kappas[i], eps, ops[i].p, outcome.value)
                if campaign is not None:
                    write_json_atomic(targets[i], signed(outcome.value["certificate"], key))
                    point.certificate = str(targets[i])
                    campaign.done(names[i], outcome, outcome.value["seconds"])
                result.computed += 1
                points[i] = point
                if bar is not None:
                    bar.finished(names[i], f"x {float(point.x):.6g}: [{point.lower}, {point.upper}] "
                                           f"in {point.seconds:.1f} s")
    if campaign is not None:
        campaign.finish(failed=bool(result.failed))
    result.points = [points[i] for i in sorted(points)]
    return result


def _rechecked(outcome: Any, name: str, op: Any, eps: str, point_provenance: dict[str, Any]) -> Any:
    """The outcome of a point that ran in another process, its certificate re-verified in this one
    before it is signed and written (:func:`~softrank_cert.plumbing.campaign.recheck_from_worker`:
    every claim VERIFIED, the point's operator bit for bit, exactly ``eps``, the point's
    provenance): passed on with the certificate that was verified (the point's ends are read from
    it), or a failure saying why (:func:`~softrank_cert.plumbing.campaign.rechecked_outcome`), the
    kernel's checks within the task's check budget.  Without ``--out`` nothing is written and the points' numbers
    are reported as the workers computed them."""
    from ...plumbing.campaign import rechecked_outcome
    from ...util.memory import operator_check_limit

    value = outcome.value
    document = value.get("certificate") if isinstance(value, dict) else None
    return rechecked_outcome(outcome, name, op, point_provenance, {"": (document, [eps])},
                             lambda verified: {**value, "certificate": verified[""][0]}, operator_check_limit(op))


def _failure(campaign: Any, name: str, kappa: float, outcome: Any) -> dict[str, Any]:
    """A point's failure record (and, in a campaign, its manifest entry)."""
    from ...plumbing.campaign import failure_record

    record = campaign.failed(name, outcome) if campaign is not None else failure_record(outcome, name)
    return {"point": name, "kappa": kappa, "status": record["status"], "reason": record["reason"],
            "attempts": record["attempts"], "exit_code": outcome.exit_code}


def _refuse_other_sweep(path: Path, sweep: dict[str, Any]) -> None:
    """Exit 2 when the campaign in ``path`` is of another sweep (:data:`SWEEP_OPTIONS`), naming both."""
    from ...plumbing.campaign import MAX_MANIFEST_BYTES
    from ...util.files import loads_unique, read_regular_file

    try:
        previous = loads_unique(read_regular_file(path, MAX_MANIFEST_BYTES, "manifest"))
    except (InvalidInputError, ValueError, UnicodeDecodeError, RecursionError):
        return  # no manifest (or not one of ours): the runner starts afresh
    before = previous.get("sweep") if isinstance(previous, dict) and previous.get("command") == "supports" else None
    if not isinstance(before, dict):
        return  # another command's manifest: the runner refuses it
    for key, option in SWEEP_OPTIONS.items():
        if before.get(key) != sweep[key]:
            raise InvalidInputError(
                f"--resume: the campaign in {path} was run with {option} {_shown(before.get(key))}, this run asks "
                f"for {option} {_shown(sweep[key])}; resume it with the same {option}, or start a new campaign "
                "(another --out, without --resume)")


def _shown(value: Any) -> str:
    """A sweep parameter as a refusal names it (kappas comma-separated, in float64 shortest form)."""
    if isinstance(value, list):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


def _start(support: str, dim: int, n: int, eps: str, kappas: tuple[float, ...], names: list[str], ops: list[Any],
           targets: list[Path], out: Path, budget_work: float | None, budget_seconds: float | None,
           ranks: list[int] | None, resume: bool, force: bool, key: Any, jobs: int, scheduler: str | None,
           max_memory: int | None, resume_command: str | None, where: Any) -> tuple[Any, dict[int, SweepPoint]]:
    """The campaign (its manifest written before any work) and, with ``resume``, the points kept
    (index -> point, its ends the kernel's verified claims of its certificate)."""
    from ...certio.signing import did_key
    from ...plumbing.campaign import MANIFEST_NAME, Campaign, budget_json, operator_sha256, recheck_certificate
    from ...plumbing.campaign_inputs import read_kept_bytes
    from ...util.files import check_output_file
    from ...util.memory import operator_task_bytes

    path = check_output_file(out / MANIFEST_NAME, "--out", force=True)  # a campaign there: check_campaign_folder
    signer = did_key(key.public_key()) if key is not None else None
    sweep = {"support": support, "dim": dim, "n": n, "kappas": list(kappas), "geometry_ranks": ranks or []}
    if resume:
        _refuse_other_sweep(path, sweep)
    parameters = {"sweep": sweep, "tolerances": [eps], "budget_seconds": budget_json(budget_seconds),
                  "budget_work": budget_work, "max_memory": max_memory, "jobs": jobs, "scheduler": scheduler,
                  "signer": signer}
    entries = [(name, {"operator_sha256": operator_sha256(op), "output": target.relative_to(out).as_posix(),
                       "estimated_bytes": operator_task_bytes(op, where.kind)})
               for name, op, target in zip(names, ops, targets)]
    campaign = Campaign(path, "supports", parameters, entries, resume=resume, force=force,
                        must_match={"tolerances": "--eps"},
                        resume_command=resume_command)
    kept: dict[int, SweepPoint] = {}
    if resume:
        for i, (name, op, target) in enumerate(zip(names, ops, targets)):
            if not target.is_file():
                continue
            report, why = recheck_certificate(read_kept_bytes(target), str(target), name, op, [eps], signer=signer,
                                              provenance={**provenance(support, dim, n, kappas[i]),
                                                          **where.provenance()})
            if report is None:
                campaign.note(name, f"recomputed: {why}")
                continue
            campaign.keep(name, campaign.recorded(name) or {})
            seconds = campaign.manifest.operators[name]["seconds"]
            # every claim of this bracket was just VERIFIED by the kernel: it is what is reported
            (b,) = report.certificate.brackets
            details = point_details(op, eps, b.lower.k, ranks)
            kept[i] = SweepPoint(float(kappas[i]), eps, b.lower.k, b.upper.r, op.p, b.lower.method,
                                 b.upper.construction, seconds, details["geometry"], details["spread"],
                                 certificate=str(target), resumed=True)
    campaign.save()
    return campaign, kept
