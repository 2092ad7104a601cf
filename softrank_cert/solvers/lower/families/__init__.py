"""The lower families (UNTRUSTED), each a module of proposers ``(search, k) -> Unit | None``
(:mod:`..units`), and :data:`PRIORITY`, the order in which the search asks them at a target k.

* :mod:`.signed` -- signed key groups from the starts: the leap per tolerance, the all-keys
  group, each start at k;
* :mod:`.growth` -- growth ``k -> k+1`` from the best labels below;
* :mod:`.local` -- iterated local search at the first failing k;
* :mod:`.general_lp` -- general key sides by LP (k <= ``general_max_k``);
* :mod:`.general_smooth` -- general key sides by a smoothed Y-step (k > ``general_max_k``).

A new family is a module here and one entry (or a few) in :data:`PRIORITY`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import LowerBase
from ..units import Unit
from . import general_lp, general_smooth, growth, local, signed

Proposer = Callable[[LowerBase, int], Unit | None]

#: At a target k the search runs the first unit one of these gives, in this order.  The general
#: families come twice: before local search once they have won on the operator, else after it.
PRIORITY: tuple[Proposer, ...] = (
    signed.leap_unit,
    general_smooth.leap_unit,
    signed.ones_unit,
    growth.grow_unit,
    signed.start_unit,
    general_lp.won_unit,
    general_smooth.won_unit,
    local.ils_unit,
    general_lp.pair_unit,
    general_smooth.pair_unit,
)
