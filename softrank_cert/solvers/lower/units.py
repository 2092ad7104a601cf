"""The one interface of the lower families (UNTRUSTED): units of work proposed at a target k.

A **unit** (:class:`Unit`) is one piece of work of one family at one target k.  Its ``key``
names it: a unit runs once (:class:`~.search.LowerSearch` keeps the keys done), and one cut off
by the deadline is discarded and redone by the next call -- once, or every call when it
``resumes`` (a gallop, from its cached probes).  ``work(until)`` charges what it does to
``until`` and returns a signed-group :data:`Candidate` for the search to offer, or None (general
pairs are offered as they are found, :meth:`~.base.LowerBase.offer_pair`); ``after(improved)``
is told whether that candidate improved the search.

A **family** is a module of :mod:`.families` whose proposers ``(search, k) -> Unit | None``
(None: nothing to do at k now) read the search's shared state (:class:`~.base.LowerBase`) and
keep their own (:meth:`~.base.LowerBase.record`); the order in which the search asks them is
the data :data:`.families.PRIORITY`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..work import Until
from .lp import signed_y


@dataclass(eq=False)
class State:
    """Best labels found at one k, with their exact-LP ``X`` and float64 threshold ``t``;
    ``version`` counts the improvements at this k."""

    k: int
    lab: np.ndarray
    sign: np.ndarray
    X: np.ndarray
    t: float
    method: str
    version: int = 0

    @property
    def Y(self) -> np.ndarray:
        return signed_y(self.lab, self.sign, self.k)


#: A proposed state: (k, lab, sign, X, method).
Candidate = tuple[int, np.ndarray, np.ndarray, np.ndarray, str]


@dataclass(frozen=True, eq=False)
class Unit:
    """One unit of work (see the module docstring)."""

    key: tuple
    work: Callable[[Until], Candidate | None]
    resumes: bool = False
    after: Callable[[bool], None] | None = None
