"""A built-in demo receiver for `make run`: it verifies signatures and shows what it got.

It is what a merchant's endpoint would do, so the demo needs nothing else
running. It keeps the last requests in this process's memory only.
"""

from __future__ import annotations

import collections
import json
import threading

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from endpoints.models import Endpoint
from endpoints.selectors import live_secrets
from relayproject.clock import utcnow

_received: collections.deque = collections.deque(maxlen=50)
_lock = threading.Lock()


@csrf_exempt
def receiver(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    if request.method != "POST":
        with _lock:
            items = [r for r in _received if r["endpoint_id"] == endpoint_id]
        return render(
            request,
            "demo/receiver.html",
            {"items": items[::-1], "endpoint_id": endpoint_id},
        )
    headers = {k.lower(): v for k, v in request.headers.items()}
    secrets = live_secrets(endpoint_ids=[endpoint_id], now=utcnow()).get(
        endpoint_id, []
    )
    verified_with = None
    for index, secret in enumerate(secrets):
        try:
            Webhook(secret).verify(request.body, headers)
            verified_with = "current secret" if index == 0 else "previous secret"
            break
        except WebhookVerificationError:
            continue
    try:
        payload = json.loads(request.body)
    except ValueError:
        payload = None
    with _lock:
        _received.append(
            {
                "endpoint_id": endpoint_id,
                "at": utcnow(),
                "verified": verified_with,
                "headers": {
                    k: v
                    for k, v in headers.items()
                    if k.startswith(("webhook-", "x-relay-"))
                },
                "payload": json.dumps(payload, indent=2)
                if payload is not None
                else request.body[:500],
            }
        )
    if verified_with is None:
        return HttpResponse("signature did not verify", status=400)
    return HttpResponse("ok")


def demo_endpoint_url(base_url: str, endpoint: Endpoint) -> str:
    return f"{base_url.rstrip('/')}/demo/receiver/{endpoint.pk}/"
