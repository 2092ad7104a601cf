"""General key sides by LP, up to :attr:`~..base.LowerBase.general_max_k` (UNTRUSTED).

At each target k, for each query selection of :attr:`~..base.LowerBase.general` (pivoted QR,
complete pivoting, the queries the best signed pair leans on), the LP-optimal general key side
alternated with the exact query side (:func:`..general.alternate`); pairs named
``general_<selection>``.  It runs before iterated local search once one of its pairs has beaten
the signed groups on this operator, else after it; after
:attr:`~..base.LowerBase.general_patience` pairs in a row that do not, it is given up.
"""

from __future__ import annotations

from functools import partial
from dataclasses import dataclass

import numpy as np

from ...work import Until
from ..base import LowerBase
from ..general import alternate
from ..starts import selection
from ..units import Unit


@dataclass
class Tally:
    """Pairs in a row not better than the signed groups at their k, and pairs better."""

    misses: int = 0
    hits: int = 0


def won_unit(s: LowerBase, k: int) -> Unit | None:
    """:func:`pair_unit`, once the family has won on this operator (before local search)."""
    return pair_unit(s, k) if k <= s.general_max_k and s.record("general", Tally).hits > 0 else None


def pair_unit(s: LowerBase, k: int) -> Unit | None:
    """The next selection's pair at k, while the family is still hopeful on this operator."""
    if k > s.general_max_k or s.record("general", Tally).misses >= s.general_patience:
        return None
    for name in s.general:
        if ("general", name, k) not in s.done:
            return Unit(("general", name, k), partial(general_pair, s, name, k))
    return None


def general_pair(s: LowerBase, name: str, k: int, until: Until) -> None:
    """Selection ``name`` at k, its LP-optimal general key side alternated with the exact
    query side (:func:`.general.alternate`), offered."""
    rows = s.selection_rows(name, k)
    if rows is None:
        return None
    found = alternate(s.A, selection(rows, s.A.shape[0]), s.key_lp, s.lp, until)
    if until.reached():  # cut off: the unit is redone (or dropped), and counts for nothing
        return None
    count_pair(s, s.record("general", Tally), k, found, f"general_{name}")
    return None


def count_pair(s: LowerBase, tally: Tally, k: int, found: tuple[np.ndarray, np.ndarray, float] | None,
               method: str) -> None:
    """A general pair ``found`` at k (None: none found) as ``method``: offered and counted a hit
    when it beats the signed groups there, else counted a miss."""
    signed = s.states.get(k)
    if found is not None and (signed is None or found[2] > signed.t):
        tally.misses = 0
        tally.hits += 1
        s.offer_pair(k, *found, method)
    else:
        tally.misses += 1
