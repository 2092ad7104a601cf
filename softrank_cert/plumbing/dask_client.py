"""The Dask client of a campaign, kept out of the process that signs (that process's side).

Dask's protocol unpickles what a peer sends (a ``__Pickled__`` frame is loaded whatever the
client's ``deserializers``), and a worker can make the scheduler forward anything: a Dask client
runs whatever code any worker of its cluster sends.  So the client does not run where the key
is.  :class:`Broker` starts it in a process of its own (:mod:`~softrank_cert.plumbing.dask_broker`,
started with ``spawn``; it holds no key and decides nothing) and reads what that process
reports with ``recv_bytes`` only: one message an event, a JSON header line read with
:func:`~softrank_cert.plumbing.wire.decode` and, for a task's answer, its worker's frame as it
came (:func:`~softrank_cert.plumbing.wire.frame`, read by the caller).  A message that is not
one of those ends the run with exit 4; it can start no code here.

What this does not protect: code that a hostile worker runs in the client process runs as the
same user, on the machine where the key file lies (docs/campaigns.md, "Who is trusted").
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..blas_kernels import kernels_pinned
from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InvalidInputError, SoftrankError, WireError, WorkerError
from .wire import MAX_MESSAGE, MAX_RESULT_BYTES, decode

#: Room for the event header in front of a worker's frame.
HEADER_BYTES = 1 << 16


@dataclass(frozen=True)
class Event:
    """A task's end as the client process reports it: its worker's frame (``payload``, after
    ``attempts`` submissions), or ``refused`` = ``(need, limit)`` bytes when it never started."""

    index: int
    attempts: int = 1
    payload: bytes = b""
    refused: tuple[int, int] | None = None


def _count(value: Any, low: int, high: int | None = None) -> int:
    if type(value) is not int or value < low or (high is not None and value > high):
        raise WireError(f"a number out of range: {str(value)[:40]}")
    return value


def _event(raw: bytes, count: int, attempts: int, seen: set[int]) -> Event | SoftrankError | None:
    """The event in ``raw``: an :class:`Event`, the error that ends the run, or None at the end."""
    head, _newline, payload = raw.partition(b"\n")
    header = decode(head)
    kind = header.get("event") if isinstance(header, dict) else None
    if kind == "done" and len(header) == 1:
        return None
    if kind == "error" and set(header) == {"event", "message", "exit_code"} and isinstance(header["message"], str):
        message = " ".join(header["message"].split())[:MAX_MESSAGE]
        return InvalidInputError(message) if header["exit_code"] == EXIT_INVALID_INPUT else \
            WorkerError(message, EXIT_INTERNAL)
    if kind not in ("result", "refused"):
        raise WireError("an unknown event")
    index = _count(header.get("index"), 0, count - 1)
    if index in seen:
        raise WireError(f"task {index} reported twice")
    seen.add(index)
    if kind == "refused" and set(header) == {"event", "index", "need", "limit"}:
        return Event(index, 0, refused=(_count(header["need"], 0), _count(header["limit"], 0)))
    if kind == "result" and set(header) == {"event", "index", "attempts"}:
        return Event(index, _count(header["attempts"], 1, attempts), payload)
    raise WireError(f"a {kind} event with other fields")


class Broker:
    """The tasks ``fn(*task)`` on the Dask cluster at ``address``, run from a client process of
    their own; :meth:`messages` yields one :class:`Event` per task as each ends.

    ``memory``/``max_memory``/``attempts`` as for :func:`~softrank_cert.plumbing.parallel.run_tasks`
    (``retried``: the failure kinds worth another attempt).  With ``fn`` None and no tasks, it
    only connects and pins the workers' kernels (:func:`~softrank_cert.plumbing.parallel.check_scheduler`)."""

    def __init__(self, address: str, fn: Callable[..., Any] | None, tasks: Sequence[tuple],
                 memory: Sequence[int] | None, max_memory: int | None, attempts: int,
                 retried: frozenset[str] = frozenset()) -> None:
        self.count, self.attempts = len(tasks), attempts
        # pinned: the workers must run this process's float64 kernels (they are pinned here)
        self.args = (address, fn, list(tasks), None if memory is None else [int(n) for n in memory], max_memory,
                     attempts, sorted(retried), kernels_pinned())

    def messages(self) -> Generator[Event, None, None]:
        """One :class:`Event` per task (refused or answered), in the order they end.  Raises
        InvalidInputError (exit 2) when the cluster cannot be reached, WorkerError (exit 4) when
        the client process fails or sends anything else."""
        context = multiprocessing.get_context("spawn")
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=_broker_entry, args=(writer, os.getpid(), *self.args), daemon=True,
                                  name="softrank-dask-client")
        process.start()
        writer.close()
        seen: set[int] = set()
        finished = False
        try:
            while True:
                try:
                    raw = reader.recv_bytes(MAX_RESULT_BYTES + HEADER_BYTES)
                except (EOFError, OSError):
                    raise WorkerError(f"the Dask client process ended before the campaign (exit code "
                                      f"{process.exitcode})", EXIT_INTERNAL) from None
                try:
                    event = _event(raw, self.count, self.attempts, seen)
                except WireError as exc:
                    raise WorkerError(f"the Dask client process sent a message that is not an event: {exc}",
                                      EXIT_INTERNAL) from None
                if event is None:
                    finished = True
                    return
                if isinstance(event, SoftrankError):
                    finished = True  # it said why: let it close its client and exit
                    raise event
                yield event
        finally:
            _stop(process, finished)
            reader.close()


def _stop(process: Any, finished: bool) -> None:
    """Let a client process that sent its last event exit (it closes its client); stop any other
    now (SIGTERM: the scheduler drops the tasks of a client that left), then kill it if it lingers."""
    if not finished:
        process.terminate()
    process.join(timeout=30 if finished else 10)
    if process.is_alive():
        process.kill()
        process.join(timeout=5)


def _broker_entry(conn: Any, parent: int, *args: Any) -> None:
    """The client process's start: :func:`~softrank_cert.plumbing.dask_broker.broker_main`, or
    one error event when Dask is not installed."""
    import json

    try:
        from .dask_broker import broker_main
    except ImportError:
        message = ("--scheduler needs Dask: pip install -e '.[dask]' in the softrank-cert checkout "
                   "(on this machine and on every worker)")
        conn.send_bytes(json.dumps({"event": "error", "message": message, "exit_code": EXIT_INVALID_INPUT}).encode())
        return
    broker_main(conn, parent, *args)
