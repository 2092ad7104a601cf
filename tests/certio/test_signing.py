"""Tests of eddsa-jcs-2022 Data Integrity proofs, did:key handling and key files."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import base58
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from softrank_cert.certio.signing import (
    canonical_json,
    did_key,
    generate_private_key,
    load_private_key,
    load_trusted_keys,
    private_key_from_multibase,
    private_key_multibase,
    public_key_from_multibase,
    public_key_from_verification_method,
    public_key_multibase,
    sign_document,
    utc_now_rfc3339,
    verification_method_for,
    verify_document,
    write_key_file,
)
from softrank_cert.errors import KeyFileError, SignatureError

VECTOR = Path(__file__).resolve().parents[1] / "data" / "eddsa-jcs-2022"
CREATED = "2026-11-30T22:00:00Z"
CONTEXT = ["https://www.w3.org/ns/credentials/v2"]


@pytest.fixture(scope="module")
def key_pair() -> dict[str, str]:
    """The W3C test vector key pair (multibase strings)."""
    return json.loads((VECTOR / "keyPair.json").read_text())


@pytest.fixture(scope="module")
def signed_vector() -> dict[str, Any]:
    """The W3C test vector signed document."""
    return json.loads((VECTOR / "signedJCS.json").read_text())


def sample_document() -> dict[str, Any]:
    """A certificate-like document with strings, numbers, booleans, null and nesting."""
    return {
        "@context": list(CONTEXT),
        "kind": "softrank-certificate",
        "version": 1,
        "operator": {"n": 64, "beta": "0.125", "mask": None, "causal": True},
        "result": {"rank": 7, "tolerance": "1e-6", "bounds": [0.25, 3, -17.5]},
        "arrays": [{"name": "Q", "sha256": "ab" * 32}, {"name": "K", "sha256": "cd" * 32}],
    }


def assert_rejected(document: Any, public_key: Any = None) -> str:
    """Assert that verification fails with a one-line SignatureError; return its message."""
    with pytest.raises(SignatureError) as info:
        verify_document(document, public_key)
    message = str(info.value)
    assert message and "\n" not in message
    return message


def leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Yield (path, value) for every scalar leaf of a JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, path + (index,))
    else:
        yield path, node


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """Return a deep copy of ``document`` with the leaf at ``path`` set to ``value``."""
    result = copy.deepcopy(document)
    node = result
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return result


def flip_char(text: str, position: int) -> str:
    """Change the character at ``position`` to a different one."""
    new = "x" if text[position] != "x" else "y"
    return text[:position] + new + text[position + 1:]


def changed_scalar(value: Any) -> list[Any]:
    """Different JSON values to substitute for a scalar leaf."""
    if isinstance(value, str):
        positions = sorted({0, len(value) // 2, len(value) - 1}) if value else []
        return [flip_char(value, p) for p in positions] + [value + " "]
    if isinstance(value, bool):
        return [not value, int(value)]
    if isinstance(value, (int, float)):
        return [value + 1, -value - 1, str(value)]
    return [0, "", False]  # None


# (a), (b): the W3C test vector


def test_vector_proof_verifies(key_pair: dict[str, str], signed_vector: dict[str, Any]) -> None:
    public_key = public_key_from_multibase(key_pair["publicKeyMultibase"])
    vm = signed_vector["proof"]["verificationMethod"]
    assert verify_document(signed_vector, public_key) == vm


def test_vector_resigning_reproduces_proof_value(
    key_pair: dict[str, str], signed_vector: dict[str, Any]
) -> None:
    private_key = private_key_from_multibase(key_pair["privateKeyMultibase"])
    proof = signed_vector["proof"]
    unsigned = {k: v for k, v in signed_vector.items() if k != "proof"}
    resigned = sign_document(
        unsigned,
        private_key,
        created=proof["created"],
        verification_method=proof["verificationMethod"],
    )
    assert resigned["proof"]["proofValue"] == proof["proofValue"]
    assert resigned == signed_vector


def test_vector_key_encodings_round_trip(key_pair: dict[str, str]) -> None:
    private_key = private_key_from_multibase(key_pair["privateKeyMultibase"])
    assert private_key_multibase(private_key) == key_pair["privateKeyMultibase"]
    assert public_key_multibase(private_key.public_key()) == key_pair["publicKeyMultibase"]


def test_vector_is_rejected_without_explicit_key(signed_vector: dict[str, Any]) -> None:
    assert "did:key" in assert_rejected(signed_vector)


# (c): round trip with did:key resolution


def test_round_trip_with_did_key_resolution() -> None:
    private_key = generate_private_key()
    document = sample_document()
    signed = sign_document(document, private_key, created=CREATED)
    vm = verification_method_for(private_key.public_key())
    assert vm.startswith("did:key:z6Mk")
    assert vm == did_key(private_key.public_key()) + "#" + public_key_multibase(
        private_key.public_key()
    )
    assert signed["proof"] == {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "created": CREATED,
        "verificationMethod": vm,
        "proofPurpose": "assertionMethod",
        "@context": CONTEXT,
        "proofValue": signed["proof"]["proofValue"],
    }
    assert verify_document(signed) == vm
    assert verify_document(signed, private_key.public_key()) == vm
    assert document == sample_document(), "sign_document must not modify its input"
    # Survives a JSON round trip and key order changes.
    reordered = json.loads(json.dumps(dict(reversed(list(signed.items())))))
    assert verify_document(reordered) == vm


def test_resigning_replaces_existing_proof() -> None:
    first, second = generate_private_key(), generate_private_key()
    signed = sign_document(sample_document(), first, created=CREATED)
    resigned = sign_document(signed, second, created=CREATED)
    assert verify_document(resigned) == verification_method_for(second.public_key())
    assert_rejected(resigned, first.public_key())


def test_document_without_context_gets_no_proof_context() -> None:
    private_key = generate_private_key()
    document = {k: v for k, v in sample_document().items() if k != "@context"}
    signed = sign_document(document, private_key, created=CREATED)
    assert "@context" not in signed["proof"]
    verify_document(signed)
    with_context = copy.deepcopy(signed)
    with_context["proof"]["@context"] = CONTEXT
    assert "@context" in assert_rejected(with_context)


def test_plain_did_key_verification_method_is_accepted() -> None:
    private_key = generate_private_key()
    did = did_key(private_key.public_key())
    signed = sign_document(sample_document(), private_key, created=CREATED, verification_method=did)
    assert verify_document(signed) == did
    assert public_key_from_verification_method(did).public_bytes_raw() == (
        private_key.public_key().public_bytes_raw()
    )


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**53) + 1, 2**53 - 1)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=12),
            lambda children: st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=6), children, max_size=4),
            max_leaves=12,
        ),
        max_size=6,
    )
)
def test_round_trip_arbitrary_json(document: dict[str, Any]) -> None:
    private_key = generate_private_key()
    signed = sign_document(document, private_key, created=CREATED)
    assert verify_document(json.loads(json.dumps(signed))) == signed["proof"]["verificationMethod"]


# (d): any single change in signed content breaks the proof


def test_every_changed_leaf_in_document_is_rejected() -> None:
    private_key = generate_private_key()
    signed = sign_document(sample_document(), private_key, created=CREATED)
    checked = 0
    for path, value in leaves({k: v for k, v in signed.items() if k != "proof"}):
        for new_value in changed_scalar(value):
            assert_rejected(replaced(signed, path, new_value))
            checked += 1
    assert checked > 50


def test_every_changed_leaf_in_proof_options_is_rejected() -> None:
    private_key = generate_private_key()
    signed = sign_document(sample_document(), private_key, created=CREATED)
    checked = 0
    for path, value in leaves(signed["proof"]):
        if path == ("proofValue",):
            continue
        for new_value in changed_scalar(value):
            tampered = replaced(signed, ("proof",) + path, new_value)
            # Pass the key explicitly so the signature check itself is exercised even when
            # the verificationMethod no longer resolves.
            assert_rejected(tampered, private_key.public_key())
            checked += 1
    assert checked > 20


def test_every_changed_character_in_one_value_is_rejected() -> None:
    private_key = generate_private_key()
    signed = sign_document(sample_document(), private_key, created=CREATED)
    sha = signed["arrays"][0]["sha256"]
    for position in range(len(sha)):
        assert_rejected(replaced(signed, ("arrays", 0, "sha256"), flip_char(sha, position)))
    created = signed["proof"]["created"]
    for position in range(len(created)):
        assert_rejected(replaced(signed, ("proof", "created"), flip_char(created, position)))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(extra=1),
        lambda d: d.pop("kind"),
        lambda d: d.update(kind2=d.pop("kind")),
        lambda d: d["result"]["bounds"].append(0),
        lambda d: d["result"]["bounds"].reverse(),
        lambda d: d["operator"].update(beta=0.125),
        lambda d: d["proof"].update(nonce="abc"),
        lambda d: d["proof"].update(created=CREATED.replace("Z", "+00:00")),
    ],
    ids=["add-key", "drop-key", "rename-key", "append", "reorder", "type-change", "proof-add",
         "proof-created"],
)
def test_structural_changes_are_rejected(mutate: Any) -> None:
    private_key = generate_private_key()
    signed = sign_document(sample_document(), private_key, created=CREATED)
    mutate(signed)
    assert_rejected(signed)


# (e): wrong keys and malformed proofs


@pytest.fixture()
def signed_pair() -> tuple[dict[str, Any], Any]:
    """A freshly signed sample document and its private key."""
    private_key = generate_private_key()
    return sign_document(sample_document(), private_key, created=CREATED), private_key


def test_wrong_key_is_rejected(signed_pair: tuple[dict[str, Any], Any]) -> None:
    signed, _ = signed_pair
    assert "does not verify" in assert_rejected(signed, generate_private_key().public_key())


def test_verification_method_of_other_key_is_rejected(
    signed_pair: tuple[dict[str, Any], Any],
) -> None:
    signed, _ = signed_pair
    signed["proof"]["verificationMethod"] = verification_method_for(
        generate_private_key().public_key()
    )
    assert_rejected(signed)


def test_truncated_proof_value_is_rejected(signed_pair: tuple[dict[str, Any], Any]) -> None:
    signed, private_key = signed_pair
    value = signed["proof"]["proofValue"]
    signed["proof"]["proofValue"] = value[:-1]  # may still decode to 64 bytes
    assert_rejected(signed, private_key.public_key())
    for cut in (2, 10, len(value) - 1):  # 86 base58 digits hold at most 63 bytes
        signed["proof"]["proofValue"] = value[:-cut]
        assert "expected 64" in assert_rejected(signed, private_key.public_key())


@pytest.mark.parametrize(
    "proof_value",
    ["u" + "A" * 86, "", "z", "z0OIl", 42, None, "z" + "1" * 64 + "2"],
    ids=["base64url-prefix", "empty", "bare-z", "bad-alphabet", "number", "null", "wrong-length"],
)
def test_malformed_proof_value_is_rejected(
    signed_pair: tuple[dict[str, Any], Any], proof_value: Any
) -> None:
    signed, _ = signed_pair
    signed["proof"]["proofValue"] = proof_value
    assert_rejected(signed)


def test_proof_value_with_trailing_whitespace_is_rejected(
    signed_pair: tuple[dict[str, Any], Any],
) -> None:
    signed, _ = signed_pair
    signed["proof"]["proofValue"] += " "
    assert "canonical" in assert_rejected(signed)


@pytest.mark.parametrize(
    "field, value",
    [
        ("cryptosuite", "eddsa-rdfc-2022"),
        ("cryptosuite", None),
        ("type", "Ed25519Signature2020"),
        ("proofPurpose", "authentication"),
        ("created", 20261130),
        ("verificationMethod", ["did:key:z6Mk"]),
    ],
)
def test_wrong_proof_fields_are_rejected(
    signed_pair: tuple[dict[str, Any], Any], field: str, value: Any
) -> None:
    signed, private_key = signed_pair
    signed["proof"][field] = value
    assert field in assert_rejected(signed, private_key.public_key())


@pytest.mark.parametrize("field", ["type", "cryptosuite", "created", "proofValue", "proofPurpose"])
def test_missing_proof_fields_are_rejected(
    signed_pair: tuple[dict[str, Any], Any], field: str
) -> None:
    signed, private_key = signed_pair
    del signed["proof"][field]
    assert_rejected(signed, private_key.public_key())


def test_missing_or_non_object_proof_is_rejected(signed_pair: tuple[dict[str, Any], Any]) -> None:
    signed, _ = signed_pair
    assert_rejected([signed])
    assert_rejected({k: v for k, v in signed.items() if k != "proof"})
    assert_rejected({**signed, "proof": [signed["proof"]]})


def test_context_mismatch_is_rejected(signed_pair: tuple[dict[str, Any], Any]) -> None:
    signed, private_key = signed_pair
    no_proof_context = copy.deepcopy(signed)
    del no_proof_context["proof"]["@context"]
    assert "@context" in assert_rejected(no_proof_context, private_key.public_key())
    other = copy.deepcopy(signed)
    other["proof"]["@context"] = CONTEXT + ["https://example.org/x"]
    assert "@context" in assert_rejected(other, private_key.public_key())


@pytest.mark.parametrize(
    "vm",
    [
        "https://vc.example/issuers/5678#z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2",
        "did:web:example.org#key-1",
        "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2#key-1",
        "did:key:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2#"
        "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ3",
        "did:key:u7QFcmfbA9NqTCL_ErHk7HtSCxMrbMSW0uVwn8qKhwyjd1A",
        "did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme",  # secp256k1
        "did:key:",
        "DID:KEY:z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2",
        42,
    ],
)
def test_non_did_key_verification_methods_are_rejected(vm: Any) -> None:
    with pytest.raises(SignatureError) as info:
        public_key_from_verification_method(vm)
    assert "\n" not in str(info.value)


def test_public_key_multibase_must_be_exact() -> None:
    private_key = generate_private_key()
    good = public_key_multibase(private_key.public_key())
    assert public_key_from_multibase(good).public_bytes_raw() == (
        private_key.public_key().public_bytes_raw()
    )
    raw = private_key.public_key().public_bytes_raw()
    bad = [
        "f" + good[1:],
        "z" + base58.b58encode(b"\xed\x01" + raw[:31]).decode(),
        "z" + base58.b58encode(b"\xed\x01" + raw + b"\x00").decode(),
        "z" + base58.b58encode(b"\xe7\x01" + raw).decode(),
        private_key_multibase(private_key),
        good + "\n",
    ]
    for text in bad:
        with pytest.raises(SignatureError):
            public_key_from_multibase(text)
    with pytest.raises(KeyFileError):
        private_key_from_multibase(good)


# (f): key files and trusted keys


def test_key_file_mode_overwrite_and_load(tmp_path: Path) -> None:
    private_key = generate_private_key()
    path = tmp_path / "signer.key"
    old_umask = os.umask(0o022)
    try:
        assert write_key_file(path, private_key) == path
    finally:
        os.umask(old_umask)
    public_path = tmp_path / "signer.key.pub"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(public_path.stat().st_mode) == 0o644
    record = json.loads(path.read_text())
    public_record = json.loads(public_path.read_text())
    assert record["privateKeyMultibase"] == private_key_multibase(private_key)
    assert public_record == {k: v for k, v in record.items() if k != "privateKeyMultibase"}
    assert public_record["did"] == did_key(private_key.public_key())
    assert public_record["verificationMethod"] == verification_method_for(private_key.public_key())
    loaded = load_private_key(path)
    assert loaded.private_bytes_raw() == private_key.private_bytes_raw()

    before = path.read_bytes()
    with pytest.raises(KeyFileError, match="overwrite"):
        write_key_file(path, generate_private_key())
    assert path.read_bytes() == before

    path.unlink()
    with pytest.raises(KeyFileError, match="overwrite"):
        write_key_file(path, generate_private_key())
    assert not path.exists(), "nothing written when the .pub file already exists"


def test_key_file_in_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError):
        write_key_file(tmp_path / "missing" / "k.key", generate_private_key())


def test_load_private_key_rejects_bad_files(tmp_path: Path) -> None:
    private_key = generate_private_key()
    path = write_key_file(tmp_path / "k.key", private_key)
    record = json.loads(path.read_text())
    other_public = public_key_multibase(generate_private_key().public_key())
    cases = {
        "missing.key": None,
        "not-json.key": "{not json",
        "list.key": "[]",
        "no-private.key": json.dumps({**record, "privateKeyMultibase": None}),
        "no-public.key": json.dumps({**record, "publicKeyMultibase": None}),
        "mismatch.key": json.dumps({**record, "publicKeyMultibase": other_public}),
        "public-as-private.key": json.dumps(
            {**record, "privateKeyMultibase": record["publicKeyMultibase"]}
        ),
    }
    for name, text in cases.items():
        bad = tmp_path / name
        if text is not None:
            bad.write_text(text)
        with pytest.raises(KeyFileError) as info:
            load_private_key(bad)
        assert "\n" not in str(info.value)
    (tmp_path / "binary.key").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(KeyFileError):
        load_private_key(tmp_path / "binary.key")


def test_trusted_keys_text_file(tmp_path: Path) -> None:
    dids = [did_key(generate_private_key().public_key()) for _ in range(3)]
    path = tmp_path / "trusted.txt"
    path.write_text(f"# signers\n\n{dids[0]}\n  {dids[1]}  \n# old\n{dids[2]}\n{dids[0]}\n")
    assert load_trusted_keys(path) == frozenset(dids)


def test_trusted_keys_malformed_line_is_named(tmp_path: Path) -> None:
    good = did_key(generate_private_key().public_key())
    for bad_line in [
        "did:key:z6MkNOTAKEY",
        "did:web:example.org",
        good + "#" + good.split(":")[2],
        good[:-1],
        "z" + good.split(":z")[1],
    ]:
        path = tmp_path / "trusted.txt"
        path.write_text(f"# header\n{good}\n{bad_line}\n")
        with pytest.raises(KeyFileError, match="line 3") as info:
            load_trusted_keys(path)
        assert "\n" not in str(info.value)


def test_trusted_keys_json_forms(tmp_path: Path) -> None:
    private_key = generate_private_key()
    key_path = write_key_file(tmp_path / "k.key", private_key)
    assert load_trusted_keys(Path(f"{key_path}.pub")) == {did_key(private_key.public_key())}

    dids = [did_key(generate_private_key().public_key()) for _ in range(2)]
    list_path = tmp_path / "trusted.json"
    list_path.write_text(json.dumps(dids))
    assert load_trusted_keys(list_path) == frozenset(dids)

    list_path.write_text(json.dumps([dids[0], "did:key:zzz"]))
    with pytest.raises(KeyFileError, match="entry 2"):
        load_trusted_keys(list_path)

    pub = json.loads(Path(f"{key_path}.pub").read_text())
    pub["publicKeyMultibase"] = dids[0].split(":")[2]
    list_path.write_text(json.dumps(pub))
    with pytest.raises(KeyFileError):
        load_trusted_keys(list_path)


@pytest.mark.parametrize("text", ["", "# nothing\n\n", "[]", "{", '"did:key:z"', "[1]"])
def test_trusted_keys_rejects_empty_or_malformed(tmp_path: Path, text: str) -> None:
    path = tmp_path / "trusted"
    path.write_text(text)
    with pytest.raises(KeyFileError):
        load_trusted_keys(path)


def test_trusted_keys_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError):
        load_trusted_keys(tmp_path / "absent")


# (g): values JCS cannot represent


@pytest.mark.parametrize(
    "bad_value",
    [math.nan, math.inf, -math.inf, 2**53, {1, 2}, b"bytes"],
    ids=["nan", "inf", "-inf", "unsafe-int", "set", "bytes"],
)
def test_unrepresentable_values_raise_signature_error(bad_value: Any) -> None:
    private_key = generate_private_key()
    document = {**sample_document(), "bad": bad_value}
    with pytest.raises(SignatureError) as info:
        sign_document(document, private_key, created=CREATED)
    assert "\n" not in str(info.value)
    with pytest.raises(SignatureError):
        canonical_json(document)


def test_nan_in_received_document_is_rejected() -> None:
    private_key = generate_private_key()
    signed = sign_document(sample_document(), private_key, created=CREATED)
    text = json.dumps(signed).replace('"bounds": [0.25', '"bounds": [NaN')
    tampered = json.loads(text)  # Python's json accepts NaN
    assert math.isnan(tampered["result"]["bounds"][0])
    assert "RFC 8785" in assert_rejected(tampered)


def test_canonical_json_is_rfc8785() -> None:
    assert canonical_json({"b": [1.0, 1e21, "é"], "a": None, "c": True}) == (
        '{"a":null,"b":[1,1e+21,"é"],"c":true}'.encode()
    )


def test_utc_now_rfc3339_format() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now_rfc3339())
