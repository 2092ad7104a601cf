"""Issuing certificates (UNTRUSTED: assembles and signs, decides nothing).

:func:`certificate_for` turns kernel-verified brackets into a certificate document (schema-checked,
signed when a key is given); :class:`BracketResult` is the Python API's result of bracketing one
operator (``softrank_cert.bracket``, ``Profile.bracket``), which saves such a certificate.  Every
end in a document was VERIFIED by :mod:`softrank_cert.kernel`; ``softrank-verify`` re-checks it.
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
from ..util.files import canonical_dump, check_output_file, write_text_atomic
from .certificate import Bracket, certificate_document
from .signing import load_private_key, sign_now


def _load_key(key: Any) -> Ed25519PrivateKey:
    """A private key: an ``Ed25519PrivateKey`` as is, else a key file written by ``softrank keygen``."""
    return key if isinstance(key, Ed25519PrivateKey) else load_private_key(key)


def certificate_for(name: str, op: Operator, brackets: Iterable[Any], provenance: Mapping[str, Any] | None = None,
                    key: Any = None) -> dict[str, Any]:
    """A certificate document (schema-checked) of verified brackets, signed with ``key`` (a key
    file written by ``softrank keygen`` or an ``Ed25519PrivateKey``) when one is given.

    ``brackets``: :class:`~softrank_cert.solvers.bracket.VerifiedBracket` values (the driver's,
    converted by their :meth:`~softrank_cert.solvers.bracket.VerifiedBracket.to_certificate`) or
    plain :class:`~softrank_cert.certio.certificate.Bracket` values."""
    plain = [b if isinstance(b, Bracket) else b.to_certificate() for b in brackets]
    document = certificate_document(name, op, plain, created=utc_now_rfc3339(), provenance=dict(provenance or {}) or None)
    return document if key is None else sign_now(document, _load_key(key))


@dataclass(frozen=True, eq=False)
class BracketResult:
    """Kernel-verified brackets of one operator, one per tolerance (ascending).

    ``lower`` / ``upper`` / ``resolved`` map each tolerance to its verified ends; ``brackets``
    holds the ends themselves (ranks, arrays, methods and the kernel's verdicts).
    """

    operator: Operator = field(repr=False)
    brackets: tuple[Any, ...] = field(repr=False)
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

    def __getitem__(self, eps: str) -> Any:
        value = parse_tolerance(eps)
        for b in self.brackets:
            if parse_tolerance(b.eps) == value:
                return b
        raise KeyError(eps)

    def __iter__(self) -> Iterator[Any]:
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
                              "lower_method": b.lower.origin, "upper_construction": b.upper.origin}
                             for b in self.brackets]}

    def __repr__(self) -> str:
        m, n = self.operator.shape
        ends = ", ".join(f"{b.eps}: {b.lower.k} (resolved)" if b.lower.k == b.upper.r else f"{b.eps}: [{b.lower.k}, {b.upper.r}]"
                         for b in self.brackets)
        return f"<BracketResult {self.operator_id} ({m}x{n} {self.operator.kind}) eps {ends}; {self.seconds:.1f} s>"
