"""The Dask client process of a campaign (UNTRUSTED, holds no key): tasks out, the workers' bytes back.

Started by :class:`~softrank_cert.plumbing.dask_client.Broker` in a process of its own, because
a Dask client unpickles what its cluster sends.  :func:`broker_main` connects, registers
:class:`PinKernels`, submits every task as :func:`dask_call` (which answers with the bytes of a
:func:`~softrank_cert.plumbing.wire.frame`), resubmits a task whose worker was lost (once; the
scheduler itself re-runs a task whose worker left, up to its
``distributed.scheduler.allowed-failures``), and writes one event a task to the signing process
with ``send_bytes``: a JSON header line, then the worker's frame as it came.  SIGTERM (the
signing process stopping early) ends it at once; the scheduler then releases the tasks of the
client that left.

Kernels.  A ``dask worker`` imports numpy before softrank_cert, so it cannot pin its float64
kernels itself (:mod:`softrank_cert.blas_kernels`).  :class:`PinKernels`, a nanny plugin, sets
the variables in each nanny's environment for the worker processes it starts and restarts them
once (only where something was missing).  A worker that still runs unpinned kernels (one started
with ``--no-nanny``) answers every task with the failure ``UnpinnedKernels`` rather than a
certificate that could differ from a local run's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from distributed.diagnostics.plugin import NannyPlugin

from ..blas_kernels import UNPINNED, kernel_variables, kernels_pinned
from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InvalidInputError, describe
from .wire import Failure, failure_kind, frame
from .worker_task import framed_call, worker_process

#: Seconds to wait for a Dask scheduler before giving up with a one-line error.
CONNECT_TIMEOUT = 10.0


class PinKernels(NannyPlugin):
    """Start a nanny's worker processes with this machine's pinned float64 kernels
    (:func:`~softrank_cert.blas_kernels.kernel_variables`); restart them once if that changed
    anything.  Registered once per cluster (``idempotent``); a nanny that joins later gets it too."""

    name = "softrank-pin-kernels"
    idempotent = True
    restart = False

    def setup(self, nanny: Any) -> None:
        # the nanny imported numpy (and so softrank_cert marked it unpinned): its workers need not be
        inherited = {k: v for k, v in {**os.environ, **nanny.pre_spawn_env}.items() if k != UNPINNED}
        chosen = kernel_variables(inherited)
        nanny.pre_spawn_env.update(chosen)
        self.restart = bool(chosen)


def dask_call(fn: Callable[..., Any], args: tuple, pinned: bool) -> bytes:
    """The task on a Dask worker, answered as a frame's bytes (the failure ``UnpinnedKernels``
    when the client runs pinned kernels and this worker does not)."""
    if pinned and not kernels_pinned():
        return frame(Failure("UnpinnedKernels", "this Dask worker runs float64 kernels of its own CPU, not the "
                             "pinned ones (a worker started with --no-nanny? start it with a nanny, or with "
                             "OPENBLAS_CORETYPE and NPY_DISABLE_CPU_FEATURES set as softrank_cert.blas_kernels says)",
                             EXIT_INVALID_INPUT), 0.0)
    return framed_call(fn, args)


def connect(address: str, timeout: float = CONNECT_TIMEOUT) -> Any:
    """A ``dask.distributed.Client`` on ``address`` (its TLS settings from Dask's configuration,
    docs/campaigns.md), or a one-line InvalidInputError (exit 2)."""
    from dask.distributed import Client

    if "://" not in address:
        raise InvalidInputError(f"--scheduler expects an address such as tls://HOST:8786, got {address!r}")
    quiet = [logging.getLogger(name) for name in ("distributed", "distributed.client", "distributed.comm.core")]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    try:
        return Client(address, timeout=timeout)
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InvalidInputError(f"cannot reach the Dask scheduler at {address}: {reason}") from None


def _memory_limit(client: Any) -> int | None:
    """The smallest ``memory_limit`` of the cluster's workers (None when none is set)."""
    try:
        limits = [int(w.get("memory_limit") or 0) for w in client.scheduler_info().get("workers", {}).values()]
    except (OSError, ValueError, TypeError, AttributeError):  # no answer, or a worker record without a number
        return None
    limits = [n for n in limits if n > 0]
    return min(limits) if limits else None


def _send(conn: Any, header: dict[str, Any], payload: bytes = b"") -> None:
    conn.send_bytes(json.dumps(header).encode("utf-8") + b"\n" + payload)


def broker_main(conn: Any, parent: int, address: str, fn: Callable[..., Any] | None, tasks: Sequence[tuple],
                memory: Sequence[int] | None, max_memory: int | None, attempts: int, retried: Sequence[str],
                pinned: bool) -> None:
    """The client process: connect, pin the workers' kernels (``pinned``: :class:`PinKernels`),
    run the tasks, report each (module docstring), then ``done``; a failure is reported as one
    ``error`` event (exit 2 for a cluster it cannot reach or use, else 4)."""
    # SIGTERM at its default: stopped, gone at once; the scheduler drops our tasks
    with worker_process(parent, default_sigterm=True):
        _serve(conn, address, fn, tasks, memory, max_memory, attempts, retried, pinned)


def _serve(conn: Any, address: str, fn: Callable[..., Any] | None, tasks: Sequence[tuple],
           memory: Sequence[int] | None, max_memory: int | None, attempts: int, retried: Sequence[str],
           pinned: bool) -> None:
    """:func:`broker_main`'s work once its process is set up."""
    try:
        client = connect(address)
    except InvalidInputError as exc:
        _send(conn, {"event": "error", "message": str(exc), "exit_code": EXIT_INVALID_INPUT})
        return
    try:
        if pinned:  # also when only checking the cluster: a worker that cannot take it fails the check
            _register(client, PinKernels())
        if tasks and fn is not None:
            _run(conn, client, fn, tasks, memory, max_memory, attempts, frozenset(retried), pinned)
        _send(conn, {"event": "done"})
    except InvalidInputError as exc:  # a cluster that cannot run the tasks: one line, exit 2
        _send(conn, {"event": "error", "message": str(exc), "exit_code": EXIT_INVALID_INPUT})
    except Exception as exc:  # the cluster failed under us, or a bug here: one line, exit 4
        _send(conn, {"event": "error", "message": describe(exc, " in the Dask client process"),
                     "exit_code": EXIT_INTERNAL})
    finally:
        client.close()


def _register(client: Any, plugin: Any) -> None:
    """Register ``plugin`` on the cluster, or a one-line InvalidInputError (a nanny that cannot
    load it: softrank-cert missing on a worker machine)."""
    try:
        client.register_plugin(plugin)
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InvalidInputError(f"the Dask workers cannot take softrank-cert's kernel settings (is the same "
                                f"softrank-cert installed on every worker?): {type(exc).__name__}: {reason}") from None


def _run(conn: Any, client: Any, fn: Callable[..., Any], tasks: Sequence[tuple], memory: Sequence[int] | None,
         max_memory: int | None, attempts: int, retried: frozenset[str], pinned: bool) -> None:
    from dask.distributed import as_completed

    if memory is not None and max_memory is None:
        max_memory = _memory_limit(client)
    tries = [0] * len(tasks)
    live: dict[str, tuple[int, Any]] = {}
    queue = as_completed()

    def submit(i: int) -> None:
        tries[i] += 1
        future = client.submit(dask_call, fn, tasks[i], pinned, pure=False)
        live[future.key] = (i, future)
        queue.add(future)

    try:
        for i in range(len(tasks)):
            if memory is not None and max_memory is not None and memory[i] > max_memory:
                _send(conn, {"event": "refused", "index": i, "need": int(memory[i]), "limit": int(max_memory)})
            else:
                submit(i)
        for future in queue:
            i, _ = live.pop(future.key)
            raw, killed = _answer(future)
            if killed:
                tries[i] = max(tries[i], attempts)  # the scheduler already re-ran it
            if failure_kind(raw) in retried and tries[i] < attempts:
                submit(i)
                continue
            _send(conn, {"event": "result", "index": i, "attempts": tries[i]}, raw)
    finally:
        client.cancel([future for _, future in live.values()])


def _answer(future: Any) -> tuple[bytes, bool]:
    """The frame a finished task's worker sent, or one that says how the task was lost; and
    whether the scheduler gave up on it (``KilledWorker``: it re-ran it already)."""
    try:
        raw = future.result()
    except Exception as exc:  # the task was lost with its worker(s), or the cluster failed
        reason = " ".join(str(exc).split())[:200]
        return frame(Failure("WorkerLost", f"lost on the Dask cluster: {type(exc).__name__}"
                             + (f": {reason}" if reason else ""), EXIT_INTERNAL), 0.0), \
            type(exc).__name__ == "KilledWorker"
    if not isinstance(raw, bytes):
        return frame(Failure("UnreadableResult", f"a Dask worker answered with a {type(raw).__name__}, not bytes",
                             EXIT_INTERNAL), 0.0), False
    return raw, False
