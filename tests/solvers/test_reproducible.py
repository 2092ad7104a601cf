"""Reproducible by default: the same bracket command gives byte-identical brackets however
busy the machine is and whatever the BLAS thread count (the search is bounded by work,
softrank_cert.solvers.work, and runs with one BLAS thread), and on every x86-64 machine with AVX2
whatever BLAS kernels it would pick (softrank_cert.blas_kernels)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import SOFTRANK_CMD

from softrank_cert.blas_kernels import CORETYPE, UNPINNED, avx2_x86, numpy_above_avx2, pin_kernels
from softrank_cert.kernel import Operator
from softrank_cert.util.operator_files import load_operators
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


@pytest.mark.slow
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


@pytest.mark.slow
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


#: Where the smoothed upper search follows the kernels' rounding: OpenBLAS's AVX-512, AVX2 and SSE3
#: kernels give this head different upper steps at this work (measured: 13-14 of 21 differ).
SENSITIVE = "minilm/apache2/w32/L5H0"
PINNED = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", UNPINNED)
needs_avx2 = pytest.mark.skipif(not avx2_x86(), reason="the pinned kernels need an x86-64 CPU with AVX2 and FMA")


def _without_coretype() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*PINNED, "SOFTRANK_DEBUG")}
    return dict(env, COLUMNS="200")


def _profile_steps(env: dict[str, str]) -> str:
    proc = subprocess.run([*SOFTRANK_CMD, "profile", str(PANEL), "--operator", SENSITIVE, "--eps", "0.1,0.25",
                           "--work", "4000", "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return json.dumps([doc["lower"], doc["upper"], doc["brackets"]], sort_keys=True)


@needs_avx2
def test_import_pins_the_kernels_before_numpy_loads() -> None:
    """OpenBLAS runs its Haswell kernels and numpy no loop above AVX2 (X86_V3), silently."""
    code = ("import softrank_cert, numpy, threadpoolctl; "
            "from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "print(*{i['architecture'] for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas'}, "
            "f['X86_V3'], f['X86_V4'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=_without_coretype())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.split() == [CORETYPE, "True", "False"]


def test_the_pin_leaves_chosen_kernels_and_a_loaded_numpy_alone(monkeypatch) -> None:
    environ = {"OPENBLAS_CORETYPE": "Prescott", "NPY_DISABLE_CPU_FEATURES": ""}
    assert "numpy" in sys.modules and pin_kernels(environ) == {} and environ["OPENBLAS_CORETYPE"] == "Prescott"
    monkeypatch.delitem(sys.modules, "numpy")  # as before numpy is imported
    chosen = pin_kernels(environ)
    assert chosen == {} and environ == {"OPENBLAS_CORETYPE": "Prescott", "NPY_DISABLE_CPU_FEATURES": ""}
    fresh: dict[str, str] = {"OPENBLAS_CORETYPE": "Prescott"}
    assert set(pin_kernels(fresh)) == ({"NPY_DISABLE_CPU_FEATURES"} if avx2_x86() else set())
    assert fresh["OPENBLAS_CORETYPE"] == "Prescott"
    assert pin_kernels({UNPINNED: "numpy-first"}) == {}  # a worker of a process that imported numpy first


@needs_avx2
def test_numpy_imported_first_leaves_the_workers_unpinned_too(monkeypatch) -> None:
    """numpy loaded before softrank_cert runs the CPU's own kernels; the marker makes a worker
    started from that process (which imports softrank_cert before numpy) run the same ones."""
    environ: dict[str, str] = {}
    assert "numpy" in sys.modules and pin_kernels(environ) == {} and environ == {UNPINNED: "numpy-first"}
    monkeypatch.delitem(sys.modules, "numpy")  # the worker, before its numpy loads
    assert pin_kernels(environ) == {} and environ == {UNPINNED: "numpy-first"}


@pytest.mark.slow
@needs_avx2
def test_same_profile_whatever_kernels_the_machine_would_pick() -> None:
    """With nothing set (OpenBLAS and numpy would pick this CPU's own kernels: AVX-512 ones where it
    has AVX-512) the profile is the one of the AVX2 kernels chosen explicitly, step for step: what an
    AVX2-only machine runs."""
    unset = _profile_steps(_without_coretype())
    avx2 = dict(_without_coretype(), OPENBLAS_CORETYPE=CORETYPE, NPY_DISABLE_CPU_FEATURES=numpy_above_avx2())
    assert unset == _profile_steps(avx2)
