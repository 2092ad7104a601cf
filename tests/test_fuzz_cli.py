"""Fuzzing the loader and pipeline (issue 7): every mutated certificate ends with exit 0/1/2/3.

Runs ``benchmarks/fuzz_cli.py``'s hypothesis campaign with a fixed seed (a few hundred JSON- and
byte-level mutations of valid certificates, in-process, both kernels) and a handful through the
real ``softrank-verify`` subprocess.  No exception other than SoftrankError may escape.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("fuzz_cli", ROOT / "benchmarks" / "fuzz_cli.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_cli", module)
    spec.loader.exec_module(module)
    return module


fuzz_cli = _load()


def test_seed_documents_verify():
    for doc in fuzz_cli.SEEDS:
        import json

        assert fuzz_cli.pipeline_exit(json.dumps(doc).encode()) == (0, 0)


def test_fuzz_pipeline_never_crashes():
    result = fuzz_cli.fuzz(examples=400, seed=1234, subprocess_count=5)
    assert result["failures"] == 0, result["failure_examples"][:3]
    assert result["inputs_in_process"] >= 400
    assert result["subprocess_runs"] == 5
    assert set(result["subprocess_exit_codes"]) <= {0, 1, 2, 3}
    # the mutations reach every outcome, not only the parser
    pairs = result["exit_code_pairs"]
    assert any(key.startswith("arb=0") for key in pairs) and any(key.startswith("arb=2") for key in pairs)
