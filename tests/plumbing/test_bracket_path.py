"""One bracket task path (issue #32 item 4): ``plumbing.bracketing`` takes an ``Operator``.

The front ends validate once (tolerances, budget) and hand the operator over; it is packed only
when a task leaves the process (a pool or Dask), and the command line does not go through the
public API.  A pool run gives the same certificates as the in-process run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import softrank_cert
import softrank_cert.api
from softrank_cert.errors import EXIT_INVALID_INPUT, InvalidInputError
from softrank_cert.plumbing import parallel
from softrank_cert.verification import verify_certificate_file
from tests.helpers import softrank_in_process as _cli, write_qk_panel

EPS = "0.1,0.25,0.5"
NAMES = ("tiny/doc/w6/L0H0", "tiny/doc/w8/L0H0", "tiny/doc/w8/L0H1")


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> Path:
    return write_qk_panel(tmp_path_factory.mktemp("panel") / "tiny.npz", NAMES, seed=11, d=3)


def _claims(folder: Path) -> dict[str, tuple]:
    """Each certificate's operator and brackets (no times, no proof), by relative path."""
    out = {}
    for path in sorted(folder.rglob("*.json")):
        if path.name != "softrank-campaign.json":
            doc = json.loads(path.read_text())
            out[path.relative_to(folder).as_posix()] = (doc["operator"], doc["brackets"])
    return out


def _no_crossing(monkeypatch) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError("the operator was packed or unpacked, but nothing left the process")

    monkeypatch.setattr(parallel, "pack_operator", refuse)
    monkeypatch.setattr(parallel, "unpack_operator", refuse)


@pytest.fixture(scope="module")
def in_process_run(panel, tmp_path_factory):
    """``softrank bracket --all`` in this process (--jobs 1), with packing forbidden and the public
    API's ``bracket`` replaced by a failure: the command line needs neither."""
    out = tmp_path_factory.mktemp("serial") / "certs"
    with pytest.MonkeyPatch.context() as monkeypatch:
        _no_crossing(monkeypatch)
        monkeypatch.setattr(softrank_cert.api, "bracket", lambda *a, **k: pytest.fail("the CLI re-entered the API"))
        code, stdout, stderr = _run(panel, "--out", f"{out}/", "--json")
    assert code == 0, stderr
    return out, json.loads(stdout)


def _run(panel: Path, *args: str) -> tuple[int, str, str]:
    return _cli("bracket", panel, "--all", "--eps", EPS, "--quiet", *args)


def test_the_in_process_path_does_not_pack(in_process_run):
    out, report = in_process_run
    claims = _claims(out)
    assert sorted(claims) == sorted(f"{name}.json" for name in NAMES)
    assert all(verify_certificate_file(out / rel).ok for rel in claims)
    rows = {entry["operator"]: entry["brackets"] for entry in report["operators"]}
    for rel, (_operator, brackets) in claims.items():
        assert [(r["eps"], r["lower"], r["upper"]) for r in rows[rel[:-5]]] == \
            [(b["eps"], b["lower"]["k"], b["upper"]["r"]) for b in brackets]


def test_a_single_operator_and_the_api_do_not_pack(panel, tmp_path, monkeypatch):
    _no_crossing(monkeypatch)
    target = tmp_path / "one.json"
    code, _out, err = _cli("bracket", panel, "--operator", NAMES[0], "--eps", "0.25", "--out", target, "--quiet")
    assert code == 0, err
    assert verify_certificate_file(target).ok
    op = softrank_cert.load_operator(panel, name=NAMES[0])
    result = softrank_cert.bracket(op, "0.25")
    assert result.to_certificate()["brackets"] == json.loads(target.read_text())["brackets"]


def test_a_pool_gives_the_same_certificates(panel, in_process_run, tmp_path):
    """--jobs 2: the operators go to worker processes packed, the workers write the unsigned
    certificates from their sealed ends; the claims are those of the in-process run."""
    out = tmp_path / "pool"
    code, stdout, stderr = _run(panel, "--out", f"{out}/", "--jobs", "2", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["campaign"]["computed"] == len(NAMES)
    assert _claims(out) == _claims(in_process_run[0])


def test_the_budget_check_lives_in_one_place(panel, tmp_path):
    """The messages of a bad budget are written once (``util/tolerances.py check_budget``), and
    the command line and the API say what they said before."""
    package = Path(softrank_cert.__file__).resolve().parent
    owners = sorted(path.relative_to(package).as_posix() for path in package.rglob("*.py")
                    if any(text in path.read_text("utf-8")
                           for text in ("budget-seconds must be", "budget_seconds must be", "work must be")))
    assert owners == ["util/tolerances.py"]
    code, _out, err = _run(panel, "--out", f"{tmp_path}/c/", "--work", "0")
    assert code == EXIT_INVALID_INPUT and err.strip().endswith("--work must be > 0 (work units), not 0")
    code, _out, err = _run(panel, "--out", f"{tmp_path}/c/", "--budget-seconds", "-1")
    assert code == EXIT_INVALID_INPUT and err.strip().endswith("--budget-seconds must be > 0")
    op = softrank_cert.load_operator(panel, name=NAMES[0])
    for call, message in ((lambda: softrank_cert.bracket(op, "0.25", work=0), "work must be > 0"),
                          (lambda: softrank_cert.bracket(op, "0.25", budget_seconds=float("nan")),
                           "budget_seconds must be > 0"),
                          (lambda: softrank_cert.profile(op, budget_seconds=0), "budget_seconds must be > 0")):
        with pytest.raises(InvalidInputError, match=f"^{message}$"):
            call()
