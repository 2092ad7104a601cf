"""Extreme families of the adversarial campaign (issue 35): huge magnitudes, one-hot rows, beta
gaps and perturbed general-key lower certificates.

Each variant is a (category, thunk) pair like those of :mod:`tests.adversarial.generators`; the
thunk returns the certificate's bytes and its truth class ('true' / 'false' / 'borderline'),
computed here and in ``tests/oracle.py`` without any kernel:

* ``huge_magnitude_*``: ``qk`` operators with |Q|, |K| up to 1e155 (the float64 products
  overflow), with and without the causal mask, and exact ties (a repeated key row).  The argmax
  of each row is exact (Fractions of the doubles); the witness is the one-hot matrix ``P`` of
  the argmaxes, whose error is exactly ``max_i 2 sum_{j != a_i} A_ij`` (no cancellation: each
  term is ``exp(beta (s_ij - s_max)) / z`` at 256 bits, however small);
* ``one_hot_*``: scores ``s I + N(0, 1)`` with ``s`` up to 2000 (margins down to exp(-2000),
  entries of A below the smallest subnormal double): near-threshold claims on both sides of the
  one-hot witness's error and, for the selection certificate ``X = Y = I``, on both sides of
  ``t = 1 - delta`` (``delta`` ~ exp(-s), computed at ``-log2(delta) + 256`` bits);
* ``beta_gap_*``: ``beta = inv_sqrt_d`` against the decimal of its double (gaps of about 1e-17
  relative): a tolerance half-way between the two operators' errors (or thresholds) is true for
  one and false for the other;
* ``general_key_*``: a lower certificate with a selection ``X`` and a general ``Y`` (the
  least-norm solution of ``X A Y = I``) at its threshold's 40-digit decimal, then that decimal's
  next or previous value, or one entry of ``Y`` moved by one ulp;
* ``rowblock_bound_*`` (issue 45): truncated-SVD witnesses and selection certificates at
  tolerances within a few widths of the row-block float64 path's own enclosure of the error or
  threshold, on both sides (``_false_side``, ``_true_side``).

Relative classification tolerance: ``2**-100`` of the quantity compared (errors and thresholds
are accurate to about ``2**-240`` relative at the precisions used).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from collections.abc import Callable

import mpmath
import numpy as np
from mpmath import mp, mpf

from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from softrank_cert.kernel import Operator, float_to_decimal_string
from tests.oracle import (allowed_mask, decimal_minus_ulp, decimal_plus_ulp, exact_fraction, true_A_mp,
                          true_lower_threshold, true_witness_error, truth_of_document)

CREATED = "2026-01-02T03:04:05Z"
REL = mpf(2) ** -100
#: Bits of every mpmath step outside the oracle's own (mpmath's default, 53, would round
#: away the gaps under test).
WORK = 320
Variant = tuple[str, Callable[[], tuple[bytes, str]]]


def dumps(doc: dict) -> bytes:
    return json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")


def decimal(q: Fraction, up: bool, digits: int = 40) -> str:
    """A plain decimal >= q (up) or <= q with about ``digits`` significant digits; 0 < q."""
    e = math.floor(math.log10(q.numerator) - math.log10(q.denominator))
    places = max(1, digits - e)
    n = math.ceil(q * 10**places) if up else math.floor(q * 10**places)
    if n <= 0:
        return decimal(q, up, digits + 10)
    text = str(n).rjust(places + 1, "0")
    text = text[:-places] + "." + text[-places:]
    assert (Fraction(text) >= q) if up else (Fraction(text) <= q)
    return text


def classify(claim_holds_margin: mpf, scale: mpf) -> str:
    """'true' when the margin (positive: the claim holds) exceeds REL * scale, 'false' below
    -REL * scale, else 'borderline'."""
    if claim_holds_margin > REL * scale:
        return "true"
    return "false" if claim_holds_margin < -REL * scale else "borderline"


def _doc(op_id: str, op: Operator, eps: str, lower: LowerEnd | None = None, upper: UpperEnd | None = None) -> dict:
    lower = lower or LowerEnd(0, "trivial")  # the ends not under test are always true
    upper = upper or UpperEnd(op.p, "identity")
    return certificate_document(op_id, op, [Bracket(eps, lower, upper)], created=CREATED)


# ---------------------------------------------------------------------------- one-hot witnesses

def exact_scores(op: Operator) -> list[list[Fraction]]:
    """Exact S / beta for qk (the dot products), or S, as Fractions of the doubles."""
    if op.kind == "scores":
        return [[Fraction(v) for v in row] for row in np.asarray(op.arrays["S"]).tolist()]
    Q = [[Fraction(v) for v in row] for row in np.asarray(op.arrays["Q"]).tolist()]
    K = [[Fraction(v) for v in row] for row in np.asarray(op.arrays["K"]).tolist()]
    return [[sum((a * b for a, b in zip(q, k)), Fraction(0)) for k in K] for q in Q]


def off_argmax_mass(op: Operator, prec: int = 256) -> tuple[list[int], list[mpf]]:
    """Per row: the exact argmax ``a_i`` (first of ties) among allowed keys, and the mass
    ``sum_{j != a_i} A_ij`` (relative accuracy ~2**-(prec-10))."""
    dots = exact_scores(op)
    m, n = len(dots), len(dots[0])
    allowed = allowed_mask(m, n, op.mask)
    d = op.arrays["Q"].shape[1] if op.kind == "qk" else 1
    argmax, mass = [], []
    with mp.workprec(prec):
        beta = mpf(1) if op.kind != "qk" else 1 / mp.sqrt(d) if op.beta == "inv_sqrt_d" else mpf_exact(Fraction(op.beta))
        for i in range(m):
            keys = [j for j in range(n) if allowed[i][j]]
            best = max(keys, key=lambda j: (dots[i][j], -j))
            terms = {j: mp.exp(beta * mpf_exact(dots[i][j] - dots[i][best])) for j in keys}
            z = mpmath.fsum(terms.values())
            argmax.append(best)
            mass.append(mpmath.fsum(v for j, v in terms.items() if j != best) / z)
    return argmax, mass


def mpf_exact(q: Fraction) -> mpf:
    return mpf(q.numerator) / q.denominator


def one_hot_witness(op: Operator, argmax: list[int]) -> tuple[np.ndarray, np.ndarray]:
    m, n = op.shape
    U, W = np.eye(m), np.zeros((n, m))
    for i, j in enumerate(argmax):
        W[j, i] = 1.0
    return U, W


def upper_truth(err: mpf, eps: str) -> str:
    with mp.workprec(WORK):
        return classify(mpf_exact(Fraction(eps)) - err, err)


def times(x: mpf, factor: str) -> Fraction:
    """The exact rational of ``x * (1 + factor)`` rounded at :data:`WORK` bits."""
    with mp.workprec(WORK):
        return exact_fraction(x * (1 + mpf(factor)))


# ---------------------------------------------------------------------------- families

def huge_magnitude_variants(index: int, seed: int) -> list[Variant]:
    rng = np.random.default_rng([seed, 35, index])
    m, n, d = int(rng.integers(3, 7)), int(rng.integers(3, 8)), int(rng.integers(2, 5))
    n = max(n, m)
    scale = [1e50, 1e77, 1e100, 1e150, 1e155][index % 5]
    Q, K = rng.normal(size=(m, d)) * scale, rng.normal(size=(n, d)) * scale
    if index % 3 == 2:
        K[1] = K[0]  # an exact tie between two keys
    op = Operator("qk", {"Q": Q, "K": K}, beta="inv_sqrt_d", mask="causal" if index % 2 else "none")
    argmax, mass = off_argmax_mass(op)
    with mp.workprec(WORK):
        err = max(2 * v for v in mass)
    U, W = one_hot_witness(op, argmax)
    out: list[Variant] = []
    oid = f"adv/huge-{index}"
    for eps in ("1e-300", "0.0000001", "0.9999999", "1.0000001", "0.5"):
        eps = eps if "e" not in eps else "0." + "0" * 299 + "1"
        doc = _doc(oid, op, eps, upper=UpperEnd(m, "one-hot", U, W))
        out.append(("huge_magnitude_one_hot_witness", lambda doc=doc, eps=eps: (dumps(doc), upper_truth(err, eps))))
    wrong = [(j + 1) % n if op.allowed()[i][(j + 1) % n] else j for i, j in enumerate(argmax)]
    U2, W2 = one_hot_witness(op, wrong)

    def wrong_witness() -> tuple[bytes, str]:
        A = true_A_mp("qk", dict(op.arrays), op.beta, op.mask, prec=256)
        doc = _doc(oid, op, "0.5", upper=UpperEnd(m, "one-hot", U2, W2))
        return dumps(doc), upper_truth(true_witness_error(A, U2, W2), "0.5")

    out.append(("huge_magnitude_wrong_witness", wrong_witness))
    X = np.eye(m)[:1]
    Y = np.zeros((n, 1))
    Y[argmax[0], 0] = 1.0
    for eps in ("0.9", "1.0000001"):
        def lower(eps=eps) -> tuple[bytes, str]:
            # ||X|| = ||Y|| = 1 and ||XAY|| <= 1, so t = A_{0,a_0} <= 1: exact side of 1 by mass
            with mp.workprec(WORK):
                t = 1 - mass[0]
                truth = classify(t - mpf_exact(Fraction(eps)), t)
            return dumps(_doc(oid, op, eps, lower=LowerEnd(1, "selection", X, Y))), truth
        out.append(("huge_magnitude_selection_lower", lower))
    return out


def one_hot_variants(index: int, seed: int) -> list[Variant]:
    rng = np.random.default_rng([seed, 36, index])
    m = int(rng.integers(3, 6))
    n = m + int(rng.integers(0, 3))
    s = [40.0, 300.0, 700.0, 745.0, 1000.0, 1500.0, 2000.0][index % 7]
    S = rng.normal(size=(m, n)) + s * np.eye(m, n)
    op = Operator("scores", {"S": S}, mask="causal" if index % 4 == 3 else "none")
    prec = int(s * 1.45) + 400
    argmax, mass = off_argmax_mass(op, prec=256)
    with mp.workprec(WORK):
        err = max(2 * v for v in mass)
    U, W = one_hot_witness(op, argmax)
    oid = f"adv/one-hot-{index}"
    out: list[Variant] = []
    for g in ("1e-3", "1e-9", "1e-20", "1e-28"):
        for up in (True, False):
            eps = decimal(times(err, g if up else "-" + g), up=up, digits=40)
            doc = _doc(oid, op, eps, upper=UpperEnd(m, "one-hot", U, W))
            out.append((f"one_hot_witness_eps_{'above' if up else 'below'}_error",
                        lambda doc=doc, eps=eps: (dumps(doc), upper_truth(err, eps))))
    X, Y = np.eye(m), np.zeros((n, m))
    for i, j in enumerate(argmax):
        Y[j, i] = 1.0
    if len(set(argmax)) == m:
        def lower(g: str, below: bool) -> tuple[bytes, str]:
            A = true_A_mp("scores", dict(op.arrays), mask=op.mask, prec=prec)
            res = true_lower_threshold(A, X, Y, prec=prec)
            with mp.workprec(prec):
                t = res[0]
                delta = 1 - t
                if delta <= 0:
                    return dumps(_doc(oid, op, "0.5", lower=LowerEnd(m, "selection", X, Y))), "true"
                digits = int(-mpmath.log10(delta)) + 40
                target = 1 - delta * (1 + mpf(g)) if below else 1 - delta * (1 - mpf(g))
                eps = decimal(exact_fraction(target), up=not below, digits=digits)
                truth = classify(t - mpf_exact(Fraction(eps)), delta)
            return dumps(_doc(oid, op, eps, lower=LowerEnd(m, "selection", X, Y))), truth

        for g in ("1e-3", "1e-12", "1e-25"):
            for below in (True, False):
                out.append((f"one_hot_selection_eps_{'below' if below else 'above'}_threshold",
                            lambda g=g, below=below: lower(g, below)))
    return out


def beta_gap_variants(index: int, seed: int) -> list[Variant]:
    rng = np.random.default_rng([seed, 37, index])
    d = [2, 3, 5, 6, 7, 4][index % 6]  # d = 4: 1/sqrt(d) = 0.5 is a double, no gap (controls)
    m, n = int(rng.integers(3, 6)), int(rng.integers(3, 7))
    n = max(n, m)
    Q, K = rng.normal(size=(m, d)) * 1.5, rng.normal(size=(n, d)) * 1.5
    ops = {"inv": Operator("qk", {"Q": Q, "K": K}, beta="inv_sqrt_d"),
           "dec": Operator("qk", {"Q": Q, "K": K}, beta=float_to_decimal_string(1 / math.sqrt(d)))}
    S = (Q @ K.T) / math.sqrt(d)
    Af = np.exp(S - S.max(axis=1, keepdims=True))
    Af /= Af.sum(axis=1, keepdims=True)
    u, sv, vt = np.linalg.svd(Af)
    r = max(1, min(2, ops["inv"].p - 1))
    U, W = np.ascontiguousarray(u[:, :r] * sv[:r]), np.ascontiguousarray(vt[:r].T)
    k = min(2, ops["inv"].p)
    X, Y = np.ascontiguousarray(u[:, :k].T), np.ascontiguousarray(vt[:k].T)
    oid = f"adv/beta-gap-{index}"

    def upper(which: str) -> tuple[bytes, str]:
        errs = [true_witness_error(true_A_mp("qk", dict(o.arrays), o.beta), U, W) for o in ops.values()]
        with mp.workprec(WORK):
            mid = (errs[0] + errs[1]) / 2
        eps = decimal(times(mid, "1e-30"), up=True, digits=45)
        doc = _doc(oid, ops[which], eps, upper=UpperEnd(r, "svd", U, W))
        return dumps(doc), truth_of_document(doc)

    def lower(which: str) -> tuple[bytes, str]:
        ts = [true_lower_threshold(true_A_mp("qk", dict(o.arrays), o.beta), X, Y) for o in ops.values()]
        if None in ts:
            doc = _doc(oid, ops[which], "0.5", upper=UpperEnd(r, "svd", U, W))
            return dumps(doc), truth_of_document(doc)
        with mp.workprec(WORK):
            mid = (ts[0][0] + ts[1][0]) / 2
        eps = decimal(times(mid, "-1e-30"), up=False, digits=45)
        doc = _doc(oid, ops[which], eps, lower=LowerEnd(k, "svd-pair", X, Y))
        return dumps(doc), truth_of_document(doc)

    return [(f"beta_gap_{side.__name__}_{which}", lambda side=side, which=which: side(which))
            for side in (upper, lower) for which in ops]


def general_key_variants(index: int, seed: int) -> list[Variant]:
    rng = np.random.default_rng([seed, 38, index])
    m = int(rng.integers(4, 8))
    n = m + int(rng.integers(1, 4))
    S = rng.normal(size=(m, n)) * 2 + 3 * np.eye(m, n)
    op = Operator("scores", {"S": S}, mask="causal" if index % 3 == 2 else "none")
    Af = np.exp(S - S.max(axis=1, keepdims=True)) * op.allowed()
    Af /= Af.sum(axis=1, keepdims=True)
    k = min(3, m)
    rows = sorted(rng.choice(m, size=k, replace=False).tolist())
    X = np.eye(m)[rows]
    Y = np.ascontiguousarray(np.linalg.pinv(X @ Af))  # a general key side: least-norm X A Y = I
    A = true_A_mp("scores", dict(op.arrays), mask=op.mask)
    res = true_lower_threshold(A, X, Y)
    oid = f"adv/general-key-{index}"
    if res is None:
        return []
    base_eps = decimal(exact_fraction(res[0]), up=False, digits=40)

    def variant(kind: str, j: int) -> tuple[bytes, str]:
        Yv, eps = Y, base_eps
        if kind == "next_decimal":
            eps = decimal_plus_ulp(base_eps, extra=j)
        elif kind == "previous_decimal":
            eps = decimal_minus_ulp(base_eps, extra=j)
        elif kind == "threshold_decimal_up":
            eps = decimal(exact_fraction(res[0]), up=True, digits=40 + j)
        else:  # one entry of Y moved by one ulp, up or down
            Yv = Y.copy()
            flat = Yv.reshape(-1)
            at = (index * 7 + j) % flat.size
            flat[at] = np.nextafter(flat[at], np.inf if j % 2 else -np.inf)
        doc = _doc(oid, op, eps, lower=LowerEnd(k, "general-key", X, Yv))
        return dumps(doc), truth_of_document(doc)

    return [(f"general_key_{kind}", lambda kind=kind, j=j: variant(kind, j))
            for kind in ("next_decimal", "previous_decimal", "threshold_decimal_up", "y_one_ulp") for j in range(3)]


#: Multiples of the row-block path's own rounding width at which rowblock_bound_* claims sit.
ROWBLOCK_STEPS = ("-2", "-1", "-0.5", "-0.125", "0.125", "0.5", "1", "2")


def _rowblock_width(interval: tuple[Fraction, Fraction] | None) -> Fraction | None:
    return None if interval is None else interval[1] - interval[0]


def rowblock_bound_variants(index: int, seed: int) -> list[Variant]:
    """Claims whose margins sit at the row-block path's rounding bound (issue 45): tolerances at
    the exact witness error (threshold) plus ``c`` times the width of that path's own enclosure,
    for ``c`` in :data:`ROWBLOCK_STEPS` (the false side: ``c < 0`` for a witness, ``c > 0`` for a
    lower certificate).  The width is read from
    the path (``verify_upper``/``verify_lower`` with ``engine="rowblock"``); the truth only
    from ``tests/oracle.py``."""
    from softrank_cert.kernel import verify_lower, verify_upper

    rng = np.random.default_rng([seed, 45, index])
    m = int(rng.integers(5, 9))
    n = m + int(rng.integers(0, 4))
    kind = ("qk", "scores", "qk-causal")[index % 3]
    if kind == "scores":
        op = Operator("scores", {"S": rng.normal(size=(m, n)) * 2})
    else:
        op = Operator("qk", {"Q": rng.normal(size=(m, 4)), "K": rng.normal(size=(n, 4))},
                      mask="causal" if kind == "qk-causal" else "none")
    A = true_A_mp(op.kind, dict(op.arrays), beta=op.beta, mask=op.mask)
    Af = np.array([[float(v) for v in row] for row in A])
    u, s, vt = np.linalg.svd(Af)
    U, W = np.ascontiguousarray(u[:, :2] * s[:2]), np.ascontiguousarray(vt[:2].T)
    k = 2
    X, Y = np.eye(m)[[m - 2, m - 1]], np.ascontiguousarray(np.eye(n)[:, [n - 2, n - 1]])
    error, threshold = true_witness_error(A, U, W), true_lower_threshold(A, X, Y)
    up_width = _rowblock_width(verify_upper(op, "1", 2, U, W, engine="rowblock").value)
    low = verify_lower(op, "0.000000001", k, X, Y, engine="rowblock")
    low_width = _rowblock_width(low.value) if low.value is not None else None
    oid = f"adv/rowblock-bound-{index}"

    def variant(side: str, step: str) -> tuple[bytes, str]:
        with mp.workprec(WORK):
            if side == "upper":
                target = exact_fraction(error) + Fraction(step) * up_width
                eps = decimal(target, up=True)
                doc = _doc(oid, op, eps, upper=UpperEnd(2, "tsvd", U, W))
            else:
                target = exact_fraction(threshold[0]) + Fraction(step) * low_width
                eps = decimal(target, up=True)
                doc = _doc(oid, op, eps, lower=LowerEnd(k, "selection", X, Y))
        return dumps(doc), truth_of_document(doc)

    sides = [("upper", up_width)] + ([("lower", low_width)] if threshold is not None and low_width else [])
    return [(f"rowblock_bound_{side}_{'false' if step.startswith('-') == (side == 'upper') else 'true'}_side",
             lambda side=side, step=step: variant(side, step)) for side, width in sides if width for step in ROWBLOCK_STEPS]


def extreme_variants(count: int, seed: int) -> list[Variant]:
    """``count`` instances of each family (deterministic for ``seed``)."""
    out: list[Variant] = []
    for index in range(count):
        out += huge_magnitude_variants(index, seed)
        out += one_hot_variants(index, seed)
        out += beta_gap_variants(index, seed)
        out += general_key_variants(index, seed)
        out += rowblock_bound_variants(index, seed)
    return out
