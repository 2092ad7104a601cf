"""Issuing certificates (UNTRUSTED: assembles and signs, decides nothing).

:func:`certificate_for` turns kernel-verified brackets into a certificate document (schema-checked,
signed when a key is given): it accepts only ends sealed by the kernel's VERIFIED verdict
(:mod:`softrank_cert.certio.verified`); ``softrank-verify`` re-checks every one.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..kernel import Operator
from ..meta import utc_now_rfc3339
from ..errors import InternalInvariantError
from .certificate import Bracket, LowerEnd, UpperEnd, certificate_document
from .signing import load_private_key, sign_now
from .verified import VerifiedBracket, VerifiedLower, VerifiedUpper, check_sealed


def _load_key(key: Any) -> Ed25519PrivateKey:
    """A private key: an ``Ed25519PrivateKey`` as is, else a key file written by ``softrank keygen``."""
    return key if isinstance(key, Ed25519PrivateKey) else load_private_key(key)


def certificate_for(name: str, op: Operator, brackets: Iterable[VerifiedBracket],
                    provenance: Mapping[str, Any] | None = None, key: Any = None) -> dict[str, Any]:
    """A certificate document (schema-checked) of kernel-verified brackets, signed with ``key`` (a
    key file written by ``softrank keygen`` or an ``Ed25519PrivateKey``) when one is given.

    The one writer of certificates: every bracket must be a
    :class:`~softrank_cert.certio.verified.VerifiedBracket` whose two ends were sealed by the
    kernel's VERIFIED verdict for exactly the operator object ``op`` and the bracket's tolerance
    string (:func:`~softrank_cert.certio.verified.check_sealed`); anything else raises
    :class:`~softrank_cert.errors.InternalInvariantError` (exit 4) and nothing is written."""
    plain = []
    for b in brackets:
        if type(b) is not VerifiedBracket:
            raise InternalInvariantError(f"refusing to write a {type(b).__name__} as a bracket: only kernel-verified "
                                         "ends (VerifiedBracket) go into a certificate")
        check_sealed(b.lower, VerifiedLower, op, b.eps)
        check_sealed(b.upper, VerifiedUpper, op, b.eps)
        if b.lower.k > b.upper.r:
            raise InternalInvariantError(f"verified lower end {b.lower.k} exceeds verified upper end {b.upper.r} "
                                         f"at eps {b.eps}")
        plain.append(Bracket(b.eps, LowerEnd(b.lower.k, b.lower.method, b.lower.X, b.lower.Y),
                             UpperEnd(b.upper.r, b.upper.construction, b.upper.U, b.upper.W)))
    document = certificate_document(name, op, plain, created=utc_now_rfc3339(),
                                    provenance=dict(provenance or {}) or None)
    return signed(document, key)


def signed(document: dict[str, Any], key: Any = None) -> dict[str, Any]:
    """``document`` (as :func:`certificate_for` made it, possibly in a worker process) signed with
    ``key`` as :func:`certificate_for` signs; unchanged when ``key`` is None."""
    return document if key is None else sign_now(document, _load_key(key))
