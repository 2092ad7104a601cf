"""Tables within 80 columns without cutting a certified digit, and one DPI for the figures of
the commands and of the API (issue 26 point 5)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import SOFTRANK_CMD


@pytest.fixture(scope="module")
def operator_file(tmp_path_factory) -> Path:
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("op") / "op.npz"
    np.savez(path, Q=rng.standard_normal((6, 3)), K=rng.standard_normal((7, 3)))
    return path


def _softrank(*args, columns: str = "80") -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=columns)
    env.pop("SOFTRANK_DEBUG", None)
    return subprocess.run([*SOFTRANK_CMD, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)


def test_geometry_table_fits_80_columns_with_every_certified_digit(operator_file):
    """It was a 170-column table that rich cut with an ellipsis at 80 columns."""
    text = _softrank("geometry", operator_file, "--rank", "2", "--eps", "0.25")
    assert text.returncode == 0, text.stderr
    assert max(len(line) for line in text.stdout.splitlines()) <= 80, text.stdout
    assert "…" not in text.stdout
    report = json.loads(_softrank("geometry", operator_file, "--rank", "2", "--eps", "0.25", "--json").stdout)
    (entry,) = report["operators"]
    shown = 0
    for name in entry["certified"]:
        if name == "estimates" or entry.get(name) is None:
            continue
        assert f"{name} " in text.stdout
        assert entry[name] in text.stdout, (name, entry[name])  # the 17-digit string, whole
        shown += 1
    assert shown >= 5


@pytest.mark.slow
def test_api_figure_has_the_commands_dpi(operator_file, tmp_path):
    """``Profile.figure().savefig()`` was 720 x 520 px against the command's 1440 x 1040."""
    import matplotlib.image

    import softrank_cert as sc
    from softrank_cert.plumbing.plotting import DPI

    cli_png = tmp_path / "cli.png"
    res = _softrank("profile", operator_file, "--grid", "0.25,0.5", "--budget-seconds", "1", "--plot", cli_png)
    assert res.returncode == 0, res.stderr
    prof = sc.profile(sc.load_operator(operator_file), ["0.25", "0.5"], budget_seconds=1)
    fig = prof.figure()
    assert fig.dpi == DPI
    api_png = tmp_path / "api.png"
    fig.savefig(api_png)  # matplotlib's default: the figure's own dpi
    cli_shape, api_shape = matplotlib.image.imread(cli_png).shape[:2], matplotlib.image.imread(api_png).shape[:2]
    assert api_shape == cli_shape == (round(5.2 * DPI), round(7.2 * DPI))
