"""Signed key groups from the starts (UNTRUSTED): the leap, the all-keys group, the starts at k.

* ``leap`` (once per tolerance, first of all): the largest k where a cheap start already works --
  the starts of :attr:`~..base.LowerBase.leap_starts` with their exact LP ``X`` and no polish
  (:func:`probe`, each offered at once), galloping up from the target (steps 1, 2, 4, ...), then
  bisection; it resumes from its cached probes when the deadline cuts it off;
* ``ones`` (k = 1, while growing to 2): every key in the one group;
* ``start`` (at every target k): each start of :attr:`~..base.LowerBase.starts`, polished --
  complete-pivoting singletons (``pivot``), queries of pivoted QR with keys labelled by the query
  that weights them most relative to their mean (``dev_qr``) or through the pseudo-inverse of
  the chosen rows (``pinv_qr``) (:mod:`..starts`).
"""

from __future__ import annotations

from functools import partial
import numpy as np

from ....util.dense import threshold
from ...work import Until
from ..base import MARGIN, LowerBase
from ..lp import feasible, signed_y
from ..starts import dev_labels, pinv_labels, pivot_labels, selection
from ..units import Candidate, Unit


def leap_unit(s: LowerBase, k: int) -> Unit | None:
    """The leap of the first tolerance without one (whatever the target)."""
    for eps in s.eps_values:
        if ("leap", eps) not in s.done:
            return Unit(("leap", eps), partial(leap, s, eps), resumes=True)
    return None


def ones_unit(s: LowerBase, k: int) -> Unit | None:
    """The all-keys group at k = 1, when the target is 2 and nothing is known at 1."""
    if k == 2 and s.states.get(1) is None and ("ones",) not in s.done:
        return Unit(("ones",), lambda until: s.polish_labels(1, ones(s), "ones", until))
    return None


def start_unit(s: LowerBase, k: int) -> Unit | None:
    """The next start not yet polished at k."""
    for name in s.starts:
        if ("start", name, k) not in s.done:
            return Unit(("start", name, k), partial(polish_start, s, name, k))
    return None


def ones(s: LowerBase) -> tuple[np.ndarray, np.ndarray]:
    """k = 1: every key in the one group (``Y`` = all-ones column)."""
    n = s.A.shape[1]
    return np.zeros(n, dtype=int), np.ones(n)


def start(s: LowerBase, name: str, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, signs and a hint X (k x m) of start construction ``name`` at k."""
    m, n = s.A.shape
    if name == "pivot":
        rows, cols = s.pivots()
        return (*pivot_labels(cols[:k], n), selection(rows[:k], m))
    if name == "dev_qr":
        return (*dev_labels(s.A, s.queries()[:k]), selection(s.queries()[:k], m))
    if name == "pinv_qr":
        return (*pinv_labels(s.A, s.queries()[:k]), selection(s.queries()[:k], m))
    raise ValueError(f"unknown start {name!r}")


def polish_start(s: LowerBase, name: str, k: int, until: Until) -> Candidate | None:
    """Start ``name`` at k, polished."""
    lab, sign, hint = start(s, name, k)
    return s.polish_labels(k, (lab, sign), name, until, hint)


def probe(s: LowerBase, name: str, k: int, until: Until) -> float:
    """Threshold of start ``name`` at k with its exact LP ``X`` but no polish (offered at
    once; 0 when the LP fails; each (name, k) solved once unless cut off by ``until``)."""
    probes: dict[tuple[str, int], float] = s.record("signed", dict)
    if (name, k) not in probes:
        lab, sign, hint = start(s, name, k)
        Y = signed_y(lab, sign, k)
        s.charge_products(k, until)
        X = s.lp.solve(s.A @ Y, until, feasible(s.A, hint, Y))
        if X is None:
            return 0.0
        s.offer(k, lab, sign, X, name)
        probes[(name, k)] = threshold(s.A, X, Y)
    return probes[(name, k)]


def leap(s: LowerBase, eps: float, until: Until) -> None:
    """Largest k where a cheap start already works at eps: probes of :attr:`leap_starts`
    galloping up from the target (steps 1, 2, 4, ...), then bisection."""
    probes: dict[tuple[str, int], float] = s.record("signed", dict)

    def ok(k: int) -> bool | None:
        if max((probe(s, name, k, until) for name in s.leap_starts), default=0.0) > eps * (1 + MARGIN):
            return True
        return False if all((name, k) in probes for name in s.leap_starts) else None

    s.gallop("leap", eps, ok, until)
