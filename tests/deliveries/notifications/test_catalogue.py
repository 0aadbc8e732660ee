"""The operational event types in the event-type catalogue: there after
migrate, put back as the relay says, their examples and the relay's real
payloads valid against their schemas, and hidden from merchants."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from deliveries.notifications.catalogue import CATALOGUE, operational_types_register
from deliveries.notifications.certificates import certificates_warn
from deliveries.notifications.deadletters import (
    dead_letters_announce,
    dead_letters_collect,
)
from deliveries.notifications.operational import (
    DELIVERY_DEAD,
    ENDPOINT_FAILING,
    ENDPOINT_VERIFICATION,
    OPERATIONAL_TYPES,
)
from deliveries.notifications.services import endpoint_reenable
from deliveries.notifications.watch import watch_run
from deliveries.publish.validation import EventsRefused
from deliveries.services import event_publish
from endpoints.catalogue import catalogue_names, fields_errors, schema_problems
from endpoints.models import EventType, Membership
from endpoints.probes import endpoint_breaker_open
from endpoints.services import endpoint_disable
from relayproject.lib.clock import utcnow
from tests.deliveries.notifications.conftest import T0, attempt, failures, hours, said
from tests.support import factories

pytestmark = [pytest.mark.django_db]


def test_every_operational_type_is_in_the_catalogue_with_a_valid_example():
    rows = {t.name: t for t in EventType.objects.filter(name__startswith="relay.")}
    assert set(rows) == set(OPERATIONAL_TYPES)
    for name, row in rows.items():
        assert row.description == OPERATIONAL_TYPES[name]
        assert row.schema == CATALOGUE[name]["schema"] and not row.deprecated
        # The schema is a schema, and the documented example matches it.
        assert (
            fields_errors(
                name=None, description="", schema=row.schema, example=row.example
            )
            == {}
        )


def test_an_edited_or_deleted_operational_type_is_put_back():
    EventType.objects.filter(name=ENDPOINT_FAILING).update(
        schema=None, description="mine now", deprecated=True
    )
    EventType.objects.filter(name=DELIVERY_DEAD).delete()
    operational_types_register()
    operational_types_register()  # twice: still one row each
    failing = EventType.objects.get(name=ENDPOINT_FAILING)
    assert failing.schema == CATALOGUE[ENDPOINT_FAILING]["schema"]
    assert (failing.description, failing.deprecated) == (
        OPERATIONAL_TYPES[ENDPOINT_FAILING],
        False,
    )
    assert EventType.objects.filter(name__startswith="relay.").count() == len(CATALOGUE)


@pytest.mark.django_db(transaction=True)
def test_migrate_registers_them():
    EventType.objects.all().delete()
    call_command("migrate", verbosity=0)
    assert EventType.objects.filter(name__startswith="relay.").count() == len(CATALOGUE)


def test_the_relay_s_real_payloads_match_their_schemas(endpoint, ops_endpoint):
    """Each type emitted through the real code paths, then checked one by one
    (publishing validates them too: a drifted payload would not publish)."""
    owner = User.objects.create_user("olivia", email="olivia@acme.test")
    Membership.objects.create(user=owner, merchant=endpoint.merchant, role="owner")
    failures(endpoint, start=T0, end=T0 + hours(40), count=25)
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="opened by staff")
    watch_run(now=T0 + hours(41))  # failing: breaker open
    watch_run(now=T0 + hours(121))  # auto-disabled
    endpoint_disable(endpoint=endpoint, reason="moving", by="staff:bob", now=T0)
    watch_run(now=T0 + hours(122))  # disabled again, by staff
    endpoint_reenable(endpoint=endpoint, retry_held=False, now=utcnow())
    watch_run(now=T0 + hours(123))  # enabled
    dead = attempt(endpoint, T0 + hours(124), status=400).delivery
    type(dead).objects.filter(pk=dead.pk).update(status="dead", dead_at=T0 + hours(124))
    dead_letters_collect(now=T0 + hours(125))
    dead_letters_announce(now=T0 + hours(126))
    type(endpoint).objects.filter(pk=endpoint.pk).update(
        tls_subject="CN=relay.acme.example", tls_not_after=T0 + hours(130)
    )
    certificates_warn(now=T0 + hours(127))  # certificate_expiring

    events = said()
    # relay.endpoint.verification goes to a merchant's endpoint, with its
    # challenge added at send time: tests/acceptance/test_endpoint_verification.py
    # checks the body a receiver gets against its schema.
    assert {e.type for e in events} == set(OPERATIONAL_TYPES) - {ENDPOINT_VERIFICATION}
    for event in events:
        assert schema_problems(type=event.type, data=event.data) == [], event.type


def test_the_schemas_refuse_a_payload_that_drifts(ops_endpoint):
    with pytest.raises(EventsRefused) as refused:
        event_publish(
            merchant=ops_endpoint.merchant,
            type=ENDPOINT_FAILING,
            data={"merchant": "acme", "endpoint": {"id": "ep_1"}},
        )
    assert "url" in str(refused.value.errors)


def test_merchants_pick_from_and_browse_only_their_own_types(client):
    EventType.objects.create(name="order.paid")
    assert catalogue_names() == ["order.paid"]
    merchant = factories.merchant("acme")
    user = User.objects.create_user("alice", password="x")
    Membership.objects.create(user=user, merchant=merchant, role="owner")
    client.force_login(user)
    page = client.get(f"/portal/m/{merchant.slug}/event-types/").content.decode()
    assert "order.paid" in page and "relay.endpoint" not in page


def test_staff_read_the_operational_types_but_cannot_change_them(admin_client):
    row = EventType.objects.get(name=ENDPOINT_FAILING)
    page = admin_client.get(f"/admin/endpoints/eventtype/{row.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content  # view only
    admin_client.post(
        "/admin/endpoints/eventtype/",
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert EventType.objects.filter(pk=row.pk).exists()


def test_operational_events_publish_at_the_coalesce_edge(endpoint, ops_endpoint):
    # relay.delivery.dead with a single dead letter: count 1, first == last.
    dead = attempt(endpoint, T0, status=500).delivery
    type(dead).objects.filter(pk=dead.pk).update(status="dead", dead_at=T0)
    dead_letters_collect(now=T0 + timedelta(seconds=10))
    dead_letters_announce(now=T0 + timedelta(seconds=90))
    (event,) = said(DELIVERY_DEAD)
    assert event.data["count"] == 1
    assert event.data["first_delivery_id"] == event.data["last_delivery_id"]
