"""Command-line front ends: ``softrank`` and ``softrank-verify`` (docs/design.md section 4)."""
