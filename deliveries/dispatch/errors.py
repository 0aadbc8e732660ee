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
INVALID_RESPONSE = "invalid_response"  # a status line or headers aiohttp refused
