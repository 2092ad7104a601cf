"""Large-k general key sides (softrank_cert.solvers.lower.smooth_key): a query selection and a
smoothed key side on ``A_I Y = I``, in the lower search above ``general_max_k``; every pair is
checked by the trusted kernel."""

from __future__ import annotations

import numpy as np
import pytest

from softrank_cert.kernel import Status, verify_lower
from softrank_cert.solvers.lower.general import KeyLP
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.lower.smooth_key import SmoothCharges, smooth_key_side
from softrank_cert.solvers.lower.starts import qr_queries, selection
from softrank_cert.solvers.work import Budget
from softrank_cert.util.dense import Dense, threshold
from tests.helpers import down_eps, w32_head


@pytest.fixture(scope="module")
def head():
    return w32_head()


def test_smoothed_key_side_is_close_to_the_lp_optimum_and_verifies(head) -> None:
    """At k = 9 the smoothed Y-step of the QR selection comes within 1 % of the exact Y-step LP
    (0.229), far above the signed groups (near 0.13), and the kernel verifies the pair."""
    op, d = head
    k = 9
    rows = qr_queries(d.A)[:k]
    X = selection(rows, d.A.shape[0])
    t_lp = threshold(d.A, X, KeyLP().solve(X @ d.A, Budget().until()))
    Y = smooth_key_side(d.A[rows], np.zeros((d.A.shape[1], k)), Budget().until(), 300)
    t = threshold(d.A, X, Y)
    assert 0.99 * t_lp < t <= t_lp * (1 + 1e-6)
    assert np.allclose(X @ d.A @ Y, np.eye(k), atol=1e-9)
    assert verify_lower(op, down_eps(t), k, X, Y).status is Status.VERIFIED
    assert verify_lower(op, f"{t * 1.001:.12f}", k, X, Y).status is Status.REJECTED
    assert smooth_key_side(d.A[rows], np.zeros((d.A.shape[1], k)), Budget(work=0.0).until()) is None


def _search(d: Dense, smooth: tuple[str, ...], got: list, work: float = 6000.0) -> LowerSearch:
    s = LowerSearch(d, [0.1, 0.25, 0.5], got.append, lambda eps: 32, lambda eps: 1)
    s.general, s.general_max_k, s.smooth = (), 4, smooth
    s.run(Budget(work=work).until())
    return s


@pytest.mark.slow
def test_large_k_family_lifts_the_search_deterministically(head) -> None:
    """With the LP family off and general_max_k lowered to 4, the large-k family lifts eps 0.25
    from the signed groups' k = 7 to 8 (as the LP family does); every handed-over pair
    verifies, and a second search gives the same pairs bit for bit."""
    op, d = head
    signed = _search(d, (), [])
    got: list = []
    s = _search(d, LowerSearch.smooth, got)
    assert (signed.best_k(0.25), s.best_k(0.25)) == (7, 8)
    smooth = [c for c in got if c.method.startswith("general_smooth_")]
    assert smooth and all(c.k > 4 for c in smooth)
    for c in got:
        assert verify_lower(op, down_eps(c.threshold), c.k, c.X, c.Y).status is Status.VERIFIED
    again: list = []
    _search(d, LowerSearch.smooth, again)
    assert [(c.k, c.method) for c in again] == [(c.k, c.method) for c in got]
    assert all(np.array_equal(a.X, b.X) and np.array_equal(a.Y, b.Y) for a, b in zip(again, got))


def test_charges_follow_the_fitted_model() -> None:
    """One evaluation at 512 x 512 and k = 100 is charged about its fitted 2.6 ms of CPU; the
    default charges are the bare flop count."""
    from softrank_cert.solvers.work import units_per_second

    seconds = SmoothCharges.for_shape(512, 512).evaluation_units(100, 512) / units_per_second(512, 512)
    assert 2.3e-3 < seconds < 2.9e-3
    assert SmoothCharges().evaluation_units(100, 512) == pytest.approx(0.25 + 8.0 * 512 * 100 ** 2 / 1e6 + 12 * 512 * 100 / 1e6)
