"""The console at a glance: one id box, URLs cut in the middle, an endpoint's
own buttons, alerts that link, a pipeline page that reloads itself, and the
relay's own words where staff act."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from deliveries.ops.summary import Alert
from deliveries.templatetags.relay_console import alert_link
from endpoints.admin.present import middle_cut
from endpoints.models import EndpointHealth
from endpoints.probes import endpoint_breaker_open
from relayproject.admin_find import id_target
from relayproject.lib.clock import utcnow
from tests.support import factories, seed
from tests.support.admin import staff

pytestmark = pytest.mark.django_db

HOST = "http://127.0.0.1:9/hooks.example-merchant-with-a-long-name/webhooks/v2/"


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("evt_01abc", ("deliveries", "event", "evt_01abc")),
        ("  dlv_01abc\n", ("deliveries", "delivery", "dlv_01abc")),
        ('"ep_01abc"', ("endpoints", "endpoint", "ep_01abc")),
        ("ep_", None),
        ("order.paid", None),
        ("", None),
    ],
)
def test_an_id_names_its_page(text, target):
    assert id_target(text) == target


def find(client, q: str):
    return client.get(reverse("admin_find"), {"q": q})


def test_each_kind_of_id_lands_on_its_page(admin_client):
    endpoint = factories.endpoint()
    delivery = seed.delivery(endpoint, status="pending", created_at=utcnow())
    for q, name in (
        (delivery.event_id, "admin:deliveries_event_change"),
        (delivery.pk, "admin:deliveries_delivery_change"),
        (endpoint.pk, "admin:endpoints_endpoint_change"),
    ):
        response = find(admin_client, q)
        assert response.status_code == 302
        assert response["Location"] == reverse(name, args=[q])


def test_an_unknown_or_unreachable_id_goes_back_saying_so(client):
    endpoint = factories.endpoint()
    client.force_login(staff("events-only", "deliveries.view_event"))
    for q, words in (
        ("dlv_nosuchdelivery", "No delivery has the id dlv_nosuchdelivery."),
        # Not theirs to view: it reads as not found, whatever exists.
        (endpoint.pk, f"No endpoint has the id {endpoint.pk}."),
        ("hello", "Paste an id that starts with evt_, dlv_ or ep_"),
    ):
        response = find(client, q)
        assert response["Location"] == reverse("admin:index")
        said = [str(m) for m in get_messages(response.wsgi_request)]
        assert any(words in m for m in said), said


def test_the_index_has_the_id_box(admin_client):
    html = admin_client.get(reverse("admin:index")).content.decode()
    assert f'action="{reverse("admin_find")}"' in html and 'name="q"' in html


def test_two_endpoints_on_one_host_read_apart_and_whole_on_hover(admin_client):
    one = factories.endpoint(url=HOST + "orders", description="Orders service")
    two = factories.endpoint(url=HOST + "refunds")
    assert middle_cut(one.url) != middle_cut(two.url)
    assert middle_cut(one.url).endswith("orders") and "…" in middle_cut(one.url)
    assert middle_cut("http://a.example/") == "http://a.example/"
    html = admin_client.get(reverse("admin:endpoints_endpoint_changelist")).content
    html = html.decode()
    assert f'title="{one.url}"' in html and f'title="{two.url}"' in html
    assert "Orders service" in html


def page_actions(client, endpoint) -> list[str]:
    html = client.get(
        reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    ).content.decode()
    return re.findall(r'id="page-action-(\w+)"', html)


def test_the_endpoint_page_pauses_resumes_and_disables_it(admin_client):
    endpoint = factories.endpoint()
    assert page_actions(admin_client, endpoint) == ["open_breaker", "disable_endpoint"]
    # The button's form, as the page posts it.
    admin_client.post(
        reverse("admin:endpoints_endpoint_changelist"),
        {"action": "open_breaker", "_selected_action": endpoint.pk, "index": "0"},
    )
    health = EndpointHealth.objects.get(pk=endpoint.pk)
    assert health.breaker_state == "open"
    assert page_actions(admin_client, endpoint) == [
        "reset_breaker",
        "disable_endpoint",
    ]


def test_staff_who_may_only_look_get_no_buttons(client):
    endpoint = factories.endpoint()
    client.force_login(staff("looker", "endpoints.view_endpoint"))
    assert page_actions(client, endpoint) == []


def test_an_alert_links_to_what_it_names():
    endpoint = factories.endpoint()
    named = Alert("breaker_open", f"Endpoint {endpoint.pk} (x) paused")
    assert alert_link(named) == reverse(
        "admin:endpoints_endpoint_change", args=[endpoint.pk]
    )
    assert alert_link(Alert("dead_growing", "Dead letters are growing")) == reverse(
        "admin:deliveries_deadletter_changelist"
    )
    assert alert_link(Alert("something_new", "words")) == ""


def test_pipeline_health_reloads_itself_and_its_alerts_are_links(admin_client):
    endpoint = factories.endpoint()
    endpoint_breaker_open(endpoint_id=endpoint.pk, reason="by a test", now=utcnow())
    html = admin_client.get(reverse("admin:deliveries_pipeline")).content.decode()
    assert '<meta http-equiv="refresh" content="30">' in html
    link = reverse("admin:endpoints_endpoint_change", args=[endpoint.pk])
    assert f'<a href="{link}">' in html


def test_lists_speak_the_relays_words_and_put_delete_last(admin_client):
    factories.endpoint()
    now = utcnow()
    seed.delivery(
        factories.endpoint(), status="dead", created_at=now, dead_at=now - timedelta(1)
    )
    html = admin_client.get(reverse("admin:deliveries_deadletter_changelist"))
    html = html.content.decode()
    assert "Select dead letter to change" not in html
    assert "<h1>Dead letters</h1>" in html
    endpoints = admin_client.get(reverse("admin:endpoints_endpoint_changelist"))
    options = re.findall(r'<option value="(\w+)"', endpoints.content.decode())
    assert options[0] == "reset_breaker" and options[-1] == "delete_selected"


def test_memberships_are_picked_by_name(admin_client):
    merchant = factories.merchant()
    html = admin_client.get(
        reverse("admin:endpoints_merchant_change", args=[merchant.pk])
    ).content.decode()
    assert "admin-autocomplete" in html and "vForeignKeyRawIdAdminField" not in html
