"""WSGI entry point: `gunicorn relayproject.wsgi`.

gunicorn runs no system checks, so the security ones run here: the web
process refuses to start with a bad RELAY_ENCRYPTION_KEYS, as manage.py's
commands do (endpoints/checks.py).
"""

from __future__ import annotations

import os

from django.core import checks
from django.core.management.base import SystemCheckError
from django.core.signals import request_started
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relayproject.settings")
application = get_wsgi_application()
_refusals = [
    f"{e.id}: {e.msg}"
    for e in checks.run_checks(tags=[checks.Tags.security])
    if e.is_serious()
]
if _refusals:
    raise SystemCheckError("\n".join(_refusals))

from relayproject.lib.dbsessions import close_ended_sessions  # noqa: E402 (after setup)

# In place of Django's per-request health check (settings: CONN_HEALTH_CHECKS).
request_started.connect(close_ended_sessions, dispatch_uid="close_ended_sessions")
