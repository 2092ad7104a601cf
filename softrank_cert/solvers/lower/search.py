"""Resumable search for lower certificates at several tolerances at once (UNTRUSTED).

Every certificate here has *signed key groups*: ``Y`` (N x k) has at most one nonzero entry
per key row, ``Y[j, lab[j]] = sign[j]`` with ``sign[j] = +-1`` (``lab[j] = -1``: key j unused),
so ``||Y|| = 1``.  For a fixed ``Y`` the best ``X`` is a float64 LP (HiGHS): WLOG ``X A Y = I``, and row
``x_a`` minimises ``||x_a||_1`` subject to ``x_a^T B = e_a^T`` with ``B = A Y``; by LP duality
``||x_a||_1 = max { w_a : ||B w||_inf <= 1 }``, so the threshold
``t = 1 / (||X|| ||Y|| ||(XAY)^{-1}||) = 1 / max_a ||x_a||_1`` is the smallest l_inf distance
of a column of ``B`` from the span of the others.  Only the largest row matters, so the LP
solves rows worst first from a feasible ``X`` and stops once no other row can exceed the
largest exact one (:class:`RowLP`).  The search is over the labels ``(lab, sign)``:

* starts (each also a cheap probe, LP without polish, in a gallop over k per tolerance):
  complete-pivoting singletons (``pivot``); queries chosen by column-pivoted QR on centred
  square-root profiles, keys joining the chosen query that weights them most relative to
  their mean (``dev_qr``) or through the pseudo-inverse of the chosen rows (``pinv_qr``)
  (a fourth start from k-means query clusters, measured beside them, adds nothing);
* polish: greedy single-key moves (to another group, sign, or none) scored with ``X`` fixed,
  rows scaled to unit l1 norm, i.e. by ``||(X A Y')^{-1}||`` through Sherman-Morrison
  updates -- a valid certificate itself, so the LP re-solve that follows can only raise the
  threshold -- alternated with the LP until no key moves;
* growth ``k -> k+1`` (``grow``): the previous labels plus one new singleton key group, the key
  taken where the Schur complement ``A - A Y (X A Y)^{-1} X A`` promises the best new pivot;
* iterated local search at the first failing k: re-draw a few labels (``ils``), or drop one
  group and grow a new one in its place (``regroup``); polish; keep improvements.

Each of these is a family of units (:mod:`.units`): the starts and their leap (:mod:`.families.signed`),
growth (:mod:`.families.growth`), iterated local search (:mod:`.families.local`) and the general
key sides (:mod:`.families.general_lp`, :mod:`.families.general_smooth`); the order in which
they are asked is :data:`.families.PRIORITY`, and what they share is :class:`.base.LowerBase`.
The float64 threshold of each certificate is :func:`~softrank_cert.util.dense.threshold`; nothing here is
trusted, the kernel checks every certificate before it is used.
"""


from __future__ import annotations

from .base import LowerBase
from .families import PRIORITY
from .units import Unit
from ..work import Until


class LowerSearch(LowerBase):
    """Resumable search for lower certificates at several tolerances at once.

    For each eps the *target* is one above the largest k known to work (the larger of
    ``floor(eps)`` and this search's own best); targets above ``ceiling(eps)`` (or p) are
    closed.  Units of work (:mod:`.units`) run round-robin over the open targets; at each the
    first unit that a proposer of :data:`.families.PRIORITY` gives: first, per tolerance, a
    gallop over k with cheap starts (the leap); then growth from the best labels one k below
    (once per improvement there), each start once, then iterated local search until
    :data:`.families.local.ILS_PATIENCE` steps in a row fail; general key sides
    (:attr:`general`, and above :attr:`general_max_k` :attr:`smooth`, which also gallops from
    each new target) come after the starts.  A unit cut off by the deadline is discarded
    and redone by the next call (kept, if cut off a second time; a gallop always resumes,
    where it stopped: :meth:`~.base.LowerBase.gallop`), so the work done does not depend on how
    the time is sliced into calls.  ``add``
    receives every certificate that raises, for some eps, the largest k whose float64
    threshold exceeds eps.  ``ops``: the array back end of the large-k family's key sides
    (:mod:`~softrank_cert.solvers.backend`); everything else runs in numpy.  ``memory``: the bytes
    its states' arrays may hold after every unit (:meth:`~.base.LowerBase.forget`; a general pair's
    arrays are handed to ``add`` and not kept).
    """

    # -- driver ------------------------------------------------------------------------
    def run(self, until: Until) -> bool:
        """Work until ``until.reached()``; hand every improved certificate to
        ``add`` as soon as it is found; True when there is nothing left to try."""
        while not until.reached():
            targets = self.targets()
            if not targets:
                return True
            k = targets[self._turn % len(targets)]
            if self.step(k, until):
                self._turn += 1
        return not self.targets()

    def targets(self) -> list[int]:
        """Open target k per tolerance (distinct, ascending)."""
        out = set()
        for eps in self.eps_values:
            k = self.target(eps)
            if k <= min(self.ceiling(eps), self.d.p) and k not in self.exhausted:
                out.add(k)
        return sorted(out)

    def step(self, k: int, until: Until) -> bool:
        """Do the next unit of work at target k (mark k exhausted when there is none);
        False when the deadline cut the unit off and it is to be redone."""
        unit = self.next_unit(k)
        if unit is None:
            self.exhausted.add(k)
            return True
        candidate = unit.work(until)
        if until.reached() and (unit.key not in self.cut or unit.resumes):
            self.cut.add(unit.key)  # a leap resumes from its cached probes; others get one redo
            return False
        self.done.add(unit.key)
        improved = candidate is not None and self.offer(*candidate)
        if unit.after is not None:
            unit.after(improved)
        self.forget()
        return True

    def next_unit(self, k: int) -> Unit | None:
        """The first unit that a proposer of :data:`.families.PRIORITY` gives at target k."""
        for propose in PRIORITY:
            unit = propose(self, k)
            if unit is not None:
                return unit
        return None
