"""Where certificates lie on disk (front end; decides nothing).

* :func:`certificate_path`: ``OUT/NAME.json`` for the operator ``NAME`` of a panel (its ``/`` as
  sub-folders; names that would escape ``OUT`` refused);
* :func:`expand_json_paths`: the certificate files named on a command line, folders replaced by
  the ``*.json`` files below them (campaign manifests left out).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from ..errors import InvalidInputError
from .campaign import MANIFEST_NAME
from .operators_npz import natural_key


def certificate_path(out: Path, name: str) -> Path:
    """``out/NAME.json`` with the panel name's '/' as sub-folders; refuses names that escape ``out``."""
    parts = PurePosixPath(name).parts
    if not parts or any(part in ("", ".", "..") or part.startswith("/") for part in parts):
        raise InvalidInputError(f"operator name {name!r} cannot be used as a file name")
    return out.joinpath(*parts[:-1], parts[-1] + ".json")


def expand_json_paths(paths: list[str]) -> list[str]:
    """Files as given; folders replaced by the ``*.json`` files below them (in natural order:
    ``L0H2`` before ``L0H10``), except a campaign's manifest (``softrank-campaign.json``,
    which is not a certificate)."""
    out: list[str] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            out.extend(sorted((str(p) for p in path.rglob("*.json") if p.name != MANIFEST_NAME), key=natural_key))
        else:
            out.append(item)
    return out
