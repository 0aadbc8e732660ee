"""TLS for an endpoint with a client certificate or a CA bundle of its own
(mTLS, issue 42), and the words an attempt uses when TLS fails.

Each identity (ClientTls) gets one SSLContext, made on its first send and
kept (ClientContexts, least recently used dropped past KEPT, as many as a
dispatcher keeps credentials for): loading the trust, a chain and a key is
about 30 ms of CPU (OpenSSL 3 decodes each of the system's ~150 CA
certificates afresh for every context, and Python cannot share one store
between contexts), so a send must not repeat it, and it is done on threads
of its own, loaded from files (OpenSSL reads a file without Python's lock;
`cadata` holds it), so a burst of new identities does not stall the event
loop's other sends. Where the default trust is loaded from is found once.
Verification is never
turned off: the receiver's chain is checked against the endpoint's CA bundle
when it has one, else against the trust the sender's default sends use, and
its name always. Python's ssl loads a certificate chain and key only from
files, so they are written to a private directory (0700, files 0600; on
tmpfs where there is one, so they need not touch a disk), loaded and deleted
at once.

A TLS failure names its cause in the attempt (describe): unknown CA, name
mismatch, expired, handshake refused (contract section 9). Nothing here puts
key material in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import ssl
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509

from deliveries.dispatch import credentials
from deliveries.dispatch.credentials import ClientTls

# Identities whose context a sender keeps at once: as many as a dispatcher
# keeps credentials for, so an identity whose credentials are kept is not
# rebuilt on every send.
KEPT = credentials.KEPT
# Threads building contexts at once: a burst of new identities is worked off
# beside the event loop, taking no more than this many cores from it.
BUILDERS = 2

# OpenSSL's X509_V_ERR_* codes (x509_vfy.h) for a receiver's chain, by cause.
_UNKNOWN_CA = {
    2,  # unable to get issuer certificate
    18,  # self-signed certificate
    19,  # self-signed certificate in chain
    20,  # unable to get local issuer certificate
    21,  # unable to verify the first certificate
    27,  # certificate not trusted
}
_NAME_MISMATCH = {62, 64}  # hostname mismatch, IP address mismatch
_EXPIRED = 10
_NOT_YET_VALID = 9

# Alerts the receiver sent (OpenSSL's reason names them SSLV3_ALERT_*,
# TLSV1_ALERT_*, TLSV13_ALERT_*): what each says about our handshake.
_ALERT_CAUSES = {
    "certificate_expired": "expired",
    "bad_certificate": "handshake refused",
    "certificate_required": "handshake refused",
    "unknown_ca": "handshake refused",
    "handshake_failure": "handshake refused",
    "certificate_unknown": "handshake refused",
    "unsupported_certificate": "handshake refused",
    "certificate_revoked": "handshake refused",
    "access_denied": "handshake refused",
}

# Where the chain and key are written for the moment of loading: memory
# when the system has a tmpfs for it.
_SHM = "/dev/shm"


class TlsFailed(Exception):
    """A send's TLS could not be set up or broke; str() is the attempt's
    message, naming the cause, with no key material in it."""


@dataclass(frozen=True, slots=True)
class _Made:
    fingerprint: str
    context: ssl.SSLContext | None
    problem: str  # why there is no context
    not_after: float | None  # the client certificate's expiry, epoch seconds


class ClientContexts:
    """The SSLContext of each endpoint identity, made once (on a builder
    thread) and kept.

    `default_trust` is the context the sender's default sends use (None: the
    system's trust, as ssl.create_default_context() loads it); an identity
    without a CA bundle trusts the CA certificates loaded into it.
    `wall_clock` (epoch seconds) tells whether a client certificate has
    expired. One sender, one event loop: what is kept is touched only there.
    """

    def __init__(
        self,
        default_trust: ssl.SSLContext | None,
        *,
        kept: int = KEPT,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.default_trust = default_trust
        self.kept = kept
        self.wall_clock = wall_clock
        # Keyed by the identity itself: hashing it reuses its strings' cached
        # hashes, where the fingerprint would hash kilobytes on every send.
        self._made: OrderedDict[ClientTls, _Made] = OrderedDict()
        # One build per identity however many sends wait for it.
        self._building: dict[ClientTls, asyncio.Future[_Made]] = {}
        self._builders: ThreadPoolExecutor | None = None
        # Where the default trust is loaded from, found by the first build.
        self._trust_lock = threading.Lock()
        self._trust: tuple[str | None, str | None] | None = None
        self._trust_found = False
        self._trust_file = ""  # written by us (a default_trust's CAs): removed

    async def context_of(self, client_tls: ClientTls) -> tuple[str, ssl.SSLContext]:
        """(its fingerprint, its context); TlsFailed if its certificate, key
        or CA bundle cannot be used (remembered too: a bad key is not parsed
        again on every retry)."""
        made = self._made.get(client_tls)
        if made is None:
            # shield: a send whose deadline ends now leaves the build to
            # finish and be kept for the next send.
            made = await asyncio.shield(self._build(client_tls))
        else:
            self._made.move_to_end(client_tls)
        if made.context is None:
            raise TlsFailed(made.problem)
        return made.fingerprint, made.context

    def close(self) -> None:
        if self._builders is not None:
            self._builders.shutdown(wait=False, cancel_futures=True)
            self._builders = None
        if self._trust_file:
            with contextlib.suppress(OSError):
                os.unlink(self._trust_file)
            self._trust_file = ""
            self._trust_found = False

    def _build(self, client_tls: ClientTls) -> asyncio.Future[_Made]:
        building = self._building.get(client_tls)
        if building is None:
            if self._builders is None:
                self._builders = ThreadPoolExecutor(
                    BUILDERS, thread_name_prefix="relay-tls-context"
                )
            building = asyncio.get_running_loop().run_in_executor(
                self._builders, self._kept, client_tls
            )
            self._building[client_tls] = building
            building.add_done_callback(functools.partial(self._built, client_tls))
        return building

    def _built(self, client_tls: ClientTls, building: asyncio.Future[_Made]) -> None:
        if self._building.get(client_tls) is building:
            del self._building[client_tls]
        if building.cancelled() or building.exception() is not None:
            return  # the files could not be written: tried again next send
        self._made[client_tls] = building.result()
        while len(self._made) > self.kept:
            self._made.popitem(last=False)

    def refused_on_first_read(self, client_tls: ClientTls) -> str:
        """Why a new TLS 1.3 connection of this identity, closed by the
        receiver before any answer to its first request, was refused: its
        alert is lost, so say what the relay knows."""
        made = self._made.get(client_tls)
        if made is not None and made.not_after is not None:
            if made.not_after <= self.wall_clock():
                expired = datetime.fromtimestamp(made.not_after, UTC)
                return (
                    "the TLS handshake failed (expired): the receiver closed the "
                    "new connection before answering, and the client certificate "
                    f"expired at {expired:%Y-%m-%d %H:%M:%S} UTC"
                )
        why = (
            "it refuses the client certificate"
            if client_tls.cert_chain
            else "it requires a client certificate and none was sent"
        )
        return (
            "the TLS handshake failed (handshake refused): the receiver closed "
            f"the new connection before answering, as a TLS 1.3 receiver does "
            f"when {why}"
        )

    def _kept(self, client_tls: ClientTls) -> _Made:
        fingerprint = client_tls.fingerprint
        try:
            context = self._make(client_tls)
        except TlsFailed as failed:
            return _Made(fingerprint, None, str(failed), None)
        except OSError as exc:  # writing the files: tried again next send
            raise TlsFailed(
                "the client certificate could not be loaded: "
                f"{exc.strerror or type(exc).__name__}"
            ) from None
        return _Made(fingerprint, context, "", _not_after(client_tls.cert_chain))

    def _make(self, client_tls: ClientTls) -> ssl.SSLContext:
        # create_default_context: CERT_REQUIRED and check_hostname, always.
        if client_tls.ca_bundle:
            try:
                context = ssl.create_default_context(cadata=client_tls.ca_bundle)
            except (ssl.SSLError, ValueError):
                raise TlsFailed(
                    "the endpoint's CA bundle could not be read "
                    "(PEM certificates expected)"
                ) from None
        else:
            context = self._default_trust()
        if client_tls.cert_chain:
            _load_chain(context, client_tls.cert_chain, client_tls.key)
        return context

    def _default_trust(self) -> ssl.SSLContext:
        trust = self._trust_paths()
        if trust is None:
            return ssl.create_default_context()
        cafile, capath = trust
        return ssl.create_default_context(cafile=cafile, capath=capath)

    def _trust_paths(self) -> tuple[str | None, str | None] | None:
        """(cafile, capath) holding the default trust, found once; None: only
        ssl.create_default_context() knows where it is (no file or directory
        of it: a platform's own store)."""
        with self._trust_lock:
            if not self._trust_found:
                self._trust = self._find_trust()
                self._trust_found = True
            return self._trust

    def _find_trust(self) -> tuple[str | None, str | None] | None:
        if self.default_trust is None:
            return _system_trust()
        # An SSLContext cannot be copied; the CA certificates loaded into it
        # (cafile or cadata) can, once, to a file every build reads. A
        # context whose trust is a capath lists none until used: it gets the
        # system's trust.
        authorities = self.default_trust.get_ca_certs(binary_form=True)
        if not authorities:
            return _system_trust()
        fd, path = tempfile.mkstemp(  # mode 0600; public certificates only
            prefix="relay-trust-", suffix=".pem", dir=_private_dir()
        )
        with os.fdopen(fd, "w") as file:
            file.writelines(ssl.DER_cert_to_PEM_cert(der) for der in authorities)
        self._trust_file = path
        return path, None


class _Encrypted(Exception):
    """The key asks for a passphrase: OpenSSL would prompt on the terminal."""


def _no_passphrase() -> bytes:
    raise _Encrypted


def _system_trust() -> tuple[str | None, str | None] | None:
    """Where ssl.create_default_context() loads the system's trust from on
    this platform (SSL_CERT_FILE and SSL_CERT_DIR included); None: nowhere
    a path names."""
    paths = ssl.get_default_verify_paths()
    if paths.cafile is None and paths.capath is None:
        return None
    return paths.cafile, paths.capath


def _private_dir() -> str | None:
    return _SHM if os.access(_SHM, os.W_OK) else None


def _load_chain(context: ssl.SSLContext, chain: str, key: str) -> None:
    where = tempfile.mkdtemp(prefix="relay-mtls-", dir=_private_dir())  # mode 0700
    try:
        chain_path = _write_private(where, "chain.pem", chain)
        key_path = _write_private(where, "key.pem", key)
        context.load_cert_chain(chain_path, key_path, password=_no_passphrase)
    except _Encrypted:
        raise TlsFailed(
            "the client certificate's private key is encrypted; "
            "it must be stored without a passphrase"
        ) from None
    except ssl.SSLError as exc:
        # OpenSSL's reason names what is wrong, never the key's content.
        if exc.reason == "KEY_VALUES_MISMATCH":
            what = "the private key does not belong to the certificate"
        else:
            what = "the certificate chain or private key is not valid PEM"
        raise TlsFailed(f"the client certificate could not be used: {what}") from None
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _write_private(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return path


def describe(exc: ssl.SSLError, *, handshake: bool = True) -> str:
    """An SSLError in words for the attempt: the cause, then OpenSSL's reason.
    `handshake`: it ended the handshake, not a connection already up."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        cause = _verify_cause(exc.verify_code)
        reason = exc.verify_message or exc.reason or str(exc)
        if cause:
            return f"the TLS handshake failed ({cause}): {reason}"
        return f"the TLS handshake failed: {reason}"
    reason = exc.reason or str(exc)
    alert = _alert_of(reason)
    if alert in _ALERT_CAUSES:
        return (
            f"the TLS handshake failed ({_ALERT_CAUSES[alert]}): "
            f"the receiver sent the alert {alert} ({reason})"
        )
    if handshake:
        return f"the TLS handshake failed: {reason}"
    return f"the TLS connection failed: {reason}"


def _not_after(chain: str) -> float | None:
    """The leaf's (the first certificate's) expiry; None without a chain."""
    if not chain:
        return None
    try:
        leaf = x509.load_pem_x509_certificate(chain.encode())
    except ValueError:  # OpenSSL read it; a reader this strict may not
        return None
    return leaf.not_valid_after_utc.timestamp()


def _verify_cause(code: int) -> str:
    if code in _UNKNOWN_CA:
        return "unknown CA"
    if code in _NAME_MISMATCH:
        return "name mismatch"
    if code == _EXPIRED:
        return "expired"
    if code == _NOT_YET_VALID:
        return "not yet valid"
    return ""


def _alert_of(reason: str) -> str:
    """The alert's name in a reason such as TLSV13_ALERT_CERTIFICATE_REQUIRED;
    "" when the reason is no received alert."""
    _, found, name = reason.partition("_ALERT_")
    return name.lower() if found else ""
