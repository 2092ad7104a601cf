"""Shared CLI plumbing: one-line errors with documented exit codes, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, NoReturn

from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, SoftrankError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def make_parser(prog: str, description: str, epilog: str) -> OneLineParser:
    return OneLineParser(prog=prog, description=description, epilog=epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter)


def run_main(prog: str, body: Callable[[], int]) -> NoReturn:
    """Run ``body`` and exit with its code; errors become one line on stderr.

    SoftrankError -> its exit code; invalid memory requests -> 2; anything else is a bug:
    one line and exit 4 (set SOFTRANK_DEBUG=1 to see the traceback).
    """
    try:
        code = body()
    except SoftrankError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except MemoryError:
        print(f"{prog}: error: out of memory for this input", file=sys.stderr)
        code = EXIT_INVALID_INPUT
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("SOFTRANK_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
              "(set SOFTRANK_DEBUG=1 for a traceback)", file=sys.stderr)
        code = EXIT_INTERNAL
    sys.exit(code)


def canonical_dump(document: object) -> str:
    """Readable, stable JSON text for certificates and reports (keys sorted, 1-space indent)."""
    import json

    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def int_list(text: str) -> list[int]:
    """argparse type for comma-separated integers such as ``64,128,256``."""
    import argparse

    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def progress_bar(enabled: bool = True):
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    disable=not (enabled and sys.stderr.isatty()))


def stdout_console():
    """Console for tables: the terminal's width, or a wide fixed width when piped (no truncated names)."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def expand_json_paths(paths: list[str]) -> list[str]:
    """Files as given; folders replaced by the ``*.json`` files below them (sorted)."""
    from pathlib import Path

    out: list[str] = []
    for item in paths:
        path = Path(item)
        out.extend(sorted(str(p) for p in path.rglob("*.json")) if path.is_dir() else [item])
    return out


def safe_text(text: str) -> str:
    """Untrusted text (operator ids, method names) for a rich table: control and format
    characters become visible escapes (no terminal injection) and ``[`` is escaped (no markup)."""
    import unicodedata

    from rich.markup import escape

    shown = "".join(ch if unicodedata.category(ch)[0] != "C" else ascii(ch)[1:-1] for ch in text)
    return escape(shown)


def replace_atomically(path: Path, write: Callable[[str], None], suffix: str = ".tmp") -> None:
    """Create ``path`` by ``write(temporary_path)`` in the same folder, then a rename: a reader
    never sees a partial file, and a failure leaves no temporary file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`replace_atomically`)."""
    replace_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def save_figure_atomic(fig: Any, path: Path) -> None:
    """Save a matplotlib figure atomically in the format its suffix names (PNG by default), then
    close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    image_format = path.suffix.lower().lstrip(".") or "png"
    try:
        replace_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, format=image_format), path.suffix or ".png")
    finally:
        plt.close(fig)
