"""General key sides beyond :attr:`~..base.LowerBase.general_max_k`: a smoothed Y-step (UNTRUSTED).

Above ``general_max_k`` the LP of :mod:`.general_lp` is too large (k^2 equality rows); there the
key side of a query selection is the smoothed L-BFGS solution of ``A_I Y = I``
(:func:`..smooth_key.selection_pair`); pairs named ``general_smooth_<selection>``.  The family
gallops (like the signed leap) from each new target per tolerance with the pivoted-QR selection
at :attr:`~..base.LowerBase.smooth_probe_evaluations` a stage, each probe offered at once, and
runs its per-k units (each selection of :attr:`~..base.LowerBase.smooth` once, at
:attr:`~..base.LowerBase.smooth_evaluations` a stage) only where that probe came within
:data:`SMOOTH_REACH` of a tolerance, with the patience of :mod:`.general_lp`.
"""

from __future__ import annotations

from functools import partial
from dataclasses import dataclass, field

from ...work import Until
from ..base import MARGIN, LowerBase
from ..smooth_key import selection_pair
from ..units import Unit
from . import general_lp

#: The large-k family's units at a target k run only where its gallop probe there came within
#: this factor of the tolerance (more evaluations and other selections gained 1-5 %, measured).
SMOOTH_REACH = 1.1


@dataclass
class Tally(general_lp.Tally):
    """The tally of :mod:`.general_lp`, and the threshold of the gallop probe per k."""

    probes: dict[int, float] = field(default_factory=dict)


def leap_unit(s: LowerBase, k: int) -> Unit | None:
    """The gallop from target k of the first tolerance whose target it is (above general_max_k)."""
    if k > s.general_max_k and s.smooth:  # the large-k family gallops from each new target
        for eps in s.eps_values:
            if s.target(eps) == k and ("smooth_leap", eps, k) not in s.done:
                return Unit(("smooth_leap", eps, k), partial(smooth_leap, s, eps), resumes=True)
    return None


def won_unit(s: LowerBase, k: int) -> Unit | None:
    """:func:`pair_unit`, once the family has won on this operator (before local search)."""
    return pair_unit(s, k) if k > s.general_max_k and s.record("smooth", Tally).hits > 0 else None


def pair_unit(s: LowerBase, k: int) -> Unit | None:
    """The next selection's pair at k, where the probe came near and the family is still hopeful."""
    if k <= s.general_max_k:
        return None
    tally = s.record("smooth", Tally)
    near = any(s.target(eps) == k and tally.probes.get(k, 0.0) * SMOOTH_REACH > eps for eps in s.eps_values)
    if tally.misses >= s.general_patience or not near:
        return None
    for name in s.smooth:
        if ("smooth", name, k) not in s.done:
            return Unit(("smooth", name, k), partial(smooth_pair, s, name, k))
    return None


def smooth_probe(s: LowerBase, k: int, until: Until) -> float:
    """Threshold of the pivoted-QR selection's smoothed pair at k (offered at once; each k
    solved once unless cut off by ``until``)."""
    probes = s.record("smooth", Tally).probes
    if k not in probes:
        found = selection_pair(s.A, s.queries()[:k], until, s.smooth_probe_evaluations, s.smooth_charges, s.ops)
        if found is None:
            return 0.0
        s.offer_pair(k, *found, "general_smooth_qr")
        probes[k] = found[2]
    return probes[k]


def smooth_leap(s: LowerBase, eps: float, until: Until) -> None:
    """Largest k where the smoothed pivoted-QR pair works at eps: the gallop of the signed leap
    with :func:`smooth_probe`."""
    probes = s.record("smooth", Tally).probes

    def ok(k: int) -> bool | None:
        if smooth_probe(s, k, until) > eps * (1 + MARGIN):
            return True
        return False if k in probes else None

    s.gallop("smooth_leap", eps, ok, until)


def smooth_pair(s: LowerBase, name: str, k: int, until: Until) -> None:
    """Selection ``name`` at k with its smoothed key side (:attr:`smooth_evaluations`), offered."""
    rows = s.selection_rows(name, k)
    if rows is None:
        return None
    found = selection_pair(s.A, rows, until, s.smooth_evaluations, s.smooth_charges, s.ops)
    if until.reached():  # cut off: the unit is redone (or dropped), and counts for nothing
        return None
    general_lp.count_pair(s, s.record("smooth", Tally), k, found, f"general_smooth_{name}")
    return None
