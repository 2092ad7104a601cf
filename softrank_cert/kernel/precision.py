"""Working precision of Arb (TRUSTED).

python-flint's precision is process-global; :func:`working_precision` sets it for the
duration of a block and restores it afterwards.  Precision affects only the *width* of
the balls, never their correctness: every Arb operation returns a ball that contains the
exact result, at any precision (Arb's containment guarantee; ``proofs/precision-retry.md``,
Lemma P1).  The schedule of precisions a check tries is :func:`.verdict.precision_schedule`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from flint import ctx


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    saved = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = saved
