"""Upper-end proposers (UNTRUSTED): low-rank witnesses whose error proves ``r_eps(A) <= r``.

What runs, in order, inside a bracket (:mod:`softrank_cert.solvers.bracket`):

1. :func:`.smooth.tsvd_start` -- the least rank whose truncated SVD already meets each tolerance;
2. :mod:`.search` -- the resumable smallest-rank search, driving :mod:`.smooth` (the
   smoothed-minimax witness, joint in ``(U, W)``), whose stages :mod:`..lbfgs` minimises.

The kernel decides every end; a bug here costs tightness, never soundness.
"""
