"""``softrank bracket``: solvers propose, the kernel verifies, a (signed) certificate is written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..certio.signing import load_private_key
from ..errors import InvalidInputError
from ..plumbing.campaign import budget_json, check_manifest_clear
from ..util.operator_files import NamedOperator, choose_operator_message, load_operators, operator_names
from ..plumbing.bracket_campaign import bracket_targets, run_single
from ..plumbing.parallel import check_scheduler, resolve_jobs
from ..util.progress import Progress
from ..plumbing.json_contract import dumps, envelope
from ..util.tolerances import check_budget, parse_eps_list
from .common import (add_budget_options, add_campaign_run_options, add_command, add_device_option, campaign_memory,
                     given_memory, key_inputs, name_table, stdout_console)

EPILOG = """\
examples:
  softrank bracket op.npz --eps 0.1,0.25,0.5 --out cert.json --key issuer.key
  softrank bracket panel.npz --operator minilm/apache2/w64/L0H3 --eps 0.25 --out cert.json
  softrank bracket op.npz --eps 0.1,0.25 --out cert.json --work 200000   # more work: same ends every run
  softrank bracket panel.npz --all --eps 0.1,0.25,0.5 --out certs/ --key issuer.key --budget-seconds 30
  softrank bracket panel.npz --all --eps 0.25 --out certs/ --jobs 4
  softrank bracket panel.npz --all --eps 0.25 --out certs/ --jobs 4 --resume    # after an interruption
  softrank bracket panel.npz --all --eps 0.25 --out certs/ --scheduler tls://10.0.0.5:8786

With --all (or several --operator, or an --out that ends in '/' or names a folder), --out is
a folder: operator NAME goes to certs/NAME.json (the '/' in panel names become sub-folders).
Every output path is checked before any work: one that is an input (the panel, the --key file
or its .pub) or any key file is refused, an existing file unless --force. Every end written was
VERIFIED by the trusted
kernel first; check any of them again with softrank-verify. --jobs N runs N operators at a
time in worker processes and --scheduler runs them on a Dask cluster; the certificates do not
depend on either, nor on how busy the machine is: the search is bounded by work (--work; the
same work gives the same ends). With --budget-seconds, a time cap, they may. A certificate
that comes back from a worker process or a Dask worker is re-verified by this process's kernel
(every claim VERIFIED, the panel's operator bit for bit, exactly --eps, the provenance) before
it is signed or written; one that does not verify is not written, and its operator is recorded
as failed with the reason (exit 6; --resume computes it again).

Campaigns (--out a folder): certs/softrank-campaign.json records the parameters and each
operator's status and seconds, rewritten atomically after every operator. A folder that holds
a campaign already is refused unless --resume continues it or --force computes it all again
(the manifest keeps its run history, the forced run marked "forced"). --resume keeps
every certificate that exists, is re-verified by the kernel, is about the panel's operator bit
for bit, has exactly the requested tolerances and the panel's provenance (signed by --key when
given), and computes the rest; resuming with other --eps is refused (docs/campaigns.md). A worker
that dies costs its task one retry; a task that fails again is recorded as failed and the
campaign goes on. --max-memory (default 75% of this machine) refuses a task whose estimated
peak does not fit and starts tasks only while they fit together; given, it also lets the
kernel's checks of a wide operator's candidates use what it leaves beside the task (else 1 GiB
at most: from width 1024 the Arb checks stop at 64 bits), so the ends may depend on it.

exit codes: 0 every certificate written (or kept); 2 invalid input (also an operator named
softrank-campaign, the manifest's name, or a --resume with other --eps), an output that is an
input or a key file, or exists without --force (a campaign without --resume or --force), or an
output that cannot be written (full disk: one line, the manifest and every finished certificate
stay intact);
4 a checker bug; 6 the campaign finished but some operators failed or were refused, including
a worker's certificate that did not verify here (see the manifest); 130 interrupted by Ctrl-C or
SIGTERM (the message names the --resume command). One operator (--out a file) run on a Dask
cluster whose certificate does not verify here: softrank-verify's code for it (1 a claim
REJECTED, 3 INCONCLUSIVE, 2 it does not decode), nothing written.
"""


def add_bracket(sub: Any) -> None:
    p = add_command(sub, "bracket", epilog=EPILOG)
    p.add_argument("operator_file", metavar="OPERATOR.npz")
    p.add_argument("--eps", required=True, metavar="E1,E2,...", help="exact decimal tolerances, e.g. 0.1,0.25,0.5")
    p.add_argument("--out", required=True, metavar="CERT.json|FOLDER")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--operator", action="append", metavar="NAME", help="operator of a panel (repeatable)")
    which.add_argument("--all", action="store_true", help="every operator of the panel (--out is a folder)")
    p.add_argument("--key", metavar="KEYFILE", help="sign the certificates with this key (softrank keygen)")
    add_budget_options(p, "solver time per operator, all tolerances together")
    add_device_option(p)
    add_campaign_run_options(p, "print a JSON summary instead of the table")
    p.set_defaults(run=run_bracket)


def verify_hint(out: Path, targets: list[Path]) -> str:
    """A command to paste: ``softrank-verify FOLDER`` for several certificates, else the file."""
    import shlex

    return "softrank-verify " + shlex.quote(str(out if len(targets) != 1 else targets[0]))


def _select(args: Any) -> list[NamedOperator]:
    path = Path(args.operator_file)
    if args.all or args.operator:
        return load_operators(path, None if args.all else args.operator)
    names = operator_names(path) if path.is_file() else []
    if len(names) > 1:
        raise InvalidInputError(choose_operator_message(path, names, "--operator NAME, or use --all"))
    return load_operators(path)


def run_bracket(args: Any) -> int:
    from ..errors import EXIT_SOME_FAILED

    eps_list = parse_eps_list(args.eps)
    check_budget(args.work, args.budget_seconds, options=True)
    key = load_private_key(args.key) if args.key else None  # fail before any work
    operators = _select(args)
    inputs = {"operator file": Path(args.operator_file), **key_inputs(args.key)}
    out, targets = bracket_targets(args.out, [item.name for item in operators], several=bool(args.all),
                                  resume=bool(args.resume), force=bool(args.force), inputs=inputs)
    campaign = len(targets) != 1 or out != targets[0]  # --out is a folder
    if args.resume and not campaign:
        raise InvalidInputError("--resume needs a campaign folder: --out DIR/ (with --all or several --operator)")
    max_memory = campaign_memory(args)
    jobs = resolve_jobs(args.jobs)
    if args.device is not None:  # after the input checks: it imports the solvers (and torch)
        from ..solvers import check_device

        check_device(args.device)
    if not campaign:
        return _run_single(args, operators[0], targets[0], eps_list, key, jobs, max_memory)
    check_manifest_clear(item.name for item in operators)
    check_scheduler(args.scheduler)  # before the manifest is written
    from ..plumbing.bracket_campaign import CampaignPlan, run_campaign

    plan = CampaignPlan(out, Path(args.operator_file), operators, targets, eps_list,
                        [args.work if args.work is not None else operator_work(args, item) for item in operators],
                        args.budget_seconds, key=key, jobs=jobs,
                        scheduler=args.scheduler, max_memory=max_memory, device=args.device,
                        given_memory=given_memory(args), resume=bool(args.resume),
                        force=bool(args.force), resume_command=resume_hint(args))
    with Progress("softrank bracket", len(operators), bar=not args.json) as bar:
        done = run_campaign(plan, inputs, bar)
    manifest, summary, failed = done.campaign.manifest, done.entries, done.failed
    if args.json:
        print(dumps(envelope("bracket", {
            "operator_file": str(args.operator_file), "eps": eps_list,
            "budget_seconds": budget_json(args.budget_seconds), "budget_work": plan.budget_work,
            "signed": bool(key), "operators": summary, "failed": failed,
            "campaign": {"manifest": str(manifest.path), "computed": manifest.run["computed"], "kept": done.kept,
                         "failed": len(failed)}})))
    else:
        _render(summary)
        kept_text = f" (kept {done.kept} from an earlier run)" if done.kept else ""
        print(f"wrote {manifest.run['computed']} certificate(s){kept_text}; check them with: {verify_hint(out, targets)}")
        if failed:
            print(f"{len(failed)} operator(s) failed or were refused (see {manifest.path}): "
                  + ", ".join(entry["operator"] for entry in failed[:5]) + (", ..." if len(failed) > 5 else ""))
    return EXIT_SOME_FAILED if failed else 0


def _run_single(args: Any, item: NamedOperator, target: Path, eps_list: list[str], key: Any, jobs: int,
                max_memory: int | None) -> int:
    """One operator to one certificate file (no manifest): a failure is the command's error."""
    with Progress("softrank bracket", 1, bar=not args.json) as bar:
        summary = [run_single(item, target, eps_list, args.work, args.budget_seconds, bar, key=key, jobs=jobs,
                              scheduler=args.scheduler, max_memory=max_memory, device=args.device,
                              given_memory=given_memory(args))]
    if args.json:
        print(dumps(envelope("bracket", {"operator_file": str(args.operator_file), "eps": eps_list,
                                         "budget_seconds": budget_json(args.budget_seconds),
                                         "budget_work": budget_work(args, [item]), "signed": bool(key),
                                         "operators": summary, "failed": [], "campaign": None})))
    else:
        _render(summary)
        print(f"wrote 1 certificate; check it with: {verify_hint(target, [target])}")
    return 0


def operator_work(args: Any, item: NamedOperator) -> float | None:
    """The work bound the search of ``item`` runs with: ``--work``, else (no time cap) the
    driver's default work of its shape; None for a time cap alone or ``--work inf``."""
    from ..solvers import effective_work

    return effective_work(args.work, args.budget_seconds, *item.operator.shape)


def budget_work(args: Any, operators: list[NamedOperator]) -> float | None:
    """``budget_work`` of the report and the manifest: the work every operator's search runs with
    (:func:`operator_work`), or None when there is none or it differs by shape (then each
    manifest entry's ``work`` says)."""
    works = {operator_work(args, item) for item in operators}
    return works.pop() if len(works) == 1 else None


def resume_hint(args: Any) -> str:
    """The ``softrank`` command line of this run (``args.argv``, else ``sys.argv``) with
    ``--resume``: what an interruption names to continue the campaign."""
    from ..plumbing.campaign import resume_command

    return resume_command("softrank", list(getattr(args, "argv", None) or sys.argv[1:]))


def _render(summary: list[dict[str, Any]]) -> None:
    table, shown = name_table("softrank bracket (every end VERIFIED by the trusted kernel)",
                              [entry["operator"] for entry in summary],
                              ["operator", "p", "eps", "lower", "upper", "resolved", "s"],
                              right=("p", "eps", "lower", "upper", "resolved", "s"))
    for entry in summary:
        for b in entry["brackets"]:
            table.add_row(shown(entry["operator"]), str(entry["p"]), b["eps"], f"{b['lower']} ({b['lower_method']})",
                          f"{b['upper']} ({b['upper_construction']})", "yes" if b["lower"] == b["upper"] else "",
                          "" if entry['seconds'] is None else f"{entry['seconds']:.1f}")
    stdout_console().print(table)
