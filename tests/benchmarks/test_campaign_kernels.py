"""The campaign scripts that start ``softrank`` child processes import ``softrank_cert`` before
numpy, so that their children pin numpy's kernels (``softrank_cert.blas_kernels``) instead of
inheriting the mark of a parent that imported numpy first: their certificates are then the same
on every machine with AVX2 (docs/solvers.md)."""

from __future__ import annotations

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
