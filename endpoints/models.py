"""Who receives webhooks: merchants, their endpoints, secrets and health."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from endpoints import brokers, signing_keys
from endpoints.merchant_keyed import (
    MerchantForeignKey,
    MerchantKeyed,
    MerchantOneToOneField,
)
from endpoints.secret_storage import EncryptedHeadersField, EncryptedSecretField
from relayproject.lib.ids import new_endpoint_id


class Merchant(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # What switching off stops, and where: endpoints/switched_off.py.
    is_active = models.BooleanField(
        default=True,
        help_text="Untick to switch this merchant off: its API keys are refused "
        "(403), no key may publish or change anything for it, its portal is "
        "closed, and its deliveries are held, spending no attempt, until it is "
        "ticked again (sends already under way finish).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="merchants"
    )
    # The broker hosts its broker endpoints may use (endpoints/brokers.py),
    # set by staff only; None means the RELAY_BROKER_HOSTS setting.
    broker_hosts = models.JSONField(
        null=True,
        blank=True,
        help_text="Broker hosts this merchant's broker endpoints may publish to, "
        'as a list of host or host:port patterns (["mq.example.com:5671", '
        '"*.bus.example.com"]). Empty: the RELAY_BROKER_HOSTS setting; [] allows none.',
    )
    # Quotas (relayproject/lib/limits.py), set by staff only; None means the
    # setting of the same name. endpoints.quotas reads the value in force.
    max_endpoints = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Endpoints this merchant may have (disabled ones count). "
        "Empty: the MAX_ENDPOINTS_PER_MERCHANT setting.",
    )
    publish_rate_per_second = models.FloatField(
        null=True,
        blank=True,
        help_text="Events per second this merchant may publish, sustained. "
        "Empty: the PUBLISH_RATE_PER_MERCHANT setting.",
    )
    publish_burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Events this merchant may publish at once after a quiet spell "
        "(the largest accepted request). Empty: the PUBLISH_BURST_PER_MERCHANT "
        "setting.",
    )
    # Sends at once for all its endpoints across all dispatchers (claimed rows
    # with a live lease; deliveries/dispatch/claim_sql.py applies it); None
    # means the MERCHANT_MAX_IN_FLIGHT setting. Set by staff only: it is what
    # keeps one merchant from every send slot.
    max_in_flight = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],  # the form says so beside the field
        help_text="Sends at once for all of this merchant's endpoints, across all "
        "dispatchers. Empty: the MERCHANT_MAX_IN_FLIGHT setting.",
    )
    # Retry policy defaults for its endpoints (endpoints/retry_policy.py): an
    # endpoint's own value wins, None means the relay's setting. Bounded by
    # the operator (RETRY_MAX_ATTEMPTS_LIMIT, RETRY_MAX_WINDOW_SECONDS,
    # HTTP_TIMEOUT_MAX_SECONDS) when saved through the services.
    retry_schedule = models.JSONField(
        null=True,
        blank=True,
        help_text="Default delays in seconds between attempts for this "
        "merchant's endpoints, as a list ([5, 30, 300]: attempt n+1 waits the "
        "n-th, the last repeating). Empty: the relay's full-jitter backoff.",
    )
    max_attempts = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Default attempts per delivery for this merchant's endpoints. "
        "Empty: the MAX_ATTEMPTS setting.",
    )
    timeout_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="Default per-attempt timeout for this merchant's endpoints. "
        "Empty: the HTTP_TIMEOUT_SECONDS setting.",
    )
    # The scheme its new endpoints sign with when they name none
    # (endpoints/signing_default.py); None means the DEFAULT_SIGNING_SCHEME
    # setting. Read at an endpoint's creation only.
    signing = models.CharField(
        max_length=8,
        null=True,
        blank=True,
        choices=[(s, signing_keys.SCHEME_LABELS[s]) for s in signing_keys.SCHEMES],
        help_text="How this merchant's new endpoints sign when they name no "
        "scheme. Empty: the DEFAULT_SIGNING_SCHEME setting. Changing it changes "
        "no existing endpoint.",
    )
    # None means the REQUIRE_ENDPOINT_VERIFICATION setting (endpoints/verification.py).
    require_endpoint_verification = models.BooleanField(
        null=True,
        blank=True,
        help_text="New endpoints and changed URLs receive nothing until verified. "
        "Empty: the REQUIRE_ENDPOINT_VERIFICATION setting.",
    )

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(publish_rate_per_second__isnull=True)
                | Q(publish_rate_per_second__gt=0),
                name="merchant_publish_rate_positive",
            ),
            models.CheckConstraint(
                condition=Q(publish_burst__isnull=True) | Q(publish_burst__gte=1),
                name="merchant_publish_burst_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_in_flight__isnull=True) | Q(max_in_flight__gte=1),
                name="merchant_max_in_flight_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__isnull=True) | Q(max_attempts__gte=1),
                name="merchant_max_attempts_positive",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__isnull=True) | Q(timeout_seconds__gt=0),
                name="merchant_timeout_positive",
            ),
            models.CheckConstraint(
                condition=Q(signing__isnull=True) | Q(signing__in=signing_keys.SCHEMES),
                name="merchant_signing_known",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        DEVELOPER = "developer", "Developer"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    merchant = models.ForeignKey(Merchant, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "merchant"], name="membership_unique_user_merchant"
            )
        ]
        # A membership opens a merchant's secrets in the portal: granting one
        # is not the same as editing merchants (endpoints/admin/model_admins.py).
        permissions = [
            ("grant_membership", "Can grant, change and remove merchant memberships")
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.merchant} ({self.role})"

    @property
    def can_edit(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.DEVELOPER)


class Endpoint(MerchantKeyed):
    id = models.CharField(primary_key=True, max_length=40, default=new_endpoint_id)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="endpoints"
    )
    # What it is (endpoints/brokers.py): "http" posts to url; a broker kind
    # publishes to the broker url names, at target.
    kind = models.CharField(
        max_length=16,
        choices=[(k, brokers.KIND_LABELS[k]) for k in brokers.KINDS],
        default=brokers.HTTP,
        db_default=brokers.HTTP,
    )
    # A broker's URL is kept here without its credentials (scheme://host:port/path).
    url = models.URLField(max_length=2000)
    # A broker endpoint's target: {"exchange", "routing_key"}, {"subject"},
    # {"stream", "maxlen"} or {"topic"}; {} for http.
    target = models.JSONField(default=dict, blank=True)
    # A broker URL's user:password, split off url and encrypted like a signing
    # secret; write-only (no form, page or answer shows it).
    broker_credentials = EncryptedSecretField(null=True, blank=True, editable=False)
    description = models.CharField(max_length=500, blank=True, default="")
    # [] subscribes to every type; "payment.*" to every "payment." type.
    event_types = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    disabled_at = models.DateTimeField(null=True, blank=True)
    # Who disabled it: "receiver" (410), "auto-disable", or "staff:NAME",
    # "merchant:NAME", "api:KEY NAME"; operational events carry it.
    disabled_by = models.CharField(max_length=200, blank=True, default="")
    # Staff may keep an endpoint out of auto-disable (a known long outage).
    auto_disable_exempt = models.BooleanField(default=False)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    # Its retry policy beside max_attempts (endpoints/retry_policy.py); None
    # means its merchant's default, else the relay's setting.
    retry_schedule = models.JSONField(null=True, blank=True)
    timeout_seconds = models.FloatField(null=True, blank=True)
    rate_limit_per_second = models.FloatField(null=True, blank=True)
    # A payload filter (endpoints/filtering.py); null lets every event through.
    filter = models.JSONField(null=True, blank=True)
    # {"name": "value"} sent with every request (endpoints/custom_headers.py);
    # values are often credentials: encrypted in the column, never shown back.
    headers = EncryptedHeadersField(default=dict, blank=True)
    # Sends at once across all dispatchers (claimed rows with a live lease);
    # None means the ENDPOINT_MAX_IN_FLIGHT setting.
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    # Receiver statuses that end a delivery at once instead of being retried
    # (with PERMANENT_FAILURE_STATUSES); [] retries every non-2xx but 410.
    permanent_statuses = models.JSONField(default=list, blank=True)
    # Ownership verification (endpoints/verification.py). While true the claim
    # takes none of its deliveries (they wait, spending no attempt) but the
    # one that carries the challenge: one boolean on the row the claim reads.
    awaiting_verification = models.BooleanField(default=False)
    verified_at = models.DateTimeField(null=True, blank=True)
    # "receiver" (echoed the challenge), "merchant:NAME" (pasted it),
    # "staff:NAME" (marked verified in the admin), "api:KEY NAME".
    verified_by = models.CharField(max_length=200, blank=True, default="")
    # The challenge being asked, a Fernet token in the column like a secret;
    # None once verified.
    verification_challenge = EncryptedSecretField(null=True, blank=True, editable=False)
    # The delivery that carries it; "" until a dispatcher has made it.
    verification_delivery_id = models.CharField(max_length=40, blank=True, default="")
    verification_requested_at = models.DateTimeField(null=True, blank=True)
    # Wrong pastes of the current challenge (endpoints/verification.py): at
    # WRONG_ANSWERS_LIMIT it is spent until a new one is asked for.
    verification_wrong_answers = models.PositiveSmallIntegerField(
        default=0, db_default=0
    )
    # Events sharing an ordering_key are sent one at a time, in publish order
    # (deliveries/lanes.py). Read at publish: a change applies to later events.
    ordered = models.BooleanField(default=False, db_default=False)
    # How its requests are signed (endpoints/signing_keys.py): "v1" HMAC with
    # its secrets, "v1a" Ed25519 with its key pair, "both" side by side.
    signing = models.CharField(
        max_length=8,
        choices=[(s, signing_keys.SCHEME_LABELS[s]) for s in signing_keys.SCHEMES],
        default=signing_keys.V1,
        db_default=signing_keys.V1,
    )
    # Its Ed25519 key pair, made the first time it signs with v1a: the private
    # key encrypted like a signing secret and write-only (no form, page or
    # answer shows it); the public key in clear, published in the key set.
    signing_private_key = EncryptedSecretField(null=True, blank=True, editable=False)
    signing_public_key = models.CharField(
        max_length=64, blank=True, default="", db_default="", editable=False
    )
    # How it proves who is sending (endpoints/client_credentials.py), HTTP
    # kind only. auth_type "" (none), "basic" or "oauth2"; auth_settings the
    # parts shown back (username; token_url, client_id, scope, audience);
    # auth_secret the password or client secret, encrypted and write-only.
    auth_type = models.CharField(max_length=8, blank=True, default="", db_default="")
    auth_settings = models.JSONField(default=dict, db_default={}, blank=True)
    auth_secret = EncryptedSecretField(null=True, blank=True, editable=False)
    # A client certificate (mTLS): the PEM chain in clear (it is public), its
    # private key encrypted and write-only; subject and expiry read from the
    # leaf at save. tls_ca_bundle: PEM certificates the receiver's chain is
    # checked against instead of the system's (a private CA); never "no check".
    tls_client_cert = models.TextField(blank=True, default="", db_default="")
    tls_client_key = EncryptedSecretField(null=True, blank=True, editable=False)
    tls_ca_bundle = models.TextField(blank=True, default="", db_default="")
    tls_subject = models.CharField(
        max_length=500, blank=True, default="", db_default=""
    )
    tls_not_after = models.DateTimeField(null=True, blank=True)
    # The tls_not_after an expiry warning was raised for (an operational event
    # once per certificate, not once per check).
    tls_expiry_warned_for = models.DateTimeField(null=True, blank=True)
    # Changes whenever auth or tls does ("" when it has neither): the claim
    # reads only this per row, and dispatchers load and decrypt an endpoint's
    # credentials once per version (deliveries/dispatch/credentials.py).
    credentials_version = models.CharField(
        max_length=32, blank=True, default="", db_default="", editable=False
    )
    # Pull endpoints (kind "pull", deliveries/pull/): how long a message handed
    # to a consumer stays leased to it; None: PULL_VISIBILITY_TIMEOUT_SECONDS.
    visibility_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    # A `listen` session (deliveries/pull/sessions.py): a pull endpoint made
    # for one run of the client's listen command. It ends (disabled, its
    # unfinished messages dead) when the command stops or after
    # LISTEN_IDLE_SECONDS without a pull, and is deleted LISTEN_KEEP_ENDED_SECONDS
    # later (or sooner: a merchant keeps at most 20 ended ones); an ended
    # session no longer counts against the endpoint quota.
    listen_session = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def credentials_changed(self) -> None:
        """Mark auth or tls as changed: dispatchers load them anew."""
        has_any = self.auth_type or self.tls_client_cert or self.tls_ca_bundle
        self.credentials_version = secrets.token_hex(8) if has_any else ""

    class Meta:
        ordering = ["merchant", "created_at"]
        indexes = [
            models.Index(fields=["merchant", "is_active"]),
            # The dispatchers look for challenges to send twice a second.
            models.Index(
                fields=["awaiting_verification"],
                condition=Q(awaiting_verification=True),
                name="endpoint_awaiting_verif_idx",
            ),
            # The periodic check looks for client certificates near expiry
            # (deliveries/notifications/certificates.py) once a minute.
            models.Index(
                fields=["tls_not_after"],
                condition=Q(tls_not_after__isnull=False),
                name="endpoint_tls_not_after_idx",
            ),
        ]
        # Vouching for an endpoint without its challenge is not the same as
        # editing endpoints (endpoints/admin/model_admins.py).
        permissions = [
            (
                "mark_endpoint_verified",
                "Can mark an endpoint verified without its challenge",
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(rate_limit_per_second__isnull=True)
                | Q(rate_limit_per_second__gt=0),
                name="endpoint_rate_limit_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__isnull=True) | Q(max_attempts__gte=1),
                name="endpoint_max_attempts_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_in_flight__isnull=True) | Q(max_in_flight__gte=1),
                name="endpoint_max_in_flight_positive",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__isnull=True) | Q(timeout_seconds__gt=0),
                name="endpoint_timeout_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.url}"


class EndpointSecret(MerchantKeyed):
    """A signing secret; during a rotation the previous one signs until it expires."""

    # The database's key is (endpoint_id, merchant_id) into the endpoint's
    # (id, merchant_id) (migration 0013): Citus keeps a key between two
    # distributed tables only when it names the distribution column.
    endpoint = MerchantForeignKey(
        Endpoint, on_delete=models.CASCADE, related_name="secrets", db_constraint=False
    )
    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # A Fernet token in the column, the whsec_ secret in Python (secret_storage).
    secret = EncryptedSecretField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["endpoint", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.secret[:10]}… ({self.endpoint_id})"

    @property
    def masked(self) -> str:
        return f"{self.secret[:10]}…{self.secret[-4:]}"


class EndpointHealth(MerchantKeyed):
    """Breaker, rate-limit bucket and rolling latency of one endpoint.

    The row is the lock that makes breaker counters exact across dispatchers:
    every outcome updates it under SELECT ... FOR UPDATE.
    """

    class State(models.TextChoices):
        CLOSED = "closed", "Closed"
        OPEN = "open", "Open"
        HALF_OPEN = "half_open", "Half-open"

    # Keyed in the database as EndpointSecret.endpoint is.
    endpoint = MerchantOneToOneField(
        Endpoint,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="health",
        db_constraint=False,
    )
    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    breaker_state = models.CharField(
        max_length=16, choices=State.choices, default=State.CLOSED
    )
    consecutive_failures = models.PositiveIntegerField(default=0)
    failure_threshold = models.PositiveIntegerField()
    cooldown_seconds = models.FloatField()
    opened_at = models.DateTimeField(null=True, blank=True)
    next_probe_at = models.DateTimeField(null=True, blank=True)
    probe_delivery_id = models.CharField(max_length=40, blank=True, default="")
    breaker_reason = models.CharField(max_length=300, blank=True, default="")
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    # Token bucket shared by all dispatchers; plain seconds keep the atomic
    # UPDATE arithmetic identical on PostgreSQL and SQLite.
    rate_tokens = models.FloatField(default=0)
    rate_updated_at = models.FloatField(default=0)
    # Rolling 24 h statistics, written by refresh_endpoint_stats.
    p50_ms = models.FloatField(null=True, blank=True)
    p95_ms = models.FloatField(null=True, blank=True)
    p99_ms = models.FloatField(null=True, blank=True)
    sample_count = models.PositiveIntegerField(default=0)
    success_rate = models.FloatField(null=True, blank=True)
    is_slow = models.BooleanField(default=False)
    stats_refreshed_at = models.DateTimeField(null=True, blank=True)
    # Pull endpoints (deliveries/pull/): the last time a consumer asked for
    # messages and, for a listen session, when it ends unless pulled again.
    # Here, not on the endpoint: every pull writes them, and an endpoint's row
    # is part of its merchant's cached audience (endpoints/audiences.py).
    last_pulled_at = models.DateTimeField(null=True, blank=True)
    session_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "endpoint health"
        indexes = [models.Index(fields=["p95_ms"])]

    def __str__(self) -> str:
        return f"{self.endpoint_id}: {self.breaker_state}"

    @property
    def probe_in_flight(self) -> bool:
        return bool(self.probe_delivery_id)


class ApiKey(models.Model):
    """A REST API key: platform-wide when merchant is empty, else scoped to it."""

    name = models.CharField(max_length=200)
    merchant = models.ForeignKey(
        Merchant,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
    )
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # A scoped key may always make viewer and developer portal links for its
    # merchant; owner links only when a superuser (or the create_api_key
    # command) said so. Platform keys, superusers' alone, always may.
    owner_links = models.BooleanField(
        "may make owner portal links",
        default=False,
        help_text="Owner portal links for its merchant (superusers decide).",
    )

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]
        permissions = [
            ("create_api_key", "Can create merchant-scoped API keys in the admin")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_platform(self) -> bool:
        return self.merchant_id is None

    @property
    def may_make_owner_links(self) -> bool:
        return self.is_platform or self.owner_links


class PortalLink(models.Model):
    """A single-use link into the portal for one merchant, made through the API.

    Only a hash of the token is stored; the link itself is shown once.
    """

    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="portal_links"
    )
    role = models.CharField(
        max_length=16, choices=Membership.Role.choices, default=Membership.Role.VIEWER
    )
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"portal link {self.pk} for {self.merchant_id} ({self.role})"


class EventType(models.Model):
    """An entry in the event-type catalogue, shared by every merchant.

    With a schema, published events of this type must match it (JSON Schema,
    checked by endpoints/catalogue.py); without one any data is accepted.
    """

    name = models.CharField(max_length=255, unique=True)
    description = models.TextField(blank=True, default="")
    schema = models.JSONField(null=True, blank=True)
    example = models.JSONField(null=True, blank=True)
    deprecated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
