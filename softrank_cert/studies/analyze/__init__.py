"""Does interaction geometry predict certified rank?  (``softrank analyze``.)

What runs, in order (the definitions are in :mod:`.study`'s docstring):

1. :func:`.study.analysis` re-checks every certificate with the kernel (only VERIFIED ends
   count) and computes, per operator, the certified geometry scores (in worker processes, with a
   cache of per-operator results);
2. :mod:`.stats` computes the concordances, bootstrap intervals and held-out comparisons;
3. :mod:`.report` builds the report and its tables (Markdown);
4. :mod:`.plot` draws the brackets against the scores.
"""
