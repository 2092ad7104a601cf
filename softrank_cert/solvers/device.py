"""Where the untrusted search runs (``--device``, ``device=``), and what its work costs there.

``None`` or ``"numpy"``: the numpy path (the default; certificates exactly as before).  ``"cpu"``:
the torch back end (:mod:`.torch_backend`) on the CPU, or the numpy path when torch is not
installed.  ``"cuda"`` (or ``"cuda:N"``): torch on that CUDA device; without torch or without
CUDA it is refused (:class:`~softrank_cert.errors.InvalidInputError`, one line naming why).
``"auto"``: CUDA when torch sees one, else the numpy path.  torch is imported here only when a
spec other than numpy is resolved, never when the package is imported.

**Work on a device.**  A work unit is what the calibration machine's CPU does in a given time
(:mod:`.work`); a device does the same evaluation in another time.  Every charge of the smoothed
evaluations, error checks and large-k key sides is multiplied by the device's ``cost``: its
seconds per evaluation over the work model's seconds for the same evaluation.  On ``cpu`` the
cost is the recorded constant :data:`TORCH_CPU_COST` (measured on the calibration machine,
docs/solvers.md "Devices"), so a torch-cpu search is as reproducible as the numpy one; on CUDA
it is measured at the start (:func:`calibrate`: timed evaluations at the operator's shape,
rounded to a quarter power of two), so the default work means about the default seconds of
search on that device.  The device, the cost and the library versions are recorded in the
certificate's provenance (:meth:`SearchDevice.provenance`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .backend import NUMPY, NumpyBackend
from .work import evaluation_units, units_per_second

#: Accepted values of ``--device``.
DEVICE_CHOICES = ("numpy", "cpu", "cuda", "auto")
#: Work-charge factor of the torch back end on the CPU, one thread: its seconds per smoothed
#: evaluation over the numpy path's, 0.82-1.90 at widths 512-2048 (median 1.24 of two runs of
#: ``benchmarks/bench_devices.py``; docs/solvers.md, "Devices").
TORCH_CPU_COST = 1.25
#: Rank of the timed evaluations of :func:`calibrate` (a fraction of the operator's p).
CALIBRATION_RANK_SHARE = 0.125
#: Key of the search's record in a certificate's provenance.
PROVENANCE_KEY = "search_device"


@dataclass(frozen=True)
class SearchDevice:
    """A resolved device (plain data: it travels to worker processes as it is).

    ``kind``: ``"numpy"``, ``"cpu"`` or ``"cuda[:N]"``; ``cost``: the factor on the device's work
    charges; ``label``: the device's name as recorded (e.g. ``NVIDIA H100 80GB HBM3``)."""

    kind: str = "numpy"
    cost: float = 1.0
    label: str = "numpy"

    @property
    def is_numpy(self) -> bool:
        return self.kind == "numpy"

    def backend(self) -> NumpyBackend:
        """The array back end of the searches (:data:`~.backend.NUMPY` for the numpy path)."""
        if self.is_numpy:
            return NUMPY
        from .torch_backend import TorchBackend

        return TorchBackend(self.kind, self.cost, self.label)  # type: ignore[return-value]

    def provenance(self) -> dict[str, Any]:
        """What a certificate's provenance records of the search: nothing for the numpy path,
        else ``{"search_device": {device, torch, numpy, work_cost[, cuda]}}`` (strings)."""
        if self.is_numpy:
            return {}
        import torch

        record = {"device": f"{self.kind} ({self.label})", "torch": torch.__version__, "numpy": np.__version__,
                  "work_cost": format(self.cost, ".6g")}
        if self.kind.startswith("cuda"):
            record["cuda"] = str(torch.version.cuda)
        return {PROVENANCE_KEY: record}

    @contextlib.contextmanager
    def threads(self) -> Iterator[None]:
        """One CPU thread for torch while the search runs (as the numpy path's one BLAS thread)."""
        if self.is_numpy:
            yield
            return
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


NUMPY_DEVICE = SearchDevice()


def _torch() -> Any:
    """The torch module, or None when it cannot be imported."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _cuda_ready(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 -- a broken CUDA set-up is "no CUDA"
        return False


def resolve_device(spec: str | SearchDevice | None, shape: tuple[int, int] | None = None) -> SearchDevice:
    """The :class:`SearchDevice` of ``spec`` (module docstring); on CUDA calibrated at ``shape``
    (the operator's m x N; None: not calibrated, cost 1 -- :func:`check_device`).  A
    :class:`SearchDevice` is returned as it is (a recorded device: the same cost again).  Raises
    :class:`~softrank_cert.errors.InvalidInputError` for an unknown spec and for CUDA without
    torch or without a CUDA device."""
    if isinstance(spec, SearchDevice):
        return spec
    if spec is None or spec == "numpy":
        return NUMPY_DEVICE
    if not isinstance(spec, str) or not (spec in DEVICE_CHOICES or _cuda_index(spec)):
        raise InvalidInputError(f"device must be one of {', '.join(DEVICE_CHOICES)} (or cuda:N), got {spec!r:.60}")
    torch = _torch()
    if spec == "cpu":
        return NUMPY_DEVICE if torch is None else SearchDevice("cpu", TORCH_CPU_COST, "torch cpu")
    if torch is None:
        if spec == "auto":
            return NUMPY_DEVICE
        raise InvalidInputError(f"device {spec}: torch is not installed (pip install 'softrank-cert[torch]' "
                                "with a CUDA build of torch)")
    if not _cuda_ready(torch):
        if spec == "auto":
            return NUMPY_DEVICE
        raise InvalidInputError(f"device {spec}: torch {torch.__version__} sees no CUDA device "
                                f"(CUDA build: {torch.version.cuda or 'none'})")
    kind = "cuda:0" if spec in ("cuda", "auto") else spec
    index = int(kind.split(":")[1])
    if index >= torch.cuda.device_count():
        raise InvalidInputError(f"device {spec}: torch sees {torch.cuda.device_count()} CUDA device(s)")
    label = torch.cuda.get_device_name(index)
    return SearchDevice(kind, 1.0 if shape is None else calibrate(kind, shape), label)


def check_device(spec: str | None) -> None:
    """Refuse (:class:`~softrank_cert.errors.InvalidInputError`) a ``--device`` that cannot run
    here, before any work (nothing is calibrated)."""
    resolve_device(spec, None)


def _cuda_index(spec: str) -> bool:
    return spec.startswith("cuda:") and spec[5:].isdigit()


@functools.lru_cache(maxsize=64)
def calibrate(kind: str, shape: tuple[int, int], repeats: int = 5) -> float:
    """The work-charge factor of torch on ``kind`` at an m x N operator: the median seconds of
    ``repeats`` smoothed evaluations (after two unmeasured ones) at rank ``p / 8`` over the work
    model's seconds for them, rounded to a quarter power of two.  Measured once per process and
    shape (so a campaign's main process and its resumed certificates agree on it)."""
    import torch

    from .torch_backend import TorchBackend

    m, n = shape
    r = max(1, int(CALIBRATION_RANK_SHARE * min(m, n)))
    ops = TorchBackend(kind)
    rng = np.random.default_rng(0)
    A = ops.matrix({}, rng.random((m, n)) / n, np.float32)
    U, W = ops.factors(rng.standard_normal((m, r)) / r, rng.standard_normal((n, r)) / n)
    seconds = []
    for i in range(repeats + 2):
        start = time.perf_counter()
        ops.smooth_witness(A, U, W, 100.0, 1e-4)
        if ops.device.type == "cuda":
            torch.cuda.synchronize(ops.device)
        if i >= 2:
            seconds.append(time.perf_counter() - start)
    model = evaluation_units(m, n, r) / units_per_second(m, n)
    ratio = max(float(np.median(seconds)) / model, 1e-6)
    return float(2.0 ** (round(4.0 * math.log2(ratio)) / 4.0))


#: Bytes per matrix entry that a search on a CUDA device holds besides its factors: ``A`` in float64
#: and float32, an evaluation's two float32 and an error check's one float64 m x N temporaries.
DEVICE_ENTRY_BYTES = 28
#: Share of a CUDA device's free memory (at the start of a search) that the search plans for.
DEVICE_SHARE = 0.9


def device_search_bytes(m: int, n: int) -> int:
    """Device memory the witness search of an m x N operator needs at least: the m x N arrays
    (:data:`DEVICE_ENTRY_BYTES` per entry) and L-BFGS's 14 float64 vectors of ``(m + N) r`` at
    rank ``r = p / 2`` (the searches start at the truncated SVD's rank, below p)."""
    p = min(m, n)
    return DEVICE_ENTRY_BYTES * m * n + 7 * 8 * (m + n) * p


def search_memory(device: SearchDevice, m: int, n: int) -> float:
    """The bytes the witness search's kept states and probe vectors may hold
    (:class:`~softrank_cert.solvers.upper.search.UpperSearch`, which keeps to them): on the host
    (numpy, torch on the CPU) its share of the task's factor budget
    (:func:`~softrank_cert.util.memory.upper_factor_bytes`, part of the estimate ``--max-memory``
    admits tasks by); on a CUDA device :data:`DEVICE_SHARE` of the device's free memory at the
    start, less the m x N arrays -- checked before anything is allocated there, so that the
    search's factors never outgrow the device."""
    if not device.kind.startswith("cuda"):
        from ..util.memory import upper_factor_bytes

        return upper_factor_bytes(m, n)
    import torch

    free, _total = torch.cuda.mem_get_info(torch.device(device.kind))
    return max(DEVICE_SHARE * free - DEVICE_ENTRY_BYTES * m * n, 0.0)


def check_device_memory(device: SearchDevice, m: int, n: int) -> None:
    """Refuse (one line) a CUDA search whose :func:`device_search_bytes` exceed the device's free
    memory, before anything is allocated there."""
    if not device.kind.startswith("cuda"):
        return
    import torch

    from ..util.memory import format_bytes

    free, _total = torch.cuda.mem_get_info(torch.device(device.kind))
    need = device_search_bytes(m, n)
    if need > free:
        raise InvalidInputError(f"device {device.kind} ({device.label}) has {format_bytes(free)} free; the search of "
                                f"a {m} x {n} operator needs about {format_bytes(need)}")
