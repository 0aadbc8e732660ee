"""System checks of the endpoints app, registered in endpoints/apps.py.

manage.py runs them before runserver, migrate, run_dispatcher and every
command that does not opt out; `check --deploy` lists them; the web process
runs the security ones itself (relayproject/wsgi.py), as gunicorn runs none.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from endpoints.secret_storage import key_problems
from endpoints.signing_default import setting_problems

NO_KEY = "endpoints.E001"
BAD_KEY = "endpoints.E002"
BAD_SIGNING_DEFAULT = "endpoints.E003"


def encryption_keys_check(app_configs=None, **kwargs) -> list[checks.Error]:
    """Refuse to start with no RELAY_ENCRYPTION_KEYS, or a malformed one."""
    keys = list(getattr(settings, "RELAY_ENCRYPTION_KEYS", []) or [])
    return [
        checks.Error(problem, id=NO_KEY if not keys else BAD_KEY)
        for problem in key_problems(keys)
    ]


def signing_default_check(app_configs=None, **kwargs) -> list[checks.Error]:
    """Refuse a DEFAULT_SIGNING_SCHEME that is not a scheme: every endpoint
    created without its own would be refused, naming a field it never sent."""
    value = getattr(settings, "DEFAULT_SIGNING_SCHEME", None)
    return [
        checks.Error(problem, id=BAD_SIGNING_DEFAULT)
        for problem in setting_problems(value)
    ]
