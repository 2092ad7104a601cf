"""Regenerate the signed example certificates in ``certificates/examples/``.

Three operators, bracketed by the solvers at eps 0.1, 0.25, 0.5 with every end verified by the
Arb kernel, then signed with the published demo key (``examples/keys/``):

* ``random-qk.json``     -- a random ``qk`` operator (48 x 48, d = 16) with non-trivial ends;
* ``causal-qk.json``     -- a random ``qk`` operator under the causal mask (40 x 40, d = 8);
* ``near-one-hot.json``  -- ``scores`` = 12 I + noise: near one-hot rows, resolved at p (lower == upper).

Run from the repository root:  python examples/make_example_certificates.py [--key KEYFILE]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

from softrank_cert.certio.signing import sign_certificate
from softrank_cert.certio.issuing import certificate_for
from softrank_cert.kernel import Operator
from softrank_cert.util.files import write_json_atomic
from softrank_cert.solvers import bracket_operator

ROOT = Path(__file__).resolve().parent.parent
EPS = ["0.1", "0.25", "0.5"]


def operators() -> dict[str, tuple[Operator, dict]]:
    rng = np.random.default_rng(20261130)
    q, k = rng.standard_normal((48, 16)) * 1.3, rng.standard_normal((48, 16)) * 1.3
    qc, kc = rng.standard_normal((40, 8)) * 1.2, rng.standard_normal((40, 8)) * 1.2
    s = 12.0 * np.eye(24) + rng.standard_normal((24, 24))
    return {
        "random-qk": (Operator("qk", {"Q": q, "K": k}), {"generator": "numpy default_rng(20261130)", "scale": "1.3"}),
        "causal-qk": (Operator("qk", {"Q": qc, "K": kc}, mask="causal"), {"generator": "numpy default_rng(20261130)", "scale": "1.2"}),
        "near-one-hot": (Operator("scores", {"S": s}), {"generator": "numpy default_rng(20261130)", "scores": "12 I + N(0,1)"}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key", default=str(ROOT / "examples" / "keys" / "demo-issuer.key"))
    parser.add_argument("--out", default=str(ROOT / "certificates" / "examples"))
    args = parser.parse_args()
    out = Path(args.out)
    for name, (op, provenance) in operators().items():
        brackets = bracket_operator(op, EPS)
        doc = certificate_for(f"examples/{name}", op, brackets, provenance)
        write_json_atomic(out / f"{name}.json", sign_certificate(doc, args.key))
        print(name, [(b.eps, b.lower.k, b.upper.r) for b in brackets])
    shutil.copyfile(args.key + ".pub", out / "issuer.pub")


if __name__ == "__main__":
    main()
