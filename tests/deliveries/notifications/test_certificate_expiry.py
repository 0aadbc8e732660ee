"""relay.endpoint.certificate_expiring: said once per client certificate when
it enters CLIENT_CERT_EXPIRY_WARNING_DAYS or has expired, again for a new
certificate, never for inactive or operational endpoints; and the words a
page shows for it (endpoints/certificate_expiry.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from deliveries.notifications.certificates import certificates_warn
from deliveries.notifications.operational import CERTIFICATE_EXPIRING
from deliveries.notifications.step import check_run
from endpoints.catalogue import schema_problems
from endpoints.certificate_expiry import certificate_expiry
from endpoints.models import Endpoint
from tests.deliveries.notifications.conftest import T0, hours, said
from tests.support import factories

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def days(n: float) -> timedelta:
    return timedelta(days=n)


@pytest.fixture(autouse=True)
def _window(settings):
    settings.CLIENT_CERT_EXPIRY_WARNING_DAYS = 14


def give_certificate(endpoint: Endpoint, *, not_after: datetime) -> None:
    """What saving a client certificate leaves on the row that this reads
    (endpoints/client_credentials.py parses the PEM; here only the result)."""
    Endpoint.objects.filter(pk=endpoint.pk).update(
        tls_client_cert="-----BEGIN CERTIFICATE-----\n...",
        tls_subject="CN=relay.acme.example",
        tls_not_after=not_after,
    )


def test_a_certificate_entering_the_window_is_said_once_with_its_details(
    endpoint, ops_endpoint
):
    give_certificate(endpoint, not_after=T0 + days(20))
    assert certificates_warn(now=T0) == []  # 20 days left: not yet
    now = T0 + days(10)  # 10 days left
    assert certificates_warn(now=now) == [endpoint.pk]
    assert certificates_warn(now=now + hours(1)) == []
    assert certificates_warn(now=T0 + days(19)) == []  # nearer still: said already
    [event] = said(CERTIFICATE_EXPIRING)
    assert event.data == {
        "merchant": "acme",
        "endpoint": {
            "id": endpoint.pk,
            "url": endpoint.url,
            "description": endpoint.description,
        },
        "subject": "CN=relay.acme.example",
        "not_after": "2026-12-21T00:00:00.000Z",
        "days_left": 10,
        "expired": False,
    }
    assert schema_problems(type=CERTIFICATE_EXPIRING, data=event.data) == []
    endpoint.refresh_from_db()
    assert endpoint.tls_expiry_warned_for == endpoint.tls_not_after


def test_an_expired_certificate_is_said_as_expired(endpoint, ops_endpoint):
    give_certificate(endpoint, not_after=T0 - hours(30))
    assert certificates_warn(now=T0) == [endpoint.pk]
    [event] = said(CERTIFICATE_EXPIRING)
    assert (event.data["days_left"], event.data["expired"]) == (-2, True)


def test_a_new_certificate_is_said_again(endpoint, ops_endpoint):
    give_certificate(endpoint, not_after=T0 + days(5))
    certificates_warn(now=T0)
    give_certificate(endpoint, not_after=T0 + days(12))  # a fresh, short one
    assert certificates_warn(now=T0 + hours(1)) == [endpoint.pk]
    assert [e.data["not_after"] for e in said(CERTIFICATE_EXPIRING)] == [
        "2026-12-06T00:00:00.000Z",
        "2026-12-13T00:00:00.000Z",
    ]


def test_the_window_is_the_setting(endpoint, ops_endpoint, settings):
    settings.CLIENT_CERT_EXPIRY_WARNING_DAYS = 3
    give_certificate(endpoint, not_after=T0 + days(5))
    assert certificates_warn(now=T0) == []
    assert certificates_warn(now=T0 + days(2)) == [endpoint.pk]


def test_inactive_endpoints_and_endpoints_without_one_are_not_said(
    endpoint, ops_endpoint
):
    factories.endpoint(endpoint.merchant, url="http://127.0.0.1:9/plain")
    give_certificate(endpoint, not_after=T0 + days(1))
    Endpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
    give_certificate(ops_endpoint, not_after=T0 + days(1))  # no loops
    assert certificates_warn(now=T0) == []
    assert said(CERTIFICATE_EXPIRING) == []
    # Enabled again with the certificate still expiring: said then.
    Endpoint.objects.filter(pk=endpoint.pk).update(is_active=True)
    assert certificates_warn(now=T0) == [endpoint.pk]


def test_the_periodic_check_runs_it(endpoint, ops_endpoint):
    give_certificate(endpoint, not_after=T0 + days(1))
    report = check_run(now=T0)
    assert report is not None and report.certificates_warned == [endpoint.pk]
    assert check_run(now=T0 + hours(1)).certificates_warned == []
    assert len(said(CERTIFICATE_EXPIRING)) == 1


@pytest.mark.parametrize(
    ("left", "days_left", "expired", "words"),
    [
        (days(14), 14, False, "expires in 14 days (2026-12-15 00:00 UTC)"),
        (days(1) + hours(2), 1, False, "expires in 1 day "),
        (hours(5), 0, False, "expires within a day"),
        (timedelta(0), 0, True, "expired on 2026-12-01 00:00 UTC"),
        (-hours(1), -1, True, "expired on"),
    ],
)
def test_expiry_words(left, days_left, expired, words):
    expiry = certificate_expiry(subject="CN=x", not_after=T0 + left, now=T0)
    assert (expiry.days_left, expiry.expired) == (days_left, expired)
    assert words in expiry.words()


def test_outside_the_window_or_without_a_certificate_there_is_nothing_to_show():
    assert certificate_expiry(subject="", not_after=None, now=T0) is None
    assert (
        certificate_expiry(subject="CN=x", not_after=T0 + days(14) + hours(1), now=T0)
        is None
    )
