"""Supports experiment and bracket properties (issue 6).

Property tests use small random operators and short budgets; the whole file runs in well under
a minute.  C_r figures are measured in benchmarks/supports_experiment.py, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softrank_cert.errors import InvalidInputError
from softrank_cert.geometry import compute_geometry
from softrank_cert.geometry.supports import SUPPORTS, support_operator, support_points, theory_exponent
from softrank_cert.studies.supports.sweeps import fit_exponent
from softrank_cert.studies.supports.points import SweepPoint
from softrank_cert.kernel import Operator, Status, verify_lower, verify_upper
from softrank_cert.solvers.bracket import bracket_operator

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
small_ops = st.builds(
    lambda seed, m, n, d, scale: Operator("qk", {"Q": scale * np.random.default_rng(seed).standard_normal((m, d)),
                                                 "K": scale * np.random.default_rng(seed + 1).standard_normal((n, d))}),
    st.integers(0, 10**6), st.integers(2, 7), st.integers(2, 7), st.integers(1, 4), st.sampled_from([0.5, 1.5, 3.0]))


@pytest.mark.parametrize("support", SUPPORTS)
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_support_points(support, dim):
    P = support_points(support, dim, 64)
    assert P.shape[1] == dim and P.dtype == np.float64
    norms = np.linalg.norm(P, axis=1)
    assert abs(norms.max() - 1) < 1e-12
    if support == "sphere":
        assert np.allclose(norms, 1)
    if support == "grid":
        assert P.shape[0] == 64  # k = floor(64^(1/d)) per axis: 64, 8^2, 4^3
    assert support_points("grid", 2, 512).shape[0] == 22**2 <= 512  # rounded down: never above --n
    op = support_operator(support, dim, 64, 2.0)
    assert op.beta == "1" and abs(float(np.linalg.norm(op.arrays["Q"], axis=1).max()) - 2.0) < 1e-12


def test_theory_exponents_and_errors():
    assert theory_exponent("grid", 3) == 1.5 and theory_exponent("sphere", 3) == 1.0 and theory_exponent("ball", 3) == 1.5
    with pytest.raises(InvalidInputError):
        support_points("cube", 2, 10)
    with pytest.raises(InvalidInputError):
        support_operator("ball", 2, 10, -1.0)


def test_fit_exponent_recovers_slope():
    eps = "0.25"
    pts = []
    for kappa in (0.25, 0.5, 1, 2, 4, 8):
        x = 1 + kappa / 0.0625
        end = max(1, round(2 * x**0.75))
        pts.append(SweepPoint(kappa, eps, end, min(end, 200), 200, "m", "c", 0.0))
    slope, used = fit_exponent(pts, "lower")
    assert abs(slope - 0.75) < 0.05 and len(used) == 6
    floor = [SweepPoint(k, eps, 1, 1, 10, "m", "c", 0.0) for k in (1, 2, 3)]
    assert fit_exponent(floor, "lower") == (None, [])


@SETTINGS
@given(op=small_ops, eps=st.sampled_from(["0.1", "0.25", "0.5"]))
def test_bracket_lower_le_upper_le_p(op, eps):
    (b,) = bracket_operator(op, [eps], budget_seconds=1.5)
    assert b.lower.verdict.status is Status.VERIFIED and b.upper.verdict.status is Status.VERIFIED
    assert 0 <= b.lower.k <= b.upper.r <= op.p


@SETTINGS
@given(op=small_ops)
def test_bracket_monotone_in_eps(op):
    """r_eps non-increasing: certificates at a small eps stay valid for larger ones and vice versa."""
    small, large = "0.15", "0.4"
    b_small, b_large = bracket_operator(op, [small, large], budget_seconds=1.5)
    assert b_large.lower.k <= b_small.upper.r
    if b_small.upper.U is not None:  # a witness within 0.15 is within 0.4
        assert verify_upper(op, large, b_small.upper.r, b_small.upper.U, b_small.upper.W).status is Status.VERIFIED
    if b_large.lower.X is not None:  # a certificate at 0.4 holds at 0.15
        assert verify_lower(op, small, b_large.lower.k, b_large.lower.X, b_large.lower.Y).status is Status.VERIFIED


@SETTINGS
@given(seed=st.integers(0, 10**6), a=st.integers(-6, 6), c=st.integers(-6, 6))
def test_invariance_property(seed, a, c):
    """Q D, K D^{-1} with D = diag(2^a, 2^c, 1): the certified geometry is bit-for-bit the same."""
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((6, 3)), rng.standard_normal((5, 3))
    D = np.array([2.0**a, 2.0**c, 1.0])
    g1 = compute_geometry(Operator("qk", {"Q": Q, "K": K}), 2, "0.5")
    g2 = compute_geometry(Operator("qk", {"Q": Q * D, "K": K / D}), 2, "0.5")
    s1, s2 = g1.strings(), g2.strings()
    assert {k: v for k, v in s1.items() if not k.startswith("gamma")} == {k: v for k, v in s2.items() if not k.startswith("gamma")}


@SETTINGS
@given(seed=st.integers(0, 10**6))
def test_theorem_quantities_on_small_ops(seed):
    """Certified lower end <= p, and lower / Phi_upper is a finite nonnegative number (C_r is not asserted)."""
    op = support_operator("sphere", 2, 8, 0.5 + (seed % 7))
    (b,) = bracket_operator(op, ["0.25"], budget_seconds=1.0)
    g = compute_geometry(op, 2, "0.25")
    if g.phi.hi is not None:
        assert g.phi.hi >= 1 and Fraction(b.lower.k) / g.phi.hi <= b.lower.k


@pytest.mark.slow
def test_cli_supports_json_and_plot(tmp_path):
    png = tmp_path / "s.png"
    out = subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", "supports", "sphere", "--dim", "2",
                          "--n", "12", "--kappas", "0.125,0.25,0.5,1,2,4", "--budget-seconds", "1", "--json",
                          "--plot", str(png)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # the solver banner must not spoil stdout
    for key in ("exponent_theory", "estimates", "points"):
        assert key in doc
    assert doc["exponent_theory"] == 0.5 and len(doc["points"]) >= 6
    for pt in doc["points"]:
        assert {"kappa", "eps", "lower", "upper"} <= set(pt) and pt["lower"] <= pt["upper"] <= pt["p"]
    assert png.stat().st_size > 1000
    bad = subprocess.run([sys.executable, "-m", "softrank_cert.cli.main", "supports", "cube", "--dim", "2"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
