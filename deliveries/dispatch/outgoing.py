"""The request a send puts on the wire, signed at send time, and what its
attempt records of it.

Every byte signed is a byte sent: the body is the job's, built once at claim
time, and the signature covers it with the id and the timestamp the headers
carry (contract section 4). The attempt keeps the headers as sent, in order,
except the values that open the receiver (the signature, an endpoint's
secret headers): those are kept as a keyed fingerprint only.
"""

from __future__ import annotations

import functools
import hmac
from dataclasses import replace

from django.conf import settings

from deliveries import signing
from deliveries.dispatch.endpoint_auth import REDACTED, authorized_headers
from deliveries.dispatch.jobs import Job
from deliveries.dispatch.transport import OutgoingRequest, wire_headers
from deliveries.request import outgoing_headers


def signed_request(
    job: Job, *, timestamp: int, traceparent: str = ""
) -> OutgoingRequest:
    """The request as the contract (section 4) describes it, signed now."""
    headers = outgoing_headers(
        custom=job.headers,
        event_id=job.event_id,
        delivery_id=job.delivery_id,
        attempt=job.attempt_count + 1,
        timestamp=str(timestamp),
        signature=signing.signature_header(
            secrets=job.secrets,
            msg_id=job.event_id,
            timestamp=timestamp,
            body=job.body,
            scheme=job.signing,
            private_key=job.signing_key,
        ),
        traceparent=traceparent,
    )
    return OutgoingRequest(
        url=job.url,
        headers=headers,
        body=job.body,
        tenant=job.merchant_id,
        kind=job.kind,
        target=job.target,
        credentials=job.broker_credentials,
        broker_hosts=job.broker_hosts,
        timeout=job.timeout_seconds,
        client_tls=job.credentials.client_tls,
        auth=job.credentials.auth,
    )


# Headers whose values open the receiver: kept as a fingerprint only, so the
# attempt shows that they were sent (and whether two attempts sent the same)
# without storing them.
SIGNATURE_HEADER = "webhook-signature"
# The fingerprint is keyed by the server's secret: a plain hash shown to every
# viewer would let them test guesses of a token offline. The context string
# keeps this key apart from every other use of SECRET_KEY.
FINGERPRINT_CONTEXT = b"webhook-relay attempt header fingerprint v1"


def _fingerprint_key() -> bytes:
    return _fingerprint_key_of(settings.SECRET_KEY)


@functools.lru_cache(maxsize=4)
def _fingerprint_key_of(secret_key: str) -> bytes:
    # Derived once per SECRET_KEY, not once per header of every send; keyed
    # by the key itself, so a changed setting (tests override it) derives anew.
    return hmac.digest(secret_key.encode(), FINGERPRINT_CONTEXT, "sha256")


def fingerprint(value: str, *, key: bytes | None = None) -> str:
    digest = signing.hmac_sha256(key or _fingerprint_key(), value.encode())
    return "redacted, hmac " + digest.hex()[:8]


def recorded_headers(
    request: OutgoingRequest, *, secret_names
) -> tuple[tuple[str, str], ...]:
    """The headers as sent, in order, with custom header values and the
    signatures replaced by their fingerprints, and the endpoint's
    Authorization (added by endpoint_auth.AuthorizingSender after this
    request was made) shown by its scheme alone."""
    hidden = {name.lower() for name in secret_names}
    hidden.add(SIGNATURE_HEADER)
    key = _fingerprint_key()
    if request.auth is not None and request.kind == "http":
        # Shown by its scheme alone: not even a fingerprint of a password or
        # token. (Broker kinds send no Authorization.)
        shown = REDACTED.get(request.auth.type, "(redacted)")
        request = replace(request, headers=authorized_headers(request.headers, shown))
        hidden.discard("authorization")
    return tuple(
        [
            (name, fingerprint(value, key=key) if name.lower() in hidden else value)
            for name, value in wire_headers(request).items()
        ]
    )
