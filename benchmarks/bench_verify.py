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
      python benchmarks/bench_verify.py --floor [--widths 512 1024 ...] [--keep DIR]   (issue 45)

``--floor`` times ``softrank-verify`` (default options: one BLAS thread) against
``benchmarks/numpy_recompute.py`` (a plain float64 recomputation of the same checks, one BLAS
thread, the same BLAS and numpy kernels as ``softrank-verify``), interleaved, whole process (CPU, wall, peak RSS of each child) and in-process (the
checks alone, after imports and reading), at each width.  Width 512 is the committed real
SmolLM2 certificate of the seed-scale sample; wider ones are SYNTHETIC (``make_wide_certificate``:
a circle-shaped local-attention ``qk`` head, d = 64, randomized-SVD witnesses and pooled lower
ends, unsigned), since no real certificate that wide is committed.

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

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
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
                if engines != ({"rowblock"} if kernel == "auto" else {"arb"}):
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


# --------------------------------------------------------------------------------------------------
# --floor (issue 45): softrank-verify against benchmarks/numpy_recompute.py at 512 ... 8192
# --------------------------------------------------------------------------------------------------

#: The committed real certificate used at width 512 (a SmolLM2 head of the seed-scale sample).
REAL_W512 = RESULTS / "seed_scale" / "sample" / "4609e5a2aeaedddf59fd6b255e8549141055dbf218c2ec02e506aa39ad9959ce.json"
RECOMPUTE = Path(__file__).parent / "numpy_recompute.py"
FLOOR_RANKS = (16, 24, 32, 48, 64, 96, 128, 192, 256)


def _circle_operator(width: int, seed: int) -> Operator:
    """A synthetic ``qk`` head (d = 64) with local attention: queries and keys on a circle, 32
    frequencies, peak logit about 6, plus noise -- diffuse enough for low-rank witnesses and
    local enough for pooled lower certificates at every width."""
    rng = np.random.default_rng(seed)
    theta = 2 * np.pi * np.arange(width) / width
    freqs = np.arange(1, 33)
    base = np.concatenate([np.cos(np.outer(theta, freqs)), np.sin(np.outer(theta, freqs))], axis=1) * np.sqrt(1.5)
    q = base + 0.05 * rng.standard_normal(base.shape)
    k = base + 0.05 * rng.standard_normal(base.shape)
    return Operator("qk", {"Q": q, "K": k})


def _float_attention(op: Operator) -> np.ndarray:
    q, k = op.arrays["Q"], op.arrays["K"]
    return softmax(q, k)


def _randomized_svd(a: np.ndarray, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``U, W`` (columns in order of importance) with ``a ~ U W^T`` (Halko et al., one power step)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(a @ rng.standard_normal((a.shape[1], rank + 16)))
    basis, _ = np.linalg.qr(a @ (a.T @ basis))
    u, s, vt = np.linalg.svd(basis.T @ a, full_matrices=False)
    return (basis @ u)[:, :rank] * s[:rank], np.ascontiguousarray(vt[:rank].T)


def _pooling(width: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """X (k x m): averages over k contiguous row groups; Y (N x k): indicators of k key groups."""
    groups = np.arange(width) * k // width
    x = np.zeros((k, width))
    x[groups, np.arange(width)] = 1.0
    x /= x.sum(axis=1, keepdims=True)
    y = np.zeros((width, k))
    y[np.arange(width), groups] = 1.0
    return x, y


def make_wide_certificate(width: int, path: Path, seed: int = 45) -> dict[str, object]:
    """A synthetic certificate of the circle head (unsigned): for eps 0.5 / 0.25 / 0.1 the
    smallest truncated-SVD rank of FLOOR_RANKS that passes in float64 and the largest pooled
    lower end k (powers of 2 up to 256) whose float64 threshold exceeds eps by 1 %."""
    op = _circle_operator(width, seed)
    a = _float_attention(op)
    U, W = _randomized_svd(a, max(FLOOR_RANKS), seed)
    error = lambda r: float(np.abs(a - U[:, :r] @ W[:, :r].T).sum(axis=1).max())  # noqa: E731
    thresholds = {}
    for k in (2, 4, 8, 16, 32, 64, 128, 256):
        x, y = _pooling(width, k)
        thresholds[k] = 1 / np.abs(np.linalg.inv(x @ a @ y)).sum(axis=1).max()
    brackets, start, summary = [], 0, []
    for eps in ("0.5", "0.25", "0.1"):
        ranks = FLOOR_RANKS[start:]
        r = next((r for r in ranks if error(r) <= 0.999 * float(eps)), None)
        if r is None:
            raise SystemExit(f"width {width}: no rank up to {max(FLOOR_RANKS)} reaches eps {eps}")
        start = FLOOR_RANKS.index(r)
        k = max([k for k, t in thresholds.items() if t > 1.01 * float(eps)], default=1)
        lower = LowerEnd(1, "trivial") if k == 1 else LowerEnd(k, "pooling", *_pooling(width, k))
        brackets.append(Bracket(eps, lower, UpperEnd(r, "rsvd", np.ascontiguousarray(U[:, :r]), np.ascontiguousarray(W[:, :r]))))
        summary.append({"eps": eps, "k": k, "r": r})
    doc = certificate_document(f"bench/circle-w{width}", op, brackets, created=utc_now_rfc3339(),
                               provenance={"synthetic": "benchmarks/bench_verify.py make_wide_certificate", "width": width})
    write_json_atomic(path, doc)
    return {"width": width, "synthetic": True, "brackets": summary, "bytes": path.stat().st_size}


def _same_kernels() -> dict[str, str]:
    """The environment of a child that runs the BLAS and numpy kernels ``softrank-verify`` runs
    (``import softrank_cert`` pins the AVX2 ones on x86-64: softrank_cert/blas_kernels.py)."""
    from softrank_cert import blas_kernels

    env = dict(os.environ)
    if blas_kernels.avx2_x86():
        env.setdefault("OPENBLAS_CORETYPE", blas_kernels.CORETYPE)
        env.setdefault("NPY_DISABLE_CPU_FEATURES", blas_kernels.numpy_above_avx2())
    return env


def _run_child(command: list[str]) -> dict[str, float]:
    """One whole-process run, measured by ``/usr/bin/time`` (a small process between this one and
    the command, so that the child's peak is not this process's, which a fork would pass on):
    wall seconds, CPU seconds (user + system) and peak RSS."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", report.name, *command],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_same_kernels())
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr[-400:]}")
        wall, user, system, peak_kb = report.read().split()[-4:]
    return {"wall_s": float(wall), "cpu_s": float(user) + float(system), "peak_mb": int(peak_kb) / 1024}


def _in_process(tool: str, cert: Path) -> dict[str, float]:
    """Seconds of the checks alone (imports and reading the file excluded), in a fresh process."""
    code = (
        "import json,sys,time\n"
        "from threadpoolctl import threadpool_limits\n"
        f"sys.path.insert(0, {str(RECOMPUTE.parent)!r})\n"
        "from numpy_recompute import recompute\n"
        "from softrank_cert.verification import verify_certificate_bytes\n"
        f"raw = open({str(cert)!r}, 'rb').read()\n"
        "with threadpool_limits(limits=1, user_api='blas'):\n"
        "    c, w = time.process_time(), time.perf_counter()\n"
        f"    report = {'recompute(raw)' if tool == 'numpy' else 'verify_certificate_bytes(raw)'}\n"
        "    c, w = time.process_time() - c, time.perf_counter() - w\n"
        f"engines = {'[]' if tool == 'numpy' else 'sorted({v.engine for v in report.verdicts})'}\n"
        f"ok = {'True' if tool == 'numpy' else 'report.ok'}\n"
        "print(json.dumps({'cpu_s': c, 'wall_s': w, 'engines': engines, 'ok': ok}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return round(statistics.median(run[key] for run in runs), 3)


def floor_width(width: int, cert: Path, repeats: int) -> dict[str, object]:
    """Interleaved runs of softrank-verify and the numpy recomputation on one certificate."""
    verify_cmd = ["softrank-verify", str(cert)]
    numpy_cmd = [sys.executable, str(RECOMPUTE), str(cert)]
    whole: dict[str, list] = {"verify": [], "numpy": []}
    inner: dict[str, list] = {"verify": [], "numpy": []}
    for _ in range(repeats):
        whole["verify"].append(_run_child(verify_cmd))
        whole["numpy"].append(_run_child(numpy_cmd))
        inner["verify"].append(_in_process("verify", cert))
        inner["numpy"].append(_in_process("numpy", cert))
    row: dict[str, object] = {"width": width, "repeats": repeats, "certificate_bytes": cert.stat().st_size,
                              "engines": inner["verify"][0]["engines"], "verified": inner["verify"][0]["ok"]}
    for scope, runs in (("whole", whole), ("in_process", inner)):
        for tool in ("verify", "numpy"):
            for key in ("cpu_s", "wall_s") + (("peak_mb",) if scope == "whole" else ()):
                row[f"{scope}_{tool}_{key}"] = _median(runs[tool], key)
        row[f"{scope}_cpu_ratio"] = round(row[f"{scope}_verify_cpu_s"] / row[f"{scope}_numpy_cpu_s"], 2)
    row["peak_ratio"] = round(row["whole_verify_peak_mb"] / row["whole_numpy_peak_mb"], 2)
    return row


def floor_main(widths: list[int], repeats: dict[int, int], out: Path, keep: Path | None) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        for width in widths:
            if width == 512 and REAL_W512.exists():
                cert, made = REAL_W512, {"width": 512, "synthetic": False, "source": str(REAL_W512.relative_to(RESULTS.parent.parent))}
            else:
                cert = folder / f"circle-w{width}.json"
                made = make_wide_certificate(width, cert) if not cert.exists() else {"width": width, "synthetic": True}
            made["brackets"] = [{"eps": b["eps"], "k": b["lower"]["k"], "r": b["upper"]["r"]}
                                for b in json.loads(cert.read_bytes())["brackets"]]
            row = floor_width(width, cert, repeats.get(width, 3))
            row["certificate"] = made
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"benchmark": "softrank-verify (default options) vs benchmarks/numpy_recompute.py, one BLAS thread each",
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "date": utc_now_rfc3339(), "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(floor_markdown(result))


def floor_markdown(result: dict) -> str:
    """The table of a ``--floor`` result (medians; CPU seconds are the figures to compare)."""
    lines = [f"# softrank-verify against a plain numpy recomputation ({result['date']})", "",
             "Written by `python benchmarks/bench_verify.py --floor` (issue 45). Width 512 is a real SmolLM2 "
             "certificate of the committed seed-scale sample; the wider ones are SYNTHETIC "
             "(`make_wide_certificate`: a local-attention `qk` head on a circle, d = 64, randomized-SVD "
             "witnesses and pooled lower ends, unsigned), as no real certificate that wide is committed. "
             "Both sides run one BLAS thread and the same BLAS and numpy kernels.", "",
             f"{result['benchmark']}; {result['machine']['cpus']} cores, Python {result['machine']['python']}. "
             "Medians of the runs (`repeats`), interleaved. Ratio = softrank-verify / numpy, CPU seconds "
             "(user + system). Whole process: start-up, imports, reading, every check; in-process: the checks "
             "alone after imports and reading. Peak: the largest resident set of the child.", "",
             "| width | certificate | claims decided by | whole: verify / numpy CPU s | ratio | in-process: verify / numpy CPU s | ratio | peak MB verify / numpy | ratio | runs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        cert = row["certificate"]
        what = "real (seed-scale sample)" if not cert.get("synthetic") else "synthetic"
        if cert.get("brackets"):
            what += " " + ", ".join(f"eps {b['eps']}: k {b['k']}, r {b['r']}" for b in cert["brackets"])
        lines.append(f"| {row['width']} | {what} | {', '.join(row['engines'])} | "
                     f"{row['whole_verify_cpu_s']} / {row['whole_numpy_cpu_s']} | {row['whole_cpu_ratio']} | "
                     f"{row['in_process_verify_cpu_s']} / {row['in_process_numpy_cpu_s']} | {row['in_process_cpu_ratio']} | "
                     f"{row['whole_verify_peak_mb']:.0f} / {row['whole_numpy_peak_mb']:.0f} | {row['peak_ratio']} | {row['repeats']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--floor" in sys.argv:
        floor_parser = argparse.ArgumentParser(description="issue 45: softrank-verify vs a numpy recomputation")
        floor_parser.add_argument("--floor", action="store_true")
        floor_parser.add_argument("--widths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
        floor_parser.add_argument("--repeats", type=int, default=3, help="runs per width below 4096 (4096: 2, 8192: 1)")
        floor_parser.add_argument("--keep", type=Path, help="folder for the synthetic certificates (reused if present)")
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        floor_parser.add_argument("--out", type=Path, default=RESULTS / f"verify_floor-{stamp}.json")
        floor_args = floor_parser.parse_args()
        floor_main(floor_args.widths, {w: floor_args.repeats if w < 4096 else (2 if w == 4096 else 1)
                                       for w in floor_args.widths}, floor_args.out, floor_args.keep)
    else:
        main()
