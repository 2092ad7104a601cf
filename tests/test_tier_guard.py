"""The fast tier's guard (tests/tier_guard.py): what it counts as loaded, and that a whole run
which leaves a module of the package unloaded fails while a complete one passes."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

from tests import tier_guard
from tests.tier_guard import TierGuard, eager_imports, loaded_by, missing_modules, package_modules

ROOT = Path(__file__).resolve().parents[1]
#: A module of the package that no file defines (joined so that no reference checker reads it as one).
PLANTED = ".".join(("softrank_cert", "never_loaded"))


def test_package_modules_are_every_file_of_the_package() -> None:
    modules = package_modules()
    assert len(modules) == len(list((ROOT / "softrank_cert").rglob("*.py")))
    assert {"softrank_cert", "softrank_cert.kernel", "softrank_cert.kernel.checks", "softrank_cert.cli.main"} <= set(modules)


def test_eager_imports_leave_out_type_checking_blocks_and_function_bodies() -> None:
    """util/dense.py names the kernel only under ``TYPE_CHECKING``; verification.py imports the
    exact kernel only inside a function, and the kernel at its top."""
    assert "softrank_cert.kernel" not in eager_imports(ROOT / "softrank_cert/util/dense.py")
    verification = eager_imports(ROOT / "softrank_cert/verification.py")
    assert "softrank_cert.kernel" in verification and "softrank_cert.exact_kernel" not in verification


def test_loading_follows_eager_imports_through_test_helpers() -> None:
    """A test file that imports ``tests.helpers`` loads what that module loads."""
    assert {"softrank_cert", "softrank_cert.errors"} <= loaded_by([ROOT / "tests/test_api.py"])
    assert "tests.helpers" in loaded_by([ROOT / "tests/solvers/test_solvers.py"])


def test_missing_modules_names_the_one_left_out() -> None:
    everything = package_modules()
    assert missing_modules(everything) == []
    assert missing_modules(m for m in everything if m != "softrank_cert.kernel.checks") == ["softrank_cert.kernel.checks"]


def _session(markexpr: str = "not slow", keyword: str = "") -> SimpleNamespace:
    args_source = SimpleNamespace(TESTPATHS="testpaths", ARGS="args")
    option = SimpleNamespace(keyword=keyword, deselect=[], markexpr=markexpr)
    config = SimpleNamespace(args_source="testpaths", ArgsSource=args_source, option=option,
                             pluginmanager=SimpleNamespace(get_plugin=lambda name: None))
    return SimpleNamespace(config=config, items=[], exitstatus=0)


def _verdicts(guard: TierGuard, loaded: list[str], monkeypatch) -> tuple[int, int]:
    """The exit statuses ``guard`` gives a passing whole run when the package is ``loaded``, then
    when it also holds a module no test loaded."""
    statuses = []
    for package in (loaded, [*loaded, PLANTED]):
        monkeypatch.setattr(tier_guard, "package_modules", lambda package=package: package)
        session = _session()
        guard.session_finished(session, 0)
        statuses.append(session.exitstatus)
    return statuses[0], statuses[1]


def test_a_whole_run_that_loads_every_module_passes_and_one_that_misses_one_fails(monkeypatch) -> None:
    loaded = sorted(m for m in sys.modules if m.startswith("softrank_cert"))
    guard = TierGuard()
    guard.collection_finished(_session())
    guard.before_run -= set(loaded)  # as if this run's tests had imported them
    assert _verdicts(guard, loaded, monkeypatch) == (0, 1)


def test_a_narrowed_or_failing_run_is_not_judged(monkeypatch) -> None:
    guard = TierGuard()
    guard.collection_finished(_session())
    monkeypatch.setattr(tier_guard, "package_modules", lambda: [PLANTED])
    for session, status in ((_session(keyword="kernel"), 0), (_session(markexpr="slow"), 0), (_session(), 1)):
        guard.session_finished(session, status)
        assert session.exitstatus == 0


def test_under_xdist_workers_hand_their_loads_to_the_controller_which_judges_the_union(monkeypatch) -> None:
    """``-n 2``: each worker puts what it loaded in ``workeroutput`` and judges nothing; the
    controller, which ran no test itself, passes a run whose workers loaded every module between
    them and fails one that left a module out."""
    loaded = sorted(m for m in sys.modules if m.startswith("softrank_cert"))
    outputs = []
    for half in (loaded[::2], loaded[1::2]):
        worker = TierGuard()
        worker.collection_finished(_session())
        worker.before_run -= set(half)  # as if this worker's tests had imported them
        session = _session()
        session.config.workerinput, session.config.workeroutput = {}, {}
        worker.session_finished(session, 0)
        assert session.exitstatus == 0 and set(half) <= set(session.config.workeroutput[tier_guard.WORKER_KEY])
        outputs.append(session.config.workeroutput)
    monkeypatch.setattr(tier_guard, "package_modules", lambda: loaded)
    controller = TierGuard()
    controller.collection_finished(_session())
    controller.before_run |= set(loaded)  # the controller itself loads nothing that counts
    for output in outputs:
        controller.worker_finished(output)
    complete = _session()
    controller.session_finished(complete, 0)
    assert complete.exitstatus == 0
    monkeypatch.setattr(tier_guard, "package_modules", lambda: [*loaded, PLANTED])
    incomplete = _session()
    controller.session_finished(incomplete, 0)
    assert incomplete.exitstatus == 1
