"""The kernel's float64 path (TRUSTED): proved a-priori rounding bounds, ``proofs/float64-bounds.md``.

* ``fpenv.py``    -- the floating-point environment: the IEEE probe behind every check's entry
  gate (assumption A1), bit-pattern constants and subnormal masks (numpy only);
* ``bounds.py``   -- rigorous float64 bounds: one-ulp outward steps (Lemma F1), Higham's
  ``gamma_n`` for sums and BLAS products (F2, F4), a proved ``exp`` (F3);
* ``attempts.py`` -- softmax bounds (Theorem F5) and the upper, lower and norm attempts
  (F6, F7, F2) that ``kernel/checks.py`` hands to ``kernel/verdict.decide`` first.

Nothing here builds a verdict; nothing outside ``softrank_cert.kernel`` imports it.
"""
