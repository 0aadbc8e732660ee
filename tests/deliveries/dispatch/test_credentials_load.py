"""An endpoint's credentials on the send path are read once per endpoint and
credentials_version (deliveries/dispatch/credentials.py), and a row whose
endpoint changed or went between its claim and that read is given back
unsent and unspent, never sent with credentials that do not go with the URL
it was claimed with, and never crashing the dispatcher."""

from __future__ import annotations

import base64
import random

import pytest

from deliveries.dispatch import credentials
from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.endpoint_auth import TOKEN_BODY_LIMIT, AuthorizingSender
from deliveries.dispatch.transport import AsyncSender
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from endpoints.models import Endpoint
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _nothing_kept():
    credentials.forget_all()
    yield
    credentials.forget_all()


def basic(endpoint: Endpoint, user: str, password: str) -> Endpoint:
    endpoint.auth_type = "basic"
    endpoint.auth_settings = {"username": user}
    endpoint.auth_secret = password
    endpoint.credentials_changed()
    endpoint.save()
    return endpoint


def dispatcher() -> Dispatcher:
    options = {"timeout": 5, "allow_private": True}
    return Dispatcher(
        worker_id="w-creds",
        sender=KindSender(
            http=AuthorizingSender(
                http=AsyncSender(body_limit=1024, **options),
                tokens=AsyncSender(body_limit=TOKEN_BODY_LIMIT, **options),
            ),
            **options,
        ),
        batch_size=10,
        concurrency=4,
        lease_seconds=60,
        rand=random.Random(5),
    )


def run_once() -> None:
    worker = dispatcher()
    try:
        worker.run_once()
    finally:
        worker.close()


def test_credentials_are_read_once_per_version(django_assert_num_queries):
    endpoint = basic(factories.endpoint(), "relay", "pw-1")
    version = endpoint.credentials_version

    with django_assert_num_queries(1):
        first = credentials.credentials_of({endpoint.pk: version})
    with django_assert_num_queries(0):
        again = credentials.credentials_of({endpoint.pk: version})

    assert first[endpoint.pk].auth.secret == "pw-1"
    assert again[endpoint.pk] is first[endpoint.pk]


def test_a_version_that_moved_on_is_stale_and_the_new_one_is_kept(
    django_assert_num_queries,
):
    endpoint = basic(factories.endpoint(), "relay", "pw-1")
    claimed = endpoint.credentials_version
    basic(endpoint, "relay", "pw-2")  # saved after the claim read its version

    assert credentials.credentials_of({endpoint.pk: claimed})[endpoint.pk].stale
    with django_assert_num_queries(0):
        now = credentials.credentials_of({endpoint.pk: endpoint.credentials_version})
    assert now[endpoint.pk].auth.secret == "pw-2"


def test_an_endpoint_deleted_since_its_claim_is_stale():
    endpoint = basic(factories.endpoint(), "relay", "pw-1")
    version = endpoint.credentials_version
    Endpoint.objects.filter(pk=endpoint.pk).delete()

    assert credentials.credentials_of({endpoint.pk: version})[endpoint.pk].stale


def test_no_credentials_need_no_read(django_assert_num_queries):
    endpoint = factories.endpoint()
    with django_assert_num_queries(0):
        found = credentials.credentials_of({endpoint.pk: ""})
    assert found[endpoint.pk] is credentials.NONE


def test_what_is_kept_is_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(credentials, "KEPT_BYTES", 2000)
    endpoints = [basic(factories.endpoint(), "relay", "p" * 600) for _ in range(4)]
    for endpoint in endpoints:
        credentials.credentials_of({endpoint.pk: endpoint.credentials_version})

    kept = dict(credentials._kept)
    assert len(kept) == 2  # about 860 characters each: two fit in 2000
    assert credentials._kept_bytes == sum(c.size for c in kept.values()) <= 2000
    # The most recently read are the ones kept.
    assert {pk for pk, _ in kept} == {e.pk for e in endpoints[2:]}


def _change_before_the_read(monkeypatch, change) -> None:
    """Run change() just before the dispatcher reads credentials: between
    its claim (which read the version) and the load."""
    real = credentials._read

    def read(ids, merchants):
        change()
        return real(ids, merchants)

    monkeypatch.setattr(credentials, "_read", read)


def _authorization(received) -> str:
    return base64.b64decode(received.headers["Authorization"].split()[1]).decode()


def test_changed_between_claim_and_load_goes_back_unspent_then_out_anew(
    receiver, monkeypatch
):
    endpoint = basic(factories.endpoint(url=receiver.url), "relay", "old-pw")
    event_publish(merchant=endpoint.merchant, type="a", data={})
    _change_before_the_read(
        monkeypatch,
        lambda: basic(Endpoint.objects.get(pk=endpoint.pk), "relay", "new-pw"),
    )

    run_once()  # claims with the old version, loads the new: gives it back

    delivery = Delivery.objects.get(endpoint=endpoint)
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert not Attempt.objects.filter(delivery=delivery).exists()
    assert receiver.received == []

    monkeypatch.undo()
    run_once()  # claimed again, with the version as it is now

    (got,) = receiver.wait_for(1)
    assert _authorization(got) == "relay:new-pw"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == ("succeeded", 1)


def test_deleted_between_claim_and_load_does_not_stop_the_dispatcher(
    receiver, monkeypatch
):
    doomed = basic(factories.endpoint(url=receiver.url), "relay", "pw")
    other = factories.endpoint(url=receiver.url + "other")
    for endpoint in (doomed, other):
        event_publish(merchant=endpoint.merchant, type="a", data={})
    _change_before_the_read(
        monkeypatch, lambda: Endpoint.objects.filter(pk=doomed.pk).delete()
    )

    run_once()

    # The other endpoint's delivery, claimed in the same batch, went out.
    (got,) = receiver.wait_for(1)
    assert got.path.endswith("other")
    assert not Delivery.objects.filter(endpoint_id=doomed.pk).exists()
