"""One task in a worker process (a ``--jobs`` worker or a Dask worker), answered in bytes.

:func:`call` sets the Arb working precision, runs one task at a time per process (a lock: a Dask
worker started with several threads must not interleave two kernels on the one global
precision) and turns any exception into a :class:`~softrank_cert.plumbing.wire.Failure` value;
:func:`framed_call` times it and answers with a :func:`~softrank_cert.plumbing.wire.frame`, the
only thing a worker sends back to the process that signs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, SoftrankError, describe
from .wire import Failure, frame

#: Arb precision (bits) each task starts from; the kernel raises it per check as it needs.
WORKER_PREC = 53

_TASK_LOCK = threading.Lock()


def failure(exc: BaseException, where: str = "") -> Failure:
    """``exc`` as a value: its kind, its one line (:func:`~softrank_cert.errors.describe`) and exit code
    (a SoftrankError's own; 2 for MemoryError; 4 for anything else, a bug)."""
    code = exc.exit_code if isinstance(exc, SoftrankError) else EXIT_INVALID_INPUT if isinstance(exc, MemoryError) \
        else EXIT_INTERNAL
    return Failure(type(exc).__name__, describe(exc, where), code)


def init_precision() -> None:
    """Set this process's Arb working precision to :data:`WORKER_PREC`."""
    from flint import ctx

    ctx.prec = WORKER_PREC


def call(fn: Callable[..., Any], args: tuple) -> Any:
    """Run ``fn(*args)`` in a worker: fresh Arb precision, one task per process at a time, errors as values."""
    with _TASK_LOCK:
        init_precision()
        try:
            return fn(*args)
        except Exception as exc:  # a SoftrankError, MemoryError or a bug in a task: one line
            return failure(exc, " in a worker")


def framed_call(fn: Callable[..., Any], args: tuple) -> bytes:
    """:func:`call`, timed (wall seconds in the worker), as the bytes of a frame."""
    start = time.perf_counter()
    result = call(fn, args)
    return frame(result, time.perf_counter() - start)


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def watch_parent(parent: int) -> None:
    """Exit this process when the process ``parent`` that started it is gone (e.g. killed with
    SIGKILL): a thread that looks twice a second.  Nothing to watch when ``parent`` is this
    process itself (the worker's loop run in place, as a test does)."""
    if parent != os.getpid():
        threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


@contextmanager
def worker_process(parent: int, *, default_sigterm: bool = False) -> Generator[None, None, None]:
    """The one setup of a process that serves the process ``parent`` (a pool worker, the Dask
    client process): Ctrl-C (SIGINT) ignored -- it reaches ``parent``, which stops us -- and,
    with ``default_sigterm``, SIGTERM ends it at once; ``parent`` watched (:func:`watch_parent`).
    When the loop runs in place (``parent`` is this process, as a test runs it) the signal
    handlers it found are restored when the block ends, so that it never changes the signal
    handling of the process that ran it; a real worker keeps ignoring Ctrl-C to its end (a
    Ctrl-C while its pool shuts down prints no traceback there)."""
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    if default_sigterm:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        watch_parent(parent)
        yield
    finally:
        if parent == os.getpid():
            for signum, handler in previous.items():
                signal.signal(signum, handler)
