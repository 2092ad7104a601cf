"""``softrank survey``: a model and a document to every head's certified bracket and its page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import (IMAGE_HELP, add_campaign_options, add_capture_options, add_command, add_force_option,
                     add_json_options, key_inputs)

#: The default of --max-cpu-minutes: a survey estimated longer is refused before any search.
DEFAULT_MAX_CPU_MINUTES = 240.0

EPILOG = """\
examples:
  softrank survey --gguf smollm2 --text examples/data/apache2.txt --widths 128 --work quick --out smollm2-survey
  softrank survey --model minilm --text examples/data/apache2.txt --widths 64,128 --eps 0.1,0.25 --out s/ --jobs 2
  softrank survey --hf dinov2-small --image cat.png --layers 0,11 --out vit-survey --key issuer.key
  softrank survey --gguf smollm2 --text doc.txt --widths 128 --out smollm2-survey --resume   # after a stop

One command for 'softrank panel', 'softrank bracket --all', 'softrank kv-budgets' and 'softrank
report': the stages panel (OUT/panel.npz), brackets (OUT/certs/, a bracket campaign: one
certificate per head), kv-budgets (OUT/certs/kv_budgets.json: per head, the certified minimum
cache size for any common-set compression and StreamingLLM's and H2O's verified budgets) and
report (OUT/report.html with its figures in OUT/report-figures/: layer x head heatmaps per
width and tolerance, a per-layer table, sortable rows). OUT/survey.json records the parameters,
the estimate and each stage's CPU and wall seconds; docs/survey.md describes the folder.

--work quick (an eighth of the default work of each head's shape: about 2 CPU s per head at
width 128), --work default (about 16 CPU s per head at width 128, 111 at 512), or --work N
units. The estimate, per head at each level and in all, is printed (stderr) before the first
search; a survey estimated above --max-cpu-minutes is refused then, before any search. Work,
not time, bounds each search: the same level gives the same certificates on a busy machine.

--resume continues a survey: the panel is captured again and kept only when it is the same
bit for bit, every certificate kept is re-verified by the kernel (docs/campaigns.md), the page
is written again; a resume with other options is refused. An OUT that holds a survey is refused
without --resume or --force, and an OUT that holds other files without --force.

exit codes: 0 every head bracketed and the page written; 2 invalid input (a document, model or
key that cannot be read, a model whose packages are missing: the message names the install
line, an estimate over --max-cpu-minutes, an OUT in use), or an output that cannot be written;
4 a checker bug; 6 the survey finished but some heads failed (see OUT/certs/softrank-campaign.json
and the page); 130 interrupted (the message names the --resume command).
"""


def add_survey(sub: Any) -> None:
    """The parser of ``softrank survey`` (imports no study)."""
    p = add_command(sub, "survey", epilog=EPILOG)
    add_capture_options(p, {
        "--model": "'minilm' or a checkpoint folder (numpy loaders; as softrank panel)",
        "--hf": "a transformers checkpoint folder, 'minilm' or 'dinov2-small' (the [hf] extra; as softrank panel)",
        "--gguf": "a GGUF file or 'smollm2', 'qwen2.5-0.5b', 'qwen2.5-1.5b', 'gemma3-270m' (the [gguf] extra; as "
                  "softrank panel)",
        "--text": "UTF-8 document",
        "--image": IMAGE_HELP},
        "block widths in tokens (required for text models; a ViT uses patches + 1)")
    p.add_argument("--eps", default="0.1,0.25,0.5", metavar="E1,E2,...",
                   help="exact decimal tolerances (default 0.1,0.25,0.5)")
    p.add_argument("--work", metavar="LEVEL|N", help="search work per head: quick, default (the default) or N units")
    p.add_argument("--max-cpu-minutes", type=float, default=DEFAULT_MAX_CPU_MINUTES, metavar="M",
                   help=f"refuse, before any search, a survey estimated above M CPU minutes (default "
                        f"{DEFAULT_MAX_CPU_MINUTES:g})")
    p.add_argument("--out", required=True, metavar="DIR", help="the survey folder (docs/survey.md)")
    p.add_argument("--key", metavar="KEYFILE", help="sign the certificates with this key (softrank keygen)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="heads solved at a time in worker processes (default 1; 0 = one per CPU)")
    add_campaign_options(p)
    add_force_option(p, "start the survey again where OUT holds one (or holds other files)")
    add_json_options(p, "print a JSON summary")
    p.set_defaults(run=run_survey_command)


def run_survey_command(args: Any) -> int:
    from ..certio.signing import load_private_key
    from ..errors import EXIT_SOME_FAILED, InvalidInputError
    from ..models.capture import ModelSource, check_packages
    from ..plumbing.parallel import resolve_jobs
    from ..studies.survey.plan import Work, check_folder
    from ..util.tolerances import parse_eps_list
    from .bracket_cmd import resume_hint
    from .common import campaign_memory

    eps_list = parse_eps_list(args.eps)
    work = Work.parse(args.work)
    if not args.max_cpu_minutes > 0:
        raise InvalidInputError(f"--max-cpu-minutes must be positive, got {args.max_cpu_minutes}")
    document = Path(args.text or args.image)
    if not document.is_file():
        raise InvalidInputError(f"{'--text' if args.text else '--image'} {document}: no such file")
    key = load_private_key(args.key) if args.key else None
    source = ModelSource(args.model, args.hf, args.gguf)
    check_packages(source)
    out = check_folder(args.out, resume=bool(args.resume), force=bool(args.force))
    inputs = {"document": document, **key_inputs(args.key)}
    if source.path is not None:
        inputs["model"] = Path(source.path)
    from ..studies.survey.stages import Survey, check_resume, run_survey, say_estimate

    survey = Survey(out, source, document, args.image is not None, args.widths, args.layers, args.heads, eps_list,
                    work, key=key, jobs=resolve_jobs(args.jobs), max_memory=campaign_memory(args),
                    max_cpu_seconds=60.0 * args.max_cpu_minutes, resume=bool(args.resume), force=bool(args.force),
                    resume_command=resume_hint(args), bar=not args.json, inputs=inputs)
    check_resume(survey)
    say_estimate(survey)
    out.mkdir(parents=True, exist_ok=True)
    summaries = run_survey(survey)
    if args.json:
        from ..plumbing.json_contract import dumps, envelope

        print(dumps(envelope("survey", {"folder": str(out), "model": source.label, "document": str(document),
                                        "widths": args.widths, "eps": eps_list, "work": work.name,
                                        "signed": key is not None, "stages": summaries})))
    else:
        brackets = summaries["brackets"]
        print(f"surveyed {len(brackets['operators'])} heads ({brackets['computed']} computed, {brackets['kept']} kept, "
              f"{len(brackets['failed'])} failed); page: {summaries['report']['page']}")
    return EXIT_SOME_FAILED if survey.failed else 0
