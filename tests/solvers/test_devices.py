"""The device-agnostic search (softrank_cert.solvers.device, .backend, .torch_backend): torch on
the CPU proposes ends of the same quality as numpy, its certificates verify, its work is charged
at the device's cost and recorded, and --device fails closed.  No GPU is needed: the torch code
runs here with device "cpu" (the same code as on CUDA)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_one_line_error, run_softrank

import softrank_cert as sc
from softrank_cert.errors import InvalidInputError
from softrank_cert.solvers.backend import NUMPY
from softrank_cert.solvers.lower.smooth_key import selection_pair
from softrank_cert.solvers.device import (NUMPY_DEVICE, PROVENANCE_KEY, TORCH_CPU_COST, SearchDevice, calibrate,
                                         check_device_memory, device_search_bytes, resolve_device,
                                         search_memory)
from softrank_cert.solvers.lbfgs import minimise
from softrank_cert.solvers.upper.smooth import SmoothState, run_stages, tsvd_start
from softrank_cert.solvers.work import Budget
from softrank_cert.util.dense import Dense
from softrank_cert.util.memory import upper_factor_bytes

torch = pytest.importorskip("torch")

from softrank_cert.solvers.torch_backend import TorchBackend  # noqa: E402

PANEL = Path(__file__).resolve().parents[2] / "examples" / "panels" / "minilm-apache2-w32.npz"
HEADS = ("minilm/apache2/w32/L0H0", "minilm/apache2/w32/L0H1", "minilm/apache2/w32/L5H0")
EPS = ["0.1", "0.25", "0.5"]
WORK = 20000.0


def _op(name: str):
    return sc.load_operator(PANEL, name)


def test_torch_and_numpy_evaluations_agree() -> None:
    rng = np.random.default_rng(3)
    A = rng.random((40, 30)) / 30
    U, W = rng.standard_normal((40, 5)) * 0.1, rng.standard_normal((30, 5)) * 0.1
    ops = TorchBackend("cpu")
    v_np, g_np = NUMPY.smooth_witness(A, U, W, 50.0, 1e-3)
    v_t, g_t = ops.smooth_witness(ops.matrix({}, A, np.float64), *ops.factors(U, W), 50.0, 1e-3)
    assert v_t == pytest.approx(v_np, rel=1e-12)
    np.testing.assert_allclose(ops.to_numpy(g_t), g_np, rtol=1e-9, atol=1e-12)
    assert ops.max_row_error(ops.matrix({}, A, np.float64), *ops.factors(U, W)) == pytest.approx(
        NUMPY.max_row_error(A, U, W), rel=1e-12)


def test_lbfgs_on_torch_follows_the_numpy_iterates() -> None:
    rng = np.random.default_rng(0)
    M = rng.standard_normal((20, 20))
    H, b = M @ M.T + np.eye(20), rng.standard_normal(20)

    def numpy_fun(x):
        return float(0.5 * x @ H @ x - b @ x), H @ x - b

    Ht, bt = torch.tensor(H), torch.tensor(b)

    def torch_fun(x):
        return float(0.5 * x @ Ht @ x - bt @ x), Ht @ x - bt

    x_np = minimise(numpy_fun, np.zeros(20), iterations=15, evaluations=40)
    x_t = minimise(torch_fun, np.zeros(20), iterations=15, evaluations=40, ops=TorchBackend("cpu"))
    np.testing.assert_allclose(x_t.numpy(), x_np, rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_work_is_charged_at_the_device_cost() -> None:
    d = Dense.of(_op(HEADS[0]))
    used = []
    for cost in (1.0, 3.0):
        ops = TorchBackend("cpu", cost)
        state = SmoothState.start(d.A, *tsvd_start(d, 6), ops, d.memo)
        budget = Budget(600.0)
        run_stages(d, state, stages=5, iterations=200, until=budget.until(), ops=ops)
        used.append(budget.used / state.evaluations)
    assert used[1] == pytest.approx(3.0 * used[0], rel=0.05)


def test_large_k_key_sides_on_torch_match_numpy() -> None:
    rng = np.random.default_rng(5)
    A = rng.random((60, 60)) ** 4
    A /= A.sum(axis=1, keepdims=True)
    rows = np.arange(0, 60, 2)
    found = [selection_pair(A, rows, Budget(1e9).until(), 60, ops=ops) for ops in (NUMPY, TorchBackend("cpu"))]
    assert all(f is not None for f in found)
    (_X, Y_np, t_np), (_X2, Y_t, t_t) = found  # type: ignore[misc]
    assert isinstance(Y_t, np.ndarray) and Y_t.dtype == np.float64
    assert t_t == pytest.approx(t_np, rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("name", HEADS)
def test_torch_ends_are_as_good_as_numpy_ones(name: str) -> None:
    op = _op(name)
    numpy_result = sc.bracket(op, EPS, work=WORK)
    torch_result = sc.bracket(op, EPS, work=WORK, device="cpu")
    for eps in EPS:
        assert abs(torch_result.upper[eps] - numpy_result.upper[eps]) <= 2, (eps, torch_result, numpy_result)
        assert abs(torch_result.lower[eps] - numpy_result.lower[eps]) <= 2, (eps, torch_result, numpy_result)


@pytest.mark.slow
def test_torch_certificates_verify_and_record_the_device() -> None:
    result = sc.bracket(_op(HEADS[0]), EPS, work=WORK, device="cpu")
    document = result.to_certificate()
    report = sc.verify(document)
    assert report.ok, report
    record = document["operator"]["provenance"][PROVENANCE_KEY]
    assert record["device"].startswith("cpu") and record["torch"] == torch.__version__
    assert float(record["work_cost"]) == TORCH_CPU_COST
    assert any(b.upper.construction == "smooth" for b in result.brackets)


@pytest.mark.slow
def test_numpy_path_is_the_default_and_records_nothing() -> None:
    op = _op(HEADS[2])
    plain = sc.bracket(op, EPS, work=3000.0).to_certificate()
    named = sc.bracket(op, EPS, work=3000.0, device="numpy").to_certificate()
    for doc in (plain, named):
        doc.pop("created", None)
    assert json.dumps(plain["brackets"]) == json.dumps(named["brackets"])
    assert PROVENANCE_KEY not in plain["operator"].get("provenance", {})
    assert resolve_device(None) is NUMPY_DEVICE


def test_a_cuda_search_that_cannot_fit_is_refused_before_allocating(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (64 << 20, 80 << 30))
    with pytest.raises(InvalidInputError, match="64.0 MiB free"):
        check_device_memory(SearchDevice("cuda:0", 0.001, "test GPU"), 2048, 2048)
    check_device_memory(SearchDevice("cuda:0", 0.001, "test GPU"), 512, 512)  # 7 + 15 MiB: fits
    assert device_search_bytes(4096, 4096) < 4 << 30


def test_a_cuda_search_keeps_its_factors_to_the_device_memory_it_found(monkeypatch) -> None:
    """The witness search's states and probe vectors are sized to 90 % of the CUDA device's free
    memory less the m x N arrays (on the host: its share of the task's estimate)."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 << 30, 80 << 30))
    gpu = SearchDevice("cuda:0", 0.001, "test GPU")
    assert search_memory(gpu, 4096, 4096) == pytest.approx(0.9 * (8 << 30) - 28 * 4096 * 4096)
    assert search_memory(NUMPY_DEVICE, 4096, 4096) == upper_factor_bytes(4096, 4096)


def test_calibration_gives_a_quarter_power_of_two() -> None:
    cost = calibrate("cpu", (96, 80), repeats=3)  # the code a CUDA device runs, on the CPU
    assert cost > 0 and (4 * math.log2(cost)) == pytest.approx(round(4 * math.log2(cost)), abs=1e-9)


def test_unknown_device_and_cuda_without_cuda_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="device must be one of"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInputError, match="sees no CUDA device"):
            resolve_device("cuda")
        assert resolve_device("auto") is NUMPY_DEVICE
    assert resolve_device("cpu") == SearchDevice("cpu", TORCH_CPU_COST, "torch cpu")


def test_without_torch_cpu_is_the_numpy_path_and_cuda_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert resolve_device("cpu") is NUMPY_DEVICE
    assert resolve_device("auto") is NUMPY_DEVICE
    with pytest.raises(InvalidInputError, match="torch is not installed"):
        resolve_device("cuda:0")
    result = sc.bracket(_op(HEADS[2]), EPS, work=3000.0, device="cpu")
    assert PROVENANCE_KEY not in result.provenance


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cli_device_cuda_without_cuda_is_exit_2(tmp_path: Path) -> None:
    res = run_softrank("bracket", PANEL, "--operator", HEADS[0], "--eps", "0.25", "--work", "2000",
                       "--device", "cuda", "--out", tmp_path / "c.json")
    assert_one_line_error(res, 2)
    assert "CUDA" in res.stderr and not (tmp_path / "c.json").exists()
    res = run_softrank("bracket", PANEL, "--operator", HEADS[0], "--eps", "0.25", "--work", "2000",
                       "--device", "gpu", "--out", tmp_path / "c.json")
    assert_one_line_error(res, 2)


@pytest.mark.slow
def test_cli_bracket_on_torch_cpu_writes_a_verified_certificate(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    res = run_softrank("bracket", PANEL, "--operator", HEADS[0], "--eps", "0.25,0.5", "--work", "4000",
                       "--device", "cpu", "--out", out)
    assert res.returncode == 0, res.stderr
    assert PROVENANCE_KEY in json.loads(out.read_text())["operator"]["provenance"]
    assert sc.verify(out).ok


def test_importing_the_package_and_help_do_not_import_torch() -> None:
    code = ("import sys, contextlib, io\n"
            "import softrank_cert, softrank_cert.solvers.bracket, softrank_cert.solvers.device\n"
            "from softrank_cert.cli.main import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['bracket', '--help'])\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_cli_supports_on_torch_cpu_records_the_device_in_every_certificate(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    res = run_softrank("supports", "sphere", "--dim", "2", "--n", "12", "--kappas", "0.5,2", "--eps", "0.25",
                       "--work", "3000", "--device", "cpu", "--jobs", "2", "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    certificates = sorted(p for p in out.rglob("*.json") if p.name != "softrank-campaign.json")
    assert len(certificates) == 2
    for path in certificates:
        assert PROVENANCE_KEY in json.loads(path.read_text())["operator"]["provenance"]
        assert sc.verify(path).ok


@pytest.mark.slow
def test_cli_resume_on_torch_cpu_keeps_what_that_device_wrote(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    args = ["bracket", PANEL, "--operator", HEADS[2], "--operator", HEADS[1], "--eps", "0.25", "--work", "3000",
            "--device", "cpu", "--out", f"{out}/"]
    first = run_softrank(*args)
    assert first.returncode == 0, first.stderr
    again = run_softrank(*args, "--resume", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["campaign"]["kept"] == 2
