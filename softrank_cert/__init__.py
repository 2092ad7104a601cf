"""softrank-cert: certified approximation ranks of softmax attention.

Python API (see docs/api.md; names load on first use)::

    import softrank_cert as sc
    op = sc.load_operator("panel.npz", name="minilm/apache2/w32/L0H3")
    result = sc.bracket(op, ["0.1", "0.25"])      # kernel-verified ends per tolerance
    result.save("cert.json")                      # a certificate; sc.verify("cert.json") re-checks it
    prof = sc.profile(op)                         # both certified curves of r_eps(A)

* :class:`Operator` (constructors ``Operator.from_qk``, ``.from_scores``, ``.from_probabilities``),
  :func:`load_operator`, :func:`load_panel`;
* :func:`bracket` -> :class:`BracketResult`; :func:`profile` -> :class:`Profile`;
  :func:`verify` -> :class:`VerificationResult` (``VerifyReport``: its former name, still importable).

Layers (lowest first). A module may import a module of a lower layer, or a module of its own
package on its own layer -- nothing else of ``softrank_cert`` (``tests/plumbing/test_layering.py``
parses this list and checks every import, deferred ones included; there are no import cycles).
The trust boundary is the folder layout: layers 1-2 are the TRUSTED kernels, everything above
them is untrusted or only orchestrates (docs/design.md section 2).

0. ``errors``, ``meta``, ``blas_kernels`` -- the one exception tree with its exit codes; version and timestamps;
   one family of float64 kernels
1. ``kernel`` -- TRUSTED: exact input parsing, Arb enclosures, the checks, the one verdict
   constructor (``kernel.float64``: the float64 path with proved rounding bounds)
2. ``exact_kernel`` -- TRUSTED, independent: the same checks in exact rational arithmetic
3. ``util`` -- utilities every layer above may use: float64 attention arrays, atomic writes, outward
   rounding, memory sizes, tolerance lists, escaping, progress, operator files, figure formats
4. ``certio`` -- the certificate format: JSON Schema, arrays, eddsa-jcs-2022, issuing
5. ``verification`` -- certificate bytes -> kernel claims -> verdicts (decides nothing itself)
6. ``solvers``, ``geometry``, ``models`` -- float64 proposers of bracket ends; the theorem's
   quantities (certified ones from the kernel's enclosures); checkpoint loaders
7. ``plumbing`` -- campaigns, worker pools and Dask, the JSON contract, figures
8. ``studies`` -- one package a study: audit, budgets, profile, analyze, supports, report
9. ``api``, ``cli``, ``softrank_cert`` -- the front ends: the Python API, ``softrank`` and
   ``softrank-verify``, this top level
"""

from .blas_kernels import pin_kernels

pin_kernels()  # before anything imports numpy: the same float64 searches on every x86-64 machine with AVX2

from .meta import __version__  # noqa: E402 (after pin_kernels, above)

#: Public names and the module that defines each (imported on first use, so that
#: ``import softrank_cert`` imports no solver, study or scipy for the command-line tools).
_API = {
    "Operator": "kernel", "Status": "kernel", "Verdict": "kernel",
    "load_operator": "api", "load_panel": "api", "operator_id": "api", "bracket": "api", "verify": "api",
    "profile": "api", "operator_provenance": "api", "capture": "api", "load_gguf": "api",
    "BracketResult": "plumbing.bracketing", "VerificationResult": "api", "VerifyReport": "api",
    "Profile": "studies.profile.curves", "LowerStep": "studies.profile.curves", "UpperStep": "studies.profile.curves",
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
