"""Growth ``k -> k+1`` of signed key groups (UNTRUSTED).

The best labels one k below the target (once per improvement there) plus one new singleton key
group, the key taken where the Schur complement ``A - A Y (X A Y)^{-1} X A`` promises the best
new pivot (:func:`..starts.growth_pivot`), polished.  Above
:attr:`~..base.LowerBase.general_max_k`, below a general pair, the signed groups grow on from
their largest state while it still clears a tolerance whose target is k.
"""

from __future__ import annotations

import numpy as np

from ...work import Until
from ..base import MARGIN, LowerBase
from ..lp import normalised
from ..starts import growth_pivot, selection
from ..units import Candidate, State, Unit


def grow_unit(s: LowerBase, k: int) -> Unit | None:
    """Growth to k from the state it grows from, once per version of that state."""
    below = s.states.get(k - 1)
    if below is None and k > s.general_max_k:  # a general pair above the signed groups:
        below = chain_top(s, k)  # they grow on while they clear the tolerance
    if s.grow and below is not None and ("grow", below.k + 1, below.version) not in s.done:
        src = below
        return Unit(("grow", below.k + 1, below.version), lambda until: grow_from(s, src, until))
    return None


def chain_top(s: LowerBase, k: int) -> State | None:
    """The signed state of largest k below ``k`` if it clears a tolerance whose target is k."""
    top = max((st for st in s.states.values() if st.k < k), key=lambda st: st.k, default=None)
    clears = top is not None and any(s.target(eps) == k and top.t > eps * (1 + MARGIN) for eps in s.eps_values)
    return top if clears else None


def grow_from(s: LowerBase, src: State, until: Until) -> Candidate | None:
    """Labels of ``src`` plus one singleton group on the growth pivot, polished at k+1."""
    s.charge_products(3 * src.k, until)
    i, j = growth_pivot(s.A, src.X, src.Y)
    lab, sign = src.lab.copy(), src.sign.copy()
    lab[j], sign[j] = src.k, 1.0
    hint = np.vstack([normalised(src.X), selection(np.array([i]), s.A.shape[0])])
    return s.polish_labels(src.k + 1, (lab, sign), "grow", until, hint)
