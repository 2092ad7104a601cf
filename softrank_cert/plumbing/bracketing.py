"""The bracket task: one operator's kernel-verified brackets, here or in a worker (orchestration only).

The front ends (``softrank_cert.bracket``, ``softrank bracket``) validate their inputs once
(tolerances: :func:`~softrank_cert.util.tolerances.parse_eps`; the budget:
:func:`~softrank_cert.util.tolerances.check_budget`) and then come here with an
:class:`~softrank_cert.kernel.Operator`:

* :func:`bracket_result` runs the driver (:func:`~softrank_cert.solvers.bracket.bracket_operator`)
  in this process and returns a :class:`BracketResult` of sealed ends
  (:mod:`softrank_cert.certio.verified`);
* :func:`run_brackets` runs it for several operators through
  :func:`~softrank_cert.plumbing.parallel.run_tasks`.  In this process the operator object is
  handed over as it is; only a task that goes to a worker process or a Dask cluster carries it
  packed (:func:`~softrank_cert.plumbing.parallel.pack_operator`).  Either way a task returns an
  :class:`Issued`: the unsigned certificate written by
  :func:`~softrank_cert.certio.issuing.certificate_for` from the sealed ends where the kernel
  verified them, signed by the caller (:meth:`Issued.signed`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ..certio.issuing import certificate_for, signed
from ..certio.verified import VerifiedBracket
from ..kernel import Operator, parse_tolerance
from ..util.files import canonical_dump, check_output_file, write_text_atomic
from ..util.memory import operator_check_limit
from . import parallel

Progress = Callable[[str, float, float], None]


def bracket_rows(brackets: Sequence[Any]) -> list[dict[str, Any]]:
    """The summary of brackets (``eps``, ``lower.k``, ``lower.method``, ``upper.r``,
    ``upper.construction``: sealed or decoded ones) as the reports show it, no arrays."""
    return [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r, "resolved": b.lower.k == b.upper.r,
             "lower_method": b.lower.method, "upper_construction": b.upper.construction} for b in brackets]


@dataclass(frozen=True, eq=False)
class BracketResult:
    """Kernel-verified brackets of one operator, one per tolerance (ascending).

    ``lower`` / ``upper`` / ``resolved`` map each tolerance to its verified ends; ``brackets``
    holds the sealed ends themselves (ranks, arrays, methods and the kernel's verdicts).
    """

    operator: Operator = field(repr=False)
    brackets: tuple[VerifiedBracket, ...] = field(repr=False)
    operator_id: str = "operator"
    provenance: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    budget_seconds: float | None = None

    @property
    def eps(self) -> tuple[str, ...]:
        return tuple(b.eps for b in self.brackets)

    @property
    def lower(self) -> dict[str, int]:
        """Verified lower end ``k`` (``r_eps >= k``) per tolerance."""
        return {b.eps: b.lower.k for b in self.brackets}

    @property
    def upper(self) -> dict[str, int]:
        """Verified upper end ``r`` (``r_eps <= r``) per tolerance."""
        return {b.eps: b.upper.r for b in self.brackets}

    @property
    def resolved(self) -> dict[str, bool]:
        """Whether the two ends meet (``r_eps`` known exactly) per tolerance."""
        return {b.eps: b.lower.k == b.upper.r for b in self.brackets}

    def __getitem__(self, eps: str) -> VerifiedBracket:
        value = parse_tolerance(eps)
        for b in self.brackets:
            if parse_tolerance(b.eps) == value:
                return b
        raise KeyError(eps)

    def __iter__(self) -> Iterator[VerifiedBracket]:
        return iter(self.brackets)

    def __len__(self) -> int:
        return len(self.brackets)

    def to_certificate(self, key: Any = None, *, operator_id: str | None = None) -> dict[str, Any]:
        """The certificate document (a dict), signed when ``key`` is given."""
        return certificate_for(operator_id or self.operator_id, self.operator, self.brackets, self.provenance, key)

    def save(self, path: str | os.PathLike[str], key: Any = None, *, operator_id: str | None = None) -> Path:
        """Write the certificate to ``path`` (atomically; a folder, an unwritable place or a key file
        is refused; an existing certificate or other file is replaced)."""
        target = check_output_file(path, "path", force=True)
        write_text_atomic(target, canonical_dump(self.to_certificate(key, operator_id=operator_id)))
        return target

    def to_json(self) -> dict[str, Any]:
        """A plain summary (no arrays): ends, methods and verdicts per tolerance."""
        return {"operator": self.operator_id, "p": self.operator.p, "seconds": round(self.seconds, 3),
                "brackets": bracket_rows(self.brackets)}

    def __repr__(self) -> str:
        m, n = self.operator.shape
        ends = ", ".join(f"{b.eps}: {b.lower.k} (resolved)" if b.lower.k == b.upper.r else f"{b.eps}: [{b.lower.k}, {b.upper.r}]"
                         for b in self.brackets)
        return f"<BracketResult {self.operator_id} ({m}x{n} {self.operator.kind}) eps {ends}; {self.seconds:.1f} s>"


def bracket_result(op: Operator, eps_list: list[str], *, work: float | None = None, budget_seconds: float | None = None,
                   progress: Progress | None = None, operator_id: str = "operator",
                   provenance: Mapping[str, Any] | None = None, device: Any = None,
                   max_memory: int | None = None) -> BracketResult:
    """The driver's kernel-verified brackets of ``op`` at ``eps_list`` (validated by the front end:
    exact decimal strings, ascending; ``work``, ``budget_seconds``, ``device`` and ``max_memory`` as for
    :func:`~softrank_cert.solvers.bracket.bracket_operator`), timed, in this process.  A search
    off the numpy path adds its device to the provenance (:func:`search_provenance`)."""
    from ..solvers import bracket_operator, resolve_device

    where = resolve_device(device, op.shape)
    start = time.perf_counter()
    brackets = bracket_operator(op, eps_list, work=work, budget_seconds=budget_seconds, progress=progress, device=where,
                                max_memory=max_memory)
    return BracketResult(op, tuple(brackets), operator_id, search_provenance(provenance, where),
                         time.perf_counter() - start, budget_seconds)


def search_provenance(provenance: Mapping[str, Any] | None, device: Any) -> dict[str, Any]:
    """``provenance`` with the record of the resolved search ``device``
    (:meth:`~softrank_cert.solvers.device.SearchDevice.provenance`; nothing for the numpy path)."""
    return {**dict(provenance or {}), **device.provenance()}


@dataclass(frozen=True)
class Issued:
    """What one bracket task returns: the unsigned certificate document that
    :func:`~softrank_cert.certio.issuing.certificate_for` wrote from the task's sealed ends (plain
    data, so it may come back from a worker) and the solver seconds."""

    document: dict[str, Any]
    seconds: float

    def signed(self, key: Any = None) -> dict[str, Any]:
        """The certificate, signed with ``key`` when one is given."""
        return signed(self.document, key)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """:func:`bracket_rows` of the certificate's brackets."""
        return [{"eps": b["eps"], "lower": b["lower"]["k"], "upper": b["upper"]["r"],
                 "resolved": b["lower"]["k"] == b["upper"]["r"], "lower_method": b["lower"]["method"],
                 "upper_construction": b["upper"]["construction"]} for b in self.document["brackets"]]


def issue(op: Operator, name: str, provenance: Mapping[str, Any], eps_list: list[str], work: float | None,
          budget_seconds: float | None, progress: Progress | None = None, device: Any = None,
          given_memory: int | None = None) -> Issued:
    """The bracket task in this process: :func:`bracket_result` (``given_memory``: its ``max_memory``),
    then its unsigned certificate."""
    result = bracket_result(op, eps_list, work=work, budget_seconds=budget_seconds, progress=progress,
                            operator_id=name, provenance=provenance, device=device, max_memory=given_memory)
    return Issued(result.to_certificate(), result.seconds)


def issue_packed(spec: dict[str, Any], name: str, provenance: Mapping[str, Any], eps_list: list[str],
                 work: float | None, budget_seconds: float | None, device: Any = None,
                 given_memory: int | None = None) -> Issued:
    """The bracket task in a worker: the operator arrives packed and is rebuilt (and re-checked)."""
    return issue(parallel.unpack_operator(spec), name, provenance, eps_list, work, budget_seconds, device=device,
                 given_memory=given_memory)


def run_brackets(operators: Sequence[tuple[Operator, str, Mapping[str, Any]]], eps_list: list[str], *,
                 work: float | None, budget_seconds: float | None, jobs: int = 1, scheduler: str | None = None,
                 progress: Callable[[str], Progress | None] | None = None, memory: Sequence[int] | None = None,
                 max_memory: int | None = None, done: Callable[[int], None] | None = None, device: Any = None,
                 given_memory: int | None = None) -> Generator[parallel.TaskOutcome, None, None]:
    """One :class:`Issued` per ``(operator, name, provenance)`` (as :class:`TaskOutcome` values of
    :func:`~softrank_cert.plumbing.parallel.run_tasks`, in completion order).  ``progress(name)``:
    the stage callback of an operator, used when the tasks run in this process.  ``device``
    (a ``--device`` value) is resolved here, once per operator shape, and the resolved device
    (with its cost) travels with each task, so that every worker charges the same work.
    ``given_memory``: the ``--max-memory`` the user gave (None: not given), with which the tasks'
    checks and their re-checks here may use more than 1 GiB (:func:`~softrank_cert.util.memory.task_check_cap`).

    A task that ran in another process (``jobs`` > 1, a Dask ``scheduler``) returns plain data
    that nothing vouches for: its certificate is re-verified here, by this process's kernel,
    before it is handed on (:func:`rechecked`); one that does not verify comes back as a failed
    outcome whose reason says why, and nothing of it is signed or written.  Those re-checks count
    against ``max_memory``: the local pool keeps their budget free beside the running tasks
    (:func:`~softrank_cert.util.memory.recheck_reserve`)."""
    from ..solvers import resolve_device

    devices: dict[tuple[int, int], Any] = {}
    for op, _name, _provenance in operators:
        if op.shape not in devices:
            devices[op.shape] = resolve_device(device, op.shape)
    operators = [(op, name, search_provenance(provenance, devices[op.shape])) for op, name, provenance in operators]
    if parallel.in_process(jobs, scheduler, len(operators)):
        tasks: list[tuple[Any, ...]] = [(op, name, provenance, eps_list, work, budget_seconds,
                                         None if progress is None else progress(name), devices[op.shape], given_memory)
                                        for op, name, provenance in operators]
        return parallel.run_tasks(issue, tasks, memory=memory, max_memory=max_memory, done=done)
    tasks = [(parallel.pack_operator(op), name, dict(provenance), eps_list, work, budget_seconds, devices[op.shape],
              given_memory) for op, name, provenance in operators]
    limits = [operator_check_limit(op, given_memory, devices[op.shape].kind) for op, _name, _provenance in operators]
    return rechecked(parallel.run_tasks(issue_packed, tasks, jobs=jobs, scheduler=scheduler, memory=memory,
                                        max_memory=max_memory, done=done, returns=(Issued,),
                                        reserve=max(limits, default=0)),  # the re-checks here, beside the workers
                     operators, eps_list, limits)


def rechecked(outcomes: Iterator[parallel.TaskOutcome], operators: Sequence[tuple[Operator, str, Mapping[str, Any]]],
              eps_list: list[str], limits: Sequence[int] | None = None) -> Generator[parallel.TaskOutcome, None, None]:
    """``outcomes`` of bracket tasks that ran in other processes, each :class:`Issued` re-verified
    in this one (:func:`~softrank_cert.plumbing.campaign.recheck_from_worker`: every claim
    VERIFIED by the kernel, about the operator of that name bit for bit, exactly ``eps_list``,
    the operator's provenance): passed on as the document that was verified, or turned into a
    failure (:func:`~softrank_cert.plumbing.campaign.worker_failure`).  The kernel's checks here keep
    to the memory the task's own checks kept to (``limits``, one per operator; None: each operator's
    :func:`~softrank_cert.util.memory.operator_check_limit` without a given ``--max-memory``):
    a claim the task verified within it is verified here within it too, and anything else is
    *not checked* (a failed task), never a process the out-of-memory killer ends."""
    from .campaign import rechecked_outcome

    try:
        for outcome in outcomes:
            if outcome.ok:
                op, name, provenance = operators[outcome.index]
                issued = outcome.value
                outcome = rechecked_outcome(outcome, name, op, dict(provenance),
                                            {"": (getattr(issued, "document", issued), eps_list)},
                                            _reissued(_solver_seconds(outcome)),
                                            operator_check_limit(op) if limits is None else limits[outcome.index])
            yield outcome
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()


def _reissued(seconds: float) -> Callable[[dict[str, tuple[dict[str, Any], Any]]], Issued]:
    """The rebuild of :func:`~softrank_cert.plumbing.campaign.rechecked_outcome` for a bracket
    task: the verified document, with the solver ``seconds``."""
    return lambda verified: Issued(verified[""][0], seconds)


def _solver_seconds(outcome: parallel.TaskOutcome) -> float:
    """The solver seconds a worker's answer reports (they go into the report and the manifest): its
    number when it is one (:func:`_seconds`), else the task's seconds."""
    seconds = getattr(outcome.value, "seconds", None)
    return float(seconds) if _seconds(seconds) else outcome.seconds


def _seconds(value: Any) -> TypeGuard[int | float]:
    """Whether a worker's solver seconds are a finite non-negative number (they go into the report)."""
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
