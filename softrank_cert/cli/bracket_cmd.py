"""``softrank bracket``: solvers propose, the kernel verifies, a (signed) certificate is written."""

from __future__ import annotations

import argparse
import json
import time
from contextlib import closing
from pathlib import Path, PurePosixPath
from typing import Any

from rich.table import Table

from ..certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from ..certio.signing import load_private_key, utc_now_rfc3339
from ..errors import InvalidInputError
from ..kernel import parse_tolerance
from ..operators_npz import NamedOperator, load_operators, operator_names
from ..parallel import pack_operator, resolve_jobs, run_ordered
from .common import progress_bar, safe_text, stdout_console
from .keys import sign_certificate, write_json_atomic

EPILOG = """\
examples:
  softrank bracket op.npz --eps 0.1,0.25,0.5 --out cert.json --key issuer.key
  softrank bracket panel.npz --operator minilm/apache2/w64/L0H3 --eps 0.25 --out cert.json
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ --key issuer.key --budget-seconds 30
  softrank bracket panel.npz --all --eps 0.25 --out certs/ --jobs 4
  softrank bracket panel.npz --all --eps 0.25 --out certs/ --scheduler tcp://10.0.0.5:8786

With --all, --out is a folder: operator NAME goes to certs/NAME.json (the '/' in panel names
become sub-folders). Every end written was VERIFIED by the trusted kernel first; check any of them
again with softrank-verify. --jobs N runs N operators at a time in worker processes and
--scheduler runs them on a Dask cluster; the certificates do not depend on either (without
--budget-seconds: with a time budget, a faster machine may find tighter ends).
"""


def add_bracket(sub: Any) -> None:
    p = sub.add_parser("bracket", help="bracket r_eps(A) with verified ends and write certificates",
                       description="Run the float64 solvers on an operator, keep the tightest ends the trusted kernel "
                                   "verifies at each tolerance, and write a (signed) certificate.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("operator_file", metavar="OPERATOR.npz")
    p.add_argument("--eps", required=True, metavar="E1,E2,...", help="exact decimal tolerances, e.g. 0.1,0.25,0.5")
    p.add_argument("--out", required=True, metavar="CERT.json|FOLDER")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--operator", action="append", metavar="NAME", help="operator of a panel (repeatable)")
    which.add_argument("--all", action="store_true", help="every operator of the panel (--out is a folder)")
    p.add_argument("--key", metavar="KEYFILE", help="sign the certificates with this key (softrank keygen)")
    p.add_argument("--budget-seconds", type=float, metavar="S", help="solver time per operator (best verified ends so far are kept)")
    add_parallel_options(p)
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")
    p.set_defaults(run=run_bracket)


def add_parallel_options(p: Any) -> None:
    """``--jobs N`` and ``--scheduler ADDRESS`` (shared by bracket, audit and supports)."""
    how = p.add_mutually_exclusive_group()
    how.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="operators solved at a time in worker processes (default 1; 0 = one per CPU)")
    how.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                     help="run the tasks on this Dask distributed scheduler (softrank-cert installed on its workers)")


def parse_eps_list(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",")]
    for item in items:
        parse_tolerance(item)
    if len(set(items)) != len(items):
        raise InvalidInputError(f"--eps lists a tolerance twice: {text}")
    return sorted(items, key=parse_tolerance)


def certificate_path(out: Path, name: str) -> Path:
    """``out/NAME.json`` with the panel name's '/' as sub-folders; refuses names that escape ``out``."""
    parts = PurePosixPath(name).parts
    if not parts or any(part in ("", ".", "..") or part.startswith("/") for part in parts):
        raise InvalidInputError(f"operator name {name!r} cannot be used as a file name")
    return out.joinpath(*parts[:-1], parts[-1] + ".json")


def _select(args: Any) -> list[NamedOperator]:
    path = Path(args.operator_file)
    if args.all or args.operator:
        return load_operators(path, None if args.all else args.operator)
    names = operator_names(path) if path.is_file() else []
    if len(names) > 1:
        raise InvalidInputError(f"{path} holds {len(names)} operators: choose one with --operator NAME or use --all")
    return load_operators(path)


def bracket_task(spec: dict[str, Any], eps_list: list[str], budget_seconds: float | None) -> tuple[list[Bracket], float]:
    """One operator's verified brackets (plain certificate ends) and solver seconds; runs in a worker."""
    from ..parallel import unpack_operator
    from ..solvers.bracket import bracket_operator

    start = time.perf_counter()
    brackets = bracket_operator(unpack_operator(spec), eps_list, budget_seconds=budget_seconds)
    return [Bracket(b.eps, LowerEnd(b.lower.k, b.lower.method, b.lower.X, b.lower.Y),
                    UpperEnd(b.upper.r, b.upper.construction, b.upper.U, b.upper.W)) for b in brackets], \
        time.perf_counter() - start


def bracket_document(name: str, op: Any, brackets: list[Any], provenance: dict[str, Any] | None) -> dict[str, Any]:
    """Unsigned certificate of verified brackets (the driver's, see ``solvers.bracket``, or plain
    :class:`~softrank_cert.certio.certificate.Bracket` values: the same field names)."""
    return certificate_document(
        name, op,
        [Bracket(b.eps, LowerEnd(b.lower.k, b.lower.method, b.lower.X, b.lower.Y),
                 UpperEnd(b.upper.r, b.upper.construction, b.upper.U, b.upper.W)) for b in brackets],
        created=utc_now_rfc3339(), provenance=provenance or None)


def run_bracket(args: Any) -> int:
    eps_list = parse_eps_list(args.eps)
    if args.budget_seconds is not None and not args.budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0")
    if args.key:
        load_private_key(args.key)  # fail before any work
    operators = _select(args)
    out = Path(args.out)
    if args.all or len(operators) > 1:
        if out.suffix == ".json":
            raise InvalidInputError("with several operators --out must be a folder, not a .json file")
        targets = [certificate_path(out, item.name) for item in operators]
    else:
        targets = [out]
    jobs = resolve_jobs(args.jobs)
    tasks = [(pack_operator(item.operator), eps_list, args.budget_seconds) for item in operators]
    summary: list[dict[str, Any]] = []
    with progress_bar(not args.json) as bar:
        task = bar.add_task("bracketing", total=len(operators))
        results = run_ordered(bracket_task, tasks, jobs=jobs, scheduler=args.scheduler,
                              done=lambda i: bar.update(task, advance=1, description=safe_text(operators[i].name)))
        with closing(results):
            for item, target, (brackets, seconds) in zip(operators, targets, results):
                document = bracket_document(item.name, item.operator, brackets, item.provenance)
                if args.key:
                    document = sign_certificate(document, args.key)
                write_json_atomic(target, document)
                summary.append({"operator": item.name, "certificate": str(target), "seconds": round(seconds, 3),
                                "p": item.operator.p, "signed": bool(args.key),
                                "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r,
                                              "lower_method": b.lower.method, "upper_construction": b.upper.construction}
                                             for b in brackets]})
    if args.json:
        print(json.dumps({"operators": summary}, indent=2))
    else:
        _render(summary)
    return 0


def _render(summary: list[dict[str, Any]]) -> None:
    table = Table(title="softrank bracket (every end VERIFIED by the trusted kernel)")
    for column in ("operator", "p", "eps", "lower", "upper", "resolved", "s"):
        table.add_column(column, justify="left" if column == "operator" else "right")
    for entry in summary:
        for b in entry["brackets"]:
            table.add_row(safe_text(entry["operator"]), str(entry["p"]), b["eps"], f"{b['lower']} ({b['lower_method']})",
                          f"{b['upper']} ({b['upper_construction']})", "yes" if b["lower"] == b["upper"] else "",
                          f"{entry['seconds']:.1f}")
    stdout_console().print(table)
    print(f"wrote {len(summary)} certificate(s); check them with: softrank-verify "
          + " ".join(e["certificate"] for e in summary[:3]) + (" ..." if len(summary) > 3 else ""))
