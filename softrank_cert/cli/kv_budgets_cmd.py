"""``softrank kv-budgets``: certified KV-cache budgets per head from a bracket folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EXIT_SOME_FAILED, InvalidInputError
from ..util.files import loads_unique, read_regular_file
from .common import add_command, add_force_option, add_json_options, comma_items, key_inputs

#: The policies and their defaults, written out so that ``--help`` imports no study
#: (``tests/cli/test_kv_budgets.py`` checks that they agree with ``studies.kv_budgets.policies``).
POLICY_NAMES = ("streaming-llm", "h2o", "keep")
DEFAULT_SINKS = 4
DEFAULT_RECENT_SHARE = 0.5
#: The largest ``--keep`` file read.
MAX_KEEP_BYTES = 1 << 20

EPILOG = """\
examples:
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ && softrank kv-budgets certs/
  softrank kv-budgets certs/ --eps 0.25 --policies streaming-llm --sinks 1 --json
  softrank kv-budgets certs/ --policies h2o,keep --keep kept.json --h2o-recent-share 0.25
  softrank kv-budgets certs/ --resume                  # after an interruption: keeps what re-verifies
  softrank-verify certs/kv-budgets                     # re-check every certified budget

FOLDER is the --out folder of 'softrank bracket PANEL --all' (its softrank-campaign.json names
the heads and tolerances; each head's certificate is re-checked by the trusted kernel), or a
'softrank survey' folder (its certs/ folder is read and written).  For
every head and tolerance eps it reports:
  lower   the head's verified lower end k: the certified minimum number of cache slots for any
          common-set compression -- no cache keeping a common set of fewer than k key slots for
          these queries (eviction with renormalisation, token merging, a Linformer-style
          projection: any output A'V with rank A' < k) keeps every output of the head within
          eps for every value matrix with entries in [-1, 1] (proofs/kv-budgets.md);
  budget  per policy, the smallest number of kept slots whose worst-case error the kernel
          VERIFIED <= eps (the kept set, renormalised, as an upper witness); 'minimal' when it
          equals the lower end or the kernel REJECTED one slot fewer, else an upper bound on the
          policy's minimum; none when the bounded search (a few kernel checks) found none.
Policies: streaming-llm (the first --sinks keys, then the newest ones), h2o (heavy hitters by
attention summed over the queries, --h2o-recent-share of the budget for the newest keys), keep
(--keep FILE: a JSON array of key positions in priority order; budget s keeps its first s).
Not covered: per-query top-k selection (Quest, Loki), quantisation, typical-value errors.

Writes FOLDER/kv_budgets.json (the report), FOLDER/kv-budgets/POLICY/NAME.json (a certificate per
head and policy: per eps the head's lower end and the policy's witness; signed with --key) as each
head is done, and FOLDER/kv-budgets/figures/ (one PNG per model).  An existing output is refused
before any work unless --force (compute again: the earlier run's kv_budgets.json and
kv-budgets/ folder, every policy's certificates in it, are removed first) or --resume (keep a
policy certificate that re-verifies with the same operator, policy and tolerances; compute the rest).

exit codes: 0 every head studied; 2 invalid input (not a bracket folder, an --eps the campaign
does not hold, a bad --keep file or policy, an output that exists without --force/--resume):
checked before any work; 4 a checker bug; 6 some heads could not be studied (their certificate
missing or not verified: listed under "failed"); 130 interrupted (run again with --resume).
"""


def add_kv_budgets(sub: Any) -> None:
    p = add_command(sub, "kv-budgets", epilog=EPILOG)
    p.add_argument("folder", metavar="FOLDER", help="the --out folder of 'softrank bracket PANEL --all'")
    p.add_argument("--eps", metavar="E1,E2,...", help="tolerances to study (default: all of the campaign's)")
    p.add_argument("--policies", metavar="P1,P2",
                   help=f"policies among {', '.join(POLICY_NAMES)} (default: streaming-llm,h2o, and keep with --keep)")
    p.add_argument("--keep", metavar="FILE", help="the keep policy's key positions: a JSON array of integers, in "
                                                  "priority order")
    p.add_argument("--sinks", type=int, default=DEFAULT_SINKS, metavar="N",
                   help=f"StreamingLLM's attention sinks (default {DEFAULT_SINKS})")
    p.add_argument("--h2o-recent-share", type=float, default=DEFAULT_RECENT_SHARE, metavar="F",
                   help=f"H2O's share of the budget for the newest keys, in [0, 1] (default {DEFAULT_RECENT_SHARE})")
    p.add_argument("--key", metavar="KEYFILE", help="sign the policy certificates with this key (softrank keygen)")
    p.add_argument("--resume", action="store_true",
                   help="keep the policy certificates of an earlier run that re-verify; compute the rest")
    add_force_option(p)
    add_json_options(p, "print the report JSON instead of the summary")
    p.set_defaults(run=run_kv_budgets)


def read_keep(path: str) -> list[int]:
    """The ``--keep`` file: a JSON array of distinct non-negative integers (one line, exit 2, otherwise)."""
    try:
        value = loads_unique(read_regular_file(path, MAX_KEEP_BYTES, "--keep file"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInputError(f"--keep {path}: not readable JSON ({exc})") from None
    if not (isinstance(value, list) and value and all(isinstance(j, int) and not isinstance(j, bool) and j >= 0
                                                      for j in value)):
        raise InvalidInputError(f"--keep {path}: not a non-empty JSON array of key positions (integers >= 0)")
    if len(set(value)) != len(value):
        raise InvalidInputError(f"--keep {path}: a key position is listed twice")
    return value


def _policy_names(args: Any) -> list[str]:
    names = comma_items(args.policies) if args.policies else ["streaming-llm", "h2o"] + (["keep"] if args.keep else [])
    for name in names:
        if name not in POLICY_NAMES:
            raise InvalidInputError(f"--policies: unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")
    if len(set(names)) != len(names):
        raise InvalidInputError("--policies: a policy is named twice")
    if "keep" in names and not args.keep:
        raise InvalidInputError("--policies keep needs --keep FILE (the kept key positions)")
    if args.keep and "keep" not in names:
        raise InvalidInputError("--keep FILE is the keep policy's: add keep to --policies")
    if args.sinks < 0:
        raise InvalidInputError(f"--sinks must be >= 0, got {args.sinks}")
    if not 0 <= args.h2o_recent_share <= 1:
        raise InvalidInputError(f"--h2o-recent-share must be in [0, 1], got {args.h2o_recent_share}")
    return names


def _tolerances(args: Any, manifest: dict[str, Any]) -> list[str]:
    held = list(manifest["tolerances"])
    if not args.eps:
        return held
    from ..util.tolerances import parse_eps_list

    wanted = parse_eps_list(args.eps)
    for eps in wanted:
        if eps not in held:
            raise InvalidInputError(f"--eps {eps}: the campaign's certificates hold the tolerances {','.join(held)}; "
                                    "choose among them")
    return wanted


def run_kv_budgets(args: Any) -> int:
    """Check everything before any work, study every head (certificates written as each is done),
    then write the report and the figures together.  Returns 0, or 6 when some head failed."""
    from ..studies.kv_budgets.folder import bracket_folder, check_outputs
    from ..studies.report.folder import plan, read_manifest

    names = _policy_names(args)
    keep = read_keep(args.keep) if args.keep else []
    folder = bracket_folder(Path(args.folder))
    manifest = read_manifest(folder)
    tolerances = _tolerances(args, manifest)
    if args.key:
        from ..certio.signing import load_private_key

        load_private_key(args.key)  # fail before any work
    planned = plan(folder, manifest)
    inputs: dict[str, Path] = dict(key_inputs(args.key))  # the campaign's own files: added by check_outputs
    if args.keep:
        inputs["--keep file"] = Path(args.keep)
    check_outputs(folder, [p.name for p in planned], names, inputs, bool(args.force or args.resume))
    report = _study(args, folder, names, keep, tolerances, inputs)
    _print(args, folder, report)
    return EXIT_SOME_FAILED if report["failed"] else 0


def _study(args: Any, folder: Path, names: list[str], keep: list[int], tolerances: list[str],
           inputs: dict[str, Path]) -> dict[str, Any]:
    from ..studies.kv_budgets.folder import certify_folder
    from ..studies.kv_budgets.policies import Policy
    from ..util.progress import Progress

    policies = [Policy(name, sinks=args.sinks, recent_share=args.h2o_recent_share, keep=tuple(keep)) for name in names]
    with Progress("softrank kv-budgets", bar=not args.json, unit="heads") as progress:
        progress.stage("reading the folder")
        return certify_folder(folder, policies, tolerances, stage=progress.stage, resume=bool(args.resume),
                              force=bool(args.force), key=args.key, inputs=inputs)


def _print(args: Any, folder: Path, report: dict[str, Any]) -> None:
    if args.json:
        from ..plumbing.json_contract import dumps

        print(dumps(report))
        return
    from ..util.escaping import plain_text

    print("layer summary (median certified lower bound -> median policy budget, per eps):")
    for row in report["layers"]:
        ratio = "-" if row["median_ratio"] is None else f"{row['median_ratio']:.2f}x"
        print(plain_text(f"  {row['model']} {row['document']} w{row['width']} L{row['layer']} {row['policy']} "
                         f"eps {row['eps']}: {row['heads']} heads, lower {row['median_lower']} -> budget "
                         f"{row['median_budget']} ({ratio}; {row['minimal']} minimal, {row['uncertified']} none)"))
    done = sum(1 for r in report["operators"] if r["status"] == "done")
    print(plain_text(f"{done} heads in {report['seconds']:.1f} s; report: {folder / 'kv_budgets.json'}; check the "
                     f"certificates with: softrank-verify {folder / 'kv-budgets'}"))
    if report["failed"]:
        print(f"{len(report['failed'])} head(s) not studied: "
              + ", ".join(plain_text(f["operator"]) for f in report["failed"][:5]))
