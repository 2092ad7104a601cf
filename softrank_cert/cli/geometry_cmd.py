"""``softrank geometry``: the theorem's quantities (C, tau, kappa, Phi, native Gamma) with
certified sides (``softrank_cert.geometry.bounds``, ``proofs/geometry-bounds.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..util.operator_files import NamedOperator, choose_operator_message, load_operators, npz_headers, operator_names
from ..plumbing.json_contract import dumps, envelope
from ..util.tolerances import parse_one_eps
from .common import add_json_options, add_command

EPILOG = """\
examples:
  softrank geometry op.npz --rank 4 --eps 0.25
  softrank geometry panel.npz --operator minilm/apache2/w64/L0H3 --rank 8 --eps 0.25 --json
  softrank geometry panel.npz --operator NAME1 --operator NAME2 --rank 4 --eps 0.25   # several heads
  softrank geometry cert.json --rank 4 --eps 0.25        # the operator a certificate is about
  softrank geometry op.npz --rank 4 --eps 0.25 --retained T.npz   # your own T (or factors X, Y)

OPERATOR is an operator or panel .npz, or a certificate (.json: its operator, decoded and
hash-checked as softrank-verify does; an invalid certificate is refused with exit 2).
--json prints one document (schema certificates/schema/softrank-geometry-report-v1.schema.json)
with one entry per operator under "operators"; certified bounds are decimal strings with 17
significant digits, float64 estimates JSON numbers under "estimates".

Upper ends are rounded up and lower ends down. Phi is the structural factor of the theorem
r_eps(A) <= min{p, C_r * Phi}; C_r is unknown, so Phi is never a rank. Causal operators are
refused: the theorem assumes one common positive support.
"""


def add_geometry(sub: Any) -> None:
    p = add_command(sub, "geometry", epilog=EPILOG)
    p.add_argument("operator_file", metavar="OPERATOR.npz|CERT.json",
                   help="an operator or panel .npz, or a certificate .json (its operator)")
    p.add_argument("--operator", action="append", metavar="NAME", help="operator of a panel (repeatable)")
    p.add_argument("--rank", type=int, required=True, metavar="r", help="rank of the retained part T")
    p.add_argument("--eps", required=True, metavar="E", help="exact decimal tolerance, e.g. 0.25")
    p.add_argument("--retained", metavar="T.npz",
                   help="retained part: array T (m x N, refactored at rank r) or factors X, Y (used exactly)")
    add_json_options(p, "print one JSON object")
    p.set_defaults(run=run_geometry)


def _load_retained(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"{file}: no such file")
    npz_headers(file)  # dtypes, truncation, totals and zip bombs checked before anything is loaded
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


def certificate_operator(path: str | Path) -> NamedOperator:
    """The operator of a certificate file: read strictly, schema-checked, arrays hash-checked and
    the signature (if any) checked, as ``softrank-verify`` does before the claims; anything else
    is refused with one line (exit 2).  The claims are not re-checked (use softrank-verify)."""
    from ..certio.certificate import decode_certificate, read_json_file
    from ..verification import check_signature

    try:
        document = read_json_file(path)
        certificate = decode_certificate(document)
        check_signature(document, trusted_keys=None, require_signature=False)
    except InvalidInputError as exc:
        message = str(exc)
        raise type(exc)(message if message.startswith(str(path)) else f"{path}: {message}") from None
    return NamedOperator(certificate.operator_id, certificate.operator, dict(certificate.provenance))


def select_operators(path: Path, names: list[str] | None) -> tuple[list[NamedOperator], str]:
    """The operators ``--operator`` selects from an .npz or a certificate, and the source kind."""
    if path.suffix.lower() == ".json":
        item = certificate_operator(path)
        for name in names or []:
            if name != item.name:
                raise InvalidInputError(f"{path} is a certificate about {item.name!r}, not {name!r}")
        return [item], "certificate"
    if names:
        return load_operators(path, list(dict.fromkeys(names))), "operator-file"
    found = operator_names(path) if path.is_file() else []
    if len(found) > 1:
        raise InvalidInputError(choose_operator_message(path, found, "--operator NAME (repeatable)"))
    return load_operators(path), "operator-file"


def run_geometry(args: Any) -> int:
    args.eps = parse_one_eps(args.eps)
    path = Path(args.operator_file)
    extra = _load_retained(args.retained) if args.retained else {}
    items, source = select_operators(path, args.operator)
    from ..geometry import compute_geometry

    from ..util.progress import Progress

    entries = []
    with Progress("softrank geometry", len(items), bar=not args.json) as bar:
        for item in items:
            summary = compute_geometry(item.operator, args.rank, args.eps, **extra)
            entries.append({"operator": item.name, "kind": item.operator.kind, "p": item.operator.p, **summary.to_json()})
            bar.advance(item.name)
            bar.finished(item.name, f"certified bounds at rank {args.rank}, eps {args.eps}")
    document = envelope("geometry", {"source": {"path": str(path), "kind": source}, "retained_rank": args.rank,
                                     "eps": args.eps, "operators": entries})
    if args.json:
        print(dumps(document))
    else:
        for entry in entries:
            _render(entry)
    return 0


def render_geometry(doc: dict[str, Any], width: int | None = None) -> str:
    """The text of one operator: a table of the certified bounds (each shown whole: 17
    digits, rounded outward) and their float64 estimates, then what each quantity means (folded
    to the width, never cut), then whether the theorem applies.  Fits ``width`` (default: the
    terminal's, else 80) columns."""
    from .text_table import fold_text, render_table

    est = doc["estimates"]
    est_for = {"tau": est.get("tau"), "kappa_upper": est.get("kappa_upper"), "kappa_lower": est.get("kappa_dual"),
               "phi": est.get("phi")}
    sign = {"upper": "<=", "lower": ">="}
    rows, meanings = [], []
    for name, side in doc["certified"].items():
        if name == "estimates" or doc.get(name) is None:
            continue
        value = est_for.get(name)
        rows.append([name, f"{sign.get(side, '')} {doc[name]}", "" if value is None else f"{value:.6g}"])
        meanings.append([name, doc["meaning"][name]])
    applies = {True: "yes (tau < eps proved)", False: "no (tau >= eps proved)", None: "undecided"}[doc["theorem_applies"]]
    title = (f"softrank geometry: {doc['operator']} ({doc['shape'][0]}x{doc['shape'][1]}, retained rank "
             f"{doc['retained_rank']}, eps {doc['eps']}, T = {doc['retained']})")
    return "\n".join([
        fold_text(title, width),
        render_table(["quantity", "certified bound", "float64 estimate"], rows, width=width,
                     right=("float64 estimate",), fixed=("quantity", "certified bound")),
        "",
        render_table(["quantity", "meaning"], meanings, width=width, fixed=("quantity",)),
        "",
        fold_text(f"theorem applies: {applies}; rank of C (float64 estimate): {est['rank_C']}", width),
        fold_text(doc["note"], width),
    ])


def _render(doc: dict[str, Any]) -> None:
    print(render_geometry(doc))
