"""signed_request composes webhook-signature from the job's signing scheme:
v1 as before, v1a alone, or both; and a broker message carries it as HTTP
does (the real Redis on 127.0.0.1:6379, a stream named per run)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
import uuid

import pytest
import redis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from standardwebhooks.webhooks import Webhook

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.outgoing import recorded_headers, signed_request
from endpoints.signing_keys import key_pair_generate
from tests.support.jobs import a_job

SECRET = "whsec_c2VjcmV0"  # a_job()'s signing secret
PRIVATE, PUBLIC = key_pair_generate()
NOW = 1_700_000_000


def public_key() -> Ed25519PublicKey:
    raw = base64.b64decode(PUBLIC.removeprefix("whpk_"))
    return Ed25519PublicKey.from_public_bytes(raw)


def header(request) -> str:
    return request.headers["webhook-signature"]


def v1a_signature(signature_header: str) -> bytes:
    [v1a] = [s for s in signature_header.split(" ") if s.startswith("v1a,")]
    return base64.b64decode(v1a.removeprefix("v1a,"))


def test_v1_is_one_hmac_per_secret_as_before():
    request = signed_request(a_job(), timestamp=NOW)

    assert header(request).startswith("v1,")
    assert " " not in header(request)


def test_v1a_is_one_ed25519_signature_and_no_hmac():
    job = a_job(signing="v1a", signing_key=PRIVATE)

    request = signed_request(job, timestamp=NOW)

    assert header(request).startswith("v1a,")
    public_key().verify(
        v1a_signature(header(request)), f"evt_1.{NOW}.".encode() + job.body
    )


def test_both_is_the_hmacs_then_the_ed25519_signature():
    job = a_job(signing="both", signing_key=PRIVATE, secrets=[SECRET, SECRET])

    signatures = header(signed_request(job, timestamp=NOW)).split(" ")

    assert [s.split(",")[0] for s in signatures] == ["v1", "v1", "v1a"]


def test_v1a_without_a_private_key_refuses_to_send_unsigned():
    with pytest.raises(ValueError, match="private key"):
        signed_request(a_job(signing="v1a"), timestamp=NOW)


def test_the_attempt_keeps_only_a_fingerprint_of_the_v1a_signature():
    request = signed_request(a_job(signing="v1a", signing_key=PRIVATE), timestamp=NOW)

    recorded = dict(recorded_headers(request, secret_names=()))

    assert recorded["webhook-signature"].startswith("redacted, hmac ")


class NoHttp:
    async def send(self, request):
        raise AssertionError("a redis request went to the HTTP sender")

    async def close(self) -> None:
        pass


@pytest.fixture
def stream():
    admin = redis.Redis("127.0.0.1", 6379)
    key = f"relay-test-{uuid.uuid4().hex}"
    yield admin, key
    admin.delete(key)
    admin.close()


def test_a_redis_message_carries_both_signatures_and_each_verifies(stream):
    admin, key = stream
    job = a_job(url="redis://127.0.0.1:6379", signing="both", signing_key=PRIVATE)
    request = dataclasses.replace(
        signed_request(job, timestamp=int(time.time())),
        kind="redis",
        target={"stream": key, "maxlen": None},
        broker_hosts=("127.0.0.1",),
    )

    async def send():
        sender = KindSender(http=NoHttp(), timeout=3.0, allow_private=False)
        try:
            return await sender.send(request)
        finally:
            await sender.close()

    assert asyncio.run(send()).acknowledged
    [(_, fields)] = admin.xrange(key)
    headers = {k.decode(): v.decode() for k, v in fields.items() if k != b"body"}
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode()
    public_key().verify(
        v1a_signature(headers["webhook-signature"]), signed + fields[b"body"]
    )
    Webhook(SECRET).verify(fields[b"body"], headers)
