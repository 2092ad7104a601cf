"""``softrank report DIR``: a bracket campaign folder as one static HTML page (issue 34 item 4).

One tiny campaign (five random qk heads, widths 16 and 32, a small --work: seconds) is made once
per module; each test works on a copy.  What is checked: the page's brackets are those the
kernel verifies (compared with ``softrank-verify --json``), never the manifest's; a tampered,
swapped or missing certificate shows up as such and gives no bracket; bad input is one line,
exit 2 and nothing written; the JSON matches its schema; and a real headless Chromium loads
the page with every image decoded, every local link resolving and no console error (skipped,
naming the install command, where no browser is installed).
"""

from __future__ import annotations

import base64
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

ROOT = Path(__file__).resolve().parents[2]
NAMES = [("tiny/doc/w16/L0H0", 16), ("tiny/doc/w16/L1H0", 16), ("tiny/doc/w32/L0H0", 32), ("tiny/doc/w32/L1H0", 32),
         ("loose", 16)]
EPS = ["0.1", "0.25", "0.5"]
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


def files_below(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def report_json(folder: Path, *args) -> dict:
    res = run_softrank("report", folder, "--json", "--quiet", *args)
    assert res.returncode in (0, 6), res.stderr
    return json.loads(res.stdout)


# --------------------------------------------------------------------------------------
# Content
# --------------------------------------------------------------------------------------

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


def test_a_tampered_certificate_is_listed_as_not_verified(folder):
    """A flipped witness byte (its hash no longer matches), a certificate copied over another
    operator's and a deleted one: each is listed with its reason and gives no bracket; the
    others still show theirs; exit 6."""
    path = folder / "tiny" / "doc" / "w32" / "L0H0.json"
    document = json.loads(path.read_text())
    bracket = next(b for b in document["brackets"] if "U" in b["upper"])
    data = bytearray(base64.b64decode(bracket["upper"]["U"]["data"]))
    data[0] ^= 0x01
    bracket["upper"]["U"]["data"] = base64.b64encode(bytes(data)).decode()
    path.write_text(json.dumps(document))
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
    assert series == {"widths": [16, 32], "layers": {None: {"0.5": [(16, 2.0, 3.0), (32, 2.0, 3.0)]}}}
    for name, _ in NAMES[2:4]:
        (folder / f"{name}.json").unlink()
    doc = report_json(folder)
    assert [f["path"].rsplit("/", 1)[-1] for f in doc["figures"]] == ["ratios.png"]
    assert any("fewer than two block widths" in note for note in doc["notes"])


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
    assert run_softrank("sign", resigned, "--key", other_key, "--out", resigned).returncode == 0
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
# Bad input: one line, exit 2, nothing written
# --------------------------------------------------------------------------------------

def _break(folder: Path, case: str) -> tuple[Path, list[str], str]:
    manifest = folder / "softrank-campaign.json"
    if case == "not a folder":
        return manifest, [], "not a folder"
    if case == "no manifest":
        manifest.unlink()
        return folder, [], "no softrank-campaign.json"
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
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["not a folder", "no manifest", "another command", "unreadable JSON",
                                  "not a manifest", "too many certificates", "too many bytes", "bad --out"])
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
