"""The campaign runner (front end): long runs over many operators that survive, and one rule for resume.

A campaign is one command over the operators of some panels (``softrank bracket PANEL --all --out
DIR``, ``softrank budgets ... --out R.json --resume``, ``softrank audit ... --resume``, ``softrank
analyze ... --resume``, ``softrank supports ... --out DIR``).  Its **manifest** (kept by
:class:`Campaign`; ``DIR/softrank-campaign.json`` for ``bracket`` and ``supports``,
``R-campaign.json`` beside the report for the others) records the parameters --
panel hash, tolerances, time budget, memory limit, signer, version -- and, per operator, its
status and seconds.  It is rewritten atomically (temporary file, ``fsync``, ``os.replace``,
``fsync`` of the folder) after every operator, so that at any moment, even after a SIGKILL or a
power cut, it is the last complete state and never a torn file.  Its ``format`` is always
``"softrank-campaign"``: that, not its file name, tells a manifest from a certificate.

**The rule: what is kept is re-derived or re-checked, never believed** (``docs/campaigns.md``).

* A result that rests on certificates is kept only when its certificate -- the output itself
  (``bracket``) or the one the runner stores in the campaign's **state folder** (``budgets``:
  the final ends; ``audit``: the reproduced brackets) -- exists, is re-verified by the kernel
  (every claim VERIFIED; signed by the campaign's key when one is given), is about the panel
  operator of the same name bit for bit, holds exactly the requested tolerances and carries the
  panel's provenance (:func:`recheck_certificate`).  Everything the command then reports --
  ends, methods, classes, statuses -- is recomputed from those verdicts; the manifest's copy of
  a result is never read back as a result.
* A cached computation that no certificate can re-check (``analyze``'s geometry and scores) is
  keyed by :func:`~softrank_cert.plumbing.campaign_inputs.inputs_sha256` -- the software version,
  the result format, the exact operator and every input -- and is only a shortcut: the
  certificate it came from is re-verified and the brackets are taken from that verification.
* The manifest supplies only bookkeeping: the seconds and attempts of earlier runs.
* Resuming with other tolerances (or ``budgets``' other ``--budgets``) is refused with exit 2,
  naming both (never a silent mix of old and new); a manifest of another command likewise.
* No operator may take the manifest's name: an operator whose certificate file would be named
  ``softrank-campaign.json`` is refused with exit 2 (:func:`check_manifest_clear`).
* A campaign is never started over another by accident: where a manifest exists, a run without
  ``--resume`` or ``--force`` is refused before any work (:func:`check_campaign_start`); one with
  ``--force`` computes everything again and keeps the manifest's run history, its own run marked
  ``"forced": true``.

**Interface** (what a command does; ``bracket_cmd``, ``studies/budgets``, ``studies/audit``,
``studies/analyze``, ``studies/supports`` use it)::

    campaign = Campaign(path, "budgets", parameters, entries, resume=resume,
                        must_match={"tolerances": "--eps"}, resume_command=hint)
    for i, (name, key) in ...:                  # resume: offer each operator's previous entry
        entry = campaign.recorded(name, key)    # done under exactly this inputs key, else None
        value = rebuild(entry) if entry else None   # the command re-checks and re-derives
        if value is not None:
            campaign.keep(name, entry)
    campaign.save()
    with campaign.running():                    # Ctrl-C / SIGTERM -> 'interrupted', exit 130
        for outcome in run_tasks(..., returns=(Result,)):  # the message names the exact --resume command
            # (returns: the dataclasses a worker's answer may hold, plumbing/wire.py)
            if not outcome.ok:
                campaign.failed(name, outcome)  # failure record (status, reason, attempts)
            else:
                campaign.done(name, outcome, seconds=..., output=...)
    campaign.finish(failed=bool(failures))      # 'complete' or 'incomplete' (exit 6)

The manifest's fields, per command and per operator, are defined by its JSON Schema,
``certificates/schema/softrank-campaign-v1.schema.json`` (``docs/campaigns.md``, "The manifest").
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator, Mapping

from ..errors import InternalInvariantError, InvalidInputError, SoftrankError
from ..meta import __version__, utc_now_rfc3339
from .campaign_inputs import file_sha256, operator_mismatch, operator_sha256, read_kept_bytes
from ..util.files import canonical_dump, loads_unique, read_regular_file, write_text_atomic

FORMAT = "softrank-campaign"
VERSION = 1
#: The manifest's file name inside a campaign's output folder.
MANIFEST_NAME = "softrank-campaign.json"
STATUSES = ("pending", "done", "failed", "refused")
#: A previous manifest larger than this is not read (it is no manifest of ours).
MAX_MANIFEST_BYTES = 1 << 30
#: The largest magnitude of a number in a manifest (seconds, counts, bytes, work): 2**53, where
#: float64 stops holding every integer.  Anything larger, NaN or an infinity is no bookkeeping of ours.
MAX_MANIFEST_NUMBER = 2 ** 53


def manifest_number(value: Any) -> bool:
    """Whether ``value`` is a number a manifest may hold: an int or float (not a bool), finite, of
    magnitude at most :data:`MAX_MANIFEST_NUMBER`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and value != value:  # NaN
        return False
    return -MAX_MANIFEST_NUMBER <= value <= MAX_MANIFEST_NUMBER


def check_manifest_numbers(document: Any, source: str) -> None:
    """Refuse (one line, exit 2) a manifest ``document`` that holds a number outside
    :func:`manifest_number` anywhere (a 401-digit ``seconds``, ``1e999``, ``NaN``), naming where.
    Cost: one pass over the parsed document, without recursion."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not manifest_number(value):
            shown = where if len(where) <= 80 else where[:80] + "..."
            raise InvalidInputError(f"{source}: the number at {shown!r} is not a finite number of magnitude at most "
                                    f"2**53 (not a manifest softrank wrote)")


def budget_json(budget_seconds: float | None) -> float | str | None:
    """``--budget-seconds`` as manifest JSON: null (the default per operator), a number, or "inf"."""
    if budget_seconds is None:
        return None
    return "inf" if budget_seconds == float("inf") else float(budget_seconds)


def _now() -> str:
    return utc_now_rfc3339()


class _Manifest:
    """The manifest record of one :class:`Campaign` (see the module docstring); :meth:`save` after each change."""

    def __init__(self, path: Path, command: str, parameters: dict[str, Any], operators: dict[str, dict[str, Any]],
                 previous: dict[str, Any] | None = None, forced: bool = False) -> None:
        self.path = Path(path)
        now = _now()
        runs = list(previous.get("runs", [])) if previous else []
        self.run = {"started": now, "finished": None, "state": "running", "computed": 0, "skipped": 0, "failed": 0}
        if forced:
            self.run["forced"] = True
        runs.append(self.run)
        self.data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "command": command, "state": "running", **parameters,
            "generator": {"name": "softrank-cert", "version": __version__},
            "created": (previous or {}).get("created", now), "updated": now, "runs": runs,
            "summary": {}, "operators": operators,
        }

    @staticmethod
    def read(path: Path) -> dict[str, Any] | None:
        """A previous manifest at ``path`` (None when there is none, or it is not one of ours: not
        a regular file, larger than the certificate size limit, duplicate keys)."""
        try:
            document = loads_unique(read_regular_file(path, MAX_MANIFEST_BYTES, "manifest"))
        except (InvalidInputError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(document, dict) or document.get("format") != FORMAT or \
                not isinstance(document.get("operators"), dict):
            return None
        return document

    @classmethod
    def start(cls, path: Path, command: str, parameters: dict[str, Any], entries: Iterable[tuple[str, dict[str, Any]]],
              resume: bool, forced: bool = False) -> _Manifest:
        """A manifest for a new run: every operator ``pending`` (its ``entries`` fields set).  With
        ``resume`` or ``forced``, a previous manifest's run history and creation time are kept
        (a forced run is marked ``"forced": true``)."""
        previous = cls.read(path) if resume or forced else None
        operators = {name: {"status": "pending", "seconds": None, "task_seconds": None, "attempts": 0, "finished": None,
                            "resumed": False, "reason": None, **fields} for name, fields in entries}
        return cls(path, command, parameters, operators, previous, forced=forced and not resume)

    @property
    def operators(self) -> dict[str, dict[str, Any]]:
        return self.data["operators"]

    def update(self, name: str, **fields: Any) -> None:
        entry = self.operators[name]
        entry.update(fields)
        if fields.get("status") in ("done", "failed", "refused") and "finished" not in fields:
            entry["finished"] = _now()

    def summary(self) -> dict[str, int]:
        counts = {status: 0 for status in STATUSES}
        for entry in self.operators.values():
            counts[entry["status"]] = counts.get(entry["status"], 0) + 1
        return counts

    def finish(self, state: str) -> None:
        self.data["state"] = state
        self.run["state"] = state
        self.run["finished"] = _now()

    def save(self) -> None:
        """Write the manifest atomically (a full disk is one line, exit 2; the old one stays)."""
        self.data["updated"] = _now()
        self.data["summary"] = self.summary()
        write_text_atomic(self.path, canonical_dump(self.data))  # atomic and durable


def recheck_certificate(raw: bytes | str, source: str, name: str, op: Any, eps_list: list[str] | None, *,
                        signer: str | None = None, provenance: Mapping[str, Any] | None = None,
                        max_prec: int | None = None) -> tuple[Any | None, str]:
    """``(verification, "")`` when the certificate ``raw`` (its bytes, or the reason they could not be
    read) may be kept, else ``(None, why not)``: re-verified here by the kernel with every claim
    VERIFIED (signed by ``signer`` when one is given), about the operator ``name`` with the exact
    inputs of ``op``, holding exactly the tolerances ``eps_list`` in that order (None: any) and,
    when ``provenance`` is given, exactly that provenance.  ``verification`` is the
    :class:`~softrank_cert.verification.VerificationResult`: its verdicts are what a resume reports."""
    verification, why, _code = _recheck(raw, source, name, op, eps_list, signer=signer, provenance=provenance,
                                        max_prec=max_prec)
    return verification, why


def _recheck(raw: bytes | str, source: str, name: str, op: Any, eps_list: list[str] | None, *,
             signer: str | None, provenance: Mapping[str, Any] | None, max_prec: int | None,
             memory_limit: int | None = None) -> tuple[Any | None, str, int]:
    """:func:`recheck_certificate` with the exit code of a refusal: ``softrank-verify``'s for a
    certificate that does not decode or whose claims are not all VERIFIED (2, 5; 1 or 3), 1 for a
    verified one that certifies something else than was asked (another operator, tolerances or
    provenance), 0 when it may be kept.  ``memory_limit``: what the kernel's Arb path may use (as
    ``softrank-verify --max-memory``; None: its default)."""
    from ..errors import EXIT_INVALID_INPUT, EXIT_REJECTED
    from ..kernel import DEFAULT_MAX_PREC
    from ..verification import verify_certificate_bytes

    if isinstance(raw, str):
        return None, raw, EXIT_INVALID_INPUT
    trusted = frozenset({signer.split("#", 1)[0]}) if signer else None
    try:
        verification = verify_certificate_bytes(raw, source=source, trusted_keys=trusted,
                                                require_signature=bool(signer), max_prec=max_prec or DEFAULT_MAX_PREC,
                                                memory_limit=memory_limit)
    except SoftrankError as exc:
        if exc.exit_code == 4:  # a checker bug is never a reason to recompute quietly
            raise
        return None, f"certificate does not verify: {exc}", exc.exit_code
    bad = first_unverified(verification)
    if bad is not None:
        return None, f"certificate has a claim that is not VERIFIED ({bad})", verification.exit_code
    certificate = verification.certificate
    if certificate is None:  # verify_certificate_bytes reports the certificate it decoded, always
        raise InternalInvariantError(f"{source}: the verification carries no certificate")
    if certificate.operator_id != name:
        return None, f"certificate is about {certificate.operator_id!r}", EXIT_REJECTED
    mismatch = operator_mismatch(op, certificate.operator)
    if mismatch is not None:
        return None, f"certificate's operator differs from the panel's: {mismatch}", EXIT_REJECTED
    if eps_list is not None and [b.eps for b in certificate.brackets] != list(eps_list):
        have = ",".join(b.eps for b in certificate.brackets)
        return None, f"certificate has other tolerances ({have})", EXIT_REJECTED
    if provenance is not None and _canonical(certificate.provenance or {}) != _canonical(provenance):
        return None, "certificate's provenance differs from the panel's", EXIT_REJECTED
    return verification, "", 0


def first_unverified(verification: Any) -> str | None:
    """The first claim of a :class:`~softrank_cert.verification.VerificationResult`, in file order, that
    the kernel did not VERIFY, in words (``r_eps >= 8 (lower end) at eps 0.25 is REJECTED``), or
    None when every claim is VERIFIED."""
    from ..kernel import Status

    for v in verification.verdicts:
        if v.status is not Status.VERIFIED:
            return f"{v.claim} ({v.side} end) at eps {v.eps} is {v.status.value}"
    return None


def recheck_from_worker(document: Any, source: str, name: str, op: Any, eps_list: list[str] | None, *,
                        provenance: Mapping[str, Any] | None = None, max_prec: int | None = None,
                        memory_limit: int | None = None) -> tuple[dict[str, Any] | None, Any | None, str, int]:
    """A certificate document that a task computed in another process (a worker of the local
    pool, a Dask worker on any machine), re-verified in this process before it is signed or
    written: ``(document, verification, "", 0)`` when it may be, else ``(None, None, why not, exit
    code)`` (:func:`recheck_certificate`'s rules, the exit code ``softrank-verify``'s where the
    kernel decided).  A worker returns plain data, which nothing vouches for: the one thing this
    process trusts is its own kernel's verdicts on exactly the bytes it writes.

    The document is encoded as a certificate file is (:func:`~softrank_cert.util.files.canonical_dump`)
    and those bytes are verified; the document returned is parsed back from them, so it is what
    was verified (a float, NaN or a non-JSON value is refused as in a file).  A worker's
    certificate is unsigned: one that carries a proof is refused (only this process signs).
    ``memory_limit``: as for :func:`_recheck`."""
    from ..errors import EXIT_INVALID_INPUT
    from ..util.files import canonical_dump

    if not isinstance(document, dict):
        return None, None, f"a worker returned a {type(document).__name__}, not a certificate document", \
            EXIT_INVALID_INPUT
    if "proof" in document:
        return None, None, "a worker returned a signed certificate (only the signing process signs)", EXIT_INVALID_INPUT
    try:
        raw = canonical_dump(document).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        reason = " ".join(str(exc).split())[:200]
        return None, None, f"a worker returned a document that is not JSON data ({type(exc).__name__}: {reason})", \
            EXIT_INVALID_INPUT
    verification, why, code = _recheck(raw, source, name, op, eps_list, signer=None, provenance=provenance,
                                       max_prec=max_prec, memory_limit=memory_limit)
    if verification is None:
        return None, None, why, code
    return json.loads(raw), verification, "", 0


def worker_failure(outcome: Any, why: str, exit_code: int) -> Any:
    """``outcome`` (a task that ran in another process) as the failure of a certificate that did
    not verify in this process: nothing of it is written; a campaign records it as ``failed`` with
    this reason (and ``--resume`` computes it again)."""
    return dataclasses.replace(outcome, value=None, exit_code=exit_code, kind="UnverifiedCertificate",
                               failure=f"the certificate computed in a worker does not verify in this process: {why}")


def rechecked_outcome(outcome: Any, name: str, op: Any, provenance: Mapping[str, Any] | None,
                      certificates: Mapping[str, tuple[Any, list[str] | None]],
                      rebuild: Callable[[dict[str, tuple[dict[str, Any], Any]]], Any],
                      memory_limit: int | None = None) -> Any:
    """The one re-check of a task that ran in another process, before anything of it is signed,
    stored or written: each certificate document its answer carries (``certificates``: by what it
    is -- ``""`` for a task's one certificate, e.g. ``"evidence"`` -- with the tolerances it must
    hold exactly, None for any) re-verified here (:func:`recheck_from_worker`: every claim VERIFIED,
    about ``op`` of ``name`` bit for bit, ``provenance``).  Returns ``outcome`` with the value
    ``rebuild(verified)`` (``verified``: what -> (the document that was verified, its verification)), or
    the :func:`worker_failure` of the first that does not verify (its reason prefixed by what it is).
    ``memory_limit``: what the kernel's Arb path may use here (None: its default); the campaigns
    pass the budget the task's own checks kept to (:func:`~softrank_cert.util.memory.operator_check_limit`),
    so a claim it verified is checked here within it too."""
    verified: dict[str, tuple[dict[str, Any], Any]] = {}
    for what, (document, eps_list) in certificates.items():
        source = f"{name} {what} (from a worker)" if what else f"{name} (from a worker)"
        checked, verification, why, code = recheck_from_worker(document, source, name, op, eps_list,
                                                               provenance=provenance, memory_limit=memory_limit)
        if checked is None:
            return worker_failure(outcome, f"{what}: {why}" if what else why, code)
        verified[what] = (checked, verification)
    return dataclasses.replace(outcome, value=rebuild(verified))


def reusable_certificate(path: Path, name: str, op: Any, eps_list: list[str], signer: str | None,
                         max_prec: int | None = None, provenance: Mapping[str, Any] | None = None
                         ) -> tuple[Any | None, str]:
    """``(certificate, "")`` when the certificate file at ``path`` may be kept by a resumed
    campaign, else ``(None, why not)`` (:func:`recheck_certificate` of its bytes; "no
    certificate" when there is no file)."""
    if not Path(path).is_file():
        return None, "no certificate"
    verification, why = recheck_certificate(read_kept_bytes(path), str(path), name, op, eps_list, signer=signer,
                                            provenance=provenance, max_prec=max_prec)
    return (None, why) if verification is None else (verification.certificate, "")


def check_manifest_clear(names: Iterable[str]) -> None:
    """Refuse (exit 2) an operator whose certificate file, once its name is read as a path,
    would take the manifest's name (or another ``softrank-campaign*`` name), or share a file with
    another operator (:func:`~softrank_cert.plumbing.certificate_files.certificate_paths`)."""
    from .certificate_files import certificate_paths

    certificate_paths(Path("."), [str(name) for name in names])


def check_campaign_start(manifest: Path, option: str, *, resume: bool, force: bool) -> None:
    """Refuse (one line, exit 2, before any work) to start a campaign whose manifest ``manifest``
    exists already, unless this run continues it (``resume``) or starts it again (``force``: the
    run history is kept, :class:`Campaign`)."""
    if resume or force or not Path(manifest).exists():
        return
    raise InvalidInputError(f"{option} {Path(manifest).parent}: holds a campaign already ({manifest}); continue it "
                            "with --resume, or compute it all again with --force (the manifest keeps its run history)")


def resume_command(prog: str, argv: list[str]) -> str:
    """The command line to paste to continue a campaign: ``prog`` and ``argv`` with ``--resume``."""
    return shlex.join([prog, *argv, *([] if "--resume" in argv else ["--resume"])])


class CampaignInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a campaign: its one line names the command that continues it."""


class Campaign:
    """One campaign run: its manifest, the resume decision's bookkeeping, failure records and
    interruption (the interface is in the module docstring).

    ``must_match``: manifest parameters a resume may not change (parameter -> the option that
    sets it, e.g. ``{"tolerances": "--eps"}``): a different value is refused with exit 2.  A
    previous manifest of another command is refused too.  ``resume_command``: the line that
    continues this campaign (:func:`resume_command`), named when it is interrupted.  ``force``
    (``--force`` without ``--resume``): nothing is kept, the previous manifest's run history is
    (its command must be this one), and this run is marked ``"forced": true``.
    """

    def __init__(self, path: Path, command: str, parameters: dict[str, Any],
                 entries: Iterable[tuple[str, dict[str, Any]]], *, resume: bool, force: bool = False,
                 must_match: Mapping[str, str] | None = None, resume_command: str | None = None) -> None:
        self.path = Path(path)
        previous = _Manifest.read(self.path) if resume or force else None
        if previous is not None:
            how = "--resume" if resume else "--force"
            if previous.get("command") != command:
                raise InvalidInputError(f"{how}: {self.path} is the manifest of a 'softrank "
                                        f"{previous.get('command')}' campaign, not of 'softrank {command}'")
            for key, option in ((must_match or {}).items() if resume else ()):
                if previous.get(key) != parameters.get(key):
                    raise InvalidInputError(
                        f"--resume: the campaign in {self.path} was run with {option} {_shown(previous.get(key))}, "
                        f"this run asks for {option} {_shown(parameters.get(key))}; resume it with the same {option}, "
                        "or start a new campaign (another --out, without --resume)")
        old = previous.get("operators") if previous and resume else None
        self.previous: dict[str, Any] = old if isinstance(old, dict) else {}
        self.manifest = _Manifest.start(self.path, command, parameters, entries, resume=resume, forced=force)
        self.hint = resume_command

    @property
    def run(self) -> dict[str, Any]:
        return self.manifest.run

    def recorded(self, name: str, inputs_sha256: str | None = None) -> dict[str, Any] | None:
        """The previous manifest's entry of ``name`` when it is ``done`` (and, when given, under
        exactly this inputs key), else None.  Bookkeeping only: the caller re-checks the result."""
        entry = self.previous.get(name)
        if not isinstance(entry, dict) or entry.get("status") != "done":
            return None
        if inputs_sha256 is not None and entry.get("inputs_sha256") != inputs_sha256:
            return None
        return entry

    def keep(self, name: str, entry: Mapping[str, Any] | None = None, **fields: Any) -> None:
        """Record ``name`` as kept from an earlier run (its re-checked result is the caller's);
        seconds, attempts and finishing time come from the previous ``entry`` when they are
        well-formed."""
        entry = entry or {}
        number = lambda key: entry.get(key) if manifest_number(entry.get(key)) else None  # noqa: E731
        attempts = entry.get("attempts") if isinstance(entry.get("attempts"), int) else 0
        finished = entry.get("finished") if isinstance(entry.get("finished"), str) else None
        self.manifest.update(name, status="done", resumed=True, seconds=number("seconds"),
                             task_seconds=number("task_seconds"), attempts=attempts, finished=finished, reason=None,
                             **fields)
        self.run["skipped"] += 1

    def note(self, name: str, reason: str) -> None:
        """Why an operator's earlier result was not kept (``reason`` in the manifest)."""
        self.manifest.update(name, reason=reason)

    def done(self, name: str, outcome: Any, seconds: float | None, **fields: Any) -> None:
        """Record a computed operator (``outcome`` from :func:`~softrank_cert.plumbing.parallel.run_tasks`)."""
        self.manifest.update(name, status="done", seconds=None if seconds is None else round(seconds, 3),
                             task_seconds=round(outcome.seconds, 3), attempts=outcome.attempts, reason=None,
                             resumed=False, **fields)
        self.run["computed"] += 1
        self.manifest.save()

    def failed(self, name: str, outcome: Any) -> dict[str, Any]:
        """Record a failed or refused operator; returns its failure record for the report."""
        status = "refused" if outcome.refused else "failed"
        self.manifest.update(name, status=status, reason=outcome.failure, attempts=outcome.attempts,
                             task_seconds=round(outcome.seconds, 3))
        self.run["failed"] += 1
        self.manifest.save()
        return {"operator": name, "status": status, "reason": outcome.failure, "attempts": outcome.attempts}

    def save(self) -> None:
        self.manifest.save()

    @contextmanager
    def running(self) -> Iterator[Campaign]:
        """Ctrl-C or SIGTERM inside: the manifest says 'interrupted' and
        :class:`CampaignInterrupted` (exit 130) names the command that continues."""
        try:
            yield self
        except KeyboardInterrupt:
            self.manifest.finish("interrupted")
            try:
                self.manifest.save()
            except SoftrankError:
                pass
            how = f"; continue with: {self.hint}" if self.hint else "; continue it with --resume"
            raise CampaignInterrupted(f"interrupted: {self.path} records what finished{how}") from None

    def finish(self, failed: bool = False) -> None:
        self.manifest.finish("incomplete" if failed else "complete")
        self.manifest.save()


def failure_record(outcome: Any, name: str) -> dict[str, Any]:
    """The failure record of a task that failed or was refused, outside a campaign."""
    return {"operator": name, "status": "refused" if outcome.refused else "failed", "reason": outcome.failure,
            "attempts": outcome.attempts}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else json.dumps(value)


__all__ = ["FORMAT", "MANIFEST_NAME", "STATUSES", "VERSION", "Campaign", "CampaignInterrupted", "budget_json",
           "check_campaign_start", "check_manifest_clear", "failure_record", "file_sha256", "first_unverified", "operator_sha256",
           "recheck_certificate", "recheck_from_worker", "resume_command", "reusable_certificate", "worker_failure"]
