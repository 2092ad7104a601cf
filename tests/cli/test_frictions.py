"""The small frictions of issue 47 item 4: true elapsed time in progress, one line per claim in a
piped verify report, and one warning when numpy came before softrank_cert."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from conftest import VERIFY_CMD, build_document, peaked_operator, valid_brackets, write_certificate

ROOT = Path(__file__).resolve().parents[2]


def test_stage_progress_reports_the_true_elapsed_time(monkeypatch):
    """A work-bounded search that runs longer than its nominal seconds (a busy machine) reports
    its real elapsed time: the stage times were capped at the nominal budget (16.0 s printed for
    a 179 s search).  The clock is a fake one that advances 1000 s a reading."""
    import softrank_cert.solvers.bracket as driver
    from softrank_cert.kernel import Operator

    readings = iter(range(0, 10 ** 9, 1000))
    monkeypatch.setattr(driver, "time", types.SimpleNamespace(perf_counter=lambda: float(next(readings))))
    rng = np.random.default_rng(3)
    op = Operator("qk", {"Q": rng.standard_normal((12, 3)), "K": rng.standard_normal((12, 3))})
    seen: list[tuple[str, float, float]] = []
    driver.search_operator(op, ["0.25"], work=500, progress=lambda stage, elapsed, nominal: seen.append(
        (stage, elapsed, nominal)))
    assert seen and seen[-1][1] > seen[-1][2], seen  # beyond the nominal seconds, as it was
    assert [e for _, e, _ in seen] == sorted(e for _, e, _ in seen)


def test_a_stage_line_says_wall_and_cpu_seconds(capsys, monkeypatch):
    from softrank_cert.util import progress

    monkeypatch.setattr(progress, "lines_wanted", lambda: True)
    bar = progress.Progress("softrank bracket", 1, bar=False)
    bar.stage_line("op", "smooth 1/3", 179.24)
    line = capsys.readouterr().err.strip()
    assert line.startswith("softrank bracket: op: stage smooth 1/3 done (179 s wall, ") and line.endswith(" s CPU)")


def _verify_piped(*paths: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([*VERIFY_CMD, *map(str, paths)], capture_output=True, text=True, env=env).stdout


def test_a_piped_verify_report_is_one_line_per_claim_with_its_file(tmp_path):
    """Without a terminal (and without $COLUMNS) every claim is one line that names its file in
    full: ``grep VERIFIED`` keeps which certificate each claim is about, however long the path
    (it was folded over several lines at 80 columns)."""
    op = peaked_operator()
    folder = tmp_path / "a-rather-long-folder-name-for-the-certificates" / "minilm" / "apache2" / "w128"
    folder.mkdir(parents=True)
    files = [write_certificate(folder / f"L{i}H{i}-with-a-long-name.json", build_document(op, valid_brackets(op)))
             for i in range(2)]
    for given in (files, files[:1]):
        out = _verify_piped(*given)
        claims = [line for line in out.splitlines() if "VERIFIED" in line]
        assert len(claims) == 2 * len(valid_brackets(op)) * len(given), out
        assert claims and all(any(line.startswith(str(f)) for f in given) for line in claims), out
        assert sum(1 for line in claims if line.startswith(str(given[0]))) == 2 * len(valid_brackets(op))


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel pinning is for x86-64 Linux builds")
def test_numpy_before_softrank_cert_warns_once_when_searching():
    from softrank_cert.blas_kernels import avx2_x86

    if not avx2_x86():
        pytest.skip("nothing is pinned on a CPU without AVX2 and FMA")
    search = ("op = sc.load_operator('examples/panels/minilm-apache2-w32.npz', name='minilm/apache2/w32/L5H2')\n"
              "sc.bracket(op, ['0.5'], work=200)\nsc.bracket(op, ['0.5'], work=200)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SOFTRANK_KERNELS_UNPINNED", "OPENBLAS_CORETYPE",
                                                             "NPY_DISABLE_CPU_FEATURES")}
    runs = {}
    for first in ("import numpy\nimport softrank_cert as sc\n", "import softrank_cert as sc\nimport numpy\n"):
        runs[first] = subprocess.run([sys.executable, "-c", first + search], capture_output=True, text=True,
                                     cwd=ROOT, env=env, timeout=300)
    numpy_first, ours_first = runs.values()
    assert numpy_first.returncode == 0 and ours_first.returncode == 0, numpy_first.stderr + ours_first.stderr
    assert numpy_first.stderr.count("numpy was imported before softrank_cert") == 1, numpy_first.stderr
    assert "numpy was imported" not in ours_first.stderr


# the survey runs the same check as the panel (a survey builds its panel first): slow
@pytest.mark.parametrize("command", ["panel", pytest.param("survey", marks=pytest.mark.slow)])
def test_gguf_without_its_package_names_the_install_line(tmp_path, command):
    """``--gguf`` where the gguf package does not import: one line, exit 2, naming the one
    install line that makes it work; nothing written."""
    out = tmp_path / ("p.npz" if command == "panel" else "survey")
    argv = [command, "--gguf", "smollm2", "--text", str(ROOT / "examples" / "data" / "apache2.txt"), "--widths", "16",
            "--out", str(out)]
    code = ("import sys\nsys.modules['gguf'] = None\nfrom softrank_cert.cli.main import main\n"
            f"main({argv!r})\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    lines = [line for line in res.stderr.splitlines() if line.strip() and "estimate" not in line]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "needs the gguf package" in lines[0] and "pip install -e '.[gguf]'" in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir())
