"""Interaction geometry and support experiments (front end; certified numbers come from
``softrank_cert.kernel.geometry_bounds``).  See DESIGN.md section 1 and
``proofs/geometry-bounds.md``."""

from .report import GeometryReport, compute_geometry

__all__ = ["GeometryReport", "compute_geometry"]
