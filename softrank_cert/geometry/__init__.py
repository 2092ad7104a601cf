"""Interaction geometry and the support point sets (front end; certified numbers come from
``softrank_cert.geometry.bounds``, built on the kernel's public enclosure API; no verdict
depends on them; the supports sweeps are a study, ``softrank_cert.studies.supports``).  See
docs/design.md section 1 and ``proofs/geometry-bounds.md``.

``GeometrySummary`` and ``compute_geometry`` load on first use: ``geometry.supports`` (the support
point sets and the sweep bounds the ``softrank supports`` parser shows) imports no scipy."""

from __future__ import annotations

from typing import Any

__all__ = ["GeometrySummary", "compute_geometry"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import summary

        value = getattr(summary, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
