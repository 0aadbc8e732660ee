"""Listen sessions: a pull endpoint made for one run of the client library's
`listen` command (or started in the portal), that ends by itself.

A session is an Endpoint with kind "pull" and listen_session set. It lives
while it is pulled: each pull moves its health row's session_expires_at to
LISTEN_IDLE_SECONDS ahead (pull_touch). It ends when its consumer says so
(Ctrl-C: DELETE .../listen-sessions/{id}), from the portal, or when that
time passes without a pull (a killed command; the dispatchers end it,
deliveries/pull/expiry.py). Ending disables it, so no event fans out to it
again, and its unfinished messages go dead at once (`listen_ended`): they
never pile up. An ended session no longer counts against the endpoint
quota and is deleted LISTEN_KEEP_ENDED_SECONDS later, or sooner when its
merchant keeps more than LISTEN_KEEP_ENDED_MAX ended ones: a key that starts
and ends sessions in a loop must not grow endpoint rows without bound (the
quota no longer counts them, and the upkeep deletes a few a second).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from deliveries.models import Delivery, ErrorKind
from endpoints import brokers
from endpoints.health import pull_health_set
from endpoints.models import Endpoint, Merchant
from endpoints.services import endpoint_create, endpoint_delete

logger = logging.getLogger(__name__)

TOUCH_EVERY_SECONDS = 1.0  # pull_touch writes at most this often
ENDED_BY = "listen"  # Endpoint.disabled_by of an ended session
ENDED_REASONS = {
    "stopped": "listen session ended: its command stopped",
    "idle": "listen session ended: nothing pulled for LISTEN_IDLE_SECONDS",
    "portal": "listen session ended in the portal",
    "api": "listen session ended over the API",
}
# Ended sessions a merchant keeps for a look (GET, the portal, a 410 that
# says why) before LISTEN_KEEP_ENDED_SECONDS pass; a start past it deletes
# the oldest. At most ENDED_DELETES_PER_START per start: each start adds at
# most one ended session, so two keep the count at the bound (plus the ones
# ending meanwhile) while a start's own cost stays bounded.
LISTEN_KEEP_ENDED_MAX = 20
ENDED_DELETES_PER_START = 2


def session_start(
    *,
    merchant: Merchant,
    event_types: Sequence[str] = (),
    filter: dict | None = None,
    description: str = "",
    now: datetime,
) -> Endpoint:
    """A new session: a pull endpoint counted against the merchant's quota
    (endpoint_create's checks and 422s apply), alive for LISTEN_IDLE_SECONDS
    unless pulled."""
    with transaction.atomic():
        endpoint = endpoint_create(
            merchant=merchant,
            url="",
            kind=brokers.PULL,
            event_types=event_types,
            filter=filter,
            description=description or "listen session",
            now=now,
        )
        Endpoint.objects.filter(pk=endpoint.pk).update(listen_session=True)
        endpoint.listen_session = True
        pull_health_set(
            endpoint=endpoint,
            session_expires_at=now + timedelta(seconds=settings.LISTEN_IDLE_SECONDS),
            last_pulled_at=None,
        )
        pruned = ended_sessions_prune(merchant_id=merchant.pk)
    for endpoint_id in pruned:
        logger.info(
            "ended listen session deleted endpoint=%s: its merchant kept more "
            "than LISTEN_KEEP_ENDED_MAX (%d) ended sessions",
            endpoint_id,
            LISTEN_KEEP_ENDED_MAX,
            extra={"endpoint_id": endpoint_id},
        )
    return endpoint


def ended_sessions_prune(
    *, merchant_id: int, limit: int = ENDED_DELETES_PER_START
) -> list[str]:
    """Delete, with their deliveries, the merchant's oldest ended sessions
    beyond LISTEN_KEEP_ENDED_MAX, at most `limit`; their ids. Each is locked
    SKIP LOCKED first: two starts at once (or a start and the upkeep's
    ended_sessions_delete) never delete the same session, nor wait on each
    other."""
    ended = Endpoint.objects.filter(
        merchant_id=merchant_id, listen_session=True, is_active=False
    )
    beyond = ended.count() - LISTEN_KEEP_ENDED_MAX
    if beyond <= 0:
        return []
    with transaction.atomic():
        oldest = list(
            ended.select_for_update(skip_locked=True, of=("self",))
            # Its own order, not Meta.ordering's join to the merchant, whose
            # row must not be locked FOR UPDATE (every publish checks it).
            .order_by("disabled_at", "pk")[: min(beyond, limit)]
        )
        deleted = []
        for endpoint in oldest:
            deleted.append(endpoint.pk)  # delete() forgets it
            endpoint_delete(endpoint=endpoint)
    return deleted


def pull_touch(*, endpoint: Endpoint, now: datetime) -> None:
    """A consumer pulled: note when, and keep a live session alive. At most
    once in TOUCH_EVERY_SECONDS: a consumer polling an empty endpoint several
    times a second writes its row (and the WAL) once a second, not each time."""
    recent = now - timedelta(seconds=TOUCH_EVERY_SECONDS)
    if endpoint.listen_session:
        pull_health_set(
            endpoint=endpoint,
            last_pulled_at=now,
            session_expires_at=now + timedelta(seconds=settings.LISTEN_IDLE_SECONDS),
            unless_pulled_since=recent,
        )
    else:
        pull_health_set(
            endpoint=endpoint, last_pulled_at=now, unless_pulled_since=recent
        )


def session_is_live(endpoint: Endpoint) -> bool:
    return endpoint.listen_session and endpoint.is_active


def session_end(*, endpoint: Endpoint, why: str, now: datetime) -> int:
    """End a session: disabled (no operational event: nothing is wrong), its
    unfinished messages dead, `listen_ended`. Returns how many went dead; 0
    when it had ended already (ending twice changes nothing)."""
    with transaction.atomic():
        ended = Endpoint.objects.filter(
            merchant_id=endpoint.merchant_id,
            pk=endpoint.pk,
            listen_session=True,
            is_active=True,
        ).update(
            is_active=False,
            disabled_reason=ENDED_REASONS[why],
            disabled_at=now,
            disabled_by=ENDED_BY,
            updated_at=now,
        )
        if not ended:
            return 0
        pull_health_set(endpoint=endpoint, session_expires_at=now)
        # Waiting rows of an ordered session go too: nothing will pull them.
        dead = Delivery.objects.filter(
            merchant_id=endpoint.merchant_id,
            endpoint_id=endpoint.pk,
            status__in=(*Delivery.Status.UNFINISHED, Delivery.Status.WAITING),
        ).update(
            status=Delivery.Status.DEAD,
            dead_at=now,
            claimed_by="",
            claimed_until=None,
            last_error=ErrorKind.LISTEN_ENDED,
        )
    logger.info(
        "listen session ended endpoint=%s why=%s dead=%d",
        endpoint.pk,
        why,
        dead,
        extra={"endpoint_id": endpoint.pk},
    )
    return dead
