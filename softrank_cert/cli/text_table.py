"""Plain-text tables that fit a width without losing a character (front end; decides nothing).

``softrank-verify`` prints its report with this instead of rich, so that checking a
certificate imports only what checking needs.  A table wider than the width is narrowed by
*folding* its widest foldable columns (a cell's text continues on the next line, nothing is
cut or replaced by an ellipsis), so a certified digit is never lost.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence

#: Width of a table when stdout is not a terminal and ``$COLUMNS`` is not set.
DEFAULT_WIDTH = 80
#: A folded column keeps at least this many characters per line.
MIN_FOLDED_WIDTH = 8
GAP = "  "
#: A word too long for its column is broken after the last ``/`` that fits, else after the last
#: ``-`` or ``_``, else after a ``.`` (else anywhere): a path folds between its folders, never
#: between a file's name and its suffix while a folder boundary fits.
BREAK_AFTER = ("/", "-_", ".")


def output_width() -> int:
    """The terminal's width on a terminal; ``$COLUMNS`` (when >= 40) or 80 otherwise."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


def _break_point(word: str, width: int) -> int:
    """Where a word longer than ``width`` is broken: after the last mark of the first group of
    :data:`BREAK_AFTER` that keeps more than a third of the width on the line, else at ``width``."""
    for marks in BREAK_AFTER:
        cut = max(word.rfind(mark, 0, width) for mark in marks) + 1
        if cut > width // 3:
            return cut
    return width


def _fold(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters: broken at spaces where a word fits,
    else inside the word (:func:`_break_point`: after a ``/`` first; every character is kept)."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if len(candidate) <= width:
                line = candidate
                continue
            if line:
                lines.append(line)
            while len(word) > width:
                cut = _break_point(word, width)
                lines.append(word[:cut])
                word = word[cut:]
            line = word
        lines.append(line)
    return lines


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None,
                 right: Sequence[str] = (), fixed: Sequence[str] = (), fold_first: Sequence[str] = (),
                 style: Callable[[str, str], str] | None = None) -> str:
    """The table as text lines: a header, a rule, one (possibly folded) line group per row.

    Columns named in ``right`` are right-justified; columns in ``fixed`` are never folded.  The
    other columns -- those in ``fold_first`` in that order, then the rest widest first -- are folded (down to :data:`MIN_FOLDED_WIDTH`) until the table
    fits ``width`` (default :func:`output_width`); a table that cannot fit even then is printed
    wider, still without cutting anything.  ``style(header, padded_cell)`` may wrap a cell in
    terminal colours after padding (it must not change the visible text).
    """
    width = output_width() if width is None else width
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h), *(max(len(line) for line in row[i].split("\n")) for row in cells)])
              for i, h in enumerate(headers)]

    def total() -> int:
        return sum(widths) + len(GAP) * (len(widths) - 1)

    while total() > width:
        foldable = [i for i, h in enumerate(headers)
                    if h not in fixed and widths[i] > max(MIN_FOLDED_WIDTH, len(h))]
        if not foldable:
            break
        first = [headers.index(h) for h in fold_first if h in headers and headers.index(h) in foldable]
        widest = first[0] if first else max(foldable, key=lambda i: widths[i])
        widths[widest] = max(MIN_FOLDED_WIDTH, len(headers[widest]), widths[widest] - (total() - width))

    def line(texts: Sequence[str], styled: bool) -> str:
        parts = []
        for i, (text, h) in enumerate(zip(texts, headers)):
            padded = text.rjust(widths[i]) if h in right else text.ljust(widths[i])
            parts.append(style(h, padded) if styled and style is not None else padded)
        return GAP.join(parts).rstrip()

    out = [line(headers, False), GAP.join("-" * w for w in widths)]
    for row in cells:
        folded = [_fold(text, widths[i]) for i, text in enumerate(row)]
        for k in range(max(len(f) for f in folded)):
            out.append(line([f[k] if k < len(f) else "" for f in folded], True))
    return "\n".join(out)


def fold_text(text: str, width: int | None = None) -> str:
    """A plain line (a title, a note) folded to ``width`` (default :func:`output_width`), every
    character kept."""
    return "\n".join(_fold(text, output_width() if width is None else width))
