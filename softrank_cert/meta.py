"""What every layer may know about the software itself: its name, version and the clock.

The bottom layer (with :mod:`softrank_cert.errors`): certificates, manifests and reports stamp
their ``generator`` from here, so no lower layer imports the package top level.
"""

from __future__ import annotations

from datetime import datetime, UTC

#: The distribution's name, as written in every ``generator`` record.
NAME = "softrank-cert"
__version__ = "0.1.0"


def utc_now_rfc3339() -> str:
    """The current UTC time as RFC 3339 with seconds precision, e.g. ``2026-11-30T22:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def generator(created: str | None = None) -> dict[str, str]:
    """The ``generator`` record of a document made now (or at ``created``)."""
    return {"name": NAME, "version": __version__, "created": created or utc_now_rfc3339()}
