"""verify(): Standard Webhooks v1, failing closed on anything it cannot vouch for."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import datetime, timezone

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from webhook_relay_client import InvalidSignature, verify

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
NOW = 1_700_000_000
BODY = b'{"id":"evt_1","type":"order.paid","timestamp":"2023-11-14T22:13:20.000Z","data":{"n":1}}'


def sign(body: bytes = BODY, *, msg_id="evt_1", timestamp=NOW, key=KEY) -> str:
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def headers(signature=None, *, msg_id="evt_1", timestamp=NOW) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature if signature is not None else sign(),
    }


def test_a_signed_webhook_gives_its_payload():
    assert verify(SECRET, headers(), BODY, now=NOW) == json.loads(BODY)


@pytest.mark.parametrize(
    "signature",
    [
        # During a rotation: the new secret's first, the old one's second.
        f"{sign(key=b'n' * 32)} {sign()}",
        f"{sign()} {sign(key=b'n' * 32)}",
        # v1a beside v1 (an endpoint signing "both"): the v1 entry decides.
        f"v1a,{base64.b64encode(b'x' * 64).decode()} {sign()}",
        f"  {sign()}  ",
    ],
)
def test_any_one_matching_signature_is_enough(signature):
    assert verify(SECRET, headers(signature), BODY, now=NOW)["id"] == "evt_1"


def test_header_names_match_in_any_case_and_pairs_do_too():
    mixed = {name.title(): value for name, value in headers().items()}
    assert verify(SECRET, mixed, BODY, now=NOW)["id"] == "evt_1"
    assert verify(SECRET, list(headers().items()), bytearray(BODY), now=NOW)
    assert verify(SECRET, headers(), memoryview(BODY), now=NOW)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"webhook-id": None}, "webhook-id header is missing"),
        ({"webhook-timestamp": None}, "webhook-timestamp header is missing"),
        ({"webhook-signature": None}, "webhook-signature header is missing"),
        ({"webhook-signature": "  "}, "webhook-signature header is missing or empty"),
        ({"webhook-id": ""}, "webhook-id header is missing or empty"),
        ({"webhook-timestamp": "17e8"}, "not whole Unix seconds"),
        ({"webhook-timestamp": "-1"}, "not whole Unix seconds"),
        ({"webhook-timestamp": "+1700000000"}, "not whole Unix seconds"),
        ({"webhook-timestamp": "1700000000.5"}, "not whole Unix seconds"),
        ({"webhook-timestamp": "１７００"}, "not whole Unix seconds"),
        ({"webhook-timestamp": str(NOW - 301)}, "more than 300 s old"),
        ({"webhook-timestamp": str(NOW + 301)}, "in the future"),
        ({"webhook-signature": "v1"}, "not version,signature"),
        ({"webhook-signature": "v1,"}, "not version,signature"),
        ({"webhook-signature": ",abc"}, "not version,signature"),
        ({"webhook-signature": "v1,not*base64"}, "not base64"),
        (
            {"webhook-signature": "v1," + base64.b64encode(b"short").decode()},
            "not an HMAC",
        ),
        ({"webhook-signature": "v2," + sign()[3:]}, "unknown version 'v2'"),
        ({"webhook-signature": f"{sign()} v2,abc"}, "unknown version 'v2'"),
        ({"webhook-signature": "V1," + sign()[3:]}, "unknown version 'V1'"),
        ({"webhook-signature": "v1a," + base64.b64encode(b"x" * 64).decode()}, "v1a"),
        ({"webhook-signature": sign(key=b"k" * 32)}, "no signature"),
        ({"webhook-id": "evt_2"}, "no signature"),
    ],
)
def test_anything_wrong_in_the_headers_is_refused(change, says):
    sent = {**headers(), **change}
    sent = {name: value for name, value in sent.items() if value is not None}
    with pytest.raises(InvalidSignature, match=says):
        verify(SECRET, sent, BODY, now=NOW)


def test_a_timestamp_signed_as_another_is_refused():
    # Signed at NOW, relabelled a second later: still within the tolerance.
    with pytest.raises(InvalidSignature, match="no signature"):
        verify(SECRET, headers(timestamp=NOW + 1), BODY, now=NOW)


@pytest.mark.parametrize(
    "body", [BODY + b" ", BODY.replace(b'"n":1', b'"n":2'), b"", BODY[:-1]]
)
def test_a_body_changed_by_a_byte_is_refused(body):
    with pytest.raises(InvalidSignature, match="no signature"):
        verify(SECRET, headers(), body, now=NOW)


def test_the_tolerance_is_inclusive_and_can_be_set():
    for timestamp in (NOW - 300, NOW + 300):
        sent = headers(sign(timestamp=timestamp), timestamp=timestamp)
        assert verify(SECRET, sent, BODY, now=NOW)
    old = NOW - 1000
    with pytest.raises(InvalidSignature, match="more than 300 s old"):
        verify(SECRET, headers(sign(timestamp=old), timestamp=old), BODY, now=NOW)
    assert verify(
        SECRET,
        headers(sign(timestamp=old), timestamp=old),
        BODY,
        now=NOW,
        tolerance=1000,
    )


@pytest.mark.parametrize("tolerance", [0, -5, None, float("nan"), float("inf")])
def test_a_tolerance_that_would_let_anything_through_is_refused(tolerance):
    with pytest.raises((ValueError, TypeError)):
        verify(SECRET, headers(), BODY, now=NOW, tolerance=tolerance)


def test_a_header_given_twice_is_refused():
    pairs = [*headers().items(), ("Webhook-Signature", sign(key=b"k" * 32))]
    with pytest.raises(
        InvalidSignature, match="webhook-signature is given more than once"
    ):
        verify(SECRET, pairs, BODY, now=NOW)


def test_a_signed_body_that_is_not_json_is_refused():
    body = b"not json"
    with pytest.raises(InvalidSignature, match="not JSON"):
        verify(SECRET, headers(sign(body)), body, now=NOW)


@pytest.mark.parametrize("body", [BODY.decode(), json.loads(BODY), None])
def test_a_body_that_is_not_the_raw_bytes_is_a_type_error(body):
    with pytest.raises(TypeError, match="raw request body as bytes"):
        verify(SECRET, headers(), body, now=NOW)


@pytest.mark.parametrize(
    ("secret", "says"),
    [
        ("whpk_" + base64.b64encode(b"p" * 32).decode(), "v1a .* not supported"),
        (base64.b64encode(KEY).decode(), "whsec_"),
        ("whsec_not base64!", "not whsec_ followed by base64"),
        ("whsec_", "empty"),
        ("", "whsec_"),
    ],
)
def test_a_secret_that_is_not_a_whsec_secret_is_a_value_error(secret, says):
    with pytest.raises(ValueError, match=says):
        verify(secret, headers(), BODY, now=NOW)


@pytest.mark.parametrize("headers_given", [None, "webhook-id: x", 42])
def test_headers_that_are_no_mapping_are_a_type_error(headers_given):
    with pytest.raises(TypeError):
        verify(SECRET, headers_given, BODY, now=NOW)


def test_the_receivers_clock_is_the_default():
    # No `now`: a webhook signed just now verifies, one from 2001 does not.
    fresh = int(datetime.now(timezone.utc).timestamp())
    assert verify(SECRET, headers(sign(timestamp=fresh), timestamp=fresh), BODY)
    with pytest.raises(InvalidSignature, match="old"):
        verify(SECRET, headers(), BODY)


# Interop: the standardwebhooks package signs, this verifies, and both refuse
# the same forgeries.


def test_what_standardwebhooks_signs_verifies_here():
    when = datetime.fromtimestamp(NOW, timezone.utc)
    signature = Webhook(SECRET).sign("msg_1", when, BODY.decode())
    assert verify(SECRET, headers(signature, msg_id="msg_1"), BODY, now=NOW)


def _fresh() -> int:
    # standardwebhooks reads the real clock, so these sign at its time.
    return int(datetime.now(timezone.utc).timestamp())


@pytest.mark.parametrize(
    "forge",
    [
        lambda ts: headers(sign(key=b"k" * 32, timestamp=ts), timestamp=ts),
        lambda ts: headers(sign(timestamp=ts), msg_id="evt_other", timestamp=ts),
        lambda ts: headers(sign(timestamp=ts), timestamp=ts + 1),
    ],
    ids=["other key", "other id", "other timestamp"],
)
def test_both_refuse_the_same_forgeries(forge):
    sent = forge(_fresh())
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(BODY, sent)
    with pytest.raises(InvalidSignature):
        verify(SECRET, sent, BODY)


def test_both_accept_what_the_other_accepts():
    ts = _fresh()
    sent = headers(
        f"{sign(key=b'n' * 32, timestamp=ts)} {sign(timestamp=ts)}", timestamp=ts
    )
    assert Webhook(SECRET).verify(BODY, sent) == verify(SECRET, sent, BODY)


def test_junk_after_the_padding_is_refused_here_though_standardwebhooks_passes_it():
    # Its base64 decoding drops what follows the padding; a signature that
    # is not exactly base64 of 32 bytes is malformed, and refused here.
    ts = _fresh()
    sent = headers(sign(timestamp=ts) + "A", timestamp=ts)
    assert Webhook(SECRET).verify(BODY, sent)
    with pytest.raises(InvalidSignature, match="not base64"):
        verify(SECRET, sent, BODY)
