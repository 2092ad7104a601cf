"""Working precision of Arb (TRUSTED).

python-flint's precision is process-global; :func:`working_precision` sets it for the
duration of a block and restores it afterwards.  Precision affects only the *width* of
the balls, never their correctness: every Arb operation returns a ball that contains the
exact result, at any precision (Arb's containment guarantee).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from flint import ctx

from ..errors import InvalidInputError

START_PREC = 64
DEFAULT_MAX_PREC = 512
LIMIT_MAX_PREC = 8192


def precision_schedule(max_prec: int) -> list[int]:
    """64, 128, 256, ... up to and including ``max_prec`` (which must lie in [64, 8192])."""
    if not isinstance(max_prec, int) or not START_PREC <= max_prec <= LIMIT_MAX_PREC:
        raise InvalidInputError(f"--max-prec must be an integer in [{START_PREC}, {LIMIT_MAX_PREC}] bits")
    steps, prec = [], START_PREC
    while prec < max_prec:
        steps.append(prec)
        prec *= 2
    steps.append(max_prec)
    return steps


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    saved = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = saved
