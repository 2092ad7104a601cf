"""Active rows at equal iterations and at equal work, stage by stage (issue 44, item 2).

For MiniLM heads on examples/data/gpl2.txt at width 512 (a document no solver setting was tuned
on), rank r from the truncated SVD, ``run_stages`` for S continuation stages of I iterations:
all rows (``full``), then active rows (``softrank_cert.solvers.upper.smooth``) with margins
``k ln(1e6) / tau_units`` (``m1``: k = 1, ``m2``: k = 2) with (``r20``) or without (``r0``)
selecting the rows again within a stage; each active variant once at I iterations and once
at the iterations that spend the ``full`` run's work units.  Prints the float64 error, the work
units charged and the CPU seconds (one BLAS thread).  Usage (the committed output,
``benchmarks/results/solvers_active_stages.txt``)::

    nice -n 10 python benchmarks/active_rows_stages.py
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

#: (head, rank, stages, iterations per stage)
CASES = [("L1H1", 150, 5, 150), ("L4H6", 160, 2, 300), ("L1H1", 60, 2, 300)]
#: (label, least operator entries for active rows, margin multiple, re-selections per stage)
VARIANTS = [("full", 10 ** 12, 0, 0), ("m1r20", 0, 1, 20), ("m2r20", 0, 2, 20), ("m2r0", 0, 2, 0)]


def main() -> None:
    from bench_solvers import minilm_panel
    from threadpoolctl import threadpool_limits

    from softrank_cert.solvers.upper import smooth as sm
    from softrank_cert.solvers.work import Budget
    from softrank_cert.util.dense import Dense

    panel = dict(minilm_panel(512, doc="gpl2"))

    def one(d: Dense, r: int, stages: int, its: int) -> tuple[float, float, float]:
        state = sm.SmoothState.start(d.A, *sm.tsvd_start(d, r))
        budget, cpu = Budget(), time.process_time()
        sm.run_stages(d, state, stages=stages, iterations=its, abort=False, until=budget.until())
        return state.best_error, budget.used, time.process_time() - cpu

    with threadpool_limits(1, "blas"):
        for head, r, stages, its in CASES:
            d = Dense.of(panel[next(n for n in panel if n.endswith(head))])
            reference = None
            for label, least, multiple, reselect in VARIANTS:
                sm.ACTIVE_FROM, sm.ACTIVE_MARGIN, sm.ACTIVE_RESELECT = least, multiple * math.log(1e6), reselect
                error, units, cpu = one(d, r, stages, its)
                line = f"{head} r{r} {label} its{its} err {error:.4f} units {units:.0f} cpu {cpu:.1f}"
                if reference is None:
                    reference = units
                else:
                    its2 = int(its * reference / units)
                    error, units, cpu = one(d, r, stages, its2)
                    line += f" | equal work its{its2} err {error:.4f} units {units:.0f} cpu {cpu:.1f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
