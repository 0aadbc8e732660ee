"""relay_status says how many endpoints of each kind there are, and whether
broker destinations are on and to which hosts."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from tests.support import factories

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command("relay_status", *args, stdout=out)
    return out.getvalue()


def destinations_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Endpoints by"))


@pytest.fixture
def mixed(settings):
    settings.RELAY_BROKER_HOSTS = ["127.0.0.1", "mq.example.com:5671"]
    merchant = factories.merchant()
    merchant.broker_hosts = ["127.0.0.1:6379"]
    merchant.save()
    factories.endpoint(merchant)
    factories.endpoint(merchant)
    factories.endpoint(
        merchant, kind="redis", url="redis://127.0.0.1:6379/0", target={"stream": "s"}
    )


def test_endpoints_are_counted_by_kind_beside_the_broker_policy(mixed):
    assert destinations_line(run()) == (
        "Endpoints by kind: 2 http, 1 redis; broker destinations: rabbitmq, nats, "
        "redis, mqtt to hosts 127.0.0.1, mq.example.com:5671 (RELAY_BROKER_HOSTS); "
        "1 merchant(s) with their own list"
    )


def test_the_json_document_carries_the_same(mixed):
    document = json.loads(run("--json"))["destinations"]

    assert document == {
        "endpoints_by_kind": {"http": 2, "redis": 1},
        "merchants_with_own_broker_hosts": 1,
        "broker_kinds_offered": ["rabbitmq", "nats", "redis", "mqtt"],
        "broker_hosts": ["127.0.0.1", "mq.example.com:5671"],
    }


@pytest.mark.parametrize(
    ("hosts", "kinds", "words"),
    [
        ([], ["redis"], "off (RELAY_BROKER_HOSTS is empty and no merchant has"),
        (["127.0.0.1"], [], "off (RELAY_BROKER_KINDS is empty)"),
    ],
)
def test_it_says_when_broker_destinations_are_off(settings, hosts, kinds, words):
    settings.RELAY_BROKER_HOSTS = hosts
    settings.RELAY_BROKER_KINDS = kinds
    factories.endpoint()

    line = destinations_line(run())

    assert line.startswith("Endpoints by kind: 1 http; broker destinations: ")
    assert words in line
