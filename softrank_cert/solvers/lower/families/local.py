"""Iterated local search at the first failing k (UNTRUSTED).

After the starts (and the general pairs, once they have won on this operator), steps at the
best signed state of k, in turn from :attr:`~..base.LowerBase.ils_moves`: re-draw a
:data:`PERTURB` share of the labels (``ils``), or drop one group and grow a new one in its place
(``regroup``); polish; keep improvements.  A k is given up after :data:`ILS_PATIENCE` steps in a
row without one.  A step's random draws are seeded by (seed, k, step), so that a redone step
repeats itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...work import Until
from ..base import LowerBase
from ..lp import normalised, signed_y
from ..starts import growth_pivot, selection
from ..units import Candidate, State, Unit

#: Fraction of the keys re-labelled at random by one iterated-local-search step.
PERTURB = 0.07
#: Iterated-local-search steps without improvement after which a k is given up.
ILS_PATIENCE = 40


@dataclass
class Steps:
    """Finished steps per k, and steps in a row without improvement per k."""

    done: dict[int, int] = field(default_factory=dict)
    failures: dict[int, int] = field(default_factory=dict)

    def count(self, k: int, improved: bool) -> None:
        self.done[k] = self.done.get(k, 0) + 1
        self.failures[k] = 0 if improved else self.failures.get(k, 0) + 1


def ils_unit(s: LowerBase, k: int) -> Unit | None:
    """The next step at k while the state there has not failed :data:`ILS_PATIENCE` in a row."""
    steps = s.record("ils", Steps)
    st = s.states.get(k)
    if s.ils and st is not None and steps.failures.get(k, 0) < ILS_PATIENCE:
        n = steps.done.get(k, 0)
        return Unit(("ils", k, n), lambda until: ils_step(s, st, n, until),
                    after=lambda improved: steps.count(k, improved))
    return None


def ils_step(s: LowerBase, st: State, n: int, until: Until) -> Candidate | None:
    """ILS step number n at ``st.k``: the n-th of :attr:`ils_moves` in turn, random draws
    seeded by (seed, k, n) so that a redone step repeats itself."""
    rng = np.random.default_rng([s.seed, st.k, n])
    if s.ils_moves[n % len(s.ils_moves)] == "regroup" and st.k > 1:
        return regroup(s, st, n < len(s.ils_moves), rng, until)
    return s.polish_labels(st.k, perturb(s, st, rng), "ils", until, st.X)


def perturb(s: LowerBase, st: State, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Copy of the labels of ``st`` with a random :data:`PERTURB` share of keys re-drawn
    (group or none, and sign)."""
    lab, sign = st.lab.copy(), st.sign.copy()
    pick = rng.choice(len(lab), max(1, int(round(PERTURB * len(lab)))), replace=False)
    lab[pick] = rng.integers(-1, st.k, len(pick))
    if s.signed:
        sign[pick] = rng.choice([-1.0, 1.0], len(pick))
    return lab, sign


def regroup(s: LowerBase, st: State, worst: bool, rng: np.random.Generator, until: Until) -> Candidate | None:
    """Drop one group of ``st`` and grow a new one in its place: the worst group (the row
    of X with the largest l1 norm) if ``worst``, else a random one."""
    k = st.k
    a = int(np.abs(st.X).sum(axis=1).argmax()) if worst else int(rng.integers(k))
    lab, sign = st.lab.copy(), st.sign.copy()
    lab[lab == a] = -1
    lab[lab > a] -= 1
    X = np.delete(st.X, a, axis=0)
    s.charge_products(3 * k, until)
    i, j = growth_pivot(s.A, X, signed_y(lab, sign, k - 1))
    lab[j], sign[j] = k - 1, 1.0
    hint = np.vstack([normalised(X), selection(np.array([i]), s.A.shape[0])])
    return s.polish_labels(k, (lab, sign), "regroup", until, hint)
