"""Seconds per smoothed evaluation (value and gradient, :mod:`softrank_cert.solvers.backend`) on
the numpy path and on torch (``--device``, default ``cpu``), one thread each, at the ranks the
witness search probes on wide operators: the figure behind
:data:`softrank_cert.solvers.device.TORCH_CPU_COST` (docs/solvers.md, "Devices").

    nice -n 10 python benchmarks/bench_devices.py --name cpu

Writes ``benchmarks/results/bench_devices_<name>.json`` and ``.md``: per (width, rank) the median
of ``--repeats`` timed evaluations (after two untimed ones) per back end and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np  # noqa: E402

SIZES = ((512, 100), (1024, 200), (2048, 400))


def median_seconds(fn, repeats: int, sync=None) -> float:
    seconds = []
    for i in range(repeats + 2):
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        if i >= 2:
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    from softrank_cert.solvers.backend import NUMPY
    from softrank_cert.solvers.torch_backend import TorchBackend

    torch.set_num_threads(1)
    ops = TorchBackend(args.device)
    sync = (lambda: torch.cuda.synchronize()) if ops.device.type == "cuda" else None
    rng = np.random.default_rng(0)
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n, r in SIZES:
            A = (rng.random((n, n)) ** 8)
            A /= A.sum(axis=1, keepdims=True)
            U, W = rng.standard_normal((n, r)) / r, rng.standard_normal((n, r)) / n
            A32 = A.astype(np.float32)
            At, Ut, Wt = ops.matrix({}, A, np.float32), *ops.factors(U, W)
            numpy_s = median_seconds(partial(NUMPY.smooth_witness, A32, U, W, 100.0, 1e-4), args.repeats)
            torch_s = median_seconds(partial(ops.smooth_witness, At, Ut, Wt, 100.0, 1e-4), args.repeats, sync)
            rows.append({"width": n, "rank": r, "numpy_ms": round(1e3 * numpy_s, 3), "torch_ms": round(1e3 * torch_s, 3),
                         "torch_over_numpy": round(torch_s / numpy_s, 3)})
            print(json.dumps(rows[-1]), flush=True)
    results = ROOT / "benchmarks" / "results"
    meta = {"device": args.device, "torch": torch.__version__, "numpy": np.__version__, "repeats": args.repeats}
    (results / f"bench_devices_{args.name}.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [f"torch {torch.__version__} on {args.device}, numpy {np.__version__}, one thread each, medians of "
             f"{args.repeats}", "", "| width | rank | numpy ms | torch ms | torch / numpy |", "|---|---|---|---|---|"]
    lines += [f"| {r['width']} | {r['rank']} | {r['numpy_ms']} | {r['torch_ms']} | {r['torch_over_numpy']} |" for r in rows]
    (results / f"bench_devices_{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
