"""Generators of the adversarial soundness campaign (issues 7 and 8).

``benchmarks/adversarial_campaign.py`` imports these (adding the repository root to
``sys.path``) and runs every certificate through the verification pipeline; the tests run a
CI-sized campaign through that script.  From a seed, every base operator and every variant is
deterministic (``numpy.random.default_rng([seed, index])``, ``random.Random``), except the
signatures, whose key the caller supplies.

Each variant is a (category, thunk) pair; the thunk returns the certificate's raw bytes and
its truth class ('true' / 'false' / 'borderline' / 'invalid') from the independent oracle
(``tests/oracle.py``), which never calls a kernel.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from collections.abc import Callable

import numpy as np
from mpmath import mpf

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.certio.signing import sign_document, verification_method_for
from softrank_cert.kernel import Operator
from tests.oracle import exact_fraction, masked_softmax, raw_array, true_A_mp, true_lower_threshold, true_witness_error
from tests.oracle import truth_of_document

CREATED = "2026-01-02T03:04:05Z"
GAPS = [c * 10.0 ** -j for j in range(1, 14) for c in (3, 1)]  # 3e-1 ... 1e-13 (26 gaps)


def decimal_of(q: Fraction, up: bool, digits: int = 32) -> str:
    """A plain decimal string <= q (up=False) or >= q (up=True); q > 0.

    The campaign's eps format: about ``digits + 1`` significant digits (the decimal exponent is a
    float estimate of log10 q).  Not the oracle's ``decimal_string``: changing it would change
    the certificates a seed generates."""
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




# ----------------------------------------------------------------------------------------
# Base operators and certificates
# ----------------------------------------------------------------------------------------

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
        op = Operator("probabilities", {"A": masked_softmax(S, np.ones((m, n), bool))})
    else:  # peaked scores
        S = rng.normal(size=(m, n)) + 8 * np.eye(m, n)
        op = Operator("scores", {"S": S})
    Af = np.array(op.arrays["A"]) if op.kind == "probabilities" else masked_softmax(S, op.allowed())
    return op, Af


def make_base(index: int, seed: int) -> Base:
    rng = np.random.default_rng([seed, index])
    op, Af = make_operator(index, rng)
    m, n = op.shape
    A = true_A_mp(op.kind, dict(op.arrays), op.beta, op.mask)
    u, s, vt = np.linalg.svd(Af)
    r = 1
    while r < op.p and np.abs(Af - (u[:, :r] * s[:r]) @ vt[:r]).sum(axis=1).max() > 0.4:
        r += 1
    U, W = np.ascontiguousarray(u[:, :r] * s[:r]), np.ascontiguousarray(vt[:r].T)
    err = true_witness_error(A, U, W)
    k = min(3, op.p) if index % 3 else 2
    if index % 4 == 1:  # selection certificate on the k largest diagonal-ish entries
        X = np.zeros((k, m)); Y = np.zeros((n, k))
        for a in range(k):
            X[a, a] = 1.0; Y[a, a] = 1.0
    else:
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
    res = true_lower_threshold(A, X, Y)
    if res is None:
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
        res = true_lower_threshold(A, X, Y)
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
    return decimal_of(exact_fraction(base.err * (1 + mpf("1e-6"))), up=True)


def valid_lower_eps(base: Base) -> str:
    return decimal_of(exact_fraction(base.T * (1 - mpf("1e-6"))), up=False)


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
        below = decimal_of(exact_fraction(base.err * (1 - mpf(g))), up=False)
        above = decimal_of(exact_fraction(base.err * (1 + mpf(g))), up=True)
        add("near_upper_eps_below_error", lambda e=below: (dumps(upper_doc(base, e)), truth_of_document(upper_doc(base, e))))
        add("control_upper_eps_above_error", lambda e=above: (dumps(upper_doc(base, e)), truth_of_document(upper_doc(base, e))))
        lo_above = decimal_of(exact_fraction(base.T * (1 + mpf(g))), up=True)
        lo_below = decimal_of(exact_fraction(base.T * (1 - mpf(g))), up=False)
        add("near_lower_eps_above_threshold", lambda e=lo_above: (dumps(lower_doc(base, e)), truth_of_document(lower_doc(base, e))))
        add("control_lower_eps_below_threshold", lambda e=lo_below: (dumps(lower_doc(base, e)), truth_of_document(lower_doc(base, e))))

    valid_docs = [upper_doc(base, eps_u), lower_doc(base, eps_l)]

    # 2. flipped bits, sha256 recomputed (reaches the kernel) -- classified by the truth
    def bitflip(doc_index: int, sub: int, rehash: bool) -> tuple[bytes, str]:
        r2 = random.Random(sub)
        doc = copy.deepcopy(valid_docs[doc_index])
        path = r2.choice(array_paths(doc))
        obj = at(doc, path)
        a = raw_array(obj).copy()
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
        a = raw_array(obj).copy()
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
            doc["brackets"][0]["eps"] = decimal_of(exact_fraction(base.err * mpf("0.5")), up=False) if j == 0 else \
                decimal_of(exact_fraction(base.T * 2), up=True)
        elif j < 4:
            obj = at(doc, array_paths(doc)[-1])
            a = raw_array(obj).copy(); a.reshape(-1)[0] *= 1.5
            encode_into(obj, a)
        elif j == 4:
            doc["operator"]["id"] = "adv/other"
        else:
            doc["proof"]["proofValue"] = doc["proof"]["proofValue"][:-2] + ("1" if doc["proof"]["proofValue"][-2] != "1" else "2") + doc["proof"]["proofValue"][-1]
        return dumps(doc), "invalid"

    for j in range(6):
        add("signed_then_tampered", lambda j=j: signed(j))
    return out
