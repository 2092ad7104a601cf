"""Block-width budget study (UNTRUSTED study logic; every end it counts is a kernel verdict).

For an operator ``A``, one tolerance ``eps`` and a rank budget ``b`` (docs/design.md section 6):

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

:func:`~softrank_cert.studies.budgets.campaign.study` runs it over every operator of some panels
(``softrank budgets``): in worker processes or on a Dask cluster, as a resumable campaign,
writing the certificate behind every feasible / impossible class on request.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable

from ...errors import InternalInvariantError, InvalidInputError
from ...kernel import Operator, Status, parse_tolerance
from ..panel_names import NO_WIDTH, name_fields

CLASSES = ("feasible", "impossible", "unresolved")
#: Version of the per-operator results a resumable study records (:meth:`OperatorBudgets.to_json`):
#: a resume reuses only results of this version (2: the one JSON contract).
RESULT_VERSION = 2


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
    def from_verified(cls, name: str, fallback_document: str, op: Operator, bracket: Any, pair: tuple[Any, Any],
                      budgets: list[int], sharpened: Any = (), seconds: Any = 0.0) -> OperatorBudgets:
        """The result re-derived from a re-checked certificate bracket (a resumed study): ends and
        methods from the bracket whose two claims the kernel VERIFIED (``pair``), every class from
        those ends.  ``sharpened`` (notes of a manifest: bookkeeping) is kept only when each note
        names a final end exactly, ``seconds`` only when it is a number."""
        lower, upper = pair
        if lower.status is not Status.VERIFIED or upper.status is not Status.VERIFIED:
            raise ValueError("from_verified() takes VERIFIED verdicts only")
        k, r = lower.rank, upper.rank
        k_method, r_method = bracket.lower.method, bracket.upper.construction
        ends = {f"lower {k} ({k_method})", f"upper {r} ({r_method})"}
        notes = list(sharpened) if isinstance(sharpened, list) and all(n in ends for n in sharpened) and \
            len(set(sharpened)) == len(sharpened) else []
        doc, width, layer, head = name_fields(name, fallback_document)
        seconds = float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0
        return cls(name, doc, width, layer, head, op.p, bracket.eps, k, r, k_method, r_method,
                   classify(k, r, budgets), notes, seconds)

    def to_json(self) -> dict[str, Any]:
        return {"operator": self.name, "document": self.document, "width": self.width, "layer": self.layer,
                "head": self.head, "p": self.p, "eps": self.eps, "lower": self.lower, "upper": self.upper,
                "lower_method": self.lower_method, "upper_construction": self.upper_construction,
                "classes": {str(b): c for b, c in self.classes.items()}, "sharpened": self.sharpened,
                "seconds": round(self.seconds, 3)}


def sharpen(op: Operator, eps: str, budgets: list[int], lower: tuple[int, str], upper: tuple[int, str],
            seconds: float | None = None, evidence: dict[str, Any] | None = None, work: float | None = None
            ) -> tuple[tuple[int, str], tuple[int, str], list[str]]:
    """Try to settle the budgets ``b`` with ``lower <= b < upper`` (ends given as ``(rank, method)``).

    Witnesses from the largest such budget down: the rank-``b`` truncated SVD, then the
    smoothed-minimax witness; a VERIFIED one proves ``r_eps <= b`` (every budget ``>= b`` feasible).  Certificates
    from the smallest budget up: ``pooled`` at ``k = b + 1 <= POOLED_MAX_K``; a VERIFIED one proves
    ``r_eps >= b + 1`` (every budget ``<= b`` impossible).  Each direction stops at its first
    failure (errors fall with rank and thresholds with k, usually: a guess that only costs
    tightness).  Only float64 candidates that look good enough go to the kernel, and only
    VERIFIED verdicts move an end.  The pass is bounded by ``work`` units when given, else by the
    operator's default work (:func:`~softrank_cert.solvers.work.default_work`: either way the same
    ends however busy the machine), and by ``seconds`` of wall time when given (``math.inf``: no
    limit; alone it is the only bound).
    The kernel's checks keep to the task's memory (:func:`~softrank_cert.util.memory.operator_check_plan`).
    Returns the new ends and one note per end that moved; ``evidence`` (a dict), when given,
    receives each moved end as the kernel sealed it (``"upper"``, ``"lower"``).
    """
    from ...solvers import POOLED_MAX_K, Budget, CandidatePool, OneShot, default_work, first_verified
    from ...util.dense import Dense
    from ...util.memory import operator_check_plan

    (k, k_method), (r, r_method) = lower, upper
    if not any(k <= b < r for b in budgets):
        return lower, upper, []
    value = float(parse_tolerance(eps))
    deadline = None if seconds is None or seconds == float("inf") else time.perf_counter() + seconds
    if work is None and seconds is None:
        work = default_work(*op.shape)
    budget = Budget(work=float("inf") if work is None else work, deadline=deadline)
    prof = OneShot(CandidatePool(Dense.of(op)), budget.until())
    plan = operator_check_plan(op)  # the kernel's checks keep to the task's memory, as the bracket's did
    notes: list[str] = []
    for b in sorted((b for b in budgets if k <= b < r), reverse=True):
        found: tuple[str, Any, Any] | None = first_verified(op, ((eps, w) for c in ("tsvd", "smooth")
                                    if (w := prof.witness(c, b)) is not None and w.error <= value * (1 + 1e-12)),
                                                            plan)
        if found is None:
            break
        r, r_method = b, found[1].method
        notes.append(f"upper {b} ({r_method})")
        if evidence is not None:
            evidence["upper"] = found[2]
    for b in sorted(b for b in budgets if k <= b < r and b + 1 <= POOLED_MAX_K):
        c = prof.lower_pair("pooled", b + 1)
        found = None if c is None or c.threshold <= value * (1 - 1e-12) else first_verified(op, [(eps, c)], plan)
        if found is None:
            break
        k, k_method = b + 1, found[2].method
        notes.append(f"lower {k} ({k_method})")
        if evidence is not None:
            evidence["lower"] = found[2]
    if k > r:
        raise InternalInvariantError(f"verified lower end {k} exceeds verified upper end {r} at eps {eps}")
    return (k, k_method), (r, r_method), notes


def study_operator(spec: dict[str, Any], name: str, document: str, eps: str, budgets: list[int],
                   budget_seconds: float | None, sharpen_ends: bool = True, certificate: bool = False,
                   provenance: dict[str, Any] | None = None, work: float | None = None) -> OperatorBudgets:
    """One operator of the study (a task for ``run_ordered``; ``spec`` from ``pack_operator``).

    Brackets ``r_eps`` with kernel-verified ends (``work`` units when given, else the driver's
    default work unless ``budget_seconds`` of wall time are given; both: whichever runs out
    first), sharpens them at the budgets (as much again at most), classifies every budget.  With
    ``certificate``, the operator also gets the unsigned certificate of its final ends
    (``.certificate``, issued by :func:`~softrank_cert.certio.issuing.certificate_for`;
    ``provenance`` goes into it): it proves every feasible / impossible class, and a resumed
    campaign re-derives the result from it (:mod:`softrank_cert.studies.budgets.campaign`).
    """
    from ...geometry.supports import stdout_to_stderr
    from ...plumbing.parallel import unpack_operator
    from ...solvers import bracket_operator

    op = unpack_operator(spec)
    start = time.perf_counter()
    with stdout_to_stderr():  # solver banners must not spoil --json output
        (b,) = bracket_operator(op, [eps], work=work, budget_seconds=budget_seconds)
        lower, upper = (b.lower.k, b.lower.method), (b.upper.r, b.upper.construction)
        notes: list[str] = []
        moved: dict[str, Any] = {}
        if sharpen_ends:
            lower, upper, notes = sharpen(op, eps, budgets, lower, upper, budget_seconds, evidence=moved, work=work)
    doc, width, layer, head = name_fields(name, document)
    result = OperatorBudgets(name, doc, width, layer, head, op.p, eps, lower[0], upper[0], lower[1], upper[1],
                             classify(lower[0], upper[0], budgets), notes, time.perf_counter() - start)
    if certificate:
        from ...certio.issuing import certificate_for
        from ...certio.verified import VerifiedBracket

        final = VerifiedBracket(eps, moved.get("lower", b.lower), moved.get("upper", b.upper))
        result.certificate = certificate_for(name, op, [final], provenance)
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
