"""One JSON contract for every ``--json`` output and report file (issue 14 items 4 and 7).

Every command runs in-process (``softrank_cert.cli.main.main([...])`` and
``softrank_cert.cli.verify.main([...])``) on tiny inputs; its ``--json`` output (and report
file) must validate against the schema in ``certificates/schema/`` that its ``format`` names,
a failing run with ``--json`` must print the error document (same exit code, still one stderr
line), and every certified bound is a 17-significant-digit decimal rounded outward from the
kernel's exact rationals.  Item 7: ``softrank budgets --certificates DIR`` (the certificates
prove every feasible / impossible class), ``--operator`` on budgets and geometry, and
``softrank geometry CERT.json``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest

from softrank_cert.cli.main import main as softrank_main
from softrank_cert.plumbing.json_contract import COMMANDS, bound_down, bound_up, report_schema, validate_report
from tests.helpers import softrank_in_process as run, write_qk_panel

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "certificates" / "schema"
EXAMPLES = ROOT / "certificates" / "examples"
PANEL = ROOT / "examples" / "panels" / "minilm-apache2-w32.npz"
NAMES = ["tiny/doc/w4/L0H1", "tiny/doc/w4/L0H2", "tiny/doc/w8/L0H1"]
CERTIFIED = re.compile(r"^(0|-?[1-9]\.[0-9]{16}e[+-][0-9]{2,})$")


def run_json(*argv, verify: bool = False, code: int = 0) -> dict:
    got, out, err = run(*argv, verify=verify)
    assert got == code, (got, err[-2000:])
    return json.loads(out)


@pytest.fixture(scope="module")
def tiny_panel(tmp_path_factory) -> Path:
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", NAMES, seed=3)


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("key") / "issuer.key"
    with pytest.raises(SystemExit):
        softrank_main(["keygen", "--out", str(path)])
    return path


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, tiny_panel, key) -> dict[str, dict]:
    """The ``--json`` document of every command (and the report files), from one run each."""
    work = tmp_path_factory.mktemp("outputs")
    docs: dict[str, dict] = {}
    docs["verify"] = run_json(*sorted(EXAMPLES.glob("*.json")), "--json", verify=True)
    docs["bracket"] = run_json("bracket", tiny_panel, "--operator", NAMES[2], "--eps", "0.25,0.5",
                               "--out", work / "one.json", "--budget-seconds", "1", "--json")
    docs["bracket-campaign"] = run_json("bracket", tiny_panel, "--all", "--eps", "0.25,0.5", "--out",
                                        work / "certs/", "--budget-seconds", "1", "--json")
    docs["geometry"] = run_json("geometry", tiny_panel, "--operator", NAMES[2], "--rank", "1", "--eps", "0.5",
                                "--json")
    docs["supports"] = run_json("supports", "sphere", "--dim", "2", "--n", "8", "--kappas", "0.5,2",
                                "--budget-seconds", "1", "--geometry-ranks", "1,2", "--json")
    docs["budgets"] = run_json("budgets", tiny_panel, "--budgets", "1,2,4", "--eps", "0.25",
                               "--budget-seconds", "1", "--out", work / "budgets.json", "--certificates",
                               work / "budget-certs", "--json")
    docs["budgets-file"] = json.loads((work / "budgets.json").read_text())
    docs["profile"] = run_json("profile", tiny_panel, "--operator", NAMES[2], "--budget-seconds", "1",
                               "--eps", "0.25", "--out", work / "profile-cert.json", "--json")
    table = work / "table.jsonl"
    table.write_text("".join(json.dumps(row) + "\n" for row in [
        {"operator": NAMES[0], "eps": "0.25", "lower": 4, "upper": 4},      # lower end above the truth: refuted
        {"operator": NAMES[1], "eps": "0.5", "lower": 1, "upper": 4},
        {"operator": "tiny/doc/w4/nope", "eps": "0.25", "lower": 1, "upper": 2}]))
    docs["audit"] = run_json("audit", table, "--operators", tiny_panel, "--out", work / "audit.json",
                             "--budget-seconds", "1", "--key", key, "--json")
    docs["audit-file"] = json.loads((work / "audit.json").read_text())
    docs["analyze"] = run_json("analyze", work / "certs", "--operators", tiny_panel, "--out",
                               work / "analysis.json", "--plot", work / "analysis.png", "--bootstrap", "10", "--json")
    docs["report"] = run_json("report", work / "certs", "--out", work / "report.html", "--json", "--quiet")
    docs["list"] = run_json("list", tiny_panel, "--json")
    docs["keygen"] = run_json("keygen", "--out", work / "second.key", "--json")
    docs["sign"] = run_json("sign", work / "one.json", "--key", key, "--out", work / "signed.json", "--json")
    try:
        docs["panel"] = run_json("panel", "--model", "minilm", "--text", ROOT / "examples/data/apache2.txt",
                                 "--widths", "6", "--layers", "0", "--heads", "0", "--out", work / "p.npz", "--json")
    except AssertionError:  # the offline MiniLM package is not installed here
        pass
    docs["_work"] = {"path": str(work)}
    return docs


def _walk(document, path=()):
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _walk(value, path + (key,))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _walk(value, path + (index,))
    else:
        yield path, document


# --------------------------------------------------------------------------------- schemas

def test_every_command_has_a_valid_draft_2020_12_schema():
    names = {p.name for p in SCHEMAS.glob("*.schema.json")}
    for command in COMMANDS:
        assert f"softrank-{command}-report-v1.schema.json" in names, command
    assert {"softrank-error-v1.schema.json", "softrank-report-common-v1.schema.json",
            "softrank-certificate-v1.schema.json"} <= names
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(path.name.replace(".schema.json", ".json"))
    assert report_schema("softrank-verify-report")["title"].startswith("softrank-verify")


@pytest.mark.parametrize("name", ["verify", "bracket", "bracket-campaign", "geometry", "supports", "budgets",
                                  "budgets-file", "profile", "audit", "audit-file", "analyze", "report", "keygen", "sign", "panel",
                                  "list"])
def test_every_json_output_validates_against_its_schema(outputs, name):
    if name not in outputs:
        pytest.skip("the offline MiniLM package is not installed")
    document = outputs[name]
    validate_report(document)
    command = name.split("-")[0]
    assert document["command"] == command and document["format"] == f"softrank-{command}-report"
    assert document["version"] == 1 and document["generator"]["name"] == "softrank-cert"


def test_the_schemas_catch_a_drifting_key(outputs):
    """Renaming a contract key (here a verdict's ``verdict`` back to ``status``) fails validation."""
    document = json.loads(json.dumps(outputs["verify"]))
    claim = document["files"][0]["claims"][0]
    claim["status"] = claim.pop("verdict")
    with pytest.raises(jsonschema.ValidationError):
        validate_report(document)
    geometry = json.loads(json.dumps(outputs["geometry"]))
    geometry["operators"][0]["tau"] = "0.65690"  # not 17 significant digits
    with pytest.raises(jsonschema.ValidationError):
        validate_report(geometry)


def test_same_things_have_the_same_keys(outputs):
    """verdict / checked_by / precision_bits / margin in verify, audit and profile; the bracket
    ends as lower / upper / lower_method / upper_construction in bracket, budgets and supports."""
    claim = outputs["verify"]["files"][0]["claims"][0]
    end = next(r["evidence"]["lower"] for r in outputs["audit"]["rows"] if r["evidence"].get("lower"))
    step = outputs["profile"]["lower"][-1]
    for item in (claim, end, step):
        assert {"verdict", "checked_by", "precision_bits", "margin", "value"} <= set(item)
        assert "status" not in item and "engine" not in item and "precision" not in item
    bracket = outputs["bracket"]["operators"][0]["brackets"][0]
    budget = outputs["budgets"]["operators"][0]
    point = outputs["supports"]["points"][0]
    for item in (bracket, budget, point):
        assert {"lower", "upper", "lower_method", "upper_construction"} <= set(item)


# ------------------------------------------------------------------ certified bounds, estimates

def test_certified_bounds_have_17_significant_digits_everywhere(outputs):
    """Every string under a key that names a certified bound (margin / value enclosures, the
    geometry and supports bounds) is a 17-digit decimal; float64 estimates are JSON numbers."""
    bound_keys = {"tau", "tau_lower", "tau_tanh", "kappa_upper", "kappa_lower", "phi", "phi_lower", "gamma_native",
                  "gamma_native_lower", "c_max_abs", "c_float64_error", "lower_over_phi",
                  "intrinsic_bound", "native_bound", "tau_upper", "gamma_upper"}
    seen = 0
    for name in ("verify", "geometry", "supports", "profile", "audit", "analyze"):
        for path, value in _walk(outputs[name]):
            in_enclosure = len(path) >= 2 and path[-2] in ("margin", "value") and path[-1] in ("lower", "upper")
            named = path and path[-1] in bound_keys and not {"estimates", "certified", "meaning"} & set(path)
            if (in_enclosure or named) and value is not None:
                assert isinstance(value, str) and CERTIFIED.fullmatch(value), (name, path, value)
                seen += 1
            if "estimates" in path and value is not None:
                assert isinstance(value, (int, float)), (name, path, value)
    assert seen > 50


def test_bounds_are_the_exact_enclosures_rounded_outward(outputs):
    """The JSON strings of a verdict are the kernel's exact margins rounded down / up to 17
    significant digits (one unit of the 17th digit at most away), and they bracket the float64
    estimate of the same quantity (geometry)."""
    from softrank_cert.verification import verify_certificate_file

    path = outputs["verify"]["files"][0]["path"]
    report = verify_certificate_file(path)
    claims = outputs["verify"]["files"][0]["claims"]
    for verdict, claim in zip(report.verdicts, claims):
        for exact, text in ((verdict.margin, claim["margin"]), (verdict.value, claim["value"])):
            if exact is None:
                assert text is None
                continue
            lo, hi = Fraction(text["lower"]), Fraction(text["upper"])
            assert lo <= exact[0] and hi >= exact[1]
            for bound, end in ((lo, exact[0]), (hi, exact[1])):
                if end != 0:
                    digit = Fraction(10) ** (math.floor(math.log10(abs(float(end)))) - 16)
                    assert abs(bound - end) <= digit, (bound, end)
    (geo,) = outputs["geometry"]["operators"]
    est = geo["estimates"]
    slack = Fraction(1, 10**12) * (1 + abs(Fraction(est["tau"])))  # the estimate's own float64 rounding
    assert Fraction(geo["tau_lower"]) - slack <= Fraction(est["tau"]) <= Fraction(geo["tau"]) + slack
    assert Fraction(geo["tau"]) > Fraction(1, 100)  # a real residual, not a rounding-level one
    assert Fraction(geo["kappa_lower"]) <= Fraction(geo["kappa_upper"])
    assert Fraction(geo["tau_lower"]) <= Fraction(geo["tau"]) and len(geo["tau"].split("e")[0].replace(".", "")) == 17
    # the helpers round outward exactly
    third = Fraction(1, 3)
    assert Fraction(bound_down(third)) < third < Fraction(bound_up(third))
    assert bound_down(third) == "3.3333333333333333e-01" and bound_up(third) == "3.3333333333333334e-01"
    assert bound_down(-third) == "-3.3333333333333334e-01" and bound_up(Fraction(5)) == "5.0000000000000000e+00"


# ---------------------------------------------------------------------------- errors as JSON

ERRORS = [
    ("verify", ["--max-prec", "3", "x.json"]),
    ("verify", ["/nonexistent/dir/*.json", "--kernel", "nope"]),  # a usage error: argparse
    ("bracket", ["missing.npz", "--eps", "0.25", "--out", "c.json"]),
    ("bracket", []),  # missing required arguments
    ("geometry", ["BAD_CERT", "--rank", "2", "--eps", "0.5"]),
    ("supports", ["sphere", "--dim", "2", "--eps", "0.1x"]),
    ("budgets", ["PANEL", "--budgets", "0", "--eps", "0.25"]),
    ("profile", ["missing.npz"]),
    ("audit", ["missing.jsonl", "--operators", "PANEL", "--out", "r.json"]),
    ("analyze", ["missing", "--operators", "PANEL", "--out", "a.json", "--plot", "a.png"]),
    ("panel", ["--model", "minilm", "--text", "x.txt", "--widths", "8", "--out", "p.txt"]),
    ("keygen", ["--out", "FOLDER/"]),
    ("sign", ["missing.json", "--key", "KEY"]),
]


@pytest.mark.parametrize("command,argv", ERRORS, ids=[f"{c}-{i}" for i, (c, _a) in enumerate(ERRORS)])
def test_errors_are_json_with_the_same_exit_code(monkeypatch, tmp_path, tiny_panel, key, command, argv):
    monkeypatch.chdir(tmp_path)  # relative outputs of the failing runs land here (none is written)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "softrank-certificate", "version": 1')
    (tmp_path / "FOLDER").mkdir()
    subs = {"PANEL": str(tiny_panel), "BAD_CERT": str(bad), "KEY": str(key), "FOLDER/": str(tmp_path / "FOLDER") + "/"}
    argv = [subs.get(a, a) for a in argv]
    full = argv if command == "verify" else [command, *argv]
    plain_code, plain_out, plain_err = run(*full, verify=command == "verify")
    code, out, err = run(*full, "--json", verify=command == "verify")
    assert code == plain_code and code != 0
    assert len([line for line in err.splitlines() if line.strip()]) == 1 and err == plain_err, (err, plain_err)
    assert plain_out == ""
    document = json.loads(out)
    validate_report(document)
    assert document["format"] == "softrank-error" and document["command"] == command
    assert document["error"]["exit_code"] == code and document["error"]["message"] in err
    assert "Traceback" not in out + err


def test_verify_per_file_errors_use_the_error_object(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text((EXAMPLES / "random-qk.json").read_text()[:500])
    document = run_json(broken, EXAMPLES / "causal-qk.json", "--json", verify=True, code=2)
    validate_report(document)
    first, second = document["files"]
    assert first["status"] == "invalid" and first["error"]["exit_code"] == 2 and first["exit_code"] == 2
    assert second["status"] == "checked" and all(c["verdict"] == "VERIFIED" for c in second["claims"])


# ------------------------------------------------------------------------------- item 7

def test_budgets_certificates_prove_every_feasible_and_impossible_class(outputs):
    from softrank_cert.verification import verify_certificate_file

    work = Path(outputs["_work"]["path"])
    report = outputs["budgets"]
    assert report["certificates"] == str(work / "budget-certs")
    written = sorted(p for p in (work / "budget-certs").rglob("*.json"))
    listed = [entry for entry in report["operators"] if entry["certificate"]]
    assert len(written) == len(listed) >= 1
    for entry in report["operators"]:
        settled = any(cls != "unresolved" for cls in entry["classes"].values())
        assert (entry["certificate"] is not None) == settled
        if not settled:
            continue
        checked = verify_certificate_file(entry["certificate"])
        assert checked.operator_id == entry["operator"]
        assert all(v.status.value == "VERIFIED" for v in checked.verdicts)
        lower, upper = checked.verdicts
        assert (lower.rank, upper.rank, lower.eps) == (entry["lower"], entry["upper"], "0.25")
        for budget, cls in entry["classes"].items():
            b = int(budget)
            assert cls == ("feasible" if upper.rank <= b else "impossible" if lower.rank > b else "unresolved")


def test_budgets_certificates_hold_the_sharpened_ends(monkeypatch):
    """Ends moved by the budget pass (here from the trivial ends) are the ones in the
    certificate, and it verifies."""
    import softrank_cert.solvers.bracket as driver
    from softrank_cert.studies.budgets.operators import study_operator
    from softrank_cert.util.operator_files import load_operators
    from softrank_cert.plumbing.parallel import pack_operator
    from softrank_cert.verification import verify_certificate_document

    (item,) = load_operators(PANEL, ["minilm/apache2/w32/L5H1"])
    from softrank_cert.certio.verified import VerifiedBracket, verify_lower_end, verify_upper_end

    def trivial(op, eps, budget_seconds=None, work=None):  # the trivial ends [1, p], sealed by the kernel
        (e,) = eps
        return [VerifiedBracket(e, verify_lower_end(op, e, 1, None, None, "trivial"),
                                verify_upper_end(op, e, op.p, None, None, "identity"))]

    monkeypatch.setattr(driver, "bracket_operator", trivial)
    result = study_operator(pack_operator(item.operator), item.name, "stem", "0.25", [2, 3, 8], 30.0,
                            certificate=True, provenance={"test": "sharpened"})
    assert (result.lower, result.upper) == (3, 3) and result.sharpened
    checked = verify_certificate_document(result.certificate)
    assert [(v.side, v.rank, v.status.value) for v in checked.verdicts] == [("lower", 3, "VERIFIED"),
                                                                            ("upper", 3, "VERIFIED")]
    assert "certificate" not in result.to_json()


def test_budgets_operator_filter(tiny_panel):
    report = run_json("budgets", tiny_panel, "--operator", NAMES[2], "--operator", NAMES[0], "--budgets", "2",
                      "--eps", "0.25", "--budget-seconds", "1", "--json")
    validate_report(report)
    assert sorted(entry["operator"] for entry in report["operators"]) == sorted([NAMES[0], NAMES[2]])
    assert report["operators_selected"] == [NAMES[2], NAMES[0]]
    code, _out, err = run("budgets", tiny_panel, "--operator", "tiny/doc/w4/nope", "--budgets", "2", "--eps",
                          "0.25")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "tiny/doc/w4/nope" in err
    code, _out, err = run("budgets", tiny_panel, "--budgets", "2", "--eps", "0.25", "--key", "k.key")
    assert code == 2 and "--certificates" in err


def test_budgets_resume_keeps_results_only_with_their_certificates(tmp_path, tiny_panel, key):
    out, certs = tmp_path / "r.json", tmp_path / "certs"
    argv = ["budgets", tiny_panel, "--budgets", "1,2,4", "--eps", "0.25", "--budget-seconds", "inf", "--out", out,
            "--certificates", certs, "--key", key, "--resume", "--json"]
    first = run_json(*argv)
    files = sorted(certs.rglob("*.json"))
    assert files and len(files) == sum(1 for e in first["operators"] if e["certificate"])
    manifest = tmp_path / "r-campaign.json"
    run_json(*argv)
    assert json.loads(manifest.read_text())["runs"][-1]["skipped"] == len(NAMES)
    files[0].unlink()  # a lost --certificates file: issued again from the campaign's re-verified certificate
    third = run_json(*argv)
    state = json.loads(manifest.read_text())["runs"][-1]
    assert state["skipped"] == len(NAMES) and state["computed"] == 0
    assert files[0].is_file()
    lost = sorted((tmp_path / "r-campaign").rglob("*.json"))[0]  # a lost state certificate: computed again
    lost.unlink()
    fourth = run_json(*argv)
    state = json.loads(manifest.read_text())["runs"][-1]
    assert state["skipped"] == len(NAMES) - 1 and state["computed"] == 1 and lost.is_file()
    assert [(e["lower"], e["upper"]) for e in fourth["operators"]] == [(e["lower"], e["upper"]) for e in first["operators"]]
    assert [(e["lower"], e["upper"]) for e in third["operators"]] == [(e["lower"], e["upper"]) for e in first["operators"]]
    from softrank_cert.verification import verify_certificate_file

    assert verify_certificate_file(files[0], require_signature=True).signer


def test_geometry_operator_filter_and_certificate_input(tmp_path, tiny_panel, outputs):
    two = run_json("geometry", tiny_panel, "--operator", NAMES[0], "--operator", NAMES[1], "--rank", "1",
                   "--eps", "0.5", "--json")
    validate_report(two)
    assert [entry["operator"] for entry in two["operators"]] == NAMES[:2]
    code, _out, err = run("geometry", tiny_panel, "--rank", "1", "--eps", "0.5")
    assert code == 2 and "--operator" in err
    certificate = Path(outputs["_work"]["path"]) / "one.json"
    from_cert = run_json("geometry", certificate, "--rank", "1", "--eps", "0.5", "--json")
    validate_report(from_cert)
    assert from_cert["source"] == {"path": str(certificate), "kind": "certificate"}
    (a,), (b,) = from_cert["operators"], outputs["geometry"]["operators"]
    assert a["operator"] == b["operator"] == NAMES[2]
    assert {k: a[k] for k in ("tau", "tau_lower", "kappa_upper", "kappa_lower")} == \
        {k: b[k] for k in ("tau", "tau_lower", "kappa_upper", "kappa_lower")}
    code, _out, err = run("geometry", certificate, "--operator", NAMES[0], "--rank", "2", "--eps", "0.5")
    assert code == 2 and "certificate about" in err
    # certificates that fail to parse or to decode: one line, exit 2
    document = json.loads(certificate.read_text())
    document["operator"]["arrays"]["Q"]["sha256"] = "0" * 64
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(document))
    truncated = tmp_path / "truncated.json"
    truncated.write_text(certificate.read_text()[:300])
    not_a_certificate = tmp_path / "report.json"
    shutil.copy(Path(outputs["_work"]["path"]) / "budgets.json", not_a_certificate)
    for bad in (tampered, truncated, not_a_certificate):
        code, out, err = run("geometry", bad, "--rank", "2", "--eps", "0.5")
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and str(bad) in err, (bad, err)
