"""An endpoint's client certificate and CA bundle, saved on the endpoint,
reach the wire through the dispatcher: claim, load its credentials, send
over mTLS to a real receiver, record the attempt."""

from __future__ import annotations

import random

import pytest
import trustme

from deliveries.dispatch import credentials
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.models import Attempt, Delivery
from deliveries.services import event_publish
from tests.support import factories
from tests.support.fakes import BlockingSender
from tests.support.mtls_receiver import MtlsReceiver

pytestmark = pytest.mark.django_db(transaction=True)


def pem(blob) -> str:
    return blob.bytes().decode()


def test_a_saved_client_certificate_is_presented_and_a_missing_one_refused():
    server_ca, client_ca = trustme.CA(), trustme.CA()
    client = client_ca.issue_cert("shop.clients.example", common_name="shop")
    credentials.forget_all()
    sender = BlockingSender(timeout=5, body_limit=64, allow_private=True)
    with MtlsReceiver(
        server_cert=server_ca.issue_cert("127.0.0.1"), client_ca=client_ca
    ) as rx:
        with_cert = factories.endpoint(url=rx.url())
        with_cert.tls_client_cert = "".join(pem(b) for b in client.cert_chain_pems)
        with_cert.tls_client_key = pem(client.private_key_pem)
        with_cert.tls_ca_bundle = pem(server_ca.cert_pem)
        with_cert.credentials_changed()
        with_cert.save()
        bundle_only = factories.endpoint(with_cert.merchant, url=rx.url())
        bundle_only.tls_ca_bundle = pem(server_ca.cert_pem)
        bundle_only.credentials_changed()
        bundle_only.save()
        event_publish(merchant=with_cert.merchant, type="a", data={})

        try:
            Dispatcher(
                worker_id="w1",
                sender=sender,
                batch_size=10,
                concurrency=4,
                lease_seconds=60,
                rand=random.Random(1),
            ).run(drain=True)
        finally:
            sender.close()

    assert [seen.client for seen in rx.seen] == ["shop"]
    delivered = Delivery.objects.get(endpoint=with_cert)
    assert delivered.status == "succeeded"
    refused = Attempt.objects.get(delivery__endpoint=bundle_only)
    assert refused.error_kind == "tls_error"
    assert refused.error_message.startswith(
        "the TLS handshake failed (handshake refused)"
    )
    key_lines = pem(client.private_key_pem).splitlines()[1:-1]
    for attempt in Attempt.objects.all():
        shown = f"{attempt.error_message} {attempt.response_body}"
        assert not any(line in shown for line in key_lines)
