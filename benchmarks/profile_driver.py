"""Where the bracket driver's seconds go: a stage-by-stage time profile (cProfile) of
``bracket_operator`` on MiniLM heads, at the default work budget.

Usage (what produced the committed results)::

    nice -n 10 python benchmarks/profile_driver.py --pydoc-topic import --width 512 --heads L1H1,L4H6 \
        --name w512_import

Writes ``benchmarks/results/solvers_profile_<name>.{json,md}``: per head the CPU seconds of each
part (cumulative time of the functions named in :data:`PARTS`; they do not nest in one
another) and the rest, and the work units the driver counted.  Single-threaded BLAS, as the
driver runs.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: Part of the driver -> (module file suffix, function name) whose cumulative time it is.
PARTS = {
    "set-up: SVD, truncated-SVD errors": [("dense.py", "svd"), ("solvers/candidates.py", "tsvd_errors")],
    "smoothed objective evaluations": [("solvers/upper/smooth.py", "__call__")],
    "L-BFGS outside the evaluations": [],  # minimize's cumulative time less the evaluations
    "pivot stage (complete pivoting, swaps)": [("solvers/candidates.py", "lower_pair")],
    "X-step LPs (RowLP)": [("solvers/lower/lp.py", "solve")],
    "Y-step LPs (KeyLP, general key side)": [("solvers/lower/general.py", "solve")],
    "key moves (screens, Sherman-Morrison)": [("solvers/lower/moves.py", "key_moves")],
    "growth pivots": [("solvers/lower/starts.py", "growth_pivot")],
    "starts: pivoted QR, pivot order": [("solvers/lower/starts.py", "qr_queries"), ("solvers/lower/pivot.py", "pivot_order")],
    "kernel verification": [("solvers/settle.py", "kernel_verdict")],
}


def cumulative(stats: pstats.Stats, suffix: str, name: str) -> float:
    return sum(v[3] for (path, _line, func), v in stats.stats.items() if path.endswith(suffix) and func == name)


def profile_head(name: str, op, eps: list[str]) -> dict:
    from softrank_cert.solvers.bracket import search_operator

    prof = cProfile.Profile()
    start, cpu = time.perf_counter(), time.process_time()
    prof.enable()
    pool, ends = search_operator(op, eps)
    prof.disable()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = pstats.Stats(prof)
    parts = {part: sum(cumulative(stats, s, f) for s, f in funcs) for part, funcs in PARTS.items()}
    lbfgs = sum(v[3] for (path, _l, func), v in stats.stats.items()  # the project's loop (older trees: scipy's)
                if (func == "minimise" and path.endswith("solvers/upper/lbfgs.py")) or (func == "minimize" and "scipy" in path))
    parts["L-BFGS outside the evaluations"] = max(lbfgs - parts["smoothed objective evaluations"], 0.0)
    total = sum(v[2] for v in stats.stats.values())  # all own time
    parts["rest"] = max(total - sum(parts.values()), 0.0)
    return {"operator": name, "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
            "profiled_seconds": round(total, 2), "work_units": round(pool.until.budget.used if pool else 0.0),
            "work_budget": pool.until.budget.work if pool else None,
            "parts": {k: round(v, 2) for k, v in parts.items()},
            "brackets": [{"eps": e.eps, "lower": e.lower.k, "upper": e.upper.r, "lower_origin": e.lower.origin,
                          "upper_origin": e.upper.origin} for e in ends]}


def markdown(report: dict) -> str:
    heads = report["heads"]
    lines = [f"# Where the driver's seconds go: {report['name']}", "",
             "CPU seconds per part (cProfile cumulative times; single-threaded BLAS; default work).", "",
             "| part | " + " | ".join(h["operator"].rsplit("/", 1)[-1] for h in heads) + " |",
             "|---|" + "---|" * len(heads)]
    for part in list(PARTS) + ["rest"]:
        lines.append(f"| {part} | " + " | ".join(f"{h['parts'][part]:.1f} ({100 * h['parts'][part] / max(h['profiled_seconds'], 1e-9):.0f}%)"
                                                for h in heads) + " |")
    lines.append("| total (profiled) | " + " | ".join(f"{h['profiled_seconds']:.1f}" for h in heads) + " |")
    lines.append("| work units used / budget | " + " | ".join(f"{h['work_units']:,} / {h['work_budget']:,.0f}" for h in heads) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pydoc-topic", default="import")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--heads", default="L1H1,L4H6", help="comma list of LxHy")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--name", default=None)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    from bench_solvers import minilm_panel, pydoc_text

    path, digest = pydoc_text(args.pydoc_topic, Path(tempfile.mkdtemp()))
    panel = dict(minilm_panel(args.width, path=path))
    wanted = args.heads.split(",")
    heads = []
    with threadpool_limits(1, "blas"):
        for name, op in panel.items():
            if name.rsplit("/", 1)[-1] in wanted:
                heads.append(profile_head(name, op, args.eps.split(",")))
                print(json.dumps(heads[-1]), flush=True)
    name = args.name or f"w{args.width}_{args.pydoc_topic}"
    report = {"name": name, "document": {"pydoc_topic": args.pydoc_topic, "sha256": digest}, "heads": heads}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"solvers_profile_{name}.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / f"solvers_profile_{name}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
