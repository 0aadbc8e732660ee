"""The database's absences, ridden out: which errors mean "away", how long to
wait between tries, and the one retry every write of the dispatcher goes
through.

Giving up is safe: rows stay delivering until their lease runs out, then
another claim resends them (at least once, never stuck).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, InternalError, OperationalError, connections

from relayproject.lib.clock import Clock

logger = logging.getLogger(__name__)

DB_BACKOFF_SECONDS = (0.5, 1, 2, 5)  # then 5 s between tries while the database is away
# InternalError: the server ended this session (idle_in_transaction_session_
# timeout after a freeze, SQLSTATE 25P03); reconnecting is all it takes.
DB_ERRORS = (OperationalError, InterfaceError, InternalError)

T = TypeVar("T")


def backoff(failures: int) -> float:
    """Seconds to wait after this many failures in a row."""
    return DB_BACKOFF_SECONDS[min(failures, len(DB_BACKOFF_SECONDS) - 1)]


def reconnect() -> None:
    """Drop every connection: the next statement opens a fresh one."""
    connections.close_all()


def database_down(exc: Exception, failures: int) -> float:
    """Say the database is away, drop the connections; seconds to wait."""
    delay = backoff(failures)
    first_line = (str(exc).strip().splitlines() or [""])[0]
    logger.warning(
        "database unavailable (%s: %s); retrying in %ss",
        type(exc).__name__,
        first_line,
        delay,
    )
    reconnect()
    return delay


def with_db_retry(
    write: Callable[[], T],
    *,
    clock: Clock,
    give_up_after: float,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """Run a write, riding out a database restart for `give_up_after` seconds
    (the lease: after it, the rows are another claim's); None if it gave up.

    A lock timeout (another dispatcher frozen on a row we need) is retried too.
    The deadline is on the injected clock; the pause between tries is a real
    one (`sleep`), since the database comes back in real time.
    """
    deadline = clock.monotonic() + give_up_after
    for attempt in itertools.count():
        try:
            return write()
        except DB_ERRORS as exc:
            if clock.monotonic() > deadline:
                logger.error("giving up recording (%s); the lease will resend", exc)
                return None
            delay = backoff(attempt)
            logger.warning(
                "database unavailable while recording (%s); retrying in %ss",
                type(exc).__name__,
                delay,
            )
            reconnect()
            sleep(delay)
    raise AssertionError("unreachable")  # itertools.count() never ends
