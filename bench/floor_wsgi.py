"""An experiment, not a path anyone may use: the floor of a publish's cost.

`bench/api_load.py --floor` serves this module with gunicorn instead of
relayproject.wsgi. `POST /floor/events` skips everything Django does around
a request (the handler, every middleware, the URL map, django-ninja's parsing,
checks and rendering) and keeps only what a publish cannot do without: the
bearer key's authentication (apikey_authenticate, cached as in the API),
the body read and parsed as JSON, and the publish service (ingest.event_ingest:
fan-out, validation, the rate bucket, the one INSERT statement and its commit),
answered with the new event's id. `POST /floor/empty` does the same but
publishes nothing (what gunicorn, the key and the JSON cost), so the service's
own share is the difference. Any other request goes to the project's
application, so the run's `GET /healthz` is the real one.

If even this path costs more than twice a health check, no publish path
outside Django could meet issue 21's "a publish that costs twice a health
check": what is left is the service and the statement.
"""

from __future__ import annotations

import json

from relayproject.wsgi import application as django_application  # django.setup()

# isort: split
# Models may be imported only once django.setup() has run (above).
from deliveries.publish import ingest
from endpoints.apikeys import apikey_authenticate

FLOOR_PATHS = ("/floor/events", "/floor/empty")
BODY_LIMIT = 256 * 1024


def _answer(start_response, status: str, body: dict) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        status,
        [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
    )
    return [payload]


def application(environ, start_response):
    path = environ.get("PATH_INFO")
    if path not in FLOOR_PATHS or environ["REQUEST_METHOD"] != "POST":
        return django_application(environ, start_response)
    scheme, _, token = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    key = apikey_authenticate(token) if scheme.lower() == "bearer" else None
    if key is None:
        return _answer(start_response, "401 Unauthorized", {"detail": "no key"})
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length > BODY_LIMIT:
        return _answer(start_response, "413 Content Too Large", {"detail": "big"})
    body = json.loads(environ["wsgi.input"].read(length))
    if path == "/floor/empty":
        return _answer(start_response, "201 Created", {"id": body["type"]})
    event, _ = ingest.event_ingest(
        merchant=body["merchant"],
        type=body["type"],
        data=body["data"],
        only_merchant=None if key.is_platform else key.merchant_id,
    )
    return _answer(start_response, "201 Created", {"id": event.id})
