"""softrank-cert: certified approximation ranks of softmax attention.

Python API (see README "Python API"; names load on first use)::

    import softrank_cert as sc
    op = sc.load_operator("panel.npz", name="minilm/apache2/w32/L0H3")
    result = sc.bracket(op, ["0.1", "0.25"])      # kernel-verified ends per tolerance
    result.save("cert.json")                      # a certificate; sc.verify("cert.json") re-checks it
    prof = sc.profile(op)                         # both certified curves of r_eps(A)

* :class:`Operator` (constructors ``Operator.from_qk``, ``.from_scores``, ``.from_probabilities``),
  :func:`load_operator`, :func:`load_panel`;
* :func:`bracket` -> :class:`BracketResult`; :func:`profile` -> :class:`Profile`;
  :func:`verify` -> :class:`VerifyReport`.

Layout (the trust boundary is the folder layout):

* ``softrank_cert.kernel``  -- TRUSTED. Exact input parsing, Arb enclosures, the checks and
  the one verdict constructor; ``kernel.float64`` is its float64 path with proved rounding
  bounds. Imports python-flint, the standard library and numpy (array plumbing only).
* ``softrank_cert.exact_kernel`` -- TRUSTED, independent: the same checks in exact rational
  arithmetic (``softrank-verify --kernel exact``).
* ``softrank_cert.verification`` -- certificate bytes -> kernel claims -> verdicts (the one
  verification path; decides nothing itself).
* ``softrank_cert.certio``  -- certificate format (JSON Schema, arrays, eddsa-jcs-2022 proofs,
  ``certio.signing.sign_certificate``) and issuing (``certio.issuing``: ``certificate_for``,
  ``BracketResult``).
* ``softrank_cert.solvers`` -- UNTRUSTED float64 proposers of bracket ends.
* ``softrank_cert.models``  -- UNTRUSTED loaders of real checkpoints.
* ``softrank_cert.geometry`` -- interaction geometry; its certified bounds
  (``geometry.bounds``) are built on the kernel's public enclosures.
* ``softrank_cert.studies`` -- UNTRUSTED studies: audit, budgets, rank profile, analyze.
* ``softrank_cert.plumbing`` -- UNTRUSTED front-end plumbing: operator files, worker pools,
  campaigns, memory, number formats, the JSON contract, figures, output files and atomic
  writes, progress, escaping of untrusted text, certificate paths, tolerance lists.
* ``softrank_cert.api``, ``softrank_cert.errors`` -- the Python API and the one exception
  hierarchy; ``softrank_cert.cli`` -- ``softrank`` and ``softrank-verify``, callers of the API:
  argument parsing, the options several commands share, tables.  Imports go one way: the front
  ends (the CLI, the API and this top level) import everything else and nothing else imports
  a front end (``tests/plumbing/test_layering.py``).
"""

__version__ = "0.1.0"

#: Public names and the module that defines each (imported on first use, so that
#: ``import softrank_cert`` stays as cheap as before for the command-line tools).
_API = {
    "Operator": "kernel", "Status": "kernel", "Verdict": "kernel",
    "load_operator": "api", "load_panel": "api", "operator_id": "api", "bracket": "api", "verify": "api",
    "profile": "api", "operator_provenance": "api", "capture": "api", "BracketResult": "certio.issuing", "VerifyReport": "api",
    "Profile": "studies.rank_profile", "LowerStep": "studies.rank_profile", "UpperStep": "studies.rank_profile",
    "SoftrankError": "errors", "InvalidInputError": "errors",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
