"""The statistics of ``softrank analyze`` (UNTRUSTED; float64 statistics of certified brackets).

Certified concordance of a score with bootstrap intervals over operators (:func:`concordance`,
:func:`score_concordance`), the interval loss and its exact linear-program fit
(:func:`fit_interval_model`), the baseline's features (:func:`operator_features`,
:func:`baseline_matrix`) and the group-wise held-out comparison (:func:`heldout`); the
definitions are in :mod:`softrank_cert.studies.analyze`'s docstring.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from collections.abc import Sequence

import numpy as np

from ...errors import InvalidInputError
from ...kernel import Operator, parse_tolerance

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260
CI_LEVEL = 0.95
#: L1 weight of the non-intercept coefficients in the interval fit (a tie-breaker only).
L1_PENALTY = 1e-4
BASELINE_FEATURES = ("log_width", "log_eps", "mean_row_entropy", "log_effective_rank")


def operator_features(op: Operator) -> dict[str, float]:
    """Cheap float64 statistics of A that know nothing of the theorem (the baseline's inputs)."""
    from ...util.dense import attention_matrix

    A = attention_matrix(op)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(A > 0, A * np.log(A), 0.0)
    entropy = float(-plogp.sum(axis=1).mean())
    sv = np.linalg.svd(A, compute_uv=False)
    weights = sv / sv.sum() if sv.sum() > 0 else np.ones(1)
    weights = weights[weights > 0]
    erank = float(np.exp(-(weights * np.log(weights)).sum()))
    return {"width": int(op.shape[1]), "queries": int(op.shape[0]), "mean_row_entropy": entropy,
            "effective_rank": erank}


# ============================================================================ concordance

def pair_matrices(lower: np.ndarray, upper: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(P, credit)`` for one tolerance: ``P[i, j]`` = i provably needs more rank than j
    (``lower_i > upper_j``) with both scores available; ``credit[i, j]`` = 1 if the score puts i
    above j, 1/2 on a tie, 0 otherwise (only where P).  NaN = score not available; +inf is a
    score above every finite one (two infinities tie)."""
    lower, upper, score = (np.asarray(a, dtype=np.float64) for a in (lower, upper, score))
    valid = ~np.isnan(score)
    P = (lower[:, None] > upper[None, :]) & valid[:, None] & valid[None, :]
    with np.errstate(invalid="ignore"):
        credit = (score[:, None] > score[None, :]) + 0.5 * (score[:, None] == score[None, :])
    return P.astype(np.float64), np.where(P, credit, 0.0)


def concordance(lower: Sequence[float], upper: Sequence[float], score: Sequence[float]) -> tuple[float | None, int]:
    """Certified concordance of ``score`` at one tolerance: ``(share, certified pairs)``
    (share None when no pair is certified)."""
    P, credit = pair_matrices(np.asarray(lower), np.asarray(upper), np.asarray(score))
    pairs = int(P.sum())
    return (float(credit.sum() / pairs) if pairs else None), pairs


def bootstrap_weights(n: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """``resamples x n`` multiplicities of a bootstrap over n units (fixed seed)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64) if n else np.zeros((resamples, 0))


def _interval(samples: np.ndarray, level: float = CI_LEVEL) -> list[float] | None:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    tail = 100 * (1 - level) / 2
    return [round(float(np.percentile(samples, tail)), 4), round(float(np.percentile(samples, 100 - tail)), 4)]


def _pair_sums(LO: np.ndarray, UP: np.ndarray, S: np.ndarray, idx: np.ndarray, W: np.ndarray):
    """Point and bootstrap sums (credit, pairs) over operators ``idx``, pooled over eps columns."""
    num = den = 0.0
    numb = np.zeros(W.shape[0])
    denb = np.zeros(W.shape[0])
    Wg = W[:, idx]
    for e in range(LO.shape[1]):
        P, credit = pair_matrices(LO[idx, e], UP[idx, e], S[idx, e])
        if not P.any():
            continue
        num += credit.sum()
        den += P.sum()
        numb += ((Wg @ credit) * Wg).sum(axis=1)
        denb += ((Wg @ P) * Wg).sum(axis=1)
    return num, den, numb, denb


def _summary(num: float, den: float, numb: np.ndarray, denb: np.ndarray) -> dict[str, Any]:
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = np.where(denb > 0, numb / np.where(denb > 0, denb, 1), np.nan)
    return {"concordance": round(num / den, 4) if den else None, "ci": _interval(samples) if den else None,
            "pairs": int(den)}


def score_concordance(LO: np.ndarray, UP: np.ndarray, S: np.ndarray, W: np.ndarray, eps_list: list[str],
                      groups: dict[str, list[Any]]) -> dict[str, Any]:
    """Concordance of one score (matrices: operators x eps), pooled, by eps and by groups."""
    n = LO.shape[0]
    everyone = np.arange(n)
    out = _summary(*_pair_sums(LO, UP, S, everyone, W))
    out["by_eps"] = {eps: _summary(*_pair_sums(LO[:, [e]], UP[:, [e]], S[:, [e]], everyone, W))
                     for e, eps in enumerate(eps_list)}
    for key, labels in groups.items():
        values = sorted({label for label in labels if label is not None}, key=_group_order)
        table = {}
        for value in values:
            idx = np.array([i for i, label in enumerate(labels) if label == value])
            table[str(value)] = _summary(*_pair_sums(LO, UP, S, idx, W))
        out[f"by_{key}"] = table
    return out


def _group_order(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


# ============================================================================ interval loss and fits

def log_rank(x: np.ndarray | Sequence[float]) -> np.ndarray:
    """``log`` of a rank bracket end (a rank 0, only possible at eps >= ||A||, enters as log 1/2)."""
    return np.log(np.maximum(np.asarray(x, dtype=np.float64), 0.5))


def interval_loss(pred: np.ndarray | Sequence[float], lo: np.ndarray | Sequence[float],
                  hi: np.ndarray | Sequence[float]) -> np.ndarray:
    """Distance of each prediction to its interval ``[lo, hi]`` (zero inside)."""
    pred, lo, hi = (np.asarray(a, dtype=np.float64) for a in (pred, lo, hi))
    return np.maximum(lo - pred, 0.0) + np.maximum(pred - hi, 0.0)


@dataclasses.dataclass
class IntervalModel:
    """``prediction = intercept + coef . (x - mean) / scale`` on the kept columns."""

    columns: list[int]
    mean: np.ndarray
    scale: np.ndarray
    intercept: float
    coef: np.ndarray

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = (X[:, self.columns] - self.mean) / self.scale
        return self.intercept + Z @ self.coef


def fit_interval_model(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, l1: float = L1_PENALTY) -> IntervalModel:
    """Minimise ``mean_i dist(x_i . beta, [lo_i, hi_i]) + l1 * |beta|_1`` (intercept free) exactly
    as a linear program (HiGHS).  Columns constant on the data are dropped; the others are
    standardised."""
    from scipy import sparse
    from scipy.optimize import linprog

    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if n == 0:
        raise InvalidInputError("no operator to fit the baseline on")
    sd = X.std(axis=0)
    columns = [j for j in range(X.shape[1]) if sd[j] > 1e-12 * max(1.0, abs(X[:, j]).max())]
    mean, scale = X[:, columns].mean(axis=0), sd[columns]
    Z = (X[:, columns] - mean) / scale
    k = len(columns)
    # variables: b0, b+ (k), b- (k), s (n);   b0 + Z b + s >= lo,   b0 + Z b - s <= hi
    ones = np.ones((n, 1))
    block = sparse.hstack([sparse.csr_matrix(ones), sparse.csr_matrix(Z), sparse.csr_matrix(-Z)])
    eye = sparse.identity(n, format="csr")
    A_ub = sparse.vstack([sparse.hstack([-block, -eye]), sparse.hstack([block, -eye])]).tocsc()
    b_ub = np.concatenate([-np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)])
    c = np.concatenate([[0.0], np.full(2 * k, l1), np.full(n, 1.0 / n)])
    bounds = [(None, None)] + [(0, None)] * (2 * k + n)
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise InvalidInputError(f"the interval fit failed: {res.message}")
    x = res.x
    return IntervalModel(columns, mean, scale, float(x[0]), x[1:1 + k] - x[1 + k:1 + 2 * k])


def baseline_matrix(rows: list[dict[str, Any]]) -> np.ndarray:
    """Baseline features of rows (operator, eps): log width, log eps, entropy, log effective rank."""
    return np.array([[math.log(r["features"]["width"]), math.log(float(parse_tolerance(r["eps"]))),
                      r["features"]["mean_row_entropy"], math.log(max(r["features"]["effective_rank"], 1e-300))]
                     for r in rows], dtype=np.float64).reshape(len(rows), len(BASELINE_FEATURES))


def with_score(base: np.ndarray, score: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Baseline columns plus a score column (+inf replaced by 1 + the largest finite training
    value) and an "infinite" indicator column (dropped by the fit when constant)."""
    score = np.asarray(score, dtype=np.float64)
    finite = score[train][np.isfinite(score[train])]
    cap = (finite.max() + 1.0) if finite.size else 0.0
    value = np.where(np.isinf(score), cap, score)
    return np.column_stack([base, value, np.isinf(score).astype(np.float64)])


# ============================================================================ held-out

def heldout(rows: list[dict[str, Any]], op_index: np.ndarray, n_ops: int, fold_labels: list[Any],
            added: list[str], W: np.ndarray) -> dict[str, Any]:
    """Group-wise cross-validation (one fold per distinct label of the operators).

    ``rows`` (operator, eps) with lower, upper, features, scores; ``op_index[i]`` the operator of
    row i; ``fold_labels[op]`` its fold.  Models: the baseline, and the baseline plus each score
    in ``added``.  Returns the held-out interval loss and certified concordance (pairs inside
    one test fold, same eps) of each model and, for each added score, the paired bootstrap
    intervals of the differences (model - baseline).
    """
    labels = sorted({label for label in fold_labels if label is not None}, key=_group_order)
    if len(labels) < 2:
        return {"skipped": f"fewer than two groups ({len(labels)})"}
    row_fold = np.array([fold_labels[o] for o in op_index], dtype=object)
    lo = log_rank([r["lower"] for r in rows])
    hi = log_rank([r["upper"] for r in rows])
    base = baseline_matrix(rows)
    models = {"baseline": None, **{f"baseline+{name}": name for name in added}}
    preds = {m: np.full(len(rows), np.nan) for m in models}
    skipped: dict[str, str] = {}
    for model, name in models.items():
        score = None if name is None else np.array([r["scores"].get(name, np.nan) for r in rows], dtype=np.float64)
        if score is not None and np.isnan(score).any():
            skipped[model] = f"{name} is not available for every operator"
            continue
        for label in labels:
            test = row_fold == label
            train = ~test & (row_fold != None)  # noqa: E711 (object array)
            X = base if score is None else with_score(base, score, train)
            fitted = fit_interval_model(X[train], lo[train], hi[train])
            preds[model][test] = fitted.predict(X[test])
    eps_list = sorted({r["eps"] for r in rows}, key=parse_tolerance)
    col = {eps: e for e, eps in enumerate(eps_list)}
    LO = np.full((n_ops, len(eps_list)), np.nan)
    UP = LO.copy()
    for i, r in enumerate(rows):
        LO[op_index[i], col[r["eps"]]], UP[op_index[i], col[r["eps"]]] = r["lower"], r["upper"]
    out_models: dict[str, Any] = {}
    stats: dict[str, tuple] = {}
    for model in models:
        if model in skipped:
            out_models[model] = {"skipped": skipped[model]}
            continue
        pred = preds[model]
        tested = np.isfinite(pred)  # rows of operators without a fold label are never held out
        loss = interval_loss(pred, lo, hi)[tested]
        per_op = np.zeros(n_ops)
        count = np.zeros(n_ops)
        np.add.at(per_op, op_index[tested], loss)
        np.add.at(count, op_index[tested], 1.0)
        S = np.full((n_ops, len(eps_list)), np.nan)
        for i, r in enumerate(rows):
            S[op_index[i], col[r["eps"]]] = pred[i]
        num = den = 0.0
        numb = np.zeros(W.shape[0])
        denb = np.zeros(W.shape[0])
        for label in labels:
            idx = np.array([o for o in range(n_ops) if fold_labels[o] == label])
            a, b, c, d = _pair_sums(np.nan_to_num(LO, nan=-1.0), np.nan_to_num(UP, nan=np.inf), S, idx, W)
            num, den, numb, denb = num + a, den + b, numb + c, denb + d
        with np.errstate(invalid="ignore", divide="ignore"):
            loss_b = (W @ per_op) / (W @ count)  # operators with no held-out row weigh nothing
            conc_b = np.where(denb > 0, numb / np.where(denb > 0, denb, 1), np.nan)
        point_loss = float(per_op.sum() / count.sum())
        point_conc = num / den if den else float("nan")
        stats[model] = (point_loss, point_conc, loss_b, conc_b)
        out_models[model] = {"loss": round(point_loss, 4), "loss_ci": _interval(loss_b),
                             "concordance": round(point_conc, 4) if den else None,
                             "concordance_ci": _interval(conc_b) if den else None, "pairs": int(den),
                             "inside_share": round(float((loss == 0).mean()), 4)}
    differences: dict[str, Any] = {}
    if "baseline" in stats:
        b_loss, b_conc, b_loss_b, b_conc_b = stats["baseline"]
        for model, name in models.items():
            if name is None or model not in stats:
                continue
            m_loss, m_conc, m_loss_b, m_conc_b = stats[model]
            loss_ci, conc_ci = _interval(m_loss_b - b_loss_b), _interval(m_conc_b - b_conc_b)
            differences[name] = {
                "loss_difference": round(m_loss - b_loss, 4), "loss_difference_ci": loss_ci,
                "loss_ci_includes_zero": None if loss_ci is None else bool(loss_ci[0] <= 0 <= loss_ci[1]),
                "concordance_difference": round(m_conc - b_conc, 4) if np.isfinite(m_conc - b_conc) else None,
                "concordance_difference_ci": conc_ci,
                "concordance_ci_includes_zero": None if conc_ci is None else bool(conc_ci[0] <= 0 <= conc_ci[1]),
                "verdict": _verdict_text(name, loss_ci, conc_ci),
            }
    return {"folds": [str(label) for label in labels], "models": out_models, "added": differences}


def _verdict_text(name: str, loss_ci: list[float] | None, conc_ci: list[float] | None) -> str:
    """One plain sentence on whether adding ``name`` helped held out."""
    if loss_ci is None or conc_ci is None:
        return f"adding {name}: not enough held-out pairs to say"
    parts = []
    if loss_ci[0] <= 0 <= loss_ci[1]:
        parts.append("the loss-difference interval includes zero")
    elif loss_ci[1] < 0:
        parts.append("it lowers the held-out interval loss")
    else:
        parts.append("it raises the held-out interval loss")
    if conc_ci[0] <= 0 <= conc_ci[1]:
        parts.append("the concordance-difference interval includes zero")
    elif conc_ci[0] > 0:
        parts.append("it raises the held-out certified concordance")
    else:
        parts.append("it lowers the held-out certified concordance")
    helps = loss_ci[1] < 0 or conc_ci[0] > 0
    return (f"adding {name} to the baseline: " + "; ".join(parts)
            + ("" if helps else " -- no detectable held-out information beyond the baseline"))
