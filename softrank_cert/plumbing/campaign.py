"""Campaign manifests and resume (front end): long runs over many operators that survive.

A campaign is one command over the operators of a panel (``softrank bracket PANEL --all --out
DIR``, ``softrank budgets ... --out R.json``).  Its **manifest** (:class:`Manifest`; for
``bracket`` ``DIR/softrank-campaign.json``) records the parameters -- panel hash, tolerances,
time budget, memory limit, signer, version -- and, per operator, its status and seconds.  It
is rewritten atomically (temporary file, ``fsync``, ``os.replace``, ``fsync`` of the folder)
after every operator, so that at any moment, even after a SIGKILL or a power cut, it is the
last complete state and never a torn file.

Resume (``--resume``) never trusts the manifest for a result: an operator is skipped only when
its certificate exists, is re-verified by the kernel (every claim VERIFIED; signed by the
campaign's key when ``--key`` is given), is about the panel operator of the same name bit for
bit, and has exactly the requested tolerances (:func:`reusable_certificate`).  Everything else
is computed again.  The manifest supplies only bookkeeping (the seconds of earlier runs).

Schema (version 1)::

    {"format": "softrank-campaign", "version": 1, "command": "bracket",
     "state": "running" | "complete" | "incomplete" | "interrupted",
     "panel": {"path": "panel.npz", "sha256": "<hex of the file>", "operators": 72},
     "tolerances": ["0.1", "0.25"], "budget_seconds": null | 16.0 | "inf",
     "max_memory": <bytes>, "jobs": 2, "scheduler": null, "signer": null | "did:key:...",
     "generator": {"name": "softrank-cert", "version": "0.1.0"},
     "created": "<RFC 3339>", "updated": "<RFC 3339>",
     "runs": [{"started": ..., "finished": ..., "state": ..., "computed": 3, "skipped": 1, "failed": 0}],
     "summary": {"done": 4, "failed": 0, "refused": 0, "pending": 0},
     "operators": {"NAME": {"status": "pending" | "done" | "failed" | "refused",
                            "operator_sha256": "<hex>", "output": "NAME.json", "seconds": 1.25,
                            "task_seconds": 1.41, "attempts": 1, "estimated_bytes": 180000000, "finished": "<RFC 3339>",
                            "resumed": false, "reason": null}}}

``seconds``: the operator's own time (``bracket``: the solver's search, which a time budget
bounds; ``budgets``: the study's checks; ``audit``: the task); ``task_seconds``: the wall seconds
of its last attempt in a worker (solving, kernel verification, packing; not the pool's start-up),
the figure for cost models; both kept from the earlier run for an operator a resume keeps.

``done``: the certificate (or result) is in place; ``failed``: the task failed (after its
retry when its worker died), ``reason`` is its one line; ``refused``: never started, because
its memory estimate exceeds ``max_memory``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from .. import __version__
from ..errors import SoftrankError
from .files import canonical_dump, write_text_atomic

FORMAT = "softrank-campaign"
VERSION = 1
#: The manifest's file name inside a campaign's output folder.
MANIFEST_NAME = "softrank-campaign.json"
STATUSES = ("pending", "done", "failed", "refused")


def operator_sha256(op: Any) -> str:
    """SHA-256 of an operator's exact inputs: kind, beta, mask, and every array's name, shape and
    little-endian float64 bytes (equal digests: the same exact operator)."""
    digest = hashlib.sha256(f"{op.kind}|{op.beta}|{op.mask}".encode())
    for name in sorted(op.arrays):
        array = op.arrays[name]
        digest.update(f"|{name}{list(array.shape)}".encode())
        digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def budget_json(budget_seconds: float | None) -> float | str | None:
    """``--budget-seconds`` as manifest JSON: null (the default per operator), a number, or "inf"."""
    if budget_seconds is None:
        return None
    return "inf" if budget_seconds == float("inf") else float(budget_seconds)


def _now() -> str:
    from ..certio.signing import utc_now_rfc3339

    return utc_now_rfc3339()


class Manifest:
    """The manifest of one campaign (see the module docstring); :meth:`save` after each change."""

    def __init__(self, path: Path, command: str, parameters: dict[str, Any], operators: dict[str, dict[str, Any]],
                 previous: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        now = _now()
        runs = list(previous.get("runs", [])) if previous else []
        self.run = {"started": now, "finished": None, "state": "running", "computed": 0, "skipped": 0, "failed": 0}
        runs.append(self.run)
        self.data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "command": command, "state": "running", **parameters,
            "generator": {"name": "softrank-cert", "version": __version__},
            "created": (previous or {}).get("created", now), "updated": now, "runs": runs,
            "summary": {}, "operators": operators,
        }

    @staticmethod
    def read(path: Path) -> dict[str, Any] | None:
        """A previous manifest at ``path`` (None when there is none, or it is not one of ours)."""
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        if not isinstance(document, dict) or document.get("format") != FORMAT or \
                not isinstance(document.get("operators"), dict):
            return None
        return document

    @classmethod
    def start(cls, path: Path, command: str, parameters: dict[str, Any], entries: Iterable[tuple[str, dict[str, Any]]],
              resume: bool) -> "Manifest":
        """A manifest for a new run: every operator ``pending`` (its ``entries`` fields set).  With
        ``resume``, a previous manifest's run history and creation time are kept."""
        previous = cls.read(path) if resume else None
        operators = {name: {"status": "pending", "seconds": None, "task_seconds": None, "attempts": 0, "finished": None,
                            "resumed": False, "reason": None, **fields} for name, fields in entries}
        return cls(path, command, parameters, operators, previous)

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


def reusable_certificate(path: Path, name: str, op: Any, eps_list: list[str], signer: str | None,
                         max_prec: int | None = None) -> tuple[Any | None, str]:
    """``(certificate, "")`` when the certificate at ``path`` may be kept by a resumed campaign,
    else ``(None, why not)``: it must exist, verify (every claim VERIFIED, re-checked here by the
    kernel; signed by ``signer`` when one is given), be about the operator ``name`` with the
    exact inputs of ``op``, and hold exactly the tolerances ``eps_list`` in that order."""
    from ..studies.audit import operator_mismatch
    from ..certio.certificate import MAX_CERTIFICATE_BYTES
    from ..kernel import DEFAULT_MAX_PREC, Status
    from ..verification import verify_certificate_bytes

    try:
        if not path.is_file():
            return None, "no certificate"
        if path.stat().st_size > MAX_CERTIFICATE_BYTES:
            return None, "certificate too large"
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable certificate ({exc.strerror or exc})"
    trusted = frozenset({signer.split("#", 1)[0]}) if signer else None
    try:
        report = verify_certificate_bytes(raw, source=str(path), trusted_keys=trusted, require_signature=bool(signer),
                                          max_prec=max_prec or DEFAULT_MAX_PREC)
    except SoftrankError as exc:
        if exc.exit_code == 4:  # a checker bug is never a reason to recompute quietly
            raise
        return None, f"certificate does not verify: {exc}"
    if any(v.status is not Status.VERIFIED for v in report.verdicts):
        return None, "certificate has a claim that is not VERIFIED"
    certificate = report.certificate
    if certificate.operator_id != name:
        return None, f"certificate is about {certificate.operator_id!r}"
    mismatch = operator_mismatch(op, certificate.operator)
    if mismatch is not None:
        return None, f"certificate's operator differs from the panel's: {mismatch}"
    if [b.eps for b in certificate.brackets] != list(eps_list):
        return None, "certificate has other tolerances (" + ",".join(b.eps for b in certificate.brackets) + ")"
    return certificate, ""
