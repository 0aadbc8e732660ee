"""The event-type picker: grouped, described, deprecated types marked, the
subscription kept, and a search box for script to drive."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from endpoints.models import EventType
from relayproject.portal.present import TypeOption, type_groups


def test_types_are_grouped_by_their_first_part_in_order():
    groups = type_groups(
        ["refund.created", "payment.refunded", "payment.captured"],
        described={"payment.captured": ("Money taken.", False)},
        checked=["payment.refunded"],
    )
    assert groups == [
        (
            "payment",
            [
                TypeOption("payment.captured", "Money taken.", False, False),
                TypeOption("payment.refunded", "", False, True),
            ],
        ),
        ("refund", [TypeOption("refund.created", "", False, False)]),
    ]


def test_the_form_shows_groups_descriptions_and_deprecated_marks(client, world):
    EventType.objects.create(name="payment.captured", description="Money taken.")
    EventType.objects.create(name="payment.voided", deprecated=True)
    client.force_login(world.owner)
    html = client.get(
        reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    ).content.decode()
    start = html.index('id="type-picker"')
    picker = html[start : html.index('id="type-none"', start)]
    assert "<legend>payment</legend>" in picker
    assert "Money taken." in picker
    voided = picker[picker.index('value="payment.voided"') :]
    assert voided.index("deprecated") < voided.index("</label>")
    assert 'id="type-search"' in picker and re.search(r"type-search[^>]*hidden", picker)


def test_the_picker_keeps_and_saves_the_subscription(client, world):
    EventType.objects.create(name="payment.captured")
    EventType.objects.create(name="payment.refunded")
    client.force_login(world.owner)
    endpoint = world.mine.endpoint
    slug = world.mine.merchant.slug
    edit = reverse("portal:endpoint_edit", args=[slug, endpoint.pk])
    response = client.post(
        edit,
        {"url": endpoint.url, "known_event_types": ["payment.refunded"]},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint.refresh_from_db()
    assert endpoint.event_types == ["payment.refunded"]
    html = client.get(edit).content.decode()
    assert re.search(r'value="payment.refunded" checked', html)
    assert not re.search(r'value="payment.captured" checked', html)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_search_box_narrows_the_picker_in_chromium(live_server):
    from django.contrib.auth.models import User

    from endpoints.models import Membership
    from tests.support import factories
    from tests.support.browser import chromium_page

    merchant = factories.merchant("acme")
    user = User.objects.create_user("picker", password="pw-for-tests-only")
    Membership.objects.create(user=user, merchant=merchant, role="owner")
    EventType.objects.create(name="payment.captured", description="Money taken.")
    EventType.objects.create(name="order.shipped", description="On its way.")
    with chromium_page(width=390, height=844) as page:
        page.goto(f"{live_server.url}/portal/login/")
        page.fill("#id_username", "picker")
        page.fill("#id_password", "pw-for-tests-only")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login/" not in url)
        page.goto(f"{live_server.url}/portal/m/acme/endpoints/new/")
        page.fill("#type-search", "on its way")
        assert page.locator(".type-option:visible").all_inner_texts() == [
            "order.shipped\nOn its way."
        ]
        page.fill("#type-search", "nothing like it")
        assert page.locator("#type-none").is_visible()
