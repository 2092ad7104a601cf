"""Does a warm start survive the continuation?  Error after each smoothed-minimax stage at rank
r, started from the truncated SVD and from the best rank-r part of a smoothed rank-q state.

Usage (what produced the figures in docs/solvers.md, "Wide operators", warm starts)::

    nice -n 10 python benchmarks/warm_start_stages.py --doc gfdl13 L1H1:50:60 L1H1:150:170 L4H6:160:180
    nice -n 10 python benchmarks/warm_start_stages.py --doc gfdl13 --enter 0,1,2,3 L1H1:50:60 L4H6:160:180 L1H1:150:170
    nice -n 10 python benchmarks/warm_start_stages.py --doc gfdl13 --spread 5,3,2,1 L1H1:50 L4H6:160 L1H1:150

Each ``HEAD:r:q`` runs the five stages of :data:`~softrank_cert.solvers.upper.smooth.STAGES`
(``--iterations`` L-BFGS steps each) at rank q from the truncated SVD (the donor), then at
rank r from the truncated SVD and from the donor's best pair truncated to rank r (a QR of its
``W`` and an SVD of the small ``U R^T``), and prints the float64 error before and after each
stage.  ``--enter S,...`` also runs the warm start entered at continuation stage S (its first
``S`` smoothest stages skipped; stages past the last repeat it), five stages each, so that every
line runs the same number of stages.  ``--spread N,...`` runs rank r from the truncated SVD
with the iterations of the five stages spread over the N smoothest ones (``5 * iterations / N``
each) instead.  Width 512, single-threaded BLAS, as the driver runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def truncated(U: np.ndarray, W: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The best rank-r factors of ``U W^T``."""
    q, t = np.linalg.qr(W)
    u, s, vt = np.linalg.svd(U @ t.T, full_matrices=False)
    return u[:, :r] * s[:r], q @ vt[:r].T


def spread(op: object, run: str, iterations: int, counts: list[int]) -> None:
    """Print the error after each of N stages of ``5 * iterations / N`` steps at rank r (``run``
    is ``HEAD:r`` or ``HEAD:r:q``), from the truncated SVD, for each N in ``counts``."""
    from softrank_cert.solvers import Dense
    from softrank_cert.solvers.upper.smooth import STAGES, SmoothState, run_stages, tsvd_start

    head, r = run.split(":")[0], int(run.split(":")[1])
    d = Dense.of(op)
    for n in counts:
        st = SmoothState.start(d.A, *tsvd_start(d, r))
        errors = []
        for _ in range(n):
            run_stages(d, st, stages=1, iterations=len(STAGES) * iterations // n, abort=False)
            errors.append(st.best_error)
        print(f"{head} r={r} {n} stages of {len(STAGES) * iterations // n}:", " ".join(f"{e:.4f}" for e in errors),
              f"({st.evaluations} evaluations)", flush=True)


def compare(op: object, run: str, iterations: int, enter: list[int]) -> None:
    """Print the error per stage at rank r from both starts (``run`` is ``HEAD:r:q``)."""
    from softrank_cert.solvers import Dense
    from softrank_cert.solvers.upper.smooth import STAGES, SmoothState, run_stages, tsvd_start

    head, r_text, q_text = run.split(":")
    r, q = int(r_text), int(q_text)
    d = Dense.of(op)
    donor = SmoothState.start(d.A, *tsvd_start(d, q))
    run_stages(d, donor, stages=len(STAGES), iterations=iterations, abort=False)
    warm = truncated(donor.best_U, donor.best_W, r)
    starts = [("tsvd", tsvd_start(d, r), 0)] + [(f"warm@{s}", warm, s) for s in enter]
    for label, start, stage in starts:
        st = SmoothState.start(d.A, *start)
        st.stage = stage
        errors = [st.best_error]
        for _ in STAGES:
            run_stages(d, st, stages=1, iterations=iterations, abort=False)
            errors.append(st.best_error)
        print(f"{head} r={r} from q={q} (donor error {donor.best_error:.4f}) start {label}:",
              " ".join(f"{e:.4f}" for e in errors), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="HEAD:r:q, e.g. L1H1:50:60")
    parser.add_argument("--doc", default="gfdl13", help="examples/data document or pydoc:TOPIC")
    parser.add_argument("--iterations", type=int, default=150, help="L-BFGS steps per stage")
    parser.add_argument("--enter", default="0", help="stages the warm start enters at, comma-separated")
    parser.add_argument("--spread", help="stage counts N to spread five stages' iterations over (no warm starts)")
    args = parser.parse_args()
    from bench_solvers import document_text, minilm_panel

    from softrank_cert.solvers.work import one_blas_thread

    path, _ = document_text(args.doc, Path(tempfile.mkdtemp()), 8000)
    ops = {name.rsplit("/", 1)[-1]: op for name, op in minilm_panel(512, args.doc, path)}
    with one_blas_thread():
        for run in args.runs:
            op = ops[run.split(":")[0]]
            if args.spread:
                spread(op, run, args.iterations, [int(n) for n in args.spread.split(",")])
            else:
                compare(op, run, args.iterations, [int(s) for s in args.enter.split(",")])


if __name__ == "__main__":
    main()
