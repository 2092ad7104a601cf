"""The lower families as units (softrank_cert.solvers.lower.units, .families): a family is a module
of proposers, the search asks them in the order of the data ``PRIORITY``, and a new family is
one more proposer there."""

from __future__ import annotations

import numpy as np
import pytest

from softrank_cert.kernel import Status, verify_lower
from softrank_cert.solvers.lower import search as lower_search
from softrank_cert.solvers.lower.base import LowerBase
from softrank_cert.solvers.lower.families import PRIORITY, general_lp, general_smooth, growth, local, signed
from softrank_cert.solvers.lower.search import LowerSearch
from softrank_cert.solvers.lower.units import Candidate, Unit
from softrank_cert.solvers.work import Budget, Until
from tests.helpers import down_eps, w32_head


@pytest.fixture(scope="module")
def head():
    return w32_head()


def test_the_priority_order_is_data() -> None:
    """The search's order of families (the old hand-written chain in LowerSearch.next_unit)."""
    assert PRIORITY == (signed.leap_unit, general_smooth.leap_unit, signed.ones_unit, growth.grow_unit,
                        signed.start_unit, general_lp.won_unit, general_smooth.won_unit, local.ils_unit,
                        general_lp.pair_unit, general_smooth.pair_unit)


def reversed_qr(told: list[tuple[int, bool]]):
    """A family of one module's worth: at each target k, once, the pivoted-QR queries' ``dev_qr``
    labels in reverse group order, polished, named ``reversed_qr``; ``after`` appends to ``told``."""
    def propose(s: LowerBase, k: int) -> Unit | None:
        key = ("reversed_qr", k)
        if key in s.done:
            return None

        def work(until: Until) -> Candidate | None:
            lab, sign, hint = signed.start(s, "dev_qr", k)
            lab = np.where(lab >= 0, k - 1 - lab, -1)
            return s.polish_labels(k, (lab, sign), "reversed_qr", until, hint[::-1])

        return Unit(key, work, after=lambda improved: told.append((k, improved)))

    return propose


def test_a_new_family_is_one_proposer_in_the_priority(head, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proposer put first in ``PRIORITY`` runs once at each target, its candidates are offered
    and handed over like any other (they verify), and its ``after`` hears whether each improved."""
    op, d = head
    told: list[tuple[int, bool]] = []
    monkeypatch.setattr(lower_search, "PRIORITY", (reversed_qr(told), *PRIORITY))
    got: list = []
    s = LowerSearch(d, [0.25], got.append, lambda eps: 8, lambda eps: 1)
    s.run(Budget(work=3000.0).until())
    ran = sorted(key[1] for key in s.done if key[0] == "reversed_qr")
    assert ran and [k for k, _ in told] == ran and any(improved for _, improved in told)
    mine = [c for c in got if c.method == "reversed_qr"]
    assert mine
    for c in mine:
        assert verify_lower(op, down_eps(c.threshold), c.k, c.X, c.Y).status is Status.VERIFIED


def test_growth_pivot_takes_a_tiny_schur_entry_without_overflow_warnings() -> None:
    """A subnormal Schur complement entry makes its bound infinite, silently (no RuntimeWarning)."""
    import warnings

    import numpy as np

    from softrank_cert.solvers.lower.starts import growth_pivot

    A = np.array([[1.0, 1.0], [0.0, 1e-310]])
    X, Y = np.array([[1.0, 0.0]]), np.array([[1.0], [0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i, j = growth_pivot(A, X, Y)  # every bound infinite here: any pivot, no warning
    assert 0 <= i < 2 and 0 <= j < 2
