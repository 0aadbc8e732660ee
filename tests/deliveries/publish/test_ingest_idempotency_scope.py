"""Idempotency scopes: "platform" for platform keys, "merchant:<pk>" for scoped ones."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from deliveries.models import Event
from deliveries.services import event_publish
from tests.support import factories
from tests.support.api import api_as

KEY = {"Idempotency-Key": "invoice-7"}


def event_for(slug: str, n: int = 1) -> dict:
    return {"merchant": slug, "type": "order.created", "data": {"n": n}}


@pytest.mark.django_db
def test_a_merchant_with_slug_platform_cannot_touch_the_platforms_keys():
    victim = factories.merchant("victim")
    squatter = factories.merchant("platform")
    platform = api_as(None)
    assert (
        platform.post("/events", event_for(victim.slug), headers=KEY).status_code == 201
    )

    probe = api_as(squatter).post("/events", event_for("platform"), headers=KEY)

    # Its own namespace: neither a replay of the platform's event (200), nor
    # "used with another body" (422), nor "in progress" (409) - each would tell.
    assert probe.status_code == 201, probe.content
    assert "Idempotent-Replayed" not in probe
    # And the platform's own retry still replays its event.
    again = platform.post("/events", event_for(victim.slug), headers=KEY)
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"


@pytest.mark.django_db
def test_a_platform_key_cannot_block_a_merchant_named_platform_either():
    squatter = factories.merchant("platform")
    api_as(squatter).post("/events", event_for("platform"), headers=KEY)
    first = api_as(None).post("/events", event_for("platform", n=2), headers=KEY)
    assert first.status_code == 201


@pytest.mark.django_db
def test_renaming_a_slug_keeps_the_scope():
    merchant = factories.merchant("acme")
    scoped = api_as(merchant)
    assert scoped.post("/events", event_for("acme"), headers=KEY).status_code == 201
    merchant.slug = "acme-renamed"
    merchant.save()
    again = scoped.post("/events", event_for("acme-renamed"), headers=KEY)
    # Same key, same scope: the key is recognised (another body now, so 422).
    assert again.status_code == 422
    assert Event.objects.count() == 1


@pytest.mark.django_db
def test_the_migration_moves_slug_scopes_to_the_merchant_pk():
    migration = importlib.import_module(
        "deliveries.migrations.0004_idempotency_scope_by_merchant_pk"
    )
    acme = factories.merchant("acme")
    old = event_publish(
        merchant=acme,
        type="a.b",
        data={},
        idempotency_key="k1",
        idempotency_scope="acme",
    )
    renamed = event_publish(
        merchant=acme,
        type="a.b",
        data={},
        idempotency_key="k2",
        idempotency_scope="acme-before-rename",
    )
    by_platform = event_publish(
        merchant=acme,
        type="a.b",
        data={},
        idempotency_key="k1",
        idempotency_scope="platform",
    )

    migration.forward(apps, None)

    scopes = dict(Event.objects.values_list("pk", "idempotency_scope"))
    assert scopes[old.pk] == f"merchant:{acme.pk}"
    assert scopes[renamed.pk] == f"merchant:{acme.pk}"
    assert scopes[by_platform.pk] == "platform"
