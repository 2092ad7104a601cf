"""One family of float64 kernels on every x86-64 machine with AVX2, so that the searches are the same.

Two libraries pick their float64 kernels from the CPU they find. OpenBLAS (the BLAS of the numpy and
scipy wheels) runs AVX-512 matrix products (``SkylakeX``) on one machine and AVX2 ones (``Haswell``,
also chosen for AMD Zen) on another; numpy dispatches its own loops (``exp``, reductions, ...) to
AVX-512 (``X86_V4``) or AVX2 (``X86_V3``) code. The variants round differently in the last bits,
and the smoothed upper search (an L-BFGS descent) follows those bits to other local minima: on the
README's worked example each of the two choices moves most upper steps in the 4th-6th digit. The
certificates stay sound either way (the kernel verifies every end); only their tightness and the
reproducibility of the figures are at stake.

:func:`pin_kernels` therefore asks both for their AVX2 kernels wherever the CPU runs them (x86-64
with AVX2 and FMA): ``OPENBLAS_CORETYPE=Haswell`` and ``NPY_DISABLE_CPU_FEATURES`` = numpy's targets
above AVX2. A variable already set is left as it is (the user's choice wins; set it empty to let
numpy use everything), and nothing is set once numpy is imported (both libraries read the variables
once, when they load; setting them later would give child processes other kernels than this one):
then ``SOFTRANK_KERNELS_UNPINNED`` is set, so that the child processes pin nothing either.
``import softrank_cert`` calls it first, before anything imports numpy.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from importlib import metadata

#: The OpenBLAS kernel family asked for: the AVX2 kernels, which every x86-64 CPU with AVX2 and FMA runs.
CORETYPE = "Haswell"
#: numpy's dispatch targets above AVX2: the names of numpy >= 2.4, and of the releases before it.
NUMPY_ABOVE_AVX2 = "X86_V4 AVX512_ICL AVX512_SPR"
NUMPY_ABOVE_AVX2_BEFORE_2_4 = ("AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL "
                               "AVX512_SPR")
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


def avx2_x86() -> bool:
    """Whether this is an x86-64 machine whose CPU has AVX2 and FMA (runs the pinned kernels)."""
    return platform.machine().lower() in ("x86_64", "amd64") and _NEEDED_FLAGS <= cpu_flags()


def numpy_above_avx2() -> str:
    """numpy's dispatch targets above AVX2, by the names of the installed numpy."""
    try:
        major, minor = (int(part) for part in metadata.version("numpy").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return NUMPY_ABOVE_AVX2
    return NUMPY_ABOVE_AVX2 if (major, minor) >= (2, 4) else NUMPY_ABOVE_AVX2_BEFORE_2_4


#: Set (to ``numpy-first``) when ``softrank_cert`` was imported after numpy, so that the worker
#: processes of a campaign, which inherit the environment, keep this process's kernels too.
UNPINNED = "SOFTRANK_KERNELS_UNPINNED"


def pin_kernels(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """On an x86-64 CPU with AVX2 and FMA, before numpy is imported, set ``OPENBLAS_CORETYPE`` to
    :data:`CORETYPE` and ``NPY_DISABLE_CPU_FEATURES`` to numpy's targets above AVX2 in ``environ``,
    each only where it is unset. Returns what was set (empty when nothing was).

    When numpy is already imported (with the kernels the CPU chose), :data:`UNPINNED` is set
    instead, and a process that finds it set pins nothing: a worker process started from this
    one must run the same kernels as this one, or a campaign's ``--jobs 2`` would differ from its
    ``--jobs 1`` in the last bits."""
    if UNPINNED in environ or not avx2_x86():
        return {}
    if "numpy" in sys.modules:
        if not {"OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES"} <= set(environ):
            environ[UNPINNED] = "numpy-first"
        return {}
    chosen = kernel_variables(environ)
    environ.update(chosen)
    return chosen


def kernel_variables(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that pin this machine's kernels and are not set in ``environ`` (none off an
    x86-64 CPU with AVX2 and FMA): what a process started with ``environ`` plus these runs the
    pinned kernels (a Dask nanny starts its worker processes so, :mod:`softrank_cert.plumbing.dask_broker`)."""
    if not avx2_x86():
        return {}
    wanted = {"OPENBLAS_CORETYPE": CORETYPE, "NPY_DISABLE_CPU_FEATURES": numpy_above_avx2()}
    return {name: value for name, value in wanted.items() if name not in environ}


def kernels_pinned(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a process that started with ``environ`` and imported numpy then runs the kernels
    :func:`pin_kernels` chooses (or those the user chose): both variables are set, or there is
    nothing to pin on this machine."""
    return not kernel_variables(environ)


#: Whether :func:`warn_if_unpinned` has warned in this process.
_WARNED = False


def warn_if_unpinned(environ: Mapping[str, str] = os.environ) -> bool:
    """Warn once per process (a :class:`RuntimeWarning`) when numpy was imported before
    ``softrank_cert`` (:data:`UNPINNED` is ``numpy-first``, :func:`pin_kernels`): a search then
    runs the kernels this CPU chose, and its upper ends may differ in the last digits from the
    committed figures and another machine's (every end is still VERIFIED).  Returns whether it warned."""
    global _WARNED
    if _WARNED or environ.get(UNPINNED) != "numpy-first":
        return False
    import warnings

    _WARNED = True
    warnings.warn("numpy was imported before softrank_cert, so its AVX2 kernels are not pinned: the searches' "
                  "upper ends may differ in the last digits from another machine's (every end is still VERIFIED); "
                  "import softrank_cert first (or set OPENBLAS_CORETYPE=Haswell and NPY_DISABLE_CPU_FEATURES before "
                  "Python starts) for the same certificates everywhere (docs/solvers.md)", RuntimeWarning, stacklevel=3)
    return True
