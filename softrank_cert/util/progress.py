"""Progress on stderr (front end; decides nothing).

Every command that computes reports progress here, through one object, :class:`Progress`, in one
of two forms: on a terminal a rich bar (transient); when stderr is not a terminal (a log file,
CI, a pipe) plain lines ``softrank CMD: ...``, one per stage or finished operator, so that a long
run is never silent.  ``--quiet`` (:func:`set_quiet`) silences both; stdout is never touched.

A run reports in two ways, both on the one object:

* in named stages (``panel``, ``report``, ``kv-budgets``): :meth:`Progress.stage`, whose shape
  ``stage(name, done, total)`` (:data:`Stage`) is the one callback shape a study or a loader is
  handed;
* over operators (``bracket``, ``budgets``, ...): :meth:`Progress.advance` and
  :meth:`Progress.finished` per operator, and :meth:`Progress.stage_callback`, the solver's
  ``progress(stage, elapsed, budget)`` of one operator's search.

:func:`stage_line` is one plain line for a stage, when stderr is not a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any
from collections.abc import Callable

from .escaping import plain_text, safe_text


#: ``stage(name, done=0, total=0)``: now in stage ``name``, ``done`` of ``total`` units finished
#: (0 of 0: not counted) -- :meth:`Progress.stage`, the one callback shape a study is handed.
Stage = Callable[..., None]

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


class Progress:
    """Progress of one run on stderr (see the module docstring): ``prog`` names it in every line;
    ``total`` is the number of operators (None: unknown), ``label`` the bar's text before the
    first operator, ``unit`` what a stage counts.  ``bar``: a rich bar on a terminal (no bar
    with False, e.g. for ``--json``); ``lines``: the plain lines when stderr is not a terminal.
    Used as a context manager (the bar is shown inside the block)."""

    def __init__(self, prog: str, total: int | None = None, *, bar: bool = True, lines: bool = True,
                 label: str = "operators", unit: str = "operators") -> None:
        self.prog, self.total, self.label, self.unit = prog, total, label, unit
        self.tty = sys.stderr.isatty()
        self.lines = lines and lines_wanted()
        self._count = 0
        self._cpu = time.process_time()
        self._last: tuple[str, int] | None = None
        self._bar: Any = None
        self._task: Any = None
        if bar and self.tty and not _QUIET:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stage]}"),
                                     console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(label, total=total, stage="")

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    # ------------------------------------------------------------------ a run in named stages

    def stage(self, name: str, done: int = 0, total: int = 0) -> None:
        """Now in stage ``name`` with ``done`` of ``total`` units finished (0 of 0: not counted):
        the bar's text and count on a terminal; else a line as each piece of work ends --
        ``prog: stage (done/total units)`` when a stage's count grows, ``prog: stage done`` when
        the next stage begins -- so that input refused before any work finishes stays the one
        line of its error."""
        if self._bar is not None:
            self._bar.update(self._task, description=safe_text(name), completed=done, total=total or None)
        if self._last is not None and self._last[0] != name and not self._last[1]:
            self._line(f"{self._last[0]} done")
        if done and self._last != (name, done):
            self._line(f"{name} ({done}/{total} {self.unit})" if total else f"{name} ({done})")
        self._last = (name, done)

    def _line(self, text: str) -> None:
        if self.lines:
            stage_line(self.prog, text)

    # ------------------------------------------------------------------ a run over operators

    def search_stage(self, name: str, stage: str, elapsed: float, budget: float) -> None:
        """Show that operator ``name`` is in search ``stage`` (bar only)."""
        if self._bar is not None:
            budget_text = "" if budget == float("inf") else f", nominal {seconds_text(budget)}"
            self._bar.update(self._task, description=safe_text(name),
                             stage=safe_text(f"{stage} ({seconds_text(elapsed)}{budget_text} s)"))

    def stage_callback(self, name: str) -> Callable[[str, float, float], None] | None:
        """A ``progress(stage, elapsed, budget)`` callback for the bracket driver: the bar's
        text, or (one operator, no terminal) a line per stage; None when neither is shown."""
        if self._bar is not None:
            return lambda stage, elapsed, budget: self.search_stage(name, stage, elapsed, budget)
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
