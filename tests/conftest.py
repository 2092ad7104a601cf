"""Shared fixtures and helpers for the kernel, soundness, certificate-format and CLI tests.

Nothing here is autouse: other test modules are unaffected unless they ask for a fixture.

The *truth* helpers (``true_*``) never call the kernel: they recompute every quantity from
the exact float64 inputs, either with exact rationals (``fractions.Fraction``; possible for
``probabilities`` operators, whose entries are dyadic rationals) or with mpmath at 256 bits
(softmax kinds: ``exp`` and ``1/sqrt(d)`` are transcendental).  Tests compare the kernel's
verdicts against these independent values.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

import mpmath
import numpy as np
import pytest
from mpmath import iv, mp, mpf

TESTS = Path(__file__).resolve().parent
BAD_DIR = TESTS / "data" / "bad"
CREATED = "2026-01-02T03:04:05Z"
TRUTH_PREC = 256


# --------------------------------------------------------------------------------------
# Exact decimal strings (tolerances) from exact or mpmath values
# --------------------------------------------------------------------------------------

def exact_fraction(x: Any) -> Fraction:
    """The exact rational value of a float, Fraction, int or (finite) mpf."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, float)):
        return Fraction(x)
    if isinstance(x, mpmath.mpf):
        man, exp = x.man_exp
        man, exp = int(man), int(exp)
        return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)
    raise TypeError(type(x))


def decimal_string(x: Any, *, direction: str, digits: int = 40) -> str:
    """A plain decimal string (tolerance grammar) whose exact value is <= x ("down") or >= x ("up").

    ``digits`` significant digits; ``x`` must be > 0.  The inequality is exact (checked).
    """
    q = exact_fraction(x)
    assert q > 0, q
    # exponent e with 10**e <= q < 10**(e+1)
    e = math.floor(math.log10(q.numerator) - math.log10(q.denominator))
    while Fraction(10) ** e > q:
        e -= 1
    while Fraction(10) ** (e + 1) <= q:
        e += 1
    places = max(1, digits - 1 - e)
    scaled = q * 10**places
    n = math.floor(scaled) if direction == "down" else math.ceil(scaled)
    if n == 0:  # rounding down below the first digit: keep one more place
        return decimal_string(x, direction=direction, digits=digits + 5)
    text = str(n).rjust(places + 1, "0")
    text = text[:-places] + "." + text[-places:]
    value = Fraction(int(text.replace(".", "")), 10**places)
    assert (value <= q) if direction == "down" else (value >= q), (text, q)
    return text


def exact_decimal(q: Fraction) -> str | None:
    """The exact finite decimal of a dyadic rational (None if its denominator is not 2**k)."""
    den = q.denominator
    if den & (den - 1):
        return None
    k = den.bit_length() - 1
    n = abs(q.numerator) * 5**k
    if k == 0:
        text = str(n)
    else:
        text = str(n).rjust(k + 1, "0")
        text = text[:-k] + "." + text[-k:]
    return ("-" if q < 0 else "") + text


def _shift_last_place(text: str, delta: int, extra: int) -> str:
    whole, _, frac = text.partition(".")
    frac += "0" * extra
    places = len(frac)
    n = int(whole + frac) + delta
    assert n > 0, text
    if places == 0:
        return str(n)
    s = str(n).rjust(places + 1, "0")
    return s[:-places] + "." + s[-places:]


def decimal_minus_ulp(text: str, extra: int = 0) -> str:
    """The decimal one unit smaller in its last place, after appending ``extra`` zeros."""
    if "." not in text and extra == 0 and int(text) == 1:
        extra = 1
    return _shift_last_place(text, -1, extra)


def decimal_plus_ulp(text: str, extra: int = 0) -> str:
    return _shift_last_place(text, +1, extra)


# --------------------------------------------------------------------------------------
# Independent truth (never uses the kernel)
# --------------------------------------------------------------------------------------

def allowed_mask(m: int, n: int, mask: str) -> list[list[bool]]:
    """Causal convention of softrank_cert.kernel.operator: j allowed iff j <= i + (N - m)."""
    if mask == "none":
        return [[True] * n for _ in range(m)]
    return [[j <= i + (n - m) for j in range(n)] for i in range(m)]


def _mpf_beta(beta: str, d: int) -> mpf:
    if beta == "inv_sqrt_d":
        return 1 / mp.sqrt(d)
    q = Fraction(beta)  # plain decimal strings are valid Fraction literals
    return mpf(q.numerator) / q.denominator


def true_A_mp(kind: str, arrays: dict[str, np.ndarray], beta: str = "inv_sqrt_d", mask: str = "none",
              prec: int = TRUTH_PREC) -> list[list[mpf]]:
    """The exact operator A, as mpf at ``prec`` bits (exact for 'probabilities')."""
    with mp.workprec(prec):
        if kind == "probabilities":
            A = arrays["A"]
            return [[mpf(float(v)) for v in row] for row in A.tolist()]
        if kind == "scores":
            S_rows = [[mpf(float(v)) for v in row] for row in arrays["S"].tolist()]
        else:
            Q, K = arrays["Q"].tolist(), arrays["K"].tolist()
            d = len(Q[0])
            b = _mpf_beta(beta, d)
            # exact dot products: fsum of exact products at high precision
            with mp.workprec(4400):
                dots = [[mpmath.fsum(mpf(x) * mpf(y) for x, y in zip(q, k)) for k in K] for q in Q]
            S_rows = [[b * v for v in row] for row in dots]
        m, n = len(S_rows), len(S_rows[0])
        allowed = allowed_mask(m, n, mask)
        A = []
        for i in range(m):
            vals = [S_rows[i][j] for j in range(n) if allowed[i][j]]
            c = max(vals)
            exps = [mp.exp(v - c) for v in vals]
            z = mpmath.fsum(exps)
            row, it = [], iter(exps)
            for j in range(n):
                row.append(next(it) / z if allowed[i][j] else mpf(0))
            A.append(row)
        return A


def true_A_fraction(A: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(v)) for v in row] for row in A.tolist()]


def true_witness_error(A, U: np.ndarray, W: np.ndarray, prec: int = TRUTH_PREC) -> Any:
    """max_i sum_j |A_ij - (U W^T)_ij|: exact if A holds Fractions, else mpf at ``prec`` bits."""
    exact = isinstance(A[0][0], Fraction)
    Ul, Wl = U.tolist(), W.tolist()
    if exact:
        Uf = [[Fraction(v) for v in row] for row in Ul]
        Wf = [[Fraction(v) for v in row] for row in Wl]
        best = Fraction(0)
        for i, row in enumerate(A):
            s = sum((abs(a - sum((u * w for u, w in zip(Uf[i], Wf[j])), Fraction(0))) for j, a in enumerate(row)), Fraction(0))
            best = max(best, s)
        return best
    with mp.workprec(prec):
        best = mpf(0)
        for i, row in enumerate(A):
            s = mpf(0)
            for j, a in enumerate(row):
                with mp.workprec(4400):  # U W^T entry exactly
                    b = mpmath.fsum(mpf(u) * mpf(w) for u, w in zip(Ul[i], Wl[j]))
                s += abs(a - b)
            best = max(best, s)
        return best


def _safe_float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return math.inf


def _matmul(a, b, zero):
    return [[sum((a[i][t] * b[t][j] for t in range(len(b))), zero) for j in range(len(b[0]))] for i in range(len(a))]


def _norm(rows, zero):
    return max(sum((abs(v) for v in row), zero) for row in rows)


def _fraction_inverse(M: list[list[Fraction]]) -> list[list[Fraction]] | None:
    k = len(M)
    aug = [list(row) + [Fraction(int(i == j)) for j in range(k)] for i, row in enumerate(M)]
    for col in range(k):
        pivot = next((r for r in range(col, k) if aug[r][col] != 0), None)
        if pivot is None:
            return None
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(k):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [a - f * b for a, b in zip(aug[r], aug[col])]
    return [row[k:] for row in aug]


def true_lower_threshold(A, X: np.ndarray, Y: np.ndarray, prec: int = TRUTH_PREC) -> tuple[Any, float] | None:
    """(t, cond) with t = 1 / (||X|| ||Y|| ||(XAY)^{-1}||); None if XAY is singular.

    Exact Fractions when A holds Fractions, else mpf at 256 bits (cond = ||M|| ||M^-1||).
    """
    exact = isinstance(A[0][0], Fraction)
    if exact:
        Xf = [[Fraction(v) for v in row] for row in X.tolist()]
        Yf = [[Fraction(v) for v in row] for row in Y.tolist()]
        zero = Fraction(0)
        M = _matmul(_matmul(Xf, A, zero), Yf, zero)
        inv = _fraction_inverse(M)
        if inv is None:
            return None
        t = 1 / (_norm(Xf, zero) * _norm(Yf, zero) * _norm(inv, zero))
        return t, _safe_float(_norm(M, zero) * _norm(inv, zero))
    with mp.workprec(prec):
        zero = mpf(0)
        Xm = [[mpf(v) for v in row] for row in X.tolist()]
        Ym = [[mpf(v) for v in row] for row in Y.tolist()]
        M = _matmul(_matmul(Xm, A, zero), Ym, zero)
        try:
            inv = mp.inverse(mp.matrix(M))
        except ZeroDivisionError:
            return None
        inv_rows = [[inv[i, j] for j in range(inv.cols)] for i in range(inv.rows)]
        ninv = _norm(inv_rows, zero)
        t = 1 / (_norm(Xm, zero) * _norm(Ym, zero) * ninv)
        return t, float(_norm(M, zero) * ninv)


def true_norm(A) -> Any:
    zero = Fraction(0) if isinstance(A[0][0], Fraction) else mpf(0)
    return _norm(A, zero)


# --- rigorous truth with mpmath interval arithmetic (independent of Arb) ----------------
#
# A fixed working precision is not an honest truth: |A_ij - B_ij| with A_ij = 1 - 1e-229 and
# B_ij = 1 rounds to 0 at 256 and at 512 bits alike.  So the softmax truth is computed with
# mpmath's *interval* context (outward rounding), and the precision is raised until the
# enclosure of the final quantity is relatively narrower than TRUTH_REL.

TRUTH_REL = Fraction(1, 10**60)
TRUTH_MAX_PREC = 1 << 15


class _IvPrec:
    def __init__(self, prec: int) -> None:
        self.prec = prec

    def __enter__(self):
        self.saved = iv.prec
        iv.prec = self.prec

    def __exit__(self, *exc):
        iv.prec = self.saved


_TINY_EXP = -20000  # endpoints below 2**-20000 in magnitude are rounded outward to 0 / +-2**-20000


def _endpoint(raw, upper: bool) -> Fraction:
    x = mp.make_mpf(raw)
    if x != 0 and raw[2] + raw[3] < _TINY_EXP:  # raw = (sign, man, exp, bc): |x| < 2**(exp + bc)
        tiny = Fraction(1, 2**-_TINY_EXP)
        if upper:
            return tiny if x > 0 else Fraction(0)
        return Fraction(0) if x > 0 else -tiny
    return exact_fraction(x)


def iv_bounds(x) -> tuple[Fraction, Fraction]:
    """Rational endpoints of an mpmath interval (exact, or rounded outward when astronomically small)."""
    a, b = x._mpi_
    return _endpoint(a, upper=False), _endpoint(b, upper=True)


def _iv_exact(v: float):
    return iv.mpf(float(v))  # a double is exact in any precision >= 53


def iv_operator_A(op, prec: int) -> list[list[Any]]:
    """Interval enclosures of A_ij at ``prec`` bits (softmax kinds)."""
    arrays = {name: np.array(a) for name, a in op.arrays.items()}
    m, n = op.shape
    allowed = allowed_mask(m, n, op.mask)
    if op.kind == "scores":
        with _IvPrec(prec):
            S = [[_iv_exact(v) for v in row] for row in arrays["S"].tolist()]
    else:
        Q, K = arrays["Q"].tolist(), arrays["K"].tolist()
        d = len(Q[0])
        with _IvPrec(4400):  # exact dot products of doubles
            dots = [[sum((_iv_exact(x) * _iv_exact(y) for x, y in zip(q, k)), iv.mpf(0)) for k in K] for q in Q]
        with _IvPrec(prec):
            if op.beta == "inv_sqrt_d":
                beta = 1 / iv.sqrt(iv.mpf(d))
            else:
                qb = Fraction(op.beta)
                beta = iv.mpf(qb.numerator) / iv.mpf(qb.denominator)
            S = [[beta * v for v in row] for row in dots]
    A = []
    with _IvPrec(prec):
        for i in range(m):
            idx = [j for j in range(n) if allowed[i][j]]
            # any real shift is exact and sound: the lower endpoint of the largest score
            jmax = max(idx, key=lambda j: iv_bounds(S[i][j])[0])
            c_iv = S[i][jmax].a
            exps = {j: iv.exp(S[i][j] - c_iv) for j in idx}
            z = sum(exps.values(), iv.mpf(0))
            A.append([exps[j] / z if j in exps else iv.mpf(0) for j in range(n)])
    return A


def _interval_max(pairs: list[tuple[Fraction, Fraction]]) -> tuple[Fraction, Fraction]:
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _refine(compute) -> Any:
    """Raise the precision until compute(prec) -> (lo, hi, ...) is relatively narrow."""
    prec, result = 256, None
    while prec <= TRUTH_MAX_PREC:
        result = compute(prec)
        if result is not None:
            lo, hi = result[0], result[1]
            if lo == hi or (lo > 0 and hi - lo <= TRUTH_REL * lo):
                return result
        prec *= 2
    return result


def truth_witness_error(op, U: np.ndarray, W: np.ndarray) -> tuple[Fraction, Fraction]:
    """Rigorous rational bounds (lo, hi) on ||A - U W^T|| (lo == hi: exact, for 'probabilities')."""
    if op.kind == "probabilities":
        e = true_witness_error(true_A_fraction(np.array(op.arrays["A"])), U, W)
        return e, e
    Ul, Wl = U.tolist(), W.tolist()
    with _IvPrec(4400):  # the witness entries exactly
        B = [[sum((_iv_exact(u) * _iv_exact(w) for u, w in zip(Ul[i], Wl[j])), iv.mpf(0)) for j in range(len(Wl))]
             for i in range(len(Ul))]

    def compute(prec):
        A = iv_operator_A(op, prec)
        with _IvPrec(prec):
            rows = [iv_bounds(sum((abs(a - b) for a, b in zip(A[i], B[i])), iv.mpf(0))) for i in range(len(A))]
        return _interval_max(rows)

    return _refine(compute)


def _iv_inverse(M: list[list[Any]]) -> list[list[Any]] | None:
    """Gauss-Jordan on intervals; None when a pivot interval cannot be proved nonzero."""
    k = len(M)
    aug = [list(row) + [iv.mpf(int(i == j)) for j in range(k)] for i, row in enumerate(M)]

    def mag_lo(x):
        lo, hi = iv_bounds(x)
        return Fraction(0) if lo <= 0 <= hi else min(abs(lo), abs(hi))

    for col in range(k):
        pivot = max(range(col, k), key=lambda r: mag_lo(aug[r][col]))
        if mag_lo(aug[pivot][col]) == 0:
            return None
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(k):
            if r != col:
                f = aug[r][col]
                aug[r] = [a - f * b for a, b in zip(aug[r], aug[col])]
    return [row[k:] for row in aug]


def truth_lower_threshold(op, X: np.ndarray, Y: np.ndarray) -> tuple[Fraction, Fraction, float] | None:
    """Rigorous (lo, hi, cond) for t = 1/(||X|| ||Y|| ||(XAY)^{-1}||); None if XAY is singular
    (exactly, for 'probabilities') or cannot be proved invertible up to TRUTH_MAX_PREC bits."""
    if op.kind == "probabilities":
        res = true_lower_threshold(true_A_fraction(np.array(op.arrays["A"])), X, Y)
        return None if res is None else (res[0], res[0], res[1])
    Xf = [[Fraction(v) for v in row] for row in X.tolist()]
    Yf = [[Fraction(v) for v in row] for row in Y.tolist()]
    nx, ny = _norm(Xf, Fraction(0)), _norm(Yf, Fraction(0))
    if nx == 0 or ny == 0:
        return None

    def compute(prec):
        A = iv_operator_A(op, prec)
        with _IvPrec(prec):
            Xi = [[_iv_exact(v) for v in row] for row in X.tolist()]
            Yi = [[_iv_exact(v) for v in row] for row in Y.tolist()]
            M = _matmul(_matmul(Xi, A, iv.mpf(0)), Yi, iv.mpf(0))
            inv = _iv_inverse(M)
            if inv is None:
                return None
            ninv = _interval_max([iv_bounds(sum((abs(v) for v in row), iv.mpf(0))) for row in inv])
            nm = _interval_max([iv_bounds(sum((abs(v) for v in row), iv.mpf(0))) for row in M])
        if ninv[0] <= 0:
            return None
        return 1 / (nx * ny * ninv[1]), 1 / (nx * ny * ninv[0]), _safe_float(nm[1] * ninv[1])

    return _refine(compute)


def float_softmax(kind: str, arrays: dict[str, np.ndarray], beta: str = "inv_sqrt_d", mask: str = "none") -> np.ndarray:
    """A float64 approximation of A (for building witnesses; the truth is elsewhere)."""
    if kind == "probabilities":
        return np.array(arrays["A"], dtype=np.float64)
    if kind == "scores":
        S = np.array(arrays["S"], dtype=np.float64)
    else:
        Q, K = arrays["Q"], arrays["K"]
        b = 1 / math.sqrt(Q.shape[1]) if beta == "inv_sqrt_d" else float(Fraction(beta))
        S = (Q @ K.T) * b
    m, n = S.shape
    allowed = np.array(allowed_mask(m, n, mask))
    S = np.where(allowed, S, -np.inf)
    S = S - S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------------------
# Certificates, keys and the command line
# --------------------------------------------------------------------------------------

def _console_script(name: str, module: str) -> list[str]:
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", module]


VERIFY_CMD = _console_script("softrank-verify", "softrank_cert.cli.verify")
SOFTRANK_CMD = _console_script("softrank", "softrank_cert.cli.main")


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _run(cmd: Sequence[str], cwd: Path | None = None, timeout: float = 120) -> CliResult:
    env = dict(os.environ)
    env.pop("SOFTRANK_DEBUG", None)
    env["COLUMNS"] = "200"
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0)


def run_verify(*args: Any, timeout: float = 120) -> CliResult:
    return _run([*VERIFY_CMD, *map(str, args)], timeout=timeout)


def run_softrank(*args: Any, cwd: Path | None = None, timeout: float = 120) -> CliResult:
    return _run([*SOFTRANK_CMD, *map(str, args)], cwd=cwd, timeout=timeout)


def assert_one_line_error(result: CliResult, code: int = 2, max_seconds: float = 5.0) -> None:
    """Exit ``code``, exactly one non-empty stderr line, no traceback, quick."""
    assert result.returncode == code, (result.returncode, result.stderr, result.stdout[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr_lines) == 1, result.stderr
    assert result.seconds < max_seconds, result.seconds


@pytest.fixture(scope="session")
def keys_dir(tmp_path_factory) -> Path:
    """Two Ed25519 keys made with ``softrank keygen`` (issuer.key, other.key, + .pub)."""
    d = tmp_path_factory.mktemp("keys")
    for name in ("issuer", "other"):
        res = run_softrank("keygen", "--out", d / f"{name}.key")
        assert res.returncode == 0, res.stderr
    return d


@pytest.fixture(scope="session")
def issuer_key(keys_dir) -> Path:
    return keys_dir / "issuer.key"


@pytest.fixture(scope="session")
def other_key(keys_dir) -> Path:
    return keys_dir / "other.key"


def build_document(op, brackets, operator_id: str = "test/op-0", provenance: dict | None = None) -> dict:
    from softrank_cert.certio.certificate import certificate_document

    return certificate_document(operator_id, op, list(brackets), created=CREATED, provenance=provenance)


def write_certificate(path: Path, document: dict, key: Path | None = None) -> Path:
    from softrank_cert.cli.keys import sign_certificate, write_json_atomic

    if key is not None:
        document = sign_certificate(document, key)
    write_json_atomic(Path(path), document)
    return Path(path)


# A peaked 3x3 scores operator (A close to the identity) with a valid bracket [3, 3] at
# eps 0.25 (lower: X = Y = I; upper: U = float A, W = I) and [1, 3] at eps 0.5.

def peaked_operator():
    from softrank_cert.kernel import Operator

    S = np.array([[10.0, 0.0, -1.0], [0.5, 9.0, 0.0], [-2.0, 1.0, 11.0]])
    return Operator("scores", {"S": S})


def valid_brackets(op):
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd

    A = float_softmax(op.kind, dict(op.arrays), op.beta, op.mask)
    I = np.eye(3)
    return [
        Bracket("0.25", LowerEnd(3, "selection", I.copy(), I.copy()), UpperEnd(3, "dense", A.copy(), I.copy())),
        Bracket("0.5", LowerEnd(1, "trivial"), UpperEnd(3, "identity")),
    ]


def false_witness_brackets(op):
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd

    U = np.ones((3, 1))
    W = np.full((3, 1), 1 / 3)
    return [Bracket("0.25", LowerEnd(1, "trivial"), UpperEnd(1, "constant", U, W))]


@pytest.fixture
def valid_document() -> dict:
    op = peaked_operator()
    return build_document(op, valid_brackets(op))
