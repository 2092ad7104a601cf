"""Fuzzing the certificate loader and verification pipeline (issue 7).

Hypothesis generates JSON-level mutations of valid certificates (delete / insert / replace keys
and values, type swaps, copies between fields, huge integers, floats, NaN) and byte-level
mutations (truncation, inserted random bytes, flipped bytes).  Every input goes through the
in-process pipeline of ``softrank-verify`` (strict JSON, schema, arrays, signature, claims with
both the Arb and the exact kernel, consistency); the contract is that it ends with exit
0 / 1 / 2 / 3 and that no exception other than ``SoftrankError`` escapes.  A handful of inputs
also go through the real ``softrank-verify`` subprocess (exit in {0,1,2,3}, no traceback).

Run:  python benchmarks/fuzz_cli.py [--examples 3000] [--subprocess 12]
Results: benchmarks/results/fuzz.json
"""

from __future__ import annotations

import argparse
import copy
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

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document, decode_certificate, parse_json_strict
from softrank_cert.certio.signing import generate_private_key, sign_document, verification_method_for
from softrank_cert.errors import SoftrankError
from softrank_cert.kernel import Operator, Status
from softrank_cert.verification import check_claims, check_consistency, check_signature

ROOT = Path(__file__).resolve().parent
CREATED = "2026-01-02T03:04:05Z"


# ----------------------------------------------------------------------------------------
# Seed corpus: valid certificates
# ----------------------------------------------------------------------------------------

def _softmax(S: np.ndarray) -> np.ndarray:
    S = S - S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


def seed_documents() -> list[dict[str, Any]]:
    S = np.array([[10.0, 0.0, -1.0], [0.5, 9.0, 0.0], [-2.0, 1.0, 11.0]])
    op = Operator("scores", {"S": S})
    A, I = _softmax(S), np.eye(3)
    scores = certificate_document("fuzz/scores", op, [
        Bracket("0.25", LowerEnd(3, "selection", I.copy(), I.copy()), UpperEnd(3, "dense", A.copy(), I.copy())),
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(3, "identity")),
    ], created=CREATED, provenance={"note": "fuzz seed", "width": 3})
    rng = np.random.default_rng(1)
    Q, K = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    qk = Operator("qk", {"Q": Q, "K": K}, beta="0.5", mask="causal")
    qk_doc = certificate_document("fuzz/qk", qk, [
        Bracket("2", LowerEnd(0, "trivial"), UpperEnd(1, "constant", np.ones((3, 1)), np.full((4, 1), 0.25))),
        Bracket("2", LowerEnd(0, "trivial"), UpperEnd(0, "zero")),
    ], created=CREATED)
    P = _softmax(rng.normal(size=(2, 3)))
    probs = certificate_document("fuzz/probs", Operator("probabilities", {"A": P}), [
        Bracket("0.125", LowerEnd(2, "selection", np.eye(2, 2), np.eye(3, 2)), UpperEnd(2, "identity")),
    ], created=CREATED)
    key = generate_private_key()
    signed = sign_document(copy.deepcopy(scores), key, created=CREATED, verification_method=verification_method_for(key.public_key()))
    return [scores, qk_doc, probs, signed]


SEEDS = seed_documents()
INTERESTING_STRINGS = [
    "0.25", "0.1", "1", "0", "-0.5", "1e-400", "0x1p-3", " 0.25", "inv_sqrt_d", "none", "causal", "qk", "scores",
    "probabilities", "float64", "float32", "base64-le", "trivial", "identity", "zero", "", "\u0000", "\ud800",
    "AAAAAAAA", "=", "0" * 64, "f" * 64, "9" * 1200, "0." + "0" * 1100 + "1", "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
    "DataIntegrityProof", "eddsa-jcs-2022", "2026-01-02T03:04:05Z", "softrank-certificate",
]
INTERESTING_INTS = [0, 1, -1, 2, 3, 4, 2**31, 2**53 + 1, 2**63, -(2**63), 16384, 16385, 10**30]

leaf = st.one_of(
    st.none(), st.booleans(), st.sampled_from(INTERESTING_INTS), st.integers(),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(INTERESTING_STRINGS), st.text(max_size=20),
)
json_value = st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                          max_leaves=8)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _type_swap(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return [value]
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return "null"


@st.composite
def mutated_input(draw) -> bytes:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["delete", "replace", "insert", "swap", "copy", "int"]))
        if not path:  # the root
            if op == "replace":
                doc = draw(json_value)
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(json_value)
        elif op == "insert":
            target = parent if isinstance(parent, (dict, list)) else doc
            if isinstance(target, dict):
                target[draw(st.sampled_from(["eps", "k", "r", "X", "U", "proof", "beta", "mask", "extra", "shape", "data"]) | st.text(max_size=6))] = draw(json_value)
            else:
                target.insert(draw(st.integers(0, len(target))), draw(json_value))
        elif op == "swap":
            parent[key] = _type_swap(parent[key])
        elif op == "copy":
            other = draw(st.sampled_from(paths))
            try:
                parent[key] = copy.deepcopy(_get(doc, other))
            except (KeyError, IndexError, TypeError):
                pass
        elif isinstance(parent[key], int) and not isinstance(parent[key], bool):
            parent[key] = parent[key] + draw(st.sampled_from([-2, -1, 1, 2, 2**40]))
        if not isinstance(doc, (dict, list)):
            break
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1])), ensure_ascii=draw(st.booleans()), allow_nan=True)
    raw = text.encode("utf-8", "surrogatepass")
    byte_op = draw(st.sampled_from(["none", "none", "none", "truncate", "insert", "flip", "dup"]))
    if raw and byte_op != "none":
        pos = draw(st.integers(0, len(raw) - 1))
        if byte_op == "truncate":
            raw = raw[:pos]
        elif byte_op == "insert":
            raw = raw[:pos] + draw(st.binary(min_size=1, max_size=8)) + raw[pos:]
        elif byte_op == "flip":
            raw = raw[:pos] + bytes([raw[pos] ^ draw(st.integers(1, 255))]) + raw[pos + 1:]
        else:
            end = min(len(raw), pos + draw(st.integers(1, 40)))
            raw = raw[:end] + raw[pos:end] + raw[end:]
    return raw


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
            verdicts = check_claims(certificate, kernel=kernel)
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
