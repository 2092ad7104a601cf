"""``softrank analyze`` (issue 15): score definitions on hand-computable operators, certified
concordance on planted orders, the interval loss and its fit, the power-of-two invariance
check, and the command end to end on a tiny (width 8) panel, including refusals.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.certio.issuing import certificate_for
from softrank_cert.errors import EXIT_INVALID_INPUT, InvalidInputError
from softrank_cert.kernel import Operator
from softrank_cert.plumbing.certificate_files import certificate_path
from softrank_cert.util.files import write_json_atomic
from softrank_cert.util.dense import attention_matrix
from softrank_cert.geometry.intrinsic import operator_geometry, rank_grid, refactored_operator
from softrank_cert.studies.analyze.stats import (
    bootstrap_weights, concordance, fit_interval_model, interval_loss, operator_features, score_concordance,
)
from conftest import run_in_process as cli

EPS = ["0.1", "0.25", "0.5"]


def rank_one(beta: str = "1") -> Operator:
    """``S = beta q k^T`` (d = 1) with ``P q = (-1, 1, -1, 1)``, ``P k = (-2, 2, -2, 2, 0)``:
    ``C = beta (P q)(P k)^T``, so kappa(C) = beta * 1 * 2 = 2; native Gamma = beta * 3 * 4 = 12."""
    q = np.array([[1.0], [3.0], [1.0], [3.0]])
    k = np.array([[0.0], [4.0], [0.0], [4.0], [2.0]])
    return Operator("qk", {"Q": q, "K": k}, beta=beta)


# ----------------------------------------------------------------------------- score definitions

def test_scores_by_hand_on_a_rank_one_interaction():
    op = rank_one()
    assert rank_grid(op) == [1]  # rank C <= d = 1: the grid stops at d
    geo = operator_geometry(op, rank_grid(op), EPS)
    (g,) = geo.ranks
    assert g.certified and float(g.tau.hi) < 1e-12  # T_1 = C: no residual
    assert 2.0 <= float(g.kappa_upper) < 2.0 * (1 + 1e-12)  # rank one: kappa = max|x| max|y|
    for eps in EPS:
        e = float(eps)
        log_phi, r_star = geo.intrinsic[eps]
        hand = 0.5 * math.log(1 + 2.0 / e**2)  # (r/2) log(1 + kappa/(eps - 0)^2)
        assert r_star == 1
        assert hand - 1e-12 <= float(log_phi.hi) <= hand * (1 + 1e-9)  # a certified upper bound, tight
        native = geo.native[eps]
        hand_native = 0.5 * math.log(1 + 12.0 / e**2)  # (d/2) log(1 + Gamma/eps^2), d = 1
        assert float(native.lo) <= hand_native <= float(native.hi)
        assert float(native.hi) - float(native.lo) < 1e-9
    # eps = 0.5: intrinsic = (1/2) log 9 = log 3, native = (1/2) log 49 = log 7
    assert float(geo.intrinsic["0.5"][0].hi) == pytest.approx(math.log(3), rel=1e-12)
    assert float(geo.native["0.5"].hi) == pytest.approx(math.log(7), rel=1e-12)


def test_intrinsic_is_infinite_when_no_rank_qualifies():
    rng = np.random.default_rng(3)
    op = Operator("qk", {"Q": 3 * rng.standard_normal((12, 4)), "K": 3 * rng.standard_normal((12, 4))})
    geo = operator_geometry(op, [1], ["0.1"])
    assert not geo.ranks[0].certified and geo.ranks[0].tau_float > 0.1
    assert geo.intrinsic["0.1"] == (None, None)
    # with the full grid, r = d = 4 retains all of C and qualifies
    full = operator_geometry(op, rank_grid(op), ["0.1"])
    assert rank_grid(op) == [1, 2, 3, 4] and full.intrinsic["0.1"][1] is not None


def test_intrinsic_takes_the_minimum_over_the_grid():
    """The score is the least certified (r/2) log(1 + kappa/(eps - tau)^2) over qualifying ranks."""
    rng = np.random.default_rng(5)
    op = Operator("qk", {"Q": rng.standard_normal((16, 6)), "K": rng.standard_normal((16, 6))})
    geo = operator_geometry(op, rank_grid(op), ["0.25"])
    log_phi, r_star = geo.intrinsic["0.25"]
    values = {g.r: 0.5 * g.r * math.log1p(float(g.kappa_upper) / (0.25 - float(g.tau.hi)) ** 2)
              for g in geo.ranks if g.certified and float(g.tau.hi) < 0.25}
    assert r_star in values and float(log_phi.hi) == pytest.approx(min(values.values()), rel=1e-9)
    assert values[r_star] == pytest.approx(min(values.values()), rel=1e-9)


def test_baseline_features_by_hand():
    m, n = 6, 8
    uniform = Operator("qk", {"Q": np.zeros((m, 3)), "K": np.ones((n, 3))})  # A = 1/N everywhere: rank one
    f = operator_features(uniform)
    assert f["width"] == n and f["mean_row_entropy"] == pytest.approx(math.log(n), rel=1e-12)
    assert f["effective_rank"] == pytest.approx(1.0, abs=1e-6)
    one_hot = Operator("scores", {"S": np.where(np.eye(8), 0.0, -800.0)})  # A = I (to float64)
    g = operator_features(one_hot)
    assert g["mean_row_entropy"] == pytest.approx(0.0, abs=1e-12)
    assert g["effective_rank"] == pytest.approx(8.0, rel=1e-9)


# ----------------------------------------------------------------------------- concordance

def test_concordance_on_planted_orders():
    lower, upper = [1, 3, 5, 7], [1, 3, 5, 7]  # resolved and distinct: all 6 pairs certified
    assert concordance(lower, upper, [1.0, 2.0, 3.0, 4.0]) == (1.0, 6)
    assert concordance(lower, upper, [4.0, 3.0, 2.0, 1.0]) == (0.0, 6)
    assert concordance(lower, upper, [1.0, 1.0, 1.0, 1.0]) == (0.5, 6)  # ties count half
    assert concordance(lower, upper, [1.0, 1.0, 3.0, 4.0]) == (5.5 / 6, 6)
    # overlapping brackets are not certified-ordered (no midpoint is a rank)
    assert concordance([1, 3], [5, 6], [0.0, 1.0]) == (None, 0)
    assert concordance([4, 1], [9, 3], [0.0, 1.0]) == (0.0, 1)  # 4 > 3: only (0 over 1) is certified
    # +inf is above every finite score; two infinities tie; NaN (not available) leaves the pair out
    assert concordance([5, 1], [5, 1], [math.inf, 2.0]) == (1.0, 1)
    assert concordance([5, 1], [5, 1], [math.inf, math.inf]) == (0.5, 1)
    assert concordance([5, 3, 1], [5, 3, 1], [math.nan, 2.0, 1.0]) == (1.0, 1)


def test_bootstrap_intervals_and_groups():
    n = 12
    lower = np.arange(n, dtype=float)[:, None] * 2 + 1
    upper = lower.copy()
    W = bootstrap_weights(n, 300, 1)
    assert W.shape == (300, n) and (W.sum(axis=1) == n).all()
    perfect = score_concordance(lower, upper, lower.copy(), W, ["0.25"], {"half": [i // 6 for i in range(n)]})
    assert perfect["concordance"] == 1.0 and perfect["ci"] == [1.0, 1.0] and perfect["pairs"] == n * (n - 1) // 2
    assert perfect["by_half"]["0"]["pairs"] == 15 and perfect["by_half"]["1"]["concordance"] == 1.0
    rng = np.random.default_rng(0)
    noisy = score_concordance(lower, upper, rng.standard_normal((n, 1)), W, ["0.25"], {})
    lo, hi = noisy["ci"]
    assert 0.0 <= lo <= noisy["concordance"] <= hi <= 1.0 and hi - lo > 0.05
    assert bootstrap_weights(n, 50, 7).tolist() == bootstrap_weights(n, 50, 7).tolist()  # fixed seed


# ----------------------------------------------------------------------------- interval loss

def test_interval_loss():
    lo, hi = np.array([1.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0])
    assert interval_loss([1.5, 0.25, 3.5], lo, hi).tolist() == [0.0, 0.75, 1.5]
    assert interval_loss([1.0, 2.0], [1.0, 1.0], [2.0, 2.0]).tolist() == [0.0, 0.0]  # the ends are inside


def test_interval_fit_recovers_a_planted_line_and_fits_inside_intervals():
    x = np.linspace(-1, 1, 40)[:, None]
    exact = fit_interval_model(x, 3 * x[:, 0] + 1, 3 * x[:, 0] + 1, l1=0.0)
    assert np.allclose(exact.predict(x), 3 * x[:, 0] + 1, atol=1e-7)
    rng = np.random.default_rng(2)
    centre = 2 * x[:, 0] - 1
    lo, hi = centre - rng.uniform(0.1, 0.5, 40), centre + rng.uniform(0.1, 0.5, 40)
    fitted = fit_interval_model(np.column_stack([x, np.ones(40)]), lo, hi)  # a constant column is dropped
    assert interval_loss(fitted.predict(np.column_stack([x, np.ones(40)])), lo, hi).max() < 1e-7
    with pytest.raises(InvalidInputError):
        fit_interval_model(np.zeros((0, 1)), np.zeros(0), np.zeros(0))


# ----------------------------------------------------------------------------- invariance

def test_power_of_two_refactorization_keeps_the_geometry_and_moves_native():
    rng = np.random.default_rng(11)
    op = Operator("qk", {"Q": rng.standard_normal((10, 5)), "K": rng.standard_normal((9, 5))})
    op2 = refactored_operator(op)
    assert not np.array_equal(op2.arrays["Q"], op.arrays["Q"])  # the coordinates did change
    assert attention_matrix(op2).tobytes() == attention_matrix(op).tobytes()
    geo, geo2 = (operator_geometry(o, rank_grid(o), EPS) for o in (op, op2))
    assert geo.C_bytes == geo2.C_bytes and geo.c_bounds == geo2.c_bounds
    assert [g.key() for g in geo.ranks] == [g.key() for g in geo2.ranks]  # tau, kappa bit-identical
    assert geo.intrinsic == geo2.intrinsic  # exact rationals, bit for bit
    assert geo.gamma != geo2.gamma and all(geo.native[e] != geo2.native[e] for e in EPS)
    with pytest.raises(InvalidInputError):
        refactored_operator(Operator("scores", {"S": np.zeros((3, 3))}))


# ----------------------------------------------------------------------------- end to end

def toy_panel(path: Path) -> list[str]:
    """12 width-8 ``qk`` operators named toy/DOC/w8/LlHh (2 documents x 2 layers x 3 heads)
    with different attention scales, so that the certified ranks differ."""
    rng = np.random.default_rng(15)
    arrays = {}
    names = []
    for doc in ("docA", "docB"):
        for layer in (0, 1):
            for head in range(3):
                scale = (0.3, 1.0, 3.0)[head] * (1.0 + 0.5 * layer)
                name = f"toy/{doc}/w8/L{layer}H{head}"
                arrays[f"{name}/Q"] = scale * rng.standard_normal((8, 4))
                arrays[f"{name}/K"] = rng.standard_normal((8, 4))
                names.append(name)
    np.savez(path, **arrays)
    return names


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy panel and one certificate per operator (kernel-verified ends, small search)."""
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.solvers.bracket import bracket_operator

    folder = tmp_path_factory.mktemp("analyze")
    panel = folder / "toy.npz"
    toy_panel(panel)
    certs = folder / "certs"
    for item in load_operators(panel):
        brackets = bracket_operator(item.operator, EPS, budget_seconds=0.3)
        write_json_atomic(certificate_path(certs, item.name), certificate_for(item.name, item.operator, brackets, None))
    return panel, certs


@pytest.mark.slow
def test_analyze_end_to_end(toy, tmp_path, capsys):
    panel, certs = toy
    out, plot, table = tmp_path / "r.json", tmp_path / "f.png", tmp_path / "r.md"
    code, stdout, err = cli(capsys, "analyze", str(certs), "--operators", str(panel), "--out", str(out),
                            "--plot", str(plot), "--table", str(table), "--bootstrap", "200", "--json")
    assert code == 0, err
    report = json.loads(stdout)

    def refuse(constant):  # NaN / Infinity are not JSON
        raise AssertionError(f"report holds {constant}")

    assert json.loads(out.read_text(), parse_constant=refuse) == report and plot.stat().st_size > 1000
    assert table.read_text().startswith("# Does interaction geometry predict certified rank?")
    assert len(report["operators"]) == 12 * 3 and report["eps"] == EPS
    row = report["operators"][0]
    assert {"operator", "eps", "lower", "upper", "scores"} <= set(row)
    assert set(row["scores"]) == {"intrinsic", "native", "baseline", "interaction_dim"}
    for name in ("intrinsic", "native", "baseline", "interaction_dim"):
        entry = report["scores"][name]
        assert {"concordance", "ci", "pairs", "by_eps", "by_document", "by_layer", "by_width", "by_family"} <= set(entry)
        assert set(entry["by_eps"]) == set(EPS) and entry["pairs"] > 0
        assert entry["ci"][0] <= entry["concordance"] <= entry["ci"][1]
    for scheme in ("document", "layer"):
        held = report["heldout"][scheme]
        assert held["folds"] and set(held["added"]) == {"intrinsic", "native", "interaction_dim"}
        d = held["added"]["intrinsic"]
        assert d["loss_difference_ci"][0] <= d["loss_difference"] <= d["loss_difference_ci"][1]
        assert isinstance(d["loss_ci_includes_zero"], bool) and d["verdict"]
    inv = report["invariance"]
    assert inv["operators"] == inv["checked"] == 12
    for key in ("brackets_identical", "C_identical", "tau_identical", "kappa_identical", "intrinsic_identical",
                "native_moved", "margins_consistent"):
        assert inv[key] == 12, key
    # every reported end is the rank of a VERIFIED kernel verdict of the certificate
    from softrank_cert.verification import verify_certificate_file

    verdict = verify_certificate_file(certificate_path(certs, row["operator"]))
    ranks = {(v.eps, v.side): v.rank for v in verdict.verdicts}
    assert (row["lower"], row["upper"]) == (ranks[row["eps"], "lower"], ranks[row["eps"], "upper"])


def test_analyze_refuses_bad_input(toy, tmp_path, capsys):
    panel, certs = toy
    common = ["--operators", str(panel), "--out", str(tmp_path / "r.json")]
    code, _, err = cli(capsys, "analyze", str(certs), *common, "--plot", str(tmp_path / "f.txt"))
    assert code == EXIT_INVALID_INPUT and "unsupported file type" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(capsys, "analyze", str(certs), *common, "--plot", str(tmp_path / "f.png"), "--eps", "0.3",
                       "--resume")
    assert code == EXIT_INVALID_INPUT and "no bracket at eps 0.3" in err
    assert not (tmp_path / "r.json").exists()  # nothing written by a failed run
    assert not (tmp_path / "r-cache").exists()  # not even the --resume folder


def test_analyze_refuses_a_causal_operator_and_computes_nothing_for_it(tmp_path, capsys):
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.solvers.bracket import bracket_operator

    rng = np.random.default_rng(4)
    panel = tmp_path / "causal.npz"
    np.savez(panel, **{"toy/doc/w8/L0H0/Q": rng.standard_normal((8, 4)), "toy/doc/w8/L0H0/K": rng.standard_normal((8, 4)),
                       "toy/doc/w8/L0H0/causal": np.array(True)})
    (item,) = load_operators(panel)
    certs = tmp_path / "certs"
    write_json_atomic(certificate_path(certs, item.name),
                      certificate_for(item.name, item.operator, bracket_operator(item.operator, EPS, budget_seconds=0.3),
                                      None))
    code, out, err = cli(capsys, "analyze", str(certs), "--operators", str(panel), "--out", str(tmp_path / "r.json"),
                         "--plot", str(tmp_path / "f.png"))
    assert code == EXIT_INVALID_INPUT and "this one is causal" in err and "common positive support" in err
    assert len(err.strip().splitlines()) == 1 and not out and not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_analyze_refuses_a_certificate_that_does_not_match_the_panel(toy, tmp_path, capsys):
    panel, certs = toy
    with np.load(panel) as data:
        arrays = dict(data)
    key = "toy/docA/w8/L0H1/K"
    arrays[key] = arrays[key].copy()
    arrays[key][0, 0] = np.nextafter(arrays[key][0, 0], np.inf)  # one ulp: another operator
    other = tmp_path / "toy.npz"
    np.savez(other, **arrays)
    code, _, err = cli(capsys, "analyze", str(certs), "--operators", str(other), "--out", str(tmp_path / "r.json"),
                       "--plot", str(tmp_path / "f.png"), "--bootstrap", "50")
    assert code == EXIT_INVALID_INPUT and "not about the panel operator 'toy/docA/w8/L0H1'" in err
    assert "not bit-identical" in err and not (tmp_path / "r.json").exists()
    # a certificate whose operator is not in the panels at all
    small = tmp_path / "small.npz"
    np.savez(small, **{k: v for k, v in arrays.items() if not k.startswith("toy/docB/")})
    code, _, err = cli(capsys, "analyze", str(certs), "--operators", str(small), "--out", str(tmp_path / "r.json"),
                       "--plot", str(tmp_path / "f.png"))
    assert code == EXIT_INVALID_INPUT and "is not in the panels" in err


@pytest.mark.slow
def test_analyze_refuses_a_rejected_claim_unless_asked_to_drop_it(toy, tmp_path, capsys):
    panel, certs = toy
    documents = [json.loads(path.read_text()) for path in sorted(certs.rglob("*.json"))]
    document = next(d for d in documents if d["brackets"][0]["upper"]["construction"] not in ("identity", "zero"))
    assert document["brackets"][0]["eps"] == "0.1"
    document["brackets"][0]["eps"] = "0.001"  # the rank-r witness is not that close: REJECTED
    bad = tmp_path / "certs"
    bad.mkdir()
    (bad / "L1H2.json").write_text(json.dumps(document))
    args = ["analyze", str(bad), "--operators", str(panel), "--out", str(tmp_path / "r.json"),
            "--plot", str(tmp_path / "f.png"), "--bootstrap", "50"]
    code, _, err = cli(capsys, *args)
    assert code == 1 and "REJECTED" in err and "--drop-unverified" in err and err.count("\n") == 1
    assert not (tmp_path / "r.json").exists()
    code, stdout, err = cli(capsys, *args, "--drop-unverified", "--json")
    assert code == 0, err
    report = json.loads(stdout)
    assert report["counts"]["dropped_rows"] == 1 and {row["eps"] for row in report["operators"]} == {"0.25", "0.5"}


@pytest.mark.slow
def test_analyze_resume_keeps_finished_operators_after_an_interruption(toy, tmp_path, capsys, monkeypatch):
    """Ctrl-C after five operators: exit 130, five results in REPORT-cache/; --resume computes
    only the other seven and gives the report of one uninterrupted run."""
    import softrank_cert.studies.analyze.study as study

    panel, certs = toy
    real, calls = study.analyze_task, []

    def interrupted_after_five(*args):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(args[1])
        return real(*args)

    args = ["analyze", str(certs), "--operators", str(panel), "--plot", str(tmp_path / "f.png"),
            "--bootstrap", "50", "--json"]
    monkeypatch.setattr(study, "analyze_task", interrupted_after_five)
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "r.json"), "--resume")
    assert code == 130 and not (tmp_path / "r.json").exists()
    assert "r-campaign.json records what finished; continue with: softrank " in err and "--resume" in err, err
    assert len(list((tmp_path / "r-cache").glob("*.json"))) == 5

    def counted(*args):
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(study, "analyze_task", counted)
    calls.clear()
    code, resumed, err = cli(capsys, *args, "--out", str(tmp_path / "r.json"), "--resume")
    assert code == 0, err
    assert len(calls) == 7 and len(list((tmp_path / "r-cache").glob("*.json"))) == 12
    calls.clear()
    code, whole, err = cli(capsys, *args, "--out", str(tmp_path / "whole.json"), "--force")  # f.png exists
    assert code == 0 and len(calls) == 12

    def strip(text: str) -> dict:  # timings and the creation time differ from run to run
        report = {k: v for k, v in json.loads(text).items() if k not in ("seconds", "timing", "generator")}
        report["geometry"] = [{k: v for k, v in g.items() if k != "seconds"} for g in report["geometry"]]
        return report

    assert strip(resumed) == strip(whole)


@pytest.mark.slow
def test_analyze_resume_planted_cache_entry_cannot_count_a_rejected_certificate(toy, tmp_path, capsys):
    """Issue 25 point 3: the cache key is computable from public inputs, so an entry can be
    planted that claims a REJECTED certificate's bracket [1, 2] verified.  The certificate is
    re-verified all the same and the brackets come from that verification (exit 1, as fresh)."""
    from softrank_cert.kernel import DEFAULT_MAX_PREC
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.studies.analyze.study import cache_key

    panel, certs = toy
    source = next(p for p in sorted(certs.rglob("*.json"))
                  if json.loads(p.read_text())["brackets"][0]["upper"]["construction"] not in ("identity", "zero"))
    document = json.loads(source.read_text())
    name = document["operator"]["id"]
    good = tmp_path / "good"
    good.mkdir()
    (good / "one.json").write_text(source.read_text())
    args = ["--operators", str(panel), "--plot", str(tmp_path / "f.png"), "--bootstrap", "50", "--resume"]
    code, _, err = cli(capsys, "analyze", str(good), "--out", str(tmp_path / "r.json"), *args)
    assert code == 0, err
    (entry_path,) = (tmp_path / "r-cache").glob("*.json")
    entry = json.loads(entry_path.read_text())
    document["brackets"][0]["eps"] = "0.001"  # the witness is not that close: REJECTED by the kernel
    bad = tmp_path / "bad"
    bad.mkdir()
    raw = json.dumps(document).encode()
    (bad / "one.json").write_bytes(raw)
    eps_list = [b["eps"] for b in document["brackets"]]
    options = {"trusted_keys": None, "require_signature": False, "drop_unverified": False, "max_prec": DEFAULT_MAX_PREC}
    (item,) = load_operators(panel, [name])
    key = cache_key(item.operator, name, raw, eps_list, None, options)
    scores = next(iter(entry["scores"].values()))
    planted = {**entry, "key": key, "scores": {eps: scores for eps in eps_list},
               "brackets": {eps: {"lower": 1, "upper": 2, "lower_method": "x", "upper_method": "y"} for eps in eps_list},
               "dropped": []}
    (tmp_path / "r-cache" / f"{key}.json").write_text(json.dumps(planted))
    (tmp_path / "r-campaign.json").unlink()  # (it would refuse the other tolerances before the cache is read)
    fresh = cli(capsys, "analyze", str(bad), "--out", str(tmp_path / "fresh.json"), *args[:-1], "--force")  # f.png
    resumed = cli(capsys, "analyze", str(bad), "--out", str(tmp_path / "r.json"), *args)
    assert fresh[0] == resumed[0] == 1 and "REJECTED" in resumed[2], resumed
    assert not (tmp_path / "fresh.json").exists()


def test_analyze_cache_key_has_the_version_and_the_shapes(monkeypatch):
    """Issue 25 point 3: the key includes the software version and the array shapes, so results
    of another kernel (or of an operator with the same bytes in another shape) are not reused."""
    import softrank_cert.plumbing.campaign_inputs as inputs
    from softrank_cert.studies.analyze.study import cache_key

    rng = np.random.default_rng(1)
    Q, K = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    a = Operator("qk", {"Q": Q, "K": K}, beta="1")
    b = Operator("qk", {"Q": Q.reshape(2, 4), "K": K.reshape(2, 4)}, beta="1")  # the same bytes, other shapes
    options = {"trusted_keys": None, "require_signature": False, "drop_unverified": False, "max_prec": 512}
    key = cache_key(a, "x", b"{}", ["0.25"], None, options)
    assert cache_key(b, "x", b"{}", ["0.25"], None, options) != key
    monkeypatch.setattr(inputs, "__version__", "0.0.0-older")
    assert cache_key(a, "x", b"{}", ["0.25"], None, options) != key
