"""A built-in demo receiver for `make run`: it verifies signatures and shows what it got.

It is what a merchant's endpoint would do, so the demo needs nothing else
running. It answers only when DEBUG or RELAY_DEMO is on (404 otherwise: it is
unauthenticated and CSRF-exempt), only for endpoints that exist, and keeps a
bounded amount in this process's memory: the last KEEP requests, each cut to
PAYLOAD_CHARS characters, bodies over PARSE_LIMIT_BYTES never parsed.
"""

from __future__ import annotations

import collections
import json
import threading

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from deliveries.notifications.operational import (
    ENDPOINT_VERIFICATION as VERIFICATION_TYPE,
)
from endpoints.models import Endpoint
from endpoints.selectors import live_secrets
from endpoints.signing_keys import v1a_verifies
from relayproject.lib.clock import utcnow

KEEP = 20
PAYLOAD_CHARS = 4096
PARSE_LIMIT_BYTES = 64 * 1024

_received: collections.deque = collections.deque(maxlen=KEEP)
_lock = threading.Lock()


def demo_enabled() -> bool:
    return bool(settings.DEBUG or settings.RELAY_DEMO)


@csrf_exempt
def receiver(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    if not demo_enabled() or not Endpoint.objects.filter(pk=endpoint_id).exists():
        raise Http404("No demo receiver here.")
    if request.method != "POST":
        with _lock:
            items = [r for r in _received if r["endpoint_id"] == endpoint_id]
        return render(
            request,
            "demo/receiver.html",
            {"items": items[::-1], "endpoint_id": endpoint_id},
        )
    headers = {k.lower(): v for k, v in request.headers.items()}
    verified_with = _verify(endpoint_id, request.body, headers)
    with _lock:
        _received.append(
            {
                "endpoint_id": endpoint_id,
                "at": utcnow(),
                "verified": verified_with,
                "headers": {
                    k: v[:200]
                    for k, v in headers.items()
                    if k.startswith(("webhook-", "x-relay-"))
                },
                "payload": _excerpt(request.body),
            }
        )
    if verified_with is None:
        return HttpResponse("signature did not verify", status=400)
    # As a receiver should: a signed verification request is answered with
    # its challenge (docs/pages/concepts/verification.md).
    return HttpResponse(_challenge(request.body) or "ok")


def _challenge(body: bytes) -> str:
    try:
        sent = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(sent, dict) or sent.get("type") != VERIFICATION_TYPE:
        return ""
    challenge = (sent.get("data") or {}).get("challenge")
    return challenge if isinstance(challenge, str) else ""


def _verify(endpoint_id: str, body: bytes, headers: dict[str, str]) -> str | None:
    secrets = live_secrets(endpoint_ids=[endpoint_id], now=utcnow()).get(
        endpoint_id, []
    )
    for index, secret in enumerate(secrets):
        try:
            Webhook(secret).verify(body, headers)
        except WebhookVerificationError:
            continue
        return "current secret" if index == 0 else "previous secret"
    # An endpoint that signs with v1a alone carries no v1 to check.
    public_key = (
        Endpoint.objects.filter(pk=endpoint_id)
        .values_list("signing_public_key", flat=True)
        .first()
    )
    if public_key and v1a_verifies(
        public_key, body=body, headers=headers, now=utcnow().timestamp()
    ):
        return "public key (v1a)"
    return None


def _excerpt(body: bytes) -> str:
    """The body pretty-printed when small and sane JSON, else as text; always cut."""
    text = body[: PAYLOAD_CHARS * 4].decode("utf-8", errors="replace")
    if len(body) <= PARSE_LIMIT_BYTES:
        try:
            text = json.dumps(json.loads(body), indent=2)
        except (ValueError, RecursionError):
            pass
    return text[:PAYLOAD_CHARS]


def demo_endpoint_url(base_url: str, endpoint_id: str) -> str:
    """The demo receiver's URL for one endpoint, wherever the relay's routes are."""
    return base_url.rstrip("/") + reverse("demo-receiver", args=[endpoint_id])
