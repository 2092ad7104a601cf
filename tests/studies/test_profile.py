"""Certified rank profiles (issue item 2): ``softrank_cert.profile`` and ``softrank profile``.

* the decimal tolerances next to a float are on the right side and have the promised digits;
* every step of both curves is VERIFIED (and re-verified here, independently, at its tolerance),
  the steps are monotone, the curves never cross, resolved intervals are where they meet;
* certificates read off the profile verify and match the profile's ends;
* the command writes a plot, JSON listing only VERIFIED monotone steps and a certificate, and
  refuses bad input with one line and exit 2, writing nothing.

Operators are small (12 x 12 and 32 x 32) with budgets of one to two seconds.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import softrank_cert as sc
from softrank_cert.kernel import Status, parse_tolerance, verify_lower, verify_trivial_lower, verify_trivial_upper, verify_upper
from softrank_cert.errors import InternalInvariantError
from softrank_cert.studies.profile.curves import (LowerStep, UpperStep, check_profiles, decimal_above, decimal_below,
                                        floor_tolerance, resolved_intervals)

from conftest import assert_one_line_error, run_softrank, run_verify

ROOT = Path(__file__).resolve().parents[2]
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
HEAD = "minilm/apache2/w32/L5H2"


@pytest.fixture(scope="module")
def small_op():
    rng = np.random.default_rng(11)
    return sc.Operator.from_qk(rng.standard_normal((12, 3)), 1.5 * rng.standard_normal((12, 3)))


@pytest.fixture(scope="module")
def prof(small_op):
    return sc.profile(small_op, ["0.05", "0.1", "0.25", "0.5"], budget_seconds=1.5)


@pytest.fixture(scope="module")
def head_file(tmp_path_factory) -> Path:
    """One MiniLM head (32 x 32) as a single-operator .npz."""
    op = sc.load_operator(PANEL, name=HEAD)
    path = tmp_path_factory.mktemp("head") / "head.npz"
    np.savez(path, Q=np.array(op.arrays["Q"]), K=np.array(op.arrays["K"]))
    return path


# --------------------------------------------------------------------------------------
# Decimals
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("x", [1.0, 0.25, 0.2605359452675674, 1e-5, 0.099999999, 3.0, 0.1])
def test_decimals_next_to_a_float(x):
    below, above = decimal_below(x), decimal_above(x)
    q = Fraction(x)
    assert parse_tolerance(below) < q < parse_tolerance(above)
    for text in (below, above):  # at most 6 significant digits
        assert len(text.replace(".", "").strip("0")) <= 6, text
    assert parse_tolerance(decimal_below(x, units=2)) < parse_tolerance(below)
    assert q - parse_tolerance(below) <= q * Fraction(2, 10 ** 5)  # within the 6th digit
    assert parse_tolerance(decimal_below(x, digits=2, strict=False)) <= q
    assert "e" not in below + above


def test_floor_tolerance():
    assert floor_tolerance(["0.02", "0.5"]) == "0.01"
    assert floor_tolerance(["0.3"]) == "0.15"


# --------------------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------------------

def test_every_step_is_verified_and_monotone(prof, small_op):
    lower, upper = prof.lower, prof.upper
    assert lower and upper and lower[0].k == 1 and upper[0].r == 0 and upper[-1].r == small_op.p
    assert [s.k for s in lower] == sorted({s.k for s in lower})
    assert all(a.value > b.value for a, b in zip(lower, lower[1:]))
    assert [s.r for s in upper] == sorted({s.r for s in upper})
    assert all(a.value > b.value for a, b in zip(upper, upper[1:]))
    for s in lower:
        assert s.verdict.status is Status.VERIFIED and s.verdict.eps == s.eps and s.verdict.rank == s.k
        again = (verify_trivial_lower(small_op, s.eps, 1) if s.X is None else
                 verify_lower(small_op, s.eps, s.k, s.X, s.Y, engine="arb"))
        assert again.status is Status.VERIFIED, s
    for s in upper:
        assert s.verdict.status is Status.VERIFIED and s.verdict.eps == s.eps and s.verdict.rank == s.r
        again = (verify_trivial_upper(small_op, s.eps, s.r) if s.U is None else
                 verify_upper(small_op, s.eps, s.r, s.U, s.W, engine="arb"))
        assert again.status is Status.VERIFIED, s


def test_curves_bound_each_other(prof):
    for eps in ("0.01", "0.03", "0.05", "0.0777", "0.1", "0.2", "0.25", "0.4", "0.5", "0.9", "0.99", "1", "2"):
        lo, up = prof.ends_at(eps)
        assert 0 <= lo <= up <= prof.operator.p, (eps, lo, up)
    assert prof.ends_at("1") == (0, 0) and prof.ends_at("0.5")[0] >= 1
    for interval in prof.resolved:
        inside = interval.high if interval.high_included else decimal_below(parse_tolerance(interval.high), digits=12)
        assert prof.ends_at(inside) == (interval.rank, interval.rank)


def test_certificates_read_off_the_profile(prof, tmp_path):
    result = prof.bracket(["0.1", "0.25", "0.333"])
    assert [(result.lower[e], result.upper[e]) for e in result.eps] == [prof.ends_at(e) for e in result.eps]
    path = result.save(tmp_path / "cert.json")
    report = sc.verify(path)
    assert report.ok and [(lo.rank, up.rank) for lo, up in report.pairs] == [prof.ends_at(e) for e in result.eps]


def test_json_lists_verified_steps(prof):
    doc = prof.to_json(marks=["0.333"])
    json.dumps(doc)
    assert doc["format"] == "softrank-profile-report" and {"0.333", "0.1"} <= {b["eps"] for b in doc["brackets"]}
    assert all(s["verdict"] == "VERIFIED" for s in doc["lower"] + doc["upper"])
    assert [s["k"] for s in doc["lower"]] == [s.k for s in prof.lower]


def test_resolved_intervals_from_synthetic_steps():
    lower = [LowerStep(1, "0.9", "trivial", 1.0), LowerStep(2, "0.5", "m", 0.5), LowerStep(3, "0.2", "m", 0.2)]
    upper = [UpperStep(0, "1", "zero", 1.0), UpperStep(1, "0.6", "c", 0.6), UpperStep(2, "0.4", "c", 0.4),
             UpperStep(4, "0.1", "c", 0.1), UpperStep(8, "0.05", "identity", 0.0)]
    got = [(iv.rank, iv.low, iv.low_included, iv.high, iv.high_included) for iv in resolved_intervals(lower, upper)]
    # L = 1 on (0.5, 0.9], U = 1 on [0.6, 1): meet on [0.6, 0.9]; L = 2 on (0.2, 0.5], U = 2 on [0.4, 0.6)
    assert got == [(2, "0.4", True, "0.5", True), (1, "0.6", True, "0.9", True)]
    full = [LowerStep(1, "0.9", "trivial", 1.0), LowerStep(8, "0.08", "m", 0.08)]
    (iv,) = [iv for iv in resolved_intervals(full, upper) if iv.rank == 8]
    assert (iv.low, iv.low_included, iv.high, iv.high_included) == ("0", False, "0.08", True)  # r_eps = p for eps <= t_p
    check_profiles(full, upper, "synthetic")
    with pytest.raises(InternalInvariantError):
        check_profiles([LowerStep(8, "0.3", "m", 0.3)], upper, "synthetic")  # r_eps >= 8 at 0.3 but <= 4 at 0.1


def test_profile_figure(prof, tmp_path):
    import matplotlib.pyplot as plt

    for yscale in ("log", "linear"):
        fig = prof.figure(marks=["0.25"], yscale=yscale)
        fig.savefig(tmp_path / f"p-{yscale}.png")
        plt.close(fig)
        assert (tmp_path / f"p-{yscale}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------
# softrank profile
# --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_profile_writes_plot_json_and_certificate(head_file, tmp_path):
    plot, cert = tmp_path / "out" / "profile.svg", tmp_path / "cert.json"
    res = run_softrank("profile", head_file, "--plot", plot, "--json", "--eps", "0.1,0.25", "--out", cert,
                       "--grid", "0.05,0.1,0.2,0.5", "--budget-seconds", "1.5", timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["operator"] == "head" and doc["plot"] == str(plot) and doc["certificate"] == str(cert)
    assert doc["grid"] == ["0.05", "0.1", "0.2", "0.25", "0.5"]
    for side, rank in (("lower", "k"), ("upper", "r")):
        steps = doc[side]
        assert steps and all(s["verdict"] == "VERIFIED" for s in steps)
        assert [s[rank] for s in steps] == sorted({s[rank] for s in steps})
        values = [parse_tolerance(s["eps"]) for s in steps]
        assert all(a > b for a, b in zip(values, values[1:]))
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()[:2000]
    ends = {b["eps"]: (b["lower"], b["upper"]) for b in doc["brackets"]}
    verified = run_verify(cert, "--json")
    assert verified.returncode == 0, verified.stdout
    claims = json.loads(verified.stdout)["files"][0]["claims"]
    assert [(c["eps"], c["rank"]) for c in claims] == [("0.1", ends["0.1"][0]), ("0.1", ends["0.1"][1]),
                                                        ("0.25", ends["0.25"][0]), ("0.25", ends["0.25"][1])]
    assert res.stderr_lines[-1].startswith("softrank profile: [1/1] head: ")  # stderr is not a terminal here


def test_cli_profile_table(head_file, tmp_path):
    res = run_softrank("profile", head_file, "--grid", "0.1,0.3", "--budget-seconds", "0.5", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "softrank profile of head (32 x 32 qk, p = 32)" in res.stdout and "resolved:" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["--out", "{tmp}/c.json"], "--out needs --eps"),
    (["--plot", "{tmp}/p.txt"], "unsupported file type"),
    (["--plot", "{tmp}/"], "is a folder"),
    (["--eps", "0.1,abc", "--out", "{tmp}/c.json"], "--eps"),
    (["--grid", "0.1,0.1"], "twice"),
    (["--eps", "0.25", "--out", "{tmp}/same.png", "--plot", "{tmp}/same.png"], "name the same file"),
    (["--budget-seconds", "0"], "--budget-seconds"),
    (["--key", "{tmp}/c.json"], "--key"),
    (["--operator", "nope"], "no operator named"),
])
def test_cli_profile_refuses_bad_input(head_file, tmp_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = run_softrank("profile", head_file, *args)
    assert_one_line_error(res, 2)
    assert message in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_cli_profile_refuses_bad_operators(tmp_path):
    res = run_softrank("profile", PANEL, "--plot", tmp_path / "p.png")
    assert_one_line_error(res, 2)
    assert "holds 6 operators" in res.stderr
    res = run_softrank("profile", tmp_path / "missing.npz")
    assert_one_line_error(res, 2)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    res = run_softrank("profile", tmp_path / "junk.npz", "--plot", tmp_path / "p.png")
    assert_one_line_error(res, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.npz"]
