"""Fuzzing the loader and pipeline (issue 7): every mutated certificate ends with exit 0/1/2/3.

A CI-sized run of ``benchmarks/fuzz_cli.py`` with a fixed seed: a few hundred JSON- and
byte-level mutations (``tests/adversarial/mutations.py``) of valid certificates, in-process,
both kernels, and a handful through the real ``softrank-verify`` subprocess.  No exception
other than SoftrankError may escape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from softrank_cert.verification import verify_certificate_file
from tests.adversarial.mutations import SEEDS

ROOT = Path(__file__).resolve().parents[2]


def test_seed_documents_verify(tmp_path):
    for i, doc in enumerate(SEEDS):
        path = tmp_path / f"seed-{i}.json"
        path.write_text(json.dumps(doc))
        for kernel in ("arb", "exact"):
            assert verify_certificate_file(path, kernel=kernel).exit_code == 0, (i, kernel)


@pytest.mark.slow
def test_fuzz_pipeline_never_crashes(tmp_path):
    out = tmp_path / "fuzz.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_cli.py"), "--examples", "400", "--seed", "1234",
                          "--subprocess", "5", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stderr[-3000:]  # 1: failures (asserted below)
    result = json.loads(out.read_text())
    assert result["failures"] == 0, result["failure_examples"][:3]
    assert result["inputs_in_process"] >= 400
    assert result["subprocess_runs"] == 5
    assert set(result["subprocess_exit_codes"]) <= {"0", "1", "2", "3"}  # JSON keys
    # the mutations reach every outcome, not only the parser
    pairs = result["exit_code_pairs"]
    assert any(key.startswith("arb=0") for key in pairs) and any(key.startswith("arb=2") for key in pairs)
