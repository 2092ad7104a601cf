"""Adversarial soundness campaign: >= 10,000 false or tampered certificates, zero accepted.

Every certificate is run through the in-process pipeline of ``softrank-verify`` (strict JSON,
schema, arrays + SHA-256, signature, claims, consistency) with each checker: the default
``auto`` (the kernel's row-block float64 path, its float64 path, then Arb balls for what
neither decides), ``arb`` (Arb balls only), ``float64`` (the float64 path only), ``rowblock``
(the row-block path only: it proves or declines, never rejects) and ``exact`` (the independent
exact-rational kernel, ``softrank_cert.exact_kernel``).  A sample also goes through
``verify_certificate_file`` on a real file (same exit code as ``auto`` required).

The certificates come from ``tests/adversarial/generators.py`` and, for the extreme families
(huge magnitudes with overflowing products, one-hot rows with margins down to exp(-2000), beta
as ``inv_sqrt_d`` against the decimal of its double, general-key lower certificates perturbed by
one ulp or the next decimal, claims within a few rounding widths of the row-block path's own
bound), ``tests/adversarial/extreme.py`` (deterministic for a seed);
their truth from ``tests/oracle.py``, independently of both kernels, with mpmath at 256 bits
(exact dot products and witness products), and a certificate counts as *false* only when the
computed margin is clearly on the false side (relative 2**-150; 2**-180 absolute for witness
errors); margins closer than that are *borderline* and not counted as false.  A tampered
certificate that stays mathematically valid (e.g. a flipped low mantissa bit of U) is *true*
and may legitimately be accepted.  Categories whose inputs are malformed by construction
(non-finite values, shapes, duplicate keys, eps strings, hashes, signatures) are *invalid*:
they must end with exit 2.

Accepted = exit 0 on a false, invalid or borderline certificate.  It must be 0 (for every checker).
Also counted: every claim each checker decided (``claims_checked``), and true certificates that
a checker REJECTED (``true_rejected``: a kernel too strict, never a soundness failure; it should be 0).
A decided conflict = one checker VERIFIED and another REJECTED on the same claim; it must be 0.

Run:  python benchmarks/adversarial_campaign.py              (full, ~11k certificates)
      python benchmarks/adversarial_campaign.py --sample 300 (random subset)
      python benchmarks/adversarial_campaign.py --sample 600 --extreme 40   (the committed sample)
Results: benchmarks/results/adversarial.json (full) / adversarial-sample.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))  # the generators and the truth oracle live in tests/

from softrank_cert.certio.certificate import decode_certificate, parse_json_strict  # noqa: E402
from softrank_cert.certio.signing import generate_private_key  # noqa: E402
from softrank_cert.errors import EXIT_INCONCLUSIVE, EXIT_REJECTED, EXIT_VERIFIED, SoftrankError  # noqa: E402
from softrank_cert.kernel import Status  # noqa: E402
from softrank_cert.verification import check_claims, check_consistency, check_signature, verify_certificate_file  # noqa: E402
from tests.adversarial.extreme import extreme_variants  # noqa: E402
from tests.adversarial.generators import Variant, make_base, variants_for  # noqa: E402


# ----------------------------------------------------------------------------------------
# The pipeline
# ----------------------------------------------------------------------------------------

def exit_of(verdicts) -> int:
    statuses = {v.status for v in verdicts}
    if Status.REJECTED in statuses:
        return EXIT_REJECTED
    if Status.INCONCLUSIVE in statuses:
        return EXIT_INCONCLUSIVE
    return EXIT_VERIFIED


#: The checkers every certificate goes through (``softrank-verify --kernel ...``).
CHECKERS = ("auto", "arb", "float64", "rowblock", "exact")


def run_pipeline(raw: bytes) -> dict[str, Any]:
    """Steps 1-8 of softrank-verify in-process (softrank_cert.verification); every checker decides step 7."""
    out: dict[str, Any] = {}
    try:
        document = parse_json_strict(raw)
        certificate = decode_certificate(document)
        check_signature(document, trusted_keys=None, require_signature=False)
    except SoftrankError as exc:
        return {**{kernel: exc.exit_code for kernel in CHECKERS}, "reason": str(exc)[:120]}
    statuses = {}
    for kernel in CHECKERS:
        try:
            verdicts = [v for pair in check_claims(certificate, kernel=kernel) for v in pair]
            check_consistency(verdicts, certificate.operator_id)
        except SoftrankError as exc:
            out[kernel] = exc.exit_code
            statuses[kernel] = None
        else:
            out[kernel] = exit_of(verdicts)
            statuses[kernel] = [v.status.value for v in verdicts]
    out["statuses"] = statuses
    return out


def run_campaign(n_bases: int = 56, seed: int = 7, sample: int | None = None, file_every: int = 40,
                 progress: bool = False, extreme: int = 40) -> dict[str, Any]:
    t0 = time.perf_counter()
    signing_key = generate_private_key()
    bases = [make_base(i, seed) for i in range(n_bases)]
    variants: list[Variant] = []
    for base in bases:
        variants.extend(variants_for(base, bases, seed, signing_key))
    if sample is not None:
        variants = random.Random(seed).sample(variants, min(sample, len(variants)))
    extra = extreme_variants(extreme, seed)
    variants.extend(extra)  # never sampled: every extreme instance runs
    t_gen = time.perf_counter() - t0
    per_cat: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "truth": Counter(), **{f"exit_{kernel}": Counter() for kernel in CHECKERS}})
    accepted: list[dict[str, Any]] = []
    disagreements: list[dict[str, Any]] = []
    file_checks = file_mismatch = 0
    claims_checked = Counter()
    true_rejected: list[dict[str, Any]] = []
    controls_accepted = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for idx, (cat, thunk) in enumerate(variants):
            raw, truth = thunk()
            res = run_pipeline(raw)
            rec = per_cat[cat]
            rec["count"] += 1
            rec["truth"][truth] += 1
            for kernel in CHECKERS:
                rec[f"exit_{kernel}"][res[kernel]] += 1
            if truth != "true":
                for kernel in CHECKERS:
                    if res[kernel] == 0:
                        accepted.append({"category": cat, "truth": truth, "kernel": kernel, "index": idx,
                                         "document": raw.decode("utf-8", "replace")[:20000]})
            else:
                controls_accepted[cat] += cat.startswith("control") and res["auto"] == 0
                true_rejected += [{"category": cat, "kernel": kernel, "index": idx} for kernel in CHECKERS
                                  if res[kernel] == EXIT_REJECTED]
            st = res.get("statuses") or {}
            for kernel in CHECKERS:
                claims_checked[kernel] += len(st.get(kernel) or [])
            decided_lists = [st[kernel] for kernel in CHECKERS if st.get(kernel)]
            if len({tuple(x) for x in decided_lists}) > 1:
                decided = any({"VERIFIED", "REJECTED"} <= set(claim) for claim in zip(*decided_lists))
                disagreements.append({"category": cat, "truth": truth, **{k: st.get(k) for k in CHECKERS},
                                      "decided_conflict": decided,
                                      "document": raw.decode("utf-8", "replace")[:20000] if decided or len(disagreements) < 3 else None})
            if idx % file_every == 0:  # the real file entry point must agree
                path = Path(tmp) / f"c{idx}.json"
                path.write_bytes(raw)
                try:
                    code = verify_certificate_file(path).exit_code
                except SoftrankError as exc:
                    code = exc.exit_code
                file_checks += 1
                file_mismatch += code != res["auto"]
            if progress and idx % 500 == 0:
                print(f"{idx}/{len(variants)} {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    runtime = time.perf_counter() - t0
    categories = {}
    for cat, rec in sorted(per_cat.items()):
        categories[cat] = {"count": rec["count"], "truth": dict(rec["truth"]),
                           **{f"exit_codes_{kernel}": {str(k): v for k, v in sorted(rec[f"exit_{kernel}"].items())}
                              for kernel in CHECKERS}}
    adversarial = {c: v for c, v in categories.items() if not c.startswith("control")}
    total_adv = sum(v["count"] for v in adversarial.values())
    truly_false = sum(v["truth"].get("false", 0) for v in adversarial.values())
    invalid = sum(v["truth"].get("invalid", 0) for v in adversarial.values())
    return {
        "campaign": "adversarial soundness (issues 7, 8 and 35)",
        "checkers": list(CHECKERS),
        "seed": seed, "bases": n_bases, "sample": sample,
        "certificates_total": sum(v["count"] for v in categories.values()),
        "adversarial_certificates": total_adv,
        "truly_false": truly_false,
        "invalid_by_construction": invalid,
        "tampered_but_still_true": sum(v["truth"].get("true", 0) for v in adversarial.values()),
        "borderline": sum(v["truth"].get("borderline", 0) for v in adversarial.values()),
        "accepted": len(accepted),
        "accepted_examples": accepted[:5],
        "kernel_status_disagreements": len(disagreements),
        "kernel_decided_conflicts": sum(d["decided_conflict"] for d in disagreements),
        "disagreement_examples": disagreements[:10],
        "controls_true_accepted": {k: v for k, v in controls_accepted.items() if k.startswith("control")},
        "extreme_instances_per_family": extreme, "extreme_certificates": len(extra),
        "claims_checked": dict(claims_checked),
        "true_rejected": len(true_rejected), "true_rejected_examples": true_rejected[:5],
        "file_entry_point_checks": file_checks, "file_entry_point_mismatches": file_mismatch,
        "categories": categories,
        "runtime_seconds": round(runtime, 1), "generation_seconds": round(t_gen, 1),
        "platform": {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=None, help="run a random subset of N certificates")
    parser.add_argument("--bases", type=int, default=56)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--file-every", type=int, default=40,
                        help="every N-th certificate also goes through verify_certificate_file (default 40)")
    parser.add_argument("--extreme", type=int, default=40,
                        help="instances of each extreme family (tests/adversarial/extreme.py; default 40)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = run_campaign(args.bases, args.seed, args.sample, file_every=args.file_every, progress=True,
                          extreme=args.extreme)
    out = args.out or ROOT / "results" / ("adversarial.json" if args.sample is None else "adversarial-sample.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: result[k] for k in ("certificates_total", "adversarial_certificates", "truly_false",
                                             "invalid_by_construction", "tampered_but_still_true", "borderline",
                                             "accepted", "kernel_status_disagreements", "kernel_decided_conflicts",
                                             "controls_true_accepted", "claims_checked", "true_rejected",
                                             "runtime_seconds")}, indent=1))
    sys.exit(1 if result["accepted"] or result["kernel_decided_conflicts"] else 0)


if __name__ == "__main__":
    main()
