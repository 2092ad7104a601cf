"""Test helper: ``softrank`` whose worker tasks hand back certificates with a false claim.

``python tests/plumbing/tamper_softrank.py ARGS...`` with ``SOFTRANK_TEST_TAMPER=MODULE:FUNCTION``
(a task function, e.g. ``softrank_cert.plumbing.bracketing:issue_packed``) and
``SOFTRANK_TEST_TAMPER_TARGET=NAME``: every certificate document about operator NAME in the
task's result (found in dicts, lists, tuples and dataclasses) comes back with a false claim that
still decodes -- the upper end of its first bracket replaced by ``r_eps <= 0`` ("zero", no
arrays), which a softmax operator (``||A|| = 1 > eps``) never satisfies.  The patch is module
level, so the pool's spawned workers, which re-import this script, apply it too; every module
that imported the function by name is given the tampered one.  Run with ``--jobs 2``: only a
task in another process returns plain data that the signing process must not believe.

With ``SOFTRANK_TEST_TAMPER_PICKLE=MARKER`` the worker answers a task about NAME with a malicious
pickle instead (``hostile_tasks.send_pickle``: loaded in the signing process, it would replace
``verification.check_claims`` and write MARKER), written straight into its pipe, and exits.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any

MODULE, FUNCTION = os.environ["SOFTRANK_TEST_TAMPER"].split(":")
TARGET = os.environ["SOFTRANK_TEST_TAMPER_TARGET"]
_original = getattr(importlib.import_module(MODULE), FUNCTION)


def _tamper(value: Any, depth: int = 0) -> None:
    if depth > 8:
        return
    if isinstance(value, dict):
        operator = value.get("operator")
        if value.get("format") == "softrank-certificate" and isinstance(operator, dict) and operator.get("id") == TARGET:
            value["brackets"][0]["upper"] = {"r": 0, "construction": "zero"}
            return
        for item in value.values():
            _tamper(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tamper(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _tamper(getattr(value, field.name), depth + 1)


def tampered(*args: Any, **kwargs: Any) -> Any:
    result = _original(*args, **kwargs)
    _tamper(result)
    marker = os.environ.get("SOFTRANK_TEST_TAMPER_PICKLE")
    if marker and TARGET in args:
        from hostile_tasks import send_pickle  # beside this script (its folder is on sys.path)

        send_pickle(marker, os.getppid())
    return result


def _patch(original: Any) -> None:
    """Every module that holds ``original`` (its own, and any that imported it by name) gets ``tampered``."""
    for module in list(sys.modules.values()):
        if module is None or vars(module).get("tampered") is tampered:  # not this script itself
            continue
        for name, value in list(vars(module).items()):
            if value is original:
                setattr(module, name, tampered)


_patch(_original)

if __name__ == "__main__":
    from softrank_cert.cli.main import main

    sys.argv[0] = "softrank"
    main()
