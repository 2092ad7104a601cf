"""What a campaign's results depend on, and reading back what it kept (front end; decides nothing).

* :func:`operator_sha256` -- the one operator hash: kind, beta, mask and every array's name, shape
  and little-endian float64 bytes (equal digests: the same exact operator);
* :func:`inputs_sha256` -- the key of a kept result: the software version, a result-format version,
  the operator hash and every other input (tolerances, options, bytes of supplied files) as
  canonical JSON; a result is reused only under exactly this key (``docs/campaigns.md``);
* :func:`operator_mismatch` -- why two operators are not bit-identical (None when they are);
* :func:`read_kept_bytes` -- the bytes of a kept file under the certificate size cap, or the
  one-line reason why they cannot be read (the one size-capped reader:
  :func:`~softrank_cert.certio.certificate.read_certificate_bytes`).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..meta import __version__


def operator_sha256(op: Any) -> str:
    """SHA-256 of an operator's exact inputs: kind, beta (its exact text), mask, and every
    array's name, shape and little-endian float64 bytes (equal digests: the same exact operator)."""
    digest = hashlib.sha256(f"{op.kind}|{op.beta}|{op.mask}".encode())
    for name in sorted(op.arrays):
        array = op.arrays[name]
        digest.update(f"|{name}{list(array.shape)}".encode())
        digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
    return digest.hexdigest()


def inputs_sha256(op: Any, result_version: int | str, inputs: Any, files: dict[str, bytes] | None = None) -> str:
    """The key of one operator's kept result: SHA-256 of the software version, ``result_version``
    (the shape of the result), :func:`operator_sha256` of ``op``, ``inputs`` (plain JSON data:
    tolerances, options; canonical, sorted keys) and the bytes of ``files`` (name -> bytes)."""
    digest = hashlib.sha256(json.dumps(["softrank-cert", __version__, str(result_version), operator_sha256(op), inputs],
                                       sort_keys=True, separators=(",", ":"), default=str).encode())
    for name in sorted(files or {}):
        digest.update(b"\0" + name.encode() + b"\0" + hashlib.sha256((files or {})[name]).digest())
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (read in 1 MiB pieces)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def operator_mismatch(published: Any, certified: Any) -> str | None:
    """Why two operators differ (None when kind, mask, beta and every array are bit-identical)."""
    for attr in ("kind", "mask"):
        if getattr(published, attr) != getattr(certified, attr):
            return f"{attr} {getattr(certified, attr)!r} differs from the panel's {getattr(published, attr)!r}"
    if published.kind == "qk" and published.beta_exact != certified.beta_exact:
        return f"beta {certified.beta!r} differs from the panel's {published.beta!r}"
    if set(published.arrays) != set(certified.arrays):
        return f"arrays {sorted(certified.arrays)} differ from the panel's {sorted(published.arrays)}"
    for name, array in published.arrays.items():
        other = certified.arrays[name]
        if array.shape != other.shape or array.astype("<f8").tobytes() != other.astype("<f8").tobytes():
            return f"array {name} differs from the panel's (not bit-identical)"
    return None


def read_kept_bytes(path: str | os.PathLike[str]) -> bytes | str:
    """The bytes of ``path`` (never more than the certificate size limit), or a one-line reason
    why they cannot be read (missing, unreadable, too large)."""
    from ..certio.certificate import read_certificate_bytes

    try:
        return read_certificate_bytes(path)
    except InvalidInputError as exc:
        return str(exc)
