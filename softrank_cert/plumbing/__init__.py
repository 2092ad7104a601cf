"""Front-end plumbing (UNTRUSTED, decides nothing): what the CLI, the API and the studies share.

Layering is one-directional: the front ends (``softrank_cert.cli``, ``softrank_cert.api``) import
the studies and this package, never the reverse -- nothing outside ``softrank_cert.cli`` imports
the CLI (``tests/plumbing/test_layering.py`` checks it).

* :mod:`~softrank_cert.util.operator_files` -- operator and panel ``.npz`` files (sizes
  checked from the headers before anything is allocated), natural sort of operator names;
* :mod:`~softrank_cert.plumbing.parallel` -- worker pools (``--jobs``), Dask (``--scheduler``),
  one retry for a task whose worker died;
* :mod:`~softrank_cert.plumbing.campaign` -- campaign manifests and ``--resume``;
* :mod:`~softrank_cert.util.memory` -- peak-memory estimates and ``--max-memory``;
* :mod:`~softrank_cert.util.numbers` -- outward-rounded decimal strings of exact rationals;
* :mod:`~softrank_cert.plumbing.reports` -- the one JSON contract (envelope, schemas, errors);
* :mod:`~softrank_cert.util.files` -- output files: pre-flight checks (``check_output_file``,
  ``check_output_folder``), atomic and durable writes (``OutputFiles``, ``write_text_atomic``,
  ``write_json_atomic``), the stable JSON text of every file written (``canonical_dump``);
* :mod:`~softrank_cert.plumbing.plotting` -- figures in PNG / PDF / SVG by suffix, saved
  atomically (``save_figure_atomic``);
* :mod:`~softrank_cert.util.progress` -- progress bars and per-operator progress lines on
  stderr (``progress_bar``, ``OperatorProgress``);
* :mod:`~softrank_cert.util.escaping` -- untrusted text made safe for rich and for
  plain lines (``safe_text``, ``plain_text``);
* :mod:`~softrank_cert.plumbing.certificate_files` -- where certificates lie: ``OUT/NAME.json``
  (``certificate_path``) and the certificate files under folders (``expand_json_paths``).

Nothing here builds or changes a verdict: a bug can lose work or mislabel output, never make
an unproved claim pass (every end that is written was VERIFIED by :mod:`softrank_cert.kernel`).
"""
