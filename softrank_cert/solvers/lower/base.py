"""What every lower family shares (UNTRUSTED): one operator's best lower states and pairs per k.

:class:`LowerBase` holds the operator, the tolerances and the ends around them (``floor``,
``ceiling``), the best signed-group state per k (those a unit may still read, within its memory:
:meth:`~LowerBase.forget`) and the threshold of the best general pair per k, the keys of the
units done and the families' own records; it offers what the families find (:meth:`~LowerBase.offer`,
:meth:`~LowerBase.offer_pair`: a certificate that raises some tolerance's best k goes to
``add``), and gives them the steps they share: polishing labels (the float64 LP for ``X``
alternated with key moves), the query orders, query selections and the gallop over k.  The
driver that runs the families' units is :class:`~.search.LowerSearch`; the families are
:mod:`.families`.  Nothing here is trusted: the kernel checks every certificate before use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ..candidates import LowerCandidate
from ...util.dense import Dense, threshold
from ..backend import NUMPY, NumpyBackend
from .general import KeyLP
from .smooth_key import SmoothCharges
from .lp import RowLP, feasible, normalised, signed_y
from .moves import MoveCharges, key_moves
from .pivot import pivot_order
from .starts import qr_queries
from .units import Candidate, State
from ..work import Until, entries_units, key_lp_scale, row_lp_scale

#: A certificate counts for eps when its float64 threshold exceeds eps by this relative margin.
MARGIN = 1e-9


def state_bytes(st: State) -> int:
    """Bytes of a state's arrays (its labels, signs and ``X``)."""
    return int(st.lab.nbytes + st.sign.nbytes + st.X.nbytes)

T = TypeVar("T")


class LowerBase:
    """The state the lower families share and the steps they have in common (module docstring).

    ``add`` receives every certificate that raises, for some eps, the largest k whose float64
    threshold exceeds eps; ``ceiling(eps)`` and ``floor(eps)`` are the ends known around it.
    ``ops``: the array back end of the large-k family's key sides
    (:mod:`~softrank_cert.solvers.backend`); everything else runs in numpy.  The class
    attributes are the families' ablation knobs.
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
                 ops: NumpyBackend = NUMPY, memory: float = math.inf) -> None:
        self.d, self.A, self.ops, self.memory = d, d.A, ops, memory
        self.eps_values = sorted(float(e) for e in eps_values)
        self.add, self.ceiling, self.floor = add, ceiling, floor
        self.seed = seed
        self.lp = RowLP(row_lp_scale(*d.shape))
        self.key_lp = KeyLP(key_lp_scale(*d.shape))
        self.move_charges = MoveCharges.for_shape(*d.shape)
        self.smooth_charges = SmoothCharges.for_shape(*d.shape)
        self.states: dict[int, State] = {}
        self.pairs: dict[int, float] = {}  # the threshold of the best general pair per k (its arrays went to add)
        self.done: set[tuple] = set()  # keys of finished units
        self.cut: set[tuple] = set()  # keys of units once cut off by a deadline
        self.exhausted: set[int] = set()  # k with nothing left to try
        self.gallops: dict[tuple[str, float], tuple[int, int | None]] = {}  # (step, least failing k) per gallop
        self.gallop_cut: dict[tuple[str, float], int] = {}  # the k of its last probe cut off, per gallop
        self._records: dict[str, Any] = {}
        self._turn = 0  # the driver's round-robin over the targets
        self._queries: np.ndarray | None = None

    def record(self, family: str, make: Callable[[], T]) -> T:
        """The state that ``family`` keeps on this search, made by ``make`` on first use."""
        if family not in self._records:
            self._records[family] = make()
        found: T = self._records[family]
        return found

    # -- targets and offers ------------------------------------------------------------
    def target(self, eps: float) -> int:
        """One above the largest k known to work at eps (open or not)."""
        return max(self.floor(eps), self.best_k(eps)) + 1

    def best_k(self, eps: float) -> int:
        """Largest k of this search whose threshold exceeds eps (0 if none)."""
        signed = max((k for k, s in self.states.items() if s.t > eps * (1 + MARGIN)), default=0)
        return max([signed] + [k for k, t in self.pairs.items() if t > eps * (1 + MARGIN)])

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

    def offer_pair(self, k: int, X: np.ndarray, Y: np.ndarray, t: float, method: str) -> None:
        """Record a general pair at k if it beats the best there; hand it to ``add`` when it
        raises some tolerance's best k."""
        old = self.pairs.get(k)
        if not np.isfinite(t) or (old is not None and t <= old * (1 + 1e-12)):
            return
        before = {eps: max(self.floor(eps), self.best_k(eps)) for eps in self.eps_values}
        self.pairs[k] = t
        if any(before[eps] < k <= self.ceiling(eps) and t > eps * (1 + MARGIN) for eps in self.eps_values):
            self.add(LowerCandidate(k, X, Y, t, method))

    # -- memory ------------------------------------------------------------------------
    def forget(self) -> None:
        """Keep the states' arrays within :attr:`memory` bytes.  First the states no unit can read
        again go: below every tolerance's target less one (units run at a target k and read the
        states at k and k - 1; targets only rise) except the largest below each target (growth
        above :attr:`general_max_k` grows on from it); their thresholds are not needed either (the
        targets rest on the larger k at target - 1, or on the floor).  Dropping them changes
        nothing the search does.  Then, while the states still hold more than :attr:`memory`, those
        farthest above every target (gallop probes a target has not reached), the highest first:
        a later unit there starts afresh, which may cost tightness, never soundness."""
        targets = [self.target(eps) for eps in self.eps_values]
        below = {max((k for k in self.states if k < t), default=None) for t in targets}
        for k in [k for k in self.states if k < min(targets) - 1 and k not in below]:
            del self.states[k]
        held = sum(state_bytes(st) for st in self.states.values())
        for k in sorted((k for k in self.states if k > max(targets)), reverse=True):
            if held <= self.memory:
                break
            held -= state_bytes(self.states.pop(k))

    # -- polish ------------------------------------------------------------------------
    def polish(self, k: int, lab: np.ndarray, sign: np.ndarray, until: Until, hint: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Alternate the float64 LP for X and key moves with X fixed (rows normalised) until no
        key moves; return the final labels and X (None if the first LP fails).  ``hint``
        (k x m) spans a feasible X that lets the first LP solve only its worst rows."""
        Y = signed_y(lab, sign, k)
        self.charge_products(k, until)
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
            self.charge_products(k, until)
            X2 = self.lp.solve(self.A @ Y2, until, feasible(self.A, X0, Y2))
            if X2 is None:
                break
            lab, sign, X = lab2, sign2, X2
        return lab, sign, X

    def charge_products(self, k: int, until: Until) -> None:
        """Charge the dense products around one LP at k (``A Y``, ``X A``, the threshold)."""
        m, n = self.A.shape
        until.charge(entries_units(6.0 * m * n * k + 2.0 * k ** 3))

    def polish_labels(self, k: int, labels: tuple[np.ndarray, np.ndarray], method: str, until: Until,
                      hint: np.ndarray | None = None) -> Candidate | None:
        """:meth:`polish` as a candidate named ``method`` (signs dropped unless :attr:`signed`)."""
        lab, sign = labels
        out = self.polish(k, lab, sign if self.signed else np.ones_like(sign), until, hint)
        return None if out is None else (k, *out, method)

    # -- query orders and selections ---------------------------------------------------
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

    def gallop(self, kind: str, eps: float, ok: Callable[[int], bool | None], until: Until) -> None:
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
