"""Issuing certificates (UNTRUSTED: assembles and signs, decides nothing).

:func:`certificate_for` turns kernel-verified brackets into a certificate document (schema-checked,
signed when a key is given): it accepts only ends sealed by the kernel's VERIFIED verdict
(:mod:`softrank_cert.certio.verified`); ``softrank-verify`` re-checks every one.
:class:`BracketResult` is the Python API's result of bracketing one operator
(``softrank_cert.bracket``, ``Profile.bracket``), which saves such a certificate.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..kernel import Operator, parse_tolerance
from ..meta import utc_now_rfc3339
from ..errors import InternalInvariantError
from ..util.files import canonical_dump, check_output_file, write_text_atomic
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
    document = certificate_document(name, op, plain, created=utc_now_rfc3339(), provenance=dict(provenance or {}) or None)
    return signed(document, key)


def signed(document: dict[str, Any], key: Any = None) -> dict[str, Any]:
    """``document`` (as :func:`certificate_for` made it, possibly in a worker process) signed with
    ``key`` as :func:`certificate_for` signs; unchanged when ``key`` is None."""
    return document if key is None else sign_now(document, _load_key(key))


@dataclass(frozen=True, eq=False)
class BracketResult:
    """Kernel-verified brackets of one operator, one per tolerance (ascending).

    ``lower`` / ``upper`` / ``resolved`` map each tolerance to its verified ends; ``brackets``
    holds the ends themselves (ranks, arrays, methods and the kernel's verdicts).
    """

    operator: Operator = field(repr=False)
    brackets: tuple[VerifiedBracket, ...] = field(repr=False)
    operator_id: str = "operator"
    provenance: dict[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0
    budget_seconds: float | None = None

    @property
    def eps(self) -> tuple[str, ...]:
        return tuple(b.eps for b in self.brackets)

    @property
    def lower(self) -> dict[str, int]:
        """Verified lower end ``k`` (``r_eps >= k``) per tolerance."""
        return {b.eps: b.lower.k for b in self.brackets}

    @property
    def upper(self) -> dict[str, int]:
        """Verified upper end ``r`` (``r_eps <= r``) per tolerance."""
        return {b.eps: b.upper.r for b in self.brackets}

    @property
    def resolved(self) -> dict[str, bool]:
        """Whether the two ends meet (``r_eps`` known exactly) per tolerance."""
        return {b.eps: b.lower.k == b.upper.r for b in self.brackets}

    def __getitem__(self, eps: str) -> VerifiedBracket:
        value = parse_tolerance(eps)
        for b in self.brackets:
            if parse_tolerance(b.eps) == value:
                return b
        raise KeyError(eps)

    def __iter__(self) -> Iterator[VerifiedBracket]:
        return iter(self.brackets)

    def __len__(self) -> int:
        return len(self.brackets)

    def to_certificate(self, key: Any = None, *, operator_id: str | None = None) -> dict[str, Any]:
        """The certificate document (a dict), signed when ``key`` is given."""
        return certificate_for(operator_id or self.operator_id, self.operator, self.brackets, self.provenance, key)

    def save(self, path: str | os.PathLike[str], key: Any = None, *, operator_id: str | None = None) -> Path:
        """Write the certificate to ``path`` (atomically; a folder or unwritable place is refused)."""
        target = check_output_file(path, "path")
        write_text_atomic(target, canonical_dump(self.to_certificate(key, operator_id=operator_id)))
        return target

    def to_json(self) -> dict[str, Any]:
        """A plain summary (no arrays): ends, methods and verdicts per tolerance."""
        return {"operator": self.operator_id, "p": self.operator.p, "seconds": round(self.seconds, 3),
                "brackets": [{"eps": b.eps, "lower": b.lower.k, "upper": b.upper.r, "resolved": b.lower.k == b.upper.r,
                              "lower_method": b.lower.method, "upper_construction": b.upper.construction}
                             for b in self.brackets]}

    def __repr__(self) -> str:
        m, n = self.operator.shape
        ends = ", ".join(f"{b.eps}: {b.lower.k} (resolved)" if b.lower.k == b.upper.r else f"{b.eps}: [{b.lower.k}, {b.upper.r}]"
                         for b in self.brackets)
        return f"<BracketResult {self.operator_id} ({m}x{n} {self.operator.kind}) eps {ends}; {self.seconds:.1f} s>"
