"""Test helper: ``softrank`` in which only one operator's search may finish until a signal comes.

``python tests/plumbing/gated_softrank.py ARGS...`` with ``SOFTRANK_TEST_GATE=DIR``: the first
call of ``softrank_cert.api.bracket`` (in any process of the campaign: the patch below is module
level, so the pool's spawned workers, which re-import this script, apply it too) runs at once;
every later one waits (up to a hang guard of 300 s) before it runs. An interruption test can then
signal a campaign that has finished exactly one operator, however busy the machine is.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import softrank_cert.api as _api

_GATE = Path(os.environ["SOFTRANK_TEST_GATE"])
_bracket = _api.bracket


def _gated_bracket(*args, **kwargs):
    try:
        os.close(os.open(_GATE / "first", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.05)
    return _bracket(*args, **kwargs)


_api.bracket = _gated_bracket

if __name__ == "__main__":
    from softrank_cert.cli.main import main

    main()
