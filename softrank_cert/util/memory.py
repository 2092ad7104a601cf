"""Memory: what a task or a check will need, and what this machine can give it (front end).

Nothing here decides a claim; it decides whether a computation is *started*.  Two uses:

* campaigns (``softrank bracket --all``, ``audit``, ``budgets``): :func:`bracket_task_bytes`
  estimates the peak resident memory of one operator's task, and ``--max-memory`` (default
  :func:`default_max_memory`) refuses a task that could not fit and serialises tasks that would
  not fit together (:func:`softrank_cert.plumbing.parallel.run_tasks`);
* ``softrank-verify``: when the kernel's float64 path cannot decide a claim, the Arb path
  builds ball enclosures of the whole m x N operator at each precision it tries (cached on the
  operator, so they add up); :func:`arb_check_bytes` estimates that *before* the kernel
  allocates anything, so a check that would not fit is refused with one line (exit 5) instead
  of FLINT aborting the process when an allocation fails.

The coefficients come from measurements of peak RSS (``resource.getrusage``) on this project's
development machine (python-flint 0.9, CPython 3.11, x86-64 glibc); they are deliberately on
the safe side (docs/campaigns.md, "Memory"):

* Arb path, per matrix entry (m N): about 380 B at 64 bits (the enclosures of S and A, per-entry
  balls of ``S - c``, and the construction's temporaries), then 190-300 B more for
  each further precision up to 512 bits, 400 B more at 1024, 590 B more at 2048 and 990 B more
  at 4096: 1.14 KB per entry through 512 bits (2048 x 2048: 4.8 GB).  The enclosures do not
  keep the ``S - c`` balls these figures count, so the coefficients are about 30 % on the safe side (4 cached
  precisions of a 512 x 512 ``qk`` operator: 210 MiB of peak RSS against 299 MiB).  A witness
  product or a block matrix product adds a transient of 90-220 B per entry at the last
  precision; ``qk`` operators add about 55 B per entry and the Arb matrices of Q and K.
* a bracket task (solvers + float64 checks) peaked at 17 / 37 / 106 MB above the worker's
  ~110 MB interpreter for MiniLM heads of width 128 / 256 / 512 with the default time budget;
  on high-rank heads far more (409 MiB on SmolLM2 L10H4 at 512, ranks up to 371), because the
  witness search kept a state of four ``(m + N) x r`` factors per rank it probed, and L-BFGS
  holds about 24 vectors of that size.  So a task's memory is now bounded where it is held by
  design, and :func:`bracket_task_bytes` is the sum of those bounds: the kernel's fallback paths
  keep to :func:`task_check_bytes` (:func:`task_check_plan`; a campaign's signing process
  re-checks within it too, and the local pool keeps that room free: :func:`recheck_reserve`), the
  witness search keeps its states and its probe's vectors to :func:`upper_factor_bytes`
  (``solvers/upper/search.py``; on torch its published copies to :func:`torch_host_bytes`), the
  lower search its states to :func:`lower_factor_bytes` (``solvers/lower/base.py``), and the
  candidate pool drops what no tolerance can use; the interpreter, the per-entry arrays
  (:data:`SEARCH_ENTRY_BYTES`) and the rest of :func:`factor_bytes` are measured figures
  (``benchmarks/results/memory_peak_*.json``, docs/campaigns.md "Memory": at width 4096 a task
  peaked at 1.48 GiB against 7.7 GiB, at 1024 at 869 MiB under a tighter factor budget of 48
  vectors and 1295 MiB before, against 5.2 GiB; 275 MiB at width 128, 558 MiB at 256, 1.6 GiB at
  512, 6.1 GiB at 2048, 13.7 GiB at 8192 for ``qk`` heads of dimension 64).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..kernel import Operator

GIB = 1 << 30
MIB = 1 << 20
#: Share of the machine's memory (or of a cgroup limit) that ``--max-memory`` defaults to.
DEFAULT_SHARE = 0.75
#: Resident memory of an idle worker interpreter with the solvers imported (measured ~110 MB).
WORKER_BASE_BYTES = 128 * MIB
#: Safety factor and constant added to every Arb estimate.
ARB_MARGIN = 1.05
ARB_SLACK = 32 * MIB


# --------------------------------------------------------------------------- sizes in words

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str, option: str = "--max-memory") -> int:
    """``"3.5G"``, ``"800M"``, ``"2GiB"``, ``"1500000000"`` -> bytes (K, M, G, T are powers of 1024)."""
    match = _SIZE.match(str(text))
    if not match:
        raise InvalidInputError(f"{option} expects a size such as 4G, 800M or 2.5GiB, got {text!r}")
    value = float(match.group(1)) * 1024 ** "_kmgt".index(match.group(2).lower() or "_")
    if not math.isfinite(value) or value < 1 * MIB:
        raise InvalidInputError(f"{option} must be at least 1M, got {text!r}")
    return int(value)


def format_bytes(n: float) -> str:
    """``1.2 GiB``-style size for messages."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


# --------------------------------------------------------------------------- what the machine has

def _proc_kib(path: str, key: str) -> int | None:
    """The ``KEY:  N kB`` field of a ``/proc`` file in bytes (None when it cannot be read)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _meminfo(key: str) -> int | None:
    return _proc_kib("/proc/meminfo", key)


def physical_memory() -> int | None:
    """Total RAM of the machine (None when it cannot be read)."""
    total = _meminfo("MemTotal")
    if total:
        return total
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def available_memory() -> int | None:
    """Memory that can be used now without swapping: ``MemAvailable``, capped by what the cgroup's
    limit leaves (None when neither can be read)."""
    have = _meminfo("MemAvailable")
    limit = cgroup_limit()
    if limit is not None:
        used = _proc_kib("/proc/self/status", "VmRSS") or 0
        have = min(have, limit - used) if have is not None else limit - used
    return None if have is None else max(have, 0)


def cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max`` or v1), or None."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return int(text)
    return None


def _status(key: str) -> int | None:
    return _proc_kib("/proc/self/status", key)


def address_space_headroom() -> int | None:
    """Bytes this process may still map under its address-space limit (``RLIMIT_AS``, e.g.
    ``ulimit -v``), or None when there is no such limit."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = _status("VmSize") or 0
    return max(soft - used, 0)


def default_max_memory() -> int:
    """``--max-memory`` when none is given: :data:`DEFAULT_SHARE` of the machine's memory, or of
    the cgroup's limit when that is smaller (4 GiB when neither can be read)."""
    sizes = [n for n in (physical_memory(), cgroup_limit()) if n]
    return int(DEFAULT_SHARE * min(sizes)) if sizes else 4 * GIB


def process_limit(max_memory: int | None) -> int:
    """What one process may allocate from now on: ``max_memory`` (default
    :func:`default_max_memory`), and never more than 90 % of what its address-space limit
    leaves (a hard limit: beyond it allocations fail, and FLINT aborts)."""
    limit = default_max_memory() if max_memory is None else int(max_memory)
    headroom = address_space_headroom()
    if headroom is not None:
        limit = min(limit, int(0.9 * headroom))
    return limit


# --------------------------------------------------------------------------- estimates

def _arb_level_bytes(p: int, first: bool) -> float:
    """Bytes per matrix entry that the enclosure built at precision ``p`` keeps (cached)."""
    return 390.0 if first else 190.0 + p / 5.0


def arb_check_bytes(m: int, n: int, precisions: list[int], *, d: int = 0, width: int = 0, kind: str = "scores") -> int:
    """Estimated peak bytes of the kernel's Arb path for claims on one m x N operator when it
    tries ``precisions`` (e.g. ``[64, 128, 256, 512]``): the enclosures of every precision
    (they stay cached on the operator), the transient of the last one, the claim's factors of
    width ``width`` (k or r) and, for ``qk``, the Arb matrices of Q and K (head dimension d).
    Calibrated by measurement (module docstring), with a margin."""
    if not precisions:
        return 0
    entries = m * n
    per_entry = sum(_arb_level_bytes(p, i == 0) for i, p in enumerate(precisions))
    last = precisions[-1]
    if len(precisions) > 1:  # witness product / block-multiplication temporaries (in the first level's 390 B)
        per_entry += 40.0 + last / 6.0
    if kind == "qk":
        per_entry += 60.0
    total = entries * per_entry
    total += (m + n) * width * (50.0 + last / 8.0)
    if kind == "qk":
        total += sum((m + n) * d * (40.0 + p / 16.0) for p in precisions)
    return int(ARB_MARGIN * total + ARB_SLACK)


def float64_check_bytes(m: int, n: int) -> int:
    """Estimated peak bytes of the kernel's entrywise float64 path (``proofs/float64-bounds.md``)
    on one m x N operator: about twenty m x N double temporaries; the row-block path needs one."""
    return 24 * 8 * m * n


#: The most a bracket task lets the kernel's fallback paths (the entrywise float64 path and the Arb
#: balls) use: :func:`task_check_bytes` (module docstring).
TASK_CHECK_CAP = 1 * GIB
#: States at rank p that the witness search's share of the factors holds beside a probe at rank p
#: (:func:`upper_factor_bytes`) below the cap (width ~1100): more than the searches were seen to hold
#: (30, all below p, on a high-rank head of width 256), so that up to width 512 (the committed
#: campaigns) the dropping does not bind in practice.
KEPT_STATES = 40
#: float64 vectors of ``(m + N) p`` entries that a bracket task's factors may fill (the witness
#: search's states and L-BFGS vectors, the candidate pool, the sealed ends, the lower search's
#: pairs), at least :data:`FACTOR_FLOOR` and at most :data:`FACTOR_CAP` bytes: :func:`factor_bytes`.
#: Its :data:`UPPER_FACTOR_SHARE` holds the probe (24 + 4 vectors) and :data:`KEPT_STATES` states
#: (4 each): (28 + 160) / 0.75 = 251 vectors, and one more so that a quarter is whole.
RANK_VECTORS, FACTOR_FLOOR, FACTOR_CAP = 252, 64 * MIB, 4 * GIB + 512 * MIB
#: Share of :func:`factor_bytes` that the witness search holds itself and keeps to
#: (:func:`upper_factor_bytes`); the rest is for the pool, the sealed ends and the lower search.
UPPER_FACTOR_SHARE = 0.75
#: Share of :func:`factor_bytes` that the lower search's states keep to (:func:`lower_factor_bytes`),
#: out of the rest: half of it (the pool and the sealed ends have the other half).
LOWER_FACTOR_SHARE = 0.125
#: Bytes per matrix entry of a bracket task outside its factors and its checks' fallback: the
#: operator's arrays, the SVD, the float32 copy, the row-block path's midpoint, the evaluations'
#: and error checks' m x N temporaries (measured: module docstring and docs/campaigns.md).
SEARCH_ENTRY_BYTES = 128
#: What a search on torch adds (``--device`` other than numpy): the import of torch (~208 MiB of
#: resident memory measured, torch 2.13 CPU), and the float64 numpy copies of the witnesses it
#: publishes beside its own tensors (16 more vectors of ``(m + N) r``, r the largest rank its
#: probes reach: :func:`torch_host_bytes`).
TORCH_BYTES, TORCH_RANK_VECTORS = 256 * MIB, 16
#: float64 vectors of ``(m + N) r`` that a witness probe at rank r holds besides its state (L-BFGS's
#: five curvature pairs and a spare one, its point, trial point, gradients, direction and scratch,
#: the stage's start and rebalanced factors, an evaluation's float32 gradient and a checked copy),
#: and that a kept state holds (its iterate and its best pair): :mod:`softrank_cert.solvers.upper.search`.
PROBE_VECTORS, STATE_VECTORS = 24, 4


@dataclass(frozen=True)
class CheckPlan:
    """How far the kernel may go on claims about one m x N operator within a memory limit:
    ``cap`` the highest Arb precision of the schedule whose enclosures (all precisions up to it:
    they stay cached on the operator) fit (None: none), ``float64`` whether the entrywise float64
    path's ~twenty m x N temporaries fit, ``need`` the Arb estimate through each precision."""

    cap: int | None
    float64: bool
    need: tuple[int, ...]


def check_plan(m: int, n: int, limit: int, schedule: list[int], *, d: int = 0, width: int = 0,
               kind: str = "scores", reserve: int = 0) -> CheckPlan:
    """The :class:`CheckPlan` of claims of factor width up to ``width`` on an m x N operator tried
    at the precisions ``schedule`` within ``limit`` bytes, ``reserve`` of which are kept for
    something else (a bracket task keeps the float64 path's room beside the Arb enclosures)."""
    need = tuple(arb_check_bytes(m, n, schedule[: i + 1], d=d, width=width, kind=kind) for i in range(len(schedule)))
    fits = [p for p, bytes_ in zip(schedule, need) if bytes_ + reserve <= limit]  # a prefix: need grows
    return CheckPlan(fits[-1] if fits else None, float64_check_bytes(m, n) <= limit, need)


def task_check_bytes(m: int, n: int, d: int = 0, kind: str = "scores", max_memory: int | None = None,
                     device: str | None = None) -> int:
    """The memory a bracket task lets the kernel's fallback paths use for its candidates: what the
    entrywise float64 path and the Arb balls at every precision through 512 bits need for claims
    of rank up to p, at most :func:`task_check_cap` (:data:`TASK_CHECK_CAP`, or more where a given
    ``--max-memory`` (``max_memory``) has room for it beside a task searching on ``device``).  The row-block path needs no room of its own
    (``block x N`` temporaries; its midpoint is in :data:`SEARCH_ENTRY_BYTES`).  Within this budget
    the kernel runs the float64 path when it fits and the Arb balls up to the highest precision
    that fits beside it (:func:`task_check_plan`); a candidate they cannot decide is not verified,
    and the search moves on."""
    from ..kernel import DEFAULT_MAX_PREC, precision_schedule

    full = float64_check_bytes(m, n) + arb_check_bytes(m, n, precision_schedule(DEFAULT_MAX_PREC), d=d,
                                                       width=min(m, n), kind=kind)
    return min(full, task_check_cap(m, n, d, max_memory, device))


def task_check_cap(m: int, n: int, d: int = 0, max_memory: int | None = None, device: str | None = None) -> int:
    """The most a task's checks may use: :data:`TASK_CHECK_CAP` by default; where the user gives a
    ``--max-memory`` (``max_memory``) with more room, what it leaves beside the rest of the task's
    estimate (:func:`bracket_task_bytes` less its check term, searching on ``device``), so that such a
    task still fits alone (at width 1024 the whole 512-bit schedule then fits in 6.2 GiB, at 2048
    the Arb balls at 64 bits in 8.7 GiB)."""
    if max_memory is None:
        return TASK_CHECK_CAP
    return max(TASK_CHECK_CAP, int(max_memory) - _task_rest_bytes(m, n, d) - torch_host_bytes(m, n, device))


class NamedLimit(int):
    """A memory limit in bytes that carries the words naming what sets it, for a refusal to quote
    (a plain ``int`` limit is ``--max-memory``'s)."""

    name: str

    def __new__(cls, value: int, name: str) -> NamedLimit:
        limit = super().__new__(cls, value)
        limit.name = name
        return limit


#: What :func:`task_check_limit` is called in a refusal.
TASK_CHECK_LIMIT_NAME = "the task's check budget (1 GiB at most unless --max-memory is given with room for more)"


def task_check_limit(m: int, n: int, d: int = 0, kind: str = "scores", max_memory: int | None = None,
                     device: str | None = None) -> NamedLimit:
    """:func:`task_check_bytes`, and never more than 90 % of what an address-space limit leaves this
    process (:func:`process_limit`): what a task's checks, and the signing process's re-check of
    its certificates, may use (named :data:`TASK_CHECK_LIMIT_NAME`); ``max_memory``: the
    ``--max-memory`` the user gave (None: not given), ``device``: where the task searches."""
    return NamedLimit(process_limit(task_check_bytes(m, n, d, kind, max_memory, device)), TASK_CHECK_LIMIT_NAME)


def task_check_plan(m: int, n: int, d: int = 0, kind: str = "scores", max_memory: int | None = None,
                    device: str | None = None) -> CheckPlan:
    """The :class:`CheckPlan` of a task's kernel checks within :func:`task_check_limit`: the Arb
    precisions whose enclosures fit beside the float64 path's room, for claims of rank up to p."""
    from ..kernel import DEFAULT_MAX_PREC, precision_schedule

    return check_plan(m, n, task_check_limit(m, n, d, kind, max_memory, device), precision_schedule(DEFAULT_MAX_PREC), d=d,
                      width=min(m, n), kind=kind, reserve=float64_check_bytes(m, n))


def factor_bytes(m: int, n: int) -> int:
    """What a bracket task's factors may hold: :data:`RANK_VECTORS` float64 vectors of ``(m + N) p``,
    at least :data:`FACTOR_FLOOR` (so that small operators, whose factors cost next to nothing,
    keep every state) and at most :data:`FACTOR_CAP` (which binds from width ~1100 on)."""
    return min(max(RANK_VECTORS * 8 * (m + n) * min(m, n), FACTOR_FLOOR), FACTOR_CAP)


def upper_factor_bytes(m: int, n: int) -> int:
    """The witness search's own share of :func:`factor_bytes`, which it keeps to by design: its
    kept states and the probe's L-BFGS vectors (:mod:`softrank_cert.solvers.upper.search`)."""
    return int(UPPER_FACTOR_SHARE * factor_bytes(m, n))


def probe_rank_cap(m: int, n: int, memory: float) -> int:
    """The largest rank whose witness probe (:data:`PROBE_VECTORS` and :data:`STATE_VECTORS` vectors
    of ``(m + N) r``) fits in ``memory`` bytes with no other state kept, at most p: the highest rank
    the witness search of an m x N operator probes within ``memory``."""
    return int(min(min(m, n), memory // ((PROBE_VECTORS + STATE_VECTORS) * 8 * (m + n))))


def torch_host_bytes(m: int, n: int, device: str | None) -> int:
    """Host memory a search on ``device`` (a ``--device`` value) holds beyond the numpy path's: none
    for numpy (None); for torch :data:`TORCH_BYTES` and :data:`TORCH_RANK_VECTORS` vectors of
    ``(m + N) r``, r the largest rank its probes reach -- on the CPU the rank cap of the search's
    host share (:func:`probe_rank_cap` of :func:`upper_factor_bytes`: 1,974 at width 4096, 987 at
    8192, so the term stops growing at about 2.2 GiB), on a CUDA device (whose share is sized to
    the device, not the host) and under ``auto`` p."""
    if device in (None, "numpy"):
        return 0
    rank = probe_rank_cap(m, n, upper_factor_bytes(m, n)) if device == "cpu" else min(m, n)
    return TORCH_BYTES + TORCH_RANK_VECTORS * 8 * (m + n) * rank


def lower_factor_bytes(m: int, n: int) -> int:
    """The lower search's share of :func:`factor_bytes` (:data:`LOWER_FACTOR_SHARE`), which its
    states' arrays keep to after every unit (:meth:`softrank_cert.solvers.lower.base.LowerBase.forget`):
    126 MiB at width 512 (its live states there held a few MiB), 576 MiB from width ~1100."""
    return int(LOWER_FACTOR_SHARE * factor_bytes(m, n))


def bracket_task_bytes(m: int, n: int, d: int = 0, device: str | None = None, kind: str = "scores",
                       max_memory: int | None = None) -> int:
    """Peak resident memory a worker running one operator's bracket search (or an audit / budgets
    task on it) may reach, an upper bound by construction where the memory is held by design:
    the interpreter, :data:`SEARCH_ENTRY_BYTES` per matrix entry, the kernel's fallback budget
    (:func:`task_check_bytes`, which the task's checks keep to; ``max_memory``: a ``--max-memory``
    the user gave) and the factors (:func:`factor_bytes`, of which the witness search and the lower
    search keep to their shares); with a search on torch (``device`` ``cpu``, ``cuda``, ``auto``)
    :func:`torch_host_bytes` more."""
    return (_task_rest_bytes(m, n, d) + task_check_bytes(m, n, d, kind, max_memory, device)
            + torch_host_bytes(m, n, device))


def _task_rest_bytes(m: int, n: int, d: int) -> int:
    """:func:`bracket_task_bytes` on the numpy path less its check term."""
    return WORKER_BASE_BYTES + 16 * MIB + SEARCH_ENTRY_BYTES * m * n + 32 * (m + n) * d + factor_bytes(m, n)


def operator_task_shape(op: Operator) -> tuple[int, int, int, str]:
    """``(m, N, d, kind)`` of an operator (d: the head dimension of a ``qk`` operator, else 0)."""
    m, n = op.shape
    return m, n, op.arrays["Q"].shape[1] if op.kind == "qk" else 0, op.kind


def operator_task_bytes(op: Operator, device: str | None = None, max_memory: int | None = None) -> int:
    """:func:`bracket_task_bytes` of a kernel :class:`~softrank_cert.kernel.Operator` searched on
    ``device`` (a ``--device`` value; None or ``numpy``: the numpy path), ``max_memory`` the
    ``--max-memory`` the user gave (None: not given)."""
    m, n, d, kind = operator_task_shape(op)
    return bracket_task_bytes(m, n, d, device, kind, max_memory)


def operator_check_plan(op: Operator, max_memory: int | None = None, device: str | None = None) -> CheckPlan:
    """:func:`task_check_plan` of a kernel :class:`~softrank_cert.kernel.Operator`."""
    return task_check_plan(*operator_task_shape(op), max_memory, device)


def operator_check_limit(op: Operator, max_memory: int | None = None, device: str | None = None) -> NamedLimit:
    """:func:`task_check_limit` of a kernel :class:`~softrank_cert.kernel.Operator`: what its task's
    checks (a bracket, an audit's supplied certificates, a budgets pass) and the signing process's
    re-check of what the task returns may use."""
    return task_check_limit(*operator_task_shape(op), max_memory, device)


def recheck_reserve(ops: Iterable[Operator], max_memory: int | None = None, device: str | None = None) -> int:
    """What a campaign's signing process keeps beside its worker processes (:func:`run_tasks
    <softrank_cert.plumbing.parallel.run_tasks>`' ``reserve``) to re-check the certificates of a
    finished task, one task at a time, while the others go on: the largest
    :func:`operator_check_limit` of ``ops`` (0 for none)."""
    shapes = {operator_task_shape(op) for op in ops}
    return max((int(task_check_limit(*shape, max_memory, device)) for shape in shapes), default=0)
