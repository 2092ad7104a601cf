"""A bracket task's memory held by design (issue 44, item 3): the kernel's fallback paths keep to the
task's check budget (softrank_cert.util.memory.task_check_plan, certio.verified), the witness search
keeps its states and its probe's vectors to its share (solvers.upper.search), and the candidate
pool drops what no tolerance can use (solvers.candidates)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from softrank_cert.certio.verified import verify_upper_end
from softrank_cert.kernel import Operator
from softrank_cert.solvers.candidates import CandidatePool, LowerCandidate, UpperCandidate
from softrank_cert.solvers.upper import search as upper_search
from softrank_cert.solvers.device import NUMPY_DEVICE, search_memory
from softrank_cert.solvers.upper.search import PROBE_VECTORS, STATE_VECTORS, UpperSearch, held_bytes
from softrank_cert.util.dense import Dense
from tests.helpers import THIN, thin_certificate, thin_witness
from softrank_cert.util.memory import KEPT_STATES, TASK_CHECK_CAP, CheckPlan, task_check_bytes, task_check_plan

EPS = 0.25


def test_a_task_check_runs_the_arb_balls_only_within_its_plan() -> None:
    op, U, W = thin_witness()
    n = op.p
    assert verify_upper_end(op, THIN, n, U, W, "witness") is not None  # the kernel's defaults: Arb decides
    assert verify_upper_end(op, THIN, n, U, W, "witness", plan=CheckPlan(64, True, ())) is not None
    # No Arb precision fits: the float64 paths run, cannot decide, and the end is simply not verified.
    assert verify_upper_end(op, THIN, n, U, W, "witness", plan=CheckPlan(None, True, ())) is None
    assert verify_upper_end(op, THIN, n, U, W, "witness", plan=CheckPlan(None, False, ())) is None


def test_the_task_check_budget_keeps_small_widths_as_they_were_and_caps_wide_ones() -> None:
    assert task_check_plan(512, 512).cap == 512  # the kernel's default schedule, as before
    assert task_check_plan(1024, 1024).cap == 64
    wide = task_check_plan(4096, 4096, 64, "qk")
    assert wide.cap is None and not wide.float64  # the row-block path only
    assert task_check_bytes(4096, 4096, 64, "qk") == TASK_CHECK_CAP


def test_the_witness_search_keeps_its_states_and_probe_within_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted continuation (a probe succeeds from rank 11 on): with room for one probe at rank
    <= 12 and nothing else, every probe stays at or below the cap, states probed earlier are
    dropped, and what is held (kept states and the probe) always fits; with no limit the first
    probe is above 12 and every state is kept."""
    rng = np.random.default_rng(0)
    m = n = 24
    d = Dense.of(Operator("qk", {"Q": 2.0 * rng.standard_normal((m, 8)), "K": rng.standard_normal((n, 8))}))
    vector = 8 * (m + n)
    memory = (PROBE_VECTORS + STATE_VECTORS) * vector * 12

    def run_stages(d: Dense, st: Any, *, target: float, **_: Any) -> bool:
        st.best_error = target * (0.9 if st.rank >= 11 else 1.5)
        st.stage += 1
        return bool(st.best_error <= target * (1 - 1e-9))

    monkeypatch.setattr(upper_search, "run_stages", run_stages)

    def run_once(limit: float) -> tuple[list[tuple[int, int]], UpperSearch]:
        search = UpperSearch(d, [EPS], lambda w: None, lambda eps: None, lambda eps: 1, work=1e9, memory=limit)
        state, held = search._state, []

        def spy(r: int) -> Any:
            st = state(r)
            others = sum(k for k in search.states if k != r)
            held.append((r, (PROBE_VECTORS + STATE_VECTORS) * vector * r + STATE_VECTORS * vector * others))
            st.best_error = max(st.best_error, 1.5 * EPS)  # every probe runs the scripted stages
            return st

        monkeypatch.setattr(search, "_state", spy)
        for _ in search._bisect(0, EPS, lambda: False):
            pass
        return held, search

    held, search = run_once(memory)
    probed = [r for r, _bytes in held]
    assert search.rank_cap() == 12 and probed[0] == 12 and max(probed) <= 12
    assert len(search.states) < len(set(probed))  # some were dropped
    assert all(bytes_ <= memory for _r, bytes_ in held)
    held, search = run_once(float("inf"))
    assert held[0][0] > 12 and len(search.states) == len({r for r, _bytes in held})


def test_the_pool_drops_what_no_tolerance_can_use() -> None:
    d = Dense.of(Operator("scores", {"S": np.eye(8)}))
    pool = CandidatePool(d)
    z = np.zeros((8, 1))
    for r, error in ((3, 0.2), (5, 0.05), (6, 0.3), (7, 0.01)):
        pool.add_witness(UpperCandidate(r, z, z, error, "smooth"))
    for k, t in ((1, 0.5), (2, 0.3), (4, 0.15), (5, 0.01)):
        pool.add_lower_pair(LowerCandidate(k, z.T, z, t, "pivot"))
    pool.prune([(0.1, 4, 5), (0.25, 2, 3)])  # (eps, verified lower k, verified upper r)
    # r = 3 is eps 0.25's end, r = 5 eps 0.1's; r = 6 meets no eps, r = 7 is above every end it meets.
    assert sorted(pool.witnesses) == [3, 5]
    # k = 2 is eps 0.25's end and k = 4 eps 0.1's; k = 1 is below every end, k = 5 below every eps.
    assert sorted(pool.lower_pairs) == [2, 4]


def test_the_signing_process_rechecks_a_workers_certificate_within_the_tasks_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's certificate whose upper end only the Arb balls decide: re-checked in the signing
    process within the task's check budget, it is *not checked* (a failed task, exit 5) when the
    budget affords no Arb precision, and kept when it does."""
    from softrank_cert.plumbing.bracketing import Issued, rechecked
    from softrank_cert.plumbing.parallel import TaskOutcome
    from softrank_cert.util import memory

    op, document = thin_certificate()

    def recheck() -> TaskOutcome:
        outcome = TaskOutcome(0, Issued(document, 1.0))
        return next(rechecked(iter([outcome]), [(op, "thin", {})], [THIN]))

    assert recheck().ok
    monkeypatch.setattr(memory, "TASK_CHECK_CAP", 1 << 20)  # room for no Arb precision
    failed = recheck()
    assert not failed.ok and failed.exit_code == 5 and "not checked" in (failed.failure or "")
    assert "task's check budget, which --max-memory does not change" in (failed.failure or "")  # not --max-memory's


def test_the_witness_search_drops_first_the_states_no_probe_comes_back_to() -> None:
    """States are dropped to make room for a probe: first one above every best rank (no probe comes
    back to it), then the one farthest below a best rank; the one just below it, which the squeeze
    probes next, stays (whatever the order they were probed in)."""
    rng = np.random.default_rng(0)
    m = n = 24
    d = Dense.of(Operator("qk", {"Q": 2.0 * rng.standard_normal((m, 8)), "K": rng.standard_normal((n, 8))}))
    search = UpperSearch(d, [EPS], lambda w: None, lambda eps: 20, lambda eps: 5, work=1e9)
    for r in (18, 6, 22):  # least recently probed first
        search._state(r)
    vector = 8 * (m + n)
    search.memory = ((PROBE_VECTORS + STATE_VECTORS) * 10 + STATE_VECTORS * 18) * vector
    search._state(10)
    assert list(search.states) == [18, 10]


@pytest.mark.parametrize("width", [64, 128, 256, 512, 1024])
def test_up_to_the_committed_widths_the_search_keeps_a_probe_and_forty_states_at_rank_p(width: int) -> None:
    """The committed seed-scale and family campaigns (widths <= 512, reproduced bit for bit) must not
    lose a state to the memory bound: the search's share holds a probe at rank p and 40 kept states
    at rank p (a high-rank w256 search held at most 30, all below p).  With 48 vectors of ``(m + N) p``
    it held 2 at width 256, and a synthetic w256 head's upper end at eps 0.1 rose from 194 to 195."""
    assert KEPT_STATES >= 40
    assert held_bytes((width, width), width, [width] * KEPT_STATES) <= search_memory(NUMPY_DEVICE, width, width)


def _probabilities(n: int = 12) -> Operator:
    """A ``probabilities`` operator (rows near 1, not exactly): its trivial norm claims need arithmetic."""
    A = np.random.default_rng(5).random((n, n))
    return Operator.from_probabilities(A / A.sum(axis=1, keepdims=True))


def test_a_plan_with_no_arb_and_no_float64_room_still_decides_trivial_norm_claims() -> None:
    """Beyond width ~2400 a task's plan affords neither the Arb balls nor the entrywise float64 path;
    the trivial norm claims of a ``probabilities`` operator (k = 1: ``||A|| > eps``, r = 0:
    ``||A|| <= eps``) are still decided, by the kernel's cheap float64 norm path."""
    from softrank_cert.certio.verified import trivial_needs_arithmetic, verify_lower_end

    op, plan = _probabilities(), CheckPlan(None, False, ())
    assert trivial_needs_arithmetic(op, "lower", 1) and trivial_needs_arithmetic(op, "upper", 0)
    assert verify_lower_end(op, "0.5", 1, None, None, "trivial", plan=plan) is not None
    assert verify_upper_end(op, "2", 0, None, None, "zero", plan=plan) is not None


@pytest.mark.parametrize("plan", [None, CheckPlan(None, False, ()), CheckPlan(None, True, ())])
def test_an_invalid_trivial_end_is_refused_under_any_plan(plan: CheckPlan | None) -> None:
    from softrank_cert.errors import InvalidInputError

    op = _probabilities()
    with pytest.raises(InvalidInputError):
        verify_upper_end(op, "0.5", 3, None, None, "zero", plan=plan)  # neither 0 nor p
    with pytest.raises(InvalidInputError):
        verify_upper_end(op, "2", 0, None, None, "identity", plan=plan)  # r = 0 is the zero witness


def test_the_pool_reads_a_witness_by_one_rule_everywhere() -> None:
    """A witness a hair (1e-13 relative) above eps is proposed (``upper_candidates``) and kept
    (``prune``); ``best_rank`` counts it too, so the search does not probe for a rank it has."""
    d = Dense.of(Operator("scores", {"S": np.eye(8)}))
    pool = CandidatePool(d)
    z = np.zeros((8, 1))
    pool.add_witness(UpperCandidate(3, z, z, EPS * (1 + 1e-13), "smooth"))
    pool.prune([(EPS, 1, 3)])
    assert [w.r for w in pool.upper_candidates(EPS)] == [3] and pool.best_rank(EPS) == 3
