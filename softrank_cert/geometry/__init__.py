"""Interaction geometry and the support point sets (front end; certified numbers come from
``softrank_cert.geometry.bounds``, built on the kernel's public enclosure API; no verdict
depends on them; the supports sweeps are a study, ``softrank_cert.studies.supports``).  See
docs/design.md section 1 and ``proofs/geometry-bounds.md``."""

from .report import GeometryReport, compute_geometry

__all__ = ["GeometryReport", "compute_geometry"]
