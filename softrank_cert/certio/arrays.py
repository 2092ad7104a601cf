"""float64 arrays in certificates: ``{"dtype", "shape", "encoding", "data", "sha256"}``.

Decoding is the array part of steps 3 (operator arrays) and 5 (bracket ends) of the
verification step list (:mod:`softrank_cert.verification`); each array is decoded once.

``data`` is standard base64 (RFC 4648, padded) of the little-endian C-order bytes and
``sha256`` the hex digest of those bytes.  Decoding checks the declared shape against the
size limits *before* decoding anything, then the exact base64 length, the hash, and
finiteness, and returns a read-only array bit-identical to the one that was encoded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import numpy as np

from ..errors import CertificateFormatError, HashMismatchError, InvalidInputError
from ..kernel import check_shape


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """JSON object for a 2-D float64 array (bit-exact)."""
    a = np.asarray(array)
    if a.dtype != np.float64 or a.ndim != 2:
        raise InvalidInputError("only 2-D float64 arrays can be stored in a certificate")
    raw = np.ascontiguousarray(a, dtype="<f8").tobytes()
    return {
        "dtype": "float64",
        "shape": [int(a.shape[0]), int(a.shape[1])],
        "encoding": "base64-le",
        "data": base64.b64encode(raw).decode("ascii"),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }


def decode_array(obj: dict[str, Any], where: str) -> np.ndarray:
    """Decode a schema-valid array object; ``where`` names it in error messages."""
    shape = tuple(obj["shape"])
    check_shape(where, shape)  # size limits before allocating
    nbytes = shape[0] * shape[1] * 8
    data = obj["data"]
    if len(data) != 4 * ((nbytes + 2) // 3):
        raise CertificateFormatError(f"{where}: base64 data has {len(data)} characters, shape {list(shape)} needs {4 * ((nbytes + 2) // 3)}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise CertificateFormatError(f"{where}: data is not valid base64") from None
    if len(raw) != nbytes:
        raise CertificateFormatError(f"{where}: data decodes to {len(raw)} bytes, shape {list(shape)} needs {nbytes}")
    if hashlib.sha256(raw).hexdigest() != obj["sha256"]:
        raise HashMismatchError(f"{where}: SHA-256 of the data does not match the declared sha256")
    array = np.frombuffer(raw, dtype="<f8").reshape(shape).astype(np.float64)
    if not np.isfinite(array).all():
        raise CertificateFormatError(f"{where}: contains NaN or Inf")
    array.setflags(write=False)
    return array
