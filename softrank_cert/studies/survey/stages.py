"""The survey's stages, run in order (UNTRUSTED orchestration of the panel capture, the bracket
campaign and the report page).

:data:`STAGES` is the list ``panel`` -> ``brackets`` -> ``kv-budgets`` -> ``report``; each stage is a
:class:`Stage` whose ``run(survey)`` reads only what earlier stages wrote into the survey
folder (by the names of :mod:`.plan`) and returns its summary for ``--json``.  :func:`run_survey`
records each stage's status and CPU and wall seconds in ``survey.json`` as it goes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from ...models.capture import ModelSource
from .plan import CERTS_NAME, FIGURES_NAME, MANIFEST_NAME, PAGE_NAME, PANEL_NAME, SurveyManifest, Work

PROG = "softrank survey"


@dataclass
class Survey:
    """One survey's inputs (checked by the front end) and what its stages found."""

    out: Path
    source: ModelSource
    document: Path
    image: bool
    widths: list[int] | None
    layers: list[int] | None
    heads: list[int] | None
    eps_list: list[str]
    work: Work
    key: Any = None
    jobs: int = 1
    max_memory: int | None = None
    max_cpu_seconds: float | None = None
    resume: bool = False
    force: bool = False
    resume_command: str | None = None
    bar: bool = True
    inputs: dict[str, Path] = field(default_factory=dict)
    manifest: SurveyManifest | None = None
    failed: bool = False

    def say(self, line: str) -> None:
        """One line on stderr (unless --quiet): the estimate, a stage starting."""
        from ...util.progress import is_quiet

        if not is_quiet():
            print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Stage:
    """A named step of the survey: ``run(survey)`` returns its ``--json`` summary."""

    name: str
    run: Callable[[Survey], dict[str, Any]]


def _same_panel(path: Path, arrays: dict[str, Any]) -> bool:
    """Whether the panel file at ``path`` holds exactly ``arrays`` (names, dtypes, shapes, values)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as kept:
            if sorted(kept.files) != sorted(arrays):
                return False
            return all(kept[name].dtype == np.asarray(arrays[name]).dtype
                       and np.array_equal(kept[name], arrays[name]) for name in arrays)
    except (OSError, ValueError):
        return False


def capture(survey: Survey) -> dict[str, Any]:
    """Stage ``panel``: run the model on the document; a resumed survey keeps its panel only when
    the capture gives it again bit for bit (else the new capture replaces it, and the
    ``brackets`` stage recomputes every certificate that is not about it)."""
    from ...models import provenance_names, write_panel
    from ...models.capture import capture_panel
    from ...util.progress import Progress

    with Progress(PROG, bar=survey.bar) as bar:
        arrays = capture_panel(survey.source, survey.document, survey.widths, layers=survey.layers,
                               heads=survey.heads, image=survey.image, stage=bar.stage)
    path = survey.out / PANEL_NAME
    kept = survey.resume and path.is_file() and _same_panel(path, arrays)
    if not kept:
        write_panel(path, arrays)
    return {"panel": str(path), "operators": len(provenance_names(arrays)), "kept": kept}


def brackets(survey: Survey) -> dict[str, Any]:
    """Stage ``brackets``: the bracket campaign of every head of the panel into ``OUT/certs``,
    after the estimate of its CPU time (refused, before any search, beyond ``--max-cpu-minutes``)."""
    from ...plumbing.bracket_campaign import CampaignPlan, bracket_targets, run_campaign
    from ...plumbing.campaign import check_manifest_clear
    from ...util.operator_files import load_operators
    from ...util.progress import Progress
    from .plan import check_estimate, estimate, estimate_lines

    panel, certs = survey.out / PANEL_NAME, survey.out / CERTS_NAME
    operators = load_operators(panel, None)
    shapes = [item.operator.shape for item in operators]
    found = estimate(survey.work, shapes)
    for line in estimate_lines(PROG, found):
        survey.say(line)
    if survey.manifest is not None:
        survey.manifest.data["estimate"] = found
        survey.manifest.save()
    check_estimate(found, survey.max_cpu_seconds)
    names = [item.name for item in operators]
    check_manifest_clear(names)
    _, targets = bracket_targets(f"{certs}{os.sep}", names, several=True, resume=survey.resume, force=survey.force,
                                 inputs=survey.inputs)
    plan = CampaignPlan(certs, panel, operators, targets, survey.eps_list,
                        [survey.work.units_for(*shape) for shape in shapes], None, key=survey.key, jobs=survey.jobs,
                        max_memory=survey.max_memory, resume=survey.resume, force=survey.force,
                        resume_command=survey.resume_command)
    with Progress(PROG, len(operators), bar=survey.bar) as bar:
        done = run_campaign(plan, {**survey.inputs, "panel": panel}, bar)
    survey.failed = survey.failed or bool(done.failed)
    return {"folder": str(certs), "computed": done.campaign.run["computed"], "kept": done.kept,
            "failed": done.failed, "operators": done.entries, "estimate": found}


def report(survey: Survey) -> dict[str, Any]:
    """Stage ``report``: the page ``OUT/report.html`` and its figures (every certificate
    re-verified), written together."""
    from ...util.progress import Progress
    from .page import kv_shortfall, write_survey_page

    with Progress(PROG, bar=survey.bar, unit="certificates") as progress:
        doc = write_survey_page(survey.out, survey.out / PAGE_NAME, progress=progress)
    survey.failed = survey.failed or bool(doc["summary"]["failed"] or doc["summary"]["missing"] or kv_shortfall(doc))
    return {"page": str(survey.out / PAGE_NAME), "figures": str(survey.out / FIGURES_NAME), "summary": doc["summary"]}


def kv_budgets(survey: Survey) -> dict[str, Any]:
    """Stage ``kv-budgets``: certified KV-cache budgets of every head (``softrank kv-budgets
    OUT/certs`` with StreamingLLM and H2O at their defaults; ``proofs/kv-budgets.md``), the
    policy certificates in ``OUT/certs/kv-budgets/`` and ``OUT/certs/kv_budgets.json``."""
    from ...util.progress import Progress
    from ..kv_budgets.folder import certify_folder, check_outputs
    from ..kv_budgets.policies import Policy
    from ..kv_budgets.study import REPORT_NAME

    certs = survey.out / CERTS_NAME
    check_outputs(certs, [], list(KV_POLICIES), survey.inputs, survey.resume or survey.force)
    policies = [Policy(name) for name in KV_POLICIES]
    with Progress(PROG, bar=survey.bar, unit="heads") as progress:
        found = certify_folder(certs, policies, None, stage=progress.stage, resume=survey.resume, force=survey.force,
                               key=survey.key, inputs=survey.inputs)
    survey.failed = survey.failed or bool(found["failed"])
    return {"report": str(certs / REPORT_NAME), "policies": list(KV_POLICIES), "failed": len(found["failed"]),
            "heads": sum(1 for r in found["operators"] if r["status"] == "done")}


#: The eviction policies the survey certifies budgets for (``softrank kv-budgets`` takes others).
KV_POLICIES = ("streaming-llm", "h2o")
#: The survey's stages, in order (another stage joins this list).
STAGES: list[Stage] = [Stage("panel", capture), Stage("brackets", brackets), Stage("kv-budgets", kv_budgets),
                       Stage("report", report)]


def parameters(survey: Survey) -> dict[str, Any]:
    """What a resume must match, as ``survey.json`` records it."""
    from ...plumbing.campaign import file_sha256

    return {"model": survey.source.label, "document": str(survey.document),
            "document_sha256": file_sha256(survey.document), "image": survey.image, "widths": survey.widths,
            "layers": survey.layers, "heads": survey.heads, "tolerances": survey.eps_list, "work": survey.work.name,
            "signer": None if survey.key is None else _signer(survey.key)}


def _signer(key: Any) -> str:
    from ...certio.signing import did_key

    return did_key(key.public_key())


def say_estimate(survey: Survey) -> None:
    """Before any work: the CPU seconds per head at each width, at the chosen work and each level,
    and the total for the heads ``layers`` and ``heads`` select (counted from the model's metadata
    where they are not given); a total over ``max_cpu_seconds`` is refused here, before the
    capture.  Without the widths (a vision model: its width comes from the model) the estimate
    follows the capture, before any search (stage ``brackets``)."""
    from ...models.capture import head_counts
    from .plan import check_estimate, estimate, estimate_lines

    if not survey.widths:
        return
    per_width = [(w, w) for w in survey.widths]
    counts = None if (survey.layers and survey.heads) else head_counts(survey.source)
    layers = len(set(survey.layers)) if survey.layers else (counts[0] if counts else None)
    heads = len(set(survey.heads)) if survey.heads else (counts[1] if counts else None)
    if layers is None or heads is None:
        for line in estimate_lines(PROG, estimate(survey.work, per_width))[:-1]:
            survey.say(line)
        return
    found = estimate(survey.work, per_width * layers * heads)
    for line in estimate_lines(PROG, found):
        survey.say(line)
    check_estimate(found, survey.max_cpu_seconds)


def check_resume(survey: Survey) -> dict[str, Any] | None:
    """The previous ``survey.json`` (with ``--resume`` or ``--force``), after refusing (exit 2,
    before any work) a resume whose parameters differ from the recorded ones."""
    previous = SurveyManifest.read(survey.out / MANIFEST_NAME) if survey.resume or survey.force else None
    wanted = parameters(survey)
    if survey.resume and previous is not None and previous.get("parameters") != wanted:
        changed = [k for k in wanted if (previous.get("parameters") or {}).get(k) != wanted[k]]
        raise InvalidInputError(f"--resume: the survey in {survey.out} was run with other {', '.join(changed)}; resume "
                                "it with the same options, or start a new survey (another --out, or --force)")
    return previous


def run_survey(survey: Survey, stages: list[Stage] | None = None) -> dict[str, Any]:
    """Run ``stages`` (default :data:`STAGES`) in order, recording each in ``OUT/survey.json``;
    returns every stage's summary by name.  A resume whose parameters differ from the recorded
    ones is refused (exit 2) before any work."""
    stages = STAGES if stages is None else stages
    previous = check_resume(survey)
    survey.manifest = SurveyManifest(survey.out / MANIFEST_NAME, parameters(survey), [stage.name for stage in stages],
                                     previous)
    survey.manifest.save()
    summaries: dict[str, Any] = {}
    for stage in stages:
        survey.say(f"{PROG}: stage {stage.name}")
        survey.manifest.stage(stage.name, status="running")
        cpu, wall = _cpu(), time.perf_counter()
        try:
            summaries[stage.name] = stage.run(survey)
        except BaseException:
            survey.manifest.stage(stage.name, status="failed", cpu_seconds=round(_cpu() - cpu, 3),
                                  wall_seconds=round(time.perf_counter() - wall, 3))
            raise
        survey.manifest.stage(stage.name, status="done", cpu_seconds=round(_cpu() - cpu, 3),
                              wall_seconds=round(time.perf_counter() - wall, 3))
        survey.say(f"{PROG}: stage {stage.name} done ({_seconds(_cpu() - cpu)} s CPU, "
                   f"{_seconds(time.perf_counter() - wall)} s wall)")
    survey.manifest.data["state"] = "incomplete" if survey.failed else "complete"
    survey.manifest.save()
    return summaries


def _cpu() -> float:
    """CPU seconds of this process and of its finished worker processes."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _seconds(value: float) -> str:
    from ...util.progress import seconds_text

    return seconds_text(value)
