"""An endpoint's client credentials on the send path: its client certificate
(mTLS) and its auth (HTTP Basic, or OAuth2 client credentials), issue 42.

The claim reads one short column per row, the endpoint's
credentials_version ("" when it has none); the credentials themselves (a
PEM chain and key of a few kilobytes, a password, a client secret) are read
and decrypted once per endpoint and version per process, not once per row
of every claim. Saving auth or tls changes the version
(Endpoint.credentials_changed), so a dispatcher sends with what was saved
from its next claim on.

A row whose endpoint is gone, or has moved on to another version, since
its claim is STALE: the send loop gives it back unsent and unspent, and the
next claim reads it with the endpoint as it is now (its URL and its
credentials agree: the claim reads both in one statement).

Nothing here is ever logged or recorded: every secret field has repr=False.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from endpoints.models import Endpoint
from relayproject.lib import citus

# Endpoints whose credentials a dispatcher keeps decrypted at once, and their
# size in all (a chain, key and bundle are bounded at save to about 340 KiB);
# past either the least recently used is read again when it next sends.
KEPT = 4096
KEPT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ClientTls:
    """What the TLS handshake to the receiver uses beside the default."""

    cert_chain: str = field(default="", repr=False)  # PEM, leaf first; "" none
    key: str = field(default="", repr=False)  # PEM private key
    ca_bundle: str = field(default="", repr=False)  # PEM; "" the system's trust

    @property
    def fingerprint(self) -> str:
        """Names this identity and trust apart from any other (a pool key, a
        cache key) without holding the key: a hash of all three."""
        digest = hashlib.sha256()
        for part in (self.cert_chain, self.key, self.ca_bundle):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:32]


@dataclass(frozen=True)
class EndpointAuth:
    """How a send proves itself to the receiver (contract section 9)."""

    type: str  # "basic" or "oauth2"
    endpoint_id: str  # whose token cache entry (oauth2)
    version: str  # the credentials_version: a new one drops the cached token
    username: str = ""  # basic
    secret: str = field(default="", repr=False)  # the password or client secret
    token_url: str = ""  # oauth2
    client_id: str = ""
    scope: str = ""
    audience: str = ""


@dataclass(frozen=True)
class EndpointCredentials:
    client_tls: ClientTls | None = None
    auth: EndpointAuth | None = None
    # Not what the row was claimed with (the endpoint changed or was deleted
    # since): not to be sent with (sendloop gives the row back).
    stale: bool = False

    @property
    def size(self) -> int:
        """Characters held, as the cache counts them."""
        held = 0
        if (tls := self.client_tls) is not None:
            held += len(tls.cert_chain) + len(tls.key) + len(tls.ca_bundle)
        if (auth := self.auth) is not None:
            held += len(auth.secret) + len(auth.token_url) + len(auth.scope) + 256
        return held


NONE = EndpointCredentials()
STALE = EndpointCredentials(stale=True)

_COLUMNS = (
    "id",
    "credentials_version",
    "auth_type",
    "auth_settings",
    "auth_secret",
    "tls_client_cert",
    "tls_client_key",
    "tls_ca_bundle",
)

_kept: OrderedDict[tuple[str, str], EndpointCredentials] = OrderedDict()
_kept_bytes = 0
_lock = threading.Lock()


def credentials_of(
    versions: dict[str, str], *, merchants: dict[str, int | None] | None = None
) -> dict[str, EndpointCredentials]:
    """endpoint id -> its credentials, for the endpoints of `versions`
    (endpoint id -> the credentials_version its rows were claimed with).
    Those not kept at that version are read in one statement (on Citus one
    per merchant, `merchants`: endpoint id -> merchant, so it runs on the
    merchant's shard); one read at another version, or not found, is STALE."""
    found: dict[str, EndpointCredentials] = {}
    missing: list[str] = []
    with _lock:
        for endpoint_id, version in versions.items():
            if not version:
                found[endpoint_id] = NONE
            elif (kept := _kept.get((endpoint_id, version))) is not None:
                _kept.move_to_end((endpoint_id, version))
                found[endpoint_id] = kept
            else:
                missing.append(endpoint_id)
    if missing:
        for row in _read(missing, merchants or {}):
            credentials = _from_row(row)
            _keep((row[0], row[1]), credentials)
            found[row[0]] = credentials if row[1] == versions[row[0]] else STALE
        for endpoint_id in missing:
            found.setdefault(endpoint_id, STALE)  # deleted since its claim
    return found


def _keep(key: tuple[str, str], credentials: EndpointCredentials) -> None:
    global _kept_bytes
    with _lock:
        if (old := _kept.pop(key, None)) is not None:
            _kept_bytes -= old.size
        _kept[key] = credentials
        _kept_bytes += credentials.size
        while len(_kept) > KEPT or (_kept_bytes > KEPT_BYTES and len(_kept) > 1):
            _, dropped = _kept.popitem(last=False)
            _kept_bytes -= dropped.size


def forget_all() -> None:
    """Drop every kept credential (tests; a process that changes keys)."""
    global _kept_bytes
    with _lock:
        _kept.clear()
        _kept_bytes = 0


def _read(endpoint_ids: list[str], merchants: dict[str, int | None]) -> list:
    if not citus.on():
        return list(Endpoint.objects.filter(pk__in=endpoint_ids).values_list(*_COLUMNS))
    groups: dict[int | None, list[str]] = {}
    for endpoint_id in endpoint_ids:
        groups.setdefault(merchants.get(endpoint_id), []).append(endpoint_id)
    rows: list = []
    for merchant_id, ids in groups.items():
        named = {} if merchant_id is None else {"merchant_id": merchant_id}
        rows += Endpoint.objects.filter(pk__in=ids, **named).values_list(*_COLUMNS)
    return rows


def _from_row(row) -> EndpointCredentials:
    _, version, auth_type, settings_, secret, cert, key, ca_bundle = row
    client_tls = None
    if cert or ca_bundle:
        client_tls = ClientTls(
            cert_chain=cert or "", key=key or "", ca_bundle=ca_bundle
        )
    auth = None
    if auth_type in ("basic", "oauth2"):
        given = settings_ if isinstance(settings_, dict) else {}
        auth = EndpointAuth(
            type=auth_type,
            endpoint_id=row[0],
            version=version,
            username=str(given.get("username", "")),
            secret=secret or "",
            token_url=str(given.get("token_url", "")),
            client_id=str(given.get("client_id", "")),
            scope=str(given.get("scope", "")),
            audience=str(given.get("audience", "")),
        )
    return EndpointCredentials(client_tls=client_tls, auth=auth)
