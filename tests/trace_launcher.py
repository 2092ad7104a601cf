"""Test helper: run ``softrank`` or ``softrank-verify`` as the console script does, and write the
names of every imported module to a file when the process exits.

``python tests/trace_launcher.py RECORD {softrank,softrank-verify} ARGS...``: ``RECORD`` gets one
module name a line (written at exit, after ``SystemExit``), so that a test can check what a run
imported -- e.g. that a refusal of bad arguments came before any solver was loaded.
"""

from __future__ import annotations

import atexit
import sys
from pathlib import Path


def _record(path: Path) -> None:
    path.write_text("\n".join(sorted(sys.modules)) + "\n")


def main() -> None:
    record, command, *args = sys.argv[1:]
    atexit.register(_record, Path(record))
    if command == "softrank":
        from softrank_cert.cli.main import main as entry
    elif command == "softrank-verify":
        from softrank_cert.cli.verify import main as entry
    else:
        raise SystemExit(f"trace_launcher: unknown command {command!r}")
    sys.argv = [command, *args]
    entry(args)


if __name__ == "__main__":
    main()
