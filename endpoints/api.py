"""REST operations for merchants and their endpoints (CONTRACT.md section 3)."""

from __future__ import annotations

from django.http import Http404, HttpRequest
from django.urls import reverse
from ninja import Query, Router, Status
from ninja.errors import AuthorizationError

from endpoints import (
    broker_fields,
    catalogue,
    merchant_services,
    portal_links,
    secret_rotation,
    selectors,
    services,
    verification,
)
from endpoints.apikeys import api_key, visible_endpoint, visible_merchant
from endpoints.catalogue_schemas import (
    EventTypeIn,
    EventTypeOut,
    EventTypePage,
    EventTypePatch,
)
from endpoints.models import Endpoint, EventType, Membership
from endpoints.schemas import (
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointPatch,
    MerchantIn,
    MerchantOut,
    MerchantPatch,
    PortalSessionIn,
    PortalSessionOut,
    VerifyIn,
)
from endpoints.signing_schemas import RotateSecretIn, SecretRotated, SigningKeysOut
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.lib.problems import COMMON_ERRORS, ApiProblem, Problem

router = Router(tags=["merchants and endpoints"])


@router.post(
    "/merchants",
    response={201: MerchantOut, 401: Problem, 403: Problem, 422: Problem},
    summary="Create a merchant",
)
def merchant_create(request: HttpRequest, payload: MerchantIn):
    """Create a merchant (platform keys only), with its endpoints' retry
    policy defaults if given."""
    if not api_key(request).is_platform:
        raise AuthorizationError(message="Only platform keys may create merchants.")
    return Status(201, merchant_services.merchant_create(**payload.dict()))


@router.get(
    "/merchants/{slug}",
    response={200: MerchantOut, **COMMON_ERRORS},
    summary="Get a merchant",
)
def merchant_get(request: HttpRequest, slug: str):
    return visible_merchant(request, slug)


@router.patch(
    "/merchants/{slug}",
    response={200: MerchantOut, 403: Problem, **COMMON_ERRORS},
    summary="Change a merchant",
)
def merchant_update(request: HttpRequest, slug: str, payload: MerchantPatch):
    """Change its name or its endpoints' retry policy defaults (platform keys
    only); null clears a default, back to the relay's setting."""
    if not api_key(request).is_platform:
        raise AuthorizationError(message="Only platform keys may change merchants.")
    merchant = visible_merchant(request, slug)
    return merchant_services.merchant_update(merchant=merchant, **payload.changes())


@router.get(
    "/merchants/{slug}/signing-keys",
    auth=None,
    response={200: SigningKeysOut, 404: Problem, 422: Problem},
    exclude_none=True,
    summary="List a merchant's public signing keys (no key needed)",
)
def signing_keys_list(request: HttpRequest, slug: str):
    """The Ed25519 public keys (`whpk_...`) that check the `v1a` signatures of
    the merchant's endpoints, for receivers to fetch without an API key: public
    keys and endpoint ids, nothing else."""
    keys = selectors.signing_keys_of(slug=slug)
    if keys is None:
        raise Http404(f"No merchant {slug!r}.")
    return {"keys": keys}


@router.post(
    "/merchants/{slug}/endpoints",
    response={201: EndpointCreated, **COMMON_ERRORS},
    summary="Create an endpoint",
)
def endpoint_create(request: HttpRequest, slug: str, payload: EndpointIn):
    """Create an endpoint; the answer holds its signing secret, shown only here."""
    merchant = visible_merchant(request, slug)
    endpoint = services.endpoint_create(
        merchant=merchant, **payload.dict(), now=utcnow()
    )
    endpoint.secret = endpoint.secrets.get().secret
    return Status(201, endpoint)


@router.get(
    "/merchants/{slug}/endpoints",
    response={200: EndpointPage, **COMMON_ERRORS},
    summary="List a merchant's endpoints",
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
    summary="Get an endpoint",
)
def endpoint_get(request: HttpRequest, slug: str, endpoint_id: str):
    return visible_endpoint(request, slug, endpoint_id)


@router.patch(
    "/merchants/{slug}/endpoints/{endpoint_id}",
    response={200: EndpointOut, **COMMON_ERRORS},
    summary="Change an endpoint",
)
def endpoint_update(
    request: HttpRequest, slug: str, endpoint_id: str, payload: EndpointPatch
):
    """Change only the fields sent; null clears max_attempts, retry_schedule,
    timeout_seconds (back to the merchant's default, else the relay's),
    rate_limit_per_second, max_in_flight (back to the relay default), filter,
    headers, auth and tls. A change to auth may leave out the password or
    client secret to keep the stored one (endpoints/client_credentials.py)."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    changes = payload.changes()
    services.endpoint_update(
        endpoint=endpoint, by=f"api:{api_key(request).name}", **changes, now=utcnow()
    )
    return visible_endpoint(request, slug, endpoint_id)


@router.delete(
    "/merchants/{slug}/endpoints/{endpoint_id}",
    response={204: None, **COMMON_ERRORS},
    summary="Delete an endpoint",
)
def endpoint_delete(request: HttpRequest, slug: str, endpoint_id: str):
    services.endpoint_delete(endpoint=visible_endpoint(request, slug, endpoint_id))
    return Status(204, None)


@router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/rotate-secret",
    response={200: SecretRotated, **COMMON_ERRORS},
    summary="Rotate an endpoint's signing secret",
)
def endpoint_rotate_secret(
    request: HttpRequest,
    slug: str,
    endpoint_id: str,
    payload: RotateSecretIn | None = None,
):
    """New secret now; the previous one keeps signing until previous_expires_at
    (now, when overlap_seconds is 0)."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    secret, expires = secret_rotation.endpoint_rotate_secret(
        endpoint=endpoint,
        now=utcnow(),
        overlap_seconds=payload.overlap_seconds if payload else None,
    )
    return {"secret": secret.secret, "previous_expires_at": expires}


@router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/verification",
    response={202: EndpointOut, 409: Problem, 429: Problem, **COMMON_ERRORS},
    summary="Send a fresh verification challenge",
)
def endpoint_verification_retry(request: HttpRequest, slug: str, endpoint_id: str):
    """Send a fresh challenge (the next dispatcher does); the previous one no
    longer counts. 409 unless the endpoint is awaiting verification (a broker
    endpoint never is); 429 with Retry-After within VERIFICATION_RETRY_SECONDS
    of the last challenge."""
    endpoint = _http_endpoint(request, slug, endpoint_id)
    try:
        verification.verification_retry(endpoint=endpoint, now=utcnow())
    except verification.NotAwaiting as exc:
        raise ApiProblem(409, str(exc)) from None
    return Status(202, visible_endpoint(request, slug, endpoint_id))


@router.post(
    "/merchants/{slug}/endpoints/{endpoint_id}/verify",
    response={200: EndpointOut, 409: Problem, **COMMON_ERRORS},
    summary="Verify an endpoint with its challenge",
)
def endpoint_verify(
    request: HttpRequest, slug: str, endpoint_id: str, payload: VerifyIn
):
    """Verify with the challenge copied from the receiver's log; a wrong one
    is a 422 on `challenge` saying how many of its WRONG_ANSWERS_LIMIT tries
    are left, and once they are spent every paste is, until a new challenge."""
    endpoint = _http_endpoint(request, slug, endpoint_id)
    try:
        verification.endpoint_verify(
            endpoint=endpoint,
            challenge=payload.challenge,
            by=f"api:{api_key(request).name}",
            now=utcnow(),
        )
    except verification.NotAwaiting as exc:
        raise ApiProblem(409, str(exc)) from None
    return visible_endpoint(request, slug, endpoint_id)


def _http_endpoint(request: HttpRequest, slug: str, endpoint_id: str) -> Endpoint:
    """The endpoint, if it is one a challenge can verify (409 for a broker's)."""
    endpoint = visible_endpoint(request, slug, endpoint_id)
    if endpoint.kind != "http":
        raise ApiProblem(409, broker_fields.NOT_VERIFIED)
    return endpoint


# Mounted after `router` and deliveries' `endpoint_router` (relayproject/api.py):
# recover, a deliveries operation on an endpoint's URL, is listed between
# rotate-secret and these in the published OpenAPI document, as it always was.
sessions_and_types_router = Router(tags=["merchants and endpoints"])


@sessions_and_types_router.post(
    "/merchants/{slug}/portal-sessions",
    response={201: PortalSessionOut, 403: Problem, **COMMON_ERRORS},
    summary="Open the portal for a merchant (a one-time link)",
)
def portal_session_create(
    request: HttpRequest, slug: str, payload: PortalSessionIn | None = None
):
    """A single-use link that opens the portal for this merchant, with this role
    (viewer by default), for a few minutes; no Django user needed."""
    merchant = visible_merchant(request, slug)
    key = api_key(request)
    role = payload.role if payload else Membership.Role.VIEWER
    if role == Membership.Role.OWNER and not key.may_make_owner_links:
        raise AuthorizationError(
            message="This key may not make owner links; ask for viewer or "
            "developer, or have a superuser allow owner links on the key."
        )
    link, token = portal_links.portal_link_create(
        merchant=merchant, role=role, created_by=f"api key {key.prefix}", now=utcnow()
    )
    url = request.build_absolute_uri(reverse("portal:link_open", args=[token]))
    return Status(201, {"url": url, "expires_at": link.expires_at})


def _platform_only(request: HttpRequest) -> None:
    if not api_key(request).is_platform:
        raise AuthorizationError(message="Only platform keys change the catalogue.")


def _event_type(name: str) -> EventType:
    event_type = EventType.objects.filter(name=name).first()
    if event_type is None:
        raise Http404(f"No event type {name!r}.")
    return event_type


@sessions_and_types_router.get(
    "/event-types",
    response={200: EventTypePage, **COMMON_ERRORS},
    by_alias=True,
    summary="List the event catalogue",
)
def event_type_list(request: HttpRequest):
    """The whole catalogue, by name (it is small: one page)."""
    return {"items": list(EventType.objects.order_by("name")), "next_cursor": None}


@sessions_and_types_router.post(
    "/event-types",
    response={201: EventTypeOut, 403: Problem, **COMMON_ERRORS},
    by_alias=True,
    summary="Add an event type to the catalogue",
)
def event_type_create(request: HttpRequest, payload: EventTypeIn):
    """Add a type; with a schema, published data of this type must match it."""
    _platform_only(request)
    fields = payload.dict()
    return Status(
        201,
        catalogue.event_type_create(
            name=fields["name"],
            description=fields["description"],
            schema=fields["schema_"],
            example=fields["example"],
            deprecated=fields["deprecated"],
        ),
    )


@sessions_and_types_router.get(
    "/event-types/{name}",
    response={200: EventTypeOut, **COMMON_ERRORS},
    by_alias=True,
    summary="Get an event type",
)
def event_type_get(request: HttpRequest, name: str):
    return _event_type(name)


@sessions_and_types_router.patch(
    "/event-types/{name}",
    response={200: EventTypeOut, 403: Problem, **COMMON_ERRORS},
    by_alias=True,
    summary="Change an event type",
)
def event_type_update(request: HttpRequest, name: str, payload: EventTypePatch):
    """Change only the fields sent; null clears the schema or the example."""
    _platform_only(request)
    changes = payload.dict(exclude_unset=True)
    if "schema_" in changes:
        changes["schema"] = changes.pop("schema_")
    if changes.get("description", "") is None:
        del changes["description"]
    if "deprecated" in changes and changes["deprecated"] is None:
        del changes["deprecated"]
    return catalogue.event_type_update(event_type=_event_type(name), **changes)


@sessions_and_types_router.delete(
    "/event-types/{name}",
    response={204: None, 403: Problem, **COMMON_ERRORS},
    summary="Remove an event type",
)
def event_type_delete(request: HttpRequest, name: str):
    _platform_only(request)
    catalogue.event_type_delete(event_type=_event_type(name))
    return Status(204, None)
