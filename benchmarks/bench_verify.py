"""Benchmark: verifying a 512 x 512, d = 64 ``qk`` certificate with three tolerances.

Targets: ``softrank-verify`` (whole process: start-up, JSON, hashes, signature, kernel
checks) in <= 3 s wall on a 2-core machine (issue 2, Arb balls) and, with the kernel's
float64 path (issue 8, the default ``--kernel auto``), in <= 1 s (stretch 0.5 s) and
<= 50x a plain numpy float64 recomputation of the same residuals (||A - U W^T|| per
tolerance, not a proof).  Both kernels are timed on the same certificate, interleaved.

The certificate is generated deterministically (seed 0): Q, K standard normal scaled so
attention is diffuse enough that rank-64 truncated-SVD witnesses pass at eps 0.1, 0.25,
0.5; lower ends are trivial (k = 1) so that the timing is the upper-witness checks the
target names.  Also timed: ``softrank-verify --version`` (the start-up alone: the verifier imports
only what checking needs, issue 21 item 7).

Run:  python benchmarks/bench_verify.py  [--repeats 5] [--out FILE]

Each run writes a NEW result file (default ``benchmarks/results/verify-<UTC time>.json``; an
existing ``--out`` is refused unless ``--overwrite``) and prints it beside the committed
``benchmarks/results/verify.json`` it is compared with, which it never overwrites by default.
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
import tempfile
import time
from pathlib import Path

import numpy as np

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.certio.signing import generate_private_key, sign_document, utc_now_rfc3339, verification_method_for
from softrank_cert.kernel import Operator
from softrank_cert.util.files import write_json_atomic

M = N = 512
D = 64
RANK = 64
EPS = ("0.1", "0.25", "0.5")


def make_certificate(path: Path) -> None:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((M, D)) * 0.6
    k = rng.standard_normal((N, D)) * 0.6
    op = Operator("qk", {"Q": q, "K": k})
    a = softmax(q, k)
    u, s, vt = np.linalg.svd(a)
    U, W = u[:, :RANK] * s[:RANK], np.ascontiguousarray(vt[:RANK].T)
    err = np.abs(a - U @ W.T).sum(axis=1).max()
    assert err < 0.1, f"generated witness error {err} too large for the benchmark"
    brackets = [Bracket(e, LowerEnd(1, "trivial"), UpperEnd(RANK, "tsvd", U, W)) for e in EPS]
    doc = certificate_document("bench/qk512", op, brackets, created=utc_now_rfc3339())
    key = generate_private_key()
    doc = sign_document(doc, key, created=utc_now_rfc3339(), verification_method=verification_method_for(key.public_key()))
    write_json_atomic(path, doc)


def softmax(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    s = (q @ k.T) / np.sqrt(q.shape[1])
    a = np.exp(s - s.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


def numpy_recompute(path: Path) -> float:
    """Plain float64: decode arrays, recompute A and every witness residual (no enclosure)."""
    import base64

    t0 = time.perf_counter()
    doc = json.loads(path.read_text())
    dec = lambda o: np.frombuffer(base64.b64decode(o["data"]), "<f8").reshape(o["shape"])  # noqa: E731
    arrays = doc["operator"]["arrays"]
    a = softmax(dec(arrays["Q"]), dec(arrays["K"]))
    for b in doc["brackets"]:
        u, w = dec(b["upper"]["U"]), dec(b["upper"]["W"])
        np.abs(a - u @ w.T).sum(axis=1).max()
    return time.perf_counter() - t0


RESULTS = Path(__file__).parent / "results"
#: The committed result that new runs are compared with.
COMMITTED = RESULTS / "verify.json"


def version_wall(repeats: int) -> list[float]:
    """Wall seconds of ``softrank-verify --version`` (one warm-up run first)."""
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        subprocess.run(["softrank-verify", "--version"], capture_output=True, check=True)
        if i:
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    parser.add_argument("--out", default=str(RESULTS / f"verify-{stamp}.json"),
                        help="result file (default: a new file named after the time; never the committed verify.json)")
    parser.add_argument("--overwrite", action="store_true", help="replace --out if it exists (e.g. to update verify.json)")
    args = parser.parse_args()
    if Path(args.out).exists() and not args.overwrite:
        sys.exit(f"{args.out} exists: give another --out, or --overwrite to replace it")
    startup = version_wall(args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        cert = Path(tmp) / "qk512.json"
        make_certificate(cert)
        walls: dict[str, list[float]] = {"auto": [], "arb": []}
        numpy_times = []
        for _ in range(args.repeats):
            for kernel in walls:
                t0 = time.perf_counter()
                proc = subprocess.run(["softrank-verify", str(cert), "--kernel", kernel, "--json"],
                                      capture_output=True, text=True)
                walls[kernel].append(time.perf_counter() - t0)
                if proc.returncode != 0:
                    sys.exit(f"softrank-verify --kernel {kernel} exited {proc.returncode}: {proc.stderr.strip()}")
                engines = {c["checked_by"] for f in json.loads(proc.stdout)["files"] for c in f["claims"] if c["side"] == "upper"}
                if engines != ({"float64"} if kernel == "auto" else {"arb"}):
                    sys.exit(f"--kernel {kernel}: upper ends decided by {sorted(engines)}")
            numpy_times.append(numpy_recompute(cert))
        size = cert.stat().st_size
    numpy_median = statistics.median(numpy_times)
    result = {
        "benchmark": "softrank-verify 512x512 d=64 qk, 3 tolerances, upper rank 64",
        "repeats": args.repeats,
        "version_wall_s_median": round(statistics.median(startup), 4),
        "version_wall_s_all": [round(t, 4) for t in startup],
        "verify_wall_s_median": round(statistics.median(walls["auto"]), 4),
        "verify_wall_s_all": [round(t, 4) for t in walls["auto"]],
        "verify_arb_only_wall_s_median": round(statistics.median(walls["arb"]), 4),
        "verify_arb_only_wall_s_all": [round(t, 4) for t in walls["arb"]],
        "numpy_recompute_s_median": round(numpy_median, 4),
        "ratio_verify_over_numpy": round(statistics.median(walls["auto"]) / numpy_median, 1),
        "ratio_arb_only_over_numpy": round(statistics.median(walls["arb"]) / numpy_median, 1),
        "certificate_bytes": size,
        "target_s": 1.0,
        "stretch_target_s": 0.5,
        "target_ratio": 50.0,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "date": utc_now_rfc3339(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if COMMITTED.exists() and Path(args.out).resolve() != COMMITTED.resolve():
        old = json.loads(COMMITTED.read_text())
        for key in ("version_wall_s_median", "verify_wall_s_median", "verify_arb_only_wall_s_median"):
            print(f"{key}: {result[key]} (this run, {args.out}) vs {old.get(key, '-')} (committed {COMMITTED.name})")


if __name__ == "__main__":
    main()
