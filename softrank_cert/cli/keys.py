"""``softrank keygen`` and ``softrank sign``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..certio.certificate import check_schema, read_json_file
from ..certio.signing import (
    did_key, load_private_key, sign_document, utc_now_rfc3339, verification_method_for, write_key_file,
    generate_private_key,
)
from ..errors import InvalidInputError
from .common import canonical_dump, write_text_atomic


def add_keygen(sub: Any) -> None:
    p = sub.add_parser("keygen", help="create an Ed25519 signing key (did:key)",
                       description="Create an Ed25519 key. The private key file is written with mode 0600; "
                                   "the public key goes to FILE.pub (give that to people who verify).",
                       epilog="example:\n  softrank keygen --out ~/.softrank/issuer.key",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="KEYFILE")
    p.set_defaults(run=run_keygen)


def run_keygen(args: Any) -> int:
    path = write_key_file(args.out, generate_private_key())
    key = load_private_key(path)
    print(f"private key: {path} (mode 0600)")
    print(f"public key:  {path}.pub")
    print(f"did:         {did_key(key.public_key())}")
    return 0


def add_sign(sub: Any) -> None:
    p = sub.add_parser("sign", help="sign (or re-sign) a certificate with eddsa-jcs-2022",
                       description="Add an eddsa-jcs-2022 Data Integrity proof to a certificate "
                                   "(any existing proof is replaced). The file is rewritten atomically.",
                       epilog="example:\n  softrank sign cert.json --key issuer.key",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("certificate", metavar="CERT.json")
    p.add_argument("--key", required=True, metavar="KEYFILE")
    p.add_argument("--out", metavar="FILE", help="write the signed certificate here instead of in place")
    p.set_defaults(run=run_sign)


def sign_certificate(document: dict[str, Any], key_path: str | Path) -> dict[str, Any]:
    key = load_private_key(key_path)
    unsigned = {k: v for k, v in document.items() if k != "proof"}
    return sign_document(unsigned, key, created=utc_now_rfc3339(),
                         verification_method=verification_method_for(key.public_key()))


def run_sign(args: Any) -> int:
    document = read_json_file(args.certificate)
    if not isinstance(document, dict):
        raise InvalidInputError(f"{args.certificate}: not a certificate object")
    check_schema(document)
    signed = sign_certificate(document, args.key)
    out = Path(args.out or args.certificate)
    write_json_atomic(out, signed)
    print(f"signed {out} as {signed['proof']['verificationMethod'].split('#')[0]}")
    return 0


def write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write JSON to ``path`` via a temporary file and rename: never a partial file."""
    write_text_atomic(Path(path), canonical_dump(document))
