"""The recorder's writes on a thread and database connection of their own, so
a flush that waits (a row lock, a slow commit, an outage being ridden out)
never holds up the next claim.

Why a thread and not psycopg's pipeline mode: the flush is a Django
transaction of several dependent statements (health rows locked, then the
update whose RETURNING decides the attempts, then the rest), and the claim is
another; pipelining them on one connection would interleave two transactions
on one session, which PostgreSQL does not have. A second connection gives
each its own transaction with the ordinary locking every pair of dispatchers
already lives with, and the code that writes stays as it was.

One batch at a time, in the order given: a flush's health rows see the
previous flush's failures, so a breaker still opens after exactly N. The
thread only writes; what a write means for the dispatcher (breakers held,
lanes told, rows no longer outstanding) is applied on the dispatcher's thread
when the Written message comes back through its outbox. Until then the rows
stay delivering in the database, so the claim's max_in_flight and merchant
caps count them, as they did while the flush ran on the dispatcher's thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection

from deliveries.dispatch import backend

logger = logging.getLogger(__name__)

_STOP = object()


@dataclass(frozen=True)
class Written:
    """A batch the writer has recorded (`recorded` None: it gave up; the lease
    resends those rows)."""

    batch: list
    recorded: Any


class Writer:
    """Runs writes one after another on its own thread, reporting each on `outbox`."""

    def __init__(self, *, outbox: queue.SimpleQueue, name: str = "record") -> None:
        self._outbox = outbox
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, batch: list, write: Callable[[], Any]) -> None:
        self._inbox.put((batch, write))

    def close(self, timeout: float | None = None) -> None:
        """Write what was submitted, then end the thread (and its connection)."""
        self._inbox.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while (item := self._inbox.get()) is not _STOP:
                batch, write = item
                try:
                    recorded = write()
                except Exception:  # noqa: BLE001 - a writer that dies strands every later flush
                    # The write rides out the database's absence itself and
                    # records bad outcomes one by one; anything left is a bug.
                    # Its rows stay delivering and the lease resends them.
                    logger.exception(
                        "recording a flush failed; the lease will resend it"
                    )
                    recorded = None
                self._outbox.put(Written(batch=batch, recorded=recorded))
        finally:
            connection.close()  # this thread's own: never left open on the server


def writes_apart() -> bool:
    """Whether this dispatcher records on a connection of its own.

    Not on SQLite (one writer at a time: a second connection would only wait
    for the first), and not for a dispatcher run inside its caller's open
    transaction (call_command from a test or a shell): the rows it claims are
    visible on that connection only.
    """
    return backend.records_apart() and not connection.in_atomic_block
