"""Parallel campaigns (front end): one task per operator on a local process pool or a Dask cluster.

:func:`run_ordered` runs ``fn(*task)`` for every task and yields the results **in task order**,
whatever order they finish in, so that the files a campaign writes do not depend on the number
of workers.  Three back ends, one contract:

* ``jobs <= 1`` (default): in this process, one task after the other (the serial behaviour);
* ``jobs = N``: a :class:`concurrent.futures.ProcessPoolExecutor` with the ``spawn`` start
  method -- every worker is a fresh interpreter with its own python-flint state (Arb precision
  is process-global, so it must never be shared or inherited half-set);
* ``scheduler = "tcp://HOST:PORT"``: a Dask distributed cluster (``pip install
  'softrank-cert[dask]'`` here and on every worker).  Tasks carry their data as arrays
  (:func:`pack_operator`), never file paths, so workers need no shared file system.

In a worker, :func:`_call` sets the Arb working precision, runs one task at a time per process
(a lock: a Dask worker started with several threads must not interleave two kernels on the one
global precision) and turns any exception into a :class:`_Failure` value, which the client
raises as a one-line :class:`WorkerError` when the campaign reaches that task.

Soundness does not depend on this module: every end is VERIFIED by the kernel inside the task,
and ``softrank-verify`` re-checks the certificates anywhere.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InvalidInputError, SoftrankError
from .kernel import Operator

#: Arb precision (bits) each task starts from; the kernel raises it per check as it needs.
WORKER_PREC = 53
#: Seconds to wait for a Dask scheduler before giving up with a one-line error.
CONNECT_TIMEOUT = 10.0

_TASK_LOCK = threading.Lock()


class WorkerError(SoftrankError):
    """A task failed in a worker; the message is one line and the exit code is the task's."""

    def __init__(self, message: str, exit_code: int = EXIT_INTERNAL) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class _Failure:
    """An exception of a task, as a plain value (exceptions may not survive pickling)."""

    kind: str
    message: str
    exit_code: int


def pack_operator(op: Operator) -> dict[str, Any]:
    """The exact inputs of ``op`` as plain picklable data (kind, float64 arrays, beta, mask)."""
    return {"kind": op.kind, "arrays": {name: np.array(a) for name, a in op.arrays.items()},
            "beta": op.beta, "mask": op.mask}


def unpack_operator(spec: dict[str, Any]) -> Operator:
    """Rebuild the operator of :func:`pack_operator` (bit-identical arrays; the kernel re-checks them)."""
    return Operator(spec["kind"], spec["arrays"], beta=spec["beta"], mask=spec["mask"])


def resolve_jobs(jobs: int) -> int:
    """``--jobs`` value: N >= 1 as given, 0 = one worker per CPU; negative values are refused."""
    if jobs < 0:
        raise InvalidInputError(f"--jobs must be >= 0 (0 = one per CPU), got {jobs}")
    return jobs or (os.cpu_count() or 1)


def _init_worker() -> None:
    from flint import ctx

    ctx.prec = WORKER_PREC


def _call(fn: Callable[..., Any], args: tuple) -> Any:
    """Run ``fn(*args)`` in a worker: fresh Arb precision, one task per process at a time, errors as values."""
    with _TASK_LOCK:
        from flint import ctx

        ctx.prec = WORKER_PREC
        try:
            return fn(*args)
        except SoftrankError as exc:
            return _Failure(type(exc).__name__, str(exc), exc.exit_code)
        except MemoryError:
            return _Failure("MemoryError", "out of memory for this input", EXIT_INVALID_INPUT)
        except Exception as exc:  # a bug in a task: one line, exit 4
            return _Failure(type(exc).__name__, f"internal error in a worker: {type(exc).__name__}: "
                            + " ".join(str(exc).split())[:300], EXIT_INTERNAL)


def _unwrap(value: Any) -> Any:
    if isinstance(value, _Failure):
        raise WorkerError(value.message, value.exit_code)
    return value


def _in_order(futures: Sequence[Any], completed: Iterable[Any], done: Callable[[int], None] | None) -> Iterator[Any]:
    """Yield the futures' results in submission order while they complete in any order."""
    index = {id(f): i for i, f in enumerate(futures)}
    results: dict[int, Any] = {}
    following = 0
    for future in completed:
        i = index[id(future)]
        try:
            results[i] = future.result()
        except Exception as exc:  # the worker itself died (killed, out of memory, lost)
            results[i] = _Failure(type(exc).__name__, f"a worker failed: {type(exc).__name__}: "
                                  + " ".join(str(exc).split())[:300], EXIT_INTERNAL)
        if done is not None:
            done(i)
        while following in results:
            yield _unwrap(results.pop(following))
            following += 1


def run_ordered(fn: Callable[..., Any], tasks: Sequence[tuple], *, jobs: int = 1, scheduler: str | None = None,
                done: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Yield ``fn(*task)`` for every task, in task order (see the module docstring).

    ``fn`` must be a module-level function of an installed module (workers import it by name)
    and the tasks plain picklable data.  ``done(i)`` is called when task ``i`` finishes (in
    completion order: drive a progress bar with it).  A failed task raises :class:`WorkerError`
    (one line) when its turn comes; the remaining tasks are cancelled.
    """
    if scheduler:
        yield from _run_dask(fn, tasks, scheduler, done)
    elif jobs <= 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            result = fn(*task)
            if done is not None:
                done(i)
            yield result
    else:
        yield from _run_pool(fn, tasks, jobs, done)


def _run_pool(fn: Callable[..., Any], tasks: Sequence[tuple], jobs: int, done: Callable[[int], None] | None) -> Iterator[Any]:
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn"),
                                  initializer=_init_worker)
    futures = [pool.submit(_call, fn, task) for task in tasks]
    finished = False
    try:
        yield from _in_order(futures, cf.as_completed(futures), done)
        finished = True
    finally:
        if not finished:  # an error or an interrupt: stop the workers now, not after their tasks
            for future in futures:
                future.cancel()
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def connect(address: str, timeout: float = CONNECT_TIMEOUT) -> Any:
    """A ``dask.distributed.Client`` on ``address``, or a one-line InvalidInputError (exit 2)."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise InvalidInputError("--scheduler needs Dask: pip install 'softrank-cert[dask]' "
                                "(on this machine and on every worker)") from None
    if "://" not in address:
        raise InvalidInputError(f"--scheduler expects an address such as tcp://HOST:8786, got {address!r}")
    quiet = [logging.getLogger(name) for name in ("distributed", "distributed.client", "distributed.comm.core")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    try:
        return Client(address, timeout=timeout)
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InvalidInputError(f"cannot reach the Dask scheduler at {address}: {reason}") from None
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)


def _run_dask(fn: Callable[..., Any], tasks: Sequence[tuple], address: str,
              done: Callable[[int], None] | None) -> Iterator[Any]:
    from dask.distributed import as_completed

    client = connect(address)
    try:
        futures = [client.submit(_call, fn, task, pure=False) for task in tasks]
        try:
            yield from _in_order(futures, as_completed(futures), done)
        finally:
            client.cancel(futures)
    finally:
        client.close()
