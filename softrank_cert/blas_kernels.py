"""One OpenBLAS kernel family on every x86-64 machine, so that the float64 searches are the same.

OpenBLAS (the BLAS of the numpy and scipy wheels) picks its matrix-product kernels from the CPU it
finds: AVX-512 kernels (``SkylakeX``) on one machine, AVX2 ones (``Haswell``, also chosen for AMD
Zen) on another. The kernels sum in different orders, so a product can differ in its last bits,
and the smoothed upper search (an L-BFGS descent) follows those bits to a different local minimum:
on the README's worked example the two families give different upper steps in the 4th-6th digit.
The certificates stay sound either way (the kernel verifies every end); only their tightness and
the reproducibility of the figures are at stake.

:func:`pin_openblas_kernels` therefore asks OpenBLAS for its ``Haswell`` kernels wherever the CPU
can run them (x86-64 with AVX2 and FMA), unless ``OPENBLAS_CORETYPE`` is already set (the user's
choice wins) or numpy is already imported (OpenBLAS reads the variable once, when it loads; setting
it later would give child processes a different kernel than this one). ``import softrank_cert``
calls it first, before anything imports numpy.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import MutableMapping

#: The OpenBLAS kernel family asked for: the AVX2 kernels, which every x86-64 CPU with AVX2 and FMA runs.
CORETYPE = "Haswell"
_NEEDED_FLAGS = frozenset({"avx2", "fma"})


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU feature flags of the first processor listed in ``cpuinfo`` (empty if unreadable)."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def pin_openblas_kernels(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Set ``OPENBLAS_CORETYPE`` to :data:`CORETYPE` in ``environ`` when all of these hold: it is
    unset, numpy is not imported yet, the machine is x86-64 and its CPU has AVX2 and FMA.
    Returns the value set, or None when nothing was changed."""
    if "OPENBLAS_CORETYPE" in environ or "numpy" in sys.modules:
        return None
    if platform.machine().lower() not in ("x86_64", "amd64") or not _NEEDED_FLAGS <= cpu_flags():
        return None
    environ["OPENBLAS_CORETYPE"] = CORETYPE
    return CORETYPE
