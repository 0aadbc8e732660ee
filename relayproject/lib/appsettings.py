"""The relay's settings for a project that is not the relay's own.

relayproject/settings.py reads every relay setting from the environment. A
Django project that installs the apps (docs/pages/install/django-project.md)
sets only the ones it wants: the apps fill in the rest from DEFAULTS when
they start (endpoints/apps.py, deliveries/apps.py), so nothing reads a
setting that is not there. The values are the standalone relay's own
defaults (tests/relayproject/lib/test_appsettings.py holds the two together).
"""

from __future__ import annotations

import copy
import os
import socket
from collections.abc import Callable

from django.conf import settings

from relayproject.lib.devkeys import development_key


def _worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _encryption_keys() -> list[str]:
    # As the standalone settings: DEBUG runs get a key fixed per SECRET_KEY;
    # without DEBUG none, and the system check refuses to start.
    return [development_key(settings.SECRET_KEY)] if settings.DEBUG else []


# Name -> default (a callable is called when the project has not set it).
DEFAULTS: dict[str, object | Callable[[], object]] = {
    "BATCH_SIZE": 200,
    "HTTP_TIMEOUT_SECONDS": 10.0,
    "DISPATCHER_CONCURRENCY": 512,
    "CLAIM_LEASE_SECONDS": None,
    "DISPATCHER_DEAD_AFTER_SECONDS": 20.0,
    "ENDPOINT_MAX_IN_FLIGHT": 32,
    "MERCHANT_MAX_IN_FLIGHT": 64,
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": 5.0,
    "DB_LOCK_TIMEOUT_SECONDS": 3.0,
    "DB_PREPARED_STATEMENTS": True,
    "WORKER_ID": _worker_id,
    "POLL_INTERVAL_SECONDS": 0.5,
    "MAX_ATTEMPTS": 10,
    "DEGRADED_SUCCESS_RATE": 0.9,
    "PERMANENT_FAILURE_STATUSES": [],
    "RETRY_BASE_SECONDS": 30.0,
    "RETRY_MAX_DELAY_SECONDS": 3600.0,
    "RETRY_MAX_ATTEMPTS_LIMIT": 100,
    "RETRY_MAX_WINDOW_SECONDS": 604800.0,
    "HTTP_TIMEOUT_MAX_SECONDS": 60.0,
    "BREAKER_FAILURE_THRESHOLD": 10,
    "BREAKER_COOLDOWN_SECONDS": 300.0,
    "BREAKER_MAX_COOLDOWN_SECONDS": 3600.0,
    "RESPONSE_BODY_LIMIT_BYTES": 4096,
    "MAX_EVENT_BYTES": 262144,
    "MAX_EVENT_DEPTH": 32,
    "MAX_ENDPOINTS_PER_MERCHANT": 100,
    "REQUIRE_ENDPOINT_VERIFICATION": False,
    "VERIFICATION_RETRY_SECONDS": 60.0,
    "MAX_DELIVERIES_PER_REQUEST": 10_000,
    "PUBLISH_RATE_PER_MERCHANT": 1000.0,
    "PUBLISH_BURST_PER_MERCHANT": 10_000,
    "API_KEY_CACHE_SECONDS": 1.0,
    "SECRET_ROTATION_OVERLAP_SECONDS": 86400,
    "DEFAULT_SIGNING_SCHEME": "v1",
    "RELAY_ALLOW_PRIVATE_DESTINATIONS": False,
    "RELAY_EGRESS_PROXY": "",
    "CLIENT_CERT_EXPIRY_WARNING_DAYS": 14,
    "PULL_VISIBILITY_TIMEOUT_SECONDS": 30,
    "LISTEN_IDLE_SECONDS": 60,
    "LISTEN_MAX_BACKLOG": 1000,
    "LISTEN_KEEP_ENDED_SECONDS": 86400,
    "RELAY_BROKER_HOSTS": [],
    "RELAY_BROKER_KINDS": ["rabbitmq", "nats", "redis", "mqtt"],
    "RELAY_ENCRYPTION_KEYS": _encryption_keys,
    "RELAY_DEMO": False,
    "RELAY_SEND_TRACEPARENT": False,
    "RELAY_BASE_URL": "http://127.0.0.1:8000",
    "PORTAL_LINK_TTL_SECONDS": 300,
    "PORTAL_SESSION_SECONDS": 3600,
    "PORTAL_FRAME_ANCESTORS": [],
    "PORTAL_PRODUCT_NAME": "webhook-relay",
    "PORTAL_ACCENT_COLOR": "#2755c9",
    "OPERATIONAL_CHECK_SECONDS": 60.0,
    "OPERATIONAL_COALESCE_SECONDS": 60.0,
    "AUTO_DISABLE_AFTER_HOURS": 120.0,
    "AUTO_DISABLE_MIN_FAILURES": 20,
    "NOTIFY_EMAIL_MIN_INTERVAL_HOURS": 24.0,
    "RELAY_NOTIFICATION_MAIL_PER_DAY": 50,
    "METRICS_TOKEN": "",
    "TRUSTED_PROXIES": [],
    "SESSION_IDLE_SECONDS": 7200,
    "LOG_FORMAT": "plain",
}


def defaults_apply() -> list[str]:
    """Set each relay setting the project has not set to its default; the
    names set. Idempotent: a second call finds them all set."""
    missing = [name for name in DEFAULTS if not hasattr(settings, name)]
    for name in missing:
        default = DEFAULTS[name]
        value = default() if callable(default) else copy.deepcopy(default)
        setattr(settings, name, value)
    return missing
