"""One JSON contract for every ``--json`` output and every JSON document a command writes (front end; decides nothing).

Every document has the same envelope::

    {"format": "softrank-<command>-report", "version": 1, "command": "<command>",
     "generator": {"name": "softrank-cert", "version": "...", "created": "<RFC 3339>"}, ...}

and a failed run with ``--json`` prints ``{"format": "softrank-error", ..., "error": {"message":
..., "exit_code": N}}`` on stdout (the one-line message stays on stderr).  The same things have
the same key names everywhere: ``verdict`` (VERIFIED / REJECTED / INCONCLUSIVE), ``checked_by``
(trivial / float64 / arb / rational), ``precision_bits``, ``margin`` and ``value`` (certified
enclosures ``{"lower": ..., "upper": ...}``), ``lower`` / ``upper`` (verified bracket ends),
``lower_method`` / ``upper_construction``, ``seconds``.

Certified bounds are decimal strings with :data:`CERTIFIED_DIGITS` significant digits rounded
outward from the exact rationals (a lower end down, an upper end up: never overstated); float64
estimates are JSON numbers and live in objects named ``estimates``.  The JSON Schemas are in
``certificates/schema/`` (installed as ``softrank_cert.schema``): :func:`validate_report`
checks a document against the schema its ``format`` names.
"""

from __future__ import annotations

import functools
import json
import math
from fractions import Fraction
from importlib import resources
from typing import Any

from ..meta import generator
from ..util.numbers import CERTIFIED_DIGITS, bound_down, bound_up

#: Version of the report formats (the ``version`` of every envelope).
REPORT_VERSION = 1
#: Format name of the error document printed with ``--json`` when a run fails.
ERROR_FORMAT = "softrank-error"
_SCHEMA_PREFIX, _SCHEMA_SUFFIX = "softrank-", f"-report-v{REPORT_VERSION}.schema.json"
#: Commands with a report schema: read off the schema files (``softrank-<command>-report-v1.schema.json``),
#: so that a command's schema file is the one place that gives it a report format
#: (``tests/cli/test_command_registry.py`` ties them to the command list, ``cli/commands.py``).
COMMANDS = tuple(sorted(entry.name[len(_SCHEMA_PREFIX):-len(_SCHEMA_SUFFIX)]
                        for entry in resources.files("softrank_cert.schema").iterdir()
                        if entry.name.startswith(_SCHEMA_PREFIX) and entry.name.endswith(_SCHEMA_SUFFIX)))


def report_format(command: str) -> str:
    return f"softrank-{command}-report"


def enclosure(pair: tuple[Fraction, Fraction] | None) -> dict[str, str] | None:
    """An exact enclosure ``[lo, hi]`` as ``{"lower": down(lo), "upper": up(hi)}`` (or None)."""
    if pair is None:
        return None
    lo, hi = pair
    return {"lower": bound_down(lo), "upper": bound_up(hi)}


def verdict_fields(verdict: Any) -> dict[str, Any]:
    """The fields every report gives a kernel verdict: ``verdict``, ``checked_by``,
    ``precision_bits``, ``margin`` and ``value`` (certified enclosures or None)."""
    return {"verdict": verdict.status.value, "checked_by": verdict.engine, "precision_bits": verdict.precision,
            "margin": enclosure(verdict.margin), "value": enclosure(verdict.value)}


def envelope(command: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` under the common envelope (its own ``format`` / ``version`` / ``generator`` win
    over nothing: the envelope's keys come first and are not overwritten by ``body``)."""
    head = {"format": report_format(command), "version": REPORT_VERSION, "command": command,
            "generator": generator()}
    return {**head, **{key: value for key, value in body.items() if key not in head}}


def error_document(command: str, message: str, exit_code: int) -> dict[str, Any]:
    """What ``--json`` prints on stdout when the run fails."""
    return {"format": ERROR_FORMAT, "version": REPORT_VERSION, "command": command, "generator": generator(),
            "error": {"message": message, "exit_code": int(exit_code)}}


def finite(document: Any) -> Any:
    """``document`` with every non-finite float (NaN, infinities: not JSON) replaced by None."""
    if isinstance(document, float):
        return document if math.isfinite(document) else None
    if isinstance(document, dict):
        return {key: finite(value) for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [finite(value) for value in document]
    return document


def dumps(document: Any) -> str:
    """The text a command prints for ``--json``: indented ASCII JSON (non-finite floats as null)."""
    return json.dumps(finite(document), indent=1, allow_nan=False)


# ----------------------------------------------------------------------------- schemas

def schema_name(fmt: str) -> str:
    return f"{fmt}-v{REPORT_VERSION}.schema.json"


@functools.cache
def _registry() -> Any:
    from referencing import Registry, Resource

    folder = resources.files("softrank_cert.schema")
    resources_ = []
    for entry in folder.iterdir():
        if entry.name.endswith(".schema.json") and entry.name.startswith("softrank-"):
            document = json.loads(entry.read_text("utf-8"))
            resources_.append((document["$id"], Resource.from_contents(document)))
    return Registry().with_resources(resources_)


@functools.cache
def report_schema(fmt: str) -> dict[str, Any]:
    """The JSON Schema of report format ``fmt`` (e.g. ``"softrank-verify-report"``)."""
    text = resources.files("softrank_cert.schema").joinpath(schema_name(fmt)).read_text("utf-8")
    return json.loads(text)


def validate_report(document: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` matches the schema of its ``format``."""
    import jsonschema

    if not isinstance(document, dict) or not isinstance(document.get("format"), str):
        raise jsonschema.ValidationError("a report is a JSON object with a string 'format'")
    validator = jsonschema.Draft202012Validator(report_schema(document["format"]), registry=_registry(),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        raise error


__all__ = ["CERTIFIED_DIGITS", "COMMANDS", "ERROR_FORMAT", "REPORT_VERSION", "bound_down", "bound_up", "dumps",
           "enclosure", "envelope", "error_document", "finite", "report_format", "report_schema",
           "validate_report", "verdict_fields"]
