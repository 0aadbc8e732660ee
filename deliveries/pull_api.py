"""REST operations of pull endpoints and listen sessions (CONTRACT.md section 8).

A consumer pulls a pull endpoint's messages, then acks or nacks them, with a
key that sees the endpoint's merchant (another merchant's endpoint is a 404,
as everywhere). An endpoint of another kind answers 409: its deliveries are
sent by the dispatchers, so there is nothing to pull, and saying so helps
more than a 404 would (the endpoint exists and the key may see it).

A listen session is a pull endpoint made for one run of the client's
`listen` command (deliveries/pull/sessions.py), named by its endpoint's id
(the path says endpoint_id, as the messages' paths do); pulling one that
ended answers 410, so the command stops instead of polling forever.
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.http import Http404, HttpRequest
from ninja import Query, Router, Status

from deliveries.pull import acks, leasing, sessions
from deliveries.pull_schemas import (
    AckIn,
    AckOut,
    ListenSessionCreated,
    ListenSessionIn,
    ListenSessionOut,
    ListenSessionPage,
    MessagePage,
    NackIn,
    NackOut,
)
from endpoints import brokers
from endpoints.apikeys import visible_endpoint, visible_merchant
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import DEFAULT_LIMIT, MAX_LIMIT, paginate
from relayproject.lib.problems import COMMON_ERRORS, ApiProblem, Problem

router = Router(tags=["pull endpoints and listen sessions"])

MESSAGES = "/merchants/{slug}/endpoints/{endpoint_id}/messages"
SESSIONS = "/merchants/{slug}/listen-sessions"
DEFAULT_PULL = 10  # messages per pull when the consumer names no limit
PULL_ERRORS = {409: Problem, **COMMON_ERRORS}


def _pull_endpoint(request: HttpRequest, slug: str, endpoint_id: str) -> Endpoint:
    endpoint = visible_endpoint(request, slug, endpoint_id)
    if endpoint.kind != brokers.PULL:
        raise ApiProblem(
            409,
            f"Endpoint {endpoint_id!r} is not a pull endpoint (its kind is "
            f"{endpoint.kind}): the relay sends its deliveries, nothing is pulled.",
        )
    return endpoint


@router.get(
    MESSAGES,
    response={200: MessagePage, 410: Problem, **PULL_ERRORS},
    summary="Pull an endpoint's due messages",
)
def messages_pull(
    request: HttpRequest,
    slug: str,
    endpoint_id: str,
    limit: int = Query(DEFAULT_PULL, ge=1, le=leasing.MAX_LIMIT),
):
    """Lease up to `limit` due messages, oldest first, for the endpoint's
    visibility timeout: each is this consumer's until its lease_expires_at,
    then due again with the attempt spent. [] when none is due, or while the
    endpoint or its merchant is disabled (they wait). 410 once a listen
    session has ended."""
    endpoint = _pull_endpoint(request, slug, endpoint_id)
    if endpoint.listen_session and not endpoint.is_active:
        raise ApiProblem(
            410,
            f"Listen session {endpoint_id!r} ended ({endpoint.disabled_reason}); "
            "start a new one.",
        )
    now = utcnow()
    messages = leasing.messages_lease(endpoint=endpoint, limit=limit, now=now)
    sessions.pull_touch(endpoint=endpoint, now=now)
    return {"items": messages}


@router.post(
    MESSAGES + "/ack",
    response={200: AckOut, **PULL_ERRORS},
    summary="Ack pulled messages",
)
def messages_ack(request: HttpRequest, slug: str, endpoint_id: str, payload: AckIn):
    """Mark messages succeeded. Ids whose lease ran out, or that are not
    this endpoint's leased messages, come back in `rejected`, unchanged."""
    endpoint = _pull_endpoint(request, slug, endpoint_id)
    answer = acks.messages_ack(endpoint=endpoint, ids=payload.ids, now=utcnow())
    return {"acked": answer.done, "rejected": answer.rejected}


@router.post(
    MESSAGES + "/nack",
    response={200: NackOut, **PULL_ERRORS},
    summary="Nack pulled messages",
)
def messages_nack(request: HttpRequest, slug: str, endpoint_id: str, payload: NackIn):
    """Record a failed attempt of each: due again after retry_after_seconds
    (else the endpoint's retry policy), or dead when it was the last attempt
    max_attempts allows. Rejected ids as for an ack."""
    endpoint = _pull_endpoint(request, slug, endpoint_id)
    wait = payload.retry_after_seconds
    if wait is not None and wait > settings.RETRY_MAX_DELAY_SECONDS:
        bound = (
            f"At most RETRY_MAX_DELAY_SECONDS ({settings.RETRY_MAX_DELAY_SECONDS:g})."
        )
        raise ApiProblem(
            422, bound, [{"loc": ["body", "retry_after_seconds"], "msg": bound}]
        )
    answer = acks.messages_nack(
        endpoint=endpoint, ids=payload.ids, now=utcnow(), retry_after_seconds=wait
    )
    return {"nacked": answer.done, "rejected": answer.rejected}


def _session(request: HttpRequest, slug: str, session_id: str) -> Endpoint:
    merchant = visible_merchant(request, slug)
    endpoint = (
        Endpoint.objects.select_related("merchant", "health")
        .filter(merchant=merchant, pk=session_id, listen_session=True)
        .first()
    )
    if endpoint is None:
        raise Http404(f"No listen session {session_id!r} for merchant {slug!r}.")
    return endpoint


@router.post(
    SESSIONS,
    response={201: ListenSessionCreated, **COMMON_ERRORS},
    summary="Start a listen session",
)
def listen_session_create(
    request: HttpRequest, slug: str, payload: ListenSessionIn | None = None
):
    """A pull endpoint for one run of `listen`, counted against the endpoint
    quota while live. It ends when deleted, or LISTEN_IDLE_SECONDS after its
    last pull; its unfinished messages then go dead (`listen_ended`). The
    answer holds its signing secret, shown only here."""
    merchant = visible_merchant(request, slug)
    given = payload or ListenSessionIn()
    started = sessions.session_start(
        merchant=merchant,
        event_types=given.event_types,
        filter=given.filter,
        description=given.description,
        now=utcnow(),
    )
    session = _session(request, slug, started.pk)
    session.secret = session.secrets.get().secret
    return Status(201, session)


@router.get(
    SESSIONS,
    response={200: ListenSessionPage, **COMMON_ERRORS},
    summary="List a merchant's live listen sessions",
)
def listen_session_list(
    request: HttpRequest,
    slug: str,
    cursor: str | None = None,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
):
    """The live ones, newest first (an ended one: GET it by its id)."""
    merchant = visible_merchant(request, slug)
    live = Endpoint.objects.filter(
        merchant=merchant, listen_session=True, is_active=True
    ).select_related("merchant", "health")
    return paginate(live, cursor=cursor, limit=limit)


@router.get(
    SESSIONS + "/{endpoint_id}",
    response={200: ListenSessionOut, **COMMON_ERRORS},
    summary="Get a listen session",
)
def listen_session_get(request: HttpRequest, slug: str, endpoint_id: str):
    return _session(request, slug, endpoint_id)


@router.delete(
    SESSIONS + "/{endpoint_id}",
    response={204: None, **COMMON_ERRORS},
    summary="End a listen session",
)
def listen_session_end(
    request: HttpRequest,
    slug: str,
    endpoint_id: str,
    reason: Literal["api", "stopped"] = "api",
):
    """End it now: it gets no more events and its unfinished messages go
    dead. `reason=stopped` says its command stopped (the `listen` command
    sends it); the default says it was ended over the API. Ending an ended
    session changes nothing and still answers 204."""
    session = _session(request, slug, endpoint_id)
    sessions.session_end(endpoint=session, why=reason, now=utcnow())
    return Status(204, None)
