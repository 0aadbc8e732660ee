"""The request a receiver gets: its headers, built in one place.

The dispatcher sends these (dispatch/outgoing.py signs them, dispatch/
transport.py puts them on the wire); the portal shows the next attempt's
request from the same builder, so what a merchant reads is what a receiver
will get, name for name and in order (contract section 4). Pure: the caller
brings the timestamp and the signature (or words standing for them).
"""

from __future__ import annotations

from collections.abc import Mapping

VERSION = "1.0"
USER_AGENT = f"webhook-relay/{VERSION}"
# Set last on every request, so no endpoint header changes them. The transport
# never decompresses a response (dispatch/transport.py), so it asks for none.
TRANSPORT_HEADERS = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}


def outgoing_headers(
    *,
    custom: Mapping[str, str],
    event_id: str,
    delivery_id: str,
    attempt: int,
    timestamp: str,
    signature: str,
    traceparent: str = "",
) -> dict[str, str]:
    """Every header of one attempt, in the order they go on the wire."""
    headers = {
        **custom,  # reserved names are refused on save; ours win anyway
        "Content-Type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": signature,
        "X-Relay-Event-Id": event_id,
        "X-Relay-Delivery-Id": delivery_id,
        "X-Relay-Attempt": str(attempt),
    }
    if traceparent:  # RELAY_SEND_TRACEPARENT: off unless asked for
        headers["traceparent"] = traceparent
    return {**headers, **TRANSPORT_HEADERS}
