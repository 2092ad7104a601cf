"""Test helper: ``softrank`` in which only one operator's search may finish until a signal comes.

``python tests/plumbing/gated_softrank.py ARGS...`` with ``SOFTRANK_TEST_GATE=DIR``: the first
call of ``softrank_cert.solvers.bracket.bracket_operator`` (the search every bracket task runs, in
any process of the campaign: the patch below is module level, so the pool's spawned workers,
which re-import this script, apply it too) runs at once and leaves ``DIR/first``; every later one
leaves ``DIR/waiting-PID-N`` and waits (up to a hang guard of 300 s) before it runs. An
interruption test can then signal a campaign that has finished exactly one operator, however busy
the machine is, and check from those files that the gate really was on the search's path.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import softrank_cert.solvers.bracket as _solvers_bracket

_GATE = Path(os.environ["SOFTRANK_TEST_GATE"])
_bracket_operator = _solvers_bracket.bracket_operator
_calls = itertools.count()


def _mark(name: str) -> None:
    os.close(os.open(_GATE / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))


def _gated_bracket_operator(*args, **kwargs):
    try:
        _mark("first")
    except FileExistsError:
        _mark(f"waiting-{os.getpid()}-{next(_calls)}")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.05)
    return _bracket_operator(*args, **kwargs)


_solvers_bracket.bracket_operator = _gated_bracket_operator

if __name__ == "__main__":
    from softrank_cert.cli.main import main

    main()
