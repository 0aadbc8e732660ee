"""Every error kind and held reason a page shows is in words.

Real pages of the portal and the staff console (and relay_status's text),
rendered over deliveries that failed with each error kind and pending
deliveries held for each reason, scanned for the machine codes: no
``connection_error`` beside "Could not connect", no "http 404" beside
"HTTP 404 Not Found". Codes stay in the API and ``relay_status --json``;
a ``<code>`` element (a code shown on purpose, for developers) is skipped.
"""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from deliveries.models import Attempt, Delivery, ErrorKind
from deliveries.ops.held import HeldKind
from endpoints.models import EndpointHealth, Membership
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.support import factories, seed

pytestmark = pytest.mark.django_db

# How each kind fails: (status, message).
FAILURES = {
    ErrorKind.TIMEOUT: (None, "read timed out after 10 s"),
    ErrorKind.CONNECTION: (None, "Connection refused"),
    ErrorKind.DNS: (None, "no such host"),
    ErrorKind.TLS: (None, "certificate verify failed"),
    ErrorKind.DESTINATION_BLOCKED: (None, "127.0.0.1 is a private address"),
    ErrorKind.NO_SIGNING_SECRET: (None, ""),
    ErrorKind.LEASE_EXPIRED: (None, ""),
    ErrorKind.HTTP_STATUS: (404, "HTTP 404"),
    ErrorKind.PERMANENT_STATUS: (410, "HTTP 410"),
    ErrorKind.INVALID_RESPONSE: (None, "bad status line"),
    ErrorKind.CHALLENGE_NOT_ECHOED: (None, ""),
}
# The machine's names: every error kind and held reason with an underscore
# (the one-word ones, "timeout" and "due", are also English), the stored
# "http 404" and a breaker's stored "consecutive failures".
CODES = re.compile(
    "|".join(
        [
            *(rf"\b{re.escape(k)}\b" for k in ErrorKind.ALL if "_" in k),
            *(rf"\b{re.escape(k)}\b" for k in HeldKind if "_" in k),
            r"\bhttp \d{3}\b",
            r"consecutive failures",
        ]
    )
)
NOT_TEXT = re.compile(
    r"<(code|script|style)\b.*?</\1>|<!--.*?-->|<[^>]*>", re.DOTALL | re.IGNORECASE
)


def codes_shown(page: str) -> list[str]:
    """The codes in the text a person reads (outside <code>, tags, attributes)."""
    text = html.unescape(NOT_TEXT.sub(" ", page))
    return sorted({m.group(0) for m in CODES.finditer(text)})


def test_the_scan_finds_a_code_in_text_but_not_in_code_or_attributes():
    assert codes_shown("<td>connection_error (6)</td>") == ["connection_error"]
    assert codes_shown("<td>http 404 (6)</td>") == ["http 404"]
    assert codes_shown('<li data-kind="breaker_open"><code>dns_error</code></li>') == []


def stored(kind: str) -> str:
    """The delivery's last_error as the dispatcher stores it."""
    status, message = FAILURES[kind]
    return f"http {status}" if status else (f"{kind}: {message}" if message else kind)


def failed(endpoint, kind: str, *, now) -> Delivery:
    status, message = FAILURES[kind]
    delivery = seed.delivery(
        endpoint,
        status="dead",
        created_at=now - timedelta(minutes=5),
        attempts=1,
        dead_at=now,
        last_status_code=status,
        last_error=stored(kind),
    )
    Attempt.objects.create(
        delivery=delivery,
        endpoint=endpoint,
        number=1,
        started_at=now - timedelta(minutes=4),
        response_ms=12.5,
        status_code=status,
        error_kind=kind,
        error_message=message,
        response_body="",
        outcome=Attempt.Outcome.DEAD,
    )
    return delivery


@pytest.fixture
def relay():
    """A merchant with a failed delivery of every kind, and pending ones held
    for every reason a page can show."""
    now = utcnow()
    acme = factories.merchant("acme")
    user = User.objects.create_superuser("staff", "staff@example.com", "pw-words")
    Membership.objects.create(user=user, merchant=acme, role=Membership.Role.OWNER)
    failing = factories.endpoint(acme, url="http://127.0.0.1:9/failing")
    deliveries = [failed(failing, kind, now=now) for kind in sorted(FAILURES)]

    paused = factories.endpoint(acme, url="http://127.0.0.1:9/paused")
    endpoint_breaker_open(
        endpoint_id=paused.pk,
        reason="opened after 10 consecutive failures (last: connection_error)",
        now=now,
    )
    EndpointHealth.objects.filter(pk=paused.pk).update(consecutive_failures=10)
    testing = factories.endpoint(acme, url="http://127.0.0.1:9/testing")
    endpoint_breaker_open(
        endpoint_id=testing.pk,
        reason="probe failed, reopened for 120s (last: http 503)",
        now=now,
    )
    EndpointHealth.objects.filter(pk=testing.pk).update(breaker_state="half_open")
    disabled = factories.endpoint(acme, url="http://127.0.0.1:9/disabled")
    endpoint_disable(endpoint=disabled, reason="the receiver answered 410 Gone")
    unverified = factories.endpoint(acme, url="http://127.0.0.1:9/unverified")
    unverified.awaiting_verification = True
    unverified.save(update_fields=["awaiting_verification"])
    held_on = {
        paused: ("pending", now),  # breaker_open
        testing: ("pending", now),  # breaker_half_open
        disabled: ("pending", now),  # endpoint_disabled
        unverified: ("pending", now),  # awaiting_verification
    }
    for endpoint, (status, at) in held_on.items():
        deliveries.append(
            seed.delivery(
                endpoint,
                status=status,
                created_at=at - timedelta(minutes=1),
                attempts=2,
                last_error="connection_error: Connection refused",
            )
        )
    for status, later in (
        ("pending", timedelta(minutes=5)),  # retry_scheduled
        ("delivering", timedelta(0)),  # in_flight
        ("pending", timedelta(0)),  # due
    ):
        deliveries.append(
            seed.delivery(
                failing,
                status=status,
                created_at=now - timedelta(minutes=2),
                attempts=1,
                next_attempt_at=now + later,
                last_status_code=503,
                last_error="http 503",
            )
        )
    return {
        "user": user,
        "slug": acme.slug,
        "endpoints": [failing, paused, testing, disabled, unverified],
        "deliveries": deliveries,
    }


def pages(relay) -> dict[str, str]:
    slug = relay["slug"]
    found = {
        "portal deliveries": reverse("portal:delivery_list", args=[slug]),
        "portal dead": reverse("portal:delivery_list", args=[slug]) + "?status=dead",
        "console deliveries": reverse("admin:deliveries_delivery_changelist"),
        "console dead letters": reverse("admin:deliveries_deadletter_changelist"),
        "console endpoints": reverse("admin:endpoints_endpoint_changelist"),
        "console health": reverse("admin:endpoints_endpointhealth_changelist"),
        "console pipeline": reverse("admin:deliveries_pipeline"),
    }
    for endpoint in relay["endpoints"]:
        found[f"portal {endpoint.url}"] = reverse(
            "portal:endpoint_detail", args=[slug, endpoint.pk]
        )
        found[f"portal health {endpoint.url}"] = reverse(
            "portal:endpoint_health", args=[slug, endpoint.pk]
        )
        found[f"console {endpoint.url}"] = reverse(
            "admin:endpoints_endpoint_change", args=[endpoint.pk]
        )
        found[f"console health {endpoint.url}"] = reverse(
            "admin:endpoints_endpointhealth_change", args=[endpoint.pk]
        )
    for delivery in relay["deliveries"]:
        found[f"portal {delivery.pk}"] = reverse(
            "portal:delivery_detail", args=[slug, delivery.pk]
        )
        found[f"console {delivery.pk}"] = reverse(
            "admin:deliveries_delivery_change", args=[delivery.pk]
        )
    return found


def test_every_error_kind_and_held_reason_on_a_page_is_in_words(client, relay):
    client.force_login(relay["user"])
    shown = {}
    for name, url in pages(relay).items():
        response = client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        found = codes_shown(response.content.decode())
        if found:
            shown[name] = found
    assert not shown, "\n".join(f"{name}: {codes}" for name, codes in shown.items())


def test_the_pipeline_says_why_an_endpoint_is_paused(client, relay):
    client.force_login(relay["user"])
    page = client.get(reverse("admin:deliveries_pipeline")).content.decode()
    assert "after 10 failures in a row (last: could not connect)" in page


def test_relay_status_text_says_words_and_json_keeps_codes(relay):
    text, document = StringIO(), StringIO()
    call_command("relay_status", stdout=text)
    call_command("relay_status", "--json", stdout=document)
    assert codes_shown(text.getvalue()) == []
    assert "after 10 failures in a row (last: could not connect)" in text.getvalue()
    [group] = json.loads(document.getvalue())["dead_letters"]["endpoints"]
    assert group["top_error"] in {stored(kind) for kind in FAILURES}
