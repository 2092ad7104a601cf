"""softrank-cert: certified approximation ranks of softmax attention.

Layout (the trust boundary is the folder layout):

* ``softrank_cert.kernel``  -- TRUSTED. Exact input parsing, Arb enclosures, the verify
  functions and the verdict type. Imports python-flint, the standard library and numpy
  (array plumbing only).
* ``softrank_cert.certio``  -- certificate format (JSON Schema, arrays, eddsa-jcs-2022 proofs).
* ``softrank_cert.solvers`` -- UNTRUSTED float64 proposers of bracket ends.
* ``softrank_cert.models``  -- UNTRUSTED loaders of real checkpoints.
* ``softrank_cert.cli``     -- front ends (``softrank``, ``softrank-verify``).
"""

__version__ = "0.1.0"
