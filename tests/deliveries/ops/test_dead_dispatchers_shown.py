"""A dispatcher declared dead, and what was released from it, as staff and
scrapers see it: relay_status (text and --json), pipeline health, /metrics."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from deliveries.dispatch import claiming, rescue
from deliveries.dispatch.heartbeat import heartbeat_touch
from deliveries.services import event_publish
from relayproject.lib.clock import utcnow
from tests.deliveries.ops.test_metrics import scrape
from tests.support import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]


@pytest.fixture
def one_dead(settings):
    """`gone` held two deliveries and was declared dead; `alive` beats."""
    settings.DISPATCHER_DEAD_AFTER_SECONDS = 20
    endpoint = factories.endpoint()
    for n in range(2):
        event_publish(merchant=endpoint.merchant, type="a", data={"n": n})
    claiming.claim_batch(worker_id="gone", now=utcnow(), lease_seconds=600, limit=2)
    heartbeat_touch(worker_id="gone", now=utcnow() - timedelta(seconds=30))
    heartbeat_touch(worker_id="alive")
    [rescued] = rescue.dispatchers_rescue(judge="alive", dead_after=20)
    assert rescued.released == 2


def test_relay_status_lists_the_dead_dispatcher_and_what_it_released(one_dead):
    out = StringIO()
    call_command("relay_status", stdout=out)
    text = out.getvalue()

    assert (
        "Dispatchers: 1 alive, 1 stale; declared dead so far: 1, deliveries"
        " released from them: 2"
    ) in text
    assert "declared dead at" in text and "2 deliveries released" in text
    assert "WARNING: Dispatcher gone was declared dead at" in text
    assert "the 2 deliveries it held went to the other dispatchers." in text

    out = StringIO()
    call_command("relay_status", "--json", stdout=out)
    document = json.loads(out.getvalue())["dispatchers"]
    assert (document["declared_dead_total"], document["released_from_dead_total"]) == (
        1,
        2,
    )
    [gone] = [p for p in document["processes"] if p["worker_id"] == "gone"]
    assert (gone["alive"], gone["deaths"], gone["released"]) == (False, 1, 2)


def test_pipeline_health_and_metrics_show_it(one_dead, admin_client):
    page = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()

    assert "1 alive, 1 stale" in page
    assert "declared dead at" in page and "2 deliveries released" in page
    assert "declared dead 1 time, 2 deliveries released" in page
    metrics = scrape(admin_client)
    assert metrics[("relay_dispatchers_dead_total", ())] == 1
    assert metrics[("relay_dead_dispatcher_released_total", ())] == 2
    assert metrics[("relay_dispatchers_alive", ())] == 1
