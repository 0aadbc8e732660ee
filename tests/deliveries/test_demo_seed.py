"""The seeded demo (`manage.py seed_demo`) has something on every screen."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from deliveries.demo_seed import CATALOGUE, FAILING_URL, MERCHANT_USER, STAFF
from deliveries.models import Delivery
from endpoints.models import Endpoint, EventType

pytestmark = pytest.mark.django_db

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def seeded(settings) -> str:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    out = StringIO()
    call_command("seed_demo", "--base-url", BASE, stdout=out)
    return out.getvalue()


def test_the_seeded_demo_shows_catalogue_dead_letter_and_ordered_endpoint_in_portal_and_admin(
    client, seeded
):
    ordered = Endpoint.objects.get(ordered=True)
    dead = Delivery.objects.filter(
        status=Delivery.Status.DEAD, endpoint__url=FAILING_URL
    )
    assert dead.count() >= 1
    letter = dead.first()

    users = get_user_model().objects
    merchant_user = users.get(username=MERCHANT_USER[0])
    assert merchant_user.check_password(MERCHANT_USER[1])  # as the banner says
    client.force_login(merchant_user)
    slug = ordered.merchant.slug
    catalogue = client.get(reverse("portal:catalogue", args=[slug])).content.decode()
    for name, *_ in CATALOGUE:
        assert name in catalogue
    assert "8812" in catalogue  # an example, shown
    dead_list = client.get(
        reverse("portal:delivery_list", args=[slug]), {"status": "dead"}
    ).content.decode()
    assert letter.pk in dead_list
    detail = client.get(
        reverse("portal:endpoint_detail", args=[slug, ordered.pk])
    ).content.decode()
    assert "ordered: events sharing an ordering key" in detail

    client.logout()
    staff = users.get(username=STAFF[0])
    assert staff.check_password(STAFF[1])
    client.force_login(staff)
    types = client.get("/admin/endpoints/eventtype/").content.decode()
    assert all(name in types for name, *_ in CATALOGUE)
    letters = client.get("/admin/deliveries/deadletter/").content.decode()
    assert letter.pk in letters
    ordered_list = client.get(
        "/admin/endpoints/endpoint/", {"ordered__exact": "1"}
    ).content.decode()
    assert ordered.pk in ordered_list


def test_seeding_twice_adds_nothing_but_a_new_key(seeded):
    counts = (
        EventType.objects.count(),
        Endpoint.objects.count(),
        Delivery.objects.count(),
    )
    again = StringIO()
    call_command("seed_demo", "--base-url", BASE, stdout=again)
    assert (
        EventType.objects.count(),
        Endpoint.objects.count(),
        Delivery.objects.count(),
    ) == counts
    assert get_user_model().objects.count() == 2
    assert again.getvalue() != seeded  # the API key is new each time
