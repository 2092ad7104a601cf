"""The survey's plan (UNTRUSTED bookkeeping): work levels, the CPU-time estimate, file names, manifest.

**Work levels.**  ``--work quick`` runs each head's search with an eighth of the default work of
its shape, ``--work default`` (the default) with the driver's default work
(:func:`~softrank_cert.solvers.work.default_work`), and ``--work N`` with N units.  Work, not
time, bounds a search, so the same level gives the same certificates on a busy machine.

**Estimate.**  A search of ``w`` work units on an m x N operator takes about ``w /
units_per_second(m, N)`` CPU seconds on the calibration machine (one core,
:mod:`~softrank_cert.solvers.work`; the CPU time of the same work varies about 2x between heads).
The estimate is that, per head and in total; it is printed before any work and recorded in the
manifest.

**Manifest.**  ``OUT/survey.json`` (``"format": "softrank-survey"``) records the parameters, the
estimate and each stage's status and CPU and wall seconds.  It is bookkeeping: a resumed survey
re-captures the panel and re-verifies every certificate it keeps (the ``brackets`` stage is a
bracket campaign, :mod:`~softrank_cert.plumbing.bracket_campaign`); it only refuses a resume
whose parameters differ from the recorded ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InvalidInputError
from ...meta import __version__, utc_now_rfc3339
from ...util.files import canonical_dump, loads_unique, read_regular_file, write_text_atomic

FORMAT = "softrank-survey"
VERSION = 1
#: The survey folder's files (docs/survey.md).
MANIFEST_NAME = "survey.json"
PANEL_NAME = "panel.npz"
CERTS_NAME = "certs"
PAGE_NAME = "report.html"
FIGURES_NAME = "report-figures"
#: Named work levels: the fraction of the default work of each head's shape.
WORK_LEVELS = {"quick": 0.125, "default": 1.0}
#: The largest survey manifest read back (it is no manifest of ours beyond this).
MAX_MANIFEST_BYTES = 1 << 24


@dataclass(frozen=True)
class Work:
    """A ``--work`` choice: a named level (``quick``, ``default``) or a number of units per head."""

    level: str | None
    units: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Work:
        """``quick``, ``default`` (also None) or a positive finite number of work units; anything
        else is one line, exit 2."""
        if text is None or text in WORK_LEVELS:
            return cls(text or "default")
        try:
            units = float(text)
        except ValueError:
            units = math.nan
        if not (math.isfinite(units) and units > 0):
            levels = ", ".join(WORK_LEVELS)
            raise InvalidInputError(f"--work {text}: expected a level ({levels}) or a positive number of work units")
        return cls(None, units)

    @property
    def name(self) -> str:
        """What the report says drew the figures: ``quick``, ``default`` or ``N units``."""
        return self.level if self.level is not None else f"{self.units:g} units"

    def units_for(self, m: int, n: int) -> float:
        """The work units of one m x N head's search."""
        from ...solvers import default_work

        if self.units is not None:
            return self.units
        return float(round(WORK_LEVELS[str(self.level)] * default_work(m, n)))


def cpu_seconds(units: float, m: int, n: int) -> float:
    """The estimated CPU seconds of a search of ``units`` work on an m x N operator (module docstring)."""
    from ...solvers import units_per_second

    return units / units_per_second(m, n)


def estimate(work: Work, shapes: list[tuple[int, int]]) -> dict[str, Any]:
    """The estimate of a survey over heads of ``shapes`` (one per head): per shape its heads,
    work units and CPU seconds per head at ``work`` and at each named level, and the total CPU
    seconds at ``work``."""
    rows: list[dict[str, Any]] = []
    for m, n in sorted(set(shapes)):
        units = work.units_for(m, n)
        rows.append({"shape": [m, n], "heads": shapes.count((m, n)), "units_per_head": units,
                     "cpu_seconds_per_head": round(cpu_seconds(units, m, n), 2),
                     "levels": {level: round(cpu_seconds(Work(level).units_for(m, n), m, n), 2)
                                for level in WORK_LEVELS}})
    total = sum(row["heads"] * row["cpu_seconds_per_head"] for row in rows)
    return {"work": work.name, "shapes": rows, "heads": len(shapes), "cpu_seconds": round(total, 1)}


def check_estimate(found: dict[str, Any], max_cpu_seconds: float | None) -> None:
    """Refuse (one line, exit 2) an estimate ``found`` (:func:`estimate`) over ``max_cpu_seconds``."""
    if max_cpu_seconds is not None and found["cpu_seconds"] > max_cpu_seconds:
        from ...errors import InvalidInputError

        raise InvalidInputError(f"the estimate, {found['cpu_seconds'] / 60:.1f} CPU minutes, is over --max-cpu-minutes "
                                f"{max_cpu_seconds / 60:g}: choose fewer --layers/--heads, --work quick, or raise "
                                "--max-cpu-minutes")


def estimate_lines(prog: str, found: dict[str, Any]) -> list[str]:
    """The estimate in words, one line per shape and one for the total."""
    from ...util.progress import seconds_text

    lines = []
    for row in found["shapes"]:
        m, n = row["shape"]
        levels = ", ".join(f"{level} {seconds_text(s)} s" for level, s in row["levels"].items())
        lines.append(f"{prog}: estimate at {m}x{n}: {seconds_text(row['cpu_seconds_per_head'])} CPU s per head at "
                     f"--work {found['work']} ({row['units_per_head']:.0f} units; levels: {levels})")
    if found["heads"]:
        lines.append(f"{prog}: estimate: {found['heads']} heads, about {_minutes(found['cpu_seconds'])} of CPU time "
                     "in all (calibration machine, one core per head; divide by --jobs for the wall time)")
    return lines


def check_folder(text: str, *, resume: bool, force: bool) -> Path:
    """The survey folder ``--out TEXT``, checked before any work: a survey there needs ``resume``
    or ``force`` (not both), other files ``force`` (exit 2)."""
    import os

    from ...errors import InvalidInputError
    from ...util.files import check_output_folder

    out = check_output_folder(text, "--out")
    if resume and force:
        raise InvalidInputError("--resume and --force: choose one (continue the survey, or compute it all again)")
    if (out / MANIFEST_NAME).exists():
        if not (resume or force):
            raise InvalidInputError(f"--out {text}: holds a survey already; continue it with --resume, or compute "
                                    "it all again with --force")
    elif out.is_dir() and any(os.scandir(out)) and not force:
        raise InvalidInputError(f"--out {text}: the folder holds other files; name a new or empty folder, or give "
                                "--force")
    return out


def _minutes(seconds: float) -> str:
    from ...util.progress import seconds_text

    return f"{seconds_text(seconds)} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class SurveyManifest:
    """``OUT/survey.json``: parameters, the estimate and the stages' status and seconds."""

    def __init__(self, path: Path, parameters: dict[str, Any], stages: list[str],
                 previous: dict[str, Any] | None = None) -> None:
        self.path = path
        now = utc_now_rfc3339()
        self.data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "generator": {"name": "softrank-cert", "version": __version__},
            "created": (previous or {}).get("created", now), "updated": now, "state": "running",
            "parameters": parameters, "estimate": None,
            "stages": [{"name": name, "status": "pending", "cpu_seconds": None, "wall_seconds": None}
                       for name in stages]}

    @staticmethod
    def read(path: Path) -> dict[str, Any] | None:
        """The survey manifest at ``path``, or None when there is none or it is not one of ours."""
        if not path.is_file():
            return None
        try:
            document = loads_unique(read_regular_file(path, MAX_MANIFEST_BYTES, "survey manifest"))
        except (InvalidInputError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        return document if isinstance(document, dict) and document.get("format") == FORMAT else None

    def stage(self, name: str, **fields: Any) -> None:
        """Update stage ``name``'s entry and save."""
        for entry in self.data["stages"]:
            if entry["name"] == name:
                entry.update(fields)
        self.save()

    def save(self) -> None:
        """Write the manifest atomically."""
        self.data["updated"] = utc_now_rfc3339()
        write_text_atomic(self.path, canonical_dump(self.data))
