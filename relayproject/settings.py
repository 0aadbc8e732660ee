"""Settings for webhook-relay, read from the environment with django-environ.

Names and defaults follow ../shared/CONTRACT.md section 2.
"""

from __future__ import annotations

import os
import re
import socket
import warnings
from datetime import timedelta
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from relayproject.lib.devkeys import development_key
from relayproject.lib.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
# A source checkout keeps its files (SQLite, collectstatic's) in the project
# folder and its templates at the top; installed from the wheel, the files go
# in the current directory, never beside the code, and the templates are in
# this package.
SOURCE_TREE = (BASE_DIR / "manage.py").is_file()
DATA_DIR = BASE_DIR if SOURCE_TREE else Path.cwd()
TEMPLATES_DIR = (BASE_DIR if SOURCE_TREE else Path(__file__).parent) / "templates"
DEV_SECRET_KEY = "dev-only-insecure-key-change-me"

env = environ.Env()

# Safe by default: `make run` and the tests turn DEBUG on where they need it.
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default=DEV_SECRET_KEY)
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "Set SECRET_KEY: production refuses the development key."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",
    "axes",
    "endpoints",
    "deliveries",
    "deliveries.notifications",
]

MIDDLEWARE = [
    # First: the client address and scheme everything below sees (proxies),
    # and the request id every log line of this request carries.
    "relayproject.lib.proxies.TrustedProxyMiddleware",
    "relayproject.lib.requestid.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Outermost but one: it rewrites the framing headers the inner ones set.
    "relayproject.portal.branding.PortalFramingMiddleware",
    # Serves the admin, portal and API-docs assets under gunicorn too, with no
    # separate web server; WHITENOISE_USE_FINDERS works before collectstatic.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything reads a body: refuses oversized and non-JSON API bodies.
    "relayproject.lib.problems.ApiProblemMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Signs out a session idle past SESSION_IDLE_SECONDS before anything reads
    # request.user (which AuthenticationMiddleware only makes lazily), and
    # leaves a message for the sign-in page that follows.
    "relayproject.lib.sessions.IdleSessionMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # django-csp's, with the header built once per process.
    "relayproject.lib.cspheader.CSPMiddleware",
    # Last, as django-axes asks: answers 429 once a sign-in is locked out.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "relayproject.urls"
WSGI_APPLICATION = "relayproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [TEMPLATES_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "relayproject.portal.branding.branding",
            ],
        },
    },
]


def _database_from_url(url: str) -> dict:
    db = environ.Env.db_url_config(url)
    if db["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets the web process read while a dispatcher writes; the timeout
        # makes writers queue instead of failing at once with "database is locked".
        db["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    else:
        db["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
        # Not Django's health check, a `SELECT 1` round trip before every
        # request's first query: web processes poll the session's socket
        # instead (relayproject/lib/dbsessions.py); dispatchers retry on
        # their own.
        db["CONN_HEALTH_CHECKS"] = False
        # No JIT: every query here is short, and above jit_above_cost the
        # planner compiled some (a 500-row endpoint read whose estimate a
        # correlated subquery inflated) for about a second under load.
        # On a Citus coordinator, multi-shard reads that join tables on
        # something other than merchant_id (the admin's, relay_status's) run
        # as repartition joins instead of failing; plain PostgreSQL keeps the
        # setting as an unused placeholder (docs/pages/operations/scaling.md).
        options = db.setdefault("OPTIONS", {})
        options["options"] = (
            f"{options.get('options', '')} -c jit=off"
            " -c citus.enable_repartition_joins=on"
        ).strip()
    return db


# Tests point at PostgreSQL with TEST_DATABASE_URL. Each run gets a test
# database of its own (TEST_DATABASE_NAME, else one named after the process),
# so two runs on one server never collide.
_db_url = os.environ.get("TEST_DATABASE_URL") or env(
    "DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
)
DATABASES = {"default": _database_from_url(_db_url)}
if os.environ.get("TEST_DATABASE_URL"):
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("TEST_DATABASE_NAME") or f"test_relay_{os.getpid()}"
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Times with seconds and the zone everywhere Django formats one (the admin):
# relayproject/formats/en/formats.py.
FORMAT_MODULE_PATH = ["relayproject.formats"]

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(DATA_DIR / "staticfiles")))
WHITENOISE_USE_FINDERS = True
# Until collectstatic has run, STATIC_ROOT does not exist; the finders serve
# the files meanwhile, so WhiteNoise's warning about it is only noise.
warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
STATICFILES_DIRS = (
    [BASE_DIR / "static"] if SOURCE_TREE and (BASE_DIR / "static").exists() else []
)

# A CSRF failure is a branded 403 page too (relayproject/views.py).
CSRF_FAILURE_VIEW = "relayproject.views.csrf_failure"

LOGIN_URL = "portal:login"
LOGIN_REDIRECT_URL = "portal:home"

# --- Transport security ------------------------------------------------------
# Proxies (IPs or CIDRs) whose X-Forwarded-For and X-Forwarded-Proto are
# believed (relayproject/lib/proxies.py); from anyone else they are ignored, so
# SECURE_PROXY_SSL_HEADER stays unset on purpose.
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
SESSION_COOKIE_HTTPONLY = True
# Admin and portal sessions end after this long without a request
# (relayproject/lib/sessions.py). Two hours: a console or portal tab survives a
# meeting or lunch in the middle of an investigation, a browser left signed in
# at the end of the day does not; staff sessions can change secrets and
# replay traffic, so "a working day" (8 h) is too long. Portal-link sessions
# also end PORTAL_SESSION_SECONDS after the link was opened, idle or not.
SESSION_IDLE_SECONDS = env.int("SESSION_IDLE_SECONDS", default=7200)
if SESSION_IDLE_SECONDS < 60:
    raise ImproperlyConfigured("SESSION_IDLE_SECONDS is at least 60.")
# The cookie and the stored row expire with the idle limit; every touch of a
# session moves both forward.
SESSION_COOKIE_AGE = SESSION_IDLE_SECONDS
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    # Behind a proxy that terminates TLS and redirects itself, turn these off
    # (or keep them and list the proxy in TRUSTED_PROXIES).
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True
    )
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    # Load balancers probe these over plain HTTP on the inside.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]

# The bearer token /metrics asks for (deliveries/ops/metrics.py); empty: open, for
# a scraper on a private network.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="").strip()

# Content-Security-Policy (django-csp) on every answer: scripts, styles and
# everything else only from this origin; no inline script or style anywhere
# (templates keep JS and CSS in static files), no framing, no plugins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# --- Sign-in throttle (django-axes): admin and portal share it --------------
# Failures are counted in the database, so every web process sees the same
# count, per (username, client address): a guesser at one address is locked
# out of that account without locking its owner out everywhere else.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "relayproject.lib.proxies.client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# Log lines name the username and address (never the password): a masked
# lockout line tells an operator nothing.
AXES_SENSITIVE_PARAMETERS: list[str] = []

# LOG_FORMAT=json: one JSON object per line with the ids in play
# (relayproject/lib/logs.py); the default is one human-readable line.
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").strip().lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING = logging_config(log_format=LOG_FORMAT, level=env("LOG_LEVEL", default="INFO"))
# Successful sign-ins (INFO) and lockouts (WARNING), with username and address.
LOGGING["loggers"]["axes"] = {"level": "INFO"}
LOGGING["loggers"]["axes.apps"] = {"level": "WARNING"}  # not its banner per command

# Send a W3C traceparent header to receivers (the send span's context). Off:
# it would show internal trace ids to merchants (docs/pages/operations/tracing.md).
RELAY_SEND_TRACEPARENT = env.bool("RELAY_SEND_TRACEPARENT", default=False)

# --- webhook-relay (CONTRACT.md section 2) ---------------------------------
# Sized for realistic receivers (a mean answer of about 0.33 s): a process
# delivers at most DISPATCHER_CONCURRENCY / mean latency a second, so 512
# slots, kept full by claims of 200 between which the loop does not run dry
# (docs/pages/reference/settings.md, made from
# relayproject/lib/settings_meanings.py). The lease formula gives 180 s for both
# (two of HTTP_TIMEOUT_MAX_SECONDS and a minute: deliveries/dispatch/lease.py).
BATCH_SIZE = env.int("BATCH_SIZE", default=200)
HTTP_TIMEOUT_SECONDS = env.float("HTTP_TIMEOUT_SECONDS", default=10)
DISPATCHER_CONCURRENCY = env.int("DISPATCHER_CONCURRENCY", default=512)
# None: derived from the batch, concurrency and timeout in force when the
# dispatcher starts, and capped (deliveries/dispatch/lease.py says how).
CLAIM_LEASE_SECONDS = env.float("CLAIM_LEASE_SECONDS", default=None)
# A dispatcher whose heartbeat is older than this (on the database's clock) is
# declared dead and its deliveries go to the others at once. It beats every
# min(5 s, this / 4): four beats missed (deliveries/dispatch/heartbeat.py).
DISPATCHER_DEAD_AFTER_SECONDS = env.float("DISPATCHER_DEAD_AFTER_SECONDS", default=20)
if DISPATCHER_DEAD_AFTER_SECONDS <= 0:
    raise ImproperlyConfigured("DISPATCHER_DEAD_AFTER_SECONDS must be above 0")
# Sends at once to one endpoint across all dispatchers, unless it sets its own.
ENDPOINT_MAX_IN_FLIGHT = env.int("ENDPOINT_MAX_IN_FLIGHT", default=32)
# Sends at once for one merchant (all its endpoints) across all dispatchers,
# unless staff set the merchant's own. An eighth of one dispatcher's slots:
# one merchant's slow receivers leave seven eighths to everyone else even
# with a single dispatcher, and two of its endpoints at their own default cap
# still fit under it.
MERCHANT_MAX_IN_FLIGHT = env.int("MERCHANT_MAX_IN_FLIGHT", default=64)
# Dispatcher database sessions: a dispatcher frozen mid-transaction (SIGSTOP,
# a full log pipe, a debugger) loses its session and locks after this long,
# and never waits longer than this for another's lock.
DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS = env.float(
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS", default=5
)
DB_LOCK_TIMEOUT_SECONDS = env.float("DB_LOCK_TIMEOUT_SECONDS", default=3)
# The dispatcher prepares its hot statements once per session; off for a
# pooler in transaction mode that cannot keep them (PgBouncer before 1.21).
DB_PREPARED_STATEMENTS = env.bool("DB_PREPARED_STATEMENTS", default=True)
WORKER_ID = env("WORKER_ID", default=f"{socket.gethostname()}-{os.getpid()}")
POLL_INTERVAL_SECONDS = env.float("POLL_INTERVAL_SECONDS", default=0.5)
MAX_ATTEMPTS = env.int("MAX_ATTEMPTS", default=10)
# An endpoint whose 24 h success rate is under this (0-1) is flagged degraded
# in the portal and in staff alerts (endpoints/words.py).
DEGRADED_SUCCESS_RATE = env.float("DEGRADED_SUCCESS_RATE", default=0.9)
# Receiver statuses that end a delivery at once, for every endpoint (each
# endpoint may add its own); empty: every non-2xx but 410 is retried.
PERMANENT_FAILURE_STATUSES = [
    int(s) for s in env.list("PERMANENT_FAILURE_STATUSES", default=[])
]
RETRY_BASE_SECONDS = env.float("RETRY_BASE_SECONDS", default=30)
RETRY_MAX_DELAY_SECONDS = env.float("RETRY_MAX_DELAY_SECONDS", default=3600)
# The operator's bounds on a merchant's or endpoint's own retry policy
# (endpoints/retry_policy.py): so one tenant cannot hold a delivery, or a
# send slot, for as long as it likes. The dispatcher's lease covers the
# largest timeout (deliveries/dispatch/lease.py).
RETRY_MAX_ATTEMPTS_LIMIT = env.int("RETRY_MAX_ATTEMPTS_LIMIT", default=100)
RETRY_MAX_WINDOW_SECONDS = env.float("RETRY_MAX_WINDOW_SECONDS", default=604800)
HTTP_TIMEOUT_MAX_SECONDS = env.float("HTTP_TIMEOUT_MAX_SECONDS", default=60)
BREAKER_FAILURE_THRESHOLD = env.int("BREAKER_FAILURE_THRESHOLD", default=10)
BREAKER_COOLDOWN_SECONDS = env.float("BREAKER_COOLDOWN_SECONDS", default=300)
BREAKER_MAX_COOLDOWN_SECONDS = env.float("BREAKER_MAX_COOLDOWN_SECONDS", default=3600)
RESPONSE_BODY_LIMIT_BYTES = env.int("RESPONSE_BODY_LIMIT_BYTES", default=4096)
MAX_EVENT_BYTES = env.int("MAX_EVENT_BYTES", default=262144)
# Deepest event data accepted ({} is depth 1): every page that shows an event
# must render the deepest one (relayproject/lib/jsonlimits.py says why).
MAX_EVENT_DEPTH = env.int("MAX_EVENT_DEPTH", default=32)
# Quotas: what one merchant may ask of the relay that all merchants share
# (relayproject/lib/limits.py; staff may override the first and the publish rate
# per merchant). Each refusal names its setting.
MAX_ENDPOINTS_PER_MERCHANT = env.int("MAX_ENDPOINTS_PER_MERCHANT", default=100)
# New endpoints (and ones whose URL changes) receive nothing until they prove
# they want the traffic: a signed relay.endpoint.verification whose challenge
# the receiver echoes (endpoints/verification.py). Staff may override it per
# merchant.
REQUIRE_ENDPOINT_VERIFICATION = env.bool("REQUIRE_ENDPOINT_VERIFICATION", default=False)
# Least time between two challenges asked for one endpoint (portal and API).
VERIFICATION_RETRY_SECONDS = env.float("VERIFICATION_RETRY_SECONDS", default=60)
# Events x endpoints subscribed to their types, in one publish (API request,
# batch or in-process call): past it a 422 and nothing is written.
MAX_DELIVERIES_PER_REQUEST = env.int("MAX_DELIVERIES_PER_REQUEST", default=10_000)
# Events per second a merchant may publish through the API and the portal,
# and how many at once after a quiet spell: a request of more events than
# the burst is refused (a 422), so keep it at least a full batch (500). A
# token bucket in PostgreSQL shared by every web process; a rate of 0 turns
# it off.
PUBLISH_RATE_PER_MERCHANT = env.float("PUBLISH_RATE_PER_MERCHANT", default=1000)
PUBLISH_BURST_PER_MERCHANT = env.int("PUBLISH_BURST_PER_MERCHANT", default=10_000)
# How long a web process trusts an API key it has read: a revoked key stops
# working in every process within this time (at once in the one that revoked).
API_KEY_CACHE_SECONDS = env.float("API_KEY_CACHE_SECONDS", default=1)
SECRET_ROTATION_OVERLAP_SECONDS = env.int(
    "SECRET_ROTATION_OVERLAP_SECONDS", default=86400
)
# How a new endpoint signs when neither it nor its merchant names a scheme
# (endpoints/signing_default.py): read at its creation only. Refused at start
# when not a scheme (the system check endpoints.E003 says so in a project
# that installs the apps).
DEFAULT_SIGNING_SCHEME = env.str("DEFAULT_SIGNING_SCHEME", default="v1").strip()
if DEFAULT_SIGNING_SCHEME not in ("v1", "v1a", "both"):
    raise ImproperlyConfigured(
        f"DEFAULT_SIGNING_SCHEME must be v1, v1a or both, not "
        f"{DEFAULT_SIGNING_SCHEME!r}."
    )
RELAY_ALLOW_PRIVATE_DESTINATIONS = env.bool(
    "RELAY_ALLOW_PRIVATE_DESTINATIONS", default=False
)
# An HTTP CONNECT proxy (http://host:port) every HTTP endpoint's send tunnels
# through (deliveries/dispatch/tunnel.py), e.g. Smokescreen or Squid in front
# of static egress addresses; "" sends directly. Broker kinds never use it.
RELAY_EGRESS_PROXY = env.str("RELAY_EGRESS_PROXY", default="")
# An endpoint's client certificate this close to its expiry raises an
# operational event and shows as expiring on the endpoint.
CLIENT_CERT_EXPIRY_WARNING_DAYS = env.int("CLIENT_CERT_EXPIRY_WARNING_DAYS", default=14)
# Pull endpoints and listen sessions (deliveries/pull/): how long a pulled
# message stays leased to its consumer unless the endpoint names its own; how
# long a listen session lives without a pull; how many unfinished messages a
# session holds before the oldest go dead; how long an ended session is kept.
PULL_VISIBILITY_TIMEOUT_SECONDS = env.int("PULL_VISIBILITY_TIMEOUT_SECONDS", default=30)
LISTEN_IDLE_SECONDS = env.int("LISTEN_IDLE_SECONDS", default=60)
LISTEN_MAX_BACKLOG = env.int("LISTEN_MAX_BACKLOG", default=1000)
LISTEN_KEEP_ENDED_SECONDS = env.int("LISTEN_KEEP_ENDED_SECONDS", default=86400)
# Broker destinations (endpoints/brokers.py): the broker hosts merchants'
# broker endpoints may publish to (host or host:port patterns, "*.example.com";
# staff may set a merchant's own list). Empty: no broker endpoint may be used.
RELAY_BROKER_HOSTS = env.list("RELAY_BROKER_HOSTS", default=[])
# The broker kinds offered at all; empty turns broker destinations off.
RELAY_BROKER_KINDS = env.list(
    "RELAY_BROKER_KINDS", default=["rabbitmq", "nats", "redis", "mqtt"]
)
# Fernet keys for signing secrets at rest (endpoints/secret_storage.py): the
# first encrypts, all decrypt. Production refuses to start without one (a
# system check, endpoints/checks.py).
RELAY_ENCRYPTION_KEYS = env.list("RELAY_ENCRYPTION_KEYS", default=[])
if not RELAY_ENCRYPTION_KEYS and DEBUG:
    RELAY_ENCRYPTION_KEYS = [development_key(SECRET_KEY)]
# The demo receiver (relayproject/demo.py) answers only with DEBUG or this.
RELAY_DEMO = env.bool("RELAY_DEMO", default=False)
# The merchant portal as a platform hands it to its customers (docs/pages/portal.md).
PORTAL_LINK_TTL_SECONDS = env.int("PORTAL_LINK_TTL_SECONDS", default=300)
PORTAL_SESSION_SECONDS = env.int("PORTAL_SESSION_SECONDS", default=3600)
# Origins allowed to show the portal in an iframe; empty keeps X-Frame-Options: DENY.
PORTAL_FRAME_ANCESTORS = env.list("PORTAL_FRAME_ANCESTORS", default=[])
PORTAL_PRODUCT_NAME = env("PORTAL_PRODUCT_NAME", default="webhook-relay")
PORTAL_ACCENT_COLOR = env("PORTAL_ACCENT_COLOR", default="#2755c9")
if not re.fullmatch(r"#[0-9a-fA-F]{6}", PORTAL_ACCENT_COLOR):
    raise ImproperlyConfigured("PORTAL_ACCENT_COLOR is a colour like #2755c9.")
for _origin in PORTAL_FRAME_ANCESTORS:
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?", _origin):
        raise ImproperlyConfigured(
            f"PORTAL_FRAME_ANCESTORS holds origins like https://app.example.com, "
            f"not {_origin!r}."
        )
# Django refuses bodies above this before a view runs; the API has its own
# Content-Length check for events, this only keeps other forms small.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(MAX_EVENT_BYTES * 4, 2_621_440)

# --- When delivery fails: operational events, email, auto-disable ----------
# How often (across all dispatchers together) endpoints are checked for
# failing, disabled and re-enabled, dead letters are reported, and endpoints
# that have failed for days are disabled.
OPERATIONAL_CHECK_SECONDS = env.float("OPERATIONAL_CHECK_SECONDS", default=60)
# relay.delivery.dead: at most one event per endpoint per this many seconds.
OPERATIONAL_COALESCE_SECONDS = env.float("OPERATIONAL_COALESCE_SECONDS", default=60)
AUTO_DISABLE_AFTER_HOURS = env.float("AUTO_DISABLE_AFTER_HOURS", default=120)
AUTO_DISABLE_MIN_FAILURES = env.int("AUTO_DISABLE_MIN_FAILURES", default=20)
NOTIFY_EMAIL_MIN_INTERVAL_HOURS = env.float(
    "NOTIFY_EMAIL_MIN_INTERVAL_HOURS", default=24
)
# Emails (notifications and address confirmations) sent for one merchant per
# UTC day; past it they are not sent, and that is recorded. 0 sends none.
RELAY_NOTIFICATION_MAIL_PER_DAY = env.int("RELAY_NOTIFICATION_MAIL_PER_DAY", default=50)
# Emails link to the portal: the address people reach it at.
# The origin of every link the relay sends (emails): one setting. `make run`
# sets it from its HOST and PORT; PORTAL_BASE_URL, its former name, is still read.
RELAY_BASE_URL = env(
    "RELAY_BASE_URL", default=env("PORTAL_BASE_URL", default="http://127.0.0.1:8000")
).rstrip("/")
# smtp://user:password@host:587 (smtp+tls://, smtps://), consolemail://, ...
vars().update(
    env.email_url(
        "EMAIL_URL", default="consolemail://" if DEBUG else "smtp://localhost:25"
    )
)
DEFAULT_FROM_EMAIL = env(
    "DEFAULT_FROM_EMAIL", default="webhook-relay <relay@localhost>"
)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=10)
