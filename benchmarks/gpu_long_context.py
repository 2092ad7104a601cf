"""Long-context witness search on a lent GPU, verified back here (issue 44, item 5).

Two modes:

``run`` (on the device machine: Python 3.12, torch with CUDA, no python-flint, no highspy)
    For every operator of a panel ``.npz`` (``softrank panel`` output: ``NAME/Q``, ``NAME/K``,
    ``NAME/causal``, ``__provenance__``; ``--operators`` picks some), in order of width: ``A`` in
    float64 (numpy, the driver's formula), its SVD on the device, then the smoothed witness search
    (:class:`~softrank_cert.solvers.upper.search.UpperSearch`) on the torch back end of
    ``--device`` for ``--seconds`` of wall time (a deadline; the work is charged at the device's
    calibrated cost).  Writes ``arrays.npz`` (the float64 ``U``, ``W`` of the best witness per
    operator and tolerance) and ``timings.json`` (set-up, SVD and search seconds, evaluations,
    the device, its cost, the float64 errors) to ``--out``.  Imports nothing that needs
    python-flint or highspy (the kernel is not used there).
``verify`` (here)
    Re-reads the panel with the kernel's loader, checks every witness of ``arrays.npz`` with the
    kernel (:func:`~softrank_cert.certio.verified.verify_upper_end`) and writes
    ``benchmarks/results/<name>.json`` and ``.md`` (``--results`` to write elsewhere): the
    VERIFIED upper ends per width, tolerance and operator, with the device's timings.

Usage (the panel captured here first, e.g. ``softrank panel --gguf smollm2 --text
examples/data/gpl3.txt --widths 2048,4096,8192 --layers 0,10,15 --heads 4 --out
shared/gpu_panel.npz``: about 45 MB, under the 64 MiB a device call carries; gpl3.txt's 35,000
characters are about 8,500 tokens, just enough for 8192)::

    # device: one 10-minute call (9 operators x 40 s, the SVDs, the calibrations and the start-up)
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_long_context.py run shared/gpu_panel.npz --out $OUT --device cuda --seconds 40
    # here
    python benchmarks/gpu_long_context.py verify shared/gpu_panel.npz --arrays FILES_AT --name gpu_long_context
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np  # noqa: E402

EPS = "0.1,0.25,0.5"


def _names(panel: Any, chosen: str | None) -> list[str]:
    names = sorted({k.rsplit("/", 1)[0] for k in panel.files if k.endswith("/Q")},
                   key=lambda n: (panel[f"{n}/Q"].shape[0], n))
    if chosen:
        wanted = chosen.split(",")
        missing = [n for n in wanted if n not in names]
        if missing:
            raise SystemExit(f"not in the panel: {', '.join(missing)}")
        names = [n for n in names if n in wanted]
    return names


def attention(panel: Any, name: str) -> np.ndarray:
    """float64 ``A`` of a panel's ``qk`` operator (``beta = 1/sqrt(d)``, the causal mask when
    stored), as :func:`softrank_cert.util.dense.attention_matrix` forms it."""
    from softrank_cert.util.dense import softmax_rows

    Q, K = panel[f"{name}/Q"], panel[f"{name}/K"]
    causal = f"{name}/causal" in panel.files and bool(panel[f"{name}/causal"])
    allowed = np.tril(np.ones((Q.shape[0], K.shape[0]), dtype=bool)) if causal else None
    return softmax_rows((1.0 / np.sqrt(Q.shape[1])) * (Q @ K.T), allowed)


def search(A: np.ndarray, eps_values: list[float], device: str, seconds: float) -> tuple[dict[float, Any], dict]:
    """The best witness per tolerance (``{eps: UpperCandidate}``) of the smoothed witness search
    on ``device`` within ``seconds``, and its timings."""
    import torch

    from softrank_cert.solvers.device import check_device_memory, resolve_device
    from softrank_cert.solvers.upper.search import UpperSearch
    from softrank_cert.solvers.work import Budget, units_per_second
    from softrank_cert.util.dense import Dense

    m, n = A.shape
    where = resolve_device(device, (m, n))
    check_device_memory(where, m, n)
    d = Dense(A)
    start = time.perf_counter()
    u, s, vt = torch.linalg.svd(torch.tensor(A, device="cpu" if where.is_numpy else where.kind), full_matrices=False)
    d.__dict__["svd"] = (u.cpu().numpy(), s.cpu().numpy(), vt.cpu().numpy())  # the cached SVD, from the device
    svd_seconds = time.perf_counter() - start
    best: dict[float, Any] = {}

    def add(c: Any) -> None:
        for eps in eps_values:
            if c.error <= eps and (eps not in best or c.r < best[eps].r):
                best[eps] = c

    tsvd = _tsvd_ranks(d, eps_values, add, where.backend())

    def best_rank(eps: float) -> int | None:
        return best[eps].r if eps in best else None

    budget = Budget(math.inf, time.perf_counter() + seconds, units_per_second(m, n) * seconds / where.cost)
    upper = UpperSearch(d, eps_values, add, best_rank, lambda eps: 1, budget.plan, ops=where.backend())
    began = time.perf_counter()
    with where.threads():
        upper.run(budget.until())
    evaluations = sum(st.evaluations for st in upper.states.values())
    return best, {"device": where.provenance().get("search_device", {"device": "numpy"}), "svd_seconds": round(svd_seconds, 2),
                  "search_seconds": round(time.perf_counter() - began, 2), "evaluations": evaluations,
                  "work_units": round(budget.used), "tsvd_ranks": {str(e): r for e, r in tsvd.items()}}


def _tsvd_ranks(d: Any, eps_values: list[float], add: Any, ops: Any) -> dict[float, int]:
    """Least rank whose truncated SVD meets each tolerance (bisection over the rank, the float64
    errors on the device of ``ops``; ``p`` when none below it does), each such witness handed to
    ``add``: where the search starts."""
    from softrank_cert.solvers.candidates import UpperCandidate

    u, s, vt = d.svd
    A = ops.matrix(d.memo, d.A, np.float64)

    def error(r: int) -> float:
        return ops.max_row_error(A, *ops.factors(u[:, :r] * s[:r], vt[:r].T))

    out: dict[float, int] = {}
    for eps in eps_values:
        lo, hi = 0, d.p
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if error(mid) <= eps:
                hi = mid
            else:
                lo = mid
        add(UpperCandidate(hi, u[:, :hi] * s[:hi], vt[:hi].T.copy(), error(hi), "tsvd"))
        out[eps] = hi
    return out


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    panel = np.load(args.panel)
    eps_list = args.eps.split(",")
    arrays: dict[str, np.ndarray] = {}
    rows = []
    for name in _names(panel, args.operators):
        start = time.perf_counter()
        A = attention(panel, name)
        best, timing = search(A, [float(e) for e in eps_list], args.device, args.seconds)
        ends = {}
        for eps in eps_list:
            c = best.get(float(eps))
            if c is not None:
                arrays[f"{name}/{eps}/U"], arrays[f"{name}/{eps}/W"] = c.U, c.W
                ends[eps] = {"r": c.r, "float64_error": repr(c.error), "construction": c.method}
        rows.append({"operator": name, "shape": list(A.shape), "seconds": round(time.perf_counter() - start, 2),
                     "ends": ends, **timing})
        print(json.dumps(rows[-1]), flush=True)
        np.savez(out / "arrays.npz", **arrays)  # after every operator: what is done comes back even if cut off
        (out / "timings.json").write_text(json.dumps({"eps": eps_list, "seconds_per_operator": args.seconds,
                                                      "operators": rows}, indent=1) + "\n")


def verify(args: argparse.Namespace) -> None:
    from softrank_cert import load_operator
    from softrank_cert.certio.verified import verify_upper_end

    folder = Path(args.arrays)
    timings = json.loads((folder / "timings.json").read_text())
    arrays = np.load(folder / "arrays.npz")
    rows = []
    for row in timings["operators"]:
        op = load_operator(args.panel, row["operator"])
        verified = {}
        for eps, end in row["ends"].items():
            U, W = arrays[f"{row['operator']}/{eps}/U"], arrays[f"{row['operator']}/{eps}/W"]
            sealed = verify_upper_end(op, eps, int(end["r"]), U, W, end["construction"])
            verified[eps] = {"r": int(end["r"]), "verdict": "VERIFIED" if sealed is not None else "NOT VERIFIED"}
        rows.append({**row, "verified": verified})
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{args.name}.json").write_text(json.dumps({"eps": timings["eps"], "seconds_per_operator":
                                                           timings["seconds_per_operator"], "operators": rows},
                                                          indent=1) + "\n")
    lines = ["| operator | device | search s | evaluations | truncated-SVD ranks | verified upper ends |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ends = ", ".join(f"{e}: {v['r']} {v['verdict']}" for e, v in r["verified"].items())
        lines.append(f"| {r['operator']} | {r['device'].get('device', '')} | {r['search_seconds']} | {r['evaluations']} "
                     f"| {r['tsvd_ranks']} | {ends} |")
    (results / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("run", help="search on the device; write arrays and timings to --out")
    p.add_argument("panel")
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=float, default=50.0, help="wall seconds of search per operator")
    p.add_argument("--eps", default=EPS)
    p.add_argument("--operators", help="names (comma-separated); default: all, narrowest first")
    v = sub.add_parser("verify", help="verify the arrays brought back, with the kernel; write the results")
    v.add_argument("panel")
    v.add_argument("--arrays", required=True, help="the folder run wrote (its files as fetched)")
    v.add_argument("--name", default="gpu_long_context")
    v.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    run(args) if args.mode == "run" else verify(args)


if __name__ == "__main__":
    main()
