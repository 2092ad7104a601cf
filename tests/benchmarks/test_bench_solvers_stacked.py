"""bench_solvers.py's operators beyond MiniLM's 512 positions: stacked 512-token windows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_solvers

from softrank_cert.models import load_model
from softrank_cert.models.panel import _head_operators


@pytest.mark.slow
def test_stacked_operator_is_the_windows_queries_and_keys_one_above_the_other() -> None:
    text = ROOT / "examples" / "data" / "apache2.txt"
    ops = dict(bench_solvers.stacked_panel(1024, text))
    assert len(ops) == 72
    op = ops["minilm/apache2/w1024stack/L3H7"]
    assert op.shape == (1024, 1024) and op.kind == "qk"
    model = load_model("minilm")
    pieces = model.word_pieces(text.read_text())
    for w in range(2):  # each window is its own encoder run on the next 510 word pieces
        ids = model.prefix_ids("", 512, pieces[510 * w:510 * (w + 1)])
        arrays: dict[str, np.ndarray] = {}
        list(_head_operators(arrays, "x", model.forward(ids, layers=[3]), [3], [7]))
        rows = slice(512 * w, 512 * (w + 1))
        assert np.array_equal(op.arrays["Q"][rows], arrays["x/L3H7/Q"])
        assert np.array_equal(op.arrays["K"][rows], arrays["x/L3H7/K"])
    # the first window is the ordinary width-512 capture of the document
    first = dict(bench_solvers.minilm_panel(512, "apache2"))["minilm/apache2/w512/L3H7"]
    assert np.array_equal(op.arrays["Q"][:512], first.arrays["Q"])
