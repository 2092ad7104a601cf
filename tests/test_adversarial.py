"""Adversarial soundness campaign, sampled (issue 7): no false or tampered certificate accepted.

Runs a fixed-seed random subset of ``benchmarks/adversarial_campaign.py`` (the full campaign of
>= 10,000 certificates lives in ``benchmarks/results/adversarial.json``).  Truth is mpmath at 256
bits, computed without either kernel; a certificate counts as false only when clearly false.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("adversarial_campaign", ROOT / "benchmarks" / "adversarial_campaign.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("adversarial_campaign", module)
    spec.loader.exec_module(module)
    return module


campaign = _load()


@pytest.fixture(scope="module")
def sampled():
    return campaign.run_campaign(n_bases=18, seed=11, sample=900, file_every=30)


def test_no_false_or_tampered_certificate_is_accepted(sampled):
    assert sampled["accepted"] == 0, sampled["accepted_examples"][:2]
    assert sampled["kernel_decided_conflicts"] == 0, sampled["disagreement_examples"][:2]
    assert sampled["file_entry_point_mismatches"] == 0
    assert sampled["truly_false"] >= 200 and sampled["invalid_by_construction"] >= 150


def test_every_category_is_exercised_and_classified(sampled):
    cats = sampled["categories"]
    for name in ("near_upper_eps_below_error", "near_lower_eps_above_threshold", "bitflip_rehashed",
                 "bitflip_no_rehash", "operator_swapped", "rank_edited", "trivial_end_abused",
                 "nonfinite_or_subnormal", "shape_absurd", "duplicate_json_keys", "eps_string_malformed",
                 "signed_then_tampered"):
        assert cats.get(name, {}).get("count", 0) > 0, name
    # near-threshold false claims are decided REJECTED (exit 1) by the default, Arb and exact
    # checkers, never left open; the float64 path alone may only decline (exit 3), never accept.
    for name in ("near_upper_eps_below_error", "near_lower_eps_above_threshold"):
        assert cats[name]["truth"] == {"false": cats[name]["count"]}
        for kernel in ("auto", "arb", "exact"):
            assert cats[name][f"exit_codes_{kernel}"] == {"1": cats[name]["count"]}, kernel
        assert set(cats[name]["exit_codes_float64"]) <= {"1", "3"}
    # malformed inputs are invalid input (exit 2), whatever the kernel
    for name in ("bitflip_no_rehash", "shape_absurd", "duplicate_json_keys", "eps_string_malformed", "signed_then_tampered"):
        for kernel in campaign.CHECKERS:
            assert cats[name][f"exit_codes_{kernel}"] == {"2": cats[name]["count"]}, (name, kernel)


def test_controls_are_accepted(sampled):
    """The checker is not just rejecting everything: true near-threshold claims verify."""
    cats = sampled["categories"]
    for name in ("control_upper_eps_above_error", "control_lower_eps_below_threshold"):
        for kernel in ("auto", "arb"):
            assert cats[name][f"exit_codes_{kernel}"].get("0", 0) == cats[name]["truth"].get("true", 0) > 0


def test_recorded_full_campaign():
    path = ROOT / "benchmarks" / "results" / "adversarial.json"
    if not path.exists():
        pytest.skip("full campaign results not recorded yet")
    full = json.loads(path.read_text())
    assert full["sample"] is None and full["adversarial_certificates"] >= 10_000
    assert full["accepted"] == 0 and full["kernel_decided_conflicts"] == 0
    assert set(full["checkers"]) == {"auto", "arb", "float64", "exact"}
