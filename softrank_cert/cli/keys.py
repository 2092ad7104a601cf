"""``softrank keygen`` and ``softrank sign``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..certio.certificate import FORMAT_NAME, parse_json_strict, read_certificate_bytes
from ..certio.signing import did_key, generate_private_key, load_private_key, sign_certificate, write_key_file
from ..errors import CertificateFormatError, CertificateRefusedError, InvalidInputError, KernelLimitError
from ..util.files import check_output_file, key_file_kind, same_file, write_json_atomic
from ..plumbing.json_contract import dumps, envelope
from .common import add_command, add_force_option, key_inputs


def add_keygen(sub: Any) -> None:
    p = add_command(sub, "keygen", epilog="example:\n  softrank keygen --out ~/.softrank/issuer.key")
    p.add_argument("--out", required=True, metavar="KEYFILE")
    p.add_argument("--json", action="store_true", help="print a JSON summary (paths and did:key) instead of the lines")
    p.set_defaults(run=run_keygen)


def run_keygen(args: Any) -> int:
    for path, option in ((args.out, "--out"), (f"{args.out}.pub", "--out (its public key)")):
        if Path(path).is_file() and key_file_kind(path) is None:  # a key file: check_output_file names it
            raise InvalidInputError(f"{option} {path}: exists; softrank keygen never replaces a file: name a new one")
        check_output_file(path, option)
    out = Path(args.out)
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


SIGN_EPILOG = """\
examples:
  softrank sign cert.json --key issuer.key
  softrank sign cert.json --key issuer.key --out signed/cert.json

Without --out the certificate file is rewritten in place. --out may not name the certificate,
the --key file, its .pub or any key file; an existing file is replaced only with --force.

Before it signs, softrank sign checks the certificate exactly as softrank-verify does --
schema, array hashes, operator, then every claim with the trusted kernel -- and signs only when
every claim is VERIFIED: a signature never vouches for an unproved claim. Any existing proof
is discarded first, valid or not, whoever made it: it is being replaced, and what is signed is
the claims, which are checked afresh (verify the old signature with softrank-verify
--trusted-keys if it matters to you). A refusal is one line naming the first claim that is not
VERIFIED (rank, side, eps, verdict); nothing is written.

exit codes: 0 signed (every claim VERIFIED); 1 refused: some claim REJECTED (provably false);
3 refused: nothing rejected, but some claim INCONCLUSIVE at --max-prec (softrank-verify's
codes for the same certificate); 2 invalid input (not a certificate, schema, hash mismatch, a
bad key file) or an output that cannot be written; 4 a checker bug; 5 not checked (beyond the
limits of --kernel exact, or an Arb check larger than this process may use).
"""


def add_sign(sub: Any) -> None:
    from .verify import DEFAULT_MAX_PREC, KERNEL_CHOICES

    p = add_command(sub, "sign", epilog=SIGN_EPILOG)
    p.add_argument("certificate", metavar="CERT.json")
    p.add_argument("--key", required=True, metavar="KEYFILE")
    p.add_argument("--out", metavar="FILE", help="write the signed certificate here instead of in place")
    add_force_option(p)
    p.add_argument("--max-prec", type=int, default=DEFAULT_MAX_PREC, metavar="BITS",
                   help=f"highest Arb precision tried before INCONCLUSIVE (default {DEFAULT_MAX_PREC}; as softrank-verify)")
    p.add_argument("--kernel", choices=KERNEL_CHOICES, default="auto",
                   help="checker for the claims, as softrank-verify --kernel (default auto)")
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


def read_certificate_to_sign(path: str | Path, *, max_prec: int | None = None, kernel: str = "auto") -> dict[str, Any]:
    """The certificate at ``path`` without its proof, re-verified as ``softrank-verify`` verifies it
    (schema, array hashes, operator, then every claim with the trusted kernel) before it is
    signed: a signature must never vouch for a claim the kernel has not verified.

    Any existing proof is dropped before the check, valid or not: it is being replaced, and the
    claims, not who signed them before, are what the new signature vouches for.  A file that is
    not a valid certificate is refused with one line saying what it is (exit 2); one with a claim
    that is not VERIFIED with one line naming the first such claim
    (:class:`~softrank_cert.errors.CertificateRefusedError`: exit 1 when some claim is REJECTED,
    3 when some is INCONCLUSIVE, as ``softrank-verify`` exits on it)."""
    from ..kernel import DEFAULT_MAX_PREC
    from ..plumbing.campaign import first_unverified
    from ..verification import verify_certificate_document

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
    unsigned = {key: value for key, value in document.items() if key != "proof"}
    try:
        verification = verify_certificate_document(unsigned, source=str(path), max_prec=max_prec or DEFAULT_MAX_PREC,
                                                   kernel=kernel)
    except InvalidInputError as exc:
        raise type(exc)(f"{path}: refusing to sign an invalid certificate: {exc}") from None
    except KernelLimitError as exc:
        raise KernelLimitError(f"{path}: refusing to sign a certificate whose claims were not checked: {exc}") from None
    bad = first_unverified(verification)
    if bad is not None:
        raise CertificateRefusedError(f"{path}: refusing to sign: claim {bad} by the trusted kernel (softrank-verify "
                                      "shows every claim); nothing was written", verification.exit_code)
    return unsigned


def run_sign(args: Any) -> int:
    if args.out is None:  # signed in place: the certificate itself is the output
        out = check_output_file(args.certificate, "CERT.json", force=True, inputs=key_inputs(args.key))
    elif same_file(args.out, args.certificate):
        raise InvalidInputError(f"--out {args.out} is the certificate to sign: omit --out to sign it in place")
    else:
        out = check_output_file(args.out, "--out", force=args.force, inputs=key_inputs(args.key))
    load_private_key(args.key)  # fail before reading the certificate
    from ..kernel import precision_schedule

    precision_schedule(args.max_prec)  # a bad --max-prec is refused before any work
    document = read_certificate_to_sign(args.certificate, max_prec=args.max_prec, kernel=args.kernel)
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
