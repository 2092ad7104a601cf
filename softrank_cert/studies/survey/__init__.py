"""``softrank survey``: a model and a document to every head's certified bracket and its page.

* :mod:`.plan`: the named work levels, the CPU-time estimate, the survey folder's file names and
  its manifest (``survey.json``);
* :mod:`.stages`: the stages (``panel``, ``brackets``, ``kv-budgets``, ``report``) as a list, run in order;
* :mod:`.page`: the survey's sections of the report page (layer x head heatmaps, the per-layer
  table, sortable rows) and their PNG figures.

The folder's layout is documented in ``docs/survey.md``.
"""
