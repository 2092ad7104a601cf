"""The campaign scripts that start ``softrank`` child processes import ``softrank_cert`` before
numpy, so that their children pin numpy's kernels (``softrank_cert.blas_kernels``) instead of
inheriting the mark of a parent that imported numpy first: their certificates are then the same
on every machine with AVX2 (docs/solvers.md)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from softrank_cert.blas_kernels import UNPINNED, avx2_x86

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not avx2_x86(), reason="nothing to pin off an x86-64 CPU with AVX2 and FMA")
@pytest.mark.parametrize("script", ["seed_scale", "family_table", "survey_study"])
def test_a_campaign_script_leaves_its_children_free_to_pin(script):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", UNPINNED)}
    code = (f"import os, sys; sys.path.insert(0, 'benchmarks'); import {script}; "
            f"print(os.environ.get('{UNPINNED}'), os.environ.get('OPENBLAS_CORETYPE'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    unpinned, coretype = done.stdout.split()
    assert unpinned == "None" and coretype != "None"


#: Scripts that must not import the package: the independent numpy yardstick of ``bench_verify.py``
#: (its kernels are those of the parent that starts it, which pins them).
INDEPENDENT = {"numpy_recompute.py"}
NUMERIC = ("numpy", "scipy", "torch", "threadpoolctl")


def _first_imports(path: Path) -> list[str]:
    """The top-level modules ``path`` imports at module level, in order."""
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module.split(".")[0])
    return names


def _pins_before_numpy(path: Path) -> bool:
    """Whether ``softrank_cert`` (or a sibling script that does so itself) is imported before numpy."""
    for name in _first_imports(path):
        if name == "softrank_cert":
            return True
        if (path.parent / f"{name}.py").is_file():
            return _pins_before_numpy(path.parent / f"{name}.py")
        if name in NUMERIC:
            return False
    return True


@pytest.mark.parametrize("script", sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "examples").glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_script_imports_the_package_before_numpy(script):
    """A benchmark or example that computes in its own process runs the pinned kernels, so that
    its committed figures and certificates are the same on every machine with AVX2."""
    if script.name in INDEPENDENT:
        assert "softrank_cert" not in _first_imports(script)
    else:
        assert _pins_before_numpy(script), f"{script.name} imports numpy (or scipy, torch) before softrank_cert"
