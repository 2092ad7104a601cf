"""One unit of the seed-scale campaign again on a Dask cluster, with a worker killed mid-run (issue 34).

Starts a loopback cluster the way a user starts one on their own machines -- ``dask scheduler``
and two ``dask worker`` processes (one thread each, single-threaded BLAS), all on 127.0.0.1 --
and runs the unit's ``softrank bracket PANEL --all --resume --scheduler tcp://...`` into a fresh
folder.  When ``--kill-after`` certificates have been written it kills one worker and its nanny
with SIGKILL; the scheduler re-runs that worker's tasks on the other one.  Then the folder goes
through ``softrank-verify`` and every operator's result (claims and witnesses:
``seed_scale.result_sha256``) is compared with the unit's committed pool record.  Writes
``benchmarks/results/seed_scale/dask_check.json`` (the wall time per operator against the pool
run's, the kill, the comparison) and refreshes the campaign summary.

    python benchmarks/seed_scale.py --units minilm-apache2-w64      # the pool run (if not recorded)
    python benchmarks/seed_scale_dask.py                            # about 5 min on 2 cores
    python benchmarks/seed_scale_dask.py --unit minilm-apache2-w128-L0-5 --kill-after 30

docs/campaigns.md says how to point the same campaign at a cluster of your own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import seed_scale  # noqa: E402

ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


def start(command: list[str], log: Path) -> subprocess.Popen:
    """A process in its own session (so that killing its group takes a nanny with its worker)."""
    handle = open(log, "a", encoding="utf-8")  # noqa: SIM115  (closed with the process, by the OS)
    return subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=handle, stderr=subprocess.STDOUT,
                            start_new_session=True)


def scheduler_address(path: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))["address"]
            except (ValueError, KeyError):
                pass
        time.sleep(0.5)
    raise SystemExit(f"seed_scale_dask: no scheduler file at {path} after {timeout:g} s")


def certificates(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*.json") if p.name != "softrank-campaign.json") if folder.is_dir() else 0


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_on_cluster(unit: seed_scale.Unit, work: Path, kill_after: int) -> dict:
    """Bracket ``unit`` on a fresh 2-worker loopback cluster, killing one worker after ``kill_after``
    certificates; the bracket run's exit code, wall seconds and the kill."""
    folder = work / "dask"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log, file = folder / "cluster.log", folder / "scheduler.json"
    panel = seed_scale.Panels(work).unit_panel(unit)
    out = folder / "certs"
    processes = [start(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(file)], log)]
    try:
        address = scheduler_address(file)
        processes += [start(["dask", "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                             "--host", "127.0.0.1", "--name", f"worker-{i}"], log) for i in (1, 2)]
        command = [sys.executable, "-m", "softrank_cert.cli.main", "bracket", str(panel), "--all", "--eps",
                   ",".join(seed_scale.EPS), "--out", str(out) + "/", "--scheduler", address, "--resume"]
        started = time.perf_counter()
        bracket = start(command, folder / "bracket.log")
        killed = None
        while bracket.poll() is None:
            if killed is None and certificates(out) >= kill_after:
                os.killpg(processes[1].pid, signal.SIGKILL)
                killed = {"after_certificates": certificates(out), "at_s": round(time.perf_counter() - started, 1),
                          "worker": "worker-1"}
                print(f"[stage dask] killed worker-1 after {killed['after_certificates']} certificates", flush=True)
            time.sleep(0.5)
        wall = time.perf_counter() - started
    finally:
        for process in reversed(processes):
            stop(process)
    return {"exit_code": bracket.returncode, "wall_s": round(wall, 1), "killed": killed, "folder": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unit", default="minilm-apache2-w64-L0-5", help="a unit with a committed pool record")
    ap.add_argument("--kill-after", type=int, default=24, help="kill a worker once this many certificates exist")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "out" / "seed-scale")
    args = ap.parse_args(argv)
    units = {u.name: u for u in seed_scale.plan()}
    if args.unit not in units or not seed_scale.record_path(units[args.unit]).is_file():
        print(f"seed_scale_dask: no pool record for unit {args.unit!r}; run "
              f"python benchmarks/seed_scale.py --units {args.unit} first", file=sys.stderr)
        return 2
    unit = units[args.unit]
    pool = json.loads(seed_scale.record_path(unit).read_text(encoding="utf-8"))
    print(f"[stage dask] {unit.name}: {len(unit.operators())} operators on 2 loopback workers", flush=True)
    run = run_on_cluster(unit, args.work_dir, args.kill_after)
    out = run.pop("folder")
    code, stdout, vwall, _ = seed_scale._run([sys.executable, "-m", "softrank_cert.cli.verify", str(out), "--json"],
                                             args.work_dir / "dask" / "cluster.log", capture=True)
    report = json.loads(stdout) if stdout.strip() else {"files": [], "summary": {}}
    rows, problems = seed_scale.verified_rows(report, unit)
    expected = {(r["operator"], r["eps"]): r["result_sha256"] for r in pool["rows"]}
    got = {(r["operator"], r["eps"]): r["result_sha256"] for r in rows}
    differ = sorted(f"{o} eps {e}" for (o, e), digest in expected.items() if got.get((o, e)) != digest)
    operators = len(unit.operators())
    result = {"unit": unit.name, "operators": operators, "workers": 2, **run,
              "verify": {"exit_code": code, "wall_s": round(vwall, 1), "problems": problems[:5],
                         "claims": report["summary"].get("claims"), "verified": report["summary"].get("verified")},
              "identical_results": len(expected) - len(differ), "compared": len(expected), "differ": differ[:10],
              "dask_wall_s_per_operator": round(run["wall_s"] / operators, 2),
              "pool_wall_s_per_operator": round(pool["bracket_wall_s"] / operators, 2), "pool_jobs": pool["jobs"],
              "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    seed_scale.write_atomic(seed_scale.RESULTS / "dask_check.json", json.dumps(result, indent=1) + "\n")
    seed_scale.write_summary(seed_scale.plan())
    print(json.dumps(result, indent=1), flush=True)
    ok = run["exit_code"] == 0 and code == 0 and not problems and not differ and run["killed"] is not None
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
