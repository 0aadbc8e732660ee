"""Custom header values are write-only (issue 19, item 5): the portal shows
names and "value set", never a value; editing keeps a value unless replaced;
values are encrypted at rest and rotate with the signing secrets."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from deliveries.dispatch.jobs import jobs_load
from deliveries.models import Delivery
from endpoints.models import Endpoint
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.relayproject.portal.test_access import MERCHANT_ROUTES, ids, url_for
from tests.support import factories
from tests.support.api import api_as, assert_problem

SECRET_HEADERS = {
    "Authorization": "Bearer tok-4f1d9c2e-value",
    "X-Tenant": "tenant-77a0-value",
}
BEFORE = [("endpoints", "0007_apikey_create_permission_owner_links")]


def column() -> str:
    """What a database dump of the endpoints' headers column holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM endpoints_endpoint")
        return repr(cursor.fetchall())


def no_value_in(text: str) -> None:
    for value in SECRET_HEADERS.values():
        assert value not in text
        assert value.split("-")[1] not in text  # nor a piece of it


@pytest.fixture
def with_headers(world):
    endpoint_update(endpoint=world.mine.endpoint, headers=SECRET_HEADERS, now=utcnow())
    world.mine.endpoint.refresh_from_db()
    return world


@pytest.mark.parametrize("who", ["viewer", "owner"])
@pytest.mark.parametrize("route", MERCHANT_ROUTES, ids=ids)
def test_no_portal_page_or_form_shows_a_header_value(client, with_headers, route, who):
    client.force_login(getattr(with_headers, who))
    response = client.get(url_for(route, with_headers.mine))
    no_value_in(response.content.decode())


@pytest.mark.parametrize("who", ["viewer", "owner"])
def test_the_endpoint_page_shows_each_name_and_value_set(client, with_headers, who):
    client.force_login(getattr(with_headers, who))
    side = with_headers.mine
    html = client.get(
        reverse("portal:endpoint_detail", args=[side.merchant.slug, side.endpoint.pk])
    ).content.decode()
    shown = html.split('id="headers-shown"', 1)[1].split("</dd>", 1)[0]
    for name in SECRET_HEADERS:
        assert f"<code>{name}</code> <small>value set</small>" in shown


def edit(client, side, **fields):
    return client.post(
        reverse("portal:endpoint_edit", args=[side.merchant.slug, side.endpoint.pk]),
        {"url": side.endpoint.url, **fields},
    )


def test_saving_the_form_untouched_keeps_every_value(client, with_headers):
    client.force_login(with_headers.owner)
    assert edit(client, with_headers.mine, description="changed").status_code == 302
    endpoint = Endpoint.objects.get(pk=with_headers.mine.endpoint.pk)
    assert endpoint.description == "changed"
    assert endpoint.headers == SECRET_HEADERS


def test_a_value_is_replaced_only_when_written_again(client, with_headers):
    client.force_login(with_headers.owner)
    # Names ignore case: this replaces Authorization, it does not add a second.
    edit(client, with_headers.mine, headers="authorization: Bearer new-one")
    endpoint = Endpoint.objects.get(pk=with_headers.mine.endpoint.pk)
    assert endpoint.headers == {
        "X-Tenant": SECRET_HEADERS["X-Tenant"],
        "authorization": "Bearer new-one",
    }


def test_a_ticked_header_is_removed_and_the_others_kept(client, with_headers):
    client.force_login(with_headers.owner)
    edit(client, with_headers.mine, remove_headers=["X-Tenant"], headers="X-New: n")
    endpoint = Endpoint.objects.get(pk=with_headers.mine.endpoint.pk)
    assert endpoint.headers == {
        "Authorization": SECRET_HEADERS["Authorization"],
        "X-New": "n",
    }


@pytest.mark.parametrize("value", ["a\u0001b", "a\u2028b", "a\x85b", "a\x7fb"])
def test_a_control_character_in_a_value_is_a_form_error_naming_it(
    client, with_headers, value
):
    client.force_login(with_headers.owner)
    response = edit(client, with_headers.mine, headers=f"X-New: {value}")
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert any(e.startswith("X-New: ") for e in errors["headers"]), errors
    endpoint = Endpoint.objects.get(pk=with_headers.mine.endpoint.pk)
    assert endpoint.headers == SECRET_HEADERS


@pytest.mark.parametrize("value", ["a\u0001b", "a\u2028b", "a\x7fb", "caf\u00e9"])
def test_a_control_character_in_a_value_is_a_422_naming_the_header(db, value):
    factories.merchant("acme")
    response = api_as(None).post(
        "/merchants/acme/endpoints",
        {"url": "http://127.0.0.1:9/hook", "headers": {"X-Token": value}},
    )
    body = assert_problem(response, 422, ["body", "headers"])
    assert "X-Token: " in " ".join(e["msg"] for e in body["errors"])
    assert not Endpoint.objects.exists()


def test_values_are_encrypted_at_rest_and_sent_in_clear(with_headers):
    no_value_in(column())
    assert "Authorization" in column()  # names stay readable
    now = utcnow()
    Delivery.objects.update(claimed_until=now)
    [job] = jobs_load(
        delivery_ids=[with_headers.mine.delivery.pk],
        lease_until=now,
        probe_ids=set(),
        now=now,
    )
    assert dict(job.headers) == SECRET_HEADERS


def test_rotation_re_encrypts_header_values(with_headers, settings):
    old_key, new_key = settings.RELAY_ENCRYPTION_KEYS[0], Fernet.generate_key().decode()
    before = column()
    settings.RELAY_ENCRYPTION_KEYS = [new_key, old_key]
    out = io.StringIO()
    call_command("reencrypt_secrets", stdout=out)
    assert "custom header values of 1 endpoint(s)" in out.getvalue()
    settings.RELAY_ENCRYPTION_KEYS = [new_key]  # the old key is gone now
    assert column() != before
    no_value_in(column())
    assert Endpoint.objects.get(pk=with_headers.mine.endpoint.pk).headers == (
        SECRET_HEADERS
    )


@pytest.mark.parametrize("name", ["X-Trail\n", "Host\n"])
def test_a_header_name_ending_in_a_newline_is_refused_by_the_api(db, name):
    factories.merchant("acme")
    response = api_as(None).post(
        "/merchants/acme/endpoints",
        {"url": "http://127.0.0.1:9/hook", "headers": {name: "v"}},
    )
    assert_problem(response, 422, ["body", "headers"])
    assert not Endpoint.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_values_stored_in_clear():
    endpoint = factories.endpoint()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE endpoints_endpoint SET headers = %s WHERE id = %s",
                ['{"Authorization": "Bearer tok-4f1d9c2e-value"}', endpoint.pk],
            )
        assert "tok-4f1d9c2e" in column()  # in clear, as before the change
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    no_value_in(column())
    assert Endpoint.objects.get(pk=endpoint.pk).headers == {
        "Authorization": "Bearer tok-4f1d9c2e-value"
    }
