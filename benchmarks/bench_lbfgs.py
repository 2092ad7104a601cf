"""The witness search's L-BFGS loop against scipy's L-BFGS-B, and the evaluation cost model.

Usage (what produced the committed results, benchmarks/results/solvers_lbfgs.{json,md})::

    python benchmarks/bench_lbfgs.py                 # pydoc 'import' heads, widths 128 and 512
    python benchmarks/bench_lbfgs.py --smoke         # CI-sized: one 128-wide head, one rank

On MiniLM heads of the pydoc ``import`` topic (bench_solvers.py's document), per (head, rank):
the smoothed-minimax continuation (:func:`softrank_cert.solvers.upper.smooth.run_stages`, five
stages from the truncated SVD) once with the project's loop (:mod:`softrank_cert.solvers.lbfgs`)
and once with scipy's L-BFGS-B in its place, the same iterations per stage, and then with the
project's loop given about scipy's CPU time (``--equal-cpu`` iterations).  Recorded: CPU
seconds (one BLAS thread), objective evaluations, CPU seconds inside the objective, the best
float64 error; and the CPU seconds per evaluation that the work model
(:func:`softrank_cert.solvers.work.evaluation_units`, in seconds at the unit rate) predicts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_solvers import minilm_panel, pydoc_text  # noqa: E402

from softrank_cert.util.dense import Dense  # noqa: E402
from softrank_cert.solvers.upper import smooth as upper_smooth  # noqa: E402
from softrank_cert.solvers.work import check_units, evaluation_units, one_blas_thread, units_per_second  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = {128: [("L1H6", 10), ("L1H6", 40), ("L4H1", 6), ("L4H1", 20)],
         512: [("L4H6", 40), ("L4H6", 150), ("L1H1", 100)]}
ITERATIONS = {128: (200, 300), 512: (100, 160)}  # per stage: same-iterations run, equal-CPU run


def scipy_lbfgsb(fun, x0, *, iterations: int, evaluations: int, memory: int = 5, ops: object = None) -> np.ndarray:
    """scipy's L-BFGS-B with the options the search used before (no bounds, no tolerances); numpy
    arrays only, so ``ops`` (the search's array back end) must be the numpy one this benchmark runs."""
    return minimize(fun, x0, jac=True, method="L-BFGS-B",
                    options={"maxiter": iterations, "maxfun": evaluations, "maxcor": memory,
                             "ftol": 0.0, "gtol": 0.0}).x


def run(d: Dense, r: int, iterations: int, loop) -> dict:
    """Five continuation stages at rank r with ``loop`` as the minimiser."""
    inside = [0.0]
    call = upper_smooth._Objective.__call__

    def timed(self, x):
        t = time.process_time()
        try:
            return call(self, x)
        finally:
            inside[0] += time.process_time() - t

    saved = upper_smooth.minimise
    upper_smooth.minimise, upper_smooth._Objective.__call__ = loop, timed
    try:
        state = upper_smooth.SmoothState.start(d.A, *upper_smooth.tsvd_start(d, r))
        with one_blas_thread():
            start = time.process_time()
            upper_smooth.run_stages(d, state, stages=5, iterations=iterations, abort=False)
            cpu = time.process_time() - start
    finally:
        upper_smooth.minimise, upper_smooth._Objective.__call__ = saved, call
    return {"iterations_per_stage": iterations, "cpu_seconds": cpu, "evaluations": state.evaluations,
            "objective_cpu_seconds": inside[0], "checks": len(state.history), "best_error": state.best_error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", default="128,512")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    cases = {128: [("L1H6", 10)]} if args.smoke else {int(w): CASES[int(w)] for w in args.widths.split(",")}
    path, digest = pydoc_text("import", Path(tempfile.mkdtemp()))
    rows = []
    for width, heads in cases.items():
        ops = dict(minilm_panel(width, path=path))
        same, equal = (20, 30) if args.smoke else ITERATIONS[width]
        for head, r in heads:
            d = Dense.of(ops[f"minilm/py-import/w{width}/{head}"])
            m, n = d.shape
            row = {"width": width, "head": head, "rank": r,
                   "scipy": run(d, r, same, scipy_lbfgsb), "numpy": run(d, r, same, upper_smooth.minimise),
                   "numpy_equal_cpu": run(d, r, equal, upper_smooth.minimise)}
            model = (row["numpy"]["evaluations"] * evaluation_units(m, n, r) + row["numpy"]["checks"] * check_units(m, n, r)) \
                / units_per_second(m, n)
            row["model_cpu_seconds"] = model
            rows.append(row)
            print(width, head, r, {k: (round(row[k]["cpu_seconds"], 2), row[k]["evaluations"], round(row[k]["best_error"], 4))
                                    for k in ("scipy", "numpy", "numpy_equal_cpu")}, "model", round(model, 2), flush=True)
    report = {"document": {"pydoc_topic": "import", "sha256": digest}, "rows": rows}
    name = "solvers_lbfgs_smoke" if args.smoke else "solvers_lbfgs"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out_dir / f"{name}.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


def markdown(rows: list[dict]) -> str:
    per = lambda run: 1e3 * (run["cpu_seconds"] - run["objective_cpu_seconds"]) / run["evaluations"]  # noqa: E731
    lines = ["# The witness search's L-BFGS loop against scipy's L-BFGS-B", "",
             "Five continuation stages from the truncated SVD, one BLAS thread; CPU seconds; "
             "`outside` = milliseconds per evaluation spent outside the objective; `model` = the "
             "CPU seconds the work model charges for the project's run.", "",
             "| width | head | rank | scipy: CPU / evals / outside ms / error | numpy, same iterations | "
             "numpy, ~scipy's CPU | model |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        cell = lambda run: f"{run['cpu_seconds']:.2f} / {run['evaluations']} / {per(run):.2f} / {run['best_error']:.4f}"  # noqa: E731
        lines.append(f"| {row['width']} | {row['head']} | {row['rank']} | {cell(row['scipy'])} | {cell(row['numpy'])} | "
                     f"{cell(row['numpy_equal_cpu'])} | {row['model_cpu_seconds']:.2f} |")
    speed = [row["scipy"]["cpu_seconds"] / row["scipy"]["evaluations"] / (row["numpy"]["cpu_seconds"] / row["numpy"]["evaluations"])
             for row in rows]
    better = sum(row["numpy_equal_cpu"]["best_error"] < row["scipy"]["best_error"] for row in rows)
    lines += ["", f"CPU per evaluation, scipy / numpy: median {statistics.median(speed):.2f} "
              f"({min(speed):.2f}-{max(speed):.2f}); at about scipy's CPU the numpy loop ends lower in "
              f"{better} of {len(rows)} cases."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
