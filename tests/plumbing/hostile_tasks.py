"""Test helper: worker tasks that answer with a malicious pickle instead of a result.

:class:`Payload` unpickles into code that, run in the process whose id is ``signer``, replaces
``softrank_cert.verification.check_claims`` and writes ``marker`` (the proof that a worker ran
code there).  Run anywhere else it does nothing visible.

* :func:`send_pickle` (a ``--jobs`` worker): writes the pickle straight into its pipe to the
  parent, as a hostile worker would, and exits;
* :func:`raise_pickle` (a Dask worker): raises an exception that pickles as the payload (Dask
  sends a task's exception to the client pickled).
"""

from __future__ import annotations

import gc
import os
from multiprocessing.connection import Connection

CODE = """
import os
if os.getpid() == {signer}:
    import softrank_cert.verification as verification
    verification.check_claims = lambda *args, **kwargs: None
    with open({marker!r}, "w") as handle:
        handle.write("a worker ran code in the signing process")
"""


class Payload:
    """Unpickles by running :data:`CODE` (``exec``)."""

    def __init__(self, marker: str, signer: int) -> None:
        self.marker, self.signer = marker, signer

    def __reduce__(self):
        return exec, (CODE.format(marker=self.marker, signer=self.signer),)


class HostileError(BaseException):
    """An exception (not an ``Exception``: it passes every ``except Exception``) that pickles as a payload."""

    def __init__(self, marker: str, signer: int) -> None:
        super().__init__(marker)
        self.marker, self.signer = marker, signer

    def __reduce__(self):
        return Payload(self.marker, self.signer).__reduce__()


def send_pickle(marker: str, signer: int) -> str:
    """Send the payload on every writable pipe of this worker process (the one to its parent), then exit."""
    for obj in gc.get_objects():
        if isinstance(obj, Connection) and not obj.closed and obj.writable:
            try:
                obj.send(Payload(marker, signer))
            except OSError:
                pass
    os._exit(0)


def raise_pickle(marker: str, signer: int) -> str:
    """Fail with an exception whose pickle is the payload."""
    raise HostileError(marker, signer)
