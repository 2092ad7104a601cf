"""Studies (UNTRUSTED study logic): statistics and questions asked of panels of operators.

Every certified number a study reports comes from the trusted kernel -- bracket ends are
kernel verdicts (VERIFIED) re-checked from certificates, geometry bounds come from
``softrank_cert.geometry.bounds`` -- while the choices, fits, bootstraps and plots here
are ordinary float64 code.  A bug in a study can mislabel or mis-summarise; it cannot make an
unproved bracket end count, because a study never builds a verdict.

The commands of the same names (``softrank_cert.cli``) parse arguments, check inputs and
outputs before any work, call a study and print or write what it returns; the study logic is
here.  Progress bars, atomic writes and certificate paths come from
:mod:`softrank_cert.plumbing`; nothing here imports the CLI.

* :mod:`softrank_cert.studies.audit` -- audits of published bracket tables: confirm, tighten or
  refute each row (``softrank audit``); its rows and judging in
  :mod:`~softrank_cert.studies.audit.rows`, supplied certificates in
  :mod:`~softrank_cert.studies.audit.certificates`, the resumable audit in
  :mod:`~softrank_cert.studies.audit.campaign`, its figure in :mod:`~softrank_cert.studies.audit.plot`.
* :mod:`softrank_cert.studies.budgets` -- which rank budgets are feasible / impossible per block
  width (``softrank budgets``); the study over panels as a resumable campaign in
  :mod:`~softrank_cert.studies.budgets.campaign`, its figure in :mod:`~softrank_cert.studies.budgets.plot`.
* :mod:`softrank_cert.studies.profile.curves` -- the certified lower and upper rank curves of one
  operator, every step a kernel verdict (``softrank profile``).
* :mod:`softrank_cert.studies.analyze` -- does interaction geometry predict certified rank?
  (``softrank analyze``); its statistics in :mod:`~softrank_cert.studies.analyze.stats`, the
  report and its tables in :mod:`~softrank_cert.studies.analyze.report`, its figure in
  :mod:`~softrank_cert.studies.analyze.plot`, the operator geometry in
  :mod:`softrank_cert.geometry.intrinsic`.
* :mod:`softrank_cert.studies.supports` -- the supports sweeps: certified ranks against kappa on
  grid / sphere / ball supports (``softrank supports``), with ``supports_points`` (one point:
  its operator, bracket and row spread), ``supports_exponents`` (certified
  local exponents), ``supports_campaign`` (certificates, manifest, resume), ``supports_plot``
  and ``supports_search`` (the adversarial search of ``lower / Phi_upper``).
"""
