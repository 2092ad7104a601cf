"""``softrank profile``: the two certified curves of one operator (docs/design.md section 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InternalInvariantError, InvalidInputError
from ..util.files import OutputFiles, check_output_file
from ..util.operator_files import choose_operator_message, operator_names
from ..plumbing.plotting import PLOT_SUFFIXES
from ..util.progress import Progress
from ..util.tolerances import check_budget
from ..plumbing.json_contract import dumps
from .common import (add_device_option, add_json_options, PLOT_HELP, add_budget_options, add_command,
                     add_force_option, check_distinct_outputs, key_inputs, stdout_console)

EPILOG = """\
examples:
  softrank profile examples/panels/minilm-apache2-w32.npz --operator minilm/apache2/w32/L5H2 --plot profile.png
  softrank profile op.npz --plot profile.pdf --json > profile.json
  softrank profile panel.npz --operator NAME --eps 0.1,0.25 --out cert.json --key issuer.key --plot profile.svg
  softrank profile panel.npz --operator NAME --grid 0.05,0.1,0.2,0.4 --budget-seconds 60 --plot profile.png

The lower curve: for each k the largest tolerance t_k at which the kernel VERIFIED a lower
certificate, so r_eps >= k for every eps <= t_k. The upper curve: for each r the smallest e_r
at which it VERIFIED a witness, so r_eps <= r for every eps >= e_r. Both are drawn as step
functions of eps (log axis) with the band between them shaded; where they meet, r_eps is
known exactly (resolved, in green). Every drawn step and every step in --json is a
kernel-VERIFIED end; the searches aim at the --grid tolerances (default: 11 from 0.02 to 0.9,
plus any --eps) within --budget-seconds. --out writes a certificate at the --eps tolerances
read off the profile (each end VERIFIED again at that eps); check it with softrank-verify.

exit codes: 0 the profile was computed; 2 invalid input (unreadable operator, bad tolerance,
--out without --eps, an unusable --plot/--out path, one that is an input or a key file, or
that exists without --force: checked before any work; a failed run
writes nothing); 4 a checker bug (a verified lower step above a verified upper step).
"""


def add_profile(sub: Any) -> None:
    p = add_command(sub, "profile", epilog=EPILOG)
    p.add_argument("operator_file", metavar="OPERATOR.npz")
    p.add_argument("--operator", metavar="NAME", help="operator of a panel (needed when it holds several)")
    p.add_argument("--plot", metavar="PROFILE.png", help=f"draw both curves: {PLOT_HELP}")
    p.add_argument("--linear", action="store_true", help="linear rank axis (default: log base 2)")
    add_json_options(p, "print the profile JSON (every VERIFIED step) instead of the table")
    p.add_argument("--out", metavar="CERT.json", help="write a certificate at the --eps tolerances, read off the profile")
    p.add_argument("--eps", metavar="E1,E2,...", help="tolerances of the certificate (also searched, marked on the plot)")
    p.add_argument("--key", metavar="KEYFILE", help="sign the certificate with this key (softrank keygen)")
    add_force_option(p)
    p.add_argument("--grid", metavar="E1,E2,...",
                   help="tolerances the searches aim at (default: 0.02,0.03,0.05,0.075,0.1,0.15,0.25,0.35,0.5,0.7,0.9)")
    add_budget_options(p, "search time for the whole profile; verifying its steps comes on top")
    add_device_option(p)
    p.set_defaults(run=run_profile)


def _tolerances(text: str | None, option: str) -> list[str] | None:
    from ..util.tolerances import parse_eps_list

    return None if text is None else parse_eps_list(text, option)


def run_profile(args: Any) -> int:
    from ..certio.signing import load_private_key

    eps = _tolerances(args.eps, "--eps")
    grid = _tolerances(args.grid, "--grid")
    if args.out and not eps:
        raise InvalidInputError("--out needs --eps: the tolerances of the certificate")
    if args.key and not args.out:
        raise InvalidInputError("--key signs the --out certificate: give --out CERT.json (and --eps)")
    check_budget(args.work, args.budget_seconds, options=True)
    if args.key:
        load_private_key(args.key)  # fail before any work
    source = Path(args.operator_file)
    inputs = {"operator file": source, **key_inputs(args.key)}
    plot = check_output_file(args.plot, "--plot", suffixes=PLOT_SUFFIXES, force=args.force,
                             inputs=inputs) if args.plot else None
    out = check_output_file(args.out, "--out", force=args.force, inputs=inputs) if args.out else None
    check_distinct_outputs({"--plot": plot, "--out": out}, inputs)
    if args.operator is None:
        names = operator_names(source) if source.is_file() else []
        if len(names) > 1:
            raise InvalidInputError(choose_operator_message(source, names, "--operator NAME"))
    if args.device is not None:  # after the argument checks: it imports the solvers (and torch)
        from ..solvers import check_device

        check_device(args.device)
    from ..api import load_operator, operator_id, operator_provenance  # the solvers: after the argument checks
    from ..certio.issuing import certificate_for
    from ..geometry.supports import stdout_to_stderr
    from ..studies.profile.curves import DEFAULT_GRID, compute_profile

    op = load_operator(source, args.operator)
    name = operator_id(op)
    search = list(DEFAULT_GRID if grid is None else grid) + list(eps or [])
    with Progress("softrank profile", 1, bar=not args.json) as bar:
        with stdout_to_stderr():  # solver banners must not spoil --json output
            profile = compute_profile(op, search, work=args.work, budget_seconds=args.budget_seconds,
                                      progress=bar.stage_callback(name), operator_id=name,
                                      provenance=operator_provenance(op), device=args.device)
        bar.advance(name)
        bar.finished(name, f"{len(profile.lower)} lower and {len(profile.upper)} upper VERIFIED steps in "
                           f"{profile.search_seconds + profile.verify_seconds:.1f} s")
    result = profile.bracket(eps) if eps else None
    with OutputFiles() as outputs:  # all or nothing
        if out is not None:
            if result is None:  # --out needs --eps (checked above)
                raise InternalInvariantError("--out without the tolerances of a certificate")
            outputs.stage_json(out, certificate_for(name, op, result.brackets, result.provenance, args.key))
        if plot is not None:
            fig = profile.figure(marks=eps or (), yscale="linear" if args.linear else "log")
            outputs.stage_figure(fig, plot)
    report = profile.to_json(marks=eps or ())
    report["plot"] = None if plot is None else str(plot)
    report["certificate"] = None if out is None else str(out)
    if args.json:
        print(dumps(report))
    else:
        render(report)
        written = [f"plot: {plot}" if plot else "", f"certificate: {out} (check it with: softrank-verify {out})" if out else ""]
        if any(written):
            print("; ".join(w for w in written if w))
    return 0


def render(report: dict[str, Any]) -> None:
    """The brackets the profile certifies at the grid (and --eps) tolerances, then a summary of its steps."""
    from rich.table import Table

    from ..util.escaping import plain_text as safe_text

    m, n = report["shape"]
    print(f"softrank profile of {safe_text(report['operator'])} ({m} x {n} {report['kind']}, p = {report['p']})")
    table = Table(title="brackets read off the profile\n(every end VERIFIED by the trusted kernel)")
    for column in ("eps", "lower", "upper", "resolved"):
        table.add_column(column, justify="right")
    for b in report["brackets"]:
        table.add_row(b["eps"], str(b["lower"]), str(b["upper"]), "yes" if b["resolved"] else "")
    stdout_console().print(table)
    lower, upper = report["lower"], report["upper"]
    print(f"{len(lower)} lower steps (r_eps >= k for eps <= t_k; k = {lower[0]['k']}..{lower[-1]['k']}) and "
          f"{len(upper)} upper steps (r_eps <= r for eps >= e_r; r = {upper[0]['r']}..{upper[-1]['r']}), "
          f"each VERIFIED; --json lists them")
    resolved = "; ".join(f"r_eps = {iv['rank']} on {'[' if iv['from_included'] else '('}{iv['from']}, {iv['to']}"
                         f"{']' if iv['to_included'] else ')'}" for iv in report["resolved"])
    print(f"resolved: {resolved or 'nowhere'}")
