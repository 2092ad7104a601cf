"""``softrank list``: the operators of an ``.npz`` file (a panel), read from the array headers."""

from __future__ import annotations

from typing import Any

from .common import add_command

EPILOG = """\
examples:
  softrank list panel.npz               # one name per line: minilm/apache2/w128/L5H2, ...
  softrank list panel.npz --details     # with kind and shape (m x N)
  softrank list panel.npz | grep w128/L5   # then: --operator NAME
  softrank list panel.npz --json        # {"operators": [{"name", "kind", "shape"}, ...], ...}

Nothing is loaded but the array headers, so this is instant for any panel.
exit codes: 0 listed; 2 invalid input (no such file, a folder, not an .npz,
no operator in it)
"""


def add_list(sub: Any) -> None:
    p = add_command(sub, "list", epilog=EPILOG)
    p.add_argument("operator_file", metavar="FILE.npz", help="a panel (softrank panel --out) or a single-operator .npz")
    p.add_argument("--details", action="store_true", help="also print each operator's kind and shape m x N")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document: the file and each operator's name, kind and shape [m, N]")
    p.set_defaults(run=run_list)


def run_list(args: Any) -> int:
    from ..errors import InvalidInputError
    from ..util.operator_files import EXPECTED, operator_shapes
    from ..plumbing.json_contract import dumps, envelope
    from ..util.escaping import plain_text

    rows = operator_shapes(args.operator_file)
    if not rows:
        raise InvalidInputError(f"{args.operator_file}: holds no operator; expected {EXPECTED}")
    if args.json:
        print(dumps(envelope("list", {"file": str(args.operator_file), "count": len(rows), "operators": [
            {"name": name, "kind": kind, "shape": [m, n]} for name, kind, (m, n) in rows]})))
        return 0
    width = max(len(name) for name, _, _ in rows)
    for name, kind, (m, n) in rows:
        shown = plain_text(name)
        print(f"{shown.ljust(width)}  {kind:<13}  {m} x {n}" if args.details else shown)
    return 0
