"""Peak resident memory of one operator's bracket task against the estimate ``--max-memory``
admits tasks by (:func:`softrank_cert.util.memory.bracket_task_bytes`).

Each head runs in a fresh interpreter (so that its peak is its own): the panel is loaded, the
driver brackets the operator (default work, or ``--work``), the certificate is written to a
temporary folder, and the child reports ``ru_maxrss`` (on Linux this also counts this parent's
resident memory at the fork, ~60 MB, kept across exec: the figures are on the safe side).  Usage (what produced the committed
results; the panel from ``softrank panel --gguf smollm2 --text examples/data/gpl3.txt --widths
512,1024 --layers 10,15 --heads 4 --out smol.npz``)::

    nice -n 10 python benchmarks/memory_peak.py smol.npz --eps 0.1,0.25,0.5 --name smollm2_gpl3

Writes ``benchmarks/results/memory_peak_<name>.json`` and ``.md``.  The width-4096 records
(``--work 1000000 --name synth_w4096_work1e6_bounded``) ran on a synthetic causal ``qk`` panel::

    rng = np.random.default_rng(44)
    np.savez("synth4096.npz", **{"synth/gauss/w4096/qk/Q": 0.3 * rng.standard_normal((4096, 64)),
                                 "synth/gauss/w4096/qk/K": rng.standard_normal((4096, 64)),
                                 "synth/gauss/w4096/qk/causal": np.bool_(True)})
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
from softrank_cert import load_operator
from softrank_cert.plumbing.bracketing import bracket_result
from softrank_cert.util.memory import operator_task_bytes
path, name, eps, work, device = sys.argv[1:6]
op = load_operator(path, name)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = time.process_time()
result = bracket_result(op, eps.split(","), work=None if work == "default" else float(work),
                        device=None if device == "numpy" else device, operator_id=name)
with tempfile.TemporaryDirectory() as tmp:
    result.save(Path(tmp) / "c.json")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"operator": name, "shape": list(op.shape), "cpu_seconds": round(time.process_time() - start, 1),
                  "rss_after_load": before, "peak_rss": peak, "estimate": operator_task_bytes(op, device),
                  "ends": {b.eps: [b.lower.k, b.upper.r] for b in result.brackets}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("panel")
    parser.add_argument("--eps", default="0.1,0.25,0.5")
    parser.add_argument("--work", default="default")
    parser.add_argument("--device", default="numpy")
    parser.add_argument("--operators", help="names (comma-separated); default: every operator of the panel")
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    from softrank_cert import load_panel

    names = args.operators.split(",") if args.operators else list(load_panel(args.panel))
    rows: list[dict] = []
    for name in names:
        out = subprocess.run([sys.executable, "-c", CHILD, args.panel, name, args.eps, args.work, args.device],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["ratio"] = round(row["peak_rss"] / row["estimate"], 3)
        print(json.dumps(row), flush=True)
        rows.append(row)
        write(args, rows)  # after every head: what was measured stays if the run is stopped


def write(args: argparse.Namespace, rows: list[dict]) -> None:
    results = ROOT / "benchmarks" / "results"
    (results / f"memory_peak_{args.name}.json").write_text(json.dumps(
        {"panel": Path(args.panel).name, "eps": args.eps, "work": args.work, "device": args.device, "rows": rows},
        indent=1) + "\n")
    lines = ["| operator | CPU s | peak RSS MiB | estimate MiB | peak / estimate | ends |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['operator']} | {r['cpu_seconds']} | {r['peak_rss'] / 2 ** 20:.0f} | {r['estimate'] / 2 ** 20:.0f} "
              f"| {r['ratio']} | {r['ends']} |" for r in rows]
    (results / f"memory_peak_{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
