"""The estimate ``--max-memory`` admits bracket tasks by (softrank_cert.util.memory.bracket_task_bytes)
is an upper bound of their peak resident memory: on the widest heads measured
(benchmarks/results/memory_peak_*.json, SmolLM2 at widths 512 and 1024, high- and low-rank heads,
the numpy path and torch on the CPU, a synthetic operator of width 4096)
and, live, on a high-rank operator bracketed in a fresh interpreter; and it admits a
4096-wide task within 8 GB (issue 44, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import numpy as np

from softrank_cert.kernel import Operator
from softrank_cert.plumbing.parallel import run_tasks
from softrank_cert.util.memory import (GIB, bracket_task_bytes, operator_task_bytes, parse_size, probe_rank_cap,
                                      torch_host_bytes, upper_factor_bytes)

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "benchmarks" / "results").glob("memory_peak_*.json"))

CHILD = r"""
import json, sys
import numpy as np
from softrank_cert.kernel import Operator
from softrank_cert.plumbing.bracketing import bracket_result
from softrank_cert.util.memory import operator_task_bytes
n, work = int(sys.argv[1]), float(sys.argv[2])
rng = np.random.default_rng(7)
op = Operator("scores", {"S": 6.0 * np.eye(n) + rng.standard_normal((n, n))})
result = bracket_result(op, ["0.1", "0.25", "0.5"], work=work)
result.to_certificate()
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]  # this image's own peak
print(json.dumps({"peak": int(hwm[0].split()[1]) * 1024,
                  "estimate": operator_task_bytes(op), "upper": result.upper}))
"""


def test_the_widest_measured_heads_fit_their_estimate() -> None:
    assert RECORDS, "no memory_peak_*.json under benchmarks/results"
    rows = [(row, record["device"]) for record in map(lambda p: json.loads(p.read_text()), RECORDS)
            for row in record["rows"]]
    assert {tuple(r["shape"]) for r, _device in rows} >= {(512, 512), (1024, 1024), (4096, 4096)}
    assert {device for _row, device in rows} >= {"numpy", "cpu"}
    for row, device in rows:
        m, n = row["shape"]
        assert row["peak_rss"] <= bracket_task_bytes(m, n, device=device), (row["operator"], device)


#: The child reads its peak from /proc/self/status (VmHWM): ru_maxrss would also count the parent's
#: resident memory at the fork (Linux keeps it across exec), i.e. pytest's, torch included.
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM is Linux's")
def test_a_high_rank_bracket_stays_within_its_estimate() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, "192", "60000"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    assert measured["upper"]["0.1"] > 96  # a high-rank operator: witnesses of rank > p / 2 were searched
    assert measured["peak"] <= measured["estimate"]


def test_max_memory_8g_admits_a_4096_wide_task() -> None:
    """A causal ``qk`` operator of width 4096 (head dimension 64) is admitted by ``--max-memory 8G``:
    the task runs (here a stand-in that only returns; the estimate is what is tested)."""
    rng = np.random.default_rng(44)
    op = Operator.from_qk(0.3 * rng.standard_normal((4096, 64)), rng.standard_normal((4096, 64)), causal=True)
    need = operator_task_bytes(op)
    assert need <= parse_size("8G")
    outcomes = list(run_tasks(len, [("task",)], memory=[need], max_memory=parse_size("8G")))
    assert [(o.ok, o.value) for o in outcomes] == [(True, 4)], outcomes


def test_the_torch_host_term_stops_growing_where_the_search_caps_its_ranks() -> None:
    """A search on torch on the CPU holds its published copies at ranks its probes reach, which the
    search's host share caps (987 at width 8192): the term does not grow from 8192 to 16384, and a
    width-8192 task on ``--device cpu`` is admitted within 75 % of a 24 GB machine (it was 29.9 GiB).
    On CUDA the search's share is the device's, so the host term stays at rank p."""
    assert probe_rank_cap(8192, 8192, upper_factor_bytes(8192, 8192)) == 987
    assert torch_host_bytes(16384, 16384, "cpu") <= torch_host_bytes(8192, 8192, "cpu") < 2.5 * GIB
    assert bracket_task_bytes(8192, 8192, 64, "cpu", "qk") <= 0.75 * 24e9
    assert torch_host_bytes(512, 512, "cpu") == torch_host_bytes(512, 512, "cuda") > 0 == torch_host_bytes(512, 512, None)
    assert torch_host_bytes(8192, 8192, "cuda") > 7 * torch_host_bytes(8192, 8192, "cpu")
