"""Claims of one row each: a breaker's probe and an endpoint's verification
challenge, the sends that let a held endpoint out of its hold.

The dispatcher makes them twice a second, before its batch claim
(claiming.py), which passes such endpoints by.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from deliveries.dispatch.claiming import (
    CLAIM_FIELDS,
    Claim,
    log_claim,
    merchants_counted,
    rows_take,
)
from deliveries.dispatch.due import DUE_STATUSES
from deliveries.models import Delivery
from deliveries.verification import verification_make, verifications_due
from endpoints import probes
from endpoints.brokers import PULL
from endpoints.models import Endpoint


def claim_probes(*, worker_id: str, now: datetime, lease_seconds: float) -> Claim:
    """For each endpoint whose breaker cooldown is over, claim exactly one probe.

    The conditional UPDATE on the health row decides the winner: under
    concurrent dispatchers only one sees the row still due for a probe. A
    half-open breaker whose probe was lost with its worker is due again once
    the probe's lease has run out (next_probe_at is set to it).
    """
    claim = Claim(lease_until=now + timedelta(seconds=lease_seconds))
    due = probes.probes_due(now=now)
    pulled = _pull_endpoints([endpoint_id for endpoint_id, *_ in due])
    for endpoint_id, merchant_id, merchant_cap in due:
        if endpoint_id in pulled:
            continue
        with transaction.atomic():
            won = probes.probe_win(
                endpoint_id=endpoint_id,
                merchant_id=merchant_id,
                now=now,
                lease_until=claim.lease_until,
            )
            if not won:
                continue
            # A probe is a send like any other: it counts against its
            # merchant's cap, counted under the merchant's lock as a claim's
            # rows are (600 breakers due together must not take 600 slots).
            # Checked once the probe is won, so the health row still decides
            # between dispatchers; without room it is undone, due next look.
            if not _merchant_room(merchant_id, cap=merchant_cap, now=now):
                transaction.set_rollback(True)
                continue
            rows = list(
                Delivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(
                    merchant_id=merchant_id,  # one shard on Citus
                    endpoint_id=endpoint_id,
                    status__in=DUE_STATUSES,
                    next_attempt_at__lte=now,
                )
                .order_by("next_attempt_at")
                .values(*CLAIM_FIELDS)[:1]
            )
            taken = rows_take(rows, claim=claim, worker_id=worker_id, now=now)
            if taken:
                claim.probe_ids.add(taken[0])
                probes.probe_taken(
                    endpoint_id=endpoint_id,
                    merchant_id=merchant_id,
                    delivery_id=taken[0],
                )
            else:
                probes.probe_none_due(
                    endpoint_id=endpoint_id, merchant_id=merchant_id, now=now
                )
    log_claim(claim)
    return claim


def claim_verifications(
    *, worker_id: str, now: datetime, lease_seconds: float
) -> Claim:
    """For each endpoint awaiting verification, its challenge's delivery:
    made if no dispatcher has made it yet, claimed when due.

    The only deliveries of such an endpoint any claim takes (claim_sql.DUE
    and the probes pass it by). SKIP LOCKED on the endpoint row (making) and
    on the delivery row (claiming) decide between dispatchers.
    """
    claim = Claim(lease_until=now + timedelta(seconds=lease_seconds))
    due = verifications_due(now=now)
    pulled = _pull_endpoints([endpoint_id for endpoint_id, *_ in due])
    for endpoint_id, merchant_id, delivery_id in due:
        if endpoint_id in pulled:
            continue
        with transaction.atomic():
            if not delivery_id:
                delivery_id = verification_make(
                    endpoint_id=endpoint_id, merchant_id=merchant_id, now=now
                )
                if not delivery_id:
                    continue
            rows = list(
                Delivery.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(
                    pk=delivery_id,
                    merchant_id=merchant_id,  # one shard on Citus
                    endpoint_id=endpoint_id,
                    status__in=DUE_STATUSES,
                    next_attempt_at__lte=now,
                )
                .values(*CLAIM_FIELDS)
            )
            claim.verification_ids.update(
                rows_take(rows, claim=claim, worker_id=worker_id, now=now)
            )
    log_claim(claim)
    return claim


def _pull_endpoints(endpoint_ids: list[str]) -> set[str]:
    """Those of `endpoint_ids` that are pull endpoints: no dispatcher sends to
    one (its consumer leases its rows), so neither a probe nor a challenge
    is claimed for it. Read only when some are due: most claims have none."""
    if not endpoint_ids:
        return set()
    return set(
        Endpoint.objects.filter(pk__in=endpoint_ids, kind=PULL).values_list(
            "pk", flat=True
        )
    )


def _merchant_room(merchant_id: int, *, cap: int | None, now: datetime) -> bool:
    """Whether the merchant may have one more send now (its lock taken, to commit)."""
    counted, live = merchants_counted([merchant_id], now=now)
    if not counted:
        return False  # another claim is counting it
    if cap is None:
        cap = settings.MERCHANT_MAX_IN_FLIGHT
    return live.merchants.get(merchant_id, 0) < cap
