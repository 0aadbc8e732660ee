"""webhook-relay-client: call a webhook relay's REST API and verify its webhooks.

Standard library only. See README.md for publishing, iterating, errors and
verifying in a receiver.
"""

from __future__ import annotations

from webhook_relay_client.base import UNSET
from webhook_relay_client.client import Client
from webhook_relay_client.errors import (
    ApiError,
    FieldError,
    ProblemError,
    RelayError,
    TransportError,
)
from webhook_relay_client.models import (
    AckResult,
    Attempt,
    Delivery,
    DeliveryDetail,
    DeliveryRef,
    Endpoint,
    EndpointCreated,
    Event,
    EventDetail,
    EventType,
    Held,
    ListenSession,
    ListenSessionCreated,
    Merchant,
    Message,
    NackResult,
    Page,
    PortalSession,
    RecoverResult,
    Replayed,
    SecretRotated,
    SigningKey,
    SigningKeys,
    Verification,
)
from webhook_relay_client.pagination import Paginator
from webhook_relay_client.transport import Answer, RetryPolicy, urllib_transport
from webhook_relay_client.verify import InvalidSignature, verify
from webhook_relay_client.version import __version__

__all__ = [
    "UNSET",
    "AckResult",
    "Answer",
    "ApiError",
    "Attempt",
    "Client",
    "Delivery",
    "DeliveryDetail",
    "DeliveryRef",
    "Endpoint",
    "EndpointCreated",
    "Event",
    "EventDetail",
    "EventType",
    "FieldError",
    "Held",
    "InvalidSignature",
    "ListenSession",
    "ListenSessionCreated",
    "Merchant",
    "Message",
    "NackResult",
    "Page",
    "Paginator",
    "PortalSession",
    "ProblemError",
    "RecoverResult",
    "RelayError",
    "Replayed",
    "RetryPolicy",
    "SecretRotated",
    "SigningKey",
    "SigningKeys",
    "TransportError",
    "Verification",
    "__version__",
    "urllib_transport",
    "verify",
]
