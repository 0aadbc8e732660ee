"""What the relay remembers about telling people: per-endpoint watch state,
merchants' email choices and extra addresses, the email outbox, each
merchant's email count for the day and the maintenance slots."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from endpoints.merchant_keyed import (
    MerchantForeignKey,
    MerchantKeyed,
    MerchantOneToOneField,
)


class Kind(models.TextChoices):
    """The conditions people are told about, by email and operational event."""

    FAILING = "failing", "Endpoint failing"
    DISABLED = "disabled", "Endpoint disabled"
    ENABLED = "enabled", "Endpoint enabled again"


class EndpointWatch(MerchantKeyed):
    """What has already been said about one endpoint, so each thing is said once.

    A failing episode is keyed by its start (the first failed attempt after the
    last success, or after a re-enable): a new start clears the flags.
    """

    # Keyed in the database by (endpoint_id, merchant_id), as EndpointSecret.
    endpoint = MerchantOneToOneField(
        "endpoints.Endpoint",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="watch",
        db_constraint=False,
    )
    merchant = models.ForeignKey(
        "endpoints.Merchant", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    episode_started_at = models.DateTimeField(null=True, blank=True)
    said_breaker_open = models.BooleanField(default=False)
    said_half_window = models.BooleanField(default=False)
    said_late_window = models.BooleanField(default=False)
    # Failures before a re-enable do not count towards the next auto-disable.
    reenabled_at = models.DateTimeField(null=True, blank=True)
    # The disabled_at we announced; set while the endpoint is disabled.
    said_disabled_at = models.DateTimeField(null=True, blank=True)
    # Dead letters seen but not yet announced (relay.delivery.dead coalesces).
    dead_count = models.PositiveIntegerField(default=0)
    dead_first_id = models.CharField(max_length=40, blank=True, default="")
    dead_last_id = models.CharField(max_length=40, blank=True, default="")
    dead_first_at = models.DateTimeField(null=True, blank=True)
    dead_last_at = models.DateTimeField(null=True, blank=True)
    dead_said_at = models.DateTimeField(null=True, blank=True)
    # Last email per condition, for NOTIFY_EMAIL_MIN_INTERVAL_HOURS.
    emailed_failing_at = models.DateTimeField(null=True, blank=True)
    emailed_disabled_at = models.DateTimeField(null=True, blank=True)
    emailed_enabled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"watch {self.endpoint_id}"


class NotificationSettings(models.Model):
    """A merchant's email choices: each kind on by default (extra addresses are
    NotificationAddress rows)."""

    merchant = models.OneToOneField(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="notification_settings",
    )
    email_failing = models.BooleanField(default=True)
    email_disabled = models.BooleanField(default=True)
    email_enabled = models.BooleanField(default=True)

    class Meta:
        verbose_name_plural = "notification settings"

    def __str__(self) -> str:
        return f"notifications of {self.merchant_id}"

    def wants(self, kind: str) -> bool:
        return bool(getattr(self, f"email_{kind}"))


class NotificationAddress(models.Model):
    """An address an owner listed besides the owners': mailed nothing but one
    confirmation until its owner confirms (deliveries/notifications/addresses.py).

    A removed address keeps its row (listed false) while its last confirmation
    is under a day old, so removing and adding it again sends no second one.
    """

    pk = models.CompositePrimaryKey("merchant", "email")
    merchant = models.ForeignKey(
        "endpoints.Merchant", on_delete=models.CASCADE, related_name="+"
    )
    email = models.EmailField()  # lower case (addresses.normalised)
    listed = models.BooleanField(default=True)
    added_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # The last confirmation: when it was sent, and its link's token, hashed.
    asked_at = models.DateTimeField(null=True, blank=True)
    token_hash = models.CharField(max_length=64, blank=True, default="")
    token_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["token_hash"],
                condition=~Q(token_hash=""),
                name="notification_address_token_idx",
            )
        ]

    def __str__(self) -> str:
        return self.email

    @property
    def confirmed(self) -> bool:
        return self.confirmed_at is not None


class MailQuota(models.Model):
    """How many emails the relay has sent for one merchant on `day` (UTC),
    against RELAY_NOTIFICATION_MAIL_PER_DAY (deliveries/notifications/quota.py)."""

    merchant = models.OneToOneField(
        "endpoints.Merchant",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
    )
    day = models.DateField(null=True, blank=True)
    sent = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.sent} emails of {self.merchant_id} on {self.day}"


class OutgoingEmail(MerchantKeyed):
    """The email outbox: written with the state change, sent after commit by a
    maintenance thread, never inside a transaction or a dispatcher's send loop."""

    kind = models.CharField(max_length=16, choices=Kind.choices)
    merchant = models.ForeignKey("endpoints.Merchant", on_delete=models.CASCADE)
    # Keyed in the database by (endpoint_id, merchant_id), as EndpointSecret.
    endpoint = MerchantForeignKey(
        "endpoints.Endpoint", on_delete=models.CASCADE, db_constraint=False
    )
    # The same payload as the operational event: the email is rendered from it.
    context = models.JSONField()
    created_at = models.DateTimeField()
    send_after = models.DateTimeField()
    tries = models.PositiveSmallIntegerField(default=0)
    sent_at = models.DateTimeField(null=True, blank=True)
    recipients = models.JSONField(default=list, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")
    gave_up = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(
                fields=["send_after"],
                condition=Q(sent_at__isnull=True, gave_up=False),
                name="outgoing_email_due_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} email for {self.endpoint_id}"


class MaintenanceSlot(models.Model):
    """One row per periodic job: whoever moves last_run_at forward runs it.

    mark is the job's own watermark (the dead letters already seen).
    """

    name = models.CharField(max_length=40, primary_key=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    mark = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name
