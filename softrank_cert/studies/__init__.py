"""Studies (UNTRUSTED study logic): statistics and questions asked of panels of operators.

Every certified number a study reports comes from the trusted kernel -- bracket ends are
kernel verdicts (VERIFIED) re-checked from certificates, geometry bounds come from
``softrank_cert.kernel.geometry_bounds`` -- while the choices, fits, bootstraps and plots here
are ordinary float64 code.  A bug in a study can mislabel or mis-summarise; it cannot make an
unproved bracket end count, because a study never builds a verdict.

* :mod:`softrank_cert.studies.analyze` -- does interaction geometry predict certified rank?
  (``softrank analyze``).
"""
