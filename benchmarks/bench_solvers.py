"""Benchmark of the bracket solvers: kernel-verified brackets on a panel of operators.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_solvers.py --panel minilm --width 128 [--every 3]
    OMP_NUM_THREADS=1 python benchmarks/bench_solvers.py --panel synthetic --count 12

Per tolerance it reports the median upper/lower ratio, the resolved fraction, the median
seconds per operator (all tolerances together) and the median rank ratio of the truncated
SVD to the best verified witness; it writes everything, per operator too, to
``benchmarks/results/solvers_<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from softrank_cert.kernel import Operator
from softrank_cert.solvers import Dense, bracket_operator
from softrank_cert.solvers.profiles import tsvd_errors

ROOT = Path(__file__).resolve().parents[1]


def minilm_panel(width: int) -> list[tuple[str, Operator]]:
    """All 72 MiniLM-L6 heads on the first ``width`` tokens of examples/data/apache2.txt."""
    from softrank_cert.models import build_panel, operator_names

    arrays = build_panel("minilm", ROOT / "examples" / "data" / "apache2.txt", [width])
    return [(n, Operator("qk", {"Q": arrays[f"{n}/Q"], "K": arrays[f"{n}/K"]})) for n in operator_names(arrays)]


def synthetic_panel(count: int, width: int, d: int = 64) -> list[tuple[str, Operator]]:
    """Random qk operators, score scale log-uniform in [0.7, 6], power-law key/query spectra."""
    out = []
    for seed in range(count):
        rng = np.random.default_rng(seed)
        scale, decay = np.exp(rng.uniform(np.log(0.7), np.log(6.0))), rng.uniform(0.0, 1.5)
        spec = (1.0 + np.arange(d)) ** -decay
        spec *= np.sqrt(d / (spec ** 2).sum() * scale)
        Q, K = rng.standard_normal((width, d)) * spec, rng.standard_normal((width, d)) * spec
        out.append((f"synthetic/s{seed}/w{width}", Operator("qk", {"Q": Q, "K": K})))
    return out


def tsvd_rank(errors: np.ndarray, eps: float, p: int) -> int:
    return next((r for r in range(len(errors)) if errors[r] <= eps), p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--panel", choices=("minilm", "synthetic"), default="minilm")
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--count", type=int, default=12, help="synthetic operators")
    parser.add_argument("--every", type=int, default=1, help="take every n-th operator")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--budget", type=float, default=18.0, help="seconds per operator")
    parser.add_argument("--name", default=None, help="results file suffix")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    eps_list = args.eps.split(",")
    ops = minilm_panel(args.width) if args.panel == "minilm" else synthetic_panel(args.count, args.width)
    ops = ops[:: args.every]
    rows = []
    for name, op in ops:
        start = time.perf_counter()
        brackets = bracket_operator(op, eps_list, budget_seconds=args.budget)
        seconds = time.perf_counter() - start
        errors = tsvd_errors(Dense.of(op).A, Dense.of(op).svd)
        rows.append({
            "operator": name, "seconds": seconds,
            "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r, "method": b.lower.method,
                          "construction": b.upper.construction,
                          "tsvd_rank": tsvd_rank(errors, float(b.eps), op.p)} for b in brackets],
        })
        print(name, f"{seconds:.1f}s", [(b.lower.k, b.upper.r) for b in brackets], flush=True)
    summary = {}
    for i, eps in enumerate(eps_list):
        per = [r["brackets"][i] for r in rows]
        summary[eps] = {
            "median_ratio": statistics.median(b["upper"] / max(b["lower"], 1) for b in per),
            "resolved_fraction": sum(b["lower"] == b["upper"] for b in per) / len(per),
            "median_tsvd_over_best_upper": statistics.median(b["tsvd_rank"] / max(b["upper"], 1) for b in per),
            "lower_methods": {m: sum(b["method"] == m for b in per) for m in sorted({b["method"] for b in per})},
            "upper_constructions": {c: sum(b["construction"] == c for b in per)
                                    for c in sorted({b["construction"] for b in per})},
        }
    summary["median_seconds_per_operator"] = statistics.median(r["seconds"] for r in rows)
    name = args.name or f"{args.panel}_w{args.width}"
    out = ROOT / "benchmarks" / "results" / f"solvers_{name}.json"
    out.write_text(json.dumps({"args": vars(args), "summary": summary, "operators": rows}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
