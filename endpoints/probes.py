"""The breaker's writes outside an outcome: the probe and the hands on it.

- the probe, exactly one send to an open endpoint: `probes_due`, `probe_win`,
  `probe_taken`, `probe_none_due`, `probe_abandon`, `probes_of_released`;
- staff's hand (`endpoint_breaker_reset`, `endpoint_breaker_open`) and the
  merchant's (`endpoint_probe_now`).

An outcome's effect on the breaker is `endpoints.health`'s; what the next
state is stays in `endpoints.breaker` (pure). As there, the dispatcher's
writes name the merchant they know, so each runs on that merchant's shard
alone on Citus, and staff's writes find the merchant first (`pinned`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models.functions import Now

from endpoints.merchant_keyed import on_shard, pinned
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow

State = EndpointHealth.State


# --- The probe: exactly one send to an open endpoint ------------------------


def probes_due(*, now: datetime) -> list[tuple[str, int, int | None]]:
    """(endpoint, merchant, merchant's cap) of active endpoints due a probe."""
    return list(
        EndpointHealth.objects.filter(
            breaker_state__in=[State.OPEN, State.HALF_OPEN],
            next_probe_at__lte=now,
            endpoint__is_active=True,
            endpoint__merchant__is_active=True,  # held while switched off
            # A probe would send an ordinary delivery; its challenge goes first.
            endpoint__awaiting_verification=False,
        ).values_list(
            "endpoint_id", "endpoint__merchant_id", "endpoint__merchant__max_in_flight"
        )
    )


def probe_win(
    *, endpoint_id: str, merchant_id: int, now: datetime, lease_until: datetime
) -> bool:
    """Half-open the breaker if it is still due a probe; True for the one winner.

    The conditional UPDATE decides: under concurrent dispatchers only one sees
    the row still due. The probe's lease end is its next probe time, so a
    probe lost with its worker is due again once that lease has run out.
    """
    return bool(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id,
            merchant_id=merchant_id,
            breaker_state__in=[State.OPEN, State.HALF_OPEN],
            next_probe_at__lte=now,
        ).update(breaker_state=State.HALF_OPEN, next_probe_at=lease_until)
    )


def probe_taken(*, endpoint_id: str, merchant_id: int, delivery_id: str) -> None:
    mine = {"endpoint_id": endpoint_id, "merchant_id": merchant_id}
    EndpointHealth.objects.filter(**mine).update(probe_delivery_id=delivery_id)


def probe_none_due(*, endpoint_id: str, merchant_id: int, now: datetime) -> None:
    """Nothing due to probe with: stay open and look again next time."""
    EndpointHealth.objects.filter(
        endpoint_id=endpoint_id, merchant_id=merchant_id
    ).update(breaker_state=State.OPEN, next_probe_at=now, probe_delivery_id="")


def probe_abandon(*, endpoint_id: str, merchant_id: int | None, now: datetime) -> None:
    """A probe that was never sent: the breaker goes back to open, due at once."""
    on_shard(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id, breaker_state=State.HALF_OPEN
        ),
        merchant_id,
    ).update(breaker_state=State.OPEN, next_probe_at=now, probe_delivery_id="")


def probes_of_released(delivery_ids: list[str], *, merchant_id: int | None) -> None:
    """A half-open breaker waiting for a probe a dead dispatcher held is due a
    new probe now, not when that lease would have ended. The deliveries are
    `merchant_id`'s, or of any merchant when it is None."""
    on_shard(
        EndpointHealth.objects.filter(
            probe_delivery_id__in=delivery_ids, breaker_state=State.HALF_OPEN
        ),
        merchant_id,
    ).update(next_probe_at=Now())


# --- Staff's hand on the breaker --------------------------------------------


def _staff_row(endpoint_id: str):
    """The endpoint's health row, on its merchant's shard on Citus (read first:
    staff's hand knows the endpoint only)."""
    return pinned(EndpointHealth.objects.filter(endpoint_id=endpoint_id), endpoint_id)


def endpoint_breaker_reset(*, endpoint_id: str) -> None:
    _staff_row(endpoint_id).update(
        breaker_state=State.CLOSED,
        consecutive_failures=0,
        cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
        opened_at=None,
        next_probe_at=None,
        probe_delivery_id="",
        breaker_reason="",
    )


def endpoint_breaker_open(
    *, endpoint_id: str, reason: str, now: datetime | None = None
) -> None:
    """Open the breaker by hand (staff), for one base cooldown."""
    now = now or utcnow()
    cooldown = settings.BREAKER_COOLDOWN_SECONDS
    _staff_row(endpoint_id).update(
        breaker_state=State.OPEN,
        cooldown_seconds=cooldown,
        opened_at=now,
        next_probe_at=now + timedelta(seconds=cooldown),
        probe_delivery_id="",
        breaker_reason=reason[:300],
    )


def endpoint_probe_now(*, endpoint_id: str, merchant_id: int, now: datetime) -> bool:
    """A paused endpoint is due its probe now (the merchant's *Try now*);
    True when it was paused and now is due.

    Only an open breaker is touched: a half-open one has its probe in flight,
    and making it due again would let probe_win grant a second probe. The
    probe itself is still won by one dispatcher (probe_win), so two clicks
    or two dispatchers send one probe.
    """
    return bool(
        EndpointHealth.objects.filter(
            endpoint_id=endpoint_id,
            merchant_id=merchant_id,
            breaker_state=State.OPEN,
        ).update(next_probe_at=now)
    )
