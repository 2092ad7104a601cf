"""float64 arrays in certificates: ``{"dtype", "shape", "encoding", "data", "sha256"}``.

Decoding is the array part of steps 3 (operator arrays) and 5 (bracket ends) of the
verification step list (:mod:`softrank_cert.verification`); each array is decoded once.

``data`` is canonical standard base64 (RFC 4648, padded, zero bits after the last byte) of the
little-endian C-order bytes and ``sha256`` the hex digest of those bytes.  Decoding checks the
declared shape against the size limits *before* decoding anything, then the exact base64
length, decodes and hashes in one pass, then finiteness, and returns a read-only array
bit-identical to the one that was encoded.
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


#: Base64 characters decoded (and hashed) at a time: the chunk stays in cache between the two.
_CHUNK_CHARS = 1 << 22
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _decode_and_hash(data: str, nbytes: int, where: str) -> tuple[bytearray, str]:
    """The bytes of canonical base64 ``data`` and their SHA-256, in one pass over chunks.

    Canonical (RFC 4648 section 3.5): padded, no character outside the alphabet, and the unused
    low bits of the last character before the padding are zero, so that one array has exactly one
    encoding and its hash cannot be varied by another text."""
    raw, digest = bytearray(nbytes), hashlib.sha256()
    view, filled = memoryview(raw), 0
    try:
        for start in range(0, len(data), _CHUNK_CHARS):  # a multiple of 4: padding only in the last chunk
            piece = binascii.a2b_base64(data[start:start + _CHUNK_CHARS], strict_mode=True)  # ASCII str only
            if filled + len(piece) > nbytes:
                break
            digest.update(piece)
            view[filled:filled + len(piece)] = piece
            filled += len(piece)
    except (binascii.Error, ValueError):
        raise CertificateFormatError(f"{where}: data is not valid base64") from None
    if filled != nbytes:
        raise CertificateFormatError(f"{where}: data does not decode to the {nbytes} bytes its shape needs")
    padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    if padding and _ALPHABET.index(data[-padding - 1]) & (0b1111 if padding == 2 else 0b11):
        raise CertificateFormatError(f"{where}: data is not canonical base64 (non-zero bits after the last byte)")
    return raw, digest.hexdigest()


def decode_array(obj: dict[str, Any], where: str) -> np.ndarray:
    """Decode a schema-valid array object; ``where`` names it in error messages.

    The declared shape is checked against the size limits before anything is allocated, then the
    exact base64 length (so the file size bounds the memory), then the bytes are decoded and
    hashed chunk by chunk (canonical base64 only), then finiteness."""
    shape = tuple(obj["shape"])
    check_shape(where, shape)  # size limits before allocating
    nbytes = shape[0] * shape[1] * 8
    data = obj["data"]
    if len(data) != 4 * ((nbytes + 2) // 3):
        raise CertificateFormatError(f"{where}: base64 data has {len(data)} characters, shape {list(shape)} needs "
                                     f"{4 * ((nbytes + 2) // 3)}")
    raw, digest = _decode_and_hash(data, nbytes, where)
    if digest != obj["sha256"]:
        raise HashMismatchError(f"{where}: SHA-256 of the data does not match the declared sha256")
    array = np.frombuffer(raw, dtype="<f8").reshape(shape)
    if array.dtype != np.float64:  # a big-endian machine: native doubles
        array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise CertificateFormatError(f"{where}: contains NaN or Inf")
    array.setflags(write=False)
    return array
