"""What the code's docstrings and comments (and the docs) point at exists.

* dotted module names ``softrank_cert.x.y`` (optionally ``.name`` of something defined there),
  and their short forms in backquotes, ``plumbing.campaign`` for ``softrank_cert.plumbing.campaign``;
* source paths ``solvers/candidates.py`` / ``softrank_cert/util/files.py`` in the code, and in
  backquotes the paths of packages and modules without ``.py`` (``studies/supports``);
* README headings cited as ``README "Heading"`` (also ``README, "Heading"`` and ``README's "Heading"``);
* ``docs/...`` paths named in the code.

The code is the package and the test suite's Python files, less those that plant bad references
on purpose (:data:`PLANTING`).

A stale reference after a move or a rename fails here with the file that names it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "softrank_cert"

DOTTED = re.compile(r"(?<![\w.])softrank_cert(?:\.\w+)+")
SOURCE_PATH = re.compile(r"(?<![\w/.-])((?:[A-Za-z_]\w*/)+[A-Za-z_]\w*\.py)\b")
README_HEADING = re.compile(r'(?<![\w/])README(?:\.md)?(?:,|\'s)? "([^"]+)"')
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*\w")
#: The subpackages of softrank_cert: the first part of a short dotted name or a package path.
SUBPACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
QUOTED = re.compile(r"`+([^`\n]+)`+")
SHORT_DOTTED = re.compile(rf"(?<![\w.~/-])(?:{'|'.join(SUBPACKAGES)})(?:\.[A-Za-z_]\w*)+(?![\w.])")
PACKAGE_PATH = re.compile(rf"(?<![\w.~/-])(?:softrank_cert/)?((?:{'|'.join(SUBPACKAGES)})(?:/\w+)*)/?(?![\w-])")


#: Test files whose bad references are planted on purpose (this one, the layering and docs tests).
PLANTING = {"test_references.py", "test_layering.py", "test_docs.py"}


def code_files() -> list[Path]:
    tests = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p.name not in PLANTING]
    return [*sorted(PACKAGE.rglob("*.py")), *tests]


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


#: Packages that pyproject.toml maps to another folder.
PACKAGE_DIRS = {"softrank_cert.schema": "certificates/schema"}


def _module_file(parts: list[str], root: Path) -> Path | None:
    mapped = PACKAGE_DIRS.get(".".join(parts))
    base = root / mapped if mapped else root.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _dotted_exists(name: str, root: Path) -> bool:
    """``softrank_cert.a.b[.attr]``: the longest module prefix exists, and the first name after
    it is defined (or imported) in that module."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        found = _module_file(parts[:i], root)
        if found is None:
            continue
        if i == len(parts) or parts[i].startswith("__"):  # the module itself, or a module attribute
            return True
        attr = parts[i]
        return re.search(rf"\b{re.escape(attr)}\b", found.read_text(encoding="utf-8")) is not None
    return False


def readme_headings(root: Path) -> set[str]:
    text = (root / "README.md").read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def stale_references(texts: dict[str, str], root: Path = ROOT, *, code: set[str] | None = None) -> list[str]:
    """``where: what`` for every reference in ``texts`` (name -> text) that points at nothing;
    ``code``: the names whose source paths and ``docs/`` paths are checked too (the docs' own
    paths are checked by test_docs.py)."""
    code = set(texts) if code is None else code
    headings = readme_headings(root)
    found = []
    for where, text in texts.items():
        found += [f"{where}: {m}" for m in DOTTED.findall(text) if not _dotted_exists(m, root)]
        found += [f"{where}: README \"{h}\"" for h in README_HEADING.findall(text) if h not in headings]
        for quoted in QUOTED.findall(text):
            found += [f"{where}: {m}" for m in SHORT_DOTTED.findall(quoted)
                      if not _dotted_exists(f"softrank_cert.{m}", root)]
            found += [f"{where}: {m}" for m in PACKAGE_PATH.findall(quoted)
                      if not any((root / "softrank_cert" / m).with_suffix(suffix).exists() for suffix in ("", ".py"))]
        if where in code:
            found += [f"{where}: {p}" for p in SOURCE_PATH.findall(text)
                      if not any((base / p).exists() for base in (root, root / "softrank_cert", root / "tests"))]
            found += [f"{where}: {p}" for p in DOCS_PATH.findall(text) if not (root / p.rstrip(".")).exists()]
    return found


def test_every_reference_in_the_code_and_docs_exists():
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in [*code_files(), *doc_pages()]}
    found = stale_references(texts, code={str(p.relative_to(ROOT)) for p in code_files()})
    assert not found, "references to nothing:\n" + "\n".join(found)


@pytest.mark.parametrize("planted", [
    "see :mod:`softrank_cert.plumbing.no_such_module`",
    "see :func:`softrank_cert.util.files.no_such_function`",
    'see README "A heading that is not there"',
    "see docs/no-such-page.md",
    "the loop in solvers/no_such_file.py",
    "the sweeps of ``studies/supports_sweeps``",
    "the writer of ``plumbing.no_such_module``",
    'see README, "A heading that is not there"',
    "see the README's \"A heading that is not there\"",
])
def test_a_planted_bad_reference_is_caught(planted):
    found = stale_references({"planted.py": f'"""{planted}."""\n'})
    assert len(found) == 1 and found[0].startswith("planted.py: "), found


@pytest.mark.parametrize("good", [
    "see :mod:`softrank_cert.util.files` and :func:`softrank_cert.util.files.write_text_atomic`",
    'see README "Layout: the trust boundary"',
    "see docs/design.md and solvers/candidates.py",
    "``studies/supports/``, ``softrank_cert/util``, ``kernel/verdict.decide`` and ``kernel.float64``",
    "``plumbing.campaign.Campaign``, ``docs/hf-models.md``, ``hf-models.md`` and tests/README.md, \"Docs that run\"",
])
def test_true_references_pass(good):
    assert stale_references({"good.py": f'"""{good}."""\n'}) == []



#: A bare module file name in double backquotes (``checks.py``), as a package docstring names its parts.
PART_NAME = re.compile(r"``([A-Za-z_]\w*\.py)``")


def missing_parts(init: Path) -> list[str]:
    """The bare ``name.py`` parts that the package docstring in ``init`` names and that are not in
    its folder."""
    return [name for name in PART_NAME.findall(init.read_text(encoding="utf-8")) if not (init.parent / name).exists()]


def test_package_docstrings_name_their_own_parts():
    found = [f"{init.relative_to(ROOT)}: {name}" for init in sorted(PACKAGE.rglob("__init__.py"))
             for name in missing_parts(init)]
    assert not found, "parts named in a package docstring that are not in its folder:\n" + "\n".join(found)


def test_a_missing_part_is_caught(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Parts: ``checks.py`` and ``exact.py``."""\n', encoding="utf-8")
    (tmp_path / "checks.py").write_text("", encoding="utf-8")
    assert missing_parts(tmp_path / "__init__.py") == ["exact.py"]
