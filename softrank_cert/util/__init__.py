"""Utilities (UNTRUSTED, decide nothing) that every layer above the trusted kernels may use.

Nothing here imports anything of ``softrank_cert`` but the exception tree, the version and the
kernels (``tests/plumbing/test_layering.py``):

* :mod:`~softrank_cert.util.dense` -- float64 attention arrays, norms, witness errors, thresholds;
* :mod:`~softrank_cert.util.files` -- output files: pre-flight checks, atomic and durable writes,
  the stable JSON text of every file written (``canonical_dump``);
* :mod:`~softrank_cert.util.numbers` -- outward-rounded decimal strings of exact rationals;
* :mod:`~softrank_cert.util.memory` -- peak-memory estimates and ``--max-memory``;
* :mod:`~softrank_cert.util.tolerances` -- tolerance lists (``--eps``);
* :mod:`~softrank_cert.util.escaping` -- untrusted text made safe for rich and for plain lines;
* :mod:`~softrank_cert.util.progress` -- progress bars and per-operator progress lines on stderr;
* :mod:`~softrank_cert.util.operator_files` -- operator and panel ``.npz`` files (sizes checked
  from the headers before anything is allocated), natural sort of operator names;
* :mod:`~softrank_cert.util.figure_formats` -- figure formats by suffix (PNG / PDF / SVG).
"""
