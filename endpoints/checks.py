"""System checks of the endpoints app, registered in endpoints/apps.py.

manage.py runs them before runserver, migrate, run_dispatcher and every
command that does not opt out; `check --deploy` lists them; the web process
runs the security ones itself (relayproject/wsgi.py), as gunicorn runs none.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from endpoints.secret_storage import key_problems

NO_KEY = "endpoints.E001"
BAD_KEY = "endpoints.E002"


def encryption_keys_check(app_configs=None, **kwargs) -> list[checks.Error]:
    """Refuse to start with no RELAY_ENCRYPTION_KEYS, or a malformed one."""
    keys = list(getattr(settings, "RELAY_ENCRYPTION_KEYS", []) or [])
    return [
        checks.Error(problem, id=NO_KEY if not keys else BAD_KEY)
        for problem in key_problems(keys)
    ]
