"""Certified rank profiles of one operator (``softrank profile``): both step functions of eps.

What runs, in order (:func:`.curves.compute_profile`; the mathematics in :mod:`.curves`):

1. :func:`.steps.search_candidates` runs the solver search over the tolerance grid;
2. :func:`.steps.lower_steps` and :func:`.steps.upper_steps` keep the steps the kernel
   VERIFIED, :func:`.steps.check_profiles` checks the two curves against each other;
3. :class:`.curves.Profile` holds both curves (JSON, certificates);
4. :mod:`.plot` draws them against the tolerance.
"""
