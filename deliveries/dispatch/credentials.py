"""An endpoint's client credentials on the send path: its client certificate
(mTLS) and its auth (HTTP Basic, or OAuth2 client credentials), issue 42.

The claim reads one short column per row, the endpoint's
credentials_version ("" when it has none); the credentials themselves (a
PEM chain and key of a few kilobytes, a password, a client secret) are read
and decrypted once per endpoint and version per process, not once per row
of every claim. Saving auth or tls changes the version
(Endpoint.credentials_changed), so a dispatcher sends with what was saved
from its next claim on.

Nothing here is ever logged or recorded: every secret field has repr=False.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from endpoints.models import Endpoint
from relayproject.lib import citus

# Endpoints whose credentials a dispatcher keeps decrypted at once; the least
# recently used is read again from the database when it next sends.
KEPT = 4096


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


NONE = EndpointCredentials()

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
_lock = threading.Lock()


def credentials_of(
    versions: dict[str, str], *, merchants: dict[str, int | None] | None = None
) -> dict[str, EndpointCredentials]:
    """endpoint id -> its credentials, for the endpoints of `versions`
    (endpoint id -> the credentials_version its rows were claimed with).
    Those not kept at that version are read in one statement (on Citus one
    per merchant, `merchants`: endpoint id -> merchant, so it runs on the
    merchant's shard)."""
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
            found[row[0]] = credentials
            with _lock:
                _kept[(row[0], row[1])] = credentials
                while len(_kept) > KEPT:
                    _kept.popitem(last=False)
    return found


def forget_all() -> None:
    """Drop every kept credential (tests; a process that changes keys)."""
    with _lock:
        _kept.clear()


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
