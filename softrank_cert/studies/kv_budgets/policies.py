"""Named KV-cache eviction policies as priority orders over key slots (UNTRUSTED; float64 only).

A policy here keeps, at budget ``s``, the first ``s`` keys of one **priority order** of the
operator's ``N`` key positions, so its kept sets are nested (``S_s`` is a subset of
``S_{s+1}``) and its exact worst-case error ``max_i 2 (1 - sigma_i)`` is non-increasing in
``s`` (``proofs/kv-budgets.md``, Theorem KV2).  That is what lets a float64 search propose the
smallest budget and the kernel decide it (:mod:`.certify`).

* :data:`STREAMING_LLM`: attention sinks plus a recent window (StreamingLLM): the first
  ``sinks`` positions (default 4), then the newest key, the one before it, and so on;
* :data:`H2O`: accumulated-attention heavy hitters with a recent window (H2O): the column mass
  of ``A`` summed over the ``m`` queries ranks the heavy hitters; at budget ``s`` the order has
  taken ``floor(recent_share * s)`` recent keys (the newest not yet kept) and ``s - floor(...)``
  heavy hitters (the largest mass not yet kept), chosen one step at a time (default share 0.5,
  H2O's equal heavy and recent budgets);
* :data:`KEEP`: a kept set the user gives, as a list of key positions in priority order (the
  budget ``s`` keeps its first ``s``).

:func:`off_mass` gives every row's float64 mass outside the kept set for every budget at once
(the proposal the kernel then checks); the errors are ``2 * off_mass``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InvalidInputError

STREAMING_LLM = "streaming-llm"
H2O = "h2o"
KEEP = "keep"
#: Every policy name, in the order of the report.
POLICY_NAMES = (STREAMING_LLM, H2O, KEEP)
#: StreamingLLM's attention sinks (the paper's 4 initial tokens).
DEFAULT_SINKS = 4
#: H2O's share of the budget for the recent window (the paper's equal heavy / recent budgets).
DEFAULT_RECENT_SHARE = 0.5


@dataclass(frozen=True)
class Policy:
    """A named eviction policy and its parameters (``sinks`` for StreamingLLM, ``recent_share``
    for H2O, ``keep`` -- key positions in priority order -- for a user's kept set)."""

    name: str
    sinks: int = DEFAULT_SINKS
    recent_share: float = DEFAULT_RECENT_SHARE
    keep: tuple[int, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.name not in POLICY_NAMES:
            raise InvalidInputError(f"unknown policy {self.name!r}: choose from {', '.join(POLICY_NAMES)}")
        if self.sinks < 0:
            raise InvalidInputError(f"the number of attention sinks must be >= 0, got {self.sinks}")
        if not 0 <= self.recent_share <= 1:
            raise InvalidInputError(f"H2O's recent share must be in [0, 1], got {self.recent_share}")
        if self.name == KEEP and not self.keep:
            raise InvalidInputError("the keep policy needs the kept key positions (--keep FILE)")

    def parameters(self) -> dict[str, Any]:
        """The parameters that define the kept sets (recorded in reports and certificates; the share
        as its decimal string)."""
        if self.name == STREAMING_LLM:
            return {"sinks": self.sinks}
        if self.name == H2O:
            return {"recent_share": repr(float(self.recent_share))}  # a string: certificates hold no floats
        return {"keep": list(self.keep)}


def streaming_order(n: int, sinks: int = DEFAULT_SINKS) -> np.ndarray:
    """StreamingLLM's priority order over ``n`` keys: positions ``0 .. sinks-1``, then ``n-1``,
    ``n-2``, ... (the recent window grows backwards)."""
    first = list(range(min(sinks, n)))
    return np.array(first + [j for j in range(n - 1, len(first) - 1, -1)], dtype=np.int64)


def h2o_order(A: np.ndarray, recent_share: float = DEFAULT_RECENT_SHARE) -> np.ndarray:
    """H2O's priority order over the columns of ``A``: step ``t`` (1-based) takes the newest key not
    yet kept when fewer than ``floor(recent_share * t)`` recent keys were taken, else the key of
    largest accumulated attention (column sum over the queries; ties: the lower position) not yet
    kept; when one kind is used up the other continues."""
    n = A.shape[1]
    mass = np.asarray(A, dtype=np.float64).sum(axis=0)
    heavy = iter(np.lexsort((np.arange(n), -mass)).tolist())
    recent = iter(range(n - 1, -1, -1))
    taken: list[int] = []
    seen: set[int] = set()
    recent_count = 0

    def next_of(source: Any) -> int | None:
        for j in source:
            if j not in seen:
                return int(j)
        return None

    for t in range(1, n + 1):
        want_recent = recent_count < int(np.floor(recent_share * t))
        j = next_of(recent if want_recent else heavy)
        if j is None:
            j = next_of(heavy if want_recent else recent)
        elif want_recent:
            recent_count += 1
        assert j is not None  # t <= n keys: one is always left
        taken.append(j)
        seen.add(j)
    return np.array(taken, dtype=np.int64)


def check_keep(keep: list[int] | tuple[int, ...], n: int, where: str) -> tuple[int, ...]:
    """A user's kept positions checked against ``n`` keys: integers in ``[0, n)``, none twice, at
    least one; else one line (exit 2) naming ``where``."""
    if not keep:
        raise InvalidInputError(f"{where}: the kept set is empty")
    for j in keep:
        if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < n:
            raise InvalidInputError(f"{where}: kept position {j!r} is not an integer in [0, {n})")
    if len(set(keep)) != len(keep):
        raise InvalidInputError(f"{where}: a kept position is listed twice")
    return tuple(keep)


def priority_order(policy: Policy, A: np.ndarray) -> np.ndarray:
    """The policy's priority order for the float64 attention matrix ``A`` (m x N); the ``keep``
    policy's order is its own list (possibly shorter than N)."""
    n = A.shape[1]
    if policy.name == STREAMING_LLM:
        return streaming_order(n, policy.sinks)
    if policy.name == H2O:
        return h2o_order(A, policy.recent_share)
    return np.array(check_keep(policy.keep, n, f"--keep (for {n} keys)"), dtype=np.int64)


def off_mass(A: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``tau[s - 1, i]``: row ``i``'s float64 mass outside the first ``s`` keys of ``order``, for
    ``s = 1 .. len(order)`` (summed from the evicted side, so that a small remainder keeps its
    digits).  The policy's error at budget ``s`` is ``2 * max_i tau[s - 1, i]`` when rows sum to 1."""
    A = np.asarray(A, dtype=np.float64)
    kept = A[:, order]
    outside = A.sum(axis=1) - kept.sum(axis=1)  # keys the order never takes (keep policy)
    tail = np.cumsum(kept[:, ::-1], axis=1)[:, ::-1]  # tail[:, t] = sum of kept[:, t:]
    tau = np.empty((len(order), A.shape[0]))
    tau[:-1] = tail[:, 1:].T
    tau[-1] = 0.0
    return np.maximum(tau + outside, 0.0)


def policy_errors(A: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The float64 worst-case error ``max_i 2 (1 - sigma_i)`` at every budget ``s = 1 ..
    len(order)`` (index ``s - 1``); infinity where some row keeps no mass (``sigma_i = 0``: the
    renormalised policy is undefined there)."""
    A = np.asarray(A, dtype=np.float64)
    kept_mass = np.cumsum(A[:, order], axis=1)  # sigma at every budget, rows x budgets
    errors = 2.0 * off_mass(A, order).max(axis=1)
    errors[(kept_mass <= 0).any(axis=0)] = np.inf
    return errors


__all__ = ["DEFAULT_RECENT_SHARE", "DEFAULT_SINKS", "H2O", "KEEP", "POLICY_NAMES", "Policy", "STREAMING_LLM",
           "check_keep", "h2o_order", "off_mass", "policy_errors", "priority_order", "streaming_order"]
