"""Failures that show: a bug inside the bracket path is one line and exit 4, and under
``SOFTRANK_DEBUG=1`` it is the exception with its traceback (also when the task ran in this
process, where the task runner turns failures into values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from softrank_cert.errors import (EXIT_INTERNAL, InvalidInputError, KernelLimitError, describe, OutputWriteError)

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"

#: Runs ``softrank bracket`` with the driver's search replaced by one that raises RuntimeError.
INJECTED = """
import sys
import softrank_cert.solvers.bracket as driver

def broken(*args, **kwargs):
    raise RuntimeError("injected bug in the search")

driver.search_operator = broken
from softrank_cert.cli.main import main
main(sys.argv[1:])
"""


def _bracket_with_bug(tmp_path: Path, debug: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SOFTRANK_DEBUG"}
    if debug:
        env["SOFTRANK_DEBUG"] = "1"
    args = ["bracket", str(PANEL), "--operator", "minilm/apache2/w32/L0H0", "--eps", "0.5",
            "--out", str(tmp_path / "cert.json"), "--work", "1000"]
    return subprocess.run([sys.executable, "-c", INJECTED, *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_injected_bug_is_one_line_and_exit_4(tmp_path):
    proc = _bracket_with_bug(tmp_path, debug=False)
    assert proc.returncode == EXIT_INTERNAL, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "internal error: RuntimeError: injected bug in the search" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "cert.json").exists()


def test_injected_bug_shows_its_traceback_under_softrank_debug(tmp_path):
    proc = _bracket_with_bug(tmp_path, debug=True)
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "RuntimeError: injected bug in the search" in proc.stderr
    assert "in broken" in proc.stderr  # the frame that raised, not only the one-line message
    assert not (tmp_path / "cert.json").exists()


@pytest.mark.parametrize(("exc", "line"), [
    (InvalidInputError("bad   input\nhere"), "bad input here"),
    (KernelLimitError("too large"), "too large"),
    (MemoryError(), "out of memory for this input"),
    (ValueError("x" * 400), "internal error: ValueError: " + "x" * 300),
    (KeyError("k"), "internal error: KeyError: 'k'"),
])
def test_describe_is_the_one_mapping(exc, line):
    assert describe(exc) == line


def test_describe_names_where():
    assert describe(RuntimeError("a\nb"), " in a worker") == "internal error in a worker: RuntimeError: a b"


def test_every_public_exception_class_lives_in_errors():
    """No module outside ``errors.py`` defines a public exception class (grep-checked)."""
    import re

    root = Path(__file__).resolve().parents[2] / "softrank_cert"
    pattern = re.compile(r"^class ([A-Z]\w*)\((\w*(Error|Exception))\)", re.M)
    found = [(path.relative_to(root).as_posix(), m.group(1)) for path in root.rglob("*.py")
             if path.name != "errors.py" for m in pattern.finditer(path.read_text("utf-8"))]
    assert found == []
    assert issubclass(OutputWriteError, InvalidInputError)
