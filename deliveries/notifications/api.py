"""REST operations for the platform's operational endpoints (platform keys only).

They are endpoints like any other (signed, retried, dead-lettered, secrets
rotated), owned by the reserved operational merchant.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest
from ninja import Query, Router, Status
from ninja.errors import AuthorizationError

from deliveries.notifications import services
from deliveries.notifications.operational import OPERATIONAL_MERCHANT_SLUG
from endpoints import secret_rotation
from endpoints import services as endpoint_services
from endpoints.apikeys import api_key
from endpoints.models import Endpoint
from endpoints.schemas import (
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointPatch,
)
from endpoints.signing_schemas import RotateSecretIn, SecretRotated
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.lib.problems import COMMON_ERRORS, Problem

router = Router(tags=["operational endpoints"])

BASE = "/operational-endpoints"
ERRORS = {**COMMON_ERRORS, 403: Problem}


def _platform_only(request: HttpRequest) -> None:
    if not api_key(request).is_platform:
        raise AuthorizationError(
            message="Only platform keys may manage operational endpoints."
        )


def _operational_endpoints():
    return Endpoint.objects.filter(
        merchant__slug=OPERATIONAL_MERCHANT_SLUG
    ).select_related("merchant", "health")


def _get(request: HttpRequest, endpoint_id: str) -> Endpoint:
    _platform_only(request)
    endpoint = _operational_endpoints().filter(pk=endpoint_id).first()
    if endpoint is None:
        raise Http404(f"No operational endpoint {endpoint_id!r}.")
    return endpoint


@router.post(
    BASE,
    response={201: EndpointCreated, **ERRORS},
    summary="Create an operational-events endpoint",
)
def operational_endpoint_create(request: HttpRequest, payload: EndpointIn):
    """Subscribe a platform endpoint to relay.* events ([] means all of them).

    The answer holds its signing secret, shown only here.
    """
    _platform_only(request)
    endpoint = services.operational_endpoint_create(**payload.dict(), now=utcnow())
    endpoint.secret = endpoint.secrets.get().secret
    return Status(201, endpoint)


@router.get(
    BASE,
    response={200: EndpointPage, **ERRORS},
    summary="List operational-events endpoints",
)
def operational_endpoint_list(
    request: HttpRequest,
    cursor: str | None = None,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
):
    _platform_only(request)
    return paginate(_operational_endpoints(), cursor=cursor, limit=limit)


@router.get(
    BASE + "/{endpoint_id}",
    response={200: EndpointOut, **ERRORS},
    summary="Get an operational-events endpoint",
)
def operational_endpoint_get(request: HttpRequest, endpoint_id: str):
    return _get(request, endpoint_id)


@router.patch(
    BASE + "/{endpoint_id}",
    response={200: EndpointOut, **ERRORS},
    summary="Change an operational-events endpoint",
)
def operational_endpoint_update(
    request: HttpRequest, endpoint_id: str, payload: EndpointPatch
):
    """Change only the fields sent, as for a merchant's endpoint."""
    endpoint = _get(request, endpoint_id)
    changes = payload.changes()
    services.operational_endpoint_update(
        endpoint=endpoint, by=f"api:{api_key(request).name}", **changes, now=utcnow()
    )
    return _get(request, endpoint_id)


@router.delete(
    BASE + "/{endpoint_id}",
    response={204: None, **ERRORS},
    summary="Delete an operational-events endpoint",
)
def operational_endpoint_delete(request: HttpRequest, endpoint_id: str):
    endpoint_services.endpoint_delete(endpoint=_get(request, endpoint_id))
    return Status(204, None)


@router.post(
    BASE + "/{endpoint_id}/rotate-secret",
    response={200: SecretRotated, **ERRORS},
    summary="Rotate an operational-events endpoint's secret",
)
def operational_endpoint_rotate_secret(
    request: HttpRequest, endpoint_id: str, payload: RotateSecretIn | None = None
):
    """New secret now; the previous one keeps signing until previous_expires_at
    (now, when overlap_seconds is 0)."""
    endpoint = _get(request, endpoint_id)
    secret, expires = secret_rotation.endpoint_rotate_secret(
        endpoint=endpoint,
        now=utcnow(),
        overlap_seconds=payload.overlap_seconds if payload else None,
    )
    return {"secret": secret.secret, "previous_expires_at": expires}
