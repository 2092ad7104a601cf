"""Lower pairs beyond signed key groups (softrank_cert.solvers.lower.general): a query selection
and the LP-optimal general key side, checked by the trusted kernel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from softrank_cert.kernel import Status, verify_lower
from softrank_cert.util.dense import threshold
from softrank_cert.solvers.lower.general import KeyLP, alternate, key_support
from softrank_cert.solvers.lower.lp import RowLP
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.lower.starts import qr_queries, selection
from softrank_cert.solvers.work import Budget
from tests.helpers import down_eps, w32_head


@pytest.fixture(scope="module")
def head():
    return w32_head()


def test_key_lp_is_the_optimal_general_y(head) -> None:
    """The Y-step's optimum equals an independent LP solve of ``min max_j ||Y_j||_1, C Y = I``."""
    _, d = head
    k = 5
    C = selection(qr_queries(d.A)[:k], d.A.shape[0]) @ d.A
    Y = KeyLP().solve(C, Budget().until())
    assert np.allclose(C @ Y, np.eye(k), atol=1e-8)
    n = C.shape[1]
    # variables: Y+ and Y- (row-major j, b) and t; min t
    cost = np.zeros(2 * n * k + 1)
    cost[-1] = 1.0
    eq = np.kron(C, np.eye(k))
    rows = np.kron(np.eye(n), np.ones((1, k)))
    res = linprog(cost, A_ub=np.hstack([rows, rows, -np.ones((n, 1))]), b_ub=np.zeros(n),
                  A_eq=np.hstack([eq, -eq, np.zeros((k * k, 1))]), b_eq=np.eye(k).ravel(), bounds=(0, None))
    assert np.isclose(np.abs(Y).sum(axis=1).max(), res.fun, rtol=1e-7)


def test_general_key_side_beats_signed_groups_on_a_minilm_head(head) -> None:
    """The issue's figure: at k = 9 on MiniLM L0H0 of width 32, the QR selection with the
    LP-optimal general Y reaches t = 0.229, where the signed-group search stays near 0.13;
    the pair is an ordinary (X, Y) that the kernel verifies."""
    op, d = head
    k = 9
    X, Y, t = alternate(d.A, selection(qr_queries(d.A)[:k], d.A.shape[0]), KeyLP(), RowLP(), Budget().until())
    assert 0.225 < t < 0.235 and np.isclose(t, threshold(d.A, X, Y))
    assert verify_lower(op, down_eps(t), k, X, Y).status is Status.VERIFIED
    assert verify_lower(op, f"{t * 1.001:.12f}", k, X, Y).status is Status.REJECTED
    signed = LowerSearch(d, [0.1], lambda c: None, lambda eps: k, lambda eps: 1)
    signed.general = ()
    signed.run(Budget(work=3000.0).until())
    assert signed.states[k].t < 0.75 * t


def test_key_support_restriction_keeps_a_valid_pair(head) -> None:
    """Rows of Y outside the key subset are zero; the pair still verifies, and its threshold is
    at most the unrestricted one."""
    op, d = head
    k = 6
    C = selection(qr_queries(d.A)[:k], d.A.shape[0]) @ d.A
    keys = key_support(C, 12)
    assert len(keys) == 12 and len(set(keys.tolist())) == 12
    lp = KeyLP()
    X = selection(qr_queries(d.A)[:k], d.A.shape[0])
    Y_cut = lp.solve(C, Budget().until(), keys)
    Y_full = lp.solve(C, Budget().until())
    outside = np.setdiff1d(np.arange(d.A.shape[1]), keys)
    assert np.all(Y_cut[outside] == 0.0)
    t_cut, t_full = threshold(d.A, X, Y_cut), threshold(d.A, X, Y_full)
    assert 0 < t_cut <= t_full * (1 + 1e-9)
    assert verify_lower(op, down_eps(t_cut), k, X, Y_cut).status is Status.VERIFIED


def test_general_pairs_raise_the_search_and_are_charged(head) -> None:
    """In the lower search, general pairs lift eps 0.25 on this head from the signed groups'
    k = 7 to k = 8, every handed-over pair verifies, and the LPs spend the work budget."""
    op, d = head
    got = []
    budget = Budget(work=6000.0)
    s = LowerSearch(d, [0.25], got.append, lambda eps: 8, lambda eps: 1)
    s.run(budget.until())
    assert s.best_k(0.25) == 8 and any(c.method.startswith("general_") for c in got)
    for c in got:
        assert verify_lower(op, down_eps(c.threshold), c.k, c.X, c.Y).status is Status.VERIFIED
    empty = Budget(work=0.0)
    assert KeyLP().solve(selection(qr_queries(d.A)[:3], d.A.shape[0]) @ d.A, empty.until()) is None
