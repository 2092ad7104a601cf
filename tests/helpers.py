"""Helpers shared by several test files (imported as ``tests.helpers``): small panels, the
command line run in this process or in a child, tolerances just below a threshold, reference
softmaxes of the model tests, certificate contents of a campaign folder.

Fixtures and the certificate builders stay in ``conftest.py``; the independent truth in
``oracle.py``.  A helper lives here once two test files need it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import softrank_cert  # noqa: F401  first, before numpy: it pins the BLAS kernels (as conftest.py does)

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The committed MiniLM panel at width 32 and its first head (the solver tests' real operator).
W32_PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
W32_HEAD = "minilm/apache2/w32/L0H0"


def write_qk_panel(path: Path, names: Iterable[str], *, seed: int, d: int = 2,
                   rows: tuple[int, int] | None = None) -> Path:
    """An ``.npz`` panel of ``qk`` operators with standard normal ``Q`` then ``K`` per name, drawn
    in that order from ``default_rng(seed)``: ``rows`` = (m, N), or None for n x n with n read
    from the name's third part (``tiny/doc/w<n>/L0H0``)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for name in names:
        m, n = rows if rows is not None else (int(name.split("/")[2][1:]),) * 2
        arrays[f"{name}/Q"] = rng.standard_normal((m, d))
        arrays[f"{name}/K"] = rng.standard_normal((n, d))
    np.savez(path, **arrays)
    return path


def softrank_in_process(*argv: Any, verify: bool = False) -> tuple[int, str, str]:
    """``softrank ARGV`` (or ``softrank-verify ARGV``) in this process: exit code, stdout, stderr."""
    from softrank_cert.cli.main import main as softrank_main
    from softrank_cert.cli.verify import main as verify_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
        (verify_main if verify else softrank_main)([str(a) for a in argv])
    return int(stop.value.code), out.getvalue(), err.getvalue()


def softrank_subprocess(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m softrank_cert.cli.main ARGS`` in a child process, output captured as text."""
    return subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


def files_below(folder: Path) -> list[str]:
    """Every path under ``folder`` (files and folders), relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def certificate_contents(folder: Path) -> dict[str, tuple]:
    """Certificate content by relative path: operator and brackets (signatures and times excluded;
    the campaign manifest is not a certificate)."""
    from softrank_cert.plumbing.campaign import MANIFEST_NAME

    out = {}
    for path in sorted(folder.rglob("*.json")):
        if path.name != MANIFEST_NAME:
            doc = json.loads(path.read_text())
            out[str(path.relative_to(folder))] = (doc["operator"], doc["brackets"])
    return out


def down_eps(t: float) -> str:
    """A decimal tolerance just below a float64 threshold."""
    return f"{t * 0.999:.12f}"


def w32_head() -> tuple[Any, Any]:
    """The operator :data:`W32_HEAD` of :data:`W32_PANEL` and its float64 view."""
    from softrank_cert.util.dense import Dense
    from softrank_cert.util.operator_files import load_operators

    (item,) = load_operators(W32_PANEL, [W32_HEAD])
    return item.operator, Dense.of(item.operator)


def softmax_qk(q: np.ndarray, k: np.ndarray, beta: float | None = None, causal: bool = False) -> np.ndarray:
    """softmax_rows(beta Q K^T + M) in numpy float64 (``beta`` None: divide by sqrt(d)); M_ij = -inf
    for j > i when ``causal`` (square blocks)."""
    s = (q @ k.T) / math.sqrt(q.shape[1]) if beta is None else beta * (q @ k.T)
    if causal:
        s = np.where(np.triu(np.ones(s.shape, dtype=bool), k=1), -np.inf, s)
    z = np.exp(s - s.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def operator_softmax(op: Any) -> np.ndarray:
    """softmax_rows(beta Q K^T) or softmax_rows(S) of an operator, masked entries exactly 0, in
    numpy float64."""
    if op.kind == "qk":
        beta = 1 / math.sqrt(op.head_dim) if op.beta == "inv_sqrt_d" else float(op.beta)
        s = beta * (op.arrays["Q"] @ op.arrays["K"].T)
    else:
        s = np.array(op.arrays["S"])
    s = np.where(op.allowed(), s, -np.inf)
    z = np.exp(s - s.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def hf_text_attentions(hf: Any, ids: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """A transformers text model's attention probabilities per layer and last hidden state on ``ids``."""
    import torch

    with torch.no_grad():
        res = hf(input_ids=torch.tensor(ids, dtype=torch.long)[None], output_attentions=True)
    return [a[0].numpy() for a in res.attentions], res.last_hidden_state[0].numpy()


#: A tolerance 1e-16 above the error of :func:`thin_witness` (2^-10 in one row): the float64 paths'
#: rounding bounds cannot decide it, the Arb balls at 64 bits do.
THIN = "0.0009765625000001"


def thin_witness(n: int = 12) -> tuple[Any, np.ndarray, np.ndarray]:
    """A ``scores`` operator and a witness ``U W^T`` (rank p) whose error is exactly 2^-10 in one row:
    at :data:`THIN` only the kernel's Arb path decides it (a check budget without Arb leaves it
    INCONCLUSIVE)."""
    from softrank_cert.kernel import Operator

    rng = np.random.default_rng(3)
    S = rng.standard_normal((n, n))
    A = np.exp(S - S.max(axis=1, keepdims=True))
    U = A / A.sum(axis=1, keepdims=True)
    U[0, 0] += 2.0**-10
    return Operator("scores", {"S": S}), U, np.eye(n)


def thin_certificate(name: str = "thin") -> tuple[Any, dict[str, Any]]:
    """:func:`thin_witness`'s operator and an unsigned certificate document of its witness at :data:`THIN`."""
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document

    op, U, W = thin_witness()
    return op, certificate_document(name, op, [Bracket(THIN, LowerEnd(1, "trivial"), UpperEnd(op.p, "smooth", U, W))],
                                    created="2026-01-01T00:00:00Z")
