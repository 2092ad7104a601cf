"""The independent truth oracle of the test suite and of the adversarial campaign.

Every quantity a test (or ``benchmarks/adversarial_campaign.py``) compares a kernel's verdict
against is recomputed here from the exact float64 inputs, **never** by either trusted kernel:
this module imports neither ``softrank_cert.kernel`` nor ``softrank_cert.exact_kernel`` (nor
anything else of ``softrank_cert``; ``tests/adversarial/test_adversarial.py`` checks it).

* exact rationals (``fractions.Fraction``): doubles, 'probabilities' operators (dyadic
  entries), witness products, exact matrix products, norms and inverses;
* mpmath at 256 bits (``true_*``): softmax kinds, where ``exp`` and ``1/sqrt(d)`` are
  transcendental -- point values, rounded at 256 bits (not enclosures);
* mpmath *interval* arithmetic (``truth_*``): enclosures whose precision is raised until they
  are relatively narrower than ``TRUTH_REL`` (caveat: ``iv.exp`` can miss exp(x) by one ulp at
  the working precision, mpmath issue #1181 -- at >= 256 bits, far below the gaps tests use);
* claim and document classifiers for the campaign (``claim_truth_*``, ``truth_of_document``):
  'true' / 'false' / 'borderline' / 'invalid', with a documented safety margin.

Operators are duck-typed: anything with ``kind``, ``arrays``, ``beta``, ``mask`` and ``shape``.
"""

from __future__ import annotations

import base64
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from mpmath import iv, mp, mpf

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
        if not mpmath.isfinite(x):
            raise ValueError(f"{x} is not finite")
        sign, man, exp, _bits = x._mpf_  # man_exp's mantissa is unsigned: the sign is separate
        value = Fraction(int(man) * 2**int(exp)) if exp >= 0 else Fraction(int(man), 2**-int(exp))
        return -value if sign else value
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
    return mpf_of_fraction(Fraction(beta))  # plain decimal strings are valid Fraction literals


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


def matmul(a, b, zero: Any = Fraction(0)):
    """The product of two matrices (lists of lists), summed from ``zero`` (exact for Fractions)."""
    return [[sum((a[i][t] * b[t][j] for t in range(len(b))), zero) for j in range(len(b[0]))] for i in range(len(a))]


def norm(rows, zero: Any = Fraction(0)):
    """The max-row-l1 norm (exact for Fractions)."""
    return max(sum((abs(v) for v in row), zero) for row in rows)


def fraction_inverse(M: list[list[Fraction]]) -> list[list[Fraction]] | None:
    """The exact inverse by Gauss-Jordan; None if singular."""
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
    """(t, cond) with t = 1 / (||X|| ||Y|| ||(XAY)^{-1}||); None if XAY is singular (or X or Y is 0).

    Exact Fractions when A holds Fractions, else mpf at 256 bits (cond = ||M|| ||M^-1||).
    """
    exact = isinstance(A[0][0], Fraction)
    if exact:
        Xf = [[Fraction(v) for v in row] for row in X.tolist()]
        Yf = [[Fraction(v) for v in row] for row in Y.tolist()]
        zero = Fraction(0)
        M = matmul(matmul(Xf, A, zero), Yf, zero)
        inv = fraction_inverse(M)
        if inv is None or norm(Xf, zero) == 0 or norm(Yf, zero) == 0:
            return None
        t = 1 / (norm(Xf, zero) * norm(Yf, zero) * norm(inv, zero))
        return t, _safe_float(norm(M, zero) * norm(inv, zero))
    with mp.workprec(prec):
        zero = mpf(0)
        Xm = [[mpf(v) for v in row] for row in X.tolist()]
        Ym = [[mpf(v) for v in row] for row in Y.tolist()]
        M = matmul(matmul(Xm, A, zero), Ym, zero)
        try:
            inv = mp.inverse(mp.matrix(M))
        except ZeroDivisionError:
            return None
        inv_rows = [[inv[i, j] for j in range(inv.cols)] for i in range(inv.rows)]
        ninv = norm(inv_rows, zero)
        if norm(Xm, zero) == 0 or norm(Ym, zero) == 0 or ninv == 0:
            return None
        t = 1 / (norm(Xm, zero) * norm(Ym, zero) * ninv)
        return t, float(norm(M, zero) * ninv)


def true_norm(A) -> Any:
    zero = Fraction(0) if isinstance(A[0][0], Fraction) else mpf(0)
    return norm(A, zero)


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
    nx, ny = norm(Xf, Fraction(0)), norm(Yf, Fraction(0))
    if nx == 0 or ny == 0:
        return None

    def compute(prec):
        A = iv_operator_A(op, prec)
        with _IvPrec(prec):
            Xi = [[_iv_exact(v) for v in row] for row in X.tolist()]
            Yi = [[_iv_exact(v) for v in row] for row in Y.tolist()]
            M = matmul(matmul(Xi, A, iv.mpf(0)), Yi, iv.mpf(0))
            inv = _iv_inverse(M)
            if inv is None:
                return None
            ninv = _interval_max([iv_bounds(sum((abs(v) for v in row), iv.mpf(0))) for row in inv])
            nm = _interval_max([iv_bounds(sum((abs(v) for v in row), iv.mpf(0))) for row in M])
        if ninv[0] <= 0:
            return None
        return 1 / (nx * ny * ninv[1]), 1 / (nx * ny * ninv[0]), _safe_float(nm[1] * ninv[1])

    return _refine(compute)



# --------------------------------------------------------------------------------------
# Exact products of float64 arrays; a float64 softmax (to build witnesses, never the truth)
# --------------------------------------------------------------------------------------

def fraction_matrix(array) -> list[list[Fraction]]:
    """Exact Fractions of a float64 array (a double is a dyadic rational)."""
    return [[Fraction(float(v)) for v in row] for row in np.asarray(array, dtype=np.float64)]


def exact_matmul(a, b) -> list[list[Fraction]]:
    """The exact product of two float64 arrays."""
    return matmul(fraction_matrix(a), fraction_matrix(b))


def masked_softmax(S: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Row softmax of float64 scores over the allowed entries, in float64 (0 elsewhere).

    An approximation to build witnesses and certificates from; it is never the truth."""
    S = np.where(allowed, S, -np.inf)
    S = S - S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


# --------------------------------------------------------------------------------------
# A transcendental edge case (the kernel cannot decide it with exact balls)
# --------------------------------------------------------------------------------------

def transcendental_edge_error() -> mpf:
    """For qk with Q = [[1, 0]], K = [[1, 0], [0, 0]] (S = [[1/sqrt 2, 0]]), A = [[s, 1 - s]] with
    s = 1/(1 + exp(-1/sqrt 2)); the witness U = [[1]], W = [[1], [0]] has error 2 (1 - s) =
    2 / (1 + exp(1/sqrt 2)), transcendental (400 bits)."""
    with mpmath.workprec(400):
        return 2 / (1 + mpmath.exp(1 / mpmath.sqrt(2)))


def decimal_above(x, gap_digits: int) -> str:
    """A decimal string in (x, x + 10**-gap_digits]."""
    with mpmath.workprec(400):
        scaled = mpmath.ceil(x * mpmath.mpf(10) ** gap_digits)
    digits = str(int(scaled)).rjust(gap_digits + 1, "0")
    return digits[:-gap_digits] + "." + digits[-gap_digits:]


# --------------------------------------------------------------------------------------
# Classifying claims and whole certificate documents (the adversarial campaign)
# --------------------------------------------------------------------------------------
#
# A point value at 256 bits is not a proof, so a claim counts as *false* only when its margin
# is clearly on the false side: relative 2**-150 for lower claims (and cond(XAY) <= 2**90),
# 2**-180 absolute (times 1 + error) for witness errors.  Closer margins are 'borderline'.

FALSE_REL = mpf(2) ** -150
FALSE_ABS = mpf(2) ** -180


def mpf_of_fraction(q: Fraction) -> mpf:
    """q rounded to the current mpmath precision."""
    return mpf(q.numerator) / q.denominator


def claim_truth_upper(A, U: np.ndarray, W: np.ndarray, eps: Fraction) -> str:
    """'true' / 'false' / 'borderline' for ||A - U W^T|| <= eps (A from :func:`true_A_mp`)."""
    err = true_witness_error(A, U, W)
    with mp.workprec(TRUTH_PREC):
        margin = mpf_of_fraction(eps) - err
        tol = FALSE_ABS * (1 + err)
        return "true" if margin > tol else "false" if margin < -tol else "borderline"


def claim_truth_lower(A, X: np.ndarray, Y: np.ndarray, eps: Fraction) -> str:
    """'true' / 'false' / 'borderline' for eps < t = 1/(||X|| ||Y|| ||(XAY)^-1||)."""
    res = true_lower_threshold(A, X, Y)
    if res is None:
        return "borderline"  # singular to 256 bits: neither proved true nor counted as false
    T, cond = res
    with mp.workprec(TRUTH_PREC):
        if cond > mpf(2) ** 90:
            return "borderline"
        product = mpf_of_fraction(eps) / T
        return "true" if product < 1 - FALSE_REL else "false" if product > 1 + FALSE_REL else "borderline"


def raw_array(obj: dict) -> np.ndarray:
    """A certificate's base64 float64 array, decoded here (not by the product's decoder)."""
    raw = base64.b64decode(obj["data"])
    return np.frombuffer(raw, dtype="<f8").reshape(obj["shape"]).astype(np.float64)


def truth_of_document(doc: dict) -> str:
    """'true' / 'false' / 'borderline' / 'invalid' (non-finite arrays) for a schema-shaped document."""
    op_doc = doc["operator"]
    arrays = {k: raw_array(v) for k, v in op_doc["arrays"].items()}
    ends = [(b, side) for b in doc["brackets"] for side in ("lower", "upper")]
    all_arrays = list(arrays.values()) + [raw_array(b[s][n]) for b, s in ends for n in ("X", "Y", "U", "W") if n in b[s]]
    if not all(np.isfinite(a).all() for a in all_arrays):
        return "invalid"
    A = true_A_mp(op_doc["kind"], arrays, op_doc.get("beta", "inv_sqrt_d"), op_doc["mask"])
    m, n = len(A), len(A[0])
    # ||A|| exactly: 1 for softmax rows, the exact doubles' max row l1 for 'probabilities'
    normA = Fraction(1) if op_doc["kind"] != "probabilities" else true_norm(true_A_fraction(arrays["A"]))
    classes = []
    for b in doc["brackets"]:
        eps = Fraction(b["eps"])
        lo, up = b["lower"], b["upper"]
        if "X" in lo:
            classes.append(claim_truth_lower(A, raw_array(lo["X"]), raw_array(lo["Y"]), eps))
        elif lo["k"] == 1:  # trivial k = 1 iff ||A|| > eps
            classes.append("true" if normA > eps else "false")  # exact
        elif lo["k"] == 0:
            classes.append("true")
        else:
            classes.append("invalid")
        if "U" in up:
            classes.append(claim_truth_upper(A, raw_array(up["U"]), raw_array(up["W"]), eps))
        elif up["r"] == min(m, n) and up["construction"] == "identity":
            classes.append("true")
        elif up["r"] == 0:
            classes.append("true" if normA <= eps else "false")  # exact
        else:
            classes.append("invalid")
    for c in ("invalid", "false", "borderline"):
        if c in classes:
            return c
    return "true"
