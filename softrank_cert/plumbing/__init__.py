"""Front-end plumbing (UNTRUSTED, decides nothing): what the CLI, the API and the studies share.

* :mod:`~softrank_cert.plumbing.operators_npz` -- operator and panel ``.npz`` files (sizes
  checked from the headers before anything is allocated), natural sort of operator names;
* :mod:`~softrank_cert.plumbing.parallel` -- worker pools (``--jobs``), Dask (``--scheduler``),
  one retry for a task whose worker died;
* :mod:`~softrank_cert.plumbing.campaign` -- campaign manifests and ``--resume``;
* :mod:`~softrank_cert.plumbing.memory` -- peak-memory estimates and ``--max-memory``;
* :mod:`~softrank_cert.plumbing.numfmt` -- outward-rounded decimal strings of exact rationals;
* :mod:`~softrank_cert.plumbing.reports` -- the one JSON contract (envelope, schemas, errors);
* :mod:`~softrank_cert.plumbing.plotting` -- figures in PNG / PDF / SVG by suffix.

Nothing here builds or changes a verdict: a bug can lose work or mislabel output, never make
an unproved claim pass (every end that is written was VERIFIED by :mod:`softrank_cert.kernel`).
"""
