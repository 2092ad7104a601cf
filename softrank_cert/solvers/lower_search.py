"""Resumable search for lower certificates at several tolerances at once (UNTRUSTED).

Every certificate here has *signed key groups*: ``Y`` (N x k) has at most one nonzero entry
per key row, ``Y[j, lab[j]] = sign[j]`` with ``sign[j] = +-1`` (``lab[j] = -1``: key j unused),
so ``||Y|| = 1``.  For a fixed ``Y`` the best ``X`` is an exact LP: WLOG ``X A Y = I``, and row
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
  (k-means query clusters were measured as a fourth start and added nothing);
* polish: greedy single-key moves (to another group, sign, or none) scored with ``X`` fixed,
  rows scaled to unit l1 norm, i.e. by ``||(X A Y')^{-1}||`` through Sherman-Morrison
  updates -- a valid certificate itself, so the LP re-solve that follows can only raise the
  threshold -- alternated with the LP until no key moves;
* growth ``k -> k+1`` (``grow``): the previous labels plus one new singleton key group, the key
  taken where the Schur complement ``A - A Y (X A Y)^{-1} X A`` promises the best new pivot;
* iterated local search at the first failing k: re-draw a few labels (``ils``), or drop one
  group and grow a new one in its place (``regroup``); polish; keep improvements.

The float64 threshold of each certificate is :func:`.dense.threshold`; nothing here is
trusted, the kernel checks every certificate before it is used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import highspy
import numpy as np
import scipy.linalg

from .dense import Dense, norm, threshold
from .l1 import _quiet_highs
from .lower_pivot import pivot_order
from .profiles import LowerCandidate

#: A certificate counts for eps when its float64 threshold exceeds eps by this relative margin.
MARGIN = 1e-9
#: Keys whose best candidate group is scored are limited to this many groups (largest |w_h|).
MOVE_WIDTH = 12
#: Moves are screened on the rows of ``(XAY)^{-1}`` within this relative band of the maximum...
TOP_BAND = 1e-6
#: ... at most this many of them.
TOP_ROWS = 8
#: Largest number of entries of one screening chunk (memory bound of :func:`screen`).
SCREEN_ENTRIES = 1 << 21
#: Fraction of the keys re-labelled at random by one iterated-local-search step.
PERTURB = 0.07
#: Iterated-local-search steps without improvement after which a k is given up.
ILS_PATIENCE = 40


def signed_y(lab: np.ndarray, sign: np.ndarray, k: int) -> np.ndarray:
    """``Y`` (N x k) with ``Y[j, lab[j]] = sign[j]`` where ``lab[j] >= 0``, zero elsewhere."""
    Y = np.zeros((len(lab), k))
    used = np.flatnonzero(lab >= 0)
    Y[used, lab[used]] = sign[used]
    return Y


class RowLP:
    """Exact ``X`` for a given ``B = A Y``: rows ``x_a = argmin ||x||_1 s.t. x^T B = e_a^T``.

    Solved as the dual ``max w_a s.t. -1 <= B w <= 1`` (k free columns, m box rows) by HiGHS
    dual simplex; only the cost changes between rows, so each row warm-starts from the last.
    ``x_a`` is read off the row duals.
    """

    def __init__(self) -> None:
        self._h = _quiet_highs()
        self._h.setOptionValue("threads", 1)
        self._h.setOptionValue("presolve", "off")

    def solve(self, B: np.ndarray, until: float, start: np.ndarray | None = None) -> np.ndarray | None:
        """``X`` (k x m) with ``X B = I`` whose largest row l1 norm is the LP optimum.

        Without ``start`` every row is solved.  With a feasible ``start`` (``start B = I``),
        rows are solved in decreasing order of their l1 norm in ``start`` and the rest are
        kept from ``start`` once the next norm is below the largest exact one: only the
        maximum matters, so the result has the same ``||X||`` as the full solve.  None if an
        LP is unbounded (B rank-deficient) or fails, or if ``until`` (a perf_counter value)
        passes.
        """
        m, k = B.shape
        self._pass(B)
        X = np.empty((k, m)) if start is None else np.array(start, dtype=np.float64)
        bounds = np.full(k, np.inf) if start is None else np.abs(X).sum(axis=1)
        worst = 0.0
        for a in np.argsort(-bounds, kind="stable"):
            if bounds[a] <= worst:
                break
            left = until - time.perf_counter()
            if left <= 0:
                return None
            x = self._row(int(a), k, left + 0.05)  # HiGHS stops only once until has passed
            if x is None:
                return None
            if np.abs(x).sum() < bounds[a]:
                X[a] = x
            worst = max(worst, float(np.abs(X[a]).sum()))
        return X

    def _pass(self, B: np.ndarray) -> None:
        m, k = B.shape
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = k, m
        lp.col_cost_ = np.zeros(k)
        lp.col_lower_, lp.col_upper_ = np.full(k, -np.inf), np.full(k, np.inf)
        lp.row_lower_, lp.row_upper_ = -np.ones(m), np.ones(m)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.arange(m + 1, dtype=np.int32) * k
        lp.a_matrix_.index_ = np.tile(np.arange(k, dtype=np.int32), m)
        lp.a_matrix_.value_ = np.ascontiguousarray(B, dtype=np.float64).ravel()
        self._h.passModel(lp)

    def _row(self, a: int, k: int, seconds: float) -> np.ndarray | None:
        """Row a of the optimal X for the model passed last (None unless optimal)."""
        h = self._h
        cost = np.zeros(k)
        cost[a] = -1.0
        h.changeColsCost(k, np.arange(k, dtype=np.int32), cost)
        h.setOptionValue("time_limit", h.getRunTime() + seconds)  # HiGHS's run clock accumulates
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return -np.asarray(h.getSolution().row_dual)


def screen(Z: np.ndarray, C: np.ndarray, lab: np.ndarray, sign: np.ndarray, signs: np.ndarray,
           width: int) -> np.ndarray:
    """Candidate single-key moves scored on the rows of ``Z = (CY)^{-1}`` at the maximum only.

    A move can lower ``||Z||`` only if it lowers every row now at the maximum, so each move
    (key j to group h with sign sigma, among the ``width`` groups with the largest
    ``|(Z' c_j)_h|``, or to no group) is scored by the largest new l1 norm of those rows
    (two Sherman-Morrison updates, vectorised over keys).  Returns the moves whose score is
    below the current norm, best first, as rows ``(j, h, sigma index)`` (h = -1: no group).
    """
    k, n = C.shape
    norms = np.abs(Z).sum(axis=1)
    top = np.argsort(-norms)[:TOP_ROWS]
    top = top[norms[top] >= norms.max() * (1 - TOP_BAND)]
    W = Z @ C  # column j: Z c_j
    grouped = lab >= 0
    g = np.where(grouped, lab, 0)
    den = np.where(grouped, 1.0 - sign * W[g, np.arange(n)], 1.0)
    ok = np.abs(den) > 1e-10
    den = np.where(ok, den, 1.0)
    u = np.where(grouped, sign / den, 0.0)  # leaving g: Z0 = Z + u_j (Z c_j) Z[g_j]
    w = (W / den).T  # n x k: Z0 c_j = Z c_j / den_j
    L = min(width, k)
    H = np.argpartition(-np.abs(w), L - 1, axis=1)[:, :L] if L < k else np.tile(np.arange(k), (n, 1))
    Z0_top = Z[top][None] + (u * W[top]).T[:, :, None] * Z[g][:, None, :]  # n x T x k
    none = np.where(grouped & ok, np.abs(Z0_top).sum(axis=2).max(axis=1), np.inf)
    scores = np.empty((n, len(signs), L))
    chunk = max(1, SCREEN_ENTRIES // (len(top) * len(signs) * L * k))
    for lo in range(0, n, chunk):
        sl = slice(lo, lo + chunk)
        scores[sl] = _scores(Z, W[:, sl], w[sl], u[sl], g[sl], H[sl], Z0_top[sl], top, signs)
    same = (H == lab[:, None])[:, None, :] & (signs[None, :, None] == sign[:, None, None])
    scores[same | ~ok[:, None, None]] = np.inf
    S = len(signs)
    moves = np.concatenate([
        np.stack([np.repeat(np.arange(n), S * L), H[:, None, :].repeat(S, axis=1).ravel(),
                  np.tile(np.repeat(np.arange(S), L), n)], axis=1),
        np.stack([np.arange(n), np.full(n, -1), np.zeros(n, int)], axis=1)])
    values = np.concatenate([scores.ravel(), none])
    keep = np.flatnonzero(values < norms.max() * (1 - 1e-9))
    return moves[keep[np.argsort(values[keep], kind="stable")]]


def _scores(Z: np.ndarray, W: np.ndarray, w: np.ndarray, u: np.ndarray, g: np.ndarray, H: np.ndarray,
            Z0_top: np.ndarray, top: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Largest new l1 norm of rows ``top`` for each key of a chunk (c), sign (S) and group
    of ``H`` (c x L): ``Z' = Z0 - sigma (Z0 c) Z0[h] / (1 + sigma (Z0 c)_h)``."""
    Wh = np.take_along_axis(W.T, H, axis=1)  # c x L: (Z c_j)_h
    Z0_h = Z[H] + (u[:, None] * Wh)[:, :, None] * Z[g][:, None, :]  # c x L x k
    dens = 1.0 + signs[None, :, None] * np.take_along_axis(w, H, axis=1)[:, None, :]  # c x S x L
    safe = np.abs(dens) > 1e-10
    coef = signs[None, :, None] / np.where(safe, dens, 1.0)
    wt = w[:, top]  # c x T
    rows = (Z0_top[:, :, None, None, :]
            - (wt[:, :, None, None] * coef[:, None])[..., None] * Z0_h[:, None, None])  # c x T x S x L x k
    out = np.abs(rows).sum(axis=4).max(axis=1)
    out[~safe] = np.inf
    return out


def moved_inverse(Z: np.ndarray, C: np.ndarray, g: int, s: float, j: int, h: int, sigma: float) -> np.ndarray:
    """``(CY')^{-1}`` from ``Z = (CY)^{-1}`` when key j leaves group g (sign s) for group h
    (sign sigma; h = -1: no group), by two Sherman-Morrison updates."""
    c = C[:, j]
    with np.errstate(divide="ignore", invalid="ignore"):
        return _moved(Z, c, g, s, h, sigma)


def _moved(Z: np.ndarray, c: np.ndarray, g: int, s: float, h: int, sigma: float) -> np.ndarray:
    if g >= 0:
        Zc = Z @ c
        Z = Z + s * np.outer(Zc, Z[g]) / (1.0 - s * Zc[g])
    if h >= 0:
        w = Z @ c
        Z = Z - sigma * np.outer(w, Z[h]) / (1.0 + sigma * w[h])
    return Z


def key_moves(C: np.ndarray, lab: np.ndarray, sign: np.ndarray, until: float, signed: bool = True,
              width: int = MOVE_WIDTH, checks: int = 16) -> tuple[np.ndarray, np.ndarray, bool]:
    """Greedy single-key moves lowering ``||(C Y)^{-1}||`` (``C = X A`` fixed, k x N).

    Each round screens all moves (:func:`screen`) and walks its list best first, checking
    each move in full (every row, against the current labels) and making it when it lowers
    the norm; a round ends after ``checks`` failures in a row.  Rounds repeat until one
    makes no move or ``until`` passes.  Returns the new labels and whether anything moved.
    """
    k, _ = C.shape
    lab, sign = lab.copy(), sign.copy()
    signs = np.array([1.0, -1.0]) if signed else np.array([1.0])
    moved = False
    while time.perf_counter() < until:
        try:
            Z = np.linalg.inv(C @ signed_y(lab, sign, k))
        except np.linalg.LinAlgError:
            break
        best = norm(Z)
        moves = screen(Z, C, lab, sign, signs, width)
        touched: set[int] = set()
        fails = 0
        for j, h, s_i in moves:
            if fails >= checks or time.perf_counter() >= until:
                break
            if j in touched:
                continue
            Zn = moved_inverse(Z, C, lab[j], sign[j], j, h, signs[s_i])
            value = norm(Zn)
            if np.isfinite(value) and value < best * (1 - 1e-9):
                lab[j], sign[j] = h, (signs[s_i] if h >= 0 else 1.0)
                Z, best, fails = Zn, value, 0
                touched.add(int(j))
            else:
                fails += 1
        if not touched:
            break
        moved = True
    return lab, sign, moved


def normalised(X: np.ndarray) -> np.ndarray:
    """Rows of X scaled to unit l1 norm (the key-move proxy is flat at ``XAY = I`` otherwise)."""
    return X / np.maximum(np.abs(X).sum(axis=1, keepdims=True), 1e-300)


def feasible(A: np.ndarray, X0: np.ndarray, Y: np.ndarray) -> np.ndarray | None:
    """``(X0 A Y)^{-1} X0``: an X with ``X A Y = I`` spanned by the rows of X0 (None if singular)."""
    try:
        X = np.linalg.solve(X0 @ A @ Y, X0)
    except np.linalg.LinAlgError:
        return None
    return X if np.isfinite(X).all() else None


def centred_profiles(A: np.ndarray) -> np.ndarray:
    """Square-root row profiles minus their mean profile (m x N)."""
    F = np.sqrt(A)
    return F - F.mean(axis=0)


def qr_queries(A: np.ndarray) -> np.ndarray:
    """Query order of column-pivoted QR on the centred square-root profiles (rows of A)."""
    _, _, piv = scipy.linalg.qr(centred_profiles(A).T, mode="economic", pivoting=True)
    return piv


def dev_labels(A: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each key joins the chosen query whose weight most exceeds the key's mean over the
    chosen queries (relative); keys within 10 % of their mean everywhere stay unused."""
    P = A[rows]
    R = P / np.maximum(P.mean(axis=0), 1e-300)
    lab = R.argmax(axis=0)
    lab[R.max(axis=0) < 1.1] = -1
    return lab, np.ones(A.shape[1])


def pinv_labels(A: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Key j joins the group of the largest entry of row j of ``pinv(A[rows])``, with its sign."""
    P = np.linalg.pinv(A[rows])  # N x k
    lab = np.abs(P).argmax(axis=1)
    return lab, np.where(P[np.arange(len(lab)), lab] < 0, -1.0, 1.0)


def pivot_labels(cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Singleton groups on the given keys (complete-pivoting columns); other keys unused."""
    lab = np.full(n, -1)
    lab[cols] = np.arange(len(cols))
    return lab, np.ones(n)


def selection(rows: np.ndarray, m: int) -> np.ndarray:
    """0/1 matrix (len(rows) x m) selecting ``rows``."""
    X = np.zeros((len(rows), m))
    X[np.arange(len(rows)), rows] = 1.0
    return X


def growth_pivot(A: np.ndarray, X: np.ndarray, Y: np.ndarray) -> tuple[int, int]:
    """Query and key ``(i, j)`` for a new singleton group: the best pivot of the Schur complement.

    With ``Z = (XAY)^{-1}``, ``B = AY``, ``C = XA``, the bordered matrix from a new query row i
    and key column j has Schur complement ``s_ij = (A - B Z C)_ij`` and its inverse has
    max-row-l1 norm at most ``max(||Z|| + p_j q_i / |s_ij|, q_i / |s_ij|)`` with
    ``q_i = ||(BZ)_i||_1 + 1`` and ``p_j = ||Z c_j||_inf``; the pair of the smallest bound.
    """
    B, C = A @ Y, X @ A
    Z = np.linalg.inv(C @ Y)
    BZ, ZC = B @ Z, Z @ C
    S = np.abs(A - BZ @ C)
    q = np.abs(BZ).sum(axis=1) + 1.0
    p = np.abs(ZC).max(axis=0)
    with np.errstate(divide="ignore"):
        ratio = q[:, None] / S  # m x N
    with np.errstate(invalid="ignore"):  # 0 * inf where a key has p_j = 0 and s_ij = 0
        bound = np.maximum(norm(Z) + p[None, :] * ratio, ratio)
    bound[np.isnan(bound)] = np.inf  # argmin would pick a NaN

    i, j = np.unravel_index(int(np.argmin(bound)), bound.shape)
    return int(i), int(j)


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
Unit = tuple[tuple, Callable[[float], "Candidate | None"]]


class LowerSearch:
    """Resumable search for lower certificates at several tolerances at once.

    For each eps the *target* is one above the largest k known to work (the larger of
    ``floor(eps)`` and this search's own best); targets above ``ceiling(eps)`` (or p) are
    closed.  First, per tolerance, a gallop over k with cheap starts (:meth:`leap`); then
    units of work, round-robin over the open targets: growth from the best labels one k
    below (once per improvement there), each start once, then iterated local search until
    :data:`ILS_PATIENCE` steps in a row fail.  A unit cut off by the deadline is discarded
    and redone by the next call (kept, if cut off a second time; a gallop always resumes),
    so the work done does not depend on how the time is sliced into calls.  ``add``
    receives every certificate that raises, for some eps, the largest k whose float64
    threshold exceeds eps.
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

    def __init__(self, d: Dense, eps_values: Sequence[float], add: Callable[[LowerCandidate], None],
                 ceiling: Callable[[float], int], floor: Callable[[float], int], seed: int = 0) -> None:
        self.d, self.A = d, d.A
        self.eps_values = sorted(float(e) for e in eps_values)
        self.add, self.ceiling, self.floor = add, ceiling, floor
        self.seed = seed
        self.lp = RowLP()
        self.states: dict[int, State] = {}
        self.done: set[tuple] = set()  # keys of finished units
        self.cut: set[tuple] = set()  # keys of units once cut off by a deadline
        self.exhausted: set[int] = set()  # k with nothing left to try
        self.ils_steps: dict[int, int] = {}  # finished ILS steps per k
        self.failures: dict[int, int] = {}  # ILS steps in a row without improvement per k
        self.probes: dict[tuple[str, int], float] = {}
        self._turn = 0
        self._queries: np.ndarray | None = None

    # -- driver ------------------------------------------------------------------------
    def run(self, until: float) -> bool:
        """Work until ``time.perf_counter() >= until``; hand every improved certificate to
        ``add`` as soon as it is found; True when there is nothing left to try."""
        while time.perf_counter() < until:
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
            k = max(self.floor(eps), self.best_k(eps)) + 1
            if k <= min(self.ceiling(eps), self.d.p) and k not in self.exhausted:
                out.add(k)
        return sorted(out)

    def best_k(self, eps: float) -> int:
        """Largest k of this search whose threshold exceeds eps (0 if none)."""
        return max((k for k, s in self.states.items() if s.t > eps * (1 + MARGIN)), default=0)

    def step(self, k: int, until: float) -> bool:
        """Do the next unit of work at target k (mark k exhausted when there is none);
        False when the deadline cut the unit off and it is to be redone."""
        unit = self.next_unit(k)
        if unit is None:
            self.exhausted.add(k)
            return True
        key, work = unit
        candidate = work(until)
        if time.perf_counter() >= until and (key not in self.cut or key[0] == "leap"):
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
        below = self.states.get(k - 1)
        if k == 2 and below is None and ("ones",) not in self.done:
            return ("ones",), lambda until: self.polish_labels(1, self.ones(), "ones", until)
        if self.grow and below is not None and ("grow", k, below.version) not in self.done:
            return ("grow", k, below.version), lambda until: self.grow_from(below, until)
        for name in self.starts:
            if ("start", name, k) not in self.done:
                return ("start", name, k), lambda until, name=name: self.polish_start(name, k, until)
        s = self.states.get(k)
        if self.ils and s is not None and self.failures.get(k, 0) < ILS_PATIENCE:
            n = self.ils_steps.get(k, 0)
            return ("ils", k, n), lambda until: self.ils_step(s, n, until)
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

    # -- polish ------------------------------------------------------------------------
    def polish(self, k: int, lab: np.ndarray, sign: np.ndarray, until: float, hint: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Alternate the exact LP for X and key moves with X fixed (rows normalised) until no
        key moves; return the final labels and X (None if the first LP fails).  ``hint``
        (k x m) spans a feasible X that lets the first LP solve only its worst rows."""
        Y = signed_y(lab, sign, k)
        X = self.lp.solve(self.A @ Y, until, None if hint is None else feasible(self.A, normalised(hint), Y))
        if X is None:
            return None
        while time.perf_counter() < until:
            X0 = normalised(X)
            lab2, sign2, moved = key_moves(X0 @ self.A, lab, sign, until, self.signed)
            if not moved:
                break
            Y2 = signed_y(lab2, sign2, k)
            X2 = self.lp.solve(self.A @ Y2, until, feasible(self.A, X0, Y2))
            if X2 is None:
                break
            lab, sign, X = lab2, sign2, X2
        return lab, sign, X

    def polish_labels(self, k: int, labels: tuple[np.ndarray, np.ndarray], method: str, until: float,
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

    def polish_start(self, name: str, k: int, until: float) -> Candidate | None:
        """Start ``name`` at k, polished."""
        lab, sign, hint = self.start(name, k)
        return self.polish_labels(k, (lab, sign), name, until, hint)

    def probe(self, name: str, k: int, until: float) -> float:
        """Threshold of start ``name`` at k with its exact LP ``X`` but no polish (offered at
        once; 0 when the LP fails; each (name, k) solved once unless cut off by ``until``)."""
        if (name, k) not in self.probes:
            lab, sign, hint = self.start(name, k)
            Y = signed_y(lab, sign, k)
            X = self.lp.solve(self.A @ Y, until, feasible(self.A, hint, Y))
            if X is None:
                return 0.0
            self.offer(k, lab, sign, X, name)
            self.probes[(name, k)] = threshold(self.A, X, Y)
        return self.probes[(name, k)]

    def leap(self, eps: float, until: float) -> None:
        """Largest k where a cheap start already works at eps: probes of :attr:`leap_starts`
        galloping up from the target (steps 1, 2, 4, ...), then bisection."""
        ok = lambda k: max((self.probe(name, k, until) for name in self.leap_starts), default=0.0) \
            > eps * (1 + MARGIN)  # noqa: E731
        lo = max(self.floor(eps), self.best_k(eps))
        hi = min(self.ceiling(eps), self.d.p)
        step = 1
        while lo + step <= hi and time.perf_counter() < until and ok(lo + step):
            lo += step
            step *= 2
        bad = min(lo + step, hi + 1)
        while bad - lo > 1 and time.perf_counter() < until:
            mid = (lo + bad) // 2
            lo, bad = (mid, bad) if ok(mid) else (lo, mid)

    # -- growth and local search -------------------------------------------------------
    def grow_from(self, src: State, until: float) -> Candidate | None:
        """Labels of ``src`` plus one singleton group on the growth pivot, polished at k+1."""
        i, j = growth_pivot(self.A, src.X, src.Y)
        lab, sign = src.lab.copy(), src.sign.copy()
        lab[j], sign[j] = src.k, 1.0
        hint = np.vstack([normalised(src.X), selection(np.array([i]), self.A.shape[0])])
        return self.polish_labels(src.k + 1, (lab, sign), "grow", until, hint)

    def ils_step(self, s: State, n: int, until: float) -> Candidate | None:
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

    def regroup(self, s: State, worst: bool, rng: np.random.Generator, until: float) -> Candidate | None:
        """Drop one group of ``s`` and grow a new one in its place: the worst group (the row
        of X with the largest l1 norm) if ``worst``, else a random one."""
        k = s.k
        a = int(np.abs(s.X).sum(axis=1).argmax()) if worst else int(rng.integers(k))
        lab, sign = s.lab.copy(), s.sign.copy()
        lab[lab == a] = -1
        lab[lab > a] -= 1
        X = np.delete(s.X, a, axis=0)
        i, j = growth_pivot(self.A, X, signed_y(lab, sign, k - 1))
        lab[j], sign[j] = k - 1, 1.0
        hint = np.vstack([normalised(X), selection(np.array([i]), self.A.shape[0])])
        return self.polish_labels(k, (lab, sign), "regroup", until, hint)
