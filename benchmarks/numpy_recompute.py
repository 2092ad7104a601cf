"""The yardstick of ``bench_verify.py --floor``: a plain numpy float64 recomputation of a
certificate's checks from the same arrays, with no proof of anything (issue 45).

What it does, and what ``softrank-verify`` does besides: read the file, parse the JSON, decode
every base64 array and compare its SHA-256, recompute ``A`` (``softmax(beta Q K^T)`` with the
causal mask, ``softmax(S)``, or ``A``), and for every bracket ``||A - U W^T||`` (max row l1) and
``eps ||X|| ||Y|| ||(X A Y)^-1||`` with ``numpy.linalg.inv``.  It does not check the schema, the
signature, the operator's rules or anything about rounding: a float64 estimate, not a verdict.
One BLAS thread, as ``softrank-verify`` uses by default.

Run:  python benchmarks/numpy_recompute.py CERT.json   (prints the estimates as JSON)
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits


def _array(obj: dict[str, Any]) -> np.ndarray:
    raw = base64.b64decode(obj["data"])
    if hashlib.sha256(raw).hexdigest() != obj["sha256"]:
        raise SystemExit("hash mismatch")
    return np.frombuffer(raw, "<f8").reshape(obj["shape"])


def _attention(op: dict[str, Any]) -> np.ndarray:
    arrays = {name: _array(obj) for name, obj in op["arrays"].items()}
    if op["kind"] == "probabilities":
        return arrays["A"]
    if op["kind"] == "qk":
        q, k = arrays["Q"], arrays["K"]
        beta = 1 / np.sqrt(q.shape[1]) if op.get("beta", "inv_sqrt_d") == "inv_sqrt_d" else float(op["beta"])
        s = (q @ k.T) * beta
    else:
        s = np.array(arrays["S"])
    m, n = s.shape
    if op["mask"] == "causal":
        s[np.arange(n)[None, :] > np.arange(m)[:, None] + (n - m)] = -np.inf
    s -= s.max(axis=1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=1, keepdims=True)
    return s


def recompute(raw: bytes) -> list[dict[str, float]]:
    """The float64 estimates of every bracket of the certificate ``raw``."""
    doc = json.loads(raw)
    a = _attention(doc["operator"])
    norm = lambda x: float(np.abs(x).sum(axis=1).max())  # noqa: E731
    out = []
    for bracket in doc["brackets"]:
        row: dict[str, float] = {"eps": float(bracket["eps"])}
        lower, upper = bracket["lower"], bracket["upper"]
        if "X" in lower:
            x, y = _array(lower["X"]), _array(lower["Y"])
            row["lower_product"] = row["eps"] * norm(x) * norm(y) * norm(np.linalg.inv((x @ a) @ y))
        if "U" in upper:
            u, w = _array(upper["U"]), _array(upper["W"])
            row["upper_error"] = norm(a - u @ w.T)
        out.append(row)
    return out


def main() -> None:
    with open(sys.argv[1], "rb") as handle, threadpool_limits(limits=1, user_api="blas"):
        print(json.dumps(recompute(handle.read())))


if __name__ == "__main__":
    main()
