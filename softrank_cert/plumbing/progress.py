"""Progress on stderr (front end; decides nothing).

* :func:`progress_bar`: a rich bar, hidden when stderr is not a terminal;
* :class:`StageLines`: one line per stage where that bar is hidden;
* :class:`OperatorProgress`: progress of a run over operators -- a bar with the current operator
  and its search stage on a terminal, one line per finished operator in a log.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from .untrusted_text import plain_text, safe_text


def progress_bar(enabled: bool = True):
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    disable=not (enabled and sys.stderr.isatty()))


class StageLines:
    """Stage lines on stderr where no bar is seen (stderr not a terminal): one line
    ``PROG: STAGE`` (with ``done/total`` when known) each time the stage name changes, and at
    the end of a stage with a count."""

    def __init__(self, prog: str, enabled: bool = True) -> None:
        self.prog, self.enabled = prog, enabled and not sys.stderr.isatty()
        self._last: tuple[str, int] | None = None

    def __call__(self, name: str, done: int = 0, total: int = 0) -> None:
        if not self.enabled or (self._last is not None and self._last == (name, done)):
            return
        if self._last is not None and self._last[0] == name and not (total and done == total):
            return
        self._last = (name, done)
        count = f" ({done}/{total} operators)" if total else ""
        print(f"{self.prog}: {plain_text(name)}{count}", file=sys.stderr, flush=True)


class OperatorProgress:
    """Progress of a run over operators, on stderr.

    On a terminal (and with ``bar``): a rich bar over the operators whose text shows the current
    operator and, where the solver reports it, its search stage (``stage_callback``).  When
    stderr is not a terminal (a log file, CI): one line per finished operator
    (:meth:`finished`), since a bar would not be seen there.
    """

    def __init__(self, prog: str, total: int | None, *, bar: bool = True, lines: bool = True,
                 label: str = "operators") -> None:
        self.prog, self.total, self.label = prog, total, label
        self.tty = sys.stderr.isatty()
        self.lines = lines and not self.tty
        self._count = 0
        self._bar = None
        if bar and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stage]}"),
                                 console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(label, total=total, stage="")

    def __enter__(self) -> "OperatorProgress":
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def stage(self, name: str, stage: str, elapsed: float, budget: float) -> None:
        """Show that operator ``name`` is in search ``stage`` (bar only)."""
        if self._bar is not None:
            digits = 1 if budget < 10 else 0
            budget_text = "" if budget == float("inf") else f"/{budget:.{digits}f}"
            self._bar.update(self._task, description=safe_text(name),
                             stage=safe_text(f"{stage} ({elapsed:.{digits}f}{budget_text} s)"))

    def stage_callback(self, name: str) -> Callable[[str, float, float], None] | None:
        """A ``progress(stage, elapsed, budget)`` callback for the bracket driver (None without a bar)."""
        if self._bar is None:
            return None
        return lambda stage, elapsed, budget: self.stage(name, stage, elapsed, budget)

    def advance(self, name: str | None = None) -> None:
        """Count one more finished operator on the bar (completion order)."""
        if self._bar is not None:
            self._bar.update(self._task, advance=1, stage="", total=self.total,
                             **({"description": safe_text(name)} if name is not None else {}))

    def finished(self, name: str, summary: str = "") -> None:
        """One line for a finished operator when stderr is not a terminal."""
        self._count += 1
        if self.lines:
            total = f"/{self.total}" if self.total is not None else ""
            text = f"{self.prog}: [{self._count}{total}] {plain_text(name)}" + (f": {plain_text(summary)}" if summary else "")
            print(text, file=sys.stderr, flush=True)
