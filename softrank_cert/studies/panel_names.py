"""Fields of panel operator names (``minilm/apache2/w128/L3H7``): the one parser of them, shared by
the studies (budgets, analyze, KV budgets, the campaign report).

The rules, hardened against names of any shape (a name is data a certificate carries):

* a width is the last component ``w<N>`` with 1 to :data:`MAX_POSITION_DIGITS` ASCII digits,
  when N >= 1 (``w0``, ``w<400 digits>``, ``w\\u0663`` are no width: no block is that wide, and a
  figure's axis stays finite);
* a layer and head are a component ``L<l>H<h>``, each of 1 to :data:`MAX_POSITION_DIGITS` ASCII
  digits;
* the last such component counts.

* :func:`name_position`: ``(width, layer)``, each None when the name has none;
* :func:`name_fields`: ``(document, width, layer, head)`` for the budget-style tables;
* :func:`head_of`: the name without its width, which names one head across widths;
* :func:`head_position`: ``(model/document, width, layer, head)`` of a name of the panel shape
  exactly (``.../w<N>/L<l>H<h>``), for the survey's layer x head grids.
"""

from __future__ import annotations

import re

#: Width group of operators whose names carry no ``w<N>`` segment.
NO_WIDTH = "-"
#: The most digits a width, a layer or a head may have (a name with a longer one has none:
#: no block is that wide, no model that deep).
MAX_POSITION_DIGITS = 9

_WIDTH = re.compile(rf"w([0-9]{{1,{MAX_POSITION_DIGITS}}})")
_HEAD = re.compile(rf"L([0-9]{{1,{MAX_POSITION_DIGITS}}})H([0-9]{{1,{MAX_POSITION_DIGITS}}})")


def _width_at(parts: list[str]) -> int | None:
    """The index of the last component of ``parts`` of the form ``w<digits>``, None when there is
    none or it is ``w0`` (then the name has no width)."""
    at = next((i for i in range(len(parts) - 1, -1, -1) if _WIDTH.fullmatch(parts[i])), None)
    return None if at is None or int(parts[at][1:]) == 0 else at


def _head(parts: list[str]) -> re.Match[str] | None:
    return next((m for m in map(_HEAD.fullmatch, reversed(parts)) if m), None)


def name_position(name: str) -> tuple[int | None, int | None]:
    """``(width, layer)`` from the last width and the last ``L<l>H<h>`` component of ``name``
    (each None when there is none)."""
    parts = name.split("/")
    at, head = _width_at(parts), _head(parts)
    return (None if at is None else int(parts[at][1:])), (int(head[1]) if head else None)


def name_fields(name: str, fallback_document: str) -> tuple[str, int | str, int | None, int | None]:
    """``(document, width, layer, head)`` of a panel name such as ``minilm/apache2/w128/L3H7``.

    The width is the last width component (:data:`NO_WIDTH` when there is none) and the document
    the component just before it; without one the document is ``fallback_document`` (the
    panel's file stem).  Layer and head come from the last ``L<l>H<h>`` component (None otherwise).
    """
    parts = name.split("/")
    at, head = _width_at(parts), _head(parts)
    width: int | str = NO_WIDTH if at is None else int(parts[at][1:])
    document = parts[at - 1] if at else fallback_document
    return document, width, (int(head[1]) if head else None), (int(head[2]) if head else None)


def head_of(name: str) -> str | None:
    """The head a name is about across widths: the name without its last width component
    (``minilm/apache2/w64/L0H3`` -> ``minilm/apache2/L0H3``), None when it has no width."""
    parts = name.split("/")
    at = _width_at(parts)
    return None if at is None else "/".join(parts[:at] + parts[at + 1:])


def head_position(name: str) -> tuple[str, int, int, int] | None:
    """``(model/document, width, layer, head)`` of a panel name such as
    ``smollm2/apache2/w128/L3H7`` -- its last two components a width and ``L<l>H<h>``, after at
    least one other -- or None for a name of another shape."""
    parts = name.split("/")
    if len(parts) < 3 or _width_at(parts) != len(parts) - 2:
        return None
    head = _HEAD.fullmatch(parts[-1])
    if head is None:
        return None
    return "/".join(parts[:-2]), int(parts[-2][1:]), int(head[1]), int(head[2])
