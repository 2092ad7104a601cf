"""The smallest kernel-VERIFIED budget of one policy at one tolerance (UNTRUSTED search; the kernel decides).

:func:`certify_budget` proposes, in float64, the smallest budget ``s`` whose policy error
``max_i 2 (1 - sigma_i)`` is ``<= eps`` (:mod:`.policies`: the kept sets are nested, so the
errors are non-increasing in ``s``), then hands the policy's witness (:mod:`.witnesses`) to the
trusted kernel through the sealing entry point every certificate end goes through
(:func:`~softrank_cert.certio.verified.verify_upper_end`).  Only a sealed (VERIFIED) witness
gives a budget; a proposal the kernel does not verify moves the search up by one, a budget
below it that the kernel also verifies moves it down (a float64 rounding either way), each at
most :data:`MAX_STEPS` times.

A certified budget ``s`` is labelled **minimal** -- the policy's minimum (as applied in float64,
when by rejection: ``proofs/kv-budgets.md``) -- when either
the head's verified lower end is ``s`` (no common-set compression with fewer slots exists,
``proofs/kv-budgets.md`` Theorem KV1), or the kernel REJECTS the policy's witness at ``s - 1``
(:func:`~softrank_cert.kernel.verify_upper`: its error is proved ``> eps``; the kept sets are
nested, so no smaller budget of the policy does better, Theorem KV2).  Otherwise the budget is
an upper bound on the policy's minimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...certio.verified import VerifiedUpper, verify_upper_end
from ...kernel import Operator, Status, verify_upper
from .witnesses import construction, policy_witness

#: The most extra kernel checks up (proposal not verified) or down (one below verified) per tolerance.
MAX_STEPS = 4
#: Why a certified budget is minimal: the head's lower end equals it; the kernel rejected ``s - 1``.
BY_LOWER_END = "lower-end"
BY_REJECTION = "rejected-below"


@dataclass(frozen=True)
class BudgetResult:
    """One policy at one tolerance: ``budget`` (None: no budget was VERIFIED within the steps),
    its sealed witness, whether it is ``minimal`` and why (``BY_LOWER_END`` / ``BY_REJECTION``),
    the float64 ``estimate`` of its error, and the ``checks`` the kernel ran."""

    eps: str
    budget: int | None
    sealed: VerifiedUpper | None
    minimal: bool
    why_minimal: str | None
    estimate: float | None
    checks: int


def proposal(errors: np.ndarray, eps: float) -> int:
    """The smallest budget (1-based) whose float64 error is ``<= eps``; the largest when none is."""
    within = np.flatnonzero(errors <= eps)
    return int(within[0]) + 1 if len(within) else len(errors)


class _Checker:
    """The kernel checks of one policy at one tolerance, counted."""

    def __init__(self, op: Operator, A: np.ndarray, order: np.ndarray, errors: np.ndarray, eps: str,
                 policy_name: str) -> None:
        self.op, self.A, self.order, self.errors, self.eps = op, A, order, errors, eps
        self.method = construction(policy_name)
        self.checks = 0

    def seal(self, s: int) -> VerifiedUpper | None:
        witness = policy_witness(self.A, self.order[:s])
        if witness is None:
            return None
        self.checks += 1
        return verify_upper_end(self.op, self.eps, s, *witness, self.method, error=float(self.errors[s - 1]))

    def verdict(self, s: int) -> Status | None:
        """The kernel's status for the witness at ``s`` (None: no witness, a row keeps no mass)."""
        witness = policy_witness(self.A, self.order[:s])
        if witness is None:
            return None
        self.checks += 1
        return verify_upper(self.op, self.eps, s, *witness, method=self.method).status


def certify_budget(op: Operator, A: np.ndarray, order: np.ndarray, errors: np.ndarray, eps: str,
                   policy_name: str, lower_k: int | None) -> BudgetResult:
    """The smallest budget of the policy (priority ``order``, float64 ``errors`` from
    :func:`~.policies.policy_errors`) that the kernel VERIFIES at ``eps`` (module docstring),
    with ``lower_k`` the head's verified lower end at ``eps`` (None: none known)."""
    checker = _Checker(op, A, order, errors, eps, policy_name)
    top = len(order)
    s = proposal(errors, float(eps))
    sealed = checker.seal(s)
    for _ in range(MAX_STEPS):
        if sealed is not None or s >= top:
            break
        s += 1
        sealed = checker.seal(s)
    if sealed is None:
        return BudgetResult(eps, None, None, False, None, None, checker.checks)
    why: str | None = None
    for _ in range(MAX_STEPS + 1):
        if lower_k is not None and s <= lower_k:
            why = BY_LOWER_END
            break
        below = checker.verdict(s - 1) if s > 1 else None
        if below is Status.REJECTED:
            why = BY_REJECTION
        if below is not Status.VERIFIED:
            break
        resealed = checker.seal(s - 1)
        if resealed is None:  # the kernel decided otherwise the second time: keep s, not proved minimal
            break
        s, sealed = s - 1, resealed
    return BudgetResult(eps, s, sealed, why is not None, why, float(errors[s - 1]), checker.checks)


__all__ = ["BY_LOWER_END", "BY_REJECTION", "BudgetResult", "MAX_STEPS", "certify_budget", "proposal"]
