"""``softrank supports``: the exponent experiment on grid / sphere / ball supports."""

from __future__ import annotations

import argparse
import json
import time
from contextlib import closing
from typing import Any

from rich.table import Table

from ..errors import InvalidInputError
from ..kernel import parse_tolerance
from ..parallel import resolve_jobs, run_ordered
from .bracket_cmd import add_parallel_options
from .common import PLOT_SUFFIXES, OutputFiles, check_output_file, progress_bar, stdout_console

EPILOG = """\
examples:
  softrank supports sphere --dim 3 --eps 0.25 --n 64
  softrank supports grid --dim 2 --json --plot grid2.png
  softrank supports ball --dim 2 --kappas 0.25,0.5,1,2,4,8 --budget-seconds 10
  softrank supports sphere --dim 3 --jobs 4

Each kappa gives the operator Q = kappa P, K = P (beta = 1) for a point set P of the support;
its rank at eps is bracketed with kernel-VERIFIED ends. The fitted exponents are least-squares
slopes of log(end) against log(1 + kappa/eps^2) over points with 1 < end < p (estimates).
"""


def _kappas(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if len(values) < 2 or any(not (v > 0 and v < 1e6) for v in values):
        raise argparse.ArgumentTypeError("expected at least two kappa values in (0, 1e6)")
    return tuple(sorted(set(values)))


def add_supports(sub: Any) -> None:
    from ..geometry.supports import DEFAULT_KAPPAS, SUPPORTS

    p = sub.add_parser("supports", help="exponent experiment on grid/sphere/ball supports",
                       description="Sweep kappa at fixed eps on a support, bracket each operator with verified "
                                   "certificates, and fit growth exponents against log(1 + kappa/eps^2).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("support", choices=SUPPORTS)
    p.add_argument("--dim", type=int, required=True, metavar="d", help="r for the grid, d for S^{d-1} and B^d")
    p.add_argument("--eps", default="0.25", metavar="E", help="exact decimal tolerance (default 0.25)")
    p.add_argument("--n", type=int, default=64, metavar="N", help="number of points (grid: rounded to k^d; default 64)")
    p.add_argument("--kappas", type=_kappas, default=DEFAULT_KAPPAS, metavar="K1,K2,...",
                   help="radius products (default " + ",".join(f"{k:g}" for k in DEFAULT_KAPPAS) + ")")
    p.add_argument("--budget-seconds", type=float, default=6.0, metavar="S", help="solver time per operator (default 6)")
    p.add_argument("--geometry-ranks", default="", metavar="R1,R2", help="also report tau, Phi and lower/Phi for these ranks")
    add_parallel_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="OUT.png", help="write a log-log plot (.png, .pdf or .svg)")
    p.set_defaults(run=run_supports)


def sweep_point(support: str, dim: int, eps: str, n: int, kappa: float, budget_seconds: float,
                ranks: list[int]) -> Any:
    """One kappa of :func:`~softrank_cert.geometry.supports.sweep`, the same steps (a task for
    ``--jobs``/``--scheduler``): bracket the support operator, then the optional geometry rows."""
    from ..geometry.supports import SweepPoint, _geometry_rows, stdout_to_stderr, support_operator
    from ..solvers.bracket import bracket_operator

    op = support_operator(support, dim, n, kappa)
    start = time.perf_counter()
    with stdout_to_stderr():
        (b,) = bracket_operator(op, [eps], budget_seconds=budget_seconds)
    seconds = time.perf_counter() - start
    pt = SweepPoint(float(kappa), eps, b.lower.k, b.upper.r, op.p, b.lower.method, b.upper.construction, seconds)
    if ranks:
        pt.geometry = _geometry_rows(op, eps, b.lower.k, ranks)
    return pt


def run_supports(args: Any) -> int:
    from ..geometry.supports import plot_sweeps, sweep, sweep_document

    parse_tolerance(args.eps)
    if not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    try:
        ranks = [int(x) for x in args.geometry_ranks.split(",") if x.strip()]
    except ValueError:
        raise InvalidInputError("--geometry-ranks expects comma-separated integers") from None
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES) if args.plot else None
    jobs = resolve_jobs(args.jobs)
    with progress_bar(not args.json) as bar:
        task = bar.add_task(f"{args.support} d={args.dim}", total=len(args.kappas))
        if jobs == 1 and not args.scheduler:
            points = sweep(args.support, args.dim, eps=args.eps, n=args.n, kappas=args.kappas,
                           budget_seconds=args.budget_seconds, geometry_ranks=ranks,
                           progress=lambda done, total, kappa: bar.update(task, completed=done))
        else:  # one task per kappa: the same computation as sweep(), in worker processes or on a cluster
            tasks = [(args.support, args.dim, args.eps, args.n, kappa, args.budget_seconds, ranks) for kappa in args.kappas]
            with closing(run_ordered(sweep_point, tasks, jobs=jobs, scheduler=args.scheduler,
                                     done=lambda i: bar.update(task, advance=1))) as results:
                points = list(results)
    doc = sweep_document(args.support, args.dim, args.eps, args.n, points)
    if plot:
        with OutputFiles() as outputs:
            outputs.stage(plot, lambda tmp: plot_sweeps([doc], tmp), plot.suffix)
        doc["plot"] = args.plot
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _render(doc)
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _render(doc: dict[str, Any]) -> None:
    table = Table(title=f"softrank supports: {doc['support']} d={doc['dim']}, eps {doc['eps']}, p {doc['n']} "
                        "(every end VERIFIED by the trusted kernel)")
    for column in ("kappa", "1+kappa/eps^2", "lower", "upper", "s"):
        table.add_column(column, justify="right")
    eps = float(parse_tolerance(doc["eps"]))
    for pt in doc["points"]:
        table.add_row(f"{pt['kappa']:g}", f"{1 + pt['kappa'] / eps**2:.4g}", f"{pt['lower']} ({pt['lower_method']})",
                      f"{pt['upper']} ({pt['upper_construction']})", f"{pt['seconds']:.1f}")
    stdout_console().print(table)
    print(f"exponent: theory {doc['exponent_theory']:g}, fit on certified lower ends {_fmt(doc['exponent_fit_lower'])}, "
          f"on certified upper ends {_fmt(doc['exponent_fit_upper'])} (fits are float64 estimates)")
    if doc.get("plot"):
        print(f"plot: {doc['plot']}")
