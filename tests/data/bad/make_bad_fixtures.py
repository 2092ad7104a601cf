"""Regenerate the malformed-certificate fixtures in this folder.

    python tests/data/bad/make_bad_fixtures.py          # rewrites tests/data/bad/*.json

Every fixture is a small edit of one VALID base certificate (a peaked 3x3 'scores'
operator; at eps 0.25 the bracket [3, 3] with X = Y = U = W = I; at eps 0.5 the trivial
bracket [1, 3]) and is named after the one thing that is wrong with it.  ``softrank-verify``
must exit 2 on each, with a one-line reason.  The output is deterministic (fixed key seed,
fixed timestamps), so ``tests/certio/test_certificate_format.py`` checks that the committed files
equal a fresh regeneration.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from softrank_cert.certio.arrays import encode_array
from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.certio.signing import sign_document, verification_method_for
from softrank_cert.kernel import Operator

HERE = Path(__file__).resolve().parent
CREATED = "2026-01-02T03:04:05Z"
S = np.array([[10.0, 0.0, -1.0], [0.5, 9.0, 0.0], [-2.0, 1.0, 11.0]])
I3 = np.eye(3)
#: Deterministic signing keys (test-only seeds).
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))


def base_document() -> dict[str, Any]:
    op = Operator("scores", {"S": S})
    brackets = [
        Bracket("0.25", LowerEnd(3, "selection", I3, I3), UpperEnd(3, "dense", I3, I3)),
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(3, "identity")),
    ]
    doc = certificate_document("fixture/peaked-3x3", op, brackets, created=CREATED, provenance={"note": "bad-input fixture"})
    doc["generator"]["version"] = "fixture"  # independent of the package version: stable bytes
    return doc


def signed_document(doc: dict[str, Any] | None = None) -> dict[str, Any]:
    return sign_document(doc if doc is not None else base_document(), KEY, created=CREATED)


def dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def array_with(values: np.ndarray) -> dict[str, Any]:
    return encode_array(np.ascontiguousarray(values, dtype=np.float64))


def raw_array(raw: bytes, shape: list[int]) -> dict[str, Any]:
    """An array object with the given raw bytes and a CORRECT sha256 of them."""
    return {"dtype": "float64", "shape": shape, "encoding": "base64-le",
            "data": base64.b64encode(raw).decode("ascii"), "sha256": hashlib.sha256(raw).hexdigest()}


def edited(edit: Callable[[dict[str, Any]], None], signed: bool = False) -> bytes:
    doc = signed_document() if signed else base_document()
    doc = copy.deepcopy(doc)
    edit(doc)
    return dump(doc)


def set_path(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def delete_path(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


def text_edit(old: str, new: str, signed: bool = False, count: int = 1) -> bytes:
    text = dump(signed_document() if signed else base_document()).decode("utf-8")
    assert old in text, old
    return text.replace(old, new, count).encode("utf-8")


def nan_bytes_S() -> dict[str, Any]:
    values = S.copy().ravel().tolist()
    raw = b"".join(struct.pack("<d", v) for v in values)
    raw = raw[:8] + struct.pack("<Q", 0x7FF8000000000001) + raw[16:]  # a quiet NaN payload
    return raw_array(raw, [3, 3])


def build() -> dict[str, bytes]:
    base = dump(base_document())
    signed = dump(signed_document())
    f: dict[str, bytes] = {}

    # --- not JSON at all / not a certificate object -------------------------------------
    f["truncated.json"] = base[: len(base) // 2]
    f["truncated-at-last-byte.json"] = base.rstrip()[:-1]
    f["empty.json"] = b""
    f["not-utf8.json"] = b"\xff\xfe" + base
    f["not-json.json"] = b"this is not a certificate\n"
    f["top-level-array.json"] = b"[]\n"
    f["top-level-string.json"] = b"\"softrank-certificate\"\n"
    f["trailing-garbage.json"] = base + b"x"
    f["two-documents.json"] = base + base
    f["json-with-comment.json"] = b"// comment\n" + base
    f["deep-nesting.json"] = b"[" * 100000 + b"]" * 100000
    f["huge-integer.json"] = text_edit('"k": 3,', '"k": ' + "9" * 5000 + ",")

    # --- strict JSON: duplicates, floats, constants ---------------------------------------
    f["duplicate-key.json"] = text_edit('"eps": "0.25",', '"eps": "0.25",\n   "eps": "0.5",')
    f["duplicate-key-same-value.json"] = text_edit('"format": "softrank-certificate",', '"format": "softrank-certificate",\n "format": "softrank-certificate",')
    f["eps-as-json-number.json"] = text_edit('"eps": "0.25"', '"eps": 0.25')
    f["eps-as-json-integer.json"] = text_edit('"eps": "0.5"', '"eps": 1')
    f["eps-as-json-exponent.json"] = text_edit('"eps": "0.25"', '"eps": 25e-2')
    f["k-as-json-float.json"] = text_edit('"k": 3,', '"k": 3.0,')
    f["nan-json-literal.json"] = text_edit('"note": "bad-input fixture"', '"note": NaN')
    f["infinity-json-literal.json"] = text_edit('"note": "bad-input fixture"', '"note": -Infinity')
    f["float-in-provenance.json"] = text_edit('"note": "bad-input fixture"', '"note": 1.5')

    # --- tolerances ------------------------------------------------------------------------
    for name, eps in [("eps-zero", "0"), ("eps-zero-point-zero", "0.0"), ("eps-negative", "-0.1"),
                      ("eps-exponent", "1e-3"), ("eps-hex-float", "0x1p-3"), ("eps-leading-space", " 0.25"),
                      ("eps-trailing-newline", "0.25\n"), ("eps-plus-sign", "+0.25"), ("eps-nan", "nan"),
                      ("eps-inf", "inf"), ("eps-empty", ""), ("eps-leading-dot", ".5"), ("eps-trailing-dot", "5."),
                      ("eps-too-long", "0." + "1" * 1200)]:
        f[f"{name}.json"] = edited(set_path(["brackets", 0, "eps"], eps))

    # --- arrays ----------------------------------------------------------------------------
    f["nan-in-array.json"] = edited(set_path(["operator", "arrays", "S"], nan_bytes_S()))
    inf_u = I3.copy(); inf_u[1, 1] = np.inf
    f["inf-in-witness.json"] = edited(set_path(["brackets", 0, "upper", "U"], array_with(inf_u)))
    ninf_x = I3.copy(); ninf_x[0, 2] = -np.inf
    f["neg-inf-in-lower-X.json"] = edited(set_path(["brackets", 0, "lower", "X"], array_with(ninf_x)))
    f["huge-declared-shape.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [100000000, 100000000]))
    f["shape-over-entry-limit.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [16384, 16384]))
    f["shape-over-dim-limit.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [1, 16385]))
    f["shape-one-dimensional.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [9]))
    f["shape-zero-rows.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [0, 3]))
    f["shape-negative.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [-3, -3]))
    f["shape-disagrees-with-data.json"] = edited(set_path(["operator", "arrays", "S", "shape"], [3, 2]))
    f["hash-mismatch.json"] = edited(set_path(["operator", "arrays", "S", "sha256"], hashlib.sha256(b"other").hexdigest()))
    f["hash-uppercase.json"] = edited(lambda d: d["operator"]["arrays"]["S"].__setitem__("sha256", d["operator"]["arrays"]["S"]["sha256"].upper()))
    f["base64-too-short.json"] = edited(lambda d: d["operator"]["arrays"]["S"].__setitem__("data", d["operator"]["arrays"]["S"]["data"][:-4]))
    f["base64-invalid-padding.json"] = edited(lambda d: d["operator"]["arrays"]["S"].__setitem__("data", "=" + d["operator"]["arrays"]["S"]["data"][1:]))
    f["dtype-float32.json"] = edited(set_path(["operator", "arrays", "S", "dtype"], "float32"))
    f["encoding-hex.json"] = edited(set_path(["operator", "arrays", "S", "encoding"], "hex"))
    f["array-missing-sha256.json"] = edited(delete_path(["operator", "arrays", "S", "sha256"]))

    # --- operator --------------------------------------------------------------------------
    f["causal-m-greater-than-n.json"] = edited(lambda d: (
        d["operator"].__setitem__("mask", "causal"),
        d["operator"]["arrays"].__setitem__("S", array_with(S[:, :2])),
        d["brackets"].__setitem__(slice(None), [{"eps": "0.5", "lower": {"k": 1, "method": "trivial"}, "upper": {"r": 2, "construction": "identity"}}]),
    ))
    f["probabilities-with-causal-mask.json"] = edited(lambda d: (
        d["operator"].__setitem__("kind", "probabilities"),
        d["operator"].__setitem__("mask", "causal"),
        d["operator"]["arrays"].__setitem__("A", d["operator"]["arrays"].pop("S")),
    ))
    f["beta-on-scores.json"] = edited(set_path(["operator", "beta"], "0.5"))
    f["kind-unknown.json"] = edited(set_path(["operator", "kind"], "logits"))
    f["mask-unknown.json"] = edited(set_path(["operator", "mask"], "sliding"))
    f["arrays-wrong-name.json"] = edited(lambda d: d["operator"]["arrays"].__setitem__("A", d["operator"]["arrays"].pop("S")))
    qk = lambda d, **kw: (d["operator"].__setitem__("kind", "qk"), d["operator"].__setitem__("arrays", kw))  # noqa: E731
    f["qk-head-dim-mismatch.json"] = edited(lambda d: qk(d, Q=array_with(np.ones((3, 2))), K=array_with(np.ones((3, 3)))))
    f["qk-missing-K.json"] = edited(lambda d: qk(d, Q=array_with(np.ones((3, 2)))))
    f["qk-beta-exponent.json"] = edited(lambda d: (qk(d, Q=array_with(np.ones((3, 2))), K=array_with(np.ones((3, 2)))),
                                                  d["operator"].__setitem__("beta", "1e-3")))
    f["qk-beta-leading-space.json"] = edited(lambda d: (qk(d, Q=array_with(np.ones((3, 2))), K=array_with(np.ones((3, 2)))),
                                                       d["operator"].__setitem__("beta", " 0.5")))
    f["operator-id-empty.json"] = edited(set_path(["operator", "id"], ""))

    # --- bracket ends ------------------------------------------------------------------------
    f["witness-shape-mismatch.json"] = edited(set_path(["brackets", 0, "upper", "U"], array_with(np.ones((3, 2)))))
    f["witness-transposed-W.json"] = edited(lambda d: (d["brackets"][0]["upper"].__setitem__("r", 1),
                                                      d["brackets"][0]["upper"].__setitem__("U", array_with(np.ones((3, 1)))),
                                                      d["brackets"][0]["upper"].__setitem__("W", array_with(np.ones((1, 3))))))
    f["lower-X-wrong-shape.json"] = edited(set_path(["brackets", 0, "lower", "X"], array_with(np.ones((3, 2)))))
    f["lower-k-exceeds-p.json"] = edited(lambda d: (d["brackets"][0]["lower"].__setitem__("k", 4),
                                                   d["brackets"][0]["lower"].__setitem__("X", array_with(np.ones((4, 3)))),
                                                   d["brackets"][0]["lower"].__setitem__("Y", array_with(np.ones((3, 4))))))
    f["lower-k-edited.json"] = edited(set_path(["brackets", 0, "lower", "k"], 2))
    f["upper-r-edited.json"] = edited(set_path(["brackets", 0, "upper", "r"], 2))
    f["identity-wrong-r.json"] = edited(set_path(["brackets", 1, "upper", "r"], 2))
    f["zero-construction-wrong-r.json"] = edited(set_path(["brackets", 1, "upper"], {"r": 1, "construction": "zero"}))
    f["trivial-lower-k2.json"] = edited(set_path(["brackets", 1, "lower", "k"], 2))
    f["k-boolean.json"] = edited(set_path(["brackets", 1, "lower", "k"], True))
    f["r-negative.json"] = edited(set_path(["brackets", 0, "upper", "r"], -1))
    f["witness-missing-W.json"] = edited(delete_path(["brackets", 0, "upper", "W"]))
    f["witness-named-trivial.json"] = edited(set_path(["brackets", 0, "upper", "construction"], "identity"))
    f["certificate-named-trivial.json"] = edited(set_path(["brackets", 0, "lower", "method"], "trivial"))
    f["empty-brackets.json"] = edited(set_path(["brackets"], []))
    f["missing-brackets.json"] = edited(delete_path(["brackets"]))

    # --- document level ----------------------------------------------------------------------
    f["unknown-top-level-field.json"] = edited(set_path(["comment"], "hello"))
    f["unknown-operator-field.json"] = edited(set_path(["operator", "scale"], "2"))
    f["unknown-array-field.json"] = edited(set_path(["operator", "arrays", "S", "order"], "C"))
    f["unknown-bracket-field.json"] = edited(set_path(["brackets", 0, "note"], "x"))
    f["unknown-upper-field.json"] = edited(set_path(["brackets", 0, "upper", "error"], "0.1"))
    f["wrong-format-name.json"] = edited(set_path(["format"], "softrank-cert"))
    f["wrong-version.json"] = edited(set_path(["version"], 2))
    f["version-as-string.json"] = edited(set_path(["version"], "1"))
    f["missing-generator.json"] = edited(delete_path(["generator"]))
    f["generator-created-not-rfc3339.json"] = edited(set_path(["generator", "created"], "yesterday"))

    # --- signatures ----------------------------------------------------------------------------
    f["tampered-signed-eps.json"] = edited(set_path(["brackets", 0, "eps"], "0.35"), signed=True)
    f["tampered-signed-id.json"] = edited(set_path(["operator", "id"], "fixture/peaked-3x4"), signed=True)
    f["tampered-signed-provenance.json"] = edited(set_path(["operator", "provenance", "note"], "bad-input fixturE"), signed=True)
    f["tampered-signed-array.json"] = edited(set_path(["brackets", 0, "upper", "U"], array_with(2 * I3)), signed=True)
    f["tampered-signed-proof-created.json"] = edited(set_path(["proof", "created"], "2026-01-02T03:04:06Z"), signed=True)
    f["proof-value-not-base58.json"] = edited(lambda d: d["proof"].__setitem__("proofValue", "z" + "0" * 80), signed=True)
    f["proof-value-truncated.json"] = edited(lambda d: d["proof"].__setitem__("proofValue", d["proof"]["proofValue"][:-5]), signed=True)
    f["proof-wrong-cryptosuite.json"] = edited(set_path(["proof", "cryptosuite"], "eddsa-rdfc-2022"), signed=True)
    f["proof-unknown-field.json"] = edited(set_path(["proof", "nonce"], "1"), signed=True)
    f["proof-missing-value.json"] = edited(delete_path(["proof", "proofValue"]), signed=True)
    f["proof-fragment-differs.json"] = edited(lambda d: d["proof"].__setitem__(
        "verificationMethod", d["proof"]["verificationMethod"].split("#")[0] + "#" + verification_method_for(OTHER_KEY.public_key()).split("#")[1]), signed=True)
    f["signed-by-other-key-claimed-as-issuer.json"] = edited(lambda d: d.__setitem__(
        "proof", {**sign_document(base_document(), OTHER_KEY, created=CREATED)["proof"],
                  "verificationMethod": verification_method_for(KEY.public_key())}))
    f["proof-not-an-object.json"] = edited(set_path(["proof"], "signed"))

    # --- strings the checker cannot faithfully print or canonicalise -----------------------------
    # (KNOWN BUG at the time of writing: exits 4 instead of 2; see test_certificate_format.py)
    f["lone-surrogate-in-id.json"] = text_edit('"id": "fixture/peaked-3x3"', '"id": "fixture/\\ud800"')

    assert signed != base
    return f


def main(out: Path = HERE) -> None:
    fixtures = build()
    for old in out.glob("*.json"):
        if old.name not in fixtures:
            old.unlink()
    for name, content in fixtures.items():
        (out / name).write_bytes(content)
    print(f"wrote {len(fixtures)} fixtures to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
