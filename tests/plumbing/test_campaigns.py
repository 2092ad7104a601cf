"""Campaigns that survive (issue: resume, lost workers, memory limits, full disks).

Tiny MiniLM panels (widths 8 and 16, 4 heads) and no time budget (``--budget-seconds inf``), so
every run does the same computation and an interrupted-then-resumed campaign must give exactly
the certificates of an uninterrupted one (compared on operator and brackets, not timestamps).
Faults are injected for real: a parent killed with SIGINT / SIGKILL midway, a worker process
killed under its task (by itself through a wrapper script, and from outside), a Dask worker
killed mid-campaign on a loopback LocalCluster, an address-space limit (``RLIMIT_AS``) under
``softrank-verify``, a write that fails with ENOSPC and a tiny tmpfs.  Whole file: well under
three minutes on two cores.
"""

from __future__ import annotations

import errno
import json
import operator
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.plumbing.campaign import MANIFEST_NAME
from softrank_cert.errors import EXIT_INVALID_INPUT, EXIT_NOT_CHECKED, EXIT_SOME_FAILED
from softrank_cert.plumbing.parallel import run_tasks
from tests.helpers import certificate_contents as contents

EPS = "0.1,0.25,0.5"
TIMEOUT = 150
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       "PYTHONWARNINGS": "ignore"}


def softrank(*args: str, script: Path | None = None, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    command = [sys.executable, str(script)] if script else [sys.executable, "-m", "softrank_cert.cli.main"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=TIMEOUT,
                          env={**ENV, **(env or {})}, **kwargs)


def start(*args: str, gate: Path | None = None) -> subprocess.Popen:
    """``softrank ARGS`` in the background; with ``gate`` (an empty folder) only the first
    operator's search runs before a signal (``gated_softrank.py``)."""
    if gate is None:
        command, env = [sys.executable, "-m", "softrank_cert.cli.main"], ENV
    else:
        command, env = [sys.executable, str(Path(__file__).with_name("gated_softrank.py"))], {**ENV, "SOFTRANK_TEST_GATE": str(gate)}
    return subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """Ctrl-C as at a terminal: a suite started in the background of a non-interactive shell
    inherits SIGINT ignored, and Python then leaves it ignored in every child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST_NAME).read_text())


def leftovers(folder: Path) -> list[Path]:
    """Temporary files of atomic writes (``.NAME.xxxx.tmp``): there must never be any after a run."""
    return [p for p in folder.rglob(".*") if p.is_file()]


def one_line(text: str) -> bool:
    return text.strip().count("\n") == 0 and "Traceback" not in text


def error_line(stderr: str) -> str:
    """The one error line of a run whose progress lines (one per finished operator) precede it."""
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    assert stderr.rstrip("\n").splitlines()[-1] == errors[0], stderr
    return errors[0]


def _panel(tmp_path_factory, width: int) -> Path:
    from softrank_cert.models import build_panel, write_panel

    arrays = build_panel("minilm", ROOT / "examples/data/apache2.txt", [width], layers=[0, 1], heads=[0, 5])
    return write_panel(tmp_path_factory.mktemp(f"panel{width}") / f"w{width}.npz", arrays)


@pytest.fixture(scope="module")
def panel8(tmp_path_factory) -> Path:
    return _panel(tmp_path_factory, 8)


@pytest.fixture(scope="module")
def panel16(tmp_path_factory) -> Path:
    return _panel(tmp_path_factory, 16)


def _reference(panel: Path, tmp_path_factory) -> dict[str, tuple]:
    out = tmp_path_factory.mktemp("reference") / "certs"
    run = softrank("bracket", str(panel), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf")
    assert run.returncode == 0, run.stderr
    return contents(out)


@pytest.fixture(scope="module")
def reference8(panel8, tmp_path_factory) -> dict[str, tuple]:
    return _reference(panel8, tmp_path_factory)


@pytest.fixture(scope="module")
def reference16(panel16, tmp_path_factory) -> dict[str, tuple]:
    return _reference(panel16, tmp_path_factory)


def _wait_for_done(folder: Path, process: subprocess.Popen, count: int = 1, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if manifest(folder)["summary"].get("done", 0) >= count:
                return
        except (OSError, ValueError, KeyError):
            pass
        assert process.poll() is None, "the campaign ended before it could be interrupted"
        time.sleep(0.02)
    raise AssertionError("no operator finished in time")


def _wait_for_held(gate: Path, process: subprocess.Popen, timeout: float = 90) -> None:
    """Wait until ``gated_softrank.py`` let one search through and holds a later one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (gate / "first").exists() and any(gate.glob("waiting-*")):
            return
        assert process.poll() is None, "the campaign ended before it could be interrupted"
        time.sleep(0.02)
    raise AssertionError(f"the gate holds no search: {sorted(p.name for p in gate.iterdir())}")


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --------------------------------------------------------------------------------------
# 1. Resume: interrupted (SIGINT, SIGKILL) and resumed == uninterrupted
# --------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("how, jobs", [(signal.SIGINT, "1"), (signal.SIGTERM, "2"), (signal.SIGKILL, "2")],
                         ids=["sigint-serial", "sigterm-jobs2", "sigkill-jobs2"])
def test_interrupted_campaign_resumes_to_the_same_certificates(panel16, reference16, tmp_path, how, jobs):
    out, gate = tmp_path / "certs", tmp_path / "gate"
    gate.mkdir()
    args = ("bracket", str(panel16), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf", "--jobs", jobs)
    process = start(*args, gate=gate)  # one operator finishes, the others wait for the signal
    try:
        _wait_for_done(out, process)
        _wait_for_held(gate, process)  # the gate is on the search's path and holds the next operator
        workers = _children(process.pid)
        process.send_signal(how)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    if how in (signal.SIGINT, signal.SIGTERM):  # SIGTERM (kill, batch schedulers): the same clean stop
        assert process.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr, stderr
        # issue 26 point 3: the message names the exact command that continues the campaign
        assert "continue with: " + shlex.join(["softrank", *args, "--resume"]) in stderr, stderr
    else:
        assert process.returncode == -signal.SIGKILL
    if how != signal.SIGINT:  # the workers (not in the parent's Ctrl-C) must not outlive it
        deadline = time.monotonic() + 120  # orphaned workers notice that their client is gone (a hang guard)
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in workers)
    state = manifest(out)  # the manifest is whole (atomic writes) and knows what finished
    done = [name for name, entry in state["operators"].items() if entry["status"] == "done"]
    assert len(done) == 1 and state["state"] == ("running" if how == signal.SIGKILL else "interrupted")
    assert state["tolerances"] == EPS.split(",") and state["budget_seconds"] == "inf"
    assert not leftovers(out)
    for name in done:  # whatever the manifest calls done is on disk, complete
        assert (out / state["operators"][name]["output"]).is_file()

    run = softrank(*args, "--resume", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["campaign"]["kept"] >= len(done) and summary["campaign"]["computed"] == 4 - summary["campaign"]["kept"]
    assert [entry["operator"] for entry in summary["operators"]] == sorted(state["operators"])
    assert contents(out) == reference16
    final = manifest(out)
    assert final["state"] == "complete" and final["summary"]["done"] == 4 and len(final["runs"]) == 2
    assert all(entry["seconds"] is not None for entry in final["operators"].values())
    # the task's own wall time (kept across the resume) covers the solver's search in it
    assert all(entry["task_seconds"] >= entry["seconds"] for entry in final["operators"].values())


@pytest.mark.slow
def test_resume_recomputes_exactly_what_does_not_check(panel8, reference8, tmp_path):
    out = tmp_path / "certs"
    args = ("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf", "--json")
    assert softrank(*args).returncode == 0
    certs = sorted(p for p in out.rglob("*.json") if p.name != MANIFEST_NAME)
    certs[0].unlink()                                        # missing
    text = certs[1].read_text()
    certs[1].write_text(text.replace('"data": "', '"data": "A', 1))  # tampered: its hash no longer matches
    certs[2].write_text(certs[3].read_text())                # a valid certificate, but of another operator
    run = softrank(*args, "--resume")
    assert run.returncode == 0, run.stderr
    campaign = json.loads(run.stdout)["campaign"]
    assert (campaign["kept"], campaign["computed"]) == (1, 3)
    notes = {name: entry.get("reason") for name, entry in manifest(out)["operators"].items()}
    assert contents(out) == reference8 and all(note is None for note in notes.values())
    # Other tolerances: refused, naming both (issue 26 point 3: never a silent mix of old and new).
    run = softrank("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out), "--budget-seconds", "inf",
                   "--resume")
    assert run.returncode == EXIT_INVALID_INPUT and one_line(run.stderr), run.stderr
    assert "--eps 0.1,0.25,0.5" in run.stderr and "--eps 0.25" in run.stderr
    assert contents(out) == reference8  # nothing was touched


def test_resume_with_a_key_keeps_only_certificates_signed_by_it(panel8, tmp_path):
    key = tmp_path / "issuer.key"
    assert softrank("keygen", "--out", str(key)).returncode == 0
    out = tmp_path / "certs"
    args = ("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out), "--budget-seconds", "inf", "--json")
    assert softrank(*args).returncode == 0  # unsigned
    run = softrank(*args, "--resume", "--key", str(key))
    assert run.returncode == 0 and json.loads(run.stdout)["campaign"]["kept"] == 0
    run = softrank(*args, "--resume", "--key", str(key))
    assert run.returncode == 0 and json.loads(run.stdout)["campaign"]["kept"] == 4
    assert manifest(out)["signer"].startswith("did:key:")


def test_resume_needs_a_folder(panel8, tmp_path):
    run = softrank("bracket", str(panel8), "--operator", "minilm/apache2/w8/L0H0", "--eps", "0.25",
                   "--out", str(tmp_path / "one.json"), "--resume")
    assert run.returncode == EXIT_INVALID_INPUT and one_line(run.stderr) and "--resume" in run.stderr


def test_budgets_resume_keeps_recorded_results(panel8, tmp_path):
    out = tmp_path / "budgets.json"
    args = ("budgets", str(panel8), "--budgets", "2,4", "--eps", "0.25", "--budget-seconds", "inf", "--out", str(out),
            "--json")
    first = softrank(*args, "--resume")  # the first run of a resumable study: writes the manifest
    assert first.returncode == 0, first.stderr
    again = softrank(*args, "--resume")
    assert again.returncode == 0, again.stderr
    strip = lambda doc: [{k: v for k, v in item.items() if k != "seconds"} for item in doc["operators"]]  # noqa: E731
    assert strip(json.loads(again.stdout)) == strip(json.loads(first.stdout))
    state = json.loads((tmp_path / "budgets-campaign.json").read_text())
    assert state["runs"][-1]["skipped"] == 4 and state["runs"][-1]["computed"] == 0
    assert all(entry["task_seconds"] > 0 for entry in state["operators"].values())  # kept from the first run
    # Results recorded in another shape (a manifest from before a change of it) are recomputed.
    path = tmp_path / "budgets-campaign.json"
    for entry in state["operators"].values():
        entry["result_version"] = 1
    path.write_text(json.dumps(state))
    third = softrank(*args, "--resume")
    assert third.returncode == 0, third.stderr
    assert strip(json.loads(third.stdout)) == strip(json.loads(first.stdout))
    state = json.loads(path.read_text())
    assert state["runs"][-1]["skipped"] == 0 and state["runs"][-1]["computed"] == 4


def test_audit_resume_keeps_unchanged_operators(panel8, tmp_path):
    from softrank_cert.util.operator_files import operator_names

    table = tmp_path / "table.jsonl"
    names = operator_names(panel8)
    table.write_text("".join(json.dumps({"operator": name, "eps": "0.25", "lower": 1, "upper": 2}) + "\n"
                             for name in names))
    out = tmp_path / "audit.json"
    args = ("audit", str(table), "--operators", str(panel8), "--out", str(out), "--budget-seconds", "inf", "--json",
            "--resume")
    first = softrank(*args)
    assert first.returncode == 0, first.stderr
    state = json.loads((tmp_path / "audit-campaign.json").read_text())
    assert state["summary"]["done"] == 4 and state["command"] == "audit"
    assert any(entry["result"]["evidence"] for entry in state["operators"].values())  # some row is tightened
    # A changed row (operator 0) is audited again; the three others are kept, evidence re-verified.
    lines = table.read_text().splitlines()
    lines[0] = json.dumps({"operator": names[0], "eps": "0.25", "lower": 1, "upper": 3})
    table.write_text("\n".join(lines) + "\n")
    again = softrank(*args)
    assert again.returncode == 0, again.stderr
    state = json.loads((tmp_path / "audit-campaign.json").read_text())
    assert (state["runs"][-1]["skipped"], state["runs"][-1]["computed"]) == (3, 1)
    assert all(entry["task_seconds"] > 0 for entry in state["operators"].values())
    # A recorded result of another shape (an older manifest) is recomputed, not mixed in.
    path = tmp_path / "audit-campaign.json"
    state["operators"][names[1]].pop("result_version")
    path.write_text(json.dumps(state))
    third = softrank(*args)
    assert third.returncode == 0, third.stderr
    state = json.loads(path.read_text())
    assert (state["runs"][-1]["skipped"], state["runs"][-1]["computed"]) == (3, 1)
    assert state["operators"][names[1]]["resumed"] is False and state["operators"][names[1]]["result_version"] == 3
    strip = lambda doc: [{k: v for k, v in row.items() if k != "evidence"} for row in doc["rows"]][1:]  # noqa: E731
    assert strip(json.loads(again.stdout)) == strip(json.loads(first.stdout))
    # the state folder keeps every operator's reproduction; evidence is issued again from it
    assert len(list((tmp_path / "audit-campaign").rglob("*.json"))) == 4
    from softrank_cert.verification import verify_certificate_file

    evidence = list((tmp_path / "audit-evidence").rglob("*.json"))
    assert evidence and all(verify_certificate_file(path).ok for path in evidence)


# --------------------------------------------------------------------------------------
# 2. Faults in workers
# --------------------------------------------------------------------------------------

INJECT = '''
import os, signal, sys
from pathlib import Path

import softrank_cert.plumbing.bracketing as bracketing

_original = bracketing.issue_packed


def issue_packed(spec, *args):
    """Kill this worker (SIGKILL, as the OOM killer would) under the target operator's task:
    on its first attempt only (mode "once") or on every attempt (mode "always")."""
    if float(spec["arrays"]["Q"][0, 0]) == float(os.environ["FAULT_TARGET"]):
        marker = Path(os.environ["FAULT_MARKER"])
        first = not marker.exists()
        with marker.open("a") as handle:
            handle.write(f"{os.getpid()}\\n")
        if first or os.environ["FAULT_MODE"] == "always":
            os.kill(os.getpid(), signal.SIGKILL)
    return _original(spec, *args)


bracketing.issue_packed = issue_packed  # also in the workers: spawn re-imports this file first

if __name__ == "__main__":
    from softrank_cert.cli.main import main

    sys.argv[0] = "softrank"
    main()
'''


def _inject(tmp_path: Path, panel: Path, mode: str) -> tuple[Path, dict, str]:
    from softrank_cert.util.operator_files import load_operators

    target = load_operators(panel)[1]
    script = tmp_path / "inject.py"
    script.write_text(INJECT)
    env = {"FAULT_TARGET": repr(float(target.operator.arrays["Q"][0, 0])), "FAULT_MARKER": str(tmp_path / "attempts"),
           "FAULT_MODE": mode}
    return script, env, target.name


def test_worker_killed_under_its_task_costs_one_retry(panel8, reference8, tmp_path):
    script, env, name = _inject(tmp_path, panel8, "once")
    out = tmp_path / "certs"
    run = softrank("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf",
                   "--jobs", "2", script=script, env=env)
    assert run.returncode == 0, run.stderr
    assert contents(out) == reference8
    pids = (tmp_path / "attempts").read_text().split()
    assert len(pids) == 2 and pids[0] != pids[1]  # the retry ran in a fresh worker
    entry = manifest(out)["operators"][name]
    assert entry["status"] == "done" and entry["attempts"] == 2


@pytest.mark.slow
def test_task_failing_twice_is_recorded_and_the_campaign_completes(panel8, reference8, tmp_path):
    script, env, name = _inject(tmp_path, panel8, "always")
    out = tmp_path / "certs"
    run = softrank("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf",
                   "--jobs", "2", "--json", script=script, env=env)
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    summary = json.loads(run.stdout)
    assert [entry["operator"] for entry in summary["failed"]] == [name]
    entry = manifest(out)["operators"][name]
    assert entry["status"] == "failed" and entry["attempts"] == 2
    assert entry["seconds"] is None and entry["task_seconds"] > 0  # no solver result; the attempt's time
    assert "SIGKILL" in entry["reason"] and "\n" not in entry["reason"]
    assert manifest(out)["state"] == "incomplete"
    got = contents(out)
    assert len(got) == 3 and all(reference8[path] == value for path, value in got.items())
    assert len((tmp_path / "attempts").read_text().split()) == 2


def tamper(function: str, target: str) -> tuple[Path, dict]:
    """``tamper_softrank.py`` and its environment: the task ``function``'s certificates about
    operator ``target`` come back from the workers with a false claim (``r_eps <= 0`` at the first
    tolerance, which decodes)."""
    return Path(__file__).with_name("tamper_softrank.py"), {"SOFTRANK_TEST_TAMPER": function,
                                                             "SOFTRANK_TEST_TAMPER_TARGET": target}


def unverified(eps: str) -> str:
    """The reason a campaign records for a tampered certificate from a worker."""
    return (f"does not verify in this process: certificate has a claim that is not VERIFIED (r_eps <= 0 (upper end) "
            f"at eps {eps} is REJECTED)")


@pytest.mark.slow
def test_worker_certificate_that_does_not_verify_is_not_written(panel8, reference8, tmp_path):
    """A worker process returns a certificate with a false claim (plain data: nothing vouches for
    it): the campaign re-verifies it in the signing process, writes and signs nothing of it,
    records the operator as failed with the kernel's reason and exits 6; --resume computes it
    again (here with honest workers) and the folder ends up as an untampered run's."""
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.verification import verify_certificate_file

    target = load_operators(panel8)[1]
    script, env = tamper("softrank_cert.plumbing.bracketing:issue_packed", target.name)
    key = tmp_path / "issuer.key"
    assert softrank("keygen", "--out", str(key)).returncode == 0
    out = tmp_path / "certs"
    args = ("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf",
            "--jobs", "2", "--key", str(key), "--json")
    run = softrank(*args, script=script, env=env)
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    summary = json.loads(run.stdout)
    why = unverified(EPS.split(",")[0])
    assert [(entry["operator"], entry["status"]) for entry in summary["failed"]] == [(target.name, "failed")]
    assert why in summary["failed"][0]["reason"], summary["failed"][0]
    entry = manifest(out)["operators"][target.name]
    assert entry["status"] == "failed" and why in entry["reason"] and "\n" not in entry["reason"]
    assert manifest(out)["state"] == "incomplete"
    assert not (out / entry["output"]).exists() and not leftovers(out)  # nothing of it was written
    got = contents(out)
    assert len(got) == 3 and all(reference8[path] == value for path, value in got.items())
    assert all(verify_certificate_file(path, require_signature=True).ok
               for path in out.rglob("*.json") if path.name != MANIFEST_NAME)

    again = softrank(*args, "--resume")  # honest workers this time
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["campaign"] == {"manifest": str(out / MANIFEST_NAME), "computed": 1, "kept": 3,
                                                    "failed": 0}
    assert contents(out) == reference8
    assert manifest(out)["operators"][target.name]["status"] == "done"


def test_worker_that_answers_with_a_pickle_runs_no_code_in_the_signer(panel8, reference8, tmp_path):
    """A ``--jobs`` worker writes a malicious pickle into its pipe instead of its answer (loaded,
    it would replace check_claims in the signing process): the signing process reads bytes, not
    pickles, so the payload never runs there; the operator is failed (exit 6), nothing of it is
    written, the other certificates are signed as in an honest run."""
    from softrank_cert.util.operator_files import load_operators

    target = load_operators(panel8)[1]
    script, env = tamper("softrank_cert.plumbing.bracketing:issue_packed", target.name)
    marker = tmp_path / "ran-in-signer"
    key = tmp_path / "issuer.key"
    assert softrank("keygen", "--out", str(key)).returncode == 0
    out = tmp_path / "certs"
    run = softrank("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf",
                   "--jobs", "2", "--key", str(key), "--json", script=script,
                   env={**env, "SOFTRANK_TEST_TAMPER_PICKLE": str(marker)})
    assert not marker.exists()
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    (failed,) = json.loads(run.stdout)["failed"]
    assert failed["operator"] == target.name and "not a result this task returns" in failed["reason"]
    assert not (out / manifest(out)["operators"][target.name]["output"]).exists() and not leftovers(out)
    got = contents(out)
    assert len(got) == 3 and all(reference8[path] == value for path, value in got.items())


@pytest.mark.slow
def test_budgets_certificate_from_a_worker_is_reverified(panel8, tmp_path):
    """budgets --certificates --resume with worker processes: a tampered certificate of the final
    ends is neither stored in the state folder nor signed into --certificates; the operator is
    failed with the reason (exit 6) and a resume computes it."""
    from softrank_cert.util.operator_files import load_operators

    target = load_operators(panel8)[1].name
    key = tmp_path / "issuer.key"
    assert softrank("keygen", "--out", str(key)).returncode == 0
    out, certs = tmp_path / "R.json", tmp_path / "certs"
    args = ("budgets", str(panel8), "--budgets", "2,4,6", "--eps", "0.25", "--budget-seconds", "inf", "--out", str(out),
            "--certificates", str(certs), "--key", str(key), "--jobs", "2", "--json", "--resume")
    script, env = tamper("softrank_cert.studies.budgets.operators:study_operator", target)
    run = softrank(*args, script=script, env=env)
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    report = json.loads(run.stdout)
    assert [entry["operator"] for entry in report["failed"]] == [target]
    assert unverified("0.25") in report["failed"][0]["reason"]
    assert target not in [entry["operator"] for entry in report["operators"]]
    state = json.loads((tmp_path / "R-campaign.json").read_text())
    assert state["operators"][target]["status"] == "failed" and unverified("0.25") in state["operators"][target]["reason"]
    stored = {json.loads(path.read_text())["operator"]["id"] for path in (tmp_path / "R-campaign").rglob("*.json")}
    written = {json.loads(path.read_text())["operator"]["id"] for path in certs.rglob("*.json")}
    assert len(stored) == 3 and target not in stored and target not in written
    again = softrank(*args)
    assert again.returncode == 0, again.stderr
    run_record = json.loads((tmp_path / "R-campaign.json").read_text())["runs"][-1]
    assert (run_record["skipped"], run_record["computed"]) == (3, 1)


@pytest.mark.slow
@pytest.mark.parametrize("resume", [True, False], ids=["campaign", "evidence-only"])
def test_audit_certificates_from_a_worker_are_reverified(panel8, tmp_path, resume):
    """audit with worker processes: an operator whose evidence (and, with --resume, reproduction)
    comes back tampered gets 'error' rows with the reason, no state certificate and no evidence
    file; exit 6; a resume audits it."""
    from softrank_cert.util.operator_files import operator_names

    names = operator_names(panel8)
    target = names[1]
    table = tmp_path / "table.jsonl"
    table.write_text("".join(json.dumps({"operator": name, "eps": "0.25", "lower": 1, "upper": 2}) + "\n"
                             for name in names))
    out = tmp_path / "audit.json"
    args = ("audit", str(table), "--operators", str(panel8), "--out", str(out), "--budget-seconds", "inf",
            "--jobs", "2", "--json", *(["--resume"] if resume else []))
    script, env = tamper("softrank_cert.studies.audit.reproduction:audit_operator", target)
    run = softrank(*args, script=script, env=env)
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    report = json.loads(run.stdout)
    assert [entry["operator"] for entry in report["failed"]] == [target]
    assert "does not verify in this process" in report["failed"][0]["reason"]
    rows = [row for row in report["rows"] if row["operator"] == target]
    assert rows and all(row["status"] == "error" for row in rows)
    evidence = [json.loads(path.read_text())["operator"]["id"] for path in (tmp_path / "audit-evidence").rglob("*.json")]
    assert evidence and target not in evidence  # the other operators' evidence is there (their rows are refuted)
    if not resume:
        return
    state = json.loads((tmp_path / "audit-campaign.json").read_text())
    assert state["operators"][target]["status"] == "failed"
    assert all(json.loads(path.read_text())["operator"]["id"] != target
               for path in (tmp_path / "audit-campaign").rglob("*.json"))
    again = softrank(*args)
    assert again.returncode == 0, again.stderr
    run_record = json.loads((tmp_path / "audit-campaign.json").read_text())["runs"][-1]
    assert (run_record["skipped"], run_record["computed"]) == (3, 1)


@pytest.mark.slow
def test_supports_certificate_from_a_worker_is_reverified(tmp_path):
    """supports --out with worker processes: the tampered point is failed (exit 6), its
    certificate not written; a resume computes it."""
    from softrank_cert.studies.supports.points import point_name

    target = point_name("sphere", 2, 12, "0.25", 2.0)
    folder = tmp_path / "sweep"
    args = ("supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2,4", "--out", str(folder), "--jobs", "2",
            "--json")
    script, env = tamper("softrank_cert.studies.supports.points:support_point_task", target)
    run = softrank(*args, script=script, env=env)
    assert run.returncode == EXIT_SOME_FAILED, run.stderr
    report = json.loads(run.stdout)
    assert [entry["point"] for entry in report["failed"]] == [target]
    assert unverified("0.25") in report["failed"][0]["reason"]
    assert not (folder / f"{target}.json").exists() and manifest(folder)["operators"][target]["status"] == "failed"
    again = softrank(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["campaign"]["computed"] == 1 and (folder / f"{target}.json").is_file()


@pytest.mark.slow
def test_pool_worker_killed_from_outside_mid_task_is_retried(tmp_path):
    """A worker killed while it runs a task: the task is retried, the others are unaffected.
    Each task leaves a marker file when it starts, so the kill comes when both workers are
    inside their 3 s tasks however slowly the machine starts them."""
    import threading

    started = tmp_path / "started"
    started.mkdir()

    def task(seconds: float) -> tuple:
        return (["sh", "-c", f'touch "{started}/$$"; sleep {seconds}'],)

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 120  # a hang guard, not a timing assumption
        while len(list(started.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in _children(os.getpid()):
            if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text() and \
                    "resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGKILL)
                return

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    outcomes = sorted(run_tasks(subprocess.check_call, [task(3), task(3), task(0.1)], jobs=2), key=lambda o: o.index)
    killer.join()
    assert all(o.ok for o in outcomes)
    assert sorted(o.attempts for o in outcomes) == [1, 1, 2]


def test_run_tasks_records_failures_without_stopping():
    outcomes = sorted(run_tasks(operator.call, [(abs, -2), (os.abort,), (divmod, 1, 0), (abs, -5)], jobs=2),
                      key=lambda o: o.index)
    assert [o.value for o in outcomes if o.ok] == [2, 5]
    died, error = outcomes[1], outcomes[2]
    assert died.attempts == 2 and "SIGABRT" in died.failure and died.kind == "WorkerDied"
    assert error.attempts == 1 and "ZeroDivisionError" in error.failure  # a task's own error: no retry


@pytest.mark.slow
def test_dask_worker_killed_mid_campaign(panel16, reference16, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    import dask

    out = tmp_path / "certs"
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                                     dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)  # worker address -> process id
        process = start("bracket", str(panel16), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf",
                        "--scheduler", cluster.scheduler_address)
        try:
            deadline, victim = time.monotonic() + 60, None
            while victim is None and time.monotonic() < deadline:  # a worker in the middle of a task (1-3 s each)
                victim = next((address for address, keys in client.processing().items() if keys), None)
                time.sleep(0.05)
            assert victim is not None, "no task started"
            time.sleep(0.3)
            os.kill(pids[victim], signal.SIGKILL)
            _, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, stderr
    assert contents(out) == reference16
    assert manifest(out)["summary"]["done"] == 4


# --------------------------------------------------------------------------------------
# 3. Memory
# --------------------------------------------------------------------------------------

def test_max_memory_refuses_tasks_that_cannot_fit(panel8, tmp_path):
    out = tmp_path / "certs"
    run = softrank("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out), "--budget-seconds", "inf",
                   "--max-memory", "64M", "--json")
    assert run.returncode == EXIT_SOME_FAILED
    state = manifest(out)
    assert {entry["status"] for entry in state["operators"].values()} == {"refused"}
    assert all("--max-memory" in entry["reason"] for entry in state["operators"].values())
    assert not contents(out)
    bad = softrank("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(out), "--max-memory", "lots")
    assert bad.returncode == EXIT_INVALID_INPUT and one_line(bad.stderr)


def test_tasks_that_do_not_fit_together_are_serialised(tmp_path):
    """Three tasks of 60 that may use 100 together run one at a time: each holds an exclusive
    lock for its whole run and fails at once if another task holds it (no clock is read, so a
    busy machine cannot change the outcome; the same tasks without a memory limit do collide)."""
    lock = ["flock", "--nonblock", "--conflict-exit-code", "3", str(tmp_path / "lock"), "sleep", "0.4"]
    outcomes = list(run_tasks(subprocess.check_call, [(lock,)] * 3, jobs=3, memory=[60, 60, 60],
                              max_memory=100, attempts=1))
    assert [o.ok for o in outcomes] == [True] * 3, [o.failure for o in outcomes]


def test_memory_estimates_are_calibrated():
    from softrank_cert.util.memory import arb_check_bytes, bracket_task_bytes, parse_size

    # Measured peaks (README, Long campaigns): the estimates never fall below them.
    assert arb_check_bytes(1024, 1024, [64, 128, 256, 512], width=2) > 1136.5 * 2**20
    assert arb_check_bytes(1024, 1024, [64], width=16) > 380.3 * 2**20
    assert 4.8e9 < arb_check_bytes(2048, 2048, [64, 128, 256, 512], width=2) < 6.5e9
    for width, measured in ((128, 17e6), (256, 37e6), (512, 106e6)):
        assert bracket_task_bytes(width, width, 32) - 128 * 2**20 > measured
    assert parse_size("3.5G") == int(3.5 * 2**30) and parse_size("800M") == 800 * 2**20
    assert parse_size("2GiB") == 2 * 2**30


def _hard_certificate(path: Path, n: int) -> Path:
    """A scores operator the float64 path declines (one subnormal score), with a lower
    certificate whose X A Y is singular: the Arb path runs through every precision."""
    from softrank_cert.certio.certificate import Bracket, LowerEnd, UpperEnd, certificate_document
    from softrank_cert.kernel import Operator

    rng = np.random.default_rng(1)
    S = rng.standard_normal((n, n))
    S[0, 0] = 5e-324
    X = np.zeros((2, n))
    X[:, 0] = 1.0
    Y = np.zeros((n, 2))
    Y[np.arange(n), np.arange(n) % 2] = 1.0
    doc = certificate_document("hard", Operator("scores", {"S": S}),
                               [Bracket("0.25", LowerEnd(2, "pooled", X, Y), UpperEnd(n, "identity", None, None))],
                               created="2026-01-01T00:00:00Z")
    path.write_text(json.dumps(doc))
    return path


def test_verify_refuses_an_arb_check_larger_than_max_memory(tmp_path):
    cert = _hard_certificate(tmp_path / "hard.json", 256)
    verify = [sys.executable, "-m", "softrank_cert.cli.verify", str(cert)]
    small = subprocess.run([*verify, "--max-memory", "40M"], capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert small.returncode == EXIT_NOT_CHECKED, small.stderr
    assert one_line(small.stderr) and "not checked" in small.stderr and "--max-memory" in small.stderr
    enough = subprocess.run([*verify, "--max-memory", "2G", "--max-prec", "128"], capture_output=True, text=True,
                            env=ENV, timeout=TIMEOUT)
    assert enough.returncode == 3, enough.stderr  # checked: INCONCLUSIVE (X A Y is singular), nothing refused
    bad = subprocess.run([*verify, "--max-memory", "much"], capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert bad.returncode == EXIT_INVALID_INPUT and one_line(bad.stderr)


def test_verify_under_an_address_space_limit_refuses_instead_of_aborting(tmp_path):
    """Without the estimate, FLINT aborts ('Unable to allocate memory', SIGABRT) under RLIMIT_AS."""
    import resource

    cert = _hard_certificate(tmp_path / "hard.json", 1024)
    probe = subprocess.run([sys.executable, "-c", "import softrank_cert.cli.verify, softrank_cert.kernel\n"
                            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmSize')][0])"],
                           capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    limit = (int(probe.stdout) << 10) + (500 << 20)  # 500 MiB above an idle verifier: far below the check's ~1.2 GB

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    run = subprocess.run([sys.executable, "-m", "softrank_cert.cli.verify", str(cert)], capture_output=True, text=True,
                         env=ENV, timeout=TIMEOUT, preexec_fn=cap)
    assert run.returncode == EXIT_NOT_CHECKED, (run.returncode, run.stderr)
    assert one_line(run.stderr) and "not checked" in run.stderr and "memory" in run.stderr


# --------------------------------------------------------------------------------------
# 4. Disk
# --------------------------------------------------------------------------------------

ENOSPC_INJECT = '''
import errno, os, sys

_replace = os.replace
_count = [0]


def replace(src, dst, *args, **kwargs):
    """The disk fills up at the third certificate: its rename fails with ENOSPC."""
    if str(dst).endswith(".json") and not str(dst).endswith("softrank-campaign.json"):
        _count[0] += 1
        if _count[0] == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _replace(src, dst, *args, **kwargs)


os.replace = replace

if __name__ == "__main__":
    from softrank_cert.cli.main import main

    sys.argv[0] = "softrank"
    main()
'''


def _check_intact(out: Path, reference: dict[str, tuple]) -> dict:
    state = manifest(out)  # parses: never torn
    assert not leftovers(out)
    got = contents(out)  # every certificate on disk is whole, and is one of the reference's
    assert all(reference[path] == value for path, value in got.items())
    done = {entry["output"] for entry in state["operators"].values() if entry["status"] == "done"}
    assert done <= set(got)
    return state


def test_full_disk_is_one_line_exit_2_and_resumable(panel8, reference8, tmp_path):
    script = tmp_path / "enospc.py"
    script.write_text(ENOSPC_INJECT)
    out = tmp_path / "certs"
    args = ("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf")
    run = softrank(*args, script=script)
    assert run.returncode == EXIT_INVALID_INPUT, run.stderr
    line = error_line(run.stderr)
    assert "No space left on device" in line and "cannot write" in line
    state = _check_intact(out, reference8)
    assert state["summary"]["done"] == 2
    assert softrank(*args, "--resume").returncode == 0
    assert contents(out) == reference8


def test_tiny_tmpfs(panel8, reference8, tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = mount / "certs"
        run = softrank("bracket", str(panel8), "--all", "--eps", EPS, "--out", str(out), "--budget-seconds", "inf")
        assert run.returncode == EXIT_INVALID_INPUT, run.stderr
        assert "No space left on device" in error_line(run.stderr)
        state = _check_intact(out, reference8)
        assert state["summary"]["done"] < 4
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def test_output_files_leave_nothing_when_a_write_fails(tmp_path, monkeypatch):
    from softrank_cert.errors import OutputWriteError
    from softrank_cert.util.files import write_text_atomic

    target = tmp_path / "report.json"
    target.write_text("old")

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OutputWriteError) as info:
        write_text_atomic(target, "new content")
    monkeypatch.undo()
    assert info.value.exit_code == EXIT_INVALID_INPUT and "No space left on device" in str(info.value)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_read_only_output_folder_is_refused_before_any_work(panel8, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: a read-only file system says no to everyone
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a read-only tmpfs here")
    else:
        folder.chmod(0o500)
    try:
        run = softrank("bracket", str(panel8), "--all", "--eps", "0.25", "--out", str(folder / "certs"))
        assert run.returncode == EXIT_INVALID_INPUT and one_line(run.stderr) and "cannot write" in run.stderr, run.stderr
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(folder)], capture_output=True)
        else:
            folder.chmod(0o700)


def test_exit_codes_are_documented():
    design = (ROOT / "docs" / "design.md").read_text()
    campaigns = (ROOT / "docs" / "campaigns.md").read_text()
    assert EXIT_SOME_FAILED == 6 and "| 6 |" in design and "| 130 |" in design
    assert "**6**" in campaigns and "softrank-campaign.json" in campaigns
