"""Parallel campaigns (front end): one task per operator on a local process pool or a Dask cluster.

:func:`run_tasks` runs ``fn(*task)`` for every task and yields one :class:`TaskOutcome` per task
as each finishes; :func:`run_ordered` yields the plain results **in task order**, so that the
files a campaign writes do not depend on the number of workers.  Three back ends, one contract:

* ``jobs <= 1`` (default): in this process, one task after the other (the serial behaviour);
* ``jobs = N``: N worker processes started with the ``spawn`` method -- every worker is a fresh
  interpreter with its own python-flint state (Arb precision is process-global, so it must
  never be shared or inherited half-set);
* ``scheduler = "tls://HOST:PORT"``: a Dask distributed cluster (``pip install -e '.[dask]'``
  here and on every worker).  Tasks carry their data as arrays (:func:`pack_operator`), never
  file paths, so workers need no shared file system.

Faults.  A task that raises an error fails at once with its one-line reason (the same inputs
and the same code give the same error again).  A *worker* that dies under a task (killed, out
of memory, a crash in native code) costs that task one retry: the local pool starts a fresh
worker and runs the task again, alone (in case memory was the cause); a ``MemoryError`` raised
in a worker is retried the same way.  On Dask the scheduler itself re-runs a task whose worker
left the cluster (up to its ``distributed.scheduler.allowed-failures``, default 3; set it to 1
for exactly one retry), and any other loss of a task costs one resubmission.  A task that fails
:data:`MAX_ATTEMPTS` times is reported failed (:attr:`TaskOutcome.failure`), and the other
tasks go on.  Only a broken invariant of the checker (``InternalInvariantError``, an unsafe
floating-point environment) stops everything, loudly.

Bytes, never pickles, back.  What a task sends back from another process is one byte string
(:mod:`~softrank_cert.plumbing.wire`: JSON, read with :func:`json.loads`): a local worker writes it
with ``Connection.send_bytes`` and this process reads it with ``recv_bytes``; the Dask client
(whose protocol unpickles what peers send) runs in a process of its own without the key
(:mod:`~softrank_cert.plumbing.dask_client`), which passes the workers' byte strings on the same
way.  Nothing a worker sends is unpickled in the process that signs.  (What goes *to* a worker
is pickled by this process, which trusts itself.)  ``returns``: the dataclasses a task's result
may hold, the only classes rebuilt from a worker's answer.

Memory.  Given ``memory`` (each task's estimated peak bytes) and ``max_memory``, a larger task is
refused before it starts (:attr:`TaskOutcome.refused`); the local pool starts a task only while
the estimates of the tasks running together fit in ``max_memory`` (else they are serialised),
beside the ``reserve`` that the calling process keeps for itself (the kernel's re-check of a
finished task's certificates, which runs while the others go on).

In a worker, :func:`~softrank_cert.plumbing.worker_task.framed_call` runs the task (Arb precision,
one at a time, errors as :class:`~softrank_cert.plumbing.wire.Failure` values) and answers with
its frame (in this process, with ``SOFTRANK_DEBUG=1``, an unexpected exception is re-raised with
its traceback instead).  Workers ignore SIGINT (the client stops them) and exit when the client
process is gone.

Soundness does not depend on this module: every end is VERIFIED by the kernel in the task and
again where it is written (:func:`~.campaign.recheck_from_worker`), and by ``softrank-verify`` anywhere.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from contextlib import closing
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Generator, Iterator, Sequence

import numpy as np

from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InternalInvariantError, InvalidInputError, SoftrankError, \
    WireError, WorkerError, debugging
from ..kernel import Operator
from ..util.memory import format_bytes
from .wire import MAX_RESULT_BYTES, Failure, read_frame
from .worker_task import failure, framed_call, init_precision, worker_process

#: Attempts of one task whose worker died (or raised MemoryError) before it is reported failed.
MAX_ATTEMPTS = 2
#: Failures that stop a whole campaign: the checker caught itself inconsistent (exit 4).
FATAL_KINDS = frozenset({"InternalInvariantError", "FloatingPointEnvironmentError"})
#: Failures worth another attempt (the task itself did not fail: its worker did, or memory ran out).
RETRIED_KINDS = frozenset({"WorkerDied", "WorkerLost", "MemoryError"})


def pack_operator(op: Operator) -> dict[str, Any]:
    """The exact inputs of ``op`` as plain picklable data (kind, float64 arrays, beta, mask)."""
    return {"kind": op.kind, "arrays": {name: np.array(a) for name, a in op.arrays.items()},
            "beta": op.beta, "mask": op.mask}


def unpack_operator(spec: dict[str, Any]) -> Operator:
    """Rebuild the operator of :func:`pack_operator` (bit-identical arrays; the kernel re-checks them)."""
    return Operator(spec["kind"], spec["arrays"], beta=spec["beta"], mask=spec["mask"])


def in_process(jobs: int, scheduler: str | None, count: int) -> bool:
    """Whether :func:`run_tasks` runs ``count`` tasks in this process (no scheduler, and one job
    or at most one task): then the tasks' arguments never leave it and need not be packed."""
    return not scheduler and (jobs <= 1 or count <= 1)


def resolve_jobs(jobs: int) -> int:
    """``--jobs`` value: N >= 1 as given, 0 = one worker per CPU; negative values are refused."""
    if jobs < 0:
        raise InvalidInputError(f"--jobs must be >= 0 (0 = one per CPU), got {jobs}")
    return jobs or (os.cpu_count() or 1)


def read_answer(raw: bytes, returns: Sequence[type]) -> tuple[Any, float]:
    """``(result or Failure, seconds)`` of a worker's frame; one that cannot be read is the task's
    failure (it is not retried: the same worker code would send the same)."""
    try:
        return read_frame(raw, returns)
    except WireError as exc:
        return Failure("UnreadableResult", f"a worker's answer is not a result this task returns: {exc}",
                       EXIT_INTERNAL), 0.0


@dataclass
class TaskOutcome:
    """What became of one task: its ``value``, or the one-line ``failure`` after ``attempts`` tries.

    ``refused``: never started, because its memory estimate exceeds ``max_memory``.
    ``seconds``: wall seconds of the last attempt (0 for a refused task).
    """

    index: int
    value: Any = None
    failure: str | None = None
    exit_code: int = 0
    kind: str = ""
    attempts: int = 1
    seconds: float = 0.0
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.failure is None

    def unwrap(self) -> Any:
        """The value, or :class:`WorkerError` with the failure's line and exit code."""
        if self.failure is not None:
            raise WorkerError(self.failure, self.exit_code)
        return self.value


def _outcome(index: int, result: Any, seconds: float, attempts: int) -> TaskOutcome:
    if isinstance(result, Failure):
        if result.kind in FATAL_KINDS:
            raise WorkerError(result.message, result.exit_code)
        return TaskOutcome(index, None, result.message, result.exit_code, result.kind, attempts, seconds)
    return TaskOutcome(index, result, attempts=attempts, seconds=seconds)


def _retry(result: Any, attempts: int, limit: int) -> bool:
    return isinstance(result, Failure) and result.kind in RETRIED_KINDS and attempts < limit


def _refusal(index: int, need: int, limit: int) -> TaskOutcome:
    return TaskOutcome(index, None, f"needs about {format_bytes(need)} of memory, more than the limit of "
                       f"{format_bytes(limit)} (--max-memory): not started", EXIT_INVALID_INPUT, "MemoryLimit",
                       attempts=0, refused=True)


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple], *, jobs: int = 1, scheduler: str | None = None,
              done: Callable[[int], None] | None = None, memory: Sequence[int] | None = None,
              max_memory: int | None = None, attempts: int = MAX_ATTEMPTS,
              returns: Sequence[type] = (), reserve: int = 0) -> Generator[TaskOutcome, None, None]:
    """Yield one :class:`TaskOutcome` per task, in completion order (see the module docstring).

    ``fn`` must be a module-level function of an installed module (workers import it by name)
    and the tasks plain picklable data; in another process ``fn`` must return plain data
    (:mod:`~softrank_cert.plumbing.wire`) whose dataclasses are among ``returns``.  ``done(i)`` is called when task ``i`` is finished (also
    when it failed or was refused).  ``memory[i]``: estimated peak bytes of task ``i``;
    ``max_memory``: what the tasks running at one time may use together (None: no limit);
    ``reserve``: what this process uses beside worker processes (their certificates' re-check), so
    that the local pool starts a task beside others only while their estimates and it fit together.
    Raises :class:`WorkerError` at once for a fatal failure (a checker bug, exit 4).
    """
    if memory is not None and len(memory) != len(tasks):
        raise ValueError("memory needs one estimate per task")
    if in_process(jobs, scheduler, len(tasks)):
        runner = _run_serial(fn, tasks, memory, max_memory, attempts)
    elif scheduler:
        runner = _run_dask(fn, tasks, scheduler, memory, max_memory, attempts, returns)
    else:
        runner = _run_pool(fn, tasks, jobs, memory, max_memory, attempts, returns, reserve)
    try:
        for outcome in runner:
            if done is not None:
                done(outcome.index)
            yield outcome
    finally:
        runner.close()


def run_ordered(fn: Callable[..., Any], tasks: Sequence[tuple], *, jobs: int = 1, scheduler: str | None = None,
                done: Callable[[int], None] | None = None, memory: Sequence[int] | None = None,
                max_memory: int | None = None, returns: Sequence[type] = ()) -> Iterator[Any]:
    """Yield ``fn(*task)`` for every task, in task order (see the module docstring; ``returns`` as
    for :func:`run_tasks`).

    ``done(i)`` is called when task ``i`` finishes (in completion order: drive a progress bar
    with it).  A failed task (after its retries, see :func:`run_tasks`) raises
    :class:`WorkerError` (one line) when its turn comes; the remaining tasks are cancelled.
    """
    outcomes: dict[int, TaskOutcome] = {}
    following = 0
    with closing(run_tasks(fn, tasks, jobs=jobs, scheduler=scheduler, done=done, memory=memory,
                            max_memory=max_memory, returns=returns)) as results:
        for outcome in results:
            outcomes[outcome.index] = outcome
            while following in outcomes:
                yield outcomes.pop(following).unwrap()
                following += 1


def _run_serial(fn: Callable[..., Any], tasks: Sequence[tuple], memory: Sequence[int] | None,
                max_memory: int | None, attempts: int) -> Generator[TaskOutcome, None, None]:
    """In this process, in order.  Errors become failures exactly as in a worker (but a fatal one,
    and an interrupt, propagate)."""
    for i, task in enumerate(tasks):
        if memory is not None and max_memory is not None and memory[i] > max_memory:
            yield _refusal(i, memory[i], max_memory)
            continue
        tries = 0
        while True:
            tries += 1
            start = time.perf_counter()
            try:
                result: Any = fn(*task)
            except SoftrankError as exc:
                if type(exc).__name__ in FATAL_KINDS:
                    raise
                result = failure(exc)
            except MemoryError as exc:
                result = failure(exc)
            except Exception as exc:  # a bug in a task: one line, exit 4 (SOFTRANK_DEBUG=1: its traceback)
                if debugging():
                    raise
                result = failure(exc)
            if not _retry(result, tries, attempts):
                break
        yield _outcome(i, result, time.perf_counter() - start, tries)


# --------------------------------------------------------------------------- the local pool

def _worker_main(conn: Any, parent: int) -> None:
    """A pool worker: receive ``(fn, args)`` (pickled by the parent), send the frame's bytes
    (``send_bytes``: the parent reads bytes, never a pickle); None ends."""
    with worker_process(parent):
        init_precision()
        _serve(conn)


def _serve(conn: Any) -> None:
    """Answer ``(fn, args)`` messages on ``conn`` until None or a closed pipe."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, args = message
        try:
            conn.send_bytes(framed_call(fn, args))
        except (BrokenPipeError, EOFError, OSError):
            return


class _Worker:
    """One worker process and the pipe to it."""

    def __init__(self, context: Any) -> None:
        here, there = context.Pipe(duplex=True)
        self.process = context.Process(target=_worker_main, args=(there, os.getpid()), daemon=True,
                                       name="softrank-worker")
        self.process.start()
        there.close()
        self.conn = here
        self.task: int | None = None
        self.started = 0.0

    def death(self) -> str:
        """Why the process ended, in words."""
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is None:
            return "its worker process stopped answering"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            hint = " (killed: out of memory?)" if -code == signal.SIGKILL else ""
            return f"its worker process died of {name}{hint}"
        return f"its worker process exited with code {code}"

    def stop(self, now: bool) -> None:
        if not now and self.process.is_alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, EOFError, OSError):
                pass
        if now and self.process.is_alive():
            self.process.terminate()
        self.process.join(timeout=5 if now else 30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


def _run_pool(fn: Callable[..., Any], tasks: Sequence[tuple], jobs: int, memory: Sequence[int] | None,
              max_memory: int | None, attempts: int, returns: Sequence[type],
              reserve: int = 0) -> Generator[TaskOutcome, None, None]:
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("spawn")
    size = min(jobs, len(tasks))
    pending = deque(range(len(tasks)))
    tries = [0] * len(tasks)
    alone: set[int] = set()  # retried after a worker death: run with no other task beside it
    idle: list[_Worker] = []
    busy: list[_Worker] = []
    clean = False

    def need(i: int) -> int:
        return 0 if memory is None else int(memory[i])

    def running(worker: _Worker) -> int:
        if worker.task is None:  # a busy worker is always running a task
            raise InternalInvariantError("a busy worker process has no task")
        return worker.task

    try:
        while pending or busy:
            while pending:  # start what fits
                i = pending[0]
                if memory is not None and max_memory is not None and need(i) > max_memory:
                    pending.popleft()
                    yield _refusal(i, need(i), max_memory)
                    continue
                if busy and (i in alone or any(w.task in alone for w in busy)):
                    break
                if busy and max_memory is not None and sum(need(running(w)) for w in busy) + need(i) + reserve > max_memory:
                    break  # serialised: wait for memory to come free
                if not idle and len(busy) >= size:
                    break
                worker = idle.pop() if idle else _Worker(context)
                try:
                    worker.conn.send((fn, tasks[i]))
                except (BrokenPipeError, EOFError, OSError):  # it died while idle: replace it, same attempt
                    worker.stop(now=True)
                    continue
                pending.popleft()
                tries[i] += 1
                worker.task, worker.started = i, time.perf_counter()
                busy.append(worker)
            if not busy:
                continue
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=1.0))
            for worker in [w for w in busy if w.conn in ready or w.process.sentinel in ready]:
                i = running(worker)
                message = None
                try:
                    if worker.conn.poll():
                        message = worker.conn.recv_bytes(MAX_RESULT_BYTES)
                except (EOFError, OSError):  # gone, or an answer longer than MAX_RESULT_BYTES
                    message = None
                busy.remove(worker)
                worker.task = None
                if message is not None:
                    result, seconds = read_answer(message, returns)
                    idle.append(worker)
                else:
                    result = Failure("WorkerDied", f"{worker.death()} while running this task", EXIT_INTERNAL)
                    seconds = time.perf_counter() - worker.started
                    worker.stop(now=True)
                if _retry(result, tries[i], attempts):
                    pending.appendleft(i)
                    alone.add(i)
                    continue
                yield _outcome(i, result, seconds, tries[i])
        clean = True
    finally:  # after an error or an interrupt: stop the workers now, not after their tasks
        for worker in busy + idle:
            worker.stop(now=not clean)


def check_scheduler(address: str | None) -> None:
    """Fail now, with one line (exit 2), when the Dask scheduler cannot be reached -- before a
    campaign writes anything.  (Tried from a client process of its own, as the tasks are.)"""
    if address:
        from .dask_client import Broker

        with closing(Broker(address, None, [], None, None, 1).messages()) as messages:
            for _ in messages:
                pass


def _run_dask(fn: Callable[..., Any], tasks: Sequence[tuple], address: str, memory: Sequence[int] | None,
              max_memory: int | None, attempts: int, returns: Sequence[type]) -> Generator[TaskOutcome, None, None]:
    """The tasks on the Dask cluster at ``address``, through a client process without the key
    (:class:`~softrank_cert.plumbing.dask_client.Broker`): its messages are bytes, read here
    with json only; each task's answer is its worker's frame."""
    from .dask_client import Broker

    broker = Broker(address, fn, tasks, memory, max_memory, attempts, RETRIED_KINDS)
    with closing(broker.messages()) as messages:
        for event in messages:
            if event.refused is not None:
                yield _refusal(event.index, *event.refused)
                continue
            result, seconds = read_answer(event.payload, returns)
            yield _outcome(event.index, result, seconds, event.attempts)
