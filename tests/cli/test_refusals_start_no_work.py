"""Bad arguments and inputs are refused before any work starts.

Checked by what ran, not by how long it took (CI's machine may be busy): the refused run
imported none of the modules that do the work (the solvers, the verification steps, HiGHS,
torch, transformers), printed one line, exited 2, and wrote nothing. ``softrank --help``, each
``softrank CMD --help`` and every refusal by the argument parser import less still: no study,
no solver, no scipy, no matplotlib (the command modules load lazily, ``cli/commands.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from softrank_cert.cli.commands import COMMANDS

from conftest import BAD_DIR, WORK_MODULES, assert_one_line_error, run_softrank_traced

ROOT = Path(__file__).resolve().parents[2]
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
OPERATOR = "minilm/apache2/w32/L5H2"


#: What printing help or refusing an argument never needs.
STARTUP_HEAVY = ("softrank_cert.studies", "softrank_cert.solvers", "scipy", "matplotlib", "highspy", "torch",
                 "transformers")


def _files_below(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


REFUSALS = {
    "bracket, a decimal comma": ["bracket", PANEL, "--operator", OPERATOR, "--eps", "0,25", "--out", "{out}/c.json"],
    "bracket, negative work": ["bracket", PANEL, "--operator", OPERATOR, "--eps", "0.25", "--work", "-5",
                               "--out", "{out}/c.json"],
    "bracket, unknown operator": ["bracket", PANEL, "--operator", "nope", "--eps", "0.25", "--out", "{out}/c.json"],
    "bracket, missing panel": ["bracket", "{out}/missing.npz", "--all", "--eps", "0.25", "--out", "{out}/c"],
    "bracket, out under a file": ["bracket", PANEL, "--operator", OPERATOR, "--eps", "0.25",
                                  "--out", "{out}/plain.txt/c.json"],
    "profile, tolerance out of range": ["profile", PANEL, "--operator", OPERATOR, "--eps", "1.5"],
    "budgets, bad budget": ["budgets", PANEL, "--budgets", "zero", "--eps", "0.25"],
    "geometry, unknown operator": ["geometry", PANEL, "--operator", "nope"],
}


HELP_LINES = [["--help"], [], *([name, "--help"] for name in COMMANDS)]

#: Refusals by the parser itself: a missing argument, an unknown option or command, a value its
#: type rejects.
PARSER_REFUSALS = [*([name] for name in COMMANDS), *([name, "--nosuch"] for name in COMMANDS), ["nosuch"],
                   ["--epss"], ["supports", "sphere", "--dim", "two"], ["supports", "cube", "--dim", "2"],
                   ["supports", "sphere", "--dim", "2", "--kappas", "1"],
                   ["bracket", PANEL, "--eps", "0.25", "--out", "c.json", "--jobs", "many"],
                   ["panel", "--out", "p.npz", "--widths", "8,x"]]


@pytest.mark.parametrize("argv", HELP_LINES, ids=lambda argv: " ".join(map(str, argv)) or "no arguments")
def test_help_imports_no_study_solver_scipy_or_matplotlib(argv):
    res = run_softrank_traced(*argv)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: softrank"), res.stdout[:200]
    assert res.imported_any(*STARTUP_HEAVY) == [], (argv, res.imported_any(*STARTUP_HEAVY))


@pytest.mark.parametrize("argv", PARSER_REFUSALS, ids=lambda argv: " ".join(str(a) for a in argv[:1] + argv[-2:]))
def test_parser_refusals_import_no_study_solver_scipy_or_matplotlib(argv, tmp_path):
    res = run_softrank_traced(*argv)
    assert_one_line_error(res, 2)
    assert "error:" in res.stderr
    assert res.imported_any(*STARTUP_HEAVY) == [], (argv, res.imported_any(*STARTUP_HEAVY))


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusal_of_bad_arguments_imports_no_solver_and_writes_nothing(case, tmp_path):
    (tmp_path / "plain.txt").write_text("x")
    args = [str(a).replace("{out}", str(tmp_path)) for a in REFUSALS[case]]
    res = run_softrank_traced(*args)
    assert_one_line_error(res, 2)
    assert res.imported_any(*WORK_MODULES) == [], (case, res.imported_any(*WORK_MODULES))
    assert _files_below(tmp_path) == ["plain.txt"], case


def test_verify_refuses_a_malformed_certificate_before_any_arithmetic(tmp_path):
    """Decoding is verification step 1: the refusal comes before the exact kernel, the solvers
    or HiGHS are loaded."""
    res = run_softrank_traced(BAD_DIR / "empty.json", command="softrank-verify")
    assert_one_line_error(res, 2)
    assert res.imported_any("softrank_cert.exact_kernel", "softrank_cert.solvers", "highspy", "torch") == []


def test_the_trace_sees_the_work_of_a_run_that_computes(tmp_path):
    """The check above can fail: a run that brackets does import the solvers."""
    res = run_softrank_traced("bracket", PANEL, "--operator", OPERATOR, "--eps", "0.5", "--work", "200",
                              "--out", tmp_path / "c.json")
    assert res.returncode == 0, res.stderr
    assert res.imported_any("softrank_cert.solvers")
    assert res.imported_any("scipy")
