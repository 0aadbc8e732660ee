"""A leased message as the consumer gets it: the body and the headers a POST
to an HTTP endpoint would have carried (contract section 4), signed at the
lease (webhook-timestamp is the lease's time, as it is the send's for HTTP).

Built with the same pieces the dispatcher uses (deliveries/signing.py,
deliveries/request.py), so a consumer checks a pulled message with any
Standard Webhooks library and the endpoint's secret or public key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from deliveries import signing
from deliveries.models import Event
from deliveries.request import TRANSPORT_HEADERS, outgoing_headers
from endpoints.models import Endpoint
from endpoints.selectors import live_secrets


@dataclass(frozen=True)
class Message:
    id: str  # the delivery's
    attempt: int  # 1-based, as X-Relay-Attempt
    headers: dict[str, str]
    body: str  # the exact body a POST would have carried
    lease_expires_at: datetime


def messages_render(
    *, endpoint: Endpoint, rows: list[dict], lease_until: datetime, now: datetime
) -> list[Message]:
    """One Message per leased row (rows as leasing.py read them, attempt_count
    counting any lost attempt), in the rows' order."""
    events = {
        e["id"]: e
        for e in Event.objects.filter(
            merchant_id=endpoint.merchant_id, pk__in={r["event_id"] for r in rows}
        ).values("id", "type", "created_at", "data")
    }
    secrets = live_secrets(
        endpoint_ids=[endpoint.pk], now=now, merchant_id=endpoint.merchant_id
    ).get(endpoint.pk, [])
    timestamp = int(now.timestamp())
    messages = []
    for row in rows:
        event = events[row["event_id"]]
        body = signing.serialize_body(
            event_id=event["id"],
            event_type=event["type"],
            created_at=event["created_at"],
            data=event["data"],
        )
        headers = outgoing_headers(
            custom={},
            event_id=event["id"],
            delivery_id=row["id"],
            attempt=row["attempt_count"] + 1,
            timestamp=str(timestamp),
            signature=signing.signature_header(
                secrets=secrets,
                msg_id=event["id"],
                timestamp=timestamp,
                body=body,
                scheme=endpoint.signing,
                private_key=endpoint.signing_private_key or "",
            ),
        )
        for name in TRANSPORT_HEADERS:  # the wire's, not the message's
            headers.pop(name, None)
        messages.append(
            Message(
                id=row["id"],
                attempt=row["attempt_count"] + 1,
                headers=headers,
                body=body.decode("utf-8"),
                lease_expires_at=lease_until,
            )
        )
    return messages
