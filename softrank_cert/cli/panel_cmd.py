"""``softrank panel``: real attention operators from a checkpoint and a document."""

from __future__ import annotations

from typing import Any

from ..plumbing.files import check_output_file
from ..plumbing.progress import progress_bar
from ..plumbing.reports import dumps, envelope
from .common import add_command, int_list

EPILOG = """\
examples:
  softrank panel --model minilm --text examples/data/apache2.txt --widths 64,128 --out panel.npz
  softrank panel --model ./gpt2-checkpoint --text doc.txt --widths 128 --layers 0,5 --heads 0,1 --out gpt2.npz

The width-w operator is the model run on the first w tokens of the document (a common-prefix
block). Names look like minilm/apache2/w128/L3H7; w128/tokens holds the exact token ids.
"""


def add_panel(sub: Any) -> None:
    p = add_command(sub, "panel", help="build a panel of real attention operators from a checkpoint",
                    description="Run a checkpoint (numpy + safetensors, no torch) on the first w tokens of a "
                                "document and store every selected head's Q and K as a panel .npz.", epilog=EPILOG)
    p.add_argument("--model", required=True, help="'minilm' (the offline all-MiniLM-L6-v2) or a checkpoint folder")
    p.add_argument("--text", required=True, metavar="FILE", help="UTF-8 document (for ViT: a PNG/JPEG image)")
    p.add_argument("--widths", type=int_list, metavar="W1,W2,...",
                   help="block widths in tokens (required for text models; ViT uses patches + 1)")
    p.add_argument("--layers", type=int_list, metavar="L1,L2,...", help="default: all layers")
    p.add_argument("--heads", type=int_list, metavar="H1,H2,...", help="default: all heads")
    p.add_argument("--out", required=True, metavar="PANEL.npz")
    p.add_argument("--round-beta", action="store_true",
                   help="GPT-2 with scale_attn_by_inverse_layer_idx: store the nearest double where beta is not one")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(run=run_panel)


def run_panel(args: Any) -> int:
    from pathlib import Path

    from ..errors import InvalidInputError
    from ..models import build_panel, operator_names, write_panel

    out = check_output_file(args.out, "--out", suffixes=(".npz",))  # before the forward passes
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise InvalidInputError(f"--out {args.out}: output folder does not exist: {out.parent}")
    with progress_bar(not args.json) as bar:
        task = bar.add_task("forward passes", total=None)
        arrays = build_panel(args.model, args.text, args.widths, layers=args.layers, heads=args.heads,
                             progress=lambda done, total: bar.update(task, completed=done, total=total),
                             round_beta=args.round_beta)
    path = write_panel(args.out, arrays)
    names = operator_names(arrays)
    if args.json:
        print(dumps(envelope("panel", {"panel": str(path), "model": args.model, "text": args.text, "widths": args.widths,
                                       "operators": len(names), "names": names})))
    else:
        print(f"wrote {len(names)} operators to {path} (e.g. {names[0]})")
    return 0
