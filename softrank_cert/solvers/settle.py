"""Settling float64 candidates with the trusted kernel: the first VERIFIED one wins.

Every end that the driver, the rank profile and the budget study write goes through
:func:`first_verified`: candidates are offered to the kernel in the caller's order of
preference, each at the tolerance the caller names, and the first one the kernel VERIFIES is
returned as a sealed end (:mod:`softrank_cert.certio.verified`, the only kind the certificate
writer accepts).  REJECTED and INCONCLUSIVE ones are passed over, so a solver bug can cost
tightness, never soundness.  A candidate is anything with the fields of a lower end (``k``,
``X``, ``Y``, ``method``, ``threshold``; ``X`` None: the trivial ``k <= 1``) or of an upper end
(``r``, ``U``, ``W``, ``method``, ``error``; ``U`` None: the trivial ``r = 0`` or ``r = p``).
"""

from __future__ import annotations

from typing import Any, TypeVar
from collections.abc import Iterable

from ..certio.verified import VerifiedLower, VerifiedUpper, verify_lower_end, verify_upper_end
from ..kernel import Operator
from ..util.memory import CheckPlan

End = TypeVar("End")


def seal(op: Operator, eps: str, end: Any, plan: CheckPlan | None = None) -> VerifiedLower | VerifiedUpper | None:
    """``end`` (a lower or an upper candidate, see the module docstring) sealed at ``eps`` when the
    kernel VERIFIES it (within the memory ``plan``, None: the kernel's defaults), else None."""
    if hasattr(end, "k"):
        return verify_lower_end(op, eps, end.k, end.X, end.Y, end.method, threshold=end.threshold, plan=plan)
    return verify_upper_end(op, eps, end.r, end.U, end.W, end.method, error=end.error, plan=plan)


def first_verified(op: Operator, attempts: Iterable[tuple[str, End]], plan: CheckPlan | None = None
                   ) -> tuple[str, End, Any] | None:
    """The first ``(eps, end)`` of ``attempts`` that the kernel VERIFIES (within ``plan``, as for
    :func:`seal`), with its sealed end; None when none does.  ``attempts`` may be lazy: nothing
    after the first VERIFIED one is built."""
    for eps, end in attempts:
        sealed = seal(op, eps, end, plan)
        if sealed is not None:
            return eps, end, sealed
    return None
