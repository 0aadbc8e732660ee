"""What is sent: events, one delivery per subscribed endpoint, and attempts."""

from __future__ import annotations

from django.db import models
from django.db.models import ExpressionWrapper, Q

from endpoints.merchant_keyed import MerchantForeignKey, MerchantKeyed
from relayproject.lib.ids import new_delivery_id, new_event_id


class Event(MerchantKeyed):
    id = models.CharField(primary_key=True, max_length=40, default=new_event_id)
    # No index of its own: the (merchant, ...) indexes below lead with it,
    # and every index is one more write per event published. No database
    # constraint: Citus cannot add one to a partitioned table once it is
    # distributed (the history tables keep none, see Delivery.event).
    merchant = models.ForeignKey(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    type = models.CharField(max_length=255)
    data = models.JSONField()
    created_at = models.DateTimeField()
    # W3C trace context of the relay.publish span ("" when not traced): the
    # dispatcher's send spans link to it, however much later they run.
    traceparent = models.CharField(max_length=64, blank=True, default="")
    # Idempotency: a key is unique within the API key's scope ("platform" or
    # "merchant:<pk>", see endpoints.apikeys); the fingerprint tells a replay of the
    # same request from a different request that reuses the key.
    idempotency_scope = models.CharField(max_length=80, blank=True, default="")
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    # Events sharing a key reach an ordered endpoint one at a time, in publish
    # order (deliveries/lanes.py); "" is unordered, as every event was before.
    # Defaults in the database too, so statements that name no lane column
    # (bench seeds, the history tables' copies) still insert.
    ordering_key = models.CharField(
        max_length=255, blank=True, default="", db_default=""
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["merchant", "created_at"]),
            models.Index(fields=["merchant", "type"]),
            models.Index(fields=["merchant", "-id"], name="event_merchant_newest_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_scope", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="event_unique_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.type}"


class Delivery(MerchantKeyed):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERING = "delivering", "Delivering"
        SUCCEEDED = "succeeded", "Succeeded"
        DEAD = "dead", "Dead"
        # Behind the head of its ordered lane (deliveries/lanes.py): no claim
        # reads it (the due indexes cover pending and delivering only) until
        # the head's outcome is recorded and it becomes pending.
        WAITING = "waiting", "Waiting in its lane"

        # Class attributes set below (an Enum body would make them members).
        UNFINISHED: tuple[Delivery.Status, ...]
        FINISHED: tuple[Delivery.Status, ...]

    id = models.CharField(primary_key=True, max_length=40, default=new_delivery_id)
    # No database constraint: on PostgreSQL the history tables are partitioned
    # by day (migration 0006) and a foreign key into one would make dropping
    # a day check every reference. deliveries.history.retention removes an event only
    # with its last delivery.
    # Neither relation has an index of its own (Django would add two each on
    # PostgreSQL, one for LIKE): delivery_unique_event_endpoint leads with
    # event, several indexes below lead with endpoint, and a publish writes
    # every index of every delivery it makes (migration 0010). The
    # endpoint has no database constraint either: Citus cannot add one to a
    # partitioned table once it is distributed.
    event = MerchantForeignKey(
        Event,
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_constraint=False,
        db_index=False,
    )
    endpoint = MerchantForeignKey(
        "endpoints.Endpoint",
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_index=False,
        db_constraint=False,
    )
    # The distribution column on Citus (endpoints/merchant_keyed.py): the
    # endpoint's merchant, copied so a claim or a record names its shard.
    merchant = models.ForeignKey(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING
    )
    # attempt_count never goes back (it numbers attempts); a replay moves
    # budget_start up to it, so the budget left is max - (count - start).
    attempt_count = models.PositiveIntegerField(default=0)
    budget_start = models.PositiveIntegerField(default=0)
    # When the row is next due. While delivering it equals claimed_until, so
    # one index and one condition find both due rows and expired leases.
    next_attempt_at = models.DateTimeField()
    claimed_by = models.CharField(max_length=200, blank=True, default="")
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    last_response_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField()
    succeeded_at = models.DateTimeField(null=True, blank=True)
    dead_at = models.DateTimeField(null=True, blank=True)
    # The lane it is sent in (the event's ordering_key, kept only when its
    # endpoint was ordered at publish); "" is unordered. A replay of a laned
    # dead letter leaves the lane ("" again) and is marked out_of_order.
    ordering_key = models.CharField(
        max_length=255, blank=True, default="", db_default=""
    )
    # Its place in the lane: given under the lane's lock at publish, so it is
    # the order the publishes took the lock in (ids made in the same
    # millisecond sort at random, and two hosts' clocks disagree).
    lane_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    out_of_order = models.BooleanField(default=False, db_default=False)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at"]
        indexes = [
            # The claim: partial, so succeeded and dead history never costs it.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status__in=["pending", "delivering"]),  # Status.UNFINISHED
                name="delivery_due_idx",
            ),
            # The fair claim walks each endpoint's due rows oldest first, so a
            # million rows behind one endpoint cost it no more than ten.
            models.Index(
                fields=["endpoint", "next_attempt_at"],
                condition=Q(status__in=["pending", "delivering"]),  # Status.UNFINISHED
                name="delivery_endpoint_due_idx",
            ),
            # max_in_flight: an endpoint's live claims, counted at each claim.
            models.Index(
                fields=["endpoint", "claimed_until"],
                condition=Q(status="delivering"),
                name="delivery_endpoint_inflight_idx",
            ),
            # An endpoint's rows of one status by publish time: the portal
            # log's window filters, a replay of a dead window, the dead count.
            # Every full index here costs each publish, claim and record a
            # write (bench/RESULTS.md, issue 21's ninth pass), but without
            # this one the log's window reads the endpoint's whole history
            # whenever the planner misjudges it. (status, created_at) went:
            # (status, -id) below serves the totals by status.
            models.Index(fields=["endpoint", "status", "created_at"]),
            # The admin lists: newest first (time-ordered ids), by endpoint or
            # by status, read from the index in order and stopped at a page.
            models.Index(
                fields=["endpoint", "-id"], name="delivery_endpoint_newest_idx"
            ),
            models.Index(fields=["status", "-id"], name="delivery_status_newest_idx"),
            # Windows by publish time (latency from publish over 24 h).
            models.Index(fields=["created_at"], name="delivery_created_idx"),
            models.Index(
                fields=["dead_at"], condition=Q(status="dead"), name="delivery_dead_idx"
            ),
            # Ordered lanes (deliveries/lanes.py), partial so unordered rows
            # and finished history are not in them: a lane's head (at most
            # one row per lane), and its waiting rows in publish order.
            models.Index(
                fields=["endpoint", "ordering_key"],
                condition=Q(status__in=["pending", "delivering"]) & ~Q(ordering_key=""),
                name="delivery_lane_head_idx",
            ),
            models.Index(
                fields=["endpoint", "ordering_key", "lane_seq"],
                condition=Q(status="waiting"),
                name="delivery_lane_waiting_idx",
            ),
            models.Index(
                fields=["succeeded_at"],
                condition=Q(status="succeeded"),
                name="delivery_succeeded_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "endpoint"], name="delivery_unique_event_endpoint"
            ),
            models.CheckConstraint(
                condition=~Q(status="delivering") | Q(claimed_until__isnull=False),
                name="delivery_delivering_has_lease",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @staticmethod
    def back_to_pending(*, due_at, budget_start=None) -> dict:
        """The columns of a row going back to pending, unclaimed, due at `due_at`.

        Given a budget_start (a value, or F("attempt_count") in an UPDATE), the
        row starts a fresh attempt budget and is no longer dead: a replay. A
        replay leaves its ordered lane (deliveries/lanes.py): it is sent at
        once, out of order, marked so, and its outcome promotes nothing.
        Without, nothing was spent: a claim given back unsent.
        """
        fields = {
            "status": Delivery.Status.PENDING,
            "claimed_by": "",
            "claimed_until": None,
            "next_attempt_at": due_at,
        }
        if budget_start is not None:
            fields.update(
                budget_start=budget_start,
                dead_at=None,
                ordering_key="",
                # SET reads the row as it was: its lane before it is cleared.
                out_of_order=ExpressionWrapper(
                    Q(out_of_order=True) | ~Q(ordering_key=""),
                    output_field=models.BooleanField(),
                ),
            )
        return fields

    @property
    def attempts_in_budget(self) -> int:
        return self.attempt_count - self.budget_start


# Still to be sent (the claim's rows), or over: nothing will change them again
# unless someone replays them. In this order, which the partial indexes name.
Delivery.Status.UNFINISHED = (Delivery.Status.PENDING, Delivery.Status.DELIVERING)
Delivery.Status.FINISHED = (Delivery.Status.SUCCEEDED, Delivery.Status.DEAD)


class ErrorKind:
    """The error kinds an attempt can end with, stored on Attempt.error_kind.

    The transport's vocabulary: it sets every kind but LEASE_EXPIRED (claiming's)
    and HTTP_STATUS (a receiver answered with a status that is not 2xx).
    Every kind but DESTINATION_BLOCKED and PERMANENT_STATUS is retried
    (deliveries.retry.classify).
    """

    TIMEOUT = "timeout"
    CONNECTION = "connection_error"
    DNS = "dns_error"
    TLS = "tls_error"
    DESTINATION_BLOCKED = "destination_blocked"
    NO_SIGNING_SECRET = "no_signing_secret"
    LEASE_EXPIRED = "lease_expired"
    HTTP_STATUS = "http_status"
    # A status the endpoint (or PERMANENT_FAILURE_STATUSES) treats as permanent:
    # recorded as its own kind so the delivery page can say why it was not
    # retried, even after the list changes.
    PERMANENT_STATUS = "permanent_status"
    INVALID_RESPONSE = "invalid_response"  # a status line or headers the parser refused
    # A verification challenge answered 2xx without echoing it: retried.
    CHALLENGE_NOT_ECHOED = "challenge_not_echoed"
    # Broker destinations (deliveries/dispatch/brokers/): the broker had the
    # message and said no (a nack, an error reply, a returned mandatory
    # message, a JetStream subject with no stream: the contract's one kind,
    # the message says which), or refused the credentials. Both retried:
    # someone may fix the broker.
    BROKER_REFUSED = "broker_refused"
    BROKER_AUTH = "broker_auth"
    # The egress proxy (RELAY_EGRESS_PROXY) gave no tunnel: refused, closed,
    # answered CONNECT with a non-2xx, or timed out before the tunnel was up.
    # Retried, but the relay's own failure: it spends none of the endpoint's
    # attempts and moves no breaker (deliveries/dispatch/outcomes.py).
    PROXY_ERROR = "proxy_error"
    # The endpoint's OAuth2 token endpoint gave no token (refused, down, a
    # non-2xx, an answer without access_token): the receiver was not asked.
    # Retried like a failed attempt; someone may fix the token server.
    AUTH_FAILED = "auth_failed"
    # Pull endpoints (deliveries/pull/): the consumer said it could not take
    # the message (POST .../messages/nack). Retried like a failed attempt.
    NACKED = "nacked"
    # A listen session's messages that will never be pulled: the session
    # ended, or its backlog passed LISTEN_MAX_BACKLOG. Dead at once, no attempt.
    LISTEN_ENDED = "listen_ended"
    LISTEN_BACKLOG_FULL = "listen_backlog_full"

    ALL: frozenset[str]


ErrorKind.ALL = frozenset(
    v for k, v in vars(ErrorKind).items() if k.isupper() and isinstance(v, str)
)


class Attempt(MerchantKeyed):
    ErrorKind = ErrorKind

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded", "Succeeded"
        RETRY = "retry", "Will retry"
        DEAD = "dead", "Dead"
        GONE = "gone", "Gone (endpoint disabled)"

    # No database constraint, for the same reason as Delivery.event; attempts
    # are partitioned by delivery_id, so they go with their delivery's day.
    delivery = MerchantForeignKey(
        Delivery,
        on_delete=models.CASCADE,
        related_name="attempts",
        db_constraint=False,
    )
    # Denormalised so per-endpoint latency over 24 h is one index range scan.
    # No database constraints, as on Delivery.
    endpoint = MerchantForeignKey(
        "endpoints.Endpoint",
        on_delete=models.CASCADE,
        related_name="attempts",
        db_constraint=False,
    )
    merchant = models.ForeignKey(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    response_ms = models.FloatField(null=True, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error_kind = models.CharField(max_length=40, blank=True, default="")
    error_message = models.CharField(max_length=500, blank=True, default="")
    response_body = models.TextField(blank=True, default="")
    worker_id = models.CharField(max_length=200, blank=True, default="")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    # What this attempt sent and got back, as it was (null on attempts made
    # before these were kept; nullable so adding them rewrites no partition):
    # [[name, value], ...] in order, custom header values and signatures as
    # fingerprints (dispatch/outgoing.recorded_headers); response headers
    # bounded (dispatch/transport.kept_headers) and sanitised.
    request_url = models.TextField(null=True, blank=True)
    request_headers = models.JSONField(null=True, blank=True)
    response_headers = models.JSONField(null=True, blank=True)

    class Meta:
        # delivery_id, not delivery: ordering by the relation would join
        # deliveries to sort by their own ordering.
        ordering = ["delivery_id", "number"]
        indexes = [
            models.Index(fields=["endpoint", "started_at"]),
            # The 24 h statistics of every endpoint read one range of it.
            models.Index(fields=["started_at"], name="attempt_started_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["delivery", "number"], name="attempt_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number} {self.outcome}"


class Counter(models.Model):
    """A Prometheus counter shard: one row per (process, series).

    Each dispatcher adds to its own rows, so there is no hot row to fight over;
    /metrics sums the shards, which stays correct across hosts and restarts.
    """

    shard = models.CharField(max_length=200)
    name = models.CharField(max_length=80)
    label = models.CharField(max_length=80, blank=True, default="")
    value = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["shard", "name", "label"], name="counter_unique_series"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}}={self.value} ({self.shard})"


class DeadLetter(Delivery):
    """Dead deliveries, as their own admin entry; same table, no extra columns."""

    class Meta:
        proxy = True
        verbose_name = "dead letter"
        ordering = ["-dead_at"]


class AnalysisSnapshot(models.Model):
    """The last result of an analysis too costly to run on every page view.

    The dispatchers' maintenance recomputes it about once a minute
    (deliveries.dispatch.maintenance); pages read it and recompute only when
    it is missing or stale. One row per analysis, its result as JSON.
    """

    name = models.CharField(primary_key=True, max_length=80)
    computed_at = models.DateTimeField()
    data = models.JSONField()

    def __str__(self) -> str:
        return f"{self.name} at {self.computed_at:%Y-%m-%d %H:%M:%S}"


class DispatcherHeartbeat(models.Model):
    """One row per running dispatcher, touched by its heartbeat thread.

    last_seen_at is the database's clock. A row older than
    DISPATCHER_DEAD_AFTER_SECONDS belongs to a dispatcher that died or hangs:
    another dispatcher declares it dead and releases the deliveries it held
    (deliveries/dispatch/rescue.py). A clean stop deletes the row.
    """

    worker_id = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    # The last time it was declared dead; it is back if it beat since.
    declared_dead_at = models.DateTimeField(null=True, blank=True)
    # Times its leases were revoked, and deliveries released from it: its own
    # heartbeat reads them back to learn that what it queued is no longer its.
    deaths = models.PositiveIntegerField(default=0)
    released = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["worker_id"]

    def __str__(self) -> str:
        return f"{self.worker_id} (last seen {self.last_seen_at:%Y-%m-%d %H:%M:%S})"


class PublishBucket(models.Model):
    """A merchant's publish-rate token bucket, shared by every web process.

    Its own row, not columns on the merchant: a merchant's row is part of its
    cached audience's fingerprint (endpoints.audiences), which a publish would
    otherwise change every time. Written only by deliveries/publish/rate.py.
    """

    merchant = models.OneToOneField(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="publish_bucket",
    )
    # Plain seconds, as the endpoints' buckets: the refill is SQL arithmetic.
    tokens = models.FloatField()
    updated_at = models.FloatField()

    def __str__(self) -> str:
        return f"{self.merchant_id}: {self.tokens:.1f} tokens"
