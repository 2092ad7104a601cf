#!/usr/bin/env python3
"""Regenerate the project's published MiniLM brackets (``certificates/published/``).

What it builds (all paths relative to this folder):

* ``minilm-apache2-w32.npz`` -- the panel: all-MiniLM-L6-v2 on the first 32 tokens of
  ``examples/data/apache2.txt``, layers 0-5, heads 0-11 (72 real operators), via ``softrank panel``;
* ``certs/minilm/apache2/w32/LxHy.json`` -- one certificate per operator with verified
  brackets at eps 0.1, 0.25, 0.5, signed with ``examples/keys/demo-issuer.key``
  (via ``softrank bracket --all``);
* ``brackets.jsonl`` -- the published table: one row per (operator, eps) with
  ``{"operator", "eps", "lower", "upper", "certificate"}``, certificate paths relative
  to this folder.

Check it with::

    softrank audit certificates/published/brackets.jsonl \
        --operators certificates/published/minilm-apache2-w32.npz --out audit.json

Usage: ``python certificates/published/make_published.py [--budget-seconds S]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PANEL = HERE / "minilm-apache2-w32.npz"
CERTS = HERE / "certs"
TABLE = HERE / "brackets.jsonl"
KEY = ROOT / "examples" / "keys" / "demo-issuer.key"
EPS = "0.1,0.25,0.5"


def softrank(*args: str) -> str:
    """Run ``softrank ARGS`` (this checkout's module) and return its stdout."""
    command = [sys.executable, "-m", "softrank_cert.cli.main", *args]
    return subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-seconds", default="120", help="solver time per operator")
    args = parser.parse_args()
    softrank("panel", "--model", "minilm", "--text", str(ROOT / "examples/data/apache2.txt"), "--widths", "32",
             "--layers", "0,1,2,3,4,5", "--heads", ",".join(map(str, range(12))), "--out", str(PANEL), "--json")
    summary = json.loads(softrank("bracket", str(PANEL), "--all", "--eps", EPS, "--out", str(CERTS), "--key", str(KEY),
                                  "--budget-seconds", args.budget_seconds, "--json"))
    rows = []
    for entry in sorted(summary["operators"], key=lambda e: e["operator"]):
        cert = Path(entry["certificate"]).resolve().relative_to(HERE).as_posix()
        for b in entry["brackets"]:
            rows.append({"operator": entry["operator"], "eps": b["eps"], "lower": b["lower"], "upper": b["upper"],
                         "certificate": cert})
    TABLE.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    for cert in CERTS.rglob("*.json"):
        cert.chmod(0o644)  # public documents (write_json_atomic creates 0600 files)
    size = sum(p.stat().st_size for p in CERTS.rglob("*.json"))
    print(f"{len(rows)} rows, {len(summary['operators'])} certificates ({size / 1e6:.2f} MB) -> {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
