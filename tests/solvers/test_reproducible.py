"""Reproducible by default: the same bracket command gives byte-identical brackets however
busy the machine is and whatever the BLAS thread count (the search is bounded by work,
softrank_cert.solvers.work, and runs with one BLAS thread)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import SOFTRANK_CMD

from softrank_cert.kernel import Operator
from softrank_cert.plumbing.operators_npz import load_operators
from softrank_cert.solvers import bracket_operator
from softrank_cert.solvers.work import Budget, default_work

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"
HEAD = "minilm/apache2/w32/L0H0"
#: Small enough for the test (a few seconds), large enough that every search stage runs.
WORK = "3000"


def _bracket(out: Path, threads: str) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, COLUMNS="200")
    env.pop("SOFTRANK_DEBUG", None)
    proc = subprocess.run([*SOFTRANK_CMD, "bracket", str(PANEL), "--operator", HEAD, "--eps", "0.1,0.25,0.5",
                           "--work", WORK, "--out", str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_same_bracket_under_a_cpu_hog_and_other_blas_threads(tmp_path: Path) -> None:
    quiet = _bracket(tmp_path / "quiet.json", threads="1")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # a competing CPU-bound process
    try:
        loaded = _bracket(tmp_path / "loaded.json", threads="2")
    finally:
        hog.kill()
        hog.wait()
    dump = lambda doc: json.dumps(doc["brackets"], sort_keys=True).encode()  # noqa: E731
    assert dump(quiet) == dump(loaded)
    ends = [(b["lower"]["k"], b["upper"]["r"]) for b in quiet["brackets"]]
    assert ends[0][1] > 1 and all(1 <= k <= r for k, r in ends)


def test_work_bound_counts_work_not_seconds() -> None:
    """The default bound is work: a time-sliced view of the same work gives the same ends, and
    a smaller work bound stops the search earlier (it is a real bound)."""
    (item,) = load_operators(PANEL, [HEAD])
    op: Operator = item.operator
    one = bracket_operator(op, ["0.1", "0.25"], work=2000.0)
    two = bracket_operator(op, ["0.1", "0.25"], work=2000.0)
    assert all(np.array_equal(a.upper.U, b.upper.U) and a.lower.k == b.lower.k and a.upper.r == b.upper.r
               for a, b in zip(one, two) if a.upper.U is not None)
    budget = Budget(work=50.0)
    budget.charge(49.0)
    assert not budget.spent() and budget.until(0.5).at == 49.5
    budget.charge(1.0)
    assert budget.spent()
    assert default_work(128, 128) == 112000.0 and 1.5e6 < default_work(512, 512) < 1.6e6
