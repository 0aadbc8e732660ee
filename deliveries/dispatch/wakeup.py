"""How an idle dispatcher learns of new work at once: LISTEN/NOTIFY on PostgreSQL.

Without a waker the dispatcher polls every POLL_INTERVAL_SECONDS. With one,
a thread of its own LISTENs on an autocommit connection (never the ORM's)
and calls wake() for each NOTIFY, which puts a message on the dispatcher's
outbox; if the connection breaks it reconnects after a pause, and the
dispatcher polls meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from django.db import connection

from deliveries.dispatch import backend
from deliveries.services import NOTIFY_CHANNEL

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0
LISTEN_SLICE_SECONDS = 0.25  # how often the listening thread checks for close()


class Waker(Protocol):
    """Calls `wake` (from a thread of its own) when there may be new work."""

    def start(self, wake: Callable[[], None]) -> None: ...

    def close(self) -> None: ...


class TimerWaker:
    """No wake-ups of its own: the dispatcher's poll interval does it."""

    def start(self, wake: Callable[[], None]) -> None:
        pass

    def close(self) -> None:
        pass


class PostgresWaker(TimerWaker):
    """Calls wake() on NOTIFY relay_deliveries, sent when deliveries are committed."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self.listening = threading.Event()  # set while subscribed
        self._thread: threading.Thread | None = None
        self._params: dict = {}

    def start(self, wake: Callable[[], None]) -> None:
        # Read here, on the dispatcher's thread: the listener shares no Django state.
        params = connection.get_connection_params()
        for name in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(name, None)
        self._params = params
        self._thread = threading.Thread(
            target=self._listen, args=(wake,), name="listen", daemon=True
        )
        self._thread.start()

    def _listen(self, wake: Callable[[], None]) -> None:
        import psycopg

        while not self._closed.is_set():
            try:
                with psycopg.connect(**self._params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening.set()
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=LISTEN_SLICE_SECONDS):
                            wake()
            except Exception as exc:  # noqa: BLE001 - the database may be restarting
                self.listening.clear()
                if self._closed.is_set():
                    return
                logger.warning(
                    "listen failed (%s); polling until it reconnects",
                    type(exc).__name__,
                )
                self._closed.wait(RECONNECT_SECONDS)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(LISTEN_SLICE_SECONDS + 1)


def make_waker() -> TimerWaker:
    return PostgresWaker() if backend.listens() else TimerWaker()
