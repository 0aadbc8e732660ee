"""A web request starts on a database session that is still there, without
a round trip to ask.

Django's CONN_HEALTH_CHECKS would send `SELECT 1` before the first query of
every request: a round trip per request, 13 % of a publish's time in a
gunicorn worker and half of /healthz's statements (issue 21). Settings turns
it off; this check takes its place in web processes (wsgi.py connects it).

A session the server has ended (a restart, pg_terminate_backend, a proxy
that dropped it) has said so already: PostgreSQL sends its FATAL message and
closes the connection, so the socket is readable at once. An idle healthy
session has nothing to read: the web process LISTENs for nothing, and
PostgreSQL sends an idle session nothing unasked but the rare parameter
change or notice. So a zero-timeout poll() of each open session's socket, a
system call, decides at the start of each request: readable, or known broken
to psycopg, and the session is closed; the request's first query then
connects afresh. A false alarm costs one reconnect, never a failed request.

What this cannot see, Django's check did not save either: a session that
dies during a request fails that request (Django then closes it, so the next
one reconnects), and a server host that vanished without closing its
connections looks alive to both until TCP gives up.
"""

from __future__ import annotations

import select

from django.db import connections


def close_ended_sessions(**_signal) -> None:
    """request_started receiver: close the open PostgreSQL sessions that the
    server has ended."""
    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        # Inside an atomic block (a test's transaction) the session is not
        # ours to close; the request runs in it as it is.
        if raw is None or conn.vendor != "postgresql" or conn.in_atomic_block:
            continue
        if raw.closed or raw.broken or _readable(raw.fileno()):
            conn.close()


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))  # POLLHUP and POLLERR count too
