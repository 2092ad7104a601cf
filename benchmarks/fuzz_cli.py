"""Fuzzing the certificate loader and verification pipeline (issue 7).

Hypothesis generates JSON-level mutations of valid certificates (delete / insert / replace keys
and values, type swaps, copies between fields, huge integers, floats, NaN) and byte-level
mutations (truncation, inserted random bytes, flipped bytes); the seed certificates and the
mutation strategies are in ``tests/adversarial/mutations.py``.  Every input goes through the
in-process pipeline of ``softrank-verify`` (strict JSON, schema, arrays, signature, claims with
both the Arb and the exact kernel, consistency); the contract is that it ends with exit
0 / 1 / 2 / 3 and that no exception other than ``SoftrankError`` escapes.  A handful of inputs
also go through the real ``softrank-verify`` subprocess (exit in {0,1,2,3}, no traceback).

Run:  python benchmarks/fuzz_cli.py [--examples 3000] [--subprocess 12]
Results: benchmarks/results/fuzz.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))  # the seed certificates and the mutations live in tests/

from softrank_cert.certio.certificate import decode_certificate, parse_json_strict  # noqa: E402
from softrank_cert.errors import SoftrankError  # noqa: E402
from softrank_cert.kernel import Status  # noqa: E402
from softrank_cert.verification import check_claims, check_consistency, check_signature  # noqa: E402
from tests.adversarial.mutations import SEEDS, mutated_input  # noqa: E402


# ----------------------------------------------------------------------------------------
# The in-process pipeline (steps 1-6 of softrank-verify, from bytes)
# ----------------------------------------------------------------------------------------

def pipeline_exit(raw: bytes) -> tuple[int, int]:
    """(exit with the Arb kernel, exit with the exact kernel); only SoftrankError is caught."""
    try:
        document = parse_json_strict(raw)
        certificate = decode_certificate(document)
        check_signature(document, trusted_keys=None, require_signature=False)
    except SoftrankError as exc:
        return exc.exit_code, exc.exit_code
    codes = []
    for kernel in ("arb", "exact"):
        try:
            verdicts = [v for pair in check_claims(certificate, kernel=kernel) for v in pair]
            check_consistency(verdicts, certificate.operator_id)
        except SoftrankError as exc:
            codes.append(exc.exit_code)
            continue
        statuses = {v.status for v in verdicts}
        codes.append(1 if Status.REJECTED in statuses else 3 if Status.INCONCLUSIVE in statuses else 0)
    return codes[0], codes[1]


def verify_cmd() -> list[str]:
    found = shutil.which("softrank-verify")
    return [found] if found else [sys.executable, "-m", "softrank_cert.cli.verify"]


def fuzz(examples: int = 2000, seed: int = 0, subprocess_count: int = 10) -> dict[str, Any]:
    """Run the campaign; never raises for a pipeline failure (they are recorded)."""
    exits: Counter = Counter()
    failures: list[dict[str, Any]] = []
    corpus: set[str] = set()
    kept: list[bytes] = []
    t0 = time.perf_counter()

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(mutated_input())
    def run(raw: bytes) -> None:
        corpus.add(hashlib.sha256(raw).hexdigest())
        try:
            arb, exact = pipeline_exit(raw)
        except Exception as exc:  # anything but SoftrankError is a finding
            failures.append({"error": f"{type(exc).__name__}: {str(exc)[:200]}", "input": raw[:4000].decode("utf-8", "replace"),
                             "traceback": traceback.format_exc()[-1500:]})
            return
        exits[f"arb={arb},exact={exact}"] += 1
        if arb not in (0, 1, 2, 3) or exact not in (0, 1, 2, 3):
            failures.append({"error": f"exit codes arb={arb} exact={exact}", "input": raw[:4000].decode("utf-8", "replace")})
        if len(kept) < 400 and (len(corpus) % 7 == 0):
            kept.append(raw)

    import hypothesis

    run = hypothesis.seed(seed)(run)
    run()
    elapsed = time.perf_counter() - t0
    in_process = sum(exits.values()) + len(failures)

    # a handful through the real command line
    sub_results = []
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        picks = [json.dumps(SEEDS[0]).encode()] + kept[:: max(1, len(kept) // max(1, subprocess_count - 1))][: subprocess_count - 1]
        for i, raw in enumerate(picks):
            path = Path(tmp) / f"f{i}.json"
            path.write_bytes(raw)
            env = dict(os.environ)
            env.pop("SOFTRANK_DEBUG", None)
            proc = subprocess.run([*verify_cmd(), str(path)], capture_output=True, text=True, timeout=120, env=env)
            ok = proc.returncode in (0, 1, 2, 3) and "Traceback" not in proc.stderr + proc.stdout
            sub_results.append({"exit": proc.returncode, "ok": ok, "stderr": proc.stderr.strip()[:200]})
            if not ok:
                failures.append({"error": f"subprocess exit {proc.returncode}", "input": raw[:4000].decode("utf-8", "replace"),
                                 "stderr": proc.stderr[-1500:]})
    sub_elapsed = time.perf_counter() - t1
    return {
        "fuzz": "certificate loader + pipeline (issue 7)",
        "seed": seed,
        "inputs_in_process": in_process,
        "corpus_size_distinct": len(corpus),
        "seed_documents": len(SEEDS),
        "seconds_in_process": round(elapsed, 2),
        "inputs_per_second": round(in_process / elapsed, 1) if elapsed else None,
        "exit_code_pairs": dict(exits.most_common()),
        "subprocess_runs": len(sub_results),
        "subprocess_exit_codes": dict(Counter(r["exit"] for r in sub_results)),
        "subprocess_seconds": round(sub_elapsed, 2),
        "failures": len(failures),
        "failure_examples": failures[:10],
        "platform": {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subprocess", type=int, default=12)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "fuzz.json")
    args = parser.parse_args()
    result = fuzz(args.examples, args.seed, args.subprocess)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "failure_examples"}, indent=1))
    for f in result["failure_examples"]:
        print(f["error"], file=sys.stderr)
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
