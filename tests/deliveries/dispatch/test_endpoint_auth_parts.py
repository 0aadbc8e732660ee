"""The pure parts of endpoint auth: a token server's answer judged, how long
a token is kept, the token cache, and what the attempt records."""

from __future__ import annotations

import json
from urllib.parse import quote_plus

import pytest

from deliveries.dispatch.credentials import EndpointAuth, EndpointCredentials
from deliveries.dispatch.endpoint_auth import (
    DEFAULT_KEEP_SECONDS,
    LONGEST_KEEP_SECONDS,
    TokenCache,
    keep_seconds,
)
from deliveries.dispatch.outgoing import recorded_headers, signed_request
from deliveries.dispatch.token_answer import TokenRefused, parse
from tests.support.jobs import a_job

LIMIT = 16384
SECRET = "pa55word"


def answer(status: int, text: str):
    return parse(status, text.encode(), body_limit=LIMIT)


@pytest.mark.parametrize(
    ("body", "expires_in"),
    [
        ('{"access_token": "a.b-c_~+/=", "token_type": "Bearer"}', None),
        ('{"access_token": "a", "token_type": "bearer", "expires_in": 60}', 60),
        ('{"access_token": "a", "expires_in": "3600"}', 3600),  # a string
        ('{"access_token": "a", "expires_in": 2.5}', 2.5),
        ('{"access_token": "a", "expires_in": -5}', 0),
        ('{"access_token": "a", "expires_in": null}', None),
    ],
)
def test_a_usable_answer_gives_its_token_and_lifetime(body, expires_in):
    parsed = answer(200, body)

    assert parsed.access_token.startswith("a")
    assert parsed.expires_in == expires_in


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (400, '{"error": "invalid_client"}', "answered 400 (error invalid_client)"),
        (400, '{"error": "a\\"quote"}', "answered 400 (another error code)"),
        (503, '{"error": "' + "x" * 100 + '"}', "answered 503 (another error code)"),
        (401, '{"error": 7}', "answered 401 (another error code)"),
        (401, '{"error_description": "no"}', "answered 401"),
        (200, "[" * 20000, "more than 16384 bytes"),  # nested past the stack
        (200, "[1, 2]", "JSON that is not an object"),
        (200, '{"access_token": 7}', "not visible ASCII"),
        (200, '{"access_token": "two words"}', "not visible ASCII"),
        (200, '{"access_token": ""}', "not visible ASCII"),
        (200, '{"access_token": "\\u00e9t\\u00e9"}', "not visible ASCII"),
        (200, '{"access_token": "a", "token_type": 1}', "not Bearer"),
        (200, '{"access_token": "a", "expires_in": true}', "not a number"),
        (200, '{"access_token": "a", "expires_in": 1e999}', "not a number"),
    ],
)
def test_an_unusable_answer_is_refused_in_few_safe_words(status, body, said):
    with pytest.raises(TokenRefused) as refused:
        answer(status, body)

    assert said in str(refused.value)
    assert len(str(refused.value)) < 120


@pytest.mark.parametrize(
    "code",
    [
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "temporarily_unavailable",
        "server_error",
        "access_denied",
    ],
)
def test_a_known_error_code_is_shown(code):
    with pytest.raises(TokenRefused) as refused:
        answer(400, json.dumps({"error": code}))

    assert str(refused.value) == f"answered 400 (error {code})"


HOSTILE_SECRET = "s3cret+/value with spaces"


@pytest.mark.parametrize(
    "echo",
    [
        HOSTILE_SECRET[:12],  # a part: no scrubbing of the whole secret finds it
        quote_plus(HOSTILE_SECRET),  # its form-urlencoded copy
        "invalid_client " + HOSTILE_SECRET,
        "INVALID_CLIENT",
    ],
    ids=["a part", "url-encoded", "after a known code", "a known code's case"],
)
def test_an_error_code_of_the_servers_own_making_is_never_shown(echo):
    with pytest.raises(TokenRefused) as refused:
        answer(401, json.dumps({"error": echo}))

    assert str(refused.value) == "answered 401 (another error code)"


@pytest.mark.parametrize(
    ("expires_in", "kept"),
    [
        (None, DEFAULT_KEEP_SECONDS),
        (3600, 3540),  # a minute early
        (100, 90),  # a tenth early when that is less than a minute
        (0, 0),
        (10**9, LONGEST_KEEP_SECONDS - 60),
    ],
)
def test_a_token_is_kept_until_shortly_before_it_expires(expires_in, kept):
    assert keep_seconds(expires_in) == kept


def test_a_401_to_an_old_token_does_not_drop_the_new_one():
    cache = TokenCache()
    cache.put(("ep", "v"), "new", until=100)

    cache.drop(("ep", "v"), "old")

    assert cache.get(("ep", "v"), now=0) == "new"


def test_the_cache_forgets_expired_tokens_and_the_least_recently_used():
    cache = TokenCache(size=2)
    cache.put(("a", "v"), "A", until=10)
    cache.put(("b", "v"), "B", until=100)
    cache.get(("a", "v"), now=0)  # a used: b is now the oldest
    cache.put(("c", "v"), "C", until=100)

    assert cache.get(("b", "v"), now=0) is None
    assert cache.get(("a", "v"), now=10) is None  # expired
    assert cache.get(("c", "v"), now=0) == "C"


@pytest.mark.parametrize(
    ("auth_type", "shown"),
    [("basic", "Basic (redacted)"), ("oauth2", "Bearer (redacted)")],
)
def test_the_attempt_shows_an_authorization_was_sent_and_never_its_value(
    auth_type, shown
):
    auth = EndpointAuth(type=auth_type, endpoint_id="ep_1", version="v", secret=SECRET)
    job = a_job(
        headers={"X-Custom": "c", "authorization": "old"},
        credentials=EndpointCredentials(auth=auth),
    )

    headers = recorded_headers(
        signed_request(job, timestamp=1), secret_names=job.headers
    )

    names = [name for name, _ in headers]
    assert ("Authorization", shown) in headers
    assert names.count("Authorization") + names.count("authorization") == 1
    assert names[-1] == "Authorization"  # where the sender adds it
    assert SECRET not in repr(headers)


def test_without_auth_the_record_is_as_before():
    job = a_job(headers={"authorization": "custom"})

    headers = dict(
        recorded_headers(signed_request(job, timestamp=1), secret_names=job.headers)
    )

    assert headers["authorization"].startswith("redacted, hmac ")
    assert "Authorization" not in headers
