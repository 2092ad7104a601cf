"""Generators of the fuzzing campaign (issue 7): seed certificates and hypothesis mutations.

``benchmarks/fuzz_cli.py`` imports these (adding the repository root to ``sys.path``) and runs
every mutated input through the verification pipeline; the tests run a CI-sized campaign
through that script.  ``mutated_input`` draws JSON-level mutations of the seed certificates
(delete / insert / replace keys and values, type swaps, copies between fields, huge integers,
floats, NaN) and byte-level ones (truncation, inserted random bytes, flipped bytes).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
from hypothesis import strategies as st

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.certio.signing import generate_private_key, sign_document, verification_method_for
from softrank_cert.kernel import Operator
from tests.oracle import masked_softmax

CREATED = "2026-01-02T03:04:05Z"


# ----------------------------------------------------------------------------------------
# Seed corpus: valid certificates
# ----------------------------------------------------------------------------------------

def _softmax(S: np.ndarray) -> np.ndarray:
    return masked_softmax(S, np.ones(S.shape, bool))


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
