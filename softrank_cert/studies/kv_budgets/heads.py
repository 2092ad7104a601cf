"""One head of a bracket folder, its certificate re-checked by the kernel (UNTRUSTED orchestration).

:func:`read_head` reads the certificate file of one operator (steps 0-6 of
:mod:`softrank_cert.verification`: size, strict JSON, schema, arrays, operator, brackets, the
signature when the campaign names a signer) and seals every bracket again with the trusted
kernel (:func:`~softrank_cert.certio.verified.verify_bracket`): the head's verified lower ends are
the certified minimum cache sizes, and they travel into the policy certificates as sealed ends.
A certificate that does not decode, is about another operator, or has a claim the kernel does
not VERIFY gives a :class:`~softrank_cert.errors.HeadRefusedError` with the reason (the operator is then listed as failed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...certio.certificate import decode_certificate, parse_json_strict, read_certificate_bytes
from ...certio.verified import VerifiedBracket, verify_bracket
from ...errors import FloatingPointEnvironmentError, HeadRefusedError, InternalInvariantError, SoftrankError
from ...kernel import Operator
from ...verification import check_signature


@dataclass(frozen=True)
class Head:
    """An operator of the folder: ``name``, its exact ``operator`` (from its certificate), the
    certificate's ``provenance`` and its brackets sealed again by the kernel, by tolerance."""

    name: str
    path: Path
    operator: Operator
    provenance: dict[str, Any]
    brackets: dict[str, VerifiedBracket]


def read_head(name: str, path: Path, signer: str | None = None) -> Head:
    """The head ``name`` from its certificate file ``path`` (module docstring); ``signer``: the
    ``did:key`` the campaign's certificates must be signed by (None: signatures not required)."""
    try:
        document = parse_json_strict(read_certificate_bytes(path))
        certificate = decode_certificate(document)
        trusted = frozenset({signer.split("#", 1)[0]}) if signer else None
        check_signature(document, trusted_keys=trusted, require_signature=bool(signer))
    except (FloatingPointEnvironmentError, InternalInvariantError):
        raise
    except SoftrankError as exc:
        raise HeadRefusedError(f"{path}: does not verify: {exc}") from None
    if certificate.operator_id != name:
        raise HeadRefusedError(f"{path}: the certificate is about {certificate.operator_id!r}, not {name!r}")
    brackets: dict[str, VerifiedBracket] = {}
    for bracket in certificate.brackets:
        sealed = verify_bracket(certificate.operator, bracket)
        if sealed is None:
            raise HeadRefusedError(f"{path}: a claim at eps {bracket.eps} is not VERIFIED by the kernel")
        brackets[bracket.eps] = sealed
    return Head(name, Path(path), certificate.operator, dict(certificate.provenance or {}), brackets)


__all__ = ["Head", "read_head"]
