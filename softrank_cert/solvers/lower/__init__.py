"""Lower-end proposers (UNTRUSTED): lower pairs ``(X, Y)`` whose threshold proves ``r_eps(A) >= k``.

What runs, in order, inside a bracket (:mod:`softrank_cert.solvers.bracket`):

1. :mod:`.pivot` -- complete-pivoting submatrices (the pivot stage, a gallop over k, run by
   :class:`softrank_cert.solvers.one_shot.OneShot`);
2. :mod:`.search` -- the resumable lower-pair search over all tolerances, whose families
   (:mod:`.families`) propose units of work (:mod:`.units`) in the order of
   :data:`.families.PRIORITY`, sharing :class:`.base.LowerBase`: signed key groups from the
   starts of :mod:`.starts`, the float64 LP (HiGHS) for ``X`` of :mod:`.lp`, single-key moves of
   :mod:`.moves`, general key sides from query selections of :mod:`.general` (an LP up to
   ``general_max_k``) and of :mod:`.smooth_key` (a smoothed Y-step beyond it);
3. :mod:`.pooled` -- query pooling, run by the budget study's sharpening
   (:class:`softrank_cert.solvers.one_shot.OneShot`).

The kernel decides every end; a bug here costs tightness, never soundness.
"""
