"""Over the API only: provision, publish, drain, and a receiver that verifies."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from standardwebhooks import Webhook

from tests.support.api import api_as


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_events_posted_over_the_api_arrive_signed_and_show_succeeded(
    on_postgres, receiver
):
    api = api_as(None)
    assert api.post("/merchants", {"slug": "acme", "name": "Acme"}).status_code == 201
    endpoint = api.post("/merchants/acme/endpoints", {"url": receiver.url}).json()
    single = api.post(
        "/events", {"merchant": "acme", "type": "order.created", "data": {"n": 0}}
    ).json()
    batch = api.post(
        "/events/batch",
        {
            "events": [
                {"merchant": "acme", "type": "order.paid", "data": {"n": i}}
                for i in (1, 2)
            ]
        },
    ).json()["items"]

    call_command("run_dispatcher", "--drain", stdout=StringIO())

    received = receiver.wait_for(3)
    assert len(received) == 3
    verifier = Webhook(endpoint["secret"])
    payloads = [
        verifier.verify(r.body, {k.lower(): v for k, v in r.headers.items()})
        for r in received
    ]
    assert sorted(p["data"]["n"] for p in payloads) == [0, 1, 2]
    for event in [single, *batch]:
        shown = api.get(f"/events/{event['id']}").json()
        assert [d["status"] for d in shown["deliveries"]] == ["succeeded"]
