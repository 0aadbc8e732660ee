"""REST operations for merchants and their endpoints (CONTRACT.md section 3)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router, Status
from ninja.errors import AuthorizationError

from endpoints import services
from endpoints.models import Endpoint
from endpoints.schemas import (
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointPatch,
    MerchantIn,
    MerchantOut,
    RecoverIn,
    RecoverOut,
    SecretRotated,
)
from relayproject.apiauth import api_key, visible_endpoint, visible_merchant
from relayproject.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.problems import COMMON_ERRORS, Problem

router = Router(tags=["merchants and endpoints"])


@router.post(
    "/merchants", response={201: MerchantOut, 401: Problem, 403: Problem, 422: Problem}
)
def merchant_create(request: HttpRequest, payload: MerchantIn):
    """Create a merchant (platform keys only)."""
    if not api_key(request).is_platform:
        raise AuthorizationError(message="Only platform keys may create merchants.")
    return Status(201, services.merchant_create(slug=payload.slug, name=payload.name))


@router.get("/merchants/{slug}", response={200: MerchantOut, **COMMON_ERRORS})
def merchant_get(request: HttpRequest, slug: str):
    return visible_merchant(request, slug)


@router.post(
    "/merchants/{slug}/endpoints", response={201: EndpointCreated, **COMMON_ERRORS}
)
def endpoint_create(request: HttpRequest, slug: str, payload: EndpointIn):
    """Create an endpoint; the answer holds its signing secret, shown only here."""
    merchant = visible_merchant(request, slug)
    endpoint = services.endpoint_create(merchant=merchant, **payload.dict())
    endpoint.secret = endpoint.secrets.get().secret
    return Status(201, endpoint)


@router.get(
    "/merchants/{slug}/endpoints", response={200: EndpointPage, **COMMON_ERRORS}
)
def endpoint_list(
    request: HttpRequest,
    slug: str,
    cursor: str | None = None,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
):
    merchant = visible_merchant(request, slug)
    endpoints = Endpoint.objects.filter(merchant=merchant).select_related(
        "merchant", "health"
    )
    return paginate(endpoints, cursor=cursor, limit=limit)


@router.get(
    "/merchants/{slug}/endpoints/{endpoint_id}",
    response={200: EndpointOut, **COMMON_ERRORS},
)
def endpoint_get(request: HttpRequest, slug: str, endpoint_id: str):
    return visible_endpoint(request, slug, endpoint_id)


@router.patch(
    "/merchants/{slug}/endpoints/{endpoint_id}",
    response={200: EndpointOut, **COMMON_ERRORS},
)
def endpoint_update(
    request: HttpRequest, slug: str, endpoint_id: str, payload: EndpointPatch
):
    """Change only the fields sent; null clears max_attempts and rate_limit_per_second."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    changes = payload.dict(exclude_unset=True)
    for field in ("url", "description", "event_types", "is_active"):
        if field in changes and changes[field] is None:
            del changes[field]
    services.endpoint_update(endpoint=endpoint, **changes)
    return visible_endpoint(request, slug, endpoint_id)


@router.delete(
    "/merchants/{slug}/endpoints/{endpoint_id}", response={204: None, **COMMON_ERRORS}
)
def endpoint_delete(request: HttpRequest, slug: str, endpoint_id: str):
    services.endpoint_delete(endpoint=visible_endpoint(request, slug, endpoint_id))
    return Status(204, None)


@router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/rotate-secret",
    response={200: SecretRotated, **COMMON_ERRORS},
)
def endpoint_rotate_secret(request: HttpRequest, slug: str, endpoint_id: str):
    """New secret now; the previous one keeps signing until previous_expires_at."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    secret, expires = services.endpoint_rotate_secret(endpoint=endpoint)
    return {"secret": secret.secret, "previous_expires_at": expires}


@router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/recover",
    response={202: RecoverOut, **COMMON_ERRORS},
)
def endpoint_recover(
    request: HttpRequest, slug: str, endpoint_id: str, payload: RecoverIn
):
    """Dead deliveries created in [since, until) back to pending; dry_run only counts."""
    from deliveries.services import deliveries_recover  # deliveries points at us

    endpoint = visible_endpoint(request, slug, endpoint_id)
    count = deliveries_recover(
        endpoint=endpoint,
        since=payload.since,
        until=payload.until,
        dry_run=payload.dry_run,
    )
    return Status(202, {"count": count})
