"""Record a flush so that one outcome the database refuses cannot sink the rest.

outcomes.outcomes_record writes a whole flush in one transaction. If that
fails for any reason but the database being away (which the dispatcher rides
out and retries), the flush is recorded again item by item. An item that
still fails is recorded without what the receiver sent (its body, message and
Retry-After), then as a bare error attempt; if even that fails it is released
without spending an attempt, due after a back-off. The dispatcher never
crashes on it, and no row is left delivering to poison the next dispatcher.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, InternalError, OperationalError

from deliveries.dispatch import claiming, outcomes
from deliveries.dispatch.transport import SendResult
from deliveries.models import ErrorKind
from endpoints import health

logger = logging.getLogger(__name__)

# The database is away: the caller backs off and retries the whole flush.
# InternalError: a session the server ended (idle_in_transaction_session_timeout
# after a freeze) is away too, until the dispatcher reconnects.
DATABASE_AWAY = (OperationalError, InterfaceError, InternalError)


def flush_record(
    *, sent: list[outcomes.Sent], worker_id: str, now: datetime, rand: random.Random
) -> outcomes.Recorded:
    """outcomes_record(sent), falling back to one item at a time if it fails."""
    try:
        return outcomes.outcomes_record(
            sent=sent, worker_id=worker_id, now=now, rand=rand
        )
    except DATABASE_AWAY:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever it is, the others go on
        if len(sent) > 1:
            logger.warning(
                "recording a flush of %d failed (%s); recording one by one",
                len(sent),
                type(exc).__name__,
            )
        failure = exc
    if len(sent) == 1:
        return _record_anyhow(sent[0], failure, worker_id=worker_id, now=now, rand=rand)
    recorded = outcomes.Recorded()
    for item in sent:
        try:
            part = outcomes.outcomes_record(
                sent=[item], worker_id=worker_id, now=now, rand=rand
            )
        except DATABASE_AWAY:
            raise
        except Exception as exc:  # noqa: BLE001
            part = _record_anyhow(item, exc, worker_id=worker_id, now=now, rand=rand)
        _merge(recorded, part)
    return recorded


def _record_anyhow(
    item: outcomes.Sent,
    failure: Exception,
    *,
    worker_id: str,
    now: datetime,
    rand: random.Random,
) -> outcomes.Recorded:
    for result in _plainer(item.result, failure):
        try:
            recorded = outcomes.outcomes_record(
                sent=[replace(item, result=result)],
                worker_id=worker_id,
                now=now,
                rand=rand,
            )
        except DATABASE_AWAY:
            raise
        except Exception as exc:  # noqa: BLE001
            failure = exc
            continue
        logger.error(
            "delivery=%s: its outcome could not be stored as it was (%s); "
            "recorded as %s",
            item.delivery_id,
            type(failure).__name__,
            result.error_kind or result.status_code,
        )
        return recorded
    due_at = now + timedelta(seconds=settings.RETRY_BASE_SECONDS)
    claiming.release(
        worker_id=worker_id,
        lease_until=item.lease_until,
        delivery_ids=[item.delivery_id],
        due_at=due_at,
    )
    if item.is_probe:
        health.probe_abandon(endpoint_id=item.endpoint_id, now=now)
    logger.error(
        "delivery=%s: no outcome could be stored (%s); released until %s "
        "without spending an attempt",
        item.delivery_id,
        type(failure).__name__,
        due_at.isoformat(),
    )
    return outcomes.Recorded()


def _plainer(result: SendResult, failure: Exception) -> list[SendResult]:
    """The result without what the receiver shaped, then a bare error of our own."""
    duration = result.duration_ms if math.isfinite(result.duration_ms) else 0.0
    status = result.status_code
    if status is not None and not 100 <= status <= 999:
        status = None
    kind = result.error_kind if result.error_kind in _KINDS else ""
    stripped = SendResult(
        status_code=status,
        duration_ms=duration,
        error_kind=kind or ("" if status is not None else ErrorKind.INVALID_RESPONSE),
        error_message=f"the response could not be stored ({type(failure).__name__})",
        # Ours, not the receiver's: what was sent still shows.
        request_url=result.request_url,
        request_headers=result.request_headers,
    )
    bare = replace(
        stripped,
        status_code=None,
        error_kind=ErrorKind.INVALID_RESPONSE,
    )
    return [stripped, bare]


_KINDS = ErrorKind.ALL


def _merge(into: outcomes.Recorded, part: outcomes.Recorded) -> None:
    into.fenced += part.fenced
    into.tally.update(part.tally)
    into.opened.update(part.opened)
    into.closed |= part.closed
