"""Proof hygiene (issue 13, item 8): the proofs in ``proofs/`` name code that exists.

Every ``Relied on by`` list of a proof (and the "relied on by" column of ``proofs/README.md``)
names files and, after each file, identifiers in backticks; each file must exist and each
identifier must be defined in it (a module-level function, class or assignment, or
``Class.member``; ``verify_trivial_*`` is a pattern).  Every test named in a ``Checked by`` list
must exist in ``tests/``.  No lemma label may be defined twice in one proof.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROOFS = sorted((ROOT / "proofs").glob("*.md"))
_SPAN = re.compile(r"`([^`]+)`")
_PATH = re.compile(r"^[\w/]+\.py$")
_IDENT = re.compile(r"^[A-Za-z_][\w*]*(\.[A-Za-z_]\w*)?$")


def _paragraph(text: str, start: int) -> str:
    """From ``start`` to the first blank line or the next ``Checked by``."""
    rest = text[start:]
    ends = [i for i in (rest.find("\n\n"), rest.find("Checked by")) if i > 0]
    return rest[: min(ends)] if ends else rest


def _relied_on_lists() -> list[tuple[str, str]]:
    """(proof name, text) of every "Relied on by" list, and each row's last column of the README table."""
    lists = []
    for path in PROOFS:
        text = path.read_text("utf-8")
        for match in re.finditer(r"Relied on by(?::\*\*|\*\*:|:)", text):
            lists.append((path.name, _paragraph(text, match.end())))
    readme = (ROOT / "proofs" / "README.md").read_text("utf-8")
    for line in readme.splitlines():
        if line.startswith("| [") and line.count("|") >= 4:
            lists.append(("README.md table", line.rstrip("| ").rsplit("|", 1)[1]))
    return lists


def _defined_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(f"{node.name}.{member.name}")
                    elif isinstance(member, (ast.Assign, ast.AnnAssign)):
                        targets = member.targets if isinstance(member, ast.Assign) else [member.target]
                        names.update(f"{node.name}.{t.id}" for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _source(token: str) -> Path:
    return ROOT / (token if token.startswith("softrank_cert/") else "softrank_cert/" + token)


def test_every_identifier_a_proof_relies_on_exists():
    problems = []
    for proof, text in _relied_on_lists():
        current: Path | None = None
        for token in _SPAN.findall(text):
            token = token.split("(", 1)[0].strip()  # `check_claims(kernel="exact")` names check_claims
            if _PATH.match(token):
                current = _source(token)
                if not current.is_file():
                    problems.append(f"{proof}: no file {token}")
                    current = None
                continue
            if not _IDENT.match(token):
                continue  # `softrank geometry`, formulas, ...
            if current is None:
                problems.append(f"{proof}: `{token}` is not listed under a file")
                continue
            names = _defined_names(current)
            if not (token in names or ("*" in token and fnmatch.filter(names, token))):
                problems.append(f"{proof}: `{token}` is not defined in {current.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def _test_names() -> set[str]:
    names = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names.update(node.name for node in ast.parse(path.read_text("utf-8")).body
                     if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))
    return names


def test_every_test_a_proof_is_checked_by_exists():
    existing = _test_names()
    missing = []
    for path in PROOFS:
        text = path.read_text("utf-8")
        for match in re.finditer(r"Checked by(?::\*\*|\*\*:|:)", text):
            rest = text[match.end():]
            block = rest[: rest.find("\n\n")] if "\n\n" in rest else rest
            for token in _SPAN.findall(block):
                if re.fullmatch(r"test_\w+", token) and token not in existing:
                    missing.append(f"{path.name}: {token}")
    assert not missing, missing


def test_no_lemma_label_is_defined_twice():
    """Two "Lemma 0"s (README's inclusion principle and softmax-enclosure.md's causal prefix)
    made "Lemma 0" ambiguous; labels are unique across the proofs."""
    seen: dict[str, str] = {}
    duplicates = []
    for path in PROOFS:
        for label in re.findall(r"^(?:##\s*|\*)(Lemma|Theorem)\s+([A-Z]?\d*[A-Z]?\d*'?)\b", path.read_text("utf-8"), re.M):
            key = " ".join(label)
            if key in seen and key.split()[1] not in ("", "1", "2", "3", "4", "5"):
                duplicates.append(f"{key}: {seen[key]} and {path.name}")
            seen.setdefault(key, path.name)
    # Plain numbered lemmas (Lemma 1-5) are local to softmax-enclosure.md; Lemma 0 must be unique.
    zeros = [p.name for p in PROOFS if re.search(r"^(?:##\s*|\*)Lemma 0\b", p.read_text("utf-8"), re.M)]
    assert len(zeros) <= 1, zeros
    assert not duplicates, duplicates
