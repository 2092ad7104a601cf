"""Supports sweeps (``softrank supports``): certified ranks against kappa on grid / sphere / ball supports.

What runs, in order:

1. :func:`.sweeps.sweep` picks the kappas (:func:`.sweeps.kappas_for_x_range`) and runs one
   point a kappa (:mod:`.points`: the point's operator, bracket and row spread), as a campaign
   with certificates, manifest and resume (:mod:`.campaign`);
2. :mod:`.sweeps` fits the growth exponents, :mod:`.exponents` certifies local exponents between
   points;
3. :mod:`.plot` draws the sweeps;
4. apart from the sweep, :mod:`.search` is the adversarial search of ``lower / Phi_upper``.
"""
