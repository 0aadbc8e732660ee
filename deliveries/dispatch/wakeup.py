"""How an idle dispatcher waits: LISTEN/NOTIFY on PostgreSQL, a timer elsewhere."""

from __future__ import annotations

import logging
import threading

from django.db import connection

from deliveries.services import NOTIFY_CHANNEL

logger = logging.getLogger(__name__)


class TimerWaker:
    """Sleeps up to the timeout; stop() or notify() ends the sleep at once."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def wait(self, timeout: float) -> None:
        self._event.wait(timeout)
        self._event.clear()

    def notify(self) -> None:
        self._event.set()

    def close(self) -> None:
        self._event.set()


class PostgresWaker(TimerWaker):
    """Also wakes on NOTIFY relay_deliveries, sent when deliveries are committed.

    It keeps its own autocommit connection; if that connection breaks the
    waker falls back to the timer and reconnects on the next wait.
    """

    def __init__(self) -> None:
        super().__init__()
        self._conn = None

    def _listen(self):
        import psycopg

        if self._conn is None or self._conn.closed:
            params = connection.get_connection_params()
            params.pop("cursor_factory", None)
            params.pop("context", None)
            params.pop("prepare_threshold", None)
            self._conn = psycopg.connect(**params, autocommit=True)
            self._conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return self._conn

    def wait(self, timeout: float) -> None:
        if self._event.is_set():
            self._event.clear()
            return
        try:
            conn = self._listen()
            # Drain every pending notification: one wake-up is enough.
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                break
        except Exception as exc:  # noqa: BLE001 - the database may be restarting
            logger.warning("listen failed (%s); polling instead", type(exc).__name__)
            self._drop()
            super().wait(timeout)

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
        self._conn = None

    def close(self) -> None:
        super().close()
        self._drop()


def make_waker() -> TimerWaker:
    return PostgresWaker() if connection.vendor == "postgresql" else TimerWaker()
