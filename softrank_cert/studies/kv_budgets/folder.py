"""A bracket folder in, the KV-budget report and its figures out (UNTRUSTED orchestration).

The entry points a command or a survey stage calls (``softrank kv-budgets``, the survey's
``kv-budgets`` stage):

* :func:`bracket_folder`: the ``softrank bracket --all`` folder of ``FOLDER`` -- itself, or a
  survey's ``FOLDER/certs`` (the survey folder of ``softrank survey``);
* :func:`check_outputs`: every output path checked before any work; :func:`certify_folder`: the
  whole run (an earlier run's outputs removed first when forced, then :func:`study_folder` and
  :func:`write_report`); both protect the campaign's own files (:func:`folder_inputs`), and
  :func:`is_output` says what a forced run may remove;
* :func:`study_folder`: every head of its manifest (:func:`~.study.run_study`, certificates
  written as each head is done) and the report document (envelope included);
* :func:`write_report`: ``kv_budgets.json`` and one figure per model, together and atomically;
  :func:`figure_paths`: where those figures are, for :func:`~.page.kv_budgets_section`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ...plumbing.campaign import MANIFEST_NAME
from ...errors import InvalidInputError
from ...util.files import OutputFiles, check_folder_unused, check_output_file, file_kind
from ...util.removal import remove_leftovers, remove_outputs
from ...util.progress import Stage
from .plot import figure_name, kv_figures, models
from .policies import POLICY_NAMES, Policy
from .study import OUTPUT_FOLDER, REPORT_NAME, policy_certificate_path, report_body, run_study

#: The bracket campaign folder inside a survey folder (``softrank survey``).
SURVEY_CERTIFICATES = "certs"
#: The figures' subfolder of ``kv-budgets/``, and a figure's name there (:func:`~.plot.figure_name`).
FIGURES = "figures"
_FIGURE = re.compile(r"kv-budgets-[A-Za-z0-9._-]+\.png")
#: A temporary file that an interrupted atomic write left beside its target: ``.NAME.XXXXXXXX.tmp``
#: (``.png`` for a figure; :class:`~softrank_cert.util.files.OutputFiles`).
_STAGED = re.compile(r"\..+\.[a-z0-9_]{8}\.(tmp|png)")


def bracket_folder(folder: Path) -> Path:
    """``folder`` when it holds a bracket campaign manifest, else its ``certs/`` when that does (a
    survey folder), else ``folder`` (whose reading then refuses it with one line)."""
    folder = Path(folder)
    if not (folder / MANIFEST_NAME).exists() and (folder / SURVEY_CERTIFICATES / MANIFEST_NAME).exists():
        return folder / SURVEY_CERTIFICATES
    return folder


def figures_folder(folder: Path) -> Path:
    """Where the figures of the bracket folder ``folder`` go."""
    return Path(folder) / OUTPUT_FOLDER / FIGURES


def is_output(folder: Path, path: Path) -> bool:
    """Whether ``path``, below the bracket folder ``folder``, is an output of a kv-budgets run
    that ``--force`` may remove: the report ``kv_budgets.json``, or a regular file (not a
    symlink) under ``kv-budgets/``: a softrank certificate (by its content) below a policy's
    folder ``kv-budgets/POLICY/``, a figure ``kv-budgets/figures/kv-budgets-*.png``, or a
    temporary file that an interrupted write left in either.  Cost: a certificate is read."""
    parts = Path(path).relative_to(folder).parts
    if Path(path).is_symlink() or not Path(path).is_file():
        return False
    if parts == (REPORT_NAME,):
        return True
    if len(parts) < 3 or parts[0] != OUTPUT_FOLDER:
        return False
    name = parts[-1]
    if parts[1] == FIGURES:
        return len(parts) == 3 and bool(_FIGURE.fullmatch(name) or _STAGED.fullmatch(name))
    return parts[1] in POLICY_NAMES and (bool(_STAGED.fullmatch(name)) or
                                         (name.endswith(".json") and file_kind(path) == "a softrank certificate"))


def folder_inputs(folder: Path, inputs: dict[str, Path] | None = None) -> dict[str, Path]:
    """``inputs`` and the bracket folder's own: its campaign manifest and the certificate of
    every operator the manifest lists (wherever a name puts it, e.g. under ``kv-budgets/``), so
    that no output of a run -- nor what a forced run removes -- is one of them, whatever the
    caller passed."""
    from ..report.folder import plan, read_manifest

    own = {"campaign manifest": Path(folder) / MANIFEST_NAME,
           **{f"certificate of {p.name}": p.path for p in plan(folder, read_manifest(folder)) if p.path is not None}}
    return {**own, **(inputs or {})}


def study_folder(folder: Path, policies: list[Policy], tolerances: list[str] | None = None, *, resume: bool = False,
                 key: Any = None, stage: Stage | None = None) -> dict[str, Any]:
    """The KV-budget report of the bracket folder ``folder`` (``tolerances``: a subset of its
    campaign's, default all); the policy certificates are written into it as each head is done
    (signed with ``key``; ``resume``: kept ones re-checked, :mod:`.study`)."""
    from ...plumbing.json_contract import envelope
    from ..report.folder import plan, read_manifest

    started = time.perf_counter()
    manifest = read_manifest(folder)
    chosen = list(manifest["tolerances"]) if tolerances is None else list(tolerances)
    signer = manifest.get("signer") if isinstance(manifest.get("signer"), str) else None
    entries = [(p.name, p.path if p.size is not None else None, p.why_missing) for p in plan(folder, manifest)]
    records = run_study(entries, policies, chosen, folder=folder, resume=resume, key=key, signer=signer,
                        stage=stage)
    report = envelope("kv-budgets", report_body(folder, records, policies, chosen, started, signed=key is not None))
    report["figures"] = {model: str((figures_folder(folder) / figure_name(model)).relative_to(folder))
                         for model in models(report)}
    return report


def figure_paths(folder: Path, report: dict[str, Any]) -> dict[str, Path]:
    """Each model's figure file of ``report`` (as :func:`write_report` writes them), by model: what
    :func:`~.page.kv_budgets_section` links."""
    return {model: Path(folder) / relative for model, relative in report["figures"].items()}


def write_report(folder: Path, report: dict[str, Any]) -> None:
    """``folder/kv_budgets.json`` and the report's figures, written together (or nothing)."""
    with OutputFiles() as outputs:
        for model, figure in kv_figures(report).items():
            outputs.stage_figure(figure, figure_paths(folder, report)[model])
        outputs.stage_json(Path(folder) / REPORT_NAME, report)


def check_outputs(folder: Path, operators: list[str], policies: list[str], inputs: dict[str, Path],
                  replace: bool) -> None:
    """Every output path of a run on ``folder`` checked before any work: nothing replaced without
    ``replace`` (``--force`` or ``--resume``), no output that is one of ``inputs`` or of the
    folder's own (:func:`folder_inputs`) (exit 2)."""
    inputs = folder_inputs(folder, inputs)
    probed: set[Path] = set()
    if (folder / REPORT_NAME).exists() and not replace:
        raise InvalidInputError(f"{folder / REPORT_NAME}: exists (an earlier run); give --resume to keep its "
                                "certificates that re-verify, or --force to compute everything again")
    check_output_file(folder / REPORT_NAME, "the report", force=replace, inputs=inputs, probed=probed)
    for policy in policies:
        for name in operators:
            check_output_file(policy_certificate_path(folder, policy, name), f"the {policy} certificate",
                              force=replace, inputs=inputs, probed=probed)
    check_folder_unused(figures_folder(folder), "the figures folder", force=replace)


def certify_folder(folder: Path, policies: list[Policy], tolerances: list[str] | None, *, stage: Stage,
                   resume: bool = False, force: bool = False, key: Any = None,
                   inputs: dict[str, Path] | None = None) -> dict[str, Any]:
    """A whole run on the bracket folder ``folder`` whose outputs were checked
    (:func:`check_outputs`): what an interrupted removal left is deleted
    (:func:`~softrank_cert.util.removal.remove_leftovers`); with ``force`` (and not ``resume``) the
    earlier run's report and ``kv-budgets/`` folder -- every policy's certificates, also of
    policies not run now -- are removed first (:func:`~softrank_cert.util.removal.remove_outputs`:
    refused, nothing removed, when one of ``inputs`` or of :func:`folder_inputs` lies there, or a
    key file, or a file that is not an output, :func:`is_output`); then every head is studied
    and the report and figures written together, reported on ``stage``
    (:meth:`~softrank_cert.util.progress.Progress.stage`)."""
    remove_leftovers(folder)
    if force and not resume:
        remove_outputs(folder, [REPORT_NAME, OUTPUT_FOLDER], inputs=folder_inputs(folder, inputs),
                       is_output=lambda path: is_output(folder, path))
    report = study_folder(folder, policies, tolerances, resume=resume, key=key, stage=stage)
    stage("writing the report and figures")
    write_report(folder, report)
    return report


__all__ = ["FIGURES", "SURVEY_CERTIFICATES", "bracket_folder", "certify_folder", "check_outputs", "figure_paths",
           "figures_folder", "folder_inputs", "is_output", "study_folder", "write_report"]
