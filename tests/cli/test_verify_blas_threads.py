"""``softrank-verify --blas-threads`` (issue 45 item 4): one BLAS thread unless asked for more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from threadpoolctl import threadpool_info

from softrank_cert.cli import verify as cli

EXAMPLE = Path(__file__).resolve().parents[2] / "certificates" / "examples" / "random-qk.json"


def _blas_threads_seen(monkeypatch, argv: list[str]) -> tuple[int, list[int]]:
    seen: list[int] = []
    run = cli._run

    def spy(args):
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return run(args)

    monkeypatch.setattr(cli, "_run", spy)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([str(EXAMPLE), *argv])
    return int(exit_info.value.code), seen


def test_one_blas_thread_by_default(monkeypatch, capsys):
    code, seen = _blas_threads_seen(monkeypatch, [])
    assert code == 0 and seen and set(seen) == {1}


def test_blas_threads_option(monkeypatch, capsys):
    code, seen = _blas_threads_seen(monkeypatch, ["--blas-threads", "2"])
    assert code == 0 and seen and max(seen) <= 2


def test_one_blas_thread_in_a_fresh_process(tmp_path):
    """The command line imports numpy lazily: the limit must hold for the BLAS it loads later."""
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from softrank_cert.cli import verify as cli\n"
            "run = cli._run\n"
            "def spy(args):\n"
            "    from threadpoolctl import threadpool_info\n"
            "    print(json.dumps([p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas']), file=sys.stderr)\n"
            "    return run(args)\n"
            "cli._run = spy\n"
            f"cli.main([{str(EXAMPLE)!r}])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stderr.strip().splitlines()[-1])
    assert seen and set(seen) == {1}, seen


def test_blas_threads_must_be_positive(monkeypatch, capsys):
    code, seen = _blas_threads_seen(monkeypatch, ["--blas-threads", "0"])
    assert code == 2 and not seen
    assert "--blas-threads" in capsys.readouterr().err
