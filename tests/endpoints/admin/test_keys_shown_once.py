"""A new API key is shown once, in the body of the response that made it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from endpoints.models import ApiKey

pytestmark = pytest.mark.django_db


def test_no_cookie_carries_the_new_key(admin_client):
    response = admin_client.post(
        reverse("admin:endpoints_apikey_add"), {"name": "billing"}
    )

    full_key = re.search(
        r'<code id="new-api-key"[^>]*>([^<]+)</code>', response.content.decode()
    ).group(1)
    assert ApiKey.objects.get().prefix in full_key
    assert "no-store" in response["Cache-Control"]
    # Not in this response's cookies, nor in any the client holds afterwards
    # (the messages cookie is signed, not encrypted: anyone holding it reads it).
    for jar in (response.cookies, admin_client.cookies):
        for morsel in jar.values():
            assert full_key not in morsel.value
            assert full_key[-12:] not in morsel.value
    following = admin_client.get(reverse("admin:endpoints_apikey_changelist"))
    assert full_key not in following.content.decode()
    assert not list(following.context["messages"])
