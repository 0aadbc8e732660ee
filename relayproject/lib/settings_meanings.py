"""What each setting means, for the docs' settings table (settings_reference.py).

MEANINGS: every setting settings.py reads from the environment, relay and
process settings alike; a test fails when one is missing or names nothing.
ELSEWHERE: variables read by the command that starts a process, or by a
library the relay configures, rather than by settings.py: name -> (default,
meaning). No default is written in MEANINGS: the table takes it from the code.
"""

from __future__ import annotations

MEANINGS: dict[str, str] = {
    # Process settings: the standalone relay's Django settings.
    "DEBUG": (
        "`make run` and the tests turn it on; off, HTTPS and every security "
        "default of the Security page apply"
    ),
    "SECRET_KEY": "Django's; with `DEBUG` off the development key is refused at start",
    "ALLOWED_HOSTS": "comma-separated host names the web process answers for",
    "CSRF_TRUSTED_ORIGINS": (
        "comma-separated origins (`https://relay.example.com`) whose form posts "
        "Django accepts besides the host's own"
    ),
    "DATABASE_URL": (
        "`postgres://...` for anything real (PostgreSQL 13+); SQLite is for the "
        "demo and development with one dispatcher"
    ),
    "CONN_MAX_AGE": (
        "PostgreSQL only: seconds a process keeps its database connection "
        "between requests"
    ),
    "STATIC_ROOT": "where `collectstatic` writes; WhiteNoise serves the files without it too",
    "SESSION_COOKIE_SECURE": "with `DEBUG` off: the session cookie only over HTTPS",
    "CSRF_COOKIE_SECURE": "with `DEBUG` off: the CSRF cookie only over HTTPS",
    "SECURE_SSL_REDIRECT": (
        "with `DEBUG` off: plain HTTP is redirected (but `/healthz` and "
        "`/metrics`); false behind a TLS-terminating proxy that does it"
    ),
    "SECURE_HSTS_SECONDS": "with `DEBUG` off: HSTS max-age; 0 behind a proxy that sends its own",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "with `DEBUG` off: HSTS covers subdomains",
    "SECURE_HSTS_PRELOAD": "with `DEBUG` off: HSTS asks for preloading",
    "LOGIN_FAILURE_LIMIT": (
        "failed admin and portal sign-ins for one username from one address "
        "before a lockout (429)"
    ),
    "LOGIN_LOCKOUT_MINUTES": "how long that lockout lasts",
    "LOG_LEVEL": "`DEBUG` also logs one line per successful attempt",
    "PORTAL_BASE_URL": "the former name of `RELAY_BASE_URL`, still read when it is unset",
    "EMAIL_URL": (
        "how emails are sent (django-environ: `smtp+tls://user:pass@host:587`, "
        "`consolemail://`)"
    ),
    "DEFAULT_FROM_EMAIL": "the sender of the relay's emails",
    "EMAIL_TIMEOUT": "seconds to wait for the mail server",
    # Relay settings (the DEFAULTS of appsettings.py).
    "BATCH_SIZE": (
        "deliveries claimed per claim; the next claim is made while the loop "
        "still has work, once fewer than half a batch of claimed jobs could "
        "start, so a larger batch keeps more slots busy between claims and costs "
        "fewer round trips per delivery; a publish's NOTIFY claims at once "
        "unless a whole batch waits to start, so a new delivery is not held "
        "behind a slow endpoint's queue"
    ),
    "HTTP_TIMEOUT_SECONDS": (
        "per attempt, wall-clock from connect to the last byte kept, whatever "
        "the receiver does"
    ),
    "DISPATCHER_CONCURRENCY": (
        "sends in flight per dispatcher process (one asyncio event loop, one "
        "socket each: the sender's connection limit is set to it); a process delivers at most this many divided by its "
        "receivers' mean answer time a second (512 / 0.33 s, about 1,550/s, on "
        "a realistic mix), so raise it for slower receivers. `run_dispatcher` "
        "raises its own soft limit on open files to 2 x this + 64 as far as the "
        "hard limit allows, and warns when that is short: a send that cannot "
        "open a socket would be recorded as the receiver's connection error"
    ),
    "CLAIM_LEASE_SECONDS": (
        "how long a claim is held: a claimed job may wait in the dispatcher's "
        "queue, then be sent; only the backstop for a crash (Concepts, How "
        "delivery works: crash recovery)"
    ),
    "DISPATCHER_DEAD_AFTER_SECONDS": (
        "a dispatcher whose heartbeat is older than this (database clock) is "
        "declared dead and its deliveries go to the others at once; it beats "
        "every min(5 s, this / 4)"
    ),
    "ENDPOINT_MAX_IN_FLIGHT": (
        "sends at once to one endpoint across all dispatchers, unless the "
        "endpoint sets `max_in_flight`"
    ),
    "MERCHANT_MAX_IN_FLIGHT": (
        "sends at once (claimed and not yet recorded) for all of one merchant's "
        "endpoints across all dispatchers, unless staff set the merchant's own "
        "in the admin; an eighth of one dispatcher's `DISPATCHER_CONCURRENCY`, "
        "so one merchant's slow receivers leave the rest of the slots to the others"
    ),
    "DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": (
        "a dispatcher frozen inside a transaction loses its session and locks after this"
    ),
    "DB_LOCK_TIMEOUT_SECONDS": (
        "longest a dispatcher waits for another's lock; then it retries"
    ),
    "DB_PREPARED_STATEMENTS": (
        "the dispatcher prepares its hot statements once per session, a web "
        "process its publish statement; false behind a pooler in transaction "
        "mode that cannot keep them"
    ),
    "WORKER_ID": "the dispatcher's name, stored as `claimed_by`; give each its own",
    "POLL_INTERVAL_SECONDS": "longest idle sleep; on PostgreSQL a NOTIFY wakes a dispatcher at once",
    "MAX_ATTEMPTS": "attempts per delivery; an endpoint may set its own `max_attempts`",
    "DEGRADED_SUCCESS_RATE": (
        "an active endpoint whose 24 h success rate (20 attempts or more) is "
        "under this is flagged *Degraded* in the portal and in pipeline "
        "health's alerts"
    ),
    "PERMANENT_FAILURE_STATUSES": (
        "comma-separated receiver statuses that end a delivery at once for "
        "every endpoint (each endpoint may add its own `permanent_statuses`); "
        "empty: every non-2xx but 410 is retried"
    ),
    "RETRY_BASE_SECONDS": (
        "after n failed attempts the next waits uniform(0, "
        "min(`RETRY_MAX_DELAY_SECONDS`, this x 2^n)): full-jitter backoff"
    ),
    "RETRY_MAX_DELAY_SECONDS": (
        "the longest wait between two attempts of the full-jitter backoff; also "
        "caps `Retry-After` (an explicit `retry_schedule` may wait longer, "
        "within `RETRY_MAX_WINDOW_SECONDS`)"
    ),
    "RETRY_MAX_ATTEMPTS_LIMIT": (
        "the most `max_attempts` a merchant or endpoint may set; past it a 422 "
        "naming this setting"
    ),
    "RETRY_MAX_WINDOW_SECONDS": (
        "the longest total retry window a merchant or endpoint may set: the "
        "sum of the waits between its `max_attempts` attempts (under the "
        "full-jitter backoff, their caps); past it a 422 naming this setting"
    ),
    "HTTP_TIMEOUT_MAX_SECONDS": (
        "the largest per-attempt `timeout_seconds` a merchant or endpoint may "
        "set; the dispatcher's default lease covers it"
    ),
    "BREAKER_FAILURE_THRESHOLD": "consecutive failed attempts that open an endpoint's breaker",
    "BREAKER_COOLDOWN_SECONDS": "how long an opened breaker waits before its probe",
    "BREAKER_MAX_COOLDOWN_SECONDS": "the cooldown doubles after each failed probe, up to this",
    "RESPONSE_BODY_LIMIT_BYTES": (
        "receiver response kept per attempt; the rest is never read into memory"
    ),
    "MAX_EVENT_BYTES": (
        "largest accepted event body; larger is a 413, decided from "
        "`Content-Length` before the body is read"
    ),
    "MAX_EVENT_DEPTH": (
        "deepest accepted event `data` (`{}` is 1); deeper is a 422 naming the field"
    ),
    "MAX_ENDPOINTS_PER_MERCHANT": (
        "endpoints one merchant may have, disabled ones included; past it "
        "creating one is a 422 naming the limit; staff may override per merchant"
    ),
    "REQUIRE_ENDPOINT_VERIFICATION": (
        "a new endpoint, or one whose URL changes, receives nothing but a signed "
        "`relay.endpoint.verification` challenge until it has proved it wants "
        "the traffic; staff may override it per merchant"
    ),
    "VERIFICATION_RETRY_SECONDS": (
        "least time between two challenges asked for one endpoint (portal and "
        "API; sooner is a 429 with `Retry-After`)"
    ),
    "MAX_DELIVERIES_PER_REQUEST": (
        "events x subscribed endpoints one publish may fan out to; past it a "
        "422, nothing written"
    ),
    "PUBLISH_RATE_PER_MERCHANT": (
        "events per second a merchant may publish through the API and portal; "
        "past it 429 with `Retry-After`; staff may override per merchant; 0 "
        "turns the limit off"
    ),
    "PUBLISH_BURST_PER_MERCHANT": (
        "events a merchant may publish at once after a quiet spell; a request "
        "of more events than this is a 422, so keep it at least a full batch (500)"
    ),
    "API_KEY_CACHE_SECONDS": (
        "how long a web process trusts an API key it has read; a revoked key "
        "stops working everywhere within this time"
    ),
    "SECRET_ROTATION_OVERLAP_SECONDS": (
        "how long the previous secret still signs after a rotation, unless the "
        "rotation names its own overlap (0 to 604800)"
    ),
    "DEFAULT_SIGNING_SCHEME": (
        "how a new endpoint signs when neither it nor its merchant names a "
        "scheme: `v1` (HMAC), `v1a` (Ed25519) or `both`; read when the "
        "endpoint is created, so changing it changes no existing endpoint; "
        "another value is refused at start"
    ),
    "RELAY_ALLOW_PRIVATE_DESTINATIONS": (
        "true lets endpoints point at loopback and private addresses "
        "(development and tests only; `make run` sets it)"
    ),
    "RELAY_EGRESS_PROXY": (
        "an HTTP CONNECT proxy, http://host:port (user:password@ allowed), "
        "that every HTTP endpoint's send tunnels through, e.g. Smokescreen or "
        "Squid in front of static egress addresses; the relay still checks "
        "each receiver's address itself, and a proxy failure spends no "
        "attempt; empty sends directly"
    ),
    "CLIENT_CERT_EXPIRY_WARNING_DAYS": (
        "days before an endpoint's client certificate (mTLS) expires that a "
        "relay.endpoint.certificate_expiring operational event is raised and "
        "the endpoint shows it as expiring"
    ),
    "PULL_VISIBILITY_TIMEOUT_SECONDS": (
        "how long a message a pull endpoint's consumer fetched stays leased to "
        "it before it is due again, as a spent attempt (`lease_expired`), "
        "unless the endpoint sets its own `visibility_timeout_seconds`"
    ),
    "LISTEN_IDLE_SECONDS": (
        "how long a listen session lives without a pull: a killed `listen` "
        "command's session ends by itself this long after its last pull"
    ),
    "LISTEN_MAX_BACKLOG": (
        "unfinished messages a listen session may hold; past it the oldest go "
        "dead (`listen_backlog_full`)"
    ),
    "LISTEN_KEEP_ENDED_SECONDS": (
        "how long an ended listen session (disabled, its unfinished messages "
        "dead) is kept for a look before it is deleted with its deliveries; "
        "a merchant keeps at most 20, older ones going at its next start"
    ),
    "RELAY_BROKER_HOSTS": (
        "comma-separated broker hosts that broker endpoints (RabbitMQ, NATS, "
        "Redis, MQTT) may publish to, as host, host:port or *.domain "
        "patterns; a private address only where it is listed itself; empty "
        "allows no broker endpoint (staff may list a merchant's own)"
    ),
    "RELAY_BROKER_KINDS": (
        "comma-separated broker kinds offered (rabbitmq, nats, redis, mqtt); "
        "empty turns broker destinations off everywhere"
    ),
    "RELAY_ENCRYPTION_KEYS": (
        "comma-separated Fernet keys for signing secrets and custom header "
        "values at rest; the first encrypts, all decrypt"
    ),
    "RELAY_DEMO": (
        "routes the built-in demo receiver without `DEBUG` (`make run` sets it)"
    ),
    "RELAY_SEND_TRACEPARENT": "send each attempt's W3C `traceparent` to the receiver",
    "RELAY_BASE_URL": (
        "the origin of every link the relay sends, e.g. the portal links in "
        "emails; `make run` sets it from its `HOST` and `PORT`"
    ),
    "PORTAL_LINK_TTL_SECONDS": "how long a portal link can be opened",
    "PORTAL_SESSION_SECONDS": "how long the session a portal link starts lasts",
    "PORTAL_FRAME_ANCESTORS": (
        "origins that may show the portal in an iframe (CSP `frame-ancestors`); "
        "empty keeps `X-Frame-Options: DENY`"
    ),
    "PORTAL_PRODUCT_NAME": "shown in the portal header",
    "PORTAL_ACCENT_COLOR": "the portal's buttons and header accent, as `#rrggbb`",
    "OPERATIONAL_CHECK_SECONDS": (
        "how often (across all dispatchers) endpoints are checked for failing, "
        "disabled and re-enabled, and auto-disabled"
    ),
    "OPERATIONAL_COALESCE_SECONDS": "at most one `relay.delivery.dead` per endpoint this often",
    "AUTO_DISABLE_AFTER_HOURS": (
        "an endpoint with no success for this long (and `AUTO_DISABLE_MIN_FAILURES` "
        "failures) is disabled"
    ),
    "AUTO_DISABLE_MIN_FAILURES": "failed attempts auto-disable needs as well",
    "NOTIFY_EMAIL_MIN_INTERVAL_HOURS": "at most one email per endpoint and kind this often",
    "RELAY_NOTIFICATION_MAIL_PER_DAY": (
        "emails (notifications and address confirmations) sent for one merchant "
        "per UTC day; past it they are not sent, and the outbox row or the "
        "portal says so; 0 sends none"
    ),
    "METRICS_TOKEN": (
        "when set, `/metrics` needs `Authorization: Bearer <token>`; without it a 401"
    ),
    "TRUSTED_PROXIES": (
        "proxies (IPs or CIDRs) whose `X-Forwarded-For`, `X-Forwarded-Proto` and "
        "`X-Request-ID` are believed, by the application and (through "
        "`gunicorn.conf.py`) by gunicorn; nobody else's are"
    ),
    "SESSION_IDLE_SECONDS": (
        "admin and portal sessions end after this long without a request (at least 60)"
    ),
    "LOG_FORMAT": "`json`: one JSON object per line with the ids in play",
}

ELSEWHERE: dict[str, tuple[str, str]] = {
    "HOST": (
        "`0.0.0.0` (`make run`: `127.0.0.1`)",
        "the address `webhook-relay web` binds, unless `--bind`; `make run` "
        "serves on it too",
    ),
    "PORT": (
        "`8000`",
        "the port `webhook-relay web` binds, unless `--bind`; `make run PORT=8001` "
        "serves on another",
    ),
    "DJANGO_SETTINGS_MODULE": (
        "`relayproject.settings`",
        "the settings `webhook-relay` loads; name your project's to run its "
        "dispatchers with your settings",
    ),
    "OTEL_EXPORTER_OTLP_ENDPOINT": (
        "unset: no tracing",
        "OpenTelemetry's own: where spans go (OTLP over HTTP); installed from "
        "the wheel, tracing needs its `tracing` extra",
    ),
    "OTEL_TRACES_EXPORTER": (
        "`otlp` when tracing is on",
        "OpenTelemetry's own: `console` prints spans, `none` makes them and drops them",
    ),
    "OTEL_SERVICE_NAME": ("`webhook-relay`", "OpenTelemetry's own: the service name"),
    "OTEL_TRACES_SAMPLER": (
        "OpenTelemetry's",
        "OpenTelemetry's own, read by its SDK, with `OTEL_TRACES_SAMPLER_ARG`",
    ),
}
