"""``softrank keygen`` and ``softrank sign``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..certio.certificate import FORMAT_NAME, decode_certificate, parse_json_strict, read_certificate_bytes
from ..certio.signing import did_key, generate_private_key, load_private_key, sign_certificate, write_key_file
from ..errors import CertificateFormatError, InvalidInputError
from ..util.files import check_output_file, write_json_atomic
from ..plumbing.reports import dumps, envelope
from .common import add_command


def add_keygen(sub: Any) -> None:
    p = add_command(sub, "keygen",
                    description="Create an Ed25519 key. The private key file is written with mode 0600; "
                                "the public key goes to FILE.pub (give that to people who verify).",
                    epilog="example:\n  softrank keygen --out ~/.softrank/issuer.key")
    p.add_argument("--out", required=True, metavar="KEYFILE")
    p.add_argument("--json", action="store_true", help="print a JSON summary (paths and did:key) instead of the lines")
    p.set_defaults(run=run_keygen)


def run_keygen(args: Any) -> int:
    out = check_output_file(args.out, "--out")
    if str(out.parent) and not out.parent.exists():  # e.g. ~/.softrank/issuer.key: a private folder
        out.parent.mkdir(parents=True, mode=0o700)
    path = write_key_file(args.out, generate_private_key())
    key = load_private_key(path)
    if getattr(args, "json", False):
        print(dumps(envelope("keygen", {"private_key": str(path), "private_key_mode": "0600",
                                        "public_key": f"{path}.pub", "did": did_key(key.public_key())})))
        return 0
    print(f"private key: {path} (mode 0600)")
    print(f"public key:  {path}.pub")
    print(f"did:         {did_key(key.public_key())}")
    return 0


def add_sign(sub: Any) -> None:
    p = add_command(sub, "sign",
                    description="Add an eddsa-jcs-2022 Data Integrity proof to a certificate "
                                "(any existing proof is replaced). The certificate is decoded first (schema, "
                                "array hashes, operator): anything else is refused. The file is rewritten atomically.",
                    epilog="example:\n  softrank sign cert.json --key issuer.key")
    p.add_argument("certificate", metavar="CERT.json")
    p.add_argument("--key", required=True, metavar="KEYFILE")
    p.add_argument("--out", metavar="FILE", help="write the signed certificate here instead of in place")
    p.add_argument("--json", action="store_true", help="print a JSON summary (file, signer) instead of the line")
    p.set_defaults(run=run_sign)


def _what_document(raw: bytes) -> str | None:
    """What a JSON file that is not a certificate holds (for the refusal), or None when it says it
    is a certificate or is not JSON at all (then the strict reader's reason is the one to give)."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        kinds = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
        return f"a JSON {kinds.get(type(document), 'value')}"
    kind = document.get("format")
    if kind == FORMAT_NAME:
        return None
    if "privateKeyMultibase" in document or "publicKeyMultibase" in document:
        return "a key file"
    return f"a {kind!r} document" if isinstance(kind, str) else f'a JSON object without "format": "{FORMAT_NAME}"'


def read_certificate_to_sign(path: str | Path) -> dict[str, Any]:
    """The certificate at ``path``, fully decoded (schema, array hashes, operator, ends) before it
    is signed: a signature must never vouch for a file that softrank-verify refuses.  Anything else
    is refused with one line (exit 2) saying what the file is."""
    raw = read_certificate_bytes(path)
    try:
        document = parse_json_strict(raw)
    except CertificateFormatError as exc:
        what = _what_document(raw)
        if what is not None:
            raise InvalidInputError(f"{path} is not a softrank certificate ({what}); softrank sign signs certificates only") from None
        raise type(exc)(f"{path}: refusing to sign an invalid certificate: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        what = _what_document(json.dumps(document).encode())
        raise InvalidInputError(f"{path} is not a softrank certificate ({what}); softrank sign signs certificates only")
    try:
        decode_certificate(document)
    except InvalidInputError as exc:
        raise type(exc)(f"{path}: refusing to sign an invalid certificate: {exc}") from None
    return document


def run_sign(args: Any) -> int:
    out = check_output_file(args.out or args.certificate, "--out" if args.out else "CERT.json")
    load_private_key(args.key)  # fail before reading the certificate
    document = read_certificate_to_sign(args.certificate)
    signed = sign_certificate(document, args.key)
    write_json_atomic(out, signed)
    method = signed["proof"]["verificationMethod"]
    if getattr(args, "json", False):
        print(dumps(envelope("sign", {"certificate": str(out), "source": str(args.certificate),
                                      "operator": document["operator"]["id"], "signer": method.split("#")[0],
                                      "verification_method": method, "cryptosuite": signed["proof"]["cryptosuite"],
                                      "created": signed["proof"]["created"]})))
        return 0
    print(f"signed {out} as {method.split('#')[0]}")
    return 0
