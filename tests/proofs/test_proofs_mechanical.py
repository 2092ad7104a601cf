"""Mechanical checks of the lemmas written up in ``proofs/``.

Each test checks a lemma (or a fact about the trusted kernel a proof relies on) on real
computed values: sympy identities, exact ``fractions.Fraction`` arithmetic, Arb balls and
brute-force searches.  Every assertion compares computed values, so every test can fail.
The proof each test supports is named in its docstring; ``proofs/README.md`` has the index.
"""

from __future__ import annotations

import decimal
import itertools
import random
import struct
from fractions import Fraction

import numpy as np
import pytest
import sympy
from flint import arb, arb_mat, ctx, fmpq
import mpmath

from softrank_cert.errors import InternalInvariantError, InvalidOperatorError, InvalidToleranceError
from softrank_cert.kernel import (
    Operator, Status, float_to_decimal_string, parse_tolerance, verify_lower, verify_trivial_lower,
    verify_trivial_upper, verify_upper,
)
from softrank_cert.kernel import arb_lower_fraction, arb_upper_fraction, float64_matrix_to_arb, working_precision
from softrank_cert.kernel.enclosure import enclosure, row_norm_max
from softrank_cert.kernel.exact_inputs import parse_decimal
from tests.oracle import fraction_inverse as inverse
from tests.oracle import fraction_matrix as fr_matrix
from tests.oracle import matmul, norm

# --------------------------------------------------------------------------------------
# Exact helpers: matrices are lists of lists of Fractions (the rest is in tests/oracle.py).
# --------------------------------------------------------------------------------------


def matsub(A, B):
    return [[a - b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def matadd(A, B):
    return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def scale(M, s):
    return [[s * x for x in row] for row in M]


def rank(M) -> int:
    rows = [list(r) for r in M]
    rk, ncols = 0, len(rows[0])
    for col in range(ncols):
        pivot = next((r for r in range(rk, len(rows)) if rows[r][col] != 0), None)
        if pivot is None:
            continue
        rows[rk], rows[pivot] = rows[pivot], rows[rk]
        for r in range(rk + 1, len(rows)):
            f = rows[r][col] / rows[rk][col]
            rows[r] = [x - f * y for x, y in zip(rows[r], rows[rk])]
        rk += 1
    return rk


def ball_endpoints(x: arb) -> tuple[Fraction, Fraction]:
    """Exact [mid - rad, mid + rad] of a finite Arb ball."""
    def q(p):
        m, e = (int(t) for t in p.man_exp())
        return Fraction(m) * Fraction(2) ** e
    mid, rad = q(x.mid()), q(x.rad())
    return mid - rad, mid + rad


def contains(x: arb, value: Fraction) -> bool:
    lo, hi = ball_endpoints(x)
    return lo <= value <= hi


def random_double(rng: random.Random) -> float:
    """A uniformly random finite bit pattern: every exponent, subnormals included."""
    while True:
        bits = rng.getrandbits(64)
        x = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if x == x and x not in (float("inf"), float("-inf")):
            return x


SPECIAL_DOUBLES = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072009e-308, 2.2250738585072014e-308,
                   1.7976931348623157e308, -1.7976931348623157e308, 0.1, 1 / 3, 2.0**-1074 * 3, 1e-300, 1e300]


# --------------------------------------------------------------------------------------
# proofs/exact-inputs.md
# --------------------------------------------------------------------------------------


def _random_decimal(rng: random.Random, signed: bool) -> str:
    whole = "0" if rng.random() < 0.4 else str(rng.randint(1, 9)) + "".join(
        rng.choice("0123456789") for _ in range(rng.randint(0, 30)))
    text = whole
    if rng.random() < 0.8:
        text += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 80)))
    if signed and rng.random() < 0.5:
        text = "-" + text
    return text


def test_decimal_parser_matches_decimal_module():
    """exact-inputs.md, E1: the kernel's parser is the exact rational of the string."""
    rng = random.Random(1)
    seen_nonterminating_binary = 0
    for _ in range(2000):
        s = _random_decimal(rng, signed=True)
        expected = Fraction(decimal.Decimal(s))
        assert parse_decimal(s, "beta") == expected
        if not s.startswith("-") and expected > 0:
            assert parse_tolerance(s) == expected
        if expected.denominator % 5 == 0:
            seen_nonterminating_binary += 1
            # such a value is not a double: it differs from its float rounding
            assert Fraction(float(expected)) != expected
    assert seen_nonterminating_binary > 100
    assert parse_tolerance("0.1") == Fraction(1, 10) != Fraction(0.1)


@pytest.mark.parametrize("bad", ["1e-3", "1E2", " 0.5", "0.5 ", "+0.5", "-0.5", "01", "1.", ".5",
                                 "0x1p-3", "inf", "nan", "1_000", "\u0661", "0.5\n", "", "0", "0.000"])
def test_decimal_parser_refuses_non_plain_forms(bad):
    """exact-inputs.md, E1: anything outside the grammar (or <= 0) is refused, never misread."""
    with pytest.raises(InvalidToleranceError):
        parse_tolerance(bad)


def test_float_to_decimal_string_is_exact():
    """exact-inputs.md, E5: the decimal expansion of a double is exact (finite, 2^e -> 5^e)."""
    rng = random.Random(2)
    for x in SPECIAL_DOUBLES + [random_double(rng) for _ in range(300)]:
        s = float_to_decimal_string(x)
        assert Fraction(decimal.Decimal(s)) == Fraction(x)


@pytest.mark.parametrize("prec", [2, 53, 64, 512])
def test_arb_from_float_is_exact(prec):
    """exact-inputs.md, E2: arb(float) is the double exactly (radius 0), at any precision."""
    rng = random.Random(3 + prec)
    saved = ctx.prec
    ctx.prec = prec
    try:
        doubles = SPECIAL_DOUBLES + [random_double(rng) for _ in range(1000)]
        subnormals = [x for x in doubles if 0 < abs(x) < 2.2250738585072014e-308]
        huge = [x for x in doubles if abs(x) > 1e300]
        assert subnormals and huge
        for x in doubles:
            a = arb(x)
            assert a.rad() == 0
            m, e = (int(t) for t in a.man_exp())
            assert Fraction(m) * Fraction(2) ** e == Fraction(x)
    finally:
        ctx.prec = saved


def test_float64_matrix_to_arb_is_exact():
    """exact-inputs.md, E2: numpy tolist() + arb(float) keep every stored double exactly."""
    rng = random.Random(4)
    values = SPECIAL_DOUBLES[:12] + [random_double(rng) for _ in range(12 * 12 - 12)]
    array = np.array(values, dtype=np.float64).reshape(12, 12)
    with working_precision(64):
        mat = float64_matrix_to_arb(array)
    for got, x in zip(mat.entries(), array.ravel()):
        assert got.rad() == 0
        assert ball_endpoints(got) == (Fraction(float(x)), Fraction(float(x)))
    with pytest.raises(InvalidOperatorError):
        float64_matrix_to_arb(np.array([[1.0, float("nan")]]))


def test_arb_endpoints_to_fraction_bound_the_ball():
    """exact-inputs.md, E4: arb_lower/upper_fraction are exact rationals bounding every point."""
    rng = random.Random(5)
    with working_precision(64):
        for _ in range(500):
            q = Fraction(rng.randint(-10**30, 10**30), rng.randint(1, 10**25))
            x = arb(fmpq(q.numerator, q.denominator))
            if rng.random() < 0.5:
                x = x + arb(0, 1.0 / rng.randint(1, 10**6))  # a genuine radius
            lo, hi = arb_lower_fraction(x), arb_upper_fraction(x)
            blo, bhi = ball_endpoints(x)
            assert lo <= blo <= q <= bhi <= hi
        assert arb_lower_fraction(arb(1e300).exp()) is None


def test_float_of_arb_is_not_a_bound():
    """exact-inputs.md, E3: float(arb) rounds to nearest -- below the value for 1/3, above it for 1/10."""
    with working_precision(200):
        third, tenth = arb(fmpq(1, 3)), arb(fmpq(1, 10))
        assert Fraction(float(third)) < Fraction(1, 3)    # not an upper bound
        assert Fraction(float(tenth)) > Fraction(1, 10)   # not a lower bound
        # and it can lie outside the ball altogether
        assert not contains(third, Fraction(float(third)))
        assert arb_lower_fraction(third) <= Fraction(1, 3) <= arb_upper_fraction(third)


# --------------------------------------------------------------------------------------
# proofs/softmax-enclosure.md
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 4])
def test_softmax_shift_invariance_sympy(n):
    """softmax-enclosure.md, Lemma 1: exp(s_j - c)/sum exp(s_l - c) = exp(s_j)/sum exp(s_l) for real c."""
    s = sympy.symbols(f"s0:{n}", real=True)
    c = sympy.Symbol("c", real=True)
    for j in range(n):
        shifted = sympy.exp(s[j] - c) / sum(sympy.exp(t - c) for t in s)
        plain = sympy.exp(s[j]) / sum(sympy.exp(t) for t in s)
        assert sympy.simplify(shifted - plain) == 0
    # the identity is not vacuous: a *column*-dependent shift does change the row
    bad = sympy.exp(s[0] - s[0]) / sum(sympy.exp(t - (s[0] if i == 0 else 0)) for i, t in enumerate(s))
    assert sympy.simplify(bad - sympy.exp(s[0]) / sum(sympy.exp(t) for t in s)) != 0


@pytest.mark.parametrize("n", [1, 3, 4])
def test_softmax_row_sums_to_one_sympy(n):
    """softmax-enclosure.md, Lemma 2: a softmax row sums to exactly 1 (and each entry is > 0)."""
    s = sympy.symbols(f"s0:{n}", real=True)
    z = sum(sympy.exp(t) for t in s)
    row = [sympy.exp(t) / z for t in s]
    assert sympy.simplify(sum(row) - 1) == 0
    assert all(sympy.ask(sympy.Q.positive(a)) for a in row)


def test_log_softmax_identity_sympy():
    """softmax-enclosure.md, Lemma 5: log A_j = (s_j - c) - log Z with Z = sum exp(s_l - c)."""
    s = sympy.symbols("s0:4", real=True)
    c = sympy.Symbol("c", real=True)
    z = sum(sympy.exp(t - c) for t in s)
    lhs = sympy.expand_log(sympy.log(sympy.exp(s[1] - c) / z), force=True)
    assert sympy.simplify(lhs - ((s[1] - c) - sympy.log(z))) == 0


def test_causal_mask_keeps_a_nonempty_prefix():
    """softmax-enclosure.md, Lemma 0: for m <= N the allowed keys of row i are exactly 0..i+N-m."""
    for n in range(1, 9):
        for m in range(1, n + 1):
            op = Operator("scores", {"S": np.zeros((m, n))}, mask="causal")
            allowed = op.allowed()
            for i in range(m):
                length = i + n - m + 1
                assert 1 <= length <= n
                assert allowed[i].tolist() == [j < length for j in range(n)]
    with pytest.raises(InvalidOperatorError):
        Operator("scores", {"S": np.zeros((3, 2))}, mask="causal")


def _mp_softmax(S, allowed):
    out = []
    for row, ok in zip(S, allowed):
        z = mpmath.fsum(mpmath.exp(s) for s, a in zip(row, ok) if a)
        out.append([mpmath.exp(s) / z if a else mpmath.mpf(0) for s, a in zip(row, ok)])
    return out


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_enclosure_contains_high_precision_softmax(mask):
    """softmax-enclosure.md, Lemmas 2-4: the kernel's balls contain S and A (mpmath, 300 digits)."""
    rng = np.random.default_rng(6)
    m, n, d = 4, 6, 5
    Q, K = rng.normal(size=(m, d)) * 3, rng.normal(size=(n, d)) * 3
    op = Operator("qk", {"Q": Q, "K": K}, mask=mask)
    with mpmath.workdps(300):
        beta = 1 / mpmath.sqrt(d)
        S = [[beta * mpmath.fsum(mpmath.mpf(float(Q[i, t])) * mpmath.mpf(float(K[j, t])) for t in range(d))
              for j in range(n)] for i in range(m)]
        A = _mp_softmax(S, op.allowed().tolist())
        tol = mpmath.mpf(10) ** -250  # far below any ball radius at 64 bits
        with working_precision(64):
            enc = enclosure(op, 64)
            for i in range(m):
                row_sum = arb(0)
                for j in range(n):
                    for ball, exact in ((enc.scores.entries()[i * n + j], S[i][j]),
                                        (enc.probabilities.entries()[i * n + j], A[i][j])):
                        lo, hi = ball_endpoints(ball)
                        assert mpmath.mpf(lo.numerator) / lo.denominator - tol <= exact
                        assert exact <= mpmath.mpf(hi.numerator) / hi.denominator + tol
                    row_sum += enc.probabilities.entries()[i * n + j]
                    if not op.allowed()[i, j]:
                        assert ball_endpoints(enc.probabilities.entries()[i * n + j]) == (0, 0)
                assert contains(row_sum, Fraction(1))          # Lemma 2, seen through the balls
            assert ball_endpoints(enc.row_abs_sum_max) == (1, 1)


def test_beta_is_exact_inverse_sqrt_not_float():
    """softmax-enclosure.md, Lemma 3: beta = 1/sqrt(d) exactly, not the double 1/np.sqrt(d)."""
    op = Operator("qk", {"Q": np.array([[1.0, 0.0, 0.0]]), "K": np.array([[1.0, 0.0, 0.0]])})
    with working_precision(128):
        s = enclosure(op, 128).scores.entries()[0]
        lo, hi = ball_endpoints(s)
        assert lo > 0 and lo**2 <= Fraction(1, 3) <= hi**2      # contains 1/sqrt(3)
        assert not contains(s, Fraction(float(1.0 / np.sqrt(3.0))))  # excludes its float rounding


# --------------------------------------------------------------------------------------
# proofs/upper-witness.md
# --------------------------------------------------------------------------------------


def test_induced_inf_norm_is_max_row_l1():
    """upper-witness.md, Lemma U2: sup_{|v|<=1} |Ev|_inf = max_i sum_j |E_ij|, attained by a sign vector."""
    rng = random.Random(7)
    for _ in range(60):
        m, n = rng.randint(1, 4), rng.randint(1, 5)
        E = [[Fraction(rng.randint(-50, 50), rng.randint(1, 20)) for _ in range(n)] for _ in range(m)]
        target = norm(E)
        # attained: the sign vector of the worst row
        worst = max(range(m), key=lambda i: sum(abs(x) for x in E[i]))
        v = [Fraction(1) if x >= 0 else Fraction(-1) for x in E[worst]]
        assert max(abs(sum(a * b for a, b in zip(row, v))) for row in E) == target
        # the sup over the cube is the max over its vertices (convexity); enumerate them all
        vertex_max = max(max(abs(sum(a * b for a, b in zip(row, s))) for row in E)
                         for s in itertools.product((-1, 1), repeat=n))
        assert vertex_max == target
        # and no point of the cube exceeds it (V with |V_jt| <= 1: every column obeys the bound)
        for _ in range(20):
            w = [Fraction(rng.randint(-1000, 1000), 1000) for _ in range(n)]
            assert max(abs(sum(a * b for a, b in zip(row, w))) for row in E) <= target


def test_norm_is_submultiplicative_for_rectangular_matrices():
    """lower-certificate.md, step 2: |X E Y| <= |X| |E| |Y| for the max-row-l1 norm."""
    rng = random.Random(8)
    for _ in range(200):
        k, m, n = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 4)
        def gen(r: int, c: int) -> list[list[Fraction]]:
            return [[Fraction(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(c)] for _ in range(r)]

        X, E, Y = gen(k, m), gen(m, n), gen(n, k)
        assert norm(matmul(matmul(X, E), Y)) <= norm(X) * norm(E) * norm(Y)


def test_arb_comparisons_and_max_are_sound():
    """upper-witness.md, decision rules: x <= y / x > y are 'for all points'; max encloses the max."""
    rng = random.Random(9)
    decided = undecided = 0
    with working_precision(64):
        for _ in range(1500):
            def ball():
                mid = Fraction(rng.randint(-40, 40), 8)
                return arb(float(mid), rng.choice([0.0, 0.125, 0.5, 1.0, 3.0])), mid
            (x, mx), (y, my) = ball(), ball()
            xlo, xhi = ball_endpoints(x)
            ylo, yhi = ball_endpoints(y)
            le, gt, lt, ge = x <= y, x > y, x < y, x >= y
            assert le == (xhi <= ylo) and gt == (xlo > yhi)
            assert lt == (xhi < ylo) and ge == (xlo >= yhi)
            assert not (le and gt) and not (lt and ge)
            if le or gt:
                decided += 1
            elif mx != my:
                undecided += 1  # overlapping balls with distinct midpoints: no decision from midpoints
            mxy = x.max(y)
            for px in (xlo, xhi, (xlo + xhi) / 2):
                for py in (ylo, yhi, (ylo + yhi) / 2):
                    assert contains(mxy, max(px, py))
    assert decided > 100 and undecided > 100


def test_kernel_upper_decision_matches_exact_error():
    """upper-witness.md, Theorem U: the kernel's verdict agrees with the exact ||A - U W^T||."""
    rng = np.random.default_rng(10)
    for _trial in range(6):
        m, n, r = 4, 5, 2
        A = rng.random((m, n))
        U, W = rng.normal(size=(m, r)) * 0.3, rng.normal(size=(n, r)) * 0.3
        op = Operator("probabilities", {"A": A})
        err = norm(matsub(fr_matrix(A), matmul(fr_matrix(U), [list(c) for c in zip(*fr_matrix(W))])))
        above = float_to_decimal_string(float(err * (1 + Fraction(1, 10**6))))
        below = float_to_decimal_string(float(err * (1 - Fraction(1, 10**6))))
        v_ok = verify_upper(op, above, r, U, W)
        v_bad = verify_upper(op, below, r, U, W)
        assert v_ok.status is Status.VERIFIED and v_bad.status is Status.REJECTED
        assert v_ok.value[0] <= err <= v_ok.value[1]
        eps_q = parse_tolerance(above)
        assert v_ok.margin[0] <= eps_q - err <= v_ok.margin[1] and v_ok.margin[0] >= 0
    # a softmax operator too: the error's ball must contain the high-precision error
    S = rng.normal(size=(3, 4))
    op = Operator("scores", {"S": S})
    U, W = rng.normal(size=(3, 1)) * 0.2, rng.normal(size=(4, 1))
    with mpmath.workdps(60):
        A = _mp_softmax([[mpmath.mpf(float(v)) for v in row] for row in S], [[True] * 4] * 3)
        err = max(mpmath.fsum(abs(A[i][j] - mpmath.mpf(float(U[i, 0])) * mpmath.mpf(float(W[j, 0])))
                              for j in range(4)) for i in range(3))
        v = verify_upper(op, "5", 1, U, W)
        assert v.status is Status.VERIFIED
        assert mpmath.mpf(v.value[0].numerator) / v.value[0].denominator <= err * (1 + mpmath.mpf(10)**-40)
        assert err <= mpmath.mpf(v.value[1].numerator) / v.value[1].denominator * (1 + mpmath.mpf(10)**-40)


# --------------------------------------------------------------------------------------
# proofs/lower-certificate.md
# --------------------------------------------------------------------------------------


def _random_invertible(rng: random.Random, k: int):
    while True:
        M = [[Fraction(rng.randint(-20, 20), rng.randint(1, 7)) for _ in range(k)] for _ in range(k)]
        inv = inverse(M)
        if inv is not None:
            return M, inv


def _singular_direction(M, inv):
    """E with ||E|| = 1/||M^{-1}|| exactly and M + E singular (the sharpness example)."""
    k = len(M)
    i = max(range(k), key=lambda r: sum(abs(x) for x in inv[r]))
    y = [Fraction(1) if x >= 0 else Fraction(-1) for x in inv[i]]       # |y|_inf = 1
    x = [sum((a * b for a, b in zip(row, y)), Fraction(0)) for row in inv]  # x = M^{-1} y, |x| = ||M^{-1}||
    p = max(range(k), key=lambda t: abs(x[t]))
    z = [Fraction(0)] * k
    z[p] = 1 / x[p]                                                      # z.x = 1, |z|_1 = 1/|x|_inf
    return [[-y[a] * z[b] for b in range(k)] for a in range(k)], x


def test_neumann_perturbation_keeps_invertibility():
    """lower-certificate.md, Lemma L1: ||E|| < 1/||M^{-1}|| => M + E invertible (exact and Arb)."""
    rng = random.Random(11)
    for _ in range(150):
        k = rng.randint(1, 4)
        M, inv = _random_invertible(rng, k)
        ninv = norm(inv)
        delta = Fraction(rng.randint(1, 999), 1000)
        if rng.random() < 0.5:
            E0 = [[Fraction(rng.randint(-9, 9)) for _ in range(k)] for _ in range(k)]
            if norm(E0) == 0:
                continue
        else:
            E0, _ = _singular_direction(M, inv)  # the worst direction
        E = scale(E0, (1 - delta) / (ninv * norm(E0)))
        assert norm(E) * ninv < 1
        P = matadd(M, E)
        Pinv = inverse(P)
        assert Pinv is not None
        # the Neumann-series bound on the perturbed inverse
        assert norm(Pinv) <= ninv / (1 - ninv * norm(E))
        # and Arb proves it too, with a ball containing the exact inverse
        with working_precision(128):
            ball = arb_mat(k, k, [arb(fmpq(v.numerator, v.denominator)) for row in P for v in row]).inv()
            assert all(contains(b, v) for b, v in zip(ball.entries(), (v for row in Pinv for v in row)))


def test_neumann_bound_is_sharp():
    """lower-certificate.md, Lemma L1 sharpness: at ||E|| = 1/||M^{-1}|| exactly, M + E can be singular."""
    rng = random.Random(12)
    for _ in range(100):
        k = rng.randint(1, 4)
        M, inv = _random_invertible(rng, k)
        E, x = _singular_direction(M, inv)
        assert norm(E) == 1 / norm(inv)
        P = matadd(M, E)
        assert any(v != 0 for v in x)
        assert all(sum((a * b for a, b in zip(row, x)), Fraction(0)) == 0 for row in P)  # (M+E) x = 0
        assert inverse(P) is None and rank(P) < k
        with working_precision(256), pytest.raises(ZeroDivisionError):
            arb_mat(k, k, [arb(fmpq(v.numerator, v.denominator)) for row in P for v in row]).inv()


def _low_rank_candidates(A: np.ndarray, rank_b: int, rng: np.random.Generator, starts: int = 3):
    """Float64 factor pairs (U, V), U V^T of rank <= rank_b, from local searches minimising the
    max-row-l1 distance to A (plus random ones).  The exact B = U V^T is formed in Fractions."""
    from scipy.optimize import minimize

    m, n = A.shape
    if rank_b == 0:
        return [(np.zeros((m, 0)), np.zeros((n, 0)))]
    u, s, vt = np.linalg.svd(A)

    def split(z):
        return z[: m * rank_b].reshape(m, rank_b), z[m * rank_b:].reshape(n, rank_b)

    def objective(z):
        U, V = split(z)
        return np.abs(A - U @ V.T).sum(axis=1).max()

    found = []
    for t in range(starts):
        if t == 0:
            z0 = np.concatenate([(u[:, :rank_b] * s[:rank_b]).ravel(), vt[:rank_b].T.ravel()])
        else:
            z0 = rng.normal(size=(m + n) * rank_b)
        res = minimize(objective, z0, method="Nelder-Mead", options={"maxiter": 2000, "xatol": 1e-9, "fatol": 1e-11})
        U, V = split(res.x)
        found.append((U, V))
        found.append((U * (1 + 1e-3 * rng.normal(size=U.shape)), V))
    found += [(rng.normal(size=(m, rank_b)), rng.normal(size=(n, rank_b))) for _ in range(60)]
    return found


def _certificate_candidates(A: np.ndarray, k: int, rng: np.random.Generator):
    """(X, Y) pairs: every row/column selection, an SVD-based pair and a random pair."""
    m, n = A.shape
    out = []
    for rows in itertools.combinations(range(m), k):
        for cols in itertools.combinations(range(n), k):
            X, Y = np.zeros((k, m)), np.zeros((n, k))
            X[range(k), rows] = 1.0
            Y[cols, range(k)] = 1.0
            out.append((X, Y))
    if k == 1:  # query i against all keys: X = e_i^T, Y = ones
        out += [(np.eye(m)[i : i + 1], np.ones((n, 1))) for i in range(m)]
    u, s, vt = np.linalg.svd(A)
    out.append((np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)))
    out.append((rng.normal(size=(k, m)), rng.normal(size=(n, k))))
    return out


@pytest.mark.parametrize("seed,k", [(13, 1), (14, 2), (15, 2), (16, 3), (20, 2)])
def test_lower_certificate_lemma_brute_force(seed, k):
    """lower-certificate.md, Theorem L: every B of rank < k is at distance >= 1/(|X||Y||(XAY)^-1|)."""
    rng = np.random.default_rng(seed)
    m, n = 3, 4
    S = rng.normal(size=(m, n)) * 2
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)  # a probabilities operator: exactly these doubles
    Aq = fr_matrix(A)
    certs = []
    for X, Y in _certificate_candidates(A, k, rng):
        Xq, Yq = fr_matrix(X), fr_matrix(Y)
        inv = inverse(matmul(matmul(Xq, Aq), Yq))
        if inv is not None:
            certs.append((1 / (norm(Xq) * norm(Yq) * norm(inv)), X, Y, Xq, Yq))
    certs.sort(key=lambda c: c[0])
    best_threshold = certs[-1][0]
    closest = None
    for U, V in _low_rank_candidates(A, k - 1, rng):
        if k == 1:
            Bq = [[Fraction(0)] * n for _ in range(m)]
        else:
            Bq = matmul(fr_matrix(U), [list(c) for c in zip(*fr_matrix(V))])  # exact U V^T
        assert rank(Bq) <= k - 1
        dist = norm(matsub(Aq, Bq))
        for threshold, _, _, Xq, Yq in certs:
            assert rank(matmul(matmul(Xq, Bq), Yq)) < k              # X B Y is singular
            assert dist >= threshold                                # the lemma, exactly
        closest = dist if closest is None else min(closest, dist)
    assert closest >= best_threshold
    if k == 1:
        # sharp: for a nonnegative A, (e_i, ones) gives the row sum; the best is ||A|| = ||A - 0||
        assert best_threshold == norm(Aq) == closest
    else:
        assert closest < best_threshold * Fraction(3, 2)  # the search really probed near the bound
    # the kernel agrees: VERIFIED just below the threshold, REJECTED just above it
    threshold, X, Y = certs[-1][:3]
    op = Operator("probabilities", {"A": A})
    below = float_to_decimal_string(float(threshold * Fraction(999, 1000)))
    above = float_to_decimal_string(float(threshold * Fraction(1001, 1000)))
    v = verify_lower(op, below, k, X, Y)
    assert v.status is Status.VERIFIED
    assert v.value[0] <= threshold <= v.value[1]
    assert v.margin[0] > 0
    assert verify_lower(op, above, k, X, Y).status is Status.REJECTED


def test_special_case_norms():
    """lower-certificate.md, special cases: selections, pooling and k = 1 have ||X|| = ||Y|| = 1."""
    rng = random.Random(17)
    for _ in range(50):
        m, n, k = 6, 7, rng.randint(1, 5)
        rows, cols = rng.sample(range(m), k), rng.sample(range(n), k)
        Xs = [[Fraction(int(i == rows[a])) for i in range(m)] for a in range(k)]
        Ys = [[Fraction(int(j == cols[b])) for b in range(k)] for j in range(n)]
        assert norm(Xs) == 1 and norm(Ys) == 1
        A = [[Fraction(rng.randint(0, 9)) for _ in range(n)] for _ in range(m)]
        assert matmul(matmul(Xs, A), Ys) == [[A[rows[a]][cols[b]] for b in range(k)] for a in range(k)]
        # pooling: probability-vector rows; disjoint key groups
        Xp = []
        for _ in range(k):
            w = [Fraction(rng.randint(0, 5)) for _ in range(m)]
            w[rng.randrange(m)] += 1
            Xp.append([x / sum(w) for x in w])
        labels = [rng.randrange(k + 1) for _ in range(n)]  # label k = key in no group
        labels[:k] = range(k)
        Yp = [[Fraction(int(labels[j] == b)) for b in range(k)] for j in range(n)]
        assert norm(Xp) == 1 and norm(Yp) == 1
    # k = 1: X = e_1^T, Y = ones, X A Y = 1 for a softmax row
    s = sympy.symbols("s0:4", real=True)
    row = [sympy.exp(t) / sum(sympy.exp(u) for u in s) for t in s]
    assert sympy.simplify(sum(row) - 1) == 0
    assert norm([[Fraction(1)] for _ in range(4)]) == 1


# --------------------------------------------------------------------------------------
# proofs/trivial-ends.md
# --------------------------------------------------------------------------------------


def test_trivial_ends_match_exact_rules():
    """trivial-ends.md, T1-T4: r = p always; r = 0 iff ||A|| <= eps; k = 0 always; k = 1 iff ||A|| > eps."""
    rng = np.random.default_rng(18)
    soft = Operator("scores", {"S": rng.normal(size=(3, 5))})
    assert verify_trivial_upper(soft, "0.001", 3).status is Status.VERIFIED
    assert verify_trivial_upper(soft, "1", 0).status is Status.VERIFIED
    assert verify_trivial_upper(soft, "0.99999999999999999999", 0).status is Status.REJECTED
    assert verify_trivial_lower(soft, "0.99999999999999999999", 1).status is Status.VERIFIED
    assert verify_trivial_lower(soft, "1", 1).status is Status.REJECTED
    assert verify_trivial_lower(soft, "123", 0).status is Status.VERIFIED
    for _ in range(5):
        A = np.abs(rng.normal(size=(3, 4)))  # a probabilities operator needs A >= 0 (issue 25)
        op = Operator("probabilities", {"A": A})
        a_norm = norm(fr_matrix(A))
        hi = float_to_decimal_string(float(a_norm * Fraction(1000001, 1000000)))
        lo = float_to_decimal_string(float(a_norm * Fraction(999999, 1000000)))
        assert verify_trivial_upper(op, hi, 0).status is Status.VERIFIED
        assert verify_trivial_upper(op, lo, 0).status is Status.REJECTED
        assert verify_trivial_lower(op, lo, 1).status is Status.VERIFIED
        assert verify_trivial_lower(op, hi, 1).status is Status.REJECTED
        # eps exactly ||A|| (a dyadic, so exactly representable): r = 0 holds, k = 1 fails
        exact = float_to_decimal_string(float(a_norm)) if Fraction(float(a_norm)) == a_norm else None
        if exact is not None:
            assert verify_trivial_upper(op, exact, 0).status is Status.VERIFIED
            assert verify_trivial_lower(op, exact, 1).status is Status.REJECTED
    with working_precision(64):
        assert contains(row_norm_max(float64_matrix_to_arb(A)), norm(fr_matrix(A)))


# --------------------------------------------------------------------------------------
# proofs/precision-retry.md
# --------------------------------------------------------------------------------------


def test_precision_retry_borderline_tolerance():
    """precision-retry.md: low precision is undecided, the first deciding precision is right, no flip."""
    x = 0.1
    exact_x = float_to_decimal_string(x)          # 0.1000000000000000055511151231257827021181583404541015625
    assert Fraction(decimal.Decimal(exact_x)) == Fraction(x)
    op = Operator("probabilities", {"A": np.array([[x]])})
    zero = np.zeros((1, 1))
    just_below = exact_x[:42]                     # truncation: eps < ||A - 0|| by < 1e-40
    just_above = exact_x + "0" * 25 + "1"         # eps > ||A - 0|| by 1e-81
    assert parse_tolerance(just_below) < Fraction(x) < parse_tolerance(just_above)
    outcomes = {}
    for eps, truth in ((just_below, Status.REJECTED), (just_above, Status.VERIFIED), (exact_x, Status.VERIFIED)):
        for max_prec in (64, 128, 256, 512, 1024):
            v = verify_upper(op, eps, 1, zero, zero, max_prec=max_prec)
            assert v.status in (truth, Status.INCONCLUSIVE)  # never the opposite verdict
            outcomes[eps, max_prec] = (v.status, v.precision)
    assert outcomes[just_below, 64] == (Status.INCONCLUSIVE, 64)
    assert outcomes[just_below, 128] == (Status.INCONCLUSIVE, 128)
    assert outcomes[just_below, 512] == (Status.REJECTED, 256)
    assert outcomes[just_above, 256] == (Status.INCONCLUSIVE, 256)
    assert outcomes[just_above, 512] == (Status.VERIFIED, 512)
    assert outcomes[exact_x, 64] == (Status.VERIFIED, 64)   # eps = ||A|| exactly, a dyadic: exact ball


# --------------------------------------------------------------------------------------
# proofs/bracket-consistency.md
# --------------------------------------------------------------------------------------


def test_bracket_consistency_step_fails_loudly():
    """bracket-consistency.md: verified k at eps1 and verified r at eps2 <= eps1 with k > r is a bug (exit 4)."""
    from softrank_cert.kernel import decide
    from softrank_cert.verification import check_consistency

    def v(side, rank, eps, status=Status.VERIFIED):  # a verdict from the kernel's one constructor
        decision = {Status.VERIFIED: True, Status.REJECTED: False}[status]
        return decide(side, rank, eps, "test", [("trivial", 0, lambda: (decision, None, None, "test"))])

    check_consistency((v("lower", 5, "0.25"), v("upper", 5, "0.25")), "op")     # k = r: fine
    check_consistency((v("lower", 6, "0.25"), v("upper", 5, "0.5")), "op")      # eps2 > eps1: no claim
    check_consistency((v("lower", 6, "0.25"), v("upper", 5, "0.1", Status.REJECTED)), "op")
    with pytest.raises(InternalInvariantError) as info:
        check_consistency((v("lower", 6, "0.25"), v("upper", 5, "0.1")), "op")
    assert info.value.exit_code == 4
    with pytest.raises(InternalInvariantError):
        check_consistency((v("lower", 6, "0.25"), v("upper", 5, "0.250")), "op")  # equal as rationals


def test_real_brackets_are_consistent():
    """bracket-consistency.md: verified ends from the kernel on one operator satisfy k <= r across eps."""
    rng = np.random.default_rng(19)
    A = rng.random((4, 4)) + 3 * np.eye(4)
    A /= A.sum(axis=1, keepdims=True)
    op = Operator("probabilities", {"A": A})
    X, Y = np.eye(4), np.eye(4)
    lowers, uppers = {}, {}
    for eps in ("0.05", "0.2", "0.4", "0.8"):
        v = verify_lower(op, eps, 4, X, Y)
        lowers[eps] = 4 if v.status is Status.VERIFIED else 1
        u, s, vt = np.linalg.svd(A)
        uppers[eps] = 4
        for r in range(1, 4):
            if verify_upper(op, eps, r, u[:, :r] * s[:r], vt[:r].T).status is Status.VERIFIED:
                uppers[eps] = r
                break
    eps_list = sorted(lowers, key=Fraction)
    assert any(lowers[e] == 4 for e in eps_list)
    for e1 in eps_list:
        for e2 in eps_list:
            if Fraction(e2) <= Fraction(e1):
                assert lowers[e1] <= uppers[e2]
