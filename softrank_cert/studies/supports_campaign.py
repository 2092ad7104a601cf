"""A supports sweep as a campaign (UNTRUSTED study logic): certificates, manifest, resume.

Everything campaign-specific of ``softrank supports`` is here, on the public interface of
:mod:`softrank_cert.plumbing.campaign` (``Manifest``, ``reusable_certificate``) as
``softrank bracket`` uses it:

* every point (one kappa) is one operator named :func:`point_name`; with ``out`` its
  certificate (:func:`~softrank_cert.certio.issuing.certificate_for`, signed with ``key``
  when one is given) goes to ``OUT/NAME.json`` and the manifest ``OUT/softrank-campaign.json``
  is rewritten atomically after every point;
* ``resume`` keeps a point only when its certificate exists, re-verifies (every claim
  VERIFIED by the kernel), is about the same operator bit for bit and has exactly the sweep's
  tolerance (``reusable_certificate``); its ends then come from the certificate, its row spread
  and geometry rows are recomputed (deterministic), its seconds from the earlier manifest.

The points run as :func:`~softrank_cert.studies.supports.support_point_task` tasks through
:func:`~softrank_cert.plumbing.parallel.run_tasks` (``jobs`` worker processes or a Dask
``scheduler``); a failed task is recorded (manifest ``failed``) and the sweep goes on.
"""

from __future__ import annotations

import sys
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError, SoftrankError
from .supports import SweepPoint, point_details, point_from_task, support_point_task


def point_name(support: str, dim: int, n: int, eps: str, kappa: float) -> str:
    """The operator name (and certificate file stem) of one point, e.g. ``ball-d1-n1024-eps0.25-kappa16``."""
    return f"{support}-d{dim}-n{n}-eps{eps}-kappa{kappa:.6g}"


@dataclass
class CampaignResult:
    """The points that finished (kappa order), the failures and the manifest's bookkeeping."""

    points: list[SweepPoint]
    failed: list[dict[str, Any]] = field(default_factory=list)
    manifest: str | None = None
    computed: int = 0
    kept: int = 0

    def to_json(self) -> dict[str, Any] | None:
        if self.manifest is None:
            return None
        return {"manifest": self.manifest, "computed": self.computed, "kept": self.kept, "failed": len(self.failed)}


def check_campaign_folder(out: str | None, resume: bool) -> Path | None:
    """``--out`` as a folder checked before any work (exit 2); ``--resume`` needs one."""
    from ..plumbing.files import check_output_folder

    if out is None:
        if resume:
            raise InvalidInputError("--resume needs --out DIR (the folder of the earlier run's certificates)")
        return None
    if Path(out).suffix == ".json" and not Path(out).is_dir():
        raise InvalidInputError(f"--out {out}: a supports sweep writes one certificate per point; give a folder")
    return check_output_folder(out, "--out")


def run_campaign(support: str, dim: int, n: int, eps: str, kappas: tuple[float, ...], *,
                 budget_seconds: float | None, ranks: list[int] | None, out: Path | None = None,
                 resume: bool = False, key: Any = None, jobs: int = 1, scheduler: str | None = None,
                 max_memory: int | None = None, bar: Any = None) -> CampaignResult:
    """Bracket the support operator at every kappa, write the certificates and the manifest when
    ``out`` is given, keep re-verified ones with ``resume``.  ``bar``: an
    :class:`~softrank_cert.plumbing.progress.OperatorProgress` (stage names in process)."""
    from ..certio.issuing import certificate_for
    from ..geometry.supports import support_operator
    from ..plumbing.certificate_files import certificate_path
    from ..plumbing.files import check_output_file, write_json_atomic
    from ..plumbing.memory import operator_task_bytes
    from ..plumbing.parallel import run_tasks

    names = [point_name(support, dim, n, eps, kappa) for kappa in kappas]
    if len(set(names)) != len(names):
        raise InvalidInputError("two kappas agree to 6 significant digits: their points would share a name")
    ops = [support_operator(support, dim, n, kappa) for kappa in kappas]
    targets = [check_output_file(certificate_path(out, name), "--out") for name in names] if out else []
    manifest, kept = (_start(support, dim, n, eps, kappas, names, ops, targets, out, budget_seconds, ranks, resume,
                             key, jobs, scheduler, max_memory) if out else (None, {}))
    points: dict[int, SweepPoint] = dict(kept)
    for i in kept:
        if bar is not None:
            bar.advance(names[i])
            bar.finished(names[i], "kept (resumed: verified certificate)")
    todo = [i for i in range(len(kappas)) if i not in kept]
    in_process = not scheduler and (jobs <= 1 or len(todo) <= 1)
    tasks = [(support, dim, n, kappas[i], eps, budget_seconds, ranks,
              bar.stage_callback(names[i]) if bar is not None and in_process else None) for i in todo]
    result = CampaignResult([], manifest=None if manifest is None else str(manifest.path), kept=len(kept))
    try:
        outcomes = run_tasks(support_point_task, tasks, jobs=jobs, scheduler=scheduler, max_memory=max_memory,
                             memory=[operator_task_bytes(ops[i]) for i in todo],
                             done=lambda j: bar.advance(names[todo[j]]) if bar is not None else None)
        with closing(outcomes):
            for outcome in outcomes:
                i = todo[outcome.index]
                if not outcome.ok:
                    status = "refused" if outcome.refused else "failed"
                    result.failed.append({"point": names[i], "kappa": kappas[i], "status": status,
                                          "reason": outcome.failure, "exit_code": outcome.exit_code})
                    if manifest is not None:
                        manifest.update(names[i], status=status, reason=outcome.failure, attempts=outcome.attempts)
                        manifest.run["failed"] += 1
                        manifest.save()
                    if bar is not None:
                        bar.finished(names[i], f"{status.upper()}: {outcome.failure}")
                    continue
                point = point_from_task(kappas[i], eps, ops[i].p, outcome.value)
                if manifest is not None:
                    bracket = outcome.value["bracket"]
                    write_json_atomic(targets[i], certificate_for(names[i], ops[i], [bracket],
                                                                  _provenance(support, dim, n, kappas[i]), key))
                    point.certificate = str(targets[i])
                    manifest.update(names[i], status="done", seconds=round(outcome.value["seconds"], 3),
                                    task_seconds=round(outcome.seconds, 3), attempts=outcome.attempts, reason=None,
                                    resumed=False)
                    manifest.run["computed"] += 1
                    manifest.save()
                result.computed += 1
                points[i] = point
                if bar is not None:
                    bar.finished(names[i], f"x {float(point.x):.6g}: [{point.lower}, {point.upper}] "
                                           f"in {point.seconds:.1f} s")
    except KeyboardInterrupt:
        if manifest is not None:
            manifest.finish("interrupted")
            _save_quietly(manifest)
            print(f"softrank supports: interrupted; the finished points are in {out}: run the same command with "
                  "--resume to keep them and compute the rest", file=sys.stderr)
        raise
    if manifest is not None:
        manifest.finish("incomplete" if result.failed else "complete")
        manifest.save()
    result.points = [points[i] for i in sorted(points)]
    return result


def _provenance(support: str, dim: int, n: int, kappa: float) -> dict[str, Any]:
    return {"study": "softrank supports", "support": support, "dim": dim, "n": n, "kappa": repr(float(kappa)),
            "construction": "Q = kappa P, K = P, beta = 1 (softrank_cert.geometry.supports.support_operator)"}


def _save_quietly(manifest: Any) -> None:
    try:
        manifest.save()
    except SoftrankError:
        pass


def _start(support: str, dim: int, n: int, eps: str, kappas: tuple[float, ...], names: list[str], ops: list[Any],
           targets: list[Path], out: Path, budget_seconds: float | None, ranks: list[int] | None, resume: bool,
           key: Any, jobs: int, scheduler: str | None, max_memory: int | None) -> tuple[Any, dict[int, SweepPoint]]:
    """The manifest (written before any work) and, with ``resume``, the points kept."""
    from ..certio.signing import did_key
    from ..plumbing.campaign import MANIFEST_NAME, Manifest, budget_json, operator_sha256, reusable_certificate
    from ..plumbing.files import check_output_file
    from ..plumbing.memory import operator_task_bytes

    path = check_output_file(out / MANIFEST_NAME, "--out")
    signer = did_key(key.public_key()) if key is not None else None
    previous = Manifest.read(path) if resume else None
    parameters = {"sweep": {"support": support, "dim": dim, "n": n, "kappas": list(kappas), "geometry_ranks": ranks or []},
                  "tolerances": [eps], "budget_seconds": budget_json(budget_seconds), "max_memory": max_memory,
                  "jobs": jobs, "scheduler": scheduler, "signer": signer}
    entries = [(name, {"operator_sha256": operator_sha256(op), "output": target.relative_to(out).as_posix(),
                       "estimated_bytes": operator_task_bytes(op)}) for name, op, target in zip(names, ops, targets)]
    manifest = Manifest.start(path, "supports", parameters, entries, resume=resume)
    kept: dict[int, SweepPoint] = {}
    if resume:
        old = (previous or {}).get("operators", {})
        for i, (name, op, target) in enumerate(zip(names, ops, targets)):
            certificate, why = reusable_certificate(target, name, op, [eps], signer)
            if certificate is None:
                if why != "no certificate":
                    manifest.update(name, reason=f"recomputed: {why}")
                continue
            before = old.get(name) if isinstance(old.get(name), dict) else {}
            seconds = before.get("seconds") if isinstance(before.get("seconds"), (int, float)) else None
            manifest.update(name, status="done", resumed=True, seconds=seconds, finished=before.get("finished"),
                            task_seconds=before.get("task_seconds"), attempts=before.get("attempts", 0))
            manifest.run["skipped"] += 1
            (b,) = certificate.brackets
            details = point_details(op, eps, b.lower.k, ranks)
            kept[i] = SweepPoint(float(kappas[i]), eps, b.lower.k, b.upper.r, op.p, b.lower.method,
                                 b.upper.construction, seconds, details["geometry"], details["spread"],
                                 certificate=str(target), resumed=True)
    manifest.save()
    return manifest, kept
