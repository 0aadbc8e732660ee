"""Bearer API keys and the merchant scope they carry.

A scoped key must not learn that another merchant's objects exist, so every
lookup goes through `visible_*`, which answers 404 for both "absent" and
"someone else's".
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from ninja.security import HttpBearer

from endpoints.models import ApiKey, Endpoint, Merchant
from endpoints.services import apikey_authenticate

PLATFORM_SCOPE = "platform"


class ApiKeyAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return apikey_authenticate(token)


def api_key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined]


def idempotency_scope(request: HttpRequest) -> str:
    """The scope: "platform", or "merchant:<pk>"; never a slug, which a merchant
    may choose (slug "platform" would share the platform's keys) or rename."""
    key = api_key(request)
    return PLATFORM_SCOPE if key.is_platform else merchant_scope(key.merchant_id)


def merchant_scope(merchant_id: int) -> str:
    return f"merchant:{merchant_id}"


def scoped(request: HttpRequest, queryset: QuerySet, merchant_field: str) -> QuerySet:
    """queryset narrowed to the key's merchant (platform keys see everything)."""
    key = api_key(request)
    if key.is_platform:
        return queryset
    return queryset.filter(**{merchant_field: key.merchant_id})


def visible_merchant(request: HttpRequest, slug: str) -> Merchant:
    merchant = scoped(request, Merchant.objects.filter(slug=slug), "pk").first()
    if merchant is None:
        raise Http404(f"No merchant {slug!r}.")
    return merchant


def visible_endpoint(request: HttpRequest, slug: str, endpoint_id: str) -> Endpoint:
    merchant = visible_merchant(request, slug)
    endpoint = (
        Endpoint.objects.select_related("merchant", "health")
        .filter(merchant=merchant, pk=endpoint_id)
        .first()
    )
    if endpoint is None:
        raise Http404(f"No endpoint {endpoint_id!r} for merchant {slug!r}.")
    return endpoint
