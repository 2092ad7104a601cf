"""W3C Data Integrity proofs with the ``eddsa-jcs-2022`` cryptosuite, Ed25519 keys as ``did:key``.

Implements "Data Integrity EdDSA Cryptosuites v1.0" (JCS variant): the signed bytes are
``SHA-256(JCS(proof options)) || SHA-256(JCS(document without proof))``, the signature is
Ed25519 over them, and ``proofValue`` is its multibase base58-btc encoding (``z`` prefix).
Keys are multibase-encoded with the multicodec prefixes ``ed 01`` (public) and ``80 26``
(private seed); a public key is named by ``did:key:<multibase>``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import base58
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from softrank_cert.errors import InvalidInputError, KeyFileError, SignatureError
from softrank_cert.meta import utc_now_rfc3339

PROOF_TYPE = "DataIntegrityProof"
CRYPTOSUITE = "eddsa-jcs-2022"
PROOF_PURPOSE = "assertionMethod"
DID_KEY_PREFIX = "did:key:"
KEY_FILE_TYPE = "Ed25519VerificationKey2020-compatible multibase"

_PUBLIC_CODEC = b"\xed\x01"
_PRIVATE_CODEC = b"\x80\x26"
_KEY_LENGTH = 32
_SIGNATURE_LENGTH = 64
_MISSING = object()


def _multibase_encode(data: bytes) -> str:
    """Return ``"z"`` + base58-btc of ``data``."""
    return "z" + base58.b58encode(data).decode("ascii")


def _multibase_decode(text: object, what: str, error: type[Exception]) -> bytes:
    """Decode a strict (canonical, ``z``-prefixed) base58-btc multibase string."""
    if not isinstance(text, str) or not text.startswith("z"):
        raise error(f"{what} is not a base58-btc multibase string (must start with 'z')")
    try:
        data = base58.b58decode(text[1:])
    except ValueError:
        raise error(f"{what} contains characters outside the base58-btc alphabet") from None
    if _multibase_encode(data) != text:
        raise error(f"{what} is not canonical base58-btc")
    return data


def _key_bytes(text: object, codec: bytes, what: str, error: type[Exception]) -> bytes:
    """Decode a multicodec-prefixed 32-byte key from its multibase form."""
    data = _multibase_decode(text, what, error)
    if not data.startswith(codec):
        raise error(f"{what} does not carry the multicodec prefix {codec.hex(' ')}")
    if len(data) != len(codec) + _KEY_LENGTH:
        raise error(f"{what} holds {len(data) - len(codec)} key bytes, expected {_KEY_LENGTH}")
    return data[len(codec):]


#: Encodings of the Ed25519 points of small order (orders 1, 2, 4, 8), with the sign bit of the
#: last byte cleared, including the non-canonical encodings p and p + 1 (libsodium's blocklist).
#: A did:key of such a point "verifies" forged signatures (e.g. R = identity, S = 0) under
#: cofactorless verification, so such keys are refused outright.
_SMALL_ORDER_ENCODINGS = frozenset(bytes.fromhex(h) for h in (
    "0000000000000000000000000000000000000000000000000000000000000000",  # order 4
    "0100000000000000000000000000000000000000000000000000000000000000",  # identity
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",  # order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",  # order 8
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # p - 1: order 2
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # p (= 0): order 4
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # p + 1 (= 1): identity
))


def _refuse_small_order(raw: bytes) -> None:
    """SignatureError if ``raw`` encodes a point of small order (a key that signs everything)."""
    if raw[:31] + bytes([raw[31] & 0x7F]) in _SMALL_ORDER_ENCODINGS:
        raise SignatureError("public key is a small-order Ed25519 point (it would accept forged signatures)")


def generate_private_key() -> Ed25519PrivateKey:
    """Return a fresh random Ed25519 private key."""
    return Ed25519PrivateKey.generate()


def public_key_multibase(public_key: Ed25519PublicKey) -> str:
    """Return the multibase form ``z`` + base58-btc(``ed 01`` + 32 raw public key bytes)."""
    return _multibase_encode(_PUBLIC_CODEC + public_key.public_bytes_raw())


def private_key_multibase(private_key: Ed25519PrivateKey) -> str:
    """Return the multibase form ``z`` + base58-btc(``80 26`` + 32-byte private seed)."""
    return _multibase_encode(_PRIVATE_CODEC + private_key.private_bytes_raw())


def private_key_from_multibase(text: object) -> Ed25519PrivateKey:
    """Parse a private key written by :func:`private_key_multibase`; KeyFileError if malformed."""
    seed = _key_bytes(text, _PRIVATE_CODEC, "privateKeyMultibase", KeyFileError)
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_from_multibase(text: str) -> Ed25519PublicKey:
    """Parse a public key written by :func:`public_key_multibase`; SignatureError if malformed."""
    raw = _key_bytes(text, _PUBLIC_CODEC, "public key multibase", SignatureError)
    _refuse_small_order(raw)
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise SignatureError("public key multibase is not a valid Ed25519 point") from None


def did_key(public_key: Ed25519PublicKey) -> str:
    """Return the ``did:key`` DID of ``public_key``."""
    return DID_KEY_PREFIX + public_key_multibase(public_key)


def verification_method_for(public_key: Ed25519PublicKey) -> str:
    """Return the did:key verification method URL ``did:key:<mb>#<mb>`` of ``public_key``."""
    return did_key(public_key) + "#" + public_key_multibase(public_key)


def public_key_from_verification_method(vm: str) -> Ed25519PublicKey:
    """Resolve ``did:key:<mb>#<mb>`` (same multibase twice) or ``did:key:<mb>`` to its key."""
    if not isinstance(vm, str) or not vm.startswith(DID_KEY_PREFIX):
        raise SignatureError(f"verificationMethod {vm!r:.100} is not a did:key")
    multibase, hash_sign, fragment = vm[len(DID_KEY_PREFIX):].partition("#")
    if hash_sign and fragment != multibase:
        raise SignatureError(f"verificationMethod {vm!r:.100}: fragment differs from the did:key")
    return public_key_from_multibase(multibase)


def canonical_json(obj: Any) -> bytes:
    """Return the RFC 8785 (JCS) canonical serialization of ``obj``."""
    try:
        return rfc8785.dumps(obj)
    except rfc8785.CanonicalizationError as exc:
        raise SignatureError(f"cannot canonicalize document (RFC 8785): {exc}") from None


def _hash_data(proof_config: dict[str, Any], unsecured: dict[str, Any]) -> bytes:
    """Return SHA-256(JCS(proof config)) || SHA-256(JCS(unsecured document))."""
    return (
        hashlib.sha256(canonical_json(proof_config)).digest()
        + hashlib.sha256(canonical_json(unsecured)).digest()
    )


def sign_document(
    document: dict[str, Any],
    private_key: Ed25519PrivateKey,
    *,
    created: str,
    verification_method: str | None = None,
    proof_purpose: str = PROOF_PURPOSE,
) -> dict[str, Any]:
    """Return a new dict: ``document`` (any old proof dropped) plus an eddsa-jcs-2022 proof.

    ``verification_method`` defaults to the did:key URL of the signing key.
    """
    unsecured = {key: value for key, value in document.items() if key != "proof"}
    proof: dict[str, Any] = {
        "type": PROOF_TYPE,
        "cryptosuite": CRYPTOSUITE,
        "created": created,
        "verificationMethod": verification_method_for(private_key.public_key())
        if verification_method is None
        else verification_method,
        "proofPurpose": proof_purpose,
    }
    if "@context" in unsecured:
        proof["@context"] = unsecured["@context"]
    signature = private_key.sign(_hash_data(proof, unsecured))
    proof["proofValue"] = _multibase_encode(signature)
    return {**unsecured, "proof": proof}


def verify_document(
    document: dict[str, Any], public_key: Ed25519PublicKey | None = None
) -> str:
    """Verify the eddsa-jcs-2022 proof of ``document`` and return its verificationMethod.

    Without ``public_key`` the key is resolved from the proof's did:key verificationMethod.
    Raises SignatureError with a one-line reason on any failure.
    """
    if not isinstance(document, dict):
        raise SignatureError("signed document is not a JSON object")
    proof = document.get("proof")
    if not isinstance(proof, dict):
        raise SignatureError("document has no proof object")
    expected = {"type": PROOF_TYPE, "cryptosuite": CRYPTOSUITE, "proofPurpose": PROOF_PURPOSE}
    for field, value in expected.items():
        if proof.get(field) != value:
            raise SignatureError(f"proof {field} is {proof.get(field)!r:.100}, expected {value!r}")
    if not isinstance(proof.get("created"), str):
        raise SignatureError("proof created is missing or not a string")
    vm = proof.get("verificationMethod")
    if not isinstance(vm, str):
        raise SignatureError("proof verificationMethod is missing or not a string")
    if proof.get("@context", _MISSING) != document.get("@context", _MISSING):
        raise SignatureError("proof @context differs from the document @context")
    signature = _multibase_decode(proof.get("proofValue"), "proofValue", SignatureError)
    if len(signature) != _SIGNATURE_LENGTH:
        raise SignatureError(
            f"proofValue holds {len(signature)} bytes, expected {_SIGNATURE_LENGTH}"
        )
    key = public_key_from_verification_method(vm) if public_key is None else public_key
    _refuse_small_order(key.public_bytes_raw())
    proof_config = {field: value for field, value in proof.items() if field != "proofValue"}
    unsecured = {field: value for field, value in document.items() if field != "proof"}
    try:
        key.verify(signature, _hash_data(proof_config, unsecured))
    except InvalidSignature:
        raise SignatureError("proof signature does not verify for this document and key") from None
    return vm


def _public_key_record(public_key: Ed25519PublicKey) -> dict[str, str]:
    """Return the JSON record of a public key file."""
    return {
        "type": KEY_FILE_TYPE,
        "did": did_key(public_key),
        "verificationMethod": verification_method_for(public_key),
        "publicKeyMultibase": public_key_multibase(public_key),
    }


def _create_exclusive(path: Path, text: str, mode: int) -> None:
    """Create ``path`` with ``mode`` and write ``text``; never overwrite an existing file."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    except FileExistsError:
        raise KeyFileError(f"refusing to overwrite existing key file {path}") from None
    except OSError as exc:
        raise KeyFileError(f"cannot create key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_key_file(path: str | os.PathLike[str], private_key: Ed25519PrivateKey) -> Path:
    """Write a private key file (mode 0600) and ``<path>.pub`` (mode 0644); return ``path``.

    Refuses (KeyFileError) if either file already exists.
    """
    path = Path(path)
    public_path = Path(f"{path}.pub")
    if public_path.exists():
        raise KeyFileError(f"refusing to overwrite existing key file {public_path}")
    record = _public_key_record(private_key.public_key())
    private_record = {**record, "privateKeyMultibase": private_key_multibase(private_key)}
    _create_exclusive(path, json.dumps(private_record, indent=2) + "\n", 0o600)
    _create_exclusive(public_path, json.dumps(record, indent=2) + "\n", 0o644)
    return path


#: Key files and trusted-keys lists larger than this are refused before reading (a did:key
#: line is 57 bytes: a megabyte lists over 17,000 keys).
MAX_KEY_FILE_BYTES = 1 << 20


def _read_text(path: str | os.PathLike[str]) -> str:
    """Read a key file as UTF-8 text: a regular file of at most :data:`MAX_KEY_FILE_BYTES`
    (:func:`~softrank_cert.util.files.read_regular_file`); KeyFileError if not."""
    from softrank_cert.util.files import read_regular_file

    try:
        return read_regular_file(path, MAX_KEY_FILE_BYTES, "key file").decode("utf-8")
    except InvalidInputError as exc:
        raise KeyFileError(str(exc)) from None
    except UnicodeDecodeError:
        raise KeyFileError(f"key file {path} is not UTF-8 text") from None


def _parse_json(text: str, path: str | os.PathLike[str]) -> Any:
    """Parse JSON text of a key file, refusing duplicate keys; KeyFileError if malformed."""
    from softrank_cert.util.files import loads_unique

    try:
        return loads_unique(text)
    except (ValueError, RecursionError) as exc:
        raise KeyFileError(f"key file {path} is not valid JSON: {exc}") from None


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load a private key file written by :func:`write_key_file`, checking its public key."""
    text = _read_text(path)
    if text.lstrip().startswith(DID_KEY_PREFIX):
        raise KeyFileError(f"key file {path} lists did:key public keys: signing needs the private key file "
                           "written by softrank keygen (not its .pub or a trusted-keys list)")
    record = _parse_json(text, path)
    if not isinstance(record, dict):
        raise KeyFileError(f"key file {path} is not a JSON object")
    if "privateKeyMultibase" not in record and ("publicKeyMultibase" in record or "did" in record):
        raise KeyFileError(f"key file {path} is a public key: signing needs the private key file written by "
                           "softrank keygen (KEYFILE, not KEYFILE.pub)")
    try:
        private_key = private_key_from_multibase(record.get("privateKeyMultibase"))
    except KeyFileError as exc:
        raise KeyFileError(f"key file {path}: {exc}") from None
    if record.get("publicKeyMultibase") != public_key_multibase(private_key.public_key()):
        raise KeyFileError(f"key file {path}: publicKeyMultibase does not match the private key")
    return private_key


def sign_now(document: dict[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """``document`` with an eddsa-jcs-2022 proof by ``private_key``, created now, whose
    verification method is the key's did:key."""
    return sign_document(document, private_key, created=utc_now_rfc3339(),
                         verification_method=verification_method_for(private_key.public_key()))


def sign_certificate(document: dict[str, Any], key_path: str | Path) -> dict[str, Any]:
    """``document`` signed with the private key file at ``key_path`` (:func:`sign_now`); any proof
    it had is replaced."""
    return sign_now({k: v for k, v in document.items() if k != "proof"}, load_private_key(key_path))


def _checked_did(entry: object, where: str) -> str:
    """Return ``entry`` if it is a plain ``did:key`` of an Ed25519 key; else KeyFileError."""
    if not isinstance(entry, str) or not entry.startswith(DID_KEY_PREFIX) or "#" in entry:
        raise KeyFileError(f"{where}: {entry!r:.100} is not a did:key DID")
    try:
        public_key_from_multibase(entry[len(DID_KEY_PREFIX):])
    except SignatureError as exc:
        raise KeyFileError(f"{where}: {exc}") from None
    return entry


def load_trusted_keys(path: str | os.PathLike[str]) -> frozenset[str]:
    """Load trusted signer DIDs (``did:key:z6Mk...``) from ``path``.

    Accepted formats: one DID per line (blank lines and ``#`` comments ignored), a public key
    JSON file as written by :func:`write_key_file`, or a JSON list of DIDs.  A private key file
    is refused (KeyFileError, exit 2): a secret does not belong where public keys are listed.
    """
    text = _read_text(path)
    if text.lstrip().startswith(("{", "[")):
        data = _parse_json(text, path)
        if isinstance(data, dict) and "privateKeyMultibase" in data:
            raise KeyFileError(f"trusted keys file {path} is a private key: give its public key file "
                               "(KEYFILE.pub, written beside it by softrank keygen) or a list of did:key lines")
        if isinstance(data, dict):
            did = _checked_did(data.get("did"), f"trusted keys file {path} field 'did'")
            multibase = did[len(DID_KEY_PREFIX):]
            if data.get("publicKeyMultibase", multibase) != multibase:
                raise KeyFileError(f"trusted keys file {path}: publicKeyMultibase differs from did")
            dids = [did]
        elif isinstance(data, list):
            dids = [
                _checked_did(entry, f"trusted keys file {path} entry {index}")
                for index, entry in enumerate(data, start=1)
            ]
        else:
            raise KeyFileError(f"trusted keys file {path} is neither a JSON object nor a list")
    else:
        dids = [
            _checked_did(line.strip(), f"trusted keys file {path} line {number}")
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.strip().startswith("#")
        ]
    if not dids:
        raise KeyFileError(f"trusted keys file {path} lists no keys")
    return frozenset(dids)
