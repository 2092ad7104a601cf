"""No test asserts on elapsed time.

CI runs on a machine that may be busy with other work, where a one-line refusal can take 7 s
and a 2 s search 10 s: a test that asserts on seconds fails there for nothing.  Timing targets
live in ``benchmarks/`` scripts whose results are committed; tests check *what ran* (the
modules a refusal imported, the work units a search charged, the files written).

The rule, read from every test file's syntax tree: no ``assert`` may read a clock
(``time.perf_counter()``, ``time.time()``, ``time.monotonic()``, ``time.process_time()`` and
their ``_ns`` forms), a variable computed from one, or a ``.seconds`` / ``.elapsed`` attribute.
Waiting for a condition with a generous deadline (a hang guard that raises when it passes) is
allowed: it is not an assert on the clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns",
          "process_time", "process_time_ns"}
TIMED_ATTRIBUTES = {"seconds", "elapsed", "elapsed_seconds", "wall_seconds", "cpu_seconds"}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    return any(_is_clock_call(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(node))


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        nodes = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        nodes = [node.target]
    else:
        return []
    return [n.id for t in nodes for n in ast.walk(t) if isinstance(n, ast.Name)]


def _pairs(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs of an assignment; ``a, b = x, y`` pairs element by element."""
    value = getattr(node, "value", None)
    if value is None:
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    pairs = []
    for target in targets:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs.extend(zip(target.elts, value.elts))
        else:
            pairs.append((target, value))
    return pairs


def _tainted_names(tree: ast.AST) -> set[str]:
    """Names assigned (anywhere in the file) from an expression that reads a clock."""
    tainted: set[str] = set()
    pairs = [pair for n in ast.walk(tree) if _targets(n) for pair in _pairs(n)]
    while True:
        grown = {n.id for target, value in pairs if _reads_clock(value, tainted)
                 for n in ast.walk(target) if isinstance(n, ast.Name)}
        if grown <= tainted:
            return tainted
        tainted |= grown


def clock_asserts(source: str, filename: str = "<test>") -> list[str]:
    """``file:line`` of every assert in ``source`` that reads a clock or a timed attribute."""
    tree = ast.parse(source, filename)
    found: set[int] = set()
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:  # a name is tainted within the function (or module) that assigns it
        tainted = _tainted_names(scope)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Assert):
                continue
            timed_attribute = any(isinstance(n, ast.Attribute) and n.attr in TIMED_ATTRIBUTES
                                  for n in ast.walk(node.test))
            if timed_attribute or _reads_clock(node.test, tainted):
                found.add(node.lineno)
    return [f"{filename}:{line}" for line in sorted(found)]


def test_no_test_asserts_on_elapsed_time() -> None:
    found = [hit for path in sorted(TESTS.rglob("*.py"))
             for hit in clock_asserts(path.read_text(), str(path.relative_to(TESTS.parent)))]
    assert not found, "asserts on elapsed time (move the target to benchmarks/): " + ", ".join(found)


PLANTED = {
    "direct": "import time\ndef test():\n    t0 = time.perf_counter()\n    assert time.perf_counter() - t0 < 1\n",
    "through a name": "import time\ndef test():\n    t0 = time.monotonic()\n    run()\n    dt = time.monotonic() - t0\n    assert dt < 5\n",
    "imported clock": "from time import perf_counter\ndef test():\n    s = perf_counter()\n    assert s > 0\n",
    "result seconds": "def test():\n    res = run()\n    assert res.seconds LESS 5, res.seconds\n",
    "elapsed attribute": "def test():\n    assert run().elapsed LESS 2.0\n",
}
#: (The planted sources spell ``<`` as ``LESS`` so that a line-based search for timing asserts in
#: this file's own text finds none; :func:`_planted` puts the operator back.)
ALLOWED = {
    "hang guard": ("import time\ndef test():\n    deadline = time.monotonic() + 120\n"
                   "    while not done() and time.monotonic() < deadline:\n        time.sleep(0.1)\n    assert done()\n"),
    "tuple with a deadline": ("import time\ndef test():\n    deadline, victim = time.monotonic() + 60, None\n"
                              "    victim = find()\n    assert victim is not None\n"),
    "progress argument": "def test():\n    seen = []\n    run(progress=lambda s, elapsed, b: seen.append(elapsed))\n    assert all(e >= 0 for e in seen)\n",
    "budget in units": "def test():\n    b = run()\n    assert b.used <= 1.05 * b.work\n",
}


def _planted(source: str) -> str:
    return source.replace("LESS", "<")


def test_the_rule_catches_planted_clock_asserts_and_lets_hang_guards_be() -> None:
    for name, source in PLANTED.items():
        assert clock_asserts(_planted(source)), name
    for name, source in ALLOWED.items():
        assert not clock_asserts(source), name
