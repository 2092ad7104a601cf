"""``softrank``: the toolkit's main command (subcommands below)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Collection

from .. import __version__
from .commands import COMMANDS
from .common import make_parser, parse_command_line, run_main

EPILOG = """\
subcommand examples:
  softrank keygen --out issuer.key
  softrank sign cert.json --key issuer.key
  softrank bracket op.npz --eps 0.1,0.25,0.5 --out cert.json --key issuer.key
  softrank profile op.npz --plot profile.png --eps 0.25 --out cert.json
  softrank geometry op.npz --rank 4 --eps 0.25 --json
  softrank supports sphere --dim 2 --eps 0.25 --plot sphere.png
  softrank panel --model minilm --text examples/data/apache2.txt --widths 64,128 --out panel.npz
  softrank list panel.npz                      # the operator names that --operator takes
  softrank audit brackets.jsonl --operators panel.npz --out report.json --plot ratios.png
  softrank budgets panel.npz --budgets 8,16,32 --eps 0.25 --plot budgets.png --table budgets.md
  softrank analyze certs/ --operators panel.npz --out analysis.json --plot analysis.png --table analysis.md
  softrank report certs/                       # certs/report.html: the campaign as one page
Check any certificate with: softrank-verify cert.json
No command writes over one of its inputs or a key file; an existing output is replaced only
with --force (a campaign folder: --resume continues it, --force computes it again).
"""


def build_parser(full: Collection[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The parser of ``softrank``: the commands in ``full`` (default: all) with their own parsers,
    the others only as their line in the command list (see :func:`named_command`)."""
    parser = make_parser("softrank", "Certified approximation ranks of softmax attention.", EPILOG)
    parser.add_argument("--version", action="version", version=f"softrank-cert {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        if name in full:
            getattr(importlib.import_module(f".{command.module}", __package__), f"add_{name.replace('-', '_')}")(sub)
        else:
            sub.add_parser(name, help=command.line)
    return parser


def named_command(argv: list[str]) -> list[str]:
    """The command a command line names (none or one): its first word that is not an option,
    since ``softrank`` itself takes no option with a value. Only that command's module is
    imported; the others never parse anything."""
    for word in argv:
        if not word.startswith("-"):
            return [word] if word in COMMANDS else []
    return []


def main(argv: list[str] | None = None) -> None:
    """``softrank`` (``argv``: the arguments after the program name; default ``sys.argv[1:]``).
    With no argument at all it prints its help and exits 0 (a request for the commands, not a
    usage error)."""
    import sys

    from ..util.progress import is_quiet, set_quiet

    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(named_command(words))
    if not words:
        parser.print_help()
        sys.exit(0)
    args = parse_command_line(parser, argv)
    before = is_quiet()
    set_quiet(bool(getattr(args, "quiet", False)))
    try:
        run_main(f"softrank {args.command}", lambda: args.run(args), json_errors=bool(getattr(args, "json", False)))
    finally:  # a caller in the same process (a test, a notebook) keeps its own setting
        set_quiet(before)


if __name__ == "__main__":
    main()
