"""The package's declared layers hold for every module, imports inside functions included.

The order is written once, in the package docstring (``softrank_cert/__init__.py``, the numbered
"Layers" list), and parsed from there: a module may import a module of a lower layer, or one of
its own package on its own layer, and nothing else of ``softrank_cert`` (the front ends, the top
layer, may import one another). Every module is parsed
with :mod:`ast`: absolute and relative imports, at the top or deferred inside a function, under
``TYPE_CHECKING`` or not, ``from softrank_cert import cli`` and ``importlib.import_module`` of a
constant name. The module graph (all those imports) has no cycle, every import names a module
that exists, and every folder below the top one holds one layer only (the top folder holds
modules that are each a layer entry of their own).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import softrank_cert

PACKAGE = Path(softrank_cert.__file__).resolve().parent
LAYER_LINE = re.compile(r"^\s*(\d+)\.\s+(.*?)\s+--\s")


def declared_layers(doc: str | None = softrank_cert.__doc__) -> dict[str, int]:
    """``{"softrank_cert.kernel": 1, ...}`` from the docstring's numbered ``Layers`` list
    (each line ``N. ``name``, ``name`` -- what it is``; names relative to the package, the
    package itself written ``softrank_cert``)."""
    text = doc[doc.index("Layers"):]
    layers: dict[str, int] = {}
    for line in text.splitlines():
        match = LAYER_LINE.match(line)
        if match:
            for name in re.findall(r"``([\w.]+)``", match.group(2)):
                layers["softrank_cert" if name == "softrank_cert" else f"softrank_cert.{name}"] = int(match.group(1))
    return layers


def _module_name(path: Path, package: Path) -> tuple[str, bool]:
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


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def imports_of(path: Path, package: Path, modules: set[str], *, runtime_only: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` for every module of the package that ``path`` imports (``from X import
    Y`` counts as importing ``X.Y`` when that is a module, else ``X``); ``runtime_only``: leave
    out the imports under ``if TYPE_CHECKING:`` (they never run)."""
    module, is_package = _module_name(path, package)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = _type_checking_only(tree) if runtime_only else set()
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module)
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__"):
                text = node.args[0].value
                level = len(text) - len(text.lstrip("."))
                targets = [_resolve(module, is_package, level, text.lstrip(".") or None) if level else text]
        found += [(node.lineno, t) for t in targets if t == "softrank_cert" or t.startswith("softrank_cert.")]
    return found


def layer_of(module: str, layers: dict[str, int]) -> tuple[str, int]:
    """The declared entry (longest matching name) and layer of ``module``."""
    for name in sorted(layers, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name, layers[name]
    raise AssertionError(f"{module} is in no declared layer: add it to the package docstring's Layers list")


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def violations(package: Path = PACKAGE, layers: dict[str, int] | None = None) -> list[str]:
    layers = declared_layers() if layers is None else layers
    paths = sorted(package.rglob("*.py"))
    modules = {_module_name(p, package)[0] for p in paths}
    front_ends = max(layers.values())
    found = []
    for path in paths:
        module = _module_name(path, package)[0]
        entry, level = layer_of(module, layers)
        for line, target in imports_of(path, package, modules):
            target_entry, target_level = layer_of(target, layers)
            same_package = _package(target) == _package(module)
            if target_level < level or (target_level == level and (same_package or target_entry == entry
                                                                   or level == front_ends)):
                continue
            found.append(f"{path.relative_to(package.parent)}:{line}: {module} (layer {level}) imports {target} "
                         f"(layer {target_level})")
    return found


def cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Every import cycle between modules that run (as found by a depth-first search; imports
    under ``if TYPE_CHECKING:`` never run and do not count)."""
    paths = sorted(package.rglob("*.py"))
    modules = {_module_name(p, package)[0] for p in paths}
    graph = {_module_name(p, package)[0]: sorted({t for _, t in imports_of(p, package, modules, runtime_only=True)
                                                   if t in modules})
             for p in paths}
    # A package's own __init__ importing its submodules is how re-exports work, not a cycle.
    for module, targets in graph.items():
        graph[module] = [t for t in targets if not module.startswith(t + ".")]
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    return found


def missing_imports(package: Path = PACKAGE) -> list[str]:
    """Imports of ``softrank_cert`` modules that do not exist (a stale name after a move)."""
    paths = sorted(package.rglob("*.py"))
    modules = {_module_name(p, package)[0] for p in paths}
    return [f"{path.relative_to(package.parent)}:{line}: {target}"
            for path in paths for line, target in imports_of(path, package, modules) if target not in modules]


def shared_folders(package: Path = PACKAGE, layers: dict[str, int] | None = None) -> list[str]:
    """Folders that hold modules of more than one layer, and top-level modules that are not a
    layer entry of their own (one folder a layer: the folder layout shows the layers)."""
    layers = declared_layers() if layers is None else layers
    by_folder: dict[Path, set[int]] = {}
    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package)[0]
        entry, level = layer_of(module, layers)
        if path.parent == package:
            if entry != module:
                found.append(f"{path.relative_to(package.parent)}: top-level module in layer {level} under {entry}")
            continue
        by_folder.setdefault(path.parent, set()).add(level)
    found += [f"{folder.relative_to(package.parent)}/ holds layers {sorted(levels)}"
              for folder, levels in sorted(by_folder.items()) if len(levels) > 1]
    return found


def test_the_declared_layers_cover_the_package():
    layers = declared_layers()
    assert layers["softrank_cert.kernel"] < layers["softrank_cert.exact_kernel"] < layers["softrank_cert.certio"] \
        < layers["softrank_cert.verification"] < layers["softrank_cert.solvers"] < layers["softrank_cert.plumbing"] \
        < layers["softrank_cert.studies"] < layers["softrank_cert.cli"] == layers["softrank_cert.api"]
    for path in PACKAGE.rglob("*.py"):
        layer_of(_module_name(path, PACKAGE)[0], layers)


def test_every_import_goes_down_the_declared_layers():
    found = violations()
    assert not found, "imports against the declared layers:\n" + "\n".join(found)


def test_every_import_names_a_module_that_exists():
    found = missing_imports()
    assert not found, "imports of modules that do not exist:\n" + "\n".join(found)


def test_one_folder_holds_one_layer():
    found = shared_folders()
    assert not found, "folders shared between layers:\n" + "\n".join(found)


def test_no_import_cycles():
    found = cycles()
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


# The checks themselves, on a stand-in package -------------------------------------------------

STAND_IN_LAYERS = {"softrank_cert.errors": 0, "softrank_cert.kernel": 1, "softrank_cert.solvers": 2,
                   "softrank_cert.geometry": 2, "softrank_cert.studies": 3, "softrank_cert.cli": 4,
                   "softrank_cert.api": 4, "softrank_cert": 4}


def _plant(tmp_path: Path, source: str, where: str = "kernel") -> Path:
    package = tmp_path / "softrank_cert"
    for name in ("kernel", "solvers", "geometry", "studies", "cli"):
        (package / name).mkdir(parents=True, exist_ok=True)
        (package / name / "__init__.py").write_text("", encoding="utf-8")
        (package / name / "common.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "api.py").write_text("", encoding="utf-8")
    (package / "errors.py").write_text("", encoding="utf-8")
    (package / where / "planted.py").write_text(source, encoding="utf-8")
    return package


@pytest.mark.parametrize("source", [
    "from softrank_cert.cli.common import run_main\n",
    "import softrank_cert.studies.common\n",
    "from softrank_cert import cli\n",
    "def f():\n    from ..cli.common import x\n",
    "def f():\n    from .. import api\n",
    "from ..solvers import common\n",
    "import importlib\nimportlib.import_module('softrank_cert.cli.common')\n",
    "import importlib\nimportlib.import_module('..studies.common', __package__)\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..studies.common import x\n",
    "import softrank_cert\n",
])
def test_the_check_sees_every_spelling_of_an_upward_import(tmp_path, source):
    found = violations(_plant(tmp_path, source), STAND_IN_LAYERS)
    assert len(found) == 1 and "planted" in found[0], found


def test_the_check_refuses_a_sideways_import_between_packages_of_one_layer(tmp_path):
    found = violations(_plant(tmp_path, "from ..geometry import common\n", where="solvers"), STAND_IN_LAYERS)
    assert len(found) == 1


@pytest.mark.parametrize("source", [
    "from ..errors import InvalidInputError\n",
    "from . import common\n",
    "from .common import x\n",
    "import numpy\n",
])
def test_the_check_lets_downward_and_local_imports_be(tmp_path, source):
    assert violations(_plant(tmp_path, source), STAND_IN_LAYERS) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = _plant(tmp_path, "from . import common\n")
    (package / "kernel" / "common.py").write_text("def f():\n    from . import planted\n", encoding="utf-8")
    assert any("softrank_cert.kernel.planted" in c for c in cycles(package))


def test_an_annotation_only_import_is_no_cycle(tmp_path):
    package = _plant(tmp_path, "from . import common\n")
    (package / "kernel" / "common.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .planted import X\n", encoding="utf-8")
    assert cycles(package) == []


# The checks on a copy of the real package with one planted fault -----------------------------

def _copy(tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "softrank_cert"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_planted_upward_import_in_the_real_package_is_caught(tmp_path):
    copy = _copy(tmp_path)
    assert violations(copy) == []
    (copy / "util" / "planted.py").write_text("def f():\n    from ..studies.panel_names import name_fields\n",
                                              encoding="utf-8")
    found = violations(copy)
    assert len(found) == 1 and "softrank_cert.util.planted (layer 3) imports softrank_cert.studies.panel_names" in found[0]


def test_a_planted_import_of_a_missing_module_is_caught(tmp_path):
    copy = _copy(tmp_path)
    assert missing_imports(copy) == []
    (copy / "plumbing" / "planted.py").write_text("from ..plumbing.no_such_module import write_text_atomic\n", encoding="utf-8")
    assert missing_imports(copy) == ["softrank_cert/plumbing/planted.py:1: softrank_cert.plumbing.no_such_module"]


def test_a_folder_shared_by_two_layers_is_caught(tmp_path):
    copy = _copy(tmp_path)
    assert shared_folders(copy) == []
    layers = {**declared_layers(), "softrank_cert.plumbing.planted": 3}
    (copy / "plumbing" / "planted.py").write_text("", encoding="utf-8")
    assert shared_folders(copy, layers) == ["softrank_cert/plumbing/ holds layers [3, 7]"]
    (copy / "planted.py").write_text("", encoding="utf-8")
    assert any("softrank_cert/planted.py: top-level module" in f for f in shared_folders(copy, layers))
