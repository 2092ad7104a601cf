"""Workers answer in bytes (issue 48): nothing a worker sends is unpickled where the key is.

A ``--jobs`` worker's answer is a JSON frame read with ``recv_bytes`` and :mod:`json`; a Dask
worker's reaches the signing process through a client process of its own, again as bytes.  The
hostile tasks (``hostile_tasks.py``) answer with a pickle that, loaded in the signing process,
replaces ``verification.check_claims`` and writes a marker file.  Dask clusters here listen on
127.0.0.1 only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import softrank_cert.verification as verification
from softrank_cert.errors import EXIT_INTERNAL, EXIT_INVALID_INPUT
from softrank_cert.plumbing import wire
from softrank_cert.plumbing.bracketing import Issued
from softrank_cert.plumbing.parallel import run_tasks
from softrank_cert.studies.audit.reproduction import OperatorAudit
from softrank_cert.studies.audit.rows import RowResult
from softrank_cert.errors import InvalidInputError
from tests.docs.doc_blocks import page_blocks
from tests.plumbing import hostile_tasks

REAL_CHECK_CLAIMS = verification.check_claims


def test_pool_worker_pickle_is_never_loaded_in_the_parent(tmp_path):
    """Two workers write a pickle into their pipes: both tasks fail as unreadable, and the payload
    never ran here (on the pickle transport it replaced check_claims in this process)."""
    marker = tmp_path / "ran-in-signer"
    outcomes = list(run_tasks(hostile_tasks.send_pickle, [(str(marker), os.getpid())] * 2, jobs=2))
    assert not marker.exists()
    assert verification.check_claims is REAL_CHECK_CLAIMS
    assert [o.ok for o in outcomes] == [False, False]
    assert all(o.kind == "UnreadableResult" and "not a result" in (o.failure or "") for o in outcomes)


def test_dask_worker_pickle_is_never_loaded_in_the_signer(tmp_path):
    """A Dask worker's pickled exception is loaded by the client process, not by this one."""
    distributed = pytest.importorskip("dask.distributed")
    marker = tmp_path / "ran-in-signer"
    with distributed.LocalCluster(processes=True, n_workers=1, threads_per_worker=1, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        outcomes = list(run_tasks(hostile_tasks.raise_pickle, [(str(marker), os.getpid())] * 2,
                                  scheduler=cluster.scheduler_address))
    assert not marker.exists()
    assert verification.check_claims is REAL_CHECK_CLAIMS
    assert [o.ok for o in outcomes] == [False, False]


def test_frames_round_trip_the_results_tasks_return():
    issued = Issued({"format": "softrank-certificate", "brackets": [{"eps": "0.25"}], "n": 2 ** 80}, 1.5)
    audit = OperatorAudit([RowResult(3, "op", "0.25", "verified", 2, 5, 2, 5, {"path": "e.json"})],
                          (Path("ev/op.json"), {"a": [1, 2.5, None]}), None, 0.25)
    odd = {"$keys": 1, 3: (b"\x00\xff", math.inf), "nan": -math.inf}
    for value in (issued, audit, odd, [1, "two", None, True]):
        back, seconds = wire.read_frame(wire.frame(value, 2.0), returns=(Issued, OperatorAudit, RowResult))
        assert back == value and type(back) is type(value) and seconds == 2.0
    failure = wire.Failure("MemoryError", "out of memory for this input", EXIT_INVALID_INPUT)
    assert wire.read_frame(wire.frame(failure, 1.0)) == (failure, 1.0)


@pytest.mark.parametrize("raw, why", [
    (b'{"seconds": 1, "failure": null}\n{"$data": "softrank_cert.plumbing.bracketing.Issued", "fields": {}}',
     "does not return"),
    (b'{"seconds": 1, "failure": null}\n{"$data": "os.system", "fields": {"command": "true"}}', "does not return"),
    (b'{"seconds": 1, "failure": null}\n[NaN]', "not JSON"),
    (b'{"seconds": 1, "failure": null}\n{"$eval": "1"}', "unknown or malformed tag"),
    (b'{"seconds": 1, "failure": null}\n' + b"[" * 100000, "not JSON"),
    (b'{"seconds": 1, "failure": {"kind": "X", "message": "m", "exit_code": "4"}}\n', "wrong types"),
    (b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00]\x94.", "not JSON"),
])
def test_frames_that_are_not_results_are_refused(raw, why):
    with pytest.raises(wire.WireError, match=why):
        wire.read_frame(raw)


def test_a_result_that_is_not_plain_data_is_the_tasks_failure():
    failure, _seconds = wire.read_frame(wire.frame(object(), 0.5))
    assert isinstance(failure, wire.Failure) and failure.exit_code == EXIT_INTERNAL
    assert "not transferable" in failure.message
    bad_seconds = wire.frame([1], math.nan)
    assert wire.read_frame(bad_seconds) == ([1], 0.0)


def test_an_unpinned_dask_worker_refuses_its_tasks(monkeypatch):
    """A worker process whose environment had no pinned kernels (``dask worker --no-nanny``)
    answers with the failure UnpinnedKernels, not with a certificate of other kernels."""
    pytest.importorskip("dask.distributed")
    from softrank_cert.blas_kernels import avx2_x86
    from softrank_cert.plumbing.dask_broker import dask_call

    if not avx2_x86():
        pytest.skip("nothing to pin on this CPU")
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    failure, _ = wire.read_frame(dask_call(abs, (-3,), True))
    assert isinstance(failure, wire.Failure) and failure.kind == "UnpinnedKernels"
    assert wire.read_frame(dask_call(abs, (-3,), False))[0] == 3


def test_dataclass_fields_are_rebuilt_only_as_named():
    raw = wire.frame(Issued({"a": 1}, 2.0), 0.0)
    with pytest.raises(wire.WireError, match="does not return"):
        wire.read_frame(raw)  # Issued not among the classes this task returns
    forged = raw.replace(b'"seconds":2.0', b'"seconds":2.0,"extra":1')
    with pytest.raises(wire.WireError, match="fields it does not have"):
        wire.read_frame(forged, returns=(Issued,))
    assert dataclasses.is_dataclass(wire.read_frame(raw, returns=(Issued,))[0])



def _scheduler_address(path: Path, process: subprocess.Popen) -> str:
    """The address a ``dask scheduler --scheduler-file`` wrote (a bounded wait)."""
    for _ in range(240):
        if path.is_file() and path.stat().st_size:
            return json.loads(path.read_text())["address"]
        assert process.poll() is None, "the scheduler exited"
        time.sleep(0.25)
    raise AssertionError("no scheduler file after 60 s")


@pytest.mark.slow
def test_the_documented_tls_recipe_admits_only_the_clusters_certificates(tmp_path, monkeypatch):
    """docs/campaigns.md's certificate block, run as written; a scheduler and a worker started
    with its files on 127.0.0.1: the tasks run with the client's certificate from Dask's
    configuration, and a client without one is refused with a one-line error (exit 2)."""
    distributed = pytest.importorskip("dask.distributed")
    if shutil.which("openssl") is None:
        pytest.skip("the recipe needs the openssl command")
    (block,) = [b for b in page_blocks("docs/campaigns.md") if "openssl req -x509" in b.text]
    subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=tmp_path, check=True, timeout=120)
    tls = tmp_path / "dask-tls"
    files = ["--tls-ca-file", str(tls / "ca.pem")]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    dask = [sys.executable, "-m", "dask"]
    with open(tmp_path / "cluster.log", "w") as log:
        cluster = [subprocess.Popen([*dask, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port", "0",
                                     "--no-dashboard", "--scheduler-file", str(tmp_path / "s.json"), *files,
                                     "--tls-cert", str(tls / "scheduler.pem"), "--tls-key", str(tls / "scheduler.key")],
                                    env=env, stdout=log, stderr=log)]
        try:
            address = _scheduler_address(tmp_path / "s.json", cluster[0])
            assert address.startswith("tls://127.0.0.1:")
            cluster.append(subprocess.Popen([*dask, "worker", address, "--host", "127.0.0.1", "--nworkers", "1",
                                             "--nthreads", "1", "--no-dashboard", *files, "--tls-cert",
                                             str(tls / "worker.pem"), "--tls-key", str(tls / "worker.key")],
                                            env=env, stdout=log, stderr=log))
            with pytest.raises(InvalidInputError, match="cannot reach the Dask scheduler at tls://"):
                list(run_tasks(abs, [(-1,), (-2,)], scheduler=address))  # no client certificate
            security = distributed.Security(tls_ca_file=str(tls / "ca.pem"), tls_client_cert=str(tls / "client.pem"),
                                            tls_client_key=str(tls / "client.key"), require_encryption=True)
            with distributed.Client(address, security=security, timeout=60) as client:
                client.wait_for_workers(1, timeout=60)
            for name, value in (("REQUIRE_ENCRYPTION", "True"), ("TLS__CA_FILE", tls / "ca.pem"),
                                ("TLS__CLIENT__CERT", tls / "client.pem"), ("TLS__CLIENT__KEY", tls / "client.key")):
                monkeypatch.setenv(f"DASK_DISTRIBUTED__COMM__{name}", str(value))
            outcomes = sorted(run_tasks(abs, [(-1,), (-2,)], scheduler=address), key=lambda o: o.index)
            assert [o.value for o in outcomes] == [1, 2]
        finally:
            for process in reversed(cluster):
                process.terminate()
                process.wait(timeout=60)
