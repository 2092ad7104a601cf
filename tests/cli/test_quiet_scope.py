"""``--quiet`` holds for its own run only: an in-process ``softrank --quiet`` (a test, a notebook)
leaves the caller's progress setting as it was, so later stage lines in that process still print."""

from __future__ import annotations

from pathlib import Path

from softrank_cert.util.progress import is_quiet
from tests.helpers import softrank_in_process

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"


def test_an_in_process_quiet_run_leaves_the_callers_setting(tmp_path: Path) -> None:
    assert not is_quiet()
    code, _out, _err = softrank_in_process("bracket", PANEL, "--operator", "minilm/apache2/w32/L0H2", "--eps", "0.5",
                                           "--work", "500", "--out", tmp_path / "c.json", "--quiet")
    assert code == 0
    assert not is_quiet()
