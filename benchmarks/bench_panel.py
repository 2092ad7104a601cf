"""Benchmark: build the all-MiniLM-L6-v2 panel at width 512, all 72 heads (6 layers x 12 heads),
on examples/data/apache2.txt.  Each run loads the checkpoint, tokenizes the document, runs the
float64 numpy forward and extracts Q, K per head (``build_panel``); the compressed atomic write
(``write_panel``) is timed separately.  Prints the median of 3 runs and writes
benchmarks/results/panel.json.  Target: median build <= 30 s.

    PYTHONPATH=. python benchmarks/bench_panel.py
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softrank_cert  # noqa: E402,F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np  # noqa: E402
from softrank_cert.models import build_panel, provenance_names, write_panel  # noqa: E402

TEXT = ROOT / "examples" / "data" / "apache2.txt"
RESULT = ROOT / "benchmarks" / "results" / "panel.json"
WIDTH, RUNS, TARGET_S = 512, 3, 30.0


def main() -> int:
    build_s, write_s = [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        arrays = build_panel("minilm", TEXT, [WIDTH])
        build_s.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            path = write_panel(Path(tmp) / "panel.npz", arrays)
            write_s.append(time.perf_counter() - start)
            size = path.stat().st_size
    operators = len(provenance_names(arrays))
    assert operators == 72, operators
    result = {
        "benchmark": "build_panel minilm apache2.txt width 512, all heads",
        "operators": operators,
        "width": WIDTH,
        "runs": RUNS,
        "build_seconds": [round(t, 3) for t in build_s],
        "build_median_seconds": round(statistics.median(build_s), 3),
        "write_median_seconds": round(statistics.median(write_s), 3),
        "npz_bytes": size,
        "target_seconds": TARGET_S,
        "meets_target": statistics.median(build_s) <= TARGET_S,
        "machine": {"python": platform.python_version(), "numpy": np.__version__,
                    "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"panel build (72 heads, width {WIDTH}): median {result['build_median_seconds']:.2f} s over {RUNS} runs "
          f"(write {result['write_median_seconds']:.2f} s, {size / 2**20:.1f} MiB); target <= {TARGET_S:.0f} s")
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
