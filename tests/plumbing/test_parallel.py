"""Parallel campaigns (issue 8): --jobs and --scheduler give the same certificates as a serial run.

Tiny MiniLM operators (width 8) and no time budget (``--budget-seconds inf``), so every run does
the same computation;
certificates are compared on their content (operator and brackets), not on the ``created``
timestamps.  The Dask test starts a LocalCluster on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from softrank_cert.studies.audit.table import audit_table
from softrank_cert.errors import EXIT_INVALID_INPUT
from softrank_cert.errors import WorkerError
from softrank_cert.plumbing.parallel import pack_operator, run_ordered, unpack_operator
from tests.helpers import certificate_contents as contents, softrank_subprocess as softrank

EPS = "0.1,0.25,0.5"


def assert_same(a: object, b: object) -> None:
    """Equal results (the solvers are deterministic without a time budget)."""
    assert a == b


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    from softrank_cert.models import build_panel, write_panel

    arrays = build_panel("minilm", Path(__file__).resolve().parents[2] / "examples/data/apache2.txt", [8],
                         layers=[0, 1], heads=[0, 5])
    return write_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", arrays)


@pytest.fixture(scope="module")
def serial(panel, tmp_path_factory) -> dict[str, tuple]:
    out = tmp_path_factory.mktemp("serial") / "certs"
    run = softrank("bracket", str(panel), "--all", "--eps", EPS, "--out", str(out), "--json", "--budget-seconds", "inf")
    assert run.returncode == 0, run.stderr
    return contents(out)


@pytest.mark.slow
def test_jobs_give_identical_certificates(panel, serial, tmp_path):
    run = softrank("bracket", str(panel), "--all", "--eps", EPS, "--out", str(tmp_path / "c"), "--jobs", "2", "--json",
                   "--budget-seconds", "inf")
    assert run.returncode == 0, run.stderr
    names = [entry["operator"] for entry in json.loads(run.stdout)["operators"]]
    assert len(names) == 4 and names == sorted(names)  # written and reported in panel order
    got = contents(tmp_path / "c")
    assert sorted(got) == sorted(serial)
    assert_same(got, serial)


@pytest.mark.slow
def test_dask_local_cluster_matches_local_run(panel, serial, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        run = softrank("bracket", str(panel), "--all", "--eps", EPS, "--out", str(tmp_path / "c"),
                       "--scheduler", cluster.scheduler_address, "--json", "--budget-seconds", "inf")
    assert run.returncode == 0, run.stderr
    got = contents(tmp_path / "c")
    assert sorted(got) == sorted(serial)
    assert_same(got, serial)


@pytest.mark.slow
def test_bad_scheduler_is_one_line_exit_2(panel, tmp_path):
    pytest.importorskip("dask.distributed")
    run = softrank("bracket", str(panel), "--all", "--eps", "0.25", "--out", str(tmp_path / "c"),
                   "--scheduler", "tcp://127.0.0.1:9")
    assert run.returncode == EXIT_INVALID_INPUT
    assert run.stderr.strip().count("\n") == 0 and "Dask scheduler" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "c").exists()


def test_worker_error_is_one_line():
    bad = {"kind": "qk", "arrays": {"Q": np.zeros((2, 3)), "K": np.zeros((2, 4))}, "beta": "inv_sqrt_d", "mask": "none"}
    with pytest.raises(WorkerError) as info:
        list(run_ordered(unpack_operator, [(bad,), (bad,)], jobs=2))
    assert info.value.exit_code == EXIT_INVALID_INPUT and "head dimensions differ" in str(info.value)
    assert "\n" not in str(info.value)


def test_results_in_task_order_and_operator_roundtrip(panel):
    from softrank_cert.util.operator_files import load_operators

    op = load_operators(panel)[0].operator
    again = unpack_operator(pack_operator(op))
    assert all(again.arrays[k].tobytes() == op.arrays[k].tobytes() for k in op.arrays)
    seen: list[int] = []
    assert list(run_ordered(abs, [(-3,), (1,), (-2,)], jobs=2, done=seen.append)) == [3, 1, 2]
    assert sorted(seen) == [0, 1, 2]


def test_audit_jobs_identical(panel, tmp_path):
    from softrank_cert.util.operator_files import operator_names

    table = tmp_path / "table.jsonl"
    table.write_text("".join(json.dumps({"operator": name, "eps": eps, "lower": 1, "upper": 8}) + "\n"
                             for name in operator_names(panel) for eps in ("0.25", "0.5")))
    one = audit_table(table, panel, evidence_dir=tmp_path / "ev1", budget_seconds=math.inf)
    two = audit_table(table, panel, evidence_dir=tmp_path / "ev1", jobs=2, budget_seconds=math.inf)
    strip = lambda rows: [{k: v for k, v in r.to_json().items() if k != "evidence"} for r in rows]  # noqa: E731
    assert len(two.rows) == 8 and [r.line for r in two.rows] == list(range(1, 9))
    assert_same(strip(one.rows), strip(two.rows))
    assert_same({p: (d["operator"], d["brackets"]) for p, d in one.evidence_files.items()},
                {p: (d["operator"], d["brackets"]) for p, d in two.evidence_files.items()})


@pytest.mark.slow
def test_supports_jobs_identical():
    args = ["supports", "sphere", "--dim", "2", "--n", "8", "--kappas", "0.5,4", "--budget-seconds", "inf", "--json"]
    one, two = softrank(*args), softrank(*args, "--jobs", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    drop = lambda doc: [{k: v for k, v in p.items() if k != "seconds"} for p in doc["points"]]  # noqa: E731
    assert [p["kappa"] for p in json.loads(two.stdout)["points"]] == [0.5, 4.0]
    assert_same(drop(json.loads(one.stdout)), drop(json.loads(two.stdout)))


@pytest.mark.slow
def test_plainly_started_dask_worker_gives_the_local_certificates(panel, serial, tmp_path):
    """A ``dask worker`` started as docs/campaigns.md says (it imports numpy before softrank_cert,
    so it cannot pin its kernels itself) gets pinned by the client's nanny plugin: the local run's
    certificates, and OpenBLAS's AVX2 kernels where the CPU has them (not its AVX-512 ones)."""
    distributed = pytest.importorskip("dask.distributed")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from softrank_cert.blas_kernels import CORETYPE, UNPINNED, avx2_x86

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", UNPINNED)}
    env["PYTHONPATH"] = str(root)  # the workers import this checkout, as an installed one would be
    address_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    with open(tmp_path / "cluster.log", "w") as log:
        cluster = [subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                     "--scheduler-file", str(address_file)], env=env, stdout=log, stderr=log)]
        try:
            cluster.append(subprocess.Popen([*dask, "worker", "--scheduler-file", str(address_file), "--nworkers", "1",
                                             "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                                            env=env, stdout=log, stderr=log))
            with distributed.Client(scheduler_file=str(address_file), timeout=60) as client:
                client.wait_for_workers(1, timeout=60)
                run = softrank("bracket", str(panel), "--all", "--eps", EPS, "--out", str(tmp_path / "c"),
                               "--scheduler", client.scheduler.address, "--json", "--budget-seconds", "inf")
                assert run.returncode == 0, run.stderr
                client.wait_for_workers(1, timeout=60)
                pools = client.run(threadpoolctl.threadpool_info)
        finally:
            for process in reversed(cluster):
                process.terminate()
                process.wait(timeout=60)
    got = contents(tmp_path / "c")
    assert sorted(got) == sorted(serial)
    assert_same(got, serial)
    if avx2_x86():
        assert [{i["architecture"] for i in info if i["internal_api"] == "openblas"} for info in pools.values()] \
            == [{CORETYPE}]
