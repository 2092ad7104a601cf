"""Settling float64 candidates with the trusted kernel: the first VERIFIED one wins.

Every end that the driver, the rank profile and the budget study write goes through
:func:`first_verified`: candidates are offered to the kernel in the caller's order of
preference, each at the tolerance the caller names, and the first one the kernel VERIFIES is
returned with its verdict.  REJECTED and INCONCLUSIVE ones are passed over, so a solver bug can
cost tightness, never soundness.  A candidate is anything with the fields of a lower end
(``k``, ``X``, ``Y``, ``origin``; ``X`` None: the trivial ``k <= 1``) or of an upper end (``r``,
``U``, ``W``, ``origin``; ``U`` None: the trivial ``r = 0`` or ``r = p``).
"""

from __future__ import annotations

from typing import Any, TypeVar
from collections.abc import Iterable

from ..kernel import Operator, Status, Verdict, verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper

End = TypeVar("End")


def kernel_verdict(op: Operator, eps: str, end: Any) -> Verdict:
    """The kernel's verdict on ``end`` (a lower or an upper end, see the module docstring) at ``eps``."""
    if hasattr(end, "k"):
        if end.X is None:
            return verify_trivial_lower(op, eps, end.k)
        return verify_lower(op, eps, end.k, end.X, end.Y, method=end.origin)
    if end.U is None:
        return verify_trivial_upper(op, eps, end.r)
    return verify_upper(op, eps, end.r, end.U, end.W, method=end.origin)


def first_verified(op: Operator, attempts: Iterable[tuple[str, End]]) -> tuple[str, End, Verdict] | None:
    """The first ``(eps, end)`` of ``attempts`` that the kernel VERIFIES, with its verdict; None
    when none does.  ``attempts`` may be lazy: nothing after the first VERIFIED one is built."""
    for eps, end in attempts:
        verdict = kernel_verdict(op, eps, end)
        if verdict.status is Status.VERIFIED:
            return eps, end, verdict
    return None
