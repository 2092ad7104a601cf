"""A worker's setup never changes the signal handling of the process that runs it.

A pool worker (and the Dask client process) ignores Ctrl-C so that it reaches the process that
signs; run in place -- as a test runs a worker's loop in pytest's own process -- that setup must
end with the handlers it found, or Ctrl-C would no longer stop pytest."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

from softrank_cert.plumbing import parallel
from softrank_cert.plumbing.wire import read_frame


def _handlers() -> tuple[object, object]:
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C as at a terminal (a suite started in the background inherits SIGINT ignored), and
    the handler this process had afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_pool_worker_run_in_place_leaves_sigint_alone():
    before = _handlers()
    here, there = multiprocessing.Pipe(duplex=True)
    here.send((abs, (-3,)))
    here.send(None)
    parallel._worker_main(there, os.getpid())  # in place: answers one task, then returns on None
    assert read_frame(here.recv_bytes())[0] == 3
    assert _handlers() == before and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_worker_setup_ignores_sigint_inside_and_restores_both_handlers():
    from softrank_cert.plumbing.worker_task import worker_process

    before = _handlers()
    with worker_process(os.getpid(), default_sigterm=True):
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert _handlers() == before


def test_a_real_worker_keeps_ignoring_sigint_after_its_loop(monkeypatch):
    """A worker process (its parent another process) does not restore Ctrl-C when its loop ends:
    a Ctrl-C while the pool shuts down prints no traceback in it."""
    from softrank_cert.plumbing import worker_task

    monkeypatch.setattr(worker_task, "watch_parent", lambda parent: None)
    with worker_task.worker_process(os.getpid() + 1):
        pass
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
