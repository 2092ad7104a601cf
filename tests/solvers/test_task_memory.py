"""A bracket task's memory held by design (issue 44, item 3): the kernel's fallback paths keep to the
task's check budget (softrank_cert.util.memory.task_check_plan, certio.verified), the witness search
keeps its states and its probe's vectors to its share (solvers.upper.search), and the candidate
pool drops what no tolerance can use (solvers.candidates)."""

from __future__ import annotations

import json
import subprocess
import sys
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
    assert "the task's check budget (1 GiB at most unless --max-memory is given" in (failed.failure or "")


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


def _lower_search(memory: float) -> Any:
    """A lower search at eps 0.25 holding states at k = 1..12: thresholds 0.5 up to k = 6 and 0.1
    above, so its best k is 6 and its target 7."""
    from softrank_cert.solvers.lower.search import LowerSearch
    from softrank_cert.solvers.lower.units import State

    rng = np.random.default_rng(0)
    m = n = 24
    d = Dense.of(Operator("qk", {"Q": rng.standard_normal((m, 4)), "K": rng.standard_normal((n, 4))}))
    search = LowerSearch(d, [EPS], lambda c: None, lambda eps: 12, lambda eps: 1, memory=memory)
    for k in range(1, 13):
        search.states[k] = State(k, np.zeros(n, dtype=int), np.ones(n), np.zeros((k, m)), 0.5 if k <= 6 else 0.1,
                                 "pivot")
    return search


def test_the_lower_search_forgets_the_states_no_unit_reads_again() -> None:
    """Below its target less one no unit reads a state again (but growth may read the largest one
    below the target): those go, whatever the memory, and the search's target and best k stay."""
    search = _lower_search(float("inf"))
    assert search.target(EPS) == 7
    search.forget()
    assert sorted(search.states) == [6, 7, 8, 9, 10, 11, 12]
    assert search.target(EPS) == 7 and search.best_k(EPS) == 6


def test_the_lower_search_keeps_its_states_within_its_memory() -> None:
    """Beyond its memory the states farthest above the target go, the highest first; those a unit at
    the target reads stay."""
    from softrank_cert.solvers.lower.base import state_bytes

    search = _lower_search(float("inf"))
    room = sum(state_bytes(search.states[k]) for k in (6, 7, 8))
    search = _lower_search(room)
    search.forget()
    assert sorted(search.states) == [6, 7, 8]
    search = _lower_search(1)  # no room at all: only what the target's units read
    search.forget()
    assert sorted(search.states) == [6, 7]


def test_the_lower_search_keeps_no_arrays_of_its_general_pairs() -> None:
    """A general pair's arrays go to the pool (``add``); the search keeps only its threshold."""
    search = _lower_search(float("inf"))
    added: list[Any] = []
    search.add = added.append
    X, Y = np.ones((7, 24)) / 24, np.ones((24, 7))
    search.offer_pair(7, X, Y, 0.75, "general_qr")  # above the best k 6: it goes to add
    assert search.pairs == {7: 0.75} and [c.X is X for c in added] == [True]


TSVD_CHILD = r"""
import json, resource, sys
import softrank_cert
import numpy as np
from softrank_cert.solvers.one_shot import tsvd_errors
m, n = 8, 600_000  # 38 MB arrays: a fresh one is a fresh map (glibc's mmap threshold is at most 32 MiB)
rng = np.random.default_rng(0)
A = rng.random((m, n))
svd = np.linalg.svd(A, full_matrices=False)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def fresh_temporaries(A, svd):  # the same errors with two fresh m x N temporaries per rank
    u, s, vt = svd
    R = np.array(A, dtype=np.float64)
    errors = [np.abs(R).sum(axis=1).max()]
    for i in range(len(s)):
        R -= np.outer(u[:, i] * s[i], vt[i])
        errors.append(np.abs(R).sum(axis=1).max())
    return np.array(errors)
counts = {}
for name, f in (("fresh", fresh_temporaries), ("tsvd", tsvd_errors)):
    before = faults()
    counts[name + "_errors"] = f(A, svd).tolist()
    counts[name] = faults() - before
print(json.dumps(counts))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator and ru_minflt are Linux's")
def test_the_truncated_svd_errors_reuse_one_buffer() -> None:
    """``tsvd_errors`` used to make two fresh m x N temporaries per rank (38 % of its CPU in page
    faults at width 2048); now the residual's copy and one buffer are all it maps: at 8 ranks of
    38 MB arrays it page-faults a fraction of what fresh temporaries do, for the same errors."""
    proc = subprocess.run([sys.executable, "-c", TSVD_CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["tsvd_errors"] == got["fresh_errors"] and len(got["tsvd_errors"]) == 9
    assert got["tsvd"] * 4 <= got["fresh"], {k: v for k, v in got.items() if "errors" not in k}


def test_the_truncated_svd_errors_are_those_of_the_plain_formula() -> None:
    from softrank_cert.solvers.one_shot import tsvd_errors

    rng = np.random.default_rng(1)
    A = rng.random((40, 56))
    u, s, vt = svd = np.linalg.svd(A, full_matrices=False)
    plain = [np.abs(A - (u[:, :r] * s[:r]) @ vt[:r]).sum(axis=1).max() for r in range(len(s) + 1)]
    assert np.allclose(tsvd_errors(A, svd), plain, rtol=1e-12, atol=1e-12)
