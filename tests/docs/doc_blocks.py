"""The shell blocks a newcomer copies from the docs, and how they are run (tests/README.md, "Docs that run").

Every fenced ```` ```bash ```` block of the pages in :data:`RUN_PAGES` (of the README only its worked
example) is run verbatim by ``bash -e -o pipefail -c BLOCK`` from the repository root, one bash per
block, in page order, with ``WORK`` set to one scratch folder per page (``TMPDIR`` inside it). The line
just above a fence may mark the block: :data:`SKIP` (not run; it must hold installation commands
only) or :data:`SLOW` (a test marked ``slow``; ``.ci/run`` runs it like any other).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Page -> the heading of the one section whose blocks run (None: the whole page).
RUN_PAGES: dict[str, str | None] = {"README.md": "## One worked example", "docs/tutorial.md": None,
                                    "docs/hf-models.md": None}
SKIP = "<!-- docs-run: skip (installs packages) -->"
SLOW = "<!-- docs-run: slow -->"
MARKER = re.compile(r"^<!--\s*docs-run:.*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")
#: One installation command: pip (or python -m pip) install, with nothing chained after it but another.
INSTALL = re.compile(r"^(python3? -m )?pip install\s+\S.*$")


@dataclass(frozen=True)
class Block:
    """One fenced bash block: its page, the 1-based line of its opening fence, its text and its
    marker (``"skip"``, ``"slow"``, None, or the unknown marker line itself)."""

    page: str
    line: int
    text: str
    marker: str | None


def _section(lines: list[str], heading: str | None) -> tuple[int, list[str]]:
    """(offset, lines) of the section whose heading starts with ``heading``, up to the next heading of
    its level."""
    if heading is None:
        return 0, lines
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    level = heading.split()[0] + " "
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(level)), len(lines))
    return start, lines[start:end]


def _marker(previous: list[str]) -> str | None:
    above = next((line.strip() for line in reversed(previous) if line.strip()), "")
    if not MARKER.match(above):
        return None
    return {SKIP: "skip", SLOW: "slow"}.get(above, above)


def page_blocks(page: str, root: Path = ROOT) -> list[Block]:
    """The ```` ```bash ```` blocks of ``page`` (a path relative to ``root``) in :data:`RUN_PAGES` scope."""
    offset, lines = _section((root / page).read_text("utf-8").splitlines(), RUN_PAGES.get(page))
    blocks, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) == "bash":
            blocks.append(Block(page, offset + i + 1, "\n".join(lines[i + 1:end]) + "\n", _marker(lines[:i])))
        i = end + 1
    return blocks


def installs_only(text: str) -> bool:
    """Whether every command of ``text`` (lines, ``&&`` chains; ``#`` comments aside) is a pip install."""
    commands = [part.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
                for part in line.split("#", 1)[0].split("&&")]
    return bool(commands) and all(INSTALL.match(command) for command in commands)


def run_block(block: Block, work: Path, root: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``block`` verbatim with bash from ``root``, ``WORK=work`` (the console scripts of this
    Python first on ``PATH``)."""
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SOFTRANK_DEBUG"}
    env.update(WORK=str(work), TMPDIR=str(work / "tmp"),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]))
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
