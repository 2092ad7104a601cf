"""``softrank supports`` at scale (issues 24 and 26 point 5): ``--out`` certificates that verify,
``--resume`` after a real interruption gives the same report, the figure draws only certified
points (vertical brackets, no band, legible legends), and bad sizes / ranges exit 2 in one line.

Operators are small (N = 12 and 48) and run with the default budget, the driver's deterministic
work budget (issue 26): reruns give the same brackets, byte for byte, on a loaded machine too."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from softrank_cert.plumbing.campaign import MANIFEST_NAME  # noqa: E402
from softrank_cert.plumbing.json_contract import validate_report  # noqa: E402
from softrank_cert.solvers.work import default_work  # noqa: E402
from softrank_cert.studies.supports.plot import sweeps_figure  # noqa: E402
from tests.helpers import softrank_in_process as run

# the default work budget: the brackets do not depend on the load (about a second)
SWEEP = ["supports", "sphere", "--dim", "2", "--n", "12", "--x-min", "4", "--x-max", "64", "--points", "3"]
#: About 7 s, 5 of them in the last point: time to interrupt the run after the first points.
SLOWER_SWEEP = ["supports", "sphere", "--dim", "2", "--n", "48", "--x-min", "4", "--x-max", "1024", "--points", "3"]


def certified_view(doc: dict) -> tuple:
    """What a report certifies: the points' ends and the local-exponent intervals."""
    return ([(pt["kappa"], pt["lower"], pt["upper"]) for pt in doc["points"]],
            [(row["x1"], row["x2"], row["lower"], row["upper"], row["verdict"]) for row in doc["local_exponents"]])


def test_out_writes_a_verifying_certificate_per_point_and_a_valid_report(tmp_path):
    code, out, err = run(*SWEEP, "--out", tmp_path / "certs", "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate_report(doc)
    assert doc["campaign"]["computed"] == 3 and doc["campaign"]["kept"] == 0
    files = sorted(p.name for p in (tmp_path / "certs").glob("*.json") if p.name != MANIFEST_NAME)
    assert len(files) == 3 and all(pt["certificate"] for pt in doc["points"])
    for pt in doc["points"]:
        assert pt["x"] == 1 + pt["kappa"] * 16 and 0 <= pt["estimates"]["max_row_entry"] <= 1
    verify = subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", str(tmp_path / "certs"), "--json"],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stderr
    report = json.loads(verify.stdout)
    claims = [c for f in report["files"] for c in f.get("claims", [])]  # the manifest is listed as skipped
    assert len(claims) == 6 and all(c["verdict"] == "VERIFIED" for c in claims)
    manifest = json.loads((tmp_path / "certs" / MANIFEST_NAME).read_text())
    assert manifest["command"] == "supports" and manifest["state"] == "complete"
    assert manifest["budget_work"] == doc["budget_work"] == default_work(12, 12)  # the driver's default for 12 x 12


def brackets_text(folder) -> dict:
    """Each certificate's brackets (ends, methods, base64 factors), as the bytes of their JSON;
    the rest of a certificate also holds its creation time."""
    return {p.name: json.dumps(json.loads(p.read_bytes())["brackets"], sort_keys=True).encode()
            for p in sorted(folder.glob("*.json")) if p.name != MANIFEST_NAME}


def test_the_same_command_twice_writes_byte_identical_brackets(tmp_path):
    for run_folder in ("a", "b"):
        code, _, err = run(*SWEEP, "--out", tmp_path / run_folder)
        assert code == 0, err
    first, second = brackets_text(tmp_path / "a"), brackets_text(tmp_path / "b")
    assert len(first) == 3 and first == second


def test_work_option_is_recorded_and_bounds_the_search(tmp_path):
    code, out, err = run(*SWEEP, "--work", "2", "--out", tmp_path / "w", "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate_report(doc)
    assert doc["budget_work"] == 2.0 and doc["budget_seconds"] is None
    assert json.loads((tmp_path / "w" / MANIFEST_NAME).read_text())["budget_work"] == 2.0
    code, out, err = run(*SWEEP, "--budget-seconds", "inf", "--json")  # a time-only budget: unbounded work
    assert code == 0 and json.loads(out)["budget_work"] is None and json.loads(out)["budget_seconds"] == "inf", err


@pytest.mark.slow
def test_resume_after_an_interruption_gives_the_same_report(tmp_path):
    code, out, err = run(*SLOWER_SWEEP, "--json")
    assert code == 0, err
    reference = json.loads(out)
    folder = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a slower first point: the sweep is interrupted (SIGINT) once one certificate is on disk
    proc = subprocess.Popen([sys.executable, "-m", "softrank_cert.cli.main", *SLOWER_SWEEP, "--out", str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C as at a terminal
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        manifest = folder / MANIFEST_NAME
        if manifest.is_file():
            try:
                done = [e for e in json.loads(manifest.read_text())["operators"].values() if e["status"] == "done"]
            except ValueError:
                done = []
            if done:
                break
        time.sleep(0.02)
    interrupted = proc.poll() is None
    if interrupted:
        proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (0, 130), stderr  # 0 only if the last point finished before the signal arrived
    if interrupted and proc.returncode == 130:
        # the message names the exact command that continues
        assert f"continue with: softrank {shlex.join([*SLOWER_SWEEP, '--out', str(folder), '--resume'])}" in stderr
        state = json.loads((folder / MANIFEST_NAME).read_text())["state"]
        assert state == "interrupted"
    code, out, err = run(*SLOWER_SWEEP, "--out", folder, "--resume", "--json")
    assert code == 0, err
    resumed = json.loads(out)
    assert resumed["campaign"]["kept"] >= 1  # at least the finished point was kept, re-verified
    assert certified_view(resumed) == certified_view(reference)
    assert any(pt["resumed"] for pt in resumed["points"])


def test_resume_recomputes_a_tampered_certificate(tmp_path):
    folder = tmp_path / "run"
    assert run(*SWEEP, "--out", folder)[0] == 0
    victim = sorted(p for p in folder.glob("*.json") if p.name != MANIFEST_NAME)[-1]
    text = victim.read_text()
    victim.write_text(text.replace('"k": ', '"k": 1', 1) if '"k": ' in text else text + "x")
    code, out, err = run(*SWEEP, "--out", folder, "--resume", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["campaign"]["kept"] == 2 and doc["campaign"]["computed"] == 1


def test_resume_with_another_sweep_or_eps_is_refused_naming_both(tmp_path):
    folder = tmp_path / "run"
    assert run(*SWEEP, "--out", folder)[0] == 0
    before = (folder / MANIFEST_NAME).read_bytes()
    other_n = [a if a != "12" else "16" for a in SWEEP]
    code, _, err = run(*other_n, "--out", folder, "--resume")
    assert code == 2 and "--n 12" in err and "--n 16" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run(*SWEEP, "--dim", "3", "--out", folder, "--resume")
    assert code == 2 and "--dim 2" in err and "--dim 3" in err, err
    code, _, err = run(*SWEEP, "--points", "4", "--out", folder, "--resume")
    assert code == 2 and "--kappas" in err, err
    assert (folder / MANIFEST_NAME).read_bytes() == before  # a refused resume writes nothing


def test_resume_with_another_eps_is_refused_naming_both(tmp_path):
    folder = tmp_path / "run"
    kappas = ["supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2"]
    assert run(*kappas, "--out", folder)[0] == 0
    code, _, err = run(*kappas, "--eps", "0.5", "--out", folder, "--resume")
    assert code == 2 and "--eps 0.25" in err and "--eps 0.5" in err, err


def test_a_failed_point_is_recorded_and_the_sweep_exits_6(tmp_path, monkeypatch):
    import softrank_cert.studies.supports.campaign as campaign_module
    from softrank_cert.errors import EXIT_SOME_FAILED, InvalidInputError

    real = campaign_module.support_point_task

    def failing_at_the_second_point(support, dim, n, kappa, *rest):
        if kappa == 2.0:
            raise InvalidInputError("planted failure")
        return real(support, dim, n, kappa, *rest)

    monkeypatch.setattr(campaign_module, "support_point_task", failing_at_the_second_point)
    folder = tmp_path / "run"
    code, out, err = run("supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2,4", "--out", folder,
                         "--json")
    assert code == EXIT_SOME_FAILED, err
    doc = json.loads(out)
    validate_report(doc)
    assert [f["kappa"] for f in doc["failed"]] == [2.0] and "planted failure" in doc["failed"][0]["reason"]
    assert [pt["kappa"] for pt in doc["points"]] == [0.5, 4.0]
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    assert manifest["state"] == "incomplete"
    assert sorted(e["status"] for e in manifest["operators"].values()) == ["done", "done", "failed"]
    monkeypatch.undo()
    code, out, err = run("supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2,4", "--out", folder,
                         "--resume", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["campaign"]["kept"] == 2 and doc["campaign"]["computed"] == 1 and not doc["failed"]


def sweep_doc() -> dict:
    points = [{"kappa": k, "x": 1 + 16 * k, "eps": "0.25", "lower": lo, "upper": up, "p": 12} for k, lo, up in
              ((0.1875, 1, 1), (0.9375, 3, 3), (3.9375, 6, 7))]
    return {"support": "sphere", "dim": 2, "eps": "0.25", "n": 12, "exponent_theory": 0.5, "points": points,
            "estimates": {"exponent_fit_lower": 0.6, "exponent_fit_upper": 0.66},
            "local_exponents": [{"x1": 4.0, "x2": 16.0, "lower": "7.9e-01", "upper": "8.0e-01"},
                                {"x1": 16.0, "x2": 64.0, "lower": "4.9e-01", "upper": "6.2e-01"},
                                ]}


def test_figure_draws_only_certified_points_with_their_brackets():
    fig = sweeps_figure([sweep_doc()])
    ranks_ax, exp_ax, ranks_legend, exp_legend = fig.axes
    from matplotlib.collections import PolyCollection

    assert not ranks_ax.collections  # no band (fill_between) between the sampled ranks
    assert not any(isinstance(c, PolyCollection) for c in exp_ax.collections)
    (bracket,) = [line for line in ranks_ax.get_lines() if "certified bracket" in line.get_label()]
    xs, ys = bracket.get_xdata(), bracket.get_ydata()
    segments = [(xs[i], xs[i + 1], ys[i], ys[i + 1]) for i in range(len(xs) - 1)
                if not (math.isnan(xs[i]) or math.isnan(xs[i + 1]))]
    assert len(segments) == 3 and all(a == b for a, b, _, _ in segments)  # vertical bars, nothing between points
    assert sorted((lo, hi) for _, _, lo, hi in segments) == [(1, 1), (3, 3), (6, 7)]
    intervals = [line for line in exp_ax.get_lines() if len(line.get_xdata()) == 2 and line.get_linestyle() == "-"]
    assert sorted(tuple(line.get_ydata()) for line in intervals) == [(0.49, 0.62), (0.79, 0.8)]
    for ax in (ranks_legend, exp_legend):  # the legends have a row of their own below the panels
        legend = ax.get_legend()
        texts = [t.get_text() for t in legend.get_texts()]
        assert all(t.get_fontsize() >= 10 for t in legend.get_texts())
        assert not any("shaded" in t or "band" in t for t in texts)
        assert all("reference" in t for t in texts if "theory" in t)  # theory is never drawn as a measurement
    assert any("certified local-exponent interval" in t.get_text() for t in exp_legend.get_legend().get_texts())
    plt.close(fig)


@pytest.mark.parametrize("argv, needle", [
    (["--dim", "2", "--n", "513"], "--n must be an integer in [2, 512]"),
    (["--dim", "1", "--n", "1025"], "[2, 1024]"),
    (["--dim", "2", "--n", "1"], "--n must be"),
    (["--dim", "2", "--x-min", "0.5"], "1 < --x-min < --x-max"),
    (["--dim", "2", "--x-min", "100", "--x-max", "10"], "1 < --x-min < --x-max"),
    (["--dim", "2", "--x-max", "1e7"], "1 < --x-min < --x-max"),
    (["--dim", "2", "--points", "1"], "--points"),
    (["--dim", "2", "--points", "40"], "--points"),
    (["--dim", "2", "--resume"], "--resume needs --out"),
    (["--dim", "2", "--budget-seconds", "0"], "--budget-seconds"),
    (["--dim", "2", "--geometry-ranks", "0"], "--geometry-ranks"),
])
def test_refusals_exit_2_in_one_line(argv, needle, tmp_path):
    code, _, err = run("supports", "sphere", *argv)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
