"""Block-width budget study (UNTRUSTED study logic; every end it counts is a kernel verdict).

For an operator ``A``, one tolerance ``eps`` and a rank budget ``b`` (DESIGN.md section 6):

* **feasible** -- a VERIFIED witness of rank ``r <= b`` exists, which proves ``r_eps(A) <= b``;
* **impossible** -- a VERIFIED lower certificate of rank ``k > b`` exists, which proves
  ``r_eps(A) >= k > b``: no matrix of rank ``<= b`` is within ``eps`` of ``A``;
* **unresolved** -- neither: nothing is proved about ``b`` (``k <= b < r``).

The ends come from :func:`~softrank_cert.solvers.bracket.bracket_operator` (each verified by
the kernel), then :func:`sharpen` spends a little more effort where a budget is unresolved:
a witness at rank exactly ``b`` (truncated SVD, then the l1 polish) and a pooled lower
certificate at ``k = b + 1``, each counted only when :func:`~softrank_cert.kernel.verify_upper`
/ :func:`~softrank_cert.kernel.verify_lower` returns VERIFIED.  A bug here can only misfile a
budget as unresolved or mislabel a group; it cannot turn an unproved claim into a counted one,
because this module never builds a verdict and counts nothing the kernel did not verify.

:func:`study` runs it over every operator of some panels (``softrank budgets``): in worker
processes or on a Dask cluster, as a resumable campaign with a manifest, writing the
certificate behind every feasible / impossible class on request.
"""

from __future__ import annotations

import re
import statistics
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..certio.signing import sign_certificate
from ..errors import InternalInvariantError, InvalidInputError
from ..kernel import Operator, parse_tolerance
from ..plumbing.certificate_files import certificate_path
from ..plumbing.files import write_json_atomic
from ..plumbing.progress import OperatorProgress

if TYPE_CHECKING:
    from ..plumbing.operators_npz import NamedOperator

CLASSES = ("feasible", "impossible", "unresolved")
#: Version of the per-operator results a resumable study records (:meth:`OperatorBudgets.to_json`):
#: a resume reuses only results of this version (2: the one JSON contract).
RESULT_VERSION = 2
#: Width group of operators whose names carry no ``w<N>`` segment.
NO_WIDTH = "-"

_WIDTH = re.compile(r"w(\d+)")
_HEAD = re.compile(r"L(\d+)H(\d+)")


def parse_budgets(text: str) -> list[int]:
    """``"8,16,32"`` -> ``[8, 16, 32]`` (sorted); positive integers, no repeats, else InvalidInputError."""
    items = [part.strip() for part in str(text).split(",")]
    if not items or any(not item.isdigit() for item in items):
        raise InvalidInputError(f"--budgets expects comma-separated positive integers, got {text!r}")
    values = [int(item) for item in items]
    if min(values) < 1:
        raise InvalidInputError(f"--budgets must be >= 1, got {text!r}")
    if len(set(values)) != len(values):
        raise InvalidInputError(f"--budgets lists a budget twice: {text}")
    return sorted(values)


def name_fields(name: str, fallback_document: str) -> tuple[str, int | str, int | None, int | None]:
    """``(document, width, layer, head)`` of a panel name such as ``minilm/apache2/w128/L3H7``.

    The width is the last ``w<N>`` segment (``"-"`` when there is none) and the document the
    segment just before it; without such a segment the document is ``fallback_document`` (the
    panel's file stem).  Layer and head come from an ``L<l>H<h>`` segment (None otherwise).
    """
    parts = name.split("/")
    at = next((i for i in range(len(parts) - 1, -1, -1) if _WIDTH.fullmatch(parts[i])), None)
    width: int | str = NO_WIDTH if at is None else int(parts[at][1:])
    document = parts[at - 1] if at else fallback_document
    head = next((m for m in map(_HEAD.fullmatch, reversed(parts)) if m), None)
    return document, width, (int(head[1]) if head else None), (int(head[2]) if head else None)


def classify(lower: int, upper: int, budgets: Iterable[int]) -> dict[int, str]:
    """Class of each budget from verified ends ``lower <= r_eps <= upper`` (see the module docstring)."""
    if lower > upper:
        raise InternalInvariantError(f"verified lower end {lower} exceeds verified upper end {upper}")
    return {b: "feasible" if upper <= b else "impossible" if lower > b else "unresolved" for b in budgets}


@dataclass
class OperatorBudgets:
    """One operator's verified ends at ``eps`` and the class of every budget."""

    name: str
    document: str
    width: int | str
    layer: int | None
    head: int | None
    p: int
    eps: str
    lower: int
    upper: int
    lower_method: str
    upper_construction: str
    classes: dict[int, str]
    sharpened: list[str] = field(default_factory=list)  # ends found by the budget-targeted pass
    seconds: float = 0.0  # wall time (not deterministic; everything else is without a time budget)
    #: The unsigned certificate of the verified ends at ``eps`` (``study_operator(certificate=True)``;
    #: not part of :meth:`to_json`): what proves every feasible / impossible class.
    certificate: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def settled(self) -> bool:
        """Some budget is feasible or impossible (a certificate proves it)."""
        return any(cls != "unresolved" for cls in self.classes.values())

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "OperatorBudgets":
        """The inverse of :meth:`to_json` (a campaign manifest keeps finished operators this way)."""
        return cls(doc["operator"], doc["document"], doc["width"], doc["layer"], doc["head"], int(doc["p"]), doc["eps"],
                   int(doc["lower"]), int(doc["upper"]), doc["lower_method"], doc["upper_construction"],
                   {int(b): c for b, c in doc["classes"].items()}, list(doc["sharpened"]), float(doc["seconds"]))

    def to_json(self) -> dict[str, Any]:
        return {"operator": self.name, "document": self.document, "width": self.width, "layer": self.layer,
                "head": self.head, "p": self.p, "eps": self.eps, "lower": self.lower, "upper": self.upper,
                "lower_method": self.lower_method, "upper_construction": self.upper_construction,
                "classes": {str(b): c for b, c in self.classes.items()}, "sharpened": self.sharpened,
                "seconds": round(self.seconds, 3)}


def sharpen(op: Operator, eps: str, budgets: list[int], lower: tuple[int, str], upper: tuple[int, str],
            seconds: float | None = None, evidence: dict[str, Any] | None = None
            ) -> tuple[tuple[int, str], tuple[int, str], list[str]]:
    """Try to settle the budgets ``b`` with ``lower <= b < upper`` (ends given as ``(rank, method)``).

    Witnesses from the largest such budget down: the rank-``b`` truncated SVD, then the
    smoothed-minimax witness; a VERIFIED one proves ``r_eps <= b`` (every budget ``>= b`` feasible).  Certificates
    from the smallest budget up: ``pooled`` at ``k = b + 1 <= POOLED_MAX_K``; a VERIFIED one proves
    ``r_eps >= b + 1`` (every budget ``<= b`` impossible).  Each direction stops at its first
    failure (errors fall with rank and thresholds with k, usually: a guess that only costs
    tightness).  Only float64 candidates that look good enough go to the kernel, and only
    VERIFIED verdicts move an end.  ``seconds`` bounds the search (None: no limit).
    Returns the new ends and one note per end that moved; ``evidence`` (a dict), when given,
    receives the arrays of each moved end: ``"upper": (U, W)``, ``"lower": (X, Y)``.
    """
    from ..solvers.candidates import POOLED_MAX_K, CandidatePool
    from ..solvers.dense import Dense
    from ..solvers.settle import first_verified
    from ..solvers.work import Budget

    (k, k_method), (r, r_method) = lower, upper
    if not any(k <= b < r for b in budgets):
        return lower, upper, []
    value = float(parse_tolerance(eps))
    timed = seconds is not None and seconds != float("inf")
    prof = CandidatePool(Dense.of(op), Budget(deadline=time.perf_counter() + seconds if timed else None).until())
    notes: list[str] = []
    for b in sorted((b for b in budgets if k <= b < r), reverse=True):
        found = first_verified(op, ((eps, w) for c in ("tsvd", "smooth")
                                    if (w := prof.witness(c, b)) is not None and w.error <= value * (1 + 1e-12)))
        if found is None:
            break
        r, r_method = b, found[1].origin
        notes.append(f"upper {b} ({r_method})")
        if evidence is not None:
            evidence["upper"] = (found[1].U, found[1].W)
    for b in sorted(b for b in budgets if k <= b < r and b + 1 <= POOLED_MAX_K):
        c = prof.lower_pair("pooled", b + 1)
        if c is None or c.threshold <= value * (1 - 1e-12) or first_verified(op, [(eps, c)]) is None:
            break
        k, k_method = b + 1, c.origin
        notes.append(f"lower {b + 1} ({c.origin})")
        if evidence is not None:
            evidence["lower"] = (c.X, c.Y)
    if k > r:
        raise InternalInvariantError(f"verified lower end {k} exceeds verified upper end {r} at eps {eps}")
    return (k, k_method), (r, r_method), notes


def study_operator(spec: dict[str, Any], name: str, document: str, eps: str, budgets: list[int],
                   budget_seconds: float | None, sharpen_ends: bool = True, certificate: bool = False,
                   provenance: dict[str, Any] | None = None) -> OperatorBudgets:
    """One operator of the study (a task for ``run_ordered``; ``spec`` from ``pack_operator``).

    Brackets ``r_eps`` with kernel-verified ends (``budget_seconds`` of search), sharpens them at
    the budgets (another ``budget_seconds`` at most), classifies every budget.  With
    ``certificate``, an operator with some feasible or impossible budget also gets the unsigned
    certificate of its final ends (``.certificate``; ``provenance`` goes into it).
    """
    from ..geometry.supports import stdout_to_stderr
    from ..plumbing.parallel import unpack_operator
    from ..solvers.bracket import bracket_operator, default_budget_seconds

    op = unpack_operator(spec)
    if budget_seconds is None:
        budget_seconds = default_budget_seconds(*op.shape)
    start = time.perf_counter()
    with stdout_to_stderr():  # solver banners must not spoil --json output
        (b,) = bracket_operator(op, [eps], budget_seconds=budget_seconds)
        lower, upper = (b.lower.k, b.lower.method), (b.upper.r, b.upper.construction)
        notes: list[str] = []
        moved: dict[str, Any] = {}
        if sharpen_ends:
            lower, upper, notes = sharpen(op, eps, budgets, lower, upper, budget_seconds, evidence=moved)
    doc, width, layer, head = name_fields(name, document)
    result = OperatorBudgets(name, doc, width, layer, head, op.p, eps, lower[0], upper[0], lower[1], upper[1],
                             classify(lower[0], upper[0], budgets), notes, time.perf_counter() - start)
    if certificate and result.settled:
        from ..certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
        from ..certio.signing import utc_now_rfc3339

        X, Y = moved.get("lower", (b.lower.X, b.lower.Y))
        U, W = moved.get("upper", (b.upper.U, b.upper.W))
        result.certificate = certificate_document(
            name, op, [Bracket(eps, LowerEnd(lower[0], lower[1], X, Y), UpperEnd(upper[0], upper[1], U, W))],
            created=utc_now_rfc3339(), provenance=provenance or None)
    return result


def _width_key(width: int | str) -> tuple[int, int]:
    return (1, 0) if width == NO_WIDTH else (0, int(width))


def summarize(results: list[OperatorBudgets], budgets: list[int]) -> list[dict[str, Any]]:
    """Counts and fractions of each class per (document, width) group and budget, groups sorted."""
    groups: dict[tuple[str, int | str], list[OperatorBudgets]] = {}
    for item in results:
        groups.setdefault((item.document, item.width), []).append(item)
    out = []
    for (document, width) in sorted(groups, key=lambda key: (key[0], _width_key(key[1]))):
        items = groups[document, width]
        per_budget = {}
        for b in budgets:
            counts = {c: sum(1 for item in items if item.classes[b] == c) for c in CLASSES}
            per_budget[str(b)] = {**counts, **{f"{c}_fraction": round(counts[c] / len(items), 4) for c in CLASSES}}
        out.append({"document": document, "width": width, "heads": len(items),
                    "median_lower": statistics.median(item.lower for item in items),
                    "median_upper": statistics.median(item.upper for item in items),
                    "budgets": per_budget})
    return out


# ----------------------------------------------------------------------------- the study over panels

def _load(paths: list[str], names: list[str] | None = None) -> list[tuple[NamedOperator, str]]:
    """Every operator of every panel (panel order, then name order) with its panel's stem; only
    those named in ``names`` when it is given (each must be in some panel)."""
    from ..plumbing.operators_npz import load_operators, operator_names

    out: list[tuple[NamedOperator, str]] = []
    seen: dict[str, str] = {}
    wanted = None if names is None else list(dict.fromkeys(names))
    selected = {path: None if wanted is None else [n for n in operator_names(path) if n in wanted] for path in paths}
    if wanted is not None:
        found = {name for chosen in selected.values() for name in chosen}
        missing = [name for name in wanted if name not in found]
        if missing:
            raise InvalidInputError(f"--operator {missing[0]}: no such operator in "
                                    f"{', '.join(Path(p).name for p in paths)}")
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
          staged: dict[Path, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Run the study on the panels and return the report (``softrank budgets``; see the module docstring).

    ``manifest``: a campaign manifest (:mod:`softrank_cert.plumbing.campaign`) rewritten after every
    operator, with each finished operator's result; ``resume`` keeps the results of a previous
    manifest at that path for operators with the same exact inputs, tolerance, budgets and time
    budget.  Operators whose task fails (after a retry when its worker died) or is refused for
    memory (``max_memory``) are left out of the groups and listed under ``"failed"``.

    ``operators``: study only these names of the panels.  ``certificates``: a folder; every
    operator with a feasible or impossible budget gets the certificate of its verified ends as
    ``certificates/NAME.json`` (signed with the key file ``key``), each listed in the report.
    They are put in ``staged`` (path -> document, written by the caller together with the
    report); in a campaign (``manifest``) each is written as soon as its operator is done, and a
    resumed run keeps a recorded result only when its certificate there still verifies and
    holds the same ends.
    """
    from ..plumbing.campaign import budget_json
    from ..plumbing.parallel import pack_operator
    from ..plumbing.reports import envelope

    selected = _load(panels, operators)
    want = certificates is not None
    tasks = [(pack_operator(item.operator), item.name, stem, eps, budgets, budget_seconds, True, want,
              item.provenance or None) for item, stem in selected]
    targets = [certificate_path(Path(certificates), item.name) for item, _stem in selected] if want else []
    start = time.perf_counter()
    results: dict[int, OperatorBudgets] = {}
    reuse = _certificate_reuse(selected, targets, eps, key) if want else None
    campaign = _budgets_campaign(manifest, resume, selected, panels, eps, budgets, budget_seconds, jobs, scheduler,
                                 max_memory, reuse) if manifest is not None else None
    if campaign is not None:
        results.update(campaign.kept)
    todo = [i for i in range(len(tasks)) if i not in results]
    failed: list[dict[str, Any]] = []

    def finished(i: int, item: OperatorBudgets) -> None:
        """Write (campaign) or stage the certificate of a computed operator."""
        if item.certificate is None:
            return
        document = sign_certificate(item.certificate, key) if key else item.certificate
        if campaign is not None:
            write_json_atomic(targets[i], document)
        elif staged is not None:
            staged[targets[i]] = document

    try:
        _run_study(selected, tasks, todo, results, failed, campaign, eps, jobs, scheduler, show_progress, max_memory,
                   finished if want else None)
    except KeyboardInterrupt:
        if campaign is not None:
            campaign.manifest.finish("interrupted")
            try:
                campaign.manifest.save()
            except InvalidInputError:
                pass
        raise
    if campaign is not None:
        campaign.manifest.finish("incomplete" if failed else "complete")
        campaign.manifest.save()
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


def _certificate_reuse(selected: list[tuple[NamedOperator, str]], targets: list[Path], eps: str,
                       key: str | None) -> Callable[[int, Any], bool]:
    """For a resumed study with --certificates: keep a recorded result only when the certificate
    of a settled operator is there, verifies (signed by ``key``'s signer when given) and holds
    the same ends."""
    from ..plumbing.campaign import reusable_certificate
    from ..certio.signing import did_key, load_private_key

    signer = did_key(load_private_key(key).public_key()) if key else None

    def keep(i: int, result: Any) -> bool:
        if not result.settled:
            return True
        item = selected[i][0]
        certificate, _why = reusable_certificate(targets[i], item.name, item.operator, [eps], signer)
        if certificate is None:
            return False
        (bracket,) = certificate.brackets
        return (bracket.lower.k, bracket.upper.r) == (result.lower, result.upper)

    return keep


def _run_study(operators: list[tuple[NamedOperator, str]], tasks: list[tuple], todo: list[int], results: dict[int, Any],
               failed: list[dict[str, Any]], campaign: Any, eps: str, jobs: int, scheduler: str | None,
               show_progress: bool, max_memory: int | None,
               finished: Callable[[int, Any], None] | None = None) -> None:
    from ..plumbing.memory import operator_task_bytes
    from ..plumbing.parallel import run_tasks

    with OperatorProgress("softrank budgets", len(tasks), bar=show_progress, lines=show_progress) as bar:
        for i in sorted(results):
            bar.advance(operators[i][0].name)
            bar.finished(operators[i][0].name, "kept (resumed)")
        with closing(run_tasks(study_operator, [tasks[i] for i in todo], jobs=jobs, scheduler=scheduler,
                               memory=[operator_task_bytes(operators[i][0].operator) for i in todo],
                               max_memory=max_memory, done=lambda j: bar.advance(operators[todo[j]][0].name))) as outcomes:
            for outcome in outcomes:
                i = todo[outcome.index]
                name = operators[i][0].name
                if not outcome.ok:
                    status = "refused" if outcome.refused else "failed"
                    failed.append({"operator": name, "status": status, "reason": outcome.failure,
                                   "attempts": outcome.attempts})
                    if campaign is not None:
                        campaign.manifest.update(name, status=status, reason=outcome.failure, attempts=outcome.attempts,
                                                 task_seconds=round(outcome.seconds, 3))
                        campaign.manifest.run["failed"] += 1
                        campaign.manifest.save()
                    bar.finished(name, f"{status.upper()}: {outcome.failure}")
                    continue
                item = outcome.value
                results[i] = item
                if finished is not None:
                    finished(i, item)
                if campaign is not None:
                    campaign.manifest.update(name, status="done", seconds=round(item.seconds, 3),
                                             task_seconds=round(outcome.seconds, 3), attempts=outcome.attempts, result=item.to_json(), resumed=False)
                    campaign.manifest.run["computed"] += 1
                    campaign.manifest.save()
                classes = ", ".join(f"{b} {cls}" for b, cls in item.classes.items())
                bar.finished(item.name, f"eps {eps} [{item.lower}, {item.upper}]: budget {classes} "
                                        f"in {item.seconds:.1f} s")


class _BudgetsCampaign:
    def __init__(self, manifest: Any, kept: dict[int, Any]) -> None:
        self.manifest, self.kept = manifest, kept


def _budgets_campaign(path: Path, resume: bool, operators: list[tuple[NamedOperator, str]], panels: list[str], eps: str,
                      budgets: list[int], budget_seconds: float | None, jobs: int, scheduler: str | None,
                      max_memory: int | None, reuse: Callable[[int, Any], bool] | None = None) -> _BudgetsCampaign:
    """The manifest of a budgets study and, with ``resume``, the results it keeps (index -> result;
    ``reuse(index, result)`` may veto one, e.g. when its certificate is gone)."""
    from ..plumbing.campaign import Manifest, budget_json, file_sha256, operator_sha256
    from ..plumbing.memory import operator_task_bytes

    parameters = {"panel": [{"path": str(p), "sha256": file_sha256(p)} for p in panels],
                  "tolerances": [eps], "budgets": budgets, "budget_seconds": budget_json(budget_seconds),
                  "max_memory": max_memory, "jobs": jobs, "scheduler": scheduler, "signer": None}
    previous = Manifest.read(path) if resume else None
    digests = [operator_sha256(item.operator) for item, _stem in operators]
    manifest = Manifest.start(path, "budgets", parameters,
                              [(item.name, {"operator_sha256": digest, "output": None,
                                            "estimated_bytes": operator_task_bytes(item.operator),
                                            "result_version": RESULT_VERSION})
                               for (item, _stem), digest in zip(operators, digests)], resume=resume)
    kept: dict[int, Any] = {}
    same = previous is not None and previous.get("command") == "budgets" and all(
        previous.get(key) == parameters[key] for key in ("tolerances", "budgets", "budget_seconds"))
    if same:
        for i, ((item, _stem), digest) in enumerate(zip(operators, digests)):
            entry = previous["operators"].get(item.name)
            if not isinstance(entry, dict) or entry.get("status") != "done" or entry.get("operator_sha256") != digest \
                    or entry.get("result_version") != RESULT_VERSION:
                continue
            try:
                result = OperatorBudgets.from_json(entry["result"])
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if result.name != item.name or result.eps != eps or sorted(result.classes) != sorted(budgets):
                continue
            if reuse is not None and not reuse(i, result):
                continue
            kept[i] = result
            manifest.update(item.name, status="done", resumed=True, seconds=entry.get("seconds"),
                            task_seconds=entry.get("task_seconds"),
                            attempts=entry.get("attempts", 0), finished=entry.get("finished"), result=entry["result"])
            manifest.run["skipped"] += 1
    manifest.save()
    return _BudgetsCampaign(manifest, kept)
