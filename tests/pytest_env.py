"""Loaded with `-p tests.pytest_env` (pyproject addopts), before Django settings.

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
