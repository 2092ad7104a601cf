"""Supplied certificates of an audit (UNTRUSTED): re-checked by the kernel, then judged.

A row that names a certificate is judged by that certificate alone: its bytes are re-checked by
:func:`~softrank_cert.verification.verify_certificate_bytes` (every claim decided by the kernel),
it must be about the panel operator bit for bit and hold the row's eps; only VERIFIED ends count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...certio.certificate import Certificate
from ...errors import InvalidInputError
from ...kernel import Operator, Status, Verdict
from ...plumbing.campaign_inputs import operator_mismatch, read_kept_bytes
from ...verification import Pairs, verify_certificate_bytes
from .rows import PublishedRow, RowResult, result_of

@dataclass
class CheckedCertificate:
    """A supplied certificate after re-checking: ``error`` set when it is invalid; ``pairs`` one
    ``(lower, upper)`` kernel verdict pair per bracket of ``certificate``."""

    certificate: Certificate | None
    pairs: Pairs = ()
    signer: str | None = None
    error: str | None = None

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(v for pair in self.pairs for v in pair)


def check_certificate(path: Path, *, trusted_keys: frozenset[str] | None = None) -> CheckedCertificate:
    """Read the file once and re-check those bytes (decoded once, in memory)."""
    raw = read_kept_bytes(path)
    if isinstance(raw, str):
        return CheckedCertificate(None, error=raw)
    return check_certificate_bytes(raw, str(path), trusted_keys=trusted_keys)


def check_certificate_bytes(raw: bytes, shown_path: str, *,
                            trusted_keys: frozenset[str] | None = None) -> CheckedCertificate:
    """Re-check a certificate given as bytes (in memory: no temporary file), decoding them once."""
    try:
        verification = verify_certificate_bytes(raw, source=shown_path, trusted_keys=trusted_keys)
    except InvalidInputError as exc:
        return CheckedCertificate(None, error=str(exc))
    certificate = verification.certificate
    bad = [v for v in verification.verdicts if v.status is Status.REJECTED]
    if bad:
        return CheckedCertificate(certificate, verification.pairs, verification.signer,
                                  f"claim {bad[0].claim} at eps {bad[0].eps} is REJECTED by the kernel")
    return CheckedCertificate(certificate, verification.pairs, verification.signer)


def audit_with_certificate(row: PublishedRow, op: Operator, checked: CheckedCertificate, shown_path: str) -> RowResult:
    """Judge a row by its supplied certificate only."""
    evidence: dict[str, Any] = {"source": "certificate", "certificate": shown_path, "signer": checked.signer}
    reason = checked.error
    if reason is None:
        assert checked.certificate is not None  # no error: the certificate decoded
        reason = operator_mismatch(op, checked.certificate.operator)
        if reason is not None:
            reason = f"certificate is about another operator ({checked.certificate.operator_id}): {reason}"
    pair = None
    if reason is None:
        pair = next((ends for b, ends in zip(checked.certificate.brackets, checked.pairs) if b.eps_value == row.eps_value),  # type: ignore[union-attr]  # no error: decoded
                    None)
        if pair is None:
            reason = f"certificate has no bracket at eps {row.eps}"
    if reason is not None:
        evidence["reason"] = reason
        return RowResult(row.line, row.operator, row.eps, "invalid-certificate", row.lower, row.upper, evidence=evidence,
                         error=reason)
    assert checked.certificate is not None and pair is not None  # no reason: the certificate and its bracket
    evidence["operator_id"] = checked.certificate.operator_id
    lower, upper = pair
    ok = lambda v: v if v.status is Status.VERIFIED else None  # noqa: E731  (INCONCLUSIVE: not verified)
    return result_of(row, ok(lower), ok(upper), evidence, shown_path)
