"""The dispatcher's database sessions: time limits that keep one frozen
dispatcher from holding the others up.

A dispatcher stopped mid-transaction (SIGSTOP, a debugger, a pause of any
kind) has its session ended by the server after
DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS, which releases its row and advisory
locks; a dispatcher waiting for someone's lock gives up after
DB_LOCK_TIMEOUT_SECONDS, and the flush or claim is retried like any other
database error (both surface as OperationalError).
"""

from __future__ import annotations

from django.conf import settings
from django.db import connections

from deliveries.dispatch import backend
from deliveries.dispatch.prepared import PREPARE_THRESHOLD


def session_options(*, idle_in_transaction: float, lock_timeout: float) -> str:
    """libpq `options` that set both limits on every session it opens."""
    return (
        f"-c idle_in_transaction_session_timeout={int(idle_in_transaction * 1000)} "
        f"-c lock_timeout={int(lock_timeout * 1000)}"
    )


def limit_dispatcher_sessions(alias: str = "default") -> None:
    """Make every later connection of this process (the ORM's and the LISTEN
    one, which copies its parameters) carry the limits. Call it once, at the
    start of a dispatcher process, before it connects.

    A dispatcher run inside a program that is already connected (call_command
    from a test or a shell) leaves that program's sessions as they are: the
    settings are shared by every connection it makes, and its open
    transaction is not ours to close.
    """
    connection = connections[alias]
    if not backend.limits_sessions(connection) or connection.connection is not None:
        return
    options = connection.settings_dict.setdefault("OPTIONS", {})
    limits = session_options(
        idle_in_transaction=settings.DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS,
        lock_timeout=settings.DB_LOCK_TIMEOUT_SECONDS,
    )
    options["options"] = f"{options.get('options', '')} {limits}".strip()
    if settings.DB_PREPARED_STATEMENTS:
        # Statements inside prepared.statements() are prepared once they repeat.
        options["prepare_threshold"] = PREPARE_THRESHOLD
