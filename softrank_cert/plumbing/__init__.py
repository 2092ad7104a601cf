"""Front-end plumbing (UNTRUSTED, decides nothing): campaigns, worker pools, the JSON contract and figures.

Layering is one-directional: the front ends (``softrank_cert.cli``, ``softrank_cert.api``) import
the studies and this package, never the reverse -- nothing outside ``softrank_cert.cli`` imports
the CLI (``tests/plumbing/test_layering.py`` checks it).  The utilities these build on (files,
numbers, memory, progress, operator files) are in :mod:`softrank_cert.util`.

* :mod:`~softrank_cert.plumbing.bracketing` -- the bracket task on an ``Operator`` (packed only
  when it leaves the process) and :class:`~softrank_cert.plumbing.bracketing.BracketResult`;
* :mod:`~softrank_cert.plumbing.parallel` -- worker pools (``--jobs``), Dask (``--scheduler``),
  one retry for a task whose worker died; :mod:`~softrank_cert.plumbing.worker_task` (one task in
  a worker), :mod:`~softrank_cert.plumbing.wire` (its answer as bytes, read with json only) and
  the Dask client in a process without the key (:mod:`~softrank_cert.plumbing.dask_client`,
  :mod:`~softrank_cert.plumbing.dask_broker`);
* :mod:`~softrank_cert.plumbing.campaign` -- campaign manifests and ``--resume`` (the manifest's
  schema: ``certificates/schema/softrank-campaign-v1.schema.json``), with
  :mod:`~softrank_cert.plumbing.campaign_inputs` (the inputs a resume must match);
* :mod:`~softrank_cert.plumbing.json_contract` -- the one JSON contract (envelope, schemas, errors);
* :mod:`~softrank_cert.plumbing.plotting` -- figures in PNG / PDF / SVG by suffix, saved
  atomically (``save_figure_atomic``);
* :mod:`~softrank_cert.plumbing.certificate_files` -- where certificates lie: ``OUT/NAME.json``
  (``certificate_path``) and the certificate files under folders (``expand_json_paths``).

Nothing here builds or changes a verdict: a bug can lose work or mislabel output, never make
an unproved claim pass (every end that is written was VERIFIED by :mod:`softrank_cert.kernel`).
"""
