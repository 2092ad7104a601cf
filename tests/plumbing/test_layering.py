"""Layering is one-directional: the front ends (the CLI ``softrank_cert.cli``, the Python API
``softrank_cert.api`` and the package top level that re-exports it) import the studies, the
plumbing, certificate I/O and the kernel, never the reverse.

Every other module under ``softrank_cert/`` is parsed with :mod:`ast`; no import in it --
absolute or relative, at the top or deferred inside a function, under ``TYPE_CHECKING`` or not,
``from softrank_cert import cli`` or ``importlib.import_module`` of a constant name -- may reach
a front end.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import softrank_cert

PACKAGE = Path(softrank_cert.__file__).resolve().parent
FRONT_ENDS = ("softrank_cert.cli", "softrank_cert.api")


def _module_name(path: Path, package: Path) -> tuple[str, bool]:
    """``softrank_cert.plumbing.files`` for ``plumbing/files.py`` and whether it is a package
    (``__init__.py``)."""
    parts = ["softrank_cert", *path.relative_to(package).with_suffix("").parts]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, name] if name else base)


def _is_front_end(target: str) -> bool:
    return any(target == front or target.startswith(front + ".") for front in FRONT_ENDS)


def front_end_imports(path: Path, package: Path = PACKAGE) -> list[str]:
    """``"FILE:LINE imports TARGET"`` for every import of a front end in ``path`` (a module of
    the package folder ``package``)."""
    module, is_package = _module_name(path, package)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module)
            targets = [source, *(f"{source}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__"):
                text = node.args[0].value
                level = len(text) - len(text.lstrip("."))
                targets = [_resolve(module, is_package, level, text.lstrip(".") or None) if level else text]
        for target in targets:
            if _is_front_end(target):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno} imports {target}")
                break
    return found


def back_end_modules() -> list[Path]:
    """Every module but the front ends (``cli/``, ``api.py``, the top-level ``__init__.py``)."""
    front = {PACKAGE / "api.py", PACKAGE / "__init__.py"}
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "cli" and p not in front)


def test_no_module_behind_the_front_ends_imports_one():
    modules = back_end_modules()
    assert len(modules) > 20 and PACKAGE / "studies" / "analyze.py" in modules and PACKAGE / "api.py" not in modules
    violations = [line for path in modules for line in front_end_imports(path)]
    assert not violations, "modules behind the front ends import one:\n" + "\n".join(violations)


def _plant(tmp_path: Path, source: str) -> tuple[Path, Path]:
    """``(module, package)``: ``source`` as ``softrank_cert/studies/planted.py`` of a stand-in
    package folder under ``tmp_path``."""
    package = tmp_path / "softrank_cert"
    (package / "studies").mkdir(parents=True)
    planted = package / "studies" / "planted.py"
    planted.write_text(source, encoding="utf-8")
    return planted, package


@pytest.mark.parametrize("source", [
    "from softrank_cert.cli.common import run_main\n",
    "import softrank_cert.cli.keys\n",
    "from softrank_cert import cli\n",
    "def f():\n    from ..cli.common import canonical_dump\n",
    "def f():\n    from .. import cli\n",
    "from ..cli import keys\n",
    "import importlib\nimportlib.import_module('softrank_cert.cli.main')\n",
    "import importlib\nimportlib.import_module('..cli.verify', __package__)\n",
    "from .. import api\n",
    "def f():\n    from ..api import parse_eps\n",
    "import softrank_cert.api\n",
])
def test_the_check_sees_every_spelling(tmp_path, source):
    """Each way of importing a front end, planted in a module of ``softrank_cert.studies``, is caught."""
    assert len(front_end_imports(*_plant(tmp_path, source))) == 1


@pytest.mark.parametrize("source", [
    "from ..plumbing.files import write_text_atomic\n",
    "import softrank_cert.client\n",
    "from ..clients import x\n",
    "from ..apis import x\n",
    "from ..certio.issuing import certificate_for\n",
])
def test_the_check_lets_other_imports_be(tmp_path, source):
    assert front_end_imports(*_plant(tmp_path, source)) == []
