"""``softrank supports``: the exponent experiment on grid / sphere / ball supports."""

from __future__ import annotations

import argparse
import math
from typing import Any

from rich.table import Table

from ..errors import EXIT_SOME_FAILED, InvalidInputError
from ..util.tolerances import check_budget, parse_one_eps
from ..plumbing.campaign import budget_json
from ..util.files import OutputFiles, check_output_file
from ..plumbing.parallel import check_scheduler, resolve_jobs
from ..plumbing.plotting import PLOT_SUFFIXES
from ..util.progress import Progress
from ..plumbing.json_contract import dumps, envelope
from .common import (PLOT_HELP, add_budget_options, add_campaign_run_options, add_command, add_device_option,
                     campaign_memory, comma_items, key_inputs, stdout_console)

EPILOG = """\
examples:
  softrank supports sphere --dim 2 --n 256 --x-min 16 --x-max 4096 --points 4
  softrank supports sphere --dim 2 --n 256 --x-min 16 --x-max 4096 --points 4 --work 400000
  softrank supports ball --dim 1 --n 1024 --x-min 256 --x-max 4096 --points 2 --out ball1/ --jobs 2
  softrank supports ball --dim 1 --n 1024 --x-min 256 --x-max 4096 --points 2 --out ball1/ --resume
  softrank supports grid --dim 2 --kappas 0.25,1,4 --json --plot grid2.png

Each kappa gives the operator Q = kappa P, K = P (beta = 1) for a point set P of the support
(N points, at most 512; 1024 for d = 1); its rank at eps is bracketed with kernel-VERIFIED
ends. The points are x = 1 + kappa/eps^2 spaced geometrically from --x-min to --x-max (or the
--kappas given). The main result: between consecutive points the CERTIFIED local exponent
interval [log(lower2/upper1), log(upper2/lower1)] / log(x2/x1) (Arb, rounded outward), with
its verdict against the theory exponent (r/2 grid, (d-1)/2 sphere S^{d-1}, d/2 ball B^d):
excludes, contains (width <= 0.3), too wide, unbounded. Least-squares slopes and the row
spread (max_ij A_ij, min_i 1/sum_j A_ij^2: how far rows are from one-hot) are float64
estimates.

Each point's search is bounded by work, as in softrank bracket: by default the driver's work
for an N x N operator (--work N to change it), so the same command gives the same brackets,
byte for byte, however busy the machine; --budget-seconds S adds a wall-time cap (then the
ends may depend on the load). The report and the manifest record budget_work.

--out DIR writes the certificate of every point (DIR/NAME.json, check them with
softrank-verify DIR) and the campaign manifest DIR/softrank-campaign.json; --resume keeps
every certificate there that re-verifies (about the same operator bit for bit, with the same
--eps and provenance; signed by --key when given) and computes the rest. A resume with another
support, --dim, --n, x points or --eps is refused (exit 2, naming both); docs/campaigns.md.
With --out and --jobs or --scheduler, a point's certificate from a worker is re-verified here
before it is signed or written; one that does not verify fails its point (exit 6).

exit codes: 0 ok; 2 invalid input (also a --resume with other parameters); 4 a checker bug;
6 some points failed (listed, and recorded in the manifest); 130 interrupted by Ctrl-C or
SIGTERM (the message names the --resume command).
"""


def _kappas(text: str) -> tuple[float, ...]:
    try:
        values = tuple(comma_items(text, float))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if len(values) < 2 or any(not (v > 0 and v < 1e6) for v in values):
        raise argparse.ArgumentTypeError("expected at least two kappa values in (0, 1e6)")
    return tuple(sorted(set(values)))


#: Default tolerance-scale range of a sweep: x = 4, 16, 64, 256 at eps = 0.25.
DEFAULT_X_MIN, DEFAULT_X_MAX, DEFAULT_POINTS = 4.0, 256.0, 4


def add_supports(sub: Any) -> None:
    from ..geometry.supports import MAX_SWEEP_POINTS, SUPPORTS

    p = add_command(sub, "supports", epilog=EPILOG)
    p.add_argument("support", choices=SUPPORTS)
    p.add_argument("--dim", type=int, required=True, metavar="d", help="r for the grid, d for S^{d-1} and B^d")
    p.add_argument("--eps", default="0.25", metavar="E", help="exact decimal tolerance (default 0.25)")
    p.add_argument("--n", type=int, default=64, metavar="N",
                   help="number of points, 2..512 (1024 for d = 1; grid: rounded down to k^d; default 64)")
    p.add_argument("--x-min", type=float, default=DEFAULT_X_MIN, metavar="X",
                   help=f"smallest x = 1 + kappa/eps^2 (default {DEFAULT_X_MIN:g})")
    p.add_argument("--x-max", type=float, default=DEFAULT_X_MAX, metavar="X",
                   help=f"largest x (default {DEFAULT_X_MAX:g}, at most 1e6)")
    p.add_argument("--points", type=int, default=DEFAULT_POINTS, metavar="K",
                   help=f"points spaced geometrically in x (default {DEFAULT_POINTS}, at most {MAX_SWEEP_POINTS})")
    p.add_argument("--kappas", type=_kappas, metavar="K1,K2,...", help="these radius products instead of an x range")
    add_budget_options(p, "solver time per point")
    add_device_option(p)
    p.add_argument("--geometry-ranks", default="", metavar="R1,R2", help="also report tau, Phi and lower/Phi for these ranks")
    p.add_argument("--out", metavar="DIR", help="write every point's certificate and the campaign manifest here")
    p.add_argument("--key", metavar="KEYFILE", help="sign the certificates with this key (softrank keygen)")
    add_campaign_run_options(p, "print one JSON object")
    p.add_argument("--plot", metavar="OUT.png", help=f"write the two-panel figure: {PLOT_HELP}")
    p.set_defaults(run=run_supports)


def _sweep_kappas(args: Any) -> tuple[float, ...]:
    from ..geometry.supports import MAX_SWEEP_POINTS
    from ..studies.supports.sweeps import kappas_for_x_range

    if args.kappas is None:
        return kappas_for_x_range(args.eps, args.x_min, args.x_max, args.points)
    if len(args.kappas) > MAX_SWEEP_POINTS:
        raise InvalidInputError(f"--kappas: at most {MAX_SWEEP_POINTS} values, got {len(args.kappas)}")
    return args.kappas


def run_supports(args: Any) -> int:
    from ..certio.signing import load_private_key
    from ..geometry.supports import check_sweep_size
    from ..studies.supports.sweeps import sweep_document
    from ..studies.supports.campaign import check_campaign_folder, run_campaign
    from ..studies.supports.plot import sweeps_figure
    from .bracket_cmd import resume_hint

    args.eps = parse_one_eps(args.eps)
    check_sweep_size(args.dim, args.n)
    check_budget(args.work, args.budget_seconds, options=True)
    kappas = _sweep_kappas(args)
    try:
        ranks = comma_items(args.geometry_ranks, int)
    except ValueError:
        raise InvalidInputError("--geometry-ranks expects comma-separated integers") from None
    if any(r < 1 for r in ranks):
        raise InvalidInputError("--geometry-ranks: ranks must be >= 1")
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES, force=args.force,
                             inputs=key_inputs(args.key)) if args.plot else None
    out = check_campaign_folder(args.out, args.resume, args.force)
    key = load_private_key(args.key) if args.key else None
    if key is not None and out is None:
        raise InvalidInputError("--key signs the certificates of --out DIR: give --out")
    jobs = resolve_jobs(args.jobs)
    check_scheduler(args.scheduler)
    if args.device is not None:  # after the input checks: it imports the solvers (and torch)
        from ..solvers import check_device

        check_device(args.device)
    with Progress("softrank supports", len(kappas), bar=not args.json, label="points") as bar:
        result = run_campaign(args.support, args.dim, args.n, args.eps, kappas, work=args.work,
                              budget_seconds=args.budget_seconds, ranks=ranks, out=out, resume=args.resume,
                              force=args.force, key=key,
                              jobs=jobs, scheduler=args.scheduler, max_memory=campaign_memory(args), bar=bar,
                              resume_command=resume_hint(args), device=args.device)
    if len(result.points) < 1:
        raise InvalidInputError("no point of the sweep finished: " + "; ".join(f["reason"] for f in result.failed[:3]))
    doc = envelope("supports", {**sweep_document(args.support, args.dim, args.eps, args.n, result.points),
                                "budget_seconds": budget_json(args.budget_seconds),
                                "budget_work": result.budget_work, "signed": key is not None,
                                "campaign": result.to_json(), "failed": result.failed, "plot": None})
    if plot:
        with OutputFiles() as outputs:
            outputs.stage_figure(sweeps_figure([doc]), plot)
        doc["plot"] = args.plot
    if args.json:
        print(dumps(doc))
    else:
        _render(doc, out)
    return EXIT_SOME_FAILED if result.failed else 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _render(doc: dict[str, Any], out: Any) -> None:
    console = stdout_console()
    table = Table(title=f"softrank supports: {doc['support']} d={doc['dim']}, eps {doc['eps']}, p {doc['n']} "
                        "(every end VERIFIED by the trusted kernel)")
    for column in ("kappa", "x", "lower", "upper", "max A_ij", "s"):
        table.add_column(column, justify="right")
    for pt in doc["points"]:
        seconds = "kept" if pt["resumed"] else ("" if pt["seconds"] is None else f"{pt['seconds']:.1f}")
        table.add_row(f"{pt['kappa']:g}", f"{pt['x']:.6g}", f"{pt['lower']} ({pt['lower_method']})",
                      f"{pt['upper']} ({pt['upper_construction']})",
                      f"{pt['estimates'].get('max_row_entry', math.nan):.3f}", seconds)
    console.print(table)
    exps = Table(title=f"certified local exponents (theory {doc['exponent_theory']:g})")
    for column in ("x1", "x2", "exponent >=", "exponent <=", "verdict"):
        exps.add_column(column, justify="right")
    for row in doc["local_exponents"]:
        flags = (" near p" if row["near_ceiling"] else "") + (" collapsed rows" if row["collapsed_rows"] else "")
        exps.add_row(f"{row['x1']:.6g}", f"{row['x2']:.6g}", _short(row["lower"], down=True),
                     _short(row["upper"], down=False), row["verdict"] + flags)
    console.print(exps)
    last = doc["largest_scale"]
    if last is not None:
        print(f"largest scale (a decade or more when the points allow): x {last['x1']:.6g} -> {last['x2']:.6g}, "
              f"certified exponent in [{_short(last['lower'], down=True)}, {_short(last['upper'], down=False)}] "
              f"against theory {doc['exponent_theory']:g}: {last['verdict']}")
    est = doc["estimates"]
    print(f"float64 estimates: fit slope of lower ends {_fmt(est['exponent_fit_lower'])}, of upper ends "
          f"{_fmt(est['exponent_fit_upper'])}; max_ij A_ij {_fmt(est['max_row_entry'])}, "
          f"min effective support {_fmt(est['min_effective_support'])}")
    if out is not None:
        print(f"certificates in {out} (check them with: softrank-verify {out})")
    for failure in doc["failed"]:
        print(f"failed: {failure['point']}: {failure['reason']}")
    if doc.get("plot"):
        print(f"plot: {doc['plot']}")


def _short(text: str | None, *, down: bool) -> str:
    """A certified decimal shortened to 4 significant digits in its safe direction (table only)."""
    from fractions import Fraction

    from ..util.numbers import format_down, format_up

    if text is None:
        return "-inf" if down else "+inf"
    value = Fraction(text)
    return format_down(value, 4) if down else format_up(value, 4)
