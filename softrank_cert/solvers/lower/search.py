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

The float64 threshold of each certificate is :func:`~softrank_cert.util.dense.threshold`; nothing here is
trusted, the kernel checks every certificate before it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Sequence

import numpy as np

from ..candidates import LowerCandidate
from ...util.dense import Dense, threshold
from ..backend import NUMPY, NumpyBackend
from .general import KeyLP, alternate
from .smooth_key import SmoothCharges, selection_pair
from .lp import RowLP, feasible, normalised, signed_y
from .moves import MoveCharges, key_moves
from .pivot import pivot_order
from .starts import dev_labels, growth_pivot, pinv_labels, pivot_labels, qr_queries, selection
from ..work import Until, entries_units, key_lp_scale, row_lp_scale

#: A certificate counts for eps when its float64 threshold exceeds eps by this relative margin.
MARGIN = 1e-9
#: Fraction of the keys re-labelled at random by one iterated-local-search step.
PERTURB = 0.07
#: Iterated-local-search steps without improvement after which a k is given up.
ILS_PATIENCE = 40
#: The large-k family's units at a target k run only where its gallop probe there came within
#: this factor of the tolerance (more evaluations and other selections gained 1-5 %, measured).
SMOOTH_REACH = 1.1


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
#: One unit of work: its key and the function doing it (argument: the deadline).
Unit = tuple[tuple, Callable[[Until], "Candidate | None"]]


class LowerSearch:
    """Resumable search for lower certificates at several tolerances at once.

    For each eps the *target* is one above the largest k known to work (the larger of
    ``floor(eps)`` and this search's own best); targets above ``ceiling(eps)`` (or p) are
    closed.  First, per tolerance, a gallop over k with cheap starts (:meth:`leap`); then
    units of work, round-robin over the open targets: growth from the best labels one k
    below (once per improvement there), each start once, then iterated local search until
    :data:`ILS_PATIENCE` steps in a row fail; general key sides (:attr:`general`, and above
    :attr:`general_max_k` :attr:`smooth`, which also gallops from each new target) come after
    the starts.  A unit cut off by the deadline is discarded
    and redone by the next call (kept, if cut off a second time; a gallop always resumes,
    where it stopped: :meth:`_gallop`), so the work done does not depend on how the time is
    sliced into calls.  ``add``
    receives every certificate that raises, for some eps, the largest k whose float64
    threshold exceeds eps.  ``ops``: the array back end of the large-k family's key sides
    (:mod:`~softrank_cert.solvers.backend`); everything else runs in numpy.
    """

    #: Start constructions tried at every target k (ablation knob).
    starts: tuple[str, ...] = ("pivot", "dev_qr", "pinv_qr")
    #: Cheap starts (no polish) probed by the initial gallop over k per tolerance (ablation knob).
    leap_starts: tuple[str, ...] = ("pivot", "dev_qr")
    #: Whether key moves may use sign -1 (ablation knob).
    signed: bool = True
    #: Whether growth k -> k+1 is tried (ablation knob).
    grow: bool = True
    #: Whether iterated local search is tried (ablation knob).
    ils: bool = True
    #: Its moves, in turn: random relabelling, or dropping a group and growing a new one.
    ils_moves: tuple[str, ...] = ("perturb", "regroup")
    #: Query selections from which a general key side is solved (:mod:`.general`), tried
    #: at every target k after the starts (ablation knob): pivoted QR (``qr``), complete
    #: pivoting (``pivot``), the queries the best signed-group pair leans on (``lean``).
    general: tuple[str, ...] = ("qr", "pivot", "lean")
    #: Largest k at which they are tried: the Y-step LP has k^2 equality rows, and at k ~ 40 on
    #: 128-wide heads its cost took more from growth and local search than it gave (measured).
    general_max_k: int = 28
    #: General pairs in a row that do not beat the signed groups at their k after which the
    #: family is given up on this operator (on diffuse high-rank heads it only costs).
    general_patience: int = 3
    #: Query selections of the large-k family (:mod:`.smooth_key`: a smoothed Y-step on
    #: ``A_I Y = I``), tried above :attr:`general_max_k` with the same patience (ablation knob);
    #: their pairs are named ``general_smooth_<selection>``.
    smooth: tuple[str, ...] = ("qr", "pivot", "lean")
    #: L-BFGS evaluations per continuation stage of its gallop probes (pivoted-QR selection, per
    #: tolerance and target) and of its units at one k (each selection once).
    smooth_probe_evaluations: int = 100
    smooth_evaluations: int = 300

    def __init__(self, d: Dense, eps_values: Sequence[float], add: Callable[[LowerCandidate], None],
                 ceiling: Callable[[float], int], floor: Callable[[float], int], seed: int = 0,
                 ops: NumpyBackend = NUMPY) -> None:
        self.d, self.A, self.ops = d, d.A, ops
        self.eps_values = sorted(float(e) for e in eps_values)
        self.add, self.ceiling, self.floor = add, ceiling, floor
        self.seed = seed
        self.lp = RowLP(row_lp_scale(*d.shape))
        self.key_lp = KeyLP(key_lp_scale(*d.shape))
        self.move_charges = MoveCharges.for_shape(*d.shape)
        self.smooth_charges = SmoothCharges.for_shape(*d.shape)
        self.states: dict[int, State] = {}
        self.pairs: dict[int, tuple[np.ndarray, np.ndarray, float, str]] = {}  # general pairs per k
        self.general_misses = 0  # general pairs in a row not better than the signed groups
        self.general_hits = 0  # general pairs better than the signed groups at their k
        self.smooth_misses = 0  # likewise for the large-k family
        self.smooth_hits = 0
        self.smooth_probes: dict[int, float] = {}  # threshold of the gallop probe per k
        self.done: set[tuple] = set()  # keys of finished units
        self.cut: set[tuple] = set()  # keys of units once cut off by a deadline
        self.exhausted: set[int] = set()  # k with nothing left to try
        self.ils_steps: dict[int, int] = {}  # finished ILS steps per k
        self.failures: dict[int, int] = {}  # ILS steps in a row without improvement per k
        self.probes: dict[tuple[str, int], float] = {}
        self.gallops: dict[tuple[str, float], tuple[int, int | None]] = {}  # (step, least failing k) per gallop
        self.gallop_cut: dict[tuple[str, float], int] = {}  # the k of its last probe cut off, per gallop
        self._turn = 0
        self._queries: np.ndarray | None = None

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

    def target(self, eps: float) -> int:
        """One above the largest k known to work at eps (open or not)."""
        return max(self.floor(eps), self.best_k(eps)) + 1

    def best_k(self, eps: float) -> int:
        """Largest k of this search whose threshold exceeds eps (0 if none)."""
        signed = max((k for k, s in self.states.items() if s.t > eps * (1 + MARGIN)), default=0)
        return max([signed] + [k for k, pair in self.pairs.items() if pair[2] > eps * (1 + MARGIN)])

    def step(self, k: int, until: Until) -> bool:
        """Do the next unit of work at target k (mark k exhausted when there is none);
        False when the deadline cut the unit off and it is to be redone."""
        unit = self.next_unit(k)
        if unit is None:
            self.exhausted.add(k)
            return True
        key, work = unit
        candidate = work(until)
        if until.reached() and (key not in self.cut or key[0] in ("leap", "smooth_leap")):
            self.cut.add(key)  # a leap resumes from its cached probes; others get one redo
            return False
        self.done.add(key)
        improved = candidate is not None and self.offer(*candidate)
        if key[0] == "ils":
            self.ils_steps[k] = self.ils_steps.get(k, 0) + 1
            self.failures[k] = 0 if improved else self.failures.get(k, 0) + 1
        return True

    def next_unit(self, k: int) -> Unit | None:
        """The first unit not yet done for target k, in the order of the class docstring."""
        for eps in self.eps_values:
            if ("leap", eps) not in self.done:
                return ("leap", eps), lambda until, eps=eps: self.leap(eps, until)
        if k > self.general_max_k and self.smooth:  # the large-k family gallops from each new target
            for eps in self.eps_values:
                if self.target(eps) == k and ("smooth_leap", eps, k) not in self.done:
                    return ("smooth_leap", eps, k), lambda until, eps=eps: self.smooth_leap(eps, until)
        below = self.states.get(k - 1)
        if k == 2 and below is None and ("ones",) not in self.done:
            return ("ones",), lambda until: self.polish_labels(1, self.ones(), "ones", until)
        if below is None and k > self.general_max_k:  # a general pair above the signed groups:
            below = self._chain_top(k)  # they grow on while they clear the tolerance
        if self.grow and below is not None and ("grow", below.k + 1, below.version) not in self.done:
            return ("grow", below.k + 1, below.version), lambda until: self.grow_from(below, until)
        for name in self.starts:
            if ("start", name, k) not in self.done:
                return ("start", name, k), lambda until, name=name: self.polish_start(name, k, until)
        general = self._general_unit(k)
        hits = self.smooth_hits if k > self.general_max_k else self.general_hits
        if general is not None and hits > 0:  # general pairs have won here: before ILS
            return general
        s = self.states.get(k)
        if self.ils and s is not None and self.failures.get(k, 0) < ILS_PATIENCE:
            n = self.ils_steps.get(k, 0)
            return ("ils", k, n), lambda until: self.ils_step(s, n, until)
        return general  # else once the signed groups have saturated at k

    def _chain_top(self, k: int) -> State | None:
        """The signed state of largest k below ``k`` if it clears a tolerance whose target is k."""
        top = max((s for s in self.states.values() if s.k < k), key=lambda s: s.k, default=None)
        clears = top is not None and any(self.target(eps) == k and top.t > eps * (1 + MARGIN) for eps in self.eps_values)
        return top if clears else None

    def _general_unit(self, k: int) -> Unit | None:
        """The next general-pair unit at k, if the family is still hopeful on this operator."""
        if k > self.general_max_k:
            near = any(self.target(eps) == k and self.smooth_probes.get(k, 0.0) * SMOOTH_REACH > eps
                       for eps in self.eps_values)
            if self.smooth_misses >= self.general_patience or not near:
                return None
            for name in self.smooth:
                if ("smooth", name, k) not in self.done:
                    return ("smooth", name, k), lambda until, name=name: self.smooth_pair(name, k, until)
            return None
        if self.general_misses >= self.general_patience:
            return None
        for name in self.general:
            if ("general", name, k) not in self.done:
                return ("general", name, k), lambda until, name=name: self.general_pair(name, k, until)
        return None

    def offer(self, k: int, lab: np.ndarray, sign: np.ndarray, X: np.ndarray, method: str) -> bool:
        """Record labels at k if they beat the best there; hand the certificate to ``add``
        when it raises some tolerance's best k.  Returns whether it was an improvement."""
        Y = signed_y(lab, sign, k)
        t = threshold(self.A, X, Y)
        old = self.states.get(k)
        if old is not None and t <= old.t * (1 + 1e-12):
            return False
        before = {eps: max(self.floor(eps), self.best_k(eps)) for eps in self.eps_values}
        self.states[k] = State(k, lab, sign, X, t, method, 0 if old is None else old.version + 1)
        if any(before[eps] < k <= self.ceiling(eps) and t > eps * (1 + MARGIN) for eps in self.eps_values):
            self.add(LowerCandidate(k, X, Y, t, method))
        return True

    def offer_pair(self, k: int, X: np.ndarray, Y: np.ndarray, t: float, origin: str) -> None:
        """Record a general pair at k if it beats the best there; hand it to ``add`` when it
        raises some tolerance's best k."""
        old = self.pairs.get(k)
        if not np.isfinite(t) or (old is not None and t <= old[2] * (1 + 1e-12)):
            return
        before = {eps: max(self.floor(eps), self.best_k(eps)) for eps in self.eps_values}
        self.pairs[k] = (X, Y, t, origin)
        if any(before[eps] < k <= self.ceiling(eps) and t > eps * (1 + MARGIN) for eps in self.eps_values):
            self.add(LowerCandidate(k, X, Y, t, origin))

    def general_pair(self, name: str, k: int, until: Until) -> None:
        """Selection ``name`` at k, its LP-optimal general key side alternated with the exact
        query side (:func:`.general.alternate`), offered."""
        rows = self.selection_rows(name, k)
        if rows is None:
            return None
        found = alternate(self.A, selection(rows, self.A.shape[0]), self.key_lp, self.lp, until)
        if until.reached():  # cut off: the unit is redone (or dropped), and counts for nothing
            return None
        signed = self.states.get(k)
        if found is not None and (signed is None or found[2] > signed.t):
            self.general_misses = 0
            self.general_hits += 1
            self.offer_pair(k, *found, f"general_{name}")
        else:
            self.general_misses += 1
        return None

    def smooth_probe(self, k: int, until: Until) -> float:
        """Threshold of the pivoted-QR selection's smoothed pair at k (offered at once; each k
        solved once unless cut off by ``until``)."""
        if k not in self.smooth_probes:
            found = selection_pair(self.A, self.queries()[:k], until, self.smooth_probe_evaluations, self.smooth_charges,
                                   self.ops)
            if found is None:
                return 0.0
            self.offer_pair(k, *found, "general_smooth_qr")
            self.smooth_probes[k] = found[2]
        return self.smooth_probes[k]

    def smooth_leap(self, eps: float, until: Until) -> None:
        """Largest k where the smoothed pivoted-QR pair works at eps: the gallop of :meth:`leap`
        with :meth:`smooth_probe`."""
        def ok(k: int) -> bool | None:
            if self.smooth_probe(k, until) > eps * (1 + MARGIN):
                return True
            return False if k in self.smooth_probes else None

        self._gallop("smooth_leap", eps, ok, until)

    def smooth_pair(self, name: str, k: int, until: Until) -> None:
        """Selection ``name`` at k with its smoothed key side (:attr:`smooth_evaluations`), offered."""
        rows = self.selection_rows(name, k)
        if rows is None:
            return None
        found = selection_pair(self.A, rows, until, self.smooth_evaluations, self.smooth_charges, self.ops)
        if until.reached():  # cut off: the unit is redone (or dropped), and counts for nothing
            return None
        signed = self.states.get(k)
        if found is not None and (signed is None or found[2] > signed.t):
            self.smooth_misses = 0
            self.smooth_hits += 1
            self.offer_pair(k, *found, f"general_smooth_{name}")
        else:
            self.smooth_misses += 1
        return None

    def selection_rows(self, name: str, k: int) -> np.ndarray | None:
        """k distinct query rows of selection ``name`` (None when it does not apply)."""
        if name == "qr":
            return self.queries()[:k]
        if name == "pivot":
            return self.pivots()[0][:k]
        if name == "lean":  # each row of the best signed pair's X: the query it weights most
            s = self.states.get(k)
            if s is None:
                return None
            rows = np.unique(np.abs(s.X).argmax(axis=1))
            return rows if len(rows) == k else None
        raise ValueError(f"unknown selection {name!r}")

    # -- polish ------------------------------------------------------------------------
    def polish(self, k: int, lab: np.ndarray, sign: np.ndarray, until: Until, hint: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Alternate the float64 LP for X and key moves with X fixed (rows normalised) until no
        key moves; return the final labels and X (None if the first LP fails).  ``hint``
        (k x m) spans a feasible X that lets the first LP solve only its worst rows."""
        Y = signed_y(lab, sign, k)
        self._charge_products(k, until)
        X = self.lp.solve(self.A @ Y, until, None if hint is None else feasible(self.A, normalised(hint), Y))
        if X is None:
            return None
        while not until.reached():
            X0 = normalised(X)
            lab2, sign2, moved = key_moves(X0 @ self.A, lab, sign, until, self.signed,
                                           charges=self.move_charges)
            if not moved:
                break
            Y2 = signed_y(lab2, sign2, k)
            self._charge_products(k, until)
            X2 = self.lp.solve(self.A @ Y2, until, feasible(self.A, X0, Y2))
            if X2 is None:
                break
            lab, sign, X = lab2, sign2, X2
        return lab, sign, X

    def _charge_products(self, k: int, until: Until) -> None:
        """Charge the dense products around one LP at k (``A Y``, ``X A``, the threshold)."""
        m, n = self.A.shape
        until.charge(entries_units(6.0 * m * n * k + 2.0 * k ** 3))

    def polish_labels(self, k: int, labels: tuple[np.ndarray, np.ndarray], method: str, until: Until,
                      hint: np.ndarray | None = None) -> Candidate | None:
        """:meth:`polish` as a candidate named ``method`` (signs dropped unless :attr:`signed`)."""
        lab, sign = labels
        out = self.polish(k, lab, sign if self.signed else np.ones_like(sign), until, hint)
        return None if out is None else (k, *out, method)

    # -- starts ------------------------------------------------------------------------
    def ones(self) -> tuple[np.ndarray, np.ndarray]:
        """k = 1: every key in the one group (``Y`` = all-ones column)."""
        n = self.A.shape[1]
        return np.zeros(n, dtype=int), np.ones(n)

    def queries(self) -> np.ndarray:
        """Query order of :func:`qr_queries` (computed once)."""
        if self._queries is None:
            self._queries = qr_queries(self.A)
        return self._queries

    def pivots(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column orders of complete pivoting (computed once per operator)."""
        if "pivot_order" not in self.d.memo:  # shared with lower_pivot
            self.d.memo["pivot_order"] = pivot_order(self.A)
        return self.d.memo["pivot_order"]

    def start(self, name: str, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Labels, signs and a hint X (k x m) of start construction ``name`` at k."""
        m, n = self.A.shape
        if name == "pivot":
            rows, cols = self.pivots()
            return (*pivot_labels(cols[:k], n), selection(rows[:k], m))
        if name == "dev_qr":
            return (*dev_labels(self.A, self.queries()[:k]), selection(self.queries()[:k], m))
        if name == "pinv_qr":
            return (*pinv_labels(self.A, self.queries()[:k]), selection(self.queries()[:k], m))
        raise ValueError(f"unknown start {name!r}")

    def polish_start(self, name: str, k: int, until: Until) -> Candidate | None:
        """Start ``name`` at k, polished."""
        lab, sign, hint = self.start(name, k)
        return self.polish_labels(k, (lab, sign), name, until, hint)

    def probe(self, name: str, k: int, until: Until) -> float:
        """Threshold of start ``name`` at k with its exact LP ``X`` but no polish (offered at
        once; 0 when the LP fails; each (name, k) solved once unless cut off by ``until``)."""
        if (name, k) not in self.probes:
            lab, sign, hint = self.start(name, k)
            Y = signed_y(lab, sign, k)
            self._charge_products(k, until)
            X = self.lp.solve(self.A @ Y, until, feasible(self.A, hint, Y))
            if X is None:
                return 0.0
            self.offer(k, lab, sign, X, name)
            self.probes[(name, k)] = threshold(self.A, X, Y)
        return self.probes[(name, k)]

    def leap(self, eps: float, until: Until) -> None:
        """Largest k where a cheap start already works at eps: probes of :attr:`leap_starts`
        galloping up from the target (steps 1, 2, 4, ...), then bisection."""
        def ok(k: int) -> bool | None:
            if max((self.probe(name, k, until) for name in self.leap_starts), default=0.0) > eps * (1 + MARGIN):
                return True
            return False if all((name, k) in self.probes for name in self.leap_starts) else None

        self._gallop("leap", eps, ok, until)

    def _gallop(self, kind: str, eps: float, ok: Callable[[int], bool | None], until: Until) -> None:
        """Gallop up from the target of eps while ``ok`` (steps 1, 2, 4, ...), then bisect below
        the first k that fails.  ``ok(k)`` is None when ``until`` cut its probe off; the gallop
        then stops, and the next call resumes where it stopped (:attr:`gallops`, per ``(kind,
        eps)``): with the step it had reached, or bisecting below the least k it found failing."""
        key = (kind, eps)
        lo = max(self.floor(eps), self.best_k(eps))
        hi = min(self.ceiling(eps), self.d.p)
        step, bad = self.gallops.get(key, (1, None))
        if bad is None or not lo + 1 < bad <= hi:
            while lo + step <= hi and not until.reached():
                found = ok(lo + step)
                if found is None:
                    self._cut(key, step, lo + step)
                    return
                if not found:
                    break
                lo, step = lo + step, 2 * step
                self.gallops[key] = (step, None)
            if until.reached():
                return
            bad = min(lo + step, hi + 1)
            self.gallops[key] = (step, bad)
        while bad - lo > 1 and not until.reached():
            mid = (lo + bad) // 2
            found = ok(mid)
            if found is None:
                self._cut(key, step, mid)
                return
            if found:
                lo = mid
            else:
                bad = mid
                self.gallops[key] = (step, bad)
        if not until.reached():
            self.gallops.pop(key, None)  # finished: a new target gallops from step 1 again
            self.gallop_cut.pop(key, None)

    def _cut(self, key: tuple[str, float], step: int, k: int) -> None:
        """The probe at k of gallop ``key`` was cut off by its stop point; cut off there twice,
        k is taken as failing (a probe larger than a slice would be cut in every slice, and the
        gallop would never go on below it)."""
        if self.gallop_cut.get(key) == k:
            self.gallops[key] = (step, k)
        self.gallop_cut[key] = k

    # -- growth and local search -------------------------------------------------------
    def grow_from(self, src: State, until: Until) -> Candidate | None:
        """Labels of ``src`` plus one singleton group on the growth pivot, polished at k+1."""
        self._charge_products(3 * src.k, until)
        i, j = growth_pivot(self.A, src.X, src.Y)
        lab, sign = src.lab.copy(), src.sign.copy()
        lab[j], sign[j] = src.k, 1.0
        hint = np.vstack([normalised(src.X), selection(np.array([i]), self.A.shape[0])])
        return self.polish_labels(src.k + 1, (lab, sign), "grow", until, hint)

    def ils_step(self, s: State, n: int, until: Until) -> Candidate | None:
        """ILS step number n at ``s.k``: the n-th of :attr:`ils_moves` in turn, random draws
        seeded by (seed, k, n) so that a redone step repeats itself."""
        rng = np.random.default_rng([self.seed, s.k, n])
        if self.ils_moves[n % len(self.ils_moves)] == "regroup" and s.k > 1:
            return self.regroup(s, n < len(self.ils_moves), rng, until)
        return self.polish_labels(s.k, self.perturb(s, rng), "ils", until, s.X)

    def perturb(self, s: State, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Copy of the labels of ``s`` with a random :data:`PERTURB` share of keys re-drawn
        (group or none, and sign)."""
        lab, sign = s.lab.copy(), s.sign.copy()
        pick = rng.choice(len(lab), max(1, int(round(PERTURB * len(lab)))), replace=False)
        lab[pick] = rng.integers(-1, s.k, len(pick))
        if self.signed:
            sign[pick] = rng.choice([-1.0, 1.0], len(pick))
        return lab, sign

    def regroup(self, s: State, worst: bool, rng: np.random.Generator, until: Until) -> Candidate | None:
        """Drop one group of ``s`` and grow a new one in its place: the worst group (the row
        of X with the largest l1 norm) if ``worst``, else a random one."""
        k = s.k
        a = int(np.abs(s.X).sum(axis=1).argmax()) if worst else int(rng.integers(k))
        lab, sign = s.lab.copy(), s.sign.copy()
        lab[lab == a] = -1
        lab[lab > a] -= 1
        X = np.delete(s.X, a, axis=0)
        self._charge_products(3 * k, until)
        i, j = growth_pivot(self.A, X, signed_y(lab, sign, k - 1))
        lab[j], sign[j] = k - 1, 1.0
        hint = np.vstack([normalised(X), selection(np.array([i]), self.A.shape[0])])
        return self.polish_labels(k, (lab, sign), "regroup", until, hint)
