"""Fields of panel operator names (``minilm/apache2/w128/L3H7``), shared by the budget and analyze studies."""

from __future__ import annotations

import re

#: Width group of operators whose names carry no ``w<N>`` segment.
NO_WIDTH = "-"

_WIDTH = re.compile(r"w(\d+)")
_HEAD = re.compile(r"L(\d+)H(\d+)")


def name_fields(name: str, fallback_document: str) -> tuple[str, int | str, int | None, int | None]:
    """``(document, width, layer, head)`` of a panel name such as ``minilm/apache2/w128/L3H7``.

    The width is the last ``w<N>`` segment (``"-"`` when there is none) and the document the
    segment just before it; without such a segment the document is ``fallback_document`` (the
    panel's file stem).  Layer and head come from an ``L<l>H<h>`` segment (None otherwise).
    """
    parts = name.split("/")
    at = next((i for i in range(len(parts) - 1, -1, -1) if _WIDTH.fullmatch(parts[i])), None)
    width: int | str = NO_WIDTH if at is None else int(parts[at][1:])
    document = parts[at - 1] if at else fallback_document
    head = next((m for m in map(_HEAD.fullmatch, reversed(parts)) if m), None)
    return document, width, (int(head[1]) if head else None), (int(head[2]) if head else None)
