"""The fast tier's guard: a whole-suite run (``pytest`` or ``pytest -m "not slow"``, no file
arguments, no ``-k``) that passed fails when some module of ``softrank_cert`` was not loaded by
a test that ran.

A module counts as loaded by the run when it was imported while the selected tests ran, or when
a test file with at least one selected test loaded it first when pytest imported the file, or
imports it at its top, directly or through the imports that run when the named modules load (module-level ones, ``TYPE_CHECKING`` blocks and
function bodies left out; ``tests.*`` helper modules followed like the package's own).  A slow
test file's imports do not count in the fast tier, though pytest imports every file to collect
it.  Wired into pytest by ``conftest.py`` (``pytest_collectstart``, ``pytest_collectreport``,
``pytest_collection_finish`` and ``pytest_sessionfinish``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from collections.abc import Iterable

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "softrank_cert"
#: The key of an xdist worker's ``workeroutput`` that carries the modules it loaded.
WORKER_KEY = "tier_guard_loaded"


def _module_of(path: Path) -> str:
    parts = list(path.resolve().relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> list[str]:
    """Every module and package of ``softrank_cert``, dotted, sorted."""
    return sorted(_module_of(p) for p in (ROOT / PACKAGE).rglob("*.py"))


def _path_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _eager_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The statements that run when a module loads (function bodies and TYPE_CHECKING blocks not)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            yield from _eager_statements(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _eager_statements([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
        for handler in getattr(node, "handlers", []):
            yield from _eager_statements(handler.body)


def eager_imports(path: Path) -> set[str]:
    """The modules of the package and of ``tests`` that ``path`` imports when it loads, with their
    parent packages (``from X import Y`` imports ``X.Y`` too when that is a module)."""
    module = _module_of(path)
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in _eager_statements(ast.parse(path.read_text("utf-8")).body):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            start = base[:len(base) - node.level + 1] if node.level else []
            origin = ".".join([*start, *([node.module] if node.module else [])])
            names = [origin, *(f"{origin}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in found if m.split(".")[0] in (PACKAGE, "tests") and _path_of(m) is not None}


def loaded_by(files: Iterable[Path]) -> set[str]:
    """Every module that loading ``files`` loads: their eager imports, followed."""
    todo = [m for path in files for m in eager_imports(path)]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            path = _path_of(module)
            todo.extend(eager_imports(path) if path is not None else ())
    return seen


def missing_modules(covered: Iterable[str]) -> list[str]:
    """The modules of the package not in ``covered``."""
    return sorted(set(package_modules()) - set(covered))


def whole_suite(config) -> bool:
    """Whether this run is the whole suite or the whole fast tier (no narrowing by file or -k)."""
    return (config.args_source == config.ArgsSource.TESTPATHS and not config.option.keyword
            and not config.option.deselect and not getattr(config.option, "lf", False)
            and config.option.markexpr in ("", "not slow"))


class TierGuard:
    """Collects what a run loaded (see the module docstring) and fails a passing whole run that
    left a module out.

    Under pytest-xdist (``-n N``) each worker collects what it loaded and hands it to the
    controller in ``workeroutput`` (:meth:`session_finished` in the worker); the controller
    gathers them (:meth:`worker_finished`, from ``pytest_testnodedown``) and judges their union.
    """

    def __init__(self) -> None:
        self.before_run: set[str] = set()
        self.selected_files: set[Path] = set()
        self.by_file: dict[Path, set[str]] = {}  # what importing each test file loaded first
        self._before_file: set[str] = set()
        self.from_workers: set[str] | None = None  # the union of the xdist workers' loads (controller)

    def collect_start(self, collector) -> None:
        if isinstance(collector, pytest.Module):
            self._before_file = set(sys.modules)

    def collect_report(self, report) -> None:
        if report.nodeid.endswith(".py") and "::" not in report.nodeid:
            self.by_file[Path(str(report.fspath)).resolve()] = set(sys.modules) - self._before_file

    def collection_finished(self, session) -> None:
        self.before_run = set(sys.modules)
        self.selected_files = {Path(str(item.path)).resolve() for item in session.items}

    def covered(self) -> set[str]:
        """What this process's run loaded (the module docstring's rule)."""
        ran = set(sys.modules) - self.before_run
        ran.update(*(self.by_file.get(f, set()) for f in self.selected_files))
        return ran | loaded_by(f for f in self.selected_files if f.name.startswith("test_"))

    def worker_finished(self, workeroutput: dict) -> None:
        """The controller's part under xdist: add what one worker loaded."""
        self.from_workers = (self.from_workers or set()) | set(workeroutput.get(WORKER_KEY, ()))

    def session_finished(self, session, exitstatus: int) -> None:
        config = session.config
        if hasattr(config, "workerinput"):  # an xdist worker: the controller judges
            config.workeroutput[WORKER_KEY] = sorted(self.covered())
            return
        if exitstatus != 0 or not whole_suite(config):
            return
        missing = missing_modules(self.covered() if self.from_workers is None else self.from_workers)
        if missing:
            tier = "fast tier" if config.option.markexpr else "suite"
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            message = (f"tier guard: no test of this {tier} loads {len(missing)} module(s): {', '.join(missing)} "
                       f"(tests/tier_guard.py)")
            if reporter is not None:
                reporter.write_line(message, red=True)
            session.exitstatus = 1
