"""One list of commands: the command list of ``softrank`` (``cli/commands.py``) is the one the
parser and the generated option page follow, and the JSON contract's (``plumbing/json_contract.py``,
read off the report schema files) holds exactly those commands and ``softrank-verify``."""

from __future__ import annotations

from pathlib import Path

from softrank_cert.cli.commands import COMMANDS
from softrank_cert.cli.main import build_parser
from softrank_cert.plumbing import json_contract

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_and_softrank_verify_have_a_report_format_and_nothing_else_does():
    assert sorted(json_contract.COMMANDS) == sorted([*COMMANDS, "verify"])
    for command in json_contract.COMMANDS:
        assert json_contract.report_schema(json_contract.report_format(command))


def test_the_parser_builds_each_listed_command_with_its_own_module():
    sub = next(action for action in build_parser()._actions if action.dest == "command")
    assert list(sub.choices) == list(COMMANDS)
    for name, parser in sub.choices.items():
        assert parser.prog == f"softrank {name}" and parser.get_default("run") is not None


def test_the_generated_option_page_has_every_command():
    page = (ROOT / "docs" / "cli-help.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"## `softrank {name}`" in page
