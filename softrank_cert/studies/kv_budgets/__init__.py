"""Certified KV-cache budgets (``softrank kv-budgets``; theorem and proof: ``proofs/kv-budgets.md``).

For every head of a bracket folder and every tolerance: the head's verified lower end as the
certified minimum number of cache slots for any common-set compression, and for named eviction
policies the smallest budget whose worst-case error the trusted kernel VERIFIES ``<= eps``.

* :mod:`.policies` -- StreamingLLM, H2O and a user's kept set as nested priority orders, and
  their float64 errors (the untrusted proposal);
* :mod:`.witnesses` -- a kept set, renormalised, as an upper witness ``U W^T``;
* :mod:`.certify` -- the smallest budget the kernel VERIFIES, minimal or an upper bound;
* :mod:`.heads` -- one head's bracket certificate, re-checked and sealed again by the kernel;
* :mod:`.study` -- every head of a folder, the certificates written, the report's records;
* :mod:`.summary` -- the per-layer summary;
* :mod:`.folder` -- a bracket folder (or a survey's) in, the report and figures out;
* :mod:`.plot` -- one figure per model; :mod:`.page` -- the report page's section.
"""
