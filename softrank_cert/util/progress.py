"""Progress on stderr (front end; decides nothing).

Every command that computes reports progress here, in one of two forms: on a terminal a rich
bar (transient); when stderr is not a terminal (a log file, CI, a pipe) plain stage lines
``softrank CMD: ...``, one per stage or finished operator, so that a long run is never silent.
``--quiet`` (:func:`set_quiet`) silences both; stdout is never touched.

* :func:`progress_bar`: a rich bar, hidden when stderr is not a terminal;
* :func:`stage_line`: one plain line for a stage, when stderr is not a terminal;
* :class:`StageProgress`: a run in named stages (``panel``) -- a bar on a terminal, a line per
  stage in a log;
* :class:`OperatorProgress`: progress of a run over operators -- a bar with the current operator
  and its search stage on a terminal, one line per finished operator in a log (and, for a
  single operator, one per search stage).
"""

from __future__ import annotations

import sys
import time
from typing import Any
from collections.abc import Callable

from .escaping import plain_text, safe_text


#: Set by ``--quiet`` (:func:`set_quiet`): no bar and no stage line.
_QUIET = False


def set_quiet(quiet: bool) -> None:
    """Silence (``True``) or allow (``False``) every progress report of this process."""
    global _QUIET
    _QUIET = bool(quiet)


def is_quiet() -> bool:
    """Whether ``--quiet`` silenced progress."""
    return _QUIET


def lines_wanted() -> bool:
    """Whether plain stage lines are printed: stderr is not a terminal and not ``--quiet``."""
    return not _QUIET and not sys.stderr.isatty()


def seconds_text(seconds: float) -> str:
    """Seconds with sensible digits, never in exponent form: ``0.25``, ``3.1``, ``16.0``, ``179``,
    ``12345``."""
    if seconds < 1:
        return f"{seconds:.2f}"
    return f"{seconds:.1f}" if seconds < 100 else f"{seconds:.0f}"


def stage_line(prog: str, text: str) -> None:
    """``prog: text`` on stderr as one plain line, when :func:`lines_wanted` (a terminal has bars)."""
    if lines_wanted():
        print(f"{prog}: {plain_text(text)}", file=sys.stderr, flush=True)


def progress_bar(enabled: bool = True):
    """A rich progress bar on stderr (hidden when stderr is not a terminal, or with ``--quiet``)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    disable=not (enabled and not _QUIET and sys.stderr.isatty()))


class StageProgress:
    """A run in named stages, on stderr: on a terminal a rich bar whose text is the stage; else
    a line as each piece of work ends -- ``prog: stage (done/total units)`` when a stage's count
    grows, ``prog: stage done`` when the next stage begins -- so that input refused before any
    work finishes stays the one line of its error."""

    def __init__(self, prog: str, enabled: bool = True, *, unit: str = "operators") -> None:
        self.prog, self.unit = prog, unit
        self._bar = progress_bar(enabled)
        self._task: Any = None
        self._last: tuple[str, int] | None = None

    def __enter__(self) -> StageProgress:
        self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.__exit__(*exc)

    def stage(self, name: str, done: int = 0, total: int = 0) -> None:
        """Now in stage ``name`` with ``done`` of ``total`` units finished (0 of 0: not counted)."""
        if self._task is None:
            self._task = self._bar.add_task(safe_text(name), total=total or None)
        self._bar.update(self._task, description=safe_text(name), completed=done, total=total or None)
        if self._last is not None and self._last[0] != name and not self._last[1]:
            stage_line(self.prog, f"{self._last[0]} done")
        if done and self._last != (name, done):
            stage_line(self.prog, f"{name} ({done}/{total} {self.unit})" if total else f"{name} ({done})")
        self._last = (name, done)


class OperatorProgress:
    """Progress of a run over operators, on stderr.

    On a terminal (and with ``bar``): a rich bar over the operators whose text shows the current
    operator and, where the solver reports it, its search stage (``stage_callback``).  When
    stderr is not a terminal (a log file, CI): one line per finished operator
    (:meth:`finished`), since a bar would not be seen there, and for a run over one operator
    one line per search stage too.  ``--quiet`` silences both.
    """

    def __init__(self, prog: str, total: int | None, *, bar: bool = True, lines: bool = True,
                 label: str = "operators") -> None:
        self.prog, self.total, self.label = prog, total, label
        self.tty = sys.stderr.isatty()
        self.lines = lines and lines_wanted()
        bar = bar and not _QUIET
        self._count = 0
        self._cpu = time.process_time()
        self._bar = None
        if bar and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stage]}"),
                                 console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(label, total=total, stage="")

    def __enter__(self) -> OperatorProgress:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def stage(self, name: str, stage: str, elapsed: float, budget: float) -> None:
        """Show that operator ``name`` is in search ``stage`` (bar only)."""
        if self._bar is not None:
            budget_text = "" if budget == float("inf") else f", nominal {seconds_text(budget)}"
            self._bar.update(self._task, description=safe_text(name),
                             stage=safe_text(f"{stage} ({seconds_text(elapsed)}{budget_text} s)"))

    def stage_callback(self, name: str) -> Callable[[str, float, float], None] | None:
        """A ``progress(stage, elapsed, budget)`` callback for the bracket driver: the bar's
        text, or (one operator, no terminal) a line per stage; None when neither is shown."""
        if self._bar is not None:
            return lambda stage, elapsed, budget: self.stage(name, stage, elapsed, budget)
        if self.lines and self.total == 1:
            return lambda stage, elapsed, budget: self.stage_line(name, stage, elapsed)
        return None

    def stage_line(self, name: str, stage: str, elapsed: float) -> None:
        """One line: operator ``name`` finished search stage ``stage`` after ``elapsed`` wall
        seconds of its search, and the CPU seconds this process has spent since the progress began
        (the search runs here: a run over one operator)."""
        cpu = time.process_time() - self._cpu
        stage_line(self.prog, f"{name}: stage {stage} done ({seconds_text(elapsed)} s wall, {seconds_text(cpu)} s CPU)")

    def advance(self, name: str | None = None) -> None:
        """Count one more finished operator on the bar (completion order)."""
        if self._bar is not None:
            self._bar.update(self._task, advance=1, stage="", total=self.total,
                             description=safe_text(name) if name is not None else None)

    def finished(self, name: str, summary: str = "") -> None:
        """One line for a finished operator when stderr is not a terminal."""
        self._count += 1
        if self.lines:
            total = f"/{self.total}" if self.total is not None else ""
            text = f"{self.prog}: [{self._count}{total}] {plain_text(name)}" + (f": {plain_text(summary)}" if summary else "")
            print(text, file=sys.stderr, flush=True)
