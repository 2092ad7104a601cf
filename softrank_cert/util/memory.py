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
  on high-rank heads far more: 409 MiB on SmolLM2 L10H4 at 512 (ranks up to 371), against
  248 MiB on L15H4 (ranks up to 181), because the witness search keeps a state of four
  ``(m + N) x r`` factors per rank it probed, and L-BFGS 14 vectors of that size
  (``benchmarks/results/memory_peak_*.json``; :func:`bracket_task_bytes` has a term for it).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from ..errors import InvalidInputError

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


#: float64 vectors of ``(m + N) p`` entries that :func:`bracket_task_bytes` allows for the witness
#: search's factors: the states of the ranks it probed and L-BFGS's vectors, at ranks up to p.
RANK_VECTORS = 32
#: What a search on torch adds (``--device`` other than numpy): the import of torch (~208 MiB of
#: resident memory measured, torch 2.13 CPU), and the float64 numpy copies of the witnesses it
#: publishes beside its own tensors (16 more vectors of ``(m + N) p``).
TORCH_BYTES, TORCH_RANK_VECTORS = 256 * MIB, 16


def bracket_task_bytes(m: int, n: int, d: int = 0, torch: bool = False) -> int:
    """Estimated peak resident memory of a worker running one operator's bracket search (or an
    audit / budgets task on it), an upper bound of what was measured on the widest heads: the
    interpreter, the solvers and float64 checks (measured 17 / 37 / 106 MB above the interpreter
    at widths 128 / 256 / 512 on low-rank heads, i.e. at most ~450 B per entry plus 16 MiB), one
    Arb enclosure at 64 bits for the candidates whose margin is too thin for the float64 path
    (~400 B per entry), and :data:`RANK_VECTORS` float64 vectors of ``(m + N) p`` for the
    witness search's factors, which high-rank heads fill (module docstring); with ``torch`` (a
    search on a torch device) :data:`TORCH_BYTES` and :data:`TORCH_RANK_VECTORS` more."""
    p = min(m, n)
    vectors = RANK_VECTORS + (TORCH_RANK_VECTORS if torch else 0)
    return (WORKER_BASE_BYTES + 16 * MIB + 850 * m * n + 32 * (m + n) * d + vectors * 8 * (m + n) * p
            + (TORCH_BYTES if torch else 0))


def operator_task_bytes(op: object, device: str | None = None) -> int:
    """:func:`bracket_task_bytes` of a kernel :class:`~softrank_cert.kernel.Operator` searched on
    ``device`` (a ``--device`` value; None or ``numpy``: the numpy path)."""
    m, n = op.shape  # type: ignore[attr-defined]
    d = op.arrays["Q"].shape[1] if op.kind == "qk" else 0  # type: ignore[attr-defined]
    return bracket_task_bytes(m, n, d, torch=device not in (None, "numpy"))
