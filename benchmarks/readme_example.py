"""Benchmark: the README's worked example (panel + profile of MiniLM L5H2 at width 128 + verify),
run as written (tests/docs/doc_blocks.py), RUNS times. Records the CPU seconds of each run (user +
system of every process it started), the wall seconds, the OpenBLAS kernels that ran, and whether
the profile equals the committed docs/profile-minilm-apache2-w128-L5H2.json step for step; writes
benchmarks/results/readme_example.json (the README quotes its median CPU seconds).

    PYTHONPATH=. python benchmarks/readme_example.py [RUNS]
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.docs.doc_blocks import page_blocks, run_block  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "readme_example.json"
COMMITTED = ROOT / "docs" / "profile-minilm-apache2-w128-L5H2.json"
PROFILE = Path("/tmp/profile.json")  # where the README example writes it
COMPARED = ("lower", "upper", "resolved", "brackets", "grid", "budget_work")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _one_run(work: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the README example's blocks, run in order."""
    cpu, wall = _children_cpu(), time.perf_counter()
    for block in page_blocks("README.md"):
        proc = run_block(block, work)
        if proc.returncode != 0:
            raise SystemExit(f"README.md:{block.line} exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return _children_cpu() - cpu, time.perf_counter() - wall


def _blas_kernels() -> list[str]:
    code = ("import softrank_cert, numpy, threadpoolctl; "
            "print(*sorted({i.get('architecture', '?') for i in threadpoolctl.threadpool_info()}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def main(runs: int = 3) -> int:
    cpu_s, wall_s, matches = [], [], []
    committed = json.loads(COMMITTED.read_text("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            cpu, wall = _one_run(Path(tmp))
            cpu_s.append(round(cpu, 2))
            wall_s.append(round(wall, 2))
            run = json.loads(PROFILE.read_text("utf-8"))
            matches.append(all(run[key] == committed[key] for key in COMPARED))
    result = {
        "benchmark": "README worked example as written: softrank panel (MiniLM L5H2, width 128) + profile + verify",
        "runs": runs,
        "cpu_seconds": cpu_s,
        "cpu_median_seconds": round(statistics.median(cpu_s), 1),
        "wall_seconds": wall_s,
        "wall_median_seconds": round(statistics.median(wall_s), 1),
        "profile_equals_committed": matches,
        "compared_fields": list(COMPARED),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                    "openblas_kernels": _blas_kernels(), "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                    "load_average_after": [round(x, 2) for x in os.getloadavg()]},
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    print(json.dumps(result, indent=1))
    return 0 if all(matches) else 1


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
