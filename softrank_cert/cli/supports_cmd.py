"""``softrank supports``: the exponent experiment on grid / sphere / ball supports."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from ..errors import InvalidInputError
from ..kernel import parse_tolerance
from ..plumbing.files import OutputFiles, check_output_file
from ..plumbing.parallel import resolve_jobs
from ..plumbing.plotting import PLOT_SUFFIXES
from ..plumbing.progress import progress_bar
from ..plumbing.reports import dumps, envelope
from .common import PLOT_HELP, add_command, add_parallel_options, comma_items, stdout_console

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
        values = tuple(comma_items(text, float))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if len(values) < 2 or any(not (v > 0 and v < 1e6) for v in values):
        raise argparse.ArgumentTypeError("expected at least two kappa values in (0, 1e6)")
    return tuple(sorted(set(values)))


def add_supports(sub: Any) -> None:
    from ..geometry.supports import SUPPORTS
    from ..studies.supports import DEFAULT_KAPPAS

    p = add_command(sub, "supports", help="exponent experiment on grid/sphere/ball supports",
                    description="Sweep kappa at fixed eps on a support, bracket each operator with verified "
                                "certificates, and fit growth exponents against log(1 + kappa/eps^2).", epilog=EPILOG)
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
    p.add_argument("--plot", metavar="OUT.png", help=f"write a log-log plot: {PLOT_HELP}")
    p.set_defaults(run=run_supports)


def run_supports(args: Any) -> int:
    from ..studies.supports import sweep, sweep_document, sweeps_figure

    parse_tolerance(args.eps)
    if not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    try:
        ranks = comma_items(args.geometry_ranks, int)
    except ValueError:
        raise InvalidInputError("--geometry-ranks expects comma-separated integers") from None
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES) if args.plot else None
    jobs = resolve_jobs(args.jobs)
    with progress_bar(not args.json) as bar:
        task = bar.add_task(f"{args.support} d={args.dim}", total=len(args.kappas))
        points = sweep(args.support, args.dim, eps=args.eps, n=args.n, kappas=args.kappas,
                       budget_seconds=args.budget_seconds, geometry_ranks=ranks, jobs=jobs, scheduler=args.scheduler,
                       progress=lambda done, total, kappa: bar.update(task, completed=done))
    doc = envelope("supports", {**sweep_document(args.support, args.dim, args.eps, args.n, points),
                                "budget_seconds": args.budget_seconds, "plot": None})
    if plot:
        with OutputFiles() as outputs:
            outputs.stage_figure(sweeps_figure([doc]), plot)
        doc["plot"] = args.plot
    if args.json:
        print(dumps(doc))
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
    est = doc["estimates"]
    print(f"exponent: theory {doc['exponent_theory']:g}, fit on certified lower ends {_fmt(est['exponent_fit_lower'])}, "
          f"on certified upper ends {_fmt(est['exponent_fit_upper'])} (fits are float64 estimates)")
    if doc.get("plot"):
        print(f"plot: {doc['plot']}")
