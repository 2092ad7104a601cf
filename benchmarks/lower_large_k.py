"""Probe: general key sides at large k against signed key groups (issue #30, item 3).

On MiniLM heads (bench_solvers' panel loader) at given k, compares the float64 threshold
``T = 1 / (||X|| ||Y|| ||(XAY)^{-1}||)`` of (a) the best signed-group pair that ``LowerSearch``
finds at that k with a fixed work and (b) general pairs: a smoothed Y-step on ``C Y = I``
(:mod:`softrank_cert.solvers.lower.smooth_key`) alternated with the exact X-step LP, from
selection starts (pivoted QR rows, complete-pivoting rows, the rows the signed pair leans on)
and from the signed pair itself.  Usage::

    python benchmarks/lower_large_k.py --heads "L1H1:31,34,39,71,78,89,100,110;L4H6:68,75,85,127,140,159" \
        --signed-work 0 --starts qr,pivot --name lowk_probe        # what produced results/lowk_probe.json
"""

from __future__ import annotations

import argparse
import json
import math
import time

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

from bench_solvers import ROOT, _single_thread, document_text, minilm_panel
from softrank_cert.solvers import Dense
from softrank_cert.solvers.lower.lp import RowLP
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.lower.smooth_key import smooth_key_side
from softrank_cert.solvers.lower.starts import selection
from softrank_cert.solvers.work import Budget, row_lp_scale
from softrank_cert.util.dense import threshold


def signed_best(d: Dense, k: int, work: float) -> tuple[float, np.ndarray | None, np.ndarray | None, LowerSearch]:
    """Best signed pair of ``LowerSearch`` held at target k (floor k - 1, ceiling k, an eps it
    cannot reach so that the target stays k) with ``work`` units."""
    search = LowerSearch(d, [100.0], lambda _c: None, lambda _e: k, lambda _e: k - 1)
    search.general = ()
    search.run(Budget(work).until())
    s = search.states.get(k)
    return (0.0, None, None, search) if s is None else (s.t, s.X, s.Y, search)


def general_pair(A: np.ndarray, X: np.ndarray, Y: np.ndarray | None, sweeps: int, evaluations: int
                 ) -> tuple[float, list[float]]:
    """Smoothed Y-step from ``Y`` (None: the least-norm solution), then ``sweeps`` rounds of
    exact X-step and smoothed Y-step; best threshold and the threshold after each step."""
    k = X.shape[0]
    until = Budget().until()
    lp = RowLP(row_lp_scale(*A.shape))
    Y = smooth_key_side(X @ A, np.zeros((A.shape[1], k)) if Y is None else Y, until, evaluations=evaluations)
    trace = [threshold(A, X, Y)]
    for _ in range(sweeps):
        X2 = lp.solve(A @ Y, until)
        if X2 is None:
            break
        trace.append(threshold(A, X2, Y))
        Y = smooth_key_side(X2 @ A, Y, until, evaluations=evaluations)
        if Y is None:
            break
        trace.append(threshold(A, X2, Y))
    return max(trace), trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--doc", default="gfdl13")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--heads", required=True, help="HEAD:k,k,... entries separated by ';'")
    parser.add_argument("--signed-work", type=float, default=100000.0)
    parser.add_argument("--sweeps", type=int, default=0)
    parser.add_argument("--evaluations", type=int, default=150, help="smoothed Y-step evaluations per stage")
    parser.add_argument("--starts", default="qr,pivot,lean,signed")
    parser.add_argument("--name", default="lowk_probe")
    args = parser.parse_args()
    _single_thread()
    path, _ = document_text(args.doc, ROOT / "benchmarks" / "results")
    panel = dict(minilm_panel(args.width, args.doc, path))
    rows = []
    for entry in args.heads.split(";"):
        head, ks = entry.split(":")
        name = f"minilm/{args.doc}/w{args.width}/{head}"
        d = Dense.of(panel[name])
        A = d.A
        for k in map(int, ks.split(",")):
            c0 = time.process_time()
            t_signed, Xs, Ys, search = signed_best(d, k, args.signed_work)
            row = {"operator": name, "k": k, "signed": t_signed, "signed_cpu": time.process_time() - c0, "general": {}}
            for start in args.starts.split(","):
                c0 = time.process_time()
                if start == "signed":
                    if Xs is None:
                        continue
                    t, trace = general_pair(A, Xs, Ys, args.sweeps, args.evaluations)
                else:
                    rows_sel = search.selection_rows(start, k)
                    if rows_sel is None:
                        continue
                    t, trace = general_pair(A, selection(rows_sel, A.shape[0]), None, args.sweeps, args.evaluations)
                row["general"][start] = {"t": t, "trace": trace, "cpu": time.process_time() - c0}
            rows.append(row)
            best = max((g["t"] for g in row["general"].values()), default=math.nan)
            print(f"{head} k={k}: signed {t_signed:.4f} ({row['signed_cpu']:.1f} s CPU); general best {best:.4f}",
                  {s: (round(g["t"], 4), round(g["cpu"], 1)) for s, g in row["general"].items()}, flush=True)
    out = ROOT / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
