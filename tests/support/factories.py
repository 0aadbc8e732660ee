"""Factories: small functions that make valid objects through the services."""

from __future__ import annotations

import itertools

from django.conf import settings

from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_create
from relayproject.lib.clock import utcnow

_seq = itertools.count(1)


def merchant(slug: str | None = None) -> Merchant:
    n = next(_seq)
    return Merchant.objects.create(slug=slug or f"m{n}", name=f"Merchant {n}")


def endpoint(
    merchant_obj: Merchant | None = None,
    *,
    url: str = "http://127.0.0.1:9/hook",
    **kwargs,
) -> Endpoint:
    assert settings.RELAY_ALLOW_PRIVATE_DESTINATIONS, "tests with loopback URLs need it"
    return endpoint_create(
        merchant=merchant_obj or merchant(), url=url, **kwargs, now=utcnow()
    )
