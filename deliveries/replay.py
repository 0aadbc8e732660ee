"""Sending again what was sent: replay, retry now, recover, bulk replay of the
dead, and try now (a paused endpoint's probe, at once).

Each puts rows back to pending with a fresh attempt budget (retry now keeps
the budget), counts the replays, and wakes the dispatchers. The caller says
when `now` is: the faces read the clock, so a test drives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import F

from deliveries import words
from deliveries.models import Delivery
from deliveries.ops import counters
from deliveries.ops.held import delivery_held
from deliveries.publish.outbox import notify_dispatchers
from endpoints import probes
from endpoints.merchant_keyed import pinned
from endpoints.models import Endpoint
from relayproject.lib.tracing import tracer


class ReplayRefused(Exception):
    """The delivery is pending or in flight; only dead or succeeded ones replay."""


def delivery_replay(*, delivery_id: str, now: datetime) -> Delivery:
    """Dead or succeeded -> pending now, fresh attempt budget, history kept.

    The event id (webhook-id) is unchanged, so receivers can deduplicate.
    """
    with (
        tracer.start_as_current_span(
            "relay.replay", attributes={"relay.delivery_id": delivery_id}
        ),
        transaction.atomic(),
    ):
        delivery = (
            pinned(Delivery.objects, delivery_id)
            .select_for_update(of=("self",))
            .get(pk=delivery_id)
        )
        if delivery.status not in Delivery.Status.FINISHED:
            raise ReplayRefused(f"delivery {delivery.pk} is {delivery.status}")
        fields = Delivery.back_to_pending(
            due_at=now, budget_start=delivery.attempt_count
        )
        fields["out_of_order"] = delivery.out_of_order or bool(delivery.ordering_key)
        for name, value in fields.items():
            setattr(delivery, name, value)
        delivery.save(update_fields=list(fields))
        counters.counters_add(shard="web", tally={(counters.REPLAYED, ""): 1})
        notify_dispatchers()
    return delivery


class RetryRefused(Exception):
    """The delivery cannot be sent now; the message says why, in words."""


def delivery_retry_now(*, delivery_id: str, now: datetime) -> Delivery:
    """A pending delivery waiting for its retry time is due now; its attempt
    budget is unchanged. Refused, with the reason, when it could not go now
    anyway (in flight, endpoint disabled, paused, or testing)."""
    with transaction.atomic():
        delivery = (
            pinned(Delivery.objects, delivery_id)
            .select_for_update(of=("self",))
            .select_related("endpoint__health")
            .get(pk=delivery_id)
        )
        refusal = words.retry_now_refusal(delivery_held(delivery=delivery, now=now))
        if refusal:
            raise RetryRefused(refusal)
        if delivery.next_attempt_at > now:
            delivery.next_attempt_at = now
            delivery.save(update_fields=["next_attempt_at"])
            notify_dispatchers()
    return delivery


def endpoint_try_now(*, endpoint: Endpoint, now: datetime) -> bool:
    """A paused endpoint's probe goes now instead of at the end of its cooldown:
    its oldest pending delivery is made due, and the breaker due its probe.
    False, changing nothing, when the breaker is not paused (closed, or a
    probe already in flight).

    The breaker's one-probe rule still holds: probes.endpoint_probe_now only
    touches an open breaker, and one dispatcher wins the probe (probe_win).
    """
    with transaction.atomic():
        if not probes.endpoint_probe_now(
            endpoint_id=endpoint.pk, merchant_id=endpoint.merchant_id, now=now
        ):
            return False
        # The probe sends the endpoint's oldest due delivery; one waiting for
        # its retry time is brought forward so there is one to send.
        oldest = (
            Delivery.objects.filter(
                merchant_id=endpoint.merchant_id,  # one shard on Citus
                endpoint_id=endpoint.pk,
                status=Delivery.Status.PENDING,
            )
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:1]
        )
        Delivery.objects.filter(
            merchant_id=endpoint.merchant_id,
            pk__in=list(oldest),
            status=Delivery.Status.PENDING,
            next_attempt_at__gt=now,
        ).update(next_attempt_at=now)
        notify_dispatchers()
    return True


def deliveries_recover(
    *,
    endpoint: Endpoint,
    since: datetime,
    until: datetime | None = None,
    dry_run: bool = False,
    now: datetime,
) -> int:
    """Dead deliveries of an endpoint created in [since, until) back to pending."""
    dead = Delivery.objects.filter(
        endpoint=endpoint, status=Delivery.Status.DEAD, created_at__gte=since
    )
    if until is not None:
        dead = dead.filter(created_at__lt=until)
    if dry_run:
        return dead.count()
    with (
        tracer.start_as_current_span(
            "relay.recover", attributes={"relay.endpoint_id": endpoint.pk}
        ) as span,
        transaction.atomic(),
    ):
        # Dead rows hold no claim: clearing it again changes nothing.
        count = dead.update(
            **Delivery.back_to_pending(due_at=now, budget_start=F("attempt_count"))
        )
        if count:
            counters.counters_add(shard="web", tally={(counters.REPLAYED, ""): count})
            notify_dispatchers()
        span.set_attribute("relay.recovered", count)
    return count


BULK_REPLAY_CAP = 500  # per request: a confirmation page shows what one click does


def deliveries_replay_dead(*, delivery_ids: Sequence[str], now: datetime) -> int:
    """Those of these deliveries that are dead, back to pending with a fresh budget.

    One UPDATE, conditional on status, so a row replayed meanwhile by someone
    else is not counted twice.
    """
    with transaction.atomic():
        count = Delivery.objects.filter(
            pk__in=list(delivery_ids), status=Delivery.Status.DEAD
        ).update(
            **Delivery.back_to_pending(due_at=now, budget_start=F("attempt_count"))
        )
        if count:
            counters.counters_add(shard="web", tally={(counters.REPLAYED, ""): count})
            notify_dispatchers()
    return count
