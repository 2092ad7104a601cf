"""Audit of a published bracket table (``softrank audit``): confirm, tighten or refute each row.

What runs, in order:

1. :mod:`.rows` reads the table (JSON Lines, one row per operator and eps);
2. :func:`.table.audit_table` groups the rows by operator and, per operator, either re-checks a
   supplied certificate (:mod:`.certificates`, the kernel re-verifies its bytes) or reproduces
   the ends with one solver search (:mod:`.reproduction`); as a resumable campaign with
   ``--resume`` (:mod:`.campaign`: kept operators are re-checked by the kernel, never read back);
3. :mod:`.rows` judges every row against the kernel-verified ends and builds the report's rows;
4. :mod:`.plot` draws the figure.
"""
