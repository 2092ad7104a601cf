"""Refactorization invariance: Q -> Q D, K -> K D^{-1} leaves A, C, tau, kappa, Phi and every
certificate unchanged, while the native Gamma = beta rho_Q rho_K moves.

D is diagonal with power-of-two entries, so Q D and K D^{-1} are exact in float64 and the two
operators are the *same* exact real matrix A.

    python examples/refactorization_invariance.py
"""

from __future__ import annotations

import softrank_cert  # noqa: F401  (before numpy: pins its kernels, softrank_cert.blas_kernels)
import numpy as np

from softrank_cert.geometry import compute_geometry
from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.solvers import bracket_operator


def main() -> None:
    rng = np.random.default_rng(2026)
    Q, K = rng.standard_normal((24, 6)), rng.standard_normal((24, 6))
    D = 2.0 ** np.array([3, -2, 0, 1, -4, 2])
    ops = {"original": Operator("qk", {"Q": Q, "K": K}),
           "Q D, K D^-1": Operator("qk", {"Q": Q * D, "K": K / D})}
    rank, eps = 5, "0.5"
    rows = {}
    for name, op in ops.items():
        g = compute_geometry(op, rank, eps)
        rows[name] = g.strings()
    keys = ["tau", "tau_tanh", "kappa_lower", "kappa_upper", "phi_lower", "phi", "gamma_native_lower", "gamma_native"]
    print(f"rank-{rank} retained part, eps {eps} (upper ends rounded up, lower ends down)")
    print(f"{'quantity':<20}" + "".join(f"{n:>16}" for n in ops) + "   unchanged?")
    for key in keys:
        a, b = (str(rows[n][key]) for n in ops)
        print(f"{key:<20}{a:>16}{b:>16}   {'yes' if a == b else 'NO (native, not invariant)'}")
    original, moved = ops.values()
    brackets = bracket_operator(original, ["0.25", "0.5"], budget_seconds=10)
    for b in brackets:
        checks = []
        if b.lower.X is not None:
            checks.append(verify_lower(moved, b.eps, b.lower.k, b.lower.X, b.lower.Y).status is Status.VERIFIED)
        if b.upper.U is not None:
            checks.append(verify_upper(moved, b.eps, b.upper.r, b.upper.U, b.upper.W).status is Status.VERIFIED)
        print(f"eps {b.eps}: bracket [{b.lower.k}, {b.upper.r}] certified on the original; its certificates "
              f"re-verified on the refactorized operator: {'all VERIFIED' if all(checks) else 'FAILED'}")


if __name__ == "__main__":
    main()
