"""The documentation a newcomer follows: every link and named file exists, the generated option
lists match the code, the README stays a front page, and nothing cites a file outside the
repository."""

from __future__ import annotations

import glob
import importlib.util
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Hand-written pages a reader follows (generated result tables under benchmarks/results are not).
PAGES = sorted({ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "tests" / "README.md",
                *ROOT.glob("docs/*.md"), *ROOT.glob("proofs/*.md"), *ROOT.glob("certificates/**/README.md"),
                *ROOT.glob("examples/**/README.md")})
#: Top-level folders whose paths, written in backticks, must name files or folders that exist.
TOP = ("softrank_cert/", "tests/", "benchmarks/", "docs/", "proofs/", "certificates/", "examples/", ".ci/")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
#: A path with one of these is a pattern for the reader to fill in, not a file name.
PLACEHOLDER = re.compile(r"[<>]|\.\.\.|\$|\b[A-Z][A-Z0-9_]{2,}\b|\bN\b|\bKIND\b")


def _expand_braces(path: str) -> list[str]:
    """``a.{json,md}`` -> ``a.json``, ``a.md`` (one level, possibly several groups)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    literal, options = parts[0::2], [group.split(",") for group in parts[1::2]]
    return ["".join(itertools.chain.from_iterable(zip(literal, combo + ("",))))
            for combo in itertools.product(*options)] if options else [path]


def _exists(base: Path, name: str) -> bool:
    for candidate in _expand_braces(name):
        target = (base / candidate) if not candidate.startswith(TOP) else ROOT / candidate
        if any(ch in candidate for ch in "*?["):
            if not glob.glob(str(target), recursive=True):
                return False
        elif not target.exists():
            return False
    return True


def _relative_links(page: Path) -> list[str]:
    links = []
    for target in LINK.findall(page.read_text("utf-8")):
        target = target.split("#", 1)[0]
        if target and not re.match(r"[a-z]+:", target):
            links.append(target)
    return links


def _named_paths(page: Path) -> list[str]:
    names = []
    for token in CODE.findall(page.read_text("utf-8")):
        token = token.rstrip(".,;:")
        if token.startswith(TOP) and not PLACEHOLDER.search(token) and "::" not in token:
            names.append(token.split(":", 1)[0])
    return names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_exists(page):
    missing = [t for t in _relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_repository_path_exists(page):
    if page.name == "CHANGELOG.md":
        pytest.skip("the changelog names files as they were when each change was made")
    missing = [t for t in _named_paths(page) if not _exists(page.parent, t)]
    assert not missing, f"{page.relative_to(ROOT)} names missing paths: {missing}"


def test_the_path_checks_catch_a_missing_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [this](nowhere.md), `softrank_cert/nowhere.py`, `docs/{design,nowhere}.md` and "
                    "`certs/NAME.json` (a pattern).\n", "utf-8")
    assert _relative_links(page) == ["nowhere.md"]
    names = _named_paths(page)
    assert names == ["softrank_cert/nowhere.py", "docs/{design,nowhere}.md"]
    assert not any(_exists(tmp_path, n) for n in names)
    assert _exists(tmp_path, "docs/{design,tutorial}.md") and _exists(tmp_path, "benchmarks/results/*.json")


def test_generated_option_lists_match_the_code():
    spec = importlib.util.spec_from_file_location("make_cli_help", ROOT / "docs" / "make_cli_help.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "cli-help.md").read_text("utf-8") == module.render(), \
        "docs/cli-help.md is stale: run python docs/make_cli_help.py"


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200; move material to docs/)"
    text = "\n".join(lines)
    assert text.index("## Set-up: two commands") < text.index("## One worked example")
    assert "docs/design.md" in text


#: Citations of the design and solver notes that lived outside the repository (written with
#: character classes so that this file does not itself cite them).
OUTSIDE_CITATIONS = (r"DESIG[N]\.md", r"\bDESIG[N] section", r"SOLVER-NOTE[S]", r"\.\./share[d]", r"\bshared/see[d]")


def test_nothing_cites_a_design_outside_the_repository():
    """docs/design.md is the normative design: no code, test or page cites one outside the repository."""
    offenders = []
    for path in itertools.chain(ROOT.glob("softrank_cert/**/*.py"), ROOT.glob("tests/**/*.py"),
                                ROOT.glob("benchmarks/*.py"), ROOT.glob("examples/**/*.py"), PAGES):
        if path.name == "CHANGELOG.md":
            continue
        text = path.read_text("utf-8")
        for pattern in OUTSIDE_CITATIONS:
            if re.search(pattern, text):
                offenders.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert not offenders, offenders


def test_the_readme_profile_figures_are_those_of_the_committed_run():
    """The README quotes the committed profile run (issue: figures that match their files)."""
    import json

    readme = " ".join((ROOT / "README.md").read_text("utf-8").split())
    run = json.loads((ROOT / "docs" / "profile-minilm-apache2-w128-L5H2.json").read_text("utf-8"))
    at = {b["eps"]: (b["lower"], b["upper"]) for b in run["brackets"]}
    low, up = at["0.1"]
    assert f"certifies `[{low}, {up}]` at eps 0.1" in readme
    from fractions import Fraction

    six = next(r for r in run["resolved"] if Fraction(r["from"]) <= Fraction("0.25") <= Fraction(r["to"]))
    assert f"`r_eps = {six['rank']}` exactly at eps 0.25 (on `[{six['from']}, {six['to']}]`)" in readme
    assert f"in {len(run['lower']) + len(run['upper'])} verified steps" in readme
    assert f"default work ({int(run['budget_work']):,} units" in readme and run["budget_seconds"] is None


def _readme_words() -> str:
    return " ".join((ROOT / "README.md").read_text("utf-8").split())


def test_the_readme_adversarial_counts_are_those_of_the_committed_campaign():
    """False or tampered certificates and true controls are counted apart, as the campaign counts them."""
    import json

    run = json.loads((ROOT / "benchmarks" / "results" / "adversarial.json").read_text("utf-8"))
    controls = sum(run["controls_true_accepted"].values())
    assert run["accepted"] == 0 and run["adversarial_certificates"] + controls == run["certificates_total"]
    readme = _readme_words()
    checkers = {3: "three", 4: "four", 5: "five"}[len(run["checkers"])]
    assert (f"campaign of {run['adversarial_certificates']:,} false or tampered certificates through "
            f"{checkers} checkers") in readme
    assert f"while all {controls:,} true controls run beside them were" in readme


def test_the_readme_example_seconds_are_the_committed_cpu_seconds():
    import json

    run = json.loads((ROOT / "benchmarks" / "results" / "readme_example.json").read_text("utf-8"))
    readme = _readme_words()
    assert f"a median {run['cpu_median_seconds']} CPU seconds" in readme and "`benchmarks/results/readme_example.json`" in readme
    assert all(run["profile_equals_committed"]), "the committed timing run did not reproduce the committed profile"


def test_no_page_quotes_a_test_count_that_goes_stale():
    """A count of passed tests is stale after the next test: tests/README.md says how to count instead."""
    for page in (ROOT / "README.md", ROOT / "tests" / "README.md"):
        found = re.findall(r"\b[\d,]+ passed\b", page.read_text("utf-8"))
        assert not found, f"{page.relative_to(ROOT)} quotes {found}: say how to count instead"
