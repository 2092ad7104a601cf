"""The test suite needs torch and transformers only for the reference tests (issue 26 point 7):
with both made unimportable, every test module still collects, the reference tests skip with a
reason that says how to get the CPU build of torch, and the models' own tests still run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Runs pytest with torch and transformers unimportable (as on a machine without them).
WITHOUT_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None
sys.meta_path.insert(0, NoTorch())
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def _pytest_without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.mark.slow
def test_every_test_module_collects_without_torch():
    res = _pytest_without_torch("--collect-only", "-q", "tests")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "error" not in res.stdout.lower().split("\n")[-2], res.stdout[-2000:]


@pytest.mark.slow
def test_reference_tests_skip_with_the_cpu_install_hint():
    res = _pytest_without_torch("-q", "-rs", "tests/models/test_models_gpt2.py",
                                "tests/models/test_models_bert.py", "-k", "reference or gpt2")
    assert res.returncode in (0, 5), res.stdout[-3000:] + res.stderr[-2000:]  # 5: everything skipped
    assert "SKIPPED" in res.stdout and "download.pytorch.org/whl/cpu" in res.stdout, res.stdout[-3000:]
    assert "failed" not in res.stdout.splitlines()[-1], res.stdout[-2000:]
