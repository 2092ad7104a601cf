"""The torch back end of the untrusted searches: the operations of
:class:`~softrank_cert.solvers.backend.NumpyBackend` on torch tensors, on any device.

Imported only when a search is asked to run on torch (:mod:`.device`): importing the package,
or ``softrank --help``, never imports torch.  The same code runs on a CUDA device and, in the
test suite, on the CPU.  Vectors of L-BFGS and the witness factors are float64 tensors on the
device; the smoothed evaluations run in float32 (as the numpy path's); the true error that
steers the search is float64 on the device.  Nothing here is trusted: what it finds goes back
to the CPU as float64 numpy arrays (:meth:`TorchBackend.to_numpy`) and the kernel decides.

Memory: one evaluation holds two m x N float32 temporaries (the residual, reused for the
gradient weights, and the root), one float64 error check one m x N float64 temporary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .backend import ArrayBackend


def _f64(x: Any) -> float:
    return float(x.item()) if isinstance(x, torch.Tensor) else float(x)


class TorchBackend(ArrayBackend):
    """Torch tensors on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...); ``cost``: the
    factor on every work charge of what runs here (:mod:`.device`)."""

    xp = torch

    def __init__(self, device: str, cost: float = 1.0, label: str | None = None) -> None:
        self.device = torch.device(device)
        self.cost = float(cost)
        self.name = f"torch-{self.device.type}"
        self.label = label or self.name

    # -- vectors of L-BFGS --------------------------------------------------------------
    def copy64(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.to(self.device, torch.float64, copy=True)
        return torch.tensor(np.asarray(x, dtype=np.float64), dtype=torch.float64, device=self.device)

    def norm(self, a: Any) -> float:
        return float(torch.linalg.vector_norm(a).item())

    # -- matrices of the witness search ---------------------------------------------------
    def matrix(self, memo: dict, A: np.ndarray, dtype: type) -> Any:
        key = ("torch", str(self.device), np.dtype(dtype).str)
        if key not in memo:  # on the CPU, float64 A is shared with numpy, not copied
            array: np.ndarray = np.ascontiguousarray(A, dtype=dtype)
            host = torch.from_numpy(array if array.flags.writeable else array.copy())
            memo[key] = host if self.device.type == "cpu" else host.to(self.device)
        return memo[key]

    def factors(self, U: np.ndarray, W: np.ndarray) -> tuple[Any, Any]:
        return self.copy64(U), self.copy64(W)

    def clone(self, a: Any) -> Any:
        return a.clone()

    def flat(self, U: Any, W: Any) -> Any:
        return torch.cat([U.reshape(-1), W.reshape(-1)])

    def max_row_error(self, A: Any, U: Any, W: Any) -> float:
        return _f64(self.row_errors(A, U, W).max())

    def row_errors(self, A: Any, U: Any, W: Any) -> Any:
        R = torch.addmm(A, U, W.T, alpha=-1.0)
        R.abs_()
        return R.sum(dim=1)

    def rows_at_least(self, values: Any, level: float) -> Any:
        return torch.nonzero(values >= level).flatten()

    def smooth_witness(self, A_eval: Any, U: Any, W: Any, tau: float, delta: float) -> tuple[float, Any]:
        n = A_eval.shape[1]
        dt = A_eval.dtype
        U, W = U.to(dt), W.to(dt)
        R = torch.addmm(A_eval, U, W.T, alpha=-1.0)
        S = torch.mul(R, R)
        S.add_(delta * delta).sqrt_()
        f = S.sum(dim=1, dtype=torch.float64) - n * delta
        top = f.max()
        z = torch.exp(tau * (f - top))
        total = z.sum()
        value = top + torch.log(total) / tau
        p = (z / total).to(dt)
        R.div_(S).mul_(p[:, None])
        del S
        gU, gW = -(R @ W), -(R.T @ U)
        return _f64(value), torch.cat([gU.reshape(-1), gW.reshape(-1)]).to(torch.float64)

    # -- key sides of the large-k lower family --------------------------------------------
    def key_matrix(self, C: np.ndarray) -> Any:
        return self.copy64(C)

    def cholesky(self, M: Any) -> Any | None:
        L, info = torch.linalg.cholesky_ex(M)
        return None if int(info.item()) != 0 else L

    def cho_solve(self, factor: Any, B: Any) -> Any:
        return torch.cholesky_solve(B, factor)

    def eye(self, k: int) -> Any:
        return torch.eye(k, dtype=torch.float64, device=self.device)

    def zeros(self, shape: tuple[int, ...]) -> Any:
        return torch.zeros(shape, dtype=torch.float64, device=self.device)

    # -- results --------------------------------------------------------------------------
    def to_numpy(self, a: Any) -> np.ndarray:
        if isinstance(a, torch.Tensor):
            return a.detach().to("cpu", torch.float64).numpy().copy()
        return np.array(a, dtype=np.float64)

    def provenance(self) -> dict[str, str]:
        """The device, the library versions and the cost factor the work was charged at."""
        return {"device": self.label, "torch": torch.__version__, "numpy": np.__version__,
                "work_cost": format(self.cost, ".6g")}
