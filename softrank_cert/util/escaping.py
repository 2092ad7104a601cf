"""Untrusted text (operator ids, method names, file names) made safe to show (front end).

* :func:`plain_text`: for a plain line on a terminal or in a log: control and format characters
  become visible escapes (no terminal injection);
* :func:`safe_text`: for rich (tables, progress bars): the same escapes, and ``[`` is escaped
  (no markup).
"""

from __future__ import annotations

import unicodedata


def plain_text(text: str) -> str:
    """Untrusted text for a plain line on a terminal or in a log: control and format characters
    (Unicode category C) become visible escapes (no terminal injection)."""
    return "".join(ch if unicodedata.category(ch)[0] != "C" else ascii(ch)[1:-1] for ch in text)


def safe_text(text: str) -> str:
    """Untrusted text for a rich table: :func:`plain_text`, then ``[`` escaped (no markup)."""
    from rich.markup import escape

    return escape(plain_text(text))
