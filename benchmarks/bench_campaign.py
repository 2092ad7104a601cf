"""Campaign benchmark: ``softrank bracket PANEL --all`` with --jobs 1 vs --jobs 2 (issue 8).

The MiniLM panel (all 72 heads at one width) x 3 tolerances with a fixed per-operator
``--budget-seconds``; wall time of the whole command (process start, pool start-up, solving,
verification, writing) is timed ``--repeats`` times per job count, and the median is reported;
then ``softrank-verify`` re-checks all the campaign's certificates once per kernel (auto, arb).
With a time budget the ends found may depend on machine speed; the figures are about time.

    python benchmarks/bench_campaign.py --width 32 --budget 3 --repeats 1 \\
        --out benchmarks/results/campaign.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def softrank(*args: str) -> float:
    """Run ``softrank ARGS`` (this interpreter), return its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", *args], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--eps", default="0.1,0.25,0.5")
    ap.add_argument("--budget", type=float, default=3.0, help="--budget-seconds per operator")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/campaign.json"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="softrank-campaign-"))
    try:
        panel = work / "panel.npz"
        softrank("panel", "--model", "minilm", "--text", "examples/data/apache2.txt", "--widths", str(args.width),
                 "--out", str(panel), "--json")
        load_before = os.getloadavg()
        runs: dict[int, list[float]] = {}
        for _ in range(args.repeats):
            for jobs in (int(j) for j in args.jobs.split(",")):
                out = work / f"certs-{jobs}"
                shutil.rmtree(out, ignore_errors=True)
                seconds = softrank("bracket", str(panel), "--all", "--eps", args.eps, "--out", str(out),
                                   "--budget-seconds", str(args.budget), "--jobs", str(jobs), "--json")
                runs.setdefault(jobs, []).append(round(seconds, 2))
                print(f"jobs {jobs}: {seconds:.1f} s", flush=True)
        operators = sum(1 for _ in (work / "certs-1").rglob("*.json")) if (work / "certs-1").exists() else None
        verify = {}
        certs = next((work / f"certs-{j}" for j in (1, 2) if (work / f"certs-{j}").exists()), None)
        for kernel in ("auto", "arb") if certs is not None else ():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", str(certs), "--kernel", kernel, "--json"],
                           check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            verify[kernel] = round(time.perf_counter() - start, 2)
            print(f"softrank-verify --kernel {kernel} on the campaign's certificates: {verify[kernel]:.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    median = {jobs: statistics.median(times) for jobs, times in runs.items()}
    base = median.get(1)
    doc = {"benchmark": "softrank bracket PANEL --all --jobs N (wall time of the whole command)",
           "panel": f"minilm/apache2 width {args.width}, all layers x heads", "operators": operators,
           "eps": args.eps, "budget_seconds_per_operator": args.budget, "repeats": args.repeats,
           "wall_seconds": {str(j): t for j, t in runs.items()},
           "median_seconds": {str(j): round(t, 2) for j, t in median.items()},
           "speedup": {str(j): round(base / t, 3) for j, t in median.items()} if base else None,
           "verify_all_certificates_seconds": verify,
           "load_average_before": [round(x, 2) for x in load_before],
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor(),
                       "python": platform.python_version()},
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["median_seconds"]), json.dumps(doc["speedup"]))


if __name__ == "__main__":
    main()
