"""Benchmark: the start-up of ``softrank --help`` beside ``python -c "import numpy, flint"``.

``softrank --help`` builds the command parser and prints it: it should cost little more than
the two imports every run of the toolkit pays for (numpy and python-flint), since it imports no
study, solver, scipy or matplotlib (issue 32 item 6). Both commands run as whole processes of
this interpreter, in turn (A B A B ...), so that a drift of the machine's speed touches both;
the softrank package is the one of this checkout (``python -m softrank_cert.cli.main`` with the
repository root first on ``PYTHONPATH``).

Run:  python benchmarks/bench_startup.py  [--repeats 11] [--out FILE]

Each figure is the median over the runs (min and max beside it) of the wall seconds and the CPU
seconds (user + system, the operating system's accounting of the finished child). The load
average is recorded before and after: on a shared machine it says how far to trust the figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "softrank --help": [sys.executable, "-m", "softrank_cert.cli.main", "--help"],
    "python -c 'import numpy, flint'": [sys.executable, "-c", "import numpy, flint"],
}


def one_run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.read().decode()[-300:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=11, help="runs of each command (default 11, at least 11)")
    parser.add_argument("--label", default="", help="a word for the result file (before, after)")
    parser.add_argument("--out", type=Path, help="write the result JSON here")
    args = parser.parse_args()
    if args.repeats < 11:
        parser.error("--repeats: at least 11")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for argv in COMMANDS.values():  # one warm-up run each: the file cache, the byte-code cache
        one_run(argv, env)
    load_before = os.getloadavg()
    runs: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in COMMANDS}
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            wall, cpu = one_run(argv, env)
            runs[name]["wall"].append(wall)
            runs[name]["cpu"].append(cpu)
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    result = {
        "benchmark": "startup_help",
        "label": args.label,
        "commit": commit.strip(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "repeats": args.repeats,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "seconds": {name: {k: summary(v) for k, v in r.items()} for name, r in runs.items()},
        "runs": {name: {k: [round(x, 4) for x in v] for k, v in r.items()} for name, r in runs.items()},
    }
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    for name, figures in result["seconds"].items():
        print(f"{name:34s} wall {figures['wall']['median']:.3f} s  cpu {figures['cpu']['median']:.3f} s (medians)")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")


if __name__ == "__main__":
    main()
