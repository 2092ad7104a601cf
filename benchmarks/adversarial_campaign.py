"""Adversarial soundness campaign: >= 10,000 false or tampered certificates, zero accepted.

Every certificate is run through the in-process pipeline of ``softrank-verify`` (strict JSON,
schema, arrays + SHA-256, signature, claims, consistency) with each checker: the default
``auto`` (the kernel's float64 path, Arb balls for what it cannot decide), ``arb`` (Arb balls
only), ``float64`` (the float64 path only) and ``exact`` (the independent exact-rational
kernel, ``softrank_cert.exact_kernel``).  A sample also goes through
``verify_certificate_file`` on a real file (same exit code as ``auto`` required).

Truth is computed independently of both kernels, with mpmath at 256 bits (exact Fractions for
the witness product and the dot products), and a certificate counts as *false* only when the
computed margin is clearly on the false side (relative 2**-150; 2**-180 absolute for witness
errors); margins closer than that are *borderline* and not counted as false.  A tampered
certificate that stays mathematically valid (e.g. a flipped low mantissa bit of U) is *true*
and may legitimately be accepted.  Categories whose inputs are malformed by construction
(non-finite values, shapes, duplicate keys, eps strings, hashes, signatures) are *invalid*:
they must end with exit 2.

Accepted = exit 0 on a false, invalid or borderline certificate.  It must be 0 (for every checker).
A decided conflict = one checker VERIFIED and another REJECTED on the same claim; it must be 0.

Run:  python benchmarks/adversarial_campaign.py              (full, ~11k certificates)
      python benchmarks/adversarial_campaign.py --sample 300 (random subset)
Results: benchmarks/results/adversarial.json (full) / adversarial-sample.json.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import math
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import mpmath
import numpy as np
from mpmath import mp, mpf

from softrank_cert.certio.certificate import (
    Bracket, LowerEnd, UpperEnd, certificate_document, decode_certificate, parse_json_strict,
)
from softrank_cert.certio.signing import generate_private_key, sign_document, verification_method_for
from softrank_cert.errors import EXIT_INCONCLUSIVE, EXIT_REJECTED, EXIT_VERIFIED, SoftrankError
from softrank_cert.kernel import Operator, Status
from softrank_cert.verification import check_claims, check_consistency, check_signature, verify_certificate_file

ROOT = Path(__file__).resolve().parent
CREATED = "2026-01-02T03:04:05Z"
TRUTH_PREC = 256
GAPS = [c * 10.0 ** -j for j in range(1, 14) for c in (3, 1)]  # 3e-1 ... 1e-13 (26 gaps)
FALSE_REL = mpf(2) ** -150
FALSE_ABS = mpf(2) ** -180


# ----------------------------------------------------------------------------------------
# Independent truth (mpmath, 256 bits; never calls a kernel)
# ----------------------------------------------------------------------------------------

def _mpq(q: Fraction) -> mpf:
    return mpf(q.numerator) / q.denominator


def exact_of_mpf(x: mpf) -> Fraction:
    man, exp = x.man_exp
    man, exp = int(man), int(exp)
    return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)


def decimal_of(q: Fraction, up: bool, digits: int = 32) -> str:
    """A plain decimal string <= q (up=False) or >= q (up=True); q > 0."""
    e = math.floor(math.log10(q.numerator) - math.log10(q.denominator))
    places = max(1, digits - e)
    scaled = q * 10**places
    n = math.ceil(scaled) if up else math.floor(scaled)
    if n <= 0:
        return decimal_of(q, up, digits + 10)
    text = str(n).rjust(places + 1, "0")
    text = text[:-places] + "." + text[-places:]
    value = Fraction(int(text.replace(".", "")), 10**places)
    assert (value >= q) if up else (value <= q)
    return text


def truth_A(kind: str, arrays: dict[str, np.ndarray], beta: str, mask: str) -> list[list[mpf]]:
    with mp.workprec(TRUTH_PREC):
        if kind == "probabilities":
            return [[mpf(v) for v in row] for row in arrays["A"].tolist()]
        if kind == "scores":
            S = [[mpf(v) for v in row] for row in arrays["S"].tolist()]
        else:
            Q = [[Fraction(v) for v in row] for row in arrays["Q"].tolist()]
            K = [[Fraction(v) for v in row] for row in arrays["K"].tolist()]
            b = 1 / mp.sqrt(len(Q[0])) if beta == "inv_sqrt_d" else _mpq(Fraction(beta))
            S = [[b * _mpq(sum((x * y for x, y in zip(q, k)), Fraction(0))) for k in K] for q in Q]
        m, n = len(S), len(S[0])
        A = []
        for i in range(m):
            allowed = n if mask == "none" else i + n - m + 1
            c = max(S[i][:allowed])
            e = [mp.exp(v - c) for v in S[i][:allowed]]
            z = mpmath.fsum(e)
            A.append([v / z for v in e] + [mpf(0)] * (n - allowed))
        return A


def _norm(rows) -> Any:
    return max(sum(abs(v) for v in row) for row in rows)


def truth_upper(A, U: np.ndarray, W: np.ndarray, eps: Fraction) -> str:
    with mp.workprec(TRUTH_PREC):
        Uf = [[Fraction(v) for v in row] for row in U.tolist()]
        Wf = [[Fraction(v) for v in row] for row in W.tolist()]
        err = _norm([[A[i][j] - _mpq(sum((a * b for a, b in zip(Uf[i], Wf[j])), Fraction(0)))
                      for j in range(len(Wf))] for i in range(len(Uf))])
        margin = _mpq(eps) - err
        tol = FALSE_ABS * (1 + err)
        return "true" if margin > tol else "false" if margin < -tol else "borderline"


def witness_error(A, U: np.ndarray, W: np.ndarray) -> mpf:
    with mp.workprec(TRUTH_PREC):
        Uf = [[Fraction(v) for v in row] for row in U.tolist()]
        Wf = [[Fraction(v) for v in row] for row in W.tolist()]
        return _norm([[A[i][j] - _mpq(sum((a * b for a, b in zip(Uf[i], Wf[j])), Fraction(0)))
                       for j in range(len(Wf))] for i in range(len(Uf))])


def lower_threshold(A, X: np.ndarray, Y: np.ndarray) -> tuple[mpf, mpf] | None:
    """(T, cond) with T = 1/(||X|| ||Y|| ||(XAY)^-1||), or None when XAY is (numerically) singular."""
    with mp.workprec(TRUTH_PREC):
        Xm = mp.matrix([[mpf(v) for v in row] for row in X.tolist()])
        Ym = mp.matrix([[mpf(v) for v in row] for row in Y.tolist()])
        M = Xm * mp.matrix(A) * Ym
        try:
            Minv = M ** -1
        except ZeroDivisionError:
            return None
        rows = lambda mat: [[mat[i, j] for j in range(mat.cols)] for i in range(mat.rows)]
        ninv = _norm(rows(Minv))
        nx = max(_mpq(sum((abs(Fraction(v)) for v in row), Fraction(0))) for row in X.tolist())
        ny = max(_mpq(sum((abs(Fraction(v)) for v in row), Fraction(0))) for row in Y.tolist())
        if nx == 0 or ny == 0 or ninv == 0:
            return None
        return 1 / (nx * ny * ninv), _norm(rows(M)) * ninv


def truth_lower(A, X: np.ndarray, Y: np.ndarray, eps: Fraction) -> str:
    res = lower_threshold(A, X, Y)
    if res is None:
        return "borderline"  # singular to 256 bits: neither proved true nor counted as false
    T, cond = res
    with mp.workprec(TRUTH_PREC):
        if cond > mpf(2) ** 90:
            return "borderline"
        product = _mpq(eps) / T
        return "true" if product < 1 - FALSE_REL else "false" if product > 1 + FALSE_REL else "borderline"


def _raw_array(obj: dict) -> np.ndarray:
    raw = base64.b64decode(obj["data"])
    return np.frombuffer(raw, dtype="<f8").reshape(obj["shape"]).astype(np.float64)


def truth_of_document(doc: dict) -> str:
    """'true' / 'false' / 'borderline' / 'invalid' (non-finite arrays) for a schema-shaped document."""
    op_doc = doc["operator"]
    arrays = {k: _raw_array(v) for k, v in op_doc["arrays"].items()}
    ends = [(b, side) for b in doc["brackets"] for side in ("lower", "upper")]
    all_arrays = list(arrays.values()) + [_raw_array(b[s][n]) for b, s in ends for n in ("X", "Y", "U", "W") if n in b[s]]
    if not all(np.isfinite(a).all() for a in all_arrays):
        return "invalid"
    A = truth_A(op_doc["kind"], arrays, op_doc.get("beta", "inv_sqrt_d"), op_doc["mask"])
    m, n = len(A), len(A[0])
    classes = []
    for b in doc["brackets"]:
        eps = Fraction(b["eps"])
        lo, up = b["lower"], b["upper"]
        # ||A|| exactly: 1 for softmax rows, the exact doubles' max row l1 for 'probabilities'
        normA = Fraction(1) if op_doc["kind"] != "probabilities" else \
            max(sum((abs(Fraction(v)) for v in row), Fraction(0)) for row in arrays["A"].tolist())
        if "X" in lo:
            classes.append(truth_lower(A, _raw_array(lo["X"]), _raw_array(lo["Y"]), eps))
        elif lo["k"] == 1:  # trivial k = 1 iff ||A|| > eps
            classes.append("true" if normA > eps else "false")  # exact
        elif lo["k"] == 0:
            classes.append("true")
        else:
            classes.append("invalid")
        if "U" in up:
            classes.append(truth_upper(A, _raw_array(up["U"]), _raw_array(up["W"]), eps))
        elif up["r"] == min(m, n) and up["construction"] == "identity":
            classes.append("true")
        elif up["r"] == 0:
            classes.append("true" if normA <= eps else "false")  # exact
        else:
            classes.append("invalid")
    for c in ("invalid", "false", "borderline"):
        if c in classes:
            return c
    return "true"


# ----------------------------------------------------------------------------------------
# Base operators and certificates
# ----------------------------------------------------------------------------------------

def float_softmax(S: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    S = np.where(allowed, S, -np.inf)
    S = S - S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


@dataclass
class Base:
    index: int
    op: Operator
    op_id: str
    A: list  # truth (mpf)
    U: np.ndarray
    W: np.ndarray
    r: int
    err: mpf
    X: np.ndarray
    Y: np.ndarray
    k: int
    T: mpf


def make_operator(index: int, rng: np.random.Generator) -> tuple[Operator, np.ndarray]:
    m = int(rng.integers(5, 9))
    n = int(rng.integers(m, 9))
    variant = index % 6
    if variant in (0, 1):
        S = rng.normal(size=(m, n)) * rng.uniform(1, 4)
        op = Operator("scores", {"S": S}, mask="causal" if variant == 1 else "none")
    elif variant in (2, 3):
        d = int(rng.integers(2, 6))
        Q, K = rng.normal(size=(m, d)) * 1.5, rng.normal(size=(n, d)) * 1.5
        beta = "inv_sqrt_d" if variant == 2 else "0.3"
        op = Operator("qk", {"Q": Q, "K": K}, beta=beta, mask="causal" if index % 12 == 3 else "none")
        S = (Q @ K.T) * (1 / math.sqrt(d) if beta == "inv_sqrt_d" else 0.3)
    elif variant == 4:
        S = rng.normal(size=(m, n)) * 2
        op = Operator("probabilities", {"A": float_softmax(S, np.ones((m, n), bool))})
    else:  # peaked scores
        S = rng.normal(size=(m, n)) + 8 * np.eye(m, n)
        op = Operator("scores", {"S": S})
    Af = np.array(op.arrays["A"]) if op.kind == "probabilities" else float_softmax(S, op.allowed())
    return op, Af


def make_base(index: int, seed: int) -> Base:
    rng = np.random.default_rng([seed, index])
    op, Af = make_operator(index, rng)
    m, n = op.shape
    A = truth_A(op.kind, dict(op.arrays), op.beta, op.mask)
    u, s, vt = np.linalg.svd(Af)
    r = 1
    while r < op.p and np.abs(Af - (u[:, :r] * s[:r]) @ vt[:r]).sum(axis=1).max() > 0.4:
        r += 1
    U, W = np.ascontiguousarray(u[:, :r] * s[:r]), np.ascontiguousarray(vt[:r].T)
    err = witness_error(A, U, W)
    k = min(3, op.p) if index % 3 else 2
    if index % 4 == 1:  # selection certificate on the k largest diagonal-ish entries
        X = np.zeros((k, m)); Y = np.zeros((n, k))
        for a in range(k):
            X[a, a] = 1.0; Y[a, a] = 1.0
    else:
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
    res = lower_threshold(A, X, Y)
    if res is None:
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
        res = lower_threshold(A, X, Y)
    return Base(index, op, f"adv/base-{index}", A, U, W, r, err, X, Y, k, res[0])


def upper_doc(base: Base, eps: str, U=None, W=None, r=None, op=None) -> dict:
    U = base.U if U is None else U
    W = base.W if W is None else W
    r = base.r if r is None else r
    op = base.op if op is None else op
    return certificate_document(base.op_id, op, [Bracket(eps, LowerEnd(1, "trivial"), UpperEnd(r, "svd", U, W))], created=CREATED)


def lower_doc(base: Base, eps: str, X=None, Y=None, k=None, op=None) -> dict:
    X = base.X if X is None else X
    Y = base.Y if Y is None else Y
    k = base.k if k is None else k
    op = base.op if op is None else op
    return certificate_document(base.op_id, op, [Bracket(eps, LowerEnd(k, "svd-pair", X, Y), UpperEnd(op.p, "identity"))], created=CREATED)


def valid_upper_eps(base: Base) -> str:
    return decimal_of(exact_of_mpf(base.err * (1 + mpf("1e-6"))), up=True)


def valid_lower_eps(base: Base) -> str:
    return decimal_of(exact_of_mpf(base.T * (1 - mpf("1e-6"))), up=False)


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def encode_into(obj: dict, array: np.ndarray, rehash: bool = True) -> None:
    raw = np.ascontiguousarray(array, dtype="<f8").tobytes()
    obj["data"] = base64.b64encode(raw).decode("ascii")
    obj["shape"] = [int(array.shape[0]), int(array.shape[1])]
    if rehash:
        obj["sha256"] = hashlib.sha256(raw).hexdigest()


def array_paths(doc: dict) -> list[tuple]:
    paths = [("operator", "arrays", name) for name in doc["operator"]["arrays"]]
    for bi, b in enumerate(doc["brackets"]):
        for side in ("lower", "upper"):
            for name in ("X", "Y", "U", "W"):
                if name in b[side]:
                    paths.append(("brackets", bi, side, name))
    return paths


def at(doc: dict, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


# ----------------------------------------------------------------------------------------
# Variants: (category, thunk -> (raw bytes, truth class))
# ----------------------------------------------------------------------------------------

Variant = tuple[str, Callable[[], tuple[bytes, str]]]


def variants_for(base: Base, bases: list[Base], seed: int, signing_key) -> list[Variant]:
    out: list[Variant] = []
    eps_u, eps_l = valid_upper_eps(base), valid_lower_eps(base)

    def add(cat: str, fn: Callable[[], tuple[bytes, str]]) -> None:
        out.append((cat, fn))

    # 1. near-threshold false claims and true controls
    for g in GAPS:
        below = decimal_of(exact_of_mpf(base.err * (1 - mpf(g))), up=False)
        above = decimal_of(exact_of_mpf(base.err * (1 + mpf(g))), up=True)
        add("near_upper_eps_below_error", lambda e=below: (dumps(upper_doc(base, e)), truth_of_document(upper_doc(base, e))))
        add("control_upper_eps_above_error", lambda e=above: (dumps(upper_doc(base, e)), truth_of_document(upper_doc(base, e))))
        lo_above = decimal_of(exact_of_mpf(base.T * (1 + mpf(g))), up=True)
        lo_below = decimal_of(exact_of_mpf(base.T * (1 - mpf(g))), up=False)
        add("near_lower_eps_above_threshold", lambda e=lo_above: (dumps(lower_doc(base, e)), truth_of_document(lower_doc(base, e))))
        add("control_lower_eps_below_threshold", lambda e=lo_below: (dumps(lower_doc(base, e)), truth_of_document(lower_doc(base, e))))

    valid_docs = [upper_doc(base, eps_u), lower_doc(base, eps_l)]

    # 2. flipped bits, sha256 recomputed (reaches the kernel) -- classified by the truth
    def bitflip(doc_index: int, sub: int, rehash: bool) -> tuple[bytes, str]:
        r2 = random.Random(sub)
        doc = copy.deepcopy(valid_docs[doc_index])
        path = r2.choice(array_paths(doc))
        obj = at(doc, path)
        a = _raw_array(obj).copy()
        bits = a.view(np.uint64).reshape(-1)
        bits[r2.randrange(bits.size)] ^= np.uint64(1) << np.uint64(r2.randrange(64))
        encode_into(obj, a, rehash=rehash)
        if not rehash:
            return dumps(doc), "invalid"
        return dumps(doc), truth_of_document(doc)

    for j in range(50):
        add("bitflip_rehashed", lambda j=j: bitflip(j % 2, seed * 7919 + base.index * 101 + j, True))
    for j in range(15):
        add("bitflip_no_rehash", lambda j=j: bitflip(j % 2, seed * 7919 + base.index * 103 + 1000 + j, False))

    # 3. operator swapped under a valid witness / certificate (same shape)
    same = [b for b in bases if b.index != base.index and b.op.shape == base.op.shape] or \
           [b for b in bases if b.index != base.index]
    for j in range(8):
        other = same[(base.index + j) % len(same)]

        def swap(j=j, other=other):
            if other.op.shape != base.op.shape:  # different shapes: the decoder must refuse
                doc = upper_doc(base, eps_u)
                doc["operator"] = copy.deepcopy(upper_doc(other, valid_upper_eps(other))["operator"])
                return dumps(doc), "invalid"
            doc = upper_doc(base, eps_u, op=other.op) if j % 2 == 0 else lower_doc(base, eps_l, op=other.op)
            return dumps(doc), truth_of_document(doc)

        add("operator_swapped", swap)

    # 4. k or r edited
    def rank_edit(j: int) -> tuple[bytes, str]:
        if j == 0:
            doc = upper_doc(base, eps_u); doc["brackets"][0]["upper"]["r"] += 1; return dumps(doc), "invalid"
        if j == 1:
            doc = lower_doc(base, eps_l); doc["brackets"][0]["lower"]["k"] += 1; return dumps(doc), "invalid"
        if j == 2:
            doc = lower_doc(base, eps_l); doc["brackets"][0]["lower"]["k"] -= 1; return dumps(doc), "invalid"
        if j == 3:
            doc = upper_doc(base, eps_u); doc["brackets"][0]["upper"]["r"] = 0; return dumps(doc), "invalid"
        if j == 4:
            doc = lower_doc(base, eps_l); doc["brackets"][0]["lower"]["k"] = 0; return dumps(doc), "invalid"
        if j == 5 and base.r > 1:  # consistent edit: drop the last witness column (rank r-1)
            doc = upper_doc(base, eps_u, U=np.ascontiguousarray(base.U[:, :-1]), W=np.ascontiguousarray(base.W[:, :-1]), r=base.r - 1)
            return dumps(doc), truth_of_document(doc)
        if j == 6 and base.k > 1:  # consistent edit: drop the last certificate row/column (k-1)
            doc = lower_doc(base, eps_l, X=np.ascontiguousarray(base.X[:-1]), Y=np.ascontiguousarray(base.Y[:, :-1]), k=base.k - 1)
            return dumps(doc), truth_of_document(doc)
        if j == 7 and base.k < base.op.p:  # consistent edit: k+1 with a random extra row/column
            r2 = np.random.default_rng(j + base.index)
            X = np.vstack([base.X, r2.normal(size=(1, base.X.shape[1]))])
            Y = np.hstack([base.Y, r2.normal(size=(base.Y.shape[0], 1))])
            doc = lower_doc(base, eps_l, X=X, Y=Y, k=base.k + 1)
            return dumps(doc), truth_of_document(doc)
        if j == 8:
            doc = upper_doc(base, eps_u); doc["brackets"][0]["upper"]["r"] = -1; return dumps(doc), "invalid"
        if j == 9:
            doc = lower_doc(base, eps_l); doc["brackets"][0]["lower"]["k"] = base.op.p + 1; return dumps(doc), "invalid"
        if j == 10:
            doc = upper_doc(base, eps_u); doc["brackets"][0]["upper"]["r"] = 2**40; return dumps(doc), "invalid"
        doc = lower_doc(base, eps_l); doc["brackets"][0]["lower"]["k"] = True; return dumps(doc), "invalid"

    for j in range(12):
        add("rank_edited", lambda j=j: rank_edit(j))

    # 5. trivial ends abused
    p = base.op.p
    softmax = base.op.kind != "probabilities"
    normA = Fraction(1) if softmax else max(sum((abs(Fraction(v)) for v in row), Fraction(0)) for row in np.array(base.op.arrays["A"]).tolist())
    trivial_cases: list[tuple[dict, dict, str]] = []
    below_one = ["0.5", "0.9999999999999999", "0.99999999999999999999999999999999999999", decimal_of(normA * Fraction(999, 1000), up=False)]
    for e in below_one:
        trivial_cases.append(({"k": 1, "method": "trivial"}, {"r": 0, "construction": "zero"}, e))
    for e in ["1", "1.0", "1.5", decimal_of(normA, up=True, digits=40)] if softmax else [decimal_of(normA, up=True, digits=60), "1.5"]:
        trivial_cases.append(({"k": 1, "method": "trivial"}, {"r": p, "construction": "identity"}, e))
    trivial_cases += [
        ({"k": 2, "method": "trivial"}, {"r": p, "construction": "identity"}, "0.1"),
        ({"k": p + 1, "method": "trivial"}, {"r": p, "construction": "identity"}, "0.1"),
        ({"k": 1, "method": "trivial"}, {"r": p - 1, "construction": "identity"}, "0.1"),
        ({"k": 1, "method": "trivial"}, {"r": p + 1, "construction": "identity"}, "0.1"),
    ]

    def trivial(case) -> tuple[bytes, str]:
        lo, up, e = case
        doc = upper_doc(base, eps_u)
        doc["brackets"][0] = {"eps": e, "lower": lo, "upper": up}
        if lo["k"] > 1 or up["r"] not in (0, p):
            return dumps(doc), "invalid"
        return dumps(doc), truth_of_document(doc)

    for case in trivial_cases:
        add("trivial_end_abused", lambda c=case: trivial(c))

    # 6. X / Y / U / W / operator arrays with NaN, Inf, subnormals (rehashed)
    specials = [float("nan"), float("inf"), -float("inf"), 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310]

    def special(j: int) -> tuple[bytes, str]:
        r2 = random.Random(seed * 31 + base.index * 17 + j)
        doc = copy.deepcopy(valid_docs[j % 2])
        path = r2.choice(array_paths(doc))
        obj = at(doc, path)
        a = _raw_array(obj).copy()
        value = specials[j % len(specials)]
        if j % 5 == 4 and math.isfinite(value):  # scale the whole array into the subnormal range
            a = a * 2.0**-1070
        else:
            a.reshape(-1)[r2.randrange(a.size)] = value
        encode_into(obj, a)
        return dumps(doc), truth_of_document(doc)

    for j in range(14):
        add("nonfinite_or_subnormal", lambda j=j: special(j))

    # 7. huge / negative / malformed shapes
    shapes = [[10**9, 10**9], [-1, 5], [0, 5], [2**53, 1], [5], [5, 5, 5], ["5", 5], [16385, 1], [16384, 16384], [1, 2**63]]

    def shape_case(j: int) -> tuple[bytes, str]:
        doc = copy.deepcopy(valid_docs[j % 2])
        paths = array_paths(doc)
        at(doc, paths[j % len(paths)])["shape"] = shapes[j]
        return dumps(doc), "invalid"

    for j in range(len(shapes)):
        add("shape_absurd", lambda j=j: shape_case(j))

    # 8. duplicate JSON keys (textual)
    def dup(j: int) -> tuple[bytes, str]:
        text = dumps(valid_docs[j % 2]).decode()
        if j == 0:
            text = text.replace('"eps": ', '"eps": "0.999", "eps": ', 1)
        elif j == 1:
            text = text.replace('"eps": ', '"eps": "0.0000001", "eps": ', 1)
        elif j == 2:
            text = text.replace('"kind": ', '"kind": "probabilities", "kind": ', 1)
        elif j == 3:
            text = text.replace('"sha256": ', '"sha256": "00", "sha256": ', 1)
        elif j == 4:
            text = text.replace('"k": ', '"k": 1, "k": ', 1)
        else:
            text = text.replace('"mask": ', '"mask": "causal", "mask": ', 1)
        return text.encode(), "invalid"

    for j in range(6):
        add("duplicate_json_keys", lambda j=j: dup(j))

    # 9. eps strings outside the exact decimal grammar
    bad_eps = ["1e-400", "0x1p-3", " 0.25", "0.25 ", "+0.25", ".25", "0.25.", "inf", "NaN", "-0.25", "0", "0.0",
               "1/4", "\u0660.\u0662\u0665", "0,25", "", "0.25\n", "1E-3", "00.25", "0." + "0" * 1200 + "1"]

    def eps_case(j: int) -> tuple[bytes, str]:
        doc = copy.deepcopy(valid_docs[j % 2])
        doc["brackets"][0]["eps"] = bad_eps[j]
        return dumps(doc), "invalid"

    for j in range(len(bad_eps)):
        add("eps_string_malformed", lambda j=j: eps_case(j))

    # 10. signed certificates tampered after signing (signature must fail: exit 2)
    def signed(j: int) -> tuple[bytes, str]:
        doc = sign_document(copy.deepcopy(valid_docs[j % 2]), signing_key, created=CREATED,
                            verification_method=verification_method_for(signing_key.public_key()))
        if j < 2:
            doc["brackets"][0]["eps"] = decimal_of(exact_of_mpf(base.err * mpf("0.5")), up=False) if j == 0 else \
                decimal_of(exact_of_mpf(base.T * 2), up=True)
        elif j < 4:
            obj = at(doc, array_paths(doc)[-1])
            a = _raw_array(obj).copy(); a.reshape(-1)[0] *= 1.5
            encode_into(obj, a)
        elif j == 4:
            doc["operator"]["id"] = "adv/other"
        else:
            doc["proof"]["proofValue"] = doc["proof"]["proofValue"][:-2] + ("1" if doc["proof"]["proofValue"][-2] != "1" else "2") + doc["proof"]["proofValue"][-1]
        return dumps(doc), "invalid"

    for j in range(6):
        add("signed_then_tampered", lambda j=j: signed(j))
    return out


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
CHECKERS = ("auto", "arb", "float64", "exact")


def run_pipeline(raw: bytes) -> dict[str, Any]:
    """Steps 1-6 of softrank-verify in-process; every checker decides step 5."""
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
            verdicts = check_claims(certificate, kernel=kernel)
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
                 progress: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    signing_key = generate_private_key()
    bases = [make_base(i, seed) for i in range(n_bases)]
    variants: list[Variant] = []
    for base in bases:
        variants.extend(variants_for(base, bases, seed, signing_key))
    if sample is not None:
        variants = random.Random(seed).sample(variants, min(sample, len(variants)))
    t_gen = time.perf_counter() - t0
    per_cat: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"count": 0, "truth": Counter(), **{f"exit_{kernel}": Counter() for kernel in CHECKERS}})
    accepted: list[dict[str, Any]] = []
    disagreements: list[dict[str, Any]] = []
    file_checks = file_mismatch = 0
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
            elif cat.startswith("control"):
                controls_accepted[cat] += res["auto"] == 0
            st = res.get("statuses") or {}
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
        "campaign": "adversarial soundness (issues 7 and 8)",
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
        "controls_true_accepted": dict(controls_accepted),
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
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = run_campaign(args.bases, args.seed, args.sample, progress=True)
    out = args.out or ROOT / "results" / ("adversarial.json" if args.sample is None else "adversarial-sample.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: result[k] for k in ("certificates_total", "adversarial_certificates", "truly_false",
                                             "invalid_by_construction", "tampered_but_still_true", "borderline",
                                             "accepted", "kernel_status_disagreements", "kernel_decided_conflicts",
                                             "controls_true_accepted", "runtime_seconds")}, indent=1))
    sys.exit(1 if result["accepted"] or result["kernel_decided_conflicts"] else 0)


if __name__ == "__main__":
    main()
