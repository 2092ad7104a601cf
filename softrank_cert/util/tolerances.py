"""Lists of tolerances, and the search budget, as the front ends take them (UNTRUSTED: parsing only, no bound).

Each tolerance stays the exact decimal string it was given (the kernel parses it to an exact
rational with :func:`softrank_cert.kernel.parse_tolerance`); lists are sorted by value.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable

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


def check_budget(work: float | None, budget_seconds: float | None, *, options: bool = False) -> None:
    """The search bound of the front ends: ``work`` units and ``budget_seconds`` of wall time, each
    > 0 when given (NaN is refused too); ``options``: name them as the command line does."""
    if work is not None and not work > 0:
        raise InvalidInputError(f"--work must be > 0 (work units), not {work:g}" if options else "work must be > 0")
    if budget_seconds is not None and not budget_seconds > 0:
        raise InvalidInputError("--budget-seconds must be > 0" if options else "budget_seconds must be > 0")


#: Hint added to a refused command-line tolerance list.
COMMA_HINT = "commas separate tolerances and the decimal point is '.'"


def _decimal_comma_guess(items: list[str]) -> str | None:
    """``"0,25"`` -> ``"0.25"``: what a list of two digit runs meant if the comma was a decimal comma."""
    if len(items) == 2 and all(item.isdigit() for item in items) and int(items[0]) == 0:
        return f"{items[0]}.{items[1]}"  # only a guess in (0, 1): "1,5" -> 1.5 would be refused too
    return None


def parse_eps_list(text: str, option: str = "--eps") -> list[str]:
    """A command-line tolerance list (``option`` names it in messages): exact decimal strings
    sorted by value; invalid input (exit 2) with a message that says what to type instead.

    * an item that is not a positive decimal (``--eps 0,25``: the item ``0``) -> the one-line
      reason, ``commas separate tolerances and the decimal point is '.'`` and, for two digit
      runs, ``did you mean 0.25?``;
    * a tolerance >= 1 (``--eps 1,5``) is refused: every softmax attention matrix has rows that
      sum to 1, so ``||A|| = 1`` and ``r_eps(A) = 0`` for every eps >= 1 (``B = 0`` is close
      enough), a claim with nothing to compute.  (The Python API accepts such tolerances, and
      the kernel decides them with its trivial ends: for a ``probabilities`` operator whose
      rows sum to more than 1 they can be meaningful.)
    * a tolerance listed twice is refused.
    """
    items = [part.strip() for part in str(text).split(",")]
    guess = _decimal_comma_guess(items)
    hint = f"{COMMA_HINT}" + (f": did you mean {option} {guess}?" if guess else "")
    try:
        values = parse_eps(text)
    except InvalidToleranceError as exc:
        if "listed twice" in str(exc):
            raise InvalidInputError(f"{option} lists a tolerance twice: {text}") from None
        extra = f" ({hint})" if "," in str(text) else ""
        raise InvalidToleranceError(f"{option}: {exc}{extra}") from None
    large = [item for item in values if parse_tolerance(item) >= 1]
    if large:
        raise InvalidToleranceError(
            f"{option}: tolerance {', '.join(large)} is >= 1, where r_eps(A) = 0 for every softmax attention "
            f"matrix (its rows sum to 1, so B = 0 is within eps): tolerances are in (0, 1)"
            + (f"; {hint}" if "," in str(text) else ""))
    return values


def parse_one_eps(text: str, option: str = "--eps") -> str:
    """A command-line option that takes ONE tolerance: the exact decimal string, else invalid
    input that says what was wrong (``--eps 0,25``: the decimal point is '.', did you mean
    0.25?; a tolerance >= 1: see :func:`parse_eps_list`)."""
    if "," in str(text):
        guess = _decimal_comma_guess([part.strip() for part in str(text).split(",")])
        raise InvalidToleranceError(f"{option} takes one tolerance, got {text!r}: the decimal point is '.'"
                                    + (f" (did you mean {option} {guess}?)" if guess else ""))
    (value,) = parse_eps_list(text, option)
    return value
