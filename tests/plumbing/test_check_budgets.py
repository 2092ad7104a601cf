"""Every campaign's kernel checks keep to the task's check budget, which the estimate ``--max-memory``
admits tasks by counts (issue 44, item 3): the audit's supplied certificates and the budgets pass
inside a task (softrank_cert.util.memory.operator_check_limit / operator_check_plan), the signing
process's re-check of what a worker returns (audit, budgets, supports as for bracket), and the
local pool keeps that re-check's budget free beside the running tasks (run_tasks' ``reserve``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from softrank_cert.kernel import Operator
from softrank_cert.plumbing import parallel
from softrank_cert.plumbing.parallel import TaskOutcome, run_tasks
from softrank_cert.util import memory
from softrank_cert.util.memory import operator_check_limit, operator_check_plan, recheck_reserve, task_check_limit
from tests.helpers import THIN, thin_certificate


def test_the_local_pool_keeps_the_recheck_reserve_free(tmp_path: Path) -> None:
    """Three tasks of 40 that may use 100 together beside a re-check reserve of 30 run one at a time
    (40 + 40 + 30 > 100): each holds an exclusive lock for its whole run and fails at once if another
    task holds it (no clock is read).  Without the reserve two of them would run together."""
    lock = ["flock", "--nonblock", "--conflict-exit-code", "3", str(tmp_path / "lock"), "sleep", "0.4"]
    outcomes = list(run_tasks(subprocess.check_call, [(lock,)] * 3, jobs=3, memory=[40, 40, 40],
                              max_memory=100, attempts=1, reserve=30))
    assert [o.ok for o in outcomes] == [True] * 3, [o.failure for o in outcomes]


def _ops() -> list[Operator]:
    rng = np.random.default_rng(0)
    return [Operator("scores", {"S": rng.standard_normal((n, n))}) for n in (8, 16)]


def test_a_bracket_campaign_reserves_its_rechecks_beside_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    from softrank_cert.plumbing.bracketing import run_brackets

    seen: dict[str, Any] = {}

    def spy(fn: Any, tasks: Any, **options: Any) -> Any:
        seen.update(options)
        return iter(())

    monkeypatch.setattr(parallel, "run_tasks", spy)
    ops = _ops()
    list(run_brackets([(op, f"op{i}", {}) for i, op in enumerate(ops)], ["0.25"], work=None, budget_seconds=None,
                      jobs=2))
    assert seen["reserve"] == recheck_reserve(ops) == int(task_check_limit(16, 16)) > 0


def _captured_limit(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Patch the one re-check of a worker's answer to record the memory limit it is given."""
    from softrank_cert.plumbing import campaign

    seen: dict[str, Any] = {}

    def spy(outcome: Any, name: str, op: Any, provenance: Any, certificates: Any, rebuild: Any,
            memory_limit: int | None = None) -> Any:
        seen["limit"] = memory_limit
        return outcome

    monkeypatch.setattr(campaign, "rechecked_outcome", spy)
    return seen


def test_audit_and_budgets_recheck_a_workers_answer_within_the_tasks_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from softrank_cert.studies.audit.reproduction import OperatorAudit
    from softrank_cert.studies.audit.table import rechecked as audit_rechecked
    from softrank_cert.studies.budgets.campaign import _rechecked as budgets_rechecked
    from softrank_cert.studies.supports.campaign import _rechecked as supports_rechecked
    from softrank_cert.util.operator_files import NamedOperator

    op = _ops()[1]
    named = NamedOperator("op", op, {})
    seen = _captured_limit(monkeypatch)
    audit_task = ("op", None, [], {}, ".", Path("ev/op.json"), None, None, {}, False)
    audit_rechecked(TaskOutcome(0, OperatorAudit([])), named, audit_task)
    assert seen.pop("limit") == operator_check_limit(op)
    budgets_task = (None, "op", "op", "0.25", [2], None, True, True, {}, None)
    budgets_rechecked(TaskOutcome(0, None), (named, "op"), budgets_task)
    assert seen.pop("limit") == operator_check_limit(op)
    supports_rechecked(TaskOutcome(0, {}), "op", op, "0.25", {})
    assert seen.pop("limit") == operator_check_limit(op)


def test_an_audits_supplied_certificate_is_checked_as_softrank_verify_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supplied certificate whose witness only the Arb balls decide is confirmed also where the
    task's check budget affords no Arb precision (as at width >= ~900 with the 1 GiB cap): it was
    not made within this task's budget, and the user's ``softrank-verify`` would confirm it."""
    from softrank_cert.studies.audit.reproduction import audit_rows
    from softrank_cert.studies.audit.rows import PublishedRow

    op, document = thin_certificate("op")
    raw = json.dumps(document).encode()
    row = PublishedRow(1, "op", THIN, 1, op.p, "thin.json")

    def audit() -> Any:
        return audit_rows("op", op, [row], {"thin.json": raw}, ".", Path("ev/op.json"), None,
                          lambda plain: None, {})

    assert [r.status for r in audit().rows] == ["confirmed"]
    monkeypatch.setattr(memory, "TASK_CHECK_CAP", 1 << 20)  # room for no Arb precision
    assert [r.status for r in audit().rows] == ["confirmed"]


def test_the_budgets_pass_checks_within_the_tasks_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    import softrank_cert.solvers as solvers
    from softrank_cert.studies.budgets.operators import sharpen

    plans: list[Any] = []

    def spy(op: Any, attempts: Any, plan: Any = None) -> None:
        list(attempts)
        plans.append(plan)
        return None

    monkeypatch.setattr(solvers, "first_verified", spy)
    op = _ops()[1]
    sharpen(op, "0.25", [2, 3], (1, "trivial"), (op.p, "identity"))
    assert plans and all(plan == operator_check_plan(op) for plan in plans)


def test_a_given_max_memory_with_room_lets_the_checks_use_it() -> None:
    """By default a task's checks keep to 1 GiB (at width 1024 the Arb balls stop at 64 bits); a
    ``--max-memory`` with room for more lets them use what it leaves beside the task (the whole
    512-bit schedule at 1024 within 8G), and the task's estimate never exceeds what was given
    (nor, with less room, what it was)."""
    from softrank_cert.util.memory import bracket_task_bytes, parse_size, task_check_plan

    assert task_check_plan(1024, 1024).cap == 64
    assert task_check_plan(1024, 1024, max_memory=parse_size("8G")).cap == 512
    for width in (1024, 2048, 4096):
        default = bracket_task_bytes(width, width, 64, None, "qk")
        for given in ("2G", "8G", "16G"):
            for device in (None, "cpu"):
                size = parse_size(given)
                need = bracket_task_bytes(width, width, 64, device, "qk", size)
                assert need <= max(size, bracket_task_bytes(width, width, 64, device, "qk")) and need >= default


def test_a_bracket_campaigns_tasks_and_rechecks_use_the_given_max_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The witness that only the Arb balls decide, in a task whose default budget affords none: its
    re-check is *not checked* without a given ``--max-memory`` and passes with one that has room."""
    from softrank_cert.plumbing.bracketing import Issued, rechecked
    from softrank_cert.util.memory import parse_size

    op, document = thin_certificate()
    monkeypatch.setattr(memory, "TASK_CHECK_CAP", 1 << 20)  # the default budget: room for no Arb precision

    def recheck(given: int | None) -> TaskOutcome:
        outcome = TaskOutcome(0, Issued(document, 1.0))
        return next(rechecked(iter([outcome]), [(op, "thin", {})], [THIN], [operator_check_limit(op, given)]))

    failed = recheck(None)
    assert not failed.ok and failed.exit_code == 5
    assert operator_check_plan(op, parse_size("1G")).cap == 512
    assert recheck(parse_size("1G")).ok


def test_softrank_bracket_passes_a_given_max_memory_to_its_tasks(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    from softrank_cert.plumbing import bracket_campaign
    from tests.helpers import softrank_in_process, write_qk_panel

    seen: list[Any] = []

    def spy(*args: Any, **options: Any) -> Any:
        seen.append(options.get("given_memory"))
        raise KeyboardInterrupt  # stop there: only the arguments are tested

    monkeypatch.setattr(bracket_campaign, "run_brackets", spy)
    panel = write_qk_panel(tmp_path / "p.npz", ["tiny/doc/w8/L0H0", "tiny/doc/w8/L0H1"], seed=1)
    for extra, given in (([], None), (["--max-memory", "3G"], 3 << 30)):
        softrank_in_process("bracket", panel, "--operator", "tiny/doc/w8/L0H0", "--eps", "0.25",
                            "--out", tmp_path / f"c{len(seen)}.json", *extra)
        softrank_in_process("bracket", panel, "--all", "--eps", "0.25", "--out", tmp_path / f"d{len(seen)}", *extra)
        assert seen[-2:] == [given, given]


def test_an_over_stated_max_memory_does_not_raise_the_check_cap_beyond_the_machine() -> None:
    """``--max-memory 64T`` on this machine: the task's checks may use at most the safe share of its
    memory, so a check cannot run it out of memory, nor a task's estimate exceed its limit."""
    from types import SimpleNamespace

    from softrank_cert.cli.common import given_memory

    assert given_memory(SimpleNamespace(max_memory=None)) is None
    assert given_memory(SimpleNamespace(max_memory="1G")) == 1 << 30
    assert given_memory(SimpleNamespace(max_memory="64T")) == memory.default_max_memory()
    assert given_memory(SimpleNamespace(max_memory="64T", scheduler="tcp://x:8786")) == 64 << 40
