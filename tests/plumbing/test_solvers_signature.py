"""The solvers' signature: ``softrank_cert/solvers/__init__.py`` is all that the layers above call.

As ``kernel/__init__.py`` is the kernel's public interface, the solvers' ``__all__`` is what
plumbing, studies, the CLI and the API may use: every module of the package outside
``solvers/`` (imports inside functions included, parsed with :mod:`ast` as the layering test
reads them), every example and every benchmark script imports ``softrank_cert.solvers`` and only
names of its ``__all__``, never a submodule -- except the benchmarks of solver internals named
in :data:`INTERNALS_BENCHMARKS`.  Inside the solvers, two floors are checked too: the candidate
pool holds candidates and runs no proposer, and the lower and upper families do not import
each other (the L-BFGS loop both use is ``solvers/lbfgs.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import softrank_cert.solvers as solvers
from tests.plumbing.test_layering import PACKAGE, _module_name, _resolve, imports_of

REPO = PACKAGE.parent
SIGNATURE = "softrank_cert.solvers"
#: Benchmark scripts that measure solver internals and may import them, and what they measure.
INTERNALS_BENCHMARKS = {
    "active_rows_stages.py": "the witness search's continuation stages on active rows (upper.smooth)",
    "bench_devices.py": "the numpy and torch array back ends (backend, torch_backend)",
    "bench_lbfgs.py": "the L-BFGS loop against scipy's, and the evaluation charges (lbfgs, upper.smooth, work)",
    "bench_solvers.py": "the signed-groups-only ablation (lower.search.LowerSearch's knobs)",
    "gpu_long_context.py": "the witness search alone on a device (upper.search.UpperSearch)",
    "lower_large_k.py": "the large-k key sides beside the signed groups (lower.lp, lower.search, lower.smooth_key)",
    "truth_study.py": "the lower families against the truth of small operators (lower.*, upper.smooth, work)",
    "warm_start_stages.py": "warm starts of the witness search's stages (upper.smooth)",
}


def _solver_imports(path: Path, package: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import of ``softrank_cert.solvers`` or below in ``path``
    (``name``: the name a ``from`` import takes, None for ``import X``); relative imports are
    resolved when ``path`` is a module of ``package``."""
    inside = path.is_relative_to(package)
    module, is_package = _module_name(path, package) if inside else ("", False)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level and not inside:
                continue
            source = _resolve(module, is_package, node.level, node.module)
            if source == "softrank_cert":  # from softrank_cert import solvers (the signature) or a submodule
                found += [(node.lineno, f"softrank_cert.{alias.name}", None) for alias in node.names]
            else:
                found += [(node.lineno, source, alias.name) for alias in node.names]
    return [(line, m, n) for line, m, n in found if m == SIGNATURE or m.startswith(SIGNATURE + ".")]


def deep_imports(package: Path = PACKAGE, scripts: Iterable[Path] = (), *, modules: bool = True) -> list[str]:
    """Imports of solver internals from outside ``solvers/`` in the modules of ``package`` (unless
    not ``modules``) and in ``scripts``: a submodule, or a name that is not in the signature's
    ``__all__`` (``importlib.import_module`` of a constant name included)."""
    exported = set(solvers.__all__)
    names = {_module_name(p, package)[0] for p in package.rglob("*.py")}
    found = []
    for path in (sorted(package.rglob("*.py")) if modules else []) + sorted(scripts):
        if path.is_relative_to(package / "solvers"):
            continue
        where = path.relative_to(package.parent)
        hits = {(line, target) for line, target, _ in _solver_imports(path, package) if target != SIGNATURE}
        if path.is_relative_to(package):
            hits |= {(line, t) for line, t in imports_of(path, package, names) if t.startswith(SIGNATURE + ".")}
        found += [f"{where}:{line}: imports {target}" for line, target in sorted(hits)]
        found += [f"{where}:{line}: imports {name} from {SIGNATURE}, which is not in its __all__"
                  for line, target, name in _solver_imports(path, package)
                  if target == SIGNATURE and name is not None and name not in exported]
    return found


def _scripts() -> list[Path]:
    benchmarks = [p for p in (REPO / "benchmarks").rglob("*.py") if p.name not in INTERNALS_BENCHMARKS]
    return benchmarks + sorted((REPO / "examples").rglob("*.py")) + sorted((REPO / "certificates").rglob("*.py"))


def test_every_exported_name_exists() -> None:
    assert solvers.__all__ == sorted(solvers._EXPORTS)
    assert all(getattr(solvers, name) is not None for name in solvers.__all__)


def test_nothing_outside_the_solvers_imports_deeper_than_their_signature() -> None:
    found = deep_imports(PACKAGE, _scripts())
    assert not found, "imports of solver internals from outside solvers/:\n" + "\n".join(found)


def test_the_internals_benchmarks_are_those_that_import_internals() -> None:
    """Each benchmark on the list does import an internal (else it leaves the list)."""
    for name in INTERNALS_BENCHMARKS:
        path = REPO / "benchmarks" / name
        assert deep_imports(PACKAGE, [path], modules=False), f"benchmarks/{name} imports no solver internal: take it off the list"


def _solver_targets(path: Path) -> set[str]:
    modules = {_module_name(p, PACKAGE)[0] for p in PACKAGE.rglob("*.py")}
    return {t for _, t in imports_of(path, PACKAGE, modules)}


def test_the_pool_runs_no_proposer() -> None:
    """``candidates.py`` holds and ranks candidates; the one-shot constructions, the searches
    and the driver fill it."""
    targets = _solver_targets(PACKAGE / "solvers" / "candidates.py")
    proposers = [t for t in targets if t.startswith(("softrank_cert.solvers.lower", "softrank_cert.solvers.upper",
                                                    "softrank_cert.solvers.one_shot", "softrank_cert.solvers.bracket"))]
    assert not proposers, proposers


def test_the_lower_and_upper_families_do_not_import_each_other() -> None:
    for side, other in (("lower", "upper"), ("upper", "lower")):
        for path in sorted((PACKAGE / "solvers" / side).rglob("*.py")):
            crossing = [t for t in _solver_targets(path) if t.startswith(f"softrank_cert.solvers.{other}")]
            assert not crossing, f"{path.relative_to(REPO)} imports {crossing}"


# The check on a stand-in package with planted faults ------------------------------------------

def test_planted_deep_imports_are_caught(tmp_path: Path) -> None:
    package = tmp_path / "softrank_cert"
    for name in ("__init__.py", "solvers/__init__.py", "solvers/bracket.py", "solvers/work.py",
                 "solvers/candidates.py", "solvers/lower/__init__.py", "solvers/lower/search.py",
                 "studies/__init__.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("", encoding="utf-8")
    (package / "studies" / "fine.py").write_text(
        "from ..solvers import bracket_operator\nfrom .. import solvers\n", encoding="utf-8")
    (package / "solvers" / "lower" / "search.py").write_text("from ..work import Until\n", encoding="utf-8")
    assert deep_imports(package) == []
    (package / "studies" / "planted.py").write_text(
        "def f():\n    from ..solvers.bracket import bracket_operator\n"
        "    from ..solvers import search_lower\n"
        "    from .. import solvers\n"
        "    import softrank_cert.solvers.lower.search\n"
        "    import importlib\n    importlib.import_module('softrank_cert.solvers.work')\n", encoding="utf-8")
    script = tmp_path / "bench.py"
    script.write_text("from softrank_cert.solvers.candidates import CandidatePool\n"
                      "from softrank_cert.solvers import bracket_operator\n", encoding="utf-8")
    found = deep_imports(package, [script])
    planted = "/".join(("softrank_cert", "studies", "planted.py"))  # joined: no reference checker reads it
    assert found == [f"{planted}:2: imports softrank_cert.solvers.bracket",
                     f"{planted}:5: imports softrank_cert.solvers.lower.search",
                     f"{planted}:7: imports softrank_cert.solvers.work",
                     f"{planted}:3: imports search_lower from softrank_cert.solvers, which is not in its __all__",
                     "bench.py:1: imports softrank_cert.solvers.candidates"], found
