"""The kernel's float64 path (proofs/float64-bounds.md): each lemma on computed values against
exact references (Fraction, mpmath, Arb), the run-time preconditions, the fallback to Arb,
and agreement of the float64 path with the Arb path on every shipped certificate."""

from __future__ import annotations

import itertools
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st

from softrank_cert.kernel import Operator, Status, verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper
from softrank_cert.kernel import arb_lower_fraction, arb_upper_fraction, working_precision
from softrank_cert.kernel.enclosure import enclosure
from softrank_cert.kernel.float64 import attempts as fast
from softrank_cert.kernel.float64 import bounds as fb
from softrank_cert.kernel.float64 import fpenv
from softrank_cert.certio.certificate import decode_certificate, read_json_file
from softrank_cert.verification import check_claims
from tests.oracle import exact_matmul

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ Lemma F1 ------------

SPECIALS = [0.0, -0.0, 5e-324, -5e-324, 2.0**-1022, 1.0, -1.0, 1e308, -1e308, 0.1, 3.0]


def test_up_and_down_step_one_double_outward():
    x = np.array(SPECIALS)
    assert (fb.up(x) > x).all() and (fb.down(x) < x).all()
    nonneg = np.array([0.0, -0.0, 5e-324, 2.0**-1022, 1.0, 1e308])
    assert np.array_equal(fb.up_nonneg(nonneg), np.nextafter(nonneg + 0.0, np.inf))
    assert np.array_equal(fb.down_nonneg(nonneg), np.maximum(np.nextafter(nonneg + 0.0, -np.inf), 0.0))
    assert not np.isfinite(fb.up_nonneg(np.array([np.inf]))).any()  # +inf never passes as finite


@given(st.floats(allow_nan=False, allow_infinity=False, width=64),
       st.floats(allow_nan=False, allow_infinity=False, width=64))
@settings(max_examples=300, deadline=None)
def test_f1_bounds_every_operation_exactly(x, y):
    with np.errstate(all="ignore"):
        a, b = np.array([x]), np.array([y])
        for exact, computed in ((Fraction(x) + Fraction(y), a + b), (Fraction(x) - Fraction(y), a - b),
                                (Fraction(x) * Fraction(y), a * b)) + (((Fraction(x) / Fraction(y), a / b),) if y else ()):
            lo, hi = fb.down(computed)[0], fb.up(computed)[0]
            if np.isfinite(lo) and np.isfinite(hi):
                assert Fraction(lo) <= exact <= Fraction(hi)
            if computed[0] >= 0 and exact >= 0 and np.isfinite(fb.up_nonneg(computed)[0]):
                assert Fraction(fb.down_nonneg(computed)[0]) <= exact <= Fraction(fb.up_nonneg(computed)[0])


def test_fraction_rounding_is_directed_and_tight():
    for q in (Fraction(1, 3), Fraction(-2, 7), Fraction(10) ** 400, -Fraction(10) ** 400, Fraction(1, 10**400), Fraction(5)):
        lo, hi = fb.fraction_down(q), fb.fraction_up(q)
        if np.isfinite(lo):
            assert Fraction(lo) <= q
        if np.isfinite(hi):
            assert q <= Fraction(hi)
        if np.isfinite(lo) and np.isfinite(hi) and abs(q) < 1e300:
            assert np.nextafter(lo, np.inf) >= hi  # adjacent or equal doubles
    assert fb.fraction_up(Fraction(5)) == fb.fraction_down(Fraction(5)) == 5.0


def test_preconditions_hold_here_and_are_checked_before_every_decision(monkeypatch):
    from softrank_cert.errors import FloatingPointEnvironmentError

    assert fpenv.ieee_preconditions_hold()
    op = Operator("qk", {"Q": np.eye(4), "K": np.eye(4)})
    a = softmax_float(op)
    U, s, Vt = np.linalg.svd(a)
    W = np.ascontiguousarray(Vt.T * s)
    monkeypatch.setattr(fpenv, "ieee_preconditions_hold", lambda: False)
    for engine in ("auto", "arb", "float64", "rowblock"):  # the entry gate refuses before any engine runs
        with pytest.raises(FloatingPointEnvironmentError):
            verify_upper(op, "0.5", 4, U, W, engine=engine)
    monkeypatch.undo()
    auto = verify_upper(op, "0.5", 4, U, W)
    assert auto.status is Status.VERIFIED and auto.engine == "rowblock"
    assert verify_upper(op, "0.5", 4, U, W, engine="float64").engine == "float64"


def test_subnormal_inputs_send_the_claim_to_arb():
    q = np.eye(3)
    q[0, 1] = 1e-310  # subnormal
    op = Operator("qk", {"Q": q, "K": np.eye(3)})
    a = softmax_float(op)
    v = verify_upper(op, "0.5", 3, a, np.eye(3))
    assert v.status is Status.VERIFIED and v.engine == "arb"
    assert verify_upper(op, "0.5", 3, a, np.eye(3), engine="float64").status is Status.INCONCLUSIVE


# ------------------------------------------------------------------ Lemma F2 ------------

def test_f2_row_sums_bracket_the_exact_sums_even_with_cancelling_magnitudes():
    rng = np.random.default_rng(1)
    x = np.abs(rng.standard_normal((20, 300))) * np.exp(rng.uniform(-700, 700, (20, 300)))
    x[3] = 5e-324  # subnormal terms
    x[4, :] = 0.0
    lo, hi = fb.row_sums_lower(x), fb.row_sums_upper(x)
    for i in range(x.shape[0]):
        exact = sum((Fraction(float(v)) for v in x[i]), Fraction(0))
        assert Fraction(lo[i]) <= exact <= Fraction(hi[i])
        assert Fraction(hi[i]) - Fraction(lo[i]) <= exact / 10**12 + 2 * x.shape[1] * fb.ETA


def test_gamma_and_constants_are_rounded_upwards():
    for n in (1, 2, 64, 512, 10**6):
        g, inv, one_plus, n_eta = fb._sum_constants(n)
        assert Fraction(g) >= fb.gamma(n)
        assert Fraction(inv) >= 1 / (1 - fb.gamma(n))
        assert Fraction(one_plus) >= 1 + fb.gamma(n)
        assert Fraction(n_eta) >= n * fb.ETA


# ------------------------------------------------------------------ Lemma F3 ------------

def exp_test_points() -> np.ndarray:
    rng = np.random.default_rng(7)
    ties = (np.arange(-44800, 64, 997) + 0.5) / 64.0  # halfway cases of the reduction
    near = np.concatenate([np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    edges = np.array([-700.0, 1.0, 0.0, -0.0, 5e-324, -5e-324, 1 / 128, -1 / 128, 1 / 64, -1 / 64, -699.99, 0.999])
    return np.concatenate([ties, near, edges, rng.uniform(-700, 1, 2000), -np.exp(rng.uniform(-30, 6.5, 500))])


def test_f3_exp_bounds_contain_mpmath_exp_and_are_narrow():
    y = np.clip(exp_test_points(), -700.0, 1.0)
    lo, hi = fb.exp_bounds(y)
    mpmath.mp.prec = 120
    for v, a, b in zip(y.tolist(), lo.tolist(), hi.tolist()):
        e = mpmath.exp(mpmath.mpf(v))
        assert mpmath.mpf(a) <= e <= mpmath.mpf(b), v
        assert (b - a) / b < 2.0**-42
    mpmath.mp.prec = 53


def test_f3_tables_are_certified_by_arb():
    e_table, f_table, taylor = fb._exp_tables()
    assert [Fraction(c) for c in taylor[:3]] == [1, 1, Fraction(1, 2)]
    with working_precision(200):
        for a, d in zip(range(-700, 2, 37), e_table[::37]):
            assert abs(arb(float(d)) - arb(a).exp()) <= arb(2) ** -52 * arb(float(d))
        for b, d in enumerate(f_table):
            assert abs(arb(float(d)) - (arb(b) / 64).exp()) <= arb(2) ** -52 * arb(float(d))


def test_f3_refuses_arguments_outside_its_range():
    from softrank_cert.errors import InternalInvariantError

    with pytest.raises(InternalInvariantError):
        fb.exp_bounds(np.array([1.5]))
    with pytest.raises(InternalInvariantError):
        fb.exp_bounds(np.array([-700.5]))


# ------------------------------------------------------------------ Lemma F4 ------------

def adversarial_matrices(rng, m, n, N):
    a = rng.standard_normal((m, n)) * np.exp(rng.uniform(-20, 20, (m, n)))
    b = rng.standard_normal((n, N))
    b[:, 0] = -b[:, 1]  # cancellation
    a[0] = 1e150
    b[0, 2], b[1, 2] = 1.0, -1.0  # huge cancelling terms in column 2
    return a, b


def test_f4_product_bound_and_enclosure_contain_the_exact_product():
    rng = np.random.default_rng(3)
    a, b = adversarial_matrices(rng, 7, 9, 5)
    exact = exact_matmul(a, b)
    for c, r in (fb.product_bound(a, b), fb.product_enclosure(a, None, b, None)):
        for i, j in itertools.product(range(7), range(5)):
            assert abs(exact[i][j] - Fraction(c[i, j])) <= Fraction(r[i, j])


def test_f4_enclosure_with_radii_contains_sampled_corner_products():
    rng = np.random.default_rng(4)
    am, bm = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    ar, br = np.abs(rng.standard_normal((4, 6))) * 1e-6, np.abs(rng.standard_normal((6, 3))) * 1e-6
    c, r = fb.product_enclosure(am, ar, bm, br)
    for trial in range(20):
        sa = rng.choice([-1.0, 1.0], size=am.shape) * (trial % 2)
        sb = rng.choice([-1.0, 1.0], size=bm.shape)
        a_pt = [[Fraction(float(m)) + s * Fraction(float(rr)) for m, s, rr in zip(*rows)] for rows in zip(am, sa, ar)]
        b_pt = [[Fraction(float(m)) + s * Fraction(float(rr)) for m, s, rr in zip(*rows)] for rows in zip(bm, sb, br)]
        for i, j in itertools.product(range(4), range(3)):
            exact = sum((a_pt[i][t] * b_pt[t][j] for t in range(6)), Fraction(0))
            assert abs(exact - Fraction(c[i, j])) <= Fraction(r[i, j])


def test_arb_ball_from_mid_and_radius_contains_the_whole_interval():
    rng = np.random.default_rng(5)
    for mid, rad in zip(rng.standard_normal(50) * 1e3, np.abs(rng.standard_normal(50)) * 1e-9):
        ball = arb(float(mid), float(rad))
        assert arb_lower_fraction(ball) <= Fraction(float(mid)) - Fraction(float(rad))
        assert arb_upper_fraction(ball) >= Fraction(float(mid)) + Fraction(float(rad))


# ------------------------------------------------------------------ Theorem F5 ------------

def softmax_float(op: Operator) -> np.ndarray:
    if op.kind == "probabilities":
        return np.array(op.arrays["A"])
    if op.kind == "scores":
        s = np.array(op.arrays["S"])
    else:
        beta = 1 / np.sqrt(op.head_dim) if op.beta_exact is None else float(op.beta_exact)
        s = beta * (op.arrays["Q"] @ op.arrays["K"].T)
    s = np.where(op.allowed(), s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def operators():
    rng = np.random.default_rng(11)
    q, k = rng.standard_normal((9, 5)), rng.standard_normal((12, 5))
    yield Operator("qk", {"Q": q, "K": k})
    yield Operator("qk", {"Q": q, "K": k}, mask="causal")
    yield Operator("qk", {"Q": q * 40, "K": k * 40})  # scores far below -700 in places
    yield Operator("qk", {"Q": q, "K": k}, beta="-0.75")
    yield Operator("qk", {"Q": q, "K": k}, beta="0")
    yield Operator("scores", {"S": rng.standard_normal((6, 8)) * 300}, mask="causal")
    yield Operator("scores", {"S": np.zeros((3, 4))})  # ties: uniform rows


@pytest.mark.parametrize("op", list(operators()), ids=lambda op: f"{op.kind}-{op.mask}-{op.beta}")
def test_f5_softmax_bounds_contain_the_high_precision_arb_enclosure(op):
    bounds = fast.softmax_bounds(op)
    assert bounds is not None
    lo, hi = bounds
    m, n = op.shape
    with working_precision(256):
        for idx, ball in enumerate(enclosure(op, 256).probabilities.entries()):
            i, j = divmod(idx, n)
            # The 256-bit ball is a near-point containing A_ij: the float64 bounds must meet it.
            ball_lo, ball_hi = arb_lower_fraction(ball), arb_upper_fraction(ball)
            assert ball_hi - ball_lo < Fraction(1, 10**60)
            assert Fraction(lo[i, j]) <= ball_hi and ball_lo <= Fraction(hi[i, j])
            assert hi[i, j] - lo[i, j] <= 1e-10  # scores near 1e3 widen the bounds to ~1e-11


def test_f5_declines_when_a_score_lies_far_above_its_shift():
    # beta huge: (G - shift) * beta overflows the exp range in the bounds -> decline, not guess.
    op = Operator("qk", {"Q": np.array([[1.0, 0.0]]), "K": np.array([[1.0, 0.0], [1.0, 1e-15]])}, beta="1" + "0" * 300)
    assert fast.softmax_bounds(op) is None


# ------------------------------------------------------------------ Theorems F6, F7 ------------

def test_f6_decisions_match_the_arb_path_at_margins_down_to_1e_9():
    rng = np.random.default_rng(2)
    op = Operator("qk", {"Q": rng.standard_normal((16, 4)), "K": rng.standard_normal((20, 4))})
    a = softmax_float(op)
    u, s, vt = np.linalg.svd(a)
    U, W = u[:, :3] * s[:3], np.ascontiguousarray(vt[:3].T)
    err = Fraction(float(np.abs(a - U @ W.T).sum(axis=1).max()))
    for offset in (Fraction(1, 10**3), Fraction(1, 10**9), -Fraction(1, 10**9), -Fraction(1, 10**3)):
        eps = err + offset
        text = format(float(eps), ".17f").rstrip("0")
        f64 = verify_upper(op, text, 3, U, W, engine="float64")
        ref = verify_upper(op, text, 3, U, W, engine="arb")
        assert f64.status is ref.status
        assert f64.status is (Status.VERIFIED if offset > 0 else Status.REJECTED)
        assert f64.value[0] <= ref.value[1] and ref.value[0] <= f64.value[1]  # both contain the error


def test_f6_undecidable_margin_is_never_guessed():
    rng = np.random.default_rng(8)
    op = Operator("scores", {"S": rng.standard_normal((5, 5))})
    a = softmax_float(op)
    U, W = np.eye(5), np.ascontiguousarray(a.T)
    err = verify_upper(op, "0.5", 5, U, W, engine="arb", max_prec=1024).value
    # eps inside the float64 bounds' width: the float64 path must decline, Arb decides.
    mid = (err[0] + err[1]) / 2
    eps = format(float(mid), ".30f")
    f64 = verify_upper(op, eps, 5, U, W, engine="float64")
    assert f64.status is Status.INCONCLUSIVE or f64.status is verify_upper(op, eps, 5, U, W, engine="arb", max_prec=2048).status


def test_f7_lower_certificates_agree_with_arb():
    rng = np.random.default_rng(9)
    op = Operator("qk", {"Q": rng.standard_normal((12, 6)) * 2, "K": rng.standard_normal((12, 6)) * 2})
    a = softmax_float(op)
    for k in (1, 2, 4):
        u, s, vt = np.linalg.svd(a)
        X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
        for eps in ("0.001", "0.05", "0.3", "2"):
            f64 = verify_lower(op, eps, k, X, Y, engine="float64")
            ref = verify_lower(op, eps, k, X, Y, engine="arb")
            assert f64.status is ref.status, (k, eps)


def test_trivial_ends_of_probabilities_operators_use_float64_bounds():
    a = np.full((4, 4), 0.25)
    op = Operator("probabilities", {"A": a})
    v = verify_trivial_upper(op, "1.01", 0)
    assert v.status is Status.VERIFIED and v.engine == "float64"
    # ||A|| = 1 exactly: eps = 1 is inside the float64 bounds' width, so Arb decides.
    assert verify_trivial_upper(op, "1", 0).engine == "arb"
    assert verify_trivial_lower(op, "0.5", 1).status is Status.VERIFIED
    assert verify_trivial_lower(op, "1.01", 1, engine="float64").status is Status.REJECTED
    assert verify_trivial_lower(op, "1", 1, engine="arb").status is Status.REJECTED


def test_unknown_engine_is_refused():
    from softrank_cert.errors import InvalidInputError

    op = Operator("scores", {"S": np.zeros((2, 2))})
    with pytest.raises(InvalidInputError, match="engine"):
        verify_upper(op, "0.5", 2, np.eye(2), np.eye(2), engine="fast")


# ------------------------------------------------------------------ every shipped certificate ------------

def shipped_certificates() -> list[Path]:
    paths = sorted((ROOT / "certificates").rglob("*.json"))
    return [p for p in paths if "schema" not in p.parts]


def test_every_shipped_certificate_gets_the_same_verdicts_from_both_paths():
    paths = shipped_certificates()
    assert len(paths) >= 70
    decided = 0
    for path in paths:
        certificate = decode_certificate(read_json_file(path))
        f64 = [v for pair in check_claims(certificate, kernel="float64") for v in pair]
        ref = [v for pair in check_claims(certificate, kernel="arb") for v in pair]
        assert [v.status for v in f64] == [v.status for v in ref], path
        decided += sum(v.engine == "float64" for v in f64)
    assert decided >= 200  # the float64 path decides the nontrivial ends on its own


def test_bad_fixtures_that_reach_the_kernel_get_the_same_verdicts_from_both_paths():
    from softrank_cert.errors import SoftrankError

    reached = 0
    for path in sorted((ROOT / "tests" / "data" / "bad").glob("*.json")):
        try:
            certificate = decode_certificate(read_json_file(path))
        except SoftrankError:
            continue  # refused before the kernel (exit 2): nothing to compare
        reached += 1
        f64 = [v for pair in check_claims(certificate, kernel="float64") for v in pair]
        ref = [v for pair in check_claims(certificate, kernel="arb") for v in pair]
        assert [v.status for v in f64] == [v.status for v in ref], path
    assert reached >= 8  # the REJECTED / INCONCLUSIVE fixtures (false ends, wrong ranks, ...)


# ------------------------------------------------------------------ floating-point environment ------------

_X86_GLIBC = __import__("platform").machine() in ("x86_64", "AMD64") and __import__("sys").platform == "linux"
needs_mxcsr = pytest.mark.skipif(not _X86_GLIBC, reason="sets the x86-64 MXCSR through glibc's fesetenv")

MXCSR_HELPER = '''
import ctypes
_libm = ctypes.CDLL("libm.so.6")
def _env():
    buf = ctypes.create_string_buffer(64)
    assert _libm.fegetenv(buf) == 0
    return buf
def mxcsr():
    return int.from_bytes(_env().raw[28:32], "little")  # glibc x86-64 fenv_t: MXCSR at byte 28
def set_mxcsr(value):
    raw = bytearray(_env().raw)
    raw[28:32] = value.to_bytes(4, "little")
    assert _libm.fesetenv(ctypes.create_string_buffer(bytes(raw), 64)) == 0
FTZ_DAZ = 0x8040
'''


@needs_mxcsr
def test_flush_to_zero_and_denormals_are_zero_stop_every_kernel():
    from softrank_cert import exact_kernel
    from softrank_cert.errors import FloatingPointEnvironmentError

    scope: dict = {}
    exec(MXCSR_HELPER, scope)
    op = Operator("probabilities", {"A": np.array([[0.0]])})
    U, W = np.array([[1e-310]]), np.array([[1e300]])  # B = 1e-10: the witness is false at eps 1e-20
    eps = "0.00000000000000000001"
    # FTZ, DAZ, both (-ffast-math), round down, round up, round toward zero
    for mode in (0x8000, 0x0040, 0x8040, 0x2000, 0x4000, 0x6000):
        saved = scope["mxcsr"]()
        scope["set_mxcsr"]((saved & ~0x6000) | mode)
        try:
            ok = fpenv.ieee_preconditions_hold()
            subnormal_seen = fpenv.has_subnormals(U)
            with pytest.raises(FloatingPointEnvironmentError):
                verify_upper(op, eps, 1, U, W, engine="float64")
            with pytest.raises(FloatingPointEnvironmentError):
                verify_upper(op, eps, 1, U, W, engine="arb")
            with pytest.raises(FloatingPointEnvironmentError):
                exact_kernel.verify_upper(op, eps, 1, U, W)
        finally:
            scope["set_mxcsr"](saved)
        assert not ok and subnormal_seen, hex(mode)
    assert fpenv.ieee_preconditions_hold()
    assert verify_upper(op, eps, 1, U, W).status is Status.REJECTED


@needs_mxcsr
def test_denormals_are_zero_in_blas_worker_threads_cannot_fake_a_lower_certificate(tmp_path):
    """A2 allows any underflow mode in BLAS threads: subnormal BLAS operands are removed first."""
    import subprocess
    import sys

    script = tmp_path / "daz_workers.py"
    script.write_text(MXCSR_HELPER + '''
saved = mxcsr()
set_mxcsr(saved | FTZ_DAZ)  # OpenBLAS starts its worker threads with FTZ and DAZ set
import numpy as np
np.ones((500, 500)) @ np.ones((500, 500))
set_mxcsr(saved)  # the calling thread is IEEE again: the run-time check passes
from softrank_cert.kernel import Operator, verify_lower
n = 2048
A = np.zeros((n, n))
A[0, n - 2], A[0, n - 1] = 1.0, 2.0**-537
A[1, n - 2], A[1, n - 1] = 2.0**-537, 2.0**-1074  # A = u v^T: rank 1, so r_eps(A) = 1 for every eps
X = np.zeros((2, n)); X[0, 0] = 1.0; X[1, 1] = 2.0**1000
Y = np.zeros((n, 2)); Y[n - 2, 0] = 1.0; Y[n - 1, 1] = 1.0
v = verify_lower(Operator("probabilities", {"A": A}), "0." + "0" * 469 + "1", 2, X, Y, engine="float64")
print(v.status.name)
''')
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() != "VERIFIED"  # the false claim r_eps(A) >= 2 must never be proved


def test_ball_made_free_of_subnormals_contains_the_original_ball():
    mid = np.array([[5e-324, -3e-320, 1.0, 0.0], [2.0**-1022, -1e-310, 7.0, -0.0]])
    rad = np.array([[0.0, 1e-315, 0.0, 2e-323], [0.0, 0.0, 1e-300, 0.0]])
    new_mid, new_rad = fb._normal_mid_rad(mid, rad)
    assert not fpenv.has_subnormals(new_mid) and not fpenv.has_subnormals(new_rad)
    for m, r, m2, r2 in zip(mid.ravel(), rad.ravel(), new_mid.ravel(), new_rad.ravel()):
        assert abs(Fraction(float(m)) - Fraction(float(m2))) + Fraction(float(r)) <= Fraction(float(r2))
    new_mid, new_rad = fb._normal_mid_rad(mid, None)
    assert new_rad is not None and not fpenv.has_subnormals(new_rad)
    assert fpenv.subnormal_mask(np.array([5e-324, -5e-324, 2.0**-1022, 0.0, -0.0, np.inf, np.nan])).tolist() == \
        [True, True, False, False, False, False, False]


def test_products_with_non_finite_results_get_infinite_radii():
    q = np.array([[-1e200, -1e200, 1e200]])
    k = np.array([[1e108, 1e108, 1e108]])
    c, r = fb.product_bound(q, k.T)
    assert not np.isfinite(c).all() and np.isinf(r).all()
    c, r = fb.product_enclosure(q, None, k.T, None)
    assert np.isinf(r).all()
    op = Operator("qk", {"Q": q, "K": k})
    assert fast.softmax_bounds(op) is None  # declines; Arb decides


@needs_mxcsr
def test_a_geometry_call_under_daz_cannot_poison_the_operator_cache():
    """Review finding: a kernel entry point without the environment check could fill the
    enclosure cache with a wrong enclosure that a later IEEE check reuses.  Every public entry
    point that fills the kernel-private cache checks the environment first."""
    from softrank_cert.errors import FloatingPointEnvironmentError
    from softrank_cert.geometry import bounds as geometry_bounds
    from softrank_cert.kernel import probability_balls, score_balls
    from softrank_cert.kernel.enclosure import _ENCLOSURES

    scope: dict = {}
    exec(MXCSR_HELPER, scope)
    op = Operator("qk", {"Q": np.array([[5e-324]]), "K": np.array([[1e300], [0.0]])}, beta="0.000000000000000036")
    saved = scope["mxcsr"]()
    scope["set_mxcsr"](saved | 0x0040)
    try:
        with pytest.raises(FloatingPointEnvironmentError):
            geometry_bounds.interaction_bounds(op, np.zeros((1, 2)))
        with pytest.raises(FloatingPointEnvironmentError):
            probability_balls(op, 128)
        with pytest.raises(FloatingPointEnvironmentError):
            score_balls(op, 128)
    finally:
        scope["set_mxcsr"](saved)
    assert not _ENCLOSURES.get(op)  # nothing was cached
    delta = 1.0013e-25
    U, W = np.array([[1.0, 1.0]]), np.array([[0.5, delta], [0.5, -delta]])
    assert verify_upper(op, "0." + "0" * 29 + "1", 2, U, W).status is Status.REJECTED


def test_a_global_numpy_raise_setting_does_not_break_the_float64_path():
    op = Operator("qk", {"Q": np.eye(4), "K": np.eye(4)})
    a = softmax_float(op)
    U, s, Vt = np.linalg.svd(a)
    W = np.ascontiguousarray(Vt.T * s)
    for engine in ("float64", "rowblock"):
        with np.errstate(all="raise"):
            v = verify_upper(op, "0.5", 4, U, W, engine=engine)
        assert v.status is Status.VERIFIED and v.engine == engine


def test_power_of_two_constants_come_from_bit_patterns():
    assert fpenv.pow2(-1074) == 5e-324 and fpenv.pow2(-1022) == fpenv.SMALLEST_NORMAL
    assert fpenv.pow2(0) == 1.0 and fpenv.pow2(1023) == 8.98846567431158e307
    with pytest.raises(ValueError):
        fpenv.pow2(-1075)
