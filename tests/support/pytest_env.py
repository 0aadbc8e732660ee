"""Loaded with `-p tests.support.pytest_env` (pyproject addopts), before Django settings.

DEBUG defaults to false, which refuses the development SECRET_KEY; the tests
run with the development settings, as `make run` does. Child processes the
tests start (dispatchers, gunicorn) inherit the same environment. Tests of
the production settings start `manage.py` with an environment of their own.
"""

from __future__ import annotations

import os

os.environ.setdefault("DEBUG", "true")
# A fixed key, so child processes decrypt what the test process encrypted.
os.environ.setdefault(
    "RELAY_ENCRYPTION_KEYS", "dGVzdC1vbmx5LWtleS1mb3Itd2ViaG9vay1yZWxheSE="
)

# The time-bomb check: with RELAY_TEST_CLOCK_SHIFT_DAYS (make test's SQLite
# pass sets it), every reading of Django's clock in this process, so the
# relay's `utcnow()` and auto_now fields alike, is that many days ahead of
# the real date. A test that seeds a fixed date and then calls code that
# reads the clock passes today and fails here, as it would on that day.
if os.environ.get("RELAY_TEST_CLOCK_SHIFT_DAYS"):
    from datetime import timedelta

    import django.utils.timezone

    _shift = timedelta(days=int(os.environ["RELAY_TEST_CLOCK_SHIFT_DAYS"]))
    _real_now = django.utils.timezone.now
    django.utils.timezone.now = lambda: _real_now() + _shift
