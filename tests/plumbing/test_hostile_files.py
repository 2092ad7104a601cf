"""Issue 35: hostile files and names.  One test per defect of the review, each named after it:
two operators never share one certificate file, no name takes the manifest's, no reader blocks
on a special file or reads past a size limit, checking costs are bounded by the input's size,
a bad ``.npz`` is one line with exit 2, no JSON reader takes the last of two duplicate keys, and
the test oracle keeps the sign of an mpmath number.

Cheap by construction: FIFOs and sparse files in ``tmp_path``, crafted zip members, no file of
more than a few MiB is ever written.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from conftest import run_in_process, run_verify
from softrank_cert.errors import CertificateFormatError, InvalidInputError, KeyFileError, SizeLimitError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "certificates/examples/random-qk.json"


def _panel(path: Path, names: list[str]) -> Path:
    rng = np.random.default_rng(0)
    np.savez(path, **{f"{name}/S": rng.normal(size=(3, 3)) for name in names})
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _npy(array: np.ndarray, **kw) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, **kw)
    return buf.getvalue()


# --------------------------------------------------------------------------- 1, 2: operator names

@pytest.mark.parametrize("name", ["x//a", "x/./a", "../a", "/a", "a/", "x/../a", "a\\b"])
def test_names_that_normalise_to_one_path_are_refused(name):
    from softrank_cert.plumbing.certificate_files import certificate_path

    with pytest.raises(InvalidInputError) as exc:
        certificate_path(Path("out"), name)
    assert repr(name) in str(exc.value) and "as a path it is" in str(exc.value)


def test_two_operators_one_file_is_refused_before_any_work(tmp_path, capsys):
    panel = _panel(tmp_path / "p.npz", ["x/a", "x//a"])
    code, out, err = run_in_process(capsys, "bracket", str(panel), "--all", "--eps", "0.5", "--out", str(tmp_path / "o") + "/")
    assert code == 2 and "'x//a'" in err and "'x/a'" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()  # refused before a file or folder was written


def test_names_differing_only_in_case_are_refused_naming_both():
    from softrank_cert.plumbing.certificate_files import certificate_paths

    with pytest.raises(InvalidInputError, match="'L0H1' and 'l0h1' would share one certificate file"):
        certificate_paths(Path("out"), ["L0H1", "L0H2", "l0h1"])
    assert certificate_paths(Path("out"), ["x/a", "x"]) == [Path("out/x/a.json"), Path("out/x.json")]


@pytest.mark.parametrize("name", ["softrank-campaign", "Softrank-Campaign", "softrank-campaign.json", "x/softrank-campaign"])
def test_manifest_name_guard_checks_the_normalised_path(name):
    from softrank_cert.plumbing.campaign import check_manifest_clear

    with pytest.raises(InvalidInputError, match="campaign manifest"):
        check_manifest_clear(["ok", name])
    with pytest.raises(InvalidInputError, match="as a path it is 'softrank-campaign'"):
        check_manifest_clear(["softrank-campaign/"])


def test_manifest_name_through_a_trailing_slash_is_refused_by_bracket(tmp_path, capsys):
    panel = _panel(tmp_path / "p.npz", ["softrank-campaign/", "y"])
    code, _out, err = run_in_process(capsys, "bracket", str(panel), "--all", "--eps", "0.5", "--out", str(tmp_path / "o") + "/")
    assert code == 2 and "'softrank-campaign/'" in err, err
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- 3, 6: special files, sizes

def test_verify_of_a_folder_holding_a_fifo_does_not_hang(tmp_path):
    folder = tmp_path / "certs"
    folder.mkdir()
    _fifo(folder / "c.json")
    result = run_verify(folder, timeout=60)
    assert result.returncode == 2 and "FIFO" in result.stdout + result.stderr, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("reader", ["certificate", "key file", "table", "operator file", "manifest", "checkpoint json",
                                    "input text"])
def test_special_files_are_refused_by_every_reader_before_opening(tmp_path, reader):
    from softrank_cert.certio.certificate import read_certificate_bytes
    from softrank_cert.certio.signing import load_trusted_keys
    from softrank_cert.models.common import read_input_file, read_json_object
    from softrank_cert.plumbing.campaign import _Manifest
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.studies.audit.rows import read_table

    fifo = _fifo(tmp_path / "f.json")  # opening it for reading would block without a writer
    if reader == "manifest":
        assert _Manifest.read(fifo) is None
        return
    read = {"certificate": read_certificate_bytes, "key file": load_trusted_keys, "table": read_table,
            "operator file": load_operators, "checkpoint json": lambda p: read_json_object(Path(p)),
            "input text": lambda p: read_input_file(Path(p), "text")}[reader]
    with pytest.raises(InvalidInputError, match="FIFO"):
        read(fifo)
    with pytest.raises(InvalidInputError, match="character device"):
        read("/dev/zero")


def test_size_limit_is_checked_before_reading(tmp_path, monkeypatch):
    from softrank_cert.certio import certificate

    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as handle:
        handle.truncate(certificate.MAX_CERTIFICATE_BYTES + 1)  # a hole: no block is written
    with pytest.raises(CertificateFormatError, match=f"{certificate.MAX_CERTIFICATE_BYTES + 1} bytes, more than"):
        certificate.read_certificate_bytes(sparse)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(InvalidInputError, match="character device"):
        certificate.read_certificate_bytes(link)


def test_table_rows_name_certificates_only_inside_the_tables_folder(tmp_path):
    from softrank_cert.studies.audit.rows import RowError, parse_row, row_certificate_bytes

    for name in ("/etc/passwd", "../x.json", "a/../../x.json"):
        row = parse_row(1, json.dumps({"operator": "a", "eps": "0.5", "lower": 1, "upper": 2, "certificate": name}))
        assert isinstance(row, RowError) and "inside the table's folder" in row.message
    (tmp_path / "t").mkdir()
    (tmp_path / "outside.json").write_text("{}")
    (tmp_path / "t" / "link.json").symlink_to(tmp_path / "outside.json")
    assert "leads outside" in row_certificate_bytes(tmp_path / "t", "link.json")
    _fifo(tmp_path / "t" / "fifo.json")
    assert "FIFO" in row_certificate_bytes(tmp_path / "t", "fifo.json")


# --------------------------------------------------------------------------- 4: checking cost

def _example(**provenance) -> dict:
    document = json.loads(EXAMPLE.read_text())
    document.pop("proof", None)
    document["operator"].setdefault("provenance", {}).update(provenance)
    return document


def test_certificate_with_a_million_strings_is_refused_before_the_schema(monkeypatch):
    from softrank_cert.certio import certificate

    calls = []
    monkeypatch.setattr(certificate.jsonschema, "Draft202012Validator", lambda *a: calls.append(a))
    with pytest.raises(CertificateFormatError, match="more than 50000 JSON values"):
        certificate.check_schema(_example(junk=["a"] * 1_000_000))
    assert calls == []  # refused by the count, before any validation


def test_schema_limits_provenance_strings_lists_and_objects():
    from softrank_cert.certio.certificate import check_schema

    check_schema(_example(ok=["a" * 10_000] * 3, map={str(i): i for i in range(1000)}))
    for bad in ({"s": "a" * 10_001}, {"l": list(range(10_001))}, {"m": {str(i): i for i in range(1001)}}):
        with pytest.raises(CertificateFormatError, match="schema"):
            check_schema(_example(**bad))


def test_count_json_values_counts_every_value_once():
    from softrank_cert.certio.certificate import count_json_values

    assert count_json_values({"a": [1, {"b": None}], "c": "x"}, 100) == 6
    assert count_json_values(list(range(10**6)), 10) == 10**6 + 1  # stops after 11 values, counts the rest unseen


# --------------------------------------------------------------------------- 5, 7: .npz files

def test_zip_bomb_npz_is_refused_from_its_headers(tmp_path, monkeypatch):
    from softrank_cert.util import operator_files as operators_npz

    bomb = tmp_path / "bomb.npz"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (2048, 2048)})
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("h0/S.npy", "w") as member:  # 32 MiB of zeros: about 32 KiB compressed
            member.write(header.getvalue())
            member.write(bytes(32 << 20))
    assert bomb.stat().st_size < 1 << 20
    monkeypatch.setattr(operators_npz.np, "load", lambda *a, **k: pytest.fail("decompressed"))
    with pytest.raises(SizeLimitError, match="zip bomb"):
        operators_npz.load_operators(bomb)


def test_npz_totals_and_memory_are_checked_before_any_member_is_loaded(tmp_path, monkeypatch):
    from softrank_cert.util import memory, operator_files as operators_npz

    panel = _panel(tmp_path / "p.npz", ["a", "b", "c"])
    monkeypatch.setattr(operators_npz.np, "load", lambda *a, **k: pytest.fail("loaded"))
    monkeypatch.setattr(operators_npz, "MAX_NPZ_BYTES", 2 * 72)
    with pytest.raises(SizeLimitError, match="declare 216 bytes in all"):
        operators_npz.operator_names(panel)
    monkeypatch.setattr(operators_npz, "MAX_NPZ_BYTES", 1 << 33)
    monkeypatch.setattr(memory, "default_max_memory", lambda: 200)
    with pytest.raises(SizeLimitError, match="of memory to load"):
        operators_npz.load_operators(panel)


def _write_members(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize("case", ["object-dtype", "truncated", "provenance-list", "provenance-not-object",
                                  "provenance-number", "provenance-float", "provenance-duplicate"])
def test_malformed_npz_exits_2_with_one_line_before_the_search(tmp_path, capsys, monkeypatch, case):
    from softrank_cert.solvers import bracket as solver

    S = _npy(np.arange(9.0).reshape(3, 3) + np.eye(3))
    provenance = {"provenance-list": '{"a": [1]}', "provenance-not-object": '["a"]', "provenance-float": '{"a": {"x": 0.5}}',
                  "provenance-duplicate": '{"a": {}, "a": {"x": 1}}'}
    members = {"a/S.npy": S}
    if case == "object-dtype":
        members["a/S.npy"] = _npy(np.array([[1.0, None]], dtype=object), allow_pickle=True)
    elif case == "truncated":
        members["a/S.npy"] = S[:-20]
    elif case == "provenance-number":
        members["__provenance__.npy"] = _npy(np.array(3.0))
    else:
        members["__provenance__.npy"] = _npy(np.array(provenance[case]))
    panel = _write_members(tmp_path / "p.npz", members)
    monkeypatch.setattr(solver, "bracket_operator", lambda *a, **k: pytest.fail("searched"))
    code, _out, err = run_in_process(capsys, "bracket", str(panel), "--all", "--eps", "0.5", "--out", str(tmp_path / "o") + "/")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err, err


# --------------------------------------------------------------------------- 8: duplicate keys

def test_duplicate_keys_in_a_trusted_keys_file_are_refused(tmp_path):
    from softrank_cert.certio.signing import did_key, generate_private_key, load_trusted_keys

    k1, k2 = (did_key(generate_private_key().public_key()) for _ in range(2))
    path = tmp_path / "trusted.json"
    path.write_text(f'{{"did": "{k2}", "did": "{k1}"}}')
    with pytest.raises(KeyFileError, match="duplicate JSON key 'did'"):
        load_trusted_keys(path)
    path.write_text(json.dumps({"did": k1}))
    assert load_trusted_keys(path) == frozenset({k1})


def test_duplicate_keys_in_a_manifest_make_it_no_manifest(tmp_path):
    from softrank_cert.plumbing.campaign import _Manifest

    path = tmp_path / "m.json"
    path.write_text('{"format": "softrank-campaign", "operators": {}, "operators": {"a": {}}}')
    assert _Manifest.read(path) is None
    path.write_text('{"format": "softrank-campaign", "operators": {"a": {}}}')
    assert _Manifest.read(path) == {"format": "softrank-campaign", "operators": {"a": {}}}


# --------------------------------------------------------------------------- 9: the oracle

def test_oracle_exact_fraction_keeps_the_sign_of_an_mpf():
    from tests.oracle import exact_fraction

    assert exact_fraction(mpmath.mpf(-0.75)) == Fraction(-3, 4)
    assert exact_fraction(mpmath.mpf(0.75)) == Fraction(3, 4)
    assert exact_fraction(mpmath.mpf(-3) * 2**70) == -3 * 2**70
    assert exact_fraction(mpmath.mpf(0)) == 0
    with pytest.raises(ValueError):
        exact_fraction(mpmath.mpf("-inf"))
