"""Interaction geometry (issue 6): certified tau, tanh bound, kappa, Phi, native Gamma.

Proofs: proofs/geometry-bounds.md (Lemmas G1-G5).  Each test compares computed values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank_cert.errors import InvalidInputError, InvalidOperatorError
from softrank_cert.geometry import compute_geometry
from softrank_cert.geometry.bounds import Bound, factorization_radius, kappa_lower_bound, phi_bound
from softrank_cert.geometry.interaction import interaction_float
from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.util.dense import attention_matrix

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def qk_operator(seed: int, m: int = 12, n: int = 10, d: int = 4, scale: float = 1.0) -> Operator:
    rng = np.random.default_rng(seed)
    return Operator("qk", {"Q": scale * rng.standard_normal((m, d)), "K": scale * rng.standard_normal((n, d))})


def test_tanh_lemma_sympy():
    """Lemma G2: at the stationary point a = s - 1, c = (s-1)/s the bound a c/(a+c) is tanh(delta/4)."""
    s, delta = sympy.symbols("s delta", positive=True)
    a, c = s - 1, (s - 1) / s
    assert sympy.simplify((1 + a) / (1 - c) - s**2) == 0  # the ratio constraint h/l = e^delta = s^2
    assert sympy.simplify(a * c / (a + c) - (s - 1) / (s + 1)) == 0
    e = sympy.exp(delta / 2)
    assert sympy.simplify(((e - 1) / (e + 1)).rewrite(sympy.exp) - sympy.tanh(delta / 4).rewrite(sympy.exp)) == 0
    # the stationarity condition K/a^2 = 1/c^2 with K = s^2
    assert sympy.simplify(s**2 / a**2 - 1 / c**2) == 0


@SETTINGS
@given(seed=st.integers(0, 10**6), r=st.integers(1, 4), scale=st.sampled_from([0.3, 1.0, 2.5]))
def test_tanh_bound_dominates_tau(seed, r, scale):
    """Exact tau <= 2 tanh(delta/4) row by row: the certified enclosures must be ordered."""
    op = qk_operator(seed, scale=scale)
    g = compute_geometry(op, r, "0.5")
    assert g.tau.lo <= g.tau.hi and g.tau_tanh.lo <= g.tau_tanh.hi
    assert g.tau.lo <= g.tau_tanh.hi
    # and the float64 estimate of tau lies in the certified enclosure (up to rounding)
    assert float(g.tau.lo) - 1e-12 <= g.estimates["tau"] <= float(g.tau.hi) + 1e-12


@SETTINGS
@given(seed=st.integers(0, 10**6), r=st.integers(1, 5))
def test_kappa_bounds_ordered(seed, r):
    op = qk_operator(seed, d=5)
    g = compute_geometry(op, r, "0.25")
    assert g.kappa.lo is not None and g.kappa.hi is not None
    assert 0 <= g.kappa.lo <= g.kappa.hi
    assert g.kappa.lo >= Fraction(np.abs(g.X @ g.Y.T).max()) * Fraction(999999, 1000000)  # >= max |T_ij|
    # the optimised factorization is (nearly) optimal: the dual bound closes the gap
    assert float(g.kappa.hi) <= 1.05 * float(g.kappa.lo) + 1e-12


@SETTINGS
@given(seed=st.integers(0, 10**6))
def test_kappa_lower_dual_inequality_random(seed):
    """Lemma G3 with arbitrary (not optimised) u, v, W: still below the radius of any factorization."""
    rng = np.random.default_rng(seed)
    m, n, r, k = 7, 9, 3, 2
    X, Y = rng.standard_normal((m, r)), rng.standard_normal((n, r))
    lo = kappa_lower_bound(X, Y, rng.random(m), rng.random(n), rng.standard_normal((m, k)), rng.standard_normal((n, k)))
    hi = factorization_radius(X, Y)
    assert lo.lo is not None and lo.lo <= hi.hi
    # refactorizing moves the radius, never below the lower bound
    G = rng.standard_normal((r, r)) + 3 * np.eye(r)
    assert lo.lo <= factorization_radius(X @ G, Y @ np.linalg.inv(G).T).hi * Fraction(1000001, 1000000)


def test_phi_bound_logic():
    kappa, tau = Bound(Fraction(1), Fraction(2)), Bound(Fraction(1, 10), Fraction(1, 5))
    phi = phi_bound(kappa, tau, "0.25", 2)
    # r = 2: Phi = 1 + kappa/(eps - tau)^2 exactly
    assert phi.lo <= 1 + Fraction(1) / (Fraction(1, 4) - Fraction(1, 10)) ** 2 <= phi.lo * Fraction(1000001, 1000000)
    assert phi.hi >= 1 + Fraction(2) / (Fraction(1, 4) - Fraction(1, 5)) ** 2
    assert phi_bound(kappa, Bound(Fraction(1, 10), Fraction(1, 4)), "0.25", 2).hi is None  # tau < eps not proved
    assert phi_bound(kappa, Bound(Fraction(1, 4), Fraction(1, 3)), "0.25", 2) == Bound(None, None)


def test_tau_vanishes_at_rank_of_c():
    """tau(T) -> 0 as r -> rank C (T = C up to float64 rounding of the factors)."""
    op = qk_operator(3, m=14, n=12, d=3, scale=1.5)
    _, s, _ = np.linalg.svd(interaction_float(op)[0])
    rank = int((s > 1e-10 * s[0]).sum())
    assert rank == 3
    taus = [compute_geometry(op, r, "0.5").tau.hi for r in range(1, rank + 1)]
    assert taus[-1] < Fraction(1, 10**10)
    assert taus[0] > 100 * taus[-1]


def test_refactorization_invariance():
    """Q -> Q D, K -> K D^{-1} (power-of-two D): C, tau, kappa, Phi and certificates unchanged; Gamma moves."""
    from softrank_cert.solvers.bracket import bracket_operator

    op = qk_operator(11, m=10, n=9, d=4, scale=1.2)
    D = np.array([4.0, 0.25, 2.0, 0.125])
    op2 = Operator("qk", {"Q": op.arrays["Q"] * D, "K": op.arrays["K"] / D})
    assert np.array_equal(interaction_float(op)[0], interaction_float(op2)[0])
    g1, g2 = compute_geometry(op, 2, "0.5"), compute_geometry(op2, 2, "0.5")
    s1, s2 = g1.strings(), g2.strings()
    for name in ("tau", "tau_lower", "tau_tanh", "kappa_upper", "kappa_lower", "phi", "phi_lower", "c_max_abs"):
        assert s1[name] == s2[name], name
    assert g1.gamma_native.hi < g2.gamma_native.lo or g2.gamma_native.hi < g1.gamma_native.lo
    for b in bracket_operator(op, ["0.2", "0.5"], budget_seconds=3):
        if b.lower.X is not None:
            assert verify_lower(op2, b.eps, b.lower.k, b.lower.X, b.lower.Y).status is Status.VERIFIED
        if b.upper.U is not None:
            assert verify_upper(op2, b.eps, b.upper.r, b.upper.U, b.upper.W).status is Status.VERIFIED


def test_causal_and_probabilities_refused():
    rng = np.random.default_rng(0)
    causal = Operator("scores", {"S": rng.standard_normal((5, 5))}, mask="causal")
    with pytest.raises(InvalidOperatorError, match="one common positive support"):
        compute_geometry(causal, 1, "0.25")
    probs = Operator("probabilities", {"A": np.full((3, 3), 1 / 3)})
    with pytest.raises(InvalidOperatorError, match="scores"):
        compute_geometry(probs, 1, "0.25")
    with pytest.raises(InvalidInputError):
        compute_geometry(qk_operator(0), 0, "0.25")


def test_user_factors_used_exactly_and_user_matrix():
    op = qk_operator(5)
    C, _ = interaction_float(op)
    U, s, Vt = np.linalg.svd(C)
    X, Y = U[:, :2] * s[:2], Vt[:2].T.copy()
    g = compute_geometry(op, 2, "0.5", factors=(X, Y), optimise=False)
    assert np.array_equal(g.X, X) and np.array_equal(g.Y, Y)
    assert g.kappa.hi >= Fraction(float(np.sqrt((X**2).sum(1).max() * (Y**2).sum(1).max()))) * Fraction(999999, 10**6)
    g2 = compute_geometry(op, 2, "0.5", T=X @ Y.T)
    assert g2.kappa.hi <= g.kappa.hi * Fraction(1000001, 10**6)  # optimised never worse
    assert g2.estimates["refactor_gap_max_abs"] < 1e-12


def test_scores_operator_and_native_gamma():
    op = qk_operator(9)
    S = attention_matrix(op)  # noqa: F841 (A exists)
    g = compute_geometry(op, 2, "0.5")
    Q, K = op.arrays["Q"], op.arrays["K"]
    gamma = 0.5 * np.linalg.norm(Q, axis=1).max() * np.linalg.norm(K, axis=1).max()
    assert float(g.gamma_native.lo) <= gamma * (1 + 1e-12) and gamma <= float(g.gamma_native.hi) * (1 + 1e-12)
    sc = Operator("scores", {"S": 0.5 * (Q @ K.T)})
    gs = compute_geometry(sc, 2, "0.5")
    assert gs.gamma_native is None
    assert abs(float(gs.kappa.hi) - float(g.kappa.hi)) < 1e-9


@pytest.mark.slow
def test_cli_geometry_json(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "op.npz"
    np.savez(path, Q=rng.standard_normal((8, 3)), K=rng.standard_normal((7, 3)))
    out = subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", "geometry", str(path), "--rank", "2",
                          "--eps", "0.5", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (doc,) = json.loads(out.stdout)["operators"]
    for key in ("tau", "tau_tanh", "kappa_upper", "kappa_lower", "phi", "gamma_native", "certified"):
        assert key in doc
    assert doc["certified"]["tau"] == "upper" and doc["certified"]["kappa_lower"] == "lower"
    assert Fraction(doc["kappa_lower"]) <= Fraction(doc["kappa_upper"])
    assert doc["retained_rank"] == 2 and "rank" not in doc  # the input rank of T, never a rank from Phi
    table = subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", "geometry", str(path), "--rank", "2",
                            "--eps", "0.5"], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "C_r is unknown" in " ".join(table.stdout.split())  # folded at 80 columns
    np.savez(tmp_path / "causal.npz", S=rng.standard_normal((4, 4)), causal=np.bool_(True))
    bad = subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", "geometry", str(tmp_path / "causal.npz"),
                          "--rank", "1", "--eps", "0.5"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "one common positive support" in bad.stderr
