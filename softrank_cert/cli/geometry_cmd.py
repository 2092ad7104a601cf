"""``softrank geometry``: the theorem's quantities (C, tau, kappa, Phi, native Gamma) with
certified sides (``softrank_cert.kernel.geometry_bounds``, ``proofs/geometry-bounds.md``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from ..errors import InvalidInputError
from ..kernel import parse_tolerance
from ..operators_npz import load_operators, operator_names
from .common import stdout_console

EPILOG = """\
examples:
  softrank geometry op.npz --rank 4 --eps 0.25
  softrank geometry panel.npz --operator minilm/apache2/w64/L0H3 --rank 8 --eps 0.25 --json
  softrank geometry op.npz --rank 4 --eps 0.25 --retained T.npz   # your own T (or factors X, Y)

Upper ends are rounded up and lower ends down. Phi is the structural factor of the theorem
r_eps(A) <= min{p, C_r * Phi}; C_r is unknown, so Phi is never a rank. Causal operators are
refused: the theorem assumes one common positive support.
"""


def add_geometry(sub: Any) -> None:
    p = sub.add_parser("geometry", help="interaction geometry: tau, kappa, Phi, native Gamma (certified sides)",
                       description="Certified bounds on the theorem's quantities for a rank-r retained part T "
                                   "of the interaction C = P_m S P_N (default: truncated SVD of C).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("operator_file", metavar="OPERATOR.npz")
    p.add_argument("--operator", metavar="NAME", help="operator of a panel")
    p.add_argument("--rank", type=int, required=True, metavar="r", help="rank of the retained part T")
    p.add_argument("--eps", required=True, metavar="E", help="exact decimal tolerance, e.g. 0.25")
    p.add_argument("--retained", metavar="T.npz",
                   help="retained part: array T (m x N, refactored at rank r) or factors X, Y (used exactly)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_geometry)


def _load_retained(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"{file}: no such file")
    try:
        with np.load(file, allow_pickle=False) as data:
            arrays = {k: np.array(data[k]) for k in data.files}
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{file}: not a readable .npz file ({exc})") from None
    for name, a in arrays.items():
        if a.dtype != np.float64 or a.ndim != 2 or not np.isfinite(a).all():
            raise InvalidInputError(f"{file}: {name} must be a finite 2-D float64 array")
    if "X" in arrays and "Y" in arrays:
        return {"factors": (arrays["X"], arrays["Y"]), "optimise": False}
    if "T" in arrays:
        return {"T": arrays["T"]}
    raise InvalidInputError(f"{file}: expected an array T or arrays X and Y")


def run_geometry(args: Any) -> int:
    parse_tolerance(args.eps)
    path = Path(args.operator_file)
    if args.operator:
        (item,) = load_operators(path, [args.operator])
    else:
        names = operator_names(path) if path.is_file() else []
        if len(names) > 1:
            raise InvalidInputError(f"{path} holds {len(names)} operators: choose one with --operator NAME")
        (item,) = load_operators(path)
    extra = _load_retained(args.retained) if args.retained else {}
    from ..geometry import compute_geometry

    report = compute_geometry(item.operator, args.rank, args.eps, **extra)
    document = {"operator": item.name, "kind": item.operator.kind, "p": item.operator.p, **report.to_json()}
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        _render(document)
    return 0


def _render(doc: dict[str, Any]) -> None:
    table = Table(title=f"softrank geometry: {doc['operator']} ({doc['shape'][0]}x{doc['shape'][1]}, "
                        f"retained rank {doc['retained_rank']}, eps {doc['eps']}, T = {doc['retained']})")
    for column in ("quantity", "bound", "certified", "float64 estimate", "meaning"):
        table.add_column(column, justify="right" if column in ("bound", "float64 estimate") else "left")
    est = doc["estimates"]
    est_for = {"tau": est.get("tau"), "kappa_upper": est.get("kappa_upper"), "kappa_lower": est.get("kappa_dual"),
               "phi": est.get("phi")}
    sign = {"upper": "<=", "lower": ">="}
    for name, side in doc["certified"].items():
        if name == "estimates" or doc.get(name) is None:
            continue
        value = est_for.get(name)
        table.add_row(name, f"{sign.get(side, '')} {doc[name]}", side,
                      "" if value is None else f"{value:.6g}", doc["meaning"][name])
    stdout_console().print(table)
    applies = {True: "yes (tau < eps proved)", False: "no (tau >= eps proved)", None: "undecided"}[doc["theorem_applies"]]
    print(f"theorem applies: {applies}; rank of C (float64 estimate): {est['rank_C']}")
    print(doc["note"])
