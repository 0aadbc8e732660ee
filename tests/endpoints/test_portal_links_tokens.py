"""Portal link tokens: never in a log line, spent by any attempt, opened only by POST."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from endpoints import portal_links
from endpoints.models import Membership, Merchant, PortalLink
from relayproject.lib.clock import utcnow
from relayproject.lib.logs import logging_config
from tests.support import factories

pytestmark = pytest.mark.django_db


def link_url(token: str) -> str:
    return reverse("portal:link_open", args=[token])


def new_link(merchant: Merchant, role: str = "developer") -> str:
    _, token = portal_links.portal_link_create(
        merchant=merchant, role=role, created_by="test", now=utcnow()
    )
    return token


@pytest.fixture
def real_handlers():
    """The root logger configured exactly as settings.LOGGING does, in one format,
    its console handler writing to a buffer; put back as it was afterwards."""
    buffers = []

    def configure(log_format: str) -> io.StringIO:
        logging.config.dictConfig(logging_config(log_format=log_format, level="INFO"))
        buffer = io.StringIO()
        (handler,) = logging.getLogger().handlers
        handler.setStream(buffer)
        buffers.append(buffer)
        return buffer

    yield configure
    logging.config.dictConfig(django_settings.LOGGING)


@pytest.mark.parametrize("log_format", ["plain", "json"])
def test_no_log_line_carries_a_link_token(real_handlers, log_format):
    buffer = real_handlers(log_format)
    acme = factories.merchant("acme")
    shut = factories.merchant("shut")
    used, expired, inactive = new_link(acme), new_link(acme), new_link(shut)
    PortalLink.objects.filter(token_hash=portal_links._hash(expired)).update(
        expires_at=utcnow() - timedelta(seconds=1)
    )
    Merchant.objects.filter(pk=shut.pk).update(is_active=False)
    unknown = "unknown-" + new_link(acme)[8:]  # the shape of a token, never made
    strict = Client(enforce_csrf_checks=True)

    Client().post(link_url(used))
    answers = {
        "used again": Client().post(link_url(used)).status_code,  # 410 "Gone"
        "expired": Client().post(link_url(expired)).status_code,
        "inactive": Client().post(link_url(inactive)).status_code,
        "unknown": Client().post(link_url(unknown)).status_code,  # 404 "Not Found"
        "page": Client().get(link_url(unknown)).status_code,
        "no csrf": strict.post(link_url(unknown)).status_code,  # 403 "Forbidden"
        "wrong method": Client().put(link_url(unknown)).status_code,  # 405
        "bad path": Client().get(link_url(unknown) + "extra/").status_code,  # 404
    }

    assert answers == {
        "used again": 410,
        "expired": 410,
        "inactive": 403,
        "unknown": 404,
        "page": 200,
        "no csrf": 403,
        "wrong method": 405,
        "bad path": 404,
    }
    text = buffer.getvalue()
    lines = text.splitlines()
    # Django's request lines were written, through the real handler, scrubbed.
    assert any("Gone: /portal/link/[redacted]/" in line for line in lines)
    assert any("Not Found: /portal/link/[redacted]/" in line for line in lines)
    assert any("portal link refused" in line for line in lines)
    if log_format == "json":
        assert all(json.loads(line) for line in lines)
    for token in (used, expired, inactive, unknown):
        assert token not in text
        assert token[:12] not in text


def test_a_traceback_through_the_link_page_is_scrubbed_too(real_handlers):
    buffer = real_handlers("plain")
    token = new_link(factories.merchant("acme"))
    try:
        raise RuntimeError(f"failed on /portal/link/{token}/")
    except RuntimeError:
        logging.getLogger("django.request").exception(
            "Internal Server Error: %s", f"/portal/link/{token}/"
        )

    assert "RuntimeError: failed on /portal/link/[redacted]/" in buffer.getvalue()
    assert token not in buffer.getvalue()


def test_a_get_of_a_link_does_not_end_the_session_or_use_the_link():
    acme = factories.merchant("acme")
    user = User.objects.create_user("owner", password="x" * 16)
    Membership.objects.create(user=user, merchant=acme, role="owner")
    client = Client()
    client.force_login(user)
    token = new_link(factories.merchant("other"))

    page = client.get(link_url(token))

    assert page.status_code == 200
    html = page.content.decode()
    assert 'method="post"' in html and "signed in here as <strong>owner" in html
    assert page["Referrer-Policy"] == "origin"
    assert "no-store" in page["Cache-Control"]
    # Still signed in as before, and the link is still unused.
    assert client.get(reverse("portal:endpoint_list", args=["acme"])).status_code == 200
    assert PortalLink.objects.get().used_at is None


@pytest.mark.parametrize("why", ["expired", "inactive"])
def test_a_refused_link_is_spent_and_does_not_open_later(why):
    acme = factories.merchant("acme")
    token = new_link(acme)
    link = PortalLink.objects.get()
    if why == "expired":
        PortalLink.objects.update(expires_at=utcnow() - timedelta(seconds=1))
    else:
        Merchant.objects.filter(pk=acme.pk).update(is_active=False)

    first = Client().post(link_url(token))
    # What refused it is put right (a wrong clock, the merchant re-activated).
    PortalLink.objects.update(expires_at=utcnow() + timedelta(minutes=5))
    Merchant.objects.filter(pk=acme.pk).update(is_active=True)
    client = Client()
    second = client.post(link_url(token))

    assert first.status_code == (410 if why == "expired" else 403)
    assert second.status_code == 410
    assert "already been used" in second.content.decode()
    link.refresh_from_db()
    assert link.used_at is not None
    assert client.get(reverse("portal:endpoint_list", args=["acme"])).status_code == 302
