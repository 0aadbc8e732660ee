"""Every admin page renders with data, in a number of queries that does not grow with rows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.support.admin import populate

pytestmark = pytest.mark.django_db

# The same bound at 3 rows and 30: what matters is that it does not grow.
# Pipeline health is the most: one more for failing and operational endpoints,
# one more when its stored latency is stale (read it, then store it), one
# for endpoints under DEGRADED_SUCCESS_RATE.
# Three more, at most once a minute per session and on a fresh session's
# first request as here: the idle-session touch (relayproject/lib/sessions.py).
MAX_QUERIES = 24

LISTS = [
    "admin:index",
    "admin:endpoints_merchant_changelist",
    "admin:endpoints_endpoint_changelist",
    "admin:endpoints_endpointhealth_changelist",
    "admin:endpoints_apikey_changelist",
    "admin:deliveries_event_changelist",
    "admin:deliveries_delivery_changelist",
    "admin:deliveries_deadletter_changelist",
    "admin:deliveries_pipeline",
]


@pytest.mark.parametrize("rows", [3, 30])
@pytest.mark.parametrize("name", LISTS)
def test_list_page_renders_in_bounded_queries(
    admin_client, django_assert_max_num_queries, name, rows
):
    populate(rows)

    with django_assert_max_num_queries(MAX_QUERIES):
        response = admin_client.get(reverse(name))

    assert response.status_code == 200


def _change_urls(world) -> list[str]:
    d = world["deliveries"][3]  # dead, with three attempts
    return [
        reverse("admin:deliveries_delivery_change", args=[d.pk]),
        reverse("admin:deliveries_deadletter_change", args=[d.pk]),
        reverse("admin:deliveries_event_change", args=[d.event_id]),
        reverse("admin:endpoints_endpoint_change", args=[d.endpoint_id]),
        reverse("admin:endpoints_endpointhealth_change", args=[d.endpoint_id]),
        reverse("admin:endpoints_merchant_change", args=[world["merchants"][0].pk]),
    ]


@pytest.mark.parametrize("rows", [4, 30])
@pytest.mark.parametrize("index", range(6))
def test_change_page_renders_in_bounded_queries(
    admin_client, django_assert_max_num_queries, rows, index
):
    url = _change_urls(populate(rows))[index]

    with django_assert_max_num_queries(MAX_QUERIES):
        response = admin_client.get(url)

    assert response.status_code == 200


def test_delivery_list_shows_rows_with_their_endpoint_and_a_post_replay_button(
    admin_client,
):
    world = populate(4)
    dead = world["deliveries"][3]

    html = admin_client.get(
        reverse("admin:deliveries_delivery_changelist")
    ).content.decode()

    assert dead.pk in html and dead.endpoint.url in html
    replay_url = reverse("admin:deliveries_delivery_replay", args=[dead.pk])
    assert f'formmethod="post" formaction="{replay_url}?' in html
    assert f'href="{replay_url}' not in html
    assert html.count("replay-button") == 2  # the succeeded and the dead row


def test_dead_letter_list_shows_only_dead_rows_and_the_analysis(admin_client):
    world = populate(8)
    dead = [d for d in world["deliveries"] if d.status == "dead"]
    alive = [d for d in world["deliveries"] if d.status != "dead"]

    response = admin_client.get(
        reverse("admin:deliveries_deadletter_changelist") + "?window=7d"
    )

    html = response.content.decode()
    assert all(d.pk in html for d in dead)
    assert not any(d.pk in html for d in alive)
    assert response.context["window"] == "7d"
    assert {g.endpoint_id for g in response.context["analysis"]} == {
        d.endpoint_id for d in dead
    }
    assert "Replay all dead for this endpoint" in html


def test_delivery_change_page_shows_attempts_and_a_replay_form(admin_client):
    dead = populate(4)["deliveries"][3]

    html = admin_client.get(
        reverse("admin:deliveries_delivery_change", args=[dead.pk])
    ).content.decode()

    assert html.count("HTTP 500") >= 3  # one per attempt, and the delivery's own
    assert "x" * 200 + "…" in html  # the response excerpt, cut
    assert 'id="replay-button"' in html and 'name="csrfmiddlewaretoken"' in html


def test_endpoint_page_masks_secrets_and_links_to_its_deliveries(admin_client):
    endpoint = populate(3)["endpoints"][0]
    secret = endpoint.secrets.get().secret

    html = admin_client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()

    assert secret not in html
    assert endpoint.secrets.get().masked in html
    assert f"?endpoint__id__exact={endpoint.pk}" in html


@pytest.mark.parametrize("term", ["dlv", "evt", "ep", "url"])
def test_delivery_search_finds_by_each_kind_of_id_and_by_url(admin_client, term):
    world = populate(6)
    target = world["deliveries"][5]
    query = {
        "dlv": target.pk,
        "evt": target.event_id,
        "ep": target.endpoint_id,
        "url": "hook5",
    }[term]

    response = admin_client.get(
        reverse("admin:deliveries_delivery_changelist"), {"q": query}
    )

    assert [d.pk for d in response.context["cl"].result_list] == [target.pk]


def test_pipeline_page_shows_the_summary_and_an_inline_svg_chart(admin_client):
    populate(8)

    html = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()

    assert "<svg" in html and 'class="delivered"' in html
    assert "Awaiting retry" in html and "Oldest pending" in html
    assert "http://" not in html.split("<svg", 1)[1].split("</svg>")[0].replace(
        "http://www.w3.org/2000/svg", ""
    )


def test_admin_index_links_to_the_pipeline_page(admin_client):
    html = admin_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:deliveries_pipeline") in html
    assert reverse("admin:deliveries_deadletter_changelist") in html


def test_quick_row_checkbox_and_urls_are_what_django_draws():
    from django.contrib import admin as django_admin
    from django.contrib.admin import ModelAdmin

    from deliveries.models import Delivery
    from endpoints.admin.present import row_url

    world = populate(3)
    delivery = world["deliveries"][0]
    quick = django_admin.site._registry[Delivery]

    assert quick.action_checkbox(delivery) == ModelAdmin.action_checkbox(
        quick, delivery
    )
    change = "admin:deliveries_delivery_change"
    assert row_url(change, delivery.pk) == reverse(change, args=[delivery.pk])
    odd = "a b/ü"  # not a plain id: reversed as Django does, quoting and all
    assert row_url(change, odd) == reverse(change, args=[odd])
