"""Shared fixtures and helpers: certificates, keys and the command line.

Nothing here is autouse: other test modules are unaffected unless they ask for a fixture.

The independent truth (exact rationals, mpmath points and intervals; never a kernel) is in
``tests/oracle.py``; tests import it as ``tests.oracle`` (pyproject puts the repository root on
``sys.path``), the helpers here as ``conftest``.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import softrank_cert  # noqa: F401  first, before numpy: it pins the BLAS kernels (softrank_cert/blas_kernels.py),
# so that this process, its subprocesses and the pools' workers all run the same ones
import numpy as np
import pytest

from tests.oracle import allowed_mask, masked_softmax, transcendental_edge_error
from tests.tier_guard import TierGuard

TESTS = Path(__file__).resolve().parent
#: Why the reference tests skip where torch or transformers do not import (only they need them).
REFERENCE_SKIP = ("the reference tests compare with Hugging Face transformers, which needs torch and transformers: "
                  "pip install torch --index-url https://download.pytorch.org/whl/cpu (the CPU build), then "
                  "pip install -e '.[reference]'")
BAD_DIR = TESTS / "data" / "bad"

#: A whole run (the suite, or the fast tier ``-m "not slow"``) that leaves a module of the package
#: unloaded by every test it ran fails (tests/tier_guard.py).
_TIER_GUARD = TierGuard()


def pytest_collectstart(collector) -> None:
    _TIER_GUARD.collect_start(collector)


def pytest_collectreport(report) -> None:
    _TIER_GUARD.collect_report(report)


def pytest_collection_finish(session) -> None:
    _TIER_GUARD.collection_finished(session)


def pytest_sessionfinish(session, exitstatus) -> None:
    _TIER_GUARD.session_finished(session, exitstatus)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist (``-n N``): a worker is done; the guard adds what it loaded."""
    _TIER_GUARD.worker_finished(getattr(node, "workeroutput", {}))

CREATED = "2026-01-02T03:04:05Z"


# --------------------------------------------------------------------------------------
# Float64 operators and witnesses (inputs to build; the truth is tests/oracle.py)
# --------------------------------------------------------------------------------------

def float_softmax(kind: str, arrays: dict[str, np.ndarray], beta: str = "inv_sqrt_d", mask: str = "none") -> np.ndarray:
    """A float64 approximation of A (for building witnesses; the truth is elsewhere)."""
    if kind == "probabilities":
        return np.array(arrays["A"], dtype=np.float64)
    if kind == "scores":
        S = np.array(arrays["S"], dtype=np.float64)
    else:
        Q, K = arrays["Q"], arrays["K"]
        b = 1 / math.sqrt(Q.shape[1]) if beta == "inv_sqrt_d" else float(Fraction(beta))
        S = (Q @ K.T) * b
    m, n = S.shape
    return masked_softmax(S, np.array(allowed_mask(m, n, mask)))


def transcendental_edge():
    """qk with S = [[1/sqrt(2), 0]]: A = [[s, 1 - s]] with s = 1/(1 + exp(-1/sqrt 2))
    transcendental, so no ball is exact; the witness B = [[1, 0]] has error e = 2 (1 - s).
    Returns (operator, U, W, e) with e from the oracle (mpmath, 400 bits)."""
    from softrank_cert.kernel import Operator

    op = Operator("qk", {"Q": np.array([[1.0, 0.0]]), "K": np.array([[1.0, 0.0], [0.0, 0.0]])})
    return op, np.array([[1.0]]), np.array([[1.0], [0.0]]), transcendental_edge_error()


# --------------------------------------------------------------------------------------
# Certificates, keys and the command line
# --------------------------------------------------------------------------------------

def _console_script(name: str, module: str) -> list[str]:
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", module]


VERIFY_CMD = _console_script("softrank-verify", "softrank_cert.cli.verify")
SOFTRANK_CMD = _console_script("softrank", "softrank_cert.cli.main")


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _run(cmd: Sequence[str], cwd: Path | None = None, timeout: float = 120) -> CliResult:
    env = dict(os.environ)
    env.pop("SOFTRANK_DEBUG", None)
    env["COLUMNS"] = "200"
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


def run_verify(*args: Any, timeout: float = 120) -> CliResult:
    return _run([*VERIFY_CMD, *map(str, args)], timeout=timeout)


def run_softrank(*args: Any, cwd: Path | None = None, timeout: float = 120) -> CliResult:
    return _run([*SOFTRANK_CMD, *map(str, args)], cwd=cwd, timeout=timeout)


def run_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``softrank ARGS`` in this process (argparse and run_main exit through SystemExit):
    ``(exit code, stdout, stderr)``."""
    from softrank_cert.cli.common import run_main
    from softrank_cert.cli.main import build_parser

    with pytest.raises(SystemExit) as exc:
        parsed = build_parser().parse_args(list(args))
        run_main(f"softrank {parsed.command}", lambda: parsed.run(parsed))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def assert_one_line_error(result: CliResult, code: int = 2) -> None:
    """Exit ``code``, exactly one non-empty stderr line, no traceback.

    How long the refusal took is not checked (CI runs on a busy machine); that a refusal comes
    before any work is checked by what ran: :func:`run_softrank_traced`."""
    assert result.returncode == code, (result.returncode, result.stderr, result.stdout[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr_lines) == 1, result.stderr


@dataclass
class TracedResult(CliResult):
    """A :class:`CliResult` with the modules the process had imported when it exited."""

    modules: frozenset[str] = frozenset()

    def imported_any(self, *prefixes: str) -> list[str]:
        """The imported modules named ``P`` or ``P.*`` for a prefix ``P`` in ``prefixes``."""
        return sorted(m for m in self.modules if any(m == p or m.startswith(p + ".") for p in prefixes))


#: Modules that do the work of the computing commands: a refusal of bad arguments or inputs
#: must come before any of them is imported (checked by :func:`run_softrank_traced`).
WORK_MODULES = ("softrank_cert.solvers", "softrank_cert.verification", "highspy", "torch", "transformers")


def run_softrank_traced(*args: Any, command: str = "softrank", timeout: float = 120) -> TracedResult:
    """Run ``softrank ARGS`` (or ``softrank-verify``) through ``tests/trace_launcher.py``, which
    calls the console script's own ``main`` and records ``sys.modules`` when the process exits."""
    with tempfile.TemporaryDirectory() as scratch:  # outside tmp_path: the test may list that folder
        record = Path(scratch) / "modules.txt"
        res = _run([sys.executable, str(TESTS / "trace_launcher.py"), str(record), command, *map(str, args)],
                   timeout=timeout)
        modules = frozenset(record.read_text().split()) if record.exists() else frozenset()
    assert modules, f"the launcher recorded no modules: {res.stderr[-2000:]}"
    return TracedResult(res.returncode, res.stdout, res.stderr, res.seconds, modules)


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory) -> Path:
    """Two Ed25519 keys made with ``softrank keygen`` (issuer.key, other.key, + .pub)."""
    d = tmp_path_factory.mktemp("keys")
    for name in ("issuer", "other"):
        res = run_softrank("keygen", "--out", d / f"{name}.key")
        assert res.returncode == 0, res.stderr
    return d


@pytest.fixture(scope="session")
def issuer_key(keys_dir) -> Path:
    return keys_dir / "issuer.key"


@pytest.fixture(scope="session")
def other_key(keys_dir) -> Path:
    return keys_dir / "other.key"


def build_document(op, brackets, operator_id: str = "test/op-0", provenance: dict | None = None) -> dict:
    from softrank_cert.certio.certificate import certificate_document

    return certificate_document(operator_id, op, list(brackets), created=CREATED, provenance=provenance)


def write_certificate(path: Path, document: dict, key: Path | None = None) -> Path:
    from softrank_cert.certio.signing import sign_certificate
    from softrank_cert.util.files import write_json_atomic

    if key is not None:
        document = sign_certificate(document, key)
    write_json_atomic(Path(path), document)
    return Path(path)


# A peaked 3x3 scores operator (A close to the identity) with a valid bracket [3, 3] at
# eps 0.25 (lower: X = Y = I; upper: U = float A, W = I) and [1, 3] at eps 0.5.

def peaked_operator():
    from softrank_cert.kernel import Operator

    S = np.array([[10.0, 0.0, -1.0], [0.5, 9.0, 0.0], [-2.0, 1.0, 11.0]])
    return Operator("scores", {"S": S})


def valid_brackets(op):
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd

    A = float_softmax(op.kind, dict(op.arrays), op.beta, op.mask)
    I = np.eye(3)
    return [
        Bracket("0.25", LowerEnd(3, "selection", I.copy(), I.copy()), UpperEnd(3, "dense", A.copy(), I.copy())),
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(3, "identity")),
    ]


def false_witness_brackets(op):
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd

    U = np.ones((3, 1))
    W = np.full((3, 1), 1 / 3)
    return [Bracket("0.25", LowerEnd(1, "trivial"), UpperEnd(1, "constant", U, W))]


@pytest.fixture
def valid_document() -> dict:
    op = peaked_operator()
    return build_document(op, valid_brackets(op))
