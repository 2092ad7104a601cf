"""Lists of tolerances as the front ends take them (UNTRUSTED: parsing only, no bound).

Each tolerance stays the exact decimal string it was given (the kernel parses it to an exact
rational with :func:`softrank_cert.kernel.parse_tolerance`); lists are sorted by value.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..errors import InvalidInputError, InvalidToleranceError
from ..kernel import parse_tolerance


def parse_eps(eps: str | Iterable[str]) -> list[str]:
    """Tolerances as exact decimal strings, sorted by value: ``"0.25"``, ``"0.1,0.25"`` or a list
    of strings.  Floats are refused (the float 0.1 is not 1/10); so are repeats."""
    items: list[Any] = [part.strip() for part in eps.split(",")] if isinstance(eps, str) else list(eps)
    if not items:
        raise InvalidToleranceError("no tolerance given")
    values = []
    for item in items:
        if isinstance(item, (float, np.floating)):
            raise InvalidToleranceError(f"tolerance {item!r} is a float: pass the exact decimal string '{item!r}' "
                                        "(a float such as 0.1 is not exactly one tenth)")
        values.append(parse_tolerance(item))
    if len(set(values)) != len(values):
        raise InvalidToleranceError(f"a tolerance is listed twice: {', '.join(items)}")
    return [item for _, item in sorted(zip(values, items))]


def parse_eps_list(text: str) -> list[str]:
    """``--eps`` as exact decimal strings sorted by value (repeats and non-decimals refused, exit 2)."""
    try:
        return parse_eps(text)
    except InvalidToleranceError as exc:
        if "listed twice" in str(exc):
            raise InvalidInputError(f"--eps lists a tolerance twice: {text}") from None
        raise
