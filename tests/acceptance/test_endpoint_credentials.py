"""Issue 42's endpoint credentials end to end, with real processes: endpoints
made through the REST API of a real gunicorn with a client certificate
(a TLS receiver on loopback that requires it), OAuth2 client credentials (a
token server on loopback that counts its requests) and HTTP Basic; events
published through the API and delivered by a real dispatcher. Each receiver
saw what it asked for, the expiring certificate was announced to the
platform, and the private key, the client secret, the password and the
bearer token are in no API answer, no log line of either process, and not in
clear in the database."""

from __future__ import annotations

import base64
import datetime as dt
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import trustme
from cryptography.hazmat.primitives import serialization
from django.db import connection
from standardwebhooks.webhooks import Webhook

from deliveries.models import Delivery
from deliveries.notifications.services import operational_endpoint_create
from endpoints.apikeys import apikey_create
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from tests.support import factories
from tests.support.fakes import Receiver
from tests.support.mtls_receiver import MtlsReceiver
from tests.support.processes import ROOT, child_env, wait_until
from tests.support.token_server import TokenServer

pytestmark = [pytest.mark.postgres, pytest.mark.acceptance]

EVENTS = 5  # per endpoint: five sends share one OAuth2 token
CLIENT_NAME = "relay-client.acme.example"
FAST = {
    "OPERATIONAL_CHECK_SECONDS": "1",
    "CLIENT_CERT_EXPIRY_WARNING_DAYS": "14",
    "EMAIL_URL": "dummymail://",
    "LOG_FORMAT": "json",
    "LOG_LEVEL": "DEBUG",  # every line the dispatcher can say, searched below
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web(transactional_db, tmp_path: Path):
    """A real gunicorn on the test database; (base URL, its output file)."""
    port = _free_port()
    output = tmp_path / "gunicorn.log"
    env = {**child_env(), "DEBUG": "true", "ALLOWED_HOSTS": "127.0.0.1"}
    env.update(LOG_FORMAT="json", LOG_LEVEL="DEBUG")
    with output.open("wb") as out:
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "relayproject.wsgi",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
                "--access-logfile",
                "-",
                "--error-logfile",
                "-",
                "--no-control-socket",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{base}/healthz", timeout=10).ok
        except (requests.ConnectionError, requests.Timeout):
            return False

    try:
        wait_until(up, timeout=30, what="gunicorn to answer /healthz")
        yield base, output
    finally:
        popen.terminate()
        popen.wait(timeout=30)


class Api:
    """requests with the merchant's key; keeps every answer's text."""

    def __init__(self, base: str, key: str) -> None:
        self.base = f"{base}/api/v1"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"
        self.answers: list[str] = []

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        answer = self.session.request(method, self.base + path, json=body, timeout=30)
        self.answers.append(answer.text)
        assert answer.status_code < 300, (method, path, answer.text)
        return answer.json()


def _key_lines(pem: str) -> list[str]:
    """The base64 lines of the key as given and as the relay may re-encode it
    (PKCS#8, or OpenSSL's traditional form): any one of them found, however
    the text around it was escaped or wrapped, is the key leaking."""
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    forms = [pem] + [
        key.private_bytes(
            serialization.Encoding.PEM, form, serialization.NoEncryption()
        ).decode()
        for form in (
            serialization.PrivateFormat.PKCS8,
            serialization.PrivateFormat.TraditionalOpenSSL,
        )
    ]
    return [
        line
        for form in forms
        for line in form.splitlines()
        if line and not line.startswith("-----")
    ]


def test_mtls_oauth2_and_basic_endpoints_deliver_and_keep_their_secrets(
    web, dispatchers
):
    base, web_output = web
    server_ca, client_ca = trustme.CA(), trustme.CA()
    # Inside the warning window: it works, and the platform hears it expires.
    not_after = dt.datetime.now(dt.UTC) + dt.timedelta(days=5)
    client = client_ca.issue_cert(
        CLIENT_NAME, common_name=CLIENT_NAME, not_after=not_after
    )
    client_chain = "".join(b.bytes().decode() for b in client.cert_chain_pems)
    client_key = client.private_key_pem.bytes().decode()
    client_secret = "cs-" + secrets.token_urlsafe(24)
    password = "pw-" + secrets.token_urlsafe(24)

    merchant = factories.merchant("acme")
    _, key = apikey_create(name="e2e", merchant=merchant)
    api = Api(base, key)
    with (
        MtlsReceiver(
            server_cert=server_ca.issue_cert("127.0.0.1"), client_ca=client_ca
        ) as mtls_rx,
        TokenServer(expires_in=3600) as tokens,
        Receiver() as bearer_rx,
        Receiver() as basic_rx,
        Receiver() as ops_rx,
    ):
        ops = operational_endpoint_create(url=ops_rx.url, now=utcnow())
        ops_secret = ops.secrets.get().secret
        made = {
            "mtls": api.call(
                "POST",
                "/merchants/acme/endpoints",
                {
                    "url": mtls_rx.url(),
                    "tls": {
                        "client_cert": client_chain,
                        "client_key": client_key,
                        "ca_bundle": server_ca.cert_pem.bytes().decode(),
                    },
                },
            ),
            "oauth2": api.call(
                "POST",
                "/merchants/acme/endpoints",
                {
                    "url": bearer_rx.url,
                    "auth": {
                        "type": "oauth2",
                        "token_url": tokens.url,
                        "client_id": "relay-acme",
                        "client_secret": client_secret,
                        "scope": "webhooks.write",
                    },
                },
            ),
            "basic": api.call(
                "POST",
                "/merchants/acme/endpoints",
                {
                    "url": basic_rx.url,
                    "auth": {
                        "type": "basic",
                        "username": "relay",
                        "password": password,
                    },
                },
            ),
        }
        # What the answers show instead of the secrets (contract section 9).
        tls = made["mtls"]["tls"]
        assert tls["ca_bundle"] is True and CLIENT_NAME in tls["subject"]
        assert tls["not_after"].startswith(not_after.strftime("%Y-%m-%d"))
        oauth2 = {k: v for k, v in made["oauth2"]["auth"].items() if v}
        assert oauth2 == {
            "type": "oauth2",
            "token_url": tokens.url,
            "client_id": "relay-acme",
            "scope": "webhooks.write",
        }
        assert made["basic"]["auth"] == {"type": "basic", "username": "relay"}

        for n in range(EVENTS):
            api.call(
                "POST",
                "/events",
                {"merchant": "acme", "type": "order.paid", "data": {"n": n}},
            )
        dispatcher = dispatchers.start("--concurrency", "16", env=FAST)

        ids = {name: answer["id"] for name, answer in made.items()}

        def succeeded(endpoint_id: str) -> int:
            return Delivery.objects.filter(
                endpoint_id=endpoint_id, status=Delivery.Status.SUCCEEDED
            ).count()

        for name, endpoint_id in ids.items():
            try:
                wait_until(
                    lambda e=endpoint_id: succeeded(e) == EVENTS,
                    timeout=30,
                    what=f"{EVENTS} deliveries to the {name} endpoint to succeed",
                )
            except AssertionError as failed:
                raise AssertionError(
                    f"{failed}; its last errors: {_last_errors(endpoint_id)}"
                ) from None

        # The receivers saw the credentials they require.
        assert {seen.client for seen in mtls_rx.seen} == {CLIENT_NAME}
        assert len(mtls_rx.seen) == EVENTS
        bearer = {r.headers.get("Authorization") for r in bearer_rx.received}
        assert bearer == {f"Bearer {tokens.issued[0]}"}
        assert tokens.count == 1  # fetched once, shared by every send
        (token_request,) = tokens.requests
        assert token_request.form["grant_type"] == "client_credentials"
        assert token_request.form.get("scope") == "webhooks.write"
        assert _token_client(token_request) == ("relay-acme", client_secret)
        expected_basic = base64.b64encode(f"relay:{password}".encode()).decode()
        assert {r.headers.get("Authorization") for r in basic_rx.received} == {
            f"Basic {expected_basic}"
        }

        # The platform heard, once, that the client certificate expires soon.
        def expiring() -> list[dict]:
            found = []
            for r in ops_rx.received:
                headers = {k.lower(): v for k, v in r.headers.items()}
                body = Webhook(ops_secret).verify(r.body, headers)
                if body["type"] == "relay.endpoint.certificate_expiring":
                    found.append(body["data"])
            return found

        wait_until(
            lambda: expiring(), timeout=30, what="relay.endpoint.certificate_expiring"
        )
        (warning,) = expiring()
        assert warning["endpoint"]["id"] == ids["mtls"]
        assert (warning["days_left"], warning["expired"]) == (4, False)

        # Every answer the API gives about them, read after the sends.
        for endpoint_id in ids.values():
            api.call("GET", f"/merchants/acme/endpoints/{endpoint_id}")
            page = api.call("GET", f"/deliveries?endpoint_id={endpoint_id}")
            api.call("GET", f"/deliveries/{page['items'][0]['id']}")
        api.call("GET", "/merchants/acme/endpoints")

        dispatcher.signal(signal.SIGTERM)  # a graceful stop: its last lines written
        dispatcher.wait(30)

    never_shown = {
        "the client certificate's private key": _key_lines(client_key),
        "the OAuth2 client secret": [client_secret],
        "the Basic password": [password],
        "the bearer token": [tokens.issued[0]],
    }
    places = {
        "an API answer": "\n".join(api.answers),
        "the web server's output": web_output.read_text(),
        "the dispatcher's output": dispatcher.stdout + dispatcher.stderr,
        "the endpoint rows": _endpoint_rows(list(ids.values())),
    }
    for what, fragments in never_shown.items():
        for where, text in places.items():
            text = text.replace("\\/", "/")  # JSON may escape a slash
            assert not any(f in text for f in fragments), f"{what} is in {where}"


def _token_client(request) -> tuple[str, str]:
    """(client_id, client_secret) as the relay sent them: HTTP Basic (RFC 6749
    section 2.3.1's preferred way) or in the form."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Basic "):
        user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        return user, secret
    return request.form.get("client_id", ""), request.form.get("client_secret", "")


def _last_errors(endpoint_id: str) -> list[str]:
    return list(
        Delivery.objects.filter(endpoint_id=endpoint_id)
        .exclude(last_error="")
        .values_list("last_error", flat=True)[:3]
    )


def _endpoint_rows(endpoint_ids: list[str]) -> str:
    """The rows as stored, every column as text: what a database dump shows."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT row_to_json(e)::text FROM {Endpoint._meta.db_table} e "
            "WHERE id = ANY(%s)",
            [endpoint_ids],
        )
        return "\n".join(row[0] for row in cursor.fetchall())
