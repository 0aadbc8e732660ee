"""Filters, headers, the catalogue and sending an example, through the portal forms."""

from __future__ import annotations

from django.urls import reverse

from deliveries.models import Delivery, Event
from deliveries.services import event_publish
from endpoints.catalogue import event_type_create
from endpoints.models import Endpoint, EventType
from tests.support import factories

SCHEMA = {
    "type": "object",
    "required": ["amount"],
    "properties": {"amount": {"type": "integer"}},
}


def url(name, side, *extra):
    return reverse(f"portal:{name}", args=[side.merchant.slug, *extra])


def form_data(**fields) -> dict:
    return {"url": "http://127.0.0.1:9/new", **fields}


def error_beside(html: str, field: str) -> str:
    """The text of the error list rendered inside the field's own block."""
    block = html.split(f'data-field="{field}"', 1)[1].split('<div class="field', 1)[0]
    assert 'class="errorlist"' in block, f"no error beside {field}"
    return block


def test_a_bad_filter_is_refused_beside_its_field_and_nothing_is_written(client, world):
    client.force_login(world.owner)
    before = Endpoint.objects.count()
    response = client.post(
        url("endpoint_create", world.mine),
        form_data(filter='{"data": {"amount": {"$gte": "10"}}}'),
    )
    assert response.status_code == 400
    assert "$gte compares numbers" in error_beside(response.content.decode(), "filter")
    response = client.post(url("endpoint_create", world.mine), form_data(filter="{no"))
    assert "Not JSON" in error_beside(response.content.decode(), "filter")
    assert Endpoint.objects.count() == before


def test_a_reserved_header_is_refused_beside_its_field(client, world):
    client.force_login(world.owner)
    response = client.post(
        url("endpoint_edit", world.mine, world.mine.endpoint.pk),
        form_data(headers="X-Tenant: t1\nwebhook-signature: forged"),
    )
    assert "webhook-signature is reserved" in error_beside(
        response.content.decode(), "headers"
    )
    world.mine.endpoint.refresh_from_db()
    assert world.mine.endpoint.headers == {}


def test_filter_and_headers_are_saved_from_the_form(client, world):
    client.force_login(world.owner)
    client.post(
        url("endpoint_edit", world.mine, world.mine.endpoint.pk),
        form_data(
            filter='{"data": {"n": {"$gt": 1}}}',
            headers="Authorization: Bearer s3cret\nX-Tenant: t1",
        ),
    )
    endpoint = Endpoint.objects.get(pk=world.mine.endpoint.pk)
    assert endpoint.filter == {"data": {"n": {"$gt": 1}}}
    assert endpoint.headers == {"Authorization": "Bearer s3cret", "X-Tenant": "t1"}
    html = client.get(url("endpoint_detail", world.mine, endpoint.pk)).content.decode()
    assert "Authorization" in html and "s3cret" not in html


def test_the_filter_preview_marks_the_last_events_and_saves_nothing(client, world):
    for n in (1, 5):
        event_publish(merchant=world.mine.merchant, type="order.paid", data={"n": n})
    client.force_login(world.owner)
    response = client.post(
        url("endpoint_edit", world.mine, world.mine.endpoint.pk),
        form_data(filter='{"data": {"n": {"$gt": 2}}}', preview="1"),
    )
    html = response.content.decode()
    preview = html.split('id="filter-preview"', 1)[1]
    # the world's dead delivery (n=1) and the two events above
    assert preview.count('class="passes"') == 1
    assert preview.count('class="filtered"') == 2
    world.mine.endpoint.refresh_from_db()
    assert world.mine.endpoint.filter is None


def test_the_type_picker_offers_the_catalogue_but_never_relay_test(client, world):
    EventType.objects.create(name="invoice.paid")
    EventType.objects.create(name="relay.test")
    client.force_login(world.owner)
    client.post(url("endpoint_test", world.mine, world.mine.endpoint.pk))
    html = client.get(url("endpoint_create", world.mine)).content.decode()
    assert 'value="invoice.paid"' in html
    assert 'value="order.paid"' in html  # seen in this merchant's events
    assert 'value="relay.test"' not in html


def test_the_new_endpoint_hints_say_what_they_mean(client, db):
    merchant = factories.merchant("solo")
    from tests.support.portal import user_with_role

    user = user_with_role(merchant, "owner", "solo")
    client.force_login(user)
    html = client.get(reverse("portal:endpoint_create", args=["solo"])).content.decode()
    assert "picked here or above" not in html
    assert "every payment. type" not in html
    assert "every type that starts with &#x27;payment.&#x27;" in html


def test_an_example_is_validated_then_sent_to_that_endpoint_only(client, world):
    # Through the service, which also clears this process's schema cache.
    event_type_create(name="order.created", schema=SCHEMA, example={"amount": 3})
    other = factories.endpoint(world.mine.merchant)
    client.force_login(world.owner)
    example = url("endpoint_example", world.mine, world.mine.endpoint.pk)
    page = client.get(example).content.decode()
    assert "&quot;amount&quot;: 3" in page  # the example, ready to edit
    response = client.post(
        example, {"event_type": "order.created", "data": '{"amount": "three"}'}
    )
    assert "At amount:" in error_beside(response.content.decode(), "data")
    assert not Event.objects.filter(type="order.created").exists()
    response = client.post(
        example, {"event_type": "order.created", "data": '{"amount": 4}'}
    )
    delivery = Delivery.objects.get(event__type="order.created")
    assert delivery.endpoint_id == world.mine.endpoint.pk != other.pk
    assert delivery.event.data == {"amount": 4}
    assert response["Location"] == url("delivery_detail", world.mine, delivery.pk)


def test_the_catalogue_page_lists_types_with_schema_and_example(client, world):
    EventType.objects.create(
        name="order.created",
        description="An order was placed.",
        schema=SCHEMA,
        example={"amount": 3},
    )
    EventType.objects.create(name="order.legacy", deprecated=True)
    client.force_login(world.viewer)
    html = client.get(url("catalogue", world.mine)).content.decode()
    assert "An order was placed." in html and "&quot;amount&quot;: 3" in html
    assert "deprecated" in html
    assert 'aria-current="page">Event types' in html
