"""Soundness of the trusted kernel against an independent truth.

The truth is recomputed from the exact float64 inputs by ``tests/oracle.py`` -- never by the
kernel: mpmath at 256 bits for softmax kinds (own softmax, exact beta = 1/sqrt(d) to 256 bits, own
row sums, own inverse), exact rationals (Fraction) for 'probabilities' operators.

Properties:
(a) witnesses: eps just BELOW the true error ||A - U W^T|| is never VERIFIED; just above it
    is VERIFIED (at the maximum precision: the kernel is not uselessly conservative);
(b) lower certificates: eps just ABOVE t = 1/(||X|| ||Y|| ||(XAY)^{-1}||) is never VERIFIED;
    just below is VERIFIED;
(c) all kinds (qk with inv_sqrt_d and decimal beta, scores, probabilities), causal masks
    with m <= N, peaked softmax (scores ~ +-50), tiny values and subnormals in U, W, X, Y;
(d) trivial ends against the true ||A||.
Relative gaps go down to 1e-12 (softmax kinds) and to one unit in the last decimal place of
an exact dyadic value (probabilities kind, checked at 8192 bits where everything is exact).
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from mpmath import mp, mpf

import softrank_cert.kernel as arb_kernel
from softrank_cert.errors import InvalidInputError
from softrank_cert.kernel import (
    Operator,
    Status,
)

try:  # the second trusted kernel (exact rational arithmetic), where present
    import softrank_cert.exact_kernel as exact_kernel
except ImportError:  # pragma: no cover
    exact_kernel = None

#: Both trusted kernels must pass every soundness property (the exact one is slower: fewer examples).
KERNELS = [pytest.param(arb_kernel, id="arb")] + (
    [pytest.param(exact_kernel, id="exact")] if exact_kernel is not None else [])

from conftest import float_softmax
from tests.oracle import (
    decimal_minus_ulp,
    decimal_plus_ulp,
    decimal_string,
    exact_decimal,
    exact_fraction,
    true_A_fraction,
    true_norm,
    truth_lower_threshold,
    truth_witness_error,
)

V = Status.VERIFIED
GAPS = (Fraction(1, 10**3), Fraction(1, 10**6), Fraction(1, 10**9), Fraction(1, 10**12))
MAX_PREC = 1024
#: Multiply the example counts for a long soundness hunt: SOFTRANK_SOUNDNESS_SCALE=20 pytest ...
SCALE = max(1, int(os.environ.get("SOFTRANK_SOUNDNESS_SCALE", "1")))
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

SUBNORMALS = (5e-324, -5e-324, 1e-310, -2.5e-320, 2.2250738585072014e-308)


# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

@st.composite
def operators(draw, kinds=("qk", "scores", "probabilities"), max_dim=6):
    """(Operator, exact arrays dict) with varied sizes, scales, masks and special values."""
    kind = draw(st.sampled_from(kinds))
    m = draw(st.integers(1, max_dim))
    n = draw(st.integers(1, max_dim))
    mask = "none" if kind == "probabilities" else draw(st.sampled_from(["none", "causal"]))
    if mask == "causal" and m > n:
        m, n = n, m
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(["normal", "peaked", "tiny", "mixed", "huge"]))
    scale = {"normal": 1.0, "peaked": 50.0, "tiny": 1e-3, "mixed": 5.0, "huge": 1e4}[style]
    beta = "inv_sqrt_d"
    if kind == "scores":
        S = rng.normal(size=(m, n)) * scale
        if style == "peaked":
            S = np.where(rng.random((m, n)) < 0.5, 50.0, -50.0) + rng.normal(size=(m, n))
        if style == "mixed":
            S.flat[rng.integers(0, m * n)] = -0.0
            S.flat[rng.integers(0, m * n)] = rng.choice(SUBNORMALS)
        if style == "huge":  # far-apart scores: entries like exp(-1e4) next to exact-looking ones
            S.flat[rng.integers(0, m * n)] = rng.choice([1e5, -1e5, 0.5])
        arrays = {"S": S}
    elif kind == "qk":
        d = draw(st.integers(1, 4))
        Q = rng.normal(size=(m, d)) * np.sqrt(scale)
        K = rng.normal(size=(n, d)) * np.sqrt(scale)
        if style == "peaked":
            Q *= 3.0
        if style == "mixed":
            Q.flat[rng.integers(0, m * d)] = rng.choice(SUBNORMALS)
            K.flat[rng.integers(0, n * d)] = -0.0
        beta = draw(st.sampled_from(["inv_sqrt_d", "inv_sqrt_d", "0.1", "1", "-0.5", "0.333333333333333333333333333", "2.75"]))
        arrays = {"Q": Q, "K": K}
    else:
        A = rng.random((m, n))
        if style == "peaked":
            A = A**8
        A = A / A.sum(axis=1, keepdims=True)
        if style == "mixed":
            A.flat[rng.integers(0, m * n)] = abs(rng.choice(SUBNORMALS))  # A >= 0 (issue 25)
            A.flat[rng.integers(0, m * n)] = -0.0
        if style == "tiny":
            A = A * 1e-3  # tiny entries (negative ones are refused: A is an attention matrix, issue 25)
        arrays = {"A": A}
    op = Operator(kind, arrays, beta=beta, mask=mask)
    note(f"kind={kind} m={m} n={n} mask={mask} style={style} beta={beta}")
    return op, arrays


@st.composite
def witnesses(draw, op):
    """(U, W) of a random rank r: SVD-based (small error), random, or with subnormals."""
    m, n = op.shape
    r = draw(st.integers(1, max(1, min(m, n))))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(["svd", "svd", "random", "subnormal", "svd+tiny"]))
    A = float_softmax(op.kind, dict(op.arrays), op.beta, op.mask)
    if style.startswith("svd"):
        u, s, vt = np.linalg.svd(A, full_matrices=False)
        U = u[:, :r] * s[:r]
        W = vt[:r].T.copy()
        if style == "svd+tiny":
            U.flat[rng.integers(0, U.size)] = rng.choice(SUBNORMALS)
            W.flat[rng.integers(0, W.size)] = -0.0
    elif style == "random":
        U = rng.normal(size=(m, r)) * draw(st.sampled_from([1e-3, 0.3, 1.0]))
        W = rng.normal(size=(n, r)) * 0.5
    else:
        U = rng.choice(SUBNORMALS, size=(m, r))
        W = rng.normal(size=(n, r))
    note(f"witness style={style} r={r}")
    return r, np.ascontiguousarray(U, dtype=np.float64), np.ascontiguousarray(W, dtype=np.float64)


@st.composite
def certificates(draw, op):
    """(k, X, Y): random, selections, or query pooling + key grouping."""
    m, n = op.shape
    k = draw(st.integers(1, min(m, n)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(["random", "selection", "pooling", "tiny"]))
    if style == "random":
        X, Y = rng.normal(size=(k, m)), rng.normal(size=(n, k))
    elif style == "selection":
        X = np.zeros((k, m)); X[np.arange(k), rng.permutation(m)[:k]] = 1.0
        Y = np.zeros((n, k)); Y[rng.permutation(n)[:k], np.arange(k)] = 1.0
    elif style == "pooling":
        X = rng.random((k, m)); X /= X.sum(axis=1, keepdims=True)
        groups = np.concatenate([np.arange(k), rng.integers(0, k, size=n - k)])
        rng.shuffle(groups)
        Y = np.zeros((n, k)); Y[np.arange(n), groups] = 1.0
    else:  # scaled by tiny powers of two and subnormal noise: t is scale invariant
        X = rng.normal(size=(k, m)) * 2.0**-1000
        Y = rng.normal(size=(n, k))
        Y.flat[rng.integers(0, Y.size)] = 5e-324
    note(f"certificate style={style} k={k}")
    return k, np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(Y, dtype=np.float64)


def scaled(x, factor: Fraction):
    """x * factor as an exact Fraction (x a Fraction or an mpf)."""
    return exact_fraction(x) * factor


# --------------------------------------------------------------------------------------
# (a) witnesses
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60 * SCALE, **SETTINGS)
@given(data=st.data())
def test_witness_never_verified_below_true_error(kernel, data):
    op, arrays = data.draw(operators())
    r, U, W = data.draw(witnesses(op))
    e_lo, e_hi = truth_witness_error(op, U, W)
    note(f"true error in [{float(e_lo)!r}, {float(e_hi)!r}]")
    # eps must be writable as a decimal string of at most 1100 characters
    assume(e_lo > Fraction(1, 10**1000) and e_hi - e_lo <= e_lo * Fraction(1, 10**40))
    # Deciding a relative gap g needs about log2(1/(g e)) bits beyond the entries' size;
    # tiny errors (peaked rows, B = the dominant entries) need more than the default.
    prec = MAX_PREC if e_lo > Fraction(1, 10**200) else 8192
    for gap in GAPS:
        below = decimal_string(e_lo * (1 - gap), direction="down", digits=45)
        assert Fraction(below) < e_lo
        v = kernel.verify_upper(op, below, r, U, W, max_prec=prec)
        assert v.status is not V, (below, float(e_lo), v)
        above = decimal_string(e_hi * (1 + gap), direction="up", digits=45)
        v = kernel.verify_upper(op, above, r, U, W, max_prec=prec)
        assert v.status is V, (above, float(e_hi), v)
        lo, hi = v.value  # the reported interval must contain the true error
        assert lo <= e_hi and e_lo <= hi


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=40 * SCALE, **SETTINGS)
@given(data=st.data())
def test_witness_exact_edge_probabilities(kernel, data):
    """'probabilities' operators: the truth is an exact dyadic rational e.  At 8192 bits the
    kernel's balls are exact, so eps = e must be VERIFIED and e - 1 decimal ulp REJECTED."""
    op, arrays = data.draw(operators(kinds=("probabilities",)))
    r, U, W = data.draw(witnesses(op))
    e, _ = truth_witness_error(op, U, W)
    text = exact_decimal(e)
    assume(text is not None and e > 0 and len(text) <= 1100)
    below = decimal_minus_ulp(text, extra=20 if len(text) < 1000 else 0)
    assert kernel.verify_upper(op, below, r, U, W, max_prec=8192).status is Status.REJECTED
    assert kernel.verify_upper(op, below, r, U, W).status is not V  # default precision: never VERIFIED
    assert kernel.verify_upper(op, text, r, U, W, max_prec=8192).status is V
    assert kernel.verify_upper(op, decimal_plus_ulp(text, extra=20 if len(text) < 1000 else 0), r, U, W, max_prec=8192).status is V


@pytest.mark.parametrize("kernel", KERNELS)
def test_witness_regression_cases(kernel):
    """Hand-picked hard cases: peaked rows, subnormal witnesses, causal m < N, decimal beta."""
    cases = [
        (Operator("scores", {"S": np.array([[50.0, -50.0, 49.999999999999], [-50.0, 50.0, 50.0]])}),
         np.array([[1.0], [0.0]]), np.array([[1.0], [0.0], [0.0]])),
        (Operator("scores", {"S": np.array([[0.0, 0.0, 0.0, 1.0], [0.0, -1.0, 0.0, 1.0]])}, mask="causal"),
         np.array([[5e-324], [1.0]]), np.array([[0.25], [0.25], [0.25], [0.25]])),
        (Operator("qk", {"Q": np.array([[1.0, 2.0], [3.0, -1.0]]), "K": np.array([[0.5, 0.5], [2.0, 0.0], [1.0, 1.0]])},
                  beta="0.70710678118654752440084436210484903928483593768847"),
         np.array([[0.3, 0.1], [0.2, 0.6]]), np.array([[0.5, 0.0], [0.5, 1.0], [0.0, 0.5]])),
        (Operator("qk", {"Q": np.array([[1e-300, 1.0]]), "K": np.array([[1e300, 0.0], [0.0, -1.0]])}),
         np.array([[1.0]]), np.array([[0.5], [0.2]])),
    ]
    for op, U, W in cases:
        e_lo, e_hi = truth_witness_error(op, U, W)
        assert 0 < e_lo and e_hi - e_lo <= e_lo * Fraction(1, 10**40)
        for gap in GAPS:
            below = decimal_string(e_lo * (1 - gap), direction="down")
            above = decimal_string(e_hi * (1 + gap), direction="up")
            assert kernel.verify_upper(op, below, U.shape[1], U, W, max_prec=MAX_PREC).status is not V
            assert kernel.verify_upper(op, above, U.shape[1], U, W, max_prec=MAX_PREC).status is V


# --------------------------------------------------------------------------------------
# (b) lower certificates
# --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=60 * SCALE, **SETTINGS)
@given(data=st.data())
def test_lower_never_verified_above_true_threshold(kernel, data):
    op, arrays = data.draw(operators())
    k, X, Y = data.draw(certificates(op))
    res = truth_lower_threshold(op, X, Y)
    assume(res is not None)
    t_lo, t_hi, cond = res
    note(f"t in [{float(t_lo)!r}, {float(t_hi)!r}], cond = {cond}")
    assume(cond < 1e40 and t_lo > Fraction(1, 10**1000) and t_hi - t_lo <= t_lo * Fraction(1, 10**40))
    prec = MAX_PREC if t_lo > Fraction(1, 10**200) and cond < 1e20 else 8192
    for gap in GAPS:
        above = decimal_string(t_hi * (1 + gap), direction="up", digits=45)
        v = kernel.verify_lower(op, above, k, X, Y, max_prec=prec)
        assert v.status is not V, (above, float(t_hi), v)
        below = decimal_string(t_lo * (1 - gap), direction="down", digits=45)
        v = kernel.verify_lower(op, below, k, X, Y, max_prec=prec)
        assert v.status is V, (below, float(t_lo), v)
        lo, hi = v.value
        assert lo <= t_hi and t_lo <= hi


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=30 * SCALE, **SETTINGS)
@given(data=st.data())
def test_lower_exact_edge_probabilities(kernel, data):
    """Exact rational t for 'probabilities': eps = t (when t is a finite decimal) and eps
    one decimal ulp (1e-60 relative) above t are never VERIFIED; below t is."""
    op, arrays = data.draw(operators(kinds=("probabilities",), max_dim=5))
    k, X, Y = data.draw(certificates(op))
    res = truth_lower_threshold(op, X, Y)
    assume(res is not None)
    t, _, cond = res
    assume(t > 0 and cond < 1e30)
    text = exact_decimal(t)
    if text is not None and len(text) <= 1100:
        # product == 1 exactly: strict inequality fails (REJECTED, or INCONCLUSIVE when the
        # inverse is not a dyadic matrix and so has no exact ball)
        assert kernel.verify_lower(op, text, k, X, Y, max_prec=8192).status is not V
    above = decimal_string(t, direction="up", digits=60)
    if Fraction(above) == t:
        above = decimal_plus_ulp(above)
    assert kernel.verify_lower(op, above, k, X, Y, max_prec=8192).status is not V
    below = decimal_string(t * (1 - Fraction(1, 10**40)), direction="down", digits=60)
    assert kernel.verify_lower(op, below, k, X, Y, max_prec=8192).status is V


@pytest.mark.parametrize("kernel", KERNELS)
def test_lower_regression_cases(kernel):
    """Peaked causal operator, selection of a tiny (exp(-100)) entry, pooled certificates."""
    S = np.array([[50.0, -50.0, 0.0], [-50.0, 50.0, -50.0], [0.0, 1.0, 2.0]])
    cases = [
        (Operator("scores", {"S": S}, mask="causal"), np.eye(3), np.eye(3)),
        (Operator("scores", {"S": S}), np.array([[1.0, 0.0, 0.0]]), np.array([[0.0], [1.0], [0.0]])),  # A_01 ~ e^-100
        (Operator("scores", {"S": S}), np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])),
        (Operator("qk", {"Q": np.array([[1.0, 0.0], [0.0, 1.0]]), "K": np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])}, mask="causal"),
         np.eye(2), np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])),
    ]
    for op, X, Y in cases:
        t_lo, t_hi, _ = truth_lower_threshold(op, X, Y)
        assert 0 < t_lo and t_hi - t_lo <= t_lo * Fraction(1, 10**40)
        for gap in GAPS:
            above = decimal_string(t_hi * (1 + gap), direction="up")
            below = decimal_string(t_lo * (1 - gap), direction="down")
            assert kernel.verify_lower(op, above, X.shape[0], X, Y, max_prec=MAX_PREC).status is not V
            assert kernel.verify_lower(op, below, X.shape[0], X, Y, max_prec=MAX_PREC).status is V


# --------------------------------------------------------------------------------------
# (d) trivial ends
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=40 * SCALE, **SETTINGS)
@given(data=st.data(), eps_num=st.integers(1, 10**6))
def test_trivial_ends_softmax(kernel, data, eps_num):
    op, _ = data.draw(operators(kinds=("qk", "scores")))
    eps = Fraction(eps_num, 10**5)  # (0, 10]
    text = decimal_string(eps, direction="down", digits=12)
    assert Fraction(text) == eps
    up0 = kernel.verify_trivial_upper(op, text, 0)
    lo1 = kernel.verify_trivial_lower(op, text, 1)
    if eps < 1:
        assert up0.status is Status.REJECTED and lo1.status is V
    else:
        assert up0.status is V and lo1.status is Status.REJECTED
    assert kernel.verify_trivial_upper(op, text, op.p).status is V
    assert kernel.verify_trivial_lower(op, text, 0).status is V


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=40 * SCALE, **SETTINGS)
@given(data=st.data())
def test_trivial_ends_probabilities_against_exact_norm(kernel, data):
    op, arrays = data.draw(operators(kinds=("probabilities",)))
    norm = true_norm(true_A_fraction(arrays["A"]))
    assume(norm > 0)
    for gap in (Fraction(1, 10**3), Fraction(1, 10**12), Fraction(1, 10**30)):
        below = decimal_string(norm * (1 - gap), direction="down", digits=45)
        above = decimal_string(norm * (1 + gap), direction="up", digits=45)
        assert kernel.verify_trivial_upper(op, below, 0).status is not V  # ||A|| > eps: B = 0 too far
        assert kernel.verify_trivial_upper(op, above, 0, max_prec=MAX_PREC).status is V
        assert kernel.verify_trivial_lower(op, above, 1).status is not V  # ||A|| < eps
        assert kernel.verify_trivial_lower(op, below, 1, max_prec=MAX_PREC).status is V
    text = exact_decimal(norm)
    if text is not None and len(text) <= 1100:
        assert kernel.verify_trivial_upper(op, text, 0, max_prec=8192).status is V
        assert kernel.verify_trivial_lower(op, text, 1, max_prec=8192).status is Status.REJECTED


# --------------------------------------------------------------------------------------
# Consistency: no verified lower above a verified upper, across random claims
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=30 * SCALE, **SETTINGS)
@given(data=st.data())
def test_no_verified_lower_exceeds_verified_upper(kernel, data):
    """For one operator, a VERIFIED r_eps >= k and a VERIFIED r_eps' <= r with eps' <= eps
    would contradict monotonicity unless k <= r: search random pairs for a contradiction."""
    op, arrays = data.draw(operators(kinds=("qk", "scores"), max_dim=5))
    r, U, W = data.draw(witnesses(op))
    k, X, Y = data.draw(certificates(op))
    eps = data.draw(st.sampled_from(["0.001", "0.01", "0.05", "0.1", "0.25", "0.5", "0.9"]))
    up = kernel.verify_upper(op, eps, r, U, W)
    lo = kernel.verify_lower(op, eps, k, X, Y)
    if up.status is V and lo.status is V:
        assert k <= r


# --------------------------------------------------------------------------------------
# Adversarial edits that must never turn a false claim into VERIFIED
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNELS)
def test_beta_spelling_matters_exactly(kernel):
    """beta '0.1' is 1/10 exactly, not the double 0.1; a claim true only for one of them."""
    Q = np.array([[100.0, 0.0]]); K = np.array([[1.0, 0.0], [0.0, 0.0]])
    op = Operator("qk", {"Q": Q, "K": K}, beta="0.1")  # S = [[10, 0]] exactly
    U, W = np.array([[1.0]]), np.array([[1.0], [0.0]])
    with mp.workprec(256):
        e = 2 / (1 + mp.exp(10))  # exact error of B = [[1, 0]]
    ef = exact_fraction(e)
    assert kernel.verify_upper(op, decimal_string(ef * (1 - Fraction(1, 10**14)), direction="down"), 1, U, W).status is not V
    assert kernel.verify_upper(op, decimal_string(ef * (1 + Fraction(1, 10**14)), direction="up"), 1, U, W).status is V
    op_double = Operator("qk", {"Q": Q, "K": K}, beta="0.1000000000000000055511151231257827021181583404541015625")
    with mp.workprec(256):
        e2 = 2 / (1 + mp.exp(100 * mpf(0.1)))
    assert e2 != e
    # eps between the two errors: exactly one of the two operators satisfies it
    lo_e, hi_e = sorted([exact_fraction(e), exact_fraction(e2)])
    mid = decimal_string((lo_e + hi_e) / 2, direction="down", digits=60)
    v1 = kernel.verify_upper(op, mid, 1, U, W, max_prec=MAX_PREC)
    v2 = kernel.verify_upper(op_double, mid, 1, U, W, max_prec=MAX_PREC)
    truth1 = exact_fraction(e) <= Fraction(mid)
    truth2 = exact_fraction(e2) <= Fraction(mid)
    assert truth1 != truth2
    assert (v1.status is V) == truth1 and (v2.status is V) == truth2


@pytest.mark.parametrize("kernel", KERNELS)
def test_inv_sqrt_d_is_not_its_float_rounding(kernel):
    """beta = 1/sqrt(3) exactly vs the decimal of its float64 rounding differ in the claim."""
    Q = np.array([[2.0**9, 0.0, 0.0]]); K = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    op = Operator("qk", {"Q": Q, "K": K})
    U, W = np.array([[0.0]]), np.array([[0.0], [0.0]])
    # error of B = 0 is ||A|| = 1 exactly (the balls of A's entries are not exact, so
    # eps = 1 itself may stay undecided)
    assert kernel.verify_upper(op, "1.0000000000000000000000000001", 1, U, W).status is V
    assert kernel.verify_upper(op, "0.99999999999999999999999999999", 1, U, W).status is not V
    # a witness B = [[1, 0]]: error 2 exp(-s)/(1+exp(-s)) with s = 2^9/sqrt(3) ~ 296: its
    # exact value differs (relatively, ~3e-15) between beta = 1/sqrt(3) and float(1/sqrt(3));
    # a relative gap of 1e-20 tells the two apart.
    with mp.workprec(512):
        s_exact = mpf(2) ** 9 / mp.sqrt(3)
        e = 2 * mp.exp(-s_exact) / (1 + mp.exp(-s_exact))
        s_float = mpf(2) ** 9 * mpf(float(1 / np.sqrt(3)))
        e_float = 2 * mp.exp(-s_float) / (1 + mp.exp(-s_float))
    ef, ef_float = exact_fraction(e), exact_fraction(e_float)
    assert abs(ef - ef_float) > ef * Fraction(1, 10**16)
    U1, W1 = np.array([[1.0]]), np.array([[1.0], [0.0]])
    gap = Fraction(1, 10**20)
    assert kernel.verify_upper(op, decimal_string(ef * (1 - gap), direction="down"), 1, U1, W1, max_prec=4096).status is not V
    assert kernel.verify_upper(op, decimal_string(ef * (1 + gap), direction="up"), 1, U1, W1, max_prec=4096).status is V


@pytest.mark.parametrize("kernel", KERNELS)
def test_duplicate_and_reordered_claims_are_independent(kernel):
    op = Operator("scores", {"S": np.array([[3.0, 0.0], [0.0, 3.0]])})
    U, W = np.eye(2)[:, :1], np.array([[1.0], [0.0]])
    e_lo, e_hi = truth_witness_error(op, U, W)
    below = decimal_string(e_lo * (1 - Fraction(1, 10**12)), direction="down")
    above = decimal_string(e_hi * (1 + Fraction(1, 10**12)), direction="up")
    for _ in range(3):  # the per-precision cache must not leak a decision
        assert kernel.verify_upper(op, above, 1, U, W).status is V
        assert kernel.verify_upper(op, below, 1, U, W).status is not V
    # editing r up (the witness still has only 1 column) is refused, not re-interpreted
    with pytest.raises(InvalidInputError):
        kernel.verify_upper(op, below, 2, U, W)


@pytest.mark.parametrize("kernel", KERNELS)
def test_true_claims_at_equality_are_never_refuted(kernel):
    """A witness whose error equals eps exactly is VALID: VERIFIED or INCONCLUSIVE, never
    REJECTED (exit 1 would claim a true certificate is provably false)."""
    edge = Operator("qk", {"Q": np.array([[1.0, 0.0]]), "K": np.array([[1.0, 0.0], [1.0, 0.0]])})
    U, W = np.array([[0.25]]), np.array([[1.0], [1.0]])
    for max_prec in (64, 512, 4096):
        assert kernel.verify_upper(edge, "0.5", 1, U, W, max_prec=max_prec).status is not Status.REJECTED
    identical = Operator("scores", {"S": np.array([[3.0, 3.0, -1.0], [0.5, 0.5, 0.5]])}, mask="causal")
    # row 0 sees keys 0..1 (exactly 1/2 each), row 1 sees all three (exactly 1/3 each)
    U2, W2 = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.5, 1 / 3], [0.5, 1 / 3], [0.0, 1 / 3]])
    e_lo, e_hi = truth_witness_error(identical, U2, W2)  # from 1/3 vs its double: 2**-54-ish
    assert e_lo > 0
    assert kernel.verify_upper(identical, decimal_string(e_hi, direction="up", digits=60), 2, U2, W2,
                               max_prec=4096).status is not Status.REJECTED
    assert kernel.verify_upper(identical, decimal_string(e_lo * (1 - Fraction(1, 10**20)), direction="down", digits=60),
                               2, U2, W2, max_prec=4096).status is not V


# --------------------------------------------------------------------------------------
# (e) the row-block float64 path alone (proofs/rowblock-bounds.md): it proves or declines
# --------------------------------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=60 * SCALE, **SETTINGS)
@given(data=st.data())
def test_rowblock_path_never_verifies_a_false_claim_and_never_rejects(data):
    """Against the independent truth: a witness below its true error and a certificate above its
    true threshold are never VERIFIED by ``engine="rowblock"``, nothing is ever REJECTED by it,
    and every interval it reports contains the truth."""
    op, arrays = data.draw(operators())
    r, U, W = data.draw(witnesses(op))
    e_lo, e_hi = truth_witness_error(op, U, W)
    assume(e_lo > Fraction(1, 10**300) and e_hi - e_lo <= e_lo * Fraction(1, 10**40))
    for gap in GAPS + (Fraction(1, 10),):
        below = decimal_string(e_lo * (1 - gap), direction="down", digits=45)
        above = decimal_string(e_hi * (1 + gap), direction="up", digits=45)
        for eps, true in ((below, False), (above, True)):
            v = arb_kernel.verify_upper(op, eps, r, U, W, engine="rowblock")
            event(f"upper {'true' if true else 'false'} {v.status.value}")
            assert v.status is not Status.REJECTED and (true or v.status is not V), (eps, float(e_lo), v)
            if v.value is not None:
                assert v.value[0] <= e_hi and e_lo <= v.value[1]
    k, X, Y = data.draw(certificates(op))
    res = truth_lower_threshold(op, X, Y)
    if res is None:
        return
    t_lo, t_hi, cond = res
    assume(t_lo > Fraction(1, 10**300) and t_hi - t_lo <= t_lo * Fraction(1, 10**40))
    for gap in GAPS + (Fraction(1, 10),):
        above = decimal_string(t_hi * (1 + gap), direction="up", digits=45)
        below = decimal_string(t_lo * (1 - gap), direction="down", digits=45)
        for eps, true in ((above, False), (below, True)):
            v = arb_kernel.verify_lower(op, eps, k, X, Y, engine="rowblock")
            event(f"lower {'true' if true else 'false'} {v.status.value}")
            assert v.status is not Status.REJECTED and (true or v.status is not V), (eps, float(t_hi), v)
            if v.value is not None:
                assert v.value[0] <= t_hi and t_lo <= v.value[1]
