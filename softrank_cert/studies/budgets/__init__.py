"""The block-width budget study (``softrank budgets``): which rank budgets are feasible or impossible.

What runs, in order:

1. :func:`.campaign.study` loads the panels and runs, per operator (in worker processes, on a
   Dask cluster, or resumably as a campaign), :func:`.operators.study_operator`;
2. :mod:`.operators` brackets the operator, sharpens the unresolved budgets
   (:func:`.operators.sharpen`) and classifies every budget from kernel verdicts only;
3. :func:`.operators.summarize` groups the classes by document and block width (the name
   fields: :mod:`softrank_cert.studies.panel_names`);
4. :mod:`.plot` draws the figure of the report.
"""
