"""Studies (UNTRUSTED study logic): statistics and questions asked of panels of operators.

Every certified number a study reports comes from the trusted kernel -- bracket ends are
kernel verdicts (VERIFIED) re-checked from certificates, geometry bounds come from
``softrank_cert.geometry.bounds`` -- while the choices, fits, bootstraps and plots here
are ordinary float64 code.  A bug in a study can mislabel or mis-summarise; it cannot make an
unproved bracket end count, because a study never builds a verdict.

The commands of the same names (``softrank_cert.cli``) parse arguments, check inputs and
outputs before any work, call a study and print or write what it returns; the study logic is
here.  Progress bars, atomic writes and certificate paths come from :mod:`softrank_cert.util`
and :mod:`softrank_cert.plumbing`; nothing here imports the CLI.  One package a study, each
self-contained (the one helper two of them share is :mod:`~softrank_cert.studies.panel_names`):

* :mod:`softrank_cert.studies.audit` -- audits of published bracket tables (``softrank audit``);
* :mod:`softrank_cert.studies.budgets` -- which rank budgets are feasible / impossible per block
  width (``softrank budgets``);
* :mod:`softrank_cert.studies.profile` -- the certified lower and upper rank curves of one
  operator, every step a kernel verdict (``softrank profile``);
* :mod:`softrank_cert.studies.analyze` -- does interaction geometry predict certified rank?
  (``softrank analyze``; the operator geometry is :mod:`softrank_cert.geometry.intrinsic`);
* :mod:`softrank_cert.studies.supports` -- certified ranks against kappa on grid / sphere / ball
  supports (``softrank supports``);
* :mod:`softrank_cert.studies.report` -- a ``bracket`` campaign folder, or a plain folder of
  certificate files, as one static HTML page, every certificate re-verified (``softrank report``).
"""
