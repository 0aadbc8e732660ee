"""The endpoint pages say what is so: a new endpoint's verification comes
first, titles name the endpoint, "(UTC)" dates are UTC, the rarely used
fields fold away, and the chart is words below stretching bars."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from endpoints.models import Endpoint, EndpointHealth
from relayproject.lib.clock import utcnow
from relayproject.portal.forms import DeliveryFilterForm, RecoverForm
from relayproject.portal.present import short_url

pytestmark = pytest.mark.django_db


def url(world, name: str) -> str:
    return reverse(
        f"portal:{name}", args=[world.mine.merchant.slug, world.mine.endpoint.pk]
    )


def test_a_new_endpoint_awaiting_verification_says_so_before_it_is_failing(
    client, world
):
    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(
        awaiting_verification=True
    )
    EndpointHealth.objects.filter(pk=world.mine.endpoint.pk).update(
        last_failure_at=utcnow(), consecutive_failures=3
    )
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_detail")).content.decode()
    banner = page.split('id="condition"', 1)[1].split("</section>", 1)[0]
    assert "waiting for verification" in banner
    assert "is failing" not in page
    # How to echo: what arrives, what to answer, or where to paste it.
    echo = page.split('id="echo"', 1)[1].split("</section>", 1)[0]
    assert "relay.endpoint.verification" in echo
    assert '{"challenge": "…"}' in echo.replace("&quot;", '"')
    assert url(world, "endpoint_verification") in echo


def test_a_verified_endpoint_shows_no_echo_card(client, world):
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_detail")).content.decode()
    assert 'id="echo"' not in page


@pytest.mark.parametrize(
    "name", ["endpoint_detail", "endpoint_health", "endpoint_edit", "endpoint_recover"]
)
def test_endpoint_page_titles_name_the_endpoint_by_its_description(client, world, name):
    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(description="Orders")
    client.force_login(world.owner)
    page = client.get(url(world, name)).content.decode()
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert "Orders" in title and world.mine.endpoint.url not in title


def test_without_a_description_the_title_falls_back_to_the_url(client, world):
    client.force_login(world.owner)
    page = client.get(url(world, "endpoint_detail")).content.decode()
    assert world.mine.endpoint.url in page.split("</title>", 1)[0]


@pytest.mark.parametrize("typed", ["2026-03-07 14:05", "2026-03-07T14:05"])
def test_utc_dates_are_typed_and_read_as_utc(typed):
    form = DeliveryFilterForm({"since": typed})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["since"] == datetime(2026, 3, 7, 14, 5, tzinfo=UTC)


def test_utc_date_inputs_are_text_in_one_format_not_the_browsers():
    html = str(RecoverForm(initial={"since": "2026-03-07 14:05"})["since"])
    assert 'type="text"' in html and "datetime-local" not in html
    assert 'placeholder="YYYY-MM-DD HH:MM"' in html


def test_the_rarely_used_fields_are_folded_unless_set(client, world):
    client.force_login(world.owner)
    create = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    page = client.get(create).content.decode()
    advanced = page.split('id="advanced"', 1)[1].split("</details>", 1)[0]
    assert page.split('id="advanced"', 1)[1].startswith(">")  # closed
    assert 'name="max_attempts"' in advanced and 'name="filter"' in advanced
    assert 'name="url"' not in advanced and 'name="description"' not in advanced

    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(max_attempts=3)
    edit = client.get(url(world, "endpoint_edit")).content.decode()
    assert 'id="advanced" open' in edit  # a value set is never hidden


def test_an_error_in_a_folded_field_unfolds_it(client, world):
    client.force_login(world.owner)
    create = reverse("portal:endpoint_create", args=[world.mine.merchant.slug])
    page = client.post(
        create, {"url": "http://127.0.0.1:9/x", "filter": "{not json"}
    ).content.decode()
    assert 'id="advanced" open' in page and 'id="filter-errors"' in page


@pytest.mark.parametrize(
    "full, short",
    [
        (
            "http://127.0.0.1:8000/demo/receiver/ep_01abc/",
            "127.0.0.1:8000/…/ep_01abc",
        ),
        ("https://hooks.example.com/orders", "hooks.example.com/orders"),
        ("https://hooks.example.com/", "hooks.example.com/"),
        ("https://a.example.com/v2/in/orders?x=1", "a.example.com/…/orders"),
    ],
)
def test_a_long_url_is_shortened_to_its_host_and_last_part(full, short):
    assert short_url(full) == short


def test_the_deliveries_list_shows_the_short_url_with_the_full_one_in_a_title(
    client, world
):
    long = "http://127.0.0.1:9/hooks.example-merchant/webhooks/v2/incoming/orders"
    Endpoint.objects.filter(pk=world.mine.endpoint.pk).update(
        url=long, description="Orders"
    )
    client.force_login(world.owner)
    page = client.get(
        reverse("portal:delivery_list", args=[world.mine.merchant.slug])
    ).content.decode()
    assert f'title="{long}"' in page
    assert "127.0.0.1:9/…/orders" in page and f">{long}<" not in page
