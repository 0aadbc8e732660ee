"""The dispatcher's database sessions: time limits that keep one frozen
dispatcher from holding the others up.

A dispatcher stopped mid-transaction (SIGSTOP, a debugger, a pause of any
kind) has its session ended by the server after
DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS, which releases its row and advisory
locks; a dispatcher waiting for someone's lock gives up after
DB_LOCK_TIMEOUT_SECONDS, and the flush or claim is retried like any other
database error (both surface as OperationalError).

Their prepared statements also run on generic plans (generic_plans below):
planned once per session, not at every claim.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connections
from django.db.backends.signals import connection_created

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
        _GENERIC_PLAN_ALIASES.add(alias)
        connection_created.connect(_generic_plans_on_connect)


_GENERIC_PLAN_ALIASES: set[str] = set()


def _generic_plans_on_connect(sender, connection, **kwargs) -> None:
    if connection.alias in _GENERIC_PLAN_ALIASES:
        generic_plans(connection)


def generic_plans(connection) -> None:
    """Run this session's prepared statements on one generic plan each.

    Left to choose (plan_cache_mode = auto), PostgreSQL keeps planning the
    claim's lock-and-mark and its job rows anew at every execution: over a
    table partitioned by day, a custom plan prunes the partitions while
    planning, so its estimate always beats the generic plan's, which prunes
    them when it runs. Planning cost 1.6 and 1.1 ms of each claim's bind,
    against 0.5 and 0.2 ms to run them (bench/RESULTS.md); the generic plan
    prunes the same partitions at execution and is made once per session.

    Not on Citus: its planner routes a statement to its shard by the
    parameters' values, which a generic plan does not have.
    """
    if connection.vendor != "postgresql" or getattr(connection, "relay_citus", False):
        return
    # psycopg's own cursor: once per session, unseen by statement counts.
    with connection.connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
