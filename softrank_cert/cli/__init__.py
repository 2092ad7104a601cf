"""Command-line front ends: ``softrank`` and ``softrank-verify`` (DESIGN.md section 4)."""
