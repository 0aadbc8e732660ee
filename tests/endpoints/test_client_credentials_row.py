"""endpoint_update checks credentials against the row as it is when written,
not as the caller read it (issue 42 review): two loaded instances stand for
two people, the second saving from a page read before the first saved; and
one test holds the row in a second transaction to show the check waits."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from endpoints.client_credentials import auth_set, tls_set
from endpoints.credentials_guard import MOVING_CREDENTIALS
from endpoints.models import Endpoint
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow
from tests.support import client_certs, factories

pytestmark = pytest.mark.postgres

HOOK = "https://127.0.0.1:9/hook"
ELSEWHERE = "https://127.0.0.1:9/collector"
FIRST = "First-Password-Heron-1180"
ROTATED = "Rotated-Password-Egret-2291"


def fresh(endpoint: Endpoint) -> Endpoint:
    return Endpoint.objects.get(pk=endpoint.pk)


def refusal(**changes) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        endpoint_update(**changes, now=utcnow())
    return caught.value.message_dict


def with_basic_auth() -> Endpoint:
    endpoint = factories.endpoint(url=HOOK)
    endpoint_update(
        endpoint=endpoint,
        auth={"type": "basic", "username": "relay", "password": FIRST},
        now=utcnow(),
    )
    return endpoint


@pytest.mark.django_db
def test_a_url_change_that_may_not_move_credentials_sees_auth_added_since():
    endpoint = factories.endpoint(url=HOOK)
    stale = fresh(endpoint)  # a developer's page, read before auth was set
    endpoint_update(
        endpoint=fresh(endpoint),
        auth={"type": "basic", "username": "relay", "password": FIRST},
        now=utcnow(),
    )

    errors = refusal(endpoint=stale, url=ELSEWHERE, may_move_credentials=False)

    assert errors == {"url": [MOVING_CREDENTIALS]}
    assert fresh(endpoint).url == HOOK


@pytest.mark.django_db
def test_one_who_may_move_credentials_moves_them():
    endpoint = with_basic_auth()

    endpoint_update(endpoint=fresh(endpoint), url=ELSEWHERE, now=utcnow())

    assert fresh(endpoint).url == ELSEWHERE


@pytest.mark.django_db
def test_a_kept_password_rotated_since_is_not_written_back():
    endpoint = with_basic_auth()
    stale, owner = fresh(endpoint), fresh(endpoint)
    endpoint_update(
        endpoint=owner,
        auth={"type": "basic", "username": "relay", "password": ROTATED},
        now=utcnow(),
    )

    errors = refusal(endpoint=stale, auth={"type": "basic", "username": "relay2"})

    assert list(errors) == ["auth.password"]
    assert "give the password again" in errors["auth.password"][0]
    row = fresh(endpoint)
    assert (row.auth_settings["username"], row.auth_secret) == ("relay", ROTATED)


@pytest.mark.django_db
def test_a_kept_password_is_left_out_of_the_write():
    endpoint = with_basic_auth()
    loaded = fresh(endpoint)

    endpoint_update(
        endpoint=loaded, auth={"type": "basic", "username": "relay2"}, now=utcnow()
    )

    row = fresh(endpoint)
    assert (row.auth_settings["username"], row.auth_secret) == ("relay2", FIRST)


@pytest.mark.django_db
def test_an_http_url_sees_a_certificate_added_since():
    endpoint = factories.endpoint(url=HOOK)
    stale = fresh(endpoint)
    identity = client_certs.identity("row.example")
    owner = fresh(endpoint)
    tls_set(owner, {"client_cert": identity.chain, "client_key": identity.key})
    owner.save()

    errors = refusal(endpoint=stale, url="http://127.0.0.1:9/hook")

    assert list(errors) == ["url"]
    assert "client certificate or CA bundle" in errors["url"][0]
    assert fresh(endpoint).url == HOOK


@pytest.mark.django_db(transaction=True)
def test_a_url_change_waits_for_auth_being_added_and_is_refused():
    """The owner's transaction has written auth but not committed when the
    developer's change reads the row: the change must wait for it (row lock)
    and then refuse, not read the row as it was and move the URL."""
    endpoint = factories.endpoint(url=HOOK)
    written, started, release = threading.Event(), threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def owner() -> None:
        try:
            with transaction.atomic():
                row = Endpoint.objects.select_for_update().get(pk=endpoint.pk)
                auth_set(row, {"type": "basic", "username": "relay", "password": FIRST})
                row.save()
                written.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    def developer() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                outcome["pid"] = cursor.fetchone()[0]
            started.set()
            endpoint_update(
                endpoint=fresh(endpoint),
                url=ELSEWHERE,
                may_move_credentials=False,
                now=utcnow(),
            )
            outcome["moved"] = True
        except ValidationError as exc:
            outcome["errors"] = exc.message_dict
        finally:
            connection.close()

    owner_thread = threading.Thread(target=owner)
    owner_thread.start()
    assert written.wait(timeout=30)
    developer_thread = threading.Thread(target=developer)
    developer_thread.start()
    assert started.wait(timeout=30)
    _until_waiting_for_a_lock(outcome.pop("pid"))
    release.set()
    owner_thread.join(timeout=30)
    developer_thread.join(timeout=30)

    assert outcome == {"errors": {"url": [MOVING_CREDENTIALS]}}
    assert fresh(endpoint).url == HOOK


def _until_waiting_for_a_lock(pid: int, deadline_seconds: float = 30) -> None:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
            )
            if cursor.fetchone() == ("Lock",):
                return
        time.sleep(0.01)  # polling with a deadline, not waiting for an outcome
    raise AssertionError("the developer's change never waited on the row")
